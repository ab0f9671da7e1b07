// The collective algorithms (collective_algorithms.hpp) on the α–β model per link tier (Hockney 1994; Thakur,
// Rabenseifner & Gropp, IJHPCA 2005 for ring / tree / pairwise costs), with NCCL's algorithm structure and latency
// constants (NVIDIA/nccl src/graph/tuning.cc): ring, double binary tree, NVLS, hierarchical, all-to-all, send/recv.
// collective_cost (collectives.cpp) evaluates them and keeps the fastest.
#include "collective_algorithms.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::model::collective_algorithms {

namespace {

// NVLS latency: NCCL models it as one constant, independent of the group size, with no base latency
// (tuning.cc @b6475625: hwLat[NVLINK][NVLS][SIMPLE] = 23 µs; `latencies = intraLat` for NCCL_ALGO_NVLS).
constexpr double kNvlsLatency_us = 23.0;
constexpr std::string_view kNvlsLatencySource =
    "NCCL hwLat NVLink NVLS/Simple, independent of n (NVIDIA/nccl src/graph/tuning.cc @b6475625)";

// CollNet (SHARP): NCCL's tuning model (tuning.cc @5067397c ncclTopoTuneModel) takes 0.85 of the CollNet Direct
// all-reduce bandwidth on compute capability 9.0 and later (`if (minCompCap >= 90) busBw *= .85`) and 0.9 of the
// network rate for its reduce-scatter and all-gather (`ppn * std::min(bwIntra, bwInter * 0.9f)`), and charges the
// network latency once (`2·(nRanks/nNodes − 1)·intraLat + interLat`: the switches reduce, no ring steps across).
constexpr double kCollnetAllReduceFactor = 0.85;
constexpr double kCollnetGatherScatterFactor = 0.9;
constexpr std::string_view kCollnetSource =
    "NCCL's CollNet Direct bandwidth factors: all-reduce 0.85 on compute capability ≥ 9.0, reduce-scatter / all-gather "
    "0.9 of the network rate (NVIDIA/nccl src/graph/tuning.cc @5067397c)";

Seconds micro(double us) { return units::microseconds(us); }

Derivation phase(std::string id, std::string title, std::string formula, Seconds t) {
  Derivation d;
  d.id = std::move(id);
  d.title = std::move(title);
  d.formula = std::move(formula);
  d.set(t.raw(), Unit::seconds);
  return d;
}

}  // namespace

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
  // NCCL runs all-gather and reduce-scatter as rings only, across nodes as inside one (tuning.cc at v2.8.3-1 and
  // v2.9.9-1: `if (coll != ncclFuncAllReduce && a != NCCL_ALGO_RING) continue;`). Today's NCCL (5067397c, 2.30)
  // adds PAT, for one GPU per node only (ncclPatEnable), and NVLS / CollNet Direct, which it zeroes across nodes
  // unless a CollNet (SHARP) plugin offers iallgather / ireducescatter. No release runs this two-level form for a
  // plain call, so `automatic` leaves it out; it stays a what-if on request (a framework-level two-step scheme).
  if (c.op != Collective::all_reduce)
    p.on_request_only =
        "NCCL runs all-gather and reduce-scatter across domains as rings: tuning.cc @v2.9.9-1, @5067397c";
  const Seconds t0 = c.t0;
  const double s = double(c.s), d = double(c.d);
  // Inside the domain: ring over s ranks on the full buffer S. Across: the s rails each run a ring over d ranks on
  // their S/s share, in parallel, on their own NICs.
  const Seconds up_lat = t0 + c.up.latency * (s - 1.0);
  const Seconds up_xfer = c.S * ((s - 1.0) / s) / c.bw_up();
  const Bytes share = c.S / s;
  const double out_passes = c.op == Collective::all_reduce ? 2.0 : 1.0;
  const Seconds out_lat = t0 + c.out->latency * (out_passes * (d - 1.0));
  // With the communicator's CTAs capped at c < s only c rails carry the across phase (one NIC per channel).
  const double rails = c.ctas > 0 ? std::min(1.0, double(c.ctas) / s) : 1.0;
  const Seconds out_xfer = share * (out_passes * (d - 1.0) / d) / (c.bw_out() * rails);
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

