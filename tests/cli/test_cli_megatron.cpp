// End-to-end tests of Megatron-LM's argument names on `gpuplan train` (issue #22, docs/cli.md "Megatron-LM
// arguments"): the same plan through Megatron's spellings and gpuplan's gives byte-identical JSON, the ignored-flags
// note, refusals with their exit code and words, conflicts, unknown flags, and a public Megatron-LM launch script
// (tests/fixtures/megatron/README.md says where it comes from).
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_paths.hpp"
#include "approx.hpp"
#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  std::string p = GPUPLAN_TEST_FIXTURES;
  p += "/megatron/";
  p += name;
  return p;
}

/// A launch script in a fresh temporary folder, removed when the object goes out of scope.
class Script {
 public:
  explicit Script(const std::string& text) {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("gpuplan-test-cli-megatron-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::create_directories(dir_);
    path_ = dir_ / "run.sh";
    std::ofstream(path_) << text;
  }
  ~Script() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Script(const Script&) = delete;
  Script& operator=(const Script&) = delete;
  [[nodiscard]] std::string path() const { return path_.string(); }

 private:
  fs::path dir_, path_;
};

}  // namespace

TEST_SUITE("gpuplan train with Megatron-LM arguments") {
  TEST_CASE("Megatron's spellings give byte-identical JSON to gpuplan's own flags for the same plan") {
    const Run meg = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "16", "--tensor-model-parallel-size",
                         "2", "--pipeline-model-parallel-size", "2", "--sequence-parallel", "--micro-batch-size", "2",
                         "--global-batch-size", "64", "--seq-length", "4096", "--use-distributed-optimizer",
                         "--recompute-granularity", "selective", "--bf16", "--format", "json"});
    const Run own = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "16", "--tp", "2", "--pp", "2",
                         "--sp", "true", "--micro-batch", "2", "--global-batch", "64", "--seq", "4096", "--zero", "1",
                         "--recompute", "selective", "--precision", "bf16", "--param-layout", "contiguous",
                         "--format", "json"});
    INFO(meg.err);
    CHECK(meg.rc == 0);
    CHECK(own.rc == 0);
    CHECK(meg.out == own.out);
    const auto j = parse_json(meg);
    CHECK(j["layout"]["tp"] == 2);
    CHECK(j["layout"]["pp"] == 2);
    CHECK(j["layout"]["dp"] == 4);  // 16 / (2 x 2)
    CHECK(j["layout"]["micro_batches"] == 8);  // 64 / (2 x 4)
    CHECK(contains(meg.err, "Megatron-LM: note: mapped: global_batch = 64 (--global-batch-size 64); micro_batch = 2 "
                            "(--micro-batch-size 2); param_layout = \"contiguous\" (--megatron-args (Megatron-Core's "
                            "param_and_grad_buffer)); pp = 2 (--pipeline-model-parallel-size 2); precision = \"bf16\" "
                            "(--bf16); recompute = \"selective\" (--recompute-granularity selective)"));
  }

  TEST_CASE("--ddp-bucket-size prices as --dp-bucket-size, and a bucket of 200 parameters exits 2 naming the flag") {
    const std::vector<std::string> plan{"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "16", "--tp", "2",
                                        "--zero", "1", "--global-batch", "64", "--seq", "4096", "--format", "json"};
    auto with_flag = [&](std::vector<std::string> extra) {
      auto a = plan;
      a.insert(a.end(), extra.begin(), extra.end());
      return run(a);
    };
    const Run meg = with_flag({"--ddp-bucket-size", "768000000"});
    const Run own = with_flag({"--dp-bucket-size", "768000000", "--param-layout", "contiguous"});
    INFO(meg.err);
    CHECK(meg.rc == 0);
    CHECK(meg.out == own.out);
    CHECK(contains(meg.err, "dp_bucket_size = 768000000 (--ddp-bucket-size 768000000)"));
    CHECK(meg.out != with_flag({}).out);  // the bucket changes the DP calls and the exposed last bucket
    const Run bad = with_flag({"--ddp-bucket-size", "200"});
    CHECK(bad.rc == kInvalid);
    CHECK(contains(bad.err, "--ddp-bucket-size 200: error: value 200 is below 1000000 parameters"));
  }

  TEST_CASE("flags that do not change performance are accepted and listed as ignored") {
    const Run r = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--tensor-model-parallel-size",
                       "8", "--lr", "3e-4", "--data-path", "/data/a", "--save", "/ckpt", "--log-interval", "10",
                       "--format", "json"});
    INFO(r.err);
    CHECK(r.rc == 0);
    CHECK(contains(r.err, "Megatron-LM: note: ignored (they do not change the step time or memory gpuplan models): "
                          "--lr, --data-path, --save, --log-interval\n"));
  }

  TEST_CASE("a flag that changes performance but is not modelled exits 2 naming it, its value and #22") {
    const Run r = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--bf16", "--fp4-format", "e2m1",
                       "--fp4-recipe", "custom"});
    CHECK(r.rc == kInvalid);
    CHECK(r.out.empty());
    CHECK(contains(r.err, "--fp4-recipe: error: '--fp4-recipe custom': gpuplan prices FP4 as NVFP4 (E4M3 scales per 16 "
                          "elements); this recipe is not modelled yet (#22)"));
  }

  TEST_CASE("--fp8-recipe beside gpuplan's --precision fp8 prices that recipe, beside bf16 it exits 2") {
    const std::vector<std::string> base{"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--zero", "1", "--format", "json"};
    auto with = [&](std::vector<std::string> extra) {
      std::vector<std::string> a = base;
      a.insert(a.end(), extra.begin(), extra.end());
      return run(a);
    };
    const Run delayed = with({"--precision", "fp8"});
    const Run typed = with({"--precision", "fp8", "--fp8-recipe", "blockwise"});
    const Run native = with({"--bf16", "--fp8-format", "e4m3", "--fp8-recipe", "blockwise"});
    INFO(typed.err);
    REQUIRE(delayed.rc == 0);
    REQUIRE(typed.rc == 0);
    REQUIRE(native.rc == 0);
    CHECK(contains(typed.err, "fp8_recipe = \"blockwise\" (--fp8-recipe blockwise)"));
    CHECK_FALSE(contains(typed.err, "ignored"));
    // The recipe is priced: the same step as Megatron's own --fp8-format spelling, not the delayed default's.
    CHECK(parse_json(typed)["step_time_s"] == parse_json(native)["step_time_s"]);
    CHECK(parse_json(typed)["step_time_s"] != parse_json(delayed)["step_time_s"]);
    const Run bf16 = with({"--precision", "bf16", "--fp8-recipe", "tensorwise"});
    CHECK(bf16.rc == kInvalid);
    CHECK(contains(bf16.err, "an FP8 recipe needs precision fp8 (precision is bf16)"));
  }

  TEST_CASE("NVFP4 training maps and prices on a B200, and on an H100 (no FP4 tensor cores) the plan is infeasible, exit 3") {
    const Run b = run({"train", "-m", "llama-3-8b", "--gpu", "b200", "--gpus", "8", "--bf16", "--fp4-format", "e2m1"});
    INFO(b.err);
    CHECK(b.rc == 0);
    CHECK(contains(b.err, "precision = \"fp4\" (--fp4-format e2m1)"));
    const Run h = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--bf16", "--fp4-format", "e2m1"});
    CHECK(h.rc == 3);
    CHECK(contains(h.out, "FP4 training needs FP4 tensor cores: h100-sxm5-80gb has no FP4 rate in its data"));
  }

  TEST_CASE("a Megatron spelling and gpuplan's spelling of one knob with different values exit 2") {
    const Run r = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--tp", "4",
                       "--tensor-model-parallel-size", "2"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--tensor-model-parallel-size 2: error: sets tp = 2, but --tp sets it to 4: give the knob "
                          "once"));
  }

  TEST_CASE("a shape flag that disagrees with the model exits 2 naming both values") {
    const Run r = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--num-layers", "40"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--num-layers 40: error: the Megatron-LM arguments say layers = 40, the model 'llama-3-8b' "
                          "has 32"));
  }

  TEST_CASE("an unknown flag, in neither gpuplan nor Megatron-LM, exits 2 with a hint") {
    const Run r = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--pipeline-model-paralel-size", "2"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--pipeline-model-paralel-size: error: unknown flag: neither a gpuplan train flag nor a "
                          "Megatron-LM argument"));
    CHECK(contains(r.err, "(did you mean '--pipeline-model-parallel-size'?)"));
  }

  TEST_CASE("Megatron's batch rule is Megatron's refusal: GBS 100 with MBS 1 and DP 8") {
    const Run r = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--global-batch-size", "100"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--global-batch-size: error: global batch size (100) is not divisible by micro batch size "
                          "(1) times data parallel size (8): Megatron-LM refuses it"));
  }

  TEST_CASE("a split refused before pricing exits 3 with its reason and no made-up micro-batch count") {
    // 32 layers + the embedding + the loss = 34 do not split over PP 4 (Megatron-LM's divisibility rule).
    const Run r = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--pipeline-model-parallel-size",
                       "4", "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"});
    CHECK(r.rc == kInfeasible);
    CHECK(contains(r.out, "34 layers with the embedding and the loss do not split evenly over PP 4"));
    CHECK(contains(r.out, "micro-batch 1\n"));
    CHECK_FALSE(contains(r.out, "0 micro-batches"));
  }

  TEST_CASE("--recompute-modules beside --recompute-granularity is Megatron's: core_attn accepted, named or not") {
    // gpuplan's own --recompute-modules has the same spelling; beside Megatron's granularity flag the list is read
    // with Megatron's vocabulary and rule: the attention core is recomputed only when core_attn is named.
    const std::vector<std::string> base = {"train", "-m", "qwen3-30b-a3b", "--gpu", "h100", "--gpus", "8", "--bf16",
                                           "--use-distributed-optimizer", "--recompute-granularity", "selective",
                                           "--recompute-modules"};
    auto with = [&](std::vector<std::string> mods) {
      std::vector<std::string> a = base;
      a.insert(a.end(), mods.begin(), mods.end());
      return run(a);
    };
    const Run named = with({"core_attn", "moe_act"});
    CHECK(named.rc != kInvalid);  // priced (whether it fits at the default batch is not the point)
    CHECK(contains(named.err, "recompute = \"selective\" (--recompute-granularity selective)"));
    CHECK(contains(named.err, "recompute_modules = [\"moe_act\"] (--recompute-modules core_attn moe_act)"));
    const Run unnamed = with({"moe_act"});
    CHECK(unnamed.rc != kInvalid);
    CHECK(contains(unnamed.err, "recompute = \"none\" (--recompute-granularity selective)"));
    const Run refused = with({"core_attn", "moe"});
    CHECK(refused.rc == kInvalid);
    CHECK(contains(refused.err, "--recompute-modules core_attn moe"));
  }

  TEST_CASE("--optimizer adam, Megatron's default spelling, is accepted inline and priced as adamw") {
    const std::vector<std::string> base = {"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "8",
                                           "--zero", "1", "--format", "json", "--optimizer"};
    std::vector<std::string> adam = base, adamw = base;
    adam.emplace_back("adam");
    adamw.emplace_back("adamw");
    const Run a = run(adam), w = run(adamw);
    CHECK(a.rc == w.rc);
    CHECK(a.rc != kInvalid);
    CHECK(a.out == w.out);
    CHECK(contains(a.out, "step_time_s"));
  }

  TEST_CASE("Megatron flags need -m MODEL") {
    const Run r = run({"train", "--gpu", "h100", "--tensor-model-parallel-size", "2"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--model: error: the Megatron-LM arguments need -m MODEL"));
  }

  TEST_CASE("--megatron-args reads a launch script: variables, arrays, the launcher's GPU count, Megatron defaults") {
    const Script s(
        "#!/bin/bash\n"
        "GPUS_PER_NODE=8\n"
        "NUM_NODES=2\n"
        "TP=4\n"
        "MODEL_ARGS=(\n"
        "    --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32\n"
        "    --group-query-attention --num-query-groups 8 --kv-channels 128 --swiglu --normalization RMSNorm\n"
        "    --position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear\n"
        "    --attention-dropout 0.0 --hidden-dropout 0.0\n"
        ")\n"
        "torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES pretrain_gpt.py \\\n"
        "    ${MODEL_ARGS[@]} \\\n"
        "    --tensor-model-parallel-size ${TP} --sequence-parallel \\\n"
        "    --micro-batch-size 1 --global-batch-size 32 --seq-length 8192 \\\n"
        "    --bf16 --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather \\\n"
        "    --lr 1e-4 --save $1\n");
    const Run r = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--megatron-args", s.path(), "--format", "json"});
    INFO(r.err);
    CHECK(r.rc == 0);
    const auto j = parse_json(r);
    CHECK(j["gpus"] == 16);  // torchrun: 8 per node x 2 nodes
    CHECK(j["layout"]["tp"] == 4);
    CHECK(j["layout"]["dp"] == 4);
    CHECK(j["layout"]["micro_batches"] == 8);  // 32 / (1 x 4)
    CHECK(j["layout"]["sequence_parallel"] == true);
    // --bf16 without --grad-reduce-in-bf16: Megatron-LM keeps fp32 gradient buffers (gradient bytes 4).
    const auto own = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "16", "--tp", "4", "--sp", "true",
                          "--micro-batch", "1", "--global-batch", "32", "--seq", "8192", "--precision", "bf16",
                          "--zero", "1", "--overlap-grad-reduce", "true", "--overlap-param-gather", "true",
                          "--gradient-bytes", "4", "--dropout", "false", "--recompute", "none", "--overlap-tp",
                          "false", "--cross-entropy", "unfused", "--param-layout", "contiguous", "--format", "json"});
    CHECK(own.rc == 0);
    CHECK(r.out == own.out);  // no --cross-entropy-loss-fusion: Megatron-Core's unfused loss
    CHECK(contains(r.err, "--megatron-args: note: 16 GPUs from the launcher (torchrun --nproc_per_node 8 --nnodes 2)"));
    CHECK(contains(r.err, "Megatron-LM: note: --save uses $1 (unset; ignored anyway)"));
  }

  TEST_CASE("Megatron-LM's examples/gpt3 launch script pastes in: its quoted batch schedule is split by bash") {
    // The script passes --step-batch-size-schedule "0:16 2.4B:320 ..." inside an array that it expands unquoted, so
    // bash splits the value and Megatron-LM's parser would refuse the words after "0:16" as well.
    const Run r = run({"train", "-m", "gpt3-175b", "--gpu", "h100", "--megatron-args",
                       fixture("train_gpt3_175b_distributed.sh")});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "train_gpt3_175b_distributed.sh:77: error: unexpected word '2.4B:320' after "
                          "'--step-batch-size-schedule 0:16', which takes one value"));
  }

  TEST_CASE("Megatron-Bridge's documented Megatron-LM command pastes in: exit 0 with its own layout") {
    // tests/fixtures/megatron/README.md: the "MLM 2-GPU with TP=2" block of Megatron-Bridge's mlm-bridge-training
    // page (a vanilla GPT, 4 layers of hidden 256, launched by python -m torch.distributed.run --nproc_per_node=2).
    const Run r = run({"train", "-m", fixture("vanilla-gpt-4l-256h.json"), "--gpu", "h100", "--megatron-args",
                       fixture("mbridge_mlm_tp2.sh"), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto j = parse_json(r);
    CHECK(j["gpus"] == 2);
    CHECK(j["layout"]["tp"] == 2);
    CHECK(j["layout"]["dp"] == 1);
    CHECK(j["layout"]["sequence_parallel"] == true);
    CHECK(j["layout"]["micro_batch"] == 2);
    CHECK(j["layout"]["micro_batches"] == 8);  // 16 / (2 x 1)
    CHECK(j["layout"]["seq"] == 1024);
    CHECK(contains(r.err, "--train-iters"));
    CHECK(contains(r.err, "--mock-data"));
  }

  TEST_CASE("gpuplan's boolean flags also take the bare switch that Megatron users type: no value = true") {
    // --fp8-dot-product-attention, --overlap-grad-reduce and --overlap-param-gather are spelled as Megatron-LM
    // spells them, where they are store_true switches; gpuplan's own flags of the same names took only a value
    // (CLI11: "Could not convert", exit 2, for the bare form). Both forms now give the same plan.
    const std::vector<std::string> base{"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "16", "--tp", "2",
                                        "--precision", "fp8", "--zero", "1", "--global-batch", "64", "--seq", "4096",
                                        "--format", "json"};
    auto with = [&](std::vector<std::string> extra) {
      auto a = base;
      a.insert(a.end(), extra.begin(), extra.end());
      return run(a);
    };
    for (const char* flag : {"--fp8-dot-product-attention", "--overlap-grad-reduce", "--overlap-param-gather", "--sp"}) {
      INFO(flag);
      const Run bare = with({flag});
      const Run typed = with({flag, "true"});
      INFO(bare.err);
      CHECK(bare.rc == 0);
      CHECK(typed.rc == 0);
      CHECK(bare.out == typed.out);
      // The bare switch before another flag does not swallow it.
      const Run before = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "16", "--tp", "2", "--precision",
                              "fp8", "--zero", "1", flag, "--global-batch", "64", "--seq", "4096", "--format", "json"});
      CHECK(before.rc == 0);
      CHECK(before.out == bare.out);
    }
    // `false` still turns them off, spelled with a space or '='.
    const Run off = with({"--fp8-dot-product-attention", "false"});
    const Run off_eq = with({"--fp8-dot-product-attention=false"});
    const Run none = run(base);
    CHECK(off.rc == 0);
    CHECK(off.out == none.out);
    CHECK(off_eq.out == none.out);
    CHECK(with({"--fp8-dot-product-attention"}).out != none.out);  // FP8 attention moves the step
    CHECK(with({"--overlap-grad-reduce", "false"}).out != with({"--overlap-grad-reduce"}).out);
    // A value that is no boolean is still refused.
    const Run bad = with({"--overlap-grad-reduce", "maybe"});
    CHECK(bad.rc == kInvalid);
    CHECK(contains(bad.err, "maybe"));
  }

  // Published launch scripts (tests/fixtures/megatron/README.md cites each at its Megatron-LM commit), pasted as they
  // are. The expected layouts are read by hand from the scripts.
  TEST_CASE("published: Megatron-LM's Llama 3 8B FP8 example pastes in with its if-selected FP8 and data flags") {
    // DP 8 without recompute at 8192 tokens on an H100's 79.2 GiB. Megatron-Core keeps weights and gradients in its
    // param_and_grad_buffer, so the fragmentation reserve is the contiguous layout's 0.5% of the allocated peak
    // (mem_headroom_contiguous.json), not the per-tensor 5% that put it 2.36 GiB over (data/validation/ANALYSIS.md,
    // sessions 30-31): it fits, as Megatron-LM's example runs.
    const Run r = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--megatron-args",
                       fixture("train_llama3_8b_h100_fp8.sh"), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto j = parse_json(r);
    CHECK(contains(r.err, "param_layout"));
    const auto& b = j["memory"]["breakdown"];
    // peak = allocated + context + NCCL + f · allocated, f = 0.005
    const double allocated = j["memory"]["peak_bytes_per_gpu"].get<double>() - b["cuda_context_bytes"].get<double>() -
                             b["nccl_buffers_bytes"].get<double>() - b["fragmentation_bytes"].get<double>();
    CHECK(b["fragmentation_bytes"].get<double>() == gptest::approx(0.005 * allocated));
    CHECK(j["gpus"] == 8);  // GPUS_PER_NODE=8 x NUM_NODES=1
    CHECK(j["layout"]["tp"] == 1);
    CHECK(j["layout"]["pp"] == 1);
    CHECK(j["layout"]["dp"] == 8);
    CHECK(j["layout"]["micro_batch"] == 1);
    CHECK(j["layout"]["micro_batches"] == 16);  // 128 / (1 x 8)
    CHECK(j["layout"]["seq"] == 8192);
    CHECK(j["layout"]["sequence_parallel"] == false);  // TP 1: Megatron-LM turns it off
    CHECK(contains(r.err, "fp8_params = true (--fp8-param-gather)"));
    CHECK(contains(r.err, "precision = \"fp8\" (--fp8-format hybrid)"));
    CHECK(contains(r.err, "--sequence-parallel with TP 1: Megatron-LM turns sequence parallelism off"));
    CHECK(contains(r.err, "--data-cache-path uses ${PWD} (unset; ignored anyway)"));
  }

  TEST_CASE("published: the Llama 3 8B FP8 example with the CP 2 of Megatron-LM's README performance row fits") {
    // examples/llama/README.md (Megatron-LM d98e8a64ddf3), "FP8 Performance": LLAMA3-8B on 8 GPUs, GBS 128, MBS 1,
    // seq 8192, TP 1, PP 1, CP 2, GA 32 — the script's own CP_SIZE is 1 (data/validation/ANALYSIS.md, session 30).
    const Run r = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--megatron-args",
                       fixture("train_llama3_8b_h100_fp8.sh"), "--context-parallel-size", "2", "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto j = parse_json(r);
    CHECK(j["feasible"] == true);
    CHECK(j["layout"]["cp"] == 2);
    CHECK(j["layout"]["dp"] == 4);
    CHECK(j["layout"]["micro_batches"] == 32);  // the README's GA 32 = 128 / (1 x 4)
  }

  TEST_CASE("document masks: --dataloader-inter-document-masking asks for --packed-documents, --reset-attention-mask "
            "is priced over the whole sequence") {
    // Megatron-LM d98e8a64: inter-document masking hands cu_seqlens to the attention (THD); --reset-attention-mask
    // builds a dense s x s mask in the dataloader (megatron/core/datasets/gpt_dataset.py).
    const Run inter = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--megatron-args",
                           fixture("train_llama3_8b_h100_fp8.sh"), "--context-parallel-size", "2",
                           "--dataloader-inter-document-masking", "--packed-documents", "512", "--format", "json"});
    INFO(inter.err);
    REQUIRE(inter.rc == 0);
    CHECK(contains(inter.err, "--dataloader-inter-document-masking: attention per document (cu_seqlens)"));
    CHECK(!contains(inter.err, ", --dataloader-inter-document-masking"));  // noted, not in the ignored list
    const Run reset = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--megatron-args",
                           fixture("train_llama3_8b_h100_fp8.sh"), "--context-parallel-size", "2",
                           "--reset-attention-mask", "--format", "json"});
    INFO(reset.err);
    REQUIRE(reset.rc == 0);
    CHECK(contains(reset.err, "--reset-attention-mask: a dense s x s document mask"));
    const Run plain = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--megatron-args",
                           fixture("train_llama3_8b_h100_fp8.sh"), "--context-parallel-size", "2", "--format", "json"});
    REQUIRE(plain.rc == 0);
    CHECK(parse_json(reset)["step_time_s"] == parse_json(plain)["step_time_s"]);
    CHECK(parse_json(inter)["step_time_s"].get<double>() < parse_json(plain)["step_time_s"].get<double>());
  }

  TEST_CASE("published: Megatron-LM's MoE README Mixtral 8x7B example pastes in on its 32 GPUs") {
    const Run r = run({"train", "-m", "mixtral-8x7b", "--gpu", "h100", "--megatron-args",
                       fixture("moe_readme_mixtral_8x7b_32gpu.sh"), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto j = parse_json(r);
    CHECK(j["gpus"] == 32);  // NNODES=${NNODES:-"4"} x GPUS_PER_NODE=8
    CHECK(j["layout"]["tp"] == 1);
    CHECK(j["layout"]["pp"] == 4);
    CHECK(j["layout"]["ep"] == 8);
    CHECK(j["layout"]["dp"] == 8);            // 32 / (1 x 4)
    CHECK(j["layout"]["micro_batches"] == 16);  // 128 / (1 x 8)
    CHECK(j["layout"]["seq"] == 4096);
    CHECK(contains(r.err, "--no-masked-softmax-fusion (only Megatron's local attention uses that kernel)"));
  }

  TEST_CASE("published: Megatron-LM examples/mixtral launches 8 GPUs (too few for PP 4 x EP 8), --gpus 32 prices it") {
    const Run eight = run({"train", "-m", "mixtral-8x7b", "--gpu", "h100", "--megatron-args",
                           fixture("train_mixtral_8x7b_distributed.sh")});
    INFO(eight.err);
    CHECK(eight.rc == kInfeasible);
    CHECK(contains(eight.err, "train_mixtral_8x7b_distributed.sh:102: note: the condition reads ${WANDB_API_KEY}"));
    const Run r = run({"train", "-m", "mixtral-8x7b", "--gpu", "h100", "--gpus", "32", "--megatron-args",
                       fixture("train_mixtral_8x7b_distributed.sh"), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto j = parse_json(r);
    CHECK(j["layout"]["pp"] == 4);
    CHECK(j["layout"]["ep"] == 8);
    CHECK(j["layout"]["micro_batches"] == 32);  // 256 / (1 x 8)
  }

  TEST_CASE("published: the GPT-3 block of Megatron-LM's training-examples.md pastes in: TP 2, PP 2, fp16") {
    const Run r = run({"train", "-m", fixture("vanilla-gpt-24l-2048h.json"), "--gpu", "h100", "--megatron-args",
                       fixture("docs_gpt3_example.sh"), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto j = parse_json(r);
    CHECK(j["gpus"] == 8);
    CHECK(j["layout"]["tp"] == 2);
    CHECK(j["layout"]["pp"] == 2);
    CHECK(j["layout"]["dp"] == 2);
    CHECK(j["layout"]["micro_batch"] == 2);
    CHECK(j["layout"]["micro_batches"] == 4);  // 16 / (2 x 2)
    CHECK(j["layout"]["seq"] == 1024);
    CHECK(contains(r.err, "precision = \"fp16\" (--fp16)"));
  }

  TEST_CASE("published: the 'Custom LLaMA' block describes a GPT (no --swiglu, RMSNorm, GQA): with Llama 2 7B, exit 2") {
    const Run r = run({"train", "-m", "llama-2-7b", "--gpu", "h100", "--megatron-args",
                       fixture("docs_custom_llama.sh")});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "the Megatron-LM arguments say gated_mlp = a two-matrix MLP, the model 'llama-2-7b' has a gated "
                          "(SwiGLU) MLP"));
    CHECK(contains(r.err, "no --normalization (LayerNorm)"));
  }

  TEST_CASE("published: Megatron-LM's Megatron-FSDP Llama 3 8B example runs as ZeRO 3 with its notes") {
    const Run r = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--megatron-args",
                       fixture("train_llama3_8b_fsdp_h100_fp8.sh"), "--format", "json"});
    INFO(r.err);
    REQUIRE(r.rc == 0);
    const auto j = parse_json(r);
    CHECK(j["gpus"] == 8);  // WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES)), torchrun --nproc_per_node 8 --nnodes 1
    CHECK(j["layout"]["dp"] == 8);
    CHECK(j["layout"]["micro_batches"] == 16);  // 128 / (1 x 8)
    CHECK(contains(r.err, "zero = 3 (--data-parallel-sharding-strategy optim_grads_params)"));
    CHECK(contains(r.err, "--use-nccl-ub: accepted, not priced apart"));
    CHECK(contains(r.err, "--no-gradient-accumulation-fusion: accepted, not priced apart"));
  }

  TEST_CASE("published: the Megatron-FSDP example with its commented-out HSDP line, two instances on 16 GPUs") {
    // The script's own comment: "To enable HFSDP ... # --num-distributed-optimizer-instances 2". With outer no_shard
    // (Megatron-LM's default) each instance of 8 GPUs shards the model states, so the optimizer's share per GPU
    // doubles against plain FSDP over 16.
    const std::vector<std::string> base{"train", "-m", "llama-3-8b", "--gpu", "h100", "--gpus", "16", "--megatron-args",
                                        fixture("train_llama3_8b_fsdp_h100_fp8.sh"), "--format", "json"};
    auto hsdp_args = base;
    hsdp_args.insert(hsdp_args.end(), {"--num-distributed-optimizer-instances", "2"});
    const Run plain = run(base);
    const Run hsdp = run(hsdp_args);
    INFO(hsdp.err);
    REQUIRE(plain.rc == 0);
    REQUIRE(hsdp.rc == 0);
    CHECK(contains(hsdp.err, "shard_group = 8 (--num-distributed-optimizer-instances 2 (DP × CP / N = 16 / 2))"));
    const auto p = parse_json(plain), h = parse_json(hsdp);
    CHECK(h["memory"]["breakdown"]["optimizer_states_bytes"].get<double>() ==
          gptest::approx(2.0 * p["memory"]["breakdown"]["optimizer_states_bytes"].get<double>()));
  }

  TEST_CASE("hostile: optimizer instances that do not slice the experts' data-parallel group: exit 2") {
    // 16 GPUs, TP 2, EP 4: expert-data-parallel size 2 (parallel_state.py), not divisible by 4 instances. The shape
    // flags say Mixtral's architecture (the shape check runs first).
    const Script s("torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --tensor-model-parallel-size 2 \\\n"
                   "    --expert-model-parallel-size 4 --moe-token-dispatcher-type alltoall \\\n"
                   "    --use-distributed-optimizer --num-distributed-optimizer-instances 4 --bf16 --swiglu \\\n"
                   "    --untie-embeddings-and-output-weights --normalization RMSNorm --disable-bias-linear \\\n"
                   "    --position-embedding-type rope\n");
    const Run r = run({"train", "-m", "mixtral-8x7b", "--gpu", "h100", "--megatron-args", s.path()});
    INFO(r.err);
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "run.sh:1: --num-distributed-optimizer-instances: error: "
                          "'--num-distributed-optimizer-instances 4': the expert-data-parallel size TP × CP × DP / "
                          "(expert TP × EP) = 16 / 8 = 2 is not divisible by 4 instances"));
    CHECK(contains(r.err, "Expert data parallel size should be divisible by partial DistOpt shard factor"));
  }

  TEST_CASE("hostile scripts: an unterminated quote, an unset variable in a mapped flag, an unknown flag: exit 2") {
    const Script quote("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 --split '99,1\n");
    const Run q = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--megatron-args", quote.path()});
    CHECK(q.rc == kInvalid);
    CHECK(contains(q.err, "run.sh:1: error: an unterminated ' quote"));
    const Script unset("GPUS=8\ntorchrun --nproc_per_node $GPUS pretrain_gpt.py \\\n"
                       "    --tensor-model-parallel-size ${TP_SIZE} --bf16\n");
    const Run u = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--megatron-args", unset.path()});
    CHECK(u.rc == kInvalid);
    CHECK(contains(u.err, "run.sh:2: --tensor-model-parallel-size: error: '--tensor-model-parallel-size ${TP_SIZE}': "
                          "uses ${TP_SIZE}, which the script does not set"));
    const Script unknown("torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-paralel-size 2 --bf16\n");
    const Run k = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--megatron-args", unknown.path()});
    CHECK(k.rc == kInvalid);
    CHECK(contains(k.err, "run.sh:1: --tensor-model-paralel-size: error: unknown flag"));
    CHECK(contains(k.err, "(did you mean '--tensor-model-parallel-size'?)"));
    // Shell arithmetic that bash itself refuses (division by zero) feeding a mapped flag: exit 2 with the line.
    const Script arith("ACC=0\nGBS=$((64 / ACC))\ntorchrun --nproc_per_node 8 pretrain_gpt.py --bf16 \\\n"
                       "    --global-batch-size $GBS\n");
    const Run a = run({"train", "-m", "llama-3-8b", "--gpu", "h100", "--megatron-args", arith.path()});
    CHECK(a.rc == kInvalid);
    CHECK(contains(a.err, "run.sh:3: --global-batch-size: error: '--global-batch-size $((64 / ACC))': uses "
                          "$((64 / ACC)) (line 2: division by zero, which bash refuses), which gpuplan cannot "
                          "evaluate"));
  }
}
