// The activation-memory model of one layer (memory_activations.hpp). Sources: see memory.cpp.
#include "memory_activations.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

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

void add(std::vector<Term>& v, ActPart part, const char* name, const char* width, double elements, double bytes,
         Split split, Role role = Role::plain) {
  if (elements > 0.0) v.push_back({part, name, width, elements, bytes, split, role});
}

/// A norm's saved tensors. Megatron/TE LayerNorm and RMSNorm save their input (plus per-token mean/rstd, two fp32
/// values per token, not counted). HF LlamaRMSNorm (and any RMSNorm written as PyTorch ops, norm_kernel composite:
/// TorchTitan's at 9dec370) upcasts the input to fp32 (`pow` saves the fp32 copy) and the
/// weight multiply saves the normalised tensor in the activation dtype; Gemma's RMSNorm computes x·(1+w) in fp32 and
/// saves the fp32 normalised tensor instead. HF nn.LayerNorm saves its input.
/// `norm`: the norm op (its width h), `count` norms of it.
void norm_terms(const Ctx& c, std::vector<Term>& v, ActPart part, const Op& norm, bool layer_input, double count,
                const char* width) {
  const double h = static_cast<double>(norm.in) * count;
  const Role in_role = layer_input ? Role::input : Role::plain;
  if (!(c.hf() || c.plan.norm_kernel == wl::NormKernel::composite) || c.a.norm == wl::NormKind::layernorm) {
    add(v, part, "norm input", width, h, c.ab, Split::sequence, in_role);
    return;
  }
  // With fp32 activations the upcast is a no-op and the saved tensor is the input itself.
  add(v, part, "RMSNorm input upcast to fp32", width, h, kFp32Bytes, Split::sequence,
      c.ab >= kFp32Bytes ? in_role : Role::plain);
  if (c.gemma_norm())
    add(v, part, "RMSNorm fp32 normalised tensor (Gemma x·(1+w) in fp32)", width, h, kFp32Bytes, Split::sequence);
  else
    add(v, part, "RMSNorm normalised input before the weight", width, h, c.ab, Split::sequence);
}

/// FFN intermediates for `width` (i, k·i_e or n_s·i_s). Megatron-Core/TE fused SwiGLU (bias_swiglu) saves the fc1
/// output [gate | up] (2·width) and the product (fc2 input, width), recomputing silu(gate) in its backward. Unfused
/// PyTorch, down(act(gate(x))·up(x)) as HF's LlamaMLP and our bench write it, also keeps act(gate(x)) for the
/// multiply: 4·width (measured: data/validation/measured/h200-sxm-141gb/mem_*.json). Two-matrix MLPs keep the
/// fc1 output (activation input) and the activation output (fc2 input) ([K22] §4.1: 8sbh + 8sbh for 4h).
void ffn_terms(const Ctx& c, std::vector<Term>& v, ActPart part, double width, const char* w1, const char* w2,
               bool act_recomputed = false) {
  if (act_recomputed && c.a.mlp == wl::MlpKind::gated) {
    // The activation recomputed (Megatron-Core's moe_act): only its input [gate | up] is kept, and the product (the
    // down-projection input) is computed again in the backward. DeepSeek-V3 §3.3.2 also keeps that input in FP8
    // with its fine-grained quantisation when the GEMMs are FP8 (c.gi).
    add(v, part, "fc1 output [gate | up] (activation input; its output recomputed)", w2, 2 * width, c.gi, Split::tensor);
    return;
  }
  if (c.a.mlp == wl::MlpKind::gated) {
    if (c.eager()) {
      add(v, part, "gate and up projection outputs", w2, 2 * width, c.ab, Split::tensor);
      add(v, part, "activation of the gate (kept for the multiply)", w1, width, c.ab, Split::tensor);
      if (c.wgrad_mlp) add(v, part, "gated product (down-projection input)", w1, width, c.ab, Split::tensor);
    } else {
      // Megatron-Core's activation_func_fp8_input_store keeps that input in FP8 (1 B): the forward writes the FP8 copy
      // (+1 B per element) and the backward reads it (1 B instead of 2), so the traffic is unchanged.
      if (c.plan.activation_fp8_input_store)
        add(v, part, "fc1 output [gate | up] (fused SwiGLU input, kept in FP8)", w2, 2 * width, 1.0, Split::tensor);
      else
        add(v, part, "fc1 output [gate | up] (fused SwiGLU input)", w2, 2 * width, c.ab, Split::tensor);
      if (c.wgrad_mlp) add(v, part, "gated product (fc2 input)", w1, width, c.gi, Split::tensor);
    }
  } else {
    add(v, part, "fc1 output (activation input)", w1, width, c.ab, Split::tensor);
    if (c.wgrad_mlp) add(v, part, "activation output (fc2 input)", w1, width, c.gi, Split::tensor);
  }
}

