#pragma once
// Hardware value types: GPUs, links, nodes, clusters. Pure data with invariants; decoding from JSON lives in
// hardware/io. Values are typed quantities; anything a datasheet does not give is std::nullopt, never a guess.
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <utility>

#include "gpuplan/core/units.hpp"

namespace gpuplan::hw {

/// Numeric formats with a tensor/vector peak rate. Dense rates only: 2:4 sparsity is never modelled.
enum class Precision { fp64, fp64_tensor, fp32, tf32, bf16, fp16, fp8, int8, fp6, fp4 };
inline constexpr std::size_t kPrecisionCount = 10;
inline constexpr std::array<Precision, kPrecisionCount> kAllPrecisions{
    Precision::fp64, Precision::fp64_tensor, Precision::fp32, Precision::tf32, Precision::bf16,
    Precision::fp16, Precision::fp8,         Precision::int8, Precision::fp6,  Precision::fp4};
std::string_view to_string(Precision p);
/// Parses "bf16", "fp8", ... ; nullopt for an unknown name.
std::optional<Precision> parse_precision(std::string_view s);
/// Storage bytes per element (fp4 = 0.5, fp6 = 0.75).
double bytes_per_element(Precision p);

/// Where a value came from: the entity's file and the JSON pointer inside it.
struct SourceRef {
  std::string id;   ///< "S5"
  std::string ref;  ///< human description of the source
  std::vector<std::string> fields;  ///< JSON pointers this source backs (may be empty = whole file)
};

struct EntityInfo {
  std::string id;
  std::string name;
  std::string file;  ///< path it was loaded from ("" for built-in/test values); diagnostics name this one
  /// The file as citations name it: relative to the data directory ("hardware/gpus/h100-sxm5-80gb.json") when it was
  /// loaded from one (load_hardware_db), so that derivations, reports and screenshots do not carry the absolute path of
  /// the machine that made them; "" means `file`.
  std::string cited_file;
  std::vector<SourceRef> sources;
  std::string notes;
  /// The file as cited: cited_file, else file, else the id.
  [[nodiscard]] const std::string& cited() const;
  /// Citation for one field: "<cited file>#<pointer> [S5]".
  [[nodiscard]] std::string cite(std::string_view pointer) const;
};

enum class LinkType { nvlink, nvswitch, xgmi, pcie, infiniband, ethernet, c2c };
std::string_view to_string(LinkType t);

struct LinkSpec {
  EntityInfo info;
  LinkType type = LinkType::pcie;
  std::string generation;
  std::optional<units::Bandwidth> per_link_uni;   ///< nvlink/xgmi/c2c: one link, one direction
  std::optional<units::Bandwidth> x16_uni;        ///< pcie x16, one direction
  std::optional<units::Bandwidth> port;           ///< IB/Ethernet port, one direction
  std::optional<units::Seconds> latency;
  std::optional<units::Bandwidth> gpu_to_gpu_bidir;  ///< nvswitch
  std::optional<int> max_domain_gpus;                ///< nvswitch
  std::optional<bool> in_network_reduction;
  std::optional<units::Bandwidth> reduction;         ///< nvswitch in-switch reduction bandwidth
};

/// The tool a device-reported memory figure was read with: CUDA's total (cudaMemGetInfo / totalGlobalMem);
/// nvidia-smi's memory.total, which also counts memory the driver reserves for itself (on our H100 SXM5, driver 580:
/// 81559 MiB against CUDA's 81079 MiB); an MLPerf system description; rocminfo, the ROCm runtime's GPU memory pool
/// (the HSA agent's global pool, which HIP reports as hipDeviceProp_t::totalGlobalMem and PyTorch as total_memory).
enum class MemoryReportedBy { cuda, nvidia_smi, mlperf, rocminfo };
std::string_view to_string(MemoryReportedBy b);

struct MemorySpec {
  std::string type;
  units::Bytes capacity_label{};                 ///< vendor's "GB" label, as 10^9 bytes
  std::optional<units::Bytes> device_reported;   ///< what the driver reports (MiB figure), where sourced
  MemoryReportedBy reported_by = MemoryReportedBy::cuda;  ///< meaningful only with device_reported
  units::Bandwidth bandwidth{};
  /// True on a system-on-chip (Jetson): the GPU has no memory of its own; CPU, GPU and engines share this capacity
  /// and this bandwidth, so whatever the CPU side holds or streams is not available to the GPU.
  bool shared_with_cpu = false;
  /// Device memory one process's CUDA (HIP) context and loaded kernel images take outside the framework's caching
  /// allocator, for this part's generation and the CUDA version its basis names; absent where nothing is sourced.
  std::optional<units::Bytes> context;
  std::string context_basis;  ///< where `context` comes from (measurement file or publication), with it
};

using PeakTable = std::array<std::optional<units::FlopRate>, kPrecisionCount>;  ///< indexed by Precision

/// An inference engine on the same chip as the GPU, programmed apart from it (Jetson's NVDLA deep-learning
/// accelerators): its own peak rates, the chip's memory. The GPU's peaks never include it; a vendor's "AI TOPS" often
/// do (Jetson AGX Orin's 275 TOPS = GPU 170 + DLA 105, both sparse INT8).
struct EngineSpec {
  std::string kind;  ///< "dla"
  std::string name;  ///< "NVDLA v2.0"
  int count = 0;     ///< engines of this kind on the chip
  std::optional<double> clock_MHz;
  PeakTable dense_peak{};   ///< all `count` engines together, dense
  PeakTable sparse_peak{};  ///< the same with 2:4 structured sparsity, where the vendor quotes it
};

/// What kind of rental a price is: on-demand (no commitment, not pre-emptible) or spot (pre-emptible). Costs at the
/// two kinds are not comparable; the report says so wherever it puts them side by side.
enum class PriceKind { on_demand, spot };
std::string_view to_string(PriceKind k);  ///< "on-demand", "spot"

struct ScaleUpPort {
  std::string link;  ///< link id
  int links = 0;
  units::Bandwidth per_gpu_uni{};  ///< all links together, one direction
};

/// Measured kernel efficiencies of one part (a row of data/hardware/efficiency/*.json): fractions of the dense peak
/// (GEMM, fused and FA2 attention at head dim 128, s = 4096 causal) and of the memory bandwidth (HBM streaming), with
/// the GEMM tile the part's library picks for large shapes. The model turns a row into its efficiency profile.
struct EfficiencyRow {
  std::string gpu;  ///< GPU id whose measurements these are
  double gemm_bf16 = 0.0;
  double gemm_fp8 = 0.0;  ///< 0: no fp8 GEMMs on this part
  double hbm = 0.0;
  double attention_fwd = 0.0, attention_bwd = 0.0;  ///< the stack's fused attention (cuDNN / FA3 / FA4)
  double fa2_fwd = 0.0, fa2_bwd = 0.0;              ///< FlashAttention-2
  /// The fused attention's sequence law on this part (model efficiency.hpp, AttentionTileCost): its fixed cost per
  /// query tile in key-tile iterations, forward and backward, fitted to the row's measured sweep over s (0: the
  /// built-in law of the kernel family, cuDNN on Hopper or FlashAttention-2).
  double attention_tile_fwd = 0.0, attention_tile_bwd = 0.0;
  int tile_m = 128, tile_n = 128;
  /// Compression compute paths (0: not measured on this part): int8 GEMM rate / dense int8 peak; 2:4-sparse 16-bit
  /// GEMM rate (dense-equivalent FLOPs) / sparse 16-bit peak; weight-only int4 GEMM rate at compute-bound shapes /
  /// dense 16-bit peak, and its bandwidth at memory-bound shapes (weights + activations / time) / memory bandwidth.
  double gemm_int8 = 0.0;
  double gemm_sparse24 = 0.0;
  double gemm_w4a16 = 0.0;
  double gemm_w4a16_hbm = 0.0;
  /// Fixed cost per kernel inside a replayed CUDA graph, by kernel class, beyond the kernel's roofline time at this
  /// row's rates (0: not measured): dense GEMMs, attention (a decode's split-KV pass and its combine together), and
  /// the small elementwise, norm and routing kernels. Microseconds.
  double graph_gemm_us = 0.0, graph_attention_us = 0.0, graph_elementwise_us = 0.0;
  /// One fused attention kernel without a combine pass (prefill, engines' decode kernels), µs; a norm kernel's row
  /// latency, graph_norm_us + row elements × graph_norm_ns_per_element / 1000 (0: not measured).
  double graph_attention_fused_us = 0.0, graph_norm_us = 0.0, graph_norm_ns_per_element = 0.0;
  std::string origin;                ///< one line: what was measured and where (shown in every derivation)
  std::vector<std::string> sources;  ///< ids of the efficiency file's sources behind this row
};

struct GpuSpec {
  EntityInfo info;
  std::vector<std::string> aliases;
  std::string vendor, family, form_factor, compute_unit_kind, sparsity;
  int compute_units = 0;
  /// CUDA compute capability as 10·major + minor (90 for 9.0, 103 for 10.3); empty for AMD parts and where unknown.
  std::optional<int> compute_capability;
  std::optional<double> boost_clock_MHz;
  PeakTable dense_peak{};   ///< indexed by Precision; what the model uses
  /// The vendor's 2:4 structured-sparsity rates where the data records them (never used by the model: DESIGN.md §4);
  /// kept so that a "275 TOPS" headline can be read against the dense figure it is not.
  PeakTable sparse_peak{};
  std::vector<EngineSpec> engines;  ///< on-chip engines beside the GPU (empty for a discrete GPU)
  MemorySpec memory;
  std::optional<units::Bytes> l2;
  std::optional<units::Bytes> llc;
  std::optional<units::Watts> tdp;
  std::optional<ScaleUpPort> scale_up;
  std::string pcie;  ///< pcie link id or ""
  /// The CPU-GPU link where it is not PCIe (NVLink-C2C of Grace superchips): link id or "", and how many GPUs share
  /// it (a GB200/GB300 Grace serves 2 GPUs over its C2C link).
  std::string host_link;
  int host_link_gpus = 1;
  std::optional<units::UsdPerSecond> price;
  PriceKind price_kind = PriceKind::on_demand;  ///< meaningful only with price
  std::string price_provider;                   ///< who rents at that price (with price)
  std::string price_date;                       ///< "YYYY-MM" or "YYYY-MM-DD" as the source dates it; "" = undated
  /// Measured efficiencies, resolved when the database loads: the part's own row, else its family's measured member
  /// (efficiency_via says so); absent: no measurement for the part or its family (the model's generic assumption).
  std::optional<EfficiencyRow> efficiency;
  std::string efficiency_via;

