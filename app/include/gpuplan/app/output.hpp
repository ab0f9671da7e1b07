#pragma once
// What every front end renders results with: the output formats, tables and key-value sections, derivation trees as
// text/Markdown/JSON, numbers as typed and prices in words. Returns strings; printing is the front end's.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/wl/training.hpp"

namespace gpuplan::app {

enum class Format { text, md, json, csv };

/// "md", "json", "csv"; anything else is text.
Format parse_format(const std::string& s);

/// A table rendered as aligned text, Markdown, CSV or JSON (array of objects keyed by column key).
struct Table {
  struct Column {
    std::string key;    ///< stable machine name with unit suffix ("hbm_bandwidth_TBps")
    std::string title;  ///< human heading ("HBM TB/s")
    bool numeric = false;
  };
  std::vector<Column> columns;
  std::vector<std::vector<std::string>> rows;  ///< cells as text; numeric cells are plain numbers, "" for absent
  [[nodiscard]] std::string render(Format f) const;
};

/// Key-value sections for `show` commands: rendered as text/md; JSON callers build their own objects.
struct Section {
  std::string title;
  std::vector<std::pair<std::string, std::string>> rows;
};
std::string render_sections(const std::vector<Section>& sections, Format f);

/// Derivation tree as indented text (or Markdown list), and as JSON.
std::string render_derivation(const Derivation& d, Format f);
nlohmann::json derivation_json(const Derivation& d);

/// A JSON document as the CLI prints it: two-space indent and a final newline. Bytes that are not UTF-8 (a file name
/// as the file system gave it, a flag value as typed) print as U+FFFD instead of throwing from dump().
template <class J>
std::string json_text(const J& j) {
  return j.dump(2, ' ', false, J::error_handler_t::replace) + "\n";
}
/// The same on one line, for a value inside a table cell or a message.
template <class J>
std::string json_inline(const J& j) {
  return j.dump(-1, ' ', false, J::error_handler_t::replace);
}

/// A number as a user typed it back in messages: up to 10 significant digits, no trailing zeros ("0.9", "7e+09").
std::string plain_number(double v);

/// The kind of the price a plan is costed at: "on-demand" or "spot" for a GPU file's price, "as given" for a price
/// the user set (`given` = the plan's override), nullopt without a price.
std::optional<std::string> price_kind(const std::optional<units::UsdPerSecond>& given, const hw::GpuSpec* gpu);
/// The price a plan is costed at, in words: "$2.69/GPU-h on-demand (RunPod Secure Cloud, 2026-05)" for a GPU
/// file's price, "$3.00/GPU-h as given (--price)" for the user's; "" without a price.
std::string describe_price(const std::optional<units::UsdPerSecond>& given, const hw::GpuSpec* gpu,
                           std::string_view given_by = "--price");
/// A note for a table that puts costs at several prices side by side: "" unless both on-demand and spot prices are
/// among `kinds` (the values price_kind returned), else why the costs are not comparable.
std::string mixed_price_note(const std::vector<std::string>& kinds);

/// The recompute mode as the output spells it: "none", "selective" or "full".
const char* recompute_key(wl::Recompute r);

}  // namespace gpuplan::app
