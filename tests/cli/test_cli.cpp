// End-to-end tests of the gpuplan binary: exit codes (0 ok, 2 invalid input, CLI11's own codes for argument errors),
// diagnostics on stderr, and the four output formats. Each test runs the built binary with a fixed environment
// (LC_ALL=C, COLUMNS=80, no GPUPLAN_DATA_DIR) and the repository's data/ given by --data-dir, so results do not depend
// on the terminal, the locale or the caller's environment.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "test_paths.hpp"
#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The shared fixtures are in tests/fixtures. GPUPLAN_TEST_FIXTURES is set from the calling folder
// (tests/cli/fixtures), so fall back to the repository's tests/fixtures when it has no hf/ folder.
std::string fixtures() {
  const fs::path given = GPUPLAN_TEST_FIXTURES;
  if (fs::is_directory(given / "hf")) return given.string();
  return (fs::path(kData).parent_path() / "tests" / "fixtures").string();
}
std::string hf(const std::string& name) { return fixtures() + "/hf/" + name + "/config.json"; }
std::string hw_fixture(const std::string& name) { return fixtures() + "/hw/" + name; }

const std::vector<std::string> kGpuIds{
    "v100-sxm2", "a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-80gb", "h100-sxm5-80gb", "h100-pcie-80gb",
    "h100-nvl",  "h800-sxm5",      "h20",            "h200-sxm-141gb", "b100",           "b200-hgx",
    "gb200-gpu", "b300-hgx",       "gb300-gpu",      "l40s",           "l4",             "mi250x",
    "mi300x",    "mi325x",         "mi355x",         "jetson-agx-orin-64gb", "jetson-agx-orin-32gb",
    "jetson-agx-thor", "rtx-4090",     "rtx-5090", "h100-sxm-96gb-hbm2e"};

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("gpuplan hw") {
  TEST_CASE("hw validate with no path checks the whole data directory: exit 0, 'ok: 27 GPUs'") {
    const Run r = run({"hw", "validate"});
    INFO(r.err);
    CHECK(r.rc == 0);
    CHECK(starts_with(r.out, "ok: 27 GPUs, "));
    CHECK(r.err.empty());
  }

  TEST_CASE("hw list shows every GPU of the database, one per row") {
    const Run r = run({"hw", "list"});
    REQUIRE(r.rc == 0);
    CHECK(r.err.empty());
    const auto ls = lines(r.out);
    REQUIRE(ls.size() == 2 + kGpuIds.size());  // heading, rule, one row per GPU
    CHECK(starts_with(ls[0], "id "));
    std::set<std::string> first_column;
    for (std::size_t i = 2; i < ls.size(); ++i) first_column.insert(ls[i].substr(0, ls[i].find(' ')));
    for (const auto& id : kGpuIds) {
      CAPTURE(id);
      CHECK(first_column.count(id) == 1);
    }
  }

  TEST_CASE("hw list --format csv has a stable header of machine names with units") {
    const Run r = run({"hw", "list", "--format", "csv"});
    REQUIRE(r.rc == 0);
    const auto ls = lines(r.out);
    REQUIRE(!ls.empty());
    CHECK(ls[0] == "id,name,bf16_TFLOPs,fp16_TFLOPs,fp8_TFLOPs,fp4_TFLOPs,hbm_GB,hbm_TBps,scale_up_uni_GBps,tdp_W,price_usd_per_hour,"
          "price_kind");
    CHECK(ls.size() == 1 + kGpuIds.size());
    CHECK(contains(r.out, "\nh100-sxm5-80gb,NVIDIA H100 SXM5 80GB,989.4,"));
  }

  TEST_CASE("hw list --format json is an array of 27 objects with bf16_TFLOPs") {
    const json j = parse_json(run({"hw", "list", "--format", "json"}));
    REQUIRE(j.is_array());
    CHECK(j.size() == 27);
    std::set<std::string> ids;
    for (const auto& g : j) {
      const std::string id = g.at("id").get<std::string>();
      CAPTURE(id);
      ids.insert(id);
      REQUIRE(g.contains("bf16_TFLOPs"));
      if (id == "v100-sxm2") CHECK(g["bf16_TFLOPs"].is_null());  // V100 has no bf16 unit: null, never 0
      else CHECK(g["bf16_TFLOPs"].get<double>() > 0);
      CHECK(g.at("hbm_TBps").get<double>() > 0);
    }
    CHECK(ids == std::set<std::string>(kGpuIds.begin(), kGpuIds.end()));
  }

  TEST_CASE("hw list --format json carries the data values, not the 4-digit display rounding") {
    // H100 SXM5 fp8 is 1978.9 and MI300X bf16 1307.4 TFLOP/s in the data files (hardware_facts.md §2, §5); a machine
    // format must not round them to 1979 and 1307 as the text table does.
    const json j = parse_json(run({"hw", "list", "--format", "json"}));
    for (const auto& g : j) {
      if (g["id"] == "h100-sxm5-80gb") CHECK(g["fp8_TFLOPs"].get<double>() == gptest::approx(1978.9).epsilon(1e-9));
      if (g["id"] == "mi300x") CHECK(g["bf16_TFLOPs"].get<double>() == gptest::approx(1307.4).epsilon(1e-9));
    }
  }

  TEST_CASE("hw show h100 notes the part it resolved to and prints the ridge point 989.4/3.35 = 295.3 FLOP/B") {
    const Run r = run({"hw", "show", "h100"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    CHECK(starts_with(r.out, "NVIDIA H100 SXM5 80GB\n"));
    CHECK(contains(r.out, "h100-sxm5-80gb"));
    CHECK(contains(r.err, "note: 'h100' is h100-sxm5-80gb (NVIDIA H100 SXM5 80GB)"));
    CHECK(contains(r.out, "989.4 TFLOP/s"));
    CHECK(contains(r.out, "3.35 TB/s"));
    CHECK(contains(r.out, "295.3 FLOP/B"));

    const json j = parse_json(run({"hw", "show", "h100", "--format", "json"}));
    CHECK(j["id"] == "h100-sxm5-80gb");
    CHECK(j["ridge_point_bf16_FLOP_per_B"].get<double>() == gptest::approx(989.4 / 3.35));
    CHECK(j["dense_peak"]["bf16_TFLOPs"].get<double>() == gptest::approx(989.4));
    CHECK(j["memory_bandwidth_TBps"].get<double>() == gptest::approx(3.35));
  }

  TEST_CASE("hw show of a link converts its line rate: 400 Gb/s = 50 GB/s") {
    const Run r = run({"hw", "show", "ib-ndr"});
    REQUIRE(r.rc == 0);
    CHECK(contains(r.out, "50 GB/s (400 Gb/s)"));
  }

  TEST_CASE("hw show of an unknown id exits 2, and a near miss gets a did-you-mean") {
    const Run r = run({"hw", "show", "nosuchgpu"});
    CHECK(r.rc == kInvalid);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "error: unknown hardware id 'nosuchgpu'"));
    // Nothing is close to 'nosuchgpu', so no suggestion is right; a typo gets one.
    CHECK_FALSE(contains(r.err, "did you mean"));

    const Run t = run({"hw", "show", "h10"});
    CHECK(t.rc == kInvalid);
    CHECK(contains(t.err, "error: unknown hardware id 'h10' (did you mean 'h100'?)"));
    const Run u = run({"hw", "show", "b200-hgz"});
    CHECK(u.rc == kInvalid);
    CHECK(contains(u.err, "(did you mean 'b200-hgx'?)"));
  }

  TEST_CASE("hw show --format md starts with a Markdown heading") {
    const Run r = run({"hw", "show", "h100-sxm5-80gb", "--format", "md"});
    REQUIRE(r.rc == 0);
    CHECK(starts_with(r.out, "## NVIDIA H100 SXM5 80GB\n"));
    CHECK(r.err.empty());  // the id itself needs no note
  }

  TEST_CASE("hw validate FILE: a bad file exits 2 with its exact diagnostic") {
    const std::string f = hw_fixture("bad/negative-bandwidth.json");
    const Run r = run({"hw", "validate", f});
    CHECK(r.rc == kInvalid);
    CHECK(r.out.empty());
    CHECK(r.err == f + ": /memory/bandwidth_TBps: error: value -3.35 TB/s is out of range: expected >= 8e-05 and <= 80 TB/s\n");
  }

  TEST_CASE("hw validate FILE checks references against the data directory") {
    const std::string f = hw_fixture("bad/dangling-link.json");
    const Run r = run({"hw", "validate", f});
    CHECK(r.rc == kInvalid);
    CHECK(r.err == f + ": /scale_up/link: error: unknown link 'nvlink-4' (did you mean 'nvlink4'?)\n");
  }

  TEST_CASE("hw validate of a malformed file gives file:line:col") {
    const std::string f = hw_fixture("bad/malformed-json.json");
    const Run r = run({"hw", "validate", f});
    CHECK(r.rc == kInvalid);
    CHECK(starts_with(r.err, f + ":5:8: error: malformed JSON: "));
  }

  TEST_CASE("hw validate FOLDER reports the problems of every file in it") {
    const Run r = run({"hw", "validate", hw_fixture("bad")});
    CHECK(r.rc == kInvalid);
    for (const char* name : {"absurd-bf16.json", "empty-sources.json", "id-mismatch.json", "malformed-json.json",
                             "many-errors.json", "missing-required.json", "negative-bandwidth.json",
                             "unknown-key.json", "unknown-kind.json", "wrong-enum.json", "wrong-type.json"}) {
      CAPTURE(name);
      CHECK(contains(r.err, std::string(name) + ":"));
    }
  }

  TEST_CASE("hw validate of a good file exits 0") {
    const Run r = run({"hw", "validate", hw_fixture("good/test-gpu.json")});
    INFO(r.err);
    CHECK(r.rc == 0);
    CHECK(r.out == "ok: 1 file(s) valid\n");
    CHECK(r.err.empty());
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("gpuplan model") {
  TEST_CASE("model show llama-3.1-70b --format json: total parameters within 0.5% of the published 70.6e9") {
    const Run r = run({"model", "show", "llama-3.1-70b", "--format", "json"});
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(j["id"] == "llama-3.1-70b");
    const double total = j["params"]["total"].get<double>();
    CHECK(std::abs(total / 70.6e9 - 1.0) < 0.005);
    CHECK(j["published"]["total_params_B"].get<double>() == gptest::approx(70.6));
    CHECK(j["architecture"]["kv_heads"] == 8);
  }

  // Textbook T8/T9 (../shared/reference/textbook.md): Llama-2-7B, 32 layers x 32 KV heads x 128, bf16:
  // 2*32*32*128*2 = 524,288 B = 512 KiB per token; 4096 tokens = 2.15 GB.
  TEST_CASE("model show llama-2-7b --seq 4096 prints the KV cache per token and per sequence (T8, T9)") {
    const Run r = run({"model", "show", "llama-2-7b", "--seq", "4096"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    CHECK((contains(r.out, "524 kB") || contains(r.out, "512 KiB")));
    CHECK(contains(r.out, "2.15 GB"));
    CHECK(contains(r.out, "per sequence of 4096"));

    const json j = parse_json(run({"model", "show", "llama-2-7b", "--seq", "4096", "--format", "json"}));
    CHECK(j["kv_cache"]["kv_bytes_per_token"].get<double>() == 524288.0);
    CHECK(j["kv_cache"]["kv_bytes_per_sequence"].get<double>() == 524288.0 * 4096);
    const json j8 = parse_json(run({"model", "show", "llama-2-7b", "--seq", "8192", "--format", "json"}));
    CHECK(j8["kv_cache"]["kv_bytes_per_sequence"].get<double>() == 524288.0 * 8192);  // T9: "4.29 GB" (4.295e9)
  }

  TEST_CASE("model show of a typo exits 2 with a did-you-mean") {
    const Run r = run({"model", "show", "llama-3.1-7b"});
    CHECK(r.rc == kInvalid);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "error: unknown model 'llama-3.1-7b' (did you mean 'llama-3.1-70b'?)"));
  }

  TEST_CASE("model show --format md starts with a Markdown heading") {
    const Run r = run({"model", "show", "llama-3.1-8b", "--format", "md"});
    REQUIRE(r.rc == 0);
    CHECK(starts_with(r.out, "## "));
  }

  TEST_CASE("model list lists the library") {
    const Run r = run({"model", "list", "--format", "csv"});
    REQUIRE(r.rc == 0);
    CHECK(starts_with(r.out, "id,name,total_params_B,"));
    CHECK(contains(r.out, "\nllama-3.1-70b,"));
    CHECK(contains(r.out, "\nllama-2-7b,"));
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("gpuplan model show: Hugging Face config.json we do not ship") {
  TEST_CASE("a Llama config without num_key_value_heads is multi-head attention, and says so") {
    const Run r = run({"model", "show", hf("llama-7b-kv-absent"), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(j["id"] == "llama-7b-kv-absent");  // a config.json is named after its folder
    CHECK(j["architecture"]["kv_heads"] == 32);
    CHECK(j["architecture"]["attention"] == "MHA");
    CHECK(j["params"]["total"] == 6738415616LL);  // same shapes as Llama-2-7B: 6,738,415,616
    // LlamaConfig's defaults fill attention_bias and mlp_bias (data/hf/model_type_defaults.json), each listed.
    CHECK(j["assumptions"].dump() ==
          R"x(["attention_bias absent: false (transformers default for model_type 'llama', src/transformers/models/llama/configuration_llama.py @ 008e5743)","mlp_bias absent: false (transformers default for model_type 'llama', src/transformers/models/llama/configuration_llama.py @ 008e5743)","num_key_value_heads absent or null: 32 KV heads (multi-head attention)"])x");
  }

  TEST_CASE("a Llama config with num_key_value_heads null reads as absent") {
    const Run r = run({"model", "show", hf("llama-7b-kv-null"), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(j["architecture"]["kv_heads"] == 32);
    CHECK(j["kv_cache"]["kv_bytes_per_token"].get<double>() == 524288.0);
  }

  TEST_CASE("a Gemma-3-like config: nested text_config, sliding_window_pattern 6, tied embeddings by default") {
    const Run r = run({"model", "show", hf("gemma-3-like"), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    const json& a = j["architecture"];
    CHECK(a["model_type"] == "gemma3_text");
    CHECK(a["layers"] == 34);
    CHECK(a["hidden"] == 2560);
    CHECK(a["kv_heads"] == 4);
    CHECK(a["head_dim"] == 256);  // given, not hidden/heads = 320
    CHECK(a["attention"] == "GQA");
    CHECK(a["tied_embeddings"] == true);
    // Every 6th layer is global: layers 6, 12, 18, 24, 30 of 34 -> 29 sliding-window layers.
    CHECK(a["sliding_window"]["window"] == 1024);
    CHECK(a["sliding_window"]["layers"] == 29);
    CHECK(j["assumptions"][0] == "tie_word_embeddings absent: true (transformers default for model_type "
                                 "'gemma3_text', src/transformers/models/gemma3/modular_gemma3.py (Gemma3TextConfig) "
                                 "@ 00332048)");
    CHECK(j["assumptions"].size() == 2);  // and the sliding-layer rule
    // Gemma 3 4B: the Gemma 3 Technical Report (arXiv:2503.19786, Table 1) counts 417M vision encoder + 675M
    // embedding + 3,209M non-embedding = 4,301M; the language model alone is about 3.88e9.
    CHECK(j["params"]["total"].get<double>() == gptest::approx(4.301e9).epsilon(0.005));
    CHECK(j["params"]["vision"].get<double>() == gptest::approx(417e6 + 2.95e6).epsilon(0.005));
    CHECK(j["vision_tower"]["tokens_per_image"] == 256);
    CHECK(j["vision_tower"]["patches"] == 4096);
  }

  TEST_CASE("a Gemma-3-like config counts Gemma's four norms per layer") {
    // transformers' Gemma3DecoderLayer has input_layernorm, post_attention_layernorm, pre_feedforward_layernorm and
    // post_feedforward_layernorm (RMSNorm, h weights each), plus the final norm: (4*34 + 1) * 2560 = 350,720.
    const json j = parse_json(run({"model", "show", hf("gemma-3-like"), "--format", "json"}));
    CHECK(j["params"]["norms"] == 350720);
  }

  TEST_CASE("a Phi-3-like config: 3,821,079,552 parameters (Phi-3-mini), sliding window on every layer") {
    const Run r = run({"model", "show", hf("phi-3-like"), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(j["architecture"]["head_dim"] == 96);
    CHECK(j["params"]["total"] == 3821079552LL);
    CHECK(j["architecture"]["sliding_window"]["window"] == 2047);
    CHECK(j["architecture"]["sliding_window"]["layers"] == 32);
    CHECK(j["assumptions"].dump() == R"x(["layer_types absent: 32 layers of 32 use the 2047-token sliding window (transformers' rule for model_type 'phi3': every layer slides)"])x");
  }

  TEST_CASE("a Qwen2-MoE-like config: shared expert from shared_expert_intermediate_size, 14.3B total, 2.7B active") {
    // Qwen1.5-MoE-A2.7B shapes; Qwen publishes 14.3B total and 2.7B activated parameters.
    const Run r = run({"model", "show", hf("qwen2-moe-like"), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    const json& moe = j["architecture"]["moe"];
    CHECK(moe["experts"] == 60);
    CHECK(moe["experts_per_token"] == 4);
    CHECK(moe["expert_intermediate"] == 1408);
    CHECK(moe["shared_experts"] == 1);
    CHECK(moe["moe_layers"] == 24);
    CHECK_FALSE(j["architecture"].contains("sliding_window"));  // use_sliding_window: false
    CHECK(std::abs(j["params"]["total"].get<double>() / 14.3e9 - 1.0) < 0.005);
    CHECK(std::abs(j["params"]["active"].get<double>() / 2.7e9 - 1.0) < 0.005);
    CHECK(j["params"]["shared_experts"].get<double>() > 0);
  }

  TEST_CASE("a config with padded_vocab_size and no vocab_size uses the padded size") {
    // hf_config_fields() documents padded_vocab_size as "takes precedence when present"; then vocab_size is not needed.
    const Run r = run({"model", "show", hf("padded-vocab-only"), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const json j = parse_json(r);
    CHECK(j["architecture"]["vocab"] == 32768);
  }

  TEST_CASE("every config fixture loads in text format too") {
    for (const char* name : {"llama-7b-kv-absent", "llama-7b-kv-null", "gemma-3-like", "phi-3-like", "qwen2-moe-like"}) {
      CAPTURE(name);
      const Run r = run({"model", "show", hf(name)});
      INFO(r.err);
      CHECK(r.rc == 0);
      CHECK(contains(r.out, "KV cache (bf16)"));
    }
  }

  TEST_CASE("a malformed config.json exits 2 with file:line:col") {
    const std::string f = hf("malformed");
    const Run r = run({"model", "show", f});
    CHECK(r.rc == kInvalid);
    CHECK(r.out.empty());
    // The trailing comma on line 7 is found at the '}' on line 8, column 1.
    CHECK(r.err == f + ":8:1: error: malformed JSON: syntax error while parsing object key - unexpected '}'; "
                       "expected string literal\n");
  }

  TEST_CASE("a missing config.json path exits 2 with 'file not found'") {
    const std::string f = fixtures() + "/hf/no-such-model/config.json";
    const Run r = run({"model", "show", f});
    CHECK(r.rc == kInvalid);
    CHECK(r.err == f + ": error: file not found\n");
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("gpuplan arguments and environment") {
  TEST_CASE("argument errors exit 2 like every other invalid input, the flag named first") {
    SUBCASE("an unknown flag") {
      const Run r = run({"hw", "list", "--no-such-flag"});
      CHECK(r.rc == kInvalid);
      CHECK(r.out.empty());
      CHECK(starts_with(r.err, "error: The following argument was not expected: --no-such-flag\n"));
    }
    SUBCASE("a missing required argument") {
      const Run r = run({"hw", "show"});
      CHECK(r.rc == kInvalid);
      CHECK(starts_with(r.err, "error: "));
    }
    SUBCASE("a value out of range") {
      const Run r = run({"model", "show", "llama-2-7b", "--seq", "0"});
      CHECK(r.rc == kInvalid);
      CHECK(starts_with(r.err, "--seq: error: Value 0 not in range 1 to 100000000\n"));
    }
    SUBCASE("an unknown format") {
      const Run r = run({"hw", "list", "--format", "xml"});
      CHECK(r.rc == kInvalid);
      CHECK(starts_with(r.err, "--format: error: "));
      CHECK(contains(r.err, "xml"));
    }
    SUBCASE("a value of the wrong type") {
      const Run r = run({"serve", "-m", "llama-3.1-8b", "--tp", "eight"});
      CHECK(r.rc == kInvalid);
      CHECK(contains(r.err, "--tp"));
      CHECK(contains(r.err, "eight"));
    }
    SUBCASE("no subcommand") {
      const Run r = run({});
      CHECK(r.rc == kInvalid);
      CHECK(starts_with(r.err, "error: A subcommand is required"));
    }
    SUBCASE("--help and --version still exit 0 on stdout") {
      const Run h = run({"serve", "--help"});
      CHECK(h.rc == 0);
      CHECK(contains(h.out, "--rate FLOAT"));
      const Run v = run({"--version"});
      CHECK(v.rc == 0);
      CHECK(starts_with(v.out, "gpuplan "));
    }
  }

  TEST_CASE("a flag value that is empty, NaN or infinite is refused before it is used, naming the flag and the value") {
    // CLI11's FLOAT, PositiveNumber and NonNegativeNumber let NaN and inf through, and an empty value read as "not
    // given"; cli::guard_flag_values is the one gate for every option of every subcommand.
    struct Case {
      std::vector<std::string> args;
      std::string flag, words;
    };
    const std::vector<Case> cases{
        {{"serve", "-m", "llama-3.1-8b", "--rate", ""}, "--rate", "an empty value is not allowed"},
        {{"serve", "-m", "llama-3.1-8b", "--kv-scale-bytes", "nan"}, "--kv-scale-bytes", "'nan' is not a finite number"},
        {{"serve", "-m", "llama-3.1-8b", "--rate", "inf"}, "--rate", "'inf' is not a finite number"},
        {{"serve", "-m", "llama-3.1-8b", "--activation-GiB", "-Infinity"}, "--activation-GiB", "'-Infinity' is not a finite number"},
        {{"serve", "-m", "llama-3.1-8b", "--ttft-ms", "1e999", "--rate", "1"}, "--ttft-ms", "'1e999' is not a finite number"},
        {{"serve", "-m", "llama-3.1-8b", "--ttft-ms", "-NaN", "--rate", "1"}, "--ttft-ms", "'-NaN' is not a finite number"},
        {{"train", "-m", "llama-3.1-8b", "--tp", ""}, "--tp", "an empty value is not allowed"},
        {{"train", "-m", "llama-3.1-8b", "--gpu", "h100", "--tokens", "nan"}, "--tokens", "'nan' is not a finite number"},
        {{"kv", "-m", "", "--gpu", "h100"}, "--model", "an empty value is not allowed"},
        {{"roofline", "--gpu", "h100", "--elementwise", "NAN"}, "--elementwise", "'NAN' is not a finite number"},
    };
    for (const auto& c : cases) {
      std::string line;
      for (const auto& a : c.args) line += " '" + a + "'";
      CAPTURE(line);
      const Run r = run(c.args);
      CHECK(r.rc == kInvalid);
      CHECK(r.out.empty());
      CHECK(contains(r.err, c.flag + ": error: "));
      CHECK(contains(r.err, c.words));
    }
  }

  TEST_CASE("a failed write to stdout exits 2 with a message, never 0 with a truncated output") {
    if (!std::filesystem::exists("/dev/full")) return;
    const std::string cmd = "env -u GPUPLAN_DATA_DIR LC_ALL=C " + quote(kExe) + " --data-dir " + quote(kData) +
                            " hw list >/dev/full 2>/dev/null";
    const int status = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == kInvalid);
  }

  TEST_CASE("--data-dir /nonexistent exits 2 with a clear message") {
    const Run r = run_raw({"--data-dir", "/nonexistent", "hw", "list"});
    CHECK(r.rc == kInvalid);
    CHECK(r.out.empty());
    CHECK(r.err == "--data-dir: error: '/nonexistent' does not exist\n");
    const Run v = run_raw({"--data-dir", "/nonexistent", "hw", "validate"});
    CHECK(v.rc == kInvalid);
    CHECK(v.err == "--data-dir: error: '/nonexistent' does not exist\n");
  }

  TEST_CASE("model show with a bad --data-dir reports the data directory, not an unknown model") {
    const Run r = run_raw({"--data-dir", "/nonexistent", "model", "show", "llama-2-7b"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--data-dir: error: '/nonexistent' does not exist"));
  }

  TEST_CASE("output does not depend on the locale or the terminal width") {
    for (const auto& args : {std::vector<std::string>{"hw", "show", "h100"},
                             std::vector<std::string>{"hw", "list"},
                             std::vector<std::string>{"model", "show", "llama-3.1-70b"}}) {
      CAPTURE(args[1]);
      const Run c = run(args);
      REQUIRE(c.rc == 0);
      for (const char* env : {"LC_ALL=de_DE.UTF-8 LANG=de_DE.UTF-8", "LC_ALL=C.UTF-8 COLUMNS=20",
                              "COLUMNS=300 LINES=10"}) {
        CAPTURE(env);
        const Run o = run(args, env);
        CHECK(o.rc == 0);
        CHECK(o.out == c.out);
      }
    }
    CHECK(contains(run({"hw", "show", "h100"}, "LC_ALL=de_DE.UTF-8").out, "989.4 TFLOP/s"));  // never "989,4"
  }
}
