#pragma once
// The input pipeline of an LLM training step (issue #27): DataLoader workers preparing token batches beside the GPU,
// priced by the data pipeline's one formula (vision_data.hpp, text_data_pipeline: one sequence a sample). Used by the
// optimisation stack's workers step and the step timeline's data-loader lane. Pure: no IO.
#include <cstdint>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/model/vision_data.hpp"

namespace gpuplan::model {

/// Training processes that share one node's CPU cores: one per GPU, at most the node's GPUs (1 without a node).
int training_processes_per_node(const wl::TrainingPlan& plan, const TrainingSystem& sys);

/// One step's samples per GPU (the global batch over DP, at least 1) fed by `workers` DataLoader workers per GPU
/// (0: loaded in the training process between steps) at loader.sample_cpu each, against the GPU's step `gpu_step`.
/// Precondition: loader.sample_cpu > 0.
DataPipeline training_input_pipeline(const wl::TrainingPlan& plan, const TrainingSystem& sys, units::Seconds gpu_step,
                                     const TextLoader& loader, int workers, Explain explain);

}  // namespace gpuplan::model
