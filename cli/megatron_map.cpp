// Megatron-LM flags mapped to gpuplan's scenario keys (megatron_args.hpp, map_megatron): the flags that do not
// change what gpuplan models (ignored), the ones that state its assumptions, and the refusals; the mapper's run
// (megatron_mapper.hpp; the plan's keys in megatron_map_plan.cpp, the model's layers in megatron_map_layers.cpp).
#include "megatron_mapper.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

namespace gpuplan::cli {

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
    "--nccl-communicator-config-path", "--ddp-num-buckets", "--ddp-average-in-collective",
    "--ddp-pad-buckets-for-high-nccl-busbw", "--no-align-param-gather", "--disable-align-grad-reduce",
    "--no-align-grad-reduce", "--suggested-communication-unit-size", "--tp-comm-overlap-cfg",
    "--tp-comm-bootstrap-backend", "--enable-experimental", "--use-precision-aware-optimizer", "--moe-layer-freq",
    "--qk-layernorm", "--mtp-loss-scaling-factor", "--cache-mla-latents", "--no-load-optim", "--no-load-rng"};

/// Flags that state what gpuplan already assumes: fused kernels (Transformer Engine, Megatron's fusions), grouped
/// expert GEMMs, fp32 softmax.
const std::map<std::string_view, std::string_view> kAssumed{
    {"--moe-permute-fusion", "fused kernels"},
    {"--fused-residual-rmsnorm", "fused kernels"},
    {"--use-te-activation-func", "fused kernels"},
    {"--moe-grouped-gemm", "the experts priced as grouped GEMMs"},
    {"--moe-router-force-load-balancing", "balanced routing, gpuplan's default"},
    {"--attention-softmax-in-fp32", "fused attention"},
    {"--moe-router-dtype", "the router's small kernels priced over fp32 scores"},
    {"--moe-router-padding-for-fp8", "the router's cost is not priced apart"},
    {"--moe-router-padding-for-quantization", "the router's cost is not priced apart"}};

/// Flags that change performance in a way gpuplan does not price, with what they do (read at Megatron-LM
/// d98e8a64 and Transformer Engine 2.8 40c69e75): refused with that reason rather than the bare rule.
const std::map<std::string_view, std::string_view> kRefusedWhy{
    {"--use-transformer-engine-op-fuser",
     "Transformer Engine's operation fuser (Megatron-LM extensions/transformer_engine.py TEFusedMLP: the MLP as one "
     "te.ops.Sequential of norm, fc1, activation, fc2 and the TP reduce-scatter) writes the activation's output "
     "already quantised for fc2 and its backward's gradient already quantised for fc1 (TE 2.8 "
     "pytorch/csrc/extensions/activation.cpp: fully fused for delayed scaling and MXFP8, the amax fused for current "
     "scaling and NVFP4), where gpuplan prices Megatron's module path (TELayerNormColumnParallelLinear, the fused "
     "SwiGLU, TERowParallelLinear quantising its own input): the quantisation passes it removes are"}};

