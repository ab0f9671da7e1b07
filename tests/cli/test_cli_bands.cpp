// Error bands on the command line: train's JSON and text carry the band of the plan's regime, recomputed here by hand
// from data/accuracy/bands.json; a stale band file fails `validate --check-bands`; a malformed one exits 2.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using json = nlohmann::json;
using namespace gpuplan::cli_test;

namespace {
const std::vector<std::string> kTrain = {"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
                                         "--tp", "1", "--pp", "1", "--global-batch", "64", "--micro-batch", "1",
                                         "--seq", "4096", "--zero", "1", "--tokens", "1e12"};

/// The random-effects band of the train/Hopper/dense/1-node cases of the committed band file, by hand: per source
/// the mean log ratio; μ their mean, τ² their sample variance, σ_w² the mean within-source variance;
/// exp(μ ± t(0.9; k−1)·√(τ²(1 + 1/k) + σ_w²)). Returns {p10, p90, k}.
std::array<double, 3> band_hand(const std::map<std::string, std::vector<double>>& by) {
  const double k = double(by.size());
  double mu = 0, within = 0;
  std::vector<double> means;
  for (const auto& kv : by) {
    double m = 0, v = 0;
    for (double x : kv.second) m += x / double(kv.second.size());
    for (double x : kv.second) v += (x - m) * (x - m) / double(kv.second.size());
    means.push_back(m);
    mu += m / k;
    within += v / k;
  }
  double tau2 = 0;
  for (double m : means) tau2 += (m - mu) * (m - mu) / (k - 1);
  // t(0.90; df) for df = 1 … 12, from a statistics table.
  static const double t90[] = {3.078, 1.886, 1.638, 1.533, 1.476, 1.440, 1.415, 1.397, 1.383, 1.372, 1.363, 1.356};
  REQUIRE(by.size() >= 2);
  REQUIRE(by.size() <= 13);
  const double half = t90[by.size() - 2] * std::sqrt(tau2 * (1 + 1 / k) + within);
  return {std::exp(mu - half), std::exp(mu + half), k};
}
}  // namespace

TEST_SUITE("error bands") {
  TEST_CASE("train --format json: step time, tokens/s, time to train and cost bands are [p10, p90] of the regime") {
    std::ifstream in(kData + "/accuracy/bands.json");
    REQUIRE(in);
    const json file = json::parse(in);
    std::map<std::string, std::vector<double>> by;  // source group -> log ratios
    std::size_t n = 0;
    for (const auto& c : file["cases"])
      if (c["kind"] == "train" && c["generation"] == "Hopper" && c["arch"] == "dense" && c["scale"] == "1 node") {
        by[c["group"].get<std::string>()].push_back(std::log(c["time_ratio"].get<double>()));
        ++n;
      }
    REQUIRE(n >= 5);  // the regime is not thin: no fallback expected
    REQUIRE(by.size() >= 3);
    const Run r = run([] {
      auto a = kTrain;
      a.insert(a.end(), {"--format", "json"});
      return a;
    }());
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    const auto hand = band_hand(by);
    const double t = j["step_time_s"].get<double>(), p10 = hand[0], p90 = hand[1];
    CHECK(j["band"]["regime"] == "train Hopper dense 1 node");
    CHECK(j["band"]["cases"] == n);
    CHECK(j["band"]["fallback"] == "");
    CHECK(j["band"]["p10"].get<double>() == gptest::approx(p10));
    CHECK(j["band"]["p90"].get<double>() == gptest::approx(p90));
    for (const char* k : {"step_time_s_band", "tokens_per_s_band", "time_to_train_s_band", "gpu_hours_band", "cost_usd_band"}) {
      CAPTURE(k);
      REQUIRE(j.contains(k));
      REQUIRE(j[k].size() == 2);
      CHECK(j[k][0].get<double>() <= j[k][1].get<double>());
    }
    CHECK(j["step_time_s_band"][0].get<double>() == gptest::approx(t * p10));
    CHECK(j["step_time_s_band"][1].get<double>() == gptest::approx(t * p90));
    // A rate's band is the time band inverted: tokens/s × 1/p90 … × 1/p10.
    CHECK(j["tokens_per_s_band"][0].get<double>() == gptest::approx(j["tokens_per_s"].get<double>() / p90));
    CHECK(j["cost_usd_band"][1].get<double>() == gptest::approx(j["cost_usd"].get<double>() * p90));
  }

  TEST_CASE("train text prints the band beside the step time with its regime and case count") {
    const Run r = run(kTrain);
    REQUIRE(r.rc == 0);
    CHECK(contains(r.out, "(p10–p90: "));
    CHECK(contains(r.out, "train Hopper dense 1 node, "));
  }

  TEST_CASE("validate --check-bands passes on a fresh file and fails, naming the case, when a ratio moved") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / ("gpuplan-bands-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string f = (dir / "bands.json").string();
    REQUIRE(run({"validate", "--write-bands", f}).rc == 0);
    CHECK(run({"validate", "--check-bands", f}).rc == 0);
    std::ifstream in(f);
    json j = json::parse(in);
    in.close();
    REQUIRE(!j["cases"].empty());
    const std::string id = j["cases"][0]["id"];
    j["cases"][0]["time_ratio"] = j["cases"][0]["time_ratio"].get<double>() * 1.01;
    j["generated"]["commit"] = "something-else";  // never compared
    std::ofstream(f) << j.dump(1);
    const Run stale = run({"validate", "--check-bands", f});
    CHECK(stale.rc == 1);
    CHECK(contains(stale.err, "is stale"));
    CHECK(contains(stale.err, "case " + id + ": time ratio"));
    CHECK(contains(stale.err, "--write-bands"));
    // A malformed file is a diagnostic with its pointer, exit 2.
    j["cases"][0]["time_ratio"] = -1;
    std::ofstream(f) << j.dump(1);
    const Run bad = run({"validate", "--check-bands", f});
    CHECK(bad.rc == 2);
    CHECK(contains(bad.err, "/cases/0/time_ratio"));
    fs::remove_all(dir);
  }
}
