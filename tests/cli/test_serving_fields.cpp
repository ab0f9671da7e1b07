// The serving field table (workloads/io wl_io/scenario_fields.hpp serving_fields, issue #20 d2) against what is
// generated from it and what must agree with it: every key has a label, a help and a reference text; `gpuplan serve`
// has exactly the table's flags (of the key's type) beside its own options, and simulate, compress and autoscale the
// table's one-replica flags plus the planner keys they name; the reader's table is the same rows; docs/scenario.md's
// serving table lists exactly the keys and docs/cli.md names every flag; a bad value is refused against its flag.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <map>
#include <set>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli_runner.hpp"
#include "field_docs.hpp"
#include "commands.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "test_paths.hpp"

using namespace gpuplan;
using wl_io::serving_fields;

namespace {
/// Keys that no gpuplan flag sets: SGLang's own spellings set them (--moe-a2a-backend, --deepep-mode,
/// --enable-two-batch-overlap, engine_map.cpp); a gpuplan option of the same name would shadow them.
const std::set<std::string> kNoFlag = {"moe_a2a_backend", "deepep_mode", "two_batch_overlap"};

/// Options of the serving commands that are not scenario keys.
const std::set<std::string> kNotScenario = {
    "--help", "--scenario", "--format", "--explain", "--no-calibration", "--vllm-args", "--sglang-args",
    "--data-dir", "--sweep"};

std::string cli_type(const wl_io::ScenarioField& f) {
  using json_io::FieldType;
  return f.spec.type == FieldType::integer   ? "INT"
         : f.spec.type == FieldType::number  ? "FLOAT"
         : f.spec.type == FieldType::boolean ? "BOOLEAN"
                                             : "TEXT";
}

}  // namespace

TEST_CASE("every serving key has a GUI label, a help and a reference text, and a flag unless listed with its reason") {
  std::set<std::string> flags, keys;
  for (const auto& f : serving_fields()) {
    CAPTURE(f.key());
    CHECK(keys.insert(f.key()).second);
    CHECK(!f.label.empty());
    CHECK(!f.help.empty());
    CHECK(!f.spec.doc.empty());
    CHECK(f.flags.empty() == (kNoFlag.count(f.key()) == 1));
    if (!f.flags.empty()) CHECK(f.flag().rfind("--", 0) == 0);
    if (f.switch_flag) CHECK(f.spec.type == json_io::FieldType::boolean);
    for (const auto& x : f.flags) CHECK(flags.insert(x).second);
  }
  const auto& specs = wl_io::serving_scenario_fields();
  REQUIRE(specs.size() == serving_fields().size());
  for (std::size_t i = 0; i < specs.size(); ++i) CHECK(specs[i].key == serving_fields()[i].key());
  CHECK(keys.size() >= 58);  // model ... capacity: 58 keys in November 2026
}

TEST_CASE("a diagnostic names a key's flag, or the engines' spelling of a key without one") {
  CHECK(wl_io::flag_of_key(serving_fields(), "price_usd_per_hour") == "--price");
  CHECK(wl_io::flag_of_key(serving_fields(), "input_tokens") == "--input-tokens");
  CHECK(wl_io::flag_of_key(serving_fields(), "moe_a2a_backend") == "--moe-a2a-backend");
  CHECK(wl_io::serving_key_label("kv_dtype") == "KV cache");
  CHECK(wl_io::serving_key_label("no_such_key") == "no_such_key");
}

TEST_CASE("gpuplan serve has one option per flagged key, of the key's type, and no other scenario-like option") {
  CLI::App app;
  cli::GlobalOptions g;
  int rc = 0;
  cli::register_serve(app, g, rc);
  const CLI::App* serve = app.get_subcommand("serve");
  REQUIRE(serve != nullptr);
  const auto options = field_docs::options_of(*serve);
  std::set<std::string> table_flags;
  for (const auto& f : serving_fields()) {
    if (f.flags.empty()) continue;
    CAPTURE(f.key());
    for (const auto& x : f.flags) table_flags.insert(x);
    const auto it = options.find(f.flag());
    REQUIRE(it != options.end());
    CHECK(it->second->get_description() == f.help_with_default());
    if (f.switch_flag) CHECK(it->second->get_expected_min() == 0);  // --disaggregated takes no value
    else CHECK(it->second->get_type_name() == cli_type(f));
    for (const auto& alias : f.flags)
      if (alias.rfind("--", 0) != 0) CHECK(it->second->check_sname(alias.substr(1)));
  }
  for (const auto& [name, o] : options) {
    if (table_flags.count(name) || kNotScenario.count(name)) continue;
    const auto& captured_name = name;  // clang 14: no structured binding in CAPTURE's lambda
    CAPTURE(captured_name);
    // The timeline's options (serve_timeline.hpp) and the vision models' (cmd_vision.cpp) are not scenario keys.
    const std::string d = o->get_description();
    CHECK((d.rfind("vision models:", 0) == 0 || name.rfind("--timeline", 0) == 0));
  }
}

