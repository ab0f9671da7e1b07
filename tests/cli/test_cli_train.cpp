// End-to-end tests of `gpuplan train`, `gpuplan roofline` and `gpuplan validate`: exit codes (0 ok, 2 invalid input,
// 3 valid plan that cannot work), the stable JSON keys documented in docs/cli.md, scenario files and their
// diagnostics, and the CSV header.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

/// A scenario file in a fresh temporary folder, removed when the object goes out of scope.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& text) {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("gpuplan-test-cli-train-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(dir_);
    path_ = dir_ / name;
    std::ofstream(path_) << text;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  [[nodiscard]] std::string path() const { return path_.string(); }

 private:
  fs::path dir_, path_;
};

/// The brief's base plan: Llama 3.1 8B on 8 H100, 64 × 4096 tokens per step.
std::vector<std::string> base_args() {
  return {"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--micro-batch", "1",
          "--global-batch", "64", "--seq", "4096"};
}
/// The same with ZeRO-1, which fits in 80 GB (without it, 16 B per parameter on every GPU does not).
std::vector<std::string> fitting_args() {
  auto a = base_args();
  a.insert(a.end(), {"--zero", "1"});
  return a;
}
std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

const char* const kCommKinds[] = {"tp", "cp", "ep", "pp", "dp"};
const char* const kMemoryTerms[] = {"weights_bytes",     "gradients_bytes",    "master_weights_bytes",
                                    "optimizer_states_bytes", "activations_bytes", "logits_bytes",
                                    "cuda_context_bytes", "nccl_buffers_bytes", "fragmentation_bytes"};

/// The stable keys of a `train --format json` report with numbers (feasible or not fitting in memory).
void check_train_keys(const json& j) {
  for (const std::string k : {"step_time_s", "tokens_per_s", "mfu", "hfu"}) {
    CAPTURE(k);
    REQUIRE(j.contains(k));
    CHECK(j[k].is_number());
    CHECK(std::isfinite(j[k].get<double>()));
    CHECK(j[k].get<double>() > 0);
  }
  REQUIRE(j.contains("feasible"));
  CHECK(j["feasible"].is_boolean());
  REQUIRE(j.contains("reasons"));
  CHECK(j["reasons"].is_array());
  REQUIRE(j.contains("memory"));
  REQUIRE(j["memory"].contains("peak_bytes_per_gpu"));
  CHECK(j["memory"]["peak_bytes_per_gpu"].get<double>() > 0);
  REQUIRE(j["memory"].contains("breakdown"));
  double sum = 0;
  for (const std::string k : kMemoryTerms) {
    CAPTURE(k);
    REQUIRE(j["memory"]["breakdown"].contains(k));
    CHECK(j["memory"]["breakdown"][k].is_number());
    CHECK(j["memory"]["breakdown"][k].get<double>() >= 0);
    sum += j["memory"]["breakdown"][k].get<double>();
  }
  CHECK(j["memory"]["peak_bytes_per_gpu"].get<double>() == gptest::approx(sum).epsilon(1e-9));
  REQUIRE(j.contains("comm"));
  for (const std::string kind : kCommKinds) {
    CAPTURE(kind);
    REQUIRE(j["comm"].contains(kind));
    for (const std::string k : {"time_s", "exposed_s", "bytes_per_step"}) {
      CAPTURE(k);
      REQUIRE(j["comm"][kind].contains(k));
      CHECK(j["comm"][kind][k].is_number());
      CHECK(j["comm"][kind][k].get<double>() >= 0);
    }
    CHECK(j["comm"][kind]["exposed_s"].get<double>() <= j["comm"][kind]["time_s"].get<double>() + 1e-3);
  }
}

