#pragma once
// Shared plumbing of the CLI subcommands: exit codes, the --format flag, diagnostics and output printing, the flag-value
// guard. Tables, sections, derivation rendering and the data directory are the application layer's (app/output.hpp,
// app/workspace.hpp), shared with the GUI. No model arithmetic happens here (DESIGN.md §2.1).
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "gpuplan/app/output.hpp"
#include "gpuplan/app/workspace.hpp"
#include "gpuplan/core/diagnostics.hpp"

namespace gpuplan::cli {

/// The commands call the application layer (app/: workspace, resolution, drills, report sections, tables and
/// formats) by its names unqualified; the CLI's own names below hide any alike.
using namespace gpuplan::app;  // NOLINT(google-build-using-namespace)

/// Exit codes: 0 ok; 2 invalid input (diagnostics on stderr), argument errors included; 3 valid input but the plan
/// cannot work.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 2;
inline constexpr int kExitInfeasible = 3;

struct GlobalOptions {
  std::string data_dir;  ///< --data-dir
  std::string format = "text";
  bool explain = false;
};

/// The training scenario file of `train` and `mfu` (--scenario): its JSON object, or an empty object when `path` is
/// empty; nullopt (with the diagnostic) when it cannot be read, does not parse or is not an object.
std::optional<nlohmann::json> read_training_scenario(const std::string& path, Diagnostics& diags);

void add_format_option(CLI::App& cmd, GlobalOptions& g);

/// Prints diagnostics to stderr; returns kExitInvalid if any is an error, else kExitOk.
int report(const Diagnostics& diags);

/// Writes to stdout.
void out(const std::string& s);

/// Makes every option of `app` and its subcommands refuse, before CLI11 converts the value: an empty value (`--rate ""`
/// would otherwise mean "not given"), and for a numeric option NaN and infinities in any spelling (CLI11's FLOAT,
/// PositiveNumber and NonNegativeNumber let "nan" and "inf" through). The one gate for flag values; call it once,
/// after every subcommand is registered (cli/main.cpp, and the fuzz targets that build the CLI).
void guard_flag_values(CLI::App& app);

/// A boolean flag also takes the bare switch (`--sequence-parallel`, as Megatron-LM spells it): CLI11 then reads an
/// empty value (`--sp ""`, `--sp=`) as the bare switch, i.e. true, before guard_flag_values can see it. This refuses
/// such an empty value on the raw command line (throws CLI::ValidationError, "FLAG: an empty value is not allowed"),
/// so that every option of every subcommand refuses an empty value alike. Call it before app.parse.
void refuse_empty_switch_values(CLI::App& app, int argc, const char* const* argv);

/// The exit for a CLI11 parse error. --help and --version print to stdout and give 0; every other argument error
/// (unknown flag, missing argument, a value of the wrong type or outside its range) prints "FLAG: error: MESSAGE" and
/// a hint to stderr and gives kExitInvalid, like every other invalid input.
int exit_for_parse_error(CLI::App& app, const CLI::ParseError& e);

/// Flushes stdout after a command ran. A failed write (`> /dev/full`, a file over its size limit) is
/// reported on stderr and gives kExitInvalid, so that a truncated output never exits 0; otherwise returns `rc`.
int finish_output(int rc);

}  // namespace gpuplan::cli
