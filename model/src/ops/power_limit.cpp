#include "gpuplan/model/power_limit.hpp"

#include <cmath>

namespace gpuplan::model {

double sustained_clock_ratio(const PowerPoint& p, const PowerPoint& ref) {
  const auto budget_per_sm = [](const PowerPoint& x) {
    return x.compute_units > 0 ? (x.power_limit_W - kIdlePowerFraction * x.tdp_W) / x.compute_units : 0.0;
  };
  const double b = budget_per_sm(p), b_ref = budget_per_sm(ref);
  if (!(b > 0.0) || !(b_ref > 0.0)) return 1.0;
  return std::cbrt(b / b_ref);
}

}  // namespace gpuplan::model
