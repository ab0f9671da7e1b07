#pragma once
// The drill kinds of the course's vision and real-time questions (issue #25: the 33 ms frame budget, the speedup a
// 42 ms model needs, backbone sharing, ResNet-50 scaling, P99 against the mean): their input tables and their
// evaluation through the model's functions (model/realtime.hpp). drills.cpp lists them with the other kinds.
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/app/drills.hpp"

namespace gpuplan::app {

struct RealtimeKind {
  std::string name;
  Dimension dim;
  json_io::FieldTable inputs;
};
const std::vector<RealtimeKind>& realtime_drill_kinds();

/// Evaluates one of realtime_drill_kinds() from its validated inputs; false for another kind.
bool evaluate_realtime_kind(const std::string& kind, const json_io::ObjectReader& in, const Origin& o, KindAnswer& a);

}  // namespace gpuplan::app
