// `gpuplan mfu`: MFU and HFU from a measured throughput reproduce the MFU the dev cases publish
// (data/validation/training_cases.json, the structured form of ../shared/validation/dev_cases.json), once put on the
// source's own FLOP convention and peak basis, within the rounding of the published figures; and the quantities follow
// their definitions (MFU = model FLOPs per step / (t · N · dense peak), HFU adds the recomputed forward, the gap is
// predicted / measured step − 1 with the step `gpuplan train` predicts).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using json = nlohmann::json;
using namespace gpuplan::cli_test;

namespace {

/// The peak basis a case states in its unit ("fraction of 989.5 TFLOP/s (...)", "fraction of ~1979 TFLOP/s").
double stated_peak_tflops(const std::string& unit) {
  auto at = unit.find("fraction of ");
  REQUIRE(at != std::string::npos);
  at += 12;
  if (unit[at] == '~') ++at;
  return std::stod(unit.substr(at));
}

/// A number as the flag gets it: every digit of the double.
std::string fmt_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// Half a unit of the last digit a source prints: 0.4257 → 0.00005, 0.37 → 0.005; a whole number printed with
/// trailing zeros is taken as rounded there (7500 → 50, as a blog rounds a throughput), else to the unit (66523 → 0.5).
double half_unit(double v) {
  if (v >= 1 && v == std::floor(v)) {
    double u = 1;
    while (std::fmod(v, u * 10) == 0) u *= 10;
    return 0.5 * u;
  }
  for (int d = 0; d <= 6; ++d) {
    const double scale = std::pow(10.0, d);
    if (std::fabs(v * scale - std::round(v * scale)) < 1e-9) return 0.5 / scale;
  }
  return 0.5e-6;
}

}  // namespace

