#include "layer_cost.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "moe_cost.hpp"
#include "lora_adapter.hpp"
#include "moe_layer.hpp"
#include "fp8_quant.hpp"
#include "graph_memo.hpp"
#include "norm_loss.hpp"
#include "quant_recipe.hpp"

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

/// PyTorch's eager bias-gradient kernels at their measured rate: our H100 (2026-11-27, issue #24;
/// scripts/measure/mpt_nongemm_probe.py; data/validation/measured/h100-sxm5-80gb/
/// mpt_nongemm_mpt-1b_s2048_b6_resbf16.json: each op alone at the MPT-1b layer's T = 12288 tokens, d = 2048, bf16;
/// CUDA-only profile, kernel time). A linear's bias gradient is a separate column sum of its output gradient
/// (reduce_kernel, T·n·a_b bytes; cuBLASLt fuses the bias only into the forward): the four of the layer (n = 3d, d, 4d,
/// d) take 200.8 µs for 152.2 µs of streaming (0.887 × 3.35 TB/s), 0.758. Other GPUs: the same fraction of their
/// streaming rate (an assumption, as for kEagerScorePassRate). The same run's LayerNorm: norm_loss.cpp.
constexpr double kEagerBiasGradRate = 0.758;

namespace {

/// Prices one layer's op graph for training: each op forward and backward on the GPU, plus the elementwise kernels
/// the training stack runs between them (rotary, residual adds, the MLP activation, the MoE token permutation).
/// GEMM shapes are the graph's, split by TP (and the experts by EP).
class TrainingLayerPricer {
 public:
  TrainingLayerPricer(const wl::TransformerArch& arch, const wl::TrainingPlan& training_plan, LayerKind layer_kind,
                      const Device& device, bool keep_op_list)
      : a(arch), plan(training_plan), d(device), eager_launch(device.eff.kernel_launch),
        eager_class(device.eff.launch_class), keep_ops(keep_op_list), layer(layer_kind),
        graph(layer_graph(arch, layer_kind)), attn(attention_or_reference(arch, *graph)) {
    if (plan.cuda_graphs == wl::CudaGraphScope::none) return;
    const Device g = graph_launch_device(device);
    graph_launch = g.eff.kernel_launch;
    graph_class = g.eff.launch_class;
  }

  LayerCost run() {
    int norms = 0;
    for (const Op& o : graph) {
      use_launch(captured(o, norms));
      switch (o.kind) {
        case OpKind::norm: {
          // Every norm of the graph: the layer's norms over h (pre-norms; Gemma 2/3's post-norms too) and the per-head
          // q/k norm (Part::attention: Qwen3, Gemma 3, OLMo 2, Llama 4) over head_dim. Megatron's `layernorm`
          // recompute module covers the layer's norms, TorchTitan's op-level policy every norm.
          const Seconds before = lc.fwd.total();
          if (o.part == Part::attention) {
            price_qk_norm();
          } else {
            price_norm(o.name, double(T_norm) * double(h), h);
            ++norms;
          }
          if ((o.part != Part::attention && plan.recomputes(wl::recompute_layernorm)) || op_sac)
            recompute_part(lc.fwd.total() - before, OpClass::elementwise);
          break;
        }
        case OpKind::attention: price_attention(o); break;
        case OpKind::ssm: price_ssm(o); break;
        case OpKind::indexer: price_indexer(o); break;
        case OpKind::linear: moe_term(o, [&] { price_linear(o); }); break;
        case OpKind::embedding: break;
      }
    }
    // The residual add after the FFN is TransformerLayer._forward_mlp's (not in scope attn).
    use_launch(plan.cuda_graphs == wl::CudaGraphScope::layer || plan.cuda_graphs == wl::CudaGraphScope::full_iteration);
    if (layer.ffn) residual();  // a mixer-only layer's residual add follows its output projection
    return std::move(lc);
  }

  // CUDA graphs (wl::CudaGraphScope; Megatron-LM core_v0.14.0 transformer_layer.py, cuda_graphs.py): whether op `o`
  // runs inside the layer's captured graph. Scope "attn" captures TransformerLayer._forward_attention (the input norm,
  // the attention block and its residual add); "full" (layer) and full_iteration the whole layer, except an MoE block
  // whose dispatcher sizes its all-to-all and grouped GEMMs on the host (dropless routing: the split sizes are data,
  // copied to the host each micro-batch, which a graph cannot replay): its router, experts and shared experts keep the
  // eager launch. A fixed capacity with padding (moe_fixed_splits) makes the MoE block static and capturable.
  [[nodiscard]] bool captured(const Op& o, int norms_seen) const {
    switch (plan.cuda_graphs) {
      case wl::CudaGraphScope::none: return false;
      case wl::CudaGraphScope::attention:
        return o.part == Part::attention || o.part == Part::ssm || (o.kind == OpKind::norm && norms_seen == 0);
      case wl::CudaGraphScope::layer:
      case wl::CudaGraphScope::full_iteration:
        return plan.moe_fixed_splits() || !(o.part == Part::router || o.part == Part::routed_experts ||
                                            o.part == Part::shared_experts);
    }
    return false;
  }
  // The per-kernel fixed costs the next ops pay (kernel_fixed reads them): in-graph or eager.
  void use_launch(bool in_graph) {
    d.eff.kernel_launch = in_graph ? graph_launch : eager_launch;
    d.eff.launch_class = in_graph ? graph_class : eager_class;
  }

