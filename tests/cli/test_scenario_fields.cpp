// The training field table (workloads/io wl_io/scenario_fields.hpp, issue #20 d2) against what is generated from it
// and what must agree with it: every key has a flag, a label and a help; `gpuplan train` has exactly the table's flags
// (of the key's type) beside its own non-scenario options; each stated default is what the reader fills in; and
// docs/scenario.md lists exactly the table's keys and docs/cli.md has a row for each flag.
#include <doctest/doctest.h>

#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_runner.hpp"
#include "field_docs.hpp"
#include "commands.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "test_paths.hpp"

using namespace gpuplan;
using wl_io::training_fields;

namespace {
/// Keys that no gpuplan flag sets, each for a reason: free text of a file, or a Megatron-LM flag of the same name
/// (read by --megatron-args and typed Megatron flags) that a gpuplan option would shadow.
const std::set<std::string> kNoFlag = {"description", "sources", "fp8_recipe", "recompute_method",
                                       "recompute_num_layers"};
/// `train`'s options that are not scenario keys: what to run, how to print, the search and sweep, the timelines, the
/// optimisation stack and its input pipeline, Megatron-LM arguments, test hooks.
const std::set<std::string> kNotScenario = {
    "--help",      "--scenario", "--format",          "--explain",       "--no-calibration", "--search",
    "--top",       "--rank-by",  "--search-csv",      "--deadline-days", "--threads",        "--sweep",
    "--timeline",  "--memory-timeline", "--stack",    "--loader-sample-ms", "--megatron-args", "--data-dir",
    "--cancel-after", "--loader-workers"};

CLI::App* train_command(CLI::App& app, cli::GlobalOptions& g, int& rc) {
  cli::register_train(app, g, rc);
  return app.get_subcommand("train");
}
}  // namespace

TEST_CASE("every training key has a GUI label and a help, and a flag unless it is listed with its reason") {
  std::set<std::string> flags, keys;
  for (const auto& f : training_fields()) {
    CAPTURE(f.key());
    CHECK(keys.insert(f.key()).second);
    CHECK(!f.label.empty());
    CHECK(!f.help.empty());
    CHECK(!f.spec.doc.empty());
    CHECK(f.flags.empty() == (kNoFlag.count(f.key()) == 1));
    if (!f.flags.empty()) CHECK(f.flag().rfind("--", 0) == 0);
    for (const auto& x : f.flags) CHECK(flags.insert(x).second);  // one key per flag
  }
  // The reader's table is the same rows in the same order.
  const auto& specs = wl_io::training_scenario_fields();
  REQUIRE(specs.size() == training_fields().size());
  for (std::size_t i = 0; i < specs.size(); ++i) CHECK(specs[i].key == training_fields()[i].key());
}

TEST_CASE("gpuplan train has one option per flagged key, of the key's type, and no other scenario-like option") {
  CLI::App app;
  cli::GlobalOptions g;
  int rc = 0;
  CLI::App* train = train_command(app, g, rc);
  REQUIRE(train != nullptr);
  const auto options = field_docs::options_of(*train);
  for (const auto& f : training_fields()) {
    if (f.flags.empty()) continue;
    CAPTURE(f.key());
    const auto it = options.find(f.flag());
    REQUIRE(it != options.end());
    const std::string type = it->second->get_type_name();
    using json_io::FieldType;
    const std::string want = f.key() == "gpus" ? "TEXT"  // a count, or a range with --search
                             : f.spec.type == FieldType::integer ? "INT"
                             : f.spec.type == FieldType::number  ? "FLOAT"
                             : f.spec.type == FieldType::boolean ? "BOOLEAN"
                                                                 : "TEXT";
    CHECK(type == want);
    if (f.key() != "gpus") CHECK(it->second->get_description() == f.help_with_default());
    for (const auto& alias : f.flags)
      if (alias.rfind("--", 0) != 0) CHECK(it->second->check_sname(alias.substr(1)));
  }
  std::set<std::string> table_flags;
  for (const auto& f : training_fields())
    for (const auto& x : f.flags) table_flags.insert(x);
  for (const auto& [name, o] : options) {
    if (table_flags.count(name) || kNotScenario.count(name)) continue;
    const auto& captured_name = name;  // clang 14: no structured binding in CAPTURE's lambda
    CAPTURE(captured_name);
    // The vision models' options (cmd_vision.cpp) are their own kind's, not the transformer scenario's.
    CHECK(o->get_description().rfind("vision models:", 0) == 0);
  }
}

