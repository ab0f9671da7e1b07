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

}  // namespace gpuplan::wl