TEST_CASE("simulate, compress and autoscale take the table's one-replica flags and only the planner keys they name") {
  const std::map<std::string, std::set<std::string>> own_planner_keys = {
      {"simulate", {"rate"}}, {"compress", {"batch"}}, {"autoscale", {"ttft_ms", "itl_ms", "percentile", "price_usd_per_hour"}}};
  for (const auto& [name, own] : own_planner_keys) {
    const auto& captured_name = name;  // clang 14: no structured binding in CAPTURE's lambda
    CAPTURE(captured_name);
    CLI::App app;
    cli::GlobalOptions g;
    int rc = 0;
    if (name == "simulate") cli::register_simulate(app, g, rc);
    else if (name == "compress") cli::register_compress(app, g, rc);
    else cli::register_autoscale(app, g, rc);
    const CLI::App* cmd = app.get_subcommand(name);
    REQUIRE(cmd != nullptr);
    const auto options = field_docs::options_of(*cmd);
    for (const auto& f : serving_fields()) {
      if (f.flags.empty()) continue;
      CAPTURE(f.key());
      const bool want = !f.planner_only || own.count(f.key()) == 1;
      CHECK((options.count(f.flag()) == 1) == want);
      if (want && !f.planner_only) CHECK(options.at(f.flag())->get_description() == f.help_with_default());
    }
  }
}

TEST_CASE("docs/scenario.md's serving table lists exactly the keys of the field table") {
  const std::string text = field_docs::section(std::string(GPUPLAN_TEST_DATA_DIR) + "/../docs/scenario.md",
                                               "# Serving scenario keys", "# ");
  REQUIRE(!text.empty());
  field_docs::check_documented(field_docs::documented_keys(text), serving_fields());
}

TEST_CASE("docs/cli.md names every serving flag in serve's table or in kv's, which serve takes whole") {
  const std::string docs = std::string(GPUPLAN_TEST_DATA_DIR) + "/../docs/cli.md";
  const std::string serve = field_docs::section(docs, "## `gpuplan serve`", "### ");
  const std::string kv = field_docs::section(docs, "## `gpuplan kv`", "## `gpuplan serve`");
  REQUIRE(!serve.empty());
  REQUIRE(!kv.empty());
  for (const auto& f : serving_fields()) {
    if (f.flags.empty()) continue;
    CAPTURE(f.flag());
    CHECK((field_docs::names_flag(serve, f.flag()) || field_docs::names_flag(kv, f.flag())));
  }
}

TEST_CASE("a serving value out of its key's range is refused against the generated flag, with the value as typed") {
  int checked = 0;
  for (const auto& f : serving_fields()) {
    using json_io::FieldType;
    if (f.flags.empty() || f.spec.type != FieldType::integer || f.spec.min < 1) continue;
    CAPTURE(f.key());
    const std::string below = std::to_string(static_cast<long long>(f.spec.min) - 1);
    const auto r = cli_test::run({"serve", "-m", "llama-3.1-8b", f.flag(), below});
    CHECK(r.rc == cli_test::kInvalid);
    CHECK(r.err.find(f.flag() + ": error: value " + below + " is out of range: expected >= ") != std::string::npos);
    ++checked;
  }
  // tp, pp, ep, attention_dp, input_tokens, output_tokens, batch, concurrency, prefill_attention_dp,
  // decode_attention_dp, spec_tokens, block_size, max_num_batched_tokens, max_num_seqs.
  CHECK(checked == 14);
  const auto r = cli_test::run({"serve", "-m", "llama-3.1-8b", "--kv-dtype", "fp7"});
  CHECK(r.rc == cli_test::kInvalid);
  CHECK(r.err.find("--kv-dtype: error: 'fp7' is not one of") != std::string::npos);
}

