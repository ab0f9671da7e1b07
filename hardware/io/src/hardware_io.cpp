#include "gpuplan/hw_io/hardware_io.hpp"

#include "decode_common.hpp"

#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

namespace gpuplan::hw_io {

using json_io::FieldSpec;
using json_io::FieldTable;
using json_io::FieldType;
using json_io::Json;
using json_io::ObjectReader;
using json_io::Presence;
namespace u = gpuplan::units;

// The field builders and the fields common to every entity file, shared with the other hardware decoders
// (decode_common.hpp; efficiency_io.cpp).
namespace detail {

// Plausibility bounds are 10x the largest shipping part in ../shared/reference/hardware_facts.json at the time of
// writing (e.g. 2,500 dense bf16 TFLOP/s on GB200/MI355X -> 25,000). Anything above is a typo (a sparse figure, a
// bidirectional figure in a per-direction key, GB for MB...) that must not pass silently.
// The floor is a millionth of that bound (0.025 bf16 TFLOP/s, 80 MB/s of HBM, 1 ns of latency, 2.6 kB of L2): far
// below any part (the closest shipped value, a 0.5 µs latency, is 500x above it), yet large enough that no time or ratio
// the model divides by it overflows to inf. A positive value below it (1e-310 TFLOP/s) is a typo or a unit mix-up.
FieldSpec positive(std::string key, std::string unit, double max, std::string doc, Presence p) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::number;
  f.presence = p;
  f.unit = std::move(unit);
  f.min = max / 1e6;
  f.max = max;
  f.plausibility_bound = true;
  f.plausibility_floor = true;
  f.doc = std::move(doc);
  return f;
}
FieldSpec count(std::string key, double max, std::string doc, Presence p) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::integer;
  f.presence = p;
  f.min = 1;
  f.max = max;
  f.plausibility_bound = true;
  f.doc = std::move(doc);
  return f;
}
FieldSpec text(std::string key, std::string doc, Presence p, std::vector<std::string> choices) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::string;
  f.presence = p;
  f.doc = std::move(doc);
  f.choices = std::move(choices);
  return f;
}
FieldSpec nested(std::string key, const FieldTable& table, std::string doc, Presence p) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = FieldType::object;
  f.presence = p;
  f.doc = std::move(doc);
  f.nested = &table;
  return f;
}
FieldSpec typed(std::string key, FieldType t, std::string doc, Presence p) {
  FieldSpec f;
  f.key = std::move(key);
  f.type = t;
  f.presence = p;
  f.doc = std::move(doc);
  return f;
}

const FieldTable& source_fields() {
  static const FieldTable t{
      text("id", "source id (S-number of the reference sheet, or a short tag)", kReq),
      text("ref", "what the source is: document, page, repository@commit", kReq),
      typed("for", FieldType::string_list, "JSON pointers of the fields this source backs (absent = whole file)"),
  };
  return t;
}

// Fields common to every entity file.
FieldTable common(const std::string& kind) {
  FieldSpec schema;
  schema.key = "schema";
  schema.type = FieldType::integer;
  schema.presence = kReq;
  schema.min = 1;
  schema.max = 1;
  schema.doc = "schema version (1)";
  return {schema,
          text("kind", "entity kind", kReq, {kind}),
          text("id", "identifier; equal to the file name without .json", kReq),
          text("name", "display name", kReq),
          typed("sources", FieldType::any, "list of {id, ref, for} citing every number", kReq),
          text("notes", "free text: caveats, derivations, what is not sourced")};
}

FieldTable with_common(const std::string& kind, FieldTable own) {
  FieldTable t = common(kind);
  t.insert(t.end(), own.begin(), own.end());
  return t;
}

