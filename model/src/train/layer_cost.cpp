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
#include "linear_gemms.hpp"
#include "norm_loss.hpp"
#include "quant_recipe.hpp"
#include "layer_pricer.hpp"

namespace gpuplan::model::detail {

/// PyTorch's eager bias-gradient kernels at their measured rate: our H100 (2026-11-27, issue #24;
/// scripts/measure/mpt_nongemm_probe.py; data/validation/measured/h100-sxm5-80gb/
/// mpt_nongemm_mpt-1b_s2048_b6_resbf16.json: each op alone at the MPT-1b layer's T = 12288 tokens, d = 2048, bf16;
/// CUDA-only profile, kernel time). A linear's bias gradient is a separate column sum of its output gradient
/// (reduce_kernel, T·n·a_b bytes; cuBLASLt fuses the bias only into the forward): the four of the layer (n = 3d, d, 4d,
/// d) take 200.8 µs for 152.2 µs of streaming (0.887 × 3.35 TB/s), 0.758. Other GPUs: the same fraction of their
/// streaming rate (an assumption, as for kEagerScorePassRate). The same run's LayerNorm: norm_loss.cpp.
constexpr double kEagerBiasGradRate = 0.758;

TrainingLayerPricer::TrainingLayerPricer(const wl::TransformerArch& arch, const wl::TrainingPlan& training_plan,
                                         LayerKind layer_kind, const Device& device, bool keep_op_list)
    : a(arch), plan(training_plan), d(device), eager_launch(device.eff.kernel_launch),
      eager_class(device.eff.launch_class), keep_ops(keep_op_list), layer(layer_kind),
      graph(layer_graph(arch, layer_kind)), attn(attention_or_reference(arch, *graph)) {
  if (plan.cuda_graphs == wl::CudaGraphScope::none) return;
  const Device g = graph_launch_device(device);
  graph_launch = g.eff.kernel_launch;
  graph_class = g.eff.launch_class;
}

LayerCost TrainingLayerPricer::run() {
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


// LoRA: the base weights are frozen (no weight-gradient GEMM; the activation gradient still flows), a targeted
// layer adds its adapter's passes (lora_adapter.hpp: x·A, then ·B, 16-bit, each way; dropout, scale, sums), and a
// quantised base (QLoRA, int8, fp8 storage) is dequantised to the compute dtype before the forward and the dgrad
// GEMM (read the stored bytes, write a_b per weight).
void TrainingLayerPricer::fwd_gemm(const std::string& name, LinearKind kind, std::int64_t m, std::int64_t k, std::int64_t n,
              std::int64_t batch) {
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
  const bool from_norm = norm_input, replicated = replicated_input;
  norm_input = replicated_input = false;
  // FP8/FP4 GEMMs take quantised operands (fp8_quant.hpp): their kernels, and the input cast's forward time.
  if (gemm_p == hw::Precision::fp8 || gemm_p == hw::Precision::fp4) {
    const QuantOps qo =
        quant.gemm_operands(name, kind, double(m), double(k), double(n), double(batch), from_norm, replicated);
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
    wg = accumulating_wgrad(wg, double(k) * double(n) * double(batch), plan.precision.gradient_bytes, d,
                            !plan.fused_wgrad_accumulation);
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


// A gated (SwiGLU) or plain (GELU) activation over `elems` outputs: fused, it reads [gate | up] and writes its
// output (activation_out_bytes) forward, and reads both inputs and the output gradient and writes two gradients
// backward; recomputed (`again`), its forward runs again in the backward. Under DeepSeek's framework a recomputed
// SwiGLU reads its input from the FP8 copy kept for it (§3.3.3; the memory model keeps it in FP8), dequantised to
// BF16 first in the backward (cast_back_impl: read FP8 + scales, write BF16).
void TrainingLayerPricer::activation(const char* nm, double elems, bool again) {
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


// A recompute module's forward work, repeated in the backward (LayerCost::rec).
void TrainingLayerPricer::recompute_part(Seconds dt, OpClass cls) {
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
// Projections held as separate modules (linear_gemms.hpp projections_apart): each its own GEMM over the same input
// (its own FP8 casts, LoRA adapter, fixed cost), at its own width and efficiency; autograd then sums their input
// gradients, one add kernel per GEMM after the first (torch/csrc/autograd/input_buffer.cpp InputBuffer::add: read
// both, write one).
void TrainingLayerPricer::separate_gemms(const LinearGemms& g, LinearKind kind) {
  const bool from_norm = norm_input;
  for (int i = 0; i < g.count; ++i) {
    norm_input = from_norm;
    fwd_gemm(g.name[static_cast<std::size_t>(i)], kind, T, h, g.out[static_cast<std::size_t>(i)] / t);
  }
  const double sum_bytes = 3.0 * double(T) * double(h) * e;
  for (int i = 1; i < g.count; ++i) {
    const OpCost c = streaming_cost(named(std::string(g.name[0]), " input-gradient sum"), OpClass::elementwise,
                                    units::bytes(sum_bytes), units::flop(double(T) * double(h)), d);
    lc.bwd.add(c);
    if (keep_ops) lc.ops.push_back(c);
  }
}

void TrainingLayerPricer::op_sac_rerun(double gemm_share) {
  if (!op_sac) return;
  recompute_part(last_fwd_cast, OpClass::elementwise);
  recompute_part(last_fwd_gemm * gemm_share, OpClass::gemm);
}


/// `rate`: the kernels' achieved bandwidth as a fraction of the streaming rate (1: streaming).
void TrainingLayerPricer::stream(const std::string& name, double bytes_fwd, double flops_fwd, double bwd_factor,
            double rate) {
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
void TrainingLayerPricer::price_norm(const std::string& name, double elems, std::int64_t row) {
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
void TrainingLayerPricer::price_qk_norm() {
  const double q_elems = double(T) * double(attn.heads) / double(t) * double(attn.d_qk);
  const double k_elems = double(T) * kv_heads_per_gpu(attn) * double(attn.d_qk);
  price_norm("q norm", q_elems, attn.d_qk);
  price_norm("k norm", k_elems, attn.d_qk);
}


/// An eager linear's bias gradient: the column sum of its T × n output gradient (backward only).
void TrainingLayerPricer::bias_grad(const std::string& name, bool has_bias, std::int64_t n) {
  if (!eager || !has_bias || n <= 0) return;
  const double elems = double(T) * double(n);
  OpCost b = streaming_cost(named(name, " bias grad"), OpClass::elementwise, units::bytes(elems * e),
                            units::flop(elems), d);
  const units::Seconds t_fixed = kernel_fixed(d, OpClass::elementwise);
  b.time = (b.time - t_fixed) / kEagerBiasGradRate + t_fixed;
  lc.bwd.add(b);
  if (keep_ops) lc.ops.push_back(b);
}

void TrainingLayerPricer::residual() {
  stream(drop > 0 ? "residual add + dropout" : "residual add", (double(T_norm) * double(h)) * res_f, (double(T_norm) * double(h)),
         res_b / res_f);
}


// The linears, split by TP: the QKV block (MLA: its four projections, price_mla_projections; eager modules: Q, K
// and V apart, separate_gemms), the output projection (rows), the MLP or the experts (columns, then rows), the router
// (all its columns, on this rank's tokens). Routed experts: E/ep experts on this GPU, one grouped GEMM over them,
// T·k·ep/E tokens each.

void TrainingLayerPricer::price_linear(const Op& o) {
  switch (o.linear) {
    case LinearKind::qkv: {
      if (attn.is_mla() && o.part != Part::ssm) {
        price_mla_projections(o);
        break;
      }
      norm_input = o.part != Part::ssm;  // Megatron-Core's TELayerNormColumnParallelLinear
      const LinearGemms qkv = linear_gemms(a, o, projections_apart(a, plan));
      if (qkv.count > 1) separate_gemms(qkv, LinearKind::qkv);
      else fwd_gemm(o.name, LinearKind::qkv, T, h, o.matmul_elements() / h / t);
      bias_grad(o.name, a.qkv_bias && o.part != Part::ssm, o.matmul_elements() / h / t);
      // Op-level SAC: wk (mm 2 of q, k, v) is the K heads' share of the fused QKV GEMM; held apart, it is a GEMM of
      // V's shape, the last one run.
      if (o.part != Part::ssm && o.matmul_elements() > 0)
        op_sac_rerun(qkv.count > 1 ? 1.0 : double(attn.kv_heads * dqk) / (double(o.matmul_elements()) / double(h)));
      if (o.part == Part::ssm) break;  // Mamba-2's in_proj: no rotary
      // Rotary on the query and key heads.
      const double rope_elems = double(T) * double((attn.heads + attn.kv_heads) * dqk / t);
      if (a.position == wl::PositionKind::rope)
        op_sac_elementwise([&] { stream("rotary", rope_elems * e * rope_f, 3.0 * rope_elems, rope_b / rope_f); });
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
      const LinearGemms up = linear_gemms(a, o, projections_apart(a, plan));
      if (up.count > 1) separate_gemms(up, LinearKind::mlp_in);
      else fwd_gemm(o.name, LinearKind::mlp_in, T, h, glu * width);
      if (rc_mlp) recompute_part(lc.fwd.total() - before, OpClass::gemm);
      // Op-level SAC: w3 (mm 6) is half of [w1 | w3], or held apart the last GEMM run; fc1 is kept.
      if (o.part == Part::dense_mlp) op_sac_rerun(gated ? (up.count > 1 ? 1.0 : 0.5) : 0.0);
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
void TrainingLayerPricer::price_token_routing(double P) {
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
void TrainingLayerPricer::price_router_kernels(std::int64_t experts) {
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
void TrainingLayerPricer::price_dispatcher_host() {
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