TEST_CASE("gpuplan kv's memory flags are the table's (type, help), and its other options are its own questions") {
  CLI::App app;
  cli::GlobalOptions g;
  int rc = 0;
  cli::register_kv(app, g, rc);
  const CLI::App* kv = app.get_subcommand("kv");
  REQUIRE(kv != nullptr);
  const auto options = field_docs::options_of(*kv);
  int from_table = 0;
  for (const auto& f : serving_fields()) {
    if (f.flags.empty() || f.key() == "concurrency") continue;  // kv's --concurrency: sequences, not users
    const auto it = options.find(f.flag());
    if (it == options.end()) continue;
    CAPTURE(f.key());
    CHECK(!f.planner_only);
    CHECK(it->second->get_description() == f.help_with_default());
    if (!f.switch_flag) CHECK(it->second->get_type_name() == cli_type(f));
    ++from_table;
  }
  // model, gpu, tp, pp and the 19 memory knobs of serving_fields (all but --prefix-hit-rate, a prefill saving).
  CHECK(from_table == 23);
  CHECK(options.at("--model")->get_required());
  const std::set<std::string> own = {"--gpus", "--context", "--concurrency", "--params", "--no-scale-overhead",
                                     "--paging-overhead", "--gpu-count", "--simple"};
  for (const auto& name : own) CHECK(options.count(name) == 1);
  const auto r = cli_test::run({"kv", "-m", "llama-3.1-8b", "--block-size", "0"});
  CHECK(r.rc == cli_test::kInvalid);
  CHECK(r.err.find("--block-size: error: value 0 is out of range: expected >= 1") != std::string::npos);
}

TEST_CASE("gpuplan autoscale has one option per flagged key of the autoscale tables, with the key's help") {
  CLI::App app;
  cli::GlobalOptions g;
  int rc = 0;
  cli::register_autoscale(app, g, rc);
  const CLI::App* cmd = app.get_subcommand("autoscale");
  REQUIRE(cmd != nullptr);
  const auto options = field_docs::options_of(*cmd);
  int flagged = 0;
  for (const auto* table : {&wl_io::autoscale_fields(), &wl_io::autoscale_load_fields(), &wl_io::autoscale_policy_fields()}) {
    for (const auto& f : *table) {
      if (f.flags.empty()) continue;
      CAPTURE(f.key());
      REQUIRE(options.count(f.flag()) == 1);
      CHECK(options.at(f.flag())->get_description() == f.help_with_default());
      CHECK(!f.spec.doc.empty());
      ++flagged;
    }
  }
  CHECK(flagged == 21);  // e2e_ms, the 9 load keys and the 11 policy keys
  // The reader's top-level table nests the load and policy tables: a key of neither is refused with its pointer.
  const auto& top = wl_io::autoscale_file_specs();
  REQUIRE(top.size() == wl_io::autoscale_fields().size());
  for (const auto& s : top)
    if (s.key == "load" || s.key == "autoscale") CHECK(s.nested != nullptr);
}

TEST_CASE("a vision model reads serve's --batch and --compute itself: out of range or unknown is still refused") {
  // The table's options carry no CLI11 checks (the serving reader checks a transformer's values); the vision path
  // checks the two it reads (int8 is a vision precision, not a transformer's: tests/vision).
  const auto b = cli_test::run({"serve", "-m", "resnet50", "--gpu", "h100", "--batch", "0"});
  CHECK(b.rc == cli_test::kInvalid);
  CHECK(b.err.find("--batch: error: value 0 is out of range: expected >= 1") != std::string::npos);
  const auto c = cli_test::run({"serve", "-m", "resnet50", "--gpu", "h100", "--compute", "fp7"});
  CHECK(c.rc == cli_test::kInvalid);
  CHECK(c.err.find("--compute: error: 'fp7' is not one of") != std::string::npos);
}