const FieldTable& peak_fields() {
  static const FieldTable t{
      positive("fp64_TFLOPs", "TFLOP/s", 1700, "FP64 vector, dense"),
      positive("fp64_tensor_TFLOPs", "TFLOP/s", 1700, "FP64 tensor/matrix, dense"),
      positive("fp32_TFLOPs", "TFLOP/s", 1700, "FP32 vector, dense"),
      positive("tf32_TFLOPs", "TFLOP/s", 25000, "TF32 tensor, dense"),
      positive("bf16_TFLOPs", "TFLOP/s", 25000, "BF16 tensor, dense"),
      positive("fp16_TFLOPs", "TFLOP/s", 25000, "FP16 tensor, dense"),
      positive("fp8_TFLOPs", "TFLOP/s", 50000, "FP8 tensor, dense"),
      positive("int8_TOPs", "TOP/s", 50000, "INT8 tensor, dense"),
      positive("fp6_TFLOPs", "TFLOP/s", 100000, "FP6 tensor, dense"),
      positive("fp4_TFLOPs", "TFLOP/s", 150000, "FP4 tensor, dense"),
  };
  return t;
}

const FieldTable& memory_fields() {
  static const FieldTable t{
      text("type", "memory technology (HBM3, HBM3e, GDDR6...)", kReq),
      positive("capacity_GB", "GB", 2880, "vendor capacity label", kReq),
      positive("device_reported_MiB", "MiB", 2.9e6,
               "capacity the driver reports, where sourced (with device_reported_by; used by the fit checks instead of "
               "the label)"),
      text("device_reported_by", "the tool device_reported_MiB was read with (required with it): cuda = CUDA's total "
                                 "(cudaMemGetInfo / totalGlobalMem), nvidia-smi = memory.total (includes the driver's "
                                 "reserved memory), mlperf = an MLPerf system description's accelerator memory",
           kOpt, {"cuda", "nvidia-smi", "mlperf"}),
      positive("bandwidth_TBps", "TB/s", 80, "peak memory bandwidth", kReq),
      typed("shared_with_cpu", FieldType::boolean,
            "true on a system-on-chip (Jetson): CPU, GPU and on-chip engines share this memory and its bandwidth"),
  };
  return t;
}

const FieldTable& engine_fields() {
  static const FieldTable t{
      text("kind", "engine kind: dla = a deep-learning accelerator beside the GPU (NVDLA)", kReq, {"dla"}),
      text("name", "the vendor's name of the engine (\"NVDLA v2.0\")", kReq),
      count("count", 64, "engines of this kind on the chip", kReq),
      positive("clock_MHz", "MHz", 25000, "maximum engine clock"),
      nested("dense_peak", peak_fields(), "dense peak rates of all `count` engines together", kReq),
      nested("sparse_peak", peak_fields(), "2:4 structured-sparsity rates of all engines together, as quoted"),
  };
  return t;
}

/// The peak keys and the precision each one fills.
constexpr std::pair<const char*, hw::Precision> kPeakKeys[] = {
    {"fp64_TFLOPs", hw::Precision::fp64}, {"fp64_tensor_TFLOPs", hw::Precision::fp64_tensor},
    {"fp32_TFLOPs", hw::Precision::fp32}, {"tf32_TFLOPs", hw::Precision::tf32},
    {"bf16_TFLOPs", hw::Precision::bf16}, {"fp16_TFLOPs", hw::Precision::fp16},
    {"fp8_TFLOPs", hw::Precision::fp8},   {"int8_TOPs", hw::Precision::int8},
    {"fp6_TFLOPs", hw::Precision::fp6},   {"fp4_TFLOPs", hw::Precision::fp4}};

/// Reads a peak table; false when it names no precision at all.
bool decode_peaks(const ObjectReader& p, hw::PeakTable& into) {
  bool any = false;
  for (const auto& [key, prec] : kPeakKeys) {
    if (auto v = p.num(key)) {
      into[static_cast<std::size_t>(prec)] = u::tflops(*v);
      any = true;
    }
  }
  return any;
}

