#pragma once
#include <CLI/CLI.hpp>

#include "common.hpp"

namespace gpuplan::cli {
/// Each registers its subcommand tree; the callback stores the exit code in `rc`.
void register_hw(CLI::App& app, GlobalOptions& g, int& rc);
void register_model(CLI::App& app, GlobalOptions& g, int& rc);
void register_schema(CLI::App& app, GlobalOptions& g, int& rc);
void register_train(CLI::App& app, GlobalOptions& g, int& rc);
void register_validate(CLI::App& app, GlobalOptions& g, int& rc);
void register_roofline(CLI::App& app, GlobalOptions& g, int& rc);
void register_kv(CLI::App& app, GlobalOptions& g, int& rc);
void register_serve(CLI::App& app, GlobalOptions& g, int& rc);
void register_simulate(CLI::App& app, GlobalOptions& g, int& rc);
void register_autoscale(CLI::App& app, GlobalOptions& g, int& rc);
void register_calibrate(CLI::App& app, GlobalOptions& g, int& rc);
/// `calibrate import-nccl-tests` under the `calibrate` command (cmd_calibrate_import.cpp).
void register_calibrate_import(CLI::App& calibrate, GlobalOptions& g, int& rc);
void register_bench(CLI::App& app, GlobalOptions& g, int& rc);
void register_report(CLI::App& app, GlobalOptions& g, int& rc);
void register_drill(CLI::App& app, GlobalOptions& g, int& rc);
void register_collective(CLI::App& app, GlobalOptions& g, int& rc);
void register_mfu(CLI::App& app, GlobalOptions& g, int& rc);
void register_pipeline(CLI::App& app, GlobalOptions& g, int& rc);
void register_compress(CLI::App& app, GlobalOptions& g, int& rc);
/// The generated Markdown field reference of all data files.
std::string field_reference();
/// docs/scenario.md (`text`, `file` in diagnostics) with each table between a "<!-- scenario table: KIND -->" line and
/// "<!-- end scenario table -->" generated from the KIND field table (wl_io::scenario_doc_table_markdown), keeping each
/// one-key row's meaning; nullopt after an unknown KIND or an unclosed table (`gpuplan schema --scenario-doc FILE`).
std::optional<std::string> scenario_doc(const std::string& text, const std::string& file, Diagnostics& diags);
/// The whole command line (main.cpp is this call): registers every subcommand, parses, runs, returns the exit code.
int run_main(int argc, char** argv);
}  // namespace gpuplan::cli