 private:
  // Op names only when the op list is kept: the sums do not need them, and building them is most of the cost.
  std::string named(const std::string& name, const char* suffix = "") const {
    return keep_ops ? name + suffix : std::string();
  }

  // LoRA: the base weights are frozen (no weight-gradient GEMM; the activation gradient still flows), a targeted
  // layer adds its adapter's passes (lora_adapter.hpp: x·A, then ·B, 16-bit, each way; dropout, scale, sums), and a
  // quantised base (QLoRA, int8, fp8 storage) is dequantised to the compute dtype before the forward and the dgrad
  // GEMM (read the stored bytes, write a_b per weight).
  void fwd_gemm(const std::string& name, LinearKind kind, std::int64_t m, std::int64_t k, std::int64_t n,
                std::int64_t batch = 1) {
    last_fwd_cast = last_fwd_gemm = Seconds(0);
    // The MoE router's GEMM stays 16-bit under FP8/FP4 training, with no casts: Megatron-Core computes it outside
    // Transformer Engine (moe/moe_utils.py router_gating_linear, in the input's dtype or moe_router_dtype) and
    // DeepSeek-V3 keeps its gating modules in BF16/FP32 (arXiv:2412.19437 §3.3.1).
    const hw::Precision gemm_p = kind == LinearKind::router ? sixteen_bit_of(gp) : gp;
    // Routed experts run as grouped GEMMs (moe_layer.hpp: the measured grouped-kernel law over the batched GEMM of
    // the touched experts, moe_w).
    const bool grouped = kind == LinearKind::expert_in || kind == LinearKind::expert_out;
    // The blockwise FP8 recipe's GEMMs at the measured block-scaled rate (quant_recipe.hpp).
    const bool block_scaled = gemm_p == hw::Precision::fp8 && plan.precision.recipe == wl::QuantRecipe::blockwise;
    auto g = [&](OpCost c) {
      if (block_scaled && c.bound == Bound::compute) {
        c.time = c.time * kBlockScaledGemmTime;
        c.efficiency /= kBlockScaledGemmTime;
      }
      return grouped ? moe_expert_gemm(std::move(c), moe_w, d) : c;
    };
    // GEMMs count toward the layer's FLOPs; the streaming ops around them (casts, dequantisation) only take time.
    auto put = [&](bool forward, bool gemm, const OpCost& o) {
      (forward ? lc.fwd : lc.bwd).add(o);
      if (gemm) (forward ? lc.flops_fwd : lc.flops_bwd) += o.flops;
      if (keep_ops) lc.ops.push_back(o);
    };
    auto add_fwd = [&](const OpCost& o) { put(true, true, o); };
    auto add_bwd = [&](const OpCost& o) { put(false, true, o); };
    const bool from_norm = norm_input;
    norm_input = false;
    // FP8/FP4 GEMMs take quantised operands (fp8_quant.hpp): their kernels, and the input cast's forward time.
    if (gemm_p == hw::Precision::fp8 || gemm_p == hw::Precision::fp4) {
      const QuantOps qo = quant.gemm_operands(name, kind, double(m), double(k), double(n), double(batch), from_norm);
      for (const QuantOp& o : qo) put(o.forward, false, o.op);
      last_fwd_cast = qo.input_cast_fwd;
    }
  // Transformer Engine runs the fp8 dgrad and wgrad GEMMs with split accumulation (GemmShape::split_accumulation);
  // blockwise scaling promotes the partial sums every 128 K in the forward GEMM too (DeepSeek-V3 §3.3.2).
  const bool split = gemm_p == hw::Precision::fp8;
  const bool split_fwd = split && plan.precision.recipe == wl::QuantRecipe::blockwise;
  const OpCost fwd = g(gemm_cost(named(name), {m, n, k, batch, 0, split_fwd}, gemm_p, d));
  last_fwd_gemm = fwd.time;
  add_fwd(fwd);
  add_bwd(g(gemm_cost(named(name, " dgrad"), {m, k, n, batch, 0, split}, gemm_p, d)));
  if (!lora.on()) {
    OpCost wg = g(gemm_cost(named(name, " wgrad"), {k, n, m, batch, 0, split}, gemm_p, d));
    if (wgrad_accumulates(plan))
      wg = accumulating_wgrad(wg, double(k) * double(n) * double(batch), plan.precision.gradient_bytes, d);
    add_bwd(wg);
    lc.bwd.wgrad += wg.time;
    return;
  }
  if (dequant && !fp8_base_feeds_gemm) {
    const double w = double(k) * double(n) * double(batch);
    const units::Bytes moved = units::bytes(w * (base_b + e));
    put(true, false, streaming_cost(named(name, " dequantise"), OpClass::elementwise, moved, units::flop(w), d));
    put(false, false, streaming_cost(named(name, " dequantise (bwd)"), OpClass::elementwise, moved, units::flop(w), d));
  }
  if (!lora_targets(lora, kind)) return;
  for (const LoraPass& lp : lora_adapter_passes(name, plan, kind, m, k, n, batch, gemm_p, d, keep_ops))
    put(lp.forward, lp.gemm, lp.op);
  }

