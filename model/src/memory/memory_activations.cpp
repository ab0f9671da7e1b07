// The activation-memory model of one layer (memory_activations.hpp): the fold of the per-op saved tensors
// (activation_op_terms.cpp) over the layer's op graph and the head graph, their sums, what recomputation keeps, and the
// derivation. Sources: see memory.cpp.
#include "memory_activations.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "activation_op_terms.hpp"
#include "graph_memo.hpp"

namespace gpuplan::model::detail {

using units::format;
/// Memory in GiB, as the rest of the training-memory derivation and every front end print it.
namespace {
std::string gib(units::Bytes b) { return format(b, units::BytePrefix::binary); }
}  // namespace
using units::format_count;
using units::format_number;

Ctx make_ctx(const wl::TransformerArch& a, const wl::TrainingPlan& plan, ActivationLayout layout) {
  if (layout == ActivationLayout::from_plan)
    layout = plan.kernels == wl::KernelStyle::eager ? ActivationLayout::torch_eager : ActivationLayout::megatron;
  Ctx c{a, plan, layout};
  c.ab = plan.precision.activation_bytes;
  // Transformer Engine's Linear/LayerNormLinear/LayerNormMLP save their FP8-cast input for the wgrad GEMM
  // (transformer_engine/pytorch/module/linear.py: the input quantizer's columnwise usage, saved in place of the
  // high-precision input): 1 B per element. A PyTorch loop (eager) has no such path: its GEMM inputs stay a_b.
  c.gi = plan.precision.compute == hw::Precision::fp8 && !c.eager() ? 1.0 : c.ab;
  if (plan.lora.on()) {
    const auto tg = plan.lora.targets;
    c.wgrad_qkv = tg != wl::LoraTargets::mlp;
    c.wgrad_o = tg == wl::LoraTargets::attention || tg == wl::LoraTargets::all;
    c.wgrad_mlp = tg == wl::LoraTargets::mlp || tg == wl::LoraTargets::all;
    c.lora = true;
    c.lora_dropout = plan.lora.dropout > 0.0;
  }
  c.t = std::max(1, plan.par.tp);
  c.sp = plan.par.sequence_parallel && plan.par.tp > 1;
  c.lora_gathers = c.lora && c.sp && plan.overlap_tp_comm;
  // Dropout as the model's config states it, else the stated GPT-style assumption (TransformerArch::*_dropout_on).
  c.attention_dropout = plan.attention_dropout(a);
  c.dropout = plan.hidden_dropout(a);
  c.s = static_cast<double>(plan.seq_len);
  c.tokens = static_cast<double>(plan.seq_len) / std::max(1, plan.par.cp) * static_cast<double>(plan.micro_batch);
  return c;
}

namespace {
bool ffn_part(model::Part p) {
  return p == model::Part::dense_mlp || p == model::Part::router || p == model::Part::routed_experts ||
         p == model::Part::shared_experts;
}
bool mixer_part(model::Part p) { return p == model::Part::attention || p == model::Part::ssm; }
}  // namespace

/// Saved tensors of one layer, per token of one micro-batch, before the TP split: a fold over the layer's op graph
/// (build_layer_graph) in execution order. The mixer block — its input norm, the mixer's ops (attention: QKV
/// projection, DSA indexer, core, output; Mamba-2 / gated DeltaNet: in_proj, scan, out_proj), the dropout mask after
/// it — then the norms beside the blocks (Gemma's post-norms, counted as one term), then the FFN block — its input
/// norm, its ops, the dropout mask after it. Nemotron-H's single-block layers have one of the two blocks.
std::vector<Term> layer_terms(const Ctx& c, const OpGraph& g) {
  const double h = static_cast<double>(c.a.hidden);
  std::vector<Term> v;
  v.reserve(32);
  // The blocks' input norms: the first norm, before a mixer op; the last norm before the first FFN op.
  std::size_t first_ffn = g.size(), first_mixer = g.size(), last_mixer = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (ffn_part(g[i].part) && first_ffn == g.size()) first_ffn = i;
    if (mixer_part(g[i].part) && g[i].kind != OpKind::norm) {
      first_mixer = std::min(first_mixer, i);
      last_mixer = i;
    }
  }
  const bool mixer = first_mixer < g.size(), ffn = first_ffn < g.size();
  // A norm inside the mixer block (the q/k norm between the QKV projection and the core) is the mixer's: its saved
  // tensors come with the QKV projection's (mixer_op_terms), not with the blocks' norms.
  const auto inside_mixer = [&](std::size_t i) { return mixer && i > first_mixer && i < last_mixer; };
  std::size_t mixer_norm = g.size(), ffn_norm = g.size(), norms = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (g[i].kind != OpKind::norm || inside_mixer(i)) continue;
    ++norms;
    if (mixer && i < first_mixer && mixer_norm == g.size()) mixer_norm = i;
    else if (ffn && i < first_ffn) ffn_norm = i;  // the last one before the FFN
  }
  const double extra = double(norms) - (mixer_norm < g.size() ? 1.0 : 0.0) - (ffn_norm < g.size() ? 1.0 : 0.0);
  const bool attention = g.attention() != nullptr;
  const ActPart A = attention || !mixer ? ActPart::attention : ActPart::mixer;
  bool extras_done = false;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Op& o = g[i];
    if (o.kind == OpKind::norm && inside_mixer(i)) {
      // counted with the QKV projection's tensors
    } else if (o.kind == OpKind::norm) {
      if (i == mixer_norm) norm_terms(c, v, A, o, true, 1.0, "h");
      else if (i == ffn_norm) norm_terms(c, v, ActPart::mlp, o, !mixer, 1.0, "h");
      else if (!extras_done && mixer && ffn) norm_terms(c, v, A, o, false, extra, "(n_norms−2)·h");
      extras_done = extras_done || (i != mixer_norm && i != ffn_norm);
    } else if (ffn_part(o.part)) {
      if (i == first_ffn) ffn_input_terms(c, o, v);
      ffn_op_terms(c, o, v);
    } else {
      mixer_op_terms(c, g, o, v);
    }
    if (c.dropout && mixer && i == last_mixer)
      add(v, A, attention ? "dropout mask after the attention block" : "dropout mask after the mixer block", "h", h,
          kMaskBytes, Split::sequence);
    if (c.dropout && ffn && (i + 1 == g.size() || !ffn_part(g[i + 1].part)) && ffn_part(o.part))
      add(v, ActPart::mlp, "dropout mask after the MLP block", "h", h, kMaskBytes, Split::sequence);
  }
  return v;
}

