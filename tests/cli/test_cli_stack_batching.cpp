// End-to-end tests of issue #27 d3/d4 at the CLI: `gpuplan train --stack` (each row's numbers are `gpuplan train`'s
// for the plan the steps build; the flags the stack owns, bad step names and values exit 2 with the flag, the value
// and the rule) and `gpuplan simulate --batching static` (the flags, its JSON keys, and continuous batching's
// higher throughput on the same requests and memory).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

namespace {
const std::vector<std::string> kGpt2{"train", "-m", "gpt2", "--gpu", "h100-sxm5-80gb", "--gpus", "1", "--seq", "1024",
                                     "--micro-batch", "8", "--global-batch", "8", "--no-calibration"};
std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}
double rel(double a, double b) { return std::abs(a / b - 1.0); }
}  // namespace

TEST_CASE("train --stack: each row is the step time of `train` with the knobs its steps set") {
  const Run r = run(with(kGpt2, {"--stack", "amp,flash,compile", "--format", "json"}));
  REQUIRE(r.rc == 0);
  const auto j = parse_json(r);
  REQUIRE(j["rows"].size() == 4);
  // The third row (amp, flash) is `train --precision bf16 --mixed-precision amp --kernels eager --flash true
  // --attention-kernel fa2 --optimizer-impl foreach` without overlap: the same estimate_training run.
  const Run t = run(with(kGpt2, {"--precision", "bf16", "--mixed-precision", "amp", "--kernels", "eager", "--flash",
                                 "true", "--attention-kernel", "fa2", "--optimizer-impl", "foreach",
                                 "--overlap-grad-reduce", "false", "--overlap-param-gather", "false", "--format",
                                 "json"}));
  REQUIRE(t.rc == 0);
  const auto jt = parse_json(t);
  const auto& row = j["rows"][2];
  CHECK(row["step"] == "flash");
  CHECK(rel(row["step_time_s"].get<double>(), jt["step_time_s"].get<double>()) < 1e-12);
  CHECK(row["peak_bytes_per_gpu"].get<double>() == jt["memory"]["peak_bytes_per_gpu"].get<double>());
  CHECK(j["rows"][0]["step"] == "baseline");
  CHECK(rel(j["rows"][3]["cumulative_speedup"].get<double>(),
            j["rows"][0]["step_time_s"].get<double>() / j["rows"][3]["step_time_s"].get<double>()) < 1e-12);
  // fp32 FMA → bf16 tensor cores: measured ×2.27 on the H100 (the stack test below; the fp32 step is GPU-bound, the
  // eager attention's score passes and the elementwise kernels gain only the halved bytes).
  CHECK(j["rows"][1]["speedup"].get<double>() > 2.0);
  CHECK(j["rows"][1]["speedup"].get<double>() < 4.0);
}

TEST_CASE("train --stack prints a table with the cumulative speed-up and what each step set") {
  const Run r = run(with(kGpt2, {"--stack", "amp,workers=4", "--loader-sample-ms", "10"}));
  REQUIRE(r.rc == 0);
  CHECK(contains(r.out, "Optimisation stack: GPT-2 small (124M) on 1 × h100-sxm5-80gb"));
  CHECK(contains(r.out, "workers=4"));
  CHECK(contains(r.out, "× base"));
  CHECK(contains(r.out, "4 DataLoader worker processes per GPU"));
  // Without workers the 8 samples × 10 ms are added to the GPU's step.
  const Run md = run(with(kGpt2, {"--stack", "amp", "--loader-sample-ms", "10", "--format", "json"}));
  REQUIRE(md.rc == 0);
  const auto j = parse_json(md);
  CHECK(rel(j["rows"][1]["step_time_s"].get<double>(), j["rows"][1]["gpu_step_s"].get<double>() + 0.080) < 1e-9);
}

TEST_CASE("train --stack: bad steps and the flags the stack owns exit 2 with the flag, the value and the rule") {
  Run r = run(with(kGpt2, {"--stack", "amp,turbo"}));
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--stack: error: 'turbo' is not an optimisation; the stack knows amp (alias bf16), fp8"));
  r = run(with(kGpt2, {"--stack", "amp,workers=0"}));
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "'workers=0': workers=N takes a DataLoader worker count per GPU from 1 to 4096"));
  r = run(with(kGpt2, {"--stack", "amp,amp"}));
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "'amp' is in the stack twice"));
  r = run(with(kGpt2, {"--stack", "recompute=half"}));
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "'recompute=half': the recompute mode is selective or full"));
  r = run(with(kGpt2, {"--stack", "amp,", "--precision", "bf16"}));
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--precision: error: the optimisation stack starts from its fp32 eager baseline"));
  r = run(with(kGpt2, {"--loader-sample-ms", "5"}));
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--loader-sample-ms: error: prices the input pipeline of the optimisation stack"));
  r = run(with(kGpt2, {"--stack", "amp", "--loader-sample-ms", "-1"}));
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--loader-sample-ms: error: -1 is not a CPU time per sample"));
}