TEST_CASE("each literal default the table states is what the reader fills in for an absent key") {
  // Defaults that depend on other keys are stated in words and checked where they are computed (resolve).
  const std::set<std::string> computed = {"dp", "global_batch", "sequence_parallel"};
  const auto decoded = wl_io::decode_training_scenario(json_io::Json::object(), "(test)");
  REQUIRE(decoded.ok());
  const json_io::Json enc = wl_io::encode_training_scenario(decoded.value());
  int checked = 0;
  for (const auto& f : training_fields()) {
    if (!enc.contains(f.key()) || computed.count(f.key())) continue;
    CAPTURE(f.key());
    const json_io::Json& v = enc[f.key()];
    // "2; 4 with fp32, tf32 or amp": what comes before a ';' is the plain default.
    const std::string stated = f.default_text.substr(0, f.default_text.find(';'));
    if (v.is_number()) CHECK(std::stod(stated) == v.get<double>());
    else CHECK(stated == (v.is_string() ? v.get<std::string>() : v.dump()));
    ++checked;
  }
  CHECK(checked >= 20);  // tp, pp, cp, ep, seq, precision, optimizer, zero, recompute, flash_attention, ...
}

TEST_CASE("docs/scenario.md's training table lists exactly the keys of the field table") {
  // The training section: the file's start up to the serving keys.
  const std::string text =
      field_docs::section(std::string(GPUPLAN_TEST_DATA_DIR) + "/../docs/scenario.md", "", "# Serving");
  REQUIRE(!text.empty());
  field_docs::check_documented(field_docs::documented_keys(text), training_fields());
}

TEST_CASE("docs/cli.md's table of train flags has a row for every flag of the field table") {
  // The flag table ends before the first subsection; its rows start "| `-".
  const std::string section =
      field_docs::section(std::string(GPUPLAN_TEST_DATA_DIR) + "/../docs/cli.md", "## `gpuplan train`", "### ");
  std::string rows;
  for (std::size_t at = section.find("\n| `-"); at != std::string::npos; at = section.find("\n| `-", at + 1))
    rows += section.substr(at + 1, section.find(" | ", at + 1) - at - 1) + "\n";
  for (const auto& f : training_fields()) {
    if (f.flags.empty()) continue;
    CAPTURE(f.flag());
    CHECK(field_docs::names_flag(rows, f.flag()));  // "`-m, --model`", "`--tp`, `--pp`", "`--seq N`"
  }
}

TEST_CASE("a value below its key's range is refused against the generated flag, with the value as typed (exit 2)") {
  int checked = 0;
  for (const auto& f : training_fields()) {
    using json_io::FieldType;
    if (f.flags.empty() || f.key() == "gpus" || f.spec.type != FieldType::integer || f.spec.min < 1) continue;
    CAPTURE(f.key());
    const std::string below = std::to_string(static_cast<long long>(f.spec.min) - 1);
    const auto r = cli_test::run({"train", f.flag(), below});
    CHECK(r.rc == cli_test::kInvalid);
    CHECK(r.err.find(f.flag() + ": error: value " + below + " is out of range: expected >= ") != std::string::npos);
    ++checked;
  }
  // tp, pp, dp, cp, ep, etp, virtual_stages, micro_batch, global_batch, seq, shard_group, vocab_divisible_by,
  // first_stage_layers, last_stage_layers.
  CHECK(checked == 14);
}

TEST_CASE("gpuplan mfu's scenario flags are the training table's (type, help), precision and recompute with its help") {
  CLI::App app;
  cli::GlobalOptions g;
  int rc = 0;
  cli::register_mfu(app, g, rc);
  const CLI::App* mfu = app.get_subcommand("mfu");
  REQUIRE(mfu != nullptr);
  const auto options = field_docs::options_of(*mfu);
  int from_table = 0;
  for (const auto& f : training_fields()) {
    if (f.flags.empty() || options.count(f.flag()) == 0) continue;
    CAPTURE(f.key());
    if (f.key() != "precision" && f.key() != "recompute")
      CHECK(options.at(f.flag())->get_description() == f.help_with_default());
    ++from_table;
  }
  CHECK(from_table == 20);  // model, gpu, node, cluster, gpus, the five sizes, batches, seq, precision, ...
  // A bad value is refused by the reader against the flag, as for train.
  const auto r = cli_test::run({"mfu", "-m", "llama-3.1-8b", "--gpus", "8", "--measured-step-s", "1", "--tp", "0"});
  CHECK(r.rc == cli_test::kInvalid);
  CHECK(r.err.find("--tp: error: value 0 is out of range: expected >= 1") != std::string::npos);
}

