#pragma once
// Internal to gpuplan::model: what serving.cpp (one iteration, steady state) and serving_plan.cpp (the capacity
// planner) share.
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/topology.hpp"

namespace gpuplan::model::detail {

}  // namespace gpuplan::model::detail
