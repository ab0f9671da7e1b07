// vLLM and SGLang arguments (cli/engine_args.hpp, issue #29): the parser tables (names, aliases, vLLM's --no- forms
// and '_' spellings, SGLang's argparse abbreviations), the server command found in pasted text, and the mapping onto
// gpuplan's serving scenario keys with the engines' semantics (mapped, ignored, assumed, refused). Expected values
// are the engines' own rules as their sources state them (vllm/engine/arg_utils.py, SGLang's server arguments page;
// commits in cli/vllm_arg_names.inc and cli/sglang_arg_names.inc), worked out by hand.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine_args.hpp"

using namespace gpuplan;
using namespace gpuplan::cli;

namespace {

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

std::string all_text(const Diagnostics& d) {
  std::string s;
  for (const auto& x : d.items()) s += x.pointer + ": " + x.message + "\n";
  return s;
}

/// Reads a pasted command line, parses it as a whole command and maps it; nullopt with `diags` filled on an error.
std::optional<EngineMapping> map_line(ServingEngine e, const std::string& text, Diagnostics& diags) {
  auto words = read_engine_command(e, text, "--args", diags);
  if (!words) return std::nullopt;
  auto args = parse_engine_words(e, *words, true, "--args", {}, diags);
  if (!args) return std::nullopt;
  return map_engine(*args, diags);
}

}  // namespace

