#pragma once
// Shared plumbing of the CLI subcommands: data-directory discovery, output formats, tables, derivation rendering and
// diagnostics printing. No model arithmetic happens here (DESIGN.md §2.1).
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/wl/training.hpp"

namespace gpuplan::cli {

/// Exit codes: 0 ok; 2 invalid input (diagnostics on stderr), argument errors included; 3 valid input but the plan
/// cannot work.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 2;
inline constexpr int kExitInfeasible = 3;

enum class Format { text, md, json, csv };

struct GlobalOptions {
  std::string data_dir;  ///< --data-dir
  std::string format = "text";
  bool explain = false;
};

/// --data-dir, then $GPUPLAN_DATA_DIR, then the installed share directory, then the source tree's data/.
/// Returns the first that has a hardware/ or models/ folder, or nullopt with a diagnostic naming all places tried.
std::optional<std::string> find_data_dir(const std::string& flag, Diagnostics& diags);

/// The training scenario file of `train` and `mfu` (--scenario): its JSON object, or an empty object when `path` is
/// empty; nullopt (with the diagnostic) when it cannot be read, does not parse or is not an object.
std::optional<nlohmann::json> read_training_scenario(const std::string& path, Diagnostics& diags);

Format parse_format(const std::string& s);
void add_format_option(CLI::App& cmd, GlobalOptions& g);

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

/// Prints diagnostics to stderr; returns kExitInvalid if any is an error, else kExitOk.
int report(const Diagnostics& diags);

/// Writes to stdout.
void out(const std::string& s);

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

/// Makes every option of `app` and its subcommands refuse, before CLI11 converts the value: an empty value (`--rate ""`
/// would otherwise mean "not given"), and for a numeric option NaN and infinities in any spelling (CLI11's FLOAT,
/// PositiveNumber and NonNegativeNumber let "nan" and "inf" through). The one gate for flag values; call it once,
/// after every subcommand is registered (cli/main.cpp, and the fuzz targets that build the CLI).
void guard_flag_values(CLI::App& app);

/// The exit for a CLI11 parse error. --help and --version print to stdout and give 0; every other argument error
/// (unknown flag, missing argument, a value of the wrong type or outside its range) prints "FLAG: error: MESSAGE" and
/// a hint to stderr and gives kExitInvalid, like every other invalid input.
int exit_for_parse_error(CLI::App& app, const CLI::ParseError& e);

/// Flushes stdout after a command ran. A failed write (`> /dev/full`, a file over its size limit) is
/// reported on stderr and gives kExitInvalid, so that a truncated output never exits 0; otherwise returns `rc`.
int finish_output(int rc);

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

}  // namespace gpuplan::cli
