// Collective communication cost: α–β model per link tier (Hockney 1994; Thakur, Rabenseifner & Gropp, IJHPCA 2005
// for ring / tree / pairwise costs), with NCCL's algorithm structure and latency constants (NVIDIA/nccl
// src/graph/tuning.cc) and measured bus efficiencies carried by the tiers (topology.cpp): collective_cost evaluates the
// algorithms of collective_algorithms.cpp on the group and keeps the fastest; the names, bus factors and
// collective_time.
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/collective_time.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "collective_algorithms.hpp"

namespace gpuplan::model {
namespace {

using units::Bandwidth;
using units::Bytes;
using units::Seconds;

using collective_algorithms::bus_factor_text;
using collective_algorithms::Plan;
using collective_algorithms::all_to_all;
using collective_algorithms::hierarchical;
using collective_algorithms::nvls;
using collective_algorithms::ring;
using collective_algorithms::send_recv;
using collective_algorithms::tree;

std::string_view op_id(Collective op) {
  switch (op) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::all_to_all: return "all_to_all";
    case Collective::send_recv: return "send_recv";
    case Collective::broadcast: return "broadcast";
  }
  return "collective";
}

std::string_view op_title(Collective op) {
  switch (op) {
    case Collective::all_reduce: return "All-reduce";
    case Collective::all_gather: return "All-gather";
    case Collective::reduce_scatter: return "Reduce-scatter";
    case Collective::all_to_all: return "All-to-all";
    case Collective::send_recv: return "Send/recv";
    case Collective::broadcast: return "Broadcast";
  }
  return "Collective";
}

std::string_view algo_name(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::automatic: return "automatic";
    case CollectiveAlgorithm::ring: return "ring";
    case CollectiveAlgorithm::tree: return "tree";
    case CollectiveAlgorithm::nvls: return "nvls";
    case CollectiveAlgorithm::hierarchical: return "hierarchical";
    case CollectiveAlgorithm::collnet: return "collnet";
  }
  return "?";
}

}  // namespace

namespace collective_algorithms {

std::string_view bus_factor_text(Collective op) {
  switch (op) {
    case Collective::all_reduce: return "2(n−1)/n";
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all: return "(n−1)/n";
    case Collective::send_recv:
    case Collective::broadcast: return "1";
  }
  return "1";
}

}  // namespace collective_algorithms

namespace {

CollectiveCost zero_cost(Collective op, Bytes bytes, const CommGroup& g, Explain explain, std::string why) {
  CollectiveCost r;
  if (explain == Explain::on) {
    r.derivation.id = fmt::format("collective.{}", op_id(op));
    r.derivation.title = fmt::format("{} of {} over {} GPU{}", op_title(op), units::format(bytes), g.size,
                                     g.size == 1 ? "" : "s");
    r.derivation.formula = "t = 0";
    r.derivation.result = std::move(why);
    r.derivation.set(0.0, Unit::seconds);
  }
  return r;
}

/// One alternative in the automatic choice's note: its time, why it does not apply, or why only on request.
std::string plan_alternative_text(const Plan& p) {
  if (!p.valid) return fmt::format("{} n/a ({})", algo_name(p.algo), p.invalid);
  if (p.on_request_only.empty()) return fmt::format("{} {}", algo_name(p.algo), units::format(p.time()));
  return fmt::format("{} {}, on request only ({})", algo_name(p.algo), units::format(p.time()), p.on_request_only);
}

}  // namespace

double bus_factor(Collective op, int n) {
  if (n < 1) return 0.0;
  const double nn = double(n);
  switch (op) {
    case Collective::all_reduce: return 2.0 * (nn - 1.0) / nn;
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all: return (nn - 1.0) / nn;
    case Collective::send_recv:
    case Collective::broadcast: return 1.0;
  }
  return 1.0;
}

