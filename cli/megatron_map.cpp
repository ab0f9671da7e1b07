// Megatron-LM flags mapped to gpuplan's scenario keys (megatron_args.hpp, map_megatron): the flags that do not
// change what gpuplan models (ignored), the ones that state its assumptions, and the refusals.
#include "megatron_args.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

namespace gpuplan::cli {

using detail::kNotModelled;

// ---------------------------------------------------------------------------------------------------------------
// Flags -> scenario keys
namespace {

/// Argument groups whose flags never change the step time or memory gpuplan models: checkpointing, logging,
/// tokenizer, data, learning-rate schedule, seeds and initialization, evaluation, fault tolerance, profiling, and
/// the optimizer's hyperparameters (the regularization group: weight decay, clipping, Adam's betas).
const std::set<std::string_view> kIgnoredGroups{
    "CheckpointConfig",        "_add_checkpointing_args",      "LoggerConfig",
    "_add_logging_args",       "TokenizerConfig",              "_add_tokenizer_args",
    "_add_data_args",          "SchedulerConfig",              "_add_learning_rate_args",
    "RNGConfig",               "_add_initialization_args",     "ValidationConfig",
    "_add_validation_args",    "StragglerDetectionConfig",     "RerunStateMachineConfig",
    "FaultInjectorConfig",     "_add_one_logger_args",         "_add_ft_package_args",
    "_add_inprocess_restart_args", "_add_msc_args",            "_add_autoresume_args",
    "_add_workload_inspector_server_args", "ProfilingConfig",  "_add_regularization_args",
    "_add_inference_args",     "_add_sft_args"};

/// Single flags of other groups that do not change what gpuplan models (numerics, initialization, loss scaling,
/// router losses, bucket sizes, timeouts, process-group bookkeeping).
const std::set<std::string_view> kIgnoredNames{
    "--use-mcore-models", "--init-method-std", "--embedding-init-method-std", "--norm-epsilon",
    "--apply-layernorm-1p", "--apply-query-key-layer-scaling", "--apply-residual-connection-post-layernorm",
    "--calculate-per-token-loss", "--config-logger-dir", "--fp8-amax-history-len", "--fp8-amax-compute-algo",
    "--fp8-margin", "--fp8-interval", "--moe-router-load-balancing-type", "--moe-aux-loss-coeff",
    "--moe-z-loss-coeff", "--moe-input-jitter-eps", "--moe-router-topk-scaling-factor", "--moe-router-score-function",
    "--moe-router-enable-expert-bias", "--moe-router-bias-update-rate", "--moe-router-pre-softmax",
    "--moe-per-layer-logging", "--moe-router-num-groups", "--moe-router-group-topk", "--rotary-interleaved",
    "--use-cpu-initialization", "--no-initialization", "--init-model-with-meta-device", "--rotary-base",
    "--rotary-percent", "--rotary-seq-len-interpolation-factor", "--use-rope-scaling", "--rope-scaling-factor",
    "--rotary-scaling-factor", "--mscale", "--mscale-all-dim", "--yarn-original-max-position-embeddings",
    "--yarn-beta-fast", "--yarn-beta-slow", "--yarn-correction-range-round-to-int",
    "--no-yarn-correction-range-round-to-int", "--onnx-safe",
    "--no-position-embedding", "--manual-gc", "--manual-gc-interval", "--no-manual-gc-eval", "--disable-manual-gc-eval",
    "--empty-unused-memory-level", "--exit-duration-in-mins", "--exit-interval", "--exit-signal",
    "--exit-signal-handler", "--exit-signal-handler-for-dataloader", "--exit-signal-handler-for-training",
    "--train-iters", "--train-samples", "--train-sync-interval", "--check-weight-hash-across-dp-replicas-interval",
    "--gpu-sniff-test-interval", "--iterations-to-skip", "--dataloader-type", "--no-check-for-nan-in-loss-and-grad",
    "--check-for-large-grads", "--result-rejected-tracker-filename", "--dump-param-to-param-group-map",
    "--hysteresis", "--initial-loss-scale", "--loss-scale", "--loss-scale-window", "--min-loss-scale",
    "--fp16-lm-cross-entropy", "--distributed-backend", "--distributed-timeout-minutes",
    "--distributed-timeout-seconds-after-init", "--local-rank", "--lazy-mpu-init", "--disable-gloo-process-groups",
    "--flight-recorder-dump-path", "--flight-recorder-include-stack-trace", "--flight-recorder-trace-buffer-size",
    "--disable-flight-recorder-dump-on-timeout", "--no-flight-recorder-dump-on-timeout",
    "--disable-flight-recorder-extra-dump-on-exec", "--no-flight-recorder-extra-dump-on-exec",
    "--disable-flight-recorder-include-only-active", "--no-flight-recorder-include-only-active",
    "--nccl-communicator-config-path", "--ddp-bucket-size", "--ddp-num-buckets", "--ddp-average-in-collective",
    "--ddp-pad-buckets-for-high-nccl-busbw", "--no-align-param-gather", "--disable-align-grad-reduce",
    "--no-align-grad-reduce", "--suggested-communication-unit-size", "--tp-comm-overlap-cfg",
    "--tp-comm-bootstrap-backend", "--enable-experimental", "--use-precision-aware-optimizer", "--moe-layer-freq",
    "--qk-layernorm", "--mtp-loss-scaling-factor", "--cache-mla-latents", "--no-load-optim", "--no-load-rng"};

/// Flags that state what gpuplan already assumes: fused kernels (Transformer Engine, Megatron's fusions), grouped
/// expert GEMMs, fp32 softmax.
const std::map<std::string_view, std::string_view> kAssumed{
    {"--moe-permute-fusion", "fused kernels"},
    {"--moe-router-fusion", "fused kernels"},
    {"--fused-residual-rmsnorm", "fused kernels"},
    {"--use-te-activation-func", "fused kernels"},
    {"--moe-grouped-gemm", "the experts priced as grouped GEMMs"},
    {"--moe-router-force-load-balancing", "balanced routing, gpuplan's default"},
    {"--attention-softmax-in-fp32", "fused attention"},
    {"--moe-router-dtype", "the router's cost is not priced apart"},
    {"--moe-router-padding-for-fp8", "the router's cost is not priced apart"},
    {"--moe-router-padding-for-quantization", "the router's cost is not priced apart"}};

/// Flags read as model shape (checked against -m MODEL) or as plan keys by map_megatron below.
const std::set<std::string_view> kHandled{
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "--context-parallel-size",
    "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--num-layers-per-virtual-pipeline-stage",
    "--num-virtual-stages-per-pipeline-rank", "--sequence-parallel", "--micro-batch-size", "--global-batch-size",
    "--seq-length", "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather",
    "--tp-comm-overlap", "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
    "--recompute-modules", "--recompute-activations", "--fp8-format", "--fp8-recipe", "--fp8-param-gather",
    "--fp4-format", "--fp4-recipe", "--bf16", "--fp16", "--account-for-embedding-in-pipeline-split",
    "--account-for-loss-in-pipeline-split", "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
    "--pipeline-model-parallel-layout", "--mtp-num-layers", "--moe-token-dispatcher-type", "--moe-enable-deepep",
    "--moe-flex-dispatcher-backend", "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute",
    "--moe-expert-capacity-factor", "--moe-pad-expert-input-to-capacity", "--cpu-offloading-num-layers",
    "--use-flash-attn", "--attention-backend", "--transformer-impl", "--attention-dropout", "--hidden-dropout",
    "--optimizer", "--optimizer-cpu-offload", "--optimizer-offload-fraction", "--exp-avg-dtype", "--exp-avg-sq-dtype",
    "--main-grads-dtype", "--main-params-dtype", "--accumulate-allreduce-grads-in-fp32", "--grad-reduce-in-bf16",
    "--cp-comm-type", "--no-overlap-p2p-communication", "--make-vocab-size-divisible-by",
    // model shape
    "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--group-query-attention",
    "--num-query-groups", "--kv-channels", "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size",
    "--moe-shared-expert-intermediate-size", "--vocab-size", "--padded-vocab-size", "--swiglu",
    "--untie-embeddings-and-output-weights", "--max-position-embeddings", "--normalization",
    "--position-embedding-type",
    "--use-rotary-position-embeddings", "--disable-bias-linear", "--add-qkv-bias", "--multi-latent-attention",
    "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim"};

std::string as_typed(const MegatronFlag& f) {
  std::string s = f.name;
  for (const auto& v : f.values) s += " " + v.text;
  return s;
}

class Mapper {
 public:
  Mapper(const MegatronArgs& a, Diagnostics& d) : a_(a), diags_(d) {
    for (const auto& f : a.flags) last_[f.name] = &f;
  }

