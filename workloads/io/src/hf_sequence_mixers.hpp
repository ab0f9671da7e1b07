#pragma once
// The Hugging Face importer's readers of Qwen3-Next's gated DeltaNet / gated attention and of DeepSeek sparse
// attention (hf_sequence_mixers.cpp); called by import_hf_config (hf_config.cpp).
#include <functional>
#include <string>

#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::wl_io::detail {

/// Whether the model type's layers are read with gated DeltaNet mixers (qwen3_next).
bool reads_gated_deltanet(const std::string& model_type);
/// Whether the model type's attention is read as DeepSeek sparse attention (deepseek_v32, glm_moe_dsa).
bool reads_sparse_attention(const std::string& model_type);
/// Errors for gated DeltaNet or indexer keys on a model type that does not read them (they would be dropped).
void refuse_foreign_mixer_keys(const json_io::ObjectReader& r, const std::string& model_type);
/// Qwen3-Next: which layers are gated DeltaNet (layer_types or full_attention_interval), the mixer's sizes, the
/// gated attention's output gate and q/k norms.
void read_gated_deltanet(const json_io::ObjectReader& r, wl::TransformerArch& a,
                         const std::function<void(std::string)>& assume);
/// DeepSeek-V3.2 / GLM-5: the lightning indexer's heads, head dim and top-k (a.mla must be read first), and for
/// GLM-5.x which layers share another layer's indexer (indexer_types / index_topk_pattern / index_topk_freq).
void read_sparse_attention(const json_io::ObjectReader& r, wl::TransformerArch& a,
                           const std::function<void(std::string)>& assume);

/// GLM-5.x: mlp_layer_types ('dense' / 'sparse' per layer) decides which layers are MoE (a.moe read first).
void read_mlp_layer_types(const json_io::ObjectReader& r, wl::TransformerArch& a,
                          const std::function<void(std::string)>& assume);

}  // namespace gpuplan::wl_io::detail
