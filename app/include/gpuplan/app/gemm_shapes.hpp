#pragma once
// GEMM shape what-ifs (issue #27 d6): one GEMM's time over a range of one or more of its dimensions — the
// leading-dimension alignment classes (K or N at 4088…4104), the tile/wave staircase (M from 1 to 1024) — and the
// same GEMM with its leading dimensions padded to 16 bytes. `gpuplan roofline --gemm M×N×K` (each dimension a value
// or a range A..B[:STEP]) prints these points; the GUI's "GEMM shapes" tab draws them. Every number is gemm_cost's.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/ops.hpp"

namespace gpuplan::app {

struct GemmShapePoint {
  std::int64_t m = 0, n = 0, k = 0;
  model::OpCost cost;  ///< time, FLOPs, bytes, bound, efficiency (a fraction of the dense peak)
  double tflops = 0;   ///< achieved: 2·m·n·k / time
};

/// A dimension's values: "4096", "4088..4104" (every integer), "8..1024:8" (a step). Empty with `error` set when the
/// text is not one of those (values from 1 to 1e9, at most 100,000 of them, A ≤ B, STEP ≥ 1).
std::vector<std::int64_t> parse_gemm_dim(const std::string& text, std::string& error);

/// "M×N×K" (x or ×), each a value or a range: the three dimensions' values; nullopt with `error` set otherwise, or when
/// the sweep would have more than 100,000 points.
std::optional<std::array<std::vector<std::int64_t>, 3>> parse_gemm_shapes(const std::string& text, std::string& error);

/// gemm_cost of every (m, n, k) of the three lists, m outermost.
std::vector<GemmShapePoint> gemm_shape_sweep(const model::Device& d, hw::Precision p,
                                             const std::array<std::vector<std::int64_t>, 3>& dims);

/// The leading dimensions k and n rounded up to a multiple of 16 bytes of the precision's elements (what a framework
/// pads to: 8 bf16 elements, 16 fp8); m unchanged (not a leading dimension).
std::array<std::int64_t, 3> gemm_padded_shape(std::int64_t m, std::int64_t n, std::int64_t k, hw::Precision p);

/// One GEMM against the same GEMM padded (gemm_padded_shape): both points, the speed-up t(as given) / t(padded), the
/// extra FLOPs the padding costs (a fraction), and the as-given GEMM's derivation (its alignment class "a" and tiles "u").
struct GemmPadding {
  GemmShapePoint as_given, padded;
  double speedup = 1.0;
  double extra_flops = 0.0;
  Derivation derivation;
};
GemmPadding gemm_padding(const model::Device& d, hw::Precision p, std::int64_t m, std::int64_t n, std::int64_t k);

}  // namespace gpuplan::app
