#include "gpuplan/wl_io/scenario_io.hpp"

#include <charconv>
#include <string_view>

#include <fmt/format.h>

#include "gpuplan/wl/pipeline_layout.hpp"

namespace gpuplan::wl_io {

using json_io::FieldSpec;
using json_io::FieldTable;
using json_io::FieldType;
using json_io::Json;
using json_io::ObjectReader;
using json_io::Presence;

namespace {
FieldSpec f(std::string key, FieldType t, std::string doc, double min = 0, double max = 0, std::vector<std::string> choices = {}) {
  FieldSpec s;
  s.key = std::move(key);
  s.type = t;
  s.presence = Presence::optional;
  s.doc = std::move(doc);
  s.min = min;
  s.max = max;
  s.choices = std::move(choices);
  return s;
}
constexpr double kMaxGpus = 1e7;  // far beyond any cluster; catches typos and overflow
}  // namespace

const FieldTable& training_scenario_fields() {
  static const FieldTable t{
      f("model", FieldType::string, "library id or path to a model JSON / config.json"),
      f("gpu", FieldType::string, "GPU id or alias"),
      f("node", FieldType::string, "node id (sets the GPU and the links)"),
      f("cluster", FieldType::string, "cluster id (sets node and fabric)"),
      f("gpus", FieldType::integer, "total GPUs", 1, kMaxGpus),
      f("tp", FieldType::integer, "tensor parallel size", 1, 1024),
      f("pp", FieldType::integer, "pipeline parallel size", 1, 4096),
      f("dp", FieldType::integer, "data parallel size", 1, kMaxGpus),
      f("cp", FieldType::integer, "context parallel size", 1, 4096),
      f("ep", FieldType::integer, "expert parallel size", 1, 4096),
      f("etp", FieldType::integer,
        "expert tensor parallel size (MoE parallel folding, Megatron-Core expert_tensor_parallel_size; default: tp): "
        "etp·ep must divide tp·cp·dp",
        1, 1024),
      f("sequence_parallel", FieldType::boolean, "Megatron sequence parallelism"),
      f("virtual_stages", FieldType::integer, "interleaved pipeline chunks per stage", 1, 1024),
      f("schedule", FieldType::string,
        "pipeline schedule: 1f1b, interleaved, or dualpipe (DeepSeek-V3's bidirectional schedule, arXiv:2412.19437 "
        "§3.2.1: PP even, an even number of micro-batches, at least 2·PP)",
        0, 0, {"1f1b", "interleaved", "dualpipe"}),
      f("micro_batch", FieldType::integer, "sequences per micro-batch", 1, 1e6),
      f("global_batch", FieldType::integer, "sequences per optimizer step", 1, 1e9),
      f("seq", FieldType::integer, "sequence length (tokens)", 1, 1e8),
      f("precision", FieldType::string,
        "GEMM precision (fp8 with fp8_recipe; fp4 = NVFP4 training, Transformer Engine NVFP4BlockScaling, on GPUs "
        "with FP4 tensor cores)",
        0, 0, {"bf16", "fp16", "fp8", "fp4", "fp32", "tf32"}),
      f("fp8_recipe", FieldType::string,
        "FP8 scaling (Megatron-LM --fp8-recipe): delayed (per tensor, amax history; the default), tensorwise (per "
        "tensor, current amax), mxfp8 (E8M0 scale per 32 elements; needs block-scaled tensor cores), blockwise "
        "(1x128 / 128x128 tiles, DeepSeek-V3)",
        0, 0, {"delayed", "tensorwise", "mxfp8", "blockwise"}),
      f("gradient_bytes", FieldType::number, "bytes per gradient element", 1, 4),
      f("optimizer", FieldType::string, "optimizer", 0, 0, {"adamw", "adamw-8bit", "sgd"}),
      f("optimizer_states", FieldType::string,
        "storage of the optimizer's moment states (AdamW m, v; SGD momentum): fp32, or bf16 (DeepSeek-V3, NeMo "
        "optim.dtype bf16, Megatron --exp-avg-dtype bf16); adamw-8bit keeps its own 8-bit states",
        0, 0, {"fp32", "bf16"}),
      f("optimizer_impl", FieldType::string,
        "how the optimizer step runs: fused (one kernel: torch fused=True, Apex/Megatron/TE; the default), foreach "
        "(PyTorch's default on CUDA: one multi-tensor pass per elementwise op, 8 for AdamW) or for-loop (foreach=False: "
        "those ops per parameter tensor)",
        0, 0, {"fused", "foreach", "for-loop"}),
      f("fp8_params", FieldType::boolean,
        "FP8 working weights (Transformer Engine fp8_model_init, NeMo/Megatron fp8_params): 1 B per weight, no bf16 "
        "copy; the fp32 master stays in the optimizer; needs precision fp8"),
      f("zero", FieldType::integer, "ZeRO / FSDP stage", 0, 3),
      f("shard_group", FieldType::integer, "hybrid sharding group size", 1, kMaxGpus),
      f("recompute", FieldType::string, "activation recomputation", 0, 0, {"none", "selective", "full"}),
      f("recompute_method", FieldType::string,
        "with recompute full: uniform = the layers of each pipeline chunk in groups of recompute_num_layers, each "
        "group checkpointed at its input and recomputed whole; block = only the first recompute_num_layers layers of "
        "each chunk recomputed, the rest keep their activations (Megatron-Core --recompute-method)",
        0, 0, {"uniform", "block"}),
      f("recompute_num_layers", FieldType::integer,
        "with recompute full: the group size (uniform) or the recomputed layers per chunk (block) (Megatron-Core "
        "--recompute-num-layers); default 1 with uniform",
        1, 1e6),
      f("vocab_divisible_by", FieldType::integer,
        "pad the vocabulary to a multiple of this × TP (Megatron-LM --make-vocab-size-divisible-by); default 128 with "
        "fused kernels, 1 with eager kernels; 1 = unpadded (Megatron-Bridge when the model config sets vocab_size)",
        1, 65536),
      f("flash_attention", FieldType::boolean, "fused attention"),
      f("dropout", FieldType::boolean,
        "train with dropout (attention probabilities and block outputs) or without; absent: as the model's config says"),
      f("attention_kernel", FieldType::string, "fused attention generation", 0, 0, {"fa2", "fa3"}),
      f("kernels", FieldType::string, "non-GEMM op implementation", 0, 0, {"fused", "eager"}),
      f("cross_entropy", FieldType::string,
        "LM-loss cross-entropy kernels under fused kernels: te = one fused pass (Transformer Engine; Megatron-LM "
        "--cross-entropy-fusion-impl te), native = Megatron-Core's jit-fused passes (--cross-entropy-loss-fusion), "
        "unfused = Megatron-Core's unfused passes over fp32 logits (Megatron-LM's default)",
        0, 0, {"te", "native", "unfused"}),
      f("mixed_precision", FieldType::string, "mixed-precision scheme", 0, 0, {"megatron", "amp"}),
      f("offload", FieldType::string,
        "CPU offload: optimizer = ZeRO-Offload (master weights + optimizer states in host memory, optimizer step on "
        "the CPU; needs zero ≥ 1)",
        0, 0, {"none", "optimizer"}),
      f("activation_offload_layers", FieldType::integer,
        "activation CPU offloading: the saved activations of the first N decoder layers copied to host memory "
        "during the forward and back before their backward, beside the compute (Megatron-Core "
        "--cpu-offloading-num-layers; N < layers, PP 1, no recompute)",
        0, 1e6),
      f("lora_rank", FieldType::integer,
        "LoRA adapter rank; 0 = full fine-tuning (the base weights frozen otherwise: no weight gradients or "
        "optimizer states for them)",
        0, 65536),
      f("lora_targets", FieldType::string, "linear layers with LoRA adapters", 0, 0, {"qkv", "attention", "mlp", "all"}),
      f("lora_base", FieldType::string,
        "storage of the frozen base weights: same (the precision's), int8, fp8, nf4 (QLoRA: 4.127 bits per weight)",
        0, 0, {"same", "int8", "fp8", "nf4"}),
      f("overlap_grad_reduce", FieldType::boolean, "overlap DP gradient reduction with backward"),
      f("overlap_param_gather", FieldType::boolean, "overlap parameter all-gather with compute"),
      f("overlap_tp_comm", FieldType::boolean, "overlap TP communication with GEMMs"),
      f("embedding_in_pipeline_split", FieldType::boolean,
        "count the embedding as one layer of the first pipeline chunk when splitting the layers (Megatron "
        "--account-for-embedding-in-pipeline-split)"),
      f("loss_in_pipeline_split", FieldType::boolean,
        "count the loss as one layer of the last pipeline chunk when splitting the layers (Megatron "
        "--account-for-loss-in-pipeline-split)"),
      f("first_stage_layers", FieldType::integer,
        "decoder layers of the first pipeline stage, the rest split evenly (Megatron "
        "--decoder-first-pipeline-num-layers)",
        1, 1e6),
      f("last_stage_layers", FieldType::integer,
        "decoder layers of the last pipeline stage, the rest split evenly (Megatron --decoder-last-pipeline-num-layers)",
        1, 1e6),
      f("pipeline_layout", FieldType::string,
        "layers of every pipeline chunk, Megatron --pipeline-model-parallel-layout syntax (e.g. \"Et*3|(tt|)*29,t|L\": "
        "E embedding, t decoder layer, m multi-token-prediction layer (in the loss's chunk), L loss, | between chunks, "
        "(...)*N and c*N repeat); chunks = pp × virtual stages"),
      f("overlap_p2p_comm", FieldType::boolean,
        "interleaved schedule: pipeline sends overlapped with the neighbouring chunks' compute (Megatron's default; "
        "--no-overlap-p2p-communication turns it off)"),
      f("ep_a2a_overlap", FieldType::boolean,
        "MoE: the expert-parallel all-to-all of one micro-batch overlapped with another's compute in the steady 1F1B "
        "phase (Megatron-Core --overlap-moe-expert-parallel-comm with --delay-wgrad-compute)"),
      f("pp_scatter_gather", FieldType::boolean,
        "pipeline sends split over TP and all-gathered by the receiver without sequence parallelism (Megatron-LM's "
        "scatter/gather optimisation before Megatron-Core, 2021-2023)"),
      f("recompute_modules", FieldType::string_list,
        "modules whose outputs are recomputed in the backward instead of kept (Megatron-Core --recompute-modules): "
        "layernorm (every norm), mla_up_proj (MLA's q/kv up-projections), moe_act (the experts' activation), mlp (the "
        "dense MLP of the non-MoE layers, run again in the backward); DeepSeek-V3 recomputes all three (arXiv:2412.19437 §3.2.3, §3.3.2)"),
      f("ep_dispatch", FieldType::string,
        "MoE token dispatch/combine: all-to-all (NCCL, one copy per token and expert; Megatron-Core's alltoall "
        "dispatcher) or deepep (DeepSeek-V3 §3.2.2 / DeepEP normal kernels: once per destination node over "
        "InfiniBand, forwarded inside the node over NVLink; FP8 dispatch under FP8 GEMMs, BF16 combine)",
        0, 0, {"all-to-all", "deepep"}),
      f("activation_func_fp8_input_store", FieldType::boolean,
        "the SwiGLU input (the fc1 output [gate | up]) kept for the backward in FP8, 1 B instead of 2 (Megatron-Core "
        "TransformerConfig.activation_func_fp8_input_store, NeMo's activation_func_fp8_input_store, MLPerf's "
        "FP8_ACT=1); SwiGLU models only"),
      f("attention_output_store", FieldType::string,
        "how the attention output is kept for the backward under FP8 GEMMs: separate (the attention kernel's 16-bit "
        "output and the O projection's FP8 copy, Transformer Engine's way; the default) or e5m6 (one 12-bit E5M6 copy "
        "shared by both, DeepSeek-V3 arXiv:2412.19437 §3.3.3)",
        0, 0, {"separate", "e5m6"}),
      f("moe_imbalance", FieldType::number,
        "MoE load imbalance: tokens of the busiest expert-parallel rank over the mean (1 = balanced, the default)", 1,
        1024),
      f("mtp_layers", FieldType::integer,
        "multi-token-prediction modules trained with the model (DeepSeek-V3 §2.2; Megatron --mtp-num-layers), at most "
        "the model's",
        0, 64),
      f("description", FieldType::string, "what the scenario is (free text, not read by the model)"),
      f("sources", FieldType::string_list, "where each setting comes from (free text, not read by the model)"),
      f("tokens", FieldType::number, "token budget", 1, 1e18),
      f("price_usd_per_hour", FieldType::number, "$/GPU-hour", 0, 1e4),
  };
  return t;
}

namespace {
/// Moves the diagnostics of keys that came from flags onto the flag ("--tp: error: ...").
Diagnostics rehome(const Diagnostics& raw, const std::string& pointer, const std::map<std::string, std::string>& origin) {
  Diagnostics diags;
  for (auto d : raw.items()) {
    for (const auto& [key, flag] : origin)
      if (d.pointer == pointer + "/" + gpuplan::json_pointer_token(key)) {
        d.file.clear();
        d.pointer = flag;
      }
    diags.add(d);
  }
  return diags;
}
}  // namespace

namespace {
/// The pipeline split keys (wl::PipelineSplit): at most one way, as Megatron-Core allows; a layout sets the chunks per
/// stage (its chunk count / pp, Megatron's virtual pipeline size) and needs them to agree with virtual_stages.
template <class KeyError>
void pipeline_split(ObjectReader& r, wl::TrainingPlan& p, KeyError&& key_error) {
  wl::PipelineSplit& sp = p.split;
  sp.embedding_as_layer = r.boolean("embedding_in_pipeline_split").value_or(false);
  sp.loss_as_layer = r.boolean("loss_in_pipeline_split").value_or(false);
  sp.first_stage_layers = r.integer("first_stage_layers").value_or(0);
  sp.last_stage_layers = r.integer("last_stage_layers").value_or(0);
  const auto text = r.str("pipeline_layout");
  if (sp.first_last() && sp.accounts())
    key_error(sp.first_stage_layers > 0 ? "first_stage_layers" : "last_stage_layers",
              "first/last stage layer counts cannot be combined with embedding_in_pipeline_split or "
              "loss_in_pipeline_split (Megatron-Core refuses the mix: give one way to split the layers)");
  if (!text) return;
  if (sp.first_last() || sp.accounts()) {
    key_error("pipeline_layout",
              "a pipeline layout cannot be combined with first/last stage layer counts or the embedding/loss "
              "accounting (Megatron-Core refuses the mix: the layout places every layer)");
    return;
  }
  const wl::ParsedPipelineLayout parsed = wl::parse_pipeline_layout(*text);
  if (!parsed.ok()) {
    key_error("pipeline_layout", fmt::format("'{}': {}", *text, parsed.error));
    return;
  }
  // Multi-token-prediction layers (m): Megatron-Core (pipeline_parallel_layer_layout.py validate_layer_layout) wants
  // their count equal to mtp_num_layers, all in one chunk, the last chunk of its rank; gpuplan prices the MTP modules
  // beside the output head and loss (TrainingPlan::mtp_layers), so the m's must share the loss's chunk.
  std::int64_t mtp = 0;
  for (const auto& c : parsed.chunks) mtp += c.mtp;
  if (mtp > 0 && parsed.chunks.back().mtp != mtp) {
    key_error("pipeline_layout", fmt::format("'{}': the multi-token-prediction layers (m) must be in the loss's chunk "
                                             "(gpuplan prices them beside the output head and loss; a standalone MTP "
                                             "stage is not modelled)",
                                             *text));
    return;
  }
  const auto mtp_key = r.integer("mtp_layers");
  if (mtp_key && *mtp_key != mtp) {
    key_error("pipeline_layout", fmt::format("'{}' places {} multi-token-prediction layers (m) but mtp_layers is {} "
                                             "(Megatron-Core: 'Number of mtp layers in layout must match "
                                             "mtp_num_layers')",
                                             *text, mtp, *mtp_key));
    return;
  }
  p.mtp_layers = mtp;
  const std::int64_t n = std::int64_t(parsed.chunks.size()), pp = std::max(1, p.par.pp);
  if (!r.integer("pp") && n > 1) {
    key_error("pipeline_layout", fmt::format("'{}' has {} chunks: give the pipeline size (pp) it is split over", *text, n));
    return;
  }
  if (n % pp != 0) {
    key_error("pipeline_layout", fmt::format("'{}' has {} chunks, not divisible by PP {} (Megatron-Core: "
                                             "'pipeline_model_parallel_layout must be divisible by "
                                             "pipeline_model_parallel_size')",
                                             *text, n, pp));
    return;
  }
  const int v = int(n / pp);
  if (r.integer("virtual_stages") && p.par.virtual_stages != v && !(v == 1 && p.par.virtual_stages == 1)) {
    key_error("pipeline_layout", fmt::format("'{}' gives {} chunks per stage (PP {}), but virtual_stages is {}",
                                             *text, v, pp, p.par.virtual_stages));
    return;
  }
  if (v > 1 && r.str("schedule") && p.schedule != wl::PipelineSchedule::interleaved) {
    key_error("pipeline_layout", fmt::format("'{}' gives {} chunks per stage: that is the interleaved schedule, "
                                             "but schedule is 1f1b",
                                             *text, v));
    return;
  }
  p.par.virtual_stages = v;
  if (v > 1) p.schedule = wl::PipelineSchedule::interleaved;
  sp.layout = *text;
  sp.chunk_layers.clear();
  for (const auto& c : parsed.chunks) sp.chunk_layers.push_back(c.decoder);
}
}  // namespace

Result<TrainingScenario> decode_training_scenario(const Json& j, const std::string& file,
                                                  const std::map<std::string, std::string>& origin_of_key,
                                                  const std::string& pointer) {
  Diagnostics raw;
  ObjectReader r(j, training_scenario_fields(), file, pointer, raw);
  // Re-home diagnostics of flag-provided keys onto the flag.
  Diagnostics diags = rehome(raw, pointer, origin_of_key);
  TrainingScenario s;
  s.model = r.str("model").value_or("");
  s.gpu = r.str("gpu").value_or("");
  s.node = r.str("node").value_or("");
  s.cluster = r.str("cluster").value_or("");
  s.gpus = r.integer("gpus");
  auto& p = s.plan;
  auto as_int = [&](const char* k, int& into) {
    if (auto v = r.integer(k)) into = static_cast<int>(*v);
  };
  as_int("tp", p.par.tp);
  as_int("pp", p.par.pp);
  as_int("cp", p.par.cp);
  as_int("ep", p.par.ep);
  as_int("etp", p.par.etp);
  as_int("virtual_stages", p.par.virtual_stages);
  as_int("shard_group", p.par.shard_group);
  if (auto v = r.integer("dp")) {
    p.par.dp = static_cast<int>(*v);
    s.dp_given = true;
  }
  p.par.sequence_parallel = r.boolean("sequence_parallel").value_or(p.par.tp > 1);
  if (auto v = r.str("schedule"))
    p.schedule = *v == "interleaved" ? wl::PipelineSchedule::interleaved
                 : *v == "dualpipe"  ? wl::PipelineSchedule::dualpipe
                                     : wl::PipelineSchedule::one_f_one_b;
  else if (p.par.virtual_stages > 1) p.schedule = wl::PipelineSchedule::interleaved;
  if (auto v = r.integer("micro_batch")) p.micro_batch = *v;
  if (auto v = r.integer("global_batch")) p.global_batch = *v;
  if (auto v = r.integer("seq")) p.seq_len = *v;
  if (auto v = r.str("precision")) p.precision.compute = *hw::parse_precision(*v);
  if (p.precision.compute == hw::Precision::fp32 || p.precision.compute == hw::Precision::tf32) {
    p.precision.weight_bytes = 4;
    p.precision.gradient_bytes = 4;
    p.precision.master_bytes = 0;
    p.precision.activation_bytes = 4;
  }
  if (auto v = r.num("gradient_bytes")) p.precision.gradient_bytes = *v;
  if (p.precision.compute == hw::Precision::fp4) p.precision.recipe = wl::QuantRecipe::nvfp4;
  if (auto v = r.str("optimizer"))
    p.optimizer = *v == "adamw" ? wl::OptimizerKind::adamw : *v == "sgd" ? wl::OptimizerKind::sgd : wl::OptimizerKind::adamw_8bit;
  auto key_error = [&](const std::string& key, const std::string& msg) {
    const auto flag = origin_of_key.find(key);
    if (flag != origin_of_key.end()) diags.error("", flag->second, msg);
    else diags.error(file, pointer + "/" + key, msg);
  };
  if (auto v = r.str("optimizer_impl"))
    p.optimizer_impl = *v == "foreach"    ? wl::OptimizerImpl::foreach
                       : *v == "for-loop" ? wl::OptimizerImpl::for_loop
                                          : wl::OptimizerImpl::fused;
  if (auto v = r.str("optimizer_states")) {
    p.optimizer_states = *v == "bf16" ? wl::StateDtype::bf16 : wl::StateDtype::fp32;
    if (p.optimizer_states == wl::StateDtype::bf16 && p.optimizer == wl::OptimizerKind::adamw_8bit)
      key_error("optimizer_states", "bf16 optimizer states apply to adamw and sgd; adamw-8bit keeps its own 8-bit states");
  }
  if (auto v = r.integer("zero")) p.zero = static_cast<wl::ZeroStage>(*v);
  if (auto v = r.str("recompute"))
    p.recompute = *v == "full" ? wl::Recompute::full : *v == "selective" ? wl::Recompute::selective : wl::Recompute::none;
  if (auto v = r.str("recompute_method")) p.recompute_method = *v == "block" ? wl::RecomputeMethod::block : wl::RecomputeMethod::uniform;
  if (auto v = r.integer("recompute_num_layers")) p.recompute_num_layers = *v;
  if ((r.str("recompute_method") || r.integer("recompute_num_layers")) && p.recompute != wl::Recompute::full)
    key_error(r.str("recompute_method") ? "recompute_method" : "recompute_num_layers",
              "a recompute method and layer count apply to full recomputation only (Megatron-Core: "
              "recompute_granularity full): set recompute full");
  if (r.str("recompute_method") && !r.integer("recompute_num_layers") && p.recompute_method == wl::RecomputeMethod::block)
    key_error("recompute_method", "recompute_method block needs recompute_num_layers (the layers of each chunk to "
                                  "recompute)");
  if (auto v = r.integer("vocab_divisible_by")) p.vocab_divisible_by = int(*v);
  if (auto v = r.boolean("flash_attention")) p.flash_attention = *v;
  if (auto v = r.boolean("dropout")) p.dropout = *v;
  if (auto v = r.str("kernels")) p.kernels = *v == "eager" ? wl::KernelStyle::eager : wl::KernelStyle::fused;
  if (auto v = r.str("cross_entropy")) {
    p.cross_entropy = *v == "unfused" ? wl::CrossEntropyKernel::unfused
                      : *v == "native" ? wl::CrossEntropyKernel::native
                                       : wl::CrossEntropyKernel::te;
    if (p.kernels == wl::KernelStyle::eager)
      key_error("cross_entropy", "cross_entropy names Megatron's loss kernels (kernels fused); eager kernels run "
                                 "PyTorch's cross_entropy: leave it out");
  }
  if (auto v = r.str("mixed_precision"); v && *v == "amp") {
    // AMP: fp32 parameters and gradients, no separate master copy (the parameters are the master).
    p.mixed_precision = wl::MixedPrecision::amp;
    p.precision.weight_bytes = 4;
    p.precision.gradient_bytes = 4;
    p.precision.master_bytes = 0;
  }
  if (auto v = r.str("fp8_recipe")) {
    p.precision.recipe = *v == "tensorwise" ? wl::QuantRecipe::tensorwise
                         : *v == "mxfp8"    ? wl::QuantRecipe::mxfp8
                         : *v == "blockwise" ? wl::QuantRecipe::blockwise
                                             : wl::QuantRecipe::delayed;
    if (p.precision.compute != hw::Precision::fp8)
      key_error("fp8_recipe", fmt::format("an FP8 recipe needs precision fp8 (precision is {})",
                                          hw::to_string(p.precision.compute)));
  }
  if (auto v = r.boolean("fp8_params"); v && *v) {
    if (p.precision.compute != hw::Precision::fp8)
      key_error("fp8_params", "fp8_params needs precision fp8 (the FP8 weights feed FP8 GEMMs)");
    if (p.mixed_precision == wl::MixedPrecision::amp)
      key_error("fp8_params", "fp8_params keeps FP8 working weights; mixed_precision amp keeps fp32 ones: choose one");
    p.precision.fp8_params = true;
    p.precision.weight_bytes = 1.0;
  }
  if (auto v = r.str("offload")) p.offload = *v == "optimizer" ? wl::Offload::optimizer : wl::Offload::none;
  if (auto v = r.integer("activation_offload_layers")) p.activation_offload_layers = *v;
  if (auto v = r.str("attention_kernel")) p.attention_kernel = *v == "fa2" ? wl::AttentionKernel::fa2 : wl::AttentionKernel::fa3;
  if (auto v = r.integer("lora_rank")) p.lora.rank = static_cast<int>(*v);
  if (auto v = r.str("lora_targets"))
    p.lora.targets = *v == "qkv"         ? wl::LoraTargets::qkv
                     : *v == "attention" ? wl::LoraTargets::attention
                     : *v == "mlp"       ? wl::LoraTargets::mlp
                                         : wl::LoraTargets::all;
  if (auto v = r.str("lora_base"))
    p.lora.base = *v == "nf4" ? wl::LoraBase::nf4 : *v == "int8" ? wl::LoraBase::int8 : *v == "fp8" ? wl::LoraBase::fp8 : wl::LoraBase::same;
  if (p.lora.rank == 0 && (r.str("lora_targets") || (r.str("lora_base") && *r.str("lora_base") != "same"))) {
    const std::string key = r.str("lora_targets") ? "lora_targets" : "lora_base";
    key_error(key, key + " is set but there are no adapters: give a LoRA rank (lora_rank / --lora-rank ≥ 1)");
  }
  if (auto v = r.boolean("overlap_grad_reduce")) p.overlap_grad_reduce = *v;
  if (auto v = r.boolean("overlap_param_gather")) p.overlap_param_gather = *v;
  if (auto v = r.boolean("overlap_tp_comm")) p.overlap_tp_comm = *v;
  if (auto v = r.boolean("overlap_p2p_comm")) p.overlap_p2p_comm = *v;
  if (auto v = r.boolean("pp_scatter_gather")) p.pp_scatter_gather = *v;
  if (auto v = r.boolean("ep_a2a_overlap")) p.ep_a2a_overlap = *v;
  if (auto v = r.boolean("activation_func_fp8_input_store")) p.activation_fp8_input_store = *v;
  pipeline_split(r, p, key_error);
  if (auto v = r.strings("recompute_modules")) {
    for (const auto& m : *v) {
      if (m == "layernorm") p.recompute_modules |= wl::recompute_layernorm;
      else if (m == "mla_up_proj") p.recompute_modules |= wl::recompute_mla_up_proj;
      else if (m == "moe_act") p.recompute_modules |= wl::recompute_moe_act;
      else if (m == "mlp") p.recompute_modules |= wl::recompute_mlp;
      else
        key_error("recompute_modules",
                  fmt::format("'{}' is not a module gpuplan recomputes: layernorm, mla_up_proj, moe_act or mlp", m));
    }
    if (p.recompute_modules != 0 && p.recompute == wl::Recompute::full)
      key_error("recompute_modules", "recompute full already recomputes every module: leave recompute_modules out");
  }
  if (auto v = r.str("ep_dispatch")) p.ep_dispatch = *v == "deepep" ? wl::EpDispatch::deepep : wl::EpDispatch::all_to_all;
  if (auto v = r.str("attention_output_store"))
    p.attention_output = *v == "e5m6" ? wl::AttentionOutputStore::e5m6 : wl::AttentionOutputStore::separate;
  if (auto v = r.num("moe_imbalance")) p.moe_imbalance = *v;
  if (auto v = r.integer("mtp_layers")) p.mtp_layers = *v;
  if (auto v = r.num("tokens")) p.tokens_to_train = *v;
  s.price_usd_per_hour = r.num("price_usd_per_hour");
  if (diags.has_errors()) return Result<TrainingScenario>(std::move(diags));
  return Result<TrainingScenario>(std::move(s), std::move(diags));
}

Json encode_training_scenario(const TrainingScenario& s) {
  Json j = Json::object();
  auto str = [&](const char* k, const std::string& v) {
    if (!v.empty()) j[k] = v;
  };
  str("model", s.model);
  str("gpu", s.gpu);
  str("node", s.node);
  str("cluster", s.cluster);
  if (s.gpus) j["gpus"] = *s.gpus;
  const auto& p = s.plan;
  j["tp"] = p.par.tp;
  j["pp"] = p.par.pp;
  if (s.dp_given) j["dp"] = p.par.dp;
  j["cp"] = p.par.cp;
  j["ep"] = p.par.ep;
  if (p.par.etp > 0) j["etp"] = p.par.etp;
  j["sequence_parallel"] = p.par.sequence_parallel;
  j["virtual_stages"] = p.par.virtual_stages;
  j["schedule"] = p.schedule == wl::PipelineSchedule::interleaved ? "interleaved"
                  : p.schedule == wl::PipelineSchedule::dualpipe  ? "dualpipe"
                                                                  : "1f1b";
  if (p.recompute_modules != 0) {
    std::vector<std::string> mods;
    if (p.recomputes(wl::recompute_layernorm)) mods.emplace_back("layernorm");
    if (p.recomputes(wl::recompute_mla_up_proj)) mods.emplace_back("mla_up_proj");
    if (p.recomputes(wl::recompute_moe_act)) mods.emplace_back("moe_act");
    if (p.recomputes(wl::recompute_mlp)) mods.emplace_back("mlp");
    j["recompute_modules"] = mods;
  }
  if (p.ep_dispatch == wl::EpDispatch::deepep) j["ep_dispatch"] = "deepep";
  if (p.attention_output == wl::AttentionOutputStore::e5m6) j["attention_output_store"] = "e5m6";
  if (p.ep_a2a_overlap) j["ep_a2a_overlap"] = true;
  if (p.activation_fp8_input_store) j["activation_func_fp8_input_store"] = true;
  if (p.moe_imbalance != 1.0) j["moe_imbalance"] = p.moe_imbalance;
  if (p.mtp_layers > 0) j["mtp_layers"] = p.mtp_layers;
  j["micro_batch"] = p.micro_batch;
  j["global_batch"] = p.global_batch;
  j["seq"] = p.seq_len;
  j["precision"] = std::string(hw::to_string(p.precision.compute));
  j["gradient_bytes"] = p.precision.gradient_bytes;
  j["optimizer"] = p.optimizer == wl::OptimizerKind::adamw ? "adamw"
                   : p.optimizer == wl::OptimizerKind::sgd ? "sgd"
                                                           : "adamw-8bit";
  if (p.optimizer_states == wl::StateDtype::bf16) j["optimizer_states"] = "bf16";
  if (p.optimizer_impl != wl::OptimizerImpl::fused) j["optimizer_impl"] = wl::to_string(p.optimizer_impl);
  if (p.precision.fp8_params) j["fp8_params"] = true;
  if (p.precision.compute == hw::Precision::fp8 && p.precision.recipe != wl::QuantRecipe::delayed)
    j["fp8_recipe"] = wl::to_string(p.precision.recipe);
  j["zero"] = static_cast<int>(p.zero);
  if (p.par.shard_group > 0) j["shard_group"] = p.par.shard_group;
  j["recompute"] = p.recompute == wl::Recompute::full ? "full" : p.recompute == wl::Recompute::selective ? "selective" : "none";
  if (p.recompute == wl::Recompute::full && p.partial_recompute()) {
    j["recompute_method"] = p.recompute_method == wl::RecomputeMethod::block ? "block" : "uniform";
    j["recompute_num_layers"] = p.recompute_num_layers;
  }
  if (p.vocab_divisible_by) j["vocab_divisible_by"] = *p.vocab_divisible_by;
  j["flash_attention"] = p.flash_attention;
  if (p.dropout) j["dropout"] = *p.dropout;
  j["attention_kernel"] = p.attention_kernel == wl::AttentionKernel::fa2 ? "fa2" : "fa3";
  j["kernels"] = p.kernels == wl::KernelStyle::eager ? "eager" : "fused";
  if (p.kernels == wl::KernelStyle::fused)
    j["cross_entropy"] = p.cross_entropy == wl::CrossEntropyKernel::unfused  ? "unfused"
                         : p.cross_entropy == wl::CrossEntropyKernel::native ? "native"
                                                                              : "te";
  j["mixed_precision"] = p.mixed_precision == wl::MixedPrecision::amp ? "amp" : "megatron";
  if (p.offload == wl::Offload::optimizer) j["offload"] = "optimizer";
  if (p.activation_offload_layers > 0) j["activation_offload_layers"] = p.activation_offload_layers;
  if (p.lora.on()) {
    j["lora_rank"] = p.lora.rank;
    j["lora_targets"] = wl::to_string(p.lora.targets);
    j["lora_base"] = wl::to_string(p.lora.base);
  }
  j["overlap_grad_reduce"] = p.overlap_grad_reduce;
  j["overlap_param_gather"] = p.overlap_param_gather;
  j["overlap_tp_comm"] = p.overlap_tp_comm;
  if (!p.overlap_p2p_comm) j["overlap_p2p_comm"] = false;
  if (p.pp_scatter_gather) j["pp_scatter_gather"] = true;
  if (p.split.embedding_as_layer) j["embedding_in_pipeline_split"] = true;
  if (p.split.loss_as_layer) j["loss_in_pipeline_split"] = true;
  if (p.split.first_stage_layers > 0) j["first_stage_layers"] = p.split.first_stage_layers;
  if (p.split.last_stage_layers > 0) j["last_stage_layers"] = p.split.last_stage_layers;
  if (!p.split.layout.empty()) j["pipeline_layout"] = p.split.layout;
  if (p.tokens_to_train) j["tokens"] = *p.tokens_to_train;
  if (s.price_usd_per_hour) j["price_usd_per_hour"] = *s.price_usd_per_hour;
  return j;
}


const FieldTable& serving_scenario_fields() {
  static const std::vector<std::string> dtypes{"fp32", "bf16", "fp16", "fp8", "int8", "int4"};
  static const FieldTable t{
      f("model", FieldType::string, "library id or path to a model JSON / config.json"),
      f("gpu", FieldType::string, "GPU id or alias (default h100-sxm5-80gb when no node or cluster is given)"),
      f("node", FieldType::string, "node id: the scale-up fabric for TP (default: a node holding the GPU)"),
      f("cluster", FieldType::string, "cluster id: the scale-out fabric for disaggregated KV transfer"),
      f("tp", FieldType::integer, "tensor parallel size of a replica (with a rate: fixed instead of searched)", 1, 1024),
      f("pp", FieldType::integer, "pipeline parallel size of a replica (with a rate: fixed instead of searched)", 1, 1024),
      f("ep", FieldType::integer, "MoE expert parallel inside the TP group", 1, 1024),
      f("attention_dp", FieldType::integer,
        "MoE: attention data-parallel ranks of TP GPUs each (own batch and KV cache) with the experts spread over all "
        "of them, wide EP = attention_dp × tp (SGLang --enable-dp-attention --dp, vLLM --data-parallel-size with "
        "--enable-expert-parallel); the planner sizes whole groups (default 1: off)",
        1, 4096),
      f("moe_imbalance", FieldType::number,
        "MoE hot-expert skew: routed tokens of the busiest expert-parallel rank over the mean (1 = uniform routing, "
        "the default)",
        1, 1024),
      f("input_tokens", FieldType::integer, "prompt tokens per request (default 1024)", 1, 1e7),
      f("output_tokens", FieldType::integer, "output tokens per request (default 256)", 1, 1e7),
      f("images_per_request", FieldType::integer,
        "images per request of a multimodal model: their tokens join the prompt, the vision tower runs before the "
        "prefill (default 0)",
        0, 1e4),
      f("input_dist", FieldType::string, "prompt-length distribution: lognormal:MEAN,SD or TOKENS:WEIGHT,..."),
      f("output_dist", FieldType::string, "output-length distribution: lognormal:MEAN,SD or TOKENS:WEIGHT,..."),
      f("batch", FieldType::integer, "concurrent sequences per replica (default: the KV capacity)", 1, 1e7),
      f("rate", FieldType::number, "requests per second to serve: runs the capacity planner"),
      f("concurrency", FieldType::integer,
        "closed-loop users, each with one request in flight (instead of rate): runs the capacity planner", 1, 1e9),
      f("think_time_s", FieldType::number, "closed loop: seconds between a response and the user's next request"),
      f("ttft_ms", FieldType::number, "SLA: time to first token at the percentile, ms"),
      f("itl_ms", FieldType::number, "SLA: inter-token latency (mean iteration), ms"),
      f("percentile", FieldType::number, "SLA percentile for TTFT (default 99)"),
      f("compute", FieldType::string, "GEMM precision (default: fp8 / fp4 with fp8 / fp4 weights where the GPU has them)",
        0, 0, {"bf16", "fp16", "fp8", "fp4"}),
      f("price_usd_per_hour", FieldType::number, "$/GPU-hour (default: the GPU file's indicative price)"),
      f("step_overhead_ms", FieldType::number, "engine CPU time per iteration not hidden (default 0)"),
      f("kernel_overhead_us", FieldType::number, "GPU-side fixed cost per kernel (graphs 2.5, eager 5)"),
      f("cpu_per_kernel_us", FieldType::number, "eager: CPU time to issue one kernel (default 12)"),
      f("disaggregated", FieldType::boolean, "also size separate prefill and decode pools"),
      f("prefill_gpu", FieldType::string,
        "disaggregated: GPU of the prefill pool (default: gpu), priced at its own $/GPU-hour"),
      f("prefill_attention_dp", FieldType::integer,
        "disaggregated, MoE: attention-DP ranks per group of the prefill pool (default attention_dp)", 1, 4096),
      f("decode_attention_dp", FieldType::integer,
        "disaggregated, MoE: attention-DP ranks per group of the decode pool (default attention_dp)", 1, 4096),
      f("decode_gpu", FieldType::string,
        "disaggregated: GPU of the decode pool (default: gpu), priced at its own $/GPU-hour; the KV crosses the "
        "scale-out fabric between the pools"),
      f("spec_acceptance", FieldType::number, "speculative decoding: acceptance rate α"),
      f("spec_tokens", FieldType::integer, "speculative decoding: draft tokens per step γ", 1, 64),
      f("draft_model", FieldType::string, "speculative decoding: draft model (library id or config.json)"),
      f("draft_ms", FieldType::number, "speculative decoding: draft step time in ms (instead of a draft model)"),
      f("block_size", FieldType::integer, "tokens per KV block (default 16; 1 = contiguous)", 1, 1e6),
      f("prefix_tokens", FieldType::integer, "prompt prefix shared by all sequences, stored once", 0, 1e8),
      f("prefix_hit_rate", FieldType::number,
        "share of each prompt's tokens beyond prefix_tokens found in the prefix cache (whole blocks), in [0, 1): not "
        "computed again (default 0)"),
      f("kv_dtype", FieldType::string, "KV cache element type (default bf16)", 0, 0, dtypes),
      f("kv_scales", FieldType::string, "KV scale granularity", 0, 0, {"none", "per-tensor", "per-head", "per-token-head"}),
      f("kv_scale_bytes", FieldType::number, "bytes per per-token-head scale group (default 4)"),
      f("weight_dtype", FieldType::string, "weight element type (default bf16)", 0, 0,
        {"fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"}),
      f("weight_group_size", FieldType::integer, "weights per scale group (int4 default 128; 0 = per channel)"),
      f("engine", FieldType::string, "memory semantics (default vllm)", 0, 0, {"vllm", "sglang", "plain"}),
      f("gpu_memory_utilization", FieldType::number, "vLLM: fraction of device memory for weights, activations, KV"),
      f("mem_fraction_static", FieldType::number, "SGLang: fraction of the pre-load free memory for weights and KV"),
      f("usable_fraction", FieldType::number, "plain: fraction of capacity usable for everything"),
      f("cudagraph_in_budget", FieldType::boolean, "vLLM: CUDA graphs counted inside gpu_memory_utilization"),
      f("enforce_eager", FieldType::boolean, "no CUDA graphs"),
      f("cuda_graph_GiB", FieldType::number, "CUDA-graph memory per GPU (default 1 GiB)"),
      f("activation_GiB", FieldType::number, "peak activation memory per GPU"),
      f("max_num_batched_tokens", FieldType::integer, "chunked-prefill token budget (vLLM default)", 1, 1e8),
      f("max_num_seqs", FieldType::integer, "max concurrent sequences the engine schedules (vLLM default)", 1, 1e6),
      f("overheads", FieldType::string, "runtime overheads", 0, 0, {"default", "none"}),
      f("capacity", FieldType::string, "GPU capacity: device (driver-reported) or label (vendor GB)", 0, 0,
        {"device", "label"}),
  };
  return t;
}

Result<ServingScenario> decode_serving_scenario(const Json& j, const std::string& file, const std::string& pointer,
                                                const std::map<std::string, std::string>& origin_of_key) {
  Diagnostics raw;
  ObjectReader r(j, serving_scenario_fields(), file, pointer, raw);
  Diagnostics diags = rehome(raw, pointer, origin_of_key);
  ServingScenario s;
  s.model = r.str("model").value_or("");
  s.gpu = r.str("gpu").value_or("");
  s.node = r.str("node").value_or("");
  s.cluster = r.str("cluster").value_or("");
  s.tp = r.integer("tp");
  s.pp = r.integer("pp");
  s.ep = r.integer("ep");
  s.attention_dp = r.integer("attention_dp");
  s.prefill_gpu = r.str("prefill_gpu");
  s.decode_gpu = r.str("decode_gpu");
  s.prefill_attention_dp = r.integer("prefill_attention_dp");
  s.decode_attention_dp = r.integer("decode_attention_dp");
  s.moe_imbalance = r.num("moe_imbalance");
  s.input_tokens = r.integer("input_tokens");
  s.output_tokens = r.integer("output_tokens");
  s.images_per_request = r.integer("images_per_request");
  s.batch = r.integer("batch");
  s.input_dist = r.str("input_dist");
  s.output_dist = r.str("output_dist");
  s.rate = r.num("rate");
  s.concurrency = r.integer("concurrency");
  s.think_time_s = r.num("think_time_s");
  s.ttft_ms = r.num("ttft_ms");
  s.itl_ms = r.num("itl_ms");
  s.percentile = r.num("percentile");
  s.compute = r.str("compute");
  s.price_usd_per_hour = r.num("price_usd_per_hour");
  s.step_overhead_ms = r.num("step_overhead_ms");
  s.kernel_overhead_us = r.num("kernel_overhead_us");
  s.cpu_per_kernel_us = r.num("cpu_per_kernel_us");
  s.disaggregated = r.boolean("disaggregated").value_or(false);
  s.spec_acceptance = r.num("spec_acceptance");
  s.spec_tokens = r.integer("spec_tokens");
  s.draft_model = r.str("draft_model");
  s.draft_ms = r.num("draft_ms");
  s.block_size = r.integer("block_size");
  s.prefix_tokens = r.integer("prefix_tokens");
  s.prefix_hit_rate = r.num("prefix_hit_rate");
  s.kv_dtype = r.str("kv_dtype");
  s.kv_scales = r.str("kv_scales");
  s.kv_scale_bytes = r.num("kv_scale_bytes");
  s.weight_dtype = r.str("weight_dtype");
  s.weight_group_size = r.integer("weight_group_size");
  s.engine = r.str("engine");
  s.gpu_memory_utilization = r.num("gpu_memory_utilization");
  s.mem_fraction_static = r.num("mem_fraction_static");
  s.usable_fraction = r.num("usable_fraction");
  s.cudagraph_in_budget = r.boolean("cudagraph_in_budget");
  s.enforce_eager = r.boolean("enforce_eager").value_or(false);
  s.cuda_graph_GiB = r.num("cuda_graph_GiB");
  s.activation_GiB = r.num("activation_GiB");
  s.max_num_batched_tokens = r.integer("max_num_batched_tokens");
  s.max_num_seqs = r.integer("max_num_seqs");
  s.overheads = r.str("overheads");
  s.capacity = r.str("capacity");
  if (diags.has_errors()) return Result<ServingScenario>(std::move(diags));
  return Result<ServingScenario>(std::move(s), std::move(diags));
}

std::vector<long long> parse_count_range(const std::string& text, std::string& error) {
  auto integer = [](std::string_view v, long long& x) {
    const auto* e = v.data() + v.size();
    auto [p, ec] = std::from_chars(v.data(), e, x);
    return !v.empty() && ec == std::errc() && p == e;
  };
  constexpr long long kMax = 10'000'000;
  const std::string_view t = text;
  const auto dots = t.find("..");
  std::vector<long long> out;
  if (dots == std::string_view::npos) {
    long long n = 0;
    if (!integer(t, n) || n < 1 || n > kMax) {
      error = fmt::format("'{}' is not a GPU count or range: expected N, A..B (doubling from A) or A..B:STEP", text);
      return {};
    }
    return {n};
  }
  const std::string_view a = t.substr(0, dots), rest = t.substr(dots + 2);
  const auto colon = rest.find(':');
  const std::string_view b = rest.substr(0, colon);
  long long lo = 0, hi = 0, step = 0;
  if (!integer(a, lo) || !integer(b, hi) || (colon != std::string_view::npos && !integer(rest.substr(colon + 1), step))) {
    error = fmt::format("'{}' is not a GPU count or range: expected N, A..B (doubling from A) or A..B:STEP", text);
    return {};
  }
  if (lo < 1 || hi > kMax || lo > hi || (colon != std::string_view::npos && step < 1)) {
    error = fmt::format("'{}': expected 1 <= A <= B <= {} and STEP >= 1", text, kMax);
    return {};
  }
  for (long long n = lo; n <= hi; n = colon == std::string_view::npos ? n * 2 : n + step) {
    out.push_back(n);
    if (out.size() > 4096) {
      error = fmt::format("'{}' has more than 4096 GPU counts", text);
      return {};
    }
  }
  return out;
}

}  // namespace gpuplan::wl_io
