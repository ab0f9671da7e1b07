#pragma once
// The Hugging Face importer's data-driven rules (data/hf/model_type_defaults.json and data/hf/config_keys.json,
// compiled in by cmake/embed_text.cmake): transformers' per-model-type defaults and the reviewed lists of config keys
// that are ignored, not counted, or refused. Internal to wl_io; the public face is model_io.hpp.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::wl_io {

namespace embedded {
std::string_view hf_model_type_defaults_json();
std::string_view hf_config_keys_json();
}  // namespace embedded

inline constexpr const char* kHfDefaultsFile = "data/hf/model_type_defaults.json";
inline constexpr const char* kHfKeysFile = "data/hf/config_keys.json";

/// Which layers a sliding_window applies to when a config has no layer_types (transformers' __post_init__ rules).
struct HfAttentionPattern {
  std::string rule;        ///< all_sliding | every_nth_full | sliding_from_max_window_layers | alternating_below_max_window_layers
  std::int64_t period = 0; ///< every_nth_full: layer i is full attention when (i + 1) % period == 0
  std::string period_key;  ///< every_nth_full: the config key holding the period (Gemma 3: sliding_window_pattern)
  std::string gate;        ///< a boolean key that must be true for any layer to slide (Qwen: use_sliding_window)
};

struct HfModelTypeRules {
  std::string file;    ///< the transformers file read
  std::string commit;  ///< its commit
  std::vector<std::pair<std::string, json_io::Json>> defaults;  ///< in file order
  std::optional<HfAttentionPattern> pattern;
  std::string text_config_model_type;  ///< multimodal wrappers: the model_type of their text_config by default
};

struct HfKeyGroup {
  std::vector<std::string> keys;
  std::string why;
  std::string feature;                         ///< refused groups: the layer kind not modelled
  std::vector<json_io::Json> harmless_values;  ///< refused groups: values read as absent
};

struct HfRules {
  std::map<std::string, HfModelTypeRules> model_types;
  std::vector<HfKeyGroup> ignored, not_counted, refused;
  std::vector<HfKeyGroup> refused_model_types;  ///< keys = model types
  Diagnostics diags;  ///< problems in the compiled-in data files (a test keeps them empty)

  [[nodiscard]] static const HfKeyGroup* find(const std::vector<HfKeyGroup>& groups, std::string_view key);
  [[nodiscard]] const HfModelTypeRules* type(const std::string& model_type) const;
};

/// A multimodal config's vision tower as read by read_hf_vision (hf_vision.cpp).
struct HfVisionRead {
  std::optional<wl::VisionTower> tower;  ///< set when the tower's kind is modelled and read without error
  std::set<std::string> consumed;        ///< top-level keys it read (vision_config, mm_tokens_per_image, ...)
  std::vector<std::string> assumptions;
  bool failed = false;                   ///< errors were reported
};
/// Reads `config`'s vision_config when its kind is modelled (SigLIP of Gemma 3, CLIP of LLaVA, Llama 4, Qwen2.5-VL);
/// otherwise returns nothing and the keys stay on config_keys.json's not_counted list.
HfVisionRead read_hf_vision(const json_io::Json& config, const std::string& file, const std::string& pointer,
                            const HfRules& rules, Diagnostics& diags);

/// The rules, decoded once from the compiled-in data files.
const HfRules& hf_rules();
/// Decodes rules from texts (tests feed broken files to check the diagnostics).
HfRules decode_hf_rules(std::string_view defaults_text, std::string_view keys_text);

}  // namespace gpuplan::wl_io
