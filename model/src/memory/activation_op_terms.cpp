// The saved tensors of one op of a layer's graph, by its kind (activation_op_terms.hpp): the norms', the FFN's and the
// mixers' (attention's QKV projection and core, the DSA indexer, Mamba-2's and gated DeltaNet's). memory_activations.cpp
// folds them over the layer's op graph. Sources: see memory.cpp.
#include "activation_op_terms.hpp"

#include <algorithm>
#include <cmath>

namespace gpuplan::model::detail {

void add(std::vector<Term>& v, ActPart part, const char* name, const char* width, double elements, double bytes,
         Split split, Role role) {
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
  const bool rc_up = c.plan.recomputes(wl::recompute_mla_up_proj) && attn.is_mla();
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
  if (attn.is_mla()) {
    const Op::MlaShape& m = attn.mla;
    // MLA (DeepSeek-V2 §2.1): the latents feed a norm and an up-projection; K and V are expanded per query head.
    // With the norms recomputed only the latent itself (the norm input) is kept, not its normalised copy.
    if (m.q_rank > 0)
      add(v, A, rc_norm ? "q latent (q_a norm input; the q_b input recomputed)" : "q latent (q_a norm input and q_b input)",
          rc_norm ? "r_q" : "2·r_q", (rc_norm ? 1.0 : 2.0) * double(m.q_rank), c.ab, Split::sequence);
    add(v, A, rc_norm ? "kv latent (kv_a norm input; the kv_b input recomputed)" : "kv latent (kv_a norm input and kv_b input)",
        rc_norm ? "r_kv" : "2·r_kv", (rc_norm ? 1.0 : 2.0) * double(m.kv_rank), c.ab, Split::sequence);
    q_w = k_w = nq * double(m.d_nope + m.d_rope);
    v_w = nq * double(m.d_v);
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
    add(v, A, "k rotary part (the up-projected Q, K, V recomputed)", "d_rope", double(attn.mla.d_rope), c.ab,
        Split::sequence);
  }
}

/// The attention op's saved tensors: the core's (the fp32 log-sum-exp under FlashAttention, else the softmax output,
/// its dropout mask and the dropped-out probabilities) and the output as the core and the O projection keep it.
void core_terms(const Ctx& c, const Op& attn, std::vector<Term>& v) {
  const double nq = double(attn.heads);
  const ActPart A = ActPart::attention;
  double o_w = nq * double(attn.d_v);
  const char* os = "n_q·d";
  if (attn.is_mla()) {
    o_w = nq * double(attn.mla.d_v);
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

}  // namespace gpuplan::model::detail
