#include "gpuplan/model/kv_cache.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::model {

KvCacheSize kv_cache_size(const wl::TransformerArch& a, std::int64_t tokens, double bytes_per_element,
                          Explain explain) {
  KvCacheSize k;
  k.elements_per_token_layer =
      a.mla ? a.mla->kv_lora_rank + a.mla->qk_rope_head_dim : 2 * a.kv_heads * a.head_dim;
  const double per_layer_token = static_cast<double>(k.elements_per_token_layer) * bytes_per_element;
  k.per_token_full = units::bytes(per_layer_token * static_cast<double>(a.layers));
  double cached_token_layers = 0.0;
  for (std::int64_t l = 0; l < a.layers; ++l) {
    const bool sliding = static_cast<std::size_t>(l) < a.attention.size() &&
                         a.attention[static_cast<std::size_t>(l)] == wl::AttentionSpan::sliding && a.sliding_window > 0;
    cached_token_layers += static_cast<double>(sliding ? std::min(tokens, a.sliding_window) : tokens);
  }
  k.per_sequence = units::bytes(per_layer_token * cached_token_layers);

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
    d.inputs.push_back({"L", format_count(double(a.layers)), "layers", cfg});
    d.inputs.push_back({"b", units::format_number(bytes_per_element), "bytes per cached element", Origin::user("--kv-dtype")});
    d.inputs.push_back({"s", format_count(double(tokens)), "tokens in the sequence", Origin::user("--seq")});
    d.result = fmt::format("{} per token ({}), {} per sequence of {} tokens", format(k.per_token_full),
                           format(k.per_token_full, units::BytePrefix::binary), format(k.per_sequence),
                           format_count(double(tokens)));
    if (a.sliding_layer_count() > 0)
      d.notes.push_back(fmt::format("{} of {} layers use a {}-token sliding window", a.sliding_layer_count(), a.layers,
                                    a.sliding_window));
  }
  return k;
}

}  // namespace gpuplan::model
