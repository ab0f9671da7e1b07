// The op graph of a transformer layer and of the embedding / LM head around the layers (gpuplan/model/graph.hpp).
// The one place that says which weight tensors a layer has, how large they are and how tensor parallelism splits
// them; parameter counts, matmul FLOPs, LoRA adapter sizes and weights per GPU are folds over it.
#include "gpuplan/model/graph.hpp"

#include <array>
#include <cassert>
#include <memory>
#include <optional>
#include <string>

#include "graph_memo.hpp"
#include "layer_kinds_text.hpp"
#include "linear_gemms.hpp"

namespace gpuplan::model {

using std::int64_t;

void Op::add(int64_t elements, TpSplit split, bool matmul, bool tied) {
  assert(weight_count < weights.size() && "an op holds at most 8 weight tensors");
  weights[weight_count++] = WeightTensor{elements, split, matmul, tied};
}

int64_t Op::parameters() const {
  int64_t n = 0;
  for (std::uint8_t i = 0; i < weight_count; ++i)
    if (!weights[i].tied) n += weights[i].elements;
  return n;
}

int64_t Op::matmul_elements() const {
  int64_t n = 0;
  for (std::uint8_t i = 0; i < weight_count; ++i)
    if (weights[i].matmul) n += weights[i].elements;
  return n;
}

int64_t Op::matmul_per_token() const {
  const int64_t n = matmul_elements();
  // Routed experts: E copies held, k of them used per token (E divides the whole-layer count exactly).
  return copies > 0 ? n / copies * active : 0;
}

Op& OpGraph::push(Op op) {
  assert(size_ < kCapacity && "a layer graph holds at most 16 ops");
  ops_[size_] = op;
  return ops_[size_++];
}

const Op* OpGraph::attention() const {
  for (const Op& o : *this)
    if (o.kind == OpKind::attention) return &o;
  return nullptr;
}

const Op* OpGraph::ssm() const {
  for (const Op& o : *this)
    if (o.kind == OpKind::ssm) return &o;
  return nullptr;
}

const Op* OpGraph::indexer() const {
  for (const Op& o : *this)
    if (o.kind == OpKind::indexer) return &o;
  return nullptr;
}

int64_t OpGraph::parameters(Part part) const {
  int64_t n = 0;
  for (const Op& o : *this)
    if (o.part == part) n += o.parameters();
  return n;
}

int64_t OpGraph::parameters() const {
  int64_t n = 0;
  for (const Op& o : *this) n += o.parameters();
  return n;
}

int64_t OpGraph::weights(TpSplit split) const {
  int64_t n = 0;
  for (const Op& o : *this)
    for (std::uint8_t i = 0; i < o.weight_count; ++i)
      if (o.weights[i].split == split && !o.weights[i].tied) n += o.weights[i].elements;
  return n;
}

int64_t OpGraph::matmul_per_token() const {
  int64_t n = 0;
  for (const Op& o : *this) n += o.matmul_per_token();
  return n;
}

int64_t layer_boundary_width(const wl::TransformerArch& a) { return a.hidden; }

namespace {

int64_t norm_elements(const wl::TransformerArch& a) {
  const int64_t h = layer_boundary_width(a);
  return a.norm == wl::NormKind::layernorm ? 2 * h : h;  // LayerNorm: weight + bias
}

Op norm_op(const wl::TransformerArch& a, const char* name, Part part) {
  Op o;
  o.kind = OpKind::norm;
  o.part = part;
  o.name = name;
  o.in = o.out = layer_boundary_width(a);
  o.add(norm_elements(a), TpSplit::small, false);
  return o;
}

Op linear_op(const char* name, Part part, LinearKind kind, int64_t in, int64_t out) {
  Op o;
  o.kind = OpKind::linear;
  o.part = part;
  o.linear = kind;
  o.name = name;
  o.in = in;
  o.out = out;
  return o;
}

/// DeepSeek sparse attention's lightning indexer (DeepSeek-V3.2-Exp inference/model.py Indexer; SGLang's and vLLM's
/// deepseek_v32 Indexer): wq_b r_q → n_i·d_i from the MLA query latent, wk h → d_i (one key per token), k_norm a
/// LayerNorm over d_i (weight and bias), weights_proj h → n_i (16-bit); every rank holds them whole
/// (ReplicatedLinear). Its scoring (ReLU(q·k) weighted over the heads, FP8) and the top-k selection are the op's work.
void add_indexer(const wl::TransformerArch& a, OpGraph& g) {
  const auto& x = *a.dsa;
  const int64_t h = layer_boundary_width(a), rq = a.mla->q_lora_rank > 0 ? a.mla->q_lora_rank : h;
  Op ix;
  ix.kind = OpKind::indexer;
  ix.part = Part::attention;
  ix.name = "lightning indexer";
  ix.heads = x.index_heads;
  ix.d_qk = x.index_head_dim;
  ix.topk = x.topk;
  ix.index_cache_bytes = x.key_cache_bytes();
  ix.in = h;
  ix.out = x.index_heads * x.index_head_dim + x.index_head_dim + x.index_heads;
  ix.add(rq * x.index_heads * x.index_head_dim, TpSplit::replicated);  // wq_b
  ix.add(h * x.index_head_dim, TpSplit::replicated);                   // wk
  ix.add(2 * x.index_head_dim, TpSplit::replicated, false);            // k_norm (LayerNorm)
  // weights_proj stays 16-bit under quantised weights: SGLang makes it a bf16 ReplicatedLinear without a quant
  // config (sgl-project/sglang 005e8bf8abf4, python/sglang/srt/layers/attention/nsa/nsa_indexer.py); vLLM loads it
  // into a bf16 linear with quant_config=None (vllm-project/vllm 002d6073aa03, models/deepseek_v2.py Indexer
  // wk_weights_proj), and the checkpoint stores it in bf16.
  ix.add(h * x.index_heads, TpSplit::small);                           // weights_proj
  g.push(ix);
}

/// QKV projection, attention core and output projection.
/// GQA/MQA/MHA: q h·n_q·d, k and v 2·h·n_kv·d (split by KV head), o n_q·d·h, optional biases.
/// MLA (DeepSeek-V2/V3, arXiv:2405.04434 §2.1): q = h·r_q (q_a, replicated) + r_q (q_a_layernorm) + r_q·n_q·d_qk
/// (q_b), or h·n_q·d_qk without a query rank; kv = h·(r_kv + d_rope) (kv_a_proj_with_mqa, replicated) + r_kv
/// (kv_a_layernorm) + r_kv·n_q·(d_nope + d_v) (kv_b); o = n_q·d_v·h. The block is one fused linear to LoRA: in h,
/// out the query heads and the cached latent with its rotary key.
void add_attention(const wl::TransformerArch& a, bool local, bool shared_index, OpGraph& g) {
  const int64_t h = layer_boundary_width(a), nq = a.heads;
  Op attn;
  attn.kind = OpKind::attention;
  attn.part = Part::attention;
  attn.name = "attention";
  attn.heads = nq;
  attn.window = local ? a.local_span() : 0;
  attn.chunked = local && a.local_is_chunked();
  if (a.mla) {
    const auto& m = *a.mla;
    const int64_t dqk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    Op qkv = linear_op("QKV projection", Part::attention, LinearKind::qkv, h,
                       nq * dqk + m.kv_lora_rank + m.qk_rope_head_dim);
    if (m.q_lora_rank > 0) {
      qkv.add(h * m.q_lora_rank, TpSplit::replicated);
      qkv.add(m.q_lora_rank, TpSplit::replicated, false);  // q_a_layernorm
      qkv.add(m.q_lora_rank * nq * dqk, TpSplit::split);
    } else {
      qkv.add(h * nq * dqk, TpSplit::split);
    }
    qkv.add(h * (m.kv_lora_rank + m.qk_rope_head_dim), TpSplit::replicated);
    qkv.add(m.kv_lora_rank, TpSplit::replicated, false);  // kv_a_layernorm
    qkv.add(m.kv_lora_rank * nq * (m.qk_nope_head_dim + m.v_head_dim), TpSplit::split);
    if (a.qkv_bias) qkv.add(nq * dqk + (m.kv_lora_rank + m.qk_rope_head_dim), TpSplit::split, false);
    g.push(qkv);
    attn.kv_heads = a.kv_heads;
    attn.d_qk = dqk;
    attn.d_v = m.v_head_dim;
    attn.mla = {true, m.q_lora_rank, m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim};
    attn.cache_elements = attention_cache_elements(a);  // the latent and the shared rotary key
  } else {
    const int64_t d = a.head_dim, nkv = a.kv_heads;
    // Qwen3-Next's output gate: q_proj emits the query and a gate per head, h x 2·n_q·d.
    const int64_t gate = a.attention_output_gate ? nq * d : 0;
    Op qkv = linear_op(a.attention_output_gate ? "QKV + gate projection" : "QKV projection", Part::attention,
                       LinearKind::qkv, h, (nq + 2 * nkv) * d + gate);
    qkv.add(h * (nq * d + gate), TpSplit::split);
    qkv.add(2 * h * nkv * d, TpSplit::kv_heads);
    if (a.qkv_bias) {
      qkv.add(nq * d, TpSplit::split, false);
      qkv.add(2 * nkv * d, TpSplit::kv_heads, false);
    }
    g.push(qkv);
    attn.kv_heads = nkv;
    attn.d_qk = d;
    attn.d_v = d;
    attn.cache_elements = attention_cache_elements(a);  // K and V
  }
  if (a.qk_norm) {
    // The per-head norm of q and k between the projection and the attention (Qwen3, Gemma 3, OLMo 2): its kernels
    // run in every layer; its weights, one per head dim for q and for k (Llama 4's L2 norm has none), count under
    // attention.
    Op qk;
    qk.kind = OpKind::norm;
    qk.part = Part::attention;
    qk.name = "q/k norm";
    if (a.qk_norm_weights) qk.add(2 * a.head_dim, TpSplit::split, false);
    g.push(qk);
  }
  if (a.attention_sinks) attn.add(nq, TpSplit::split, false);      // one learned logit per head
  const int64_t v_out = attn.d_v;
  if (a.dsa && a.mla) {
    // DeepSeek sparse attention runs MLA in its MQA mode (DeepSeek-V3.2-Exp report §2.1): every query head scores
    // the cached latent and rotary key (r_kv + d_rope) and takes values of width r_kv, over its top-k keys. A layer
    // with a shared indexer (GLM-5.1) runs none: it reads the top-k the last indexer chose.
    if (!shared_index) add_indexer(a, g);
    attn.d_qk = a.mla->kv_lora_rank + a.mla->qk_rope_head_dim;
    attn.d_v = a.mla->kv_lora_rank;
    attn.topk = a.dsa->topk;
  }
  g.push(attn);
  Op o = linear_op("output projection", Part::attention, LinearKind::attention_out, nq * v_out, h);
  o.add(nq * v_out * h, TpSplit::split);
  if (a.o_bias) o.add(h, TpSplit::split, false);
  g.push(o);
}

/// A gated (SwiGLU/GeGLU: up and gate, then down: 3·h·w) or plain (2·h·w) MLP of width w, `copies` of it (routed
/// experts), with biases (gated: 2w on up/gate, plain: w; h on down) when `bias`.
void add_mlp(const wl::TransformerArch& a, const char* up_name, const char* down_name, Part part, LinearKind up_kind,
             LinearKind down_kind, int64_t width, int64_t copies, int64_t active, bool bias, OpGraph& g) {
  const int64_t h = layer_boundary_width(a);
  const int64_t glu = a.mlp == wl::MlpKind::gated ? 2 : 1;
  Op up = linear_op(up_name, part, up_kind, h, glu * width);
  up.copies = copies;
  up.active = active;
  up.add(copies * glu * h * width, TpSplit::split);
  if (bias) up.add(copies * glu * width, TpSplit::split, false);
  g.push(up);
  Op down = linear_op(down_name, part, down_kind, width, h);
  down.copies = copies;
  down.active = active;
  down.add(copies * h * width, TpSplit::split);
  if (bias) down.add(copies * h, TpSplit::split, false);
  g.push(down);
}

/// Router h·E (+ bias E, + DeepSeek-V3's score-correction vector), E routed experts of width i_e, top-k per token,
/// and the shared experts (n_s of width i_s, always active; Qwen2-MoE's sigmoid gate h→1 on them).
void add_moe(const wl::TransformerArch& a, OpGraph& g) {
  const auto& m = *a.moe;
  const int64_t h = layer_boundary_width(a);
  Op router = linear_op("router", Part::router, LinearKind::router, h, m.num_experts);
  router.add(h * m.num_experts, TpSplit::small);
  if (m.router_bias) router.add(m.num_experts, TpSplit::small, false);
  if (m.correction_bias > 0) router.add(m.correction_bias, TpSplit::small, false);
  g.push(router);
  add_mlp(a, "expert up/gate", "expert down", Part::routed_experts, LinearKind::expert_in, LinearKind::expert_out,
          m.expert_intermediate, m.num_experts, m.experts_per_token, m.expert_bias, g);
  const int64_t shared_width = m.shared_experts * m.shared_intermediate;
  if (shared_width > 0) {
    // n_s shared experts side by side are one MLP of width n_s·i_s (no biases).
    add_mlp(a, "shared expert up/gate", "shared expert down", Part::shared_experts, LinearKind::mlp_in,
            LinearKind::mlp_out, shared_width, 1, 1, false, g);
  }
  if (m.shared_expert_gate) {
    // The gate is a dot product h→1 per token: a parameter, not counted among the matmul FLOPs. LoRA never targets
    // it (as the router).
    Op gate = linear_op("shared expert gate", Part::shared_experts, LinearKind::gate, h, 1);
    gate.add(h, TpSplit::split, false);
    g.push(gate);
  }
}

/// A Mamba-2 mixer (Dao & Gu 2024, arXiv:2405.21060 §7 and Fig. 6; transformers' NemotronHMamba2Mixer): in_proj
/// h → (z: d_inner, x: d_inner, B and C: n_g·N each, dt: n_h), h·(2·d_inner + 2·n_g·N + n_h); a depthwise causal
/// conv1d over (x, B, C) of d_conv taps per channel (+ a bias per channel with use_conv_bias); A_log, D and dt_bias
/// (n_h each); the gated RMSNorm over d_inner (MambaRMSNormGated, d_inner weights); out_proj d_inner → h
/// (+ biases with mamba_proj_bias). The projections are column- / row-parallel (vLLM's MambaMixer2), the per-head
/// and per-channel vectors split with them.
void add_mamba2(const wl::TransformerArch& a, OpGraph& g) {
  const auto& m = *a.mamba;
  const int64_t h = layer_boundary_width(a), di = m.inner(), cc = m.conv_channels();
  const int64_t proj = di + cc + m.heads;  // z, then x·B·C, then dt
  Op in = linear_op("in_proj (z, x, B, C, dt)", Part::ssm, LinearKind::qkv, h, proj);
  in.add(h * proj, TpSplit::split);
  if (m.proj_bias) in.add(proj, TpSplit::split, false);
  g.push(in);
  Op ssm;
  ssm.kind = OpKind::ssm;
  ssm.part = Part::ssm;
  ssm.name = "conv1d + SSD scan + gated norm";
  ssm.heads = m.heads;
  ssm.d_v = m.head_dim;
  ssm.d_qk = m.state;
  ssm.groups = m.groups;
  ssm.chunk = m.chunk;
  ssm.conv_channels = cc;
  ssm.conv_kernel = m.conv_kernel;
  ssm.cache_elements = 0;  // nothing per token: the state is per sequence (Op::conv/ssm_state_elements)
  ssm.add(cc * m.conv_kernel, TpSplit::split, false);  // conv1d weight (depthwise)
  if (m.conv_bias) ssm.add(cc, TpSplit::split, false);
  ssm.add(3 * m.heads, TpSplit::split, false);  // A_log, D, dt_bias
  ssm.add(di, TpSplit::split, false);           // the gated RMSNorm's weight
  g.push(ssm);
  Op out = linear_op("out_proj", Part::ssm, LinearKind::attention_out, di, h);
  out.add(di * h, TpSplit::split);
  if (m.proj_bias) out.add(h, TpSplit::split, false);
  g.push(out);
}

/// A gated DeltaNet mixer (transformers' Qwen3NextGatedDeltaNet; Yang et al. 2024, arXiv:2412.06464): in_proj_qkvz
/// h → (q, k: n_k·d_k each; v, z: n_v·d_v each) and in_proj_ba h → (β, a: n_v each); a depthwise causal conv1d
/// over q, k and v (2·n_k·d_k + n_v·d_v channels, d_conv taps, no bias); dt_bias and A_log per value head; the gated
/// RMSNorm over d_v (one weight of d_v shared by the heads); out_proj n_v·d_v → h. vLLM's Qwen3NextGatedDeltaNet
/// splits the projections column- / row-parallel and the heads with them.
void add_gated_deltanet(const wl::TransformerArch& a, OpGraph& g) {
  const auto& m = *a.gdn;
  const int64_t h = layer_boundary_width(a), cc = m.conv_channels(), vw = m.value_width();
  const int64_t proj = cc + vw + 2 * m.value_heads;  // q, k, v, z, then beta and a
  Op in = linear_op("in_proj (q, k, v, z, β, a)", Part::ssm, LinearKind::qkv, h, proj);
  in.add(h * (cc + vw), TpSplit::split);            // in_proj_qkvz
  in.add(h * 2 * m.value_heads, TpSplit::split);    // in_proj_ba
  g.push(in);
  Op ssm;
  ssm.kind = OpKind::ssm;
  ssm.part = Part::ssm;
  ssm.name = "conv1d + gated delta rule + gated norm";
  ssm.delta_rule = true;
  ssm.heads = m.value_heads;
  ssm.d_v = m.value_dim;
  ssm.d_qk = m.key_dim;
  ssm.groups = m.key_heads;
  ssm.chunk = m.chunk;
  ssm.conv_channels = cc;
  ssm.conv_kernel = m.conv_kernel;
  ssm.cache_elements = 0;  // the state is per sequence (Op::conv/ssm_state_elements)
  ssm.add(cc * m.conv_kernel, TpSplit::split, false);  // conv1d weight (depthwise, no bias)
  ssm.add(2 * m.value_heads, TpSplit::split, false);   // A_log, dt_bias
  ssm.add(m.value_dim, TpSplit::small, false);         // the gated RMSNorm's weight (per head dim, shared)
  g.push(ssm);
  Op out = linear_op("out_proj", Part::ssm, LinearKind::attention_out, vw, h);
  out.add(vw * h, TpSplit::split);
  g.push(out);
}

}  // namespace

std::int64_t attention_cache_elements(const wl::TransformerArch& a) {
  if (a.mla) return a.mla->kv_lora_rank + a.mla->qk_rope_head_dim;
  return 2 * std::int64_t(a.kv_heads) * std::int64_t(a.head_dim);
}

OpGraph build_layer_graph(const wl::TransformerArch& a, LayerKind kind) {
  OpGraph g;
  static constexpr const char* kNormNames[] = {"input norm", "post-attention norm", "pre-MLP norm", "post-MLP norm"};
  auto norm = [&](int64_t i) {
    g.push(norm_op(a, i < 4 ? kNormNames[i] : "extra norm", Part::norms));
  };
  const int64_t npl = a.norms_per_layer;
  if (npl > 0) norm(0);
  if (kind.mixer == wl::Mixer::attention) add_attention(a, kind.local, kind.shared_index, g);
  else if (kind.mixer == wl::Mixer::mamba2 && a.mamba) add_mamba2(a, g);
  else if (kind.mixer == wl::Mixer::gated_deltanet && a.gdn) add_gated_deltanet(a, g);
  // Single-block layers (Nemotron-H: one norm, then the mixer or the FFN) have one norm per layer.
  if (kind.mixer != wl::Mixer::none && kind.ffn)
    for (int64_t i = 1; i < npl && i < 3; ++i) norm(i);  // post-attention (and Gemma's pre-MLP) norm
  if (!kind.ffn) return g;
  if (kind.moe && a.moe) {
    add_moe(a, g);
  } else {
    add_mlp(a, a.mlp == wl::MlpKind::gated ? "MLP up/gate" : "MLP up", "MLP down", Part::dense_mlp,
            LinearKind::mlp_in, LinearKind::mlp_out, a.intermediate, 1, 1, a.mlp_bias, g);
  }
  for (int64_t i = 3; i < npl; ++i) norm(i);  // Gemma's post-MLP norm
  return g;
}

const char* attention_span_name(const wl::TransformerArch& a, LayerKind kind) {
  if (kind.mixer == wl::Mixer::mamba2) return "Mamba-2 SSM";
  if (kind.mixer == wl::Mixer::gated_deltanet) return "gated DeltaNet (linear attention)";
  if (kind.mixer == wl::Mixer::none) return "no mixer";
  if (a.dsa)
    return kind.shared_index ? "MLA + DeepSeek sparse attention (top-k of the previous indexer)"
                             : "MLA + DeepSeek sparse attention (indexer, top-k keys)";
  if (a.attention_output_gate && (!kind.local || a.local_span() <= 0)) return "gated full attention";
  if (!kind.local || a.local_span() <= 0) return "full attention";
  return a.local_is_chunked() ? "chunked attention" : "sliding-window attention";
}

Op attention_or_reference(const wl::TransformerArch& a, const OpGraph& g) {
  if (const Op* o = g.attention()) return *o;
  return *build_layer_graph(a, LayerKind{}).attention();
}

const char* ffn_name(const wl::TransformerArch& a, LayerKind kind) {
  if (!kind.ffn) return "no FFN";
  if (kind.moe && a.moe) return a.moe->shared_experts > 0 ? "MoE with shared experts" : "MoE";
  return "dense FFN";
}

OpGraph build_head_graph(const wl::TransformerArch& a) {
  OpGraph g;
  const int64_t h = layer_boundary_width(a);
  Op emb;
  emb.kind = OpKind::embedding;
  emb.part = Part::embedding;
  emb.name = "embedding";
  emb.out = h;
  emb.add(a.vocab * h, TpSplit::split, false);  // a lookup, vocabulary-parallel
  g.push(emb);
  if (a.position == wl::PositionKind::learned) {
    Op pos = emb;
    pos.part = Part::position_embedding;
    pos.name = "position embedding";
    pos.weight_count = 0;
    pos.add(a.max_position * h, TpSplit::split, false);
    g.push(pos);
  }
  g.push(norm_op(a, "final norm", Part::final_norm));
  // The LM head is a matmul whether tied to the embedding or not; tied, it is not a parameter of its own.
  Op head = linear_op("LM head", Part::lm_head, LinearKind::lm_head, h, a.vocab);
  head.add(a.vocab * h, TpSplit::split, true, a.tied_embeddings);
  g.push(head);
  return g;
}

OpGraph build_mtp_graph(const wl::TransformerArch& a) {
  OpGraph g;
  const int64_t h = layer_boundary_width(a);
  g.push(norm_op(a, "MTP hidden norm", Part::mtp));
  g.push(norm_op(a, "MTP embedding norm", Part::mtp));
  // M·[hnorm(h); enorm(Emb(t))]: Megatron-Core's eh_proj is column-parallel (multi_token_prediction.py).
  Op proj = linear_op("MTP projection", Part::mtp, LinearKind::mtp_proj, 2 * h, h);
  proj.add(2 * h * h, TpSplit::split);
  g.push(proj);
  g.push(norm_op(a, "MTP final norm", Part::mtp));
  return g;
}

namespace detail {
std::string layer_kinds_text(const wl::TransformerArch& a) {
  std::string out;
  for_each_layer_kind(a, [&](LayerKind k, std::int64_t n) {
    out += (out.empty() ? "" : ", ") + std::to_string(n) + " × " + attention_span_name(a, k) + " + " + ffn_name(a, k);
  });
  // GPT-OSS: every attention layer adds one learned logit per query head to its softmax denominator (the op graph
  // counts them as parameters; their cost is one more term per score row).
  if (a.attention_sinks) out += "; every attention layer with attention sinks (one learned logit per query head)";
  return out;
}
bool names_layer_kinds(const wl::TransformerArch& a) {
  int kinds = 0;
  for_each_layer_kind(a, [&](LayerKind, std::int64_t) { ++kinds; });
  return kinds > 1 || a.hybrid() || a.dsa.has_value() || a.attention_sinks;
}
}  // namespace detail

}  // namespace gpuplan::model