TEST_CASE("the table's default CPU cost per eager call is the model's measured one, op by op") {
  // The field table (workloads/io) cannot call the model; its default text must say what the model assumes: each
  // call at its kind's measured host cost (model::eager_host_per_call, eager_host_ops.json's inference column).
  const auto* f = wl_io::find_field(serving_fields(), "cpu_per_kernel_us");
  REQUIRE(f != nullptr);
  using model::HostCall;
  auto us = [](HostCall c) { return model::eager_host_per_call(c).raw() * 1e6; };
  CHECK(f->default_text == fmt::format("per op: GEMM {:.1f}, norm {:.1f}, attention {:.1f}, elementwise {:.1f} / {:.1f}",
                                       us(HostCall::gemm), us(HostCall::norm), us(HostCall::attention),
                                       us(HostCall::unary), us(HostCall::binary)));
  CHECK(f->spec.doc.find(fmt::format("collectives {:.1f}", us(HostCall::other))) != std::string::npos);
  CHECK(model::eager_cpu_per_kernel().raw() == gptest::approx(22.2e-6));
  CHECK(us(HostCall::other) == gptest::approx(22.2));
  const model::ServingPerfPlan plan;
  CHECK(plan.cpu_cost_by_op);
  CHECK(plan.cpu_per_kernel.raw() == model::eager_cpu_per_kernel().raw());
  // --cpu-per-kernel-us gives one cost for every call.
  const auto r = cli_test::run({"serve", "-m", "llama-3-8b", "--batch", "8", "--enforce-eager", "--cpu-per-kernel-us",
                                "30", "--explain"});
  CHECK(r.rc == 0);
  CHECK(r.out.find("(30 µs per call)") != std::string::npos);
}

TEST_CASE("the serving decoder types every value at the edge: enums, precisions and parsed length distributions") {
  const auto j = nlohmann::json::parse(R"({"model": "m", "compute": "fp8", "weight_dtype": "int4", "kv_dtype": "fp8",
      "kv_scales": "per-head", "engine": "sglang", "overheads": "none", "capacity": "label",
      "moe_a2a_backend": "deepep", "deepep_mode": "low_latency", "input_dist": "300:3,100:1",
      "output_dist": "lognormal:200,50"})");
  const auto s = wl_io::decode_serving_scenario(j, "chat.json");
  REQUIRE(s.ok());
  CHECK(s->compute == hw::Precision::fp8);
  CHECK(s->weight_dtype == model::StoreDtype::int4);
  CHECK(s->kv_dtype == model::StoreDtype::fp8);
  CHECK(s->kv_scales == model::KvScaleGranularity::per_head);
  CHECK(s->engine == model::MemoryEngine::sglang);
  CHECK(s->overheads == wl_io::RuntimeOverheads::none);
  CHECK(s->capacity == model::CapacityBasis::label);
  CHECK(s->moe_a2a_backend == model::MoeA2aBackend::deepep);
  CHECK(s->deepep_mode == model::DeepEpMode::low_latency);
  // TOKENS:WEIGHT points sorted by tokens, the weights normalised; lognormal discretised at 32 points.
  REQUIRE(s->input_dist.has_value());
  REQUIRE(s->input_dist->points.size() == 2);
  CHECK(s->input_dist->points[0] == std::pair<std::int64_t, double>{100, 0.25});
  CHECK(s->input_dist->points[1] == std::pair<std::int64_t, double>{300, 0.75});
  CHECK(s->input_dist->mean() == gptest::approx(250.0));
  REQUIRE(s->output_dist.has_value());
  CHECK(s->output_dist->points == model::lognormal_lengths(200, 50).points);
  // Absent keys stay absent: resolution applies the documented defaults.
  const auto bare = wl_io::decode_serving_scenario(nlohmann::json::parse(R"({"model": "m"})"), "chat.json");
  REQUIRE(bare.ok());
  CHECK(!bare->compute);
  CHECK(!bare->kv_dtype);
  CHECK(!bare->input_dist);
  CHECK(!bare->deepep_mode);
}

TEST_CASE("a length distribution that does not parse is refused by the decoder at its pointer, or at its flag") {
  const auto j = nlohmann::json::parse(R"({"model": "m", "input_dist": "100:0", "output_dist": "lognormal:5"})");
  const auto in_file = wl_io::decode_serving_scenario(j, "plan.json", "/serving/0/scenario");
  REQUIRE(!in_file.ok());
  const auto& items = in_file.diagnostics().items();
  REQUIRE(items.size() == 2);
  CHECK(items[0].to_string() ==
        "plan.json: /serving/0/scenario/input_dist: error: '100:0': '100:0': tokens must be a whole number from 1 to "
        "10000000 and the weight > 0 (expected lognormal:MEAN,SD or TOKENS:WEIGHT,TOKENS:WEIGHT,...)");
  CHECK(items[1].to_string() ==
        "plan.json: /serving/0/scenario/output_dist: error: 'lognormal:5': lognormal takes MEAN,SD (expected "
        "lognormal:MEAN,SD or TOKENS:WEIGHT,TOKENS:WEIGHT,...)");
  const auto by_flag = wl_io::decode_serving_scenario(j, "(flags)", "", {{"input_dist", "--input-dist"}});
  REQUIRE(!by_flag.ok());
  CHECK(by_flag.diagnostics().items()[0].to_string().rfind("--input-dist: error: '100:0': ", 0) == 0);
  // The parser alone: the value as typed and the rule.
  std::string error;
  CHECK(!wl_io::parse_length_dist("lognormal:0,1", error));
  CHECK(error == "'lognormal:0,1': the mean must be 1 to 10000000 tokens and the standard deviation 0 to 10000000 "
                 "(expected lognormal:MEAN,SD or TOKENS:WEIGHT,TOKENS:WEIGHT,...)");
  CHECK(wl_io::parse_length_dist("512:1", error)->points ==
        std::vector<std::pair<std::int64_t, double>>{{512, 1.0}});
}

