#include <algorithm>
#include <array>
#include <set>

#include <fmt/format.h>

#include "gpuplan/wl_io/model_io.hpp"
#include "hf_rules.hpp"
#include "hf_sequence_mixers.hpp"

namespace gpuplan::wl_io {

using json_io::FieldSpec;
using json_io::FieldTable;
using json_io::FieldType;
using json_io::Json;
using json_io::ObjectReader;
using json_io::Presence;

namespace {

// Bounds are far beyond any published model (hidden 1e6, 1e4 layers, 1e7 vocab) and only catch nonsense.
FieldSpec dim(std::string key, double max, std::string doc, bool nullable = false) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::integer;
  f.min = 1;
  f.max = max;
  f.doc = std::move(doc);
  f.nullable = nullable;
  return f;
}
FieldSpec zdim(std::string key, double max, std::string doc) {  // may be 0
  FieldSpec f = dim(std::move(key), max, std::move(doc), true);
  f.min = 0;
  return f;
}
FieldSpec flag(std::string key, std::string doc) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::boolean;
  f.doc = std::move(doc);
  f.nullable = true;
  return f;
}
FieldSpec prob(std::string key, std::string doc) {  // a probability in [0, 1)
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::number;
  f.min = 0;
  f.max = 0.999;
  f.doc = std::move(doc);
  f.nullable = true;
  return f;
}
FieldSpec anyf(std::string key, std::string doc) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::any;
  f.doc = std::move(doc);
  f.nullable = true;
  return f;
}
FieldSpec strf(std::string key, std::string doc) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::string;
  f.doc = std::move(doc);
  f.nullable = true;
  return f;
}

// Model types whose FFN is a plain two-matrix MLP with LayerNorm, learned or ALiBi positions and biases.
const std::set<std::string>& gpt2_like() {
  static const std::set<std::string> s{"gpt2", "gpt_bigcode", "opt", "bloom", "gpt_neox", "gptj", "falcon",
                                       "starcoder2", "phi", "mpt"};
  return s;
}

}  // namespace

