// Hugging Face config.json: the sequence mixers other than dense attention that hf_config.cpp hands over here —
// Qwen3-Next's gated DeltaNet linear-attention layers and gated attention (model_type qwen3_next), and DeepSeek
// sparse attention's lightning indexer (model_types deepseek_v32, glm_moe_dsa). Issue #23 deliverable 2.
#include "hf_sequence_mixers.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace gpuplan::wl_io::detail {

using json_io::Json;
using json_io::ObjectReader;

bool reads_gated_deltanet(const std::string& model_type) { return model_type == "qwen3_next"; }
bool reads_sparse_attention(const std::string& model_type) {
  return model_type == "deepseek_v32" || model_type == "glm_moe_dsa";
}

void refuse_foreign_mixer_keys(const ObjectReader& r, const std::string& model_type) {
  auto refuse = [&](std::initializer_list<const char*> keys, const char* owner) {
    for (const char* k : keys) {
      const Json* v = r.raw(k);
      if (v == nullptr || v->is_null()) continue;
      r.error(k, fmt::format("{}: gpuplan reads it as {} and does not know what it means for model_type '{}'; "
                             "gpuplan refuses the config rather than import a wrong model",
                             json_io::describe_value(*v), owner, model_type));
    }
  };
  if (!reads_gated_deltanet(model_type))
    refuse({"linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
            "linear_conv_kernel_dim", "full_attention_interval"},
           "Qwen3-Next's gated DeltaNet (model_type qwen3_next)");
  if (!reads_sparse_attention(model_type))
    refuse({"index_topk", "index_n_heads", "index_head_dim"},
           "DeepSeek sparse attention's (model_type deepseek_v32 or glm_moe_dsa)");
  if (model_type != "glm_moe_dsa")
    refuse({"indexer_types", "index_topk_freq", "index_skip_topk_offset", "index_topk_pattern", "mlp_layer_types"},
           "GLM-5.x's shared-indexer or MLP layer schedule (model_type glm_moe_dsa)");
}

void read_gated_deltanet(const ObjectReader& r, wl::TransformerArch& a, const std::function<void(std::string)>& assume) {
  // transformers' Qwen3NextAttention: q_proj is h x 2·n_q·d (the query and a sigmoid gate on the attention output),
  // q_norm / k_norm per head dim; Qwen3NextDecoderLayer: each layer is one mixer (linear_attention: the gated
  // DeltaNet; full_attention: the gated attention) and one FFN (MoE where (i + 1) % decoder_sparse_step == 0 and i
  // is not in mlp_only_layers, read by hf_config.cpp), two RMSNorms.
  a.attention_output_gate = true;
  a.qk_norm = true;
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(a.layers, 0));
  std::vector<bool> linear(n, false);
  std::string how;
  if (const Json* types = r.raw("layer_types"); types && types->is_array()) {
    if (types->size() != n) {
      r.error("layer_types", fmt::format("has {} entries for {} layers", types->size(), a.layers));
      return;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const Json& e = (*types)[i];
      const std::string s = e.is_string() ? e.get<std::string>() : "";
      if (s == "linear_attention") linear[i] = true;
      else if (s != "full_attention")
        r.error("layer_types", fmt::format("entry {} is {}: expected 'linear_attention' or 'full_attention'", i,
                                           json_io::describe_value(e)));
    }
    how = "layer_types";
  } else {
    // Qwen3NextConfig.__post_init__: layer i is linear_attention unless (i + 1) % full_attention_interval == 0.
    const auto interval = r.integer("full_attention_interval").value_or(4);
    for (std::size_t i = 0; i < n; ++i) linear[i] = (static_cast<long long>(i) + 1) % interval != 0;
    how = fmt::format("full_attention_interval = {}{}: every {}th layer full attention", interval,
                      r.has("full_attention_interval") ? "" : " (transformers' default)", interval);
  }
  wl::GatedDeltaNetSpec m;
  auto need = [&](const char* k) -> std::int64_t {
    if (auto v = r.integer(k)) return *v;
    if (!r.has(k)) r.error("", fmt::format("missing '{}' (gated DeltaNet)", k));
    return 0;
  };
  m.key_heads = need("linear_num_key_heads");
  m.value_heads = need("linear_num_value_heads");
  m.key_dim = need("linear_key_head_dim");
  m.value_dim = need("linear_value_head_dim");
  m.conv_kernel = need("linear_conv_kernel_dim");
  if (m.key_heads > 0 && m.value_heads % m.key_heads != 0)
    r.error("linear_num_value_heads", fmt::format("{} value heads are not a multiple of {} key heads (the gated "
                                                  "DeltaNet repeats q and k over the value heads)",
                                                  m.value_heads, m.key_heads));
  a.mixers.assign(n, wl::Mixer::attention);
  std::int64_t count = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (linear[i]) {
      a.mixers[i] = wl::Mixer::gated_deltanet;
      ++count;
    }
  if (count > 0) a.gdn = m;
  assume(fmt::format("{}: {} gated DeltaNet (linear attention) and {} gated full-attention layers, each followed by "
                     "its FFN (transformers' Qwen3NextDecoderLayer); the gated DeltaNet runs its chunked form in "
                     "training and prefill (chunk {}: flash-linear-attention's chunk_gated_delta_rule) and caches a "
                     "state per sequence, in the model dtype (vLLM's default), instead of K and V",
                     how, count, a.layers - count, m.chunk));
  assume("the full-attention layers' q_proj carries the output gate (h x 2·n_q·d; transformers' Qwen3NextAttention)");
}

