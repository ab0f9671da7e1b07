#include "gpuplan/model/kv_cache.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/graph.hpp"
#include "graph_memo.hpp"
#include "layer_kinds_text.hpp"

namespace gpuplan::model {

KvCacheSize kv_cache_size(const wl::TransformerArch& a, std::int64_t tokens, double bytes_per_element,
                          Explain explain) {
  KvCacheSize k;
  // The attention op of the layer graph says what it caches: 2·n_kv·d, or MLA's latent and rotary key.
  k.elements_per_token_layer = detail::layer_graph(a, LayerKind{})->attention()->cache_elements;
  // DSA's indexer keeps an FP8 key (with its scale) per token beside the latent, whatever the KV dtype.
  // Layers that share another layer's indexer (GLM-5.1) cache no indexer keys.
  const double index_bytes = a.dsa ? a.dsa->key_cache_bytes() : 0.0;
  const double per_layer_token = static_cast<double>(k.elements_per_token_layer) * bytes_per_element;
  const std::int64_t attention_layers = a.attention_layer_count();
  const std::int64_t indexer_layers = a.indexer_layer_count();
  k.index_per_token = units::bytes(index_bytes * static_cast<double>(indexer_layers));
  k.per_token_full = units::bytes(per_layer_token * static_cast<double>(attention_layers)) + k.index_per_token;
  double cached_token_layers = 0.0, indexed_token_layers = 0.0;
  for (std::int64_t l = 0; l < a.layers; ++l) {
    if (a.is_attention_layer(l)) cached_token_layers += static_cast<double>(a.attended_tokens(l, tokens));
    if (a.has_indexer(l)) indexed_token_layers += static_cast<double>(a.attended_tokens(l, tokens));
  }
  const MambaStateBytes state = recurrent_state_bytes(a, 1);
  k.state_per_sequence = state.total() * static_cast<double>(a.recurrent_layer_count());
  k.per_sequence = units::bytes(per_layer_token * cached_token_layers + index_bytes * indexed_token_layers) +
                   k.state_per_sequence;

  if (explain == Explain::on) {
    using units::format;
    using units::format_count;
    const Origin cfg = Origin::model_config(a.source);
    Derivation& d = k.derivation;
    d.id = "kv_cache";
    d.title = "KV cache";
    if (a.mla) {
      d.formula = "per token = L·(r_kv + d_rope)·b ; per sequence = Σ_layers min(s, window_l)·(r_kv + d_rope)·b";
      d.inputs = {{"r_kv", format_count(double(a.mla->kv_lora_rank)), "kv_lora_rank (latent)", cfg},
                  {"d_rope", format_count(double(a.mla->qk_rope_head_dim)), "qk_rope_head_dim (shared rotary key)", cfg}};
      d.notes.push_back("MLA caches the compressed latent and the rotary key, as vLLM and SGLang store it");
    } else {
      d.formula = "per token = 2·L·n_kv·d·b ; per sequence = Σ_layers min(s, window_l)·2·n_kv·d·b";
      d.inputs = {{"n_kv", format_count(double(a.kv_heads)), "KV heads", cfg},
                  {"d", format_count(double(a.head_dim)), "head dim", cfg}};
    }
    d.inputs.push_back({"L", format_count(double(attention_layers)), a.hybrid() ? "attention layers" : "layers", cfg});
    d.inputs.push_back({"b", units::format_number(bytes_per_element), "bytes per cached element", Origin::user("--kv-dtype")});
    if (a.mamba_layer_count() > 0) {
      const auto& m = *a.mamba;
      d.formula += " + L_M·[(d_conv−1)·(n_h·P + 2·n_g·N)·b_conv + n_h·P·N·b_ssm] (Mamba-2 state, any length)";
      d.inputs.push_back({"L_M", format_count(double(a.mamba_layer_count())), "Mamba-2 layers (no KV: a state per sequence)", cfg});
      d.inputs.push_back({"n_h·P·N", format_count(state.ssm_elements), fmt::format("SSM state elements per layer (n_h = {}, P = {}, N = {})", m.heads, m.head_dim, m.state), cfg});
      d.inputs.push_back({"(d_conv−1)·(n_h·P + 2·n_g·N)", format_count(state.conv_elements),
                          fmt::format("conv state elements per layer (d_conv = {}, n_g = {})", m.conv_kernel, m.groups), cfg});
      d.notes.push_back(fmt::format(
          "Mamba-2 state {} per sequence ({} conv in the 16-bit model dtype + {} SSM in {} B per element), as vLLM "
          "allocates it (mamba_cache_dtype / mamba_ssm_cache_dtype 'auto': the model dtype; {}); the KV dtype does not "
          "apply to it",
          format(k.state_per_sequence), format(state.conv * double(a.mamba_layer_count())),
          format(state.ssm * double(a.mamba_layer_count())), units::format_number(m.ssm_state_bytes),
          m.ssm_state_origin));
    }
    if (a.gdn_layer_count() > 0) {
      const auto& m = *a.gdn;
      d.formula += " + L_G·[(d_conv−1)·(2·n_k·d_k + n_v·d_v) + n_v·d_k·d_v]·b_state (gated DeltaNet state, any length)";
      d.inputs.push_back({"L_G", format_count(double(a.gdn_layer_count())),
                          "gated DeltaNet (linear attention) layers: no KV, a state per sequence", cfg});
      d.inputs.push_back({"n_v·d_k·d_v", format_count(state.ssm_elements),
                          fmt::format("recurrent state elements per layer (n_v = {}, d_k = {}, d_v = {})", m.value_heads,
                                      m.key_dim, m.value_dim), cfg});
      d.inputs.push_back({"(d_conv−1)·(2·n_k·d_k + n_v·d_v)", format_count(state.conv_elements),
                          fmt::format("conv state elements per layer (d_conv = {}, n_k = {})", m.conv_kernel, m.key_heads),
                          cfg});
      d.notes.push_back(fmt::format(
          "gated DeltaNet state {} per sequence ({} conv + {} recurrent, {} B per element: the model dtype, as vLLM's "
          "gated_delta_net_state_dtype allocates it with mamba_cache_dtype 'auto'); a decode step reads and writes "
          "it instead of a KV cache; the KV dtype does not apply to it",
          format(k.state_per_sequence), format(state.conv * double(a.gdn_layer_count())),
          format(state.ssm * double(a.gdn_layer_count())), units::format_number(m.state_bytes)));
    }
    if (a.dsa) {
      d.formula += " ; + L_I·(d_i + d_i/128·4) per token (DSA indexer keys, FP8 + fp32 scale)";
      d.inputs.push_back({"L_I", format_count(double(indexer_layers)),
                          indexer_layers < attention_layers
                              ? "layers with an indexer of their own (a shared-indexer layer caches no indexer keys)"
                              : "layers with an indexer (every attention layer)",
                          cfg});
      d.inputs.push_back({"d_i", format_count(double(a.dsa->index_head_dim)), "index_head_dim", cfg});
      d.notes.push_back(fmt::format(
          "DeepSeek sparse attention: beside the latent each indexer layer caches the lightning indexer's key, {} B per token "
          "(FP8 + one fp32 scale per 128: vLLM's DeepseekV32IndexerCache), {} per token in all, whatever --kv-dtype",
          units::format_number(a.dsa->key_cache_bytes()), format(k.index_per_token)));
    }
    d.inputs.push_back({"s", format_count(double(tokens)), "tokens in the sequence", Origin::user("--seq")});
    d.result = fmt::format("{} per token ({}), {} per sequence of {} tokens", format(k.per_token_full),
                           format(k.per_token_full, units::BytePrefix::binary), format(k.per_sequence),
                           format_count(double(tokens)));
    d.set(k.per_token_full.raw(), Unit::bytes);
    if (a.sliding_layer_count() > 0)
      d.notes.push_back(fmt::format("{} of {} layers use a {}-token sliding window", a.sliding_layer_count(), a.layers,
                                    a.sliding_window));
    if (a.chunked_layer_count() > 0)
      d.notes.push_back(fmt::format("{} of {} layers use {}-token chunked attention: each holds at most one chunk",
                                    a.chunked_layer_count(), a.layers, a.attention_chunk));
    if (detail::names_layer_kinds(a)) d.notes.push_back("layer kinds: " + detail::layer_kinds_text(a));
  }
  return k;
}

namespace {
/// The recurrent mixer op (Mamba-2 or gated DeltaNet) of the model's layer graph whose mixer is `mixer`.
Op recurrent_op(const wl::TransformerArch& a, wl::Mixer mixer) {
  LayerKind kind;
  kind.mixer = mixer;
  kind.ffn = false;
  return *detail::layer_graph(a, kind)->ssm();
}
}  // namespace

MambaStateBytes gated_deltanet_state_bytes(const wl::TransformerArch& a, int tp) {
  MambaStateBytes s;
  if (!a.gdn) return s;
  const auto& m = *a.gdn;
  // The gated DeltaNet op of the layer graph: its conv1d's channels and kernel, its value heads n_v, key dim d_k
  // (d_qk) and value dim d_v.
  const Op& o = recurrent_op(a, wl::Mixer::gated_deltanet);
  const double t = double(std::max(1, tp));
  s.conv_elements = double(o.conv_kernel - 1) * double(o.conv_channels) / t;
  s.ssm_elements = double(o.heads) / t * double(o.d_qk) * double(o.d_v);
  s.conv = units::bytes(s.conv_elements * m.state_bytes);
  s.ssm = units::bytes(s.ssm_elements * m.state_bytes);
  return s;
}

MambaStateBytes recurrent_state_bytes(const wl::TransformerArch& a, int tp) {
  return a.gdn_layer_count() > 0 ? gated_deltanet_state_bytes(a, tp) : mamba2_state_bytes(a, tp);
}

MambaStateBytes mamba2_state_bytes(const wl::TransformerArch& a, int tp) {
  MambaStateBytes s;
  if (!a.mamba) return s;
  const auto& m = *a.mamba;
  // The Mamba-2 op of the layer graph: its conv1d's channels (x, B and C: n_h·P + 2·n_g·N) and kernel, its heads n_h,
  // head dim P (d_v), state size N (d_qk) and groups n_g.
  const Op& o = recurrent_op(a, wl::Mixer::mamba2);
  const std::int64_t t = std::max(1, tp);
  // vLLM extra_groups_for_head_shards: groups are replicated up to t when t does not divide them, each copy with
  // its B and C channels.
  const std::int64_t groups = o.groups % t == 0 ? o.groups : o.groups + std::max<std::int64_t>(0, t - o.groups);
  s.conv_elements = double(o.conv_kernel - 1) * double(o.conv_channels + 2 * (groups - o.groups) * o.d_qk) / double(t);
  s.ssm_elements = double(o.heads) / double(t) * double(o.d_v) * double(o.d_qk);
  s.conv = units::bytes(s.conv_elements * 2.0);
  s.ssm = units::bytes(s.ssm_elements * m.ssm_state_bytes);
  return s;
}

}  // namespace gpuplan::model