/// 2:4 structured sparsity skips half the multiplications, so a sparse rate lies above the dense one and at most
/// twice it, with 1.5% for the vendors' rounding (the L40S datasheet's own pair is 733 sparse against 362.05 dense,
/// 2.025x); a sparse rate without its dense one cannot be read against anything. Anything else is a dense/sparse mix-up in the file.
void check_sparse(const ObjectReader& sparse, const hw::PeakTable& dense, const hw::PeakTable& sp) {
  for (const auto& [key, prec] : kPeakKeys) {
    const auto i = static_cast<std::size_t>(prec);
    if (!sp[i]) continue;
    if (!dense[i]) {
      sparse.error(key, fmt::format("a sparse {} rate needs the dense one beside it in 'dense_peak'", key));
      continue;
    }
    const double ratio = sp[i]->raw() / dense[i]->raw();
    if (ratio <= 1.0 || ratio > 2.03)
      sparse.error(key, fmt::format("sparse {} {:g} is {:.3g}x the dense {:g}: 2:4 sparsity gives more than 1x and at "
                                    "most 2x (is a dense figure in the sparse table, or the reverse?)",
                                    key, u::to_TFLOPs(*sp[i]), ratio, u::to_TFLOPs(*dense[i])));
  }
}

const FieldTable& gpu_scale_up_fields() {
  static const FieldTable t{
      text("link", "scale-up link id (links/)", kReq),
      count("links", 180, "links per GPU", kReq),
      positive("per_gpu_uni_GBps", "GB/s", 9000, "all links together, one direction", kReq),
  };
  return t;
}

std::optional<u::Bandwidth> gbps(const ObjectReader& r, std::string_view key) {
  if (auto v = r.num(key)) return u::gb_per_s(*v);
  return std::nullopt;
}

std::vector<hw::SourceRef> decode_sources(const ObjectReader& r, Diagnostics& diags) {
  std::vector<hw::SourceRef> out;
  const Json* s = r.raw("sources");
  if (s == nullptr) return out;
  if (!s->is_array() || s->empty()) {
    r.error("sources", fmt::format("expected a non-empty array of {{id, ref, for}}, found {}",
                                   s->is_array() ? std::string("an empty array") : json_io::describe_type(*s)));
    return out;
  }
  for (std::size_t i = 0; i < s->size(); ++i) {
    ObjectReader e((*s)[i], source_fields(), r.file(), r.pointer("sources") + "/" + std::to_string(i), diags);
    if (!e.valid()) continue;
    hw::SourceRef ref;
    ref.id = e.str("id").value_or("");
    ref.ref = e.str("ref").value_or("");
    ref.fields = e.strings("for").value_or(std::vector<std::string>{});
    out.push_back(std::move(ref));
  }
  return out;
}

hw::EntityInfo decode_info(const ObjectReader& r, const std::string& file, Diagnostics& diags) {
  hw::EntityInfo info;
  info.id = r.str("id").value_or("");
  info.name = r.str("name").value_or("");
  info.file = file;
  info.notes = r.str("notes").value_or("");
  info.sources = decode_sources(r, diags);
  if (!info.id.empty() && !file.empty()) {
    const std::string stem = std::filesystem::path(file).stem().string();
    if (stem != info.id)
      r.error("id", fmt::format("id '{}' does not match the file name '{}.json'", info.id, stem));
  }
  return info;
}

/// YYYY-MM or YYYY-MM-DD with a month 01..12 and a day 01..31 (the calendar is not checked further).
bool valid_price_date(const std::string& d) {
  auto digits = [&](std::size_t from, std::size_t n) {
    for (std::size_t i = from; i < from + n; ++i)
      if (i >= d.size() || d[i] < '0' || d[i] > '9') return false;
    return true;
  };
  if (!(d.size() == 7 || d.size() == 10) || !digits(0, 4) || d[4] != '-' || !digits(5, 2)) return false;
  const int month = (d[5] - '0') * 10 + (d[6] - '0');
  if (month < 1 || month > 12) return false;
  if (d.size() == 7) return true;
  if (d[7] != '-' || !digits(8, 2)) return false;
  const int day = (d[8] - '0') * 10 + (d[9] - '0');
  return day >= 1 && day <= 31;
}

