#include "gpuplan/model/topology.hpp"

#include <algorithm>
#include <cassert>
#include <string_view>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::model {
namespace {

using units::Bandwidth;
using units::Seconds;

// ---- per-step latency α of one NCCL ring step, by the hardware a step crosses ----
// NCCL's own cost model (NVIDIA/nccl src/graph/tuning.cc @b6475625, table `hwLat`, about lines 65-78): per-step
// latency of the Ring algorithm with the Simple protocol (the one that carries large messages) is 3.4 µs over
// NVLink, 5.7 µs over PCIe and 14 µs over the network; its base latency per call (below) becomes the group's
// call_latency. A link file's `latency_us` is the wire/port
// latency (IB HDR ~0.6 µs), which a collective step includes, so it only raises α when it is larger.
struct LatencyRow {
  hw::LinkType type;
  double alpha_us;
  bool assumed;  // true where no NCCL constant covers this link type
  std::string_view source;
};
constexpr std::string_view kNcclHwLat =
    "NCCL tuning model per ring step (NVIDIA/nccl src/graph/tuning.cc @b6475625, hwLat Ring/Simple)";
constexpr LatencyRow kLatency[] = {
    {hw::LinkType::nvlink, 3.4, false, "NVLink"},
    {hw::LinkType::nvswitch, 3.4, false, "NVLink"},
    {hw::LinkType::c2c, 3.4, false, "NVLink"},
    {hw::LinkType::xgmi, 3.4, true, "NVLink value assumed for xGMI (RCCL keeps NCCL's tuning model; no own figure)"},
    {hw::LinkType::pcie, 5.7, false, "PCI"},
    {hw::LinkType::infiniband, 14.0, false, "NET"},
    {hw::LinkType::ethernet, 14.0, false, "NET"},
};

// NCCL's per-call base latency of the Ring/Simple algorithm (tuning.cc @b6475625, `baseLat`, about line 57):
// kernel launch and setup, paid once per collective call on top of the per-step α of the tiers.
constexpr double kCallLatency_us = 8.4;
constexpr std::string_view kCallLatencySource =
    "NCCL baseLat Ring/Simple, once per call (NVIDIA/nccl src/graph/tuning.cc @b6475625)";

// ---- bus efficiency η: asymptotic NCCL busbw / per-GPU uni spec, per link generation ----
struct EfficiencyRow {
  hw::LinkType type;
  std::string_view generation;  // "" = any generation of this type
  double eta;
  std::string_view source;
};
constexpr EfficiencyRow kEfficiency[] = {
    {hw::LinkType::nvlink, "3", 0.78,
     "measured: 8×A100 nccl-tests all-reduce busbw 234.89 GB/s of 300 GB/s (stas00/ml-engineering@744d01e "
     "network/README.md [S2]); NCCL's own model capped A100 busbw at 235 GB/s (NVIDIA/nccl src/graph/tuning.cc "
     "@01afd20, compCap80)"},
    {hw::LinkType::nvlink, "4", 0.81,
     "measured: 8×H200 ring all-reduce busbw 365.6 GB/s of 450 GB/s at 8 GiB, NVLS off; all-gather/reduce-scatter "
     "361-363 GB/s (S2; reference/hardware_facts.json interconnects.sharp_measured)"},
    {hw::LinkType::nvlink, "5", 0.76,
     "measured: 8×B200 ring all-reduce busbw 682.2 GB/s of 900 GB/s; GB200 NVL72 680 of 900 (S2, sharp_measured)"},
    {hw::LinkType::xgmi, "", 0.70,
     "measured: 8×MI300X all-reduce busbw 312.9 GB/s of 448 GB/s at 4 GiB (S2 network/README.md)"},
    {hw::LinkType::infiniband, "", 0.96,
     "NCCL maintainers: 24 GB/s busbw per 200 Gb/s NIC, 12 per 100 Gb/s (NVIDIA/nccl-tests#119), ~48 GB/s per "
     "400 Gb/s ConnectX-7 (NVIDIA/nccl-tests#319)"},
    {hw::LinkType::ethernet, "", 0.96,
     "assumed equal to InfiniBand (NVIDIA/nccl-tests#119, #319); AWS EFA 8×400 Gb/s reached 381.8 of 400 GB/s "
     "(S2, 4×8 B200); RoCE fabrics can fall well short"},
};
constexpr double kDefaultEfficiency = 0.80;
constexpr std::string_view kDefaultEfficiencySource =
    "assumption: NCCL ring busbw is about 80% of the NVLink uni spec (S2; hardware_facts.md gotcha 8); not measured "
    "for this link";

// ---- point-to-point: efficiency η_p2p and pipeline fill of NCCL's send/recv (all-to-all = grouped send/recv) ----
// NCCL stripes a p2p message over its own channels, not the ring's (NVIDIA/nccl src/enqueue.cc addP2pToPlan): a
// communicator has p2pnChannels of them (NCCL 2.28.9 on 2×H100 SXM5 logs "24 coll channels, …, 32 p2p channels, 32
// p2p channels per peer"), a peer of an n-rank communicator gets p2pnChannels/n (nChannelsMin halved while
// nChannelsMin·nRanks > p2pnChannels), and inside one NVLink domain a chunk is NCCL_P2P_NVL_CHUNKSIZE = 512 KiB
// (src/init.cc computeBuffSizes). The sender writes a chunk into the peer's FIFO and the peer copies it out, so the
// first chunk of every channel is paid twice: a pipeline fill of p2pnChannels × 512 KiB = 16 MiB per rank, (n−1)/n
// of it over the link in an all-to-all. With that fill, NCCL's all-to-all on 2×H100 SXM5 runs at η_p2p = 0.659 of the
// NVLink spec, against 0.81 for the ring on the same link.
constexpr double kP2pEfficiencyNvlink4 = 0.659;
constexpr std::string_view kP2pEfficiencySource =
    "measured: NCCL all-to-all (torch all_to_all_single, EP 2) on 2×H100 SXM5, equal splits 1-512 MiB per rank, CUDA "
    "graph up to 64 MiB and back-to-back above, fitted with the 16 MiB p2p fill "
    "(data/validation/measured/h100-sxm5-80gb/moe_alltoall.json, scripts/measure/fit_p2p_efficiency.py)";
constexpr double kP2pFill_MiB = 16.0;  // p2pnChannels 32 × NCCL_P2P_NVL_CHUNKSIZE 512 KiB
constexpr std::string_view kP2pFillSource =
    "NCCL p2pnChannels 32 (logged by NCCL 2.28.9 on 2×H100 SXM5, "
    "data/validation/measured/h100-sxm5-80gb/log_moe_call3.txt) × NCCL_P2P_NVL_CHUNKSIZE 512 KiB (NVIDIA/nccl "
    "src/init.cc @5067397c): one chunk per channel written into the peer's buffer before it is copied out";

// ---- in-switch reduction (NVLS) gain over the ring, measured at a reference group size ----
// Per GPU and direction, NVLS all-reduce moves S·(1 + 1/n) (the switch reduces the loads and multicasts the
// stores) against S·2(n−1)/n for a ring, so its ideal busbw gain is f(n) = 2(n−1)/(n+1). The measured gain sits
// at about 0.83× f(8) on 8×H200 and 0.79× on 8×B200, and that ratio holds for 5-7 GPUs (S2 NVLS ramp: 414/436/460
// GB/s on 5/6/7 H200), so a group of m < n_ref scales the measured gain by f(m)/f(n_ref). It is not extrapolated
// upward: a 72-GPU NVL72 group measured 850/680 = 1.25 (GTC25 slide via S2), not the 1.53 the ideal would give.
struct NvlsRow {
  std::string_view switch_generation;
  double gain;
  int ref_ranks;
  std::string_view source;
};
constexpr NvlsRow kNvls[] = {
    {"3", 473.1 / 365.6, 8,
     "measured: 8×H200 all-reduce busbw 473.1 GB/s NVLS vs 365.6 ring at 8 GiB (S2; sharp_measured)"},
    {"4", 838.0 / 682.2, 8,
     "measured: 8×B200 all-reduce busbw 838.0 GB/s NVLS vs 682.2 ring (S2; sharp_measured); NVL72 850 vs 680"},
};
// One CTA's share of an NVLink link (set_per_cta), measured: 2 × H200 (NVLink 4, 25 GB/s per link and direction),
// NCCL 2.28.9, 1 GiB reduce-scatter / all-gather at max_ctas 8: 135.7 / 116.5 GB/s busbw, a mean of 15.76 GB/s per
// CTA = 0.778 × 25 GB/s × η 0.81. Linear in the CTA count from 1 to 8 (18.4 / 15.2 GB/s at one CTA).
constexpr double kCtaShareOfLink = 0.778;
constexpr std::string_view kCtaShareSource =
    "measured: 2×H200 NCCL 2.28.9 reduce-scatter/all-gather at 8 CTAs, 15.76 GB/s busbw per CTA "
    "(data/validation/measured/h200-sxm-141gb/nccl_cta_cap_2gpu.json); other NVLink generations: the same share of "
    "their link (assumption: NCCL's rule of 2 CTAs per NVLink to saturate it, NVIDIA/nccl issue #1703, is per link)";
double nvls_ideal(int n) { return 2.0 * double(n - 1) / double(n + 1); }

const LatencyRow* latency_row(hw::LinkType t) {
  for (const auto& r : kLatency)
    if (r.type == t) return &r;
  return nullptr;
}

const EfficiencyRow* efficiency_row(const hw::LinkSpec& l) {
  for (const auto& r : kEfficiency)
    if (r.type == l.type && (r.generation.empty() || r.generation == l.generation)) return &r;
  return nullptr;
}

/// α for a tier whose steps cross `link`: NCCL's per-step constant, raised to the file's wire latency if larger.
std::pair<Seconds, std::string> step_latency(const hw::LinkSpec* link, hw::LinkType fallback_type) {
  const hw::LinkType type = link ? link->type : fallback_type;
  const LatencyRow* row = latency_row(type);
  const double nccl_us = row ? row->alpha_us : 14.0;
  std::string why = row ? (row->assumed ? fmt::format("assumption: {} µs, {}", nccl_us, row->source)
                                        : fmt::format("{} µs {} ({})", nccl_us, row->source, kNcclHwLat))
                        : fmt::format("assumption: {} µs (network value of {})", nccl_us, kNcclHwLat);
  Seconds alpha = units::microseconds(nccl_us);
  if (link && link->latency) {
    if (*link->latency > alpha) {
      alpha = *link->latency;
      why = "link latency " + link->info.cite("/latency_us") + " (exceeds the NCCL step constant)";
    } else {
      why += fmt::format("; wire latency {} from {} is included in it", units::format(*link->latency),
                         link->info.cite("/latency_us"));
    }
  }
  return {alpha, why};
}

std::pair<double, std::string> bus_efficiency(const hw::LinkSpec* link) {
  if (link) {
    if (const EfficiencyRow* r = efficiency_row(*link)) return {r->eta, std::string(r->source)};
  }
  return {kDefaultEfficiency, std::string(kDefaultEfficiencySource)};
}

bool nvlink_class(hw::LinkType t) {
  return t == hw::LinkType::nvlink || t == hw::LinkType::nvswitch || t == hw::LinkType::c2c;
}

/// η_p2p and the p2p fill of a tier whose link is `link` and whose ring efficiency is `eta`: NVLink 4 measured; other
/// scale-up links carry NVLink 4's measured p2p/ring ratio (assumption); over the network a ring step is itself a
/// proxy-driven p2p send through the same NIC, so the NIC's η holds for both (assumption). The fill is NCCL's
/// NVLink chunk; PCIe, xGMI and network chunks (128 KiB in NCCL) are not modelled.
void set_p2p(LinkTier& t, const hw::LinkSpec* link, bool scale_out) {
  const double ring4 = [] {
    for (const auto& r : kEfficiency)
      if (r.type == hw::LinkType::nvlink && r.generation == "4") return r.eta;
    return kDefaultEfficiency;
  }();
  std::string eta_origin;
  if (scale_out) {
    t.p2p_efficiency = t.bus_efficiency;
    eta_origin = "assumption: the NIC's η (a ring step across the network is itself a p2p send through the proxy)";
  } else if (link && link->type == hw::LinkType::nvlink && link->generation == "4") {
    t.p2p_efficiency = kP2pEfficiencyNvlink4;
    eta_origin = std::string(kP2pEfficiencySource);
  } else {
    t.p2p_efficiency = t.bus_efficiency * (kP2pEfficiencyNvlink4 / ring4);
    eta_origin = fmt::format("assumption: η × {:.3g}, NVLink 4's measured p2p/ring ratio {} / {} carried to this link "
                             "(not measured here)",
                             kP2pEfficiencyNvlink4 / ring4, kP2pEfficiencyNvlink4, ring4);
  }
  std::string fill_origin;
  if (!scale_out && link && nvlink_class(link->type)) {
    t.p2p_fill = units::mebibytes(kP2pFill_MiB);
    fill_origin = std::string(kP2pFillSource);
    if (!(link->type == hw::LinkType::nvlink && link->generation == "4"))
      fill_origin = "assumption: NVLink 4's value, " + fill_origin;
  } else {
    fill_origin = "0 (not modelled: NCCL's PCIe and network p2p chunks are 128 KiB; not measured)";
  }
  t.p2p_origin = fmt::format("η_p2p: {} | fill: {}", eta_origin, fill_origin);
}

/// What one NCCL CTA moves on an NVLink tier, before η: kCtaShareOfLink of one link's per-direction rate, measured on
/// NVLink 4 (2 × H200, 1-16 CTAs; linear up to 8). NCCL "need[s] to launch 2 CTAs per NVLink in order to saturate
/// the BW for large messages" (NVIDIA/nccl issue #1703, 2025-05-07): NVLink is memory-mapped, each CTA's loads and
/// stores spread over all links, and its rate is a share of a link's; that share is carried to other NVLink
/// generations (an assumption). Other scale-up links (PCIe, xGMI): not known, no cap.
void set_per_cta(LinkTier& t, const hw::LinkSpec* link) {
  if (link == nullptr || !nvlink_class(link->type) || !link->per_link_uni) return;
  t.per_cta = *link->per_link_uni * kCtaShareOfLink;
  t.per_cta_origin = fmt::format("{} × {} of {} per link ({})", kCtaShareOfLink, units::format(*link->per_link_uni),
                                 link->info.name, kCtaShareSource);
}

LinkTier scale_up_tier(int members, const hw::NodeSpec& node, const hw::HardwareDb& db) {
  LinkTier t;
  const hw::GpuSpec* gpu = db.find_gpu(node.gpu);
  const hw::LinkSpec* link = db.find_link(node.scale_up.link);
  const hw::LinkSpec* sw = node.scale_up.switch_id.empty() ? nullptr : db.find_link(node.scale_up.switch_id);
  t.name = link ? link->info.name : node.scale_up.link;
  if (sw) t.name += " via " + sw->info.name;
  else if (node.scale_up.topology != hw::ScaleUpTopology::switched)
    t.name += fmt::format(" ({})", hw::to_string(node.scale_up.topology));

  std::string bw_origin;
  if (gpu && gpu->scale_up) {
    t.uni_per_gpu = gpu->scale_up->per_gpu_uni;
    bw_origin = gpu->info.cite("/scale_up/per_gpu_uni_GBps");
  } else if (link && link->x16_uni) {
    t.uni_per_gpu = *link->x16_uni;
    bw_origin = link->info.cite("/x16_uni_GBps") + " (GPU has no scale-up port: PCIe x16)";
  } else if (link && link->per_link_uni) {
    t.uni_per_gpu = *link->per_link_uni;
    bw_origin = link->info.cite("/per_link_uni_GBps") + " (assumption: one link per GPU; no per-GPU figure)";
  } else {
    bw_origin = "not sourced: no per-GPU scale-up bandwidth in the data";
  }
  // A fully connected mesh (AMD xGMI) gives each peer one link: a group of m of the D GPUs uses m−1 of D−1 links
  // (hardware_facts.md gotcha 9: an MI300X pair gets 64 GB/s per direction; all 448 GB/s needs all 8).
  const int D = node.scale_up.domain_gpus;
  if (node.scale_up.topology == hw::ScaleUpTopology::fully_connected && D > 1 && members < D) {
    t.uni_per_gpu = t.uni_per_gpu * (double(std::max(members, 2) - 1) / double(D - 1));
    bw_origin += fmt::format(" × ({}−1)/({}−1) links in use on a fully connected mesh", std::max(members, 2), D);
  }
  if (node.scale_up.topology == hw::ScaleUpTopology::hybrid_cube_mesh)
    bw_origin += " (hybrid cube-mesh: full rate assumed, optimistic for groups that do not use all links)";

  auto [alpha, alpha_origin] = step_latency(sw ? sw : link, hw::LinkType::nvlink);
  t.latency = alpha;
  auto [eta, eta_origin] = bus_efficiency(link);
  t.bus_efficiency = eta;

  std::string nvls_origin;
  if (sw && sw->in_network_reduction.value_or(false)) {
    t.in_network_reduction = true;
    const NvlsRow* row = nullptr;
    for (const auto& r : kNvls)
      if (r.switch_generation == sw->generation) row = &r;
    if (row && members >= 2) {
      const double scale = std::min(1.0, nvls_ideal(members) / nvls_ideal(row->ref_ranks));
      t.in_network_gain = row->gain * scale;
      nvls_origin = fmt::format("gain: NVLS {:.3g} = {:.3g} measured at {} GPUs ({})", t.in_network_gain, row->gain,
                                row->ref_ranks, row->source);
      if (scale < 1.0)
        nvls_origin += fmt::format(" × f({})/f({}) = {:.3g}, f(n) = 2(n−1)/(n+1)", members, row->ref_ranks, scale);
    } else {
      nvls_origin = "gain: in-network reduction " + sw->info.cite("/in_network_reduction") +
                    " but no measured gain for this switch: gain 1 (no benefit modelled)";
    }
  }
  t.origin = fmt::format("BW: {} | α: {} | η: {}", bw_origin, alpha_origin, eta_origin);
  if (!nvls_origin.empty()) t.origin += " | " + nvls_origin;
  set_p2p(t, link, false);
  set_per_cta(t, link);
  return t;
}

std::optional<LinkTier> scale_out_tier(const hw::NodeSpec& node, const hw::HardwareDb& db,
                                       const std::optional<hw::ClusterSpec>& cluster) {
  if (!node.scale_out) return std::nullopt;
  const auto& so = *node.scale_out;
  const hw::LinkSpec* link = db.find_link(so.link);
  LinkTier t;
  t.name = fmt::format("{} ({} × {} Gb/s NICs per {} GPUs)", link ? link->info.name : so.link, so.nics,
                       units::format_number(units::to_GBps(so.nic) * 8.0, 4), node.gpus);
  // Rail-optimized: every GPU drives its own NIC (or its share of the node's NICs).
  t.uni_per_gpu = so.nic * (double(so.nics) / double(std::max(node.gpus, 1)));
  std::string bw_origin = fmt::format("{} nics × nic / {} gpus ({}), each GPU on its own rail",
                                      node.info.cite("/scale_out"), node.gpus, node.info.cite("/gpus"));
  if (cluster && cluster->fabric.oversubscription && *cluster->fabric.oversubscription > 0.0) {
    const double o = *cluster->fabric.oversubscription;
    t.uni_per_gpu = t.uni_per_gpu / o;
    bw_origin += fmt::format(" / oversubscription {} ({})", o, cluster->info.cite("/fabric/oversubscription"));
  } else {
    bw_origin += cluster ? "; fabric non-blocking (assumption: the cluster file gives no oversubscription)"
                         : "; fabric non-blocking (assumption: no cluster given)";
  }
  if (link && link->in_network_reduction.value_or(false)) {
    // IB SHARP exists on the fabric; NCCL uses it only through the CollNet plugin, for a communicator the run enables
    // (CommGroup::collnet, NCCL_COLLNET_ENABLE=1): the collnet algorithm (collective_algorithms.cpp).
    t.in_network_reduction = true;
    t.in_network_gain = 1.0;
  }
  auto [alpha, alpha_origin] = step_latency(link, hw::LinkType::infiniband);
  t.latency = alpha;
  auto [eta, eta_origin] = bus_efficiency(link);
  t.bus_efficiency = eta;
  t.origin = fmt::format("BW: {} | α: {} | η: {}", bw_origin, alpha_origin, eta_origin);
  if (t.in_network_reduction)
    t.origin += " | in-network reduction: switch SHARP available, used by NCCL CollNet where the run enables it";
  set_p2p(t, link, true);
  return t;
}

}  // namespace

