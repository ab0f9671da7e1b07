// End-to-end tests of `gpuplan train --search` and `gpuplan bench`: the report (top layouts, why #1 beats #2, the
// best layout's estimate), JSON keys, the CSV of every layout (stable header, byte-identical for any thread count),
// GPU ranges with a deadline, fixed dimensions, Ctrl-C (through the --cancel-after hook that raises SIGINT), the
// progress bar's silence when stderr is not a terminal, and the diagnostics of bad search flags.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
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

/// Llama 3.1 8B on 16 H100: small enough to search in a moment in any build.
std::vector<std::string> search_args() {
  return {"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "16", "--seq", "4096", "--global-batch",
          "64", "--search", "--no-calibration"};
}
std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& more) {
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

/// A path in a fresh temporary folder, removed with the object.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("gpuplan-test-cli-search-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] std::string path(const std::string& name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
};

const char* const kCsvHeader =
    "rank,gpus,tp,pp,dp,cp,ep,virtual_stages,micro_batch,sequence_parallel,recompute,zero,offload,valid,fits,"
    "meets_deadline,step_time_s,tokens_per_s,mfu,peak_bytes_per_gpu,capacity_bytes,gemm_s,attention_s,elementwise_s,"
    "embedding_loss_s,recompute_s,comm_exposed_s,tp_exposed_s,cp_exposed_s,ep_exposed_s,pp_exposed_s,dp_exposed_s,"
    "bubble_s,optimizer_s,offload_s,time_to_train_s,cost_usd,tokens_per_usd,expert_tp,first_stage_layers,"
    "last_stage_layers,embedding_as_layer,loss_as_layer";

}  // namespace

