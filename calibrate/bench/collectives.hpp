// Options of the NCCL collectives bench (collectives.cu; built only when NCCL is found).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_host.hpp"

namespace gpuplan::bench {

struct CollOptions {
  std::string out;                       // samples JSON (written by rank 0)
  int nranks = 0;                        // >0: fork this many processes (one per GPU); 0: external launcher or all GPUs
  std::uint64_t min_bytes = 1ULL << 10;  // 1 KiB
  std::uint64_t max_bytes = 4ULL << 30;  // 4 GiB (capped at what fits)
  std::string id_file;                   // external launcher: where rank 0 writes the ncclUniqueId
  double id_timeout_s = 300;
  SpreadRule rule{};
  double item_budget_s = 0.03;
  double min_sample_s = 1e-3;
  double time_limit_s = 0;               // >0: skip the remaining items once the run has taken this long
  int max_samples = 25;
  int retries = 1;
  std::vector<int> ops = {kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv};
  Json argv = Json::array();
  std::string started_utc;
  std::string launch_mode;
};

int run_collectives(CollOptions o);

}  // namespace gpuplan::bench