std::vector<Term> layer_terms(const Ctx& c, LayerKind kind) { return layer_terms(c, *layer_graph(c.a, kind)); }

HeadTerms head_terms(const Ctx& c, const OpGraph& head) {
  HeadTerms r;
  for (const Op& o : head) {
    if (o.part == model::Part::embedding && c.dropout)
      r.mask = {ActPart::attention, "embedding output dropout mask", "h", double(o.out), kMaskBytes, Split::sequence,
                Role::plain};
    if (o.part == model::Part::final_norm)
      r.norm_input = {ActPart::mlp, "final norm input", "h", double(o.in), c.ab, Split::sequence, Role::plain};
    if (o.part == model::Part::lm_head) {
      r.head_input = {ActPart::mlp, "LM head input", "h", double(o.in), c.ab, Split::sequence, Role::plain};
      r.vocab = double(o.out);
    }
  }
  return r;
}

std::vector<Term> layer_terms(const Ctx& c, bool moe_layer) {
  LayerKind k;
  k.moe = moe_layer && c.a.moe.has_value();
  return layer_terms(c, k);
}

LayerSum sum_terms(const Ctx& c, const std::vector<Term>& terms) {
  LayerSum s;
  for (const auto& x : terms) {
    const double b = c.bytes_per_token(x);
    s.all += b;
    if (x.role == Role::score) s.score += b;
    if (x.role == Role::input) s.input += b;
  }
  return s;
}

/// Full recomputation checkpoints the layer input: s·b·h·a_b ([K22] §5, "2sbh"), split by t with SP.
double checkpoint_per_token(const Ctx& c) {
  return double(layer_boundary_width(c.a)) * c.ab / c.divisor(Split::sequence);
}

std::vector<Term> op_sac_terms(const Ctx& c, bool reused_only) {
  const auto& a = c.a;
  // The shapes of the block's ops: its attention op's heads and head dim, its MLP's width (the down-projection's input).
  const GraphRef g = layer_graph(a, LayerKind{});
  const Op& attn = *g->attention();
  double i = 0.0;
  for (const Op& o : g)
    if (o.kind == OpKind::linear && o.linear == LinearKind::mlp_out) i = double(o.in);
  const double h = double(layer_boundary_width(a)), nq = double(attn.heads), nkv = double(attn.kv_heads), d = double(attn.d_qk);
  const ActPart A = ActPart::attention, M = ActPart::mlp;
  std::vector<Term> v;
  // torch.utils.checkpoint keeps the checkpointed block's input; the policy's cache keeps the listed ops' outputs
  // (mm outputs in the activation dtype: under torchao's Float8Linear the mm still returns the 16-bit output).
  add(v, A, "block input (the checkpoint's input)", "h", h, c.ab, Split::sequence, Role::input);
  if (!reused_only) add(v, A, "wq output (mm 1 of the block: kept)", "n_q·d", nq * d, c.ab, Split::tensor);
  add(v, A, "wv output (mm 3: kept; wk, mm 2, recomputed)", "n_kv·d", nkv * d, c.ab, Split::tensor);
  add(v, A, "SDPA output (flash kernel: kept)", "n_q·d", nq * d, c.ab, Split::tensor);
  add(v, A, "SDPA log-sum-exp (fp32, flash kernel: kept)", "n_q", nq, kFp32Bytes, Split::tensor);
  if (a.mlp == wl::MlpKind::gated) {
    // mm 4 is wo (recomputed), mm 5 w1, mm 6 w3 (recomputed), mm 7 w2.
    add(v, M, "w1 (gate) output (mm 5: kept; w3, mm 6, recomputed)", "i", i, c.ab, Split::tensor);
    if (!reused_only) add(v, M, "w2 output (mm 7: kept)", "h", h, c.ab, Split::sequence);
  } else {
    // mm 5 is fc1 (kept); fc2 (mm 6) is not kept, and its backward needs only its input: not run again either.
    add(v, M, "fc1 output (mm 5: kept; fc2, mm 6, not)", "i", i, c.ab, Split::tensor);
  }
  return v;
}

