#pragma once
// The runtime overheads of a training process on one GPU: default_training_overheads() with the CUDA context of the
// GPU's generation where it is measured or published (memory.cpp kContextByGeneration).
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/memory.hpp"

namespace gpuplan::model {

/// default_training_overheads() on `gpu`: its generation's CUDA context (by compute capability) where one is
/// measured or published, else the generic figure; the origin says which.
RuntimeOverheads training_overheads(const hw::GpuSpec& gpu);

}  // namespace gpuplan::model
