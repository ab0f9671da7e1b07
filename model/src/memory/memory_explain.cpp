// The --explain derivation tree of training_memory: the stage it reports, its model states, activations, logits and
// runtime overheads. The notes cite the sources listed at the top of memory.cpp ([ZeRO], [K22], [N21], [D22]).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/memory.hpp"
#include "memory_core.hpp"
#include "quant_recipe.hpp"
#include "runtime_context.hpp"

namespace gpuplan::model::detail {
namespace {

/// optimizer_state_bytes (memory.cpp) in words, for the derivation.
const char* optimizer_formula(const wl::TrainingPlan& plan) {
  const bool bf16 = plan.optimizer_states == wl::StateDtype::bf16;
  switch (plan.optimizer) {
    case wl::OptimizerKind::adamw:
      return bf16 ? "AdamW with bf16 moments: 2 bf16 states (m, v) = 4 B/param" : "AdamW: 2 fp32 states (m, v) = 8 B/param";
    case wl::OptimizerKind::adamw_8bit:
      return "8-bit AdamW (bitsandbytes): 2 states × (1 B + 4 B fp32 absmax / 2048-value block) = 2.0039 B/param";
    case wl::OptimizerKind::sgd:
      return bf16 ? "SGD with a bf16 momentum: 1 bf16 state = 2 B/param" : "SGD with momentum: 1 fp32 state = 4 B/param";
  }
  return "";
}

std::string gib(units::Bytes b) { return units::format(b, units::BytePrefix::binary); }
std::string B(double b) { return gib(units::bytes(b)); }

/// What every part of the explanation reads: explain_memory's inputs, the heaviest stage it reports, and the
/// quantities derived once from the plan.
struct Explained {
  const wl::TransformerArch& a;
  const ParameterCounts& params;
  const wl::TrainingPlan& plan;
  const Ctx& c;
  const MemoryCore& core;
  const StageMemory& h;  // the heaviest stage (core.heaviest())
  int p;                 // pipeline stages
  int v;                 // model chunks per stage
  double t;              // tensor parallel
  double ep;             // expert parallel
  std::int64_t m;        // micro-batches per step
  int zero;              // ZeRO stage
  std::string stage_name;
  Origin cfg;
  Origin par_o;
  Origin prec_o;
  Origin cnt;
  bool fp8_any_layout;  // the GPU's FP8 GEMMs take either operand layout (quant_recipe.hpp)
};

/// The root node: its inputs, the verdict, and which pipeline stage is reported.
void explain_root(const Explained& e, const hw::GpuSpec& gpu, TrainingMemory& r) {
  using units::format;
  using units::format_number;
  const auto& par = e.plan.par;
  const auto& plan = e.plan;
  const auto& core = e.core;
  const int p = e.p, zero = e.zero;
  const Origin& par_o = e.par_o;
  const std::string& stage_name = e.stage_name;
  const StageMemory& first = core.first;
  const StageMemory& last = core.two_stages ? core.last : core.first;
  Derivation& d = r.derivation;
  d.id = "memory";
  d.title = "Training memory per GPU";
  d.formula =
      "total = weights + gradients + master weights + optimizer states + activations + logits + CUDA context "
      "+ NCCL buffers + fragmentation";
  d.inputs = {{"capacity", fmt::format("{} ({})", gib(r.capacity), format(r.capacity)),
               capacity_basis(gpu),
               Origin::datasheet(
                   gpu.info.cite(gpu.memory.device_reported ? "/memory/device_reported_MiB" : "/memory/capacity_GB"))},
              {"t·p·d·c·e", fmt::format("{}·{}·{}·{}·{}", par.tp, par.pp, par.dp, par.cp, par.ep),
               "tensor·pipeline·data·context·expert parallel", par_o},
              {"ZeRO", fmt::format("stage {}", zero), "ZeRO/FSDP sharding stage", Origin::user("plan.zero")},
              {"recompute", wl::to_string(plan.recompute),
               "activation recomputation", Origin::user("plan.recompute")}};
  d.result = fmt::format("{} of {} ({}): {}", gib(r.total), gib(r.capacity), stage_name,
                         r.fits ? "fits" : "does not fit");
  d.set(r.total.raw(), Unit::bytes_binary, Fold::sum);
  if (p > 1) {
    d.notes.push_back(
        fmt::format("heaviest stage: {} — first stage {} (holds {} in-flight micro-batches of its {} "
                    "layers and the embedding), last stage {} (holds the LM head and the logits)",
                    stage_name, gib(units::bytes(first.total)), format_number(first.layer_factor),
                    first.shape->layers, gib(units::bytes(last.total))));
    if (core.has_middle)
      d.notes.push_back(fmt::format("uneven split: middle stage {} holds {} layers ({} MoE): {}",
                                    core.middle.shape->index, core.middle.shape->layers, core.middle.shape->moe_layers,
                                    gib(units::bytes(core.middle.total))));
  }
}

/// The inputs of a model-state node (weights, gradients, master weights, optimizer states): P_gpu's terms and the
/// state's bytes per parameter b.
std::vector<DerivationInput> states_inputs(const Explained& e, double bytes_per, const std::string& b_sym,
                                           const std::string& b_meaning, Origin bo) {
  using units::format_count;
  using units::format_number;
  std::vector<DerivationInput> in = {
      {"P_stage", format_count(e.h.p_dense + e.h.p_expert),
       fmt::format("parameters of {} ({} in routed experts)", e.stage_name, format_count(e.h.p_expert)), e.cnt},
      {"t", format_count(e.t), "tensor parallel", e.par_o},
      {"ep", format_count(e.ep), "expert parallel (routed experts only)", e.par_o},
      {b_sym, format_number(bytes_per), b_meaning, std::move(bo)},
      {"N", format_number(e.core.n_dense), "ZeRO shard group", e.par_o}};
  if (e.plan.par.expert_tp() != e.plan.par.tp)
    in.insert(in.begin() + 3, {"etp", format_count(double(e.plan.par.expert_tp())),
                               "expert tensor parallel (routed experts only; parallel folding)", e.par_o});
  return in;
}

std::string shard_note(const Explained& e) {
  using units::format_number;
  const auto& par = e.plan.par;
  const char* group = par.shard_group > 0        ? "hybrid shard group"
                      : stage_copies(e.plan) > 1 ? "dp·cp × 2: DualPipe's mirror rank holds the same stages"
                                                 : "dp·cp";
  return par.expert_tp() != par.tp
             ? fmt::format("ZeRO shard group N = {} ({}); routed experts over the expert-DP group N·t/(etp·ep) = {} "
                           "(parallel folding: expert TP {})",
                           format_number(e.core.n_dense), group, format_number(e.core.n_expert), par.expert_tp())
             : fmt::format("ZeRO shard group N = {} ({}); routed experts over N/ep = {}", format_number(e.core.n_dense),
                           group, format_number(e.core.n_expert));
}

/// The weights node: P_gpu·b_w, and what the weights include beyond it (gathered, FP8-cached and autocast copies).
void explain_weights(const Explained& e, const TrainingMemory& r, Derivation& d) {
  using units::format_count;
  using units::format_number;
  const auto& plan = e.plan;
  const auto& pr = plan.precision;
  const auto& params = e.params;
  const auto& c = e.c;
  const StageMemory& h = e.h;
  const int zero = e.zero;
  const Origin& prec_o = e.prec_o;
  d.children.push_back({"memory.weights",
                        "Weights",
                        fmt::format("P_gpu·b_w{} ; P_gpu = P_dense/t + P_experts/({}·ep) = {}", zero >= 3 ? " / N" : "",
                                    e.plan.par.expert_tp() != e.plan.par.tp ? "etp" : "t", format_count(h.p_gpu)),
                        states_inputs(e, pr.weight_bytes, "b_w", "bytes per working weight", prec_o),
                        {},
                        {shard_note(e)},
                        {}});
  d.children.back().set(r.weights.raw(), Unit::bytes_binary);
  if (params.mtp > 0)
    d.children.back().notes.push_back(
        fmt::format("{} multi-token-prediction parameters are not counted (as in parameter_counts' total)",
                    format_count(double(params.mtp))));
  const bool torch_loop = plan.kernels == wl::KernelStyle::eager;
  if (h.gathered_w > 0.0 && torch_loop) {
    d.children.back().notes.push_back(fmt::format(
        "includes {} of gathered parameters in the compute dtype: PyTorch FSDP keeps the root unit (embedding, final "
        "norm, LM head) gathered from its forward to its backward and gathers one layer ({} params per GPU) for the "
        "backward (measured allocator timelines, data/validation/measured/h200-sxm-141gb/mem_*.json)",
        B(h.gathered_w), format_count(h.largest_layer_gpu)));
  } else if (h.gathered_w > 0.0) {
    d.children.back().notes.push_back(fmt::format(
        "includes {} of gathered parameters: ZeRO-3/FSDP materialises the largest layer ({} params per GPU) × {} "
        "(current + prefetched unit)",
        B(h.gathered_w), format_count(h.largest_layer_gpu), plan.overlap_param_gather ? 2 : 1));
  }
  if (plan.lora.on())
    d.children.back().notes.push_back(fmt::format(
        "LoRA rank {} on {}: the frozen base at {} B per weight ({}) plus {} adapter parameters per GPU at {} B; only "
        "the adapters have gradients, master weights and optimizer states (Hu et al. 2021; QLoRA NF4: Dettmers et "
        "al. 2023 §3)",
        plan.lora.rank, wl::to_string(plan.lora.targets),
        format_number(base_weight_bytes(plan), 4), wl::to_string(plan.lora.base),
        format_count(h.lora_adapters), format_number(lora_adapter_weight_bytes(plan))));
  if (pr.fp8_params)
    d.children.back().notes.push_back(
        "FP8 parameters: the Transformer Engine layers' weights at 1 B; the embedding and the LM head stay bf16 (2 B)");
  const bool per_mb = plan.fp8_weight_copies == wl::Fp8WeightCopies::per_microbatch;
  const bool fp8_stored = pr.fp8_params || (plan.lora.on() && plan.lora.base == wl::LoraBase::fp8);
  if (per_mb && fp8_stored && h.fp8_cache == 0.0 && !e.fp8_any_layout && detail::quantised_gemms(plan))
    d.children.back().notes.push_back(
        "FP8 weight copies per micro-batch (disable_parameter_transpose_cache under Transformer Engine <= 1.10): "
        "the FP8 parameters keep no transpose; each backward dgrad GEMM transposes its weight into a temporary "
        "(TransformerEngine v1.10 transformer_engine/pytorch/module/linear.py, Float8Tensor.transpose_2d without "
        "fill_cache)");
  const bool one_layout = plan.fp8_weight_copies == wl::Fp8WeightCopies::cached_one_layout;
  if (one_layout && detail::quantised_gemms(plan))
    d.children.back().notes.push_back(fmt::format(
        "FP8 weight copies in one layout (fp8_weight_copies cached_one_layout): {} B per GEMM weight kept across "
        "micro-batches{}; the layout the other GEMM needs is transposed from it in every micro-batch into a "
        "temporary (deepseek-ai/profile-data train.json, commit 449602428a1b: no weight quantisation in a DualPipe "
        "forward/backward pair, one cuda::batched_transpose over each GEMM weight's 128x128 tiles per chunk; DeepGEMM "
        "README: SM90 FP8 GEMMs take only the NT layout)",
        format_number(h.fp8_cache_per_weight, 4), fp8_stored ? " (the FP8 parameter itself: nothing added)" : ""));
  if (h.fp8_cache > 0.0 && per_mb && !fp8_stored)
    d.children.back().notes.push_back(fmt::format(
        "includes {}: the FP8 GEMM weights quantised in each micro-batch's forward and saved for its backward, {} B "
        "per weight per micro-batch in flight (disable_parameter_transpose_cache: Transformer Engine gets "
        "is_first_microbatch=None and caches no workspace; linear.py saves weight_fp8 for the backward)",
        B(h.fp8_cache), format_number(h.fp8_cache_per_weight, 4)));
  else if (h.fp8_cache > 0.0 && one_layout)
    d.children.back().notes.push_back(fmt::format("includes {}: the FP8 GEMM weights kept in one layout",
                                                  B(h.fp8_cache)));
  else if (h.fp8_cache > 0.0)
    d.children.back().notes.push_back(fmt::format(
        "includes {}: the FP8 GEMM weights Transformer Engine caches across micro-batches, {} B per weight ({}; "
        "TransformerEngine transformer_engine/pytorch/module/linear.py get_weight_workspace)",
        B(h.fp8_cache), format_number(h.fp8_cache_per_weight, 4),
        e.fp8_any_layout && (pr.recipe == wl::QuantRecipe::delayed || pr.recipe == wl::QuantRecipe::tensorwise)
            ? "the FP8 copy, which this GPU's FP8 GEMMs read in either layout: no transpose is kept"
        : pr.fp8_params ? "the transpose for the backward; the FP8 parameter is the forward's copy"
                        : "the FP8 copy for the forward and its transpose for the backward's dgrad"));
  if (h.amp_copies > 0.0 && h.acts_at_peak)
    d.children.back().notes.push_back(fmt::format(
        "includes {}: torch.autocast's {}-byte copies of the GEMM weights, cached in the forward and kept by each "
        "nn.Linear for its backward (measured allocator timelines)",
        B(h.amp_copies), format_number(c.ab)));
}

/// The gradients, master weights and optimizer states nodes.
void explain_other_states(const Explained& e, const TrainingMemory& r, Derivation& d) {
  const auto& plan = e.plan;
  const auto& pr = plan.precision;
  const StageMemory& h = e.h;
  const int zero = e.zero;
  const Origin& prec_o = e.prec_o;
  const double opt_b = optimizer_state_bytes(plan);
  d.children.push_back({"memory.gradients",
                        "Gradients",
                        fmt::format("P_gpu·b_g{}", zero >= 2 ? " / N" : ""),
                        states_inputs(e, pr.gradient_bytes, "b_g", "bytes per gradient", prec_o),
                        {},
                        {},
                        {}});
  d.children.back().set(r.gradients.raw(), Unit::bytes_binary);
  if (h.gathered_g > 0.0)
    d.children.back().notes.push_back(
        fmt::format("includes {}: {}", B(h.gathered_g),
                    plan.zero == wl::ZeroStage::parameters
                        ? "the unsharded gradient of one layer before its reduce-scatter"
                        : "PyTorch DDP's gradient buckets, allocated across steps (one more copy of the gradients)"));
  if (!h.grads_at_peak)
    d.children.back().notes.push_back(fmt::format(
        "the per-parameter gradients ({}) are not alive at the peak: PyTorch's zero_grad(set_to_none=True) frees them "
        "and the backward allocates them as it frees the saved activations, so the peak is the backward's start",
        B(h.grads)));
  if (!h.acts_at_peak)
    d.children.back().notes.push_back(fmt::format(
        "the peak is the backward's end: every gradient ({}) is allocated and every saved activation ({} + logits {}) "
        "freed; at the backward's start the activations would weigh less than the gradients",
        B(h.grads), B(h.activations), B(h.logits_b)));
  d.children.push_back({"memory.master_weights",
                        "Master weights",
                        fmt::format("P_gpu·b_m{}", zero >= 1 ? " / N" : ""),
                        states_inputs(e, pr.master_bytes, "b_m", "bytes per master weight (fp32 copy)", prec_o),
                        {},
                        {"[ZeRO] §5: P_os shards the fp32 master weights with the optimizer states"},
                        {}});
  d.children.back().set(r.master_weights.raw(), Unit::bytes_binary);
  const bool offloaded = plan.offload == wl::Offload::optimizer;
  if (offloaded)
    d.children.back().notes.push_back(
        fmt::format("CPU offload: 0 on the GPU; the shard's master weights and optimizer states ({}) are in host "
                    "memory (ZeRO-Offload, Ren et al. 2021)",
                    B(h.host)));
  d.children.push_back({"memory.optimizer_states",
                        "Optimizer states",
                        fmt::format("P_gpu·b_o{} ; {}", zero >= 1 ? " / N" : "", optimizer_formula(plan)),
                        states_inputs(e, opt_b, "b_o", "optimizer-state bytes per parameter",
                                      Origin::constant(optimizer_formula(plan))),
                        {},
                        {},
                        {}});
  d.children.back().set(r.optimizer_states.raw(), Unit::bytes_binary);
  if (offloaded) d.children.back().notes.push_back("CPU offload: kept in host memory, 0 on the GPU");
  if (plan.optimizer == wl::OptimizerKind::adamw_8bit)
    d.children.back().notes.push_back(
        "[D22] §2: block-wise quantisation, 2048 values per block, one fp32 absmax per "
        "block; tensors under 4096 elements stay 32-bit (negligible)");
}

/// The activations node: what the heaviest stage stores for its in-flight micro-batches, with the per-layer
/// derivations and the textbook rule of thumb beside the term-by-term count.
Derivation explain_activations(const Explained& e, const TrainingMemory& r, ActivationLayout layout) {
  using units::format;
  using units::format_count;
  using units::format_number;
  const auto& a = e.a;
  const auto& plan = e.plan;
  const auto& par = plan.par;
  const auto& c = e.c;
  const StageMemory& h = e.h;
  const int p = e.p, v = e.v;
  const double t = e.t;
  const std::int64_t m = e.m;
  const Origin& cfg = e.cfg;
  const Origin& par_o = e.par_o;
  const Origin& prec_o = e.prec_o;
  Derivation act;
  act.id = "memory.activations";
  act.title = "Activations";
  act.formula =
      "in_flight · Σ_stage layers stored(layer) + embedding dropout (first) + final norm/LM-head inputs "
      "(last) + max(0, recomputation working set − logits buffers − final norm/LM-head inputs)";
  const char* rmode = plan.recompute == wl::Recompute::none        ? "none: every saved tensor"
                      : plan.recompute == wl::Recompute::selective ? "selective: all but the attention core"
                      : plan.recompute == wl::Recompute::selective_op
                          ? "selective_op: the block input and the outputs of the ops TorchTitan's policy keeps"
                          : "full: the layer input only (s·b·h·a_b)";
  act.inputs = {
      {"s", format_count(double(plan.seq_len)), "sequence length", Origin::user("plan.seq_len")},
      {"b", format_count(double(plan.micro_batch)), "micro-batch (sequences)", Origin::user("plan.micro_batch")},
      {"c", format_count(double(std::max(1, par.cp))), "context parallel (divides the sequence)", par_o},
      {"t", format_count(t), "tensor parallel", par_o},
      {"SP", c.sp ? "on" : "off", "sequence parallelism", par_o},
      {"h", format_count(double(a.hidden)), "hidden size", cfg},
      {"a", format_count(double(a.heads)), "attention heads", cfg},
      {"a_b", format_number(c.ab), "bytes per stored activation", prec_o},
      {"recompute", rmode, "what each layer keeps", Origin::user("plan.recompute")},
      {"in_flight", format_number(h.layer_factor), "micro-batches of the stage's layers held at the peak",
       Origin::derived(plan.dualpipe() ? "DualPipe (DeepSeek-V3 Table 2; deepseek-ai/DualPipe DualPipe.step): p − h "
                                         "micro-batches of the shallower stage, h + 1 of the deeper, over their sum"
                       : v > 1 ? "interleaved: min(2(p−i−1) + (v−1)p + 1, m·v) chunks / v"
                               : "1F1B: min(p − i, m)")},
      {"m", format_count(double(m)), "micro-batches per step (global / (micro·dp))",
       Origin::user("plan.global_batch")}};
  act.set(r.activations.raw(), Unit::bytes_binary);
  act.notes.push_back(fmt::format("stored by the stage's {} layers: {}", h.shape->layers, B(h.stored_layers)));
  if (h.extra_first > 0) act.notes.push_back(fmt::format("embedding dropout masks: {}", B(h.extra_first)));
  if (h.extra_last > 0)
    act.notes.push_back(fmt::format("final norm and output-projection inputs: {}", B(h.extra_last)));
  if (h.deferred_wgrad > 0)
    act.notes.push_back(fmt::format(
        "deferred LM-head wgrad (--defer-embedding-wgrad-compute): the output layer's inputs and output gradients "
        "(s·b·V/t·a_b each) of the other deferred micro-batches, kept until the flush: {}",
        B(h.deferred_wgrad)));
  if (h.working_set > 0)
    act.notes.push_back(fmt::format(
        "recomputation working set (one layer, one micro-batch, during its backward): {}; it does not coexist with the "
        "logits/loss buffers ({}) or the final norm/LM-head inputs, so the peak adds max(0, working set − logits − "
        "those inputs) = {}",
        B(h.working_set), B(h.logits_b), B(std::max(0.0, h.working_set - h.logits_b - h.extra_last))));
  if (p > 1 && plan.dualpipe())
    act.notes.push_back(fmt::format(
        "DualPipe: device i holds stage i (forward direction) and stage p−1−i (reverse direction), their layers "
        "summed; PP + 1 chunk micro-batches of activations (DeepSeek-V3 §3.2.1, Table 2): with h = min(i, p−1−i) = "
        "{}, {} of the shallower stage ({} layers) and {} of the deeper ({} layers)",
        std::min(h.shape->index, p - 1 - h.shape->index), p - std::min(h.shape->index, p - 1 - h.shape->index),
        h.shape->layers - h.shape->deep_layers, std::min(h.shape->index, p - 1 - h.shape->index) + 1,
        h.shape->deep_layers));
  else if (p > 1)
    act.notes.push_back(
        v > 1 ? "interleaved schedule: the first stage holds L·(1 + (p−1)/(p·v)) layers' worth ([K22] §4.2.3, [N21])"
              : "1F1B: the first pipeline stage is the heaviest in activations: it holds p in-flight "
                "micro-batches of its L/p layers, L layers' worth ([K22] §4.2.3)");
  if (m < p && p > 1)
    act.notes.push_back(
        fmt::format("only m = {} micro-batches exist, fewer than p = {}: at most m are in flight", m, p));
  {
    // The textbook rule of thumb (12·s·b·h·2 bytes per layer, one GPU, no recomputation) next to this count for the
    // same layer (textbook T6).
    wl::TrainingPlan single = plan;
    single.par.tp = single.par.cp = 1;
    single.par.sequence_parallel = false;
    single.recompute = wl::Recompute::none;
    const double tokens1 = double(plan.seq_len) * double(plan.micro_batch);
    const double thumb = 12.0 * tokens1 * double(a.hidden) * 2.0;
    const double ours1 = activation_bytes_per_layer(a, single, layout).raw();
    act.notes.push_back(fmt::format(
        "one GPU (t = c = 1), no recomputation: rule of thumb 12·s·b·h·2 B per layer gives {} per layer, {} ({}) "
        "for {} layers; the term-by-term count gives {} per layer, {} ({}) for {} layers",
        B(thumb), B(thumb * double(a.layers)), format(units::bytes(thumb * double(a.layers))), a.layers, B(ours1),
        B(ours1 * double(a.layers)), format(units::bytes(ours1 * double(a.layers))), a.layers));
  }
  if (a.moe)
    act.notes.push_back(
        "MoE: balanced routing assumed (each GPU receives k copies of its tokens); expert tensor "
        "parallelism = t (the Megatron-Core default), so expert intermediates split by t");
  if (detail::layers_differ_beyond_ffn(a)) {
    // Hybrids and shared-indexer models: one derivation per layer kind, named by its mixer and FFN.
    for_each_layer_kind(a, [&](LayerKind k, std::int64_t n) {
      Derivation ld = layer_derivation(c, k, fmt::format("memory.activations.kind{}", k.index()));
      ld.title += fmt::format(" ({} such layers)", n);
      act.children.push_back(std::move(ld));
    });
  } else {
    if (a.layers > a.moe_layer_count()) act.children.push_back(layer_derivation(c, false, "memory.activations.layer"));
    if (a.moe && a.moe_layer_count() > 0)
      act.children.push_back(layer_derivation(c, true, "memory.activations.moe_layer"));
  }
  return act;
}

/// The logits and loss buffers, and the runtime overheads (CUDA context, NCCL buffers, fragmentation).
void explain_logits_and_overheads(const Explained& e, const TrainingMemory& r, const RuntimeOverheads& overheads,
                                  const hw::GpuSpec& gpu, Derivation& d) {
  using units::format_count;
  using units::format_number;
  const auto& a = e.a;
  const auto& c = e.c;
  const StageMemory& h = e.h;
  const double t = e.t;
  const double comms = e.core.comms;
  const bool flash_loss = e.plan.cross_entropy == wl::CrossEntropyKernel::flash;  // any kernel style
  const bool torch_loop = e.plan.eager_loss();  // never with flash_loss
  const bool te_loss = !torch_loop && e.plan.cross_entropy == wl::CrossEntropyKernel::te;
  const Origin& cfg = e.cfg;
  const Origin& par_o = e.par_o;
  d.children.push_back(
      {"memory.logits",
       "Logits and loss buffers",
       flash_loss   ? "(s/c)·b·V/t·(a_b + a_b): logits and the cross entropy's new gradient, both in the activation dtype"
       : torch_loop ? "(s/c)·b·V/t·(a_b + 4 + 4): logits, log_softmax's fp32 output and its fp32 incoming gradient"
       : te_loss    ? "(s/c)·b·V/t·a_b: logits in the activation dtype, the cross entropy's gradient written into them"
                  : "(s/c)·b·V/t·(a_b + 4): logits in the activation dtype + their fp32 upcast for the cross entropy",
       {{"V", format_count(double(a.vocab)), "vocabulary", cfg},
        {"(s/c)·b", format_count(c.tokens), "tokens of one micro-batch on this GPU", Origin::user("plan")},
        {"t", format_count(t), "tensor parallel (vocab-parallel output layer)", par_o}},
       {},
       {h.logits_b <= 0 ? "the heaviest stage is not the last: it holds no logits"
        : flash_loss     ? "FlashAttention's fused cross entropy (cross_entropy flash; flash_attn.losses.cross_entropy, "
                           "csrc/xentropy) saves the 16-bit logits and fp32 row statistics; its backward writes the "
                           "gradient into a new 16-bit tensor (inplace_backward False): no fp32 copy"
        : torch_loop     ? "PyTorch's cross_entropy under autocast: log_softmax reads the bf16 logits and keeps its fp32 "
                           "output; its backward's fp32 incoming gradient coexists with both (measured allocator "
                           "timelines, data/validation/measured/h200-sxm-141gb/mem_*.json)"
        : te_loss        ? "Transformer Engine's parallel cross entropy (cross_entropy te) computes the loss from the "
                           "logits and writes its gradient into the same tensor, which it saves for the backward: no "
                           "fp32 copy (TransformerEngine transformer_engine/pytorch/triton/cross_entropy.py up to "
                           "v2.17; v2.18 allocates an fp32 gradient beside the logits)"
                         : "Megatron's vocab-parallel cross entropy upcasts to fp32 and computes the softmax in place "
                           "([K22] §4.3: 4sbv/t); the bf16 logits are alive while it runs"},
       {}});
  d.children.back().set(r.logits.raw(), Unit::bytes_binary);
  if (h.mtp_logits > 0.0) {
    d.children.back().formula += " + n_mtp·(s/c)·b·V/t·4";
    d.children.back().inputs.push_back(
        {"n_mtp", format_count(double(h.shape->mtp)), "multi-token-prediction depths on this stage", par_o});
    d.children.back().notes.push_back(fmt::format(
        "includes {}: each multi-token-prediction depth runs the shared output head over its own representation and "
        "takes a cross entropy over those logits (DeepSeek-V3 arXiv:2412.19437 §2.2, 'MTP Training Objective'); its "
        "fp32 softmax is kept for the backward while the main head's loss runs (Megatron-Core process_mtp_loss "
        "computes the MTP loss first); the depth's head inputs are in the activations",
        B(h.mtp_logits)));
  }
  d.children.push_back({"memory.cuda_context",
                        "CUDA context and cuBLAS workspace",
                        "constant per process",
                        {{"ctx", gib(overheads.cuda_context), "CUDA context + kernels + cuBLASLt workspace",
                          context_origin(overheads.cuda_context, gpu, overheads.origin)}},
                        {},
                        {},
                        {}});
  d.children.back().set(r.cuda_context.raw(), Unit::bytes_binary);
  d.children.push_back(
      {"memory.nccl",
       "NCCL buffers",
       "communicators · buffers per communicator",
       {{"communicators", format_number(comms), "TP, PP, DP·CP, CP and EP groups with more than one GPU", par_o},
        {"per communicator", gib(overheads.nccl_buffers), "NCCL buffers", Origin::assumption(overheads.origin)}},
       {},
       {},
       {}});
  d.children.back().set(r.nccl_buffers.raw(), Unit::bytes_binary);
  std::string frag_origin;
  const double frag_f = fragmentation_fraction(overheads, e.plan, &frag_origin);
  const bool contiguous = e.plan.param_layout == wl::ParamLayout::contiguous;
  d.children.push_back(
      {"memory.fragmentation",
       "Allocator fragmentation",
       "f · (weights + gradients + master + optimizer + activations + logits)",
       {{"f", format_number(frag_f), "fragmentation fraction",
         contiguous ? Origin::measurement(frag_origin) : Origin::assumption(frag_origin)}},
       {},
       {},
       {}});
  d.children.back().set(r.fragmentation.raw(), Unit::bytes_binary);
}

}  // namespace

void explain_memory(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                    const hw::GpuSpec& gpu, const RuntimeOverheads& overheads, ActivationLayout layout, const Ctx& c,
                    const MemoryCore& core, TrainingMemory& r) {
  const auto& par = plan.par;
  const int p = std::max(1, par.pp);
  const StageMemory& h = core.heaviest();
  const std::string stage_name =
      p == 1 ? std::string("the only pipeline stage")
             : fmt::format("pipeline stage {} of {} ({})", h.shape->index, p,
                           h.shape->first ? "first" : h.shape->last ? "last" : "a middle stage of an uneven split");
  const Explained e{a,
                    params,
                    plan,
                    c,
                    core,
                    h,
                    p,
                    plan.model_chunks(),
                    c.t,
                    double(std::max(1, par.ep)),
                    std::max<std::int64_t>(1, plan.micro_batches()),
                    static_cast<int>(plan.zero),
                    stage_name,
                    Origin::model_config(a.source),
                    Origin::user("plan.par"),
                    Origin::user("plan.precision"),
                    Origin::derived("parameter_counts"),
                    fp8_any_layout(gpu)};
  explain_root(e, gpu, r);
  Derivation& d = r.derivation;
  explain_weights(e, r, d);
  explain_other_states(e, r, d);
  d.children.push_back(explain_activations(e, r, layout));
  explain_logits_and_overheads(e, r, overheads, gpu, d);
}

}  // namespace gpuplan::model::detail
