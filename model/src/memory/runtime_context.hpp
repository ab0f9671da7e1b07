#pragma once
// The runtime overheads of a training process on one GPU: default_training_overheads() with the CUDA context its GPU
// file records (memory.context_MiB, measured or published for the part's generation, with context_basis).
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/memory.hpp"

namespace gpuplan::model {

/// default_training_overheads() on `gpu`: the CUDA context of its GPU file (GpuSpec::memory.context) where it records
/// one, else the generic figure; the origin says which.
RuntimeOverheads training_overheads(const hw::GpuSpec& gpu);
/// Whether `cuda_context` (context + cuBLASLt workspace) is the one `gpu`'s file records (training_overheads(gpu) with
/// a file figure): explain then cites the file and labels the figure a measurement, not an assumption.
bool context_from_gpu_file(units::Bytes cuda_context, const hw::GpuSpec& gpu);
/// The input an explain tree gives the CUDA context: a measurement citing the GPU file where it comes from there, else
/// an assumption with `origin`.
Origin context_origin(units::Bytes cuda_context, const hw::GpuSpec& gpu, const std::string& origin);

}  // namespace gpuplan::model
