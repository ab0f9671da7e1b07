#pragma once
// Mapping of a parallel group onto the link tiers of a cluster (DESIGN.md §6 "resolve"). A group of `size` GPUs
// whose consecutive members are `stride` ranks apart (Megatron order: tp innermost, then cp, ep/dp, pp outermost)
// spans `size_scale_up` GPUs inside one scale-up domain and `size / size_scale_up` domains over the scale-out fabric.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuplan/core/units.hpp"
#include "gpuplan/hw/hardware.hpp"

namespace gpuplan::model {

/// One level of the network as one GPU of a collective sees it.
struct LinkTier {
  std::string name;             ///< "NVLink 4 via NVSwitch gen3", "InfiniBand NDR"
  units::Bandwidth uni_per_gpu{};  ///< per direction, per GPU, link spec (datasheet)
  units::Seconds latency{};     ///< per-hop α (launch + wire + switch), from data or a stated assumption
  double bus_efficiency = 1.0;  ///< asymptotic fraction of uni_per_gpu NCCL reaches (measured; e.g. 0.80 on NVLink 4)
  bool in_network_reduction = false;    ///< NVLS (NVLink SHARP) or IB SHARP available for all-reduce
  double in_network_gain = 1.0;         ///< measured all-reduce busbw gain of NVLS over ring where known
  std::string origin;           ///< citation of the numbers above
  /// Point-to-point (send/recv; NCCL's all-to-all is grouped send/recv): NCCL stripes a p2p message over its own
  /// channels in its own chunks (src/enqueue.cc addP2pToPlan), not the ring's, so it reaches another fraction of the
  /// link. 0 = not given (a tier built by hand): bus_efficiency stands in.
  double p2p_efficiency = 0.0;
  /// Pipeline fill of the p2p path, bytes per rank over all its p2p channels (p2pnChannels × p2pChunkSize): each
  /// channel moves a chunk into the peer's buffer before the peer copies it out, so the first chunk of every channel
  /// is paid twice; a peer's share of a communicator of n ranks is fill/n. 0 = no fill modelled.
  units::Bytes p2p_fill{};
  std::string p2p_origin;  ///< citation of p2p_efficiency and p2p_fill ("η_p2p: … | fill: …")
  /// What one NCCL CTA (one channel) moves on this tier, per direction, before η: a communicator whose CTAs are
  /// capped (CommGroup::max_ctas) reaches at most max_ctas × this. 0 = not known (no cap applied on this tier).
  units::Bandwidth per_cta{};
  std::string per_cta_origin;  ///< citation of per_cta
  [[nodiscard]] double p2p_eta() const { return p2p_efficiency > 0 ? p2p_efficiency : bus_efficiency; }
};

/// One (collective, group size) fit of the collectives bench inside one scale-up domain (calibration profile):
/// t = call_latency + steps·step_latency + bytes moved / (bus_efficiency · link bandwidth).
struct LinkOpFit {
  std::string op;  ///< all_reduce, all_gather, reduce_scatter, all_to_all, send_recv
  int ranks = 0;
  units::Seconds step_latency{};
  units::Seconds call_latency{};
  double bus_efficiency = 0.0;
  /// Measured (bytes, seconds), sizes increasing, times not decreasing: a size inside the sweep is priced by log-log
  /// interpolation between its two neighbours instead of the α–β line (empty: the line everywhere).
  std::vector<std::pair<double, double>> curve;
};

/// A communicator: its size and how it splits across the two tiers.
struct CommGroup {
  int size = 1;           ///< GPUs in the group
  int scale_up_size = 1;  ///< members sharing one scale-up (NVLink) domain
  LinkTier scale_up;      ///< used when scale_up_size > 1
  std::optional<LinkTier> scale_out;  ///< used when size > scale_up_size
  units::Seconds call_latency{};      ///< t₀: base latency of one collective call (launch, setup), paid once per call
  std::string call_latency_origin;    ///< citation of call_latency
  /// Measured fits per (op, group size) on the scale-up tier (calibration); a collective of exactly that op and size
  /// inside one domain uses its own fit instead of the tier's α and η.
  std::vector<LinkOpFit> scale_up_fits;
  /// The most CTAs (NCCL channels) the communicator's kernels may use (NCCL_MAX_CTAS or a per-communicator
  /// max_ctas); 0 = NCCL's own channel count, no cap. Caps the scale-up rate at max_ctas × LinkTier::per_cta and a
  /// ring across domains to max_ctas NICs per domain.
  int max_ctas = 0;
  /// The communicator may reduce in the scale-out switches (NCCL CollNet with SHARP, NCCL_COLLNET_ENABLE=1) where
  /// the scale-out tier has in-network reduction; false = NCCL's default (no CollNet).
  bool collnet = false;
  [[nodiscard]] int domains() const { return scale_up_size > 0 ? size / scale_up_size : size; }
};

/// Maps a parallel group of `size` GPUs whose consecutive members are `stride` ranks apart onto the node's link tiers.
/// Members per scale-up domain = min(size, domain_gpus / stride) when stride divides domain_gpus, else 1 (reduced to
/// a divisor of size so that domains() is exact). Scale-up tier: the GPU's own per-GPU NVLink/xGMI bandwidth
/// (GpuSpec::scale_up), scaled by (members − 1)/(domain_gpus − 1) on a fully connected mesh (one link per peer), the
/// switch's in-network reduction and its measured NVLS gain. Scale-out tier: nics × nic bandwidth / gpus per node
/// (rail-optimized: each GPU drives its own NIC), divided by the fabric's oversubscription where the cluster gives it.
/// α and the NCCL bus efficiency come from cited per-generation tables (topology.cpp); `origin` says which.
CommGroup resolve_group(int size, int stride, const hw::NodeSpec& node, const hw::HardwareDb& db,
                        std::optional<hw::ClusterSpec> cluster = std::nullopt);

/// A measured scale-up tier (calibration profile): NCCL's per-step latency and bus efficiency on this GPU's NVLink.
struct LinkCalibration {
  units::Seconds step_latency{};
  units::Seconds call_latency{};  ///< measured base latency per call (0 = keep the model's)
  double bus_efficiency = 0.0;
  std::string origin;  ///< the profile file and the fit it came from
  std::vector<LinkOpFit> per_op;  ///< every (op, ranks) fit of the profile
};
/// Replaces the scale-up tier's α and η of `g` by the measured ones (a group without a scale-up tier is unchanged).
void apply_calibration(CommGroup& g, const LinkCalibration& c);

/// One line for derivations and reports: "NVLink 4 via NVSwitch gen3: 450 GB/s per GPU per direction, α 3.4 µs,
/// η 81%, NVLS ×1.29".
std::string describe(const LinkTier& tier);

}  // namespace gpuplan::model
