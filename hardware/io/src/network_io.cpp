// The link, node and cluster files (hardware_io.hpp): their field tables and decoders. Split from hardware_io.cpp,
// code moved verbatim.
#include "gpuplan/hw_io/hardware_io.hpp"

#include "decode_common.hpp"

#include <fmt/format.h>

namespace gpuplan::hw_io {

namespace {
std::optional<u::Bandwidth> gbps(const ObjectReader& r, std::string_view key) {
  if (auto v = r.num(key)) return u::gb_per_s(*v);
  return std::nullopt;
}
}  // namespace

using namespace detail;

const FieldTable& link_fields() {
  static const FieldTable t = with_common(
      "link", {
                  text("type", "link family", kReq, {"nvlink", "nvswitch", "xgmi", "pcie", "infiniband", "ethernet", "c2c"}),
                  text("generation", "generation label (4, NDR, Gen5)", kReq),
                  positive("per_link_uni_GBps", "GB/s", 4500, "one link, one direction (nvlink, xgmi, c2c)"),
                  positive("x16_uni_GBps", "GB/s", 1210, "PCIe x16, one direction, usable"),
                  positive("port_Gbps", "Gb/s", 8000, "one NIC/switch port, one direction (IB, Ethernet)"),
                  positive("latency_us", "µs", 1000, "end-to-end latency where sourced"),
                  positive("gpu_to_gpu_bidir_GBps", "GB/s", 18000, "NVSwitch: any GPU pair, both directions"),
                  count("max_domain_gpus", 5760, "NVSwitch: largest NVLink domain"),
                  typed("in_network_reduction", FieldType::boolean, "switch performs reductions (SHARP / NVLS)"),
                  positive("reduction_GBps", "GB/s", 18000, "in-switch reduction bandwidth where sourced"),
              });
  return t;
}

namespace {
const FieldTable& node_scale_up_fields() {
  static const FieldTable t{
      text("link", "scale-up link id (nvlink/xgmi/pcie)", kReq),
      text("switch", "NVSwitch link id; absent for point-to-point meshes"),
      count("domain_gpus", 5760, "GPUs in one scale-up domain (8 for DGX H100, 72 for NVL72)", kReq),
      text("topology", "scale-up topology", kReq, {"switched", "fully-connected", "hybrid-cube-mesh", "pcie"}),
  };
  return t;
}
const FieldTable& node_scale_out_fields() {
  static const FieldTable t{
      text("link", "scale-out link id (infiniband/ethernet)", kReq),
      count("nics", 160, "compute NICs per node", kReq),
      positive("nic_Gbps", "Gb/s", 8000, "per NIC, one direction", kReq),
  };
  return t;
}
const FieldTable& host_fields() {
  static const FieldTable t{
      text("cpu", "host CPUs"),
      count("cores", 4096, "physical CPU cores of the node, all sockets (the data loader's workers run on them)"),
      positive("memory_GB", "GB", 20480, "host memory"),
      positive("memory_bandwidth_GBps", "GB/s", 20000,
               "peak host DRAM bandwidth of the node, all sockets (channels × transfer rate × 8 B)"),
  };
  return t;
}
const FieldTable& fabric_fields() {
  static const FieldTable t{
      text("topology", "scale-out topology (absent: not sourced)", kOpt, {"fat-tree", "rail-optimized"}),
      [] {
        FieldSpec f;
        f.key = "oversubscription";
        f.type = FieldType::number;
        f.presence = kOpt;
        f.min = 1.0;
        f.max = 64.0;
        f.doc = "ratio of down- to up-link bandwidth at the leaf (1 = non-blocking)";
        return f;
      }(),
      text("link", "scale-out link id", kReq),
  };
  return t;
}
}  // namespace

const FieldTable& node_fields() {
  static const FieldTable t = with_common(
      "node", {
                  text("gpu", "GPU id (gpus/)", kReq),
                  count("gpus", 720, "GPUs per node", kReq),
                  nested("scale_up", node_scale_up_fields(), "scale-up domain", kReq),
                  nested("scale_out", node_scale_out_fields(), "scale-out NICs for compute traffic"),
                  nested("host", host_fields(), "host CPU and memory"),
              });
  return t;
}

const FieldTable& cluster_fields() {
  static const FieldTable t = with_common(
      "cluster", {
                     text("node", "node id (nodes/)", kReq),
                     count("nodes", 1e6, "number of nodes", kReq),
                     nested("fabric", fabric_fields(), "scale-out fabric", kReq),
                 });
  return t;
}

Result<hw::LinkSpec> decode_link(const Json& j, const std::string& file) {
  Diagnostics diags;
  ObjectReader r(j, link_fields(), file, "", diags);
  if (!j.is_object()) return Result<hw::LinkSpec>(std::move(diags));
  hw::LinkSpec l;
  l.info = decode_info(r, file, diags);
  static const std::map<std::string, hw::LinkType> kTypes{
      {"nvlink", hw::LinkType::nvlink}, {"nvswitch", hw::LinkType::nvswitch},   {"xgmi", hw::LinkType::xgmi},
      {"pcie", hw::LinkType::pcie},     {"infiniband", hw::LinkType::infiniband}, {"ethernet", hw::LinkType::ethernet},
      {"c2c", hw::LinkType::c2c}};
  if (auto t = r.str("type")) l.type = kTypes.at(*t);
  l.generation = r.str("generation").value_or("");
  l.per_link_uni = gbps(r, "per_link_uni_GBps");
  l.x16_uni = gbps(r, "x16_uni_GBps");
  if (auto v = r.num("port_Gbps")) l.port = u::gbit_per_s(*v);
  if (auto v = r.num("latency_us")) l.latency = u::microseconds(*v);
  l.gpu_to_gpu_bidir = gbps(r, "gpu_to_gpu_bidir_GBps");
  if (auto v = r.integer("max_domain_gpus")) l.max_domain_gpus = static_cast<int>(*v);
  l.in_network_reduction = r.boolean("in_network_reduction");
  l.reduction = gbps(r, "reduction_GBps");
  // The bandwidth key that a link type needs must be present: without it nothing can be costed over the link.
  if (r.valid()) {
    switch (l.type) {
      case hw::LinkType::nvlink:
      case hw::LinkType::xgmi:
      case hw::LinkType::c2c:
        if (!l.per_link_uni) r.error("", fmt::format("an {} link needs 'per_link_uni_GBps'", hw::to_string(l.type)));
        break;
      case hw::LinkType::pcie:
        if (!l.x16_uni) r.error("", "a pcie link needs 'x16_uni_GBps'");
        break;
      case hw::LinkType::infiniband:
      case hw::LinkType::ethernet:
        if (!l.port) r.error("", fmt::format("an {} link needs 'port_Gbps'", hw::to_string(l.type)));
        break;
      case hw::LinkType::nvswitch:
        if (!l.gpu_to_gpu_bidir) r.error("", "an nvswitch needs 'gpu_to_gpu_bidir_GBps'");
        break;
    }
  }
  return finish(std::move(l), std::move(diags));
}

Result<hw::NodeSpec> decode_node(const Json& j, const std::string& file) {
  Diagnostics diags;
  ObjectReader r(j, node_fields(), file, "", diags);
  if (!j.is_object()) return Result<hw::NodeSpec>(std::move(diags));
  hw::NodeSpec n;
  n.info = decode_info(r, file, diags);
  n.gpu = r.str("gpu").value_or("");
  n.gpus = static_cast<int>(r.integer("gpus").value_or(0));
  if (auto s = r.object("scale_up"); s && s->valid()) {
    n.scale_up.link = s->str("link").value_or("");
    n.scale_up.switch_id = s->str("switch").value_or("");
    n.scale_up.domain_gpus = static_cast<int>(s->integer("domain_gpus").value_or(0));
    static const std::map<std::string, hw::ScaleUpTopology> kTopo{
        {"switched", hw::ScaleUpTopology::switched},
        {"fully-connected", hw::ScaleUpTopology::fully_connected},
        {"hybrid-cube-mesh", hw::ScaleUpTopology::hybrid_cube_mesh},
        {"pcie", hw::ScaleUpTopology::pcie}};
    if (auto t = s->str("topology")) n.scale_up.topology = kTopo.at(*t);
    if (n.scale_up.topology == hw::ScaleUpTopology::switched && n.scale_up.switch_id.empty())
      s->error("switch", "a switched scale-up domain needs the 'switch' id");
    // A scale-up domain either lies inside one node or spans whole nodes (NVL72: 18 trays of 4).
    if (n.gpus > 0 && n.scale_up.domain_gpus > 0 && n.scale_up.domain_gpus % n.gpus != 0 &&
        n.gpus % n.scale_up.domain_gpus != 0)
      s->error("domain_gpus", fmt::format("domain of {} GPUs is neither a multiple nor a divisor of the node's {} GPUs",
                                          n.scale_up.domain_gpus, n.gpus));
  }
  if (auto s = r.object("scale_out"); s && s->valid()) {
    n.scale_out = hw::NodeSpec::ScaleOut{s->str("link").value_or(""), static_cast<int>(s->integer("nics").value_or(0)),
                                         u::gbit_per_s(s->num("nic_Gbps").value_or(0))};
  }
  if (auto h = r.object("host"); h && h->valid()) {
    n.host_cpu = h->str("cpu").value_or("");
    if (auto c = h->integer("cores")) n.host_cores = static_cast<int>(*c);
    if (auto v = h->num("memory_GB")) n.host_memory = u::gigabytes(*v);
    n.host_memory_bandwidth = gbps(*h, "memory_bandwidth_GBps");
  }
  return finish(std::move(n), std::move(diags));
}

Result<hw::ClusterSpec> decode_cluster(const Json& j, const std::string& file) {
  Diagnostics diags;
  ObjectReader r(j, cluster_fields(), file, "", diags);
  if (!j.is_object()) return Result<hw::ClusterSpec>(std::move(diags));
  hw::ClusterSpec c;
  c.info = decode_info(r, file, diags);
  c.node = r.str("node").value_or("");
  c.nodes = static_cast<int>(r.integer("nodes").value_or(0));
  if (auto f = r.object("fabric"); f && f->valid()) {
    if (auto t = f->str("topology"))
      c.fabric.topology = *t == "rail-optimized" ? hw::FabricTopology::rail_optimized : hw::FabricTopology::fat_tree;
    c.fabric.oversubscription = f->num("oversubscription");
    c.fabric.link = f->str("link").value_or("");
  }
  return finish(std::move(c), std::move(diags));
}
}  // namespace gpuplan::hw_io
