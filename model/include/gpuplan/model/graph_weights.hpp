#pragma once
// Weights per GPU: a fold over the op graph (graph.hpp) under a layout's sharding and storage. The one place that
// says how many bytes of a layer's weights, and of the embedding / LM head around the layers, one GPU holds: each
// weight tensor of each op is counted by how tensor parallelism splits it (its TpSplit), whether it is a routed
// expert (spread further by wide expert parallelism) and whether it is stored quantised or kept in 16 bits.
//
// The fold runs in two steps so that a search over layouts pays the graph once: graph_weights / stage_head_weights
// group a graph's elements by class (once per model and layer kind), weight_bytes_per_gpu prices the classes under
// one layout (a few multiplications).
#include "gpuplan/model/graph.hpp"

namespace gpuplan::model {

/// One graph's parameter elements grouped by how a layout shards and stores them.
struct GraphWeights {
  double split = 0;       ///< TpSplit::split outside the routed experts: 1/t per rank, stored quantised
  double experts = 0;     ///< the routed experts (TpSplit::split): 1/(t·expert_dp) per rank, quantised
  double kv_heads = 0;    ///< K and V projections: the rank's share of the KV heads, quantised
  double replicated = 0;  ///< whole on every rank, quantised: MLA's down-projections, the DSA indexer
  double small = 0;       ///< whole on every rank, 16-bit: norms, the MoE router
  /// The embedding, learned positions and LM head: vocabulary-parallel (1/t per rank) and kept in 16 bits (vLLM's
  /// VocabParallelEmbedding / ParallelLMHead are not quantised with the layers).
  double vocab = 0;

  GraphWeights& operator+=(const GraphWeights& o);
  [[nodiscard]] GraphWeights scaled(double n) const;
  /// Every element once (the whole model's count of this graph).
  [[nodiscard]] double elements() const { return split + experts + kv_heads + replicated + small + vocab; }
};

/// How one GPU of a layout holds the weights.
struct WeightStorage {
  int tp = 1;              ///< tensor-parallel ranks
  double kv_share = 1.0;   ///< the fraction of the K/V projections a rank holds: KV heads per rank / n_kv
  int expert_dp = 1;       ///< wide EP: the routed experts spread over expert_dp × TP ranks
  double bytes = 2.0;      ///< bytes per stored weight (quantised, with its scales)
  double bytes16 = 2.0;    ///< bytes per weight kept in 16 bits (32 for an fp32 model)
};

/// The parameters of graph `g` by class (a tied LM head is not a parameter of its own and is not counted).
GraphWeights graph_weights(const OpGraph& g);

/// The ops around the layers that one pipeline stage holds (build_head_graph): the embedding and positions on the
/// first stage, the final norm and the LM head on the last; a tied LM head's weight counts on the last stage when
/// the embedding is not on the same GPU (under PP the last stage holds its own copy).
GraphWeights stage_head_weights(const OpGraph& head, bool first_stage, bool last_stage);

/// Bytes on one GPU: (split/t + experts/(t·expert_dp) + kv_heads·kv_share + replicated)·bytes + small·bytes16 +
/// vocab/t·bytes16.
double weight_bytes_per_gpu(const GraphWeights& w, const WeightStorage& s);

}  // namespace gpuplan::model
