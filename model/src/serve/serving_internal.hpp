#pragma once
// Internal to gpuplan::model: what serving.cpp (one iteration, steady state) and serving_plan.cpp (the capacity
// planner) share.
#include <cstdint>
#include <vector>

#include "gpuplan/core/units.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/topology.hpp"

namespace gpuplan::model::detail {

/// Time of one collective (0 for a group of one or no bytes), derivation off.
units::Seconds coll(Collective op, units::Bytes bytes, const CommGroup& g);
/// The communicator of `size` GPUs `stride` ranks apart on the system's node, with the measured NVLink tier when the
/// system carries a calibration.
CommGroup group_of(const ServingSystem& sys, int size, int stride);

/// The planner's pieces that the disaggregated pools reuse (serving_plan.cpp): the batch sizes it tries up to `max_b`,
/// ⌈x⌉ replicas (saturating, with `saturated` set, past its ceiling), whether TP `tp` splits the model's heads and
/// widths.
std::vector<std::int64_t> planner_batch_grid(std::int64_t max_b);
std::int64_t planner_replicas_for(double x, bool& saturated);
bool planner_tp_valid(const wl::TransformerArch& a, int tp);

}  // namespace gpuplan::model::detail
