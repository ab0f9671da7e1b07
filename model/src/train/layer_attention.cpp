// The attention variants of the training layer pricer (layer_pricer.hpp): the fused or eager attention kernel over
// the whole causal sequence, sliding and chunked windows, packed documents (one varlen call over each document), the
// context-parallel ring of K/V chunks with its output merges, FP8 dot-product attention's casts, MLA's latent norms
// and head assembly, the attention output's E5M6 store, linear attention (Mamba-2's SSD scan, gated DeltaNet) and
// DeepSeek sparse attention's lightning indexer.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "layer_pricer.hpp"

namespace gpuplan::model::detail {

/// PyTorch eager attention's score passes beyond a fused scale-mask-softmax (the scale, masked_fill as a clone and an
/// in-place fill with the broadcast mask in a non-vectorised kernel, autocast's bf16→fp32 cast in an unrolled copy
/// kernel, the fp32 softmax and the casts back) run at about half the streaming rate. Our H200 probe
/// (data/validation/measured/h200-sxm-141gb/optstack_probe.json: b16 h12 s1024 d64, forward + backward, CUDA kernels):
/// beyond the fused form's bytes at the streaming rate (4.8 TB/s × the calibrated 0.872), the remaining score kernels
/// move the layer_cost byte count at 0.505 of it under autocast (4.77 ms for 10.1 GB) and 0.47 in fp32 (3.28 ms for
/// 6.4 GB); the mean, 0.49. Other GPUs: the same fraction of their streaming rate (an assumption: the kernels are
/// PyTorch's, their inefficiency is in the index arithmetic and unvectorised loads, not the memory system).
constexpr double kEagerScorePassRate = 0.49;

// MLA's projections as the GEMMs Megatron-Core runs them (graph/mla_projections.hpp): the down-projections q_a and
// kv_a held whole by every TP rank, on this rank's rows (the sequence shard under sequence parallelism, all T tokens
// otherwise); the up-projections q_b and kv_b column-parallel over all T tokens, each reading its latent norm's output
// (TELayerNormColumnParallelLinear under qk_layernorm). The `mla_up_proj` recompute module reruns the up-projections'
// forward (GEMMs and their input casts); TorchTitan's op-level policy the even-numbered mm of the block (q_b and kv_b,
// or kv_a without a query latent). Then the rotary on each head's rotary part and MLA's elementwise kernels.
void TrainingLayerPricer::price_mla_projections(const Op& o) {
  Seconds up_fwd{};
  int mm = 0;
  for (const MlaProjection& p : mla_projections(attn, h)) {
    const Seconds before = lc.fwd.total();
    norm_input = p.up;
    replicated_input = p.replicated;
    fwd_gemm(p.name, LinearKind::qkv, p.replicated ? T_norm : T, p.in, p.replicated ? p.out : p.out / t);
    if (p.up) up_fwd += lc.fwd.total() - before;
    if (++mm % 2 == 0) op_sac_rerun(1.0);
  }
  if (plan.recomputes(wl::recompute_mla_up_proj)) recompute_part(up_fwd, OpClass::gemm);
  bias_grad(o.name, a.qkv_bias, o.matmul_elements() / h / t);
  // Rotary on the rotary part of this rank's query heads and on the one rotary key all heads share (k_pe, from the
  // kv down-projection: every rank rotates it whole), d_rope wide (Megatron-Core MLASelfAttention applies the rotary
  // to q_pos_emb [s, b, n/TP, d_rope] and k_pos_emb [s, b, 1, d_rope] before expanding k to the heads).
  const double rope_elems = double(T) * double(attn.heads * attn.mla.d_rope / t + attn.mla.d_rope);
  if (a.position == wl::PositionKind::rope)
    op_sac_elementwise([&] { stream("rotary", rope_elems * e * rope_f, 3.0 * rope_elems, rope_b / rope_f); });
  mla_elementwise();
}

// MLA's kernels beside its projections (arXiv:2405.04434 §2.1). The latent RMSNorms of the query (r_q) and of
// the key-value latent (r_kv): norm kernels like the layer's own (2 passes forward, 4 backward) on the rows of the
// down-projections they follow (the sequence shard under sequence parallelism), recomputed with the up-projections
// they feed or with the norms. Under DeepSeek's framework, the heads assembled for
// FlashAttention's d_nope + d_rope wide q and k: q's no-rope part copied beside its rotary part and k's shared
// rotary part written into every head (read q_nope and write it, write k_pe per head), forward and again in the
// recompute, and dq's and dk's no-rope parts copied out in the backward (_copy_tensor_kernel and direct_copy in
// DeepSeek's profile: docs/deepseek-v3-profile.md). Megatron-Core's fused MLA rope writes q and k assembled.
void TrainingLayerPricer::mla_elementwise() {
  const Op::MlaShape& ml = attn.mla;
  const Seconds before = lc.fwd.total();
  price_norm("MLA query latent norm", double(T_norm) * double(ml.q_rank), ml.q_rank);
  price_norm("MLA key-value latent norm", double(T_norm) * double(ml.kv_rank), ml.kv_rank);
  const bool rc_up = plan.recomputes(wl::recompute_mla_up_proj);
  if (rc_up || plan.recomputes(wl::recompute_layernorm)) recompute_part(lc.fwd.total() - before, OpClass::elementwise);
  if (!per_axis) return;
  const double heads_tok = double(T) * double(attn.heads / t);
  const double fwd = heads_tok * double(2 * ml.d_nope + ml.d_rope) * e;
  const double bwd = 2.0 * heads_tok * double(2 * ml.d_nope) * e;
  const Seconds mid = lc.fwd.total();
  stream("MLA q/k head assembly (copies)", fwd, 0.0, bwd / fwd);
  if (rc_up) recompute_part(lc.fwd.total() - mid, OpClass::elementwise);
}


// DeepSeek-V3 §3.3.3 "Low-Precision Activation" (attention_output_store e5m6): the attention output is written
// once more in the 12-bit E5M6 format for the backward (per_token_cast_to_fp8_with_fp8_special_fmt: read a_b, write
// 1.5 B per element) and read back to BF16 there (per_token_cast_back_special_fmt: read 1.5 B, write a_b).
void TrainingLayerPricer::attention_output_store(double elems) {
  if (plan.attention_output != wl::AttentionOutputStore::e5m6) return;
  stream("attention output E5M6 store / read back", elems * (e + 1.5), elems, 1.0);
}

void TrainingLayerPricer::add_attention(const std::string& name, std::int64_t sq, std::int64_t skv, bool is_causal,
                   std::int64_t chunks) {
  // FP8 dot-product attention: the kernel keeps the 16-bit rate (fp8_attention_casts), and its name says so.
  const bool fp8_kernel = plan.fp8_dot_product_attention && plan.flash_attention && !eager && !name.empty();
  const std::string nm =
      fp8_kernel ? name + " [FP8 inputs; the 16-bit fused rate: no FP8 fused-attention rate measured]" : name;
  for (const bool bwd : {false, true})
    for (const auto& c : attention_cost(nm, bh * chunks, sq, skv, dqk, dv, is_causal, plan.flash_attention, bwd, gp,
                                        d, attn_dropout)) {
      (bwd ? lc.bwd : lc.fwd).add(c);
      (bwd ? lc.flops_bwd : lc.flops_fwd) += c.flops;
      if (keep_ops) lc.ops.push_back(c);
    }
  if (!plan.flash_attention && eager) {
    // PyTorch eager attention (HF's eager path, nanoGPT's manual one: q·kᵀ, scale, masked_fill, softmax, cast,
    // ·v) runs each step on the s × s scores as its own kernel, where attention_cost's unfused form prices one fused
    // scale-mask-softmax (2 passes forward, 3 backward, in the activation dtype). Under autocast softmax runs in
    // fp32 (torch.autocast's fp32 op list): autocast casts its 16-bit input to fp32 as a kernel of its own, and the
    // output is cast back before ·v. Per score element, with a the activation bytes and f the softmax's (4 under
    // autocast, else a): forward scale 2a, masked_fill 2a, the input cast a + f and the output cast f + a (when
    // f ≠ a), softmax 2f; backward the output cast's a + f, softmax's 3f, the input cast's f + a, masked_fill's 2a
    // and the scale's 2a. The passes beyond the fused form's 2a and 3a are added here, at the rate PyTorch's kernels
    // for them reach (kEagerScorePassRate).
    const double f = plan.mixed_precision == wl::MixedPrecision::amp ? 4.0 : e;
    const double cast = f != e ? 1.0 : 0.0;
    const double fwd = 4.0 * e + 2.0 * f + cast * 2.0 * (f + e) - 2.0 * e;
    const double bwd = cast * 2.0 * (e + f) + 3.0 * f + 4.0 * e - 3.0 * e;
    const double scores = double(bh * chunks) * double(sq) * double(skv);
    stream(named("eager attention passes (scale, mask, softmax, cast)"), scores * fwd, scores, bwd / fwd,
           kEagerScorePassRate);
  }
}


// FP8 dot-product attention (wl/training.hpp fp8_dot_product_attention): Transformer Engine quantises Q, K and V
// before the fused kernel and dequantises its FP8 output after it (read a_b, write 1 B per element, and back); the
// backward quantises dO and dequantises dQ, dK and dV (TransformerEngine pytorch/attention/dot_product_attention/
// backends.py, FusedAttnFunc). The kernel itself keeps the 16-bit fused-attention rate: no FP8 fused-attention
// efficiency is measured (cuDNN's FP8 attention runs through Transformer Engine, which the lent machines lack).
/// An attention op's K/V heads on this GPU: split over TP, each replicated on the ranks that share it once TP
/// exceeds them.
double TrainingLayerPricer::kv_heads_per_gpu(const Op& o) const {
  const std::int64_t kv = o.kv_heads > 0 ? o.kv_heads : o.heads;
  return double(kv) / double(std::min<std::int64_t>(t, kv));
}

void TrainingLayerPricer::fp8_attention_casts(const Op& o) {
  if (!plan.fp8_dot_product_attention || !plan.flash_attention || eager) return;
  const double q_heads = double(o.heads) / double(t);
  const double kv_gpu = kv_heads_per_gpu(o);
  const double elems = double(T) * (q_heads * double(dqk + dv) + kv_gpu * double(dqk + dv));
  stream("attention FP8 casts (Q, K, V quantised, output dequantised)", elems * (e + 1.0), elems, 1.0);
}

/// The packed documents' mean length, each cut at the sequence length (as a packer cuts a longer example).
double TrainingLayerPricer::packed_mean_length() const {
  double mean = 0;
  for (const auto& [len, p] : plan.packing.lengths) mean += p * double(std::min(len, plan.seq_len));
  return mean;
}

std::vector<TrainingLayerPricer::PackedPiece> TrainingLayerPricer::packed_pieces(const Op& o) const {
  const wl::DocumentPacking& pk = plan.packing;
  const std::int64_t s = plan.seq_len;
  const double mean = packed_mean_length();
  std::vector<PackedPiece> out;
  if (!(mean > 0)) return out;
  const double docs = double(s) / mean / double(std::max(1, par.cp));
  for (const auto& [len, p] : pk.lengths) {
    const std::int64_t L = std::min(len, s);
    const double n = docs * p;
    if (o.chunked && o.window < L) {
      const std::int64_t C = o.window;
      if (L / C > 0) out.push_back({C, C, true, n * double(L / C)});
      if (L % C > 0) out.push_back({L % C, L % C, true, n});
      continue;
    }
    const bool sliding = (o.window > 0 && !o.chunked) || (o.topk > 0 && o.topk < L);
    const std::int64_t reach = o.topk > 0 ? o.topk : o.window;
    out.push_back({L, sliding ? std::min(L, reach) : L, !sliding || reach >= L, n});
  }
  return out;
}

void TrainingLayerPricer::price_packed_attention(const Op& o) {
  const bool fp8_kernel = plan.fp8_dot_product_attention && !eager;
  const double mean = packed_mean_length();
  const std::string nm =
      keep_ops ? fmt::format("attention (packed: {:.1f} documents of {:.0f} tokens on average per sequence{}, each "
                             "causal over itself){}",
                             double(plan.seq_len) / mean, mean, par.cp > 1 ? "; the CP ring's steps not priced" : "",
                             fp8_kernel ? " [FP8 inputs; the 16-bit fused rate: no FP8 fused-attention rate measured]"
                                        : "")
               : std::string();
  const auto pieces = packed_pieces(o);
  for (const bool bwd : {false, true}) {
    OpCost sum;
    sum.cls = OpClass::attention;
    const units::Seconds t_fixed = kernel_fixed(d, OpClass::attention);
    units::Seconds above{};
    units::Flops compute_flops{};
    double flop_over_eff = 0;  // Σ f_i/η_i: the pieces' efficiency, FLOP-weighted (harmonic)
    for (const auto& pc : pieces)
      for (const auto& c : attention_cost(nm, bh, pc.sq, pc.skv, dqk, dv, pc.causal, true, bwd, gp, d, attn_dropout)) {
        sum.name = c.name;
        sum.flops = sum.flops + c.flops * pc.count;
        sum.bytes = sum.bytes + c.bytes * pc.count;
        above = above + (c.time - t_fixed) * pc.count;
        if (c.bound == Bound::compute) compute_flops = compute_flops + c.flops * pc.count;
        if (c.efficiency > 0) flop_over_eff += c.flops.raw() * pc.count / c.efficiency;
      }
    sum.time = above + t_fixed;
    sum.bound = compute_flops.raw() * 2.0 >= sum.flops.raw() ? Bound::compute : Bound::memory;
    sum.efficiency = flop_over_eff > 0 ? sum.flops.raw() / flop_over_eff : 1.0;
    (bwd ? lc.bwd : lc.fwd).add(sum);
    (bwd ? lc.flops_bwd : lc.flops_fwd) += sum.flops;
    if (keep_ops) lc.ops.push_back(sum);
  }
}

void TrainingLayerPricer::price_attention(const Op& o) {
  fp8_attention_casts(o);
  if (plan.packing.on() && plan.flash_attention) {
    price_packed_attention(o);
    return;
  }
  if (o.chunked && o.window < plan.seq_len) {
    // Chunked local attention (Llama 4): each aligned chunk of C tokens is a causal attention of its own, so the
    // sequence is s/C causal C × C problems (one batched call) and a causal remainder. Under CP each rank takes
    // its s/cp tokens' chunks as local (exact when C divides the rank's pieces, s/(2·cp) under Megatron's load
    // balancing; no ring of K/V chunks).
    const std::int64_t C = o.window, full = s_local / C, rest = s_local % C;
    if (full > 0) add_attention(named("attention (chunked)"), C, C, true, full);
    if (rest > 0) add_attention(named("attention (last chunk)"), rest, rest, true);
    return;
  }
  // DeepSeek sparse attention: each query reads its top-k keys, priced as the sliding window is (s × k, not
  // causal) once the sequence passes k.
  const bool sliding = (o.window > 0 && !o.chunked) || (o.topk > 0 && o.topk < plan.seq_len);
  const std::int64_t reach = o.topk > 0 ? o.topk : o.window;
  const std::int64_t s_kv = sliding ? std::min(plan.seq_len, reach) : plan.seq_len;
  const bool causal = !sliding || reach >= plan.seq_len;
  if (par.cp > 1 && plan.flash_attention && causal && s_local % 2 == 0) {
    // Context parallelism as Transformer Engine runs it (AttnFuncWithCPAndKVP2P, the ring of K/V chunks; Megatron's
    // load balancing gives each rank chunks i and 2cp−1−i of 2cp): cp kernel calls per direction, not one. Step 0
    // is the rank's own chunks, causal over its s/cp tokens; each later step is one non-causal call of s/cp² pairs'
    // worth, either all local queries against the first half of the received K/V or the second half of the
    // queries against all of it, depending on the rank. The ranks meet at every step (the next K/V chunk), so a
    // step takes as long as its slower call: all queries against half the K/V, the shorter key loop
    // (efficiency.hpp's law). The FLOPs add up to the causal s/cp × s of the single-call form. The partial outputs
    // are merged by their log-sum-exp (TE 1.x: `out = torch.empty_like(q).zero_()`, then
    // flash_attn_fwd_out_correction per step: read the step's output, read and add into `out`, all in the
    // activation dtype: 3·a_b bytes per output element per step, + a_b for the zero fill; the double-precision LSE
    // updates are per token and head, negligible, and run on a side stream); in the backward each step adds its dQ
    // into dq and its dK/dV into the dkv that travels on (dq.add_, dkv.add_: 3·a_b bytes per element each).
    add_attention(named("attention (CP step 0)"), s_local, s_local, true);
    for (int i = 1; i < par.cp; ++i)
      add_attention(keep_ops ? fmt::format("attention (CP step {})", i) : std::string(), s_local, s_local / 2, false);
    const double q_elems = double(bh) * double(s_local) * double(dv);
    const double kv_elems = double(plan.micro_batch) * kv_heads_per_gpu(o) * double(s_local) * double(dqk + dv);
    const double merge_f = (3.0 * double(par.cp) + 1.0) * e * q_elems;
    const double merge_b = 3.0 * double(par.cp) * e * (double(bh) * double(s_local) * double(dqk) + kv_elems);
    stream("CP output merge", merge_f, 4.0 * q_elems * double(par.cp), merge_b / std::max(1.0, merge_f));
  } else {
    // With CP (unfused, or non-causal) each rank holds s/cp queries that attend to the whole sequence in one call.
    add_attention(named("attention"), s_local, s_kv, causal);
}
}


// Mamba-2 (graph.hpp add_mamba2): the conv1d and the chunked SSD scan over this GPU's heads (TP splits the heads,
// the channels and the groups; CP is not applied to the scan's recurrence), then the gated RMSNorm.
// Gated DeltaNet (add_gated_deltanet): the conv1d and the chunked gated delta rule over this GPU's value heads.
void TrainingLayerPricer::price_ssm(const Op& o) {
  const std::int64_t heads_gpu = std::max<std::int64_t>(1, o.heads / t);
  const std::int64_t channels_gpu = std::max<std::int64_t>(1, o.conv_channels / t);
  const std::int64_t groups_gpu = std::max<std::int64_t>(1, o.groups / t);
  for (const bool bwd : {false, true}) {
    OpCost c = o.delta_rule
                   ? gated_delta_scan_cost(named(bwd ? "conv1d + gated delta rule bwd" : "conv1d + gated delta rule"),
                                           heads_gpu, o.d_qk, o.d_v, o.chunk, channels_gpu, o.conv_kernel, double(T),
                                           s_local, e, bwd, gp, d)
                   : ssd_scan_cost(named(bwd ? "conv1d + SSD scan bwd" : "conv1d + SSD scan"), heads_gpu, o.d_v,
                                   o.d_qk, groups_gpu, o.chunk, channels_gpu, o.conv_kernel, double(T), s_local, e,
                                   bwd, gp, d);
    (bwd ? lc.bwd : lc.fwd).add(c);
    (bwd ? lc.flops_bwd : lc.flops_fwd) += c.flops;
    if (keep_ops) lc.ops.push_back(c);
  }
  const double inner = double(heads_gpu) * double(o.d_v);
  stream("gated RMSNorm", double(T) * inner * e * 3.0, 5.0 * double(T) * inner);
}


// DeepSeek sparse attention's lightning indexer (add_indexer): its projections (replicated on every TP rank: the
// whole n_i·d_i + d_i + n_i outputs per token), then the FP8 scoring of every causal (query, key) pair of the
// sequence, s·(s + 1)/2 per sequence (each rank scores its own CP share of the queries against the whole
// sequence), and its top-k. In DeepSeek-V3.2's sparse training the indexer learns from its own KL loss (its input
// detached), priced as a backward of twice its forward.
void TrainingLayerPricer::price_indexer(const Op& o) {
  // One GEMM of the projections' weight count (wq_b reads the r_q-wide query latent, wk and weights_proj h).
  fwd_gemm(named(o.name, " projections"), LinearKind::gate, T, std::max<std::int64_t>(1, o.matmul_elements() / o.out),
           o.out);
  const double s = double(plan.seq_len);
  const double pairs = double(plan.micro_batch) * s * (s + 1.0) / 2.0 / double(par.cp);
  for (const bool bwd : {false, true}) {
    OpCost c = indexer_cost(named(bwd ? "indexer scoring + top-k bwd" : "indexer scoring + top-k"), double(T), pairs,
                            o.heads, o.d_qk, double(plan.micro_batch) * s, o.index_cache_bytes, bwd, d);
    (bwd ? lc.bwd : lc.fwd).add(c);
    (bwd ? lc.flops_bwd : lc.flops_fwd) += c.flops;
    if (keep_ops) lc.ops.push_back(c);
  }
}

}  // namespace gpuplan::model::detail