// ---- CollNet: SHARP in the scale-out switches (NCCL_COLLNET_ENABLE, nccl-rdma-sharp-plugins) ----
// All-reduce: each domain reduces inside (a reduce-scatter over its s ranks, at the NVLS rate where the switch reduces:
// NCCL runs NVLS across nodes only with CollNet, enqueue.cc updateCollCostTable), each rank's 1/s share goes up the
// switch tree once and comes back reduced (every byte crosses the rank's NIC once each way, against 2(d−1)/d for a
// ring over d domains), then the domain gathers. Reduce-scatter and all-gather (NCCL 2.20.3, "Add support for
// ReduceScatter and AllGather using Collnet"; one GPU per NIC): the rail's S/s goes into the switch tree whole (a
// reduce-scatter; a ring sends (d−1)/d of it) or arrives multicast ((d−1)/d of it, as a ring's), in one network step
// instead of d − 1: a latency gain, no byte saved. NCCL pipelines the domain's phases with the network's chunk by
// chunk, so the slower of the two sets the rate (tuning.cc prices CollNet and NVLS across nodes at the lesser of the
// intra- and inter-node rates: `std::min(bwIntra, bwInter * 0.9f)`, `std::min({intraBw, interBw, ...})`).
Plan collnet(const Ctx& c) {
  Plan p;
  p.algo = CollectiveAlgorithm::collnet;
  const bool ar = c.op == Collective::all_reduce;
  if (!ar && c.op != Collective::reduce_scatter && c.op != Collective::all_gather) {
    p.invalid = "CollNet runs all-reduce, reduce-scatter and all-gather";
    return p;
  }
  if (c.d <= 1) {
    p.invalid = "the group lies inside one scale-up domain (no scale-out switch to reduce in)";
    return p;
  }
  if (!c.out->in_network_reduction) {
    p.invalid = "the scale-out fabric has no in-network reduction";
    return p;
  }
  p.valid = true;
  const double s = double(c.s), d = double(c.d);
  const bool nvls_up = ar && c.s > 1 && c.up.in_network_reduction;
  const double g = nvls_up ? c.up.in_network_gain : 1.0;
  const double up_phases = ar ? 2.0 : 1.0;  // reduce-scatter and all-gather inside the domain, or one of them
  // Inside the domain: (s−1)/s of S per phase at the scale-up rate (× the NVLS gain g for an all-reduce where the
  // switch reduces), s − 1 NVLink steps per phase (tuning.cc: 2·(nRanks/nNodes − 1)·intraLat for all-reduce).
  const Seconds up_lat = c.s > 1 ? c.up.latency * (up_phases * (s - 1.0)) : Seconds(0);
  const Seconds up_xfer = c.s > 1 ? c.S * (up_phases * (s - 1.0) / s) / (c.bw_up() * g) : Seconds(0);
  // Across: the rail's S/s (an all-gather receives (d−1)/d of it) at κ of the NIC's bus rate, one network step. With
  // the communicator's CTAs capped below s only that many rails carry it (as for the hierarchical algorithm).
  const double kappa = ar ? kCollnetAllReduceFactor : kCollnetGatherScatterFactor;
  const double share = c.op == Collective::all_gather ? (d - 1.0) / d : 1.0;
  const double rails = c.ctas > 0 ? std::min(1.0, double(c.ctas) / s) : 1.0;
  const Seconds out_lat = c.out->latency;
  const Seconds out_xfer = (c.S / s) * share / (c.bw_out() * kappa * rails);
  p.latency = c.t0 + up_lat + out_lat;
  p.transfer = std::max(up_xfer, out_xfer);
  if (!c.explain) return p;
  c.add_common(p);
  c.add_t0(p);
  if (c.s > 1) c.add_tier(p, c.up, "_up", nvls_up);
  c.add_tier(p, *c.out, "_out");
  p.inputs.push_back({"κ", units::format_number(kappa, 3), "CollNet's share of the network rate",
                      Origin::constant(std::string(kCollnetSource))});
  const std::string gtxt = nvls_up ? "·g" : "";
  const std::string k = ar ? "2" : "";
  const std::string up_f = fmt::format("S·{}(s−1)/s / (BW_up·η_up{})", k, gtxt);
  const std::string out_f = c.op == Collective::all_gather ? "(S/s)·(d−1)/d / (BW_out·η_out·κ)"
                                                           : "(S/s) / (BW_out·η_out·κ)";
  p.formula = c.s > 1 ? fmt::format("t = t₀ + {}(s−1)·α_up + α_out + max({}, {})", k, up_f, out_f)
                      : fmt::format("t = t₀ + α_out + {}", out_f);
  if (c.s > 1)
    p.notes.push_back(fmt::format("pipelined: inside the domain {} ({}), across {} ({}); the slower sets the time",
                                  units::format(up_xfer), up_f, units::format(out_xfer), out_f));
  if (ar)
    p.notes.push_back(fmt::format("SHARP: each rank's NIC carries S/s = {} each way; a ring over {} domains {} "
                                  "(2(d−1)/d of S/s)",
                                  units::format(c.S / s), c.d, units::format(c.S / s * (2.0 * (d - 1.0) / d))));
  else
    p.notes.push_back(fmt::format("SHARP: one network step (α_out) where a ring over {} domains takes {}; the bytes "
                                  "are a ring's (reduce-scatter: S/s in, against (d−1)/d of it)",
                                  c.d, c.d - 1));
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
  p.transfer = (c.S + fill) / ((c.d > 1 ? t.uni_per_gpu : c.raw_up()) * t.p2p_eta());
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

}  // namespace gpuplan::model::collective_algorithms
