// Collective communication cost: α–β model per link tier (Hockney 1994; Thakur, Rabenseifner & Gropp, IJHPCA 2005
// for ring / tree / pairwise costs), with NCCL's algorithm structure and latency constants (NVIDIA/nccl
// src/graph/tuning.cc) and measured bus efficiencies carried by the tiers (topology.cpp).
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

namespace gpuplan::model {
namespace {

using units::Bandwidth;
using units::Bytes;
using units::Seconds;

// NVLS latency: NCCL models it as one constant, independent of the group size, with no base latency
// (tuning.cc @b6475625: hwLat[NVLINK][NVLS][SIMPLE] = 23 µs; `latencies = intraLat` for NCCL_ALGO_NVLS).
constexpr double kNvlsLatency_us = 23.0;
constexpr std::string_view kNvlsLatencySource =
    "NCCL hwLat NVLink NVLS/Simple, independent of n (NVIDIA/nccl src/graph/tuning.cc @b6475625)";

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
  }
  return "?";
}

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

/// One algorithm evaluated on one group: its time split into latency and transfer, and (Explain::on) its formula.
struct Plan {
  CollectiveAlgorithm algo = CollectiveAlgorithm::ring;
  bool valid = false;
  std::string invalid;  ///< why the algorithm does not apply
  Seconds latency{}, transfer{};
  std::string formula;
  std::vector<DerivationInput> inputs;
  std::vector<Derivation> children;
  std::vector<std::string> notes;
  [[nodiscard]] Seconds time() const { return latency + transfer; }
};

/// The part of an origin text that backs one number: topology.cpp writes "BW: … | α: … | η: … | gain: …" (a tier's
/// origin) and "η_p2p: … | fill: …" (its p2p_origin). A tier built by hand (tests, what-if sliders) has a free-form
/// origin, which is then cited whole.
Origin origin_part(const std::string& text, std::string_view key, OriginKind kind) {
  const std::string k = std::string(key) + ": ";
  std::size_t at = text.rfind(k, 0) == 0 ? 0 : text.find(" | " + k);
  if (at == std::string::npos) return Origin{kind, text};
  if (at != 0) at += 3;
  const std::size_t end = text.find(" | ", at);
  std::string part = text.substr(at + k.size(), end == std::string::npos ? std::string::npos : end - at - k.size());
  if (part.rfind("assumption", 0) == 0) {
    kind = OriginKind::assumption;
    if (part.rfind("assumption: ", 0) == 0) part.erase(0, 12);
  }
  return Origin{kind, std::move(part)};
}

Origin tier_origin(const LinkTier& t, std::string_view key, OriginKind kind) {
  return origin_part(t.origin, key, kind);
}

struct Ctx {
  Collective op;
  Bytes S;
  int n, s, d;  // ranks, ranks per scale-up domain, domains
  const LinkTier& up;
  const LinkTier* out;  // non-null whenever d > 1
  Seconds t0;           // per-call base latency (CommGroup::call_latency)
  const std::string& t0_origin;
  bool explain;

  [[nodiscard]] Bandwidth bw_up() const { return up.uni_per_gpu * up.bus_efficiency; }
  [[nodiscard]] Bandwidth bw_out() const { return out->uni_per_gpu * out->bus_efficiency; }
  /// The rates of NCCL's point-to-point path (send/recv, all-to-all) on each tier.
  [[nodiscard]] Bandwidth p2p_up() const { return up.uni_per_gpu * up.p2p_eta(); }
  [[nodiscard]] Bandwidth p2p_out() const { return out->uni_per_gpu * out->p2p_eta(); }
  /// Bandwidth of a ring or tree that spans domains: NCCL spreads its channels over all s NICs of the group's GPUs
  /// in a domain, and each channel crosses every domain boundary once, so the rate is the lesser of the scale-up
  /// rate and s × the per-GPU scale-out rate (tuning.cc: busBw = nChannels × bwInter when nNodes > 2).
  [[nodiscard]] Bandwidth bw_spanning() const {
    if (d <= 1) return bw_up();
    const Bandwidth across = bw_out() * double(s);
    return s > 1 ? std::min(bw_up(), across) : bw_out();
  }

