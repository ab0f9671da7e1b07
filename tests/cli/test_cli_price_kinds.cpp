// Spot and on-demand prices are never compared without saying so (issue #22, deliverable 3): the report's hardware
// table prints each option's price kind and a note under it when on-demand and spot are mixed; a sweep across GPUs
// has a price_kind column and a note on stderr. The kinds come from the GPU files: h100-sxm5-80gb is priced
// on-demand (RunPod), h100-nvl spot (an Azure spot VM), h200-sxm-141gb on-demand (RunPod).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kMixNote = "these costs mix on-demand and spot prices";

/// A report plan with one small training item on the given nodes, written to a temporary file.
struct Plan {
  fs::path path;
  explicit Plan(const std::vector<std::pair<std::string, std::string>>& options) {
    static int n = 0;
    const fs::path dir = fs::temp_directory_path() /
                         ("gpuplan-test-price-kinds-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(dir);
    path = dir / "plan.json";
    json p = json::parse(R"({
      "training": [ { "id": "t", "tokens": 1e10, "deadline_days": 30, "gpus": 8,
                      "scenario": { "model": "llama-3.1-8b", "seq": 4096, "global_batch": 64 } } ]
    })");
    p["options"] = json::array();
    for (const auto& o : options) p["options"].push_back({{"id", o.first}, {"node", o.second}});
    std::ofstream(path, std::ios::binary) << p.dump(2);
  }
  ~Plan() {
    std::error_code ec;
    fs::remove_all(path.parent_path(), ec);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
};

/// A CSV row's cells (no quoted cells before the ones read here).
std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> v(1);
  for (char c : row) {
    if (c == ',') v.emplace_back();
    else v.back() += c;
  }
  return v;
}

/// The line of the Markdown options table that starts with the option's id.
std::string option_row(const std::string& md, const std::string& id) {
  for (const auto& l : lines(md))
    if (starts_with(l, "| " + id + " ")) return l;
  return "";
}

}  // namespace

