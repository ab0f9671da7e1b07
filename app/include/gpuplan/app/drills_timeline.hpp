#pragma once
// The drill kinds of the course's time-resolved questions (issue #27): "reading a profiler trace" (how much of a
// pipeline stage's step is idle) and "when does memory peak" (how many micro-batches' activations the first stage
// holds at its peak), answered by laying the plan out with model/timeline.hpp. drills.cpp lists them with the others.
#include <string>
#include <vector>

#include "gpuplan/app/drills.hpp"

namespace gpuplan::app {

struct TimelineKind {
  std::string name;
  Dimension dim;
  json_io::FieldTable inputs;
};
const std::vector<TimelineKind>& timeline_drill_kinds();

/// Evaluates one of timeline_drill_kinds() from its validated inputs on `arch`; false (with a diagnostic at `file`,
/// `pointer`) when the plan cannot be laid out.
bool evaluate_timeline_kind(const std::string& kind, const json_io::ObjectReader& in, const wl::TransformerArch& arch,
                            const DrillContext& ctx, const Origin& o, KindAnswer& a, const std::string& file,
                            Diagnostics& diags);

}  // namespace gpuplan::app
