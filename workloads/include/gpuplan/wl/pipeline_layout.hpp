#pragma once
// Megatron-Core's pipeline layout string (pipeline_model_parallel_layout, e.g. "Et*3|(tt|)*29,m|L"): one entry per
// model chunk in chunk order (chunk j = k·pp + i is the k-th chunk of pipeline rank i), each a list of layers:
// E embedding, t decoder (transformer) layer, m multi-token-prediction layer, L loss. Parsed as
// megatron/core/transformer/pipeline_parallel_layer_layout.py (PipelineParallelLayerLayout.parse_str_to_list) does:
// commas are removed; then every "(X)*N" (X without ')') is replaced by N copies of X, left to right; then every
// "cN" after a character c ("c*N") by N copies of c; then the text is split at '|' and each character must be one
// of E, t, m, L. Parentheses do not nest (Megatron's pattern stops at the first ')'): a nested or unmultiplied group
// leaves a '(' or ')' behind, which is refused as Megatron refuses it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpuplan::wl {

struct LayoutChunk {
  std::int64_t embedding = 0, decoder = 0, mtp = 0, loss = 0;
};

struct ParsedPipelineLayout {
  std::vector<LayoutChunk> chunks;
  std::string error;  ///< empty when the text parsed; else what is wrong, in words
  [[nodiscard]] bool ok() const { return error.empty(); }
};

/// Parses a layout string. Structure rules checked here (independent of the model and PP): exactly one E, which is
/// the first layer of the first chunk; exactly one L, the last layer of the last chunk; no layer after an m but L.
/// At most 1,000,000 layers after expansion (a larger count is refused, not allocated).
ParsedPipelineLayout parse_pipeline_layout(std::string_view text);

}  // namespace gpuplan::wl
