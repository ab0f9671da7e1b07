#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/hw/lookup.hpp"

#include <algorithm>

namespace gpuplan::hw {

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::fp64: return "fp64";
    case Precision::fp64_tensor: return "fp64_tensor";
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    case Precision::fp8: return "fp8";
    case Precision::int8: return "int8";
    case Precision::fp6: return "fp6";
    case Precision::fp4: return "fp4";
  }
  return "?";
}

std::optional<Precision> parse_precision(std::string_view s) {
  for (Precision p : kAllPrecisions)
    if (to_string(p) == s) return p;
  return std::nullopt;
}

double bytes_per_element(Precision p) {
  switch (p) {
    case Precision::fp64:
    case Precision::fp64_tensor: return 8.0;
    case Precision::fp32:
    case Precision::tf32: return 4.0;
    case Precision::bf16:
    case Precision::fp16: return 2.0;
    case Precision::fp8:
    case Precision::int8: return 1.0;
    case Precision::fp6: return 0.75;
    case Precision::fp4: return 0.5;
  }
  return 2.0;
}

const std::string& EntityInfo::cited() const {
  if (!cited_file.empty()) return cited_file;
  return file.empty() ? id : file;
}

std::string EntityInfo::cite(std::string_view pointer) const {
  std::string out = cited();
  out += '#';
  out += pointer;
  std::string ids;
  for (const auto& s : sources) {
    const bool covers = s.fields.empty() || std::any_of(s.fields.begin(), s.fields.end(), [&](const std::string& f) {
                          return pointer.substr(0, f.size()) == f;
                        });
    if (covers) ids += (ids.empty() ? "" : ", ") + s.id;
  }
  if (!ids.empty()) out += " [" + ids + "]";
  return out;
}

std::string_view to_string(LinkType t) {
  switch (t) {
    case LinkType::nvlink: return "nvlink";
    case LinkType::nvswitch: return "nvswitch";
    case LinkType::xgmi: return "xgmi";
    case LinkType::pcie: return "pcie";
    case LinkType::infiniband: return "infiniband";
    case LinkType::ethernet: return "ethernet";
    case LinkType::c2c: return "c2c";
  }
  return "?";
}

std::string_view to_string(ScaleUpTopology t) {
  switch (t) {
    case ScaleUpTopology::switched: return "switched";
    case ScaleUpTopology::fully_connected: return "fully-connected";
    case ScaleUpTopology::hybrid_cube_mesh: return "hybrid-cube-mesh";
    case ScaleUpTopology::pcie: return "pcie";
  }
  return "?";
}

std::string_view to_string(MemoryReportedBy b) {
  switch (b) {
    case MemoryReportedBy::cuda: return "cuda";
    case MemoryReportedBy::nvidia_smi: return "nvidia-smi";
    case MemoryReportedBy::mlperf: return "mlperf";
    case MemoryReportedBy::rocminfo: return "rocminfo";
  }
  return "?";
}

std::string_view to_string(PriceKind k) {
  switch (k) {
    case PriceKind::on_demand: return "on-demand";
    case PriceKind::spot: return "spot";
  }
  return "?";
}

std::string_view to_string(FabricTopology t) {
  switch (t) {
    case FabricTopology::fat_tree: return "fat-tree";
    case FabricTopology::rail_optimized: return "rail-optimized";
  }
  return "?";
}

namespace {
template <class T>
const T* find_by_id(const std::vector<T>& v, std::string_view id) {
  for (const auto& e : v)
    if (e.info.id == id) return &e;
  return nullptr;
}
template <class T>
std::vector<std::string> ids_of(const std::vector<T>& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(e.info.id);
  return out;
}
}  // namespace

const GpuSpec* HardwareDb::find_gpu(std::string_view id_or_alias) const {
  if (const auto* g = find_by_id(gpus, id_or_alias)) return g;
  for (const auto& g : gpus)
    for (const auto& a : g.aliases)
      if (a == id_or_alias) return &g;
  return nullptr;
}
const LinkSpec* HardwareDb::find_link(std::string_view id) const { return find_by_id(links, id); }
const NodeSpec* HardwareDb::find_node(std::string_view id) const { return find_by_id(nodes, id); }
const ClusterSpec* HardwareDb::find_cluster(std::string_view id) const { return find_by_id(clusters, id); }

std::vector<std::string> HardwareDb::gpu_names() const {
  std::vector<std::string> out;
  for (const auto& g : gpus) {
    out.push_back(g.info.id);
    out.insert(out.end(), g.aliases.begin(), g.aliases.end());
  }
  return out;
}
std::vector<std::string> HardwareDb::link_ids() const { return ids_of(links); }
std::vector<std::string> HardwareDb::node_ids() const { return ids_of(nodes); }
std::vector<std::string> HardwareDb::cluster_ids() const { return ids_of(clusters); }

const NodeSpec* first_node_of(const HardwareDb& db, std::string_view gpu_id) {
  for (const auto& n : db.nodes)
    if (n.gpu == gpu_id) return &n;
  return nullptr;
}

}  // namespace gpuplan::hw