  // ---- derivation inputs ----
  void add_common(Plan& p) const {
    p.inputs.push_back({"S", units::format(S), "bytes per rank as NCCL counts them", Origin::derived("caller")});
    p.inputs.push_back({"n", std::to_string(n), "ranks in the group", Origin::derived("parallel layout")});
    if (d > 1) {
      p.inputs.push_back({"s", std::to_string(s), "ranks per scale-up domain", Origin::derived("resolve_group")});
      p.inputs.push_back({"d", std::to_string(d), "scale-up domains spanned", Origin::derived("resolve_group")});
    }
  }
  void add_t0(Plan& p) const {
    p.inputs.push_back({"t₀", units::format(t0), "base latency per collective call",
                        t0_origin.empty() ? Origin::user("given with the group") : Origin::constant(t0_origin)});
  }
  void add_tier(Plan& p, const LinkTier& t, std::string_view suffix, bool gain = false) const {
    const std::string sfx(suffix);
    p.inputs.push_back({"α" + sfx, units::format(t.latency), "per-step latency, " + t.name,
                        tier_origin(t, "α", OriginKind::constant)});
    p.inputs.push_back({"BW" + sfx, units::format(t.uni_per_gpu), "per-GPU per-direction spec, " + t.name,
                        tier_origin(t, "BW", OriginKind::datasheet)});
    p.inputs.push_back({"η" + sfx, units::format_number(t.bus_efficiency, 3), "NCCL bus efficiency, " + t.name,
                        tier_origin(t, "η", OriginKind::derived)});
    if (gain)
      p.inputs.push_back({"g", units::format_number(t.in_network_gain, 3), "NVLS busbw gain over the ring",
                          tier_origin(t, "gain", OriginKind::derived)});
  }
  /// A tier as NCCL's point-to-point path sees it: α, BW, η_p2p and (with `fill`) the pipeline fill F.
  void add_p2p_tier(Plan& p, const LinkTier& t, std::string_view suffix, bool fill) const {
    const std::string sfx(suffix);
    p.inputs.push_back({"α" + sfx, units::format(t.latency), "per-step latency, " + t.name,
                        tier_origin(t, "α", OriginKind::constant)});
    p.inputs.push_back({"BW" + sfx, units::format(t.uni_per_gpu), "per-GPU per-direction spec, " + t.name,
                        tier_origin(t, "BW", OriginKind::datasheet)});
    p.inputs.push_back({"η_p2p" + sfx, units::format_number(t.p2p_eta(), 3),
                        "NCCL point-to-point efficiency, " + t.name,
                        t.p2p_efficiency > 0
                            ? origin_part(t.p2p_origin, "η_p2p",
                                          t.p2p_origin.rfind("η_p2p: calibration", 0) == 0 ? OriginKind::calibration
                                                                                           : OriginKind::measurement)
                            : Origin::assumption("the tier's bus efficiency η: no p2p figure given with this tier")});
    if (fill)
      p.inputs.push_back({"F" + sfx, units::format(t.p2p_fill), "p2p pipeline fill per rank (channels × chunk)",
                          t.p2p_origin.empty() ? Origin::assumption("none given with this tier")
                                               : origin_part(t.p2p_origin, "fill", OriginKind::constant)});
  }
};

Seconds micro(double us) { return units::microseconds(us); }

// ---- ring: NCCL's ring (pipelined; for AR a reduce-scatter pass then an all-gather pass) ----
Plan ring(const Ctx& c) {
  Plan p;
  p.algo = CollectiveAlgorithm::ring;
  if (c.op == Collective::all_to_all || c.op == Collective::send_recv) {
    p.invalid = "not a ring collective";
    return p;
  }
  p.valid = true;
  const int passes = c.op == Collective::all_reduce ? 2 : 1;
  const double factor = c.op == Collective::broadcast ? 1.0 : bus_factor(c.op, c.n);
  // A pass visits n−1 hops; d−1 of them cross a domain boundary (tuning.cc: nInterSteps vs intra steps).
  const int inter = c.d - 1, intra = (c.n - 1) - inter;
  p.latency = c.t0 + c.up.latency * double(passes * intra) +
              (inter > 0 ? c.out->latency * double(passes * inter) : Seconds(0));
  p.transfer = c.S * factor / c.bw_spanning();
  if (!c.explain) return p;
  const std::string pass = passes == 2 ? "2" : "";
  const std::string bf(bus_factor_text(c.op));
  c.add_common(p);
  c.add_t0(p);
  if (c.d <= 1) {
    p.formula = fmt::format("t = t₀ + {}(n−1)·α + S·{} / (BW·η)", pass, bf);
    c.add_tier(p, c.up, "");
  } else if (c.s <= 1) {
    p.formula = fmt::format("t = t₀ + {}(n−1)·α_out + S·{} / (BW_out·η_out)", pass, bf);
    c.add_tier(p, *c.out, "_out");
  } else {
    p.formula = fmt::format("t = t₀ + {}[(n−d)·α_up + (d−1)·α_out] + S·{} / min(BW_up·η_up, s·BW_out·η_out)", pass,
                            bf);
    c.add_tier(p, c.up, "_up");
    c.add_tier(p, *c.out, "_out");
    p.notes.push_back(fmt::format("a ring spanning domains runs its channels over all {} NICs of a domain: rate {} "
                                  "(scale-up {}, {} × scale-out {})",
                                  c.s, units::format(c.bw_spanning()), units::format(c.bw_up()), c.s,
                                  units::format(c.bw_out())));
  }
  return p;
}

