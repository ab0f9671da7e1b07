#include "gpuplan/model/roofline.hpp"

#include "gpuplan/core/format.hpp"

namespace gpuplan::model {

Estimate<units::Intensity> ridge_point(units::FlopRate peak, units::Bandwidth bandwidth, Origin peak_origin,
                                       Origin bandwidth_origin, Explain explain) {
  Estimate<units::Intensity> e;
  e.value = peak / bandwidth;
  if (explain == Explain::on) {
    e.derivation = {"roofline.ridge",
                    "Roofline ridge point",
                    "I* = P_peak / BW_mem",
                    {{"P_peak", units::format(peak), "dense peak compute", std::move(peak_origin)},
                     {"BW_mem", units::format(bandwidth), "peak memory bandwidth", std::move(bandwidth_origin)}},
                    units::format(e.value),
                    {"ops with a lower arithmetic intensity are memory-bound"},
                    {}};
  }
  return e;
}

units::FlopRate attainable_performance(units::FlopRate peak, units::Bandwidth bandwidth, units::Intensity i) {
  const units::FlopRate memory_roof = bandwidth * i;
  return memory_roof < peak ? memory_roof : peak;
}

}  // namespace gpuplan::model
