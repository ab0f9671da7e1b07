// End-to-end tests of `gpuplan simulate`: trace replay of the Azure 2023 and BurstGPT layouts (the synthetic fixtures
// of tests/fixtures/traces), the exact diagnostics of bad trace rows and bad flags (exit 2), determinism under
// --seed, the JSON keys and their identities (completed = requests, throughput = completed / duration), and the
// time series in CSV.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

namespace {

std::string trace(const std::string& name) {
  return (std::filesystem::path(kData).parent_path() / "tests" / "fixtures" / "traces" / name).string();
}

std::vector<std::string> errors_of(const std::string& err) {
  std::vector<std::string> v;
  for (const auto& l : lines(err))
    if (contains(l, ": error: ")) v.push_back(l);
  return v;
}

}  // namespace

TEST_CASE("simulate replays the synthetic Azure 2023 trace: every request completes, throughput = completed / time") {
  const Run r = run({"simulate", "-m", "llama-3.1-8b", "--no-calibration", "--trace", trace("azure2023_synthetic.csv"),
                     "--format", "json"});
  REQUIRE(r.rc == 0);
  const auto j = parse_json(r);
  CHECK(j["requests"] == 240);
  CHECK(j["completed"] == 240);
  CHECK(j["requests_per_s"].get<double>() ==
        gptest::approx(240.0 / j["duration_s"].get<double>()).epsilon(1e-9));
  CHECK(j["ttft"]["p50_s"].get<double>() <= j["ttft"]["p99_s"].get<double>());
  CHECK(j["e2e"]["p50_s"].get<double>() > j["ttft"]["p50_s"].get<double>());
  CHECK(contains(j["workload"].get<std::string>(), "azure-2023"));
}

TEST_CASE("simulate reads BurstGPT's columns and skips its failed requests with a note") {
  const Run r = run({"simulate", "-m", "llama-3.1-8b", "--no-calibration", "--trace", trace("burstgpt_small.csv"),
                     "--format", "json"});
  REQUIRE(r.rc == 0);
  CHECK(parse_json(r)["completed"] == 3);
  CHECK(contains(r.err, "burstgpt_small.csv: note: 1 rows with no generated token skipped"));
}

TEST_CASE("bad trace rows name the file, the line, the column, the value and the rule, exit 2") {
  const Run r = run({"simulate", "-m", "llama-3.1-8b", "--no-calibration", "--trace", trace("bad_rows.csv")});
  CHECK(r.rc == kInvalid);
  const auto e = errors_of(r.err);
  REQUIRE(e.size() == 3);
  CHECK(contains(e[0], "bad_rows.csv: line 3, column ContextTokens: error: 'abc': prompt tokens must be an integer ≥ 1"));
  CHECK(contains(e[1], "line 4, column GeneratedTokens: error: '-3': generated tokens must be an integer ≥ 0"));
  CHECK(contains(e[2], "line 5, column TIMESTAMP: error: 'yesterday': not a time"));
}

TEST_CASE("simulate refuses flags it cannot honour, each with its rule, exit 2") {
  auto err = [](std::vector<std::string> more) {
    std::vector<std::string> a{"simulate", "-m", "llama-3.1-8b", "--no-calibration"};
    a.insert(a.end(), more.begin(), more.end());
    const Run r = run(a);
    CHECK(r.rc == kInvalid);
    const auto e = errors_of(r.err);
    return e.empty() ? std::string() : e.front();
  };
  CHECK(contains(err({}), "--rate: error: give the arrival rate in requests per second"));
  CHECK(contains(err({"--rate", "2", "--trace", trace("burstgpt_small.csv")}), "give --trace or --rate, not both"));
  CHECK(contains(err({"--rate", "2", "--arrival", "weibull"}), "'weibull' is not an arrival process"));
  CHECK(contains(err({"--rate", "2", "--cv", "2"}), "Poisson gaps have a coefficient of variation of 1"));
  CHECK(contains(err({"--rate", "2", "--input-lengths", "uniform:500,100"}), "uniform takes LOW,HIGH"));
  CHECK(contains(err({"--rate", "2", "--prefix-hit-rate", "1"}), "not a fraction of prompt tokens in [0, 1)"));
  CHECK(contains(err({"--rate", "2", "--format", "csv"}), "csv prints the time series: give --series-s"));
  CHECK(contains(err({"--rate", "2", "--tp", "2", "--pp", "2"}), "PP micro-batching is not simulated"));
}

TEST_CASE("the same seed gives the same simulation, another seed another") {
  const std::vector<std::string> a{"simulate", "-m",           "llama-3.1-8b", "--no-calibration", "--rate",
                                   "8",        "--requests",   "300",          "--arrival",          "gamma",
                                   "--cv",     "2",            "--input-lengths", "lognormal:800,400", "--format",
                                   "json"};
  const Run r1 = run(a), r2 = run(a);
  REQUIRE(r1.rc == 0);
  CHECK(r1.out == r2.out);
  auto b = a;
  b.insert(b.end(), {"--seed", "7"});
  CHECK(run(b).out != r1.out);
}

TEST_CASE("simulate --format csv prints the time series, one row per interval") {
  const Run r = run({"simulate", "-m", "llama-3.1-8b", "--no-calibration", "--rate", "5", "--requests", "100",
                     "--series-s", "2", "--format", "csv"});
  REQUIRE(r.rc == 0);
  const auto l = lines(r.out);
  REQUIRE(l.size() > 3);
  CHECK(l[0] == "t_s,running,waiting,kv_utilisation,output_tokens_per_s");
  CHECK(starts_with(l[1], "2,"));
  CHECK(starts_with(l[2], "4,"));
}