TEST_CASE("simulate --batching static: flags checked, batches and padding reported, continuous faster under load") {
  const std::vector<std::string> base{"simulate", "-m", "llama-3.1-8b", "--no-calibration", "--rate", "40",
                                      "--requests", "1500", "--input-lengths", "lognormal:1024,512",
                                      "--output-lengths", "lognormal:256,128", "--format", "json"};
  const Run c = run(base);
  REQUIRE(c.rc == 0);
  const Run s = run(with(base, {"--batching", "static", "--static-batch", "256"}));
  REQUIRE(s.rc == 0);
  const auto jc = parse_json(c), js = parse_json(s);
  CHECK(jc["batching"] == "continuous");
  CHECK(js["batching"] == "static");
  CHECK(js["static"]["batch"] == 256);
  CHECK(js["static"]["batches"].get<long long>() > 0);
  CHECK(js["static"]["padding_fraction"].get<double>() > 0);
  CHECK(js["completed"] == 1500);
  CHECK(jc["output_tokens_per_s"].get<double>() > js["output_tokens_per_s"].get<double>());
  CHECK(js["queue"]["p50_s"].get<double>() >= 0);
  Run b = run(with(base, {"--static-batch", "8"}));
  CHECK(b.rc == kInvalid);
  CHECK(contains(b.err, "--static-batch: error: applies to static batching only: add --batching static"));
  b = run(with(base, {"--batching", "dynamic"}));
  CHECK(b.rc == kInvalid);
  CHECK(contains(b.err, "--batching: error: 'dynamic' is not a batching policy (continuous or static)"));
  b = run(with(base, {"--batching", "static", "--batch-timeout-s", "-2"}));
  CHECK(b.rc == kInvalid);
  CHECK(contains(b.err, "--batch-timeout-s: error: -2 is not a timeout in [0, 10⁹) seconds"));
  b = run(with(base, {"--batching", "static", "--static-batch", "0"}));
  CHECK(b.rc == kInvalid);
  CHECK(contains(b.err, "--static-batch: error: 0 is not a batch size in [1, 10⁶] requests"));
}

// Ground truth (issue #27 d3): the lead's cumulative stack on one H100 (data/validation/measured/h100-sxm5-80gb/
// optstack_gpt2.json, README there): GPT-2 small, seq 1024, batch 16, no dropout; baseline fp32 eager with AdamW
// foreach=False and 5.0 ms of CPU per sample loaded in the training process; then 4 workers, autocast bf16, SDPA
// flash, fused AdamW, torch.compile. Tolerance: 10% on a step's speed-up (the bar for the GEMM shape effects),
// 5% on the loader's own term. Model against measured at this commit (× previous): workers 1.154 / 1.206, amp 2.86 /
// 2.27, flash 2.20 / 2.01, fused-adam 1.07 / 1.046, compile 2.00 / 2.077; the loader term 80.0 / 81.1 ms. (Before the
// H200 probe's fixes, optstack_probe.json: amp 5.12, flash 1.52 — the fp32 LM head priced in the tensor-core alignment
// class, which SIMT fp32 kernels do not have, and eager attention's autocast input cast and slow score kernels.)
// One step still misses and is held as a miss (so that the note goes when the model changes):
//  - amp: the fp32 steps are priced 31% slow (518 / 394 ms with the workers): the layer GEMMs 214 ms where the
//    probe's fp32 GEMMs at these shapes add up to ~170 ms (the bf16 depth law applied to SIMT kernels, 6% at K = 768,
//    is part of it), the eager attention 135 ms against ~119 ms, the elementwise passes and the loss ~35 ms over.
//    The autocast step itself is within 5% (181.0 / 173.4 ms).
// flash was the second miss (2.23 against 2.01) until eager LayerNorm and bias gradients were priced at their measured
// rates (session 16, layer_cost.cpp): 2.20, the autocast step +4.4% (was +3.0%), the flash step -4.5% (was -7.4%; the
// probe's flash step is 76.7 ms of kernels in an 86.5 ms span: host gaps the eager model does not lay out).
TEST_CASE("the stack against the measured H100 stack on GPT-2 small: per-step speed-ups within 10%, misses held") {
  const Run r = run({"train", "-m", "gpt2", "--gpu", "h100-sxm5-80gb", "--gpus", "1", "--seq", "1024", "--micro-batch",
                     "16", "--global-batch", "16", "--dropout", "false", "--stack",
                     "workers=4,amp,flash,fused-adam,compile", "--optimizer-impl", "for-loop", "--loader-sample-ms", "5",
                     "--format", "json"});
  REQUIRE(r.rc == 0);
  const auto j = parse_json(r);
  std::ifstream f(std::string(kData) + "/validation/measured/h100-sxm5-80gb/optstack_gpt2.json");
  REQUIRE(f.good());
  const auto m = nlohmann::json::parse(f);
  const auto& st = m["stages"];
  REQUIRE(st.size() == 6);
  REQUIRE(j["rows"].size() == 6);
  auto measured = [&](std::size_t i) { return st[i]["step_time_s"].get<double>(); };
  auto model = [&](std::size_t i) { return j["rows"][i]["step_time_s"].get<double>(); };
  const char* names[] = {"baseline", "workers=4", "amp", "flash", "fused-adam", "compile"};
  for (std::size_t i = 0; i < 6; ++i) CHECK(j["rows"][i]["step"] == names[i]);
  // The loader term: the 16 samples × 5 ms the baseline loads between steps, hidden by the workers.
  CHECK(rel(model(0) - model(1), measured(0) - measured(1)) < 0.05);
  for (std::size_t i : {std::size_t(1), std::size_t(3), std::size_t(4), std::size_t(5)}) {
    INFO(names[i] << ": model × " << model(i - 1) / model(i) << ", measured × " << measured(i - 1) / measured(i));
    CHECK(rel(model(i - 1) / model(i), measured(i - 1) / measured(i)) < 0.10);
  }
  for (std::size_t i : {std::size_t(2)}) {
    INFO(names[i] << " (a known miss): model × " << model(i - 1) / model(i) << ", measured × "
                  << measured(i - 1) / measured(i));
    CHECK(rel(model(i - 1) / model(i), measured(i - 1) / measured(i)) >= 0.10);
  }
  // From the autocast step on the step times themselves within 15% (+4.4%, -4.5%, -6.8%, -3.4% at this commit).
  for (std::size_t i = 2; i < 6; ++i) CHECK(rel(model(i), measured(i)) < 0.15);
}
