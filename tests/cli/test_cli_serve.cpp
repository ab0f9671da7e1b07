// End-to-end tests of `gpuplan serve`: one replica (TTFT, ITL, throughput vs batch) and the capacity planner (--rate),
// exit codes (0 ok, 2 invalid input, 3 no layout meets the SLA), the JSON keys, the identities between the numbers
// it prints (throughput = batch / ITL, $/Mtok from the GPU count and price, speculative decoding's eq. 1), the KV
// bytes per token of GQA and MLA models, the exact diagnostics of bad flags, and the md/csv/text renderings.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

namespace {

using nlohmann::json;

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

/// The brief's planner question: Llama 3.1 70B on H100, 20 req/s, 2048 in / 500 out, TTFT 1 s.
std::vector<std::string> planner_args(const std::string& itl_ms) {
  return {"serve", "--rate", "20", "--input-tokens", "2048", "--output-tokens", "500", "--ttft-ms", "1000",
          "--itl-ms", itl_ms, "-m", "llama-3.1-70b", "--gpu", "h100"};
}

/// The error lines of stderr (notes about resolved names may come before them).
std::vector<std::string> errors(const std::string& err) {
  std::vector<std::string> v;
  for (const auto& l : lines(err))
    if (contains(l, ": error: ")) v.push_back(l);
  return v;
}

/// "nan" or "inf" as a word anywhere (not "info", "infeasible").
bool has_nan_or_inf(const std::string& s) {
  // Words = runs of letters (a plain scan: <regex> trips GCC 12's -Wmaybe-uninitialized under -O2 + ASan).
  std::string word;
  auto bad = [&] { return word == "nan" || word == "inf" || word == "infinity"; };
  for (char ch : s) {
    if (std::isalpha(static_cast<unsigned char>(ch)) != 0) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    } else {
      if (bad()) return true;
      word.clear();
    }
  }
  return bad();
}

double num(const json& j, const std::string& k) {
  INFO("key " << k);
  REQUIRE(j.contains(k));
  REQUIRE(j[k].is_number());
  return j[k].get<double>();
}

