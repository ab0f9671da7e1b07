#pragma once
// nccl-tests logs (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf, sendrecv_perf: NVIDIA/
// nccl-tests) → the collective samples the fitter consumes (read_samples / fit_profile). The host's topology is the
// user's statement (nccl-tests does not print it): GPUs per node, the node type and the node count.
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/calibrate/calibration.hpp"
#include "gpuplan/core/diagnostics.hpp"

namespace gpuplan::calib {

struct NcclTestsTopology {
  std::string node;       ///< node id in the hardware database (dgx-h100)
  int gpus_per_node = 0;  ///< ranks on each node
  int nodes = 0;
  [[nodiscard]] int ranks() const { return gpus_per_node * nodes; }
};

/// One row of an nccl-tests result table.
struct NcclTestsRow {
  std::string op;  ///< all_reduce, all_gather, reduce_scatter, all_to_all, send_recv
  int ranks = 0;
  double bytes = 0;      ///< the size column (nccl-tests' convention: doc/PERFORMANCE.md)
  double count = 0;      ///< elements, as printed
  std::string type;      ///< float, half, bfloat16, ...
  double time_s = 0;     ///< out-of-place time (nccl-tests prints the mean over its iterations, in µs)
  std::optional<double> in_place_time_s;
  double algbw_GBps = 0, busbw_GBps = 0;  ///< out-of-place, as printed
  std::string where;     ///< "file:line"
};

struct NcclTestsLog {
  std::string file;
  std::string op;
  int ranks = 0;                  ///< from the "#  Rank" lines (0 when the log has none)
  std::vector<std::string> devices;  ///< device names of the "#  Rank" lines
  std::vector<NcclTestsRow> rows;
  int skipped_nccl_lines = 0;     ///< NCCL INFO / WARN lines (NCCL_DEBUG) between the table rows
};

/// Parses one log. `op` (the collective, if the user named it) wins; else the log's "# Collective test starting:
/// NAME" line, else the file name (all_reduce_perf.log …). Every row is checked: 12 or 13 columns, whole sizes and
/// counts, a known data type and reduction, a positive time, no wrong elements, algbw = size / time and busbw =
/// algbw × the op's bus factor for the topology's rank count (within the printed rounding). Bad lines are errors at
/// "file:line" naming the value and the rule; nothing is returned after an error.
std::optional<NcclTestsLog> parse_nccl_tests_log(const std::string& text, const std::string& file,
                                                 const NcclTestsTopology& topo, const std::string& op,
                                                 Diagnostics& diags);

/// The samples file (kind gpuplan-calibration-samples) of the rows of `logs`: device name `gpu_id`, the topology,
/// one collective sample per row (median_s = nccl-tests' out-of-place time).
std::string nccl_tests_samples_json(const std::vector<NcclTestsLog>& logs, const NcclTestsTopology& topo,
                                    const std::string& gpu_id);

}  // namespace gpuplan::calib