// ---- tree: NCCL double binary tree across domains, a chain inside each domain (all-reduce only) ----
Plan tree(const Ctx& c) {
  Plan p;
  p.algo = CollectiveAlgorithm::tree;
  if (c.op != Collective::all_reduce) {
    p.invalid = "NCCL runs trees for all-reduce only";
    return p;
  }
  p.valid = true;
  // tuning.cc: latency = 2·((nRanks/nNodes − 1)·intraLat + log2(nNodes)·interLat); busbw ≈ ring's, but algbw =
  // busbw/2 (`ratio = .5`), i.e. each rank moves 2·S instead of the ring's 2(n−1)/n·S.
  const double log2d = c.d > 1 ? std::ceil(std::log2(double(c.d))) : 0.0;
  p.latency = c.t0 + c.up.latency * (2.0 * double(c.s - 1)) +
              (c.d > 1 ? c.out->latency * (2.0 * log2d) : Seconds(0));
  p.transfer = c.S * 2.0 / c.bw_spanning();
  if (!c.explain) return p;
  c.add_common(p);
  c.add_t0(p);
  if (c.d <= 1) {
    p.formula = "t = t₀ + 2(n−1)·α + 2·S / (BW·η)";
    c.add_tier(p, c.up, "");
    p.notes.push_back("inside one domain NCCL's tree is a chain: no latency advantage over the ring");
  } else if (c.s <= 1) {
    p.formula = "t = t₀ + 2·⌈log₂ d⌉·α_out + 2·S / (BW_out·η_out)";
    c.add_tier(p, *c.out, "_out");
  } else {
    p.formula = "t = t₀ + 2[(s−1)·α_up + ⌈log₂ d⌉·α_out] + 2·S / min(BW_up·η_up, s·BW_out·η_out)";
    c.add_tier(p, c.up, "_up");
    c.add_tier(p, *c.out, "_out");
  }
  return p;
}

// ---- NVLS: in-switch reduction (NVLink SHARP), all-reduce inside one NVSwitch domain ----
Plan nvls(const Ctx& c) {
  Plan p;
  p.algo = CollectiveAlgorithm::nvls;
  if (c.op != Collective::all_reduce) {
    p.invalid = "NVLS is modelled for all-reduce only";
    return p;
  }
  if (c.d > 1) {
    p.invalid = "the group spans scale-up domains (NVLS needs one NVSwitch domain)";
    return p;
  }
  if (!c.up.in_network_reduction) {
    p.invalid = "the scale-up fabric has no in-network reduction";
    return p;
  }
  p.valid = true;
  p.latency = micro(kNvlsLatency_us);
  p.transfer = c.S * bus_factor(c.op, c.n) / (c.bw_up() * c.up.in_network_gain);
  if (!c.explain) return p;
  c.add_common(p);
  p.formula = "t = t_nvls + S·2(n−1)/n / (BW·η·g)";
  p.inputs.push_back({"t_nvls", units::format(micro(kNvlsLatency_us)), "NVLS latency per call",
                      Origin::constant(std::string(kNvlsLatencySource))});
  c.add_tier(p, c.up, "", true);
  return p;
}

Derivation phase(std::string id, std::string title, std::string formula, Seconds t) {
  Derivation d;
  d.id = std::move(id);
  d.title = std::move(title);
  d.formula = std::move(formula);
  d.result = units::format(t);
  return d;
}

