// The GPU files (hardware_io.hpp): their field table and decoder, with the peak, memory and engine tables and the
// dense/sparse check. Split from hardware_io.cpp, code moved verbatim.
#include "gpuplan/hw_io/hardware_io.hpp"

#include "decode_common.hpp"

#include <fmt/format.h>

namespace gpuplan::hw_io {

namespace detail {

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
                                 "reserved memory), mlperf = an MLPerf system description's accelerator memory, "
                                 "rocminfo = the ROCm runtime's GPU memory pool (HIP's totalGlobalMem)",
           kOpt, {"cuda", "nvidia-smi", "mlperf", "rocminfo"}),
      positive("bandwidth_TBps", "TB/s", 80, "peak memory bandwidth", kReq),
      typed("shared_with_cpu", FieldType::boolean,
            "true on a system-on-chip (Jetson): CPU, GPU and on-chip engines share this memory and its bandwidth"),
      positive("context_MiB", "MiB", 16384,
               "device memory a process's CUDA/HIP context and loaded kernel images take outside the framework's "
               "allocator on this part's generation (with context_basis); absent: the model's generic figure"),
      text("context_basis", "where context_MiB comes from: the measurement file or publication, the CUDA version "
                            "and what the process had run (required with it)"),
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
/// A file without a price says why (price_none) and when the search was made; a file cannot say both. The reason is
/// provenance only: nothing downstream reads it, so it is checked here and not kept in GpuSpec.
void check_price_none(const ObjectReader& r, bool priced) {
  if (!r.valid()) return;
  const auto none = r.str("price_none");
  const auto checked = r.str("price_none_checked");
  if (none && priced)
    r.error("price_none", fmt::format("'price_none' ({}) says there is no public price, but 'price_usd_per_hour' "
                                      "gives one: keep one of the two",
                                      *none));
  if (none && !checked)
    r.error("price_none", "'price_none' needs 'price_none_checked' (when the search for a price was made)");
  if (checked && !none) r.error("price_none_checked", "'price_none_checked' is given without 'price_none'");
  if (checked && !valid_price_date(*checked))
    r.error("price_none_checked", fmt::format("'{}' is not a date of the form YYYY-MM or YYYY-MM-DD", *checked));
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
                 text("price_none",
                      "why the file has no price (instead of price_usd_per_hour): not_offered (never rented to the "
                      "public: OEM, HPC or embedded parts), contract_only (rented only under contract or quote, no "
                      "list price), not_found (rented, but no list price with its provider and kind was found); the "
                      "search is cited in sources (\"for\": [\"/price_none\"])",
                      kOpt, {"not_offered", "contract_only", "not_found"}),
                 text("price_none_checked",
                      "when the search behind price_none was made: YYYY-MM or YYYY-MM-DD (required with price_none)"),
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
                                   : *by == "rocminfo" ? hw::MemoryReportedBy::rocminfo
                                                       : hw::MemoryReportedBy::cuda;
    // The tools disagree by hundreds of MiB (nvidia-smi counts the driver's reservation), so a figure without its
    // tool would be read as the wrong one; a tool without a figure is a leftover.
    if (g.memory.device_reported && !by && m->valid())
      m->error("device_reported_MiB", "device_reported_MiB needs 'device_reported_by' (cuda, nvidia-smi, mlperf or "
                                      "rocminfo): "
                                      "the tools report different totals for the same part");
    if (by && !g.memory.device_reported && m->valid())
      m->error("device_reported_by", "'device_reported_by' is given without 'device_reported_MiB'");
    g.memory.bandwidth = u::tb_per_s(m->num("bandwidth_TBps").value_or(0));
    g.memory.shared_with_cpu = m->boolean("shared_with_cpu").value_or(false);
    if (auto v = m->num("context_MiB")) g.memory.context = u::mebibytes(*v);
    g.memory.context_basis = m->str("context_basis").value_or("");
    // A context figure moves every fit check on the part: without its basis it could not be told from a guess.
    if (g.memory.context && g.memory.context_basis.empty() && m->valid())
      m->error("context_MiB", "context_MiB needs 'context_basis' (the measurement or publication it comes from)");
    if (!g.memory.context && !g.memory.context_basis.empty() && m->valid())
      m->error("context_basis", "'context_basis' is given without 'context_MiB'");
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
    check_price_none(r, g.price.has_value());
  }
  return finish(std::move(g), std::move(diags));
}
}  // namespace gpuplan::hw_io
