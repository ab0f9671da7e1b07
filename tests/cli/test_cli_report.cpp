// End-to-end tests of `gpuplan report` (docs/report.md) and `gpuplan serve --scenario`: golden outputs of every
// format on a small test plan (tests/fixtures/report/), the identities between the figures (the cheapest option has
// the lowest cost among the feasible ones, totals are sums, cost = GPU-hours × price, each printed command reproduces
// its row), exit codes 0/2/3, the exact diagnostics of bad plan files, --output, a well-formed HTML page with its
// charts, and serving scenario files.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string fixture_dir() { return (fs::path(kData).parent_path() / "tests" / "fixtures" / "report").string(); }
std::string small_plan() { return fixture_dir() + "/small-plan.json"; }

/// The report names the plan file as it was given; the goldens were made with `cd tests/fixtures/report && gpuplan
/// report small-plan.json`, so the directory is taken out of the output.
std::string normalised(std::string s) {
  const std::string dir = fixture_dir() + "/";
  for (auto p = s.find(dir); p != std::string::npos; p = s.find(dir)) s.erase(p, dir.size());
  return s;
}

std::string golden(const std::string& name) {
  const auto path = fs::path(fixture_dir()) / name;
  REQUIRE_MESSAGE(fs::exists(path), "missing golden file " << path.string());
  return slurp(path);
}