template <class T>
Result<T> finish(T value, Diagnostics diags) {
  if (diags.has_errors()) return Result<T>(std::move(diags));
  return Result<T>(std::move(value), std::move(diags));
}

}  // namespace detail
using namespace detail;

const FieldTable& gpu_fields() {
  static const FieldTable t = with_common(
      "gpu", {
                 typed("aliases", FieldType::string_list, "short names that resolve to this part (\"h100\")"),
                 text("vendor", "vendor", kReq, {"NVIDIA", "AMD"}),
                 text("family", "architecture family", kReq),
                 text("form_factor", "SXM5, PCIe, OAM...", kReq),
                 count("compute_units", 3040, "SMs (NVIDIA) or CUs (AMD)"),
                 text("compute_unit_kind", "SM or CU", kOpt, {"SM", "CU"}),
                 text("compute_capability",
                      "NVIDIA's CUDA compute capability (major.minor, developer.nvidia.com/cuda-gpus): which tensor-core "
                      "instructions and operand layouts the part has",
                      kOpt, {"7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"}),
                 positive("boost_clock_MHz", "MHz", 25000, "maximum boost clock"),
                 nested("dense_peak", peak_fields(), "dense (no 2:4 sparsity) peak rates per precision", kReq),
                 nested("sparse_peak", peak_fields(),
                        "the vendor's 2:4 structured-sparsity rates, as quoted (shown, never used by the model); "
                        "each needs its dense rate and lies in (1x, 2x] of it"),
                 text("sparsity", "how the vendor quotes sparse figures for this part"),
                 typed("engines", FieldType::any,
                       "on-chip engines beside the GPU (Jetson's DLAs): a list of {kind, name, count, clock_MHz, "
                       "dense_peak, sparse_peak}; their rates are not in the GPU's peaks"),
                 nested("memory", memory_fields(), "device memory", kReq),
                 positive("l2_MB", "MB", 2600, "L2 cache"),
                 positive("llc_MB", "MB", 2600, "last-level cache beyond L2 (AMD Infinity Cache)"),
                 positive("tdp_W", "W", 14000, "board power / TGP (max of a configurable range)"),
                 nested("scale_up", gpu_scale_up_fields(), "scale-up (NVLink/xGMI) port of the GPU"),
                 text("pcie", "PCIe link id (links/)"),
                 text("host_link", "CPU-GPU link id where it is not PCIe (links/, type c2c: Grace superchips)"),
                 positive("host_link_gpus", "GPUs", 16, "GPUs that share host_link (a GB200 Grace serves 2)"),
                 positive("price_usd_per_hour", "$/GPU-hour", 130,
                          "indicative rental price per GPU-hour, cited in sources (with price_kind and "
                          "price_provider)"),
                 text("price_kind", "what kind of rental the price is (required with a price)", kOpt,
                      {"on_demand", "spot"}),
                 text("price_provider", "who rents at that price, e.g. \"RunPod Secure Cloud\" (required with a price)"),
                 text("price_date", "when the source dates the price: YYYY-MM or YYYY-MM-DD (absent: undated)"),
             });
  return t;
}

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