TEST_CASE("a DeepEP mode without the DeepEP backend is refused by the decoder, with the value as typed") {
  const auto j = nlohmann::json::parse(R"({"model": "m", "deepep_mode": "normal"})");
  const auto s = wl_io::decode_serving_scenario(j, "chat.json");
  REQUIRE(!s.ok());
  REQUIRE(s.diagnostics().items().size() == 1);
  CHECK(s.diagnostics().items()[0].to_string() ==
        "chat.json: /deepep_mode: error: 'normal' picks DeepEP's kernels: give moe_a2a_backend deepep "
        "(--moe-a2a-backend deepep) with it");
  const auto nccl = wl_io::decode_serving_scenario(
      nlohmann::json::parse(R"({"model": "m", "moe_a2a_backend": "nccl", "deepep_mode": "auto"})"), "chat.json");
  CHECK(!nccl.ok());
  const auto ok = wl_io::decode_serving_scenario(
      nlohmann::json::parse(R"({"model": "m", "moe_a2a_backend": "deepep", "deepep_mode": "auto"})"), "chat.json");
  REQUIRE(ok.ok());
  CHECK(ok->deepep_mode == model::DeepEpMode::automatic);
}

TEST_CASE("gpuplan simulate has one option per row of its field table, of the key's type, with the key's help") {
  CLI::App app;
  cli::GlobalOptions g;
  int rc = 0;
  cli::register_simulate(app, g, rc);
  const CLI::App* cmd = app.get_subcommand("simulate");
  REQUIRE(cmd != nullptr);
  const auto options = field_docs::options_of(*cmd);
  for (const auto& f : wl_io::simulate_fields()) {
    CAPTURE(f.key());
    CHECK(!f.label.empty());
    CHECK(!f.spec.doc.empty());
    REQUIRE(options.count(f.flag()) == 1);
    CHECK(options.at(f.flag())->get_description() == f.help_with_default());
    CHECK(options.at(f.flag())->get_type_name() == cli_type(f));
    // No serving key shares a simulate option's flag: the two tables generate disjoint options.
    for (const auto& s : serving_fields()) CHECK(s.flag() != f.flag());
  }
  CHECK(wl_io::simulate_fields().size() == 11);
  // The trace, length and seed rows are the autoscale load's: one help and one meaning for both commands.
  for (const char* key : {"trace", "input_lengths", "output_lengths", "seed"}) {
    CAPTURE(key);
    const auto* sim = wl_io::find_field(wl_io::simulate_fields(), key);
    const auto* load = wl_io::find_field(wl_io::autoscale_load_fields(), key);
    REQUIRE(sim != nullptr);
    REQUIRE(load != nullptr);
    CHECK(sim->help_with_default() == load->help_with_default());
    CHECK(sim->spec.doc == load->spec.doc);
  }
  CHECK(wl_io::key_label(wl_io::simulate_fields(), "static_batch") == "Batch B");
  CHECK(wl_io::key_label(wl_io::simulate_fields(), "no_such_key") == "no_such_key");
}

TEST_CASE("simulate runs the defaults its field table states: arrivals, requests, seed and batching") {
  auto def = [](const char* key) { return wl_io::find_field(wl_io::simulate_fields(), key)->default_text; };
  const auto r = cli_test::run({"simulate", "-m", "llama-3.1-8b", "--gpu", "h100", "--rate", "2", "--input-tokens",
                                "128", "--output-tokens", "16", "--format", "json"});
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["workload"] == fmt::format("{} arrivals at 2 req/s, {} requests, seed {}", def("arrival"), def("requests"),
                                     def("seed")));
  CHECK(j["batching"] == def("batching"));
  CHECK(j["requests"] == std::stoll(def("requests")));
}
