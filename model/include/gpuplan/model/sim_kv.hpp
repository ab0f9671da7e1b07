#pragma once
// The KV pool one simulated replica runs with (`gpuplan simulate` and the GUI's serving simulation): the serving
// memory model's pool at the replica's layout, in the engine's blocks. Pure: no IO.
#include <cstdint>
#include <vector>

#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/model/simulate.hpp"

namespace gpuplan::model {

struct SimKvPool {
  bool fits = false;             ///< the weights fit and at least one KV block is left for requests
  std::int64_t block_size = 1;   ///< tokens per KV block (the engine's, after its forced sizes)
  std::int64_t blocks = 0;       ///< KV blocks of the replica: kv_token_capacity / block_size
};

/// serving_memory with the engine knobs of `memory` at the layout of `perf` (TP, PP, weight and KV formats), one
/// sequence of the requests' mean prompt + output tokens, no GPU-count check; the pool's tokens in whole blocks.
SimKvPool sim_kv_pool(const wl::TransformerArch& arch, const ParameterCounts& params, const hw::GpuSpec& gpu,
                      ServingMemoryPlan memory, const ServingPerfPlan& perf, const std::vector<SimRequest>& requests);

}  // namespace gpuplan::model
