#pragma once
// fp16 against bf16 GEMMs (efficiency.cpp gemm_ceiling, ops.cpp gemm_cost).
#include "gpuplan/model/efficiency.hpp"

namespace gpuplan::model {

/// fp16 tensor-core GEMM rate / bf16 rate at the same shape. fp16's 10-bit mantissas toggle more multiplier bits than
/// bf16's 7, so the part draws more power per FLOP and, under its power cap, runs a lower clock: on our H100 0.961
/// (efficiency.cpp, FP16 AGAINST BF16: the calibration fits, checked on both CUDA-graph sweeps). Parts with fp8 tensor
/// cores take it (H200: same die; Blackwell: an assumption); older parts 1 (not measured). gemm_ceiling applies it to
/// fp16; gemm_cost takes it back out of the alignment fallback class, whose kernels are bound by their narrow loads,
/// not by the tensor cores (both types measure alike there).
double gemm_fp16_rate(const EfficiencyProfile& e);

}  // namespace gpuplan::model
