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
  int per_octave = 1;                    // message sizes per doubling (geometric_range)
  double size_offset = 0;                // shift of the size grid, in steps (0 ≤ offset < 1)
  std::string id_file;                   // external launcher: where rank 0 writes the ncclUniqueId
  double id_timeout_s = 300;
  SpreadRule rule{};
  double item_budget_s = 0.03;
  double min_sample_s = 1e-3;
  double time_limit_s = 0;               // >0: skip the remaining items once the run has taken this long
  int max_samples = 25;
  int retries = 1;
  std::vector<int> ops = {kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv};
  // Overlap items (after the sweep; see measure_overlap in collectives.cu): each of overlap_ops at each size beside a
  // bf16 GEMM of overlap_gemm {m, n, k}; timed loops of about overlap_window_s, overlap_reps repetitions.
  bool overlap = true;
  std::vector<int> overlap_ops = {kAllReduce, kReduceScatter, kAllGather};
  std::vector<std::uint64_t> overlap_bytes = {32ULL << 20, 256ULL << 20};
  std::int64_t overlap_gemm[3] = {8192, 8192, 4096};
  double overlap_window_s = 0.1;
  int overlap_reps = 9;
  Json argv = Json::array();
  std::string started_utc;
  std::string launch_mode;
};

int run_collectives(CollOptions o);

}  // namespace gpuplan::bench