/// DeepSeek sparse attention's lightning indexer in training (DeepSeek-V3.2-Exp report, arXiv:2509.02556, §2.1: the
/// indexer is trained with a KL loss against the main attention's distribution over the selected keys, its input
/// detached from the main model's graph): the indexer's query n_i·d_i, key d_i and head weights n_i (fp32) for its
/// backward, its scores over the k selected keys (fp32, the KL loss's input), and the k selected indices (int32) that
/// the sparse attention's backward reads. A layer that shares another layer's top-k (GLM-5.1) has no indexer op and
/// keeps none of it: the indices are the same tensor as the indexer layer's.
void indexer_terms(const Ctx& c, const Op& ix, std::vector<Term>& v) {
  const double k = double(std::min<std::int64_t>(ix.topk, std::max<std::int64_t>(1, std::int64_t(c.s))));
  const ActPart A = ActPart::attention;
  // Every TP rank runs the indexer whole (replicated weights, the whole sequence): nothing of it splits.
  add(v, A, "indexer query (wq_b output)", "n_i·d_i", double(ix.heads * ix.d_qk), c.ab, Split::replicated);
  add(v, A, "indexer key (wk output, after its LayerNorm)", "d_i", double(ix.d_qk), c.ab, Split::replicated);
  add(v, A, "indexer head weights (fp32)", "n_i", double(ix.heads), kFp32Bytes, Split::replicated);
  add(v, A, "indexer scores of the selected keys (fp32, KL-loss input)", "min(k, s)", k, kFp32Bytes,
      Split::replicated, Role::score);
  add(v, A, "selected key indices (int32, sparse attention backward)", "min(k, s)", k, kInt32Bytes, Split::replicated);
}

/// A sequence mixer's in_proj (Mamba-2, gated DeltaNet): its input for the weight gradient, and for Mamba-2 its
/// output zxbcdt, from which mamba_ssm's fused conv1d + SSD backward restarts (gated DeltaNet keeps its pieces after
/// the conv1d instead: gated_deltanet_terms).
void in_proj_terms(const Ctx& c, const Op& o, bool mamba, std::vector<Term>& v) {
  const ActPart S = ActPart::mixer;
  if (c.wgrad_qkv) add(v, S, "in_proj input (norm output)", "h", double(o.in), c.gi, Split::sequence);
  if (mamba)
    add(v, S, "in_proj output z·x·B·C·dt (fused conv1d + scan input)", "2·n_h·P + 2·n_g·N + n_h", double(o.out), c.ab,
        Split::tensor);
}

