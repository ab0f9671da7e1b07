// Megatron-LM flags mapped to the plan's scenario keys (megatron_mapper.hpp): parallelism, batch, precision,
// recompute, the pipeline split and the optimizer.
#include "megatron_mapper.hpp"

#include <array>
#include <utility>

namespace gpuplan::cli::detail {

void Mapper::parallel() {
  if (auto v = integer("--tensor-model-parallel-size")) set("tp", *v, "--tensor-model-parallel-size");
  if (auto v = integer("--pipeline-model-parallel-size")) set("pp", *v, "--pipeline-model-parallel-size");
  if (auto v = integer("--context-parallel-size")) set("cp", *v, "--context-parallel-size");
  if (auto v = integer("--expert-model-parallel-size")) set("ep", *v, "--expert-model-parallel-size");
  if (auto v = integer("--expert-tensor-parallel-size")) set("etp", *v, "--expert-tensor-parallel-size");
  if (auto v = integer("--num-virtual-stages-per-pipeline-rank"))
    set("virtual_stages", *v, "--num-virtual-stages-per-pipeline-rank");
  if (auto v = integer("--num-layers-per-virtual-pipeline-stage")) m_.layers_per_virtual_stage = *v;
  if (given("--num-virtual-stages-per-pipeline-rank") && given("--num-layers-per-virtual-pipeline-stage"))
    bad(*get("--num-layers-per-virtual-pipeline-stage"),
        "Megatron-LM takes only one of --num-layers-per-virtual-pipeline-stage and "
        "--num-virtual-stages-per-pipeline-rank");
  // arguments.py validate_args: "Disabling sequence parallelism because tensor model parallelism is disabled" (TP 1,
  // given or, in a whole command, Megatron's default).
  const auto tp = m_.keys.contains("tp") ? std::optional<long long>(m_.keys["tp"].get<long long>())
                                         : (a_.whole_command ? std::optional<long long>(1) : std::nullopt);
  if (given("--sequence-parallel") && tp && *tp == 1) {
    set("sequence_parallel", false, "--sequence-parallel");
    m_.notes.push_back("--sequence-parallel with TP 1: Megatron-LM turns sequence parallelism off (arguments.py, "
                       "validate_args)");
  } else if (given("--sequence-parallel")) {
    set("sequence_parallel", true, "--sequence-parallel");
  } else if (a_.whole_command) {
    set_default("sequence_parallel", false, "no --sequence-parallel");
  }
  if (given("--use-distributed-optimizer")) set("zero", 1, "--use-distributed-optimizer");
  else if (a_.whole_command) set_default("zero", 0, "no --use-distributed-optimizer");
  auto onoff = [&](const char* flag, const char* key) {
    if (given(flag)) set(key, true, flag);
    else if (a_.whole_command) set_default(key, false, fmt::format("no {}", flag));
  };
  onoff("--overlap-grad-reduce", "overlap_grad_reduce");
  onoff("--overlap-param-gather", "overlap_param_gather");
  // DistributedDataParallelConfig.bucket_size (parameters per bucket; unset: max(40M, 1M x DP·CP)).
  if (auto v = integer("--ddp-bucket-size")) set("dp_bucket_size", *v, "--ddp-bucket-size");
  onoff("--tp-comm-overlap", "overlap_tp_comm");
  // The LM loss's kernels: Megatron-LM runs the unfused VocabParallelCrossEntropy unless
  // --cross-entropy-loss-fusion; --cross-entropy-fusion-impl picks the jit-fused passes (native, the default) or
  // Transformer Engine's one-pass kernel (te).
  if (given("--cross-entropy-loss-fusion")) {
    const auto impl = text("--cross-entropy-fusion-impl");
    if (impl && *impl != "native" && *impl != "te")
      bad(*get("--cross-entropy-fusion-impl"), "Megatron-LM's choices are native and te");
    else if (impl && *impl == "te")
      set("cross_entropy", "te", "--cross-entropy-fusion-impl");
    else
      set("cross_entropy", "native", "--cross-entropy-loss-fusion");
  } else if (a_.whole_command) {
    set_default("cross_entropy", "unfused", "no --cross-entropy-loss-fusion");
  }
  // CUDA graphs (Megatron-LM core_v0.14.0 megatron/training/arguments.py: --enable-cuda-graph or
  // --external-cuda-graph, --cuda-graph-scope full | attn | full_iteration, default full = the whole layer).
  if (given("--enable-cuda-graph") || given("--external-cuda-graph")) {
    const auto scope = text("--cuda-graph-scope");
    const char* flag = given("--enable-cuda-graph") ? "--enable-cuda-graph" : "--external-cuda-graph";
    if (!scope || *scope == "full")
      set("cuda_graphs", "layer", flag);
    else if (*scope == "attn")
      set("cuda_graphs", "attn", "--cuda-graph-scope");
    else if (*scope == "full_iteration" && given("--enable-cuda-graph"))
      set("cuda_graphs", "full_iteration", "--cuda-graph-scope");
    else
      bad(*get("--cuda-graph-scope"), "Megatron-LM's choices are full, attn and full_iteration (full_iteration only "
                                      "with --enable-cuda-graph)");
  }
  if (auto t = text("--cp-comm-type"); t && *t != "p2p")
    refuse(*get("--cp-comm-type"), "gpuplan prices context parallelism as Megatron's p2p ring; another type is");
}

void Mapper::batch() {
  if (auto v = integer("--micro-batch-size")) set("micro_batch", *v, "--micro-batch-size");
  if (auto v = integer("--global-batch-size")) {
    set("global_batch", *v, "--global-batch-size");
    m_.global_batch_given = true;
  }
  if (auto v = integer("--seq-length")) set("seq", *v, "--seq-length");
}

constexpr const char* kFp4RecipeRule = "gpuplan prices FP4 as NVFP4 (E4M3 scales per 16 elements); this recipe is";

// Transformer Engine's NVFP4BlockScaling reads three switches from the environment, each "0" (off) unless set (TE
// v2.8 40c69e75 transformer_engine/common/recipe/__init__.py:412-445, unchanged in v2.9 and at d0067d0d): unset, the
// recipe applies a 16-point random Hadamard transform to the column-wise (wgrad) copies of the inputs and gradients,
// rounds the gradients stochastically, and scales the weights in 16x16 blocks. gpuplan's NVFP4 passes
// (quant_recipe.hpp: amax, then one cast to row- and column-wise E2M1 with an E4M3 scale per 1x16) are the recipe with
// all three off: what MLPerf Training v5.1's NVIDIA configs call the "Vanilla recipe" (llama31_8b/implementations/nemo
// config_common_fp4.sh at mlcommons/training_results_v5.1 441d65f4: NVTE_NVFP4_DISABLE_*=1). The Hadamard transform
// and stochastic rounding run inside TE's cast kernels at a rate no public source gives, so a pasted script that
// leaves them on is refused, naming the exports that would make it gpuplan's recipe.
constexpr std::array<std::pair<const char*, const char*>, 3> kNvfp4Switches{
    {{"NVTE_NVFP4_DISABLE_RHT", "random Hadamard transforms on the wgrad operands"},
     {"NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING", "stochastic rounding of the gradients"},
     {"NVTE_NVFP4_DISABLE_2D_QUANTIZATION", "16x16 weight scale blocks"}}};

namespace {

/// The NVFP4 switches a pasted script leaves on (its environment does not set them to "1"), joined for a message.
std::pair<std::string, std::string> nvfp4_switches_on(const std::map<std::string, std::string>& env) {
  std::string what, exports;
  for (const auto& [var, feature] : kNvfp4Switches) {
    auto it = env.find(var);
    if (it != env.end() && it->second == "1") continue;
    what += (what.empty() ? "" : ", ") + std::string(feature);
    exports += (exports.empty() ? "" : " ") + fmt::format("{}=1", var);
  }
  return {what, exports};
}

}  // namespace

// TransformerConfig fp8_recipe: delayed (the default), tensorwise, mxfp8, blockwise (wl::QuantRecipe).
void Mapper::map_fp8_recipe(const std::string& recipe) {
  if (recipe != "delayed" && recipe != "tensorwise" && recipe != "mxfp8" && recipe != "blockwise")
    refuse(*get("--fp8-recipe"), "gpuplan prices the delayed, tensorwise, mxfp8 and blockwise recipes; this one is");
  else if (recipe != "delayed")
    set("fp8_recipe", recipe, "--fp8-recipe");
}

void Mapper::precision() {
  const bool bf16 = given("--bf16"), fp16 = given("--fp16");
  if (bf16 && fp16) bad(*get("--fp16"), "Megatron-LM refuses --bf16 with --fp16");
  auto fp8 = text("--fp8-format");
  auto fp4 = text("--fp4-format");
  if (fp4 && fp8) bad(*get("--fp4-format"), "give one of --fp8-format and --fp4-format");
  if (fp4 && !fp8) {
    // TransformerConfig fp4 / fp4_recipe (Transformer Engine NVFP4BlockScaling): E2M1 data, the nvfp4 recipe.
    const auto recipe = text("--fp4-recipe").value_or("nvfp4");
    if (*fp4 != "e2m1") bad(*get("--fp4-format"), "expected e2m1");
    else if (recipe != "nvfp4")
      refuse(*get("--fp4-recipe"), kFp4RecipeRule);
    else if (!bf16)
      refuse(*get("--fp4-format"), fp16 ? "FP4 GEMMs inside fp16 training are" : "FP4 GEMMs inside fp32 training are");
    else if (const auto [on, exports] = nvfp4_switches_on(a_.environment); a_.whole_command && !on.empty())
      refuse(*get("--fp4-format"),
             fmt::format("Transformer Engine's NVFP4 recipe with {} (TE 2.8 NVFP4BlockScaling: on unless the script "
                         "exports {}; gpuplan prices NVFP4 with all three off) is",
                         on, exports));
    else {
      set("precision", "fp4", "--fp4-format");
      m_.assumed.push_back(
          a_.whole_command
              ? std::string("NVTE_NVFP4_DISABLE_RHT, _STOCHASTIC_ROUNDING and _2D_QUANTIZATION = 1 (Transformer Engine's "
                            "NVFP4 without its Hadamard transforms, stochastic rounding and 2D weight blocks: gpuplan's "
                            "NVFP4)")
              : std::string("--fp4-format e2m1 as Transformer Engine's NVFP4 with NVTE_NVFP4_DISABLE_RHT, "
                            "_STOCHASTIC_ROUNDING and _2D_QUANTIZATION = 1 (typed flags carry no environment)"));
    }
  } else if (fp8) {
    if (*fp8 != "e4m3" && *fp8 != "hybrid") bad(*get("--fp8-format"), "expected e4m3 or hybrid");
    map_fp8_recipe(text("--fp8-recipe").value_or("delayed"));
    if (!bf16)
      refuse(*get("--fp8-format"),
             fp16 ? "FP8 GEMMs inside fp16 training are" : "FP8 GEMMs inside fp32 training are");
    else set("precision", "fp8", "--fp8-format");
  } else if (bf16) {
    set("precision", "bf16", "--bf16");
  } else if (fp16) {
    set("precision", "fp16", "--fp16");
  } else if (a_.whole_command) {
    set_default("precision", "fp32", "no --bf16 or --fp16: Megatron-LM trains in fp32");
  }
  // Without --fp8-format, Megatron-LM trains without FP8 and ignores the recipe and the FP8 parameter gather: so does a
  // pasted command. Typed beside gpuplan's own flags (`--precision fp8 --fp8-recipe tensorwise`), they are the FP8
  // settings of gpuplan's precision: mapped, and the scenario's rules refuse them unless the precision is fp8.
  const bool typed_fp8 = !fp8 && !a_.whole_command;
  if (given("--fp8-recipe") && !fp8) {
    if (!typed_fp8) m_.ignored.push_back("--fp8-recipe");
    else if (auto recipe = text("--fp8-recipe")) map_fp8_recipe(*recipe);
  }
  if (given("--fp4-recipe") && !fp4) {
    // gpuplan's fp4 is NVFP4, the one recipe: typed beside --precision fp4 it is checked, in a pasted script ignored.
    if (a_.whole_command) m_.ignored.push_back("--fp4-recipe");
    else if (auto recipe = text("--fp4-recipe"); recipe && *recipe != "nvfp4")
      refuse(*get("--fp4-recipe"), kFp4RecipeRule);
    else m_.assumed.push_back("--fp4-recipe nvfp4 (gpuplan's fp4 is NVFP4)");
  }
  if (given("--fp8-param-gather")) {
    if (fp8 || typed_fp8) set("fp8_params", true, "--fp8-param-gather");
    else m_.ignored.push_back("--fp8-param-gather");
  }
  // TransformerConfig.fp8_dot_product_attention: Transformer Engine's FP8 fused attention, inside the FP8 (or FP4)
  // autocast region only.
  if (given("--fp8-dot-product-attention")) {
    if (fp8 || fp4) set("fp8_dot_product_attention", true, "--fp8-dot-product-attention");
    else bad(*get("--fp8-dot-product-attention"), "FP8 attention runs inside FP8 or FP4 training: give --fp8-format "
                                                   "or --fp4-format");
  }
  // Gradient buffers: fp32 with bf16 unless --grad-reduce-in-bf16 (arguments.py, validate_args), the parameter
  // dtype otherwise unless --accumulate-allreduce-grads-in-fp32.
  if (given("--main-grads-dtype")) {
    if (auto t = text("--main-grads-dtype")) {
      if (*t == "bf16") set("gradient_bytes", 2, "--main-grads-dtype");
      else if (*t == "fp32") set("gradient_bytes", 4, "--main-grads-dtype");
      else bad(*get("--main-grads-dtype"), "expected fp32 or bf16");
    }
  } else if (given("--grad-reduce-in-bf16")) {
    set("gradient_bytes", 2, "--grad-reduce-in-bf16");
  } else if (given("--accumulate-allreduce-grads-in-fp32")) {
    set("gradient_bytes", 4, "--accumulate-allreduce-grads-in-fp32");
  } else if (a_.whole_command) {
    if (bf16) set_default("gradient_bytes", 4, "--bf16 without --grad-reduce-in-bf16: fp32 gradient buffers");
    else if (fp16) set_default("gradient_bytes", 2, "--fp16: gradient buffers in fp16");
    else set_default("gradient_bytes", 4, "fp32 training");
  }
  if (auto t = text("--main-params-dtype"); t && *t != "fp32")
    refuse(*get("--main-params-dtype"), "master weights in fp16 are");
}

void Mapper::recompute() {
  auto gran = text("--recompute-granularity");
  if (given("--recompute-activations") && !gran) {
    set("recompute", "selective", "--recompute-activations");
    return;
  }
  if (!gran) {
    for (const char* f : {"--recompute-method", "--recompute-num-layers", "--recompute-modules"})
      if (given(f)) bad(*get(f), "needs --recompute-granularity (Megatron-LM)");
    if (a_.whole_command) set_default("recompute", "none", "no --recompute-granularity");
    return;
  }
  const MegatronFlag& g = *get("--recompute-granularity");
  if (*gran == "selective") {
    if (given("--recompute-method") || given("--recompute-num-layers"))
      bad(*get(given("--recompute-method") ? "--recompute-method" : "--recompute-num-layers"),
          "Megatron-LM takes no recompute method or layer count with selective granularity");
    // Megatron-Core's --recompute-modules (default core_attn): core_attn is gpuplan's selective recompute; the
    // norms, MLA's up-projections, the MoE activation and the dense MLP are recompute modules of their own; the
    // others (moe, shared_experts, ...) are not priced.
    bool core_attn = true;
    if (const MegatronFlag* mods = get("--recompute-modules")) {
      core_attn = false;
      std::vector<std::string> list;
      bool ok = true;
      for (const auto& v : mods->values) {
        if (v.text == "core_attn") core_attn = true;
        else if (v.text == "layernorm" || v.text == "mla_up_proj" || v.text == "moe_act" || v.text == "mlp")
          list.push_back(v.text);
        else ok = false;
      }
      if (!ok)
        refuse(*mods, "recomputing modules other than core_attn, layernorm, mla_up_proj, moe_act and mlp is");
      else if (!list.empty())
        set("recompute_modules", list, "--recompute-modules");
    }
    set("recompute", core_attn ? "selective" : "none", "--recompute-granularity");
  } else if (*gran == "full") {
    auto method = text("--recompute-method");
    auto n = integer("--recompute-num-layers");
    if (!method) {
      bad(g, "Megatron-LM needs --recompute-method uniform or block with full granularity");
      return;
    }
    if (!given("--recompute-num-layers")) {
      bad(g, "Megatron-LM needs --recompute-num-layers with full granularity");
      return;
    }
    if (given("--recompute-modules")) bad(*get("--recompute-modules"), "applies only to selective granularity");
    if (!n) return;
    // transformer_block.py _checkpointed_forward: uniform = groups of N layers per chunk, each checkpointed at its
    // input; block = the first N layers of each chunk checkpointed, the rest not recomputed (wl::RecomputeMethod).
    if (*method == "uniform" || *method == "block") {
      set("recompute", "full", "--recompute-granularity");
      if (*method == "block" || *n > 1) {
        set("recompute_method", *method, "--recompute-method");
        set("recompute_num_layers", *n, "--recompute-num-layers");
      }
    } else {
      bad(*get("--recompute-method"), "expected uniform or block");
    }
  } else {
    bad(g, "expected full or selective");
  }
}

void Mapper::pipeline_split() {
  // Megatron-Core's uneven splits (transformer_block.py get_num_layers_to_build; the rules are gpuplan's
  // chunk_layers): one way at a time, as TransformerConfig.__post_init__ and arguments.py validate_args require.
  const bool layout = given("--pipeline-model-parallel-layout");
  const bool first_last =
      given("--decoder-first-pipeline-num-layers") || given("--decoder-last-pipeline-num-layers");
  const bool accounts =
      given("--account-for-embedding-in-pipeline-split") || given("--account-for-loss-in-pipeline-split");
  if (layout && (first_last || accounts))
    bad(*get("--pipeline-model-parallel-layout"),
        "Megatron-LM refuses a pipeline layout with other pipeline layout arguments ('pipeline_model_parallel_layout "
        "cannot be set with other pipeline layout arguments')");
  else if (first_last && accounts)
    bad(*get(given("--decoder-first-pipeline-num-layers") ? "--decoder-first-pipeline-num-layers"
                                                          : "--decoder-last-pipeline-num-layers"),
        "Megatron-LM refuses first/last stage layer counts with --account-for-embedding/loss-in-pipeline-split");
  if (layout && (given("--num-layers-per-virtual-pipeline-stage") || given("--num-virtual-stages-per-pipeline-rank")))
    bad(*get("--pipeline-model-parallel-layout"),
        "Megatron-LM takes no more than one of --num-layers-per-virtual-pipeline-stage, "
        "--num-virtual-stages-per-pipeline-rank and --pipeline-model-parallel-layout (the layout gives the chunks)");
  if (first_last && given("--num-layers-per-virtual-pipeline-stage"))
    bad(*get("--num-layers-per-virtual-pipeline-stage"),
        "Megatron-LM: 'please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline parallel degree "
        "when enable uneven pipeline parallelism'");
  if (auto t = text("--pipeline-model-parallel-layout")) set("pipeline_layout", *t, "--pipeline-model-parallel-layout");
  if (auto v = integer("--decoder-first-pipeline-num-layers"))
    set("first_stage_layers", *v, "--decoder-first-pipeline-num-layers");
  if (auto v = integer("--decoder-last-pipeline-num-layers"))
    set("last_stage_layers", *v, "--decoder-last-pipeline-num-layers");
  if (given("--account-for-embedding-in-pipeline-split"))
    set("embedding_in_pipeline_split", true, "--account-for-embedding-in-pipeline-split");
  if (given("--account-for-loss-in-pipeline-split"))
    set("loss_in_pipeline_split", true, "--account-for-loss-in-pipeline-split");
  // arguments.py: --no-overlap-p2p-communication (store_false, dest overlap_p2p_comm): the overlap is on by default
  // and forced off without the interleaved schedule.
  if (given("--no-overlap-p2p-communication"))
    set("overlap_p2p_comm", false, "--no-overlap-p2p-communication");
  if (auto v = integer("--mtp-num-layers", 0); v && *v > 0) set("mtp_layers", *v, "--mtp-num-layers");
  // TransformerConfig cpu_offloading_num_layers (cpu_offload.py): the first N layers' activations offloaded.
  if (auto v = integer("--cpu-offloading-num-layers", 0); v && *v > 0)
    set("activation_offload_layers", *v, "--cpu-offloading-num-layers");
}

void Mapper::optimizer() {
  if (auto o = text("--optimizer")) {
    if (*o == "adam") set("optimizer", "adamw", "--optimizer");
    else if (*o == "sgd") set("optimizer", "sgd", "--optimizer");
    else refuse(*get("--optimizer"), "this optimizer is");
  }
  if (auto a = text("--exp-avg-dtype")) {
    const auto b = text("--exp-avg-sq-dtype").value_or("fp32");
    if ((*a == "bf16" || *a == "fp32") && *a == b) set("optimizer_states", *a, "--exp-avg-dtype");
    else
      refuse(*get("--exp-avg-dtype"),
             fmt::format("moment states as {} and {} (gpuplan: both fp32 or both bf16) are", *a, b));
  } else if (auto b2 = text("--exp-avg-sq-dtype"); b2 && *b2 != "fp32") {
    refuse(*get("--exp-avg-sq-dtype"), "a second moment not in fp32 with the first in fp32 is");
  }
  if (given("--optimizer-cpu-offload")) {
    auto frac = text("--optimizer-offload-fraction").value_or("1.0");
    if (frac == "1" || frac == "1.0") set("offload", "optimizer", "--optimizer-cpu-offload");
    else refuse(*get("--optimizer-offload-fraction"), "offloading part of the optimizer is");
  } else if (given("--optimizer-offload-fraction")) {
    m_.ignored.push_back("--optimizer-offload-fraction");
  }
  // The static state's layout, whatever the flags: Megatron-Core's DistributedDataParallel puts every parameter and
  // gradient in a _ParamAndGradBuffer (megatron/core/distributed/param_and_grad_buffer.py, one torch.zeros grad_data
  // and, with the distributed optimizer, one param_data per dtype group; the parameters become views of it), and
  // Megatron-FSDP in its DataParallelBuffers (megatron_fsdp/param_and_grad_buffer.py), Megatron-LM d98e8a64.
  set_default("param_layout", "contiguous", "Megatron-Core's param_and_grad_buffer");
}


// Megatron-FSDP (Megatron-LM d98e8a64ddf3, megatron/training/arguments.py validate_args and
// megatron/core/distributed/fsdp/src/megatron_fsdp/): --use-megatron-fsdp with --data-parallel-sharding-strategy
// (argparse default optim_grads_params). param_and_grad_buffer.py _init_each_parameter_group_buffers shards, per
// strategy: no_shard nothing, optim the main weights and optimizer states, optim_grads also the gradients,
// optim_grads_params also the model weights: gpuplan's ZeRO 0 / 1 / 2 / 3, the weights gathered one decoder layer at a
// time (FSDP units), prefetched behind compute (zero3_gather per_unit). Megatron-FSDP v1 forces the distributed
// optimizer, which its own sharding then replaces.
void Mapper::megatron_fsdp() {
  const bool fsdp = given("--use-megatron-fsdp");
  if (!fsdp) {
    // arguments.py: "FSDP manual registration is only supported with Megatron FSDP."
    if (given("--fsdp-manual-registration"))
      bad(*get("--fsdp-manual-registration"), "Megatron-LM takes it only with --use-megatron-fsdp and --use-nccl-ub");
    for (const char* f : {"--data-parallel-sharding-strategy", "--fsdp-double-buffer", "--megatron-fsdp-main-grads-dtype",
                          "--megatron-fsdp-main-params-dtype", "--megatron-fsdp-grad-comm-dtype"})
      if (given(f)) m_.ignored.push_back(fmt::format("{} (read only with --use-megatron-fsdp)", f));
    if (given("--use-nccl-ub"))
      m_.notes.push_back(
          "--use-nccl-ub: accepted, not priced apart: NCCL user-buffer registration of the data-parallel buffers "
          "(DistributedDataParallelConfig.nccl_ub: \"SM efficient nccl algorithm\") lowers the SMs the gradient "
          "reduce-scatter and parameter all-gather take from the GEMMs beside them; gpuplan prices that share as "
          "calibrated for NCCL's own kernels (the \"beside compute\" term of the DP row), an upper bound here");
    return;
  }
  const MegatronFlag& on = *get("--use-megatron-fsdp");
  const auto strategy = text("--data-parallel-sharding-strategy").value_or("optim_grads_params");
  int zero = -1;
  if (strategy == "no_shard") zero = 0;
  else if (strategy == "optim") zero = 1;
  else if (strategy == "optim_grads") zero = 2;
  else if (strategy == "optim_grads_params") zero = 3;
  if (zero < 0) {
    bad(*get("--data-parallel-sharding-strategy"),
        "Megatron-LM's choices are no_shard, optim, optim_grads and optim_grads_params");
    return;
  }
  reset("zero", zero,
        given("--data-parallel-sharding-strategy")
            ? as_typed(*get("--data-parallel-sharding-strategy"))
            : "--use-megatron-fsdp (Megatron-LM's default --data-parallel-sharding-strategy optim_grads_params)");
  if (zero == 3) reset("zero3_gather", "per_unit", as_typed(on) + " (one all-gather per decoder layer, prefetched)");
  // Megatron-FSDP's gradient buffer: --megatron-fsdp-main-grads-dtype (default auto = the model's parameter dtype:
  // bf16 with --bf16), which replaces --main-grads-dtype / --grad-reduce-in-bf16; the reduction runs in it unless
  // --megatron-fsdp-grad-comm-dtype says otherwise (auto = the main gradient dtype).
  const bool bf16 = given("--bf16"), fp16 = given("--fp16");
  auto dtype_bytes = [&](const std::string& t) -> int {
    if (t == "fp32") return 4;
    if (t == "bf16" || t == "fp16") return 2;
    if (t == "auto") return bf16 || fp16 ? 2 : 4;
    return 0;
  };
  const auto grads = text("--megatron-fsdp-main-grads-dtype").value_or("auto");
  const int gb = dtype_bytes(grads);
  const auto comm = text("--megatron-fsdp-grad-comm-dtype");
  for (const char* f : {"--megatron-fsdp-grad-comm-dtype", "--megatron-fsdp-main-params-dtype"})
    if (auto t = text(f); t && dtype_bytes(*t) == 0) {
      bad(*get(f), "Megatron-LM's choices are fp32, bf16, fp16 and auto");
      return;
    }
  // Typed among gpuplan's flags without --bf16/--fp16, auto follows gpuplan's --precision, whose default gradient
  // bytes are already the parameters' (2 with 16-bit training): nothing to set, and a reduction dtype cannot be
  // compared with a buffer dtype not given.
  const bool follow_precision = !a_.whole_command && !bf16 && !fp16 && !given("--megatron-fsdp-main-grads-dtype");
  if (gb == 0) {
    bad(*get("--megatron-fsdp-main-grads-dtype"), "Megatron-LM's choices are fp32, bf16, fp16 and auto");
  } else if (follow_precision) {
    if (comm && *comm != "auto")
      bad(*get("--megatron-fsdp-grad-comm-dtype"),
          "give --bf16, --fp16 or --megatron-fsdp-main-grads-dtype with it: the gradient buffer's dtype decides whether "
          "the reduction differs from it");
  } else {
    reset("gradient_bytes", gb,
          given("--megatron-fsdp-main-grads-dtype")
              ? as_typed(*get("--megatron-fsdp-main-grads-dtype"))
              : fmt::format("{} (Megatron-FSDP's gradient buffer: --megatron-fsdp-main-grads-dtype auto = the "
                            "parameters' dtype, {})",
                            on.name, bf16 ? "bf16" : fp16 ? "fp16" : "fp32"));
    if (comm && *comm != "auto" && dtype_bytes(*comm) != gb)
      refuse(*get("--megatron-fsdp-grad-comm-dtype"),
             "a gradient reduction in another dtype than the gradient buffer's is");
  }
  if (auto p = text("--megatron-fsdp-main-params-dtype"); p && *p != "fp32")
    refuse(*get("--megatron-fsdp-main-params-dtype"), "main weights that are not fp32 are");
  // NCCL user buffers and the double buffer (megatron_fsdp.py MegatronFSDP: nccl_ub "uses less number of SMs",
  // fsdp_double_buffer "persistently allocated double buffers"; arguments.py turns both fsdp_double_buffer and
  // fsdp_manual_registration on with --use-nccl-ub).
  if (given("--fsdp-manual-registration") && !given("--use-nccl-ub"))
    bad(*get("--fsdp-manual-registration"), "Megatron-LM takes it only with --use-nccl-ub");
  if (given("--use-nccl-ub"))
    m_.notes.push_back(
        "--use-nccl-ub: accepted, not priced apart: NCCL user-buffer registration of Megatron-FSDP's buffers "
        "(megatron_fsdp.py: \"uses less number of SMs, resulting better overlapped computation\") lowers the SMs its "
        "all-gathers and reduce-scatters take from the GEMMs beside them; gpuplan prices that share as calibrated for "
        "NCCL's own kernels (the \"beside compute\" term of the DP row), an upper bound here. Megatron-LM turns "
        "--fsdp-double-buffer and --fsdp-manual-registration on with it");
  if (given("--fsdp-manual-registration"))
    m_.assumed.push_back("--fsdp-manual-registration (how --use-nccl-ub registers the buffers; no cost of its own)");
  if ((given("--fsdp-double-buffer") || given("--use-nccl-ub")) && zero >= 2)
    m_.notes.push_back(fmt::format(
        "{}: Megatron-FSDP keeps two persistent buffers of a decoder layer for its parameter all-gathers (priced: "
        "the layer in use and the one prefetched) and two for its gradient reduce-scatters "
        "(param_and_grad_buffer.py FixedPoolAllocator, size 2); gpuplan holds one layer's unsharded gradient, so "
        "the peak is about one layer's parameters × the gradient bytes ({} B) above the price",
        given("--fsdp-double-buffer") ? "--fsdp-double-buffer" : "--use-nccl-ub", gb));
  else if (given("--fsdp-double-buffer"))
    m_.assumed.push_back("--fsdp-double-buffer (no gathered or unsharded buffers below optim_grads)");
}

// Megatron-Core's partial distributed optimizer and Megatron-FSDP's HSDP (Megatron-LM d98e8a64ddf3):
// --num-distributed-optimizer-instances N (arguments.py, default 1) cuts the dp·cp ranks into N instances of dp·cp/N
// consecutive ranks (megatron/core/parallel_state.py, intra_partial_data_parallel_size: "Data parallel size should be
// divisible by partial DistOpt shard factor"). The distributed optimizer shards its states inside an instance and keeps
// N copies ("Partial DistOpt cannot be used without DistOpt", distributed/distributed_data_parallel.py); gradients are
// reduce-scattered inside the instance and the shard all-reduced across the instances, weights gathered inside it
// (param_and_grad_buffer.py start_grad_sync / start_param_sync). Megatron-FSDP runs HSDP with N > 1
// (fsdp/mcore_fsdp_adapter.py _init_dist_index): its sharding strategy applies inside the instance, and the outer group
// replicates (--outer-dp-sharding-strategy no_shard, the default) or also shards the optimizer states over all dp·cp
// ranks (optim, "HFSDP"). gpuplan: shard_group = dp·cp / N, set by apply_megatron once the GPU count is known; one
// shard group serves all model states, so HFSDP is refused.
void Mapper::optimizer_instances() {
  const MegatronFlag* f = get("--num-distributed-optimizer-instances");
  const MegatronFlag* outer_f = get("--outer-dp-sharding-strategy");
  const auto outer = text("--outer-dp-sharding-strategy");
  if (outer && *outer != "no_shard" && *outer != "optim") {
    bad(*outer_f, "Megatron-LM's choices are no_shard and optim");
    return;
  }
  const bool fsdp = given("--use-megatron-fsdp");
  std::optional<long long> n;
  if (f != nullptr) {
    n = integer("--num-distributed-optimizer-instances");
    if (!n) return;  // integer() said why
  }
  const bool hybrid = n && *n > 1;
  if (hybrid && !fsdp && !given("--use-distributed-optimizer")) {
    bad(*f, "Megatron-LM runs several optimizer instances only with the distributed optimizer "
            "(--use-distributed-optimizer or --use-megatron-fsdp; distributed_data_parallel.py: \"Partial DistOpt "
            "cannot be used without DistOpt\")");
    return;
  }
  if (hybrid) {
    m_.optimizer_instances = *n;
    m_.optimizer_instances_flag = as_typed(*f);
    m_.optimizer_instances_source = a_.source;
    m_.optimizer_instances_line = f->line != 0 ? f->line : (f->values.empty() ? 0 : f->values.front().line);
  } else if (f != nullptr) {
    m_.assumed.push_back(as_typed(*f) + " (one instance: the optimizer sharded over all dp·cp ranks)");
  }
  if (outer) {
    const auto strategy = text("--data-parallel-sharding-strategy").value_or("optim_grads_params");
    if (*outer == "no_shard")
      m_.assumed.push_back(as_typed(*outer_f) + " (the instances replicate the model states: Megatron-LM's default)");
    else if (!fsdp || !hybrid)
      m_.ignored.push_back(as_typed(*outer_f) +
                           " (read only with --use-megatron-fsdp and --num-distributed-optimizer-instances > 1)");
    else if (strategy != "optim_grads_params")
      bad(*outer_f, "Megatron-FSDP shards the optimizer over the outer group only with --data-parallel-sharding-strategy "
                    "optim_grads_params (arguments.py)");
    else
      refuse(*outer_f, "HFSDP (the optimizer states sharded over all dp·cp ranks, the gradients and weights inside "
                       "each of the instances; param_and_grad_buffer.py reduce-scatters across the outer group) needs "
                       "two shard groups, where gpuplan's plan has one for all model states: it is");
  }
  // --keep-fp8-transpose-cache (megatron_fsdp.py at d98e8a64: without it, a forward hook discards the FP8 transpose
  // of each Float8Tensor parameter after the layer's forward, registered only under optim_grads_params; with it, every
  // layer's transpose stays until its backward).
  if (const MegatronFlag* k = get("--keep-fp8-transpose-cache")) {
    const auto strategy = text("--data-parallel-sharding-strategy").value_or("optim_grads_params");
    if (!fsdp)
      m_.ignored.push_back("--keep-fp8-transpose-cache (read only with --use-megatron-fsdp)");
    else if (strategy != "optim_grads_params")
      m_.assumed.push_back("--keep-fp8-transpose-cache (Megatron-FSDP discards the transposes only under "
                           "optim_grads_params: nothing to keep)");
    else if (!m_.keys.contains("fp8_params"))
      m_.assumed.push_back("--keep-fp8-transpose-cache (the weights are not FP8 tensors without --fp8-param-gather: "
                           "megatron_fsdp.py discards only a Float8Tensor's transpose)");
    else
      refuse(*k, "keeping every layer's FP8 weight transpose from its forward to its backward (1 B per GEMM weight "
                 "of the stage's TP shard, where gpuplan's ZeRO 3 holds the gathered layers' only) is");
  }
}

// --no-gradient-accumulation-fusion (arguments.py, dest gradient_accumulation_fusion): each weight-gradient GEMM
// writes a fresh 16-bit gradient that the data-parallel wrapper then adds into its gradient buffer (Megatron-Core DDP's
// hook, param.main_grad.add_) or copies into its bucket (Megatron-FSDP's _grad_acc with sharded gradients,
// param.main_grad.copy_), where gpuplan prices the fused GEMM that accumulates in its epilogue (ops.hpp,
// accumulating_wgrad). The difference is streaming traffic of a few bytes per weight per micro-batch beside 6·T FLOPs
// per weight of GEMMs: data/validation/ANALYSIS.md (session 30) puts it at about 1% (bf16 gradient buffers) to 2% (fp32)
// of the step for 8192 tokens per micro-batch. Accepted with that note.
void Mapper::wgrad_fusion() {
  if (!given("--no-gradient-accumulation-fusion")) return;
  m_.notes.push_back(
      "--no-gradient-accumulation-fusion: accepted, not priced apart: each weight gradient is written as a 16-bit "
      "tensor and then added (Megatron-Core DDP) or copied (Megatron-FSDP) into the gradient buffer, where gpuplan "
      "prices the GEMM accumulating in its epilogue; a few bytes of streaming traffic per weight per micro-batch "
      "(data/validation/ANALYSIS.md, session 30: about 1% of the step with bf16 gradient buffers and 2% with fp32 ones "
      "at 8192 tokens per micro-batch, more for shorter ones)");
}

// --use-sharp (Megatron-LM d98e8a64 arguments.py / megatron/core/parallel_state.py initialize_model_parallel): NCCL
// CollNet with SHARP for the data-parallel groups: NCCL_COLLNET_ENABLE=1 while the dp and dp_cp groups are created
// (sharp_enabled_group "dp", the default) and unset after, so no other group uses it. --sharp-enabled-group
// dp_replica puts it on the inter-instance group of the partial distributed optimizer instead, which gpuplan's plan
// does not tell apart from the dp group: refused. "sharp_enabled_group is only valid when use_sharp is True".
void Mapper::dp_sharp() {
  const MegatronFlag* group_f = get("--sharp-enabled-group");
  const auto group = text("--sharp-enabled-group");
  if (group_f != nullptr && !given("--use-sharp")) {
    bad(*group_f, "Megatron-LM reads it only with --use-sharp (parallel_state.py: \"sharp_enabled_group is only valid "
                  "when use_sharp is True\")");
    return;
  }
  if (group && *group != "dp" && *group != "dp_replica") {
    bad(*group_f, "Megatron-LM's choices are dp and dp_replica");
    return;
  }
  if (group && *group == "dp_replica") {
    refuse(*group_f, "SHARP on the partial distributed optimizer's inter-instance group only (gpuplan's sharp applies "
                     "to the whole dp·cp group's reductions): it is");
    return;
  }
  if (given("--use-sharp")) set("sharp", true, "--use-sharp");
  else if (a_.whole_command) set_default("sharp", false, "no --use-sharp");
}

// --defer-embedding-wgrad-compute / --wgrad-deferral-limit N (Megatron-LM d98e8a64 arguments.py; the checks of
// megatron/core/model_parallel_config.py __post_init__): the last stage's LM-head weight-gradient GEMMs of the first
// N micro-batches (0: all) run in the pipeline flush. Megatron refuses it without pipeline parallelism, without
// gradient accumulation fusion, and with N < 0 (integer() asks N ≥ 0); arguments.py calls N "Invalid if
// defer-embedding-wgrad-compute is not set".
void Mapper::deferred_head_wgrad() {
  const MegatronFlag* f = get("--defer-embedding-wgrad-compute");
  const MegatronFlag* limit_f = get("--wgrad-deferral-limit");
  std::optional<long long> limit;
  if (limit_f != nullptr) {
    // Megatron-Core: "Wgrad deferral limit should be greater than or equal to 0 when it is enabled!".
    limit = integer("--wgrad-deferral-limit", 0);
    if (!limit) return;  // integer() said why
    if (f == nullptr) {
      bad(*limit_f, "Megatron-LM reads it only with --defer-embedding-wgrad-compute (arguments.py: \"Invalid if "
                    "`defer-embedding-wgrad-compute` is not set\")");
      return;
    }
  }
  if (f == nullptr) {
    if (a_.whole_command) set_default("defer_embedding_wgrad", false, "no --defer-embedding-wgrad-compute");
    return;
  }
  const auto pp = m_.keys.contains("pp") ? std::optional<long long>(m_.keys["pp"].get<long long>())
                                         : (a_.whole_command ? std::optional<long long>(1) : std::nullopt);
  if (pp && *pp == 1) {
    bad(*f, "Megatron-Core: \"Cannot defer embedding wgrad compute when pipeline model parallel is not used\" "
            "(model_parallel_config.py)");
    return;
  }
  if (given("--no-gradient-accumulation-fusion")) {
    bad(*f, "Megatron-Core: \"Cannot defer embedding wgrad compute when gradient accumulation fusion is not used\" "
            "(model_parallel_config.py)");
    return;
  }
  set("defer_embedding_wgrad", true, "--defer-embedding-wgrad-compute");
  if (limit && *limit > 0) set("wgrad_deferral_limit", *limit, "--wgrad-deferral-limit");
}

}  // namespace gpuplan::cli::detail