Result<hw::GpuSpec> decode_gpu(const Json& j, const std::string& file) {
  Diagnostics diags;
  ObjectReader r(j, gpu_fields(), file, "", diags);
  if (!j.is_object()) return Result<hw::GpuSpec>(std::move(diags));
  hw::GpuSpec g;
  g.info = decode_info(r, file, diags);
  g.aliases = r.strings("aliases").value_or(std::vector<std::string>{});
  g.vendor = r.str("vendor").value_or("");
  g.family = r.str("family").value_or("");
  g.form_factor = r.str("form_factor").value_or("");
  g.compute_units = static_cast<int>(r.integer("compute_units").value_or(0));
  g.compute_unit_kind = r.str("compute_unit_kind").value_or("");
  if (auto cc = r.str("compute_capability")) {
    const auto dot = cc->find('.');
    if (dot != std::string::npos) g.compute_capability = std::stoi(cc->substr(0, dot)) * 10 + std::stoi(cc->substr(dot + 1));
  }
  g.boost_clock_MHz = r.num("boost_clock_MHz");
  g.sparsity = r.str("sparsity").value_or("");
  if (auto p = r.object("dense_peak"); p && p->valid()) {
    if (!decode_peaks(*p, g.dense_peak)) r.error("dense_peak", "no peak rate given: at least one precision is required");
  }
  if (auto p = r.object("sparse_peak"); p && p->valid()) {
    if (!decode_peaks(*p, g.sparse_peak)) r.error("sparse_peak", "an empty sparse table: leave it out instead");
    else check_sparse(*p, g.dense_peak, g.sparse_peak);
  }
  if (const Json* e = r.raw("engines")) {
    if (!e->is_array() || e->empty()) {
      r.error("engines", fmt::format("expected a non-empty array of {{kind, name, count, dense_peak}}, found {}",
                                     e->is_array() ? std::string("an empty array") : json_io::describe_type(*e)));
    } else {
      for (std::size_t i = 0; i < e->size(); ++i) {
        ObjectReader er((*e)[i], engine_fields(), r.file(), r.pointer("engines") + "/" + std::to_string(i), diags);
        if (!er.valid()) continue;
        hw::EngineSpec en;
        en.kind = er.str("kind").value_or("");
        en.name = er.str("name").value_or("");
        en.count = static_cast<int>(er.integer("count").value_or(0));
        en.clock_MHz = er.num("clock_MHz");
        if (auto p = er.object("dense_peak"); p && p->valid())
          if (!decode_peaks(*p, en.dense_peak)) er.error("dense_peak", "no peak rate given: at least one precision is required");
        if (auto p = er.object("sparse_peak"); p && p->valid()) {
          if (!decode_peaks(*p, en.sparse_peak)) er.error("sparse_peak", "an empty sparse table: leave it out instead");
          else check_sparse(*p, en.dense_peak, en.sparse_peak);
        }
        g.engines.push_back(std::move(en));
      }
    }
  }
  if (auto m = r.object("memory"); m && m->valid()) {
    g.memory.type = m->str("type").value_or("");
    g.memory.capacity_label = u::gigabytes(m->num("capacity_GB").value_or(0));
    if (auto v = m->num("device_reported_MiB")) g.memory.device_reported = u::mebibytes(*v);
    const auto by = m->str("device_reported_by");
    if (by) g.memory.reported_by = *by == "nvidia-smi" ? hw::MemoryReportedBy::nvidia_smi
                                   : *by == "mlperf"   ? hw::MemoryReportedBy::mlperf
                                                       : hw::MemoryReportedBy::cuda;
    // The tools disagree by hundreds of MiB (nvidia-smi counts the driver's reservation), so a figure without its
    // tool would be read as the wrong one; a tool without a figure is a leftover.
    if (g.memory.device_reported && !by && m->valid())
      m->error("device_reported_MiB", "device_reported_MiB needs 'device_reported_by' (cuda, nvidia-smi or mlperf): "
                                      "the tools report different totals for the same part");
    if (by && !g.memory.device_reported && m->valid())
      m->error("device_reported_by", "'device_reported_by' is given without 'device_reported_MiB'");
    g.memory.bandwidth = u::tb_per_s(m->num("bandwidth_TBps").value_or(0));
    g.memory.shared_with_cpu = m->boolean("shared_with_cpu").value_or(false);
  }
  if (auto v = r.num("l2_MB")) g.l2 = u::megabytes(*v);
  if (auto v = r.num("llc_MB")) g.llc = u::megabytes(*v);
  if (auto v = r.num("tdp_W")) g.tdp = u::watts(*v);
  if (auto s = r.object("scale_up"); s && s->valid()) {
    g.scale_up = hw::ScaleUpPort{s->str("link").value_or(""), static_cast<int>(s->integer("links").value_or(0)),
                                 u::gb_per_s(s->num("per_gpu_uni_GBps").value_or(0))};
  }
  g.pcie = r.str("pcie").value_or("");
  g.host_link = r.str("host_link").value_or("");
  if (auto v = r.num("host_link_gpus")) g.host_link_gpus = std::max(1, static_cast<int>(*v));
  if (auto v = r.num("price_usd_per_hour")) g.price = u::usd_per_hour(*v);
  {
    const auto kind = r.str("price_kind");
    const auto provider = r.str("price_provider");
    const auto date = r.str("price_date");
    if (kind) g.price_kind = *kind == "spot" ? hw::PriceKind::spot : hw::PriceKind::on_demand;
    g.price_provider = provider.value_or("");
    g.price_date = date.value_or("");
    // A price without its kind cannot be compared with another (spot is often half of on-demand); price fields
    // without a price are leftovers.
    if (r.valid()) {
      if (g.price && !kind)
        r.error("price_usd_per_hour", "a price needs 'price_kind' (on_demand or spot): spot and on-demand prices "
                                      "are not comparable");
      if (g.price && (!provider || provider->empty()))
        r.error("price_usd_per_hour", "a price needs 'price_provider' (who rents at that price)");
      for (const char* key : {"price_kind", "price_provider", "price_date"})
        if (!g.price && r.has(key))
          r.error(key, fmt::format("'{}' is given without 'price_usd_per_hour'", key));
      if (date && !valid_price_date(*date))
        r.error("price_date", fmt::format("'{}' is not a date of the form YYYY-MM or YYYY-MM-DD", *date));
    }
  }
  return finish(std::move(g), std::move(diags));
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

void load_hardware_file(const std::string& path, hw::HardwareDb& db, Diagnostics& diags) {
  auto text_ = json_io::read_text_file(path, diags);
  if (!text_) return;
  auto j = json_io::parse(*text_, path, diags);
  if (!j) return;
  if (!j->is_object()) {
    diags.error(path, "/", fmt::format("expected an object, found {}", json_io::describe_type(*j)));
    return;
  }
  const auto kind_it = j->find("kind");
  if (kind_it == j->end() || !kind_it->is_string()) {
    diags.error(path, "/kind", "missing or non-string 'kind' (one of 'gpu', 'link', 'node', 'cluster')");
    return;
  }
  const std::string kind = kind_it->get<std::string>();
  auto take = [&](auto result, auto& into) {
    diags.append(result.diagnostics());
    if (result.ok()) into.push_back(std::move(result).value());
  };
  if (kind == "gpu") take(decode_gpu(*j, path), db.gpus);
  else if (kind == "link") take(decode_link(*j, path), db.links);
  else if (kind == "node") take(decode_node(*j, path), db.nodes);
  else if (kind == "cluster") take(decode_cluster(*j, path), db.clusters);
  else if (kind == "efficiency") take(decode_efficiency(*j, path), db.efficiency);
  else
    diags.error(path, "/kind",
                fmt::format("unknown kind '{}': expected 'gpu', 'link', 'node', 'cluster' or 'efficiency'{}", kind,
                            did_you_mean(kind, {"gpu", "link", "node", "cluster", "efficiency"})));
}

void check_references(const hw::HardwareDb& db, Diagnostics& diags) {
  std::map<std::string, std::string> seen;  // id or alias -> file
  auto claim = [&](const std::string& name, const std::string& file, const std::string& ptr) {
    auto [it, inserted] = seen.emplace(name, file);
    if (!inserted)
      diags.error(file, ptr, fmt::format("'{}' is already used by {}", name, it->second));
  };
  for (const auto& g : db.gpus) {
    claim(g.info.id, g.info.file, "/id");
    for (std::size_t i = 0; i < g.aliases.size(); ++i) claim(g.aliases[i], g.info.file, "/aliases/" + std::to_string(i));
  }
  auto check_link = [&](const std::string& id, const std::string& file, const std::string& ptr,
                        std::initializer_list<hw::LinkType> allowed) {
    if (id.empty()) return;
    const hw::LinkSpec* l = db.find_link(id);
    if (l == nullptr) {
      diags.error(file, ptr, fmt::format("unknown link '{}'{}", id, did_you_mean(id, db.link_ids())));
      return;
    }
    if (std::find(allowed.begin(), allowed.end(), l->type) == allowed.end()) {
      std::string list;
      for (auto t : allowed) list += (list.empty() ? "" : ", ") + std::string(hw::to_string(t));
      diags.error(file, ptr, fmt::format("link '{}' is of type {}, but this field takes a link of type {}", id,
                                         hw::to_string(l->type), list));
    }
  };
  using LT = hw::LinkType;
  for (const auto& g : db.gpus) {
    if (g.scale_up) check_link(g.scale_up->link, g.info.file, "/scale_up/link", {LT::nvlink, LT::xgmi, LT::pcie});
    check_link(g.pcie, g.info.file, "/pcie", {LT::pcie});
    check_link(g.host_link, g.info.file, "/host_link", {LT::c2c});
  }
  for (const auto& n : db.nodes) {
    if (db.find_gpu(n.gpu) == nullptr)
      diags.error(n.info.file, "/gpu", fmt::format("unknown GPU '{}'{}", n.gpu, did_you_mean(n.gpu, db.gpu_names())));
    check_link(n.scale_up.link, n.info.file, "/scale_up/link", {LT::nvlink, LT::xgmi, LT::pcie});
    check_link(n.scale_up.switch_id, n.info.file, "/scale_up/switch", {LT::nvswitch});
    if (n.scale_out) check_link(n.scale_out->link, n.info.file, "/scale_out/link", {LT::infiniband, LT::ethernet});
  }
  for (const auto& c : db.clusters) {
    if (db.find_node(c.node) == nullptr)
      diags.error(c.info.file, "/node", fmt::format("unknown node '{}'{}", c.node, did_you_mean(c.node, db.node_ids())));
    check_link(c.fabric.link, c.info.file, "/fabric/link", {LT::infiniband, LT::ethernet});
  }
  auto unique = [&](const auto& v, const char* what) {
    std::map<std::string, std::string> ids;
    for (const auto& e : v) {
      auto [it, inserted] = ids.emplace(e.info.id, e.info.file);
      if (!inserted) diags.error(e.info.file, "/id", fmt::format("duplicate {} id '{}' (also in {})", what, e.info.id, it->second));
    }
  };
  unique(db.links, "link");
  unique(db.nodes, "node");
  unique(db.clusters, "cluster");
}

Result<hw::HardwareDb> load_hardware_db(const std::string& data_dir) {
  Diagnostics diags;
  hw::HardwareDb db;
  namespace fs = std::filesystem;
  const fs::path root = fs::path(data_dir) / "hardware";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    diags.error(root.string(), "", "hardware data directory not found (set --data-dir or GPUPLAN_DATA_DIR)");
    return Result<hw::HardwareDb>(std::move(diags));
  }
  for (const char* sub : {"links", "gpus", "nodes", "clusters", "efficiency"}) {
    const fs::path dir = root / sub;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".json") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) load_hardware_file(f.string(), db, diags);
  }
  check_references(db, diags);
  resolve_efficiency(db, diags);
  if (diags.has_errors()) return Result<hw::HardwareDb>(std::move(diags));
  // Citations name a file relative to the data directory; diagnostics above named the path as loaded.
  const fs::path base(data_dir);
  auto relative = [&](hw::EntityInfo& info) {
    if (info.file.empty()) return;
    const fs::path rel = fs::path(info.file).lexically_relative(base);
    if (!rel.empty() && *rel.begin() != "..") info.cited_file = rel.generic_string();
  };
  for (auto& g : db.gpus) relative(g.info);
  for (auto& l : db.links) relative(l.info);
  for (auto& n : db.nodes) relative(n.info);
  for (auto& c : db.clusters) relative(c.info);
  for (auto& e : db.efficiency) relative(e.info);
  return Result<hw::HardwareDb>(std::move(db), std::move(diags));
}

}  // namespace gpuplan::hw_io