/// A Mamba-2 mixer's saved tensors, as mamba_ssm's fused path keeps them (mamba_split_conv1d_scan_combined, which
/// Megatron-Core's MambaMixer and transformers' cuda-kernel path call): after the in_proj's (in_proj_terms), the scan
/// output before the gated norm (d_inner = n_h·P), dt / dA_cumsum in fp32 per head; the chunk states are recomputed
/// in the backward. The out_proj input is the out_proj op's (mixer_out_terms).
void mamba2_terms(const Ctx& c, const Op& ssm, std::vector<Term>& v) {
  const double di = double(ssm.heads * ssm.d_v), nh = double(ssm.heads);
  const ActPart S = ActPart::mixer;
  add(v, S, "SSD scan output (gated-norm input)", "n_h·P", di, c.ab, Split::tensor);
  add(v, S, "dt and dA_cumsum (fp32)", "2·n_h", 2.0 * nh, kFp32Bytes, Split::tensor);
}

/// A sequence mixer's out_proj input (the gated norm's output), kept for its weight gradient.
void mixer_out_terms(const Ctx& c, const Op& o, bool mamba, std::vector<Term>& v) {
  if (c.wgrad_o)
    add(v, ActPart::mixer, "out_proj input (gated-norm output)", mamba ? "n_h·P" : "n_v·d_v", double(o.in), c.gi,
        Split::tensor);
}

/// A gated DeltaNet mixer's saved tensors (transformers' Qwen3NextGatedDeltaNet with flash-linear-attention's
/// causal_conv1d and chunk_gated_delta_rule), after the in_proj input (in_proj_terms): the conv1d input (q, k, v
/// channels), the kernel's q and k (repeated to the n_v value heads) and v, its gate g (fp32 cumulative) and β, the
/// chunk's triangular solve A (C per head and token), z and the core output for the gated RMSNorm; the chunk states h
/// are recomputed in the backward (chunk_gated_delta_rule_bwd). The out_proj input is the out_proj op's.
void gated_deltanet_terms(const Ctx& c, const Op& ssm, std::vector<Term>& v) {
  const double nv = double(ssm.heads);
  const double vw = nv * double(ssm.d_v), kw = nv * double(ssm.d_qk);
  const double C = double(std::max<std::int64_t>(1, std::min<std::int64_t>(ssm.chunk, std::int64_t(c.s))));
  const ActPart S = ActPart::mixer;
  add(v, S, "conv1d input (q, k, v channels)", "2·n_k·d_k + n_v·d_v", double(ssm.conv_channels), c.ab, Split::tensor);
  add(v, S, "q and k (repeated to the value heads)", "2·n_v·d_k", 2.0 * kw, c.ab, Split::tensor);
  add(v, S, "v", "n_v·d_v", vw, c.ab, Split::tensor);
  add(v, S, "gate g (fp32, cumulative over the chunk)", "n_v", nv, kFp32Bytes, Split::tensor);
  add(v, S, "β", "n_v", nv, c.ab, Split::tensor);
  add(v, S, "chunk triangular solve A", "n_v·C", nv * C, c.ab, Split::tensor);
  add(v, S, "z and the core output (gated-norm inputs)", "2·n_v·d_v", 2.0 * vw, c.ab, Split::tensor);
}

/// Whether the attention core keeps Q, K, V and its output in FP8 (Transformer Engine FusedAttnFunc with fp8 and
/// NVTE_FP8_DPA_BWD=1, its default): the kernel's saved Q, K, V and output are its FP8 inputs and FP8 output
/// (fp8_tensors = q_fp8, k_fp8, v_fp8, out_fp8), not 16-bit ones; under current (tensorwise) scaling the output is
/// kept in 16 bits instead (NVTE_DPA_FP8CS_O_in_F16=1, its default). TransformerEngine
/// pytorch/attention/dot_product_attention/backends.py.
bool fp8_dpa(const Ctx& c) { return c.plan.fp8_dot_product_attention && c.plan.flash_attention && !c.hf(); }

