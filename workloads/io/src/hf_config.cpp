// The Hugging Face config importer (model_io.hpp): the field table of the keys it reads, and import_hf_config, which
// prepares the config and reads its layer kinds through the stages of hf_config_stages.hpp and reads the sizes and the
// model family itself.
#include <algorithm>
#include <array>
#include <set>

#include <fmt/format.h>

#include "gpuplan/wl_io/model_io.hpp"
#include "hf_config_stages.hpp"
#include "hf_rules.hpp"
#include "hf_sequence_mixers.hpp"
#include "io_common.hpp"

namespace gpuplan::wl_io {

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

namespace detail {

// Model types whose FFN is a plain two-matrix MLP with LayerNorm, learned or ALiBi positions and biases.
const std::set<std::string>& gpt2_like() {
  static const std::set<std::string> s{"gpt2", "gpt_bigcode", "opt", "bloom", "gpt_neox", "gptj", "falcon",
                                       "starcoder2", "phi", "mpt"};
  return s;
}

std::int64_t HfRead::need(std::initializer_list<const char*> keys, const char* what) const {
  for (const char* k : keys)
    if (auto v = r.integer(k)) return *v;
  std::string list;
  for (const char* k : keys) list += (list.empty() ? "'" : " or '") + std::string(k) + "'";
  // Only report a missing key if it is not merely invalid (invalid values were already reported).
  bool present = false;
  for (const char* k : keys) present = present || (config.contains(k) && !config[k].is_null());
  if (!present) r.error("", fmt::format("missing {} ({})", list, what));
  return 0;
}

std::optional<std::int64_t> HfRead::opt(std::initializer_list<const char*> keys) const {
  for (const char* k : keys)
    if (auto v = r.integer(k)) return *v;
  return std::nullopt;
}

}  // namespace detail

using detail::gpt2_like;
using detail::join_keys;

Result<wl::TransformerArch> import_hf_config(const Json& config_in, const std::string& file,
                                             const std::string& pointer_in, std::vector<HfKeyNote>* ignored) {
  Diagnostics diags;
  const HfRules& rules = hf_rules();
  if (rules.diags.has_errors()) {
    diags.append(rules.diags);
    return Result<wl::TransformerArch>(std::move(diags));
  }
  std::optional<detail::HfPrepared> prepared =
      detail::prepare_hf_config(config_in, file, pointer_in, ignored, rules, diags);
  if (!prepared) return Result<wl::TransformerArch>(std::move(diags));
  detail::HfPrepared& prep = *prepared;
  const std::string& pointer = prep.pointer;
  const std::string& model_type = prep.model_type;
  const Json* config = &prep.merged;
  std::vector<std::string>& early_assumptions = prep.early_assumptions;
  const HfVisionRead& vision = prep.vision;

  ObjectReader r(*config, hf_config_fields(), file, pointer, diags, json_io::UnknownKeys::ignore);
  if (!config->is_object()) return Result<wl::TransformerArch>(std::move(diags));

  wl::TransformerArch a;
  a.source = file;
  a.model_type = model_type;
  auto assume = [&](std::string s) { a.assumptions.push_back(std::move(s)); };
  for (auto& x : early_assumptions) assume(std::move(x));
  a.vision = vision.tower;
  for (const auto& n : prep.notes)
    if (!n.counted) assume(fmt::format("not counted: {} ({})", join_keys(n.keys), n.why));

  const detail::HfRead in{r, *config, model_type, file, diags, assume};
  auto need = [&](std::initializer_list<const char*> keys, const char* what) { return in.need(keys, what); };
  auto opt = [&](std::initializer_list<const char*> keys) { return in.opt(keys); };

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

  detail::read_hf_moe(in, a, llama4, nemotron_h);
  a.mtp_layers = opt({"num_nextn_predict_layers"}).value_or(0);

  detail::read_hf_mla(in, a);
  if (detail::reads_sparse_attention(model_type)) detail::read_sparse_attention(r, a, assume);
  if (model_type == "glm_moe_dsa") detail::read_mlp_layer_types(r, a, assume);

  if (nemotron_h) detail::read_nemotron_h_layers(in, a);

  detail::read_attention_spans(in, a, prep.type_rules, llama4);

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
