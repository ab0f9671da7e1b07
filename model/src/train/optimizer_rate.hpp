#pragma once
// The rate of the fused optimizer step (training.cpp optimizer_time; its --explain line in training_explain.cpp).

namespace gpuplan::model::detail {

/// The fused multi-tensor AdamW kernel's rate / the streaming (triad) rate. Our H100 step profiles time PyTorch's
/// fused AdamW (multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata<4>>, 28 B per parameter with fp32
/// parameters, gradients, m and v) at 2.564 TB/s (1.50B parameters, 16.37 ms:
/// data/validation/measured/h100-sxm5-80gb/profile_llama1b_s2048_b4.json) and 2.594 TB/s (1.88B, 20.30 ms:
/// profile_w7b_L8_s4096_b4.json): 0.765 and 0.774 of the 3.35 TB/s datasheet against the H100 row's 0.887 streaming
/// fraction, i.e. 0.868 of the streaming rate (mean). The H200 profile (profile_h200_llama1b_s2048_b4_single.json:
/// 3.405 TB/s, 0.709 of 4.8 TB/s) is lower still (0.80 of the streaming fraction the H200 row copies from the H100).
/// Megatron's, Apex's and Transformer Engine's fused Adam are multi-tensor-apply kernels of the same structure: every
/// part takes the H100 ratio (an assumption outside H100).
inline constexpr double kFusedOptimizerStreamShare = 0.868;

}  // namespace gpuplan::model::detail
