#pragma once
// Roofline basics (Williams, Waterman, Patterson, CACM 2009).
#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"

namespace gpuplan::model {

/// Ridge point = peak compute / peak memory bandwidth: the arithmetic intensity (FLOP/B) above which an op is
/// compute-bound. A100 bf16: 312 TFLOP/s / 2.0 TB/s = 156 FLOP/B.
Estimate<units::Intensity> ridge_point(units::FlopRate peak, units::Bandwidth bandwidth, Origin peak_origin,
                                       Origin bandwidth_origin, Explain explain = Explain::on);

/// Attainable performance at arithmetic intensity `i` under the roofline: min(P_peak, BW_mem · I). The chart of
/// `gpuplan-gui` draws each GPU's roof with it.
units::FlopRate attainable_performance(units::FlopRate peak, units::Bandwidth bandwidth, units::Intensity i);

}  // namespace gpuplan::model
