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
  units::Flops ssm_forward{};
  units::Flops forward{};            ///< matmul + attention + SSM scan
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

}  // namespace gpuplan::model
