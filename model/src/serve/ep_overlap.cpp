// The serving side of the MoE dispatcher choice (ops/moe_a2a.hpp: NCCL's all-to-all or DeepEP's normal and
// low-latency kernels, as SGLang's --moe-a2a-backend and --deepep-mode pick them) and two-batch overlap (SGLang
// --enable-two-batch-overlap; DeepSeek's two micro-batches in prefill and decode, profile-data README): the batch
// runs as two halves, and each half's dispatch and combine run beside the other half's compute.
#include <algorithm>

#include <fmt/format.h>

#include "../train/training_core.hpp"
#include "gpuplan/core/format.hpp"
#include "moe_a2a.hpp"
#include "serving_internal.hpp"

namespace gpuplan::model::detail {

A2aKernel serving_a2a_kernel(const ServingPerfPlan& plan, const ForwardBatch& fb) {
  if (plan.moe_a2a != MoeA2aBackend::deepep) return A2aKernel::nccl;
  switch (plan.deepep_mode) {
    case DeepEpMode::normal: return A2aKernel::deepep_normal;
    case DeepEpMode::low_latency: return A2aKernel::deepep_low_latency;
    case DeepEpMode::automatic: break;
  }
  // SGLang's auto: normal kernels for a batch with prompt tokens (extend), low-latency for a pure decode batch.
  return fb.prefill_seqs > 0 ? A2aKernel::deepep_normal : A2aKernel::deepep_low_latency;
}

A2aInput serving_a2a_input(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                           double tokens_per_gpu, double rows, bool fixed_capacity, const CommGroup& ep_g) {
  A2aInput in;
  in.kernel = fixed_capacity ? A2aKernel::nccl : serving_a2a_kernel(plan, fb);
  in.tokens = tokens_per_gpu;
  in.rows = rows;
  in.top_k = a.moe ? double(a.moe->experts_per_token) : 1.0;
  in.hidden = double(layer_boundary_width(a));
  in.node_limit = moe_node_limit(a, ep_g.domains());
  // FP8 dispatch with 1×128 tile scales where the expert GEMMs are FP8 (DeepSeek-V3 §3.3.2; DeepEP's measured
  // setting); the combine in the activation type.
  in.dispatch_bytes =
      in.kernel != A2aKernel::nccl && plan.compute == hw::Precision::fp8 ? kFp8DispatchBytes : plan.activation_bytes;
  in.combine_bytes = plan.activation_bytes;
  in.imbalance = fixed_capacity ? 1.0 : plan.moe_imbalance;
  return in;
}

std::string serving_a2a_note(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                             const CommGroup& ep_g) {
  const A2aInput in = serving_a2a_input(a, plan, fb, 1.0, a.moe ? double(a.moe->experts_per_token) : 1.0, false, ep_g);
  const A2aCost c = moe_a2a(in, ep_g);
  if (in.kernel == A2aKernel::nccl)
    return fmt::format("EP: NCCL all-to-all of the T·k/ep routed rows each GPU sends (×ι for the busiest rank): per "
                       "token {} copies over the NIC, {} over NVLink, {} B per element each way",
                       units::format_number(c.nic_copies, 3), units::format_number(c.nvlink_copies, 3),
                       in.dispatch_bytes);
  return fmt::format(
      "EP: {} kernels ({}): per token {} copies over the NIC and {} over NVLink{}; dispatch at {} B per element{}, "
      "combine at {} B; t = t₀ + α + max(NIC bytes/(B·η), NVLink bytes/(B·η))·ι (ops/moe_a2a.hpp; DeepEP V1 "
      "README, DeepSeek-V3 §2.1.2, §3.2.2, §3.3.2)",
      to_string(in.kernel),
      plan.deepep_mode == DeepEpMode::automatic ? "SGLang --deepep-mode auto: normal with prompt tokens, low-latency "
                                                  "in a pure decode pass"
                                                : "--deepep-mode",
      units::format_number(c.nic_copies, 3), units::format_number(c.nvlink_copies, 3),
      in.kernel == A2aKernel::deepep_normal
          ? fmt::format(" (deduplicated per node: D = M·(1 − (1 − 1/M)^k) = {} distinct nodes of M = {} allowed, "
                        "uniform routing; forwarded to the distinct GPUs of its experts there)",
                        units::format_number(c.distinct_nodes, 3), units::format_number(c.node_limit, 3))
          : " (one message per token-expert row, no deduplication)",
      units::format_number(in.dispatch_bytes, 4),
      in.dispatch_bytes < plan.activation_bytes ? " (FP8 + one fp32 scale per 128)" : "", in.combine_bytes);
}

bool tbo_applies(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb) {
  const double T = fb.decode_seqs * double(fb.queries_per_seq) + fb.prefill_seqs * double(fb.prefill_tokens);
  return plan.two_batch_overlap && a.moe.has_value() && serving_ep(plan) > 1 && T >= 2.0;
}

namespace {

/// One of the two micro-batches: half the sequences (a prompt may be split between them, DeepSeek's profile-data).
ForwardBatch half_of(const ForwardBatch& fb) {
  ForwardBatch h = fb;
  h.decode_seqs = fb.decode_seqs / 2.0;
  h.prefill_seqs = fb.prefill_seqs / 2.0;
  return h;
}

struct TboLayer {
  Acc half;             ///< one micro-batch through the layer, its all-to-all in series
  Seconds a2a{}, compute{}, exposed{};
  double share = 0;
};

TboLayer tbo_half(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb, LayerKind kind,
                  const Device& d, const KvTokenBytes& kvt, const CommGroup& tp_g, const CommGroup& ep_g) {
  ServingPerfPlan one = plan;
  one.two_batch_overlap = false;
  TboLayer r;
  const ForwardBatch h = half_of(fb);
  r.half = layer_forward(a, one, h, kind, d, kvt, tp_g, ep_g, false, false);
  r.a2a = r.half.moe.t[MoeLayerTerms::dispatch] + r.half.moe.t[MoeLayerTerms::combine];
  r.compute = r.half.total() - r.a2a;
  r.share = a2a_sm_share(serving_a2a_kernel(plan, fb), d.gpu != nullptr ? d.gpu->compute_units : 0,
                         comm_compute_share(d));
  r.exposed = overlap_exposed(r.a2a, r.compute, r.share);
  return r;
}

}  // namespace

Acc tbo_layer(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb, LayerKind kind,
              const Device& d, const KvTokenBytes& kvt, const CommGroup& tp_g, const CommGroup& ep_g) {
  TboLayer x = tbo_half(a, plan, fb, kind, d, kvt, tp_g, ep_g);
  // Each half's all-to-all beside the other half's compute: only its exposed part stays on the critical path.
  x.half.comm += x.exposed - x.a2a;
  Acc r;
  r.scale_add(x.half, 2.0);
  r.moe = x.half.moe;
  return r;
}

Derivation explain_tbo(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                       LayerKind kind, const Acc& full, const Device& d, const KvTokenBytes& kvt,
                       const CommGroup& tp_g, const CommGroup& ep_g) {
  using units::format;
  const TboLayer x = tbo_half(a, plan, fb, kind, d, kvt, tp_g, ep_g);
  const Seconds full_a2a = full.moe.t[MoeLayerTerms::dispatch] + full.moe.t[MoeLayerTerms::combine];
  const Seconds with = (x.compute + x.exposed) * 2.0;
  const A2aKernel k = serving_a2a_kernel(plan, fb);
  Derivation r{
      "serving.tbo",
      "Two-batch overlap: each half's all-to-all beside the other half's compute (one MoE layer)",
      "t_layer = 2·(C_½ + E_½) ; E_½ = max(0, A_½ − C_½) + (A_½ − max(0, A_½ − C_½))·s ; C_½, A_½ = one half-batch's "
      "compute and dispatch + combine ; without overlap t_layer = C + A",
      {{"C_½", format(x.compute), "one micro-batch (half the sequences) through the layer, all but the all-to-all",
        Origin::derived("layer_forward at half the batch")},
       {"A_½", format(x.a2a), fmt::format("its dispatch + combine ({})", to_string(k)),
        Origin::derived("ops/moe_a2a.hpp")},
       {"s", units::format_number(x.share, 3),
        k == A2aKernel::deepep_low_latency
            ? "SM share of the all-to-all beside compute: DeepEP low-latency frees the SMs while RDMA is in flight"
            : "SM share of the all-to-all kernels beside compute (DeepEP normal: 20 SMs)",
        k == A2aKernel::deepep_low_latency
            ? Origin::measurement("deepseek-ai/profile-data README, decoding")
            : Origin::measurement("DeepSeek-V3 §3.5.1: 20 of the H800's 132 SMs; DeepEP Buffer.num_sms 20")},
       {"E_½", format(x.exposed), "what of one half's all-to-all stays exposed", Origin::derived("overlap_exposed")},
       {"C + A", fmt::format("{} + {}", format(full.total() - full_a2a), format(full_a2a)),
        "the whole batch in one pass, all-to-all in series", Origin::derived()}},
      fmt::format("{} per MoE layer with the overlap, {} without", format(with), format(full.total())),
      {},
      {}};
  r.notes.push_back(
      "SGLang --enable-two-batch-overlap (LMSYS 2025-05-05: +27-35% prefill throughput, +25.5% decode at 256 "
      "sequences); DeepSeek's prefill and decode run two micro-batches the same way (profile-data README). Each half "
      "reads the layer's weights again and pays its own kernel costs (priced: the half batch through the same "
      "pricer); the first half's first dispatch and the last half's last combine have no partner (one layer's "
      "worth per pass, not priced)");
  return r;
}

}  // namespace gpuplan::model::detail