TEST_SUITE("price kinds") {
  TEST_CASE("report: options priced on-demand and spot are labelled and the mix is noted under the table") {
    const Plan plan({{"SXM", "dgx-h100"}, {"NVL", "h100-nvl-8"}});
    const Run r = run({"report", plan.path.string()});
    INFO(r.err);
    REQUIRE((r.rc == 0 || r.rc == kInfeasible));
    CHECK(contains(option_row(r.out, "SXM"), "on-demand"));
    CHECK(contains(option_row(r.out, "NVL"), "spot"));
    CHECK(contains(r.out, "**Note:** " + kMixNote));
    // JSON: each option carries its kind.
    const Run j = run({"report", plan.path.string(), "--format", "json"});
    const json o = parse_json(j)["options"];
    REQUIRE(o.size() == 2);
    CHECK(o[0]["price_kind"] == "on-demand");
    CHECK(o[1]["price_kind"] == "spot");
    CHECK(o[1]["price_usd_per_gpu_hour"].get<double>() == gptest::approx(1.61));
  }

  TEST_CASE("report: where the options mix on-demand and spot, every cost ranking carries the kinds and the note") {
    const Plan plan({{"SXM", "dgx-h100"}, {"NVL", "h100-nvl-8"}});
    const Run r = run({"report", plan.path.string()});
    INFO(r.err);
    REQUIRE((r.rc == 0 || r.rc == kInfeasible));
    // The summary ranks the options by cost before the hardware table: its cheapest and next-best cells name the
    // kinds (the spot NVL is cheaper at $1.61 against the on-demand SXM's $2.69), and the note follows the summary.
    const std::string summary = r.out.substr(0, r.out.find("## Hardware options"));
    CHECK(contains(summary, "| t | train 10B tokens within 30 days | **NVL (spot)** |"));
    CHECK(contains(summary, "| SXM (on-demand), $"));
    CHECK(contains(summary, "**Note:** " + kMixNote));
    // Each item's table too.
    const std::string training = r.out.substr(r.out.find("## Training: t"));
    CHECK(contains(option_row(training, "SXM (on-demand)"), "meets the deadline"));
    CHECK(contains(option_row(training, "NVL (spot)"), "**cheapest**"));
    // JSON: the note, and each cell's kind beside its price.
    const json j = parse_json(run({"report", plan.path.string(), "--format", "json"}));
    REQUIRE(j["price_note"].is_string());
    CHECK(contains(j["price_note"].get<std::string>(), kMixNote));
    CHECK(j["training"][0]["options"][0]["price_kind"] == "on-demand");
    CHECK(j["training"][0]["options"][1]["price_kind"] == "spot");
    CHECK(j["serving"].empty());
    // CSV: a price_kind column beside the price.
    const auto rows = lines(run({"report", plan.path.string(), "--format", "csv"}).out);
    REQUIRE(rows.size() == 3);
    const auto head = cells(rows[0]);
    const auto at = std::find(head.begin(), head.end(), "price_kind");
    REQUIRE(at != head.end());
    const auto col = static_cast<std::size_t>(at - head.begin());
    CHECK(head[col - 1] == "price_usd_per_gpu_hour");
    CHECK(cells(rows[1])[col] == "on-demand");
    CHECK(cells(rows[2])[col] == "spot");
  }

  TEST_CASE("report: options all priced on-demand carry no mix note") {
    const Plan plan({{"H100", "dgx-h100"}, {"H200", "dgx-h200"}});
    const Run r = run({"report", plan.path.string()});
    INFO(r.err);
    REQUIRE((r.rc == 0 || r.rc == kInfeasible));
    CHECK(contains(option_row(r.out, "H100"), "on-demand"));
    CHECK(contains(option_row(r.out, "H200"), "on-demand"));
    CHECK_FALSE(contains(r.out, kMixNote));
    // One kind: the option names carry no kind and the JSON has no note.
    CHECK_FALSE(contains(r.out, "(on-demand)"));
    const json j = parse_json(run({"report", plan.path.string(), "--format", "json"}));
    CHECK(j["price_note"].is_null());
    CHECK(j["training"][0]["options"][0]["price_kind"] == "on-demand");
  }

  TEST_CASE("train --sweep across an on-demand and a spot GPU: a price_kind column and a note on stderr") {
    const Run r = run({"train", "-m", "llama-3.1-8b", "--gpus", "8", "--seq", "4096", "--global-batch", "64",
                       "--tokens", "1e10", "--sweep", "gpu=h100-sxm5-80gb,h100-nvl"});
    INFO(r.err);
    REQUIRE((r.rc == 0 || r.rc == kInfeasible));
    const auto rows = lines(r.out);
    REQUIRE(rows.size() == 3);
    const auto head = cells(rows[0]);
    const auto at = std::find(head.begin(), head.end(), "price_kind");
    REQUIRE(at != head.end());
    const auto col = static_cast<std::size_t>(at - head.begin());
    CHECK(cells(rows[1])[col] == "on-demand");
    CHECK(cells(rows[2])[col] == "spot");
    CHECK(contains(r.err, "the cost columns (cost_usd): " + kMixNote));
    // The same sweep over two on-demand GPUs has no note.
    const Run same = run({"train", "-m", "llama-3.1-8b", "--gpus", "8", "--seq", "4096", "--global-batch", "64",
                          "--tokens", "1e10", "--sweep", "gpu=h100-sxm5-80gb,h200-sxm-141gb"});
    INFO(same.err);
    REQUIRE((same.rc == 0 || same.rc == kInfeasible));
    CHECK_FALSE(contains(same.err, kMixNote));
  }

  TEST_CASE("serve --sweep across an on-demand and a spot GPU notes the mix") {
    const Run r = run({"serve", "-m", "llama-3.1-8b", "--input-tokens", "1024", "--output-tokens", "256",
                       "--ttft-ms", "500", "--rate", "5", "--sweep", "gpu=h100-sxm5-80gb,h100-nvl"});
    INFO(r.err);
    REQUIRE((r.rc == 0 || r.rc == kInfeasible));
    const auto head = cells(lines(r.out).at(0));
    CHECK(std::find(head.begin(), head.end(), "price_kind") != head.end());
    CHECK(contains(r.err, "the cost columns (cost_per_hour_usd, cost_per_mtok_usd): " + kMixNote));
  }
}