TEST_SUITE("vLLM and SGLang argument names") {
  TEST_CASE("vLLM's short aliases, '_' spellings and --no- forms resolve to the primary name") {
    CHECK(std::string(find_engine_flag(ServingEngine::vllm, "-tp").entry->name) == "--tensor-parallel-size");
    CHECK(std::string(find_engine_flag(ServingEngine::vllm, "-pp").entry->name) == "--pipeline-parallel-size");
    CHECK(std::string(find_engine_flag(ServingEngine::vllm, "-dp").entry->name) == "--data-parallel-size");
    CHECK(std::string(find_engine_flag(ServingEngine::vllm, "-q").entry->name) == "--quantization");
    // FlexibleArgumentParser reads '_' as '-' in long names.
    CHECK(std::string(find_engine_flag(ServingEngine::vllm, "--max_model_len").entry->name) == "--max-model-len");
    // BooleanOptionalAction: --no-NAME for a bool field, not for a value flag.
    const auto neg = find_engine_flag(ServingEngine::vllm, "--no-enable-prefix-caching");
    REQUIRE(neg.entry != nullptr);
    CHECK(neg.negated);
    CHECK(find_engine_flag(ServingEngine::vllm, "--no-max-model-len").entry == nullptr);
    // vLLM's parser has no abbreviations here: --tensor is not --tensor-parallel-size.
    CHECK(find_engine_flag(ServingEngine::vllm, "--tensor").entry == nullptr);
  }

  TEST_CASE("SGLang takes a unique prefix of a name (argparse's allow_abbrev) and refuses an ambiguous one") {
    CHECK(std::string(find_engine_flag(ServingEngine::sglang, "--tp").entry->name) == "--tensor-parallel-size");
    CHECK(std::string(find_engine_flag(ServingEngine::sglang, "--tp-size").entry->name) == "--tensor-parallel-size");
    CHECK(std::string(find_engine_flag(ServingEngine::sglang, "--dp").entry->name) == "--data-parallel-size");
    CHECK(std::string(find_engine_flag(ServingEngine::sglang, "--ep").entry->name) == "--expert-parallel-size");
    CHECK(std::string(find_engine_flag(ServingEngine::sglang, "--model").entry->name) == "--model-path");
    const auto amb = find_engine_flag(ServingEngine::sglang, "--enable-dp");
    CHECK(amb.entry == nullptr);
    CHECK(has(amb.error, "ambiguous option: '--enable-dp' could match"));
    CHECK(has(amb.error, "--enable-dp-attention"));
    CHECK(has(amb.error, "--enable-dp-lm-head"));
  }

  TEST_CASE("the tables name their source and commit") {
    CHECK(has(std::string(engine_names_source(ServingEngine::vllm)), "arg_utils.py @ 99d7eb5d6a51"));
    CHECK(has(std::string(engine_names_source(ServingEngine::sglang)), "server_arguments.md @ b36e8e198b71"));
    // Every alias points at a primary name of the same table.
    for (auto e : {ServingEngine::vllm, ServingEngine::sglang})
      for (const auto& n : engine_flag_names(e))
        if (n.canonical != nullptr) CHECK(find_engine_flag(e, n.canonical).entry != nullptr);
  }

  TEST_CASE("the server command is found after an environment prefix, with continuations and comments") {
    Diagnostics d;
    const auto w = read_engine_command(ServingEngine::vllm,
                                       "# serve\nexport HF_HOME=/data\nCUDA_VISIBLE_DEVICES=0,1 vllm serve \\\n"
                                       "  meta-llama/Llama-3.1-8B-Instruct \\\n  -tp 2 --port 8000  # two GPUs\n",
                                       "--vllm-args", d);
    REQUIRE(w);
    REQUIRE(w->size() == 5);
    CHECK((*w)[0].text == "meta-llama/Llama-3.1-8B-Instruct");
    CHECK((*w)[1].text == "-tp");
    CHECK((*w)[4].text == "8000");
    Diagnostics d2;
    CHECK_FALSE(read_engine_command(ServingEngine::sglang,
                                    "python -m sglang.launch_server --model-path a --tp 4 --node-rank 0\n"
                                    "python -m sglang.launch_server --model-path a --tp 4 --node-rank 1\n",
                                    "x.sh", d2));
    CHECK(has(all_text(d2), "2 server commands (lines 1, 2)"));
    // vLLM's container: the image's entry point is the API server; docker's own flags come before the image.
    Diagnostics dd;
    const auto dw = read_engine_command(ServingEngine::vllm,
                                        "docker run --runtime nvidia --gpus all -p 8000:8000 --ipc=host "
                                        "vllm/vllm-openai:latest --model mistralai/Mistral-7B-v0.1",
                                        "x", dd);
    REQUIRE(dw);
    REQUIRE(dw->size() == 2);
    CHECK((*dw)[0].text == "--model");
    Diagnostics d3;
    CHECK_FALSE(read_engine_command(ServingEngine::vllm, "echo hello", "x.sh", d3));
    CHECK(has(all_text(d3), "no vLLM server command found"));
  }

  TEST_CASE("vLLM flags map onto the scenario keys with vLLM's meanings") {
    Diagnostics d;
    const auto m = map_line(ServingEngine::vllm,
                            "vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4 -pp=2 --kv-cache-dtype fp8_e5m2 "
                            "--quantization fp8 --max-num-batched-tokens 8k --max-num-seqs 64 "
                            "--gpu-memory-utilization 0.85 --block-size 32 --enforce-eager --max-model-len 32K",
                            d);
    REQUIRE_MESSAGE(m, all_text(d));
    CHECK(m->keys["model"] == "meta-llama/Llama-3.1-70B-Instruct");
    CHECK(m->keys["tp"] == 4);
    CHECK(m->keys["pp"] == 2);
    CHECK(m->keys["kv_dtype"] == "fp8");      // fp8_e5m2: one byte per element like e4m3
    CHECK(m->keys["weight_dtype"] == "fp8");  // online dynamic FP8 of the weights (W8A8)
    CHECK(m->keys["max_num_batched_tokens"] == 8000);  // human_readable_int: k = 10^3
    CHECK(m->keys["max_num_seqs"] == 64);
    CHECK(m->keys["gpu_memory_utilization"] == 0.85);
    CHECK(m->keys["block_size"] == 32);
    CHECK(m->keys["enforce_eager"] == true);
    CHECK(m->keys["engine"] == "vllm");  // a whole vLLM line has vLLM's memory semantics
    REQUIRE(m->max_len);
    CHECK(*m->max_len == 32768);  // K = 2^10
    CHECK(m->origin.at("tp") == "-tp 4");
  }

  TEST_CASE("--dtype sets the weights and the auto KV cache, and an explicit --kv-cache-dtype wins for the KV") {
    Diagnostics d;
    auto m = map_line(ServingEngine::vllm, "vllm serve x --dtype half", d);
    REQUIRE(m);
    CHECK(m->keys["weight_dtype"] == "fp16");
    CHECK(m->keys["kv_dtype"] == "fp16");
    m = map_line(ServingEngine::vllm, "vllm serve x --dtype bfloat16 --kv-cache-dtype fp8 -q awq", d);
    REQUIRE(m);
    CHECK(m->keys["weight_dtype"] == "int4");  // AWQ: 4-bit weights (the quantisation wins over --dtype)
    CHECK(m->keys["kv_dtype"] == "fp8");
  }

  TEST_CASE("a whole command line defaults TP and PP to 1, while typed spellings set only what they name") {
    Diagnostics d;
    auto m = map_line(ServingEngine::vllm, "vllm serve x", d);
    REQUIRE(m);
    CHECK(m->keys["tp"] == 1);
    CHECK(m->defaulted.count("tp") == 1);
    auto args = parse_engine_words(ServingEngine::vllm, {ShellWord{"--max-num-seqs", {}, 0}, ShellWord{"8", {}, 0}},
                                   false, "", {}, d);
    REQUIRE(args);
    m = map_engine(*args, d);
    REQUIRE(m);
    CHECK_FALSE(m->keys.contains("tp"));
    CHECK_FALSE(m->keys.contains("engine"));
  }

  TEST_CASE("frontend and logging flags are ignored and listed, and so are gpuplan's own assumptions") {
    Diagnostics d;
    const auto m = map_line(ServingEngine::vllm,
                            "vllm serve x --host 0.0.0.0 --port 8080 --api-key k --served-model-name chat "
                            "--enable-chunked-prefill --enable-prefix-caching --disable-log-requests",
                            d);
    REQUIRE(m);
    CHECK(m->ignored.size() == 5);
    CHECK(m->assumed.size() == 2);
  }

  TEST_CASE("flags that change performance but are not modelled are refused by name") {
    for (const char* line : {"vllm serve x --enable-dbo", "vllm serve x --no-enable-chunked-prefill",
                             "vllm serve x -q bitsandbytes", "vllm serve x --cpu-offload-gb 10", "vllm serve x -O3",
                             "vllm serve x -dcp 2", "vllm serve x --kv-cache-dtype fp8_inc"}) {
      CAPTURE(line);
      Diagnostics d;
      CHECK_FALSE(map_line(ServingEngine::vllm, line, d));
      CHECK(has(all_text(d), "not modelled yet (#29)"));
    }
    Diagnostics d;
    CHECK_FALSE(map_line(ServingEngine::vllm, "vllm serve x -q bitsandbytes", d));
    CHECK(has(all_text(d), "'-q bitsandbytes': the 'bitsandbytes' quantisation method is not modelled yet (#29)"));
  }

  TEST_CASE("vLLM's data parallelism: replicas are the planner's, EP over TP × DP is attention-DP with wide EP") {
    Diagnostics d;
    CHECK_FALSE(map_line(ServingEngine::vllm, "vllm serve x -tp 2 -dp 4", d));
    CHECK(has(all_text(d), "4 data-parallel replicas behind one API server"));
    Diagnostics d2;
    const auto wide = map_line(ServingEngine::vllm, "vllm serve x -tp 1 -dp 8 --enable-expert-parallel", d2);
    REQUIRE(wide);
    CHECK(wide->keys["attention_dp"] == 8);
    CHECK(wide->keys["tp"] == 1);
    CHECK_FALSE(wide->keys.contains("ep"));
    Diagnostics d3;
    const auto m = map_line(ServingEngine::vllm, "vllm serve x -tp 8 -dp 1 --enable-expert-parallel", d3);
    REQUIRE(m);
    CHECK(m->expert_parallel_flag == "--enable-expert-parallel");  // EP = TP: set by the overlay once TP is final
  }

  TEST_CASE("SGLang flags map onto the scenario keys with SGLang's meanings") {
    Diagnostics d;
    const auto m = map_line(ServingEngine::sglang,
                            "python3 -m sglang.launch_server --model-path mistralai/Mixtral-8x7B-Instruct-v0.1 --tp 8 "
                            "--ep-size 8 --mem-fraction-static 0.8 --chunked-prefill-size 4096 "
                            "--max-running-requests 128 --kv-cache-dtype fp8_e4m3 --context-length 8192 "
                            "--page-size 64 --disable-cuda-graph --host 0.0.0.0",
                            d);
    REQUIRE_MESSAGE(m, all_text(d));
    CHECK(m->keys["model"] == "mistralai/Mixtral-8x7B-Instruct-v0.1");
    CHECK(m->keys["tp"] == 8);
    CHECK(m->keys["ep"] == 8);  // SGLang's EP lives inside the TP group, as gpuplan's
    CHECK(m->keys["mem_fraction_static"] == 0.8);
    CHECK(m->keys["max_num_batched_tokens"] == 4096);
    CHECK(m->keys["max_num_seqs"] == 128);
    CHECK(m->keys["kv_dtype"] == "fp8");
    CHECK(m->keys["block_size"] == 64);
    CHECK(m->keys["enforce_eager"] == true);
    CHECK(m->keys["engine"] == "sglang");
    CHECK(*m->max_len == 8192);
    CHECK(m->ignored.size() == 1);
  }

  TEST_CASE("SGLang's DP attention maps to --attention-dp with wide EP (--ep-size = --tp or DeepEP)") {
    Diagnostics d;
    const auto m = map_line(ServingEngine::sglang,
                            "python -m sglang.launch_server --model-path x --tp 16 --dp 4 --ep 16 --enable-dp-attention "
                            "--moe-dense-tp-size 1",
                            d);
    REQUIRE(m);
    CHECK(m->keys["tp"] == 4);  // 16 GPUs in 4 attention ranks of 4
    CHECK(m->keys["attention_dp"] == 4);
    CHECK_FALSE(m->keys.contains("ep"));  // EP = 4 × 4 follows from them
    Diagnostics d2;
    const auto e = map_line(ServingEngine::sglang,
                            "python -m sglang.launch_server --model-path x --tp 8 --dp 8 --enable-dp-attention "
                            "--moe-a2a-backend deepep --deepep-mode low_latency",
                            d2);
    REQUIRE(e);
    CHECK(e->keys["tp"] == 1);
    CHECK(e->keys["attention_dp"] == 8);
    Diagnostics d3;
    CHECK_FALSE(map_line(ServingEngine::sglang,
                         "python -m sglang.launch_server --model-path x --tp 8 --dp 3 --enable-dp-attention --ep 8", d3));
    CHECK(has(all_text(d3), "data-parallel attention splits the --tp 8 GPUs into 3 ranks: 3 must divide 8"));
  }

  TEST_CASE("SGLang's DP attention without wide EP, unchunked prefill and DP replicas are refused by name") {
    for (const char* line : {"python -m sglang.launch_server --model-path x --tp 8 --dp 8 --enable-dp-attention",
                             "python -m sglang.launch_server --model-path x --chunked-prefill-size -1",
                             "python -m sglang.launch_server --model-path x --dp-size 2",
                             "python -m sglang.launch_server --model-path x --speculative-algorithm EAGLE"}) {
      CAPTURE(line);
      Diagnostics d;
      CHECK_FALSE(map_line(ServingEngine::sglang, line, d));
      CHECK(has(all_text(d), "not modelled yet (#29)"));
    }
  }

  TEST_CASE("an unknown flag is refused with the closest name of the engine's parser") {
    Diagnostics d;
    CHECK_FALSE(map_line(ServingEngine::vllm, "vllm serve x --tensor-paralel-size 2", d));
    CHECK(has(all_text(d), "not a vLLM server argument"));
    CHECK(has(all_text(d), "did you mean '--tensor-parallel-size'?"));
    Diagnostics d2;
    CHECK_FALSE(map_line(ServingEngine::sglang, "python -m sglang.launch_server --mem-fraction-statik 0.8", d2));
    CHECK(has(all_text(d2), "did you mean '--mem-fraction-static'?"));
  }

  TEST_CASE("a switch given a value and a flag missing its value are errors") {
    Diagnostics d;
    CHECK_FALSE(map_line(ServingEngine::vllm, "vllm serve x --enforce-eager=true", d));
    CHECK(has(all_text(d), "is a switch and takes no value"));
    Diagnostics d2;
    CHECK_FALSE(map_line(ServingEngine::vllm, "vllm serve x -tp", d2));
    CHECK(has(all_text(d2), "expected a value after the flag"));
  }

  TEST_CASE("--speculative-config gives the draft tokens and the draft model") {
    Diagnostics d;
    const auto m = map_line(ServingEngine::vllm,
                            "vllm serve x --speculative-config '{\"model\": \"llama-3.2-1b\", "
                            "\"num_speculative_tokens\": 5}'",
                            d);
    REQUIRE_MESSAGE(m, all_text(d));
    CHECK(m->keys["spec_tokens"] == 5);
    CHECK(m->keys["draft_model"] == "llama-3.2-1b");
    CHECK_FALSE(m->spec_needs_draft_ms);
    const auto ng = map_line(ServingEngine::vllm,
                             "vllm serve x --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
                             "\"prompt_lookup_max\": 4}'",
                             d);
    REQUIRE(ng);
    CHECK(ng->spec_needs_draft_ms);
  }
}
