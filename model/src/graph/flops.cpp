#include "gpuplan/model/flops.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/params.hpp"
#include "graph_memo.hpp"

namespace gpuplan::model {

double ssd_scan_flops_per_token(std::int64_t heads, std::int64_t head_dim, std::int64_t state, std::int64_t groups,
                                std::int64_t chunk, std::int64_t tokens) {
  const double Q = double(std::max<std::int64_t>(1, std::min(chunk, tokens)));
  const double P = double(head_dim), N = double(state);
  return double(heads) * (2.0 * Q * P + 4.0 * N * P) + double(groups) * 2.0 * Q * N;
}

double gated_delta_flops_per_token(std::int64_t heads, std::int64_t key_dim, std::int64_t value_dim,
                                   std::int64_t chunk, std::int64_t tokens) {
  const double C = double(std::max<std::int64_t>(1, std::min(chunk, tokens)));
  const double K = double(key_dim), V = double(value_dim);
  return double(heads) * (2.0 * C * (3.0 * K + 2.0 * V) + 6.0 * K * V + 2.0 * C * C / 3.0);
}

FlopsPerToken flops_per_token(const wl::TransformerArch& a, std::int64_t context, Explain explain) {
  FlopsPerToken f;
  const ParameterCounts p = parameter_counts(a, Explain::off);
  Terms tr(explain, f.derivation);  // the matmul and attention terms, recorded as they are computed

  // Weights in matmuls per token, a fold over the op graph: attention matrices, FFN matrices (dense, the top-k
  // routed experts, shared), router, and the LM head (a matmul whether tied or not).
  f.matmul_params = detail::head_graph(a)->matmul_per_token();
  const detail::GraphRef dense_layer = detail::layer_graph(a, LayerKind{false, false});
  double ssm = 0.0;
  for_each_layer_kind(a, [&](LayerKind kind, std::int64_t count) {
    const bool plain = kind.mixer == wl::Mixer::attention && kind.ffn && !kind.moe && !kind.shared_index;
    // A plain kind (global or local) folds as the dense layer: the same matmuls, no SSM.
    const detail::GraphRef g = detail::layer_graph(a, plain ? LayerKind{false, false} : kind);
    f.matmul_params += count * g->matmul_per_token();
    if (const Op* s = g->ssm())
      ssm += double(count) * (s->delta_rule
                                  ? gated_delta_flops_per_token(s->heads, s->d_qk, s->d_v, s->chunk, context)
                                  : ssd_scan_flops_per_token(s->heads, s->d_v, s->d_qk, s->groups, s->chunk, context));
  });
  f.ssm_forward = units::flop(ssm);
  f.matmul_forward = units::flop(tr.let("flops_per_token.matmul", "Matmul FLOPs", "2·N_matmul",
                                        2.0 * static_cast<double>(f.matmul_params), Unit::flop));

  const Op& attn = *dense_layer->attention();
  const std::int64_t dqk = attn.d_qk, dv = attn.d_v;
  double att = 0.0, idx = 0.0;
  const Op* indexer = dense_layer->indexer();
  for (std::int64_t l = 0; l < a.layers; ++l) {
    if (!a.is_attention_layer(l)) continue;
    const std::int64_t c = a.attention_keys(l, context);
    att += 2.0 * static_cast<double>(attn.heads) * static_cast<double>(dqk + dv) * static_cast<double>(c);
    if (indexer && a.has_indexer(l))
      idx += 2.0 * double(indexer->heads) * double(indexer->d_qk) * double(a.attended_tokens(l, context));
  }
  f.attention_forward = units::flop(tr.let("flops_per_token.attention", "Attention FLOPs",
                                           "Σ_layers 2·n_q·(d_qk + d_v)·c_l", att, Unit::flop));
  f.indexer_forward = units::flop(idx);
  f.forward = f.matmul_forward + f.attention_forward + f.ssm_forward + f.indexer_forward;
  f.training = 3.0 * f.forward;

  if (explain == Explain::on) {
    using units::format;
    using units::format_count;
    const Origin cfg = Origin::model_config(a.source);
    Derivation& d = f.derivation;
    d.id = "flops_per_token";
    d.title = "FLOPs per token";
    d.formula = "forward = 2·N_matmul + Σ_layers 2·n_q·(d_qk + d_v)·c_l ; training = 3·forward";
    d.inputs = {{"N_matmul", format_count(double(f.matmul_params)), "weights in matmuls per token (LM head included)",
                 Origin::derived("params")},
                {"c", format_count(double(context)), "context attended to", Origin::user("--seq")},
                {"n_q", format_count(double(a.heads)), "query heads", cfg},
                {"d_qk", format_count(double(dqk)), "query/key head dim", cfg},
                {"d_v", format_count(double(dv)), "value head dim", cfg}};
    d.result = fmt::format("{} forward, {} training", format(f.forward), format(f.training));
    // forward = matmul + attention (+ SSM scan + indexer, which have no node of their own: their notes carry them).
    d.set(f.forward.raw(), Unit::flop,
          f.ssm_forward.raw() == 0.0 && f.indexer_forward.raw() == 0.0 ? Fold::sum : Fold::none);
    d.notes.push_back("attention counted over the full context for every token (no causal halving), as Megatron-LM "
                      "and PaLM MFU tables count it");
    if (a.sliding_layer_count() > 0)
      d.notes.push_back(fmt::format("{} sliding-window layers attend to min(c, {})", a.sliding_layer_count(),
                                    a.sliding_window));
    if (a.chunked_layer_count() > 0)
      d.notes.push_back(fmt::format("{} chunked-attention layers attend to min(c, {}) (at most their chunk)",
                                    a.chunked_layer_count(), a.attention_chunk));
    if (a.mamba_layer_count() > 0) {
      const auto& m = *a.mamba;
      d.formula += " ; + Σ_Mamba-2 layers n_h·(2·Q·P + 4·N·P) + n_g·2·Q·N (SSD scan)";
      d.notes.push_back(fmt::format("{} Mamba-2 layers: SSD scan (arXiv:2405.21060 §6) with n_h = {}, P = {}, N = {}, "
                                    "n_g = {}, chunk Q = min(c, {}): {} per token; {} attention layers",
                                    a.mamba_layer_count(), m.heads, m.head_dim, m.state, m.groups, m.chunk,
                                    format(f.ssm_forward), a.attention_layer_count()));
    }
    if (a.gdn_layer_count() > 0) {
      const auto& m = *a.gdn;
      d.formula += " ; + Σ_gated-DeltaNet layers n_v·(2·C·(3·d_k + 2·d_v) + 6·d_k·d_v + 2·C²/3) (chunked gated delta rule)";
      d.notes.push_back(fmt::format(
          "{} gated DeltaNet layers (linear attention, arXiv:2412.06464): chunked gated delta rule over n_v = {} value "
          "heads, d_k = {}, d_v = {}, chunk C = min(c, {}): {} per token in all; no KV, a state per sequence; {} "
          "attention layers",
          a.gdn_layer_count(), m.value_heads, m.key_dim, m.value_dim, m.chunk, format(f.ssm_forward),
          a.attention_layer_count()));
    }
    if (indexer) {
      d.formula += " ; + Σ_indexer layers 2·n_i·d_i·c (DSA lightning indexer, FP8) ; attention over min(c, top-k) keys";
      d.inputs.push_back({"n_i", format_count(double(indexer->heads)), "index_n_heads", cfg});
      d.inputs.push_back({"d_i", format_count(double(indexer->d_qk)), "index_head_dim", cfg});
      d.inputs.push_back({"top-k", format_count(double(indexer->topk)), "index_topk (keys the main attention reads)", cfg});
      d.notes.push_back(fmt::format(
          "DeepSeek sparse attention: the indexer scores all {} tokens of the context ({} per token, FP8), the MLA "
          "attention reads min(c, {}) selected keys",
          format_count(double(context)), format(f.indexer_forward), indexer->topk));
      if (a.indexer_layer_count() < a.attention_layer_count())
        d.notes.push_back(fmt::format(
            "{} of {} attention layers run an indexer; the other {} read the top-k of the last one that did (shared "
            "indexer: transformers' GlmMoeDsaConfig.indexer_types)",
            a.indexer_layer_count(), a.attention_layer_count(), a.attention_layer_count() - a.indexer_layer_count()));
    }
    d.notes.push_back(fmt::format("6·N_active = {} for comparison", format(units::flop(6.0 * double(p.active)))));
  }
  return f;
}

}  // namespace gpuplan::model
