#pragma once
// The time of one collective as the training step, the serving forward and the MoE layer price their communication:
// collective_cost with the automatic algorithm and no derivation. One function, so that training and serving cannot
// price the same transfer differently.
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/topology.hpp"

namespace gpuplan::model {

/// The time alone of collective_cost(op, bytes, group, automatic, Explain::off); 0 for a group of one or an empty
/// buffer.
units::Seconds collective_time(Collective op, units::Bytes bytes, const CommGroup& group);

}  // namespace gpuplan::model
