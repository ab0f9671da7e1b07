// The layers each pipeline stage holds and what they weigh (memory_core.hpp): whether the layout splits the layers
// over the stages and chunks, the one assignment of layers to chunks (chunk_layers), each stage's shape (layers by
// kind and their parameters), the parameters of one layer and one norm, and the saved-tensor sums of each layer kind.
// The memory model, the step model and the search all read the stages from here.
#include "gpuplan/model/memory.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "memory_core.hpp"
#include "graph_memo.hpp"

namespace gpuplan::model {
namespace detail {

namespace {
/// A layer graph's weights: the routed experts (split over EP) apart from the rest (replicated over EP).
LayerParams split_layer_weights(const OpGraph& g) {
  LayerParams lp;
  lp.expert = double(g.parameters(Part::routed_experts));
  lp.dense = double(g.parameters()) - lp.expert;
  return lp;
}
}  // namespace

LayerParams layer_params(const wl::TransformerArch& a, LayerKind k) {
  return split_layer_weights(*detail::layer_graph(a, k));
}

bool chunk_split_ok(const wl::TransformerArch& a, const wl::TrainingPlan& plan, std::string* why) {
  const int p = std::max(1, plan.par.pp);
  const int v = plan.model_chunks();
  const std::int64_t C = std::int64_t(p) * v, L = a.layers;
  const wl::PipelineSplit& sp = plan.split;
  // The message is built only when asked for (the search's inner loop calls this for every layout).
  auto fail = [&](auto&& message) {
    if (why != nullptr) *why = message();
    return false;
  };
  const int ways = int(!sp.chunk_layers.empty()) + int(sp.first_last()) + int(sp.accounts());
  if (ways > 1)
    return fail([] {
      return std::string("the pipeline layout, the first/last stage layer counts and the embedding/loss accounting "
                         "are three ways to split the layers: give one (Megatron-Core refuses mixes)");
    });
  if (!sp.chunk_layers.empty()) {
    if (std::int64_t(sp.chunk_layers.size()) != C)
      return fail([&] {
        return fmt::format("the pipeline layout has {} chunks, but PP {} × {} chunks per stage = {}",
                           sp.chunk_layers.size(), p, v, C);
      });
    std::int64_t sum = 0;
    for (std::int64_t n : sp.chunk_layers) sum += n;
    if (sum != L)
      return fail([&] { return fmt::format("the pipeline layout holds {} decoder layers, the model has {}", sum, L); });
    return true;
  }
  if (sp.first_last()) {
    if (p < 2) return fail([] { return std::string("first/last pipeline stage layer counts need PP ≥ 2"); });
    const std::int64_t f = sp.first_stage_layers, l = sp.last_stage_layers;
    for (const auto& stage : {std::pair{f, "first"}, std::pair{l, "last"}}) {
      // Plain locals, not a structured binding: Clang 14 (Debian 12) cannot capture bindings in a lambda.
      const std::int64_t n = stage.first;
      const char* const name = stage.second;
      if (n > 0 && n % v != 0)
        return fail([&] {
          return fmt::format("the {} stage's {} layers do not split over its {} chunks (Megatron-Core: 'must be "
                             "divisible by virtual pipeline parallel degree')",
                             name, n, v);
        });
    }
    const std::int64_t mid_stages = p - (f > 0 ? 1 : 0) - (l > 0 ? 1 : 0), mid_layers = L - f - l;
    if (mid_layers < 0)
      return fail([&] { return fmt::format("the first and last stages' {} layers exceed the model's {}", f + l, L); });
    if ((mid_layers != 0) != (mid_stages != 0))
      return fail([&] {
        return fmt::format("{} middle layers remain for {} middle pipeline stages (Megatron-Core: either both or "
                           "neither)",
                           mid_layers, mid_stages);
      });
    if (mid_stages > 0 && mid_layers % mid_stages != 0)
      return fail([&] {
        return fmt::format("the {} middle layers do not split evenly over the {} middle pipeline stages", mid_layers,
                           mid_stages);
      });
    if (mid_stages > 0 && (mid_layers / mid_stages) % v != 0)
      return fail([&] {
        return fmt::format("each middle stage's {} layers do not split over its {} chunks", mid_layers / mid_stages, v);
      });
    return true;
  }
  if (sp.accounts()) {
    const std::int64_t e = sp.embedding_as_layer ? 1 : 0, o = sp.loss_as_layer ? 1 : 0, N = L + e + o;
    if (N % p != 0)
      return fail([&] {
        return fmt::format("{} layers{}{} do not split evenly over PP {} (Megatron-LM: 'Number of layers should be "
                           "divisible by the pipeline-model-parallel size')",
                           N, e ? " with the embedding" : "", o ? (e ? " and the loss" : " with the loss") : "", p);
      });
    if ((N / p) % v != 0)
      return fail([&] {
        return fmt::format("each stage's {} layers (with the embedding/loss counted) do not split over its {} chunks",
                           N / p, v);
      });
    const std::int64_t c = N / C;
    if (c - e < 0 || c - o < 0 || (C == 1 && c - e - o < 0))
      return fail([] {
        return std::string("not enough layers for the embedding's or the loss's chunk (Megatron-Core: 'Not enough "
                           "layers in the first virtual pipeline stage')");
      });
    return true;
  }
  if (L < p) return fail([&] { return fmt::format("PP {} exceeds the {} layers", p, L); });
  if (v > 1 && L % C != 0)
    return fail([&] {
      return fmt::format("{} layers do not split evenly into PP {} × {} chunks (the interleaved schedule needs equal "
                         "chunks: give an uneven split with the embedding/loss accounting, first/last stage layer "
                         "counts or a pipeline layout)",
                         L, p, v);
    });
  return true;
}

std::vector<std::int64_t> chunk_layers(const wl::TransformerArch& a, const wl::TrainingPlan& plan, std::string* why) {
  if (!chunk_split_ok(a, plan, why)) return {};
  const int p = std::max(1, plan.par.pp);
  const int v = plan.model_chunks();
  const std::int64_t C = std::int64_t(p) * v, L = a.layers;
  const wl::PipelineSplit& sp = plan.split;
  if (!sp.chunk_layers.empty()) return sp.chunk_layers;
  std::vector<std::int64_t> out(static_cast<std::size_t>(C), 0);
  if (sp.first_last()) {
    const std::int64_t f = sp.first_stage_layers, l = sp.last_stage_layers;
    const std::int64_t mid_stages = p - (f > 0 ? 1 : 0) - (l > 0 ? 1 : 0);
    const std::int64_t per = mid_stages > 0 ? (L - f - l) / mid_stages : 0;
    for (int i = 0; i < p; ++i) {
      const std::int64_t n = i == 0 && f > 0 ? f : i == p - 1 && l > 0 ? l : per;
      for (int k = 0; k < v; ++k) out[std::size_t(std::int64_t(k) * p + i)] = n / v;
    }
    return out;
  }
  if (sp.accounts()) {
    const std::int64_t e = sp.embedding_as_layer ? 1 : 0, o = sp.loss_as_layer ? 1 : 0;
    const std::int64_t c = (L + e + o) / C;
    for (auto& n : out) n = c;
    out.front() -= e;
    out.back() -= o;
    return out;
  }
  const std::int64_t base = L / C, rem = L % C;
  for (std::int64_t j = 0; j < C; ++j) out[std::size_t(j)] = base + (j < rem ? 1 : 0);
  return out;
}

namespace {
/// StageShape::like_prev of every stage: what compose_step may take over from the stage before it.
void mark_alike(std::vector<StageShape>& st) {
  for (std::size_t i = 1; i < st.size(); ++i) {
    const StageShape& a = st[i - 1];
    StageShape& b = st[i];
    const bool body = a.chunks == 1 && b.chunks == 1 && a.layers == b.layers && a.moe_layers == b.moe_layers &&
                      a.recomputed == b.recomputed && a.kind_layers == b.kind_layers;
    if (!body) continue;
    b.like_prev = a.first == b.first && a.last == b.last && a.mtp == b.mtp ? StageShape::Like::all
                                                                            : StageShape::Like::body;
  }
}
}  // namespace

std::vector<StageShape> stage_shapes(const wl::TransformerArch& a, const ParameterCounts& params,
                                     const wl::TrainingPlan& plan) {
  return stage_shapes(a, layer_kinds(a, params), params, plan);
}

std::vector<StageShape> stage_shapes(const wl::TransformerArch& a, const LayerKinds& kinds,
                                     const ParameterCounts& params, const wl::TrainingPlan& plan) {
  const int p = std::max(1, plan.par.pp);
  const int v = plan.model_chunks();
  std::vector<std::int64_t> chunks = chunk_layers(a, plan, nullptr);
  if (chunks.empty()) {
    wl::TrainingPlan even = plan;
    even.split = wl::PipelineSplit{};
    chunks = chunk_layers(a, even, nullptr);
    if (chunks.empty()) {  // not even the default split (more stages than layers): one layer per chunk, in order
      chunks.assign(std::size_t(p) * std::size_t(v), 0);
      for (std::int64_t l = 0; l < a.layers; ++l) ++chunks[std::size_t(l % std::int64_t(chunks.size()))];
    }
  }
  // A hybrid's (or a shared-indexer model's) layer kinds fold their graphs (kind_params): once per kind and call, not
  // once per layer (every estimate_training and training_memory calls this, the search once per stage key).
  std::array<std::optional<LayerParams>, LayerKind::kCount> kind_lp{};
  std::vector<StageShape> st(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) {
    st[std::size_t(i)].index = i;
    st[std::size_t(i)].first = i == 0;
    st[std::size_t(i)].last = i == p - 1;
  }
  std::int64_t l = 0;
  for (std::size_t j = 0; j < chunks.size(); ++j) {
    StageShape& s = st[j % std::size_t(p)];
    s.recomputed += plan.recomputed_in_chunk(chunks[j]);
    s.checkpoints += plan.checkpoints_in_chunk(chunks[j]);
    s.recompute_group = std::max(s.recompute_group, plan.recompute_group(chunks[j]));
    for (std::int64_t n = 0; n < chunks[j] && l < a.layers; ++n, ++l) {
      const bool moe = a.is_moe_layer(l);
      const LayerKind kind = LayerKind::of(a, l);
      const auto ki = static_cast<std::size_t>(kind.index());
      if (!kind_lp[ki]) kind_lp[ki] = kind_params(a, kinds, kind);
      const LayerParams lp = *kind_lp[ki];
      ++s.layers;
      s.moe_layers += moe ? 1 : 0;
      ++s.kind_layers[ki];
      s.p_dense += lp.dense;
      s.p_expert += lp.expert;
    }
  }
  if (plan.mtp_layers > 0 && a.mtp_layers > 0 && a.layers > 0) {
    // Multi-token prediction (DeepSeek-V3 §2.2.1): each module is a transformer layer like the model's last, a
    // projection and its norms, sharing the embedding and the output head; it sits with the output head (§3.2.3:
    // "the shallowest layers (including the embedding layer) and deepest layers (including the output head) of the
    // model on the same PP rank"), on the last stage.
    StageShape& s = st.back();
    const std::int64_t last = a.layers - 1;
    const bool moe = a.is_moe_layer(last);
    const LayerParams lp = moe ? kinds.moe : kinds.dense;
    const double per_module = double(params.mtp) / double(a.mtp_layers);
    s.layers += plan.mtp_layers;
    s.moe_layers += moe ? plan.mtp_layers : 0;
    s.kind_layers[static_cast<std::size_t>(LayerKind::of(a, last).index())] += plan.mtp_layers;
    s.p_expert += double(plan.mtp_layers) * lp.expert;
    s.p_dense += double(plan.mtp_layers) * std::max(0.0, per_module - lp.expert);
    s.mtp += plan.mtp_layers;
    s.recomputed += plan.recomputed_in_chunk(plan.mtp_layers);
    s.checkpoints += plan.checkpoints_in_chunk(plan.mtp_layers);
  }
  if (plan.dualpipe()) {
    // DualPipe (DeepSeek-V3 §3.2.1, Table 2): device i holds stage i of the forward direction and stage PP−1−i of
    // the reverse one — two copies of the parameters over the pipeline; device 0 (and PP−1) holds both the
    // embedding and the output head.
    std::vector<StageShape> dev(st.size());
    for (std::size_t i = 0; i < st.size(); ++i) {
      const StageShape& x = st[i];
      const StageShape& y = st[st.size() - 1 - i];
      StageShape& d = dev[i];
      d = x;
      d.first = x.first || y.first;
      d.last = x.last || y.last;
      d.layers += y.layers;
      d.moe_layers += y.moe_layers;
      for (std::size_t k = 0; k < d.kind_layers.size(); ++k) d.kind_layers[k] += y.kind_layers[k];
      d.p_dense += y.p_dense;
      d.p_expert += y.p_expert;
      d.mtp += y.mtp;
      d.recomputed += y.recomputed;
      d.checkpoints += y.checkpoints;
      d.recompute_group = std::max(d.recompute_group, y.recompute_group);
      d.chunks = 2;
      const StageShape& deep = i < st.size() / 2 ? y : x;
      d.deep_layers = deep.layers;
      d.deep_moe_layers = deep.moe_layers;
      d.deep_kind_layers = deep.kind_layers;
    }
    return dev;
  }
  mark_alike(st);
  return st;
}

std::int64_t most_stage_layers(const std::vector<StageShape>& stages) {
  std::int64_t n = 0;
  for (const auto& s : stages) n = std::max(n, s.layers);
  return n;
}

LayerKinds layer_kinds(const wl::TransformerArch& a, const ParameterCounts& params) {
  LayerKinds k;
  const GraphRef dense = layer_graph(a, LayerKind{});
  if (params.attention_per_layer != dense->parameters(Part::attention) ||
      params.dense_mlp_per_layer != dense->parameters(Part::dense_mlp)) {
    // A nominal count, not a's (the textbook's "7B", all of it in the layers): no graph describes it.
    k.dense.dense = double(params.attention_per_layer + params.dense_mlp_per_layer);
    k.moe = k.dense;
    return k;
  }
  k.dense = split_layer_weights(*dense);
  LayerKind moe;
  moe.moe = a.moe_layer_count() > 0;
  k.moe = moe.moe ? layer_params(a, moe) : k.dense;
  k.final_norm = double(head_graph(a)->parameters(Part::final_norm));
  return k;
}

LayerParams kind_params(const wl::TransformerArch& a, const LayerKinds& kinds, LayerKind k) {
  // The dense and MoE layers' folds, cached in `kinds` (the layers of a kind hold the same weights, global or local).
  if (!layers_differ_beyond_ffn(a)) return k.moe ? kinds.moe : kinds.dense;
  return layer_params(a, k);  // a layer kind of its own ({mixer} × {FFN}, indexer)
}

bool layers_differ_beyond_ffn(const wl::TransformerArch& a) {
  return a.hybrid() || (a.dsa.has_value() && a.indexer_layer_count() < a.attention_layer_count());
}

LayerSums layer_sums(const Ctx& c) {
  LayerSums s;
  s.dense = sum_terms(c, layer_terms(c, false));
  s.moe = c.a.moe ? sum_terms(c, layer_terms(c, true)) : s.dense;
  s.head = head_terms(c, *head_graph(c.a));
  s.by_kind = layers_differ_beyond_ffn(c.a);
  if (s.by_kind)
    for_each_layer_kind(c.a, [&](LayerKind k, std::int64_t) {
      s.kind[static_cast<std::size_t>(k.index())] = sum_terms(c, layer_terms(c, k));
    });
  return s;
}

}  // namespace detail
}  // namespace gpuplan::model
