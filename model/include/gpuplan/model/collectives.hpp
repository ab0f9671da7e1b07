#pragma once
// Cost of collective communication on the real fabric: α–β model per link tier, ring / tree / hierarchical / in-switch
// (NVLS) algorithms, bus vs algorithm bandwidth kept distinct (NCCL's definitions, nccl-tests PERFORMANCE.md).
#include <optional>
#include <string_view>
#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/model/topology.hpp"

namespace gpuplan::model {

enum class Collective { all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, broadcast };
/// collnet: NCCL CollNet with SHARP (in-network reduction on the scale-out switches), only for a group whose
/// CommGroup::collnet is set.
enum class CollectiveAlgorithm { automatic, ring, tree, nvls, hierarchical, collnet };

struct CollectiveCost {
  units::Seconds time{};
  units::Bandwidth algbw{};  ///< message bytes / time
  units::Bandwidth busbw{};  ///< algbw × the collective's bus factor (2(n−1)/n for all-reduce, (n−1)/n for AG/RS/A2A)
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::ring;  ///< the one chosen
  Derivation derivation;
};

/// Time of one collective over `group` with `bytes` the per-rank buffer as NCCL counts it (all-reduce: the buffer;
/// all-gather: the gathered output; reduce-scatter: the input; all-to-all: the buffer each rank sends in total;
/// send/recv: the message). A group of 1 costs 0.
CollectiveCost collective_cost(Collective op, units::Bytes bytes, const CommGroup& group,
                               CollectiveAlgorithm algorithm = CollectiveAlgorithm::automatic,
                               Explain explain = Explain::on);

/// Bus factor of a collective on n ranks (nccl-tests PERFORMANCE.md): all-reduce 2(n−1)/n; all-gather,
/// reduce-scatter and all-to-all (n−1)/n; send/recv and broadcast 1.
double bus_factor(Collective op, int n);

/// The collective a name means (all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, broadcast: the
/// calibration samples' and profiles' names), or nothing.
std::optional<Collective> parse_collective(std::string_view name);

}  // namespace gpuplan::model
