#pragma once
// Internal to gpuplan_wl_io: the json_io names the workload decoders use unqualified and the one builder of a plain
// field spec, declared once for model_library.cpp, vision_library.cpp, hf_config.cpp, hf_rules.cpp, scenario_io.cpp,
// plan_io.cpp and pipeline_io.cpp (hardware/io has the same header for its decoders: decode_common.hpp).
#include <string>
#include <utility>
#include <vector>

#include "gpuplan/json_io/reader.hpp"

namespace gpuplan::wl_io {

using json_io::FieldSpec;
using json_io::FieldTable;
using json_io::FieldType;
using json_io::Json;
using json_io::ObjectReader;
using json_io::Presence;

/// A field of type `t`: its key, presence, documentation, bounds (min == max == 0: unbounded) and string choices.
inline FieldSpec field(std::string key, FieldType t, Presence p, std::string doc, double min = 0, double max = 0,
                       std::vector<std::string> choices = {}) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = t;
  f.presence = p;
  f.doc = std::move(doc);
  f.min = min;
  f.max = max;
  f.choices = std::move(choices);
  return f;
}

}  // namespace gpuplan::wl_io