TEST_SUITE("mfu command") {
  TEST_CASE("mfu reproduces the published MFU of the dev cases that give the throughput it came from") {
    std::ifstream in(kData + "/validation/training_cases.json");
    REQUIRE(in);
    const json file = json::parse(in);
    int checked = 0;
    for (const auto& c : file["cases"]) {
      if (!c.contains("also_measured") || !c["also_measured"].contains("mfu")) continue;
      const json& sc = c["scenario"];
      // Only cases with the throughput their MFU came from. Left out: the IBM FSDP rows of 13B-70B (the blog does not
      // state their GPU count), the torch.compile rows (an MFU alone), and Megatron SC'21 (TFLOP/s in the paper's own
      // HFU-like eq. 3, with neither a step time nor tokens/s).
      if (c["measured"]["metric"] != "tokens_per_s_per_gpu" || !sc.contains("gpus")) continue;
      const std::string id = c["id"].get<std::string>();
      CAPTURE(id);
      const std::string path = (std::filesystem::temp_directory_path() /
                                ("gpuplan-test-mfu-" + std::to_string(::getpid()) + ".json"))
                                   .string();
      {
        std::ofstream o(path);
        o << sc.dump();
      }
      // The most digits the source gives: the all-GPU throughput where it prints one, else the per-GPU figure.
      const bool total = c["also_measured"].contains("throughput_tokens_per_s");
      const double tps = total ? c["also_measured"]["throughput_tokens_per_s"]["value"].get<double>()
                               : c["measured"]["value"].get<double>();
      const Run r = run({"mfu", "--scenario", path,
                         total ? "--measured-tokens-per-s" : "--measured-tokens-per-s-per-gpu", fmt_number(tps),
                         "--format", "json"});
      std::filesystem::remove(path);
      INFO(r.err);
      REQUIRE(r.rc == 0);
      const json j = parse_json(r);
      const json& pub = c["also_measured"]["mfu"];
      const std::string convention = pub["flops_convention"].get<std::string>();
      // Our definition first: MFU = F_model / (t · N · P) with t = tokens per step / throughput.
      const double gpus = j["gpus"].get<double>(), peak = j["peak_flops_per_gpu"].get<double>();
      const double t = j["tokens_per_step"].get<double>() / (total ? tps : tps * gpus);
      CHECK(j["mfu"].get<double>() == gptest::approx(j["model_flops_per_step"].get<double>() / (t * gpus * peak)));
      CHECK(j["hfu"].get<double>() == gptest::approx(j["hardware_flops_per_step"].get<double>() / (t * gpus * peak)));
      // The sources count 6·N with another N than the weights a token multiplies (ours, `matmul_params`):
      //  - llm-foundry (Mosaic): N = num_params, every parameter, the learned position table, norms and biases
      //    included (its case notes: "N = num_params incl. embeddings") — ours lies 0.03-1% lower, most for the
      //    smallest models, where the position table weighs most; published MFU = 6·num_params + 12·L·d·s;
      //  - the IBM/PyTorch FSDP blog (nanoGPT/PaLM formula): its figures fit N = the nominal size of the name (7B →
      //    7e9; Llama-2-7B has 6.74e9 parameters, 6.61e9 of them multiplied), ours lies 4-6% lower.
      // The attention term (12·L·d·s per token, no causal halving) is the same in all three.
      double n_source = 0;
      if (convention.find("N = num_params") != std::string::npos) {
        // llm-foundry's benchmark driver sets max_seq_len to the run's sequence length, and with it the size of the
        // learned position table (the model file's sources: submit_benchmarks.py "only sets max_seq_len"); our model
        // file holds the yaml's 2048. The 8192- and 512-token rows count that table at their own length.
        std::ifstream mf(kData + "/models/" + sc["model"].get<std::string>() + ".json");
        REQUIRE(mf);
        const json model = json::parse(mf)["config"];
        n_source = j["params_total"].get<double>() + (j["seq"].get<double>() - model["n_positions"].get<double>()) *
                                                         model["n_embd"].get<double>();
      } else if (convention.find("nanoGPT/PaLM") != std::string::npos) {
        // The nominal size in the case id ("...-7B-..."): the digits before the first "B-" that follow a '-'
        // (a plain scan: <regex> trips GCC 12's -Wmaybe-uninitialized under ASan, as in test_cli_serve.cpp).
        std::string digits;
        for (std::size_t b = id.find("B-"); b != std::string::npos && digits.empty(); b = id.find("B-", b + 1)) {
          std::size_t a = b;
          while (a > 0 && std::isdigit(static_cast<unsigned char>(id[a - 1])) != 0) --a;
          if (a < b && a > 0 && id[a - 1] == '-') digits = id.substr(a, b - a);
        }
        REQUIRE_FALSE(digits.empty());
        n_source = std::stod(digits) * 1e9;
      } else {
        FAIL("a case of another FLOP convention: say how it counts before comparing");
      }
      const double f_ours = j["model_flops_per_token"].get<double>();
      const double f_source = f_ours + 6.0 * (n_source - j["matmul_params"].get<double>());
      // The source divides by its own statement of the peak (Mosaic: 989.5 TFLOP/s for H100 bf16; the blog: 989);
      // our GPU file holds NVIDIA's 989.4.
      const double source_peak = stated_peak_tflops(pub["unit"].get<std::string>()) * 1e12;
      const double basis = f_source / f_ours * peak / source_peak;
      const double published = pub["value"].get<double>();
      // Within the rounding of the printed MFU and of the printed throughput.
      const double tol = half_unit(published) + published * half_unit(tps) / tps;
      CHECK(std::fabs(j["mfu"].get<double>() * basis - published) <= tol);
      if (c["also_measured"].contains("hfu")) {
        const double hp = c["also_measured"]["hfu"]["value"].get<double>();
        const double htol = half_unit(hp) + hp * half_unit(tps) / tps;
        if (j["recompute"] == "full") {
          // llm-foundry's HFU is 4/3 of its MFU under activation checkpointing (the whole forward again, LM head and
          // embeddings included: "8N + attn"); ours adds the recomputed forward of the layers only (Megatron's
          // count: the LM head is not checkpointed), so it lies between our MFU and 4/3 of it.
          CHECK(std::fabs(j["mfu"].get<double>() * basis * 4.0 / 3.0 - hp) <= htol * 4.0 / 3.0);
          CHECK(j["hfu"].get<double>() > j["mfu"].get<double>());
          CHECK(j["hfu"].get<double>() < j["mfu"].get<double>() * 4.0 / 3.0);
        } else {
          CHECK(j["hfu"].get<double>() == gptest::approx(j["mfu"].get<double>()));
          CHECK(std::fabs(j["hfu"].get<double>() * basis - hp) <= htol);
        }
      }
      // The gap is the prediction of `train` for the same plan against the measured step.
      CHECK(j["gap"].get<double>() == gptest::approx(j["predicted_step_time_s"].get<double>() / t - 1.0));
      ++checked;
    }
    CHECK(checked == 25);
  }

  TEST_CASE("mfu: a step time and a throughput give the same MFU, a plan that cannot run exits 3, no measurement exits 2") {
    const std::vector<std::string> plan = {"mfu", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "1",
                                           "--global-batch", "64", "--seq", "4096", "--format", "json"};
    auto with = [&](std::vector<std::string> extra) {
      auto a = plan;
      a.insert(a.end(), extra.begin(), extra.end());
      return run(a);
    };
    const Run s = with({"--measured-step-s", "4"});
    REQUIRE(s.rc == 0);
    const Run t = with({"--measured-tokens-per-s", fmt_number(64.0 * 4096 / 4)});
    REQUIRE(t.rc == 0);
    CHECK(parse_json(s)["mfu"].get<double>() == gptest::approx(parse_json(t)["mfu"].get<double>()));
    const Run train = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "1",
                           "--global-batch", "64", "--seq", "4096", "--format", "json"});
    REQUIRE(train.rc == 0);
    CHECK(parse_json(s)["predicted_step_time_s"].get<double>() ==
          gptest::approx(parse_json(train)["step_time_s"].get<double>()));
    CHECK(parse_json(s)["model_flops_per_step"].get<double>() ==
          gptest::approx(parse_json(train)["model_flops_per_step"].get<double>()));
    const Run none = run({"mfu", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8"});
    CHECK(none.rc == kInvalid);
    CHECK(contains(none.err, "no measurement given"));
    const Run both = with({"--measured-step-s", "4", "--measured-tokens-per-s", "1000"});
    CHECK(both.rc == kInvalid);
    CHECK(contains(both.err, "exactly one"));
    const Run bad = with({"--measured-step-s", "4", "--tp", "3"});
    CHECK(bad.rc == kInfeasible);
  }
}
