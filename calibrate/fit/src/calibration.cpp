#include "gpuplan/calibrate/calibration.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuplan/core/format.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/ops.hpp"

namespace gpuplan::calib {

using json_io::Json;
using units::Seconds;

// ---------------------------------------------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------------------------------------------

namespace {

/// Reads one number at `obj[key]` (required); a diagnostic names the pointer when it is missing, not a number, or not
/// positive (when `positive`).
std::optional<double> number(const Json& obj, const char* key, const std::string& file, const std::string& ptr,
                             Diagnostics& d, bool positive = true) {
  if (!obj.contains(key)) {
    d.error(file, ptr + "/" + key, "missing");
    return std::nullopt;
  }
  const Json& v = obj[key];
  if (!v.is_number()) {
    d.error(file, ptr + "/" + key, "expected a number, found " + json_io::describe_type(v));
    return std::nullopt;
  }
  const double x = v.get<double>();
  if (!std::isfinite(x) || (positive && !(x > 0))) {
    d.error(file, ptr + "/" + key, fmt::format("expected a positive number, found {}", json_io::describe_value(v)));
    return std::nullopt;
  }
  return x;
}
std::optional<std::string> text(const Json& obj, const char* key, const std::string& file, const std::string& ptr,
                                Diagnostics& d, const std::vector<std::string>& choices = {}) {
  if (!obj.contains(key) || !obj[key].is_string()) {
    d.error(file, ptr + "/" + key,
            obj.contains(key) ? "expected a string, found " + json_io::describe_type(obj[key]) : std::string("missing"));
    return std::nullopt;
  }
  std::string s = obj[key].get<std::string>();
  if (!choices.empty() && std::find(choices.begin(), choices.end(), s) == choices.end()) {
    std::string list;
    for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
    d.error(file, ptr + "/" + key, fmt::format("'{}' is not one of {}{}", s, list, did_you_mean(s, choices)));
    return std::nullopt;
  }
  return s;
}
/// A rank count becomes an int: no NCCL run has more than 2^20 ranks (fuzz_calib: 1e12 overflowed the conversion).
bool rank_count_ok(double ranks, const std::string& file, const std::string& ptr, Diagnostics& d) {
  if (ranks <= 1048576.0) return true;
  d.error(file, ptr + "/ranks", fmt::format("expected a rank count up to 2^20, found {}", ranks));
  return false;
}
const Json* array_at(const Json& root, const char* key, const std::string& file, Diagnostics& d) {
  if (!root.contains(key)) return nullptr;
  if (!root[key].is_array()) {
    d.error(file, std::string("/") + key, "expected an array, found " + json_io::describe_type(root[key]));
    return nullptr;
  }
  return &root[key];
}

}  // namespace

Result<Samples> read_samples(const std::string& path) {
  Diagnostics d;
  auto body = json_io::read_text_file(path, d);
  if (!body) return Result<Samples>(std::move(d));
  auto j = json_io::parse(*body, path, d);
  if (!j) return Result<Samples>(std::move(d));
  Samples s;
  s.file = path;
  if (!j->is_object()) {
    d.error(path, "", "expected a JSON object (a calibration samples file)");
    return Result<Samples>(std::move(d));
  }
  if (const auto kind = j->find("kind");
      kind == j->end() || !kind->is_string() || kind->get<std::string>() != "gpuplan-calibration-samples")
    d.error(path, "/kind", "expected \"gpuplan-calibration-samples\" (is this a samples file written by the benches?)");
  if (j->contains("device") && (*j)["device"].is_object()) {
    const Json& dev = (*j)["device"];
    if (dev.contains("name") && dev["name"].is_string()) s.gpu_name = dev["name"].get<std::string>();
    else if (dev.contains("name"))
      d.error(path, "/device/name", "expected a string (the GPU's name), found " + json_io::describe_type(dev["name"]));
    if (dev.contains("driver") && dev["driver"].is_string()) s.driver = dev["driver"].get<std::string>();
    const Json* sw = j->contains("software") && (*j)["software"].is_object() ? &(*j)["software"] : nullptr;
    if (s.driver.empty() && sw != nullptr && sw->contains("driver") && (*sw)["driver"].is_string())
      s.driver = (*sw)["driver"].get<std::string>();
    if (dev.contains("sm_count") && dev["sm_count"].is_number_integer()) s.sm_count = dev["sm_count"].get<int>();
    if (dev.contains("l2_bytes") && dev["l2_bytes"].is_number()) s.l2_bytes = dev["l2_bytes"].get<double>();
  } else {
    d.error(path, "/device", "missing: the GPU the samples were taken on");
  }
  static const std::vector<std::string> kDtypes{"bf16", "fp16", "fp8", "tf32", "fp32"};
  if (const Json* a = array_at(*j, "gemm", path, d))
    for (std::size_t i = 0; i < a->size(); ++i) {
      const Json& e = (*a)[i];
      const std::string p = fmt::format("/gemm/{}", i);
      GemmSample g;
      auto dt = text(e, "dtype", path, p, d, kDtypes);
      auto m = number(e, "m", path, p, d), n = number(e, "n", path, p, d), k = number(e, "k", path, p, d);
      auto t = number(e, "median_s", path, p, d);
      if (!dt || !m || !n || !k || !t) continue;
      // GEMM sizes become 64-bit integers (and their product FLOPs): a size beyond 2^31 is not a benchmark shape
      // (fuzz_calib: 1e30 overflowed the conversion).
      bool dims_ok = true;
      for (const auto& [key, v] : {std::pair{"m", *m}, std::pair{"n", *n}, std::pair{"k", *k}})
        if (v > 2147483647.0) {
          d.error(path, p + "/" + key, fmt::format("expected a matrix size up to 2^31, found {}", v));
          dims_ok = false;
        }
      if (!dims_ok) continue;
      g.dtype = *dt;
      if (e.contains("shape") && e["shape"].is_string()) g.shape = e["shape"].get<std::string>();
      else if (e.contains("shape")) d.error(path, p + "/shape", "expected a string, found " + json_io::describe_type(e["shape"]));
      g.m = std::int64_t(*m);
      g.n = std::int64_t(*n);
      g.k = std::int64_t(*k);
      g.median_s = *t;
      s.gemm.push_back(g);
    }
  if (const Json* a = array_at(*j, "hbm", path, d))
    for (std::size_t i = 0; i < a->size(); ++i) {
      const Json& e = (*a)[i];
      const std::string p = fmt::format("/hbm/{}", i);
      auto op = text(e, "op", path, p, d);
      auto b = number(e, "bytes", path, p, d);
      auto t = number(e, "median_s", path, p, d);
      auto g = number(e, "gbps", path, p, d);
      if (!op || !b || !t || !g) continue;
      s.hbm.push_back({*op, *b, *t, *g});
    }
  if (j->contains("launch") && (*j)["launch"].is_object()) {
    const Json& l = (*j)["launch"];
    if (l.contains("launch_s")) s.launch_s = number(l, "launch_s", path, "/launch", d);
    if (l.contains("graph_kernel_s")) s.graph_kernel_s = number(l, "graph_kernel_s", path, "/launch", d);
  }
  static const std::vector<std::string> kOps{"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"};
  if (const Json* a = array_at(*j, "collectives", path, d))
    for (std::size_t i = 0; i < a->size(); ++i) {
      const Json& e = (*a)[i];
      const std::string p = fmt::format("/collectives/{}", i);
      auto op = text(e, "op", path, p, d, kOps);
      auto r = number(e, "ranks", path, p, d);
      auto b = number(e, "bytes", path, p, d);
      auto t = number(e, "median_s", path, p, d);
      if (!op || !r || !b || !t) continue;
      if (!rank_count_ok(*r, path, p, d)) continue;
      s.collectives.push_back({*op, int(*r), *b, *t});
    }
  if (const Json* a = array_at(*j, "overlap", path, d))
    for (std::size_t i = 0; i < a->size(); ++i) {
      const Json& e = (*a)[i];
      const std::string p = fmt::format("/overlap/{}", i);
      auto op = text(e, "op", path, p, d, kOps);
      auto r = number(e, "ranks", path, p, d);
      auto b = number(e, "bytes", path, p, d);
      auto ca = number(e, "coll_alone_s", path, p, d);
      auto co = number(e, "coll_overlap_s", path, p, d);
      auto ga = number(e, "gemm_alone_s", path, p, d);
      auto go = number(e, "gemm_overlap_s", path, p, d);
      if (!op || !r || !b || !ca || !co || !ga || !go) continue;
      if (!rank_count_ok(*r, path, p, d)) continue;
      s.overlap.push_back({*op, int(*r), *b, *ca, *co, *ga, *go});
    }
  if (j->contains("sustained") && (*j)["sustained"].is_object())
    s.sustained_tflops = number((*j)["sustained"], "sustained_tflops", path, "/sustained", d);
  if (j->contains("rejected") && (*j)["rejected"].is_array()) s.rejected = int((*j)["rejected"].size());
  if (s.gemm.empty() && s.hbm.empty() && s.collectives.empty() && s.overlap.empty() && !s.launch_s &&
      !s.graph_kernel_s && !s.sustained_tflops)
    d.error(path, "", "no samples: none of gemm, hbm, launch, collectives, overlap, sustained holds a measurement");
  if (d.has_errors()) return Result<Samples>(std::move(d));
  return Result<Samples>(std::move(s), std::move(d));
}

// ---------------------------------------------------------------------------------------------------------------
// Fitting
// ---------------------------------------------------------------------------------------------------------------

namespace {

/// y ≈ intercept + slope·x, least squares on the relative error (each row divided by y), intercept ≥ 0 (refitted
/// through the origin when the free fit gives a negative one). Returns {intercept, slope}.
std::pair<double, double> fit_line(const std::vector<double>& xs, const std::vector<double>& ys) {
  const auto n = static_cast<Eigen::Index>(xs.size());
  Eigen::MatrixXd A(n, 2);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    A(i, 0) = 1.0 / ys[std::size_t(i)];
    A(i, 1) = xs[std::size_t(i)] / ys[std::size_t(i)];
  }
  Eigen::Vector2d c = A.colPivHouseholderQr().solve(b);
  if (c(0) < 0 || !std::isfinite(c(0))) {
    const double num = A.col(1).dot(b), den = A.col(1).squaredNorm();
    return {0.0, den > 0 ? num / den : 0.0};
  }
  return {c(0), c(1)};
}

/// A fit whose numbers are not all finite (samples at the edge of double range: fuzz_calib) is not used.
bool finite(const FitQuality& q) { return std::isfinite(q.median_rel_error) && std::isfinite(q.max_rel_error); }

FitQuality quality(const std::vector<double>& predicted, const std::vector<double>& measured) {
  FitQuality q;
  std::vector<double> e;
  for (std::size_t i = 0; i < predicted.size(); ++i) e.push_back(std::fabs(predicted[i] / measured[i] - 1.0));
  q.points = int(e.size());
  if (e.empty()) return q;
  std::sort(e.begin(), e.end());
  q.median_rel_error = e.size() % 2 ? e[e.size() / 2] : 0.5 * (e[e.size() / 2 - 1] + e[e.size() / 2]);
  q.max_rel_error = e.back();
  return q;
}

/// t = t₀ + x / η with x the time at the datasheet bandwidth: η = 1 / slope, and the fit's quality.
StreamFit fit_stream(const std::vector<double>& xs, const std::vector<double>& ys) {
  const auto [t0, slope] = fit_line(xs, ys);
  StreamFit f;
  f.efficiency = slope > 0 ? 1.0 / slope : 0.0;
  f.t0 = Seconds(t0);
  std::vector<double> pred;
  for (double x : xs) pred.push_back(t0 + x * slope);
  f.fit = quality(pred, ys);
  return f;
}

std::string short_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

}  // namespace