const FieldTable& hf_config_fields() {
  static const FieldTable t{
      strf("model_type", "architecture family (llama, qwen3_moe, deepseek_v3, gpt2...)"),
      anyf("architectures", "class names"),
      anyf("text_config", "nested language-model config of multimodal models (the vision tower is not counted)"),
      dim("hidden_size", 1e6, "model width h", true),
      dim("n_embd", 1e6, "GPT-2: model width", true),
      dim("num_hidden_layers", 1e4, "layers L", true),
      dim("n_layer", 1e4, "GPT-2: layers", true),
      dim("num_attention_heads", 1e4, "query heads", true),
      dim("n_head", 1e4, "GPT-2: heads", true),
      dim("num_key_value_heads", 1e4, "KV heads (absent or null: equal to the query heads, i.e. MHA)", true),
      dim("head_dim", 1e5, "per-head dimension (absent: hidden / heads)", true),
      dim("intermediate_size", 1e7, "dense FFN width", true),
      dim("n_inner", 1e7, "GPT-2: FFN width (null: 4h)", true),
      dim("ffn_hidden_size", 1e7, "Megatron-style FFN width", true),
      dim("ffn_dim", 1e7, "OPT: FFN width", true),
      dim("word_embed_proj_dim", 1e6, "OPT: the embedding width (a projection to and from hidden_size when it differs)",
          true),
      dim("vocab_size", 1e7, "vocabulary size", true),
      dim("padded_vocab_size", 1e7, "vocabulary padded for TP (takes precedence when present)", true),
      dim("max_position_embeddings", 1e8, "maximum positions", true),
      dim("n_positions", 1e8, "GPT-2: positions", true),
      flag("tie_word_embeddings", "LM head shares the embedding matrix"),
      strf("hidden_act", "activation (silu, gelu...)"),
      strf("activation_function", "GPT-2: activation"),
      flag("attention_bias", "biases on q, k, v and o projections"),
      flag("qkv_bias", "biases on q, k, v"),
      flag("mlp_bias", "biases on the MLP projections"),
      flag("use_bias", "StarCoder2: biases on every linear layer (attention and MLP)"),
      flag("use_qk_norm", "per-head q/k RMSNorm"),
      anyf("rope_scaling", "RoPE scaling (not a size)"),
      prob("attention_dropout", "dropout on the attention probabilities in training"),
      prob("attn_pdrop", "GPT-2: attention dropout"),
      prob("attention_probs_dropout_prob", "BERT: attention dropout"),
      prob("hidden_dropout", "dropout on the attention and MLP outputs in training"),
      prob("resid_pdrop", "GPT-2: residual (attention and MLP output) dropout"),
      prob("hidden_dropout_prob", "BERT: hidden dropout"),
      prob("residual_dropout", "StarCoder2: dropout on the attention and MLP outputs"),
      prob("dropout", "OPT: dropout on the attention and FFN outputs (and the embedding)"),
      anyf("rope_theta", "RoPE base"),
      // MoE
      dim("num_local_experts", 1e5, "routed experts (Mixtral, GPT-OSS)", true),
      dim("num_experts", 1e5, "routed experts (Qwen MoE)", true),
      dim("n_routed_experts", 1e5, "routed experts (DeepSeek)", true),
      dim("num_experts_per_tok", 1e4, "experts per token (top-k)", true),
      dim("experts_per_token", 1e4, "experts per token (GPT-OSS)", true),
      dim("moe_intermediate_size", 1e7, "FFN width of one routed expert", true),
      zdim("n_shared_experts", 1e3, "always-active shared experts (DeepSeek)"),
      zdim("shared_expert_intermediate_size", 1e7, "shared expert width (Qwen2-MoE)"),
      zdim("first_k_dense_replace", 1e4, "DeepSeek: the first k layers are dense"),
      zdim("n_group", 1e5, "DeepSeek: expert groups of group-limited (node-limited) routing"),
      zdim("topk_group", 1e5, "DeepSeek: groups a token's experts are chosen from"),
      dim("moe_layer_freq", 1e4, "DeepSeek: every n-th layer after those is MoE", true),
      dim("decoder_sparse_step", 1e4, "Qwen MoE: every n-th layer is MoE", true),
      anyf("mlp_only_layers", "Qwen MoE: layer indices that stay dense"),
      zdim("num_nextn_predict_layers", 100, "DeepSeek multi-token-prediction modules"),
      // MLA
      zdim("q_lora_rank", 1e6, "MLA query compression rank (null: none)"),
      dim("kv_lora_rank", 1e6, "MLA KV latent rank", true),
      dim("qk_nope_head_dim", 1e5, "MLA per-head non-rotary q/k dim", true),
      zdim("qk_rope_head_dim", 1e5, "MLA per-head rotary q/k dim"),
      dim("v_head_dim", 1e5, "MLA per-head value dim", true),
      dim("qk_head_dim", 1e5, "MLA: q/k head dim, qk_nope_head_dim + qk_rope_head_dim (checked against them)", true),
      // attention span
      dim("sliding_window", 1e9, "sliding-window length in tokens (null: none)", true),
      flag("use_sliding_window", "Qwen2: sliding window enabled"),
      zdim("max_window_layers", 1e4, "Qwen2: layers below this use full attention"),
      dim("sliding_window_pattern", 1e4, "every n-th layer uses full attention (Gemma)", true),
      dim("sliding_window_size", 1e9, "Gemma 2's first configs: the sliding window restated (checked against "
                                      "sliding_window)", true),
      anyf("layer_types", "per-layer attention type (sliding_attention / full_attention / chunked_attention)"),
      // Llama 4 (model_type llama4_text): interleaved MoE and dense layers, a shared expert, chunked attention.
      dim("interleave_moe_layer_step", 1e4, "Llama 4: every n-th layer is MoE (layers n-1, 2n-1, ...)", true),
      anyf("moe_layers", "Llama 4: the indices of the MoE layers (absent: from interleave_moe_layer_step)"),
      dim("intermediate_size_mlp", 1e7, "Llama 4: FFN width of the dense layers (intermediate_size is the experts')",
          true),
      dim("attention_chunk_size", 1e9, "Llama 4: chunked local attention, chunk in tokens (null: none)", true),
      anyf("no_rope_layers", "Llama 4: per layer 1 = RoPE and chunked attention, 0 = NoPE and global attention "
                             "(other model types: RoPE on or off only, no size or cost)"),
      dim("no_rope_layer_interval", 1e4, "Llama 4: without no_rope_layers every n-th layer is NoPE and global", true),
      // Nemotron-H (model_type nemotron_h): Mamba-2, attention, MLP and MoE blocks in the order of a pattern.
      strf("hybrid_override_pattern", "Nemotron-H: one character per layer, M Mamba-2, * attention, - MLP, E MoE"),
      anyf("layers_block_type", "Nemotron-H: the pattern as a list (mamba / attention / mlp / moe, or transformers' "
                                "linear_attention / full_attention / mlp / moe)"),
      dim("attention_head_dim", 1e5, "Nemotron-H: per-head dimension of the attention layers", true),
      dim("mamba_num_heads", 1e5, "Mamba-2 heads n_h", true),
      dim("mamba_head_dim", 1e5, "Mamba-2 head dim P (d_inner = n_h·P)", true),
      dim("ssm_state_size", 1e5, "Mamba-2 state size N", true),
      dim("n_groups", 1e4, "Mamba-2 groups sharing B and C", true),
      dim("conv_kernel", 1e3, "Mamba-2 conv1d taps d_conv", true),
      dim("chunk_size", 1e6, "Mamba-2 SSD chunk length Q", true),
      flag("use_conv_bias", "Mamba-2 conv1d bias"),
      flag("mamba_proj_bias", "Mamba-2 in_proj / out_proj biases"),
      strf("mamba_ssm_cache_dtype", "the SSM state's dtype in the serving cache (float32, bfloat16, float16)"),
      zdim("moe_shared_expert_intermediate_size", 1e7, "Nemotron-H: width of the shared expert"),
      // Qwen3-Next (model_type qwen3_next): gated DeltaNet linear attention and gated full attention.
      dim("linear_num_key_heads", 1e4, "Qwen3-Next: gated DeltaNet key heads n_k", true),
      dim("linear_num_value_heads", 1e4, "Qwen3-Next: gated DeltaNet value heads n_v (one d_k × d_v state each)", true),
      dim("linear_key_head_dim", 1e5, "Qwen3-Next: gated DeltaNet key head dim d_k", true),
      dim("linear_value_head_dim", 1e5, "Qwen3-Next: gated DeltaNet value head dim d_v", true),
      dim("linear_conv_kernel_dim", 1e3, "Qwen3-Next: gated DeltaNet conv1d taps", true),
      dim("full_attention_interval", 1e4, "Qwen3-Next: without layer_types every n-th layer is full attention, the "
                                          "others gated DeltaNet", true),
      // DeepSeek sparse attention (model_types deepseek_v32, glm_moe_dsa): the lightning indexer.
      dim("index_n_heads", 1e4, "DeepSeek sparse attention: indexer heads n_i", true),
      dim("index_head_dim", 1e5, "DeepSeek sparse attention: indexer head dim d_i", true),
      dim("index_topk", 1e9, "DeepSeek sparse attention: keys the main attention reads per query", true),
      anyf("indexer_types", "GLM-5.x: per layer 'full' (its own indexer) or 'shared' (the last indexer's top-k)"),
      anyf("index_topk_pattern", "GLM-5.x: without indexer_types, 'F'/'S' per layer (full / shared indexer)"),
      dim("index_topk_freq", 1e4, "GLM-5.x: without indexer_types, every n-th layer after the offset runs an "
                                  "indexer", true),
      zdim("index_skip_topk_offset", 1e4, "GLM-5.x: layers before this all run an indexer (with index_topk_freq)"),
      anyf("mlp_layer_types", "GLM-5.x: per layer 'dense' or 'sparse' (MoE) FFN"),
  };
  return t;
}

const Diagnostics& hf_rules_diagnostics() { return hf_rules().diags; }