/// Bytes per token one layer keeps for one micro-batch until its backward, by recomputation mode.
double stored_per_token(const Ctx& c, const LayerSum& s) {
  switch (c.plan.recompute) {
    case wl::Recompute::none: return s.all;
    case wl::Recompute::selective: return s.all - s.score;
    case wl::Recompute::full: return checkpoint_per_token(c);
    case wl::Recompute::selective_op: return sum_terms(c, op_sac_terms(c)).all;
  }
  return s.all;
}

/// Transient bytes per token while one layer is recomputed for its backward (one layer, one micro-batch): the
/// attention core under selective recomputation; the whole layer but its (already checkpointed) input under full.
double working_set_per_token(const Ctx& c, const LayerSum& s) {
  switch (c.plan.recompute) {
    case wl::Recompute::none: return 0.0;
    case wl::Recompute::selective: return s.score;
    case wl::Recompute::full: return s.all - s.input;
    // The recomputed forward rebuilds the block's autograd-saved tensors, but those that are the kept outputs
    // themselves (the input, V, the SDPA output and log-sum-exp, the w1 output) are reused, not allocated again.
    case wl::Recompute::selective_op: return std::max(0.0, s.all - sum_terms(c, op_sac_terms(c, true)).all);
  }
  return 0.0;
}

const char* part_name(ActPart p) {
  switch (p) {
    case ActPart::attention: return "attention";
    case ActPart::mlp: return "MLP";
    case ActPart::experts: return "routed experts";
    case ActPart::shared: return "shared experts";
    case ActPart::mixer: return "sequence mixer";
  }
  return "";
}

const char* layout_name(ActivationLayout l) {
  switch (l) {
    case ActivationLayout::hf_eager: return "Hugging Face transformers, eager autograd";
    case ActivationLayout::torch_eager:
      return "PyTorch modules, eager autograd (nn.Linear, fused RMSNorm/LayerNorm, SDPA; measured on our H200 runs)";
    case ActivationLayout::from_plan:
    case ActivationLayout::megatron: break;
  }
  return "Megatron-Core + Transformer Engine (Korthikanti et al. 2022)";
}

namespace {
/// What TorchTitan's op-level policy keeps of one block (the terms of op_sac_terms), and what it runs again.
Derivation op_sac_derivation(const Ctx& c, const std::string& id) {
  const auto terms = op_sac_terms(c);
  Derivation d;
  d.id = id;
  d.title = "Kept under TorchTitan's op-level selective activation checkpointing, one block, one micro-batch";
  d.formula = "block input + outputs of the odd-numbered mm of the block, SDPA (output, log-sum-exp)";
  const Origin o = Origin::derived(
      "pytorch/torchtitan 9dec370ad26b torchtitan/parallelisms/parallelize_llama.py: _save_list (aten.mm, SDPA "
      "flash/efficient, reduce_scatter_tensor, abs, max) and _custom_policy (every second mm recomputed)");
  for (const auto& x : terms)
    d.inputs.push_back({x.width, fmt::format("{} B/token", format_number(c.bytes_per_token(x))), x.name, o});
  d.result = fmt::format("{} kept per block; (s/c)·b = {} tokens", gib(units::bytes(sum_terms(c, terms).all * c.tokens)),
                         format_count(c.tokens));
  d.notes.push_back(
      "run again in the backward: both norms, wk (mm 2), RoPE, wo (mm 4) and the first residual add, w3 (mm 6) and "
      "the activation, and the FP8 casts of every GEMM input; kept, not run: wq, wv, w1, w2 and the SDPA forward");
  return d;
}
}  // namespace