Result<Profile> fit_profile(const std::vector<Samples>& samples, const hw::GpuSpec& gpu, const hw::HardwareDb& db) {
  Diagnostics d;
  Profile p;
  p.gpu_id = gpu.info.id;
  for (const auto& s : samples) {
    p.samples.push_back(short_name(s.file));
    if (p.gpu_name.empty()) p.gpu_name = s.gpu_name;
    if (p.driver.empty()) p.driver = s.driver;
    if (s.rejected > 0)
      p.notes.push_back(fmt::format("{}: {} samples were refused by the benches (spread too wide) and are not used",
                                    short_name(s.file), s.rejected));
  }
  // The model's own shape utilisation, at a 100% ceiling and no fixed cost, so that the fit measures only what the
  // shape model does not explain.
  model::Device unit = model::make_device(gpu);
  unit.eff.gemm_bf16 = unit.eff.gemm_fp8 = 1.0;
  unit.eff.kernel_launch = Seconds(0);
  const double bw = gpu.memory.bandwidth.raw();

  // HBM first (the GEMM roofline check uses it).
  {
    std::vector<double> xs, ys;
    const double floor_bytes = std::max(256.0 * 1024 * 1024, 4.0 * (gpu.l2 ? gpu.l2->raw() : 0.0));
    for (const auto& s : samples)
      for (const auto& h : s.hbm)
        if ((h.op == "copy" || h.op == "triad" || h.op == "read") && h.bytes >= floor_bytes) {
          xs.push_back(h.gbps * 1e9 * h.median_s / bw);  // time at the datasheet bandwidth for the bytes moved
          ys.push_back(h.median_s);
        }
    const StreamFit f = xs.size() >= 2 ? fit_stream(xs, ys) : StreamFit{};
    if (xs.size() >= 2 && !(std::isfinite(f.efficiency) && std::isfinite(f.t0.raw()) && finite(f.fit))) {
      p.notes.push_back("the HBM samples give no finite fit: the built-in streaming efficiency stays");
    } else if (xs.size() >= 2) {
      if (f.efficiency > 1.05 || f.efficiency < 0.2)
        d.warning("", "/hbm", fmt::format("fitted HBM efficiency {:.3f} of {} is implausible: check the samples",
                                          f.efficiency, units::format(gpu.memory.bandwidth)));
      p.hbm = f;
    } else {
      p.notes.push_back("no HBM samples larger than 4 × L2: the built-in streaming efficiency stays");
    }
  }

  // Memory-bound GEMMs (16-bit): the bandwidth at which GEMM kernels stream their operands, and their fixed cost.
  {
    std::vector<double> xs, ys;
    for (const auto& s : samples)
      for (const auto& g : s.gemm) {
        if (g.dtype != "bf16" && g.dtype != "fp16") continue;
        const auto prec = hw::parse_precision(g.dtype);
        if (!prec || !gpu.peak(*prec)) continue;
        const auto c = model::gemm_cost("fit", {g.m, g.n, g.k, 1}, *prec, unit);
        if (c.intensity().raw() >= 0.25 * gpu.peak(*prec)->raw() / bw) continue;
        xs.push_back(c.bytes.raw() / bw);
        ys.push_back(g.median_s);
      }
    const StreamFit f = xs.size() >= 3 ? fit_stream(xs, ys) : StreamFit{};
    if (xs.size() >= 3 && std::isfinite(f.efficiency) && std::isfinite(f.t0.raw()) && finite(f.fit)) {
      p.gemm_memory = f;
    } else if (xs.size() >= 3) {
      p.notes.push_back("the memory-bound GEMM samples give no finite fit: GEMMs stream at the HBM efficiency");
    } else {
      p.notes.push_back("fewer than 3 memory-bound 16-bit GEMM samples: GEMMs stream at the HBM efficiency");
    }
  }

  std::set<std::string> dtypes;
  for (const auto& s : samples)
    for (const auto& g : s.gemm) dtypes.insert(g.dtype);
  for (const auto& dt : dtypes) {
    const auto prec = hw::parse_precision(dt);
    if (!prec || !gpu.peak(*prec)) {
      p.notes.push_back(fmt::format("{} GEMM samples skipped: {} has no {} peak in the data", dt, gpu.info.id, dt));
      continue;
    }
    const double peak = gpu.peak(*prec)->raw();
    const double ridge = peak / bw;
    std::vector<double> xs, ys;
    std::vector<const GemmSample*> all;
    for (const auto& s : samples)
      for (const auto& g : s.gemm) {
        if (g.dtype != dt) continue;
        all.push_back(&g);
        const auto c = model::gemm_cost("fit", {g.m, g.n, g.k, 1}, *prec, unit);
        if (c.intensity().raw() < 2.0 * ridge) continue;  // compute-bound shapes only
        xs.push_back(c.flops.raw() / (peak * c.efficiency));  // time at η = 1 with the shape's utilisation
        ys.push_back(g.median_s);
      }
    if (xs.size() < 3) {
      p.notes.push_back(fmt::format("{}: fewer than 3 compute-bound GEMM samples, not fitted", dt));
      continue;
    }
    const auto [t0, slope] = fit_line(xs, ys);
    GemmFit f;
    f.dtype = dt;
    f.ceiling = slope > 0 ? 1.0 / slope : 0.0;
    f.t0 = Seconds(t0);
    std::vector<double> pred;
    for (double x : xs) pred.push_back(t0 + x * slope);
    f.fit = quality(pred, ys);
    // Whole-roofline check over every shape of this dtype with the fitted numbers (memory-bound decode shapes too).
    model::Device fitted = model::make_device(gpu);
    if (*prec == hw::Precision::fp8) fitted.eff.gemm_fp8 = f.ceiling;
    else fitted.eff.gemm_bf16 = f.ceiling;
    if (p.hbm) fitted.eff.hbm = p.hbm->efficiency;
    if (p.gemm_memory) fitted.eff.gemm_hbm = p.gemm_memory->efficiency;
    fitted.eff.kernel_launch = p.gemm_memory ? std::max(f.t0, p.gemm_memory->t0) : f.t0;
    std::vector<double> pa, ma;
    for (const auto* g : all) {
      pa.push_back(model::gemm_cost("check", {g->m, g->n, g->k, 1}, *prec, fitted).time.raw());
      ma.push_back(g->median_s);
    }
    f.all = quality(pa, ma);
    if (!(std::isfinite(f.ceiling) && std::isfinite(f.t0.raw()) && finite(f.fit) && finite(f.all))) {
      p.notes.push_back(fmt::format("{}: the GEMM samples give no finite fit, not used", dt));
      continue;
    }
    if (f.ceiling > 1.02) {
      // Faster than the dense datasheet peak: the library ran another path than the peak describes (fp32 GEMMs on
      // TF32 tensor cores, say). Not a ceiling the model can use.
      p.notes.push_back(fmt::format("{} GEMMs ran at {:.2f} × the dense {} peak in the data: the library used "
                                    "another path (e.g. TF32 tensor cores for fp32); not used",
                                    dt, f.ceiling, dt));
      continue;
    }
    p.gemm.push_back(f);
  }

  for (const auto& s : samples) {
    if (s.launch_s) p.launch = Seconds(*s.launch_s);
    if (s.graph_kernel_s) p.graph_kernel = Seconds(*s.graph_kernel_s);
  }

  // Collectives: per (op, ranks) over the GPU's node scale-up tier.
  const hw::NodeSpec* node = nullptr;
  for (const auto& n : db.nodes)
    if (n.gpu == gpu.info.id) {
      node = &n;
      break;
    }
  std::map<std::pair<std::string, int>, std::vector<const CollectiveSample*>> groups;
  for (const auto& s : samples)
    for (const auto& c : s.collectives) groups[{c.op, c.ranks}].push_back(&c);
  for (const auto& [key, pts] : groups) {
    const auto& [op, ranks] = key;
    if (pts.size() < 3 || ranks < 2) continue;
    const model::Collective kind = op == "all_reduce"       ? model::Collective::all_reduce
                                   : op == "all_gather"     ? model::Collective::all_gather
                                   : op == "reduce_scatter" ? model::Collective::reduce_scatter
                                   : op == "all_to_all"     ? model::Collective::all_to_all
                                                            : model::Collective::send_recv;
    const double factor = model::bus_factor(kind, ranks);
    // α–β with NCCL's protocol ramp left out: the latency a is what the smallest messages (≤ 64 KiB) take, the bus
    // bandwidth what the largest (the top three sizes) reach once a is paid. The quality over every size says how
    // far the two-parameter line is from the protocol switches in between.
    std::vector<const CollectiveSample*> sorted(pts.begin(), pts.end());
    std::sort(sorted.begin(), sorted.end(), [](auto* x, auto* y) { return x->bytes < y->bytes; });
    std::vector<double> small;
    for (const auto* c : sorted)
      if (c->bytes <= 65536.0) small.push_back(c->median_s);
    if (small.empty()) small.push_back(sorted.front()->median_s);
    std::sort(small.begin(), small.end());
    const double a = small[small.size() / 2];
    std::vector<double> big;
    for (std::size_t i = sorted.size() >= 3 ? sorted.size() - 3 : 0; i < sorted.size(); ++i)
      if (sorted[i]->median_s > a) big.push_back(sorted[i]->bytes * factor / (sorted[i]->median_s - a));
    if (big.empty()) continue;
    std::sort(big.begin(), big.end());
    const double bus = big[big.size() / 2];
    LinkFit f;
    f.op = op;
    f.ranks = ranks;
    f.intercept = Seconds(a);
    f.bus_bandwidth = units::Bandwidth(bus);
    std::vector<double> pred, ys;
    for (const auto* c : sorted) {
      pred.push_back(a + c->bytes * factor / bus);
      ys.push_back(c->median_s);
    }
    f.fit = quality(pred, ys);
    if (!(std::isfinite(bus) && bus > 0 && finite(f.fit))) {
      p.notes.push_back(fmt::format("{} on {} ranks: the samples give no finite fit, not used", op, ranks));
      continue;
    }
    if (node != nullptr && node->scale_up.domain_gpus >= ranks) {
      const model::CommGroup g = model::resolve_group(ranks, 1, *node, db);
      if (g.scale_up.uni_per_gpu.raw() > 0) f.bus_efficiency = f.bus_bandwidth.raw() / g.scale_up.uni_per_gpu.raw();
      const double steps = kind == model::Collective::all_reduce ? 2.0 * (ranks - 1) : double(ranks - 1);
      f.step_latency = Seconds(std::max(0.0, (a - g.call_latency.raw()) / std::max(1.0, steps)));
      f.call_latency = Seconds(std::min(a, g.call_latency.raw()));
    }
    p.links.push_back(f);
  }
  // Overlap: medians over every item (they scatter with the message size and the op; the medians are what a
  // training step's many collectives see on average). The per-item values are clamped at 0 (a GEMM a little
  // faster beside a collective is noise).
  {
    std::vector<double> loss, wait;
    for (const auto& s : samples)
      for (const auto& o : s.overlap) {
        if (!(o.gemm_overlap_s > 0 && o.gemm_alone_s > 0 && o.coll_alone_s > 0)) continue;
        loss.push_back(std::max(0.0, 1.0 - o.gemm_alone_s / o.gemm_overlap_s));
        wait.push_back(std::max(0.0, (o.coll_overlap_s - o.coll_alone_s) / o.gemm_alone_s));
      }
    if (!loss.empty()) {
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        const std::size_t n = v.size();
        return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
      };
      OverlapFit f;
      f.points = int(loss.size());
      f.compute_loss = median(loss);
      f.wait_kernels = median(wait);
      f.compute_loss_min = *std::min_element(loss.begin(), loss.end());
      f.compute_loss_max = *std::max_element(loss.begin(), loss.end());
      f.wait_kernels_min = *std::min_element(wait.begin(), wait.end());
      f.wait_kernels_max = *std::max_element(wait.begin(), wait.end());
      if (std::isfinite(f.compute_loss) && std::isfinite(f.wait_kernels) && f.compute_loss < 1.0)
        p.overlap = f;
      else
        p.notes.push_back("overlap items give no finite compute loss below 1, not used");
    }
  }
  // Sustained GEMM: its throughput over the median swept throughput of the same bf16 8192³ GEMM.
  {
    std::vector<double> sustained, swept;
    for (const auto& s : samples) {
      if (s.sustained_tflops) sustained.push_back(*s.sustained_tflops);
      for (const auto& g : s.gemm)
        if (g.dtype == "bf16" && g.m == 8192 && g.n == 8192 && g.k == 8192 && g.median_s > 0)
          swept.push_back(2.0 * 8192.0 * 8192.0 * 8192.0 / g.median_s / 1e12);
    }
    if (!sustained.empty() && swept.empty())
      p.notes.push_back("sustained GEMM measured but no swept bf16 8192³ GEMM to compare it with: not used");
    if (!sustained.empty() && !swept.empty()) {
      std::sort(sustained.begin(), sustained.end());
      std::sort(swept.begin(), swept.end());
      const double r = sustained[sustained.size() / 2] / swept[swept.size() / 2];
      if (std::isfinite(r) && r > 0.3 && r <= 1.0) p.sustained_ratio = r;
      else if (std::isfinite(r) && r > 1.0) p.sustained_ratio = 1.0;  // faster sustained than swept: no penalty
      else p.notes.push_back(fmt::format("sustained/swept GEMM ratio {} is implausible: not used", r));
    }
  }
  if (p.gemm.empty() && !p.hbm && p.links.empty() && !p.launch && !p.graph_kernel && !p.overlap && !p.sustained_ratio)
    d.error("", "", "nothing could be fitted from these samples");
  if (d.has_errors()) return Result<Profile>(std::move(d));
  return Result<Profile>(std::move(p), std::move(d));
}

