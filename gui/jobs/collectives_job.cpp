#include "collectives_job.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/topology.hpp"

namespace gpuplan::gui {
namespace {

constexpr model::Collective kOps[] = {model::Collective::all_reduce, model::Collective::all_gather,
                                      model::Collective::reduce_scatter, model::Collective::all_to_all};

CollectiveTier tier_of(const model::TrainingSystem& sys, std::string key, std::string label, int size, int stride) {
  CollectiveTier t;
  t.key = std::move(key);
  t.label = std::move(label);
  t.size = size;
  t.stride = stride;
  const model::CommGroup g = model::training_comm_group(size, stride, sys);
  t.scale_up_size = g.scale_up_size;
  t.domains = g.domains();
  std::vector<std::string> parts;
  if (g.scale_up_size > 1) parts.push_back(model::describe(g.scale_up));
  if (g.domains() > 1) {
    if (g.scale_out) parts.push_back(model::describe(*g.scale_out));
    else t.feasible = false;
  }
  for (const auto& p : parts) t.fabric += (t.fabric.empty() ? "" : "; ") + p;
  t.calibrated = g.scale_up_size > 1 && sys.scale_up_calibration.has_value();
  for (const auto op : kOps) {
    CollectiveCurve c;
    c.op = op;
    for (double b = units::kKibi; b <= 16.0 * units::kGibi * 1.0001; b *= 2) {
      const auto cost = model::collective_cost(op, units::bytes(b), g, model::CollectiveAlgorithm::automatic, Explain::off);
      if (!std::isfinite(cost.time.raw())) continue;
      c.points.push_back({b, cost.time.raw(), cost.algbw.raw(), cost.busbw.raw(), cost.algorithm});
    }
    t.curves.push_back(std::move(c));
  }
  t.sample = model::collective_cost(model::Collective::all_reduce, units::mebibytes(256), g,
                                    model::CollectiveAlgorithm::automatic, Explain::on)
                 .derivation;
  t.sample.id = "collectives." + t.key;
  t.sample.title = t.label + ": " + t.sample.title;
  return t;
}

}  // namespace

std::string algorithm_name(model::CollectiveAlgorithm a) {
  switch (a) {
    case model::CollectiveAlgorithm::automatic: return "automatic";
    case model::CollectiveAlgorithm::ring: return "ring";
    case model::CollectiveAlgorithm::tree: return "tree";
    case model::CollectiveAlgorithm::nvls: return "NVLS";
    case model::CollectiveAlgorithm::hierarchical: return "hierarchical";
    case model::CollectiveAlgorithm::collnet: return "CollNet (SHARP)";
  }
  return "?";
}

std::string collective_name(model::Collective op) {
  switch (op) {
    case model::Collective::all_reduce: return "all-reduce";
    case model::Collective::all_gather: return "all-gather";
    case model::Collective::reduce_scatter: return "reduce-scatter";
    case model::Collective::all_to_all: return "all-to-all";
    case model::Collective::send_recv: return "send/recv";
    case model::Collective::broadcast: return "broadcast";
  }
  return "collective";
}

CollectivesResult evaluate_collectives(const model::TrainingSystem& sys, const wl::Parallelism& par) {
  CollectivesResult out;
  if (sys.scale_up_calibration) out.calibration = sys.scale_up_calibration->origin;
  out.profile_used = sys.efficiency.has_value() || sys.scale_up_calibration.has_value();
  if (sys.node == nullptr) {
    out.notes.push_back("a single GPU without a node in the data: no collectives");
    return out;
  }
  const auto& node = *sys.node;
  const int domain = std::max(1, node.scale_up.domain_gpus > 0 ? node.scale_up.domain_gpus : node.gpus);
  if (domain > 1) {
    const bool tp = par.tp > 1;
    const int n = tp ? std::min(par.tp, domain) : domain;
    out.tiers.push_back(tier_of(sys, "scale_up",
                                tp ? fmt::format("NVLink: TP group of {}", n)
                                   : fmt::format("NVLink: the scale-up domain of {} (TP = 1)", n),
                                n, 1));
  } else {
    out.notes.push_back(fmt::format("{} has no scale-up domain of more than one GPU", node.info.id));
  }
  if (node.scale_out) {
    const bool dp = par.dp > 1;
    const int n = dp ? par.dp : 2;
    out.tiers.push_back(tier_of(sys, "scale_out",
                                dp ? fmt::format("scale-out: {} ranks (the DP size), one per scale-up domain", n)
                                   : std::string("scale-out: 2 ranks, one per scale-up domain (DP = 1)"),
                                n, domain));
  } else {
    out.notes.push_back(fmt::format("{} has no scale-out network in the data", node.info.id));
  }
  return out;
}

}  // namespace gpuplan::gui
