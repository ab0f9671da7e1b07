#pragma once
// KV-cache size per token and per sequence for MHA, GQA, MQA, MLA and sliding-window / hybrid layers.
#include <cstdint>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model {

struct KvCacheSize {
  units::Bytes per_token_full{};   ///< one token, all layers, as if no layer had a sliding window
  units::Bytes per_sequence{};     ///< a sequence of `tokens`, sliding layers capped at their window
  std::int64_t elements_per_token_layer = 0;  ///< cached elements per token in one (full) layer
  Derivation derivation;
};

/// KV cache of one sequence of `tokens` tokens with `bytes_per_element` bytes per cached element (bf16 = 2).
///
/// MHA/GQA/MQA: 2·n_kv·d elements per token per layer (K and V). MLA: r_kv + d_rope elements per token per layer —
/// the compressed latent and the shared rotary key, which is what vLLM and SGLang store (DeepSeek-V2 paper §2.1.1).
/// Sliding-window layers hold min(tokens, window) tokens. Per sequence = Σ_layers tokens_l · elements · bytes.
KvCacheSize kv_cache_size(const wl::TransformerArch& arch, std::int64_t tokens, double bytes_per_element,
                          Explain explain = Explain::on);

}  // namespace gpuplan::model