/// The QKV projection op's saved tensors: its input (the norm output) or its LoRA adapter's, the q/k norms' inputs,
/// MLA's latents, and Q, K, V as the attention core (op `attn`: its query and KV heads and head dim) keeps them. MLA
/// runs in its multi-head form in training, also under DeepSeek sparse attention (whose attention op carries the MQA
/// form decode runs): Q and K of d_nope + d_rope, V of d_v per query head, from the model's MLA dims.
void qkv_terms(const Ctx& c, const Op& qkv, const Op& attn, std::vector<Term>& v) {
  const auto& a = c.a;
  const double h = double(qkv.in);
  const double nq = double(attn.heads), nkv = double(attn.kv_heads), d = double(attn.d_qk);
  const ActPart A = ActPart::attention;
  // Recompute modules (Megatron-Core --recompute-modules; DeepSeek-V3 §3.2.3, §3.3.2): a recomputed module's output
  // is not kept; the backward computes it again from the input, which is kept anyway.
  const bool rc_norm = c.plan.recomputes(wl::recompute_layernorm) && !c.eager();
  const bool rc_up = c.plan.recomputes(wl::recompute_mla_up_proj) && a.mla.has_value();
  if (c.lora && c.wgrad_qkv && !c.eager()) {
    // The QKV adapter's linear_in keeps its input: the whole sequence under sequence parallelism (the gathered norm
    // output), after dropout a copy of its own beside the mask.
    const Split in_split = c.sp ? Split::replicated : Split::sequence;
    add(v, A, c.lora_dropout ? "QKV adapter input (dropped-out norm output)" : "QKV adapter input (norm output)", "h",
        h, c.ab, in_split);
    if (c.lora_dropout)
      add(v, A, "QKV adapter dropout mask", "h", h, kMaskBytes, c.lora_gathers ? Split::sequence : in_split);
  } else if (c.wgrad_qkv && !rc_norm) {
    add(v, A, "QKV projection input (norm output)", "h", h, c.gi, Split::sequence);
  }
  if (a.qk_norm) {
    const double w = (nq + nkv) * d;
    if (c.hf()) {
      add(v, A, "q/k norm inputs upcast to fp32", "(n_q+n_kv)·d", w, kFp32Bytes, Split::tensor);
      add(v, A, "q/k normalised before the weight", "(n_q+n_kv)·d", w, c.ab, Split::tensor);
    } else {
      add(v, A, "q/k norm inputs", "(n_q+n_kv)·d", w, c.ab, Split::tensor);
    }
  }
  double q_w = nq * d, k_w = nkv * d, v_w = nkv * d;
  const char* qs = "n_q·d";
  const char* ks = "n_kv·d";
  const char* vs = "n_kv·d";
  if (a.mla) {
    const auto& m = *a.mla;
    // MLA (DeepSeek-V2 §2.1): the latents feed a norm and an up-projection; K and V are expanded per query head.
    // With the norms recomputed only the latent itself (the norm input) is kept, not its normalised copy.
    if (m.q_lora_rank > 0)
      add(v, A, rc_norm ? "q latent (q_a norm input; the q_b input recomputed)" : "q latent (q_a norm input and q_b input)",
          rc_norm ? "r_q" : "2·r_q", (rc_norm ? 1.0 : 2.0) * double(m.q_lora_rank), c.ab, Split::sequence);
    add(v, A, rc_norm ? "kv latent (kv_a norm input; the kv_b input recomputed)" : "kv latent (kv_a norm input and kv_b input)",
        rc_norm ? "r_kv" : "2·r_kv", (rc_norm ? 1.0 : 2.0) * double(m.kv_lora_rank), c.ab, Split::sequence);
    q_w = k_w = nq * double(m.qk_nope_head_dim + m.qk_rope_head_dim);
    v_w = nq * double(m.v_head_dim);
    qs = ks = "n_q·(d_nope+d_rope)";
    vs = "n_q·d_v";
  } else if (c.hf() && nkv < nq) {
    // transformers' SDPA/eager paths call repeat_kv before the kernel: K and V are saved at n_q heads.
    k_w = v_w = nq * d;
    ks = vs = "n_q·d (repeat_kv)";
  }
  const double qkv_b = fp8_dpa(c) ? kFp8Bytes : c.ab;
  if (!rc_up) {
    add(v, A, fp8_dpa(c) ? "Q (after RoPE, FP8)" : "Q (after RoPE)", qs, q_w, qkv_b, Split::tensor);
    add(v, A, fp8_dpa(c) ? "K (after RoPE, FP8)" : "K (after RoPE)", ks, k_w, qkv_b, Split::tensor);
    add(v, A, fp8_dpa(c) ? "V (FP8)" : "V", vs, v_w, qkv_b, Split::tensor);
  } else {
    // MLA up-projections recomputed: Q, K and V come back from the latents in the backward; only the decoupled
    // rotary key (shared by the heads) is kept beside the latents.
    add(v, A, "k rotary part (the up-projected Q, K, V recomputed)", "d_rope", double(a.mla->qk_rope_head_dim), c.ab,
        Split::sequence);
  }
}

