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
#include "gpuplan/wl/training.hpp"

namespace gpuplan::cli {

/// Exit codes: 0 ok; 2 invalid input (diagnostics on stderr); 3 valid input but the plan cannot work.
/// Argument errors use CLI11's own codes.
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

/// A number as a user typed it back in messages: up to 10 significant digits, no trailing zeros ("0.9", "7e+09").
std::string plain_number(double v);

/// The recompute mode as the output spells it: "none", "selective" or "full".
const char* recompute_key(wl::Recompute r);

}  // namespace gpuplan::cli