/// Flags read as model shape (checked against -m MODEL) or as plan keys by map_megatron below.
const std::set<std::string_view> kHandled{
    "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "--context-parallel-size",
    "--expert-model-parallel-size", "--expert-tensor-parallel-size", "--num-layers-per-virtual-pipeline-stage",
    "--num-virtual-stages-per-pipeline-rank", "--sequence-parallel", "--micro-batch-size", "--global-batch-size",
    "--seq-length", "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather", "--ddp-bucket-size",
    "--tp-comm-overlap", "--recompute-granularity", "--recompute-method", "--recompute-num-layers",
    "--recompute-modules", "--recompute-activations", "--fp8-format", "--fp8-recipe", "--fp8-param-gather",
    "--fp8-dot-product-attention",
    "--fp4-format", "--fp4-recipe", "--bf16", "--fp16", "--account-for-embedding-in-pipeline-split",
    "--account-for-loss-in-pipeline-split", "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
    "--pipeline-model-parallel-layout", "--mtp-num-layers", "--moe-token-dispatcher-type", "--moe-enable-deepep",
    "--moe-flex-dispatcher-backend", "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute",
    "--moe-expert-capacity-factor", "--moe-pad-expert-input-to-capacity", "--cpu-offloading-num-layers",
    "--use-flash-attn", "--attention-backend", "--transformer-impl", "--no-masked-softmax-fusion", "--attention-dropout", "--hidden-dropout",
    "--optimizer", "--optimizer-cpu-offload", "--optimizer-offload-fraction", "--exp-avg-dtype", "--exp-avg-sq-dtype",
    "--main-grads-dtype", "--main-params-dtype", "--accumulate-allreduce-grads-in-fp32", "--grad-reduce-in-bf16",
    "--cp-comm-type", "--no-overlap-p2p-communication", "--make-vocab-size-divisible-by",
    "--enable-cuda-graph", "--external-cuda-graph", "--cuda-graph-scope", "--moe-router-fusion",
    // Megatron-FSDP and the data-parallel buffers (megatron_map_plan.cpp, megatron_fsdp and wgrad_fusion)
    "--use-megatron-fsdp", "--data-parallel-sharding-strategy", "--megatron-fsdp-main-grads-dtype",
    "--megatron-fsdp-main-params-dtype", "--megatron-fsdp-grad-comm-dtype", "--use-nccl-ub", "--fsdp-double-buffer",
    "--fsdp-manual-registration", "--no-gradient-accumulation-fusion", "--num-distributed-optimizer-instances",
    "--outer-dp-sharding-strategy", "--keep-fp8-transpose-cache",
    // SHARP and the deferred LM-head wgrad (megatron_map_plan.cpp, dp_sharp and deferred_head_wgrad)
    "--use-sharp", "--sharp-enabled-group", "--defer-embedding-wgrad-compute", "--wgrad-deferral-limit",
    // document masks: noted, not ignored (megatron_map_layers.cpp, attention)
    "--dataloader-inter-document-masking", "--sft", "--reset-attention-mask",
    // model shape
    "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--group-query-attention",
    "--num-query-groups", "--kv-channels", "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size",
    "--moe-shared-expert-intermediate-size", "--vocab-size", "--padded-vocab-size", "--swiglu",
    "--untie-embeddings-and-output-weights", "--max-position-embeddings", "--normalization",
    "--position-embedding-type",
    "--use-rotary-position-embeddings", "--disable-bias-linear", "--add-qkv-bias", "--multi-latent-attention",
    "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim", "--qk-pos-emb-head-dim", "--v-head-dim"};

}  // namespace

namespace detail {

std::string as_typed(const MegatronFlag& f) {
  std::string s = f.name;
  for (const auto& v : f.values) s += " " + v.text;
  return s;
}

std::optional<MegatronMapping> Mapper::run() {
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
          m_.notes.push_back(fmt::format("{} uses {} ({}; ignored anyway)", f.name, u,
                                         u.rfind("$((", 0) == 0 ? "not evaluated" : "unset"));
    } else if (auto it = kAssumed.find(f.name); it != kAssumed.end()) {
      m_.assumed.push_back(fmt::format("{} ({})", f.name, it->second));
    } else if (auto why = kRefusedWhy.find(f.name); why != kRefusedWhy.end()) {
      refuse(f, std::string(why->second));
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
  megatron_fsdp();
  optimizer_instances();
  wgrad_fusion();
  dp_sharp();
  deferred_head_wgrad();
  shape();
  if (diags_.has_errors()) return std::nullopt;
  return m_;
}

}  // namespace detail

std::optional<MegatronMapping> map_megatron(const MegatronArgs& args, Diagnostics& diags) {
  Diagnostics local;
  auto m = detail::Mapper(args, local).run();
  diags.append(local);
  return m;
}

}  // namespace gpuplan::cli