/// The attention op's saved tensors: the core's (the fp32 log-sum-exp under FlashAttention, else the softmax output,
/// its dropout mask and the dropped-out probabilities) and the output as the core and the O projection keep it.
void core_terms(const Ctx& c, const Op& attn, std::vector<Term>& v) {
  const auto& a = c.a;
  const double nq = double(attn.heads);
  const ActPart A = ActPart::attention;
  double o_w = nq * double(attn.d_v);
  const char* os = "n_q·d";
  if (a.mla) {
    o_w = nq * double(a.mla->v_head_dim);
    os = "n_q·d_v";
  }
  const double out_b =
      fp8_dpa(c) && c.plan.precision.recipe != wl::QuantRecipe::tensorwise ? kFp8Bytes : c.ab;
  if (c.plan.flash_attention) {
    // FlashAttention keeps Q, K, V, the output and the fp32 log-sum-exp per query row; no s×s tensor.
    add(v, A, "softmax log-sum-exp (fp32, FlashAttention)", "n_q", nq, kFp32Bytes, Split::tensor);
  } else if (c.hf()) {
    // HF eager: softmax(dtype=fp32) saves its fp32 output; dropout saves its mask and the PV matmul its input.
    add(v, A, "softmax output (fp32)", "n_q·s", nq * c.s, kFp32Bytes, Split::tensor, Role::score);
    if (c.attention_dropout) {
      add(v, A, "attention-probability dropout mask", "n_q·s", nq * c.s, kMaskBytes, Split::tensor, Role::score);
      add(v, A, "dropped-out probabilities (PV input)", "n_q·s", nq * c.s, c.ab, Split::tensor, Role::score);
    } else if (c.ab < kFp32Bytes) {
      add(v, A, "probabilities cast to the activation dtype (PV input)", "n_q·s", nq * c.s, c.ab, Split::tensor,
          Role::score);
    }
  } else {
    // [K22] §4.1: QKᵀ softmax output 2as²b, dropout mask as²b, dropout output (PV input) 2as²b = 5as²b.
    add(v, A, "softmax output", "n_q·s", nq * c.s, c.ab, Split::tensor, Role::score);
    if (c.attention_dropout) {
      add(v, A, "attention-probability dropout mask", "n_q·s", nq * c.s, kMaskBytes, Split::tensor, Role::score);
      add(v, A, "dropped-out probabilities (PV input)", "n_q·s", nq * c.s, c.ab, Split::tensor, Role::score);
    }
  }
  if (c.hf()) {
    if (c.plan.flash_attention)
      add(v, A, "SDPA output (kept by the kernel for its backward)", os, o_w, c.ab, Split::tensor);
    if (c.wgrad_o) add(v, A, "O-projection input (contiguous transpose copy)", os, o_w, c.ab, Split::tensor);
  } else if (c.gi < c.ab && c.wgrad_o && c.plan.attention_output == wl::AttentionOutputStore::e5m6) {
    // DeepSeek-V3 §3.3.3 "Low-Precision Activation" (1): one E5M6 copy (12 bits; its 1×128-tile power-of-two scales
    // not counted, as no FP8 tensor's are) serves the attention backward and the O projection's wgrad.
    add(v, A, "attention output (E5M6, shared by the attention backward and the O-projection wgrad)", os, o_w,
        kE5m6Bytes, Split::tensor);
  } else if (c.gi < c.ab || !c.wgrad_o) {
    // FP8: the O projection saves its own FP8 copy of the attention output; FlashAttention keeps the bf16 output
    // for its backward, the unfused core does not need it. A frozen O projection saves nothing.
    if (c.plan.flash_attention)
      add(v, A,
          out_b < c.ab ? "attention output (kept by the FP8 attention, FP8)"
                       : "attention output (kept by FlashAttention)",
          os, o_w, out_b, Split::tensor);
    if (c.lora && c.wgrad_o) {
      // The O adapter keeps its 16-bit input: the attention output FlashAttention keeps anyway, or without
      // FlashAttention that tensor itself; with dropout its dropped-out copy; under FP8 attention that keeps its
      // output in FP8, the 16-bit output the kernel returns.
      if (c.lora_dropout || !c.plan.flash_attention || out_b < c.ab)
        add(v, A, c.lora_dropout ? "O adapter input (dropped-out attention output)" : "O adapter input", os, o_w, c.ab,
            Split::tensor);
    } else if (c.wgrad_o) {
      add(v, A, "O-projection input (FP8)", os, o_w, c.gi, Split::tensor);
    }
  } else {
    add(v, A, "attention output (O-projection input)", os, o_w, c.ab, Split::tensor);
    if (c.lora && c.wgrad_o && c.lora_dropout)
      add(v, A, "O adapter input (dropped-out attention output)", os, o_w, c.ab, Split::tensor);
  }
  if (c.lora && c.wgrad_o && c.lora_dropout && !c.hf())
    add(v, A, "O adapter dropout mask", os, o_w, kMaskBytes, Split::tensor);
}