namespace {

/// GLM-5.x (model_type glm_moe_dsa): which layers run an indexer. transformers' GlmMoeDsaConfig.__post_init__
/// (modular_glm_moe_dsa.py): indexer_types per layer ("full" runs the indexer, "shared" reuses the previous full
/// layer's top-k; GlmMoeDsaAttention builds no GlmMoeDsaIndexer there, so the layer has no indexer weights and caches
/// no indexer keys); absent, index_topk_pattern ("F"/"S" per layer, or a list), else layer i is full when
/// max(i − index_skip_topk_offset + 1, 0) mod index_topk_freq = 0 (defaults: freq 1, offset 2: every layer full).
/// Returns the assumption to list ("" when every layer has its own indexer by default).
std::string read_indexer_sharing(const ObjectReader& r, std::int64_t layers, std::vector<bool>& shared) {
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(layers, 0));
  shared.assign(n, false);
  auto read_list = [&](const char* key, const Json& list, auto&& parse) {
    if (list.size() != n) {
      r.error(key, fmt::format("has {} entries for {} layers", list.size(), layers));
      return;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const Json& e = list[i];
      const std::string v = e.is_string() ? e.get<std::string>() : "";
      const int kind = parse(v);  // 0 full, 1 shared, -1 neither
      if (kind < 0)
        r.error(key, fmt::format("entry {} is {}: expected 'full' or 'shared'", i, json_io::describe_value(e)));
      else
        shared[i] = kind == 1;
    }
  };
  std::string how;
  const Json* types = r.raw("indexer_types");
  const Json* pattern = r.raw("index_topk_pattern");
  if (types != nullptr && types->is_array()) {
    read_list("indexer_types", *types, [](const std::string& v) { return v == "full" ? 0 : v == "shared" ? 1 : -1; });
    how = "indexer_types";
  } else if (pattern != nullptr && pattern->is_string()) {
    const std::string p = pattern->get<std::string>();
    if (p.size() != n) r.error("index_topk_pattern", fmt::format("has {} characters for {} layers", p.size(), layers));
    for (std::size_t i = 0; i < n && i < p.size(); ++i) {
      if (p[i] != 'F' && p[i] != 'S')
        r.error("index_topk_pattern", fmt::format("character {} is '{}': expected 'F' (full) or 'S' (shared)", i, p[i]));
      shared[i] = p[i] == 'S';
    }
    how = "index_topk_pattern";
  } else if (pattern != nullptr && pattern->is_array()) {
    read_list("index_topk_pattern", *pattern,
              [](const std::string& v) { return v == "full" ? 0 : v == "shared" ? 1 : -1; });
    how = "index_topk_pattern";
  } else {
    if (pattern != nullptr && !pattern->is_null())
      r.error("index_topk_pattern", fmt::format("{}: expected a string of 'F'/'S' or a list", json_io::describe_value(*pattern)));
    const std::int64_t freq = std::max<std::int64_t>(r.integer("index_topk_freq").value_or(1), 1);
    const std::int64_t offset = r.integer("index_skip_topk_offset").value_or(2);
    for (std::size_t i = 0; i < n; ++i)
      shared[i] = std::max<std::int64_t>(static_cast<std::int64_t>(i) - offset + 1, 0) % freq != 0;
    if (freq == 1) return "";
    how = fmt::format("index_topk_freq = {}, index_skip_topk_offset = {}{}", freq, offset,
                      r.has("index_skip_topk_offset") ? "" : " (transformers' default)");
  }
  if (!shared.empty() && shared[0])
    r.error(how == "indexer_types" ? "indexer_types" : "index_topk_pattern",
            "layer 0 is 'shared': there is no earlier indexer whose top-k it could read");
  const auto shared_layers = std::count(shared.begin(), shared.end(), true);
  return fmt::format("{}: {} of {} layers run their own indexer; the other {} read the top-k keys of the last layer "
                     "that did and have no indexer weights or indexer key cache (transformers' GlmMoeDsaAttention: "
                     "indexer_types 'shared')",
                     how, layers - shared_layers, layers, shared_layers);
}

}  // namespace

