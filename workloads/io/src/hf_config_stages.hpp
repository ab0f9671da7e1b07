#pragma once
// Internal to wl_io: the stages import_hf_config (hf_config.cpp) runs in order. The config prepared for reading: its
// keys sorted by the reviewed rules (ignored, not counted, refused, unknown) and transformers' per-model_type defaults
// filled in (hf_config_keys.cpp); then, after the sizes and the model family, the readers of the layer kinds: the MoE
// layers, multi-head latent attention, Nemotron-H's layer pattern and the attention span of each layer
// (hf_layer_kinds.cpp).
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl/transformer.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "hf_rules.hpp"

namespace gpuplan::wl_io::detail {

/// Model types whose FFN is a plain two-matrix MLP with LayerNorm, learned or ALiBi positions and biases.
const std::set<std::string>& gpt2_like();
/// The keys joined with ", ".
std::string join_keys(const std::vector<std::string>& keys);

/// A config ready to read: the language model's keys (a multimodal config's text_config, with the outer level's
/// language-model keys and transformers' defaults for the model type added) at `pointer`, the model type and its
/// rules, the assumptions made so far, the vision tower, and the notes on the keys the importer does not read.
struct HfPrepared {
  json_io::Json merged;
  std::string pointer;
  std::string model_type;
  const HfModelTypeRules* type_rules = nullptr;
  std::vector<std::string> early_assumptions;
  HfVisionRead vision;
  std::vector<HfKeyNote> notes;
};
/// Prepares `config_in` (hf_config_keys.cpp); nothing when the config is refused or holds unknown keys (the errors are
/// in `diags`). The notes on keys not read are appended to `ignored` when given.
std::optional<HfPrepared> prepare_hf_config(const json_io::Json& config_in, const std::string& file,
                                            const std::string& pointer_in, std::vector<HfKeyNote>* ignored,
                                            const HfRules& rules, Diagnostics& diags);

/// What the readers of the prepared config share: its reader, the config, the model type, where errors go and how an
/// assumption is recorded.
struct HfRead {
  const json_io::ObjectReader& r;
  const json_io::Json& config;
  const std::string& model_type;
  const std::string& file;
  Diagnostics& diags;
  std::function<void(std::string)> assume;

  /// Reads the first present key of a list of synonyms; reports when none is present.
  std::int64_t need(std::initializer_list<const char*> keys, const char* what) const;
  /// The first present key of a list of synonyms, if any.
  std::optional<std::int64_t> opt(std::initializer_list<const char*> keys) const;
};

/// The routed experts (num_local_experts and its synonyms): sizes, shared experts, router, which layers are MoE.
void read_hf_moe(const HfRead& in, wl::TransformerArch& a, bool llama4, bool nemotron_h);
/// Multi-head latent attention (kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, q_lora_rank).
void read_hf_mla(const HfRead& in, wl::TransformerArch& a);
/// Nemotron-H: which layers are Mamba-2, attention, MLP or MoE, and the Mamba-2 mixer's sizes.
void read_nemotron_h_layers(const HfRead& in, wl::TransformerArch& a);
/// The attention span of each layer (full, sliding window, chunked) and the window or chunk.
void read_attention_spans(const HfRead& in, wl::TransformerArch& a, const HfModelTypeRules* type_rules, bool llama4);

}  // namespace gpuplan::wl_io::detail