/// The first op of the FFN block (the dense MLP's up-projection or the router): the block's input (the norm output)
/// for the weight gradients; the router's fp32 probabilities. A dense MLP recomputed as a module (Megatron-Core's
/// "mlp" recompute module, transformer_layer.py recompute_mlp) keeps only its checkpoint's input, in the activation
/// dtype; nothing inside it.
void ffn_input_terms(const Ctx& c, const Op& o, std::vector<Term>& v) {
  const double h = double(o.in);
  const bool rc_norm = c.plan.recomputes(wl::recompute_layernorm) && !c.eager();
  const bool rc_mlp = o.part == model::Part::dense_mlp && c.plan.recomputes(wl::recompute_mlp) && !c.eager();
  const ActPart M = ActPart::mlp;
  if (c.wgrad_mlp && !rc_norm && !rc_mlp) add(v, M, "MLP input (norm output)", "h", h, c.gi, Split::sequence);
  if (rc_mlp) add(v, M, "MLP input (the MLP checkpoint's input; the MLP recomputed)", "h", h, c.ab, Split::sequence);
  // Megatron-Core MoE: fp32 routing softmax over the E experts.
  if (o.part == model::Part::router) add(v, M, "router probabilities (fp32)", "E", double(o.out), kFp32Bytes, Split::sequence);
}