namespace gpuplan::model::detail {
namespace {

/// The memo of the innermost owning GraphMemoScope on this thread (graph_memo.hpp).
struct GraphMemo {
  const wl::TransformerArch* arch = nullptr;  ///< the scope's architecture; nullptr: no scope open
  int depth = 0;                              ///< scopes of `arch` open (nested estimates share the memo)
  std::array<std::optional<OpGraph>, LayerKind::kCount> layers;
  std::optional<OpGraph> head;
};

GraphMemo& graph_memo_state() {
  // On the heap: 65 graphs of ~5.6 kB would make a large static TLS block for every thread.
  thread_local std::unique_ptr<GraphMemo> memo = std::make_unique<GraphMemo>();
  return *memo;
}

}  // namespace

GraphMemoScope::GraphMemoScope(const wl::TransformerArch& a) {
  GraphMemo& m = graph_memo_state();
  if (m.arch == nullptr) {
    m.arch = &a;
    m.depth = 1;
    owner_ = true;
  } else if (m.arch == &a) {
    ++m.depth;
    owner_ = true;
  }
}

GraphMemoScope::~GraphMemoScope() {
  if (!owner_) return;
  GraphMemo& m = graph_memo_state();
  if (--m.depth > 0) return;
  m.arch = nullptr;
  for (auto& g : m.layers) g.reset();
  m.head.reset();
}

GraphRef layer_graph(const wl::TransformerArch& a, LayerKind kind) {
  GraphMemo& m = graph_memo_state();
  if (m.arch != &a) return GraphRef(build_layer_graph(a, kind));
  auto& g = m.layers[static_cast<std::size_t>(kind.index())];
  if (!g) g.emplace(build_layer_graph(a, kind));
  return GraphRef(&*g);
}

LinearGemms linear_gemms(const wl::TransformerArch& a, const Op& o, bool separate) {
  LinearGemms g;
  // The tensors add_attention lays out: [Q (+ output gate)] split, [K | V] by KV head.
  const bool qkv = separate && o.kind == OpKind::linear && o.linear == LinearKind::qkv && o.part == Part::attention &&
                   !a.mla && o.in > 0 && o.weight_count >= 2 && o.weights[1].split == TpSplit::kv_heads;
  const bool gate_up = separate && o.kind == OpKind::linear && o.linear == LinearKind::mlp_in &&
                       a.mlp == wl::MlpKind::gated && (o.part == Part::dense_mlp || o.part == Part::shared_experts);
  if (qkv) {
    const int64_t kv = o.weights[1].elements / o.in / 2;
    g.out = {o.weights[0].elements / o.in, kv, kv};
    g.name = {"Q projection", "K projection", "V projection"};
    g.count = 3;
  } else if (gate_up) {
    g.out = {o.out / 2, o.out / 2, 0};
    g.name = {o.part == Part::shared_experts ? "shared expert gate" : "MLP gate",
              o.part == Part::shared_experts ? "shared expert up" : "MLP up", ""};
    g.count = 2;
  } else {
    g.out = {o.out, 0, 0};
    g.name = {o.name, "", ""};
    g.count = 1;
  }
  return g;
}

GraphRef head_graph(const wl::TransformerArch& a) {
  GraphMemo& m = graph_memo_state();
  if (m.arch != &a) return GraphRef(build_head_graph(a));
  if (!m.head) m.head.emplace(build_head_graph(a));
  return GraphRef(&*m.head);
}

}  // namespace gpuplan::model::detail
