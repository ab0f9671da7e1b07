// The Hugging Face importer's readers of the layer kinds (hf_config_stages.hpp), run by import_hf_config after the
// sizes and the model family: the routed experts and which layers are MoE, multi-head latent attention, Nemotron-H's
// layer pattern with its Mamba-2 mixer, and the attention span of each layer.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hf_config_stages.hpp"
#include "hf_sequence_mixers.hpp"

namespace gpuplan::wl_io::detail {

using json_io::Json;

void read_hf_moe(const HfRead& in, wl::TransformerArch& a, bool llama4, bool nemotron_h) {
  const json_io::ObjectReader& r = in.r;
  const std::string& model_type = in.model_type;
  const auto& assume = in.assume;
  auto need = [&](std::initializer_list<const char*> keys, const char* what) { return in.need(keys, what); };
  auto opt = [&](std::initializer_list<const char*> keys) { return in.opt(keys); };
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
}

/// Multi-head latent attention needs its four sizes; q_lora_rank is optional (null or absent: the query is not
/// compressed, as in DeepSeek-V2-Lite). Any of the five keys without the four is an error: read as plain multi-head
/// attention the KV cache would come out ~25x too large (DeepSeek-V3: 128 heads x 2 x 56 = 14,336 elements per
/// token and layer instead of 512 + 64 = 576).
void read_hf_mla(const HfRead& in, wl::TransformerArch& a) {
  const json_io::ObjectReader& r = in.r;
  const Json* config = &in.config;
  auto opt = [&](std::initializer_list<const char*> keys) { return in.opt(keys); };
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
}

/// transformers' NemotronHConfig (configuration_nemotron_h.py, _pattern_to_list): hybrid_override_pattern has one
/// character per layer, M a Mamba-2 mixer, * attention, - an MLP, E an MoE; layers_block_type says the same as a
/// list (mamba / attention / mlp / moe, or linear_attention / full_attention / mlp / moe). Each layer is one block:
/// a mixer without FFN, or an FFN without mixer.
void read_nemotron_h_layers(const HfRead& in, wl::TransformerArch& a) {
  const json_io::ObjectReader& r = in.r;
  const std::string& file = in.file;
  Diagnostics& diags = in.diags;
  const auto& assume = in.assume;
  auto need = [&](std::initializer_list<const char*> keys, const char* what) { return in.need(keys, what); };
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

/// layer_types, when given, says it per layer. Otherwise transformers derives it from sliding_window by a rule of
/// the model type (its config's __post_init__, data/hf/model_type_defaults.json): Gemma 2 and GPT-OSS alternate,
/// Gemma 3 makes every sliding_window_pattern-th layer global, Qwen slides from max_window_layers on when
/// use_sliding_window, Mistral slides everywhere.
void read_attention_spans(const HfRead& in, wl::TransformerArch& a, const HfModelTypeRules* type_rules, bool llama4) {
  const json_io::ObjectReader& r = in.r;
  const Json* config = &in.config;
  const std::string& model_type = in.model_type;
  const std::string& file = in.file;
  Diagnostics& diags = in.diags;
  const auto& assume = in.assume;
  auto opt = [&](std::initializer_list<const char*> keys) { return in.opt(keys); };
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
}

}  // namespace gpuplan::wl_io::detail