namespace {

std::string join_keys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

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
        n.keys.push_back(key);
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

Result<wl::TransformerArch> import_hf_config(const Json& config_in, const std::string& file,
                                             const std::string& pointer_in, std::vector<HfKeyNote>* ignored) {
  Diagnostics diags;
  const HfRules& rules = hf_rules();
  if (rules.diags.has_errors()) {
    diags.append(rules.diags);
    return Result<wl::TransformerArch>(std::move(diags));
  }
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
  const Json* config = &merged;

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
      return Result<wl::TransformerArch>(std::move(diags));
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
  if (sorter.report(known)) return Result<wl::TransformerArch>(std::move(diags));
  if (ignored != nullptr) ignored->insert(ignored->end(), sorter.notes.begin(), sorter.notes.end());

  ObjectReader r(*config, hf_config_fields(), file, pointer, diags, json_io::UnknownKeys::ignore);
  if (!config->is_object()) return Result<wl::TransformerArch>(std::move(diags));

  wl::TransformerArch a;
  a.source = file;
  a.model_type = model_type;
  auto assume = [&](std::string s) { a.assumptions.push_back(std::move(s)); };
  for (auto& x : early_assumptions) assume(std::move(x));
  a.vision = vision.tower;
  for (const auto& n : sorter.notes)
    if (!n.counted) assume(fmt::format("not counted: {} ({})", join_keys(n.keys), n.why));

  // Reads the first present key of a list of synonyms; reports when none is present.
  auto need = [&](std::initializer_list<const char*> keys, const char* what) -> std::int64_t {
    for (const char* k : keys)
      if (auto v = r.integer(k)) return *v;
    std::string list;
    for (const char* k : keys) list += (list.empty() ? "'" : " or '") + std::string(k) + "'";
    // Only report a missing key if it is not merely invalid (invalid values were already reported).
    bool present = false;
    for (const char* k : keys) present = present || (config->contains(k) && !(*config)[k].is_null());
    if (!present) r.error("", fmt::format("missing {} ({})", list, what));
    return 0;
  };
  auto opt = [&](std::initializer_list<const char*> keys) -> std::optional<std::int64_t> {
    for (const char* k : keys)
      if (auto v = r.integer(k)) return *v;
    return std::nullopt;
  };

  const bool gpt2 = gpt2_like().count(model_type) > 0;
  a.hidden = need({"hidden_size", "n_embd"}, "model width");
  a.layers = need({"num_hidden_layers", "n_layer"}, "number of layers");
  if (a.vision)  // a projector width the vision reader could not know (a text_config sized by defaults)
    for (auto& w : a.vision->encoder.vit.projector) w = w > 0 ? w : a.hidden;
  a.heads = need({"num_attention_heads", "n_head"}, "number of attention heads");
  if (auto padded = opt({"padded_vocab_size"})) a.vocab = *padded;
  else a.vocab = need({"vocab_size"}, "vocabulary size");
  a.max_position = opt({"max_position_embeddings", "n_positions"}).value_or(0);

  if (auto kv = r.integer("num_key_value_heads")) {
    a.kv_heads = *kv;
  } else {
    a.kv_heads = a.heads;
    if (a.heads > 0)
      assume(fmt::format("num_key_value_heads absent or null: {} KV heads (multi-head attention)", a.heads));
  }
  if (auto hd = r.integer("head_dim")) {
    a.head_dim = *hd;
  } else if (auto ahd = r.integer("attention_head_dim"); ahd && model_type == "nemotron_h") {
    a.head_dim = *ahd;  // NemotronHAttention: head_dim = config.attention_head_dim (older configs)
  } else if (a.heads > 0 && a.hidden > 0) {
    if (a.hidden % a.heads != 0)
      r.error("hidden_size", fmt::format("hidden size {} is not divisible by {} heads and no head_dim is given",
                                         a.hidden, a.heads));
    a.head_dim = a.hidden / a.heads;
  }
  if (a.heads > 0 && a.kv_heads > 0 && a.heads % a.kv_heads != 0)
    r.error("num_key_value_heads",
            fmt::format("{} query heads are not divisible into {} KV-head groups", a.heads, a.kv_heads));

  // OPT: an embedding narrower than the model (OPT-350m) adds project_in / project_out matrices gpuplan does not count.
  if (auto w = r.integer("word_embed_proj_dim"); w && a.hidden > 0 && *w != a.hidden)
    r.error("word_embed_proj_dim",
            fmt::format("{} differs from hidden_size {}: OPT's projections between the embedding and the model "
                        "(project_in, project_out) are not modelled; gpuplan refuses the config rather than import a "
                        "wrong model",
                        *w, a.hidden));

  const bool llama4 = model_type == "llama4_text" || model_type == "llama4";
  if (auto dense = llama4 ? opt({"intermediate_size_mlp"}) : std::nullopt) {
    a.intermediate = *dense;  // Llama 4's dense layers; its intermediate_size is the experts' width (read below)
  } else if (auto i = opt({"intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"})) {
    a.intermediate = *i;
  } else if (gpt2 && a.hidden > 0) {
    a.intermediate = 4 * a.hidden;
    assume(fmt::format("FFN width absent: 4·h = {} (GPT-2 convention)", a.intermediate));
  } else if (!config->contains("intermediate_size") || (*config)["intermediate_size"].is_null()) {
    r.error("", "missing 'intermediate_size' (dense FFN width)");
  }

  const bool nemotron_h = model_type == "nemotron_h";
  if (nemotron_h) {
    // Nemotron-H (transformers' modeling_nemotron_h.py; arXiv:2504.03624 §2.1): every layer is one block, an RMSNorm
    // then its mixer or its FFN; the MLP is squared-ReLU with two matrices (up, down); the attention layers use no
    // position embedding.
    a.mlp = wl::MlpKind::plain;
    a.norm = wl::NormKind::rmsnorm;
    a.position = wl::PositionKind::none;
    a.norms_per_layer = 1;
  } else if (model_type == "nemotron") {
    // Nemotron-4: squared-ReLU two-matrix MLP, LayerNorm (1p), RoPE, no biases (Parmar et al. 2024, arXiv:2402.16819).
    a.mlp = wl::MlpKind::plain;
    a.norm = wl::NormKind::layernorm;
    a.position = wl::PositionKind::rope;
  } else if (gpt2) {
    a.mlp = wl::MlpKind::plain;
    a.norm = wl::NormKind::layernorm;
    a.position = model_type == "bloom" || model_type == "mpt" ? wl::PositionKind::alibi
                 : (model_type == "gpt_neox" || model_type == "gptj" || model_type == "phi" || model_type == "falcon" ||
                    model_type == "starcoder2")
                     ? wl::PositionKind::rope
                     : wl::PositionKind::learned;
    a.qkv_bias = a.o_bias = a.mlp_bias = true;
  } else {
    a.mlp = wl::MlpKind::gated;
    a.norm = wl::NormKind::rmsnorm;
    a.position = wl::PositionKind::rope;
  }
  if (auto b = r.boolean("attention_bias")) a.qkv_bias = a.o_bias = *b;
  if (auto b = r.boolean("qkv_bias")) a.qkv_bias = *b;
  // Nemotron-H's use_bias is its Mamba-2 projections' bias (read below); elsewhere every linear's.
  if (auto b = r.boolean("use_bias"); b && !nemotron_h) a.qkv_bias = a.o_bias = a.mlp_bias = *b;
  if (auto b = r.boolean("mlp_bias")) a.mlp_bias = *b;
  // Qwen2 / Qwen2-MoE (and the Qwen2 language model of Qwen2-VL / Qwen2.5-VL) always have q, k, v biases and no o bias
  // (their config has no key for it).
  if (model_type == "qwen2" || model_type == "qwen2_moe" || model_type == "qwen2_vl" || model_type == "qwen2_5_vl") {
    a.qkv_bias = true;
    a.o_bias = false;
  }
  a.qk_norm = model_type == "qwen3" || model_type == "qwen3_moe" || model_type == "gemma3" || model_type == "gemma3_text" ||
              model_type == "olmo2" || r.boolean("use_qk_norm").value_or(false);
  // Llama 4's q/k norm is Llama4TextL2Norm, which has no weight (and runs on the RoPE layers only).
  if (llama4) a.qk_norm_weights = false;
  a.attention_sinks = model_type == "gpt_oss";
  // Dropout: the first synonym present (absent: TransformerArch::*_dropout_on's stated assumption).
  for (const char* k : {"attention_dropout", "attn_pdrop", "attention_probs_dropout_prob"})
    if (auto v = r.num(k); v && !a.attention_dropout) a.attention_dropout = *v;
  for (const char* k : {"hidden_dropout", "resid_pdrop", "hidden_dropout_prob", "residual_dropout", "dropout"})
    if (auto v = r.num(k); v && !a.hidden_dropout) a.hidden_dropout = *v;
  if (model_type == "gemma2" || model_type == "gemma3" || model_type == "gemma3_text") a.norms_per_layer = 4;
  if (nemotron_h) a.norms_per_layer = 1;

  if (auto t = r.boolean("tie_word_embeddings")) {
    a.tied_embeddings = *t;
  } else {
    // Model types of data/hf/model_type_defaults.json got transformers' default above. Of the others, the GPT-2
    // family keeps PretrainedConfig's default (true); the rest are read as untied, as most decoder classes are.
    static const std::set<std::string> tied_by_default{"gpt2", "gpt_bigcode", "opt", "bloom", "mpt"};
    a.tied_embeddings = tied_by_default.count(model_type) > 0;
    assume(fmt::format("tie_word_embeddings absent: {} ({})", a.tied_embeddings ? "true" : "false",
                       a.tied_embeddings ? "transformers' PretrainedConfig default, which the GPT-2 family keeps"
                                         : "assumed: most decoder model classes override PretrainedConfig's true"));
  }

  // Llama 4's keys mean what they mean only in Llama 4's modelling code; elsewhere they would be read wrong.
  if (!llama4) {
    for (const char* k : {"interleave_moe_layer_step", "moe_layers", "intermediate_size_mlp", "attention_chunk_size",
                          "no_rope_layer_interval"}) {
      const Json* v = r.raw(k);
      if (v == nullptr || v->is_null() || (std::string(k) == "interleave_moe_layer_step" && *v == Json(1))) continue;
      r.error(k, fmt::format("{}: gpuplan reads it as Llama 4's (model_type llama4_text) and does not know what it "
                             "means for model_type '{}'; gpuplan refuses the config rather than import a wrong model",
                             json_io::describe_value(*v), model_type));
    }
  }

  // Nemotron-H's keys mean what they mean only in its modelling code (a Mamba-2 key elsewhere would be dropped).
  if (!nemotron_h) {
    for (const char* k : {"hybrid_override_pattern", "layers_block_type", "attention_head_dim", "mamba_num_heads",
                          "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel", "chunk_size", "use_conv_bias",
                          "mamba_proj_bias", "mamba_ssm_cache_dtype", "moe_shared_expert_intermediate_size"}) {
      const Json* v = r.raw(k);
      if (v == nullptr || v->is_null()) continue;
      r.error(k, fmt::format("{}: gpuplan reads it as Nemotron-H's (model_type nemotron_h) and does not know what it "
                             "means for model_type '{}'; gpuplan refuses the config rather than import a wrong model",
                             json_io::describe_value(*v), model_type));
    }
  }

  detail::refuse_foreign_mixer_keys(r, model_type);

  // ---- MoE ----
  // The first present key of each synonym list names the pointer of a diagnostic.
  auto first_present = [&](std::initializer_list<const char*> keys) -> std::string {
    for (const char* k : keys)
      if (r.has(k)) return k;
    return *keys.begin();
  };
  const auto experts = opt({"num_local_experts", "num_experts", "n_routed_experts"});
  const auto top_k = opt({"num_experts_per_tok", "experts_per_token"});
  // Top-k above the expert count cannot route; with one expert it was read as a dense model before, silently.
  if (experts && top_k && *top_k > *experts)
    r.error(first_present({"num_experts_per_tok", "experts_per_token"}),
            fmt::format("{} experts per token but {} {} ('{}'): experts per token must be <= number of experts",
                        *top_k, *experts, *experts == 1 ? "expert" : "experts",
                        first_present({"num_local_experts", "num_experts", "n_routed_experts"})));
  if (experts && *experts == 1)
    assume(fmt::format("{} is 1: one expert that every token uses, read as a dense FFN of width {}",
                       first_present({"num_local_experts", "num_experts", "n_routed_experts"}), a.intermediate));
  if (experts && *experts > 1) {
    wl::MoeSpec m;
    m.num_experts = *experts;
    m.experts_per_token = need({"num_experts_per_tok", "experts_per_token"}, "experts per token of an MoE model");
    m.expert_intermediate = opt({"moe_intermediate_size"}).value_or(a.intermediate);
    m.shared_experts = opt({"n_shared_experts"}).value_or(0);
    m.shared_intermediate = m.shared_experts > 0 ? m.expert_intermediate : 0;
    if (llama4) {
      // transformers' Llama4TextMoe: the experts and the one shared expert (an ungated Llama4TextMLP) are
      // intermediate_size wide; the dense layers' Llama4TextMLP is intermediate_size_mlp wide.
      m.expert_intermediate = need({"intermediate_size"}, "Llama 4: FFN width of one expert");
      m.shared_experts = 1;
      m.shared_intermediate = m.expert_intermediate;
    }
    if (auto s = opt({"shared_expert_intermediate_size"}); s && *s > 0) {
      m.shared_experts = 1;
      m.shared_intermediate = *s;
      m.shared_expert_gate = true;
    }
    m.router_bias = model_type == "gpt_oss";
    m.expert_bias = model_type == "gpt_oss";
    m.correction_bias =
        (model_type == "deepseek_v3" || detail::reads_sparse_attention(model_type) || nemotron_h) ? m.num_experts : 0;
    // Group-limited routing (transformers' DeepseekV3TopkRouter: n_group groups, top-k within the topk_group best).
    m.router_groups = opt({"n_group"}).value_or(0);
    m.router_group_topk = opt({"topk_group"}).value_or(0);
    if (m.router_groups > 0 && m.num_experts % m.router_groups != 0)
      r.error("n_group", fmt::format("{} experts do not split into {} equal groups", m.num_experts, m.router_groups));
    if (m.router_group_topk > m.router_groups && m.router_groups > 0)
      r.error("topk_group", fmt::format("{} groups chosen of {} (topk_group must be <= n_group)", m.router_group_topk,
                                        m.router_groups));
    if (nemotron_h) {
      // NemotronHMOE: a DeepSeek-style router with e_score_correction_bias, n_shared_experts of
      // moe_shared_expert_intermediate_size (ungated, like its experts: squared ReLU, up and down).
      if (auto w = opt({"moe_shared_expert_intermediate_size"})) m.shared_intermediate = *w;
      if (m.shared_experts > 0 && m.shared_intermediate == 0) m.shared_intermediate = m.expert_intermediate;
    }
    a.moe_layer.assign(static_cast<std::size_t>(std::max<std::int64_t>(a.layers, 0)), true);
    const auto first_dense = opt({"first_k_dense_replace"}).value_or(0);
    const bool qwen = model_type.rfind("qwen", 0) == 0;
    const auto freq = opt({qwen ? "decoder_sparse_step" : llama4 ? "interleave_moe_layer_step" : "moe_layer_freq"})
                          .value_or(1);
    for (std::int64_t i = 0; i < a.layers; ++i) {
      // transformers: Qwen MoE layers are those with (i + 1) % decoder_sparse_step == 0; Llama 4's (its
      // moe_layers default, range(step - 1, L, step)) the same; DeepSeek's are i >= first_k_dense_replace and
      // i % moe_layer_freq == 0.
      a.moe_layer[static_cast<std::size_t>(i)] =
          qwen || llama4 ? (i + 1) % freq == 0 : (i >= first_dense && i % freq == 0);
    }
    if (const Json* list = r.raw("moe_layers"); llama4 && list && list->is_array()) {
      // An explicit list of MoE layers wins over the step (Llama4TextConfig.__post_init__).
      std::fill(a.moe_layer.begin(), a.moe_layer.end(), false);
      for (std::size_t k = 0; k < list->size(); ++k) {
        const Json& e = (*list)[k];
        if (!e.is_number_integer() || e.get<std::int64_t>() < 0 || e.get<std::int64_t>() >= a.layers) {
          r.error("moe_layers", fmt::format("entry {} is not a layer index in [0, {})", k, a.layers));
          continue;
        }
        a.moe_layer[static_cast<std::size_t>(e.get<std::int64_t>())] = true;
      }
    }
    const auto moe_layers = std::count(a.moe_layer.begin(), a.moe_layer.end(), true);
    if (llama4 && moe_layers < a.layers)
      assume(fmt::format("{} of {} layers are MoE ({}); the others are dense FFNs of width {} (intermediate_size_mlp)",
                         moe_layers, a.layers,
                         r.raw("moe_layers") != nullptr && r.raw("moe_layers")->is_array()
                             ? std::string("moe_layers")
                             : fmt::format("interleave_moe_layer_step = {}: layers {}, {}, ...", freq, freq - 1,
                                           2 * freq - 1),
                         a.intermediate));
    if (const Json* only = r.raw("mlp_only_layers"); only && only->is_array()) {
      for (std::size_t k = 0; k < only->size(); ++k) {
        const Json& e = (*only)[k];
        if (!e.is_number_integer() || e.get<std::int64_t>() < 0 || e.get<std::int64_t>() >= a.layers) {
          r.error("mlp_only_layers", fmt::format("entry {} is not a layer index in [0, {})", k, a.layers));
          continue;
        }
        a.moe_layer[static_cast<std::size_t>(e.get<std::int64_t>())] = false;
      }
    }
    a.moe = m;
  }
  a.mtp_layers = opt({"num_nextn_predict_layers"}).value_or(0);

  // ---- MLA ----
  // Multi-head latent attention needs its four sizes; q_lora_rank is optional (null or absent: the query is not
  // compressed, as in DeepSeek-V2-Lite). Any of the five keys without the four is an error: read as plain multi-head
  // attention the KV cache would come out ~25x too large (DeepSeek-V3: 128 heads x 2 x 56 = 14,336 elements per
  // token and layer instead of 512 + 64 = 576).
  static constexpr std::array<const char*, 4> kMlaNeeds{"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                                                        "v_head_dim"};
  auto given = [&](const char* k) { return config->contains(k) && !(*config)[k].is_null(); };
  const bool any_mla = given("q_lora_rank") || std::any_of(kMlaNeeds.begin(), kMlaNeeds.end(), given);
  std::string found, missing;
  for (const char* k : {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
    if (given(k)) found += (found.empty() ? "'" : ", '") + std::string(k) + "'";
  for (const char* k : kMlaNeeds)
    if (!given(k)) missing += (missing.empty() ? "'" : ", '") + std::string(k) + "'";
  if (any_mla && !missing.empty())
    r.error("", fmt::format("incomplete multi-head latent attention (MLA) config: {} given but {} missing (MLA needs "
                            "kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim; q_lora_rank may be null)",
                            found, missing));
  if (auto kv_lora = r.integer("kv_lora_rank"); kv_lora && missing.empty()) {
    wl::MlaSpec m;
    m.kv_lora_rank = *kv_lora;
    m.q_lora_rank = opt({"q_lora_rank"}).value_or(0);
    m.qk_nope_head_dim = r.integer("qk_nope_head_dim").value_or(0);
    m.qk_rope_head_dim = r.integer("qk_rope_head_dim").value_or(0);
    m.v_head_dim = r.integer("v_head_dim").value_or(0);
    a.mla = m;
    a.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
    // transformers' DeepseekV32Config / GlmMoeDsaConfig store qk_head_dim = qk_nope_head_dim + qk_rope_head_dim.
    if (auto qk = r.integer("qk_head_dim"); qk && *qk != a.head_dim)
      r.error("qk_head_dim", fmt::format("{} differs from qk_nope_head_dim + qk_rope_head_dim = {}", *qk, a.head_dim));
    a.kv_heads = a.heads;  // MLA decompresses K and V per query head
  }

  if (const Json* qk = r.raw("qk_head_dim"); qk && !qk->is_null() && !a.mla)
    r.error("qk_head_dim", fmt::format("{}: gpuplan reads it as the MLA query/key head dim and the config has no "
                                       "multi-head latent attention; gpuplan refuses the config rather than import "
                                       "a wrong model", json_io::describe_value(*qk)));
  if (detail::reads_sparse_attention(model_type)) detail::read_sparse_attention(r, a, assume);
  if (model_type == "glm_moe_dsa") detail::read_mlp_layer_types(r, a, assume);

  // ---- Nemotron-H: the layer pattern ----
  // transformers' NemotronHConfig (configuration_nemotron_h.py, _pattern_to_list): hybrid_override_pattern has one
  // character per layer, M a Mamba-2 mixer, * attention, - an MLP, E an MoE; layers_block_type says the same as a
  // list (mamba / attention / mlp / moe, or linear_attention / full_attention / mlp / moe). Each layer is one block:
  // a mixer without FFN, or an FFN without mixer.
  if (nemotron_h) {
    std::vector<char> kinds;
    std::string key;
    if (const Json* list = r.raw("layers_block_type"); list && list->is_array()) {
      key = "layers_block_type";
      for (std::size_t i = 0; i < list->size(); ++i) {
        const Json& e = (*list)[i];
        const std::string v = e.is_string() ? e.get<std::string>() : "";
        char c = 0;
        if (v == "mamba" || v == "linear_attention") c = 'M';
        else if (v == "attention" || v == "full_attention") c = '*';
        else if (v == "mlp") c = '-';
        else if (v == "moe") c = 'E';
        if (c == 0)
          diags.error(file, r.pointer("layers_block_type") + "/" + std::to_string(i),
                      fmt::format("expected 'mamba', 'attention', 'mlp' or 'moe', found {}", json_io::describe_value(e)));
        kinds.push_back(c);
      }
    } else if (auto pattern = r.str("hybrid_override_pattern")) {
      key = "hybrid_override_pattern";
      for (std::size_t i = 0; i < pattern->size(); ++i) {
        const char c = (*pattern)[i];
        if (c != 'M' && c != '*' && c != '-' && c != 'E')
          r.error("hybrid_override_pattern",
                  fmt::format("character {} is '{}': expected M (Mamba-2), * (attention), - (MLP) or E (MoE)", i, c));
        kinds.push_back(c);
      }
    } else {
      r.error("", "missing 'hybrid_override_pattern' (Nemotron-H: which layers are Mamba-2, attention, MLP or MoE)");
    }
    if (!key.empty() && static_cast<std::int64_t>(kinds.size()) != a.layers)
      r.error(key, fmt::format("has {} layers but num_hidden_layers is {}", kinds.size(), a.layers));
    const auto n = static_cast<std::size_t>(std::max<std::int64_t>(a.layers, 0));
    if (kinds.size() == n) {
      a.mixers.assign(n, wl::Mixer::none);
      a.ffn_absent.assign(n, false);
      a.moe_layer.assign(n, false);
      std::int64_t counts[4] = {0, 0, 0, 0};
      for (std::size_t i = 0; i < n; ++i) {
        switch (kinds[i]) {
          case 'M': a.mixers[i] = wl::Mixer::mamba2; a.ffn_absent[i] = true; ++counts[0]; break;
          case '*': a.mixers[i] = wl::Mixer::attention; a.ffn_absent[i] = true; ++counts[1]; break;
          case '-': ++counts[2]; break;
          case 'E': a.moe_layer[i] = true; ++counts[3]; break;
          default: break;
        }
      }
      if (counts[3] > 0 && !a.moe)
        r.error(key, fmt::format("has {} MoE layers (E) but the config gives no routed experts (n_routed_experts)",
                                 counts[3]));
      if (counts[3] == 0) a.moe.reset();  // NemotronHConfig's MoE fields mean nothing without E layers
      assume(fmt::format("{}: {} Mamba-2, {} attention, {} MLP and {} MoE layers, each one block (an RMSNorm, then "
                         "its mixer or its FFN: transformers' NemotronHBlock)",
                         key, counts[0], counts[1], counts[2], counts[3]));
      if (counts[0] > 0) {
        wl::Mamba2Spec m;
        m.heads = need({"mamba_num_heads"}, "Mamba-2 heads");
        m.head_dim = need({"mamba_head_dim"}, "Mamba-2 head dim");
        m.state = need({"ssm_state_size"}, "Mamba-2 state size");
        m.groups = need({"n_groups"}, "Mamba-2 groups");
        m.conv_kernel = need({"conv_kernel"}, "Mamba-2 conv1d taps");
        m.chunk = need({"chunk_size"}, "Mamba-2 SSD chunk");
        m.conv_bias = r.boolean("use_conv_bias").value_or(true);
        // NemotronHMamba2Mixer: in_proj and out_proj take bias=config.use_bias.
        m.proj_bias = r.boolean("use_bias").value_or(false) || r.boolean("mamba_proj_bias").value_or(false);
        if (m.groups > 0 && m.heads > 0 && m.heads % m.groups != 0)
          r.error("n_groups", fmt::format("{} Mamba-2 heads are not divisible into {} groups", m.heads, m.groups));
        if (m.conv_kernel < 1) r.error("conv_kernel", "must be at least 1");
        const std::string dtype = r.str("mamba_ssm_cache_dtype").value_or("float32");
        if (dtype == "float32") m.ssm_state_bytes = 4.0;
        else if (dtype == "bfloat16" || dtype == "float16" || dtype == "auto") m.ssm_state_bytes = 2.0;
        else r.error("mamba_ssm_cache_dtype", fmt::format("'{}': expected float32, bfloat16 or float16", dtype));
        m.ssm_state_origin = fmt::format(
            "mamba_ssm_cache_dtype {}: vLLM's NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype takes the "
            "config's value, float32 when absent",
            dtype);
        a.mamba = m;
      }
    }
  }

  // ---- attention span per layer ----
  // layer_types, when given, says it per layer. Otherwise transformers derives it from sliding_window by a rule of
  // the model type (its config's __post_init__, data/hf/model_type_defaults.json): Gemma 2 and GPT-OSS alternate,
  // Gemma 3 makes every sliding_window_pattern-th layer global, Qwen slides from max_window_layers on when
  // use_sliding_window, Mistral slides everywhere.
  a.attention.assign(static_cast<std::size_t>(std::max<std::int64_t>(a.layers, 0)), wl::AttentionSpan::full);
  const auto window = opt({"sliding_window"});
  // google/gemma-2-*'s first config.json files (June 2024) restated the window as sliding_window_size, which
  // transformers' Gemma2Config never read; one window is modelled, so the two must agree.
  if (const auto restated = r.integer("sliding_window_size"); restated && (!window || *restated != *window))
    r.error("sliding_window_size",
            fmt::format("{} differs from sliding_window = {}: gpuplan reads one window per layer",
                        *restated, window ? std::to_string(*window) : std::string("null")));
  if (detail::reads_gated_deltanet(model_type)) {
    // Qwen3-Next's layer_types name the mixer (linear_attention / full_attention), not an attention span.
    detail::read_gated_deltanet(r, a, assume);
  } else if (const Json* types = r.raw("layer_types"); types && types->is_array()) {
    if (static_cast<std::int64_t>(types->size()) != a.layers) {
      r.error("layer_types", fmt::format("has {} entries for {} layers", types->size(), a.layers));
    } else {
      for (std::size_t i = 0; i < types->size(); ++i) {
        const Json& e = (*types)[i];
        const std::string s = e.is_string() ? e.get<std::string>() : "";
        if (s == "sliding_attention") a.attention[i] = wl::AttentionSpan::sliding;
        else if (s == "full_attention") a.attention[i] = wl::AttentionSpan::full;
        else if (s == "chunked_attention" && llama4) a.attention[i] = wl::AttentionSpan::chunked;
        // transformers' DeepseekV32Config / GlmMoeDsaConfig: every layer's mask is the causal one the indexer's
        // top-k then narrows (the sparse attention, read from the index_* keys).
        else if (s == "deepseek_sparse_attention" && detail::reads_sparse_attention(model_type))
          a.attention[i] = wl::AttentionSpan::full;
        else if (s == "linear_attention")
          diags.error(file, r.pointer("layer_types") + "/" + std::to_string(i),
                      fmt::format("'linear_attention': gated DeltaNet linear-attention layers are read for model_type "
                                  "qwen3_next only (Qwen3.5's are not modelled yet, #23), not '{}'; gpuplan refuses "
                                  "the config rather than import a wrong model",
                                  model_type));
        else
          diags.error(file, r.pointer("layer_types") + "/" + std::to_string(i),
                      fmt::format("expected 'sliding_attention' or 'full_attention', found {}", json_io::describe_value(e)));
      }
      if (a.sliding_layer_count() > 0 && !window)
        r.error("sliding_window", "layer_types has sliding layers but no sliding_window is given");
    }
  } else if (llama4) {
    // Llama4TextConfig.__post_init__: layer i is chunked when it uses RoPE, no_rope_layers[i] == 1; without the
    // list every no_rope_layer_interval-th layer (default 4) is a NoPE layer with global attention.
    const Json* list = r.raw("no_rope_layers");
    const auto interval = opt({"no_rope_layer_interval"}).value_or(4);
    const bool listed = list && list->is_array() && !list->empty();
    if (listed && static_cast<std::int64_t>(list->size()) != a.layers)
      r.error("no_rope_layers", fmt::format("has {} entries for {} layers", list->size(), a.layers));
    for (std::int64_t i = 0; i < a.layers; ++i) {
      bool rope = (i + 1) % interval != 0;
      if (listed && static_cast<std::int64_t>(list->size()) == a.layers) {
        const Json& e = (*list)[static_cast<std::size_t>(i)];
        if (!e.is_number_integer() || (e.get<std::int64_t>() != 0 && e.get<std::int64_t>() != 1))
          diags.error(file, r.pointer("no_rope_layers") + "/" + std::to_string(i),
                      fmt::format("expected 0 (NoPE) or 1 (RoPE), found {}", json_io::describe_value(e)));
        else rope = e.get<std::int64_t>() == 1;
      }
      a.attention[static_cast<std::size_t>(i)] = rope ? wl::AttentionSpan::chunked : wl::AttentionSpan::full;
    }
  } else if (window && type_rules && type_rules->pattern) {
    const HfAttentionPattern& p = *type_rules->pattern;
    const bool on = p.gate.empty() || r.boolean(p.gate).value_or(false);
    std::int64_t period = p.period;
    if (!p.period_key.empty()) period = opt({p.period_key.c_str()}).value_or(0);
    const auto max_window_layers = opt({"max_window_layers"}).value_or(0);
    std::string how;
    for (std::int64_t i = 0; on && i < a.layers; ++i) {
      bool sliding = true;
      if (p.rule == "every_nth_full") sliding = period > 0 && (i + 1) % period != 0;
      else if (p.rule == "sliding_from_max_window_layers") sliding = i >= max_window_layers;
      else if (p.rule == "alternating_below_max_window_layers") sliding = (i + 1) % 2 != 0 && i < max_window_layers;
      a.attention[static_cast<std::size_t>(i)] = sliding ? wl::AttentionSpan::sliding : wl::AttentionSpan::full;
    }
    if (!on)
      assume(fmt::format("{} is false: no layer uses the sliding window (transformers' rule for model_type '{}')",
                         p.gate, model_type));
    else if (p.rule == "every_nth_full") how = fmt::format("every {}th layer is full attention, the others slide", period);
    else if (p.rule == "sliding_from_max_window_layers")
      how = fmt::format("layers from max_window_layers = {} on slide", max_window_layers);
    else if (p.rule == "alternating_below_max_window_layers")
      how = fmt::format("every other layer below max_window_layers = {} slides", max_window_layers);
    else how = "every layer slides";
    if (on)
      assume(fmt::format("layer_types absent: {} layers of {} use the {}-token sliding window (transformers' rule for "
                       "model_type '{}': {})",
                       a.sliding_layer_count(), a.layers, *window, model_type, how));
  } else if (window && r.boolean("use_sliding_window").value_or(true)) {
    // A model type without a rule in data/hf/model_type_defaults.json: the keys say what they can.
    const auto pattern = opt({"sliding_window_pattern"});
    const auto max_window_layers = opt({"max_window_layers"});
    for (std::int64_t i = 0; i < a.layers; ++i) {
      bool sliding = true;
      if (pattern) sliding = (i + 1) % *pattern != 0;  // every pattern-th layer is global
      if (max_window_layers && config->contains("use_sliding_window")) sliding = i >= *max_window_layers;
      a.attention[static_cast<std::size_t>(i)] = sliding ? wl::AttentionSpan::sliding : wl::AttentionSpan::full;
    }
  }
  if (a.sliding_layer_count() > 0) a.sliding_window = window.value_or(0);
  if (llama4) {
    const auto chunk = opt({"attention_chunk_size"});
    const auto chunked = std::count(a.attention.begin(), a.attention.end(), wl::AttentionSpan::chunked);
    if (a.sliding_layer_count() > 0 && chunked > 0)
      r.error("layer_types", "mixes sliding-window and chunked layers, which gpuplan does not model");
    if (chunk && chunked > 0) {
      a.attention_chunk = *chunk;
      assume(fmt::format("{} of {} layers use chunked local attention over aligned {}-token chunks (RoPE layers); "
                         "the other {} are NoPE layers with global attention (transformers' Llama4TextConfig)",
                         a.chunked_layer_count(), a.layers, *chunk, a.layers - a.chunked_layer_count()));
    } else {
      std::replace(a.attention.begin(), a.attention.end(), wl::AttentionSpan::chunked, wl::AttentionSpan::full);
    }
  }

  // Every size is in range on its own, but their products must stay representable: the parameter and FLOP
  // formulas use 64-bit counts. A rough upper bound (all layers MoE-sized, attention at full width) above 1e17
  // parameters — 100,000× the largest published model — is rejected rather than overflowing.
  if (!diags.has_errors()) {
    const double h = double(a.hidden), L = double(a.layers);
    const double att = h * double(a.heads + 2 * a.kv_heads) * double(a.head_dim) + double(a.heads) * double(a.head_dim) * h;
    const double ffn = 3.0 * h * double(a.intermediate) +
                       (a.moe ? 3.0 * h * double(a.moe->expert_intermediate) * double(a.moe->num_experts + a.moe->shared_experts) : 0.0);
    const double mla = a.mla ? h * double(a.mla->q_lora_rank + a.mla->kv_lora_rank) +
                                   double(a.mla->q_lora_rank + a.mla->kv_lora_rank) * double(a.heads) *
                                       double(a.mla->qk_nope_head_dim + a.mla->qk_rope_head_dim + a.mla->v_head_dim)
                             : 0.0;
    // Multi-token-prediction modules are whole extra layers (plus a 2h×h projection).
    const double ssm = a.mamba ? h * double(2 * a.mamba->inner() + 2 * a.mamba->groups * a.mamba->state +
                                             a.mamba->heads) +
                                     double(a.mamba->inner()) * (h + 1.0) +
                                     double(a.mamba->conv_channels()) * double(a.mamba->conv_kernel + 1)
                               : 0.0;
    const double gdn = a.gdn ? h * double(a.gdn->conv_channels() + 2 * a.gdn->value_width()) +
                                   double(a.gdn->conv_channels()) * double(a.gdn->conv_kernel)
                             : 0.0;
    const double idx = a.dsa ? double(a.dsa->index_heads) * double(a.dsa->index_head_dim) * (h + 1.0) : 0.0;
    const double bound = (L + double(a.mtp_layers)) * (att + ffn + mla + ssm + gdn + idx + 2.0 * h * h) +
                         2.0 * double(a.vocab) * h + double(a.max_position) * h;
    if (!(bound <= 1e17))
      r.error("", fmt::format("the architecture has about {:.3g} parameters; gpuplan accepts up to 1e17 (check "
                              "hidden_size, num_hidden_layers, intermediate_size and the expert counts)", bound));
  }
  if (diags.has_errors()) return Result<wl::TransformerArch>(std::move(diags));
  return Result<wl::TransformerArch>(std::move(a), std::move(diags));
}

}  // namespace gpuplan::wl_io