// ------------------------------------------------------------------------------------------------------------------
// Dtypes, scales, TP/PP division and paged blocks (sources in kv_cache.hpp).
// ------------------------------------------------------------------------------------------------------------------
namespace gpuplan::model {

std::string_view to_string(StoreDtype d) {
  switch (d) {
    case StoreDtype::fp32: return "fp32";
    case StoreDtype::bf16: return "bf16";
    case StoreDtype::fp16: return "fp16";
    case StoreDtype::fp8: return "fp8";
    case StoreDtype::int8: return "int8";
    case StoreDtype::int4: return "int4";
    case StoreDtype::fp4: return "fp4";
  }
  return "?";
}

std::optional<StoreDtype> parse_store_dtype(std::string_view s) {
  for (StoreDtype d : {StoreDtype::fp32, StoreDtype::bf16, StoreDtype::fp16, StoreDtype::fp8, StoreDtype::int8,
                       StoreDtype::int4, StoreDtype::fp4})
    if (s == to_string(d)) return d;
  return std::nullopt;
}

double element_bytes(StoreDtype d) {
  switch (d) {
    case StoreDtype::fp32: return 4.0;
    case StoreDtype::bf16:
    case StoreDtype::fp16: return 2.0;
    case StoreDtype::fp8:
    case StoreDtype::int8: return 1.0;
    case StoreDtype::int4:
    case StoreDtype::fp4: return 0.5;
  }
  return 2.0;
}

bool is_quantized(StoreDtype d) {
  return d == StoreDtype::fp8 || d == StoreDtype::int8 || d == StoreDtype::int4 || d == StoreDtype::fp4;
}

std::string_view to_string(KvScaleGranularity g) {
  switch (g) {
    case KvScaleGranularity::none: return "none";
    case KvScaleGranularity::per_tensor: return "per-tensor";
    case KvScaleGranularity::per_head: return "per-head";
    case KvScaleGranularity::per_token_head: return "per-token-head";
  }
  return "?";
}

std::optional<KvScaleGranularity> parse_kv_scale_granularity(std::string_view s) {
  for (auto g : {KvScaleGranularity::none, KvScaleGranularity::per_tensor, KvScaleGranularity::per_head,
                 KvScaleGranularity::per_token_head})
    if (s == to_string(g)) return g;
  return std::nullopt;
}

KvQuant default_kv_quant(StoreDtype d) {
  KvQuant q;
  q.dtype = d;
  switch (d) {
    case StoreDtype::fp32:
    case StoreDtype::bf16:
    case StoreDtype::fp16:
      q.origin = "unquantized: no scales";
      break;
    case StoreDtype::fp8:
      q.scales = KvScaleGranularity::per_tensor;
      q.scale_bytes = 4.0;  // one fp32 k_scale and v_scale per layer: nothing per token
      q.origin = "vLLM quantized KV cache docs: FP8 with per-tensor (k/v_scale = [1]) or per-attention-head scales "
                 "(docs.vllm.ai/en/latest/features/quantization/quantized_kvcache)";
      break;
    case StoreDtype::int8:
    case StoreDtype::int4:
    case StoreDtype::fp4:  // the CLI does not offer fp4 KV; priced like int4 (4 bits + per-token-head scales)
      q.scales = KvScaleGranularity::per_token_head;
      q.scale_bytes = 4.0;  // fp16 scale + fp16 zero point
      q.origin = "LMDeploy int8/int4 KV: asymmetric, per head per token (lmdeploy.readthedocs.io quantization/"
                 "kv_quant.html); scale and zero point assumed stored as fp16 (2 + 2 B)";
      break;
  }
  return q;
}

KvTokenBytes kv_token_bytes(const wl::TransformerArch& a, const KvQuant& kv, int tp, Explain explain) {
  KvTokenBytes k;
  k.tp = std::max(1, tp);
  k.mla = a.mla.has_value();
  const double eb = element_bytes(kv.dtype);
  const bool per_token_scales = kv.scales == KvScaleGranularity::per_token_head && is_quantized(kv.dtype);
  double groups_per_layer_gpu = 0.0, groups_per_layer_model = 0.0;  // per-token scale groups
  double elements_model = 0.0;
  // The attention op of the layer graph says what a layer caches per token, whole-model (cache_elements): MLA's
  // latent and rotary key, or K and V of n_kv heads.
  const Op attn = attention_or_reference(a, *detail::layer_graph(a, LayerKind{}));
  if (k.mla) {
    k.kv_heads_total = 1;
    k.kv_heads_per_gpu = 1;
    k.replication = k.tp;
    k.elements_per_layer = double(attn.cache_elements);
    elements_model = k.elements_per_layer;
    groups_per_layer_gpu = groups_per_layer_model = 1.0;  // K and V are the same latent buffer
  } else {
    const std::int64_t nkv = std::max<std::int64_t>(1, attn.kv_heads);
    k.kv_heads_total = double(nkv);
    k.kv_heads_per_gpu = double(std::max<std::int64_t>(1, nkv / k.tp));
    k.replication = k.tp > nkv ? static_cast<int>(k.tp / nkv) : 1;
    // K and V of one head: the cached elements over the KV heads (2·d).
    const std::int64_t per_head = attn.kv_heads > 0 ? attn.cache_elements / attn.kv_heads : attn.d_qk + attn.d_v;
    k.elements_per_layer = double(per_head) * k.kv_heads_per_gpu;
    elements_model = double(per_head) * double(nkv);
    groups_per_layer_gpu = 2.0 * k.kv_heads_per_gpu;
    groups_per_layer_model = 2.0 * double(nkv);
  }
  k.element_bytes_per_layer = units::bytes(k.elements_per_layer * eb);
  k.scale_bytes_per_layer = units::bytes(per_token_scales ? groups_per_layer_gpu * kv.scale_bytes : 0.0);
  // The indexer keys averaged over the attention layers: all of them have one, or (GLM-5.1's shared indexers) L_I of
  // L_A; the per-layer bytes times the layers give the model's total either way.
  const double indexer_share = a.attention_layer_count() > 0 ? double(a.indexer_layer_count()) /
                                                                   double(a.attention_layer_count())
                                                             : 0.0;
  k.index_per_layer = units::bytes(a.dsa ? a.dsa->key_cache_bytes() * indexer_share : 0.0);
  k.per_layer = k.element_bytes_per_layer + k.scale_bytes_per_layer + k.index_per_layer;
  k.per_token_model =
      units::bytes((elements_model * eb + (per_token_scales ? groups_per_layer_model * kv.scale_bytes : 0.0) +
                    k.index_per_layer.raw()) *
                   double(a.attention_layer_count()));
  k.state_per_layer = recurrent_state_bytes(a, k.tp).total();

  if (explain == Explain::on) {
    using units::format;
    using units::format_count;
    const Origin cfg = Origin::model_config(a.source);
    Derivation& d = k.derivation;
    d.id = "kv.token";
    d.title = "KV bytes per token per layer on one GPU";
    if (k.mla) {
      d.formula = "per layer per GPU = (r_kv + d_rope)·b + s_tok ; the latent is replicated on all t TP ranks";
      d.inputs = {{"r_kv", format_count(double(a.mla->kv_lora_rank)), "kv_lora_rank (latent)", cfg},
                  {"d_rope", format_count(double(a.mla->qk_rope_head_dim)), "qk_rope_head_dim (shared rotary key)", cfg}};
      d.notes.push_back("MLA caches the latent c_KV and the decoupled rotary key (DeepSeek-V2, arXiv:2405.04434 §2.1)");
      d.notes.push_back("vLLM counts MLA as one KV head that every TP rank stores whole (vllm/config/model.py "
                        "get_num_kv_heads: \"When using MLA during decode it becomes MQA\"): TP does not divide it");
    } else {
      d.formula = "heads_gpu = max(1, n_kv / t) ; per layer per GPU = 2·heads_gpu·d·b + 2·heads_gpu·s_tok";
      d.inputs = {{"n_kv", format_count(k.kv_heads_total), "KV heads", cfg},
                  {"d", format_count(double(a.head_dim)), "head dim", cfg}};
      if (k.replication > 1)
        d.notes.push_back(fmt::format("TP {} > {} KV heads: each head is replicated on {} ranks, so the KV per GPU "
                                      "stops falling at TP {} (vllm/config/model.py get_num_kv_heads)",
                                      k.tp, a.kv_heads, k.replication, a.kv_heads));
    }
    d.inputs.push_back({"t", std::to_string(k.tp), "tensor-parallel ranks", Origin::user("--tp")});
    d.inputs.push_back({"b", units::format_number(eb), fmt::format("bytes per {} element", to_string(kv.dtype)),
                        Origin::user("--kv-dtype")});
    d.inputs.push_back({"s_tok", units::format_number(per_token_scales ? kv.scale_bytes : 0.0),
                        fmt::format("scale bytes per token per head ({} scales)", to_string(kv.scales)),
                        Origin::assumption(kv.origin)});
    d.result = fmt::format("{} per token per layer per GPU ({} elements + {} scales); {} per token for the whole "
                           "model ({})",
                           format(k.per_layer), format(k.element_bytes_per_layer), format(k.scale_bytes_per_layer),
                           format(k.per_token_model), format(k.per_token_model, units::BytePrefix::binary));
    d.set(k.per_layer.raw(), Unit::bytes);
    if (is_quantized(kv.dtype) && !per_token_scales)
      d.notes.push_back(fmt::format("{} scales are a few numbers per layer: no bytes per token", to_string(kv.scales)));
    if (a.dsa)
      d.notes.push_back(fmt::format("DeepSeek sparse attention: + {} B per token per layer of the indexer's FP8 keys "
                                    "(with their fp32 scale: vLLM's DeepseekV32IndexerCache), in the per-layer bytes{}",
                                    units::format_number(k.index_per_layer.raw()),
                                    a.indexer_layer_count() < a.attention_layer_count()
                                        ? fmt::format(" (averaged: {} of {} layers have an indexer, {} B each)",
                                                      a.indexer_layer_count(), a.attention_layer_count(),
                                                      units::format_number(a.dsa->key_cache_bytes()))
                                        : std::string()));
    if (a.gdn_layer_count() > 0)
      d.notes.push_back(fmt::format(
          "layer kinds: {} gated attention layers cache K and V per token; {} gated DeltaNet (linear attention) layers "
          "hold a state of {} per sequence per GPU whatever its length ((d_conv − 1)·(2·n_k·d_k + n_v·d_v)/t conv "
          "elements + (n_v/t)·d_k·d_v recurrent elements in the model dtype: vLLM's "
          "MambaStateShapeCalculator.gated_delta_net_state_shape)",
          a.attention_layer_count(), a.gdn_layer_count(), format(k.state_per_layer)));
    else if (a.hybrid())
      d.notes.push_back(fmt::format(
          "layer kinds: {} attention layers cache K and V per token; {} Mamba-2 layers hold a state of {} per "
          "sequence per GPU whatever its length ((d_conv − 1)·(n_h·P + 2·n_g·N)/t conv elements in the model dtype + "
          "(n_h/t)·P·N SSM elements in mamba_ssm_cache_dtype: vLLM's MambaStateShapeCalculator / "
          "MambaStateDtypeCalculator); the other {} layers cache nothing",
          a.attention_layer_count(), a.mamba_layer_count(), format(k.state_per_layer),
          a.layers - a.attention_layer_count() - a.mamba_layer_count()));
    if (detail::names_layer_kinds(a))
      d.notes.push_back("layer kinds (a local layer holds at most its window or chunk): " + detail::layer_kinds_text(a));
  }
  return k;
}

std::vector<StageLayers> pipeline_stages(const wl::TransformerArch& a, int pp) {
  const std::int64_t L = std::max<std::int64_t>(0, a.layers);
  const std::int64_t p = std::clamp<std::int64_t>(pp, 1, std::max<std::int64_t>(1, L));
  std::vector<std::int64_t> counts(static_cast<std::size_t>(p), L / p);
  // vLLM get_pp_indices: `for i in range(2, remaining_layers + 2): partitions[-i] += 1`.
  for (std::int64_t i = 2; i < L % p + 2; ++i) counts[static_cast<std::size_t>(p - i)] += 1;
  std::vector<StageLayers> stages;
  std::int64_t first = 0;
  for (std::int64_t s = 0; s < p; ++s) {
    StageLayers st;
    st.stage = static_cast<int>(s);
    st.first = first;
    st.count = counts[static_cast<std::size_t>(s)];
    for (std::int64_t l = first; l < first + st.count; ++l) {
      if (a.is_local_layer(l)) ++st.sliding;
      if (a.has_ffn(l) && a.is_moe_layer(l)) ++st.moe;
      if (a.is_recurrent_layer(l)) ++st.stateful;
      if (!a.is_attention_layer(l)) ++st.uncached;
    }
    st.first_stage = s == 0;
    st.last_stage = s == p - 1;
    first += st.count;
    stages.push_back(st);
  }
  return stages;
}

std::int64_t kv_blocks(std::int64_t tokens, std::int64_t block_size, std::int64_t window, bool chunked) {
  if (tokens <= 0) return 0;
  const std::int64_t B = std::max<std::int64_t>(1, block_size);
  const std::int64_t full = (tokens + B - 1) / B;
  if (window <= 0) return full;
  const std::int64_t capped = chunked ? (window + B - 1) / B + (window % B != 0 ? 1 : 0)
                              : B == 1 ? window
                                       : (window - 1 + B - 1) / B + 1;
  return std::min(full, capped);
}

SequenceKv sequence_kv(const wl::TransformerArch& a, const StageLayers& st, const KvTokenBytes& token,
                       std::int64_t tokens, std::int64_t block_size, std::int64_t prefix_tokens) {
  SequenceKv q;
  q.tokens = std::max<std::int64_t>(0, tokens);
  q.block_size = std::max<std::int64_t>(1, block_size);
  q.prefix_tokens = std::clamp<std::int64_t>(prefix_tokens, 0, q.tokens);
  const double B = double(q.block_size);
  const double per_layer = token.per_layer.raw();
  const double full = double(st.full()), sliding = double(st.sliding);
  const std::int64_t W = a.local_span();  // the sliding window, or the chunk
  const double full_blocks = double(kv_blocks(q.tokens, q.block_size));
  const double sliding_blocks = double(kv_blocks(q.tokens, q.block_size, W, a.local_is_chunked()));
  const double sliding_exact = double(std::min(q.tokens, W > 0 ? W : q.tokens));
  q.state = token.state_per_layer * double(st.stateful);
  q.exact = units::bytes(per_layer * (full * double(q.tokens) + sliding * sliding_exact)) + q.state;
  q.per_sequence = units::bytes(per_layer * B * (full * full_blocks + sliding * sliding_blocks)) + q.state;
  q.block_waste = q.per_sequence - q.exact;
  q.expected_block_waste = units::bytes(per_layer * (B - 1.0) / 2.0 * (full + sliding));
  q.shared_prefix_blocks = q.prefix_tokens / q.block_size;
  q.shared_prefix = units::bytes(per_layer * B * full * double(q.shared_prefix_blocks));
  q.unique = q.per_sequence - q.shared_prefix;
  return q;
}

}  // namespace gpuplan::model
