// Training scenarios (scenario_io.hpp): the keys of `gpuplan train --scenario` and the GUI's training panel, decoded
// into a typed plan and encoded back; the count ranges of sweeps. Serving scenarios: serving_scenario_io.cpp.
#include "gpuplan/wl_io/scenario_io.hpp"

#include <charconv>
#include <string_view>

#include <fmt/format.h>

#include "gpuplan/wl/pipeline_layout.hpp"
#include "io_common.hpp"
#include "scenario_keys.hpp"

namespace gpuplan::wl_io {

namespace {
using scenario_keys::rehome;
/// The smallest gradient bucket dp_bucket_size takes (parameters); below it every tensor is a bucket of its own.
constexpr long long kMinBucketParams = 1'000'000;
}  // namespace

// training_scenario_fields(): training_fields.cpp, the training scenario's one field table.

namespace scenario_keys {
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
}  // namespace scenario_keys

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
    p.optimizer = *v == "adamw" || *v == "adam" ? wl::OptimizerKind::adamw  // adam: Megatron-LM's spelling of it
                  : *v == "sgd"                    ? wl::OptimizerKind::sgd
                                                   : wl::OptimizerKind::adamw_8bit;
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
    p.recompute = *v == "full"           ? wl::Recompute::full
                  : *v == "selective"    ? wl::Recompute::selective
                  : *v == "selective_op" ? wl::Recompute::selective_op
                                         : wl::Recompute::none;
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
    p.cross_entropy = *v == "unfused"  ? wl::CrossEntropyKernel::unfused
                      : *v == "native" ? wl::CrossEntropyKernel::native
                      : *v == "eager"  ? wl::CrossEntropyKernel::eager
                      : *v == "flash"  ? wl::CrossEntropyKernel::flash
                                       : wl::CrossEntropyKernel::te;
    if (p.kernels == wl::KernelStyle::eager && p.cross_entropy != wl::CrossEntropyKernel::flash)
      key_error("cross_entropy", "cross_entropy te, native and unfused name Megatron's loss kernels (kernels fused); "
                                 "eager kernels run PyTorch's cross_entropy unless the loss is FlashAttention's "
                                 "(flash): leave it out or say flash");
  }
  if (auto v = r.str("norm_kernel")) p.norm_kernel = *v == "composite" ? wl::NormKernel::composite : wl::NormKernel::fused;
  if (auto v = r.str("mixed_precision"); v && *v == "amp") {
    // AMP: fp32 parameters and gradients, no separate master copy (the parameters are the master).
    p.mixed_precision = wl::MixedPrecision::amp;
    p.precision.weight_bytes = 4;
    p.precision.gradient_bytes = 4;
    p.precision.master_bytes = 0;
  }
  if (auto v = r.num("master_bytes")) {
    // The optimizer's copy of the weights it updates: 4 (fp32), 2 (Apex DistributedFusedAdam's
    // store_param_remainders: the low 16 bits of the fp32 value beside the bf16 parameter; or a bf16 optimizer with
    // FP8 parameters), 0 (the optimizer updates the 16-bit parameters directly).
    p.precision.master_bytes = *v;
    if (p.mixed_precision == wl::MixedPrecision::amp && *v > 0.0)
      key_error("master_bytes", "mixed_precision amp keeps fp32 parameters, which are the master copy: leave "
                                "master_bytes out");
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
  if (auto v = r.str("zero3_gather")) {
    p.zero3_gather = *v == "per_tensor_blocking" ? wl::Zero3Gather::per_tensor_blocking : wl::Zero3Gather::per_unit;
    if (p.zero != wl::ZeroStage::parameters)
      key_error("zero3_gather", "zero3_gather describes how ZeRO-3 gathers the sharded parameters: set zero 3 or "
                                "leave it out");
  }
  if (auto v = r.str("offload")) p.offload = *v == "optimizer" ? wl::Offload::optimizer : wl::Offload::none;
  if (auto v = r.integer("activation_offload_layers")) p.activation_offload_layers = *v;
  if (auto v = r.str("attention_kernel"))
    p.attention_kernel = *v == "fa1"   ? wl::AttentionKernel::fa1
                         : *v == "fa2" ? wl::AttentionKernel::fa2
                                       : wl::AttentionKernel::fa3;
  if (auto v = r.str("packed_documents")) {
    // One length ("512": every document 512 tokens) or a distribution as serving's input_dist spells it.
    std::string error;
    std::optional<model::LengthDist> dist;
    const bool whole = !v->empty() && v->find_first_not_of("0123456789") == std::string::npos;
    if (whole) {
      long long n = 0;
      const auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
      if (ec == std::errc() && end == v->data() + v->size() && n >= 1 && n <= kMaxLengthTokens)
        dist = model::LengthDist::fixed(n);
      else
        error = fmt::format("'{}': a document length must be a whole number of tokens from 1 to {}", *v,
                            kMaxLengthTokens);
    } else {
      dist = parse_length_dist(*v, error);
      if (!dist && !error.empty()) error += "; or one length, TOKENS";
    }
    if (!dist) key_error("packed_documents", error);
    else if (!p.flash_attention)
      key_error("packed_documents", fmt::format("'{}': per-document attention is the fused kernel's varlen form; "
                                                "unfused attention (flash_attention false) computes the whole s x s "
                                                "scores whatever the mask: set flash_attention true or leave "
                                                "packed_documents out",
                                                *v));
    else {
      p.packing.lengths = dist->points;
      p.packing.spec = *v;
    }
  }
  if (auto v = r.integer("lora_rank")) p.lora.rank = static_cast<int>(*v);
  if (auto v = r.str("lora_targets"))
    p.lora.targets = *v == "qkv"         ? wl::LoraTargets::qkv
                     : *v == "attention" ? wl::LoraTargets::attention
                     : *v == "mlp"       ? wl::LoraTargets::mlp
                                         : wl::LoraTargets::all;
  if (auto v = r.str("lora_base"))
    p.lora.base = *v == "nf4" ? wl::LoraBase::nf4 : *v == "int8" ? wl::LoraBase::int8 : *v == "fp8" ? wl::LoraBase::fp8 : wl::LoraBase::same;
  if (auto v = r.num("lora_dropout")) p.lora.dropout = *v;
  if (p.lora.rank == 0 && (r.str("lora_targets") || (r.str("lora_base") && *r.str("lora_base") != "same") ||
                           p.lora.dropout > 0.0)) {
    const std::string key = r.str("lora_targets")                                           ? "lora_targets"
                            : r.str("lora_base") && *r.str("lora_base") != "same" ? "lora_base"
                                                                                              : "lora_dropout";
    key_error(key, key + " is set but there are no adapters: give a LoRA rank (lora_rank / --lora-rank ≥ 1)");
  }
  if (auto v = r.boolean("overlap_grad_reduce")) p.overlap_grad_reduce = *v;
  if (auto v = r.boolean("overlap_param_gather")) p.overlap_param_gather = *v;
  if (auto v = r.integer("dp_max_ctas")) p.dp_max_ctas = int(*v);
  if (auto v = r.integer("dp_bucket_size")) {
    p.dp_bucket_size = *v;
    if (*v > 0 && *v < kMinBucketParams)
      key_error("dp_bucket_size",
                fmt::format("value {} is below {} parameters: dp_bucket_size counts parameters per gradient bucket "
                            "(Megatron's --ddp-bucket-size), and a bucket that small gives every tensor a collective "
                            "of its own; give 0 for the framework's default or at least {} (PyTorch's bucket_cap_mb "
                            "is in MiB: 25 MiB of bf16 gradients is 13107200 parameters)",
                            *v, kMinBucketParams, kMinBucketParams));
    if (*v > 0 && p.zero == wl::ZeroStage::parameters)
      key_error("dp_bucket_size", fmt::format("value {}: dp_bucket_size sets the gradient buckets of DDP and the "
                                              "distributed optimizer (zero 0-2); ZeRO-3 / FSDP reduces and gathers "
                                              "one unit per layer: leave it out",
                                              *v));
  }
  if (auto v = r.boolean("sharp")) p.dp_sharp = *v;
  if (auto v = r.boolean("defer_embedding_wgrad")) p.defer_embedding_wgrad = *v;
  if (auto v = r.integer("wgrad_deferral_limit")) {
    p.wgrad_deferral_limit = int(*v);
    // Megatron-LM arguments.py: "Invalid if `defer-embedding-wgrad-compute` is not set".
    if (!p.defer_embedding_wgrad)
      key_error("wgrad_deferral_limit",
                fmt::format("value {}: wgrad_deferral_limit counts the micro-batches whose LM-head weight gradient is "
                            "deferred, and is invalid without defer_embedding_wgrad (--defer-embedding-wgrad-compute; "
                            "Megatron-LM arguments.py)",
                            *v));
  }
  // Megatron-Core model_parallel_config.py: "Cannot defer embedding wgrad compute when pipeline model parallel is not
  // used" (a search that chooses PP itself gives no pp: deferral then applies to its layouts with PP > 1).
  if (p.defer_embedding_wgrad && j.contains("pp") && p.par.pp == 1)
    key_error("defer_embedding_wgrad",
              "true with pp 1: Megatron-Core refuses it (\"Cannot defer embedding wgrad compute when pipeline model "
              "parallel is not used\", model_parallel_config.py): the deferred GEMMs run in the pipeline flush");
  if (auto v = r.boolean("overlap_tp_comm")) p.overlap_tp_comm = *v;
  if (auto v = r.boolean("overlap_p2p_comm")) p.overlap_p2p_comm = *v;
  if (auto v = r.boolean("tp_async_backward")) p.tp_async_backward = *v;
  if (auto v = r.boolean("fused_wgrad_accumulation")) p.fused_wgrad_accumulation = *v;
  if (auto v = r.boolean("pp_scatter_gather")) p.pp_scatter_gather = *v;
  if (auto v = r.boolean("ep_a2a_overlap")) p.ep_a2a_overlap = *v;
  if (auto v = r.str("cuda_graphs"))
    p.cuda_graphs = *v == "layer"            ? wl::CudaGraphScope::layer
                    : *v == "attn"           ? wl::CudaGraphScope::attention
                    : *v == "full_iteration" ? wl::CudaGraphScope::full_iteration
                                             : wl::CudaGraphScope::none;
  if (auto v = r.boolean("moe_router_fusion")) p.moe_router_fusion = *v;
  if (auto v = r.boolean("activation_func_fp8_input_store")) p.activation_fp8_input_store = *v;
  if (auto v = r.boolean("fp8_dot_product_attention")) p.fp8_dot_product_attention = *v;
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
    if (p.recompute_modules != 0 && p.recompute == wl::Recompute::selective_op)
      key_error("recompute_modules", "recompute selective_op (TorchTitan's op-level policy) decides itself which ops "
                                     "are recomputed: leave recompute_modules (Megatron-Core's) out");
  }
  if (auto v = r.str("ep_dispatch")) p.ep_dispatch = *v == "deepep" ? wl::EpDispatch::deepep : wl::EpDispatch::all_to_all;
  if (auto v = r.str("attention_output_store"))
    p.attention_output = *v == "e5m6" ? wl::AttentionOutputStore::e5m6 : wl::AttentionOutputStore::separate;
  if (auto v = r.str("fp8_weight_copies"))
    p.fp8_weight_copies = *v == "per_microbatch"      ? wl::Fp8WeightCopies::per_microbatch
                          : *v == "cached_one_layout" ? wl::Fp8WeightCopies::cached_one_layout
                                                      : wl::Fp8WeightCopies::cached;
  if (auto v = r.str("param_layout"))
    p.param_layout = *v == "contiguous" ? wl::ParamLayout::contiguous : wl::ParamLayout::per_tensor;
  if (auto v = r.num("moe_imbalance")) p.moe_imbalance = *v;
  if (auto v = r.num("moe_capacity_factor")) p.moe_capacity_factor = *v;
  if (auto v = r.boolean("moe_pad_to_capacity")) p.moe_pad_to_capacity = *v;
  if (p.moe_pad_to_capacity && !p.moe_capacity_factor)
    key_error("moe_pad_to_capacity", "padding to the expert capacity needs moe_capacity_factor (Megatron-LM: "
                                     "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor)");
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
  if (p.cuda_graphs != wl::CudaGraphScope::none) j["cuda_graphs"] = wl::to_string(p.cuda_graphs);
  if (!p.moe_router_fusion) j["moe_router_fusion"] = false;
  if (p.activation_fp8_input_store) j["activation_func_fp8_input_store"] = true;
  if (p.fp8_dot_product_attention) j["fp8_dot_product_attention"] = true;
  if (p.fp8_weight_copies == wl::Fp8WeightCopies::per_microbatch) j["fp8_weight_copies"] = "per_microbatch";
  if (p.fp8_weight_copies == wl::Fp8WeightCopies::cached_one_layout) j["fp8_weight_copies"] = "cached_one_layout";
  if (p.param_layout == wl::ParamLayout::contiguous) j["param_layout"] = "contiguous";
  if (p.moe_imbalance != 1.0) j["moe_imbalance"] = p.moe_imbalance;
  if (p.moe_capacity_factor) j["moe_capacity_factor"] = *p.moe_capacity_factor;
  if (p.moe_pad_to_capacity) j["moe_pad_to_capacity"] = true;
  if (p.mtp_layers > 0) j["mtp_layers"] = p.mtp_layers;
  j["micro_batch"] = p.micro_batch;
  j["global_batch"] = p.global_batch;
  j["seq"] = p.seq_len;
  j["precision"] = std::string(hw::to_string(p.precision.compute));
  j["gradient_bytes"] = p.precision.gradient_bytes;
  {
    const bool fp32_params = p.precision.compute == hw::Precision::fp32 || p.precision.compute == hw::Precision::tf32 ||
                             p.mixed_precision == wl::MixedPrecision::amp;
    if (p.precision.master_bytes != (fp32_params ? 0.0 : 4.0)) j["master_bytes"] = p.precision.master_bytes;
  }
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
  j["recompute"] = wl::to_string(p.recompute);
  if (p.recompute == wl::Recompute::full && p.partial_recompute()) {
    j["recompute_method"] = p.recompute_method == wl::RecomputeMethod::block ? "block" : "uniform";
    j["recompute_num_layers"] = p.recompute_num_layers;
  }
  if (p.vocab_divisible_by) j["vocab_divisible_by"] = *p.vocab_divisible_by;
  j["flash_attention"] = p.flash_attention;
  if (p.dropout) j["dropout"] = *p.dropout;
  j["attention_kernel"] = p.attention_kernel == wl::AttentionKernel::fa1   ? "fa1"
                         : p.attention_kernel == wl::AttentionKernel::fa2 ? "fa2"
                                                                          : "fa3";
  if (p.packing.on()) j["packed_documents"] = p.packing.spec;
  j["kernels"] = p.kernels == wl::KernelStyle::eager ? "eager" : "fused";
  if (p.kernels == wl::KernelStyle::fused || p.cross_entropy == wl::CrossEntropyKernel::flash)
    j["cross_entropy"] = p.cross_entropy == wl::CrossEntropyKernel::unfused  ? "unfused"
                         : p.cross_entropy == wl::CrossEntropyKernel::native ? "native"
                         : p.cross_entropy == wl::CrossEntropyKernel::eager  ? "eager"
                         : p.cross_entropy == wl::CrossEntropyKernel::flash  ? "flash"
                                                                              : "te";
  if (p.norm_kernel == wl::NormKernel::composite) j["norm_kernel"] = "composite";
  j["mixed_precision"] = p.mixed_precision == wl::MixedPrecision::amp ? "amp" : "megatron";
  if (p.offload == wl::Offload::optimizer) j["offload"] = "optimizer";
  if (p.zero3_gather == wl::Zero3Gather::per_tensor_blocking) j["zero3_gather"] = "per_tensor_blocking";
  if (p.activation_offload_layers > 0) j["activation_offload_layers"] = p.activation_offload_layers;
  if (p.lora.on()) {
    j["lora_rank"] = p.lora.rank;
    j["lora_targets"] = wl::to_string(p.lora.targets);
    j["lora_base"] = wl::to_string(p.lora.base);
    if (p.lora.dropout > 0.0) j["lora_dropout"] = p.lora.dropout;
  }
  j["overlap_grad_reduce"] = p.overlap_grad_reduce;
  j["overlap_param_gather"] = p.overlap_param_gather;
  if (p.dp_max_ctas > 0) j["dp_max_ctas"] = p.dp_max_ctas;
  if (p.dp_bucket_size > 0) j["dp_bucket_size"] = p.dp_bucket_size;
  if (p.dp_sharp) j["sharp"] = true;
  if (p.defer_embedding_wgrad) j["defer_embedding_wgrad"] = true;
  if (p.wgrad_deferral_limit > 0) j["wgrad_deferral_limit"] = p.wgrad_deferral_limit;
  j["overlap_tp_comm"] = p.overlap_tp_comm;
  if (!p.overlap_p2p_comm) j["overlap_p2p_comm"] = false;
  if (!p.tp_async_backward) j["tp_async_backward"] = false;
  if (!p.fused_wgrad_accumulation) j["fused_wgrad_accumulation"] = false;
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