CollectiveCost collective_cost(Collective op, units::Bytes bytes, const CommGroup& group,
                               CollectiveAlgorithm algorithm, Explain explain) {
  if (group.size <= 1) return zero_cost(op, bytes, group, explain, "0 s (single rank)");
  if (bytes.raw() <= 0.0) return zero_cost(op, bytes, group, explain, "0 s (nothing to send)");
  assert(group.scale_up_size >= 1 && group.scale_up_size <= group.size && group.size % group.scale_up_size == 0 &&
         "resolve_group splits a group into whole domains");
  const int n = group.size;
  const int s = std::clamp(group.scale_up_size, 1, n);
  const int d = std::max(1, n / s);
  const bool on = explain == Explain::on;

  if (d > 1 && !group.scale_out) {
    CollectiveCost r;
    r.time = Seconds(std::numeric_limits<double>::infinity());
    r.algorithm = algorithm == CollectiveAlgorithm::automatic ? CollectiveAlgorithm::hierarchical : algorithm;
    if (on) {
      r.derivation.id = fmt::format("collective.{}", op_id(op));
      r.derivation.title = fmt::format("{} of {} over {} GPUs", op_title(op), units::format(bytes), n);
      r.derivation.formula = "infeasible";
      r.derivation.result = "not possible on this hardware";
      r.derivation.notes.push_back(fmt::format("the group spans {} scale-up domains of {} GPUs ({}) but the node has no "
                                               "scale-out link in the data",
                                               d, s, group.scale_up.name));
    }
    return r;
  }

  // A collective of exactly a measured (op, size) inside one domain runs on its own fit (calibration profile).
  LinkTier up = group.scale_up;
  Seconds t0 = group.call_latency;
  std::string t0_origin = group.call_latency_origin;
  const LinkOpFit* fit = nullptr;
  if (d == 1) {
    for (const auto& f : group.scale_up_fits) {
      if (f.op != op_id(op) || f.ranks != n || f.bus_efficiency <= 0) continue;
      fit = &f;
      up.latency = f.step_latency;
      up.bus_efficiency = f.bus_efficiency;
      up.origin = fmt::format("{} — this op's own fit on {} GPUs", group.scale_up.origin, n);
      // The fit of a p2p op is its own line (intercept and slope): it replaces η_p2p, and its intercept holds the fill.
      up.p2p_efficiency = f.bus_efficiency;
      up.p2p_fill = Bytes(0);
      up.p2p_origin = fmt::format("η_p2p: calibration profile, this op's own fit on {} GPUs | fill: 0 (the fit's "
                                  "intercept holds it)",
                                  n);
      if (f.call_latency.raw() > 0) {
        t0 = f.call_latency;
        t0_origin = fmt::format("{} — this op's own fit on {} GPUs", group.call_latency_origin, n);
      }
      break;
    }
  }
  // Qualified, not imported: serve/'s memory code has a Ctx of its own, and a unity build may put both in one unit.
  const collective_algorithms::Ctx c{op,        bytes, n,  s, d, up, group.scale_out ? &*group.scale_out : nullptr,
                                     t0,        t0_origin, on, group.max_ctas, group.collnet};

  std::vector<Plan> plans;
  if (op == Collective::all_to_all) {
    plans.push_back(all_to_all(c));
  } else if (op == Collective::send_recv) {
    plans.push_back(send_recv(c));
  } else {
    plans.push_back(ring(c));
    plans.push_back(tree(c));
    plans.push_back(nvls(c));
    plans.push_back(hierarchical(c));
    if (group.collnet) plans.push_back(collnet(c));  // NCCL considers CollNet only with NCCL_COLLNET_ENABLE=1
  }

  // Choose: the requested algorithm where it applies, else the fastest valid one (ties keep the earlier: ring first).
  const Plan* chosen = nullptr;
  std::string choice_note;
  const bool single = plans.size() == 1;
  if (!single && algorithm != CollectiveAlgorithm::automatic) {
    for (const auto& p : plans)
      if (p.algo == algorithm) {
        if (p.valid) {
          chosen = &p;
          choice_note = fmt::format("algorithm: {} (requested)", algo_name(algorithm));
        } else if (on) {
          choice_note = fmt::format("{} requested but {}; fell back to the fastest valid algorithm. ",
                                    algo_name(algorithm), p.invalid);
        }
      }
  }
  if (chosen == nullptr) {
    for (const auto& p : plans)
      if (p.valid && p.on_request_only.empty() && (chosen == nullptr || p.time() < chosen->time())) chosen = &p;
    if (on && !single) {
      std::string alts;
      for (const auto& p : plans) alts += (alts.empty() ? "" : ", ") + plan_alternative_text(p);
      choice_note += fmt::format("algorithm: {} — automatic picks the fastest valid: {}", algo_name(chosen->algo), alts);
    }
  }
  assert(chosen != nullptr);

  CollectiveCost r;
  r.time = chosen->time();
  r.algorithm = chosen->algo;
  // Inside a measured sweep of this op and size the measurement itself prices it: log-log interpolation between the
  // two measured sizes around it (NCCL's protocol switches and channel counts that the α–β line cannot follow).
  std::string measured_note;
  if (fit != nullptr && fit->curve.size() >= 2 && bytes.raw() >= fit->curve.front().first &&
      bytes.raw() <= fit->curve.back().first) {
    const auto& cv = fit->curve;
    std::size_t k = 1;
    while (k + 1 < cv.size() && cv[k].first < bytes.raw()) ++k;
    const auto& [b0, t0m] = cv[k - 1];
    const auto& [b1, t1m] = cv[k];
    const double x = std::log(bytes.raw() / b0) / std::log(b1 / b0);
    const double t = t0m * std::pow(t1m / t0m, std::clamp(x, 0.0, 1.0));
    if (on)
      measured_note = fmt::format(
          "measured on this GPU (calibration): {} between the sweep's {} ({}) and {} ({}), log-log interpolation; "
          "the α–β form above gives {}",
          units::format(Seconds(t)), units::format(units::bytes(b0)), units::format(Seconds(t0m)),
          units::format(units::bytes(b1)), units::format(Seconds(t1m)), units::format(r.time));
    r.time = Seconds(t);
  }
  r.algbw = bytes / r.time;
  r.busbw = r.algbw * bus_factor(op, n);
  if (!on) return r;

  Derivation& dv = r.derivation;
  dv.id = fmt::format("collective.{}", op_id(op));
  dv.title = fmt::format("{} of {} over {} GPUs ({})", op_title(op), units::format(bytes), n,
                         single ? (d > 1 ? "point-to-point across domains" : "point-to-point") : algo_name(r.algorithm));
  dv.formula = chosen->formula;
  dv.inputs = chosen->inputs;
  dv.result = fmt::format("{} (algbw {}, busbw {})", units::format(r.time), units::format(r.algbw),
                          units::format(r.busbw));
  if (!choice_note.empty()) dv.notes.push_back(choice_note);
  if (!measured_note.empty()) dv.notes.push_back(measured_note);
  dv.notes.push_back(fmt::format("latency {} + transfer {} ({} of the time is latency)", units::format(chosen->latency),
                                 units::format(chosen->transfer),
                                 units::format(units::Ratio(chosen->latency.raw() / r.time.raw()))));
  dv.notes.push_back(fmt::format("algbw = S / t; busbw = algbw × {} = {} (nccl-tests PERFORMANCE.md)",
                                 bus_factor_text(op), units::format(r.busbw)));
  for (const auto& note : chosen->notes) dv.notes.push_back(note);
  dv.notes.push_back("scale-up tier: " + describe(group.scale_up));
  if (d > 1 && group.scale_out) dv.notes.push_back("scale-out tier: " + describe(*group.scale_out));
  dv.children = chosen->children;
  // The hierarchical algorithm's time is the sum of its phases (each a child); a measured interpolation replaces it.
  dv.set(r.time.raw(), Unit::seconds, !dv.children.empty() && measured_note.empty() ? Fold::sum : Fold::none);
  return r;
}

units::Seconds collective_time(Collective op, units::Bytes bytes, const CommGroup& group) {
  if (group.size <= 1 || bytes.raw() <= 0) return units::Seconds(0);
  return collective_cost(op, bytes, group, CollectiveAlgorithm::automatic, Explain::off).time;
}

std::optional<Collective> parse_collective(std::string_view name) {
  for (const Collective c : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                             Collective::all_to_all, Collective::send_recv, Collective::broadcast})
    if (op_id(c) == name) return c;
  return std::nullopt;
}

}  // namespace gpuplan::model