/// An FFN op's saved tensors, after the block's input (ffn_input_terms). Routed experts: token permutation copies
/// each token to its k experts (the up-projection's input, k·h); their intermediates (at the down-projection, of
/// width k·i_e). The routing weights: Megatron-Core permutes them with the tokens and multiplies them in inside the
/// experts' activation (experts.py TEGroupedMLP: weighted_bias_swiglu_impl(fc1 output, permuted_probs), which keeps
/// its input — the fc1 output, counted — and the k probabilities), so its unpermute keeps only its index map, not
/// the k·h expert outputs. A plain PyTorch layer (ours, moe_layer.py: the expert rows × the weights, summed over k)
/// keeps the expert outputs for the weights' gradient. Balanced routing assumed. The dense MLP's and the shared
/// experts' intermediates at their down-projections (width i, n_s·i_s).
void ffn_op_terms(const Ctx& c, const Op& o, std::vector<Term>& v) {
  const bool rc_act = c.plan.recomputes(wl::recompute_moe_act) && !c.eager();
  const double width = double(o.in) * double(o.active);
  switch (o.linear) {
    case LinearKind::expert_in:
      if (c.wgrad_mlp)
        add(v, ActPart::experts, "dispatched expert inputs", "k·h", double(o.active) * double(o.in), c.gi, Split::sequence);
      break;
    case LinearKind::expert_out:
      ffn_terms(c, v, ActPart::experts, width, "k·i_e", "2·k·i_e", rc_act);
      if (c.eager())
        add(v, ActPart::experts, "expert outputs (kept for the routing-weight gradient)", "k·h",
            double(o.active) * double(o.out), c.ab, Split::sequence);
      break;
    case LinearKind::mlp_out:
      if (o.part == model::Part::shared_experts)
        ffn_terms(c, v, ActPart::shared, width, "n_s·i_s", "2·n_s·i_s", rc_act);
      else if (!(c.plan.recomputes(wl::recompute_mlp) && !c.eager()))
        ffn_terms(c, v, ActPart::mlp, width, "i", "2·i");
      break;
    default: break;
  }
}

namespace {
bool ffn_part(model::Part p) {
  return p == model::Part::dense_mlp || p == model::Part::router || p == model::Part::routed_experts ||
         p == model::Part::shared_experts;
}
bool mixer_part(model::Part p) { return p == model::Part::attention || p == model::Part::ssm; }
}  // namespace

/// One op's saved tensors inside the mixer block (attention, or a Mamba-2 / gated DeltaNet mixer): by the op's kind,
/// the attention op of the graph giving the head shapes the QKV projection's tensors take.
void mixer_op_terms(const Ctx& c, const OpGraph& g, const Op& o, std::vector<Term>& v) {
  const bool mamba = g.ssm() != nullptr && !g.ssm()->delta_rule;
  switch (o.kind) {
    case OpKind::linear:
      if (o.part == model::Part::ssm)
        (o.linear == LinearKind::qkv ? in_proj_terms(c, o, mamba, v) : mixer_out_terms(c, o, mamba, v));
      else if (o.linear == LinearKind::qkv && g.attention())
        qkv_terms(c, o, *g.attention(), v);
      break;  // the attention's output projection: its input is the core's output (core_terms)
    case OpKind::indexer: indexer_terms(c, o, v); break;
    case OpKind::attention: core_terms(c, o, v); break;
    case OpKind::ssm: (o.delta_rule ? gated_deltanet_terms(c, o, v) : mamba2_terms(c, o, v)); break;
    default: break;
  }
}

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

std::vector<Term> layer_terms(const Ctx& c, LayerKind kind) { return layer_terms(c, build_layer_graph(c.a, kind)); }

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
double checkpoint_per_token(const Ctx& c) { return double(c.a.hidden) * c.ab / c.divisor(Split::sequence); }

std::vector<Term> op_sac_terms(const Ctx& c, bool reused_only) {
  const auto& a = c.a;
  // The shapes of the block's ops: its attention op's heads and head dim, its MLP's width (the down-projection's input).
  const OpGraph g = build_layer_graph(a, LayerKind{});
  const Op& attn = *g.attention();
  double i = 0.0;
  for (const Op& o : g)
    if (o.kind == OpKind::linear && o.linear == LinearKind::mlp_out) i = double(o.in);
  const double h = double(a.hidden), nq = double(attn.heads), nkv = double(attn.kv_heads), d = double(attn.d_qk);
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
