// The Hugging Face importer's first stage (hf_config_stages.hpp): the config made ready to read. A multimodal
// config's text_config is taken with the outer level's language-model keys; refused model types stop here; every key
// the importer does not read is sorted by the reviewed rules of data/hf/config_keys.json (ignored, not counted,
// refused, or unknown: an error); transformers' defaults for the model type (data/hf/model_type_defaults.json) fill
// the keys the config leaves out.
#include <algorithm>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "gpuplan/wl_io/model_io.hpp"
#include "hf_config_stages.hpp"
#include "hf_rules.hpp"

namespace gpuplan::wl_io {

using json_io::Json;

namespace {

using detail::join_keys;

/// What the importer does with the keys it does not read: each is ignored, not counted or refused by a reviewed
/// list of data/hf/config_keys.json, or unknown (an error). Refusals are gathered per feature (one error naming all
/// of its keys that are set); ignored keys are gathered per reason for the output.
class KeySorter {
 public:
  KeySorter(const HfRules& rules, std::string file, Diagnostics& diags)
      : rules_(rules), file_(std::move(file)), diags_(diags) {}

  void sort(const std::string& key, const Json& value, const std::string& pointer) {
    if (const HfKeyGroup* g = HfRules::find(rules_.refused, key)) {
      const bool harmless = value.is_null() ||
                            std::find(g->harmless_values.begin(), g->harmless_values.end(), value) !=
                                g->harmless_values.end();
      if (harmless) {
        note(key + " = " + json_io::describe_value(value), "a value that leaves the model as read (" + g->feature + ")",
             true);
      } else {
        auto it = std::find_if(refusals_.begin(), refusals_.end(), [&](const Refusal& r) { return r.group == g; });
        if (it == refusals_.end()) refusals_.push_back({g, key, value, pointer, {}});
        else it->others.push_back(key);
      }
      return;
    }
    if (const HfKeyGroup* g = HfRules::find(rules_.ignored, key)) return note(key, g->why, true);
    if (const HfKeyGroup* g = HfRules::find(rules_.not_counted, key)) return note(key, g->why, false);
    unknown_.push_back({key, value, pointer});
  }

  /// Reports refusals and unknown keys; true if there were any.
  bool report(const std::vector<std::string>& known) {
    for (const auto& r : refusals_)
      diags_.error(file_, r.pointer,
                   fmt::format("'{}' = {}: {}; gpuplan refuses the config rather than import a wrong model{}", r.key,
                               json_io::describe_value(r.value), r.group->why,
                               r.others.empty() ? "" : " (also set: " + join_keys(r.others) + ")"));
    for (const auto& u : unknown_)
      diags_.error(file_, u.pointer,
                   fmt::format("unknown key '{}' = {}: gpuplan cannot tell whether it changes the model's size or "
                               "cost, so it stops rather than guess (#23); a key that changes neither belongs, "
                               "after review, on a list of data/hf/config_keys.json{}",
                               u.key, json_io::describe_value(u.value), did_you_mean(u.key, known)));
    return !refusals_.empty() || !unknown_.empty();
  }

  std::vector<HfKeyNote> notes;