  std::optional<MegatronMapping> run() {
    m_.launcher_gpus = a_.launcher_gpus;
    m_.launcher_text = a_.launcher_text;
    std::set<std::string> seen;
    for (const auto& f : a_.flags) {
      if (!seen.insert(f.name).second) continue;
      const MegatronFlagName* e = find_megatron_flag(f.name);
      if (kHandled.count(f.name)) continue;
      if (kIgnoredNames.count(f.name) || (e != nullptr && kIgnoredGroups.count(e->group))) {
        m_.ignored.push_back(f.name);
        for (const auto& v : f.values)
          for (const auto& u : v.unresolved)
            m_.notes.push_back(fmt::format("{} uses {} (unset; ignored anyway)", f.name, u));
      } else if (auto it = kAssumed.find(f.name); it != kAssumed.end()) {
        m_.assumed.push_back(fmt::format("{} ({})", f.name, it->second));
      } else {
        refuse(f, "changes performance, and that is");
      }
    }
    parallel();
    batch();
    precision();
    recompute();
    pipeline_split();
    moe();
    attention();
    optimizer();
    shape();
    if (diags_.has_errors()) return std::nullopt;
    return m_;
  }

 private:
  const MegatronFlag* get(const char* name) const {
    auto it = last_.find(name);
    return it == last_.end() ? nullptr : it->second;
  }
  Diagnostic at(const MegatronFlag& f, std::string msg) const {
    const int line = f.values.empty() ? 0 : f.values.front().line;
    return Diagnostic{Severity::error, a_.source, f.name, line, 0, std::move(msg)};
  }
  void refuse(const MegatronFlag& f, const std::string& why) {
    diags_.add(at(f, fmt::format("'{}': {} {}", as_typed(f), why, kNotModelled)));
  }
  void bad(const MegatronFlag& f, const std::string& why) {
    diags_.add(at(f, fmt::format("'{}': {}", as_typed(f), why)));
  }