void read_sparse_attention(const ObjectReader& r, wl::TransformerArch& a,
                           const std::function<void(std::string)>& assume) {
  if (!a.mla) {
    r.error("index_topk", "DeepSeek sparse attention needs multi-head latent attention (kv_lora_rank, "
                          "qk_nope_head_dim, qk_rope_head_dim, v_head_dim): the indexer reads the MLA query latent");
    return;
  }
  wl::SparseAttentionSpec x;
  auto need = [&](const char* k) -> std::int64_t {
    if (auto v = r.integer(k)) return *v;
    if (!r.has(k)) r.error("", fmt::format("missing '{}' (DeepSeek sparse attention)", k));
    return 0;
  };
  x.index_heads = need("index_n_heads");
  x.index_head_dim = need("index_head_dim");
  x.topk = need("index_topk");
  std::string sharing;
  if (a.model_type == "glm_moe_dsa") sharing = read_indexer_sharing(r, a.layers, x.shared);
  a.dsa = x;
  assume(fmt::format("DeepSeek sparse attention on every layer: a lightning indexer of {} heads × {} scores every "
                     "past token in FP8 and the MLA attention (MQA mode: the latent and rotary key, {} + {}) reads the "
                     "top {} keys per query; the indexer's keys are cached beside the latent ({} B per token and "
                     "layer: FP8 + fp32 scale)",
                     x.index_heads, x.index_head_dim, a.mla->kv_lora_rank, a.mla->qk_rope_head_dim, x.topk,
                     x.key_cache_bytes()));
  if (!sharing.empty()) assume(sharing);
}

void read_mlp_layer_types(const ObjectReader& r, wl::TransformerArch& a,
                          const std::function<void(std::string)>& assume) {
  // transformers' GlmMoeDsaConfig: mlp_layer_types per layer, "dense" (GlmMoeDsaMLP of intermediate_size) or "sparse"
  // (the MoE block); absent, 3 dense then sparse, which first_k_dense_replace = 3 already says.
  const Json* types = r.raw("mlp_layer_types");
  if (types == nullptr || types->is_null()) return;
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(a.layers, 0));
  if (!types->is_array() || types->size() != n) {
    r.error("mlp_layer_types", fmt::format("{}: expected a list of {} entries ('dense' or 'sparse')",
                                           json_io::describe_value(*types), a.layers));
    return;
  }
  std::vector<bool> moe(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const Json& e = (*types)[i];
    const std::string v = e.is_string() ? e.get<std::string>() : "";
    if (v != "dense" && v != "sparse")
      r.error("mlp_layer_types", fmt::format("entry {} is {}: expected 'dense' or 'sparse'", i,
                                             json_io::describe_value(e)));
    moe[i] = v == "sparse";
  }
  const auto sparse = std::count(moe.begin(), moe.end(), true);
  if (sparse > 0 && !a.moe) {
    r.error("mlp_layer_types", fmt::format("{} layers are 'sparse' but the config describes no experts", sparse));
    return;
  }
  if (a.moe && a.moe_layer != moe)
    assume(fmt::format("mlp_layer_types ({} MoE layers) differs from first_k_dense_replace / moe_layer_freq; "
                       "mlp_layer_types is read (transformers' GlmMoeDsaConfig)", sparse));
  if (a.moe) a.moe_layer = moe;
}

}  // namespace gpuplan::wl_io::detail