// ---- hierarchical: inside-domain phase(s) on the scale-up tier, across-domain phase on 1/s of the data ----
Plan hierarchical(const Ctx& c) {
  Plan p;
  p.algo = CollectiveAlgorithm::hierarchical;
  if (c.d <= 1) {
    p.invalid = "the group lies inside one scale-up domain";
    return p;
  }
  if (c.s <= 1) {
    p.invalid = "one rank per domain: it is the ring over the scale-out tier";
    return p;
  }
  if (c.op != Collective::all_reduce && c.op != Collective::all_gather && c.op != Collective::reduce_scatter) {
    p.invalid = "modelled for all-reduce, all-gather and reduce-scatter";
    return p;
  }
  p.valid = true;
  const Seconds t0 = c.t0;
  const double s = double(c.s), d = double(c.d);
  // Inside the domain: ring over s ranks on the full buffer S. Across: the s rails each run a ring over d ranks on
  // their S/s share, in parallel, on their own NICs.
  const Seconds up_lat = t0 + c.up.latency * (s - 1.0);
  const Seconds up_xfer = c.S * ((s - 1.0) / s) / c.bw_up();
  const Bytes share = c.S / s;
  const double out_passes = c.op == Collective::all_reduce ? 2.0 : 1.0;
  const Seconds out_lat = t0 + c.out->latency * (out_passes * (d - 1.0));
  const Seconds out_xfer = share * (out_passes * (d - 1.0) / d) / c.bw_out();
  const double up_phases = c.op == Collective::all_reduce ? 2.0 : 1.0;
  p.latency = up_lat * up_phases + out_lat;
  p.transfer = up_xfer * up_phases + out_xfer;
  if (!c.explain) return p;
  c.add_common(p);
  c.add_t0(p);
  c.add_tier(p, c.up, "_up");
  c.add_tier(p, *c.out, "_out");
  const std::string up_f = "t₀ + (s−1)·α_up + S·(s−1)/s / (BW_up·η_up)";
  if (c.op == Collective::all_reduce) {
    p.formula = "t = 2·[t₀ + (s−1)·α_up + S·(s−1)/s / (BW_up·η_up)] + t₀ + 2(d−1)·α_out + (S/s)·2(d−1)/d / "
                "(BW_out·η_out)";
    p.children.push_back(phase("collective.hier.reduce_scatter_up", "Reduce-scatter inside each domain",
                               "t = " + up_f, up_lat + up_xfer));
    p.children.push_back(phase("collective.hier.all_reduce_out", "All-reduce of S/s across domains, one per rail",
                               "t = t₀ + 2(d−1)·α_out + (S/s)·2(d−1)/d / (BW_out·η_out)", out_lat + out_xfer));
    p.children.push_back(phase("collective.hier.all_gather_up", "All-gather inside each domain", "t = " + up_f,
                               up_lat + up_xfer));
  } else {
    const bool ag = c.op == Collective::all_gather;
    p.formula = "t = t₀ + (d−1)·α_out + (S/s)·(d−1)/d / (BW_out·η_out) + t₀ + (s−1)·α_up + S·(s−1)/s / (BW_up·η_up)";
    Derivation out_phase = phase(ag ? "collective.hier.all_gather_out" : "collective.hier.reduce_scatter_out",
                                 ag ? "All-gather of S/s across domains, one per rail"
                                    : "Reduce-scatter of S/s across domains, one per rail",
                                 "t = t₀ + (d−1)·α_out + (S/s)·(d−1)/d / (BW_out·η_out)", out_lat + out_xfer);
    Derivation up_phase = phase(ag ? "collective.hier.all_gather_up" : "collective.hier.reduce_scatter_up",
                                ag ? "All-gather inside each domain" : "Reduce-scatter inside each domain",
                                "t = " + up_f, up_lat + up_xfer);
    if (ag) {
      p.children.push_back(std::move(out_phase));
      p.children.push_back(std::move(up_phase));
    } else {
      p.children.push_back(std::move(up_phase));
      p.children.push_back(std::move(out_phase));
    }
  }
  return p;
}