  /// The single value of `f`, refused when it uses a variable the script does not set.
  std::optional<std::string> value(const MegatronFlag& f) {
    if (f.values.empty()) return std::string();
    if (!f.values.front().unresolved.empty()) {
      bad(f, fmt::format("uses {}, which the script does not set", f.values.front().unresolved.front()));
      return std::nullopt;
    }
    return f.values.front().text;
  }
  std::optional<long long> integer(const char* name, long long lo = 1) {
    const MegatronFlag* f = get(name);
    if (f == nullptr) return std::nullopt;
    auto v = value(*f);
    if (!v) return std::nullopt;
    long long n = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || p != v->data() + v->size() || n < lo) {
      bad(*f, fmt::format("expected an integer ≥ {}", lo));
      return std::nullopt;
    }
    return n;
  }
  std::optional<std::string> text(const char* name) {
    const MegatronFlag* f = get(name);
    if (f == nullptr) return std::nullopt;
    return value(*f);
  }
  bool given(const char* name) const { return get(name) != nullptr; }
  template <class V>
  void set(const std::string& key, const V& v, const char* flag) {
    m_.keys[key] = v;
    m_.origin[key] = as_typed(*get(flag));
  }
  template <class V>
  void set_default(const std::string& key, const V& v, const std::string& why) {
    m_.keys[key] = v;
    m_.origin[key] = "--megatron-args (" + why + ")";
    m_.defaulted[key] = why;
  }

  void parallel() {
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
    if (given("--sequence-parallel")) set("sequence_parallel", true, "--sequence-parallel");
    else if (a_.whole_command) set_default("sequence_parallel", false, "no --sequence-parallel");
    if (given("--use-distributed-optimizer")) set("zero", 1, "--use-distributed-optimizer");
    else if (a_.whole_command) set_default("zero", 0, "no --use-distributed-optimizer");
    auto onoff = [&](const char* flag, const char* key) {
      if (given(flag)) set(key, true, flag);
      else if (a_.whole_command) set_default(key, false, fmt::format("no {}", flag));
    };
    onoff("--overlap-grad-reduce", "overlap_grad_reduce");
    onoff("--overlap-param-gather", "overlap_param_gather");
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
    if (auto t = text("--cp-comm-type"); t && *t != "p2p")
      refuse(*get("--cp-comm-type"), "gpuplan prices context parallelism as Megatron's p2p ring; another type is");
  }

  void batch() {
    if (auto v = integer("--micro-batch-size")) set("micro_batch", *v, "--micro-batch-size");
    if (auto v = integer("--global-batch-size")) {
      set("global_batch", *v, "--global-batch-size");
      m_.global_batch_given = true;
    }
    if (auto v = integer("--seq-length")) set("seq", *v, "--seq-length");
  }