// ---------------------------------------------------------------------------------------------------------------
// Profile JSON
// ---------------------------------------------------------------------------------------------------------------

namespace {
double round_sig(double x, int digits = 6) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double scale = std::pow(10.0, digits - 1 - int(std::floor(std::log10(std::fabs(x)))));
  return std::round(x * scale) / scale;
}
nlohmann::ordered_json quality_json(const FitQuality& q) {
  return {{"points", q.points}, {"median_rel_error", round_sig(q.median_rel_error, 4)},
          {"max_rel_error", round_sig(q.max_rel_error, 4)}};
}
nlohmann::ordered_json stream_json(const StreamFit& f) {
  return {{"efficiency", round_sig(f.efficiency, 4)}, {"t0_s", round_sig(f.t0.raw(), 4)}, {"fit", quality_json(f.fit)}};
}
}  // namespace

std::string profile_json(const Profile& p) {
  nlohmann::ordered_json o;
  o["schema"] = p.schema;
  o["kind"] = "gpuplan-calibration-profile";
  o["gpu"] = p.gpu_id;
  o["gpu_name"] = p.gpu_name;
  o["driver"] = p.driver;
  o["samples"] = p.samples;
  o["gemm"] = nlohmann::ordered_json::array();
  for (const auto& g : p.gemm)
    o["gemm"].push_back({{"dtype", g.dtype},
                         {"ceiling", round_sig(g.ceiling, 4)},
                         {"t0_s", round_sig(g.t0.raw(), 4)},
                         {"fit", quality_json(g.fit)},
                         {"roofline_check", quality_json(g.all)}});
  if (p.hbm) o["hbm"] = stream_json(*p.hbm);
  if (p.gemm_memory) o["gemm_memory"] = stream_json(*p.gemm_memory);
  if (p.launch) o["launch_s"] = round_sig(p.launch->raw(), 4);
  if (p.graph_kernel) o["graph_kernel_s"] = round_sig(p.graph_kernel->raw(), 4);
  o["links"] = nlohmann::ordered_json::array();
  for (const auto& l : p.links)
    o["links"].push_back({{"op", l.op},
                          {"ranks", l.ranks},
                          {"intercept_s", round_sig(l.intercept.raw(), 4)},
                          {"bus_bandwidth_GBps", round_sig(units::to_GBps(l.bus_bandwidth), 4)},
                          {"bus_efficiency", round_sig(l.bus_efficiency, 4)},
                          {"step_latency_s", round_sig(l.step_latency.raw(), 4)},
                          {"call_latency_s", round_sig(l.call_latency.raw(), 4)},
                          {"fit", quality_json(l.fit)}});
  if (p.sustained_ratio) o["gemm_sustained_ratio"] = round_sig(*p.sustained_ratio, 4);
  if (p.overlap)
    o["overlap"] = {{"compute_loss", round_sig(p.overlap->compute_loss, 4)},
                    {"wait_kernels", round_sig(p.overlap->wait_kernels, 4)},
                    {"points", p.overlap->points},
                    {"compute_loss_range", {round_sig(p.overlap->compute_loss_min, 4), round_sig(p.overlap->compute_loss_max, 4)}},
                    {"wait_kernels_range", {round_sig(p.overlap->wait_kernels_min, 4), round_sig(p.overlap->wait_kernels_max, 4)}}};
  o["notes"] = p.notes;
  return o.dump(2) + "\n";
}

