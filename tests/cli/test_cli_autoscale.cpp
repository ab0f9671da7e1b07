// End-to-end tests of `gpuplan autoscale`: the diagnostics of bad policy and load parameters (exit 2, naming the flag
// or the scenario file's pointer, the value as typed and the rule), a short run's JSON (GPU-hours = the fixed fleet's
// replicas × TP × hours; cost = GPU-hours × the hardware file's on-demand price), the CSV series, and the bundled
// day scenario's file checked without running the day (a bad override names its pointer).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

namespace {

std::vector<std::string> errors_of(const std::string& err) {
  std::vector<std::string> v;
  for (const auto& l : lines(err))
    if (contains(l, ": error: ")) v.push_back(l);
  return v;
}

std::vector<std::string> base(std::vector<std::string> more) {
  std::vector<std::string> a{"autoscale", "-m", "llama-3.1-8b", "--no-calibration", "--rate-points", "0:2,1:2",
                             "--hours", "0.05", "--target", "8", "--ttft-ms", "1000", "--itl-ms", "50"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

std::string day_scenario() { return kData + "/scenarios/llama-3.1-70b-chat-autoscale.json"; }

}  // namespace

TEST_CASE("autoscale: bad policy parameters name the flag, the value and the rule, exit 2") {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases{
      {{"--min-replicas", "5", "--max-replicas", "3"}, "--max-replicas: error: max_replicas 3 is below min_replicas 5"},
      {{"--min-replicas", "0"}, "--min-replicas: error: 0 is not a replica count in [1, 100000] (min_replicas)"},
      {{"--initial-replicas", "9", "--max-replicas", "4"},
       "--initial-replicas: error: initial_replicas 9 is above max_replicas 4"},
      {{"--scale-up-at", "6"}, "--scale-up-at: error: 6 is below the target 8: scale up at or above the target"},
      {{"--scale-down-at", "9"}, "--scale-down-at: error: 9 is above the target 8: scale down at or below the target"},
      {{"--cold-start-s", "-1"}, "--cold-start-s: error: -1 is not a cold start in [0, 604800] seconds"},
      {{"--interval-s", "0"}, "--interval-s: error: 0 is not an evaluation interval in (0, 604800] seconds"},
      {{"--metric", "latency"}, "--metric: error: 'latency' is not a scaling metric (queue or utilisation)"},
      {{"--metric", "utilisation"}, "--target: error: 8 is not a KV utilisation in (0, 1]"},
      {{"--down-cooldown-s", "-5"}, "--down-cooldown-s: error: -5 is not a cooldown in [0, 604800] seconds"},
      {{"--e2e-ms", "0"}, "--e2e-ms: error: 0 is not an E2E target in (0, 10⁹) ms"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.message);
    const Run r = run(base(c.flags));
    CHECK(r.rc == kInvalid);
    const auto e = errors_of(r.err);
    REQUIRE(e.size() == 1);
    CHECK(contains(e[0], c.message));
  }
}

TEST_CASE("autoscale: bad load parameters name the flag, the value and the rule, exit 2") {
  Run r = run({"autoscale", "-m", "llama-3.1-8b", "--target", "8"});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--peak-rate: error: give the load: a diurnal curve (--peak-rate and --trough-rate)"));
  r = run({"autoscale", "-m", "llama-3.1-8b", "--target", "8", "--peak-rate", "10", "--trough-rate", "20"});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--trough-rate: error: the trough 20 is above the peak 10 requests/s"));
  r = run({"autoscale", "-m", "llama-3.1-8b", "--target", "8", "--rate-points", "0:5,3:x"});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--rate-points: error: '3:x' is not HOUR:RATE (e.g. 0:10,14:50,24:10)"));
  r = run({"autoscale", "-m", "llama-3.1-8b", "--target", "8", "--rate-points", "2:5,1:5"});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--rate-points: error: point 2: hour 1 does not come after 2"));
}

TEST_CASE("autoscale: a bad key of the scenario file is named by its pointer, and a flag overrides the file") {
  const auto dir = std::filesystem::temp_directory_path() / "gpuplan-test-autoscale";
  std::filesystem::create_directories(dir);
  auto j = nlohmann::json::parse(slurp(day_scenario()));
  j["autoscale"]["min_replicas"] = 30;  // above max_replicas 24
  j["load"]["peak_hour"] = 25;
  const auto path = (dir / "bad.json").string();
  std::ofstream(path) << j.dump(2);
  Run r = run({"autoscale", "--scenario", path});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, path + ": /autoscale/max_replicas: error: max_replicas 24 is below min_replicas 30"));
  CHECK(contains(r.err, path + ": /load/peak_hour: error: 25 is not an hour in [0, 24)"));
  j["autoscale"]["min_replicas"] = 2;
  j["load"]["peak_hour"] = 14;
  j["serving"]["prefix_hit_rate"] = 1.5;
  std::ofstream(path) << j.dump(2);
  r = run({"autoscale", "--scenario", path});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, path + ": /serving/prefix_hit_rate: error: 1.5 is not a fraction of prompt tokens in [0, 1)"));
  j["serving"]["prefix_hit_rate"] = 0.5;
  j["serving"]["rate"] = 4;
  std::ofstream(path) << j.dump(2);
  r = run({"autoscale", "--scenario", path});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, path + ": /serving/rate: error: the load curve gives the rates"));
  j["serving"].erase("rate");
  j["autoscale"]["colds_start_s"] = 1;
  std::ofstream(path) << j.dump(2);
  r = run({"autoscale", "--scenario", path});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "/autoscale/colds_start_s"));
  // A flag overrides the file and is named in its place.
  j["autoscale"].erase("colds_start_s");
  std::ofstream(path) << j.dump(2);
  r = run({"autoscale", "--scenario", path, "--max-replicas", "1"});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--max-replicas: error: max_replicas 1 is below min_replicas 2"));
}

