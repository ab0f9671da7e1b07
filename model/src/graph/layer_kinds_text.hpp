#pragma once
// One line naming a model's layer kinds with their counts, for the derivations of kv, serve and train (the CLI's
// model show has its own table of them). Defined in graph/transformer_graph.cpp.
#include <string>

#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model::detail {

/// "36 × gated DeltaNet (linear attention) + MoE with shared experts, 12 × gated full attention + MoE with shared
/// experts" — each distinct {mixer} × {FFN} kind of the op graph (for_each_layer_kind) with its count; attention
/// sinks (GPT-OSS) are named after the list.
std::string layer_kinds_text(const wl::TransformerArch& a);
/// Whether the derivations should name the layer kinds: the model has more than one kind, or a kind other than
/// attention + FFN (a hybrid's mixers, DeepSeek sparse attention), or attention sinks.
bool names_layer_kinds(const wl::TransformerArch& a);

}  // namespace gpuplan::model::detail