  [[nodiscard]] std::optional<units::FlopRate> peak(Precision p) const {
    return dense_peak[static_cast<std::size_t>(p)];
  }
  [[nodiscard]] std::optional<units::FlopRate> sparse(Precision p) const {
    return sparse_peak[static_cast<std::size_t>(p)];
  }
  /// Memory the driver exposes: the device-reported figure where sourced, else the vendor label.
  [[nodiscard]] units::Bytes memory_capacity() const {
    return memory.device_reported ? *memory.device_reported : memory.capacity_label;
  }
};

enum class ScaleUpTopology { switched, fully_connected, hybrid_cube_mesh, pcie };
std::string_view to_string(ScaleUpTopology t);

struct NodeSpec {
  EntityInfo info;
  std::string gpu;  ///< gpu id
  int gpus = 0;
  struct ScaleUp {
    std::string link;
    std::string switch_id;  ///< "" when point-to-point
    int domain_gpus = 0;
    ScaleUpTopology topology = ScaleUpTopology::switched;
  } scale_up;
  struct ScaleOut {
    std::string link;
    int nics = 0;
    units::Bandwidth nic{};  ///< per NIC, one direction
  };
  std::optional<ScaleOut> scale_out;
  std::string host_cpu;
  std::optional<int> host_cores;  ///< physical CPU cores of the node, all sockets
  std::optional<units::Bytes> host_memory;
  std::optional<units::Bandwidth> host_memory_bandwidth;  ///< peak DRAM bandwidth of the node, all sockets
};

enum class FabricTopology { fat_tree, rail_optimized };
std::string_view to_string(FabricTopology t);

struct ClusterSpec {
  EntityInfo info;
  std::string node;  ///< node id
  int nodes = 0;
  struct Fabric {
    std::optional<FabricTopology> topology;  ///< absent: not sourced; the model states what it assumes
    std::optional<double> oversubscription;  ///< absent: not sourced; the model states what it assumes
    std::string link;
  } fabric;
};

/// A file of measured efficiencies (data/hardware/efficiency/*.json): rows per GPU and, per GPU family, the member
/// whose row stands for parts of that family that have none.
struct EfficiencyTable {
  EntityInfo info;
  std::vector<EfficiencyRow> rows;
  std::vector<std::pair<std::string, std::string>> families;  ///< (family, GPU id with a row)
};

/// All hardware entities, cross-referenced by id. Lookup is exact by id, then by alias.
class HardwareDb {
 public:
  std::vector<GpuSpec> gpus;
  std::vector<LinkSpec> links;
  std::vector<NodeSpec> nodes;
  std::vector<ClusterSpec> clusters;
  std::vector<EfficiencyTable> efficiency;

  [[nodiscard]] const GpuSpec* find_gpu(std::string_view id_or_alias) const;
  [[nodiscard]] const LinkSpec* find_link(std::string_view id) const;
  [[nodiscard]] const NodeSpec* find_node(std::string_view id) const;
  [[nodiscard]] const ClusterSpec* find_cluster(std::string_view id) const;
  [[nodiscard]] std::vector<std::string> gpu_names() const;  ///< ids and aliases, for "did you mean"
  [[nodiscard]] std::vector<std::string> link_ids() const;
  [[nodiscard]] std::vector<std::string> node_ids() const;
  [[nodiscard]] std::vector<std::string> cluster_ids() const;
};

}  // namespace gpuplan::hw
