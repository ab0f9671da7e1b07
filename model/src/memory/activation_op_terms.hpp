#pragma once
// Internal to gpuplan::model (memory/): the per-op writers of a layer's saved tensors (activation_op_terms.cpp), each
// appending the terms one op of the graph keeps for its backward; memory_activations.cpp folds them over the layer's
// op graph (layer_terms) and over TorchTitan's op-level policy (op_sac_terms).
#include <vector>

#include "gpuplan/model/graph.hpp"
#include "memory_activations.hpp"

namespace gpuplan::model::detail {

/// Appends one saved tensor of `elements` per token (before the TP split) of `bytes` each; nothing when it is empty.
void add(std::vector<Term>& v, ActPart part, const char* name, const char* width, double elements, double bytes,
         Split split, Role role = Role::plain);

/// A norm's saved tensors, `count` norms of the op `norm` (the block's input norm when `layer_input`).
void norm_terms(const Ctx& c, std::vector<Term>& v, ActPart part, const Op& norm, bool layer_input, double count,
                const char* width);

/// The FFN block's input (its first op: the dense MLP's up-projection or the router) for the weight gradients.
void ffn_input_terms(const Ctx& c, const Op& o, std::vector<Term>& v);

/// An FFN op's saved tensors after the block's input: routed experts' permuted tokens and intermediates, the dense
/// MLP's and the shared experts' intermediates.
void ffn_op_terms(const Ctx& c, const Op& o, std::vector<Term>& v);

/// One op's saved tensors inside the mixer block (attention, or a Mamba-2 / gated DeltaNet mixer), by the op's kind.
void mixer_op_terms(const Ctx& c, const OpGraph& g, const Op& o, std::vector<Term>& v);

}  // namespace gpuplan::model::detail
