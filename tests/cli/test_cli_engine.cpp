// End-to-end tests of vLLM's and SGLang's argument names on `gpuplan serve` and `gpuplan simulate` (issue #29,
// docs/cli.md "vLLM and SGLang arguments"): command lines pasted from the engines' own documentation give
// byte-identical JSON to gpuplan's native flags for the same scenario; typed spellings; the notes; refusals with
// their exit code and words; conflicts; unknown flags and models.
//
// The pasted lines, as the docs print them:
//  - vLLM docs/features/tool_calling.md, "Quickstart" (https://github.com/vllm-project/vllm/blob/main/docs/features/
//    tool_calling.md; read at the code index's stored copy): vllm serve meta-llama/Llama-3.1-8B-Instruct with
//    --enable-auto-tool-choice, --tool-call-parser llama3_json and --chat-template, over four continued lines.
//  - vLLM docs/deployment/docker.md, "Use vLLM's Official Docker Image": docker run ... vllm/vllm-openai:latest
//    --model mistralai/Mistral-7B-v0.1 (docker's own flags before the image, $HF_TOKEN among them, are not read).
//  - SGLang docs/advanced_features/server_arguments.md, "Common launch commands" (sgl-project/sglang commit
//    b36e8e198b71): the multi-node tensor-parallel example's "# Node 0" command, the --chunked-prefill-size 4096
//    example and the --mem-fraction-static 0.7 example.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

namespace {

const std::string kVllmToolCalling =
    "vllm serve meta-llama/Llama-3.1-8B-Instruct \\\n"
    "    --enable-auto-tool-choice \\\n"
    "    --tool-call-parser llama3_json \\\n"
    "    --chat-template examples/tool_chat_template_llama3.1_json.jinja\n";

const std::string kSglangNode0 =
    "# Node 0\n"
    "python -m sglang.launch_server \\\n"
    "  --model-path meta-llama/Meta-Llama-3-8B-Instruct \\\n"
    "  --tp 4 \\\n"
    "  --dist-init-addr sgl-dev-0:50000 \\\n"
    "  --nnodes 2 \\\n"
    "  --node-rank 0\n";

/// Both runs succeed and print the same JSON.
void same_json(const Run& a, const Run& b) {
  INFO("stderr a: " << a.err);
  INFO("stderr b: " << b.err);
  REQUIRE(a.rc == 0);
  REQUIRE(b.rc == 0);
  CHECK(parse_json(a) == parse_json(b));
  CHECK(a.out == b.out);
}

}  // namespace

