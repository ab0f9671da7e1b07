#pragma once
// Model architecture input: Hugging Face config.json (any decoder-only transformer, incl. nested text_config, MoE and
// MLA fields, sliding-window and hybrid layers) and gpuplan's model library files (data/models/*.json), which wrap a
// config with id, aliases, the publisher's parameter counts and sources.
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::wl_io {

/// The Hugging Face keys the importer reads. Every other key of a config must be on a reviewed list of
/// data/hf/config_keys.json (ignored, not counted, refused) or the import fails naming it (issue #23).
const json_io::FieldTable& hf_config_fields();
/// The fields of a gpuplan model library file.
const json_io::FieldTable& model_file_fields();
/// The fields of data/hf/model_type_defaults.json (its model_types entries, their attention_pattern) and of
/// data/hf/config_keys.json (its key groups), for the field reference.
const json_io::FieldTable& hf_model_type_defaults_fields();
const json_io::FieldTable& hf_model_type_entry_fields();
const json_io::FieldTable& hf_attention_pattern_fields();
const json_io::FieldTable& hf_config_keys_fields();
const json_io::FieldTable& hf_key_group_fields();
/// Problems in the compiled-in data/hf files (empty when they are sound; a test checks).
const Diagnostics& hf_rules_diagnostics();

/// Keys of a config that the importer did not read, with the reviewed reason (data/hf/config_keys.json).
struct HfKeyNote {
  std::vector<std::string> keys;
  std::string why;
  bool counted = true;  ///< false: a part of the model that is accepted but not counted (a vision tower)
};

/// Imports a Hugging Face config object. `pointer` is the location of the config inside `file` ("" for a bare
/// config.json, "/config" inside a library file). Absent keys take transformers' default for the model_type
/// (data/hf/model_type_defaults.json); those and other assumptions are listed in TransformerArch::assumptions.
/// The keys that were ignored are appended to `ignored` when given.
Result<wl::TransformerArch> import_hf_config(const json_io::Json& config, const std::string& file,
                                             const std::string& pointer = "",
                                             std::vector<HfKeyNote>* ignored = nullptr);

/// The publisher's own parameter counts, for checks and display.
struct PublishedCounts {
  double total_params_B = 0;
  std::optional<double> active_params_B;
  bool active_includes_input_embedding = true;  ///< Mixtral counts it; DeepSeek and OpenAI do not
  std::optional<double> rounded_to_B;           ///< the publisher's rounding step, when coarser than 0.5%
  std::string source;
};

struct ModelEntry {
  wl::TransformerArch arch;
  std::vector<std::string> aliases;
  std::string family;
  std::string hf_repo;
  /// An architecture defined by a benchmark or a paper's table (llm-foundry's MPT sizes, Megatron's SC'21 GPT
  /// shapes, our own measurement decoders), not a released checkpoint: front ends list these apart from the models.
  bool benchmark_shape = false;
  std::string file;
  std::optional<PublishedCounts> published;
  std::vector<std::string> sources;  ///< "id: ref"
  std::string notes;
  std::vector<HfKeyNote> ignored_keys;  ///< config keys not read, grouped by reason
};

/// Decodes a model file: ours (has "kind": "model") or a bare Hugging Face config.json (has "model_type" or
/// "architectures"). The id of a bare config is its file name without extension.
Result<ModelEntry> load_model_file(const std::string& path);

struct ModelLibrary {
  std::vector<ModelEntry> models;
  [[nodiscard]] const ModelEntry* find(const std::string& id_or_alias) const;
  [[nodiscard]] std::vector<std::string> names() const;
};

/// Loads every data/models/*.json, sorted by file name; duplicate ids or aliases are errors.
Result<ModelLibrary> load_model_library(const std::string& data_dir);

/// A shipped name, or a path to a JSON file (ours or a Hugging Face config.json). Unknown names get "did you mean".
Result<ModelEntry> resolve_model(const ModelLibrary& lib, const std::string& name_or_path);

}  // namespace gpuplan::wl_io