/// A temporary file holding `text`; removed with the object.
struct TempFile {
  fs::path path;
  explicit TempFile(const std::string& text, const std::string& name = "plan.json") {
    static int n = 0;
    const fs::path dir = fs::temp_directory_path() /
                         ("gpuplan-test-report-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(dir);
    path = dir / name;
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove_all(path.parent_path(), ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
};

std::vector<std::string> errors(const std::string& err) {
  std::vector<std::string> v;
  for (const auto& l : lines(err))
    if (contains(l, ": error: ")) v.push_back(l);
  return v;
}

/// A valid plan with one training and one serving item on H100; `edit` changes it before it is written.
json base_plan() {
  return json::parse(R"({
    "options": [ { "id": "H100", "node": "dgx-h100" } ],
    "training": [ { "id": "t", "tokens": 1e10, "deadline_days": 30, "gpus": 8,
                    "scenario": { "model": "llama-3.1-8b", "seq": 4096, "global_batch": 64 } } ],
    "serving": [ { "id": "s", "scenario": { "model": "llama-3.1-8b", "rate": 2, "ttft_ms": 1000 } } ]
  })");
}

/// JSON equal to the golden, numbers within a relative 1e-9 (the last bits may differ between optimisation levels).
void check_json_close(const json& a, const json& b, const std::string& where = "") {
  INFO("at " << where);
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    CHECK(std::fabs(x - y) <= 1e-9 * std::max(std::fabs(x), std::fabs(y)) + 1e-300);
    return;
  }
  REQUIRE(a.type() == b.type());
  if (a.is_object()) {
    REQUIRE(a.size() == b.size());
    for (auto it = a.begin(); it != a.end(); ++it) {
      REQUIRE(b.contains(it.key()));
      check_json_close(it.value(), b[it.key()], where + "/" + it.key());
    }
  } else if (a.is_array()) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) check_json_close(a[i], b[i], where + "/" + std::to_string(i));
  } else {
    CHECK(a == b);
  }
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> v;
  std::string cur;
  bool quoted = false;
  for (char c : s) {
    if (c == '"') quoted = !quoted;
    if (c == sep && !quoted) {
      v.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  v.push_back(cur);
  return v;
}

/// The code lines of the md output that start with `prefix` ("gpuplan train").
std::vector<std::string> commands(const std::string& md, const std::string& prefix) {
  std::vector<std::string> v;
  for (const auto& l : lines(md))
    if (starts_with(l, prefix)) v.push_back(l);
  return v;
}

/// HTML is well formed enough for a browser and a validator: every non-void element closed in order.
std::string unbalanced_tag(const std::string& html) {
  static const std::vector<std::string> kVoid{"meta", "br", "hr", "img", "input", "link", "rect", "line", "!DOCTYPE"};
  std::vector<std::string> stack;
  for (std::size_t i = html.find('<'); i != std::string::npos; i = html.find('<', i + 1)) {
    const auto end = html.find('>', i);
    if (end == std::string::npos) return "unterminated tag";
    std::string tag = html.substr(i + 1, end - i - 1);
    const bool self_closing = !tag.empty() && tag.back() == '/';
    const bool closing = !tag.empty() && tag[0] == '/';
    std::string name = tag.substr(closing ? 1 : 0);
    name = name.substr(0, name.find_first_of(" /"));
    if (self_closing || std::find(kVoid.begin(), kVoid.end(), name) != kVoid.end()) continue;
    if (!closing) {
      stack.push_back(name);
    } else {
      if (stack.empty() || stack.back() != name) return "</" + name + "> closes " + (stack.empty() ? "nothing" : stack.back());
      stack.pop_back();
    }
  }
  return stack.empty() ? "" : "<" + stack.back() + "> never closed";
}

/// The text of the <svg> element with this id.
std::string svg_with_id(const std::string& html, const std::string& id) {
  const auto p = html.find("id=\"" + id + "\"");
  if (p == std::string::npos) return "";
  const auto start = html.rfind("<svg", p);
  const auto end = html.find("</svg>", p);
  return html.substr(start, end - start);
}

std::size_t occurrences(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

}  // namespace

TEST_SUITE("gpuplan report") {
  TEST_CASE("report: the Markdown, text and HTML of the small test plan equal their golden files") {
    for (const auto& [format, file] : std::vector<std::pair<std::string, std::string>>{
             {"md", "small.md"}, {"text", "small.txt"}, {"html", "small.html"}}) {
      const auto& captured_format = format;  // clang 14: no structured binding in CAPTURE's lambda
      CAPTURE(captured_format);
      const Run r = run({"report", small_plan(), "--format", format});
      INFO(r.err);
      REQUIRE(r.rc == 0);
      CHECK(normalised(r.out) == golden(file));
    }
    // md is the default.
    const Run d = run({"report", small_plan()});
    CHECK(normalised(d.out) == golden("small.md"));
  }

  TEST_CASE("report --format json and csv equal their golden files (numbers to 1e-9)") {
    const Run j = run({"report", small_plan(), "--format", "json"});
    REQUIRE(j.rc == 0);
    check_json_close(json::parse(normalised(j.out)), json::parse(golden("small.json")));
    const Run c = run({"report", small_plan(), "--format", "csv"});
    REQUIRE(c.rc == 0);
    const auto got = lines(c.out), want = lines(golden("small.csv"));
    REQUIRE(got.size() == want.size());
    CHECK(got[0] ==
          "kind,item,option,gpu,price_usd_per_gpu_hour,price_kind,feasible,cheapest,gpus,layout,time_days,gpu_hours,"
          "cost_usd,energy_kWh,mfu,headroom_bytes,replicas,batch,ttft_s,itl_s,cost_usd_per_hour,cost_per_mtok_usd,reasons");
    for (std::size_t i = 0; i < got.size(); ++i) {
      const auto a = split(got[i], ','), b = split(want[i], ',');
      REQUIRE(a.size() == b.size());
      for (std::size_t k = 0; k < a.size(); ++k) {
        char* e1 = nullptr;
        char* e2 = nullptr;
        const double x = std::strtod(a[k].c_str(), &e1), y = std::strtod(b[k].c_str(), &e2);
        if (!a[k].empty() && *e1 == '\0' && !b[k].empty() && *e2 == '\0')
          CHECK(std::fabs(x - y) <= 1e-9 * std::max(std::fabs(x), std::fabs(y)));
        else
          CHECK(a[k] == b[k]);
      }
    }
    CHECK(got.size() == 1 + 3 + 3);  // header, 1 training + 1 serving item on 3 options
  }

  TEST_CASE("report: the cheapest option has the lowest cost among the feasible ones and the totals are the sums") {
    const Run r = run({"report", small_plan(), "--format", "json"});
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(j["feasible"] == true);
    double training_total = 0, serving_total = 0;
    for (const auto& it : j["training"]) {
      double best = 1e300;
      std::string best_id;
      for (const auto& o : it["options"]) {
        if (!o["feasible"].get<bool>()) {
          CHECK_FALSE(o["reasons"].empty());
          continue;
        }
        const double cost = o["cost_usd"].get<double>();
        // cost = GPU-hours × price; GPU-hours = GPUs × time.
        CHECK(cost == gptest::approx(o["gpu_hours"].get<double>() * o["price_usd_per_gpu_hour"].get<double>()).epsilon(1e-9));
        CHECK(o["gpu_hours"].get<double>() ==
              gptest::approx(o["gpus"].get<double>() * o["time_days"].get<double>() * 24).epsilon(1e-9));
        CHECK(o["time_days"].get<double>() <= it["deadline_days"].get<double>());
        CHECK(o["headroom_bytes"].get<double>() >= 0);
        if (cost < best) {
          best = cost;
          best_id = o["option"];
        }
      }
      CHECK(it["cheapest"] == best_id);
      training_total += best;
    }
    for (const auto& it : j["serving"]) {
      double best = 1e300;
      std::string best_id;
      for (const auto& o : it["options"]) {
        if (!o["feasible"].get<bool>()) continue;
        const double rate = o["cost_usd_per_hour"].get<double>();
        CHECK(rate == gptest::approx(o["gpus"].get<double>() * o["price_usd_per_gpu_hour"].get<double>()));
        CHECK(o["cost_per_mtok_usd"].get<double>() ==
              gptest::approx(rate / 3600.0 / (it["requests_per_s"].get<double>() * it["output_tokens"].get<double>()) * 1e6));
        CHECK(o["ttft_s"].get<double>() <= it["sla"]["ttft_s"].get<double>());
        CHECK(o["itl_s"].get<double>() <= it["sla"]["itl_s"].get<double>());
        if (rate < best) {
          best = rate;
          best_id = o["option"];
        }
      }
      CHECK(it["cheapest"] == best_id);
      serving_total += best;
    }
    CHECK(j["totals"]["training_cost_usd"].get<double>() == gptest::approx(training_total));
    CHECK(j["totals"]["serving_cost_usd_per_hour"].get<double>() == gptest::approx(serving_total));
    CHECK(j["totals"]["serving_cost_usd_per_month"].get<double>() == gptest::approx(serving_total * 720));
    // The test plan's facts: B200 at its own $4.50 is the cheapest trainer, A100 misses the deadline within 16 GPUs.
    CHECK(j["training"][0]["cheapest"] == "B200");
    CHECK(j["training"][0]["options"][1]["price_usd_per_gpu_hour"] == 4.5);
    CHECK(j["training"][0]["options"][2]["feasible"] == false);
    CHECK(starts_with(j["training"][0]["options"][2]["reasons"][0].get<std::string>(),
                      "misses the 7-day deadline even at 16 GPUs: the fastest layout that fits takes "));
    CHECK(j["training"][0]["options"][2]["gpu_counts"] == json::array({8, 16}));
  }

  TEST_CASE("report: each printed train / serve command reproduces its row's numbers") {
    const Run md = run({"report", small_plan()});
    REQUIRE(md.rc == 0);
    const json j = parse_json(run({"report", small_plan(), "--format", "json"}));
    const auto train = commands(md.out, "gpuplan train ");
    REQUIRE(train.size() == 2);  // H100 and B200; A100 misses the deadline
    for (std::size_t k = 0; k < train.size(); ++k) {
      CAPTURE(train[k]);
      auto args = split(train[k], ' ');
      args.erase(args.begin());  // "gpuplan"
      REQUIRE(args.back() == "--explain");
      args.back() = "--format";
      args.push_back("json");
      const Run t = run(args);
      REQUIRE(t.rc == 0);
      const json e = parse_json(t);
      const auto& row = j["training"][0]["options"][k];
      CHECK(e["cost_usd"].get<double>() == row["cost_usd"].get<double>());
      CHECK(e["time_to_train_s"].get<double>() == row["time_s"].get<double>());
      CHECK(e["gpus"] == row["gpus"]);
    }
    const auto serve = commands(md.out, "gpuplan serve ");
    REQUIRE(serve.size() == 3);
    for (std::size_t k = 0; k < serve.size(); ++k) {
      CAPTURE(serve[k]);
      auto args = split(serve[k], ' ');
      args.erase(args.begin());
      args.back() = "--format";
      args.push_back("json");
      const Run s = run(args);
      REQUIRE(s.rc == 0);
      const json e = parse_json(s);
      const auto& row = j["serving"][0]["options"][k];
      CHECK(e["gpus"] == row["gpus"]);
      CHECK(e["cost_per_mtok_usd"].get<double>() == gptest::approx(row["cost_per_mtok_usd"].get<double>()));
    }
  }

  TEST_CASE("report: a plan with no feasible option for an item exits 3 and still prints the report with reasons") {
    const std::string plan = fixture_dir() + "/infeasible-plan.json";
    const Run r = run({"report", plan});
    CHECK(r.rc == kInfeasible);
    CHECK(contains(r.out, "| rush | train 50B tokens within 1 day | none meets the deadline |"));
    // It says by how much: the fastest layout's time, more than the 1-day deadline (the days are the model's, so the
    // test reads them rather than naming them), and the JSON gives the same reason.
    const std::string who = "- **A100**: ";
    const std::string lead = who + "misses the 1-day deadline even at 16 GPUs: the fastest layout that fits takes ";
    const auto at = r.out.find(lead);
    REQUIRE(at != std::string::npos);
    const std::string reason = r.out.substr(at + who.size(), r.out.find('\n', at) - at - who.size());
    const double days = std::stod(r.out.substr(at + lead.size()));
    CHECK(days > 1.0);
    CHECK(days < 50.0);
    CHECK(contains(r.out, "- **A100**: SLA not met: ITL "));
    CHECK(contains(r.out, "**Some items have no feasible option** (exit code 3)"));
    const Run j = run({"report", plan, "--format", "json"});
    CHECK(j.rc == kInfeasible);
    const json o = parse_json(j);
    CHECK(o["feasible"] == false);
    CHECK(o["training"][0]["cheapest"].is_null());
    CHECK(o["training"][0]["options"][0]["reasons"][0] == reason);
    CHECK(o["serving"][0]["options"][0]["feasible"] == false);
    CHECK(o["serving"][0]["options"][0].contains("gpus"));  // the best achievable is still reported
  }

  TEST_CASE("report: bad plan files exit 2 with file, JSON pointer and message") {
    struct Case {
      std::string name;
      std::function<void(json&)> edit;
      std::vector<std::string> want;  // after "<file>: "
    };
    const std::vector<Case> cases{
        {"unknown key in a scenario", [](json& p) { p["training"][0]["scenario"]["microbatch"] = 2; },
         {"/training/0/scenario/microbatch: error: unknown key 'microbatch' (did you mean 'micro_batch'?)"}},
        {"unknown top-level key", [](json& p) { p["option"] = json::array(); },
         {"/option: error: unknown key 'option' (did you mean 'options'?)"}},
        {"wrong type", [](json& p) { p["options"][0]["price_usd_per_gpu_hour"] = "4.5"; },
         {"/options/0/price_usd_per_gpu_hour: error: expected a number, found a string \"4.5\""}},
        {"missing model", [](json& p) { p["serving"][0]["scenario"].erase("model"); },
         {"/serving/0/scenario: error: no model given (a library id such as llama-3.1-70b, or a config.json)"}},
        {"missing rate", [](json& p) { p["serving"][0]["scenario"].erase("rate"); },
         {"/serving/0/scenario: error: no rate given (requests per second to serve)"}},
        {"missing deadline", [](json& p) { p["training"][0].erase("deadline_days"); },
         {"/training/0: error: missing required key 'deadline_days' (the run must finish within this many days)"}},
        {"hardware inside a scenario", [](json& p) { p["training"][0]["scenario"]["gpu"] = "h100"; },
         {"/training/0/scenario/gpu: error: 'gpu' is set by each hardware option (/options), not by the item"}},
        {"bad GPU range", [](json& p) { p["training"][0]["gpus"] = "64..8"; },
         {"/training/0/gpus: error: '64..8': expected 1 <= A <= B <= 10000000 and STEP >= 1"}},
        {"duplicate id", [](json& p) { p["serving"][0]["id"] = "t"; }, {"/serving/0/id: error: duplicate id 't'"}},
        {"no options", [](json& p) { p["options"] = json::array(); },
         {"/options: error: no hardware options: give at least one"}},
        {"an option without hardware", [](json& p) { p["options"][0].erase("node"); },
         {"/options/0: error: no hardware: give gpu, node or cluster"}},
        {"unknown GPU", [](json& p) { p["options"][0] = {{"id", "x"}, {"gpu", "h1000"}}; },
         {"/options/0/gpu: error: unknown GPU 'h1000' (did you mean 'h100'?)"}},
        {"a value no option can use", [](json& p) { p["serving"][0]["scenario"]["ttft_ms"] = 0; },
         {"/serving/0/scenario/ttft_ms: error: must be > 0"}},
    };
    for (const auto& c : cases) {
      CAPTURE(c.name);
      json p = base_plan();
      c.edit(p);
      const TempFile f(p.dump(2));
      const Run r = run({"report", f.path.string()});
      CHECK(r.rc == kInvalid);
      CHECK(r.out.empty());
      std::vector<std::string> want;
      for (const auto& w : c.want) want.push_back(f.path.string() + ": " + w);
      CHECK(errors(r.err) == want);
    }
  }

  TEST_CASE("report: an unknown model in a plan gets a suggestion (exit 2)") {
    {
      json p = base_plan();
      p["training"][0]["scenario"]["model"] = "llama-3.1-8";
      const TempFile f(p.dump());
      const Run r = run({"report", f.path.string()});
      CHECK(r.rc == kInvalid);
      REQUIRE(errors(r.err).size() == 1);
      CHECK(starts_with(errors(r.err)[0], f.path.string() +
                                              ": /training/0/scenario/model: error: unknown model 'llama-3.1-8' (did you "
                                              "mean 'llama-3.1-8b'?)"));
    }
  }

  TEST_CASE("report: a plan that is not JSON, not an object or not there exits 2") {
    {
      const TempFile f("{ \"options\": [ }");
      CHECK(run({"report", f.path.string()}).rc == kInvalid);
      const TempFile g("[1, 2]");
      const Run r = run({"report", g.path.string()});
      CHECK(r.rc == kInvalid);
      CHECK(errors(r.err) == std::vector<std::string>{g.path.string() + ": /: error: expected an object, found an array"});
      CHECK(run({"report", "/no/such/plan.json"}).rc == kInvalid);
    }
  }

  TEST_CASE("report: a scenario value only some options cannot use makes those options infeasible, with the message") {
    json p = base_plan();
    p["options"].push_back({{"id", "A100"}, {"node", "dgx-a100"}});
    p["serving"][0]["scenario"]["weight_dtype"] = "fp8";
    p["serving"][0]["scenario"]["compute"] = "fp8";
    const TempFile f(p.dump());
    const Run r = run({"report", f.path.string(), "--format", "json"});
    INFO(r.err);
    CHECK(r.rc == 0);
    const json j = parse_json(r);
    const auto& a100 = j["serving"][0]["options"][1];
    CHECK(a100["feasible"] == false);
    CHECK(a100["reasons"] == json::array({"a100-sxm4-80gb has no fp8 tensor cores"}));
    CHECK(j["serving"][0]["cheapest"] == "H100");
  }

  TEST_CASE("report --output writes the report atomically and prints nothing - a bad path exits 2") {
    const TempFile dir("", "placeholder");
    const auto out = dir.path.parent_path() / "report.html";
    const Run r = run({"report", small_plan(), "--format", "html", "--output", out.string()});
    CHECK(r.rc == 0);
    CHECK(r.out.empty());
    REQUIRE(fs::exists(out));
    CHECK(normalised(slurp(out)) == golden("small.html"));
    // A folder that cannot be made (its parent is a file).
    const Run bad = run({"report", small_plan(), "--output", small_plan() + "/report.md"});
    CHECK(bad.rc == kInvalid);
  }

  TEST_CASE("report --format html is one self-contained, well-formed page with a bar per feasible option in each chart") {
    const Run r = run({"report", small_plan(), "--format", "html"});
    REQUIRE(r.rc == 0);
    const std::string& h = r.out;
    CHECK(starts_with(h, "<!DOCTYPE html>\n<html lang=\"en\">"));
    CHECK(unbalanced_tag(h).empty());
    CHECK_FALSE(contains(h, "<script"));
    CHECK_FALSE(contains(h, "<link"));
    CHECK_FALSE(contains(h, "https://"));
    // The only URL is the SVG namespace, once per chart.
    CHECK(occurrences(h, "http://") == occurrences(h, "<svg "));
    struct Chart {
      std::string id;
      std::size_t bars, best;
    };
    // Options H100, B200, A100: A100 misses the training deadline; all three serve.
    for (const auto& c : std::vector<Chart>{{"chart-options", 2, 1},
                                            {"chart-training-cpt-cost", 2, 1},
                                            {"chart-training-cpt-time", 2, 1},
                                            {"chart-serving-chat-cost", 3, 1}}) {
      CAPTURE(c.id);
      const std::string svg = svg_with_id(h, c.id);
      REQUIRE_FALSE(svg.empty());
      CHECK(occurrences(svg, "<rect class=\"bar") == c.bars);
      CHECK(occurrences(svg, "<rect class=\"bar best\"") == c.best);
      CHECK(contains(svg, "<title>"));
    }
    CHECK(contains(svg_with_id(h, "chart-training-cpt-time"), "class=\"reference\""));
    CHECK(occurrences(h, "<svg ") == 4);
  }

  TEST_CASE("report --explain appends the derivation of every figure") {
    const Run r = run({"report", small_plan(), "--explain"});
    REQUIRE(r.rc == 0);
    CHECK(contains(r.out, "## Derivations"));
    CHECK(contains(r.out, "8B continued pre-training, 50B tokens on H100: the cheapest layout that trains"));
    CHECK(contains(r.out, "Totals: each item on its cheapest feasible option"));
    const json j = parse_json(run({"report", small_plan(), "--format", "json", "--explain"}));
    CHECK(j["training"][0]["options"][0].contains("derivation"));
    CHECK(j["totals"].contains("derivation"));
  }

  TEST_CASE("the bundled plan names A100, H100, H200 and B200 and decodes") {
    const std::string plan = (fs::path(kData) / "scenarios" / "llama-3.1-70b-budget.json").string();
    const json p = json::parse(slurp(plan));
    std::vector<std::string> ids;
    for (const auto& o : p["options"]) ids.push_back(o["id"]);
    CHECK(ids == std::vector<std::string>{"A100", "H100", "H200", "B200"});
    CHECK(p["training"][0]["scenario"]["model"] == "llama-3.1-70b");
    CHECK(p["serving"][0]["scenario"]["model"] == "llama-3.1-70b");
  }
}

TEST_SUITE("gpuplan serve --scenario") {
  const std::vector<std::string> kFlags{"--rate", "20", "--input-tokens", "2048", "--output-tokens", "500",
                                        "--ttft-ms", "1000", "--itl-ms", "50", "-m", "llama-3.1-70b", "--gpu", "h100"};
  const std::string kFile = R"({ "model": "llama-3.1-70b", "gpu": "h100", "rate": 20, "input_tokens": 2048,
                                 "output_tokens": 500, "ttft_ms": 1000, "itl_ms": 50 })";

  TEST_CASE("serve --scenario gives what the same flags give - flags override the file") {
    const TempFile f(kFile, "chat.json");
    std::vector<std::string> a{"serve"};
    a.insert(a.end(), kFlags.begin(), kFlags.end());
    a.insert(a.end(), {"--format", "json"});
    const Run flags = run(a);
    const Run file = run({"serve", "--scenario", f.path.string(), "--format", "json"});
    REQUIRE(flags.rc == 0);
    REQUIRE(file.rc == 0);
    CHECK(file.out == flags.out);
    const Run over = run({"serve", "--scenario", f.path.string(), "--rate", "40", "--format", "json"});
    REQUIRE(over.rc == 0);
    CHECK(parse_json(over)["traffic"]["requests_per_s"] == 40.0);
  }

  TEST_CASE("serve --scenario: bad keys and values name the file and the key") {
    struct Case {
      std::string text, want;
    };
    for (const auto& c : std::vector<Case>{
             {R"({"model": "llama-3.1-8b", "ttft": 5})", "/ttft: error: unknown key 'ttft' (did you mean 'ttft_ms'?)"},
             {R"({"model": "llama-3.1-8b", "tp": "eight"})", "/tp: error: expected an integer, found a string \"eight\""},
             {R"({"model": "llama-3.1-8b", "rate": 5, "ttft_ms": 0})", "/ttft_ms: error: must be > 0"},
             {R"({"model": "llama-3.1-8b", "kv_dtype": "fp9"})",
              "/kv_dtype: error: 'fp9' is not one of 'fp32', 'bf16', 'fp16', 'fp8', 'int8', 'int4' (did you mean 'fp8'?)"},
             {R"({"model": "llama-3.1-8b", "rate": 5, "input_dist": "lognormal:1"})",
              "/input_dist: error: 'lognormal:1': lognormal takes MEAN,SD (expected lognormal:MEAN,SD or "
              "TOKENS:WEIGHT,TOKENS:WEIGHT,...)"},
             // Found with fuzz_serving_scenario (docs/reliability.md): lengths beyond the token range overflowed
             // int64 (undefined behaviour); rates beyond any traffic overflowed the replica count.
             {R"({"model": "llama-3.1-8b", "rate": 5, "input_dist": "1e300:1"})",
              "/input_dist: error: '1e300:1': '1e300:1': tokens must be a whole number from 1 to 10000000 and the "
              "weight > 0 (expected lognormal:MEAN,SD or TOKENS:WEIGHT,TOKENS:WEIGHT,...)"},
             {R"({"model": "llama-3.1-8b", "rate": 5, "output_dist": "lognormal:1000,1e200"})",
              "/output_dist: error: 'lognormal:1000,1e200': the mean must be 1 to 10000000 tokens and the standard "
              "deviation 0 to 10000000 (expected lognormal:MEAN,SD or TOKENS:WEIGHT,TOKENS:WEIGHT,...)"},
             {R"({"model": "llama-3.1-8b", "rate": 1e300})",
              "/rate: error: 1e+300 requests/s is more than the planner sizes (at most 1e+09)"},
             // The shared prefix is checked against the prompt, once (it was checked against `gpuplan kv`'s default
             // context of 4096 tokens, so a 5000-token prefix of an 8000-token prompt was refused).
             {R"({"model": "llama-3.1-8b", "input_tokens": 800, "prefix_tokens": 5000})",
              "/prefix_tokens: error: a shared prefix of 5000 tokens is longer than the prompt of 800 tokens"},
         }) {
      CAPTURE(c.text);
      const TempFile f(c.text, "chat.json");
      const Run r = run({"serve", "--scenario", f.path.string()});
      CHECK(r.rc == kInvalid);
      CHECK(errors(r.err) == std::vector<std::string>{f.path.string() + ": " + c.want});
    }
    {
      const TempFile ok(R"({"model": "llama-3.1-8b", "input_tokens": 8000, "prefix_tokens": 5000})", "chat.json");
      const Run r = run({"serve", "--scenario", ok.path.string(), "--no-calibration"});
      CHECK(r.rc == 0);
      CHECK(errors(r.err).empty());
    }
    // A layout the scenario file fixes is named by its key in the file, not by a flag the user did not give.
    {
      const TempFile pp(R"({"model": "llama-3.1-8b", "gpu": "mi300x", "tp": 8, "pp": 2})", "chat.json");
      const Run r = run({"serve", "--scenario", pp.path.string()});
      CHECK(r.rc == kInfeasible);
      REQUIRE(errors(r.err).size() == 1);
      CHECK(starts_with(errors(r.err)[0], pp.path.string() + ": /pp: error: TP 8 × PP 2 of mi300x spans GPUs"));
      const TempFile tp(R"({"model": "llama-3.1-405b", "gpu": "l4", "tp": 1})", "chat.json");
      const Run r2 = run({"serve", "--scenario", tp.path.string()});
      CHECK(r2.rc == kInfeasible);
      REQUIRE(errors(r2.err).size() == 1);
      CHECK(starts_with(errors(r2.err)[0], tp.path.string() + ": /tp: error: llama-3.1-405b does not fit on TP 1"));
    }
    // No model in the file nor on the command line: the flag to give.
    const TempFile nm(R"({"gpu": "h100"})", "chat.json");
    CHECK(errors(run({"serve", "--scenario", nm.path.string()}).err) ==
          std::vector<std::string>{"--model: error: no model given (a library id such as llama-3.1-70b, or a config.json)"});
    // A flag's bad value still names the flag.
    const TempFile f(R"({"model": "llama-3.1-8b"})", "chat.json");
    const Run r = run({"serve", "--scenario", f.path.string(), "--rate", "0"});
    CHECK(errors(r.err) == std::vector<std::string>{"--rate: error: must be > 0 requests/s"});
  }
}

