// The simulated replica's KV pool (sim_kv.hpp).
#include "gpuplan/model/sim_kv.hpp"

#include <algorithm>
#include <cmath>

namespace gpuplan::model {

SimKvPool sim_kv_pool(const wl::TransformerArch& arch, const ParameterCounts& params, const hw::GpuSpec& gpu,
                      ServingMemoryPlan memory, const ServingPerfPlan& perf, const std::vector<SimRequest>& requests) {
  double mean_in = 0, mean_out = 0;
  for (const auto& r : requests) {
    mean_in += double(r.input_tokens);
    mean_out += double(r.output_tokens);
  }
  if (!requests.empty()) {
    mean_in /= double(requests.size());
    mean_out /= double(requests.size());
  }
  memory.tp = perf.tp;
  memory.pp = perf.pp;
  memory.context = std::max<std::int64_t>(1, std::llround(mean_in + mean_out));
  memory.concurrency = 1;
  memory.gpus.reset();
  memory.kv = perf.kv;
  memory.weights = perf.weights;
  const ServingMemory mem = serving_memory(arch, params, gpu, memory, Explain::off);
  SimKvPool out;
  out.block_size = std::max<std::int64_t>(1, mem.plan.block_size);
  out.fits = mem.ok && mem.kv_token_capacity >= out.block_size;
  out.blocks = out.fits ? mem.kv_token_capacity / out.block_size : 0;
  return out;
}

}  // namespace gpuplan::model