TEST_CASE("autoscale: a fixed-rate hour's JSON — the fixed fleet pays replicas × TP × hours at the on-demand price") {
  const Run r = run(base({"--format", "json", "--series-s", "60"}));
  REQUIRE(r.rc == 0);
  const auto j = parse_json(r);
  const double hours = 0.05;
  const auto fixed = j["fixed"];
  const double replicas = fixed["replicas"].get<double>();
  CHECK(replicas >= 1);
  // Paid from 00:00 until the last answer (just after the last arrival, within the 3-minute hour's end + E2E).
  const double end_h = fixed["end_s"].get<double>() / 3600.0;
  CHECK(end_h >= hours);
  CHECK(end_h < hours + 60.0 / 3600.0);
  CHECK(fixed["gpu_hours"].get<double>() == gptest::approx(replicas * 1 * end_h).epsilon(1e-9));
  CHECK(j["price"]["kind"] == "on-demand");
  const double price = j["price"]["usd_per_gpu_hour"].get<double>();
  CHECK(j["autoscaled"]["cost_usd"].get<double>() ==
        gptest::approx(j["autoscaled"]["gpu_hours"].get<double>() * price).epsilon(1e-9));
  CHECK(fixed["scale_ups"] == 0);
  CHECK(fixed["completed"] == fixed["requests"]);
  CHECK(j["autoscaled"]["series"].size() == 3);  // 0, 60, 120 s of 180 s
  CHECK(j["policy"]["scale_up_at"] == 8);         // the defaults: the target, and 0.7 of it
  CHECK(j["policy"]["scale_down_at"].get<double>() == gptest::approx(5.6));
}

TEST_CASE("autoscale: csv prints the time series, md and text the comparison") {
  Run r = run(base({"--format", "csv", "--series-s", "60"}));
  REQUIRE(r.rc == 0);
  const auto l = lines(r.out);
  REQUIRE(l.size() == 4);
  CHECK(starts_with(l[0], "t_s,arrivals_per_s,ready,starting,draining,running,waiting,metric,ttft_p_s"));
  CHECK(starts_with(l[2], "60,"));
  r = run(base({"--format", "md"}));
  REQUIRE(r.rc == 0);
  CHECK(contains(r.out, "GPU-hours"));
  CHECK(contains(r.out, "minutes in violation"));
  CHECK(contains(r.out, "## Time series"));
}