  void precision() {
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
        refuse(*get("--fp4-recipe"), "gpuplan prices FP4 as NVFP4 (E4M3 scales per 16 elements); this recipe is");
      else if (!bf16)
        refuse(*get("--fp4-format"), fp16 ? "FP4 GEMMs inside fp16 training are" : "FP4 GEMMs inside fp32 training are");
      else set("precision", "fp4", "--fp4-format");
    } else if (fp8) {
      if (*fp8 != "e4m3" && *fp8 != "hybrid") bad(*get("--fp8-format"), "expected e4m3 or hybrid");
      // TransformerConfig fp8_recipe: delayed (default), tensorwise, mxfp8, blockwise (wl::QuantRecipe).
      const auto recipe = text("--fp8-recipe").value_or("delayed");
      if (recipe != "delayed" && recipe != "tensorwise" && recipe != "mxfp8" && recipe != "blockwise")
        refuse(*get("--fp8-recipe"), "gpuplan prices the delayed, tensorwise, mxfp8 and blockwise recipes; this one is");
      else if (recipe != "delayed")
        set("fp8_recipe", recipe, "--fp8-recipe");
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
    if (given("--fp8-recipe") && !fp8) m_.ignored.push_back("--fp8-recipe");
    if (given("--fp4-recipe") && !given("--fp4-format")) m_.ignored.push_back("--fp4-recipe");
    if (given("--fp8-param-gather")) {
      if (fp8) set("fp8_params", true, "--fp8-param-gather");
      else m_.ignored.push_back("--fp8-param-gather");
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

  void recompute() {
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

  void pipeline_split() {
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

  void moe() {
    const long long ep = m_.keys.contains("ep") ? m_.keys["ep"].get<long long>() : 1;
    auto disp = text("--moe-token-dispatcher-type");
    if (disp && *disp != "alltoall" && *disp != "allgather" && *disp != "flex")
      bad(*get("--moe-token-dispatcher-type"), "expected allgather, alltoall or flex");
    if (ep > 1) {
      if (!disp) {
        if (a_.whole_command)
          diags_.add(Diagnostic{Severity::error, a_.source, "--moe-token-dispatcher-type", 0, 0,
                                fmt::format("absent with --expert-model-parallel-size {}: Megatron-LM then dispatches "
                                            "tokens by all-gather, which gpuplan does not price (it prices the "
                                            "all-to-all dispatcher; give --moe-token-dispatcher-type alltoall): {}",
                                            ep, kNotModelled)});
      } else if (*disp == "allgather") {
        refuse(*get("--moe-token-dispatcher-type"),
               "gpuplan prices the all-to-all dispatcher; the all-gather one with expert parallelism is");
      } else if (*disp == "flex") {
        // The flex dispatcher runs DeepEP's kernels (--moe-enable-deepep, or --moe-flex-dispatcher-backend deepep,
        // Megatron-Core's default backend) or HybridEP's; gpuplan prices DeepEP's (wl::EpDispatch::deepep).
        auto backend = text("--moe-flex-dispatcher-backend");
        if (backend && *backend != "deepep")
          refuse(*get("--moe-flex-dispatcher-backend"),
                 fmt::format("gpuplan prices NCCL all-to-all and DeepEP; the '{}' backend of the flex dispatcher is",
                             *backend));
        else set("ep_dispatch", "deepep", "--moe-token-dispatcher-type");
      }
      if (given("--moe-enable-deepep") && (!disp || *disp != "flex"))
        bad(*get("--moe-enable-deepep"), "Megatron-Core: 'DeepEP backend is only supported with flex token dispatcher.'");
      // TransformerConfig overlap_moe_expert_parallel_comm (the combined 1F1B schedule) with delay_wgrad_compute.
      if (given("--overlap-moe-expert-parallel-comm")) {
        set("ep_a2a_overlap", true, "--overlap-moe-expert-parallel-comm");
        if (!given("--delay-wgrad-compute"))
          m_.notes.push_back("--overlap-moe-expert-parallel-comm without --delay-wgrad-compute: gpuplan hides the "
                             "all-to-all behind the whole partner pass, as with the delayed weight gradients");
      }
      capacity();
    } else {
      for (const char* f : {"--moe-token-dispatcher-type", "--moe-enable-deepep", "--moe-flex-dispatcher-backend",
                            "--overlap-moe-expert-parallel-comm"})
        if (given(f)) m_.ignored.push_back(fmt::format("{} (no expert parallelism)", f));
    }
    if (ep > 1 && given("--moe-flex-dispatcher-backend") && (!disp || *disp != "flex"))
      m_.ignored.push_back("--moe-flex-dispatcher-backend (not the flex dispatcher)");
  }

  /// --moe-expert-capacity-factor f with --moe-pad-expert-input-to-capacity (Megatron-Bridge's apply_moe_token_drop:
  /// f = 1 with padding): every expert receives exactly its capacity, f·k·T/E tokens (moe_utils.py
  /// get_capacity; the dispatcher pads to it), so the busiest rank carries f times the balanced mean: moe_imbalance f.
  /// Without padding the drop only caps the load; gpuplan's balanced routing stands.
  void capacity() {
    const MegatronFlag* cf = get("--moe-expert-capacity-factor");
    if (cf == nullptr) {
      if (given("--moe-pad-expert-input-to-capacity"))
        bad(*get("--moe-pad-expert-input-to-capacity"), "Megatron-LM needs --moe-expert-capacity-factor with it");
      return;
    }
    auto v = value(*cf);
    if (!v) return;
    double f = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), f);
    if (ec != std::errc() || p != v->data() + v->size()) {
      bad(*cf, "expected a number");
      return;
    }
    if (f < 0) return;  // Megatron-LM: a negative factor means no capacity limit (dropless)
    if (given("--moe-pad-expert-input-to-capacity")) {
      if (f < 1.0) refuse(*cf, "a capacity below the balanced load (padded experts of fewer tokens than the mean) is");
      else set("moe_imbalance", f, "--moe-expert-capacity-factor");
    } else {
      m_.notes.push_back(fmt::format("--moe-expert-capacity-factor {} without padding: tokens over the capacity are "
                                     "dropped; gpuplan prices balanced routing",
                                     *v));
    }
  }

  void attention() {
    if (auto b = text("--attention-backend")) {
      if (*b == "flash" || *b == "fused" || *b == "auto") set("flash_attention", true, "--attention-backend");
      else if (*b == "unfused" || *b == "local") set("flash_attention", false, "--attention-backend");
      else bad(*get("--attention-backend"), "expected flash, fused, unfused, local or auto");
    } else if (given("--use-flash-attn")) {
      set("flash_attention", true, "--use-flash-attn");
    }
    if (auto t = text("--transformer-impl"); t && *t != "transformer_engine")
      refuse(*get("--transformer-impl"), "Megatron's local (non-Transformer-Engine) layers are");
    // Dropout: Megatron-LM's defaults are 0.1 for both (TransformerConfig).
    auto prob = [&](const char* flag) -> std::optional<double> {
      auto t = text(flag);
      if (!t) return std::nullopt;
      double v = 0;
      auto [p, ec] = std::from_chars(t->data(), t->data() + t->size(), v);
      if (ec != std::errc() || p != t->data() + t->size() || !(v >= 0 && v < 1)) {
        bad(*get(flag), "expected a probability from 0 to 1");
        return std::nullopt;
      }
      return v;
    };
    const auto att = prob("--attention-dropout"), hid = prob("--hidden-dropout");
    if (att || hid || a_.whole_command) {
      const bool on = att.value_or(0.1) > 0 || hid.value_or(0.1) > 0;
      if (att || hid) set("dropout", on, att ? "--attention-dropout" : "--hidden-dropout");
      else set_default("dropout", on, "no --attention-dropout/--hidden-dropout: Megatron-LM's 0.1");
      if (att && hid)
        m_.origin["dropout"] = as_typed(*get("--attention-dropout")) + " " + as_typed(*get("--hidden-dropout"));
    }
  }

  void optimizer() {
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
  }

  void shape() {
    auto& s = m_.shape;
    auto num = [&](const char* flag, std::optional<std::int64_t>& field, const char* key) {
      if (auto v = integer(flag)) {
        field = *v;
        s.flag[key] = as_typed(*get(flag));
      }
    };
    num("--num-layers", s.layers, "layers");
    num("--hidden-size", s.hidden, "hidden");
    num("--ffn-hidden-size", s.ffn, "ffn");
    num("--num-attention-heads", s.heads, "heads");
    num("--kv-channels", s.head_dim, "head_dim");
    num("--num-experts", s.experts, "experts");
    num("--moe-router-topk", s.topk, "topk");
    num("--moe-ffn-hidden-size", s.moe_ffn, "moe_ffn");
    num("--moe-shared-expert-intermediate-size", s.shared_ffn, "shared_ffn");
    num("--vocab-size", s.vocab, "vocab");
    num("--max-position-embeddings", s.max_position, "max_position");
    num("--q-lora-rank", s.q_lora_rank, "q_lora_rank");
    num("--kv-lora-rank", s.kv_lora_rank, "kv_lora_rank");
    num("--qk-head-dim", s.qk_head_dim, "qk_head_dim");
    num("--qk-pos-emb-head-dim", s.qk_pos_head_dim, "qk_pos_head_dim");
    num("--v-head-dim", s.v_head_dim, "v_head_dim");
    // tokenizer.py _vocab_size_with_padding: the vocabulary padded to a multiple of this × TP (default 128).
    if (auto v = integer("--make-vocab-size-divisible-by")) set("vocab_divisible_by", *v, "--make-vocab-size-divisible-by");
    else if (a_.whole_command) set_default("vocab_divisible_by", 128, "no --make-vocab-size-divisible-by: Megatron-LM's 128");
    if (given("--padded-vocab-size")) m_.ignored.push_back("--padded-vocab-size (the model file's vocabulary is used)");
    if (given("--group-query-attention")) {
      num("--num-query-groups", s.kv_heads, "kv_heads");
    } else if (given("--num-query-groups")) {
      m_.ignored.push_back("--num-query-groups (without --group-query-attention Megatron-LM ignores it)");
    } else if (a_.whole_command && s.heads) {
      s.kv_heads = s.heads;
      s.flag["kv_heads"] = "no --group-query-attention (one key/value head per query head)";
    }
    const bool whole = a_.whole_command;
    auto sw = [&](const char* flag, std::optional<bool>& field, const char* key, bool when_given, const char* absent) {
      if (given(flag)) {
        field = when_given;
        s.flag[key] = flag;
      } else if (whole) {
        field = !when_given;
        s.flag[key] = absent;
      }
    };
    sw("--swiglu", s.gated_mlp, "gated_mlp", true, "no --swiglu (a two-matrix GELU MLP)");
    sw("--untie-embeddings-and-output-weights", s.tied_embeddings, "tied_embeddings", false,
       "no --untie-embeddings-and-output-weights (tied embeddings)");
    sw("--disable-bias-linear", s.linear_bias, "linear_bias", false,
       "no --disable-bias-linear (biases on the linear layers)");
    sw("--multi-latent-attention", s.mla, "mla", true, "no --multi-latent-attention");
    if (given("--add-qkv-bias") || s.linear_bias) {
      s.qkv_bias = given("--add-qkv-bias") || s.linear_bias.value_or(false);
      s.flag["qkv_bias"] = given("--add-qkv-bias") ? "--add-qkv-bias" : s.flag["linear_bias"];
    }
    if (auto n = text("--normalization")) {
      if (*n == "RMSNorm" || *n == "LayerNorm") s.rmsnorm = *n == "RMSNorm";
      else refuse(*get("--normalization"), "this normalization is");
      s.flag["rmsnorm"] = as_typed(*get("--normalization"));
    } else if (whole) {
      s.rmsnorm = false;
      s.flag["rmsnorm"] = "no --normalization (LayerNorm)";
    }
    if (auto p = text("--position-embedding-type")) {
      if (*p == "rope" || *p == "yarn") s.position = wl::PositionKind::rope;
      else if (*p == "learned_absolute") s.position = wl::PositionKind::learned;
      else if (*p == "none") s.position = wl::PositionKind::none;
      else refuse(*get("--position-embedding-type"), "this position embedding is");
      s.flag["position"] = as_typed(*get("--position-embedding-type"));
    } else if (given("--use-rotary-position-embeddings")) {
      s.position = wl::PositionKind::rope;
      s.flag["position"] = "--use-rotary-position-embeddings";
    } else if (whole) {
      s.position = wl::PositionKind::learned;
      s.flag["position"] = "no --position-embedding-type (learned_absolute)";
    }
  }

  const MegatronArgs& a_;
  Diagnostics& diags_;
  std::map<std::string, const MegatronFlag*> last_;
  MegatronMapping m_;
};

}  // namespace

std::optional<MegatronMapping> map_megatron(const MegatronArgs& args, Diagnostics& diags) {
  Diagnostics local;
  auto m = Mapper(args, local).run();
  diags.append(local);
  return m;
}

}  // namespace gpuplan::cli
