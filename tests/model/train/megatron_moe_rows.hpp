#pragma once
// The plan of Megatron-Bridge 25.09's DGX-B200 Qwen3-30B-A3B row (data/validation/training_cases.json,
// A-mb2509-B200-Qwen3_30B_a3B-8gpu: DP 8, EP 8, micro-batch 1, sequence 4096, FP8) at one micro-batch per step,
// shared by the tests of Megatron-Core's MoE layer terms and of expert capacity.
#include "gpuplan/wl/training.hpp"

namespace gpuplan::test {

inline wl::TrainingPlan qwen3_b200_row(wl::QuantRecipe r = wl::QuantRecipe::tensorwise) {
  wl::TrainingPlan p;
  p.par.dp = 8;
  p.par.ep = 8;
  p.micro_batch = 1;
  p.seq_len = 4096;
  p.global_batch = 8;
  p.precision.compute = hw::Precision::fp8;
  p.precision.recipe = r;
  return p;
}

}  // namespace gpuplan::test
