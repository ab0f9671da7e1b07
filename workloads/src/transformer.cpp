#include "gpuplan/wl/transformer.hpp"

#include <algorithm>

namespace gpuplan::wl {

bool TransformerArch::attention_dropout_on() const {
  return attention_dropout ? *attention_dropout > 0.0 : gpt_style();
}
bool TransformerArch::hidden_dropout_on() const { return hidden_dropout ? *hidden_dropout > 0.0 : gpt_style(); }

std::int64_t TransformerArch::moe_layer_count() const {
  if (!moe) return 0;
  return std::count(moe_layer.begin(), moe_layer.end(), true);
}

std::int64_t TransformerArch::sliding_layer_count() const {
  return std::count(attention.begin(), attention.end(), AttentionSpan::sliding);
}

std::int64_t TransformerArch::chunked_layer_count() const {
  return attention_chunk > 0 ? std::count(attention.begin(), attention.end(), AttentionSpan::chunked) : 0;
}

bool TransformerArch::hybrid() const {
  return std::any_of(mixers.begin(), mixers.end(), [](Mixer m) { return m != Mixer::attention; }) ||
         std::count(ffn_absent.begin(), ffn_absent.end(), true) > 0;
}

std::int64_t TransformerArch::attention_layer_count() const {
  std::int64_t n = 0;
  for (std::int64_t l = 0; l < layers; ++l) n += is_attention_layer(l) ? 1 : 0;
  return n;
}

std::int64_t TransformerArch::indexer_layer_count() const {
  std::int64_t n = 0;
  for (std::int64_t l = 0; l < layers; ++l) n += has_indexer(l) ? 1 : 0;
  return n;
}

std::int64_t VisionTower::tokens_per_image() const {
  const VisionGraph g = graph();
  return g.ops.empty() ? 0 : g.ops.back().h_out * g.ops.back().w_out;
}

std::int64_t TransformerArch::mamba_layer_count() const {
  return std::count(mixers.begin(), mixers.end(), Mixer::mamba2);
}

std::int64_t TransformerArch::gdn_layer_count() const {
  return std::count(mixers.begin(), mixers.end(), Mixer::gated_deltanet);
}

}  // namespace gpuplan::wl