// $2.69 per GPU-hour (data/hardware/gpus/h100-sxm5-80gb.json) over 20 req/s × 500 output tokens, per 10⁶ tokens.
double h100_cost_per_mtok(double gpus, double rate = 20, double osl = 500, double price = 2.69) {
  return gpus * price / 3600.0 / (rate * osl) * 1e6;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("gpuplan serve") {
  TEST_CASE("serve --format json: exit 0, the documented keys, KV 131072 B per token for Llama 3.1 8B bf16") {
    const Run r = run({"serve", "-m", "llama-3.1-8b", "--gpu", "h100", "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    for (const std::string k : {"ttft_s", "itl_s", "tokens_per_s", "kv_bytes_per_token", "max_concurrency"}) {
      CAPTURE(k);
      CHECK(std::isfinite(num(j, k)));
      CHECK(num(j, k) > 0);
    }
    REQUIRE(j.contains("feasible"));
    CHECK(j["feasible"] == true);
    REQUIRE(j.contains("reasons"));
    CHECK(j["reasons"].is_array());
    CHECK(j["reasons"].empty());
    REQUIRE(j.contains("points"));
    REQUIRE(j["points"].is_array());
    REQUIRE_FALSE(j["points"].empty());
    CHECK(j["model"] == "llama-3.1-8b");
    CHECK(j["gpu"] == "h100-sxm5-80gb");
    // 8B bf16 fits on one GPU: the smallest TP is chosen.
    CHECK(j["tp"] == 1);
    CHECK(j["pp"] == 1);
    CHECK(j["compute"] == "bf16");
    // 32 layers × K and V × 8 KV heads × 128 × 2 B.
    CHECK(num(j, "kv_bytes_per_token") == 32.0 * 2 * 8 * 128 * 2);
    CHECK(num(j, "kv_bytes_per_token") == 131072.0);
    // No --batch: the KV capacity, capped by vLLM's max_num_seqs of 1024 on an 80 GB GPU.
    const double batch = num(j, "batch");
    CHECK(batch == std::min(num(j, "max_concurrency"), 1024.0));
    // Steady state: throughput = batch / ITL, requests = throughput / 256 output tokens; the mixed iteration is never
    // shorter than the decode-only step.
    CHECK(num(j, "tokens_per_s") == gptest::approx(batch / num(j, "itl_s")).epsilon(1e-12));
    CHECK(num(j, "requests_per_s") == gptest::approx(num(j, "tokens_per_s") / 256.0).epsilon(1e-12));
    CHECK(num(j, "itl_s") >= num(j, "decode_step_s"));
    // Batch-1 decode streams at least the 15.0 GB of weights at 3.35 TB/s: ≥ 4.48 ms.
    CHECK(j["points"][0]["decode_step_s"].get<double>() >= 2.0 * 7'504'658'432.0 / 3.35e12);
    // Points: batches 1, 2, 4, … then the operating batch; each obeys throughput = batch / ITL, the decode-only step
    // never falls with the batch.
    double expected_b = 1, prev_step = 0;
    const auto& pts = j["points"];
    for (std::size_t i = 0; i < pts.size(); ++i) {
      CAPTURE(i);
      const auto& p = pts[i];
      const double b = p["batch"].get<double>();
      if (i + 1 < pts.size()) CHECK(b == expected_b);
      else CHECK(b == batch);
      expected_b *= 2;
      CHECK(p["tokens_per_s"].get<double>() == gptest::approx(b / p["itl_s"].get<double>()).epsilon(1e-12));
      CHECK(p["requests_per_s"].get<double>() == gptest::approx(p["tokens_per_s"].get<double>() / 256.0).epsilon(1e-12));
      CHECK(p["itl_s"].get<double>() >= p["decode_step_s"].get<double>());
      CHECK(p["decode_step_s"].get<double>() >= prev_step);
      prev_step = p["decode_step_s"].get<double>();
    }
    // The resolved names are notes on stderr, never in the JSON.
    CHECK(contains(r.err, "--gpu: note: 'h100' is h100-sxm5-80gb"));
    CHECK(errors(r.err).empty());
  }

  TEST_CASE("fp8 KV halves the KV bytes per token (65536) - --batch sets the operating batch, above capacity a note") {
    const Run r = run({"serve", "-m", "llama-3.1-8b", "--kv-dtype", "fp8", "--batch", "5", "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(num(j, "kv_bytes_per_token") == 65536.0);
    CHECK(num(j, "batch") == 5);
    CHECK(j["kv_dtype"] == "fp8");
    const Run big = run({"serve", "-m", "llama-3.1-8b", "--batch", "100000", "--format", "json"});
    INFO(big.err);
    REQUIRE(big.rc == 0);
    const json b = parse_json(big);
    const auto cap = static_cast<long long>(std::min(num(b, "max_concurrency"), 1024.0));
    CHECK(num(b, "batch") == double(cap));
    // 1024 in + 256 out = 1280 tokens per sequence.
    CHECK(contains(big.err, "--batch: note: 100000 exceeds the KV capacity of " + std::to_string(cap) +
                                " sequences at 1280 tokens; using " + std::to_string(cap) + "\n"));
  }

  TEST_CASE("planner: --tp and --pp pin the replica layout") {
    const Run r = run(with(planner_args("50"), {"--tp", "4", "--pp", "2", "--format", "json"}));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    REQUIRE(j["best"].is_object());
    CHECK(j["best"]["tp"].get<int>() == 4);
    CHECK(j["best"]["pp"].get<int>() == 2);
    CHECK(num(j, "gpus") == num(j, "replicas") * 8.0);
    for (const auto& c : j["per_tp"]) CHECK(c["pp"].get<int>() == 2);
  }

  TEST_CASE("speculative verification runs on each pipeline micro-batch: at α = 0, γ = 1 and no draft cost the step "
            "is one verify pass of 2 tokens per sequence, close to the decode step at every PP") {
    for (const char* pp : {"1", "2", "4"}) {
      CAPTURE(pp);
      const Run r = run({"serve", "-m", "llama-3.1-8b", "--gpu", "h100-sxm5-80gb", "--tp", "1", "--pp", pp, "--batch",
                         "64", "--spec-acceptance", "0", "--spec-tokens", "1", "--draft-ms", "0", "--format", "json"});
      INFO(r.err);
      REQUIRE(r.rc == 0);
      const json j = parse_json(r);
      const double step = j["speculative"]["step_s"].get<double>(), decode = num(j, "decode_step_s");
      CHECK(step >= decode);
      CHECK(step <= decode * 1.10);  // 2 queries per sequence instead of 1: a little more, never a whole step more
      CHECK(j["speculative"]["speedup"].get<double>() > 0.9);
    }
  }

  TEST_CASE("planner: Llama 3.1 70B at 20 req/s within TTFT 1 s and ITL 50 ms - exit 0, GPUs, replicas, $/Mtok") {
    const Run r = run(with(planner_args("50"), {"--format", "json"}));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(j["feasible"] == true);
    CHECK(j["reasons"].empty());
    const double gpus = num(j, "gpus"), replicas = num(j, "replicas");
    REQUIRE(j["best"].is_object());
    const json& b = j["best"];
    CHECK(b["meets_sla"] == true);
    CHECK(gpus == replicas * b["tp"].get<double>() * b["pp"].get<double>());
    CHECK(gpus == b["gpus"].get<double>());
    // 70B bf16 needs TP ≥ 2 on 80 GB.
    CHECK(b["tp"].get<int>() >= 2);
    CHECK(num(j, "itl_s") <= 0.050);
    CHECK(num(j, "ttft_s") <= 1.0);
    // Enough replicas for 20 req/s, and not one more: replicas = ⌈20 / λ_r⌉.
    const double lam_r = b["replica_requests_per_s"].get<double>();
    CHECK(replicas * lam_r >= 20.0);
    CHECK((replicas - 1) * lam_r < 20.0);
    CHECK(num(j, "cost_per_mtok_usd") == gptest::approx(h100_cost_per_mtok(gpus)).epsilon(1e-9));
    CHECK(b["cost_per_hour_usd"].get<double>() == gptest::approx(gpus * 2.69).epsilon(1e-9));
    // 80 layers × 2 × 8 × 128 × 2 B.
    CHECK(num(j, "kv_bytes_per_token") == 327680.0);
    CHECK(j["sla"]["ttft_s"].get<double>() == gptest::approx(1.0));
    CHECK(j["sla"]["itl_s"].get<double>() == gptest::approx(0.05));
    CHECK(j["sla"]["percentile"].get<double>() == gptest::approx(0.99));
    // The cheapest: no TP size meets the SLA with fewer GPUs.
    REQUIRE(j["per_tp"].is_array());
    CHECK_FALSE(j["per_tp"].empty());
    for (const auto& c : j["per_tp"]) {
      CAPTURE(c.dump());
      CHECK(c["gpus"].get<double>() == c["replicas"].get<double>() * c["tp"].get<double>() * c["pp"].get<double>());
      if (c["meets_sla"] == true) CHECK(c["gpus"].get<double>() >= gpus);
      CHECK(c["batch"].get<double>() <= c["max_concurrency"].get<double>());
    }
  }

  TEST_CASE("planner: --price sets the $/GPU-hour, --disaggregated splits GPUs into prefill + decode pools") {
    const Run r = run(with(planner_args("50"), {"--price", "4", "--disaggregated", "--format", "json"}));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(num(j, "cost_per_mtok_usd") == gptest::approx(h100_cost_per_mtok(num(j, "gpus"), 20, 500, 4.0)).epsilon(1e-9));
    REQUIRE(j.contains("disaggregated"));
    const json& d = j["disaggregated"];
    CHECK(d["prefill_gpus"].get<double>() + d["decode_gpus"].get<double>() == d["gpus"].get<double>());
    CHECK(d["prefill_gpus"].get<double>() >= 1);
    CHECK(d["decode_gpus"].get<double>() >= 1);
    CHECK(d["kv_transfer_s"].get<double>() > 0);
    CHECK(d["cost_per_mtok_usd"].get<double>() ==
          gptest::approx(h100_cost_per_mtok(d["gpus"].get<double>(), 20, 500, 4.0)).epsilon(1e-9));
  }

  TEST_CASE("planner: an ITL of 1 ms is exit 3, feasible false, with the reasons and the best achievable") {
    const Run r = run(with(planner_args("1"), {"--format", "json"}));
    INFO(r.err);
    CHECK(r.rc == kInfeasible);
    const json j = parse_json(r);
    CHECK(j["feasible"] == false);
    REQUIRE(j["reasons"].is_array());
    REQUIRE_FALSE(j["reasons"].empty());
    CHECK(starts_with(j["reasons"][0].get<std::string>(), "best achievable misses: ITL "));
    REQUIRE(j["best"].is_object());
    CHECK(j["best"]["meets_sla"] == false);
    // A 70B step reads at least 139 GB / 8 GPUs at 3.35 TB/s = 5.2 ms per token.
    CHECK(num(j, "itl_s") > 139e9 / 8 / 3.35e12);
    // Text: the same verdict, no NaN or infinity anywhere.
    const Run t = run(planner_args("1"));
    CHECK(t.rc == kInfeasible);
    CHECK(contains(t.out, "No layout meets the SLA — best achievable"));
    CHECK(contains(t.out, "reason"));
    CHECK_FALSE(has_nan_or_inf(t.out));
  }

  TEST_CASE("bad input is exit 2 with the flag named in the diagnostic") {
    struct Bad {
      std::vector<std::string> args;
      std::vector<std::string> expected;
    };
    const std::vector<Bad> cases{
        {{"--spec-acceptance", "0.8", "--draft-ms", "2"},
         {"--spec-tokens: error: speculative decoding needs both --spec-acceptance and --spec-tokens"}},
        {{"--spec-tokens", "4", "--draft-ms", "2"},
         {"--spec-acceptance: error: speculative decoding needs both --spec-acceptance and --spec-tokens"}},
        // Neither the other half nor the draft's cost: both are named.
        {{"--spec-acceptance", "0.8"},
         {"--spec-tokens: error: speculative decoding needs both --spec-acceptance and --spec-tokens",
          "--draft-model: error: speculative decoding needs the draft's cost: --draft-model ID or --draft-ms"}},
        {{"--spec-acceptance", "1.5", "--spec-tokens", "4", "--draft-ms", "1"},
         {"--spec-acceptance: error: must be a probability in [0, 1]"}},
        {{"--compute", "fp8"}, {"--compute: error: fp8 GEMMs need fp8 weights (--weight-dtype fp8), not bf16"}},
        {{"--rate", "0"}, {"--rate: error: must be > 0 requests/s"}},
        {{"--rate", "-3"}, {"--rate: error: must be > 0 requests/s"}},
        {{"--percentile", "100"}, {"--percentile: error: must be in (0, 100), e.g. 99"}},
        {{"--percentile", "0"}, {"--percentile: error: must be in (0, 100), e.g. 99"}},
        {{"--ttft-ms", "0"}, {"--ttft-ms: error: must be > 0"}},
        {{"--itl-ms", "-1"}, {"--itl-ms: error: must be > 0"}},
        {{"--ep", "2"}, {"--ep: error: EP needs a mixture-of-experts model"}},
        {{"--step-overhead-ms", "-1"}, {"--step-overhead-ms: error: must be ≥ 0"}},
    };
    for (const auto& c : cases) {
      auto args = with({"serve", "-m", "llama-3.1-8b", "--node", "dgx-h100"}, c.args);
      const Run r = run(args);
      CAPTURE(r.err);
      CAPTURE(c.expected.front());
      CHECK(r.rc == kInvalid);
      CHECK(errors(r.err) == c.expected);
      CHECK(r.out.empty());
    }
  }

  TEST_CASE("bad input on other models and GPUs: EP that does not divide, fp8 on a GPU without fp8, unknown model") {
    // Mixtral has 8 experts; EP 3 divides neither them nor TP 1.
    const Run ep = run({"serve", "-m", "mixtral-8x7b", "--node", "dgx-h100", "--ep", "3"});
    CHECK(ep.rc == kInvalid);
    CHECK(errors(ep.err) == std::vector<std::string>{"--ep: error: EP 3 must divide the 8 experts and TP 1"});
    // A100 has no fp8 tensor cores.
    const Run a100 = run({"serve", "-m", "llama-3.1-8b", "--gpu", "a100-sxm4-80gb", "--weight-dtype", "fp8",
                          "--compute", "fp8"});
    CHECK(a100.rc == kInvalid);
    CHECK(errors(a100.err) == std::vector<std::string>{"--compute: error: a100-sxm4-80gb has no fp8 tensor cores"});
    // Unknown model: named before any hardware is resolved, with the closest library id.
    const Run m = run({"serve", "-m", "mixtral-8x7", "--gpu", "h100"});
    CHECK(m.rc == kInvalid);
    CHECK(m.err ==
          "--model: error: unknown model 'mixtral-8x7' (did you mean 'mixtral-8x7b'?); `gpuplan model list` shows the "
          "library, or give a path to a config.json\n");
    CHECK(m.out.empty());
    // A flag value that is a number but not a rate.
    const Run rate = run({"serve", "-m", "llama-3.1-8b", "--node", "dgx-h100", "--rate", "0", "--format", "json"});
    CHECK(rate.rc == kInvalid);
    CHECK(rate.out.empty());
  }

  TEST_CASE("speculative decoding: a 0.8, g 5, draft 2 ms - 3.689 tokens per step and a Speculative decoding section") {
    const auto args = std::vector<std::string>{"serve", "-m", "llama-3.1-8b", "--batch", "8", "--spec-acceptance",
                                               "0.8", "--spec-tokens", "5", "--draft-ms", "2"};
    const Run r = run(with(args, {"--format", "json"}));
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    REQUIRE(j.contains("speculative"));
    const json& s = j["speculative"];
    // (1 − 0.8^6) / 0.2 = 3.68928.
    CHECK(s["tokens_per_step"].get<double>() == gptest::approx(3.68928).epsilon(1e-9));
    // step = γ·t_draft + t_verify, with t_verify over 6 tokens per sequence ≥ the 1-token decode step.
    const double step = s["step_s"].get<double>(), target = num(j, "decode_step_s");
    CHECK(step >= 5 * 2e-3 + target);
    CHECK(s["per_token_s"].get<double>() == gptest::approx(step / 3.68928).epsilon(1e-9));
    // speedup = E·t_target / step.
    CHECK(s["speedup"].get<double>() == gptest::approx(3.68928 * target / step).epsilon(1e-9));
    // Verification at batch 8 is still bandwidth-bound: t_verify < 2 × t_target, so the speedup exceeds
    // 3.689 × t / (0.010 + 2t) with t ≥ 4.48 ms: > 1.
    CHECK(step - 5 * 2e-3 < 2 * target);
    CHECK(s["speedup"].get<double>() > 1.0);
    // A free draft leaves step = t_verify: the 2 ms draft adds exactly γ × 2 ms = 10 ms to the step.
    auto free_draft = args;
    free_draft.back() = "0";
    const Run f = run(with(free_draft, {"--format", "json"}));
    REQUIRE(f.rc == 0);
    const json fj = parse_json(f);
    CHECK(step - fj["speculative"]["step_s"].get<double>() == gptest::approx(5 * 2e-3).epsilon(1e-9));
    CHECK(fj["speculative"]["speedup"].get<double>() ==
          gptest::approx(3.68928 * target / fj["speculative"]["step_s"].get<double>()).epsilon(1e-9));
    const Run t = run(args);
    REQUIRE(t.rc == 0);
    CHECK(contains(t.out, "\nSpeculative decoding\n"));
    CHECK(contains(t.out, "tokens per step  3.69\n"));
    CHECK_FALSE(has_nan_or_inf(t.out));
    // Without speculation there is no such section or key.
    const Run plain = run({"serve", "-m", "llama-3.1-8b", "--batch", "8"});
    CHECK_FALSE(contains(plain.out, "Speculative decoding"));
  }

  TEST_CASE("speculative decoding with a draft model from the library costs the draft's own decode step") {
    const Run r = run({"serve", "-m", "llama-3.1-8b", "--batch", "8", "--spec-acceptance", "0.7", "--spec-tokens", "4",
                       "--draft-model", "smollm2-360m", "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    REQUIRE(j.contains("speculative"));
    // (1 − 0.7^5) / 0.3 = 2.77310.
    CHECK(j["speculative"]["tokens_per_step"].get<double>() == gptest::approx((1 - std::pow(0.7, 5)) / 0.3).epsilon(1e-9));
    // The 360M draft's step is positive and far below the 8B target's: step − t_verify = 4·t_draft > 0.
    CHECK(j["speculative"]["step_s"].get<double>() > num(j, "decode_step_s"));
    const Run bad = run({"serve", "-m", "llama-3.1-8b", "--node", "dgx-h100", "--spec-acceptance", "0.7", "--spec-tokens",
                         "4", "--draft-model", "smollm2-36m"});
    CHECK(bad.rc == kInvalid);
    REQUIRE(errors(bad.err).size() == 1);
    CHECK(starts_with(errors(bad.err)[0], "--draft-model: error: unknown model 'smollm2-36m' (did you mean 'smollm2-360m'?)"));
  }

  TEST_CASE("DeepSeek-V3 fp8 on H200 TP 8, 31000 in / 1768 out: fits, MLA latent 61 x 576 x 2 B = 70272 B per token") {
    const Run r = run({"serve", "-m", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--weight-dtype", "fp8",
                       "--input-tokens", "31000", "--output-tokens", "1768", "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(j["gpu"] == "h200-sxm-141gb");
    CHECK(j["tp"] == 8);
    // fp8 weights on a GPU with fp8 tensor cores: fp8 GEMMs by default.
    CHECK(j["compute"] == "fp8");
    // The latent (512) and the rotary key (64) per layer, bf16: 61 × 576 × 2 = 70,272 B.
    CHECK(num(j, "kv_bytes_per_token") == 61.0 * (512 + 64) * 2);
    CHECK(num(j, "kv_bytes_per_token") == 70272.0);
    CHECK(num(j, "max_concurrency") >= 1);
    CHECK(num(j, "batch") >= 1);
    CHECK(num(j, "batch") <= num(j, "max_concurrency"));
    for (const std::string k : {"ttft_s", "itl_s", "tokens_per_s", "decode_step_s", "request_latency_s"}) {
      CAPTURE(k);
      CHECK(std::isfinite(num(j, k)));
      CHECK(num(j, k) > 0);
    }
    // 31000 prompt tokens run in 4 chunks of the 8192-token budget: TTFT is well above one decode step.
    CHECK(num(j, "ttft_s") > num(j, "decode_step_s"));
  }

  TEST_CASE("serve --format md and csv carry the table headers - text has no nan or inf") {
    const Run md = run({"serve", "-m", "llama-3.1-8b", "--format", "md"});
    REQUIRE(md.rc == 0);
    CHECK(starts_with(md.out, "## Serving Llama 3.1 8B on h100-sxm5-80gb (TP 1 × PP 1)\n"));
    CHECK(contains(md.out, "\n### Throughput vs batch\n\n"));
    CHECK(contains(md.out, "| batch | ITL s | decode-only step s | TTFT s | output tok/s | req/s |\n"));
    const Run csv = run({"serve", "-m", "llama-3.1-8b", "--format", "csv"});
    REQUIRE(csv.rc == 0);
    const auto rows = lines(csv.out);
    REQUIRE(rows.size() >= 2);
    CHECK(rows[0] == "batch,itl_s,decode_step_s,ttft_s,tokens_per_s,requests_per_s");
    CHECK(starts_with(rows[1], "1,"));
    for (std::size_t i = 1; i < rows.size(); ++i) {
      CAPTURE(rows[i]);
      CHECK(std::count(rows[i].begin(), rows[i].end(), ',') == 5);
      CHECK_FALSE(has_nan_or_inf(rows[i]));
    }
    // The planner's renderings.
    const Run pmd = run(with(planner_args("50"), {"--format", "md"}));
    REQUIRE(pmd.rc == 0);
    CHECK(contains(pmd.out, "## Answer\n"));
    CHECK(contains(pmd.out, "\n### Best batch per TP size\n\n"));
    CHECK(contains(pmd.out, "| TP | batch | KV cap | TTFT | ITL | req/s/replica | GPUs | $/Mtok | SLA |\n"));
    const Run pcsv = run(with(planner_args("50"), {"--format", "csv"}));
    REQUIRE(pcsv.rc == 0);
    CHECK(starts_with(pcsv.out,
                      "tp,pp,batch,max_concurrency,ttft_s,itl_s,tokens_per_s,replicas,gpus,cost_per_mtok_usd,meets_sla\n"));
    // Text, also with the derivations, for a dense, an MoE and an MLA model.
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"serve", "-m", "llama-3.1-8b"},
             {"serve", "-m", "llama-3.1-8b", "--explain"},
             {"serve", "-m", "mixtral-8x7b", "--tp", "2", "--ep", "2", "--explain"},
             {"serve", "-m", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--weight-dtype", "fp8", "--input-tokens",
              "31000", "--output-tokens", "1768"},
             {"serve", "-m", "llama-3.1-8b", "--enforce-eager", "--input-tokens", "100000", "--output-tokens", "10"},
             with(planner_args("50"), {"--explain", "--disaggregated"})}) {
      const Run t = run(args);
      CAPTURE(args.size());
      CAPTURE(t.err);
      CHECK(t.rc == 0);
      CHECK(starts_with(t.out, "Serving "));
      CHECK_FALSE(has_nan_or_inf(t.out));
    }
  }
}

TEST_CASE("serve --input-dist / --output-dist: the planner takes distributions, bad specs exit 2 naming the flag") {
  const Run ok = run({"serve", "-m", "llama-3.1-70b", "--gpu", "h100", "--rate", "10", "--input-dist",
                      "lognormal:2048,1500", "--output-dist", "200:0.5,800:0.5", "--ttft-ms", "3000", "--itl-ms", "50"});
  INFO(ok.err);
  REQUIRE(ok.rc == 0);
  CHECK(contains(ok.out, "request lengths: mean"));
  CHECK(contains(ok.out, "out; the prompt at p99 has"));
  CHECK(contains(ok.out, "500 out"));  // the output mean: (200 + 800) / 2
  for (const auto& [spec, why] : std::vector<std::pair<std::string, std::string>>{
           {"lognormal:2048", "lognormal takes MEAN,SD"},
           {"lognormal:0.5,10", "the mean must be 1 to 10000000 tokens and the standard deviation 0 to 10000000"},
           {"lognormal:1000,2e7", "the mean must be 1 to 10000000 tokens and the standard deviation 0 to 10000000"},
           {"100:0.5,x", "'x' is not TOKENS:WEIGHT"},
           {"100.5:1", "'100.5:1': tokens must be a whole number from 1 to 10000000 and the weight > 0"},
           {"100:0", "'100:0': tokens must be a whole number from 1 to 10000000 and the weight > 0"},
           {"20000000:1", "'20000000:1': tokens must be a whole number from 1 to 10000000 and the weight > 0"},
           {"1:1e308,2:1e308", "the weights add up to more than a double holds"}}) {
    const auto& captured_spec = spec;  // clang 14: no structured binding in CAPTURE's lambda
    CAPTURE(captured_spec);
    const Run r = run({"serve", "-m", "llama-3.1-8b", "--gpu", "h100", "--rate", "1", "--input-dist", spec});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--input-dist: error: '" + spec + "': " + why));
  }
}

TEST_CASE("serve --concurrency: closed-loop users size the deployment - the rate follows from the latency") {
  const Run r = run({"serve", "-m", "llama-3.1-70b", "--gpu", "h100", "--concurrency", "256", "--input-tokens", "2048",
                     "--output-tokens", "500", "--ttft-ms", "1000", "--itl-ms", "50", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const json j = parse_json(r);
  CHECK(j["feasible"] == true);
  CHECK(j["traffic"]["concurrency"] == 256);
  CHECK(j["traffic"]["think_time_s"] == 0.0);
  const json& b = j["best"];
  // λ = N / (TTFT + R + (osl − 1) · ITL) at the chosen layout; replicas hold it; no queueing for a batch slot.
  const double lam = j["traffic"]["requests_per_s"].get<double>();
  CHECK(lam > 0);
  const double replicas = b["replicas"].get<double>(), lam_r = b["replica_requests_per_s"].get<double>();
  CHECK(replicas * lam_r >= lam);
  CHECK((replicas - 1) * lam_r < lam);
  const Run text = run({"serve", "-m", "llama-3.1-70b", "--gpu", "h100", "--concurrency", "64", "--think-time-s", "30",
                        "--input-tokens", "2048", "--output-tokens", "500", "--ttft-ms", "1000", "--itl-ms", "50"});
  INFO(text.err);
  REQUIRE(text.rc == 0);
  CHECK(contains(text.out, "64 users, think time 30 s (closed loop: "));
  CHECK(contains(text.out, "closed loop: 64 users, think time 30 s: λ = N / (TTFT + R + (osl − 1)·ITL + think time)"));
  // Bad combinations name the flag.
  const Run both = run({"serve", "-m", "llama-3.1-8b", "--gpu", "h100", "--rate", "1", "--concurrency", "2"});
  CHECK(both.rc == kInvalid);
  CHECK(contains(both.err, "--concurrency: error: give either a request rate (open loop) or a concurrency (closed "
                           "loop), not both"));
  const Run think = run({"serve", "-m", "llama-3.1-8b", "--gpu", "h100", "--rate", "1", "--think-time-s", "5"});
  CHECK(think.rc == kInvalid);
  CHECK(contains(think.err, "--think-time-s: error: a think time needs a concurrency (closed-loop users)"));
}
