#include "gpuplan/core/derivation.hpp"

#include <utility>

#include "gpuplan/core/format.hpp"

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

const char* to_string(Unit u) {
  switch (u) {
    case Unit::none: return "";
    case Unit::number: return "number";
    case Unit::count: return "count";
    case Unit::bytes:
    case Unit::bytes_binary: return "bytes";
    case Unit::seconds: return "seconds";
    case Unit::flop: return "FLOP";
  }
  return "";
}

std::string format_value(double v, Unit u) {
  switch (u) {
    case Unit::none:
    case Unit::number: return units::format_number(v);
    case Unit::count: return units::format_count(v);
    case Unit::bytes: return units::format(units::bytes(v));
    case Unit::bytes_binary: return units::format(units::bytes(v), units::BytePrefix::binary);
    case Unit::seconds: return units::format(units::seconds(v));
    case Unit::flop: return units::format(units::flop(v));
  }
  return units::format_number(v);
}

std::string Derivation::result_text() const {
  if (!result.empty() || !has_value()) return result;
  return format_value(value, unit);
}

void Terms::record(const char* id, const char* title, const char* formula, double v, Unit u, Fold f) {
  Derivation d;
  d.id = id;
  d.title = title;
  d.formula = formula;
  d.set(v, u, f);
  into_->children.push_back(std::move(d));
}

const Derivation* Derivation::find(const std::string& wanted_id) const {
  if (id == wanted_id) return this;
  for (const auto& c : children)
    if (const Derivation* hit = c.find(wanted_id)) return hit;
  return nullptr;
}

}  // namespace gpuplan
