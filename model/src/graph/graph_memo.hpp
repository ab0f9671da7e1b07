#pragma once
// The layer and head graphs of one architecture, built once per distinct layer kind while an estimate runs
// (issue #20: "GUI recompute times no slower"). A graph depends only on the architecture it is built from (the
// training estimate's copy with the vocabulary padded for its TP, so that copy is the key) and the layer kind; the
// pricers, parameter counts, FLOPs, stage shapes, DP buckets and activation terms of one estimate each fold over the
// same few graphs, which they used to rebuild. Defined in graph/transformer_graph.cpp.
#include <optional>

#include "gpuplan/model/graph.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model::detail {

/// While one is alive on this thread, layer_graph and head_graph build each graph of `a` once and hand out the same
/// one. Keyed by the architecture's address: `a` must outlive the scope and not change while it lives (a const
/// reference held for the scope, as estimate_training holds its padded copy). A scope opened inside another one of
/// the same architecture shares its graphs; inside one of another architecture it memoises nothing (the outer one
/// keeps its graphs). Graphs of any other architecture are built on each call, as without a scope.
class GraphMemoScope {
 public:
  explicit GraphMemoScope(const wl::TransformerArch& a);
  ~GraphMemoScope();
  GraphMemoScope(const GraphMemoScope&) = delete;
  GraphMemoScope& operator=(const GraphMemoScope&) = delete;

 private:
  bool owner_ = false;  ///< this scope opened the memo (and clears it on exit)
};

/// A graph handed out by layer_graph / head_graph: the memo's (no copy) or, outside a scope of its architecture,
/// one of its own.
class GraphRef {
 public:
  explicit GraphRef(const OpGraph* memo) : memo_(memo) {}
  explicit GraphRef(OpGraph own) : own_(own) {}
  [[nodiscard]] const OpGraph& get() const { return own_ ? *own_ : *memo_; }
  [[nodiscard]] const OpGraph& operator*() const { return get(); }
  [[nodiscard]] const OpGraph* operator->() const { return &get(); }
  [[nodiscard]] const Op* begin() const { return get().begin(); }
  [[nodiscard]] const Op* end() const { return get().end(); }

 private:
  const OpGraph* memo_ = nullptr;
  std::optional<OpGraph> own_;
};

/// build_layer_graph(a, kind), once per kind in a GraphMemoScope of `a`.
GraphRef layer_graph(const wl::TransformerArch& a, LayerKind kind);
/// build_head_graph(a), once in a GraphMemoScope of `a`.
GraphRef head_graph(const wl::TransformerArch& a);

}  // namespace gpuplan::model::detail
