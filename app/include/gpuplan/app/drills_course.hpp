#pragma once
// The drill kinds of the course's training-optimisation and batching views (issue #27 d3/d4): the input pipeline with
// N DataLoader workers, the optimizer step's bandwidth floor by implementation (fused vs PyTorch's foreach passes),
// and static batching's wait for a batch to fill. Evaluated through the model's functions (vision_data_pipeline,
// optimizer_step_bytes_per_param, static_batch_fill_wait); drills.cpp lists them with the other kinds.
#include <string>
#include <vector>

#include "gpuplan/app/drills.hpp"
#include "gpuplan/app/drills_realtime.hpp"

namespace gpuplan::app {

const std::vector<RealtimeKind>& course_drill_kinds();

/// Evaluates one of course_drill_kinds() from its validated inputs; false for another kind.
bool evaluate_course_kind(const std::string& kind, const json_io::ObjectReader& in, const Origin& o, KindAnswer& a);

}  // namespace gpuplan::app
