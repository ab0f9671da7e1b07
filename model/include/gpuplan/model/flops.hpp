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
  units::Flops forward{};            ///< sum of the two
  units::Flops training{};           ///< 3 · forward (backward = 2 · forward), no recompute
  std::int64_t matmul_params = 0;    ///< weights used in matrix multiplies per token
  Derivation derivation;
};

/// FLOPs per token at context length `context` (tokens attended to). Attention uses the full context for every
/// token, with no causal halving — the convention of Megatron-LM (Narayanan et al. 2021, eq. 3) and PaLM (Chowdhery
/// et al. 2022, App. B: 6N + 12·L·H·Q·T) — so MFU computed from it compares with published tables. Sliding-window
/// layers attend to min(context, window). Embedding lookups, norms, biases and softmax are not counted.
FlopsPerToken flops_per_token(const wl::TransformerArch& arch, std::int64_t context, Explain explain = Explain::on);

}  // namespace gpuplan::model