std::string reasons_text(const json& j) {
  std::string s;
  for (const auto& r : j["reasons"]) s += r.get<std::string>() + "\n";
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("gpuplan train") {
  TEST_CASE("train --explain cites data files relative to the data directory, never this machine's absolute path") {
    const Run r = run(with(fitting_args(), {"--explain"}));
    CHECK(r.rc == 0);
    CHECK_FALSE(contains(r.out + r.err, kData));
    CHECK(contains(r.out, "datasheet: hardware/gpus/h100-sxm5-80gb.json#/dense_peak"));
    CHECK(contains(r.out, "model config: models/llama-3.1-8b.json"));
    CHECK(contains(r.err, "calibration/h100-sxm5-80gb/profile.json: note: using this calibration profile"));
  }

  TEST_CASE("train --format json: exit 0 and the documented stable keys (Llama 3.1 8B, 8 H100, ZeRO-1)") {
    const Run r = run(with(fitting_args(), {"--format", "json"}));
    INFO(r.err);
    CHECK(r.rc == 0);
    const json j = parse_json(r);
    check_train_keys(j);
    CHECK(j["feasible"] == true);
    CHECK(j["reasons"].empty());
    CHECK(j["model"] == "llama-3.1-8b");
    CHECK(j["gpu"] == "h100-sxm5-80gb");
    CHECK(j["gpus"] == 8);
    CHECK(j["layout"]["dp"] == 8);
    CHECK(j["layout"]["micro_batches"] == 8);
    CHECK(j["memory"]["fits"] == true);
    const double mfu = j["mfu"].get<double>();
    CHECK(mfu > 0);
    CHECK(mfu < 1);
    CHECK(j["hfu"].get<double>() == gptest::approx(mfu));  // no recompute
    CHECK(j["tokens_per_s"].get<double>() == gptest::approx(64.0 * 4096.0 / j["step_time_s"].get<double>()).epsilon(1e-12));
    CHECK(j["tokens_per_s_per_gpu"].get<double>() == gptest::approx(j["tokens_per_s"].get<double>() / 8));
    // DP 8 inside one DGX: only the data-parallel group communicates.
    CHECK(j["comm"]["dp"]["group_size"] == 8);
    CHECK(j["comm"]["dp"]["bytes_per_step"].get<double>() > 0);
    CHECK(j["comm"]["tp"]["time_s"].get<double>() == 0);
    CHECK(j["breakdown"]["bubble_s"].get<double>() == 0);
    // Without --tokens there is no time to train or cost.
    CHECK_FALSE(j.contains("time_to_train_s"));
    CHECK_FALSE(j.contains("cost_usd"));
    // The notes about resolved names go to stderr, never into the JSON on stdout.
    CHECK(contains(r.err, "note: 'h100' is h100-sxm5-80gb"));
  }

  TEST_CASE("LoRA - the plan that does not fit for full fine-tuning fits with rank-16 adapters, and targets need a rank") {
    // The same 8-GPU plan without ZeRO (16 B per parameter, does not fit) with the base frozen: adapters only carry
    // gradients and optimizer states.
    const Run r = run(with(base_args(), {"--format", "json", "--lora-rank", "16", "--lora-targets", "all"}));
    INFO(r.err);
    CHECK(r.rc == 0);
    const json j = parse_json(r);
    check_train_keys(j);
    CHECK(j["feasible"] == true);
    CHECK(j["memory"]["breakdown"]["optimizer_states_bytes"].get<double>() < 1e9);
    const Run bad = run(with(base_args(), {"--lora-targets", "qkv"}));
    CHECK(bad.rc == 2);
    CHECK(contains(bad.err, "--lora-targets"));
    CHECK(contains(bad.err, "--lora-rank"));
  }

  TEST_CASE("--master-bytes sets the optimizer's master copy: 2 halves it, 0 drops it, amp and 5 exit 2") {
    const Run fp32 = run(with(fitting_args(), {"--format", "json"}));
    const Run rem = run(with(fitting_args(), {"--format", "json", "--master-bytes", "2"}));
    const Run none = run(with(fitting_args(), {"--format", "json", "--master-bytes", "0"}));
    INFO(rem.err);
    REQUIRE(fp32.rc == 0);
    REQUIRE(rem.rc == 0);
    REQUIRE(none.rc == 0);
    const json a = parse_json(fp32), b = parse_json(rem), c = parse_json(none);
    const double m = a["memory"]["breakdown"]["master_weights_bytes"].get<double>();
    CHECK(m > 0);
    CHECK(b["memory"]["breakdown"]["master_weights_bytes"].get<double>() == gptest::approx(m / 2));
    CHECK(c["memory"]["breakdown"]["master_weights_bytes"].get<double>() == 0);
    CHECK(b["memory"]["breakdown"]["optimizer_states_bytes"] == a["memory"]["breakdown"]["optimizer_states_bytes"]);
    const Run out_of_range = run(with(fitting_args(), {"--master-bytes", "5"}));
    CHECK(out_of_range.rc == 2);
    CHECK(contains(out_of_range.err, "--master-bytes"));
    const Run amp = run(with(fitting_args(), {"--mixed-precision", "amp", "--master-bytes", "2"}));
    CHECK(amp.rc == 2);
    CHECK(contains(amp.err, "--master-bytes"));
    CHECK(contains(amp.err, "fp32 parameters, which are the master copy"));
  }

  TEST_CASE("--optimizer-states bf16 halves the optimizer states, --fp8-params needs FP8 GEMMs, bad pairs exit 2") {
    const Run fp32 = run(with(fitting_args(), {"--format", "json"}));
    const Run bf16 = run(with(fitting_args(), {"--format", "json", "--optimizer-states", "bf16"}));
    INFO(bf16.err);
    REQUIRE(fp32.rc == 0);
    REQUIRE(bf16.rc == 0);
    const json a = parse_json(fp32), b = parse_json(bf16);
    CHECK(b["memory"]["breakdown"]["optimizer_states_bytes"].get<double>() ==
          gptest::approx(a["memory"]["breakdown"]["optimizer_states_bytes"].get<double>() / 2));
    CHECK(b["memory"]["breakdown"]["master_weights_bytes"] == a["memory"]["breakdown"]["master_weights_bytes"]);
    CHECK(a["layout"]["optimizer_states"] == "fp32");
    CHECK(b["layout"]["optimizer_states"] == "bf16");
    CHECK(b["layout"]["fp8_params"] == false);
    // FP8 parameters: 1 B working weights, with FP8 GEMMs only.
    const Run fp8 = run(with(fitting_args(), {"--format", "json", "--precision", "fp8"}));
    const Run fp8p = run(with(fitting_args(), {"--format", "json", "--precision", "fp8", "--fp8-params", "true"}));
    INFO(fp8p.err);
    REQUIRE(fp8.rc == 0);
    REQUIRE(fp8p.rc == 0);
    CHECK(parse_json(fp8p)["layout"]["fp8_params"] == true);
    CHECK(parse_json(fp8p)["memory"]["breakdown"]["weights_bytes"].get<double>() <
          parse_json(fp8)["memory"]["breakdown"]["weights_bytes"].get<double>());
    const Run no_fp8 = run(with(fitting_args(), {"--fp8-params", "true"}));
    CHECK(no_fp8.rc == 2);
    CHECK(contains(no_fp8.err, "--fp8-params"));
    CHECK(contains(no_fp8.err, "precision fp8"));
    const Run eight_bit = run(with(fitting_args(), {"--optimizer", "adamw-8bit", "--optimizer-states", "bf16"}));
    CHECK(eight_bit.rc == 2);
    CHECK(contains(eight_bit.err, "--optimizer-states"));
    const Run typo = run(with(fitting_args(), {"--optimizer-states", "fp16"}));
    CHECK(typo.rc == 2);
    CHECK(contains(typo.err, "--optimizer-states"));
  }

  TEST_CASE("the plan without ZeRO needs 16 B per parameter on each GPU: exit 3, does not fit, numbers still given") {
    const Run r = run(with(base_args(), {"--format", "json"}));
    CHECK(r.rc == kInfeasible);
    const json j = parse_json(r);
    check_train_keys(j);
    CHECK(j["feasible"] == false);
    CHECK(j["memory"]["fits"] == false);
    REQUIRE(j["reasons"].size() == 1);
    CHECK(starts_with(j["reasons"][0].get<std::string>(), "does not fit: needs "));
    CHECK(contains(j["reasons"][0].get<std::string>(), "--zero 1"));  // what would make it fit
  }

  TEST_CASE("train --tokens 1e12: time_to_train_s, gpu_hours, cost_usd and energy_kWh follow from the step time") {
    const Run r = run(with(fitting_args(), {"--tokens", "1e12", "--price", "2", "--format", "json"}));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    check_train_keys(j);
    for (const std::string k : {"time_to_train_s", "gpu_hours", "cost_usd", "energy_kWh"}) {
      CAPTURE(k);
      REQUIRE(j.contains(k));
      CHECK(j[k].get<double>() > 0);
    }
    const double step = j["step_time_s"].get<double>();
    const double ttt = j["time_to_train_s"].get<double>();
    CHECK(ttt == gptest::approx(step * 1e12 / (64.0 * 4096.0)).epsilon(1e-12));
    CHECK(j["gpu_hours"].get<double>() == gptest::approx(ttt / 3600.0 * 8).epsilon(1e-12));
    CHECK(j["cost_usd"].get<double>() == gptest::approx(j["gpu_hours"].get<double>() * 2.0).epsilon(1e-12));
    // At most 8 × 700 W for the whole run.
    CHECK(j["energy_kWh"].get<double>() <= 8 * 0.7 * ttt / 3600.0 * (1 + 1e-9));
  }

  TEST_CASE("train text output shows throughput, the step breakdown and memory, exit 0") {
    const Run r = run(fitting_args());
    INFO(r.err);
    CHECK(r.rc == 0);
    CHECK(starts_with(r.out, "Llama 3.1 8B on 8 × NVIDIA H100 SXM5 80GB\n"));
    CHECK(contains(r.out, "\nThroughput\n"));
    CHECK(contains(r.out, "MFU / HFU"));
    CHECK(contains(r.out, "\nStep breakdown\n"));
    CHECK(contains(r.out, "Memory per GPU"));
    CHECK_FALSE(contains(r.out, "Infeasible"));
  }

  TEST_CASE("train --format md starts with a Markdown heading") {
    const Run r = run(with(fitting_args(), {"--format", "md"}));
    CHECK(r.rc == 0);
    CHECK(starts_with(r.out, "## Llama 3.1 8B on 8 × NVIDIA H100 SXM5 80GB\n"));
  }

  TEST_CASE("train --tp 3 on llama-3.1-8b exits 3 with the TP reason on stdout") {
    const Run r = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "3"});
    CHECK(r.rc == kInfeasible);
    CHECK(contains(r.out, "Infeasible"));
    CHECK(contains(r.out, "TP 3 does not divide the 32 attention heads"));
    CHECK_FALSE(contains(r.err, "error"));  // valid input: no diagnostic

    const Run j = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--tp", "3", "--format", "json"});
    CHECK(j.rc == kInfeasible);
    const json o = parse_json(j);
    CHECK(o["feasible"] == false);
    CHECK(contains(reasons_text(o), "TP 3 does not divide the 32 attention heads"));
    CHECK_FALSE(o.contains("step_time_s"));  // an invalid layout has no numbers
  }

  TEST_CASE("train --gpus 8 --tp 3 reports the GPU count and the TP reasons together") {
    const Run r = run(with(base_args(), {"--tp", "3", "--format", "json"}));
    CHECK(r.rc == kInfeasible);
    const json o = parse_json(r);
    const std::string reasons = reasons_text(o);
    CHECK(contains(reasons, "8 GPUs are not divisible by TP × PP × CP = 3"));
    CHECK(contains(reasons, "TP 3 does not divide the 32 attention heads"));
  }

  TEST_CASE("train llama-3.1-70b on one H100 exits 3: does not fit") {
    const Run r = run({"train", "--model", "llama-3.1-70b", "--gpu", "h100", "--gpus", "1"});
    CHECK(r.rc == kInfeasible);
    CHECK(contains(r.out, "does not fit: needs "));
    CHECK(contains(r.out, " over)"));
    const json j = parse_json(run({"train", "--model", "llama-3.1-70b", "--gpu", "h100", "--gpus", "1", "--format", "json"}));
    CHECK(j["feasible"] == false);
    CHECK(j["memory"]["fits"] == false);
    CHECK(j["memory"]["peak_bytes_per_gpu"].get<double>() > j["memory"]["capacity_bytes"].get<double>());
  }

  TEST_CASE("a feasible report always has numbers: 16 MI300X on nodes without a scale-out network exit 3") {
    // mi300x-8 has no scale-out NICs in the data; two of them cannot be joined. Exit 0 with "feasible": true and no
    // step time would tell a script that the plan works.
    const Run r = run({"train", "--model", "llama-3.1-8b", "--gpu", "mi300x", "--gpus", "16", "--zero", "1",
                       "--global-batch", "64", "--format", "json"});
    const json j = parse_json(r);
    if (j["feasible"] == true) CHECK(j.contains("step_time_s"));
    CHECK(j["feasible"] == false);
    CHECK(r.rc == kInfeasible);
    CHECK_FALSE(j["reasons"].empty());
  }

  TEST_CASE("train --scenario FILE reads the plan and flags override it") {
    const TempFile f("plan.json", R"({"model": "llama-3.1-8b", "gpu": "h100", "gpus": 8, "tp": 2, "zero": 1,
                                       "global_batch": 64, "seq": 4096})");
    const Run r = run({"train", "--scenario", f.path(), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(j["layout"]["tp"] == 2);
    CHECK(j["layout"]["dp"] == 4);
    CHECK(j["layout"]["seq"] == 4096);
    CHECK(j["layout"]["global_batch"] == 64);
    CHECK(j["layout"]["sequence_parallel"] == true);  // on by default with TP > 1
    // A note about the file's GPU alias names the file and key.
    CHECK(contains(r.err, f.path() + ": /gpu: note: 'h100' is h100-sxm5-80gb"));

    const Run o = run({"train", "--scenario", f.path(), "--tp", "4", "--seq", "2048", "--format", "json"});
    INFO(o.err);
    REQUIRE(o.rc == 0);
    const json k = parse_json(o);
    CHECK(k["layout"]["tp"] == 4);
    CHECK(k["layout"]["dp"] == 2);
    CHECK(k["layout"]["seq"] == 2048);
    CHECK(k["layout"]["global_batch"] == 64);  // from the file
    // Same plan from flags only gives the same numbers.
    const json flags = parse_json(run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--tp", "4",
                                       "--zero", "1", "--global-batch", "64", "--seq", "2048", "--format", "json"}));
    CHECK(flags["step_time_s"].get<double>() == k["step_time_s"].get<double>());
  }

  TEST_CASE("a bad scenario value exits 2 naming the file and pointer: /tp: error: expected an integer") {
    const TempFile f("bad.json", R"({"model": "llama-3.1-8b", "gpu": "h100", "gpus": 8, "tp": "eight"})");
    const Run r = run({"train", "--scenario", f.path()});
    CHECK(r.rc == kInvalid);
    CHECK(r.out.empty());
    CHECK(starts_with(r.err, f.path() + ": /tp: error: expected an integer"));
    CHECK(r.err == f.path() + ": /tp: error: expected an integer, found a string \"eight\"\n");
  }

  TEST_CASE("a bad flag value exits 2 naming the flag: --zero: error: value 7 is out of range") {
    const Run r = run(with(base_args(), {"--zero", "7"}));
    CHECK(r.rc == kInvalid);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "--zero: error: value 7 is out of range"));
    CHECK(r.err == "--zero: error: value 7 is out of range: expected >= 0 and <= 3\n");
  }

  TEST_CASE("--wgrad-deferral-limit without deferral, negative, or deferral with pp 1 exits 2 with the rule") {
    // Megatron-LM arguments.py: the limit is "Invalid if `defer-embedding-wgrad-compute` is not set"; Megatron-Core
    // model_parallel_config.py: "Cannot defer embedding wgrad compute when pipeline model parallel is not used".
    const Run alone = run(with(fitting_args(), {"--pp", "2", "--wgrad-deferral-limit", "4"}));
    CHECK(alone.rc == kInvalid);
    CHECK(alone.out.empty());
    CHECK(contains(alone.err, "--wgrad-deferral-limit: error: value 4: wgrad_deferral_limit counts the micro-batches "
                              "whose LM-head weight gradient is deferred, and is invalid without "
                              "defer_embedding_wgrad"));
    const Run neg = run(with(fitting_args(), {"--pp", "2", "--defer-embedding-wgrad-compute", "--wgrad-deferral-limit",
                                              "-2"}));
    CHECK(neg.rc == kInvalid);
    CHECK(contains(neg.err, "--wgrad-deferral-limit: error: value -2 is out of range: expected >= 0"));
    const Run flat = run(with(fitting_args(), {"--pp", "1", "--defer-embedding-wgrad-compute"}));
    CHECK(flat.rc == kInvalid);
    CHECK(contains(flat.err, "--defer-embedding-wgrad-compute: error: true with pp 1: Megatron-Core refuses it"));
    const TempFile f("defer.json", R"({"model": "llama-3.1-8b", "gpu": "h100", "gpus": 8, "zero": 1, "pp": 1,
                                       "defer_embedding_wgrad": true})");
    const Run file = run({"train", "--scenario", f.path()});
    CHECK(file.rc == kInvalid);
    CHECK(contains(file.err, f.path() + ": /defer_embedding_wgrad: error: true with pp 1"));
    const TempFile g("sharp.json", R"({"model": "llama-3.1-8b", "gpu": "h100", "gpus": 8, "zero": 1, "sharp": "yes"})");
    const Run s = run({"train", "--scenario", g.path()});
    CHECK(s.rc == kInvalid);
    CHECK(contains(s.err, g.path() + ": /sharp: error: expected a boolean"));
  }

  TEST_CASE("--sharp and --defer-embedding-wgrad-compute run, and --explain shows them") {
    const std::vector<std::string> on32{"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "32",
                                        "--micro-batch", "1", "--seq", "4096", "--zero", "1"};
    const Run r = run(with(on32, {"--global-batch", "64", "--sharp", "--explain"}));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    CHECK(contains(r.out, "SHARP"));
    const Run d = run(with(on32, {"--pp", "4", "--global-batch", "128", "--defer-embedding-wgrad-compute", "--explain"}));
    INFO(d.err);
    REQUIRE(d.rc == 0);
    CHECK(contains(d.out, "deferred LM-head wgrads"));
  }

  TEST_CASE("--dp-bucket-size below 1M parameters, negative, fractional or with ZeRO-3 exits 2 with the value") {
    // The key counts parameters (Megatron's --ddp-bucket-size); a value like MLPerf v5.0's yaml 200 (read as MB) would
    // give every tensor a bucket of its own.
    const Run small = run(with(fitting_args(), {"--dp-bucket-size", "200"}));
    CHECK(small.rc == kInvalid);
    CHECK(small.out.empty());
    CHECK(contains(small.err, "--dp-bucket-size: error: value 200 is below 1000000 parameters: dp_bucket_size counts "
                              "parameters per gradient bucket"));
    const Run neg = run(with(fitting_args(), {"--dp-bucket-size", "-1"}));
    CHECK(neg.rc == kInvalid);
    CHECK(contains(neg.err, "--dp-bucket-size: error: value -1 is out of range: expected >= 0"));
    const Run z3 = run(with(base_args(), {"--zero", "3", "--dp-bucket-size", "768000000"}));
    CHECK(z3.rc == kInvalid);
    CHECK(contains(z3.err, "--dp-bucket-size: error: value 768000000: dp_bucket_size sets the gradient buckets of DDP "
                           "and the distributed optimizer (zero 0-2)"));
    const TempFile f("bucket.json",
                     R"({"model": "llama-3.1-8b", "gpu": "h100", "gpus": 8, "zero": 1, "dp_bucket_size": 7.5e5})");
    const Run file = run({"train", "--scenario", f.path()});
    CHECK(file.rc == kInvalid);
    CHECK(contains(file.err, f.path() + ": /dp_bucket_size: error: value 750000 is below 1000000 parameters"));
    const TempFile g("bucket-frac.json",
                     R"({"model": "llama-3.1-8b", "gpu": "h100", "gpus": 8, "zero": 1, "dp_bucket_size": 1.5e6})");
    CHECK(run({"train", "--scenario", g.path()}).rc == 0);  // 1.5e6 is a whole number of parameters
    const TempFile h("bucket-half.json",
                     R"({"model": "llama-3.1-8b", "gpu": "h100", "gpus": 8, "zero": 1, "dp_bucket_size": 2000000.5})");
    const Run half = run({"train", "--scenario", h.path()});
    CHECK(half.rc == kInvalid);
    CHECK(contains(half.err, h.path() + ": /dp_bucket_size: error: expected an integer"));
  }

  TEST_CASE("a flag overriding a bad file value is reported as the flag, not the file") {
    const TempFile f("zero.json", R"({"model": "llama-3.1-8b", "gpu": "h100", "zero": 1})");
    const Run r = run({"train", "--scenario", f.path(), "--zero", "9"});
    CHECK(r.rc == kInvalid);
    CHECK(r.err == "--zero: error: value 9 is out of range: expected >= 0 and <= 3\n");
  }

  TEST_CASE("an unknown scenario key exits 2 with a did-you-mean") {
    const TempFile f("typo.json", R"({"model": "llama-3.1-8b", "gpu": "h100", "microbatch": 2})");
    const Run r = run({"train", "--scenario", f.path()});
    CHECK(r.rc == kInvalid);
    CHECK(r.out.empty());
    CHECK(contains(r.err, f.path() + ": /microbatch: error: unknown key 'microbatch' (did you mean 'micro_batch'?)"));
  }

  TEST_CASE("a scenario that is not an object, or not there, exits 2") {
    const TempFile f("array.json", "[1, 2]");
    const Run r = run({"train", "--scenario", f.path()});
    CHECK(r.rc == kInvalid);
    CHECK(r.err == f.path() + ": /: error: expected an object of training scenario keys (docs/scenario.md)\n");
    const std::string missing = f.path() + ".missing";
    const Run m = run({"train", "--scenario", missing});
    CHECK(m.rc == kInvalid);
    CHECK(m.err == missing + ": error: file not found\n");
  }

  TEST_CASE("an unknown model exits 2 with a did-you-mean on --model") {
    const Run r = run({"train", "--model", "llama-3.1-8", "--gpu", "h100"});
    CHECK(r.rc == kInvalid);
    CHECK(r.out.empty());
    CHECK(starts_with(r.err, "--model: error: unknown model 'llama-3.1-8' (did you mean 'llama-3.1-8b'?)"));
  }

  TEST_CASE("train --explain prints the derivation with its formulas") {
    const Run r = run(with(fitting_args(), {"--explain"}));
    CHECK(r.rc == 0);
    CHECK(contains(r.out, "formula:"));
    CHECK(contains(r.out, "Training step = "));
    const json j = parse_json(run(with(fitting_args(), {"--explain", "--format", "json"})));
    REQUIRE(j.contains("derivation"));
    CHECK(j["derivation"]["id"] == "train");
    CHECK_FALSE(j["derivation"]["formula"].get<std::string>().empty());
  }

  TEST_CASE("train --format csv has a stable header and one row") {
    const Run r = run(with(fitting_args(), {"--tokens", "1e12", "--format", "csv"}));
    CHECK(r.rc == 0);
    const auto ls = lines(r.out);
    REQUIRE(ls.size() == 2);
    CHECK(ls[0] == "model,gpu,gpus,tp,pp,dp,cp,feasible,step_time_s,tokens_per_s,mfu,peak_bytes_per_gpu,"
                   "time_to_train_s,cost_usd");
    CHECK(starts_with(ls[1], "llama-3.1-8b,h100-sxm5-80gb,8,1,1,8,1,true,"));
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("gpuplan roofline") {
  TEST_CASE("roofline --gemm 8192x8192x8192 --gpu h100 --format json: compute-bound, exact FLOPs and bytes") {
    const Run r = run({"roofline", "--gemm", "8192x8192x8192", "--gpu", "h100", "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    REQUIRE(j.is_array());
    REQUIRE(j.size() == 1);
    const json& op = j[0];
    for (const std::string k : {"gpu", "op", "class", "flops", "bytes", "intensity", "ridge", "bound", "time_s",
                          "achieved_flops_per_s"}) {
      CAPTURE(k);
      CHECK(op.contains(k));
    }
    CHECK(op["gpu"] == "h100-sxm5-80gb");
    CHECK(op["bound"] == "compute");
    CHECK(op["flops"].get<double>() == 2.0 * 8192.0 * 8192.0 * 8192.0);
    CHECK(op["bytes"].get<double>() == 3.0 * 8192.0 * 8192.0 * 2.0);
    CHECK(op["intensity"].get<double>() == gptest::approx(8192.0 / 3.0));
    CHECK(op["ridge"].get<double>() == gptest::approx(989.4 / 3.35));
    CHECK(op["time_s"].get<double>() > op["flops"].get<double>() / 989.4e12);  // never faster than the peak
    CHECK(op["achieved_flops_per_s"].get<double>() ==
          gptest::approx(op["flops"].get<double>() / op["time_s"].get<double>()));
  }

  TEST_CASE("roofline --format json --explain is still one JSON document") {
    // train --explain --format json puts the derivation under a "derivation" key; roofline must not append text.
    const Run r = run({"roofline", "--gemm", "8192x8192x8192", "--gpu", "h100", "--format", "json", "--explain"});
    CHECK(r.rc == 0);
    CHECK(nlohmann::json::accept(r.out));
  }

  TEST_CASE("roofline --gemm on two GPUs gives one row per GPU") {
    const Run r = run({"roofline", "--gemm", "4096x4096x4096", "--gpu", "h100", "--gpu", "a100-sxm4-80gb", "--format", "csv"});
    REQUIRE(r.rc == 0);
    const auto ls = lines(r.out);
    REQUIRE(ls.size() == 3);
    CHECK(ls[0] == "gpu,op,flops,bytes,intensity,ridge,bound,time_s,achieved_TFLOPs,efficiency");
    CHECK(starts_with(ls[1], "h100-sxm5-80gb,4096x4096x4096,"));
    CHECK(starts_with(ls[2], "a100-sxm4-80gb,4096x4096x4096,"));
  }

  TEST_CASE("roofline --gemm 1x4096x4096 (a decode GEMV) is memory-bound") {
    const json j = parse_json(run({"roofline", "--gemm", "1x4096x4096", "--gpu", "h100", "--format", "json"}));
    REQUIRE(j.size() == 1);
    CHECK(j[0]["intensity"].get<double>() < 1.0);
    CHECK(j[0]["bound"] == "memory");
  }

  TEST_CASE("a malformed --gemm exits 2 with the expected shape") {
    const Run r = run({"roofline", "--gemm", "8192x8192", "--gpu", "h100"});
    CHECK(r.rc == kInvalid);
    CHECK(r.out.empty());
    CHECK(r.err == "--gemm: error: '8192x8192' is not M×N×K (e.g. 8192x8192x8192, or a range in a dimension: "
                   "4096x4096x4088..4104)\n");
    const Run zero = run({"roofline", "--gemm", "0x8x8"});
    CHECK(zero.rc == kInvalid);
    CHECK(zero.err == "--gemm: error: '0' is not a dimension: a value or a range A..B[:STEP] from 1 to 1e9 with A ≤ B\n");
    CHECK(run({"roofline", "--gemm", "8x8x8x8"}).rc == kInvalid);
    CHECK(run({"roofline", "--gemm", "8x8x9..4"}).rc == kInvalid);
    CHECK(run({"roofline", "--gemm", "8x8x1..9:0"}).rc == kInvalid);
    const Run big = run({"roofline", "--gemm", "1..1000x1..1000x8"});
    CHECK(big.rc == kInvalid);
    CHECK(contains(big.err, "is more than 100000 shapes"));
  }

  TEST_CASE("roofline --gemm with a range: one row per shape, the alignment classes and the tile staircase (issue #27)") {
    // K = 4088…4104 on an H100 in bf16: the 16-byte-aligned K (multiples of 8) run the fast class, K ≡ 2 mod 4 and
    // ≡ 4 mod 8 (4- and 8-byte aligned) the vector class, odd K the element class (efficiency.hpp, GemmAlignment: our
    // H100 sweep, gemm_alignment.json). Each row is the single-shape command's row.
    const json j = parse_json(run({"roofline", "--gemm", "4096x4096x4088..4104", "--gpu", "h100", "--format", "json"}));
    REQUIRE(j.size() == 17);
    std::map<int, double> t;
    for (const auto& row : j) {
      const std::string op = row["op"];
      t[std::stoi(op.substr(op.rfind('x') + 1))] = row["time_s"].get<double>();
    }
    const json one = parse_json(run({"roofline", "--gemm", "4096x4096x4097", "--gpu", "h100", "--format", "json"}));
    CHECK(one[0]["time_s"].get<double>() == t.at(4097));
    CHECK(t.at(4097) / t.at(4104) > 5.0);  // measured 5.5 (nt) / 5.2 (nn)
    CHECK(t.at(4098) / t.at(4104) > 2.5);  // measured 2.8 (nt) / 2.8 (nn)
    CHECK(t.at(4098) < t.at(4097));
    CHECK(t.at(4104) / t.at(4096) < 1.05);
    // A stepped range in M.
    const Run m = run({"roofline", "--gemm", "8..1024:8x22016x4096", "--gpu", "h100", "--format", "csv"});
    REQUIRE(m.rc == 0);
    CHECK(lines(m.out).size() == 129);
  }

  TEST_CASE("roofline --elementwise with a negative element count is invalid input") {
    const Run r = run({"roofline", "--elementwise", "-5", "--gpu", "h100"});
    CHECK(r.rc != 0);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "--elementwise"));
    const Run b = run({"roofline", "--elementwise", "1000", "--bytes-per-element", "-4", "--gpu", "h100"});
    CHECK(b.rc != 0);
    CHECK(contains(b.err, "--bytes-per-element"));
  }

  TEST_CASE("roofline --model --seq 0 names --seq, not --tp") {
    const Run r = run({"roofline", "--model", "llama-3.1-8b", "--seq", "0", "--gpu", "h100"});
    CHECK(r.rc != 0);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "--seq"));
    CHECK_FALSE(contains(r.err, "--tp:"));
  }

  TEST_CASE("roofline needs exactly one of --gemm, --attention, --elementwise, --model") {
    const Run none = run({"roofline", "--gpu", "h100"});
    CHECK(none.rc == kInvalid);
    CHECK(contains(none.err, "give exactly one of"));
    const Run two = run({"roofline", "--gemm", "8x8x8", "--elementwise", "1000"});
    CHECK(two.rc == kInvalid);
  }

  TEST_CASE("roofline --model lists every op of one layer, forward and backward") {
    const Run r = run({"roofline", "--model", "llama-3.1-8b", "--gpu", "h100", "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(j.size() > 10);
    bool qkv = false, dgrad = false;
    for (const auto& op : j) {
      qkv = qkv || op["op"] == "QKV projection";
      dgrad = dgrad || op["op"] == "QKV projection dgrad";
      CHECK(op["time_s"].get<double>() > 0);
    }
    CHECK(qkv);
    CHECK(dgrad);
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("gpuplan validate") {
  TEST_CASE("validate --format json exits 0 and evaluates cases in both sets") {
    const Run r = run({"validate", "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    for (const std::string set : {"training_cases.json", "measured_cases.json", "measured_moe_training_cases.json"}) {
      CAPTURE(set);
      REQUIRE(j.contains(set));
      CHECK(j[set]["evaluated"].get<int>() > 0);
      CHECK(j[set]["cases"].is_array());
      CHECK(j[set]["cases"].size() >= j[set]["evaluated"].get<std::size_t>());
      CHECK(j[set]["median_abs_error"].get<double>() >= 0);
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("gpuplan machine formats") {
  TEST_CASE("hw show of a link, node or cluster with --format json prints JSON, as it does for a GPU") {
    // A script asking for JSON must get JSON or an error, never the text report with exit 0.
    for (const std::string id : {"h100", "ib-ndr", "dgx-h100", "gb200-nvl72-rack"}) {
      CAPTURE(id);
      const Run r = run({"hw", "show", id, "--format", "json"});
      CHECK(r.rc == 0);
      CHECK(nlohmann::json::accept(r.out));
    }
  }
}

TEST_SUITE("gpuplan train --packed-documents") {
  TEST_CASE("bad document lengths exit 2 with the flag, the value as typed and the rule") {
    const Run zero = run(with(fitting_args(), {"--packed-documents", "0"}));
    CHECK(zero.rc == kInvalid);
    CHECK(contains(zero.err, "--packed-documents"));
    CHECK(contains(zero.err, "'0': a document length must be a whole number of tokens from 1 to 10000000"));
    const Run lognormal = run(with(fitting_args(), {"--packed-documents", "lognormal:300"}));
    CHECK(lognormal.rc == kInvalid);
    CHECK(contains(lognormal.err, "'lognormal:300': lognormal takes MEAN,SD"));
    const Run weight = run(with(fitting_args(), {"--packed-documents", "512:0"}));
    CHECK(weight.rc == kInvalid);
    CHECK(contains(weight.err, "the weight > 0"));
    const Run unfused = run(with(fitting_args(), {"--flash", "false", "--packed-documents", "512"}));
    CHECK(unfused.rc == kInvalid);
    CHECK(contains(unfused.err, "--packed-documents"));
    CHECK(contains(unfused.err, "'512': per-document attention is the fused kernel's varlen form"));
    CHECK(contains(unfused.err, "flash_attention false"));
  }

  TEST_CASE("a scenario file's bad packed_documents names the file and the JSON pointer") {
    const TempFile f("packed.json", R"({"model": "llama-3.1-8b", "gpu": "h100", "gpus": 8, "zero": 1,
                                        "seq": 4096, "packed_documents": "512.5"})");
    const Run r = run({"train", "--scenario", f.path()});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, f.path() + ": /packed_documents: error: '512.5'"));
  }

  TEST_CASE("--explain names the packed attention, and 8 documents of 512 make the step faster") {
    const Run full = run(with(fitting_args(), {"--format", "json"}));
    const Run packed = run(with(fitting_args(), {"--format", "json", "--packed-documents", "512"}));
    INFO(packed.err);
    REQUIRE(full.rc == 0);
    REQUIRE(packed.rc == 0);
    CHECK(parse_json(packed)["step_time_s"].get<double>() < parse_json(full)["step_time_s"].get<double>());
    const Run ex = run(with(fitting_args(), {"--explain", "--packed-documents", "512"}));
    REQUIRE(ex.rc == 0);
    CHECK(contains(ex.out, "attention (packed: 8.0 documents of 512 tokens on average per sequence, each causal over "
                           "itself)"));
  }
}
