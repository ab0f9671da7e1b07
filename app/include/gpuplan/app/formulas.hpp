#pragma once
// docs/formulas.md (`gpuplan schema --formulas`): the formula reference generated from the derivations the model
// records while it computes: every node of the explain trees of a fixed set of scenarios, once per id.
#include <string>

#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/wl_io/model_io.hpp"

namespace gpuplan::app {

/// The Markdown page: per tree (training step, training memory, parameters, FLOPs, KV cache), each node's id, title,
/// unit, whether it is the sum of its children, formula, and its inputs' meanings and kinds of origin. A node is listed
/// as the first scenario that records it states it (formula texts can carry that scenario's numbers).
std::string formulas_markdown(const hw::HardwareDb& db, const wl_io::ModelLibrary& lib);

}  // namespace gpuplan::app
