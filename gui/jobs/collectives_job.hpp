#pragma once
// Collective cost vs message size on the scenario's two link tiers, for the view "Collectives". Every number is
// model::collective_cost on the communicator estimate_training itself uses (model::training_comm_group: resolve_group
// plus the calibration profile's measured NVLink tier), one call per point, derivations off.
#include <string>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl/training.hpp"

namespace gpuplan::gui {

struct CollectivePoint {
  double bytes = 0;  ///< the per-rank buffer as NCCL counts it
  double time_s = 0;
  double algbw_Bps = 0, busbw_Bps = 0;
  model::CollectiveAlgorithm algorithm = model::CollectiveAlgorithm::ring;
};

struct CollectiveCurve {
  model::Collective op = model::Collective::all_reduce;
  std::vector<CollectivePoint> points;
};

/// One communicator: which group of the scenario it is and how the model maps it onto the fabric.
struct CollectiveTier {
  std::string key;          ///< "scale_up" or "scale_out"
  std::string label;        ///< "NVLink: TP group of 8"
  std::string fabric;       ///< model::describe() of the tier(s) it crosses
  int size = 1, stride = 1, scale_up_size = 1, domains = 1;
  bool calibrated = false;  ///< the scale-up tier's α and η come from a calibration profile
  bool feasible = true;     ///< false when the tier is missing in the data (collective_cost is +inf)
  std::vector<CollectiveCurve> curves;  ///< all-reduce, all-gather, reduce-scatter, all-to-all
  Derivation sample;        ///< the all-reduce of 256 MiB with its derivation (explain tree)
};

struct CollectivesResult {
  std::vector<CollectiveTier> tiers;  ///< scale-up (when the node has a domain of > 1 GPU), scale-out (when it has NICs)
  std::string calibration;            ///< the profile the NVLink tier is calibrated from, empty when none
  bool profile_used = false;          ///< a calibration profile is in use (it may hold no NVLink measurement)
  std::vector<std::string> notes;     ///< why a tier is missing
};

/// The collectives of a plan on `sys`: the scale-up tier is the TP group (stride 1; the node's whole scale-up domain
/// when TP = 1), the scale-out tier a group of DP ranks one per scale-up domain (stride = the domain) so that it
/// crosses only the scale-out fabric (the DP group itself when it is larger than 1, else 2 domains). Message sizes
/// 1 KiB … 16 GiB, doubling.
CollectivesResult evaluate_collectives(const model::TrainingSystem& sys, const wl::Parallelism& par);

/// "ring", "tree", "NVLS", "hierarchical" (labels for the hover text).
std::string algorithm_name(model::CollectiveAlgorithm a);
/// "all-reduce", … (labels).
std::string collective_name(model::Collective op);

}  // namespace gpuplan::gui
