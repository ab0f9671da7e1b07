#include "gpuplan/core/derivation.hpp"

namespace gpuplan {

std::string to_string(OriginKind k) {
  switch (k) {
    case OriginKind::datasheet: return "datasheet";
    case OriginKind::model_config: return "model config";
    case OriginKind::calibration: return "calibrated";
    case OriginKind::measurement: return "measured";
    case OriginKind::user: return "user plan";
    case OriginKind::assumption: return "assumption";
    case OriginKind::derived: return "derived";
    case OriginKind::constant: return "constant";
  }
  return "derived";
}

const Derivation* Derivation::find(const std::string& wanted_id) const {
  if (id == wanted_id) return this;
  for (const auto& c : children)
    if (const Derivation* hit = c.find(wanted_id)) return hit;
  return nullptr;
}

}  // namespace gpuplan
