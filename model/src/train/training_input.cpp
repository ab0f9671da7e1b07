#include "gpuplan/model/training_input.hpp"

#include <algorithm>

namespace gpuplan::model {

int training_processes_per_node(const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  const long long gpus = std::max<long long>(1, plan.par.gpus());
  return int(std::max<long long>(1, sys.node != nullptr ? std::min<long long>(sys.node->gpus, gpus) : 1));
}

DataPipeline training_input_pipeline(const wl::TrainingPlan& plan, const TrainingSystem& sys, units::Seconds gpu_step,
                                     const TextLoader& loader, int workers, Explain explain) {
  const double samples_per_gpu = double(plan.global_batch) / double(std::max(1, plan.par.dp));
  return text_data_pipeline(gpu_step, std::int64_t(std::max(1.0, samples_per_gpu)), loader, workers,
                            training_processes_per_node(plan, sys), explain);
}

}  // namespace gpuplan::model
