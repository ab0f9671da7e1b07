#pragma once
// The decode paths that the libFuzzer targets drive, one function per target, shared with the regression replay
// test (replay.cpp) so that a saved crash input runs through exactly the code that crashed.
//
// Each function takes arbitrary bytes and must return normally: library code never throws across its API, crashes
// or reads out of bounds on user input (DESIGN.md §7). The functions check output invariants themselves and call the
// violation handler when one breaks (the fuzzers trap; the replay test fails the test case).
#include <optional>
#include <string>
#include <string_view>

#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::fuzz {

/// "inf" or "nan" standing alone (not inside a word such as "infeasible") in what the CLI printed: the line holding
/// it (at most 200 characters), else nullopt. The one "no non-finite number in the output" check of the fuzz paths
/// and the hostile-input corpus (tests/hostile).
std::optional<std::string> non_finite_text(const std::string& text);

/// Called with a description when an output invariant is broken. Default: print to the report descriptor (stderr
/// unless set_report_fd said otherwise) and __builtin_trap().
using ViolationHandler = void (*)(const std::string& what);
void set_violation_handler(ViolationHandler h);

/// Where the default handler writes its "invariant violated" line. libFuzzer's -close_fd_mask=3 (scripts/fuzz: the
/// CLI's own output is not wanted in the log) sends fd 2 to /dev/null before the first input, and a trap then showed
/// only "deadly signal" in the log: LLVMFuzzerInitialize, which runs before that, passes a dup() of stderr here.
void set_report_fd(int fd);
/// Writes "gpuplan fuzz: <text>\n" to that descriptor (write(2), unbuffered).
void report_line(const std::string& text);

/// The shipped hardware database and model library, loaded once from `data_dir` (the first call wins).
struct Shipped {
  hw::HardwareDb db;
  wl_io::ModelLibrary lib;
  std::string data_dir;  ///< where they were loaded from (calibration profiles are looked up there too)
};
const Shipped& shipped(const std::string& data_dir);

/// (a) json_io::parse, then hw_io::decode_gpu/link/node/cluster by "kind", then hw_io::check_references on the
/// shipped database with the decoded entity added (dangling ids, wrong link types, duplicate ids).
void run_hw(std::string_view bytes, const Shipped& data);

/// (b) Hugging Face config import (the object itself and a model file's "config"), the model-file decoder
/// (wl_io::load_model_file on a temporary copy), then parameter_counts / flops_per_token / kv_cache_size and one
/// training estimate on a shipped GPU for every successful import: counts, FLOPs and bytes must be finite, >= 0.
void run_model(std::string_view bytes, const Shipped& data);

/// (c) wl_io::decode_training_scenario, resolution onto the shipped models and hardware (unknown or path-like model
/// names become llama-3.1-8b, no system at all becomes dgx-h100), model::check_training_layout and, when feasible,
/// model::estimate_training: every time, byte and rate in the estimate must be finite and >= 0.
void run_scenario(std::string_view bytes, const Shipped& data);

/// (d) The CLI: the input split on NUL bytes is argv after "gpuplan"; CLI11 parses it against the train, model,
/// roofline, kv, serve, collective, mfu, pipeline and hw subcommands and runs the chosen callback (validate and schema
/// are left out: slow / constant).
/// Arguments that could name a file outside the working directory (containing '/' or "..") are refused; ten
/// whole-argument tokens (@zero, @deep, @nonutf8, ...) become hostile paths instead (file-name fuzzing). Needs
/// GPUPLAN_DATA_DIR set.
void run_cli(std::string_view bytes);

/// (e) The calibration readers: the bytes as a samples file (calib::read_samples on a temporary copy) and, when it
/// reads, calib::fit_profile for the H100 and the H200 of the shipped database, the profile's JSON text read back
/// with calib::read_profile (a fitted profile must always read back), and one training estimate with the profile's
/// efficiencies; then the bytes as a profile (calib::read_profile) and, when it reads, to_efficiency /
/// scale_up_calibration and the same training estimate. Fitted numbers, efficiencies and every time and byte of the
/// estimate must be finite and >= 0.
void run_calib(std::string_view bytes, const Shipped& data);

/// (f) Serving scenarios (`gpuplan serve --scenario`): wl_io::decode_serving_scenario, then for a scenario that
/// decodes cli::resolve_serving on the shipped data (a model or draft model that is not a library id becomes
/// llama-3.1-8b / bench-llama-1b-like, so that the fuzzer reads no files), then the capacity planner
/// (model::plan_serving) or the one-replica functions (serving_memory, steady_state, prefill_time, decode_step_time);
/// then the same scenario through the CLI (`serve --scenario FILE`, the format and --explain picked from the input's
/// hash). Every planner number finite and >= 0, each candidate's batch <= its KV capacity and GPUs = replicas x TP x
/// PP; the CLI exits 0, 2 or 3 and prints no "inf" or "nan". Work per input is bounded by the planner's own grid
/// (TP 1-8 x PP 1-16 x a geometric batch grid of about 100 points up to max_num_seqs <= 1e6).
void run_serving_scenario(std::string_view bytes, const Shipped& data);

/// (g) Budget plans (`gpuplan report PLAN.json`): wl_io::decode_plan on the input as it is, then the plan bounded
/// (at most 2 options, 1 training run and 2 serving deployments; every option capped at max_gpus 8, so that a
/// training item searches at most the layouts of 8 GPUs; model names that are not library ids replaced as above)
/// through the CLI (`report FILE --threads 1`, the format md/text/json/csv/html and --explain picked from the
/// input's hash): exit 0, 2 or 3; no "inf" or "nan" in the report; the JSON format parses.
void run_plan(std::string_view bytes, const Shipped& data);

}  // namespace gpuplan::fuzz