TEST_SUITE("sweeps") {
  const std::vector<std::string> kTrain{"train", "-m", "llama-3.1-8b", "--gpu", "h100", "--tp", "1", "--zero", "1",
                                        "--global-batch", "256", "--seq", "4096", "--tokens", "5e10"};

  TEST_CASE("train --sweep: one CSV row per grid point, stable columns, each row what `train` gives for that point") {
    auto a = kTrain;
    a.insert(a.end(), {"--sweep", "gpus=8..32", "--sweep", "price_usd_per_hour=2,3"});
    const Run r = run(a);
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto rows = lines(r.out);
    REQUIRE(rows.size() == 1 + 3 * 2);
    CHECK(rows[0] ==
          "gpus,price_usd_per_hour,feasible,tp,pp,dp,cp,step_time_s,tokens_per_s,mfu,peak_bytes_per_gpu,"
          "time_to_train_s,gpu_hours,cost_usd,energy_kWh,reasons");
    // The first axis varies slowest.
    CHECK(starts_with(rows[1], "8,2,true,1,1,8,1,"));
    CHECK(starts_with(rows[2], "8,3,true,1,1,8,1,"));
    CHECK(starts_with(rows[6], "32,3,true,1,1,32,1,"));
    const auto c2 = split(rows[1], ','), c3 = split(rows[2], ',');
    CHECK(std::stod(c3[13]) == gptest::approx(1.5 * std::stod(c2[13])));  // cost scales with the price
    // Row 16 GPUs at $2 = `gpuplan train --gpus 16 --price 2`.
    auto one = kTrain;
    one.insert(one.end(), {"--gpus", "16", "--price", "2", "--format", "json"});
    const json e = parse_json(run(one));
    const auto c = split(rows[3], ',');
    CHECK(std::stod(c[7]) == gptest::approx(e["step_time_s"].get<double>()).epsilon(1e-9));
    CHECK(std::stod(c[13]) == gptest::approx(e["cost_usd"].get<double>()).epsilon(1e-9));
    // JSON: an array of objects with the same keys.
    a.insert(a.end(), {"--format", "json"});
    const json j = parse_json(run(a));
    REQUIRE(j.size() == 6);
    CHECK(j[5]["gpus"] == 32);
    CHECK(j[5]["price_usd_per_hour"] == 3.0);
    CHECK(j[5]["feasible"] == true);
  }

  TEST_CASE("serve --sweep runs the planner at every point") {
    const Run r = run({"serve", "-m", "llama-3.1-8b", "--gpu", "h100", "--input-tokens", "1024", "--output-tokens",
                       "256", "--ttft-ms", "500", "--sweep", "rate=5,40"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto rows = lines(r.out);
    REQUIRE(rows.size() == 3);
    CHECK(rows[0] == "rate,feasible,gpus,replicas,tp,pp,batch,ttft_s,itl_s,tokens_per_s,cost_per_hour_usd,"
                     "cost_per_mtok_usd,reasons");
    CHECK(starts_with(rows[1], "5,true,"));
    CHECK(starts_with(rows[2], "40,true,"));
    CHECK(std::stoi(split(rows[2], ',')[2]) >= std::stoi(split(rows[1], ',')[2]));  // more traffic, no fewer GPUs
  }

  TEST_CASE("sweeps stream their rows: JSON laid out as one dump of the array, and an error keeps the rows before it") {
    auto a = kTrain;
    a.insert(a.end(), {"--sweep", "gpus=8..16", "--format", "json"});
    const Run r = run(a);
    REQUIRE(r.rc == 0);
    const auto j = nlohmann::ordered_json::parse(r.out);
    REQUIRE(j.size() == 2);
    CHECK(r.out == j.dump(2) + "\n");  // row by row, the bytes of nlohmann's dump(2) of the whole array

    auto e = kTrain;
    e.insert(e.end(), {"--sweep", "zero=0,1,7,2"});
    const Run csv = run(e);
    CHECK(csv.rc == kInvalid);
    CHECK(lines(csv.out).size() == 3);  // the header and the points zero=0 and zero=1
    CHECK(contains(csv.err, "--sweep: note: at the point zero=7 (3 of 4; the rows before it are written)"));
    e.insert(e.end(), {"--format", "json"});
    const Run json = run(e);
    CHECK(json.rc == kInvalid);
    const auto partial = nlohmann::ordered_json::parse(json.out);  // closed: still parses
    CHECK(partial.size() == 2);
  }

  TEST_CASE("sweep ranges at the edge of double range end cleanly, and a STEP too small to move a value is an error") {
    auto t = [&](const std::string& spec) {
      auto a = kTrain;
      a.insert(a.end(), {"--sweep", spec});
      return run(a);
    };
    // Doubling from 1e308 leaves double range at the second value: one point, which the decoder rejects.
    const Run top = t("tokens=1e308..1.7e308");
    CHECK(top.rc == kInvalid);
    CHECK(contains(top.err, "--sweep: error: value 1e+308 is out of range"));
    const Run flat = t("tokens=1e17..2e17:1");
    CHECK(flat.rc == kInvalid);
    CHECK(contains(flat.err, "STEP 1 is too small to change 1e+17: the range would repeat one value"));
  }

  TEST_CASE("sweeps: bad specs exit 2 naming --sweep - a grid with no feasible point exits 3") {
    auto bad = [&](std::vector<std::string> args, const std::string& want) {
      CAPTURE(want);
      const Run r = run(args);
      CHECK(r.rc == kInvalid);
      CHECK(errors(r.err) == std::vector<std::string>{want});
    };
    auto t = [&](const std::string& spec) {
      auto a = kTrain;
      a.insert(a.end(), {"--sweep", spec});
      return a;
    };
    bad(t("tpp=1,2"), "--sweep: error: 'tpp=1,2': unknown key 'tpp' (did you mean 'tp'?)");
    bad(t("tp=a,2"), "--sweep: error: 'tp=a,2': 'a' is not a number");
    bad(t("recompute=1..4"), "--sweep: error: 'recompute=1..4': a range needs a numeric key; 'recompute' takes a list: recompute=A,B,...");
    bad(t("gpus"), "--sweep: error: 'gpus': expected KEY=A..B, KEY=A..B:STEP or KEY=V1,V2,...");
    bad(t("zero=0,7"), "--sweep: error: value 7 is out of range: expected >= 0 and <= 3");
    bad({"serve", "-m", "llama-3.1-8b", "--sweep", "input_tokens=512,1024"},
        "--sweep: error: serve sweeps run the capacity planner: give --rate (or sweep rate)");
    auto none = t("tp=3,5");
    none.insert(none.end(), {"--gpus", "15"});
    const Run r = run(none);
    CHECK(r.rc == kInfeasible);
    CHECK(contains(r.out, "TP 3 does not divide the 32 attention heads"));
  }
}
