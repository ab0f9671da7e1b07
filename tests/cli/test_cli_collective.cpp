// `gpuplan collective` and `gpuplan calibrate import-nccl-tests`: the command prices every held-out NCCL measurement
// exactly as `gpuplan validate` does (same times, same errors, same summary); busbw/algbw follow nccl-tests'
// PERFORMANCE.md; a ring over two tiers matches its formula by hand; an nccl-tests log imports into samples that
// `calibrate fit` fits to the line computed here from the log's own columns.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "test_paths.hpp"
#include "cli_runner.hpp"

using json = nlohmann::json;
using namespace gpuplan::cli_test;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string op_flag(const std::string& op) {
  std::string s = op;
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("gpuplan-test-coll-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

}  // namespace

TEST_SUITE("collective command") {
  TEST_CASE("collective prices every held-out NCCL measurement as validate does: same times, errors and summary") {
    const Run v = run({"validate", "--format", "json"});
    REQUIRE(v.rc == 0);
    const json vj = parse_json(v);
    const json& coll = vj["collectives"];
    REQUIRE(coll["cases"].size() > 500);
    // validate's cases per source file, in the file's order (validate_collectives reads them in that order).
    std::map<std::string, std::vector<json>> by_source;
    for (const auto& c : coll["cases"]) by_source[c["source"].get<std::string>()].push_back(c);
    std::vector<double> errs, errs_cal;
    double max_err = 0, max_cal = 0;
    std::size_t compared = 0;
    for (const auto& entry : by_source) {
      const std::string& source = entry.first;
      const std::vector<json>& cases = entry.second;
      CAPTURE(source);
      REQUIRE(starts_with(source, "data/validation/measured/"));
      const std::string gpu = source.substr(25, source.find('/', 25) - 25);
      std::ifstream in(kData + source.substr(4));
      REQUIRE(in);
      const json file = json::parse(in);
      const json& samples = file["collectives"];
      REQUIRE(samples.size() == cases.size());
      // One command per (op, ranks): the sizes as a list, in file order.
      std::map<std::pair<std::string, int>, std::vector<std::size_t>> groups;
      for (std::size_t i = 0; i < samples.size(); ++i)
        groups[{samples[i]["op"].get<std::string>(), samples[i]["ranks"].get<int>()}].push_back(i);
      for (const auto& [key, idx] : groups) {
        std::string list;
        for (const std::size_t i : idx) {
          // Appended piece by piece: GCC 12 reports a false -Wrestrict on "literal" + std::string (GCC bug 105651).
          if (!list.empty()) list += ',';
          list += std::to_string(samples[i]["bytes"].get<long long>());
        }
        const std::vector<std::string> base = {"collective", "--op", op_flag(key.first), "--gpus",
                                               std::to_string(key.second), "--gpu", gpu, "--bytes", list,
                                               "--format", "json"};
        auto plain = base;
        plain.push_back("--no-calibration");
        const Run rp = run(plain), rc = run(base);
        REQUIRE(rp.rc == 0);
        REQUIRE(rc.rc == 0);
        const json jp = parse_json(rp), jc = parse_json(rc);
        const json& rows_p = idx.size() > 1 ? jp["rows"] : json::array({jp});
        const json& rows_c = idx.size() > 1 ? jc["rows"] : json::array({jc});
        REQUIRE(rows_p.size() == idx.size());
        REQUIRE(rows_c.size() == idx.size());
        for (std::size_t k = 0; k < idx.size(); ++k) {
          const json& vc = cases[idx[k]];
          const double measured = samples[idx[k]]["median_s"].get<double>();
          CAPTURE(vc["id"].get<std::string>());
          REQUIRE(rows_p[k]["size_bytes"].get<double>() == samples[idx[k]]["bytes"].get<double>());
          const double tp = rows_p[k]["time_s"].get<double>(), tc = rows_c[k]["time_s"].get<double>();
          CHECK(tp == gptest::approx(vc["predicted"].get<double>()).epsilon(1e-12));
          CHECK(tc == gptest::approx(vc["predicted_calibrated"].get<double>()).epsilon(1e-12));
          CHECK(tp / measured - 1.0 == gptest::approx(vc["error"].get<double>()).epsilon(1e-9));
          CHECK(tc / measured - 1.0 == gptest::approx(vc["error_calibrated"].get<double>()).epsilon(1e-9));
          errs.push_back(std::fabs(tp / measured - 1.0));
          errs_cal.push_back(std::fabs(tc / measured - 1.0));
          max_err = std::max(max_err, errs.back());
          max_cal = std::max(max_cal, errs_cal.back());
          ++compared;
        }
      }
    }
    CHECK(compared == coll["cases"].size());
    CHECK(median(errs) == gptest::approx(coll["median_abs_error"].get<double>()).epsilon(1e-9));
    CHECK(max_err == gptest::approx(coll["max_abs_error"].get<double>()).epsilon(1e-9));
    CHECK(median(errs_cal) == gptest::approx(coll["median_abs_error_calibrated"].get<double>()).epsilon(1e-9));
    CHECK(max_cal == gptest::approx(coll["max_abs_error_calibrated"].get<double>()).epsilon(1e-9));
  }

  TEST_CASE("algbw = size / time and busbw = algbw x the nccl-tests bus factor of each op") {
    for (const auto& of : std::vector<std::pair<std::string, double>>{{"all-reduce", 2.0 * 63 / 64},
                                                                     {"all-gather", 63.0 / 64},
                                                                     {"reduce-scatter", 63.0 / 64},
                                                                     {"all-to-all", 63.0 / 64},
                                                                     {"send-recv", 1.0}}) {
      const std::string op = of.first;
      const double factor = of.second;
      CAPTURE(op);
      const Run r = run({"collective", "--op", op, "--bytes", "1GiB", "--gpus", "64", "--node", "dgx-h100",
                         "--format", "json"});
      REQUIRE(r.rc == 0);
      const json j = parse_json(r);
      CHECK(j["size_bytes"].get<double>() == 1073741824.0);
      CHECK(j["bus_factor"].get<double>() == gptest::approx(factor));
      CHECK(j["algbw_GBps"].get<double>() == gptest::approx(1073741824.0 / j["time_s"].get<double>() / 1e9));
      CHECK(j["busbw_GBps"].get<double>() == gptest::approx(j["algbw_GBps"].get<double>() * factor));
      // 64 GPUs of 8-GPU nodes: NVLink inside, the NICs across.
      CHECK(j["domains"] == 8);
      CHECK(j["ranks_per_domain"] == 8);
      REQUIRE(j["tiers"].size() == 2);
      CHECK(j["tiers"][0]["level"] == "scale-up");
      CHECK(j["tiers"][1]["level"] == "scale-out");
    }
  }

  TEST_CASE("a ring all-gather over two tiers is t0 + (n-d) a_up + (d-1) a_out + S (n-1)/n / min(BW_up, s BW_out)") {
    const Run r = run({"collective", "--op", "all-gather", "--bytes", "1GiB", "--gpus", "64", "--node", "dgx-h100",
                       "--algo", "ring", "--no-calibration", "--format", "json"});
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    REQUIRE(j["algorithm"] == "ring");
    const json& up = j["tiers"][0];
    const json& out = j["tiers"][1];
    const double n = 64, d = 8, s = 8, S = 1073741824.0;
    const double bw_up = up["bandwidth_GBps_per_gpu"].get<double>() * 1e9 * up["bus_efficiency"].get<double>();
    const double bw_out = out["bandwidth_GBps_per_gpu"].get<double>() * 1e9 * out["bus_efficiency"].get<double>();
    const double t = j["call_latency_us"].get<double>() * 1e-6 + (n - d) * up["latency_us"].get<double>() * 1e-6 +
                     (d - 1) * out["latency_us"].get<double>() * 1e-6 + S * (n - 1) / n / std::min(bw_up, s * bw_out);
    CHECK(j["time_s"].get<double>() == gptest::approx(t).epsilon(1e-9));
  }

  TEST_CASE("a sweep -b/-e/--stepfactor gives nccl-tests' sizes, and text output is nccl-tests' table") {
    const Run r = run({"collective", "--op", "all-reduce", "-b", "1K", "-e", "1G", "--stepfactor", "2", "--gpus", "8", "--gpu",
                       "h100", "--format", "json"});
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    REQUIRE(j["rows"].size() == 21);
    for (std::size_t k = 0; k < 21; ++k) {
      CHECK(j["rows"][k]["size_bytes"].get<double>() == 1024.0 * std::pow(2.0, double(k)));
      CHECK(j["rows"][k]["count"].get<double>() == 256.0 * std::pow(2.0, double(k)));  // float elements
    }
    const Run range = run({"collective", "--op", "all-reduce", "--bytes", "1KiB:1GiB", "--gpus", "8", "--gpu", "h100",
                           "--format", "json"});
    REQUIRE(range.rc == 0);
    CHECK(parse_json(range)["rows"] == j["rows"]);
    const Run t = run({"collective", "--op", "all-reduce", "--bytes", "1KiB:1GiB", "--gpus", "8", "--gpu", "h100"});
    REQUIRE(t.rc == 0);
    CHECK(contains(t.out, "#       size         count      type   redop    root     time   algbw   busbw"));
    CHECK(contains(t.out, "        1024           256     float     sum      -1"));
    CHECK(contains(t.out, "# scale-up tier: "));
  }

  TEST_CASE("collective: sizes are rounded down to whole elements per rank piece, as nccl-tests does") {
    const Run r = run({"collective", "--op", "all-gather", "--bytes", "1000", "--gpus", "64", "--node", "dgx-h100",
                       "--format", "json"});
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(j["size_bytes"].get<double>() == 768.0);  // 64 pieces of 3 floats
    CHECK(j["count"].get<double>() == 3.0);
    CHECK(contains(j["notes"][0].get<std::string>(), "rounded down to 768 B"));
  }

  TEST_CASE("collective: bad sizes, ops and algorithms exit 2 naming the flag, and too many GPUs for a cluster exit 3") {
    const Run a = run({"collective", "--op", "all-reduce", "--bytes", "1.5", "--gpus", "8", "--gpu", "h100"});
    CHECK(a.rc == kInvalid);
    CHECK(contains(a.err, "--bytes"));
    CHECK(contains(a.err, "'1.5' is not a size"));
    const Run b = run({"collective", "--op", "allreduce-ish", "--bytes", "1G", "--gpus", "8", "--gpu", "h100"});
    CHECK(b.rc == kInvalid);
    CHECK(contains(b.err, "--op"));
    const Run c = run({"collective", "--op", "all-reduce", "--bytes", "1G:1K", "--gpus", "8", "--gpu", "h100"});
    CHECK(c.rc == kInvalid);
    CHECK(contains(c.err, "below the minimum"));
    const Run d = run({"collective", "--op", "all-reduce", "--bytes", "1G", "--gpus", "8", "--gpu", "h100", "--algo",
                       "butterfly"});
    CHECK(d.rc == kInvalid);
    CHECK(contains(d.err, "--algo"));
    const Run e = run({"collective", "--op", "all-reduce", "--bytes", "1G", "--gpus", "8", "--gpu", "h100", "-b", "1K"});
    CHECK(e.rc == kInvalid);
    CHECK(contains(e.err, "not both"));
    const Run f = run({"collective", "--op", "all-reduce", "--bytes", "1G", "--gpus", "4096", "--cluster",
                       "deepseek-v3-h800-2048"});
    CHECK(f.rc == kInfeasible);
    CHECK(contains(f.out, "4096 GPUs do not fit in cluster deepseek-v3-h800-2048 (256 nodes × 8 GPUs)"));
  }

  TEST_CASE("collective --explain carries the derivation of the time") {
    const Run r = run({"collective", "--op", "all-reduce", "--bytes", "1GiB", "--gpus", "16", "--node", "dgx-h100",
                       "--explain", "--format", "json"});
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    REQUIRE(j.contains("derivation"));
    CHECK(j["derivation"]["id"] == "collective.all_reduce");
    const Run t = run({"collective", "--op", "all-reduce", "--bytes", "1GiB", "--gpus", "16", "--node", "dgx-h100",
                       "--explain"});
    REQUIRE(t.rc == 0);
    CHECK(contains(t.out, "All-reduce of"));
  }
}

TEST_SUITE("calibrate import-nccl-tests") {
  const std::string kLog = std::string(GPUPLAN_TEST_FIXTURES) + "/nccl-tests/all_reduce_perf-h100-4gpu.log";

  TEST_CASE("an nccl-tests log imports into collective samples that calibrate fit fits to the log's own line") {
    const std::string samples = temp_path("samples.json");
    const Run imp = run({"calibrate", "import-nccl-tests", kLog, "--topology", "node=dgx-h100,gpus_per_node=4,nodes=1",
                         "-o", samples});
    INFO(imp.err);
    REQUIRE(imp.rc == 0);
    std::ifstream sf(samples);
    REQUIRE(sf);
    const json sj = json::parse(sf);
    CHECK(sj["kind"] == "gpuplan-calibration-samples");
    CHECK(sj["device"]["name"] == "h100-sxm5-80gb");
    // The rows of the log, read here column by column.
    std::vector<std::pair<double, double>> rows;  // (size B, out-of-place time s)
    {
      std::ifstream lf(kLog);
      for (std::string line; std::getline(lf, line);) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream in(line);
        double size = 0, count = 0, root = 0, time = 0;
        std::string type, op;
        in >> size >> count >> type >> op >> root >> time;
        rows.emplace_back(size, time * 1e-6);
      }
    }
    REQUIRE(rows.size() == 11);
    REQUIRE(sj["collectives"].size() == rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      CHECK(sj["collectives"][i]["op"] == "all_reduce");
      CHECK(sj["collectives"][i]["ranks"] == 4);
      CHECK(sj["collectives"][i]["bytes"].get<double>() == rows[i].first);
      CHECK(sj["collectives"][i]["median_s"].get<double>() == gptest::approx(rows[i].second));
    }
    const Run fit = run({"calibrate", "fit", samples, "--dry-run", "--format", "json"});
    INFO(fit.err);
    REQUIRE(fit.rc == 0);
    const json p = parse_json(fit);
    REQUIRE(p["links"].size() == 1);
    const json& l = p["links"][0];
    CHECK(l["op"] == "all_reduce");
    CHECK(l["ranks"] == 4);
    // The fitter's line (calibration.hpp): a = median time of sizes ≤ 64 KiB; B_bus = median over the three largest
    // sizes of S · 2(n−1)/n / (t − a).
    std::vector<double> small;
    for (const auto& [s, t] : rows)
      if (s <= 65536) small.push_back(t);
    std::sort(small.begin(), small.end());
    const double a = small[small.size() / 2];
    std::vector<double> big;
    for (std::size_t i = rows.size() - 3; i < rows.size(); ++i) big.push_back(rows[i].first * 1.5 / (rows[i].second - a));
    std::sort(big.begin(), big.end());
    CHECK(l["intercept_s"].get<double>() == gptest::approx(a).epsilon(1e-3));
    CHECK(l["bus_bandwidth_GBps"].get<double>() == gptest::approx(big[1] / 1e9).epsilon(1e-3));
    std::filesystem::remove(samples);
  }

  TEST_CASE("import-nccl-tests: a bad row is an error at file:line naming the value and the rule, exit 2") {
    std::ifstream lf(kLog);
    std::string text((std::istreambuf_iterator<char>(lf)), std::istreambuf_iterator<char>());
    // Line 20 of the fixture is the 64 MiB row: make its busbw disagree with algbw × 2(n−1)/n.
    std::vector<std::string> ls = lines(text);
    REQUIRE(ls.size() > 20);
    const std::string bad_bus = temp_path("all_reduce_bad_bus.log");
    {
      std::string row = ls[19];
      REQUIRE(contains(row, "305.23"));
      row.replace(row.find("305.23"), 6, "405.23");
      std::ofstream o(bad_bus);
      for (std::size_t i = 0; i < ls.size(); ++i) o << (i == 19 ? row : ls[i]) << "\n";
    }
    const Run r = run({"calibrate", "import-nccl-tests", bad_bus, "--topology", "node=dgx-h100,gpus_per_node=4,nodes=1"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, bad_bus + ":20"));
    CHECK(contains(r.err, "busbw 405.23"));
    CHECK(contains(r.err, "2(n-1)/n"));
    const std::string junk = temp_path("all_reduce_junk.log");
    {
      std::ofstream o(junk);
      for (std::size_t i = 0; i < ls.size(); ++i) o << (i == 12 ? std::string("  1024 256 float sum -1 fast") : ls[i]) << "\n";
    }
    const Run j = run({"calibrate", "import-nccl-tests", junk, "--topology", "node=dgx-h100,gpus_per_node=4,nodes=1"});
    CHECK(j.rc == kInvalid);
    CHECK(contains(j.err, junk + ":13"));
    CHECK(contains(j.err, "expected an nccl-tests result row of 13 columns"));
    // The stated topology must be the run's: the log lists 4 ranks.
    const Run t = run({"calibrate", "import-nccl-tests", kLog, "--topology", "node=dgx-h100,gpus_per_node=8,nodes=1"});
    CHECK(t.rc == kInvalid);
    CHECK(contains(t.err, "lists 4 ranks"));
    const Run k = run({"calibrate", "import-nccl-tests", kLog, "--topology", "node=dgx-h100,gpus=4"});
    CHECK(k.rc == kInvalid);
    CHECK(contains(k.err, "--topology"));
    std::filesystem::remove(bad_bus);
    std::filesystem::remove(junk);
  }
}