Derivation layer_derivation(const Ctx& c, bool moe_layer, const std::string& id) {
  LayerKind k;
  k.moe = moe_layer && c.a.moe.has_value();
  Derivation d = layer_derivation(c, k, id);
  d.title = moe_layer ? "Saved activations of one MoE layer, one micro-batch"
                      : "Saved activations of one layer, one micro-batch";
  return d;
}

Derivation layer_derivation(const Ctx& c, LayerKind kind, const std::string& id) {
  const auto terms = layer_terms(c, kind);
  const LayerSum s = sum_terms(c, terms);
  Derivation d;
  d.id = id;
  d.title = fmt::format("Saved activations of one {} + {} layer, one micro-batch", attention_span_name(c.a, kind),
                        ffn_name(c.a, kind));
  d.formula =
      "Σ_terms width·bytes / split × (s/c)·b ; split = t for head/FFN-sharded tensors, t only with SP for "
      "h-wide ones";
  for (const auto& x : terms) {
    const double per_tok = c.bytes_per_token(x);
    d.inputs.push_back(
        {fmt::format("[{}] {}", part_name(x.part), x.width),
         fmt::format("{} el × {} B{} = {} B/token ({} s·b·h·B)", format_count(x.elements), format_number(x.elem_bytes),
                     c.divisor(x.split) > 1.0 ? fmt::format(" / {}", format_number(c.divisor(x.split))) : std::string{},
                     format_number(per_tok), format_number(per_tok / double(c.a.hidden))),
         std::string(x.name) + (x.role == Role::score ? " (attention core)" : ""),
         Origin::derived(layout_name(c.layout))});
  }
  std::string mode = wl::to_string(c.plan.recompute);
  if (c.plan.partial_recompute())
    mode += c.plan.recompute_method == wl::RecomputeMethod::block
                ? fmt::format(" (block: the first {} layers of each chunk; the others keep all)", c.plan.recompute_num_layers)
                : fmt::format(" (uniform: groups of {} layers, one checkpoint each)", c.plan.recompute_num_layers);
  d.result = fmt::format(
      "{} per layer without recomputation = s·b·h·({}) bytes, attention core {}; kept under "
      "recompute {}: {}; (s/c)·b = {} tokens",
      gib(units::bytes(s.all * c.tokens)), format_number(s.all / double(c.a.hidden), 5),
      gib(units::bytes(s.score * c.tokens)), mode, gib(units::bytes(stored_per_token(c, s) * c.tokens)),
      format_count(c.tokens));
  if (!c.plan.flash_attention && c.dropout && c.attention_dropout && !c.hf())
    d.notes.push_back(
        "GPT layer, [K22] Table 2: s·b·h·(34 + 5·a·s/h) bytes without TP; (10 + 24/t + 5as/(ht)) with TP; "
        "(34/t + 5as/(ht)) with SP, for 2-byte activations");
  if (c.plan.flash_attention)
    d.notes.push_back(
        "FlashAttention: no s×s scores are stored (the 5as/h term of [K22] vanishes); the kernel keeps "
        "an fp32 log-sum-exp per head and token");
  auto said = [&](const std::optional<double>& p, bool on, const char* what) {
    if (c.plan.dropout) return fmt::format("{} dropout {} (the plan: dropout {})", what, on ? "on" : "off", on);
    if (p) return fmt::format("{} dropout {:g} (the model's config)", what, *p);
    return fmt::format("assumption: {} {} (the config does not say; {})", on ? "with" : "no", std::string(what) + " dropout",
                       on ? "GPT-style model: two-matrix MLP with LayerNorm" : "gated MLP or RMSNorm model, as Llama-family training");
  };
  d.notes.push_back(said(c.a.attention_dropout, c.attention_dropout, "attention"));
  d.notes.push_back(said(c.a.hidden_dropout, c.dropout, "hidden"));
  if (c.layout == ActivationLayout::megatron && c.a.mlp == wl::MlpKind::gated)
    d.notes.push_back(
        "fused SwiGLU (Megatron-Core bias_swiglu) saves [gate | up] and the product; an unfused "
        "implementation also keeps silu(gate) (+1 intermediate width)");
  if (c.layout == ActivationLayout::torch_eager)
    d.notes.push_back(
        "PyTorch eager layout: each op's autograd node keeps its own inputs — the norm input and output, Q and K "
        "after RoPE, V, the SDPA output (FlashAttention returns it in [b, s, n, d] order, so the O-projection input "
        "is a view of it), and for a gated MLP the gate and up outputs, silu(gate) and the product");
  if (c.hf())
    d.notes.push_back(
        "Hugging Face eager layout: the bf16 layer input is not saved (RMSNorm upcasts it first); a "
        "per-layer probe that holds the returned output measures one more s·b·h·a_b");
  if (c.plan.recompute == wl::Recompute::selective_op) d.children.push_back(op_sac_derivation(c, id + ".op_sac"));
  return d;
}

}  // namespace gpuplan::model::detail