TEST_CASE("docs/scenario.md's key tables are what gpuplan schema --scenario-doc generates from the field tables") {
  // The key, type, flag and default columns come from the tables; a stale page (a key added, a range or default
  // changed, a cell edited by hand) differs here. Regenerate: gpuplan schema --scenario-doc docs/scenario.md.
  const std::string path = std::string(GPUPLAN_TEST_DATA_DIR) + "/../docs/scenario.md";
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  Diagnostics diags;
  const auto page = cli::scenario_doc(ss.str(), path, diags);
  REQUIRE(page.has_value());
  CHECK(diags.items().empty());
  CHECK(*page == ss.str());
  // training_fields.cpp: tp is an integer in [1, 1024], flag --tp, default 1; fp8_recipe has no gpuplan flag.
  CHECK(page->find("| `tp` | integer in [1, 1024] | `--tp` | 1 | ") != std::string::npos);
  CHECK(page->find("| `fp8_recipe` | \"delayed\" \\| \"tensorwise\" \\| \"mxfp8\" \\| \"blockwise\" | — | delayed | ") !=
        std::string::npos);
  // simulate_fields.cpp and autoscale_fields.cpp: simulate's own options and the autoscale file's keys.
  CHECK(page->find("| `requests` | integer in [1, 100000000] | `--requests` | 1000 | ") != std::string::npos);
  CHECK(page->find("| `cold_start_s` | number | `--cold-start-s` | 300 | ") != std::string::npos);
}

TEST_CASE("docs/scenario.md's simulate and autoscale tables list exactly the keys of their field tables") {
  const std::string path = std::string(GPUPLAN_TEST_DATA_DIR) + "/../docs/scenario.md";
  const std::vector<std::tuple<std::string, std::string, const wl_io::ScenarioFieldTable*>> sections{
      {"# Simulate options", "# ", &wl_io::simulate_fields()},
      {"# Autoscale scenario keys", "## ", &wl_io::autoscale_fields()},
      {"## `load`", "## ", &wl_io::autoscale_load_fields()},
      {"## `autoscale`", "# ", &wl_io::autoscale_policy_fields()}};
  for (const auto& [from, to, table] : sections) {
    const auto& captured_from = from;  // clang 14: no structured binding in CAPTURE's lambda
    CAPTURE(captured_from);
    const std::string text = field_docs::section(path, from, to);
    REQUIRE(!text.empty());
    field_docs::check_documented(field_docs::documented_keys(text), *table);
  }
}

TEST_CASE("a scenario doc table: a row per key of the table, the page's meaning kept, the field's doc where it has none") {
  const std::string head = "# Title\n\nprose | with a bar\n";
  const std::string text = head +
                           "<!-- scenario table: training -->\n| key | type | meaning |\n| `tp` | integer | my words "
                           "\\| kept |\n| `pp`, `dp` | integer | parallel sizes |\n<!-- end scenario table -->\ntail\n";
  Diagnostics diags;
  const auto page = cli::scenario_doc(text, "x.md", diags);
  REQUIRE(page.has_value());
  CHECK(page->rfind(head + "<!-- scenario table: training -->\n\n| key | type | flag | default | meaning |\n", 0) == 0);
  CHECK(page->find("| `tp` | integer in [1, 1024] | `--tp` | 1 | my words \\| kept |\n") != std::string::npos);
  // A row of several keys gives no meaning: pp and dp take the field's reference text, and their own defaults.
  CHECK(page->find("| `pp` | integer in [1, 4096] | `--pp` | 1 | pipeline parallel size |\n") != std::string::npos);
  CHECK(page->find("| `dp` | integer in [1, 10000000] | `--dp` | gpus / (tp·pp·cp) | data parallel size |\n") !=
        std::string::npos);
  std::size_t rows = 0;
  for (std::size_t p = page->find("\n| `"); p != std::string::npos; p = page->find("\n| `", p + 1)) ++rows;
  CHECK(rows == training_fields().size());
  CHECK(page->ends_with("\n\n<!-- end scenario table -->\ntail\n"));
}

TEST_CASE("gpuplan schema --scenario-doc: an unknown table kind or an unclosed table names the file and line (exit 2)") {
  Diagnostics diags;
  CHECK_FALSE(cli::scenario_doc("a\n<!-- scenario table: vision -->\n", "p.md", diags).has_value());
  REQUIRE(diags.items().size() == 1);
  CHECK(diags.items().front().to_string() ==
        "p.md:2: error: 'vision' is not a scenario kind (training, serving, simulate, autoscale, autoscale-load, "
        "autoscale-policy)");
  Diagnostics d2;
  CHECK_FALSE(cli::scenario_doc("<!-- scenario table: serving -->\n| `tp` | x | y |\n", "p.md", d2).has_value());
  REQUIRE(d2.items().size() == 1);
  CHECK(d2.items().front().to_string() ==
        "p.md:1: error: the scenario table opened here has no '<!-- end scenario table -->' line");
  const auto r = cli_test::run_raw({"schema", "--scenario-doc", "/nonexistent/scenario.md"});
  CHECK(r.rc == cli_test::kInvalid);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("/nonexistent/scenario.md: error: ", 0) == 0);
}
