#pragma once
// FLOPs per token of a transformer forward and training pass, the way published MFU tables count them.
#include <cstdint>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model {

struct FlopsPerToken {
  units::Flops matmul_forward{};     ///< 2 · (weights in matrix multiplies a token touches), LM head included
  units::Flops attention_forward{};  ///< QKᵀ and A·V at the given context: Σ_layers 2·n_q·(d_qk + d_v)·c_layer
  /// Mamba-2 layers' SSD scan (Dao & Gu 2024, arXiv:2405.21060 §6, the chunked block decomposition with chunk Q):
  /// per token and layer n_h·(2·Q·P + 4·N·P) + n_g·2·Q·N — the diagonal blocks (C·Bᵀ once per group, 2·Q·N; the
  /// masked scores times x per head, 2·Q·P), the chunk states (Bᵀ·x, 2·N·P per head) and the states' output
  /// (C·h, 2·N·P per head); the state passing between chunks (N·P per chunk) is left out. 0 without SSM layers.
  /// Gated DeltaNet layers' chunked gated delta rule (chunk C, key dim d_k, value dim d_v, per value head): per token
  /// 2·C·(3·d_k + 2·d_v) + 6·d_k·d_v + 2·C²/3 (gated_delta_flops_per_token), in ssm_forward with the SSD scan.
  units::Flops ssm_forward{};
  /// DeepSeek sparse attention's lightning indexer scoring every past token: Σ_layers 2·n_i·d_i·c (FP8); the main
  /// attention then reads min(c, top-k) keys (attention_forward). 0 without DSA.
  units::Flops indexer_forward{};
  units::Flops forward{};            ///< matmul + attention + SSM / gated-delta scan + indexer
  units::Flops training{};           ///< 3 · forward (backward = 2 · forward), no recompute
  std::int64_t matmul_params = 0;    ///< weights used in matrix multiplies per token
  Derivation derivation;
};

/// FLOPs per token at context length `context` (tokens attended to). Attention uses the full context for every
/// token, with no causal halving — the convention of Megatron-LM (Narayanan et al. 2021, eq. 3) and PaLM (Chowdhery
/// et al. 2022, App. B: 6N + 12·L·H·Q·T) — so MFU computed from it compares with published tables. Sliding-window
/// layers attend to min(context, window). Embedding lookups, norms, biases and softmax are not counted.
FlopsPerToken flops_per_token(const wl::TransformerArch& arch, std::int64_t context, Explain explain = Explain::on);

/// FLOPs of one Mamba-2 layer's SSD scan per token in a chunked (training / prefill) pass: the formula of
/// FlopsPerToken::ssm_forward, from the SSM op's shapes (chunk Q capped at the sequence length `tokens`).
double ssd_scan_flops_per_token(std::int64_t heads, std::int64_t head_dim, std::int64_t state, std::int64_t groups,
                                std::int64_t chunk, std::int64_t tokens);

/// FLOPs per token of one gated DeltaNet layer's chunked gated delta rule (transformers' torch_chunk_gated_delta_rule,
/// flash-linear-attention's chunk_gated_delta_rule; Yang et al. 2024, arXiv:2412.06464 §3.3) over `heads` value
/// heads, chunk C = min(chunk, tokens): within a chunk K_β·Kᵀ, the triangular solve (C³/3 MACs a chunk), A·V_β,
/// A·(K_β·decay), Q·Kᵀ and the masked scores times the new values (2·C·(3·d_k + 2·d_v) a token); across chunks the
/// state's contributions and update, K_cum·S, Q·S and Kᵀ·V_new (6·d_k·d_v a token).
double gated_delta_flops_per_token(std::int64_t heads, std::int64_t key_dim, std::int64_t value_dim,
                                   std::int64_t chunk, std::int64_t tokens);

}  // namespace gpuplan::model