namespace {
json_io::FieldSpec field(std::string key, json_io::FieldType type, json_io::Presence presence, std::string unit,
                         double min, double max, std::string doc, std::vector<std::string> choices = {},
                         const json_io::FieldTable* nested = nullptr) {
  json_io::FieldSpec f;
  f.key = std::move(key);
  f.type = type;
  f.presence = presence;
  f.unit = std::move(unit);
  f.min = min;
  f.max = max;
  f.doc = std::move(doc);
  f.choices = std::move(choices);
  f.nested = nested;
  return f;
}
using FT = json_io::FieldType;
constexpr auto kReq = json_io::Presence::required;
constexpr auto kOpt = json_io::Presence::optional;
const json_io::FieldTable kQuality{field("points", FT::integer, kReq, "", 0, 1e9, "points fitted"),
                                   field("median_rel_error", FT::number, kReq, "", 0, 1e6, "median |relative error|"),
                                   field("max_rel_error", FT::number, kReq, "", 0, 1e6, "max |relative error|")};
const json_io::FieldTable kGemmFit{
    field("dtype", FT::string, kReq, "", 0, 0, "precision", {"bf16", "fp16", "fp8", "tf32", "fp32"}),
    field("ceiling", FT::number, kReq, "", 0, 1.5, "achieved / dense peak on compute-bound shapes"),
    field("t0_s", FT::number, kReq, "s", 0, 1, "fixed cost per GEMM"),
    field("fit", FT::object, kReq, "", 0, 0, "fit quality on the compute-bound points", {}, &kQuality),
    field("roofline_check", FT::object, kReq, "", 0, 0, "whole-roofline check over every shape", {}, &kQuality)};
const json_io::FieldTable kHbmFit{field("efficiency", FT::number, kReq, "", 0, 1.5, "achieved / datasheet bandwidth"),
                                  field("t0_s", FT::number, kReq, "s", 0, 1, "fixed cost"),
                                  field("fit", FT::object, kReq, "", 0, 0, "fit quality", {}, &kQuality)};
const json_io::FieldTable kLinkFit{
    field("op", FT::string, kReq, "", 0, 0, "collective",
          {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"}),
    field("ranks", FT::integer, kReq, "", 2, 1e6, "GPUs"),
    field("intercept_s", FT::number, kReq, "s", 0, 1, "time of an empty call"),
    field("bus_bandwidth_GBps", FT::number, kReq, "GB/s", 0, 1e5, "asymptotic bus bandwidth"),
    field("bus_efficiency", FT::number, kReq, "", 0, 1.5, "bus bandwidth / per-GPU link bandwidth"),
    field("step_latency_s", FT::number, kReq, "s", 0, 1, "per-step α"),
    field("call_latency_s", FT::number, kOpt, "s", 0, 1, "base latency per call (≤ the model's NCCL constant)"),
    field("fit", FT::object, kReq, "", 0, 0, "fit quality", {}, &kQuality)};
const json_io::FieldTable kOverlapFit{
    field("compute_loss", FT::number, kReq, "", 0, 0.999, "GEMM throughput lost beside a collective (median)"),
    field("wait_kernels", FT::number, kReq, "", 0, 100, "extra time per collective call, in compute-kernel durations (median)"),
    field("points", FT::integer, kReq, "", 1, 1e9, "overlap items"),
    field("compute_loss_range", FT::any, kOpt, "", 0, 0, "[min, max] over the items"),
    field("wait_kernels_range", FT::any, kOpt, "", 0, 0, "[min, max] over the items")};
const json_io::FieldTable kProfile{
    field("schema", FT::integer, kReq, "", 1, 1, "format version"),
    field("kind", FT::string, kReq, "", 0, 0, "file kind", {"gpuplan-calibration-profile"}),
    field("gpu", FT::string, kReq, "", 0, 0, "GPU id (data/hardware/gpus)"),
    field("gpu_name", FT::string, kOpt, "", 0, 0, "the driver's name of the GPU measured"),
    field("driver", FT::string, kOpt, "", 0, 0, "driver version"),
    field("samples", FT::string_list, kReq, "", 0, 0, "sample files it was fitted from"),
    field("gemm", FT::any, kReq, "", 0, 0, "GEMM fits, one per precision"),
    field("hbm", FT::object, kOpt, "", 0, 0, "HBM streaming fit", {}, &kHbmFit),
    field("gemm_memory", FT::object, kOpt, "", 0, 0, "memory-bound GEMM streaming fit", {}, &kHbmFit),
    field("launch_s", FT::number, kOpt, "s", 0, 1, "eager launch interval of an empty kernel"),
    field("graph_kernel_s", FT::number, kOpt, "s", 0, 1, "per kernel inside a replayed CUDA graph"),
    field("links", FT::any, kReq, "", 0, 0, "collective fits, one per (op, ranks)"),
    field("overlap", FT::object, kOpt, "", 0, 0, "communication beside compute", {}, &kOverlapFit),
    field("gemm_sustained_ratio", FT::number, kOpt, "", 0.3, 1.0, "sustained / swept bf16 8192³ GEMM throughput"),
    field("notes", FT::string_list, kOpt, "", 0, 0, "what could not be fitted, refused samples")};

FitQuality read_quality(const json_io::ObjectReader& r, const char* key) {
  FitQuality q;
  if (auto o = r.object(key)) {
    q.points = int(o->integer("points").value_or(0));
    q.median_rel_error = o->num("median_rel_error").value_or(0);
    q.max_rel_error = o->num("max_rel_error").value_or(0);
  }
  return q;
}
StreamFit read_stream_fit(const json_io::ObjectReader& h) {
  StreamFit f;
  f.efficiency = h.num("efficiency").value_or(0);
  f.t0 = Seconds(h.num("t0_s").value_or(0));
  f.fit = read_quality(h, "fit");
  return f;
}
}  // namespace

Result<Profile> read_profile(const std::string& path) {
  Diagnostics d;
  auto body = json_io::read_text_file(path, d);
  if (!body) return Result<Profile>(std::move(d));
  auto j = json_io::parse(*body, path, d);
  if (!j) return Result<Profile>(std::move(d));
  json_io::ObjectReader r(*j, kProfile, path, "", d);
  Profile p;
  p.file = path;
  p.gpu_id = r.str("gpu").value_or("");
  p.gpu_name = r.str("gpu_name").value_or("");
  p.driver = r.str("driver").value_or("");
  p.samples = r.strings("samples").value_or(std::vector<std::string>{});
  p.notes = r.strings("notes").value_or(std::vector<std::string>{});
  auto list = [&](const char* key, const json_io::FieldTable& table, auto&& each) {
    const Json* a = r.raw(key);
    if (a == nullptr) return;
    if (!a->is_array()) {
      r.error(key, "expected an array, found " + json_io::describe_type(*a));
      return;
    }
    for (std::size_t i = 0; i < a->size(); ++i) {
      json_io::ObjectReader e((*a)[i], table, path, fmt::format("/{}/{}", key, i), d);
      if (e.valid()) each(e);
    }
  };
  list("gemm", kGemmFit, [&](const json_io::ObjectReader& e) {
    GemmFit g;
    g.dtype = e.str("dtype").value_or("");
    g.ceiling = e.num("ceiling").value_or(0);
    g.t0 = Seconds(e.num("t0_s").value_or(0));
    g.fit = read_quality(e, "fit");
    g.all = read_quality(e, "roofline_check");
    p.gemm.push_back(g);
  });
  if (auto h = r.object("hbm")) p.hbm = read_stream_fit(*h);
  if (auto h = r.object("gemm_memory")) p.gemm_memory = read_stream_fit(*h);
  if (auto v = r.num("launch_s")) p.launch = Seconds(*v);
  if (auto v = r.num("graph_kernel_s")) p.graph_kernel = Seconds(*v);
  list("links", kLinkFit, [&](const json_io::ObjectReader& e) {
    LinkFit l;
    l.op = e.str("op").value_or("");
    l.ranks = int(e.integer("ranks").value_or(0));
    l.intercept = Seconds(e.num("intercept_s").value_or(0));
    l.bus_bandwidth = units::gb_per_s(e.num("bus_bandwidth_GBps").value_or(0));
    l.bus_efficiency = e.num("bus_efficiency").value_or(0);
    l.step_latency = Seconds(e.num("step_latency_s").value_or(0));
    l.call_latency = Seconds(e.num("call_latency_s").value_or(0));
    l.fit = read_quality(e, "fit");
    p.links.push_back(l);
  });
  if (auto v = r.num("gemm_sustained_ratio")) p.sustained_ratio = *v;
  if (auto ov = r.object("overlap")) {
    OverlapFit f;
    f.compute_loss = ov->num("compute_loss").value_or(0);
    f.wait_kernels = ov->num("wait_kernels").value_or(0);
    f.points = int(ov->integer("points").value_or(0));
    auto range = [&](const char* key, double& lo, double& hi) {
      const Json* v = ov->raw(key);
      if (v == nullptr) return;
      if (!v->is_array() || v->size() != 2 || !(*v)[0].is_number() || !(*v)[1].is_number()) {
        ov->error(key, "expected [min, max], two numbers");
        return;
      }
      lo = (*v)[0].get<double>();
      hi = (*v)[1].get<double>();
    };
    range("compute_loss_range", f.compute_loss_min, f.compute_loss_max);
    range("wait_kernels_range", f.wait_kernels_min, f.wait_kernels_max);
    p.overlap = f;
  }
  if (d.has_errors()) return Result<Profile>(std::move(d));
  return Result<Profile>(std::move(p), std::move(d));
}

model::EfficiencyProfile to_efficiency(const Profile& p, const hw::GpuSpec& gpu) {
  model::EfficiencyProfile e = model::default_efficiency(gpu);
  const std::string where = p.file.empty() ? "calibration profile of " + p.gpu_id : p.file;
  std::vector<std::string> measured;
  if (p.gemm_memory) {
    e.gemm_hbm = p.gemm_memory->efficiency;
    e.kernel_launch = p.gemm_memory->t0;
    measured.push_back(fmt::format("memory-bound GEMM η {:.3f}, t₀ {}", p.gemm_memory->efficiency,
                                   units::format(p.gemm_memory->t0)));
  }
  for (const auto& g : p.gemm) {
    if (g.dtype == "bf16") {
      e.gemm_bf16 = g.ceiling;
      if (!p.gemm_memory) e.kernel_launch = g.t0;
      measured.push_back(fmt::format("bf16 GEMM η {:.3f}", g.ceiling));
    } else if (g.dtype == "fp8") {
      e.gemm_fp8 = g.ceiling;
      measured.push_back(fmt::format("fp8 GEMM η {:.3f}", g.ceiling));
    }
  }
  if (p.hbm) {
    e.hbm = p.hbm->efficiency;
    measured.push_back(fmt::format("HBM η {:.3f}", p.hbm->efficiency));
  }
  if (p.graph_kernel) e.graph_kernel = *p.graph_kernel;
  if (p.launch) e.eager_launch = *p.launch;
  if (p.sustained_ratio) {
    e.gemm_sustained = *p.sustained_ratio;
    measured.push_back(fmt::format("sustained GEMM ×{:.3f} (training)", *p.sustained_ratio));
  }
  if (p.overlap) {
    e.comm_compute_loss = p.overlap->compute_loss;
    e.comm_wait_kernels = p.overlap->wait_kernels;
    measured.push_back(fmt::format("collective beside compute: GEMM loss {:.3f}, wait {:.2f} kernels per call",
                                   p.overlap->compute_loss, p.overlap->wait_kernels));
  }
  std::string m;
  for (const auto& x : measured) m += (m.empty() ? "" : ", ") + x;
  e.origin = fmt::format("calibration profile {} ({}; the rest built-in: {})", where, m.empty() ? "nothing" : m, e.origin);
  e.calibrated = true;
  return e;
}

std::optional<model::LinkCalibration> scale_up_calibration(const Profile& p) {
  const LinkFit* best = nullptr;
  for (const auto& l : p.links)
    if (l.op == "all_reduce" && l.bus_efficiency > 0 && (best == nullptr || l.ranks > best->ranks)) best = &l;
  if (best == nullptr) return std::nullopt;
  model::LinkCalibration c;
  c.step_latency = best->step_latency;
  c.call_latency = best->call_latency;
  c.bus_efficiency = best->bus_efficiency;
  c.origin = fmt::format("{} (NCCL all-reduce on {} GPUs: bus {} = η {:.3f}, α {})",
                         p.file.empty() ? p.gpu_id : p.file, best->ranks, units::format(best->bus_bandwidth),
                         best->bus_efficiency, units::format(best->step_latency));
  return c;
}

bool write_file_atomically(const std::string& path, const std::string& text, Diagnostics& diags) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) {
    diags.error(path, "", "cannot create the folder: " + ec.message());
    return false;
  }
  const fs::path tmp = target.string() + ".tmp";
  {
    errno = 0;
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      const int e = errno;
      diags.error(tmp.string(), "", e != 0 ? fmt::format("cannot write the temporary file: {}", std::strerror(e))
                                          : std::string("cannot write the temporary file"));
      return false;
    }
    out << text;
    out.close();  // a full disk may only show when the buffer is written out
    if (!out) {
      diags.error(tmp.string(), "", "write failed (disk full?)");
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    diags.error(path, "", "cannot replace the file: " + ec.message());
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace gpuplan::calib