TEST_SUITE("cli search") {
  TEST_CASE("train --search lists the top layouts, why the best beats the runner-up, and the best's estimate") {
    const Run r = run(search_args());
    INFO(r.err);
    REQUIRE(r.rc == 0);
    CHECK(starts_with(r.out, "Layout search: Llama 3.1 8B on 16 × NVIDIA H100 SXM5 80GB\n"));
    CHECK(contains(r.out, "\nTop 10\n"));
    CHECK(contains(r.out, "\nWhy #1 beats #2\n"));
    CHECK(contains(r.out, "  #2 differs in"));
    CHECK(contains(r.out, "  memory headroom"));
    CHECK(contains(r.out, "\nBest: 16 GPUs, TP "));
    CHECK(contains(r.out, "\nStep breakdown\n"));
    CHECK(contains(r.out, "\nNotes\n"));
    CHECK(contains(r.out, "CPU offload of the optimizer (ZeRO-Offload) is searched with ZeRO ≥ 1"));
    // Not a terminal: no progress bar.
    CHECK(!contains(r.err, "searching ["));
  }

  TEST_CASE("train --search --format json: the best layout is what train reports for that layout") {
    const json j = parse_json(run(with(search_args(), {"--format", "json", "--top", "3"})));
    REQUIRE(j.contains("search"));
    for (const std::string k : {"gpus", "ranked_by", "layouts", "evaluated", "valid", "fitting", "eligible", "threads",
                                "wall_s", "interrupted"}) {
      CAPTURE(k);
      CHECK(j["search"].contains(k));
    }
    CHECK(j["search"]["ranked_by"] == "time");
    CHECK(j["search"]["evaluated"] == j["search"]["layouts"]);
    REQUIRE(j["top"].size() == 3);
    const json& best = j["top"][0];
    CHECK(best["rank"] == 1);
    CHECK(j["top"][0]["step_time_s"].get<double>() <= j["top"][1]["step_time_s"].get<double>());
    CHECK(j["best"]["step_time_s"] == best["step_time_s"]);
    CHECK(j["best"]["feasible"] == true);
    CHECK(j.contains("why"));
    const json& l = best["layout"];
    std::vector<std::string> args = {"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "16", "--seq",
                                     "4096", "--global-batch", "64", "--no-calibration", "--format", "json",
                                     "--tp", std::to_string(l["tp"].get<int>()), "--pp", std::to_string(l["pp"].get<int>()),
                                     "--cp", std::to_string(l["cp"].get<int>()),
                                     "--virtual-stages", std::to_string(l["virtual_stages"].get<int>()),
                                     "--micro-batch", std::to_string(l["micro_batch"].get<long long>()),
                                     "--sp", l["sequence_parallel"].get<bool>() ? "true" : "false",
                                     "--recompute", l["recompute"].get<std::string>(),
                                     "--zero", std::to_string(l["zero"].get<int>()),
                                     "--offload", l["offload"].get<std::string>()};
    const json single = parse_json(run(args));
    CHECK(single["feasible"] == true);
    CHECK(single["step_time_s"] == best["step_time_s"]);
    CHECK(single["memory"]["peak_bytes_per_gpu"] == best["peak_bytes_per_gpu"]);
  }

  TEST_CASE("--search-csv writes every layout with stable columns, byte-identical for 1, 2 and 8 threads") {
    TempDir d;
    std::vector<std::string> files;
    for (const char* threads : {"1", "2", "8"}) {
      files.push_back(d.path(std::string("all-") + threads + ".csv"));
      const Run r = run(with(search_args(), {"--threads", threads, "--search-csv", files.back(), "--format", "csv"}));
      INFO(r.err);
      REQUIRE(r.rc == 0);
      // --format csv: the top rows with the same columns.
      const auto top = lines(r.out);
      REQUIRE(top.size() == 11);
      CHECK(top[0] == kCsvHeader);
      CHECK(starts_with(top[1], "1,16,"));
    }
    const std::string first = slurp(files[0]);
    CHECK(slurp(files[1]) == first);
    CHECK(slurp(files[2]) == first);
    const auto rows = lines(first);
    REQUIRE(rows.size() > 100);
    CHECK(rows[0] == kCsvHeader);
    CHECK(starts_with(rows[1], "1,16,"));
    const json j = parse_json(run(with(search_args(), {"--format", "json"})));
    CHECK(rows.size() == j["search"]["layouts"].get<std::size_t>() + 1);
  }

  TEST_CASE("a GPU range with a deadline ranks by cost the layouts that meet it") {
    const json j = parse_json(run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8..32", "--seq",
                                   "4096", "--global-batch", "64", "--tokens", "1e11", "--deadline-days", "3",
                                   "--search", "--no-calibration", "--format", "json"}));
    CHECK(j["search"]["gpus"] == json::array({8, 16, 32}));
    CHECK(j["search"]["ranked_by"] == "cost");
    CHECK(j["search"]["deadline_days"] == 3.0);
    REQUIRE(!j["top"].empty());
    double last = 0;
    for (const auto& p : j["top"]) {
      CHECK(p["time_to_train_s"].get<double>() <= 3 * 86400.0);
      CHECK(p["cost_usd"].get<double>() >= last);
      last = p["cost_usd"].get<double>();
    }
    // An unreachable deadline: nothing ranks (exit 3), and the fastest layout that fits is named.
    const Run r = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8..16", "--seq", "4096",
                       "--global-batch", "64", "--tokens", "1e13", "--deadline-days", "1", "--search",
                       "--no-calibration"});
    CHECK(r.rc == kInfeasible);
    CHECK(contains(r.out, "none trains the tokens within 1 days: the fastest that fits takes "));
    const Run step = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8..24:8", "--seq", "4096",
                          "--global-batch", "96", "--search", "--no-calibration", "--format", "json"});
    CHECK(parse_json(step)["search"]["gpus"] == json::array({8, 16, 24}));
  }

  TEST_CASE("layout flags that are given stay fixed in the search") {
    const json j = parse_json(run(with(search_args(), {"--tp", "2", "--recompute", "full", "--format", "json"})));
    REQUIRE(!j["top"].empty());
    for (const auto& p : j["top"]) {
      CHECK(p["layout"]["tp"] == 2);
      CHECK(p["layout"]["recompute"] == "full");
    }
  }

  TEST_CASE("Ctrl-C prints the best layout so far and exits 130") {
    // --cancel-after raises SIGINT from the progress callback: the real signal handler runs.
    const Run r = run(with(search_args(), {"--threads", "1", "--cancel-after", "100"}));
    CHECK(r.rc == 130);
    CHECK(contains(r.out, "(interrupted)"));
    CHECK(contains(r.out, "\nInterrupted\n"));
    CHECK(contains(r.out, "\nBest: 16 GPUs, "));
    const json j = parse_json(run(with(search_args(), {"--threads", "1", "--cancel-after", "100", "--format", "json"})));
    CHECK(j["search"]["interrupted"] == true);
    CHECK(j["search"]["evaluated"].get<long long>() < j["search"]["layouts"].get<long long>());
    CHECK(j["search"]["evaluated"].get<long long>() >= 100);
  }

  TEST_CASE("bad search flags are diagnostics naming the flag") {
    Run r = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "64..8", "--global-batch", "64",
                 "--search"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--gpus: error: '64..8': expected 1 <= A <= B <= 10000000 and STEP >= 1"));
    r = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8..x", "--global-batch", "64", "--search"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--gpus: error: '8..x' is not a GPU count or range: expected N, A..B (doubling from A) or A..B:STEP"));
    r = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "1..5000:1", "--global-batch", "64",
             "--search"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--gpus: error: '1..5000:1' has more than 4096 GPU counts"));
    r = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8..64", "--global-batch", "64"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--gpus: error: a range of GPU counts ('8..64') needs --search"));
    r = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "eight"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--gpus: error: expected an integer, found a string \"eight\""));
    // Bytes that are not UTF-8 in a flag value: a diagnostic (U+FFFD in their place), not an uncaught nlohmann
    // exception and exit 134 (fuzz_cli, docs/reliability.md).
    r = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "204\xe0"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--gpus: error: expected an integer, found a string \"204\xef\xbf\xbd\""));
    r = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--gpus", "16", "--search"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--global-batch: error: --search needs the global batch (sequences per step): the layouts divide it"));
    r = run({"train", "--model", "llama-3.1-8b", "--gpu", "h100", "--global-batch", "64", "--search"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--gpus: error: --search needs the GPU count: --gpus N, or a range A..B"));
    r = run(with(search_args(), {"--deadline-days", "30"}));
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--deadline-days: error: needs a token budget: give --tokens"));
    r = run({"train", "--model", "llama-3.1-8b", "--gpu", "mi355x", "--gpus", "8", "--global-batch", "64", "--search",
             "--rank-by", "cost"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--search: error: ranking by cost needs a price per GPU-hour (--price; the GPU file has none)"));
    r = run(with(search_args(), {"--search-csv", "/nonexistent-dir/x.csv"}));
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--search-csv: error: cannot write '/nonexistent-dir/x.csv'"));
  }

  TEST_CASE("--search-csv is written atomically: a failed write exits 2, names the file and keeps the old one") {
    TempDir d;
    // A name of 254 bytes: the file can exist, but its temporary name beside it (name + ".XXXXXX") is longer than a
    // folder entry may be, so the write fails before the rename (a permission test would pass as root, which CI is).
    const std::string file = d.path(std::string(250, 'x') + ".csv");
    { std::ofstream(file) << "old\n"; }
    REQUIRE(slurp(file) == "old\n");
    Run r = run(with(search_args(), {"--search-csv", file}));
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--search-csv: error: cannot write '" + file + "': cannot create a temporary file beside it: "));
    CHECK(slurp(file) == "old\n");
    // A folder in the file's place: refused before anything is written, and the folder stays as it was.
    const std::string folder = d.path("taken");
    fs::create_directories(folder + "/inside");
    r = run(with(search_args(), {"--search-csv", folder}));
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--search-csv: error: cannot write '" + folder + "': is a folder; give a file name to write"));
    CHECK(fs::is_directory(folder + "/inside"));
    if (::geteuid() != 0) {  // an unwritable folder (root writes anyway)
      fs::permissions(d.path(""), fs::perms::owner_read | fs::perms::owner_exec);
      r = run(with(search_args(), {"--search-csv", file}));
      fs::permissions(d.path(""), fs::perms::owner_all);
      CHECK(r.rc == kInvalid);
      CHECK(contains(r.err, "--search-csv: error: cannot write '" + file + "': cannot create a temporary file beside it: "));
      CHECK(slurp(file) == "old\n");
    }
    // A write that succeeds replaces the old file whole and leaves no temporary file.
    const std::string ok = d.path("layouts.csv");
    { std::ofstream(ok) << "old\n"; }
    r = run(with(search_args(), {"--search-csv", ok}));
    REQUIRE(r.rc == 0);
    CHECK(starts_with(slurp(ok), kCsvHeader));
    for (const auto& e : fs::directory_iterator(d.path("")))
      CHECK_FALSE(starts_with(e.path().filename().string(), "layouts.csv."));
  }

  TEST_CASE("a search where nothing fits exits 3 and names the smallest footprint") {
    const Run r = run({"train", "--model", "llama-3.1-405b", "--gpu", "h100", "--gpus", "8", "--global-batch", "8",
                       "--search", "--no-calibration"});
    CHECK(r.rc == kInfeasible);
    CHECK(contains(r.out, "\nNo layout ranks\n"));
    CHECK(contains(r.out, "none fits in memory: the smallest peak is "));
  }

  TEST_CASE("gpuplan bench reports the search speed") {
    const json j = parse_json(run({"bench", "--model", "llama-3.1-8b", "--gpus", "16", "--global-batch", "64", "--seq",
                                   "4096", "--repeat", "1", "--threads", "2", "--format", "json"}));
    REQUIRE(j.is_array());
    REQUIRE(j.size() == 1);
    const json& row = j[0];
    for (const std::string k : {"gpus", "layouts", "search_1_thread_s", "layouts_per_s_1_thread", "threads", "search_s",
                                "layouts_per_s_per_thread", "warm_layouts_per_s", "best"}) {
      CAPTURE(k);
      CHECK(row.contains(k));
    }
    CHECK(row["gpus"] == 16);
    CHECK(row["layouts"].get<double>() > 100);
    CHECK(row["layouts_per_s_1_thread"].get<double>() > 0);
  }
}