CommGroup resolve_group(int size, int stride, const hw::NodeSpec& node, const hw::HardwareDb& db,
                        std::optional<hw::ClusterSpec> cluster) {
  assert(size >= 1 && stride >= 1 && "parallel degrees are validated before resolve");
  size = std::max(size, 1);
  stride = std::max(stride, 1);
  const int domain = std::max(node.scale_up.domain_gpus, 1);
  int members = domain % stride == 0 ? std::min(size, domain / stride) : 1;
  // Irregular placements (12 GPUs over 8-GPU domains, 32 over the 18 slots of an NVL72 at stride 4) are rounded
  // down to the largest divisor of the group so that it splits into whole domains.
  while (size % members != 0) --members;
  CommGroup g;
  g.size = size;
  g.scale_up_size = members;
  g.scale_up = scale_up_tier(members, node, db);
  g.scale_out = scale_out_tier(node, db, cluster);
  g.call_latency = units::microseconds(kCallLatency_us);
  g.call_latency_origin = std::string(kCallLatencySource);
  return g;
}

std::string describe(const LinkTier& tier) {
  std::string s = fmt::format("{}: {} per GPU per direction, α {}, η {}", tier.name, units::format(tier.uni_per_gpu),
                              units::format(tier.latency), units::format(units::Ratio(tier.bus_efficiency)));
  if (tier.in_network_reduction && tier.in_network_gain != 1.0)
    s += fmt::format(", in-network reduction ×{}", units::format_number(tier.in_network_gain, 3));
  return s;
}

void apply_calibration(CommGroup& g, const LinkCalibration& c) {
  if (g.scale_up_size <= 1) return;
  g.scale_up_fits = c.per_op;
  if (c.bus_efficiency <= 0) return;  // per-op fits only: the tier keeps its own α and η
  g.scale_up.latency = c.step_latency;
  if (c.call_latency.raw() > 0) {
    g.call_latency = c.call_latency;
    g.call_latency_origin = "calibration: " + c.origin;
  }
  if (c.bus_efficiency > 0) g.scale_up.bus_efficiency = c.bus_efficiency;
  g.scale_up.origin = "calibration: " + c.origin;
}

}  // namespace gpuplan::model