// ---- all-to-all: NCCL runs it as n−1 grouped send/recv pairs ----
Plan all_to_all(const Ctx& c) {
  Plan p;
  p.algo = c.d > 1 ? CollectiveAlgorithm::hierarchical : CollectiveAlgorithm::ring;
  p.valid = true;
  const double n = double(c.n), s = double(c.s);
  // The sends are issued in one group, so their latencies overlap: one step of the slowest tier crossed.
  Seconds alpha = c.up.latency;
  if (c.d > 1) alpha = c.s > 1 ? std::max(c.up.latency, c.out->latency) : c.out->latency;
  p.latency = c.t0 + alpha;
  if (c.d <= 1) {
    // Each peer's S/n runs on its p2pnChannels/n channels; the first chunk of each channel costs a second pass
    // (Hockney's pipeline fill): (n−1)/n of min(S, F) on top of the (n−1)/n of S that crosses the link.
    p.transfer = (c.S + std::min(c.S, c.up.p2p_fill)) * ((n - 1.0) / n) / c.p2p_up();
  } else {
    // (s−1)/n of each rank's buffer goes to peers in its domain, (n−s)/n over its NIC. NVLink and NIC transfers run
    // concurrently on separate links, so the slower tier sets the time (max, not sum); NCCL's PXN forwarding of
    // remote traffic over NVLink to the rail's NIC adds NVLink load that this leaves out. Across nodes NCCL uses its
    // 128 KiB network chunk for every peer (init.cc computeBuffSizes): no NVLink fill is modelled.
    const Seconds t_up = c.S * ((s - 1.0) / n) / c.p2p_up();
    const Seconds t_out = c.S * ((n - s) / n) / c.p2p_out();
    p.transfer = std::max(t_up, t_out);
  }
  if (!c.explain) return p;
  c.add_common(p);
  c.add_t0(p);
  if (c.d <= 1) {
    p.formula = "t = t₀ + α + [S + min(S, F)]·(n−1)/n / (BW·η_p2p)";
    c.add_p2p_tier(p, c.up, "", true);
    p.notes.push_back(fmt::format(
        "pipeline fill: NCCL moves each p2p channel's first chunk into the peer's buffer before the peer copies it "
        "out; (n−1)/n × min(S, F) = {} of extra traffic at the p2p rate {}",
        units::format(std::min(c.S, c.up.p2p_fill) * ((n - 1.0) / n)), units::format(c.p2p_up())));
  } else if (c.s <= 1) {
    p.formula = "t = t₀ + α_out + S·(n−1)/n / (BW_out·η_p2p_out)";
    c.add_p2p_tier(p, *c.out, "_out", false);
  } else {
    p.formula =
        "t = t₀ + max(α_up, α_out) + max(S·(s−1)/n / (BW_up·η_p2p_up), S·(n−s)/n / (BW_out·η_p2p_out))";
    c.add_p2p_tier(p, c.up, "_up", false);
    c.add_p2p_tier(p, *c.out, "_out", false);
  }
  p.notes.push_back("NCCL all-to-all = n−1 grouped send/recv pairs issued together: latencies overlap, and the "
                    "scale-up and scale-out shares move concurrently, so the slower tier dominates");
  p.notes.push_back("η_p2p, not the ring's η: NCCL runs send/recv on its own p2p channels and chunks "
                    "(src/enqueue.cc addP2pToPlan)");
  return p;
}

// ---- send/recv: one message over the tier it crosses ----
Plan send_recv(const Ctx& c) {
  Plan p;
  p.algo = c.d > 1 ? CollectiveAlgorithm::hierarchical : CollectiveAlgorithm::ring;
  p.valid = true;
  const LinkTier& t = c.d > 1 ? *c.out : c.up;
  p.latency = c.t0 + t.latency;
  // The peer's share of the p2p channels is 1/n of them: its fill is min(S, F/n). Across domains NCCL's network
  // chunk applies (no fill modelled).
  const Bytes fill = c.d > 1 ? Bytes(0) : std::min(c.S, t.p2p_fill / double(c.n));
  p.transfer = (c.S + fill) / (t.uni_per_gpu * t.p2p_eta());
  if (!c.explain) return p;
  c.add_common(p);
  c.add_t0(p);
  p.formula = c.d > 1 ? "t = t₀ + α + S / (BW·η_p2p)" : "t = t₀ + α + [S + min(S, F/n)] / (BW·η_p2p)";
  c.add_p2p_tier(p, t, "", c.d <= 1);
  p.notes.push_back(c.d > 1 ? "the peers sit in different scale-up domains: the message crosses the scale-out tier"
                            : "the peers share a scale-up domain");
  p.notes.push_back("η_p2p, not the ring's η: NCCL runs send/recv on its own p2p channels and chunks "
                    "(src/enqueue.cc addP2pToPlan)");
  return p;
}

CollectiveCost zero_cost(Collective op, Bytes bytes, const CommGroup& g, Explain explain, std::string why) {
  CollectiveCost r;
  if (explain == Explain::on) {
    r.derivation.id = fmt::format("collective.{}", op_id(op));
    r.derivation.title = fmt::format("{} of {} over {} GPU{}", op_title(op), units::format(bytes), g.size,
                                     g.size == 1 ? "" : "s");
    r.derivation.formula = "t = 0";
    r.derivation.result = std::move(why);
  }
  return r;
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
  const Ctx c{op, bytes, n, s, d, up, group.scale_out ? &*group.scale_out : nullptr, t0, t0_origin, on};

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
      if (p.valid && (chosen == nullptr || p.time() < chosen->time())) chosen = &p;
    if (on && !single) {
      std::string alts;
      for (const auto& p : plans) {
        if (!alts.empty()) alts += ", ";
        alts += p.valid ? fmt::format("{} {}", algo_name(p.algo), units::format(p.time()))
                        : fmt::format("{} n/a ({})", algo_name(p.algo), p.invalid);
      }
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
