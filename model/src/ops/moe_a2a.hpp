#pragma once
// Internal to gpuplan::model: the dispatch and combine of one MoE layer's tokens over the expert-parallel group, by
// dispatcher, priced by one function for training (train/moe_dispatch.cpp) and serving (serve/serving_layer.cpp), and
// the overlap of that all-to-all with the other micro-batch's compute (SGLang's two-batch overlap, DeepSeek's dual
// micro-batches, Megatron's EP overlap: exposed = max(0, comm − window), the hidden part paying the SM share).
//
// Sources:
//  [DeepEP]  deepseek-ai/DeepEP, README of V1 (docs/legacy.md @0297fc80): normal kernels "optimized for asymmetric-
//            domain bandwidth forwarding, such as forwarding data from NVLink domain to RDMA domain" for training and
//            prefill; low-latency kernels "with pure RDMA" for decoding; measured on H800 + CX7 400 Gb/s: normal
//            EP8 153/158 GB/s NVLink, EP16 43/43, EP32 58/57, EP64 51/50 GB/s RDMA (dispatch/combine, 4096 tokens,
//            hidden 7168, top-4 groups, top-8, FP8 dispatch, BF16 combine); low-latency EP8…256 dispatch 77…194 µs,
//            combine 114…360 µs (128 tokens, top-8, FP8 dispatch, BF16 combine). tests/test_internode.py counts the
//            normal kernels' RDMA bytes per distinct node of a token (its own included), FP8 as (1 + 4/128) bytes.
//  [DSV3]    DeepSeek-V3 Technical Report (arXiv:2412.19437) §2.1.2 node-limited routing (each token to at most
//            M = 4 nodes), §3.2.2 (a token crosses IB once per target node, then NVLink inside it), §3.3.2 (FP8
//            dispatch with one scale per 1×128 tile, BF16 combine), §3.4 (prefill and decode with two micro-batches).
//  [PD]      deepseek-ai/profile-data README: prefill EP32 with two micro-batches overlapping compute and all-to-all;
//            decode "the all-to-all communication during decoding does not occupy GPU SMs".
//  [SGL]     SGLang docs advanced_features/expert_parallelism.md: --moe-a2a-backend deepep, --deepep-mode
//            normal|low_latency|auto, --enable-two-batch-overlap; LMSYS 2025-05-05 (DeepEP normal for prefill,
//            low-latency for decode, both under DP attention with PD disaggregation).
#include <string>

#include "gpuplan/core/units.hpp"
#include "gpuplan/model/topology.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model::detail {

/// The kernels that move one MoE layer's tokens to their experts and back.
enum class A2aKernel {
  nccl,                ///< NCCL's all-to-all: one copy per token-expert row, (s−1)/n over NVLink, (n−s)/n over the NIC
  deepep_normal,       ///< [DeepEP] normal: once per distinct remote node over RDMA, then forwarded over NVLink
  deepep_low_latency,  ///< [DeepEP] low-latency: one message per token-expert row straight to the expert's GPU
};
const char* to_string(A2aKernel k);

/// FP8 dispatch as DeepEP and DeepSeek move it: 1 byte per element plus one fp32 scale per 128 elements ([DSV3]
/// §3.3.2; DeepEP tests/test_internode.py fp8_factor (1 + 4/128)/2 of BF16).
inline constexpr double kFp8DispatchBytes = 1.0 + 4.0 / 128.0;

/// The expected number of distinct bins `draws` independent uniform draws land in: bins·(1 − (1 − 1/bins)^draws).
/// E.g. a token's k = 8 experts over M = 4 equally likely nodes reach 4·(1 − 0.75⁸) = 3.60 of them.
double expected_distinct(double bins, double draws);

/// The nodes one token may reach on an EP group spanning `nodes` nodes: min(nodes, k), bounded by the router's
/// group-limited routing when its groups sit on whole nodes ([DSV3] §2.1.2: at most M = topk_group nodes).
double moe_node_limit(const wl::TransformerArch& a, int nodes);

struct A2aInput {
  A2aKernel kernel = A2aKernel::nccl;
  double tokens = 0;  ///< distinct tokens this GPU holds and sends (DeepEP)
  double rows = 0;    ///< token-expert rows this GPU sends through NCCL (tokens·k, or a fixed-capacity buffer's)
  double top_k = 1;
  double hidden = 0;
  double node_limit = 0;  ///< M, nodes a token may reach (moe_node_limit); 0: every node of the group
  double dispatch_bytes = 2.0, combine_bytes = 2.0;  ///< bytes per element each way
  double imbalance = 1.0;                            ///< ι: the busiest rank's rows over the mean
};

struct A2aCost {
  units::Seconds dispatch{}, combine{};
  units::Bytes dispatch_sent{}, combine_sent{};  ///< bytes one GPU sends each way (NIC + NVLink)
  double nic_copies = 0;     ///< copies of a token (per token) over the NIC
  double nvlink_copies = 0;  ///< copies of a token over NVLink (sent or forwarded inside the node)
  double node_limit = 0;     ///< M used (DeepEP normal)
  double distinct_nodes = 0;  ///< D = M·(1 − (1 − 1/M)^k) (DeepEP normal)
};

/// One MoE layer's dispatch and combine on one GPU of the EP group `g` by `in.kernel`:
///  - nccl: collective_time(all-to-all, rows·h·b) (collectives.cpp), ×ι;
///  - deepep_normal: a token reaches D = M(1 − (1 − 1/M)^k) distinct nodes (uniform routing over the M nodes it may
///    reach), D·(N − 1)/N of them remote, each crossed once over RDMA (to the same-rail GPU); on each of the D nodes
///    it goes to the distinct GPUs holding its experts there, s·(1 − (1 − 1/s)^(k/D)), over NVLink except the one it
///    arrived at: NVLink copies D·(s − 1)·(1 − (1 − 1/s)^(k/D)); t = t₀ + α + max(NIC bytes / (B_nic·η_nic),
///    NVLink bytes / (B_nvl·η_nvl))·ι (the two run at once: [DSV3] §3.2.2);
///  - deepep_low_latency: every token-expert row goes to its expert's GPU (no deduplication), (n − s)/n of the rows
///    over the NIC and (s − 1)/n over NVLink (DeepEP's EP8 figure, 98 GB/s, exceeds the 50 GB/s NIC: intra-node
///    peers over NVLink); t as above.
/// B and η are the tiers' own (topology.cpp: per-GPU NIC bandwidth, η_p2p); nothing is fitted to DeepEP's table,
/// which test_moe_a2a.cpp compares against.
A2aCost moe_a2a(const A2aInput& in, const CommGroup& g);

/// The share of the GPU's SMs the dispatcher's kernels hold while they run beside compute: DeepEP normal 20 of the
/// SMs ([DSV3] §3.5.1 "20 out of the 132 SMs available in the H800"; DeepEP Buffer.num_sms default 20), low-latency
/// none ([PD]: "after RDMA messages are issued, all GPU SMs are freed"), NCCL `nccl_share` (the house's NCCL share).
double a2a_sm_share(A2aKernel k, int gpu_sms, double nccl_share);

/// Communication `comm` run beside independent compute `window` on other SMs: what stays exposed,
/// max(0, comm − window) + (comm − max(0, comm − window))·sm_share (the hidden part slows the compute beside it by
/// the SMs it holds). The formula of Megatron's EP overlap and DualPipe in training (compose_step.cpp) and of
/// two-batch overlap in serving (serving.cpp).
units::Seconds overlap_exposed(units::Seconds comm, units::Seconds window, double sm_share);

}  // namespace gpuplan::model::detail