 private:
  struct Refusal {
    const HfKeyGroup* group;
    std::string key;
    Json value;
    std::string pointer;
    std::vector<std::string> others;
  };
  struct Unknown {
    std::string key;
    Json value;
    std::string pointer;
  };
  void note(const std::string& key, const std::string& why, bool counted) {
    for (auto& n : notes)
      if (n.why == why && n.counted == counted) {
        // A multimodal config repeats some keys at its top level and in text_config (torch_dtype): named once.
        if (std::find(n.keys.begin(), n.keys.end(), key) == n.keys.end()) n.keys.push_back(key);
        return;
      }
    notes.push_back({{key}, why, counted});
  }
  const HfRules& rules_;
  std::string file_;
  Diagnostics& diags_;
  std::vector<Refusal> refusals_;
  std::vector<Unknown> unknown_;
};

std::string short_commit(const std::string& c) { return c.substr(0, 8); }

}  // namespace

namespace detail {

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

std::optional<HfPrepared> prepare_hf_config(const Json& config_in, const std::string& file, const std::string& pointer_in,
                                            std::vector<HfKeyNote>* ignored, const HfRules& rules, Diagnostics& diags) {
  std::vector<std::string> known;
  for (const auto& f : hf_config_fields()) known.push_back(f.key);
  std::set<std::string> understood(known.begin(), known.end());
  KeySorter sorter(rules, file, diags);

  // Multimodal configs nest the language model; read it when the top level has no size of its own.
  const bool nested = config_in.is_object() && config_in.contains("text_config") &&
                      config_in["text_config"].is_object() && !config_in.contains("hidden_size") &&
                      !config_in.contains("n_embd");
  std::string pointer = nested ? pointer_in + "/text_config" : pointer_in;
  Json merged = nested ? config_in["text_config"] : config_in;  // the language model's keys, defaults added below

  std::string outer_type;
  if (nested && config_in.contains("model_type")) {
    const Json& outer = config_in["model_type"];
    if (outer.is_string()) outer_type = outer.get<std::string>();
    else diags.error(file, pointer_in + "/model_type", "expected a string, found " + json_io::describe_type(outer));
  }
  std::string model_type = merged.is_object() && merged.contains("model_type") && merged["model_type"].is_string()
                               ? merged["model_type"].get<std::string>()
                               : "";
  std::vector<std::string> early_assumptions;
  if (model_type.empty() && !outer_type.empty()) {
    // The outer config of a multimodal model names the family; transformers gives its text_config a model_type.
    const HfModelTypeRules* outer_rules = rules.type(outer_type);
    if (outer_rules && !outer_rules->text_config_model_type.empty()) {
      model_type = outer_rules->text_config_model_type;
      early_assumptions.push_back(fmt::format(
          "text_config has no model_type: '{}', the default of model_type '{}' (transformers {} @ {})", model_type,
          outer_type, outer_rules->file, short_commit(outer_rules->commit)));
    } else {
      model_type = outer_type;
    }
  }

  // Architectures gpuplan does not model are refused by name before their keys are read.
  for (const auto& [type, where] : {std::pair{outer_type, pointer_in}, std::pair{model_type, pointer}}) {
    if (type.empty()) continue;
    if (const HfKeyGroup* g = HfRules::find(rules.refused_model_types, type)) {
      diags.error(file, where + "/model_type",
                  fmt::format("model_type '{}': {}; gpuplan refuses the config rather than import a wrong model",
                              type, g->why));
      return std::nullopt;
    }
  }

  // A multimodal model's vision tower, when its kind is modelled (hf_vision.cpp): its keys are read there.
  HfVisionRead vision = read_hf_vision(config_in, file, pointer_in, rules, diags);
  for (auto& x : vision.assumptions) early_assumptions.push_back(std::move(x));

  if (nested && merged.is_object()) {
    // The outer level: the nested config, the vision tower, metadata. A language-model key there (llava writes
    // vocab_size and tie_word_embeddings at the top) fills the text_config when that lacks it.
    for (auto it = config_in.begin(); it != config_in.end(); ++it) {
      const std::string& k = it.key();
      if (k == "text_config" || k == "model_type" || k == "architectures" || vision.consumed.count(k) > 0) continue;
      const std::string ptr = pointer_in + "/" + json_pointer_token(k);
      if (understood.count(k) > 0) {
        if (!merged.contains(k)) {
          merged[k] = it.value();
          early_assumptions.push_back(
              fmt::format("{} = {}: from the outer config (text_config has none)", k, json_io::describe_value(it.value())));
        } else if (merged[k] != it.value() && k != "architectures") {
          diags.error(file, ptr,
                      fmt::format("{} differs from text_config's {}: which one the language model uses is "
                                  "ambiguous",
                                  json_io::describe_value(it.value()), json_io::describe_value(merged[k])));
        }
        continue;
      }
      sorter.sort(k, it.value(), ptr);
    }
  }

  // transformers' defaults for the model type fill the keys the config leaves out (data/hf/model_type_defaults.json).
  const HfModelTypeRules* type_rules = rules.type(model_type);
  if (merged.is_object()) {
    for (auto it = merged.begin(); it != merged.end(); ++it)
      if (understood.count(it.key()) == 0 && (nested || vision.consumed.count(it.key()) == 0))
        sorter.sort(it.key(), it.value(), pointer + "/" + json_pointer_token(it.key()));
    if (type_rules) {
      for (const auto& [k, v] : type_rules->defaults) {
        // A key given under another spelling the importer reads (DeepSeek's n_routed_experts for num_local_experts,
        // a padded vocabulary) needs no default.
        static const std::vector<std::vector<std::string>> kSynonyms{
            {"hidden_size", "n_embd"},
            {"num_hidden_layers", "n_layer"},
            {"num_attention_heads", "n_head"},
            {"intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"},
            {"vocab_size", "padded_vocab_size"},
            {"max_position_embeddings", "n_positions"},
            {"num_local_experts", "num_experts", "n_routed_experts"},
            {"num_experts_per_tok", "experts_per_token"},
            {"head_dim", "attention_head_dim"},
            {"attention_dropout", "attn_pdrop", "attention_probs_dropout_prob"},
            {"hidden_dropout", "resid_pdrop", "hidden_dropout_prob", "residual_dropout", "dropout"}};
        bool given = merged.contains(k);
        for (const auto& syn : kSynonyms)
          if (std::find(syn.begin(), syn.end(), k) != syn.end())
            for (const auto& other : syn) given = given || merged.contains(other);
        if (given) continue;
        merged[k] = v;
        early_assumptions.push_back(fmt::format("{} absent: {} (transformers default for model_type '{}', {} @ {})", k,
                                                json_io::describe_value(v), model_type, type_rules->file,
                                                short_commit(type_rules->commit)));
      }
    } else if (!model_type.empty()) {
      early_assumptions.push_back(fmt::format(
          "model_type '{}' has no entry in {}: absent keys get no transformers default, and the layers are read as "
          "{}",
          model_type, kHfDefaultsFile,
          gpt2_like().count(model_type) > 0 ? "GPT-2 style (LayerNorm, plain MLP, biases)"
                                            : "Llama style (RMSNorm, gated MLP, RoPE)"));
    }
  }
  // Exaone 4 writes sliding_window_pattern as a string, one letter per layer of a repeating period ("LLLG": three
  // sliding-window layers, then a global one); layer_types, when given, says the same per layer and is what is read.
  if (merged.is_object() && merged.contains("sliding_window_pattern") && merged["sliding_window_pattern"].is_string()) {
    const std::string pat = merged["sliding_window_pattern"].get<std::string>();
    if (pat.empty() || pat.find_first_not_of("LG") != std::string::npos) {
      diags.error(file, pointer + "/sliding_window_pattern",
                  fmt::format("\"{}\": expected an integer period or a string of L (sliding) and G (global) letters", pat));
    } else if (merged.contains("layer_types") && !merged["layer_types"].is_null()) {
      early_assumptions.push_back(fmt::format("sliding_window_pattern \"{}\" restates layer_types, which is read", pat));
    } else if (merged.contains("num_hidden_layers") && merged["num_hidden_layers"].is_number_integer()) {
      Json types = Json::array();
      for (std::int64_t i = 0; i < merged["num_hidden_layers"].get<std::int64_t>(); ++i)
        types.push_back(pat[static_cast<std::size_t>(i) % pat.size()] == 'L' ? "sliding_attention" : "full_attention");
      merged["layer_types"] = types;
      early_assumptions.push_back(fmt::format(
          "layer_types absent: layer i slides when letter i mod {} of sliding_window_pattern \"{}\" is L", pat.size(), pat));
    }
    merged.erase("sliding_window_pattern");
  }
  if (sorter.report(known)) return std::nullopt;
  if (ignored != nullptr) ignored->insert(ignored->end(), sorter.notes.begin(), sorter.notes.end());
  return HfPrepared{std::move(merged), pointer, model_type, type_rules, std::move(early_assumptions),
                    std::move(vision), sorter.notes};
}

}  // namespace detail

}  // namespace gpuplan::wl_io
