#pragma once
// Internal to gpuplan::model: MLA's projections as the GEMMs a framework runs (DeepSeek-V2/V3, arXiv:2405.04434
// §2.1), read from the layer graph's MLA attention op. The graph keeps MLA's projection block as one QKV op (its
// weight tensors, for parameters and weights per GPU); the pricers (train/layer_cost.cpp, serve/serving_layer.cpp)
// and the LoRA adapter fold (graph/params.cpp) walk these instead of one GEMM of the block's weight count.
//
// - q_a (q down-projection): h → r_q; kv_a (kv down-projection with the shared rotary key): h → r_kv + d_rope. Every
//   TP rank holds them whole: Megatron-Core builds linear_q_down_proj / linear_kv_down_proj as `backend.linear()`
//   (TELinear, parallel_mode "duplicated"; NVIDIA/Megatron-LM 13f8f526, megatron/core/models/gpt/gpt_layer_specs.py
//   get_gpt_layer_with_transformer_engine_spec), run on the sequence shard [s/TP, b, h] under sequence parallelism
//   (megatron/core/transformer/multi_latent_attention.py, MLASelfAttention.get_query_key_value_tensors); vLLM and
//   SGLang hold them whole too, as one GEMM h → r_q + r_kv + d_rope when there is a query latent (fused_qkv_a_proj, a
//   MergedColumnParallelLinear with disable_tp: vllm-project/vllm 002d6073aa03, vllm/model_executor/models/
//   deepseek_v2.py DeepseekV2MLAAttention; SGLang's deepseek_v2.py likewise).
// - q_b (q up-projection): r_q → n_q·(d_nope + d_rope), or without a query latent one q projection h → n_q·(d_nope +
//   d_rope); kv_b (kv up-projection): r_kv → n_q·(d_nope + d_v). Column-parallel: each rank n_q/TP heads, all tokens.
#include <array>
#include <cstdint>

#include "gpuplan/model/graph.hpp"

namespace gpuplan::model {

struct MlaProjection {
  const char* name;
  std::int64_t in, out;  ///< whole-model input and output features
  bool replicated;       ///< a down-projection: held whole by every TP rank (false: split over TP by its outputs)
  bool up;               ///< an up-projection from a latent (q_b, kv_b): what the `mla_up_proj` recompute reruns
};

struct MlaProjections {
  std::array<MlaProjection, 4> list{};
  int count = 0;
  [[nodiscard]] const MlaProjection* begin() const { return list.data(); }
  [[nodiscard]] const MlaProjection* end() const { return list.data() + count; }
};

/// The projections of an MLA attention op `attn` (attn.is_mla()) on a residual stream of width `hidden`, in the order
/// the layer runs them: q_a, q_b (or the one q projection), kv_a, kv_b; with `fused_down` (the serving engines) q_a
/// and kv_a as one GEMM first, when there is a query latent.
[[nodiscard]] inline MlaProjections mla_projections(const Op& attn, std::int64_t hidden, bool fused_down = false) {
  const Op::MlaShape& m = attn.mla;
  const std::int64_t nq = attn.heads, dqk = m.d_nope + m.d_rope;
  MlaProjections p;
  auto put = [&](const char* name, std::int64_t in, std::int64_t out, bool replicated, bool up) {
    p.list[static_cast<std::size_t>(p.count++)] = MlaProjection{name, in, out, replicated, up};
  };
  if (fused_down && m.q_rank > 0) {
    put("MLA q/kv down-projection", hidden, m.q_rank + m.kv_rank + m.d_rope, true, false);
    put("MLA q up-projection", m.q_rank, nq * dqk, false, true);
    put("MLA kv up-projection", m.kv_rank, nq * (m.d_nope + m.d_v), false, true);
    return p;
  }
  if (m.q_rank > 0) {
    put("MLA q down-projection", hidden, m.q_rank, true, false);
    put("MLA q up-projection", m.q_rank, nq * dqk, false, true);
  } else {
    put("MLA q projection", hidden, nq * dqk, false, false);
  }
  put("MLA kv down-projection", hidden, m.kv_rank + m.d_rope, true, false);
  put("MLA kv up-projection", m.kv_rank, nq * (m.d_nope + m.d_v), false, true);
  return p;
}

}  // namespace gpuplan::model