TEST_SUITE("gpuplan serve with vLLM and SGLang arguments") {
  TEST_CASE("vLLM's tool-calling quickstart line, pasted, is the native scenario (TP 1, vLLM memory semantics)") {
    const Run eng = run({"serve", "--vllm-args", kVllmToolCalling, "--format", "json"});
    const Run nat = run({"serve", "-m", "llama-3.1-8b", "--tp", "1", "--pp", "1", "--engine", "vllm", "--format", "json"});
    same_json(eng, nat);
    CHECK(contains(eng.err, "ignored (they do not change the latency, throughput or memory gpuplan models): "
                            "--chat-template examples/tool_chat_template_llama3.1_json.jinja, "
                            "--enable-auto-tool-choice, --tool-call-parser llama3_json"));
    CHECK(contains(eng.err, "model = \"meta-llama/Llama-3.1-8B-Instruct\" (vllm serve meta-llama/Llama-3.1-8B-Instruct)"));
  }

  TEST_CASE("vLLM's docker deployment line, pasted, is the native scenario") {
    const std::string line =
        "docker run --runtime nvidia --gpus all \\\n"
        "    -v ~/.cache/huggingface:/root/.cache/huggingface \\\n"
        "    --env \"HUGGING_FACE_HUB_TOKEN=$HF_TOKEN\" \\\n"
        "    -p 8000:8000 \\\n"
        "    --ipc=host \\\n"
        "    vllm/vllm-openai:latest \\\n"
        "    --model mistralai/Mistral-7B-v0.1\n";
    same_json(run({"serve", "--vllm-args", line, "--format", "json"}),
              run({"serve", "-m", "mistral-7b-v0.1", "--tp", "1", "--pp", "1", "--engine", "vllm", "--format", "json"}));
  }

  TEST_CASE("the same line runs the capacity planner as the native flags do") {
    const Run eng = run({"serve", "--vllm-args", kVllmToolCalling, "--rate", "4", "--ttft-ms", "2000", "--format",
                         "json"});
    const Run nat = run({"serve", "-m", "llama-3.1-8b", "--tp", "1", "--pp", "1", "--engine", "vllm", "--rate", "4",
                         "--ttft-ms", "2000", "--format", "json"});
    REQUIRE(eng.rc == nat.rc);
    CHECK(eng.out == nat.out);
  }

  TEST_CASE("SGLang's multi-node example (node 0), pasted, is the native scenario with SGLang memory semantics") {
    const Run eng = run({"serve", "--sglang-args", kSglangNode0, "--format", "json"});
    const Run nat = run({"serve", "-m", "llama-3-8b", "--tp", "4", "--pp", "1", "--engine", "sglang", "--format",
                         "json"});
    same_json(eng, nat);
    CHECK(contains(eng.err, "--dist-init-addr sgl-dev-0:50000, --nnodes 2, --node-rank 0"));
  }

  TEST_CASE("SGLang's --chunked-prefill-size and --mem-fraction-static examples map to gpuplan's knobs") {
    same_json(run({"serve", "--sglang-args",
                   "python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B-Instruct "
                   "--chunked-prefill-size 4096",
                   "--format", "json"}),
              run({"serve", "-m", "llama-3-8b", "--tp", "1", "--pp", "1", "--engine", "sglang",
                   "--max-num-batched-tokens", "4096", "--format", "json"}));
    same_json(run({"serve", "--sglang-args",
                   "python -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B-Instruct "
                   "--mem-fraction-static 0.7",
                   "--format", "json"}),
              run({"serve", "-m", "llama-3-8b", "--tp", "1", "--pp", "1", "--mem-fraction-static", "0.7", "--format",
                   "json"}));
  }

  TEST_CASE("vLLM spellings typed among gpuplan's flags give the same JSON as gpuplan's spellings") {
    same_json(run({"serve", "-m", "llama-3.1-70b", "--tensor-parallel-size", "4", "--kv-cache-dtype", "fp8",
                   "--max-num-seqs", "64", "--quantization", "fp8", "--format", "json"}),
              run({"serve", "-m", "llama-3.1-70b", "--tp", "4", "--kv-dtype", "fp8", "--max-num-seqs", "64",
                   "--weight-dtype", "fp8", "--format", "json"}));
    same_json(run({"serve", "-m", "llama-3.1-70b", "-tp", "4", "--pipeline-parallel-size", "2", "--format", "json"}),
              run({"serve", "-m", "llama-3.1-70b", "--tp", "4", "--pp", "2", "--format", "json"}));
    // SGLang's names typed: --tp-size, --ep-size.
    same_json(run({"serve", "-m", "mixtral-8x7b", "--tp-size", "8", "--ep-size", "4", "--format", "json"}),
              run({"serve", "-m", "mixtral-8x7b", "--tp", "8", "--ep", "4", "--format", "json"}));
  }

  TEST_CASE("vLLM's --enable-expert-parallel with DP 1 is gpuplan's --ep = TP, and with DP > 1 --attention-dp") {
    same_json(run({"serve", "--vllm-args",
                   "vllm serve mistralai/Mixtral-8x7B-Instruct-v0.1 --tensor-parallel-size 8 --enable-expert-parallel",
                   "--format", "json"}),
              run({"serve", "-m", "mixtral-8x7b", "--tp", "8", "--pp", "1", "--ep", "8", "--engine", "vllm", "--format",
                   "json"}));
    // DP 8 × TP 1 with EP over all 8 (attention data-parallel, wide EP): gpuplan's --attention-dp 8.
    same_json(run({"serve", "--vllm-args",
                   "vllm serve mistralai/Mixtral-8x7B-Instruct-v0.1 -tp 1 -dp 8 --enable-expert-parallel", "--format",
                   "json"}),
              run({"serve", "-m", "mixtral-8x7b", "--tp", "1", "--pp", "1", "--attention-dp", "8", "--engine", "vllm",
                   "--format", "json"}));
    // SGLang's DP attention over --tp 8 GPUs with the DeepEP backend: 8 ranks of TP 1, the experts over all 8.
    same_json(run({"serve", "--sglang-args",
                   "python -m sglang.launch_server --model-path mistralai/Mixtral-8x7B-Instruct-v0.1 --tp 8 --dp 8 "
                   "--enable-dp-attention --moe-a2a-backend deepep",
                   "--format", "json"}),
              run({"serve", "-m", "mixtral-8x7b", "--tp", "1", "--pp", "1", "--attention-dp", "8", "--engine",
                   "sglang", "--moe-a2a-backend", "deepep", "--format", "json"}));
    const Run odd = run({"serve", "-m", "mixtral-8x7b", "--tp", "2", "--attention-dp", "8", "--format", "json"});
    CHECK(odd.rc == 0);
    CHECK(contains(odd.err, "wide EP = attention-DP 8 × TP 2 = 16 does not divide the 8 routed experts"));
    CHECK(contains(odd.err, "E/EP = 0.5"));
    const Run no_experts = run({"serve", "-m", "llama-3.1-8b", "--attention-dp", "2"});
    CHECK(no_experts.rc == kInvalid);
    CHECK(contains(no_experts.err, "attention-DP with wide EP needs a mixture-of-experts model"));
    // A dense model has no experts: vLLM ignores the flag, and so does the estimate (with a note).
    const Run dense = run({"serve", "-m", "llama-3.1-8b", "--tp", "2", "--enable-expert-parallel", "--format", "json"});
    // (a dense model with -dp > 1 and --enable-expert-parallel is refused when resolved: no experts to spread)
    CHECK(dense.rc == 0);
    CHECK(contains(dense.err, "a dense model has no experts"));
  }

  TEST_CASE("flags that change performance but are not modelled are refused by name with exit 2") {
    const Run r = run({"serve", "--vllm-args", "vllm serve meta-llama/Llama-3.1-8B-Instruct --enable-dbo"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "'--enable-dbo': a vLLM setting that changes performance in a way gpuplan does not price"));
    CHECK(contains(r.err, "not modelled yet (#29)"));
    const Run s = run({"serve", "-m", "llama-3-8b", "--enable-dp-attention", "--dp-size", "2"});
    CHECK(s.rc == kInvalid);
    CHECK(contains(s.err, "data-parallel attention"));
  }

  TEST_CASE("a misspelt flag gets the closest vLLM, SGLang or gpuplan name") {
    const Run r = run({"serve", "-m", "llama-3.1-8b", "--tensor-paralel-size", "2"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "did you mean '--tensor-parallel-size'?"));
    const Run p = run({"serve", "--vllm-args", "vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilisation 0.8"});
    CHECK(p.rc == kInvalid);
    CHECK(contains(p.err, "did you mean '--gpu-memory-utilization'?"));
  }

  TEST_CASE("a stray word is refused with the place a pasted command line goes") {
    const Run r = run({"serve", "-m", "llama-3.1-8b", "vllm", "serve"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "unexpected word 'vllm'"));
    CHECK(contains(r.err, "goes in --vllm-args / --sglang-args"));
  }

  TEST_CASE("a knob given twice with two values is refused, and the engine's defaults yield to gpuplan's flags") {
    const Run r = run({"serve", "--tp", "2", "--vllm-args", "vllm serve meta-llama/Llama-3.1-8B-Instruct -tp 4"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "sets tp = 4, but --tp sets it to 2: give the knob once"));
    same_json(run({"serve", "--tp", "2", "--vllm-args", "vllm serve meta-llama/Llama-3.1-8B-Instruct", "--format",
                   "json"}),
              run({"serve", "-m", "llama-3.1-8b", "--tp", "2", "--pp", "1", "--format", "json"}));
  }

  TEST_CASE("--max-model-len shorter than a request is vLLM's refusal") {
    const Run r = run({"serve", "--vllm-args", "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 1k"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "requests of 1024 + 256 = 1280 tokens are longer than the vLLM maximum of 1000 tokens"));
    CHECK(run({"serve", "--vllm-args", "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 2048"}).rc == 0);
  }

  TEST_CASE("--speculative-config with a draft model and gpuplan's acceptance rate is the native speculative scenario") {
    const std::string line =
        "vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4 --speculative-config "
        "'{\"model\": \"meta-llama/Llama-3.1-8B-Instruct\", \"num_speculative_tokens\": 4}'";
    const Run eng = run({"serve", "--vllm-args", line, "--spec-acceptance", "0.7", "--batch", "8", "--format", "json"});
    same_json(eng, run({"serve", "-m", "llama-3.1-70b", "--tp", "4", "--pp", "1", "--engine", "vllm", "--batch", "8",
                        "--spec-acceptance", "0.7", "--spec-tokens", "4", "--draft-model",
                        "meta-llama/Llama-3.1-8B-Instruct", "--format", "json"}));
    CHECK(parse_json(eng).contains("speculative"));
    // The acceptance rate is the workload's, not the engine's: without it, exit 2 naming what to add.
    const Run no = run({"serve", "--vllm-args", line, "--batch", "8"});
    CHECK(no.rc == kInvalid);
    CHECK(contains(no.err, "add --spec-acceptance ALPHA"));
  }

  TEST_CASE("a Hugging Face id outside the library is a diagnostic, not a download") {
    const Run r = run({"serve", "--vllm-args", "vllm serve Qwen/Qwen2.5-1.5B-Instruct"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "'Qwen/Qwen2.5-1.5B-Instruct' is neither a model of gpuplan's library"));
    CHECK(contains(r.err, "gpuplan does not download"));
  }

  TEST_CASE("--vllm-args @FILE reads the command from a script") {
    namespace fs = std::filesystem;
    static std::atomic<int> counter{0};
    // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict on "literal" + std::string (GCC bug 105651).
    std::string name = "gpuplan-test-cli-engine-";
    name += std::to_string(::getpid());
    name += '-';
    name += std::to_string(counter++);
    const fs::path dir = fs::temp_directory_path() / name;
    fs::create_directories(dir);
    const fs::path f = dir / "serve.sh";
    std::ofstream(f) << "#!/bin/bash\nMODEL=meta-llama/Llama-3.1-8B-Instruct\nexport VLLM_LOGGING_LEVEL=INFO\n"
                     << "vllm serve $MODEL -tp 2 --port 8000\n";
    std::string at = "@";
    at += f.string();
    same_json(run({"serve", "--vllm-args", at, "--format", "json"}),
              run({"serve", "-m", "llama-3.1-8b", "--tp", "2", "--pp", "1", "--engine", "vllm", "--format", "json"}));
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  TEST_CASE("simulate reads the same lines") {
    same_json(run({"simulate", "--vllm-args", kVllmToolCalling, "--rate", "2", "--requests", "200", "--format", "json"}),
              run({"simulate", "-m", "llama-3.1-8b", "--tp", "1", "--pp", "1", "--engine", "vllm", "--rate", "2",
                   "--requests", "200", "--format", "json"}));
  }
}
