#pragma once
// Internal to gpuplan::model: what serving.cpp (one iteration, steady state) and serving_plan.cpp (the capacity
// planner) share.
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

}  // namespace gpuplan::model::detail