  // Bytes per output element a SwiGLU / GELU kernel writes: the activation dtype, or under DeepSeek's framework the
  // FP8 copy with its 1×128 scales that the next GEMM reads (swiglu_forward_with_weight_and_per_token_cast_to_fp8).
  [[nodiscard]] double activation_out_bytes() const { return per_axis ? kBlockAxisBytes : e; }

  // MLA's kernels beside its projections (arXiv:2405.04434 §2.1). The latent RMSNorms of the query (r_q) and of
  // the key-value latent (r_kv): norm kernels like the layer's own (2 passes forward, 4 backward), recomputed with
  // the up-projections they feed or with the norms. Under DeepSeek's framework, the heads assembled for
  // FlashAttention's d_nope + d_rope wide q and k: q's no-rope part copied beside its rotary part and k's shared
  // rotary part written into every head (read q_nope and write it, write k_pe per head), forward and again in the
  // recompute, and dq's and dk's no-rope parts copied out in the backward (_copy_tensor_kernel and direct_copy in
  // DeepSeek's profile: docs/deepseek-v3-profile.md). Megatron-Core's fused MLA rope writes q and k assembled.
  void mla_elementwise() {
    const Op::MlaShape& ml = attn.mla;
    const Seconds before = lc.fwd.total();
    price_norm("MLA query latent norm", double(T) * double(ml.q_rank), ml.q_rank);
    price_norm("MLA key-value latent norm", double(T) * double(ml.kv_rank), ml.kv_rank);
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
  void attention_output_store(double elems) {
    if (plan.attention_output != wl::AttentionOutputStore::e5m6) return;
    stream("attention output E5M6 store / read back", elems * (e + 1.5), elems, 1.0);
  }

  // A gated (SwiGLU) or plain (GELU) activation over `elems` outputs: fused, it reads [gate | up] and writes its
  // output (activation_out_bytes) forward, and reads both inputs and the output gradient and writes two gradients
  // backward; recomputed (`again`), its forward runs again in the backward. Under DeepSeek's framework a recomputed
  // SwiGLU reads its input from the FP8 copy kept for it (§3.3.3; the memory model keeps it in FP8), dequantised to
  // BF16 first in the backward (cast_back_impl: read FP8 + scales, write BF16).
  void activation(const char* nm, double elems, bool again) {
    const double fwd = elems * (gated ? e * (glu_f - 1.0) + activation_out_bytes() : 2.0 * e);
    const double bwd = elems * e * (gated ? glu_b : 3.0);
    const Seconds before = lc.fwd.total();
    stream(nm, fwd, 4.0 * elems, bwd / fwd);
    if (!again) return;
    recompute_part(lc.fwd.total() - before, OpClass::elementwise);
    if (!per_axis || !gated) return;
    const double in = elems * double(glu);
    OpCost c = streaming_cost(named(nm, " input FP8 copy read back"), OpClass::elementwise,
                              units::bytes(in * (kBlockAxisBytes + e)), units::flop(in), d);
    lc.bwd.add(c);
    if (keep_ops) lc.ops.push_back(std::move(c));
  }

  // The MoE layer's terms (moe_layer.hpp, MoeLayerTerms), recorded as each op is added: forward + backward time.
  [[nodiscard]] Seconds priced() const { return lc.fwd.total() + lc.bwd.total(); }
  template <class F>
  void moe_term_as(MoeLayerTerms::Term k, F&& price) {
    const Seconds before = priced();
    price();
    lc.moe.add(k, priced() - before);
    moe_taken += priced() - before;
  }
  template <class F>
  void moe_term(const Op& o, F&& price) {
    if (o.part != Part::router && o.part != Part::routed_experts && o.part != Part::shared_experts) {
      price();
      return;
    }
    const Seconds before = priced();
    moe_taken = Seconds(0);
    price();
    const Seconds dt = priced() - before - moe_taken;
    lc.moe.add(o.part == Part::router           ? MoeLayerTerms::router
               : o.part == Part::shared_experts ? MoeLayerTerms::shared
                                                : MoeLayerTerms::expert_gemm,
               dt);
  }

  // A recompute module's forward work, repeated in the backward (LayerCost::rec).
  void recompute_part(Seconds dt, OpClass cls) {
    if (!(dt > Seconds(0))) return;
    if (cls == OpClass::gemm) {
      lc.rec.gemm += dt;
      lc.rec.compute_kernels += 1;
    } else {
      lc.rec.elementwise += dt;
    }
  }

  // TorchTitan's op-level selective AC (wl::Recompute::selective_op; pytorch/torchtitan 9dec370ad26b
  // parallelize_llama.py, _custom_policy): of the GEMM fwd_gemm just priced, the share `gemm_share` is an even-numbered
  // mm of the block and runs again in the backward; its FP8 input cast runs again whatever the share (the casts are no
  // saved op, and torchao's Float8 matmul keeps its FP8 input for the backward).
  void op_sac_rerun(double gemm_share) {
    if (!op_sac) return;
    recompute_part(last_fwd_cast, OpClass::elementwise);
    recompute_part(last_fwd_gemm * gemm_share, OpClass::gemm);
  }
  // An elementwise op priced by `price` that TorchTitan's op-level policy runs again in the backward.
  template <class F>
  void op_sac_elementwise(F&& price) {
    const Seconds before = lc.fwd.total();
    price();
    if (op_sac) recompute_part(lc.fwd.total() - before, OpClass::elementwise);
  }

  /// `rate`: the kernels' achieved bandwidth as a fraction of the streaming rate (1: streaming).
  void stream(const std::string& name, double bytes_fwd, double flops_fwd, double bwd_factor = 2.0,
              double rate = 1.0) {
    OpCost f = streaming_cost(named(name), OpClass::elementwise, units::bytes(bytes_fwd), units::flop(flops_fwd), d);
    OpCost b = streaming_cost(named(name, " bwd"), OpClass::elementwise, units::bytes(bytes_fwd * bwd_factor),
                              units::flop(flops_fwd * bwd_factor), d);
    if (bytes_fwd <= 0) return;
    if (rate < 1.0)
      for (OpCost* c : {&f, &b}) c->time = (c->time - kernel_fixed(d, c->cls)) / rate + kernel_fixed(d, c->cls);
    lc.fwd.add(f);
    lc.bwd.add(b);
    if (!keep_ops) return;
    lc.ops.push_back(f);
    lc.ops.push_back(b);
  }

  /// A norm over `elems` elements in rows of `row`, forward and backward, as the plan runs it (norm_loss.hpp: fused,
  /// eager LayerNorm, or RMSNorm as PyTorch ops).
  void price_norm(const std::string& name, double elems, std::int64_t row) {
    NormCost c = training_norm_cost(name, keep_ops, norm_kind, elems, row, e, d);
    if (!c.priced) return;
    lc.fwd.add(c.fwd);
    lc.bwd.add(c.bwd);
    if (!keep_ops) return;
    lc.ops.push_back(std::move(c.fwd));
    lc.ops.push_back(std::move(c.bwd));
  }

  /// The per-head q/k norm after the QKV projection, on this GPU's heads of all T tokens (sequence parallelism
  /// gathers before the projection): q's and k's apart, a kernel each, as Megatron-Core runs q_layernorm and
  /// k_layernorm (transformer/attention.py) and HF's Qwen3 q_norm and k_norm. Serving prices them as one fused
  /// kernel of the same rows (serve/serving_layer.cpp price_qk_norm).
  void price_qk_norm() {
    const double q_elems = double(T) * double(attn.heads) / double(t) * double(attn.d_qk);
    const double k_elems = double(T) * kv_heads_per_gpu(attn) * double(attn.d_qk);
    price_norm("q norm", q_elems, attn.d_qk);
    price_norm("k norm", k_elems, attn.d_qk);
  }

  /// An eager linear's bias gradient: the column sum of its T × n output gradient (backward only).
  void bias_grad(const std::string& name, bool has_bias, std::int64_t n) {
    if (!eager || !has_bias || n <= 0) return;
    const double elems = double(T) * double(n);
    OpCost b = streaming_cost(named(name, " bias grad"), OpClass::elementwise, units::bytes(elems * e),
                              units::flop(elems), d);
    const units::Seconds t_fixed = kernel_fixed(d, OpClass::elementwise);
    b.time = (b.time - t_fixed) / kEagerBiasGradRate + t_fixed;
    lc.bwd.add(b);
    if (keep_ops) lc.ops.push_back(b);
  }

  void residual() {
    stream(drop > 0 ? "residual add + dropout" : "residual add", (double(T_norm) * double(h)) * res_f, (double(T_norm) * double(h)),
           res_b / res_f);
  }

  void add_attention(const std::string& name, std::int64_t sq, std::int64_t skv, bool is_causal,
                     std::int64_t chunks = 1) {
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
  [[nodiscard]] double kv_heads_per_gpu(const Op& o) const {
    const std::int64_t kv = o.kv_heads > 0 ? o.kv_heads : o.heads;
    return double(kv) / double(std::min<std::int64_t>(t, kv));
  }

  void fp8_attention_casts(const Op& o) {
    if (!plan.fp8_dot_product_attention || !plan.flash_attention || eager) return;
    const double q_heads = double(o.heads) / double(t);
    const double kv_gpu = kv_heads_per_gpu(o);
    const double elems = double(T) * (q_heads * double(dqk + dv) + kv_gpu * double(dqk + dv));
    stream("attention FP8 casts (Q, K, V quantised, output dequantised)", elems * (e + 1.0), elems, 1.0);
  }

  // Packed documents (wl::DocumentPacking): the fused kernel runs varlen over cu_seqlens (Transformer Engine's THD
  // layout; flash-attn's varlen API), tiling each document on its own, so a sequence of s tokens holding documents of
  // d_i tokens costs Σ causal d_i × d_i problems instead of one s × s: FLOPs Σ d_i²/2 per head where one document per
  // sequence has s²/2. With the length distribution P(d) (each length cut at s, as a packer cuts a longer example), a
  // sequence holds s/E[d] documents, P(d)·s/E[d] of them of length d. Each length is priced by attention_cost (its
  // FLOPs, bytes, measured rate and sequence law at that document length, dropout per score element), its time above
  // the kernel's fixed cost scaled by that count; the varlen call is one kernel per direction (one fixed cost). Q, K,
  // V and O stream once per token as before (the bytes add up to the s tokens'). Sliding windows and top-k reach
  // apply within a document; chunked attention splits each document into its chunks. Under CP each rank holds 1/cp of
  // every document (Transformer Engine splits each one into 2·cp chunks): priced as 1/cp of the documents' work in
  // one call; the ring's per-step calls and output merges are not priced under packing.
  struct PackedPiece {
    std::int64_t sq, skv;
    bool causal;
    double count;  // problems of this shape per micro-batch on this GPU (per batch·head)
  };
  /// The packed documents' mean length, each cut at the sequence length (as a packer cuts a longer example).
  [[nodiscard]] double packed_mean_length() const {
    double mean = 0;
    for (const auto& [len, p] : plan.packing.lengths) mean += p * double(std::min(len, plan.seq_len));
    return mean;
  }

  [[nodiscard]] std::vector<PackedPiece> packed_pieces(const Op& o) const {
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

  void price_packed_attention(const Op& o) {
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

  void price_attention(const Op& o) {
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
  void price_ssm(const Op& o) {
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
  void price_indexer(const Op& o) {
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

  // The linears, split by TP: the QKV block (MLA: its down- and up-projections as one GEMM of equal weight count,
  // h × (Σ weights / h)), the output projection (rows), the MLP or the experts (columns, then rows), the router
  // (all its columns, on this rank's tokens). Routed experts: E/ep experts on this GPU, one grouped GEMM over them,
  // T·k·ep/E tokens each.

  void price_linear(const Op& o) {
    switch (o.linear) {
      case LinearKind::qkv: {
        const Seconds before = lc.fwd.total();
        norm_input = !attn.is_mla() && o.part != Part::ssm;  // Megatron-Core's TELayerNormColumnParallelLinear
        fwd_gemm(o.name, LinearKind::qkv, T, h, o.matmul_elements() / h / t);
        bias_grad(o.name, a.qkv_bias && o.part != Part::ssm, o.matmul_elements() / h / t);
        if (attn.is_mla() && o.part != Part::ssm && plan.recomputes(wl::recompute_mla_up_proj) &&
            o.matmul_elements() > 0) {
          // MLA's up-projections (q_b: r_q → n·(d_nope + d_rope); kv_b: r_kv → n·(d_nope + d_v)) are that share of
          // the QKV block's weights, hence of its forward time (GEMM and FP8 cast).
          const Op::MlaShape& ml = attn.mla;
          const double up = double(ml.q_rank > 0 ? ml.q_rank * attn.heads * (ml.d_nope + ml.d_rope) : 0) +
                            double(ml.kv_rank * attn.heads * (ml.d_nope + ml.d_v));
          recompute_part((lc.fwd.total() - before) * std::min(1.0, up / double(o.matmul_elements())), OpClass::gemm);
        }
        // Op-level SAC: wk (mm 2 of q, k, v) is the K heads' share of the fused QKV GEMM.
        if (o.part != Part::ssm && o.matmul_elements() > 0)
          op_sac_rerun(double(attn.kv_heads * dqk) / (double(o.matmul_elements()) / double(h)));
        if (o.part == Part::ssm) break;  // Mamba-2's in_proj: no rotary
        // Rotary on the query and key heads (MLA: on the rotary part of each head).
        const double rope_elems =
            double(T) * double((attn.heads + attn.kv_heads) * (attn.is_mla() ? attn.mla.d_rope : dqk) / t);
        if (a.position == wl::PositionKind::rope)
          op_sac_elementwise([&] { stream("rotary", rope_elems * e * rope_f, 3.0 * rope_elems, rope_b / rope_f); });
        if (attn.is_mla()) mla_elementwise();
        break;
      }
      case LinearKind::attention_out:
        attention_output_store(double(T) * double(o.in / t));
        fwd_gemm(o.name, LinearKind::attention_out, T, o.in / t, h);
        op_sac_rerun(1.0);  // wo is mm 4; its output rebuilds the residual stream the second norm reads
        bias_grad(o.name, a.o_bias, h);
        op_sac_elementwise([&] { residual(); });
        break;
      case LinearKind::router:
        // The gating GEMM runs on this rank's tokens: under sequence parallelism the MoE layer's input is the
        // sequence shard (T/tp rows, Megatron-Core TopKRouter on [s/tp, b, h]; the dispatcher gathers across TP
        // after routing), as its router kernels below; without it every TP rank routes all T tokens.
        fwd_gemm(o.name, LinearKind::router, T_norm, h, o.out);
        if (!eager) price_router_kernels(o.out);
        break;
      case LinearKind::expert_in:
      case LinearKind::expert_out: {
        // Split by the expert TP (etp = tp unless the plan folds): the expert-TP·EP group holds etp·ep·(T/tp)
        // unique tokens, so T·k·ep·etp/tp routed copies, width/etp columns each (the FLOPs per GPU do not move).
        // Load imbalance (plan.moe_imbalance, 1 = balanced): the busiest EP rank's experts get that many times the
        // mean tokens, and every rank waits for it at the combine (moe_layer.hpp, moe_expert_work). An expert capacity
        // (plan.moe_load): padded, every expert's GEMM has exactly capacity = f·k·T/E rows; f < 1 drops tokens.
        const std::int64_t width = o.linear == LinearKind::expert_in ? o.out / glu : o.in;
        moe_w = moe_expert_work({double(T), t, par.expert_tp(), par.ep, plan.moe_load()}, o.copies, o.active, width);
        lc.moe.work = moe_w;
        const double rows = moe_w.rows;
        const std::int64_t ie = moe_w.width;
        if (o.linear == LinearKind::expert_in) {
          fwd_gemm(o.name, LinearKind::expert_in, moe_w.rows_per_expert, h, glu * ie, moe_w.groups);
          activation("expert activation", rows * double(ie), plan.recomputes(wl::recompute_moe_act));
        } else {
          fwd_gemm(o.name, LinearKind::expert_out, moe_w.rows_per_expert, ie, h, moe_w.groups);
          moe_term_as(MoeLayerTerms::routing, [&] { price_token_routing(rows); });
          moe_term_as(MoeLayerTerms::host, [&] { price_dispatcher_host(); });
        }
        break;
      }
      case LinearKind::mlp_in: {
        // Megatron-Core's "mlp" recompute module: the dense MLP's whole forward (fc1, activation, fc2) runs again in
        // the backward (transformer_layer.py, recompute_mlp on non-MoE layers); the shared experts are not covered.
        const bool rc_mlp = o.part == Part::dense_mlp && plan.recomputes(wl::recompute_mlp);
        const std::int64_t width = o.out / glu / t;
        Seconds before = lc.fwd.total();
        norm_input = o.part == Part::dense_mlp;  // a MoE layer's norm is its own module (TENorm), before the router
        fwd_gemm(o.name, LinearKind::mlp_in, T, h, glu * width);
        if (rc_mlp) recompute_part(lc.fwd.total() - before, OpClass::gemm);
        if (o.part == Part::dense_mlp) op_sac_rerun(gated ? 0.5 : 0.0);  // w3 (mm 6) is half of [w1 | w3]; fc1 is kept
        bias_grad(o.name, a.mlp_bias && o.part == Part::dense_mlp, glu * width);
        // The shared experts are an MLP of their own (Megatron-Core SharedExpertMLP, DeepSeek's profile,
        // docs/deepseek-v3-profile.md): their activation is one more kernel over T·n_s·i_s outputs, in every framework.
        if (o.part == Part::dense_mlp)
          activation(gated ? "SwiGLU" : "GELU", double(T) * double(width), rc_mlp || op_sac);
        else if (o.part == Part::shared_experts)
          activation(gated ? "shared expert SwiGLU" : "shared expert GELU", double(T) * double(width),
                     plan.recomputes(wl::recompute_moe_act));
        break;
      }
      case LinearKind::mlp_out: {
        const Seconds before = lc.fwd.total();
        fwd_gemm(o.name, LinearKind::mlp_out, T, o.in / t, h);
        if (o.part == Part::dense_mlp && plan.recomputes(wl::recompute_mlp))
          recompute_part(lc.fwd.total() - before, OpClass::gemm);
        // Op-level SAC: w2 is mm 7 (kept); a two-matrix MLP's fc2 (mm 6) is not kept, but its backward needs only its
        // input, so the recomputation stops before it (torch.utils.checkpoint's early stop). Only the cast reruns.
        if (o.part == Part::dense_mlp) op_sac_rerun(0.0);
        bias_grad(o.name, a.mlp_bias && o.part == Part::dense_mlp, h);
        break;
      }
      case LinearKind::gate:     // the shared experts' h→1 gate: a dot product per token, not priced
      case LinearKind::lm_head:   // not a layer op
      case LinearKind::mtp_proj:  // the MTP module's (build_mtp_graph), not a layer op
        break;
  }
  }

  // The token rows' trips around the expert GEMMs, P = T·k routed rows of h elements (balanced routing: a GPU
  // receives as many rows as it sends at any EP). Fused (Megatron-Core's permute/unpermute kernels): one gather into
  // expert order and one weighted scatter back, read + write each. Eager PyTorch, as our measured dispatcher runs it
  // (scripts/measure/moe_layer.py, the MoE layer of moe_train_step.py): the gather into expert order (x[idx]); the
  // received rows regrouped into the grouped GEMM's padded expert-major groups (a copy with a zero row, a gather)
  // and gathered back after it; the gather back into token order, the scale by the routing weight and the sum over
  // the k copies (the sum writes T rows). Each is its own kernel reading and writing its rows; the backward of each
  // (index_put accumulation, the products' gradients) moves about twice the bytes.
  void price_token_routing(double P) {
    const double row = double(h) * e;
    if (!eager) {
      stream("token permute/unpermute", P * row * 4.0, 0.0);
      // Megatron-Core's all-to-all dispatcher with more than one expert per GPU ("Permutation 2",
      // token_dispatcher.py MoEAlltoAllTokenDispatcher.dispatch_postprocess / combine_preprocess, core_v0.14.0): the
      // received rows, grouped by source rank, are sorted into expert order before the experts and restored after
      // (sort_chunks_by_idxs, Transformer Engine's fused moe_sort_chunks_by_index; under drop-and-pad a transpose
      // copy): P rows read and written each way, and again in the backward. Not under DeepEP, whose dispatch lands
      // the rows in expert order.
      if (par.ep > 1 && moe_w.local > 1.0 && plan.ep_dispatch == wl::EpDispatch::all_to_all) {
        stream("sort received rows by local expert (permutation 2)", P * row * 2.0, 0.0, 1.0);
        stream("restore rows to source-rank order (unpermutation 2)", P * row * 2.0, 0.0, 1.0);
      }
      return;
    }
    stream("token permute (gather into expert order)", P * row * 2.0, 0.0);
    stream("expert-order regroup (pad copy, gather, gather back)", P * row * 6.0, 0.0);
    stream("unpermute (gather, scale by routing weight, sum over top-k)", P * row * 5.0 + double(T) * row,
           P * double(h) * 2.0);
  }

  // Megatron-Core's TopKRouter beyond its gating GEMM (moe_cost.hpp megatron_router_kernels): its small kernels over
  // the [tokens, experts] scores of this rank's tokens (T/tp under sequence parallelism), forward and backward. Each
  // is priced as reading and writing one fp32 [tokens, experts] tensor (an upper bound for the boolean map and the
  // per-expert sums) plus its fixed cost; at training's sizes the fixed cost is most of it. PyTorch stacks of our own
  // (eager kernels) run their own router, inside the measured eager dispatcher's terms.
  void price_router_kernels(std::int64_t experts) {
    if (!a.moe) return;
    const RouterKernels rk = megatron_router_kernels(
        a.moe->correction_bias > 0, a.moe->group_limited(), plan.moe_router_fusion, plan.moe_capacity_factor.has_value(),
        plan.moe_pad_to_capacity, par.tp * par.cp);
    const double pass = double(T_norm) * double(experts) * 4.0 * 2.0;
    for (const bool forward : {true, false}) {
      const int n = forward ? rk.fwd : rk.bwd;
      if (n <= 0) continue;
      const char* nm = plan.moe_router_fusion ? (forward ? "router kernels (fused top-k, aux loss)"
                                                         : "router kernels bwd (fused top-k, aux loss)")
                                              : (forward ? "router kernels (unfused top-k, aux loss)"
                                                         : "router kernels bwd (unfused top-k, aux loss)");
      OpCost c = split_into_kernels(streaming_cost(named(nm), OpClass::elementwise, units::bytes(pass * double(n)),
                                                   units::flop(0), d),
                                    n, d);
      if (keep_ops) c.name += fmt::format(" ×{}", n);
      (forward ? lc.fwd : lc.bwd).add(c);
      if (keep_ops) lc.ops.push_back(std::move(c));
    }
  }

  // The dispatcher's host synchronisations (moe_cost.hpp): time the GPU spends waiting for the host, forward and
  // backward, once per MoE layer and micro-batch.
  void price_dispatcher_host() {
    const MoeHostSync hs = moe_host_sync(eager, par.ep, plan.ep_dispatch, plan.moe_fixed_splits());
    for (const bool forward : {true, false}) {
      const Seconds wait = forward ? hs.fwd : hs.bwd;
      if (!(wait > Seconds(0))) continue;
      OpCost c;
      c.name = named(forward ? "MoE dispatcher host sync" : "MoE dispatcher host sync bwd");
      c.cls = OpClass::host;
      c.bound = Bound::launch;
      c.time = wait;
      (forward ? lc.fwd : lc.bwd).add(c);
      if (keep_ops) lc.ops.push_back(c);
    }
  }

  const wl::TransformerArch& a;
  const wl::TrainingPlan& plan;
  // The device; its per-kernel fixed costs switch per op between the eager launch and the in-graph replay
  // (use_launch, under plan.cuda_graphs).
  Device d;
  const Seconds eager_launch;
  const KernelClassCosts eager_class;
  Seconds graph_launch{};
  KernelClassCosts graph_class{};
  const bool keep_ops;
  const LayerKind layer;
  const GraphRef graph;
  const Op attn;
  LayerCost lc;
  const GemmQuantOps quant{a, plan, d, keep_ops};  // the FP8 / FP4 GEMMs' quantisation kernels
  const bool op_sac = plan.recompute == wl::Recompute::selective_op;
  const NormImpl norm_kind = norm_impl(a, plan);  // norm_loss.hpp
  const bool per_axis = one_layout_blockwise(plan);  // DeepSeek's framework: per-axis FP8 casts (quant_recipe.hpp)
  Seconds last_fwd_cast{}, last_fwd_gemm{};  // the last fwd_gemm's forward input cast and GEMM (op_sac_rerun)
  bool norm_input = false;  // the next fwd_gemm's input is a LayerNormLinear's norm output (fp8_quant.hpp)
  MoeExpertWork moe_w;   // the routed experts' work on this GPU (set by the expert ops)
  Seconds moe_taken{};   // time of the op already booked to another MoE term
  const wl::Parallelism& par = plan.par;
  const std::int64_t t = par.tp;
  const std::int64_t s_local = plan.seq_len / par.cp;
  const std::int64_t T = plan.micro_batch * s_local;  // tokens through this GPU's GEMMs
  const std::int64_t T_norm = par.sequence_parallel ? T / t : T;
  const std::int64_t h = a.hidden;
  const hw::Precision gp = plan.precision.compute;
  const double e = plan.precision.activation_bytes;
  const wl::Lora& lora = plan.lora;
  const double base_b = base_weight_bytes(plan);
  const bool dequant = lora_base_dequantised(plan);
  const bool fp8_stored = fp8_stored_weights(plan);  // fp8_quant.hpp
  const bool fp8_base_feeds_gemm = fp8_stored && lora.on();
  const std::int64_t dqk = attn.d_qk, dv = attn.d_v;
  // Element accesses per element (reads + writes) of the non-GEMM ops, fused vs PyTorch eager:
  //  RoPE: fused 2 fwd / 2 bwd; eager rotate_half (x·cos, neg, cat, ·sin, add) 11 fwd / 13 bwd (+ slice_backward).
  //  SwiGLU: fused 3 fwd / 5 bwd; eager silu + mul 5 fwd / 9 bwd (mul_backward ×2, silu_backward).
  //  Norms: norm_loss.hpp (one kernel each way in both, or RMSNorm written as PyTorch ops, op by op).
  const bool eager = plan.kernels == wl::KernelStyle::eager;
  const double rope_f = eager ? 11.0 : 2.0, rope_b = eager ? 13.0 : 2.0;
  const double glu_f = eager ? 5.0 : 3.0, glu_b = eager ? 9.0 : 5.0;
  const bool gated = a.mlp == wl::MlpKind::gated;
  const std::int64_t glu = gated ? 2 : 1;
  // Hidden dropout on the block's output before the residual add: fused into it (Megatron's bias-dropout-add) it
  // writes the 1-byte mask forward and reads it backward; eager, F.dropout is its own kernel each way (read and write
  // the activation, and the mask).
  const double drop = plan.hidden_dropout(a) ? (eager ? 2.0 * e + 1.0 : 1.0) : 0.0;
  const double res_f = 3.0 * e + drop, res_b = 3.0 * e + drop;
  const bool attn_dropout = plan.attention_dropout(a);
  const std::int64_t bh = plan.micro_batch * attn.heads / t;
};

}  // namespace

Device graph_launch_device(const Device& d) {
  ServingPerfPlan launch;
  use_measured_overheads(launch, d.eff);
  Device g = d;
  apply_launch_costs(g, launch, true);
  return g;
}

/// Forward and backward of one transformer layer for one micro-batch on one GPU.
LayerCost layer_cost(const wl::TransformerArch& a, const wl::TrainingPlan& plan, LayerKind kind, const Device& d,
                     bool keep_ops) {
  return TrainingLayerPricer(a, plan, kind, d, keep_ops).run();
}

}  // namespace gpuplan::model::detail
