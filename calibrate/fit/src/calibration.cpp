// Calibration fits: samples → profile (fit_profile, Eigen least squares), and a profile → the model's efficiency
// inputs (to_efficiency, scale_up_calibration). Reading and writing the files is in calibration_io.cpp.
#include "gpuplan/calibrate/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/hw/lookup.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/ops.hpp"

namespace gpuplan::calib {

using units::Seconds;

// ---------------------------------------------------------------------------------------------------------------
// Fitting
// ---------------------------------------------------------------------------------------------------------------

namespace {

/// The measured time against the message size as a monotone curve: the least-squares non-decreasing fit of log(time)
/// over the sizes (pool-adjacent-violators), so a slow outlier is averaged with its neighbours rather than carried
/// up to every larger size. Repeated sizes are averaged first. (bytes, seconds), sizes increasing.
std::vector<std::pair<double, double>> monotone_curve(const std::vector<const CollectiveSample*>& sorted) {
  struct Block {
    double bytes_lo, bytes_hi, sum, n;
    std::vector<double> sizes;
  };
  std::vector<std::pair<double, double>> pts;  // (bytes, log t) with repeated sizes merged
  std::vector<int> reps;
  for (const auto* c : sorted) {
    // Sizes of at least a byte and times a profile can hold (positive after rounding to 4 significant digits).
    if (!(c->bytes >= 1 && std::isnormal(c->median_s) && c->median_s >= 1e-12 && c->median_s <= 1e6)) continue;
    if (!pts.empty() && pts.back().first == c->bytes) {
      pts.back().second += std::log(c->median_s);
      ++reps.back();
    } else {
      pts.emplace_back(c->bytes, std::log(c->median_s));
      reps.push_back(1);
    }
  }
  std::vector<Block> blocks;
  for (std::size_t i = 0; i < pts.size(); ++i) {
    blocks.push_back({pts[i].first, pts[i].first, pts[i].second, double(reps[i]), {pts[i].first}});
    while (blocks.size() >= 2) {
      Block& a = blocks[blocks.size() - 2];
      const Block& b = blocks.back();
      if (a.sum / a.n <= b.sum / b.n) break;
      a.sum += b.sum;
      a.n += b.n;
      a.bytes_hi = b.bytes_hi;
      a.sizes.insert(a.sizes.end(), b.sizes.begin(), b.sizes.end());
      blocks.pop_back();
    }
  }
  std::vector<std::pair<double, double>> curve;
  for (const auto& b : blocks)
    for (const double x : b.sizes) curve.emplace_back(x, std::exp(b.sum / b.n));
  return curve;
}

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

/// A fit whose quality a profile cannot hold (not finite: samples at the edge of double range; or missing its samples
/// by more than kMaxFitRelError: fuzz_calib found both) is not used.
bool holdable(const FitQuality& q) {
  return std::isfinite(q.median_rel_error) && std::isfinite(q.max_rel_error) && q.max_rel_error <= kMaxFitRelError;
}

/// A streaming fit inside the range a profile may hold (finite, η in (0, 1.5], t₀ in [0, 1] s): anything else comes
/// from wrong samples, and a profile holding it would not read back (fuzz_calib found an η of 12.7 from decode-shape
/// GEMM timings that did not fit a line).
bool usable(const StreamFit& f) {
  return std::isfinite(f.efficiency) && std::isfinite(f.t0.raw()) && holdable(f.fit) && f.efficiency > 0 &&
         f.efficiency <= kMaxStreamEfficiency && f.t0.raw() >= 0 && f.t0.raw() <= kMaxFixedCostS;
}

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

// The stages of fit_profile, in the order it runs them. Each adds what its samples give to the profile, or a note
// saying why the built-in value stays.
struct FitContext {
  const std::vector<Samples>& samples;
  const hw::GpuSpec& gpu;
  const model::Device& unit;  // the model's shape utilisation at a 100% ceiling and no fixed cost
  double bw;                  // datasheet HBM bandwidth, bytes/s
};

// HBM first (the GEMM roofline check uses it).
void fit_hbm(const FitContext& cx, Profile& p, Diagnostics& d) {
  const auto& gpu = cx.gpu;
  const double bw = cx.bw;
  std::vector<double> xs, ys;
  const double floor_bytes = std::max(256.0 * 1024 * 1024, 4.0 * (gpu.l2 ? gpu.l2->raw() : 0.0));
  for (const auto& s : cx.samples)
    for (const auto& h : s.hbm)
      if ((h.op == "copy" || h.op == "triad" || h.op == "read") && h.bytes >= floor_bytes) {
        xs.push_back(h.gbps * 1e9 * h.median_s / bw);  // time at the datasheet bandwidth for the bytes moved
        ys.push_back(h.median_s);
      }
  const StreamFit f = xs.size() >= 2 ? fit_stream(xs, ys) : StreamFit{};
  if (xs.size() >= 2 && !usable(f)) {
    p.notes.push_back(fmt::format("the HBM samples give no usable fit (η {:.3g}, t₀ {:.3g} s): the built-in "
                                  "streaming efficiency stays",
                                  f.efficiency, f.t0.raw()));
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
void fit_gemm_memory(const FitContext& cx, Profile& p) {
  const auto& gpu = cx.gpu;
  const double bw = cx.bw;
  std::vector<double> xs, ys;
  for (const auto& s : cx.samples)
    for (const auto& g : s.gemm) {
      if (g.dtype != "bf16" && g.dtype != "fp16") continue;
      const auto prec = hw::parse_precision(g.dtype);
      if (!prec || !gpu.peak(*prec)) continue;
      const auto c = model::gemm_cost("fit", {g.m, g.n, g.k, 1}, *prec, cx.unit);
      if (c.intensity().raw() >= 0.25 * gpu.peak(*prec)->raw() / bw) continue;
      xs.push_back(c.bytes.raw() / bw);
      ys.push_back(g.median_s);
    }
  const StreamFit f = xs.size() >= 3 ? fit_stream(xs, ys) : StreamFit{};
  if (xs.size() >= 3 && usable(f)) {
    p.gemm_memory = f;
  } else if (xs.size() >= 3) {
    p.notes.push_back(fmt::format("the memory-bound GEMM samples give no usable fit (η {:.3g}, t₀ {:.3g} s): GEMMs "
                                  "stream at the HBM efficiency",
                                  f.efficiency, f.t0.raw()));
  } else {
    p.notes.push_back("fewer than 3 memory-bound 16-bit GEMM samples: GEMMs stream at the HBM efficiency");
  }
}

// Compute-bound GEMMs, per dtype: the ceiling, the fixed cost and (with a depth sweep) the depth law's c.
void fit_gemm_dtypes(const FitContext& cx, Profile& p) {
  const auto& samples = cx.samples;
  const auto& gpu = cx.gpu;
  model::Device unit = cx.unit;  // its depth law is varied by the fit
  const double bw = cx.bw;
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
    double& depth_c = model::gemm_depth_of(unit.eff, *prec);
    std::vector<const GemmSample*> all, compute_bound;
    std::set<std::int64_t> depths;  // distinct K of the depth sweep's compute-bound samples
    for (const auto& s : samples)
      for (const auto& g : s.gemm) {
        if (g.dtype != dt) continue;
        all.push_back(&g);
        const auto c = model::gemm_cost("fit", {g.m, g.n, g.k, 1}, *prec, unit);
        if (c.intensity().raw() < 2.0 * ridge) continue;  // compute-bound shapes only
        compute_bound.push_back(&g);
        if (g.shape == "depth") depths.insert(g.k);
      }
    if (compute_bound.size() < 3) {
      p.notes.push_back(fmt::format("{}: fewer than 3 compute-bound GEMM samples, not fitted", dt));
      continue;
    }
    // x: time at η = 1 with the shape's utilisation and the depth law at c; a line through (x, t) gives t0 and 1/η.
    struct Line {
      double t0 = 0, slope = 0, sse = 0;
      std::vector<double> xs, ys;
    };
    auto line_at = [&](double c) {
      depth_c = c;
      Line l;
      for (const auto* g : compute_bound) {
        const auto cost = model::gemm_cost("fit", {g->m, g->n, g->k, 1}, *prec, unit);
        l.xs.push_back(cost.flops.raw() / (peak * cost.efficiency));
        l.ys.push_back(g->median_s);
      }
      std::tie(l.t0, l.slope) = fit_line(l.xs, l.ys);
      for (std::size_t i = 0; i < l.xs.size(); ++i) {
        const double r = (l.t0 + l.xs[i] * l.slope) / l.ys[i] - 1.0;
        l.sse += r * r;
      }
      return l;
    };
    std::optional<double> fitted_depth;
    const double builtin_depth = depth_c;
    if (depths.size() >= 5) {
      // The depth law's c: the value (0 to 16 main-loop iterations, in steps of 0.05) whose line fits best.
      double best_c = 0, best_sse = std::numeric_limits<double>::infinity();
      for (int i = 0; i <= 320; ++i) {
        const Line l = line_at(0.05 * i);
        if (l.slope > 0 && l.sse < best_sse) best_sse = l.sse, best_c = 0.05 * i;
      }
      fitted_depth = best_c;
    } else {
      p.notes.push_back(fmt::format("{}: no depth sweep in the samples (gpuplan-bench depth): the built-in depth law "
                                    "(c = {:g} main-loop iterations per tile) stays",
                                    dt, builtin_depth));
    }
    const Line l = line_at(fitted_depth.value_or(builtin_depth));
    depth_c = builtin_depth;
    const auto& xs = l.xs;
    const auto& ys = l.ys;
    const double t0 = l.t0, slope = l.slope;
    GemmFit f;
    f.dtype = dt;
    f.ceiling = slope > 0 ? 1.0 / slope : 0.0;
    f.t0 = Seconds(t0);
    f.depth = fitted_depth;
    std::vector<double> pred;
    for (double x : xs) pred.push_back(t0 + x * slope);
    f.fit = quality(pred, ys);
    // Whole-roofline check over every shape of this dtype with the fitted numbers (memory-bound decode shapes too).
    model::Device fitted = model::make_device(gpu);
    if (*prec == hw::Precision::fp8) fitted.eff.gemm_fp8 = f.ceiling;
    else fitted.eff.gemm_bf16 = f.ceiling;
    if (fitted_depth) model::gemm_depth_of(fitted.eff, *prec) = *fitted_depth;
    if (p.hbm) fitted.eff.hbm = p.hbm->efficiency;
    if (p.gemm_memory) fitted.eff.gemm_hbm = p.gemm_memory->efficiency;
    fitted.eff.kernel_launch = p.gemm_memory ? std::max(f.t0, p.gemm_memory->t0) : f.t0;
    std::vector<double> pa, ma;
    for (const auto* g : all) {
      pa.push_back(model::gemm_cost("check", {g->m, g->n, g->k, 1}, *prec, fitted).time.raw());
      ma.push_back(g->median_s);
    }
    f.all = quality(pa, ma);
    if (!(std::isfinite(f.ceiling) && std::isfinite(f.t0.raw()) && holdable(f.fit) && holdable(f.all))) {
      p.notes.push_back(fmt::format("{}: the GEMM samples give no fit a profile can hold, not used", dt));
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

}

// Collectives: per (op, ranks) over the GPU's node scale-up tier.
void fit_collectives(const std::vector<Samples>& samples, const hw::GpuSpec& gpu, const hw::HardwareDb& db,
                     Profile& p) {
  const hw::NodeSpec* node = hw::first_node_of(db, gpu.info.id);
  std::map<std::pair<std::string, int>, std::vector<const CollectiveSample*>> groups;
  for (const auto& s : samples)
    for (const auto& c : s.collectives) groups[{c.op, c.ranks}].push_back(&c);
  for (const auto& [key, pts] : groups) {
    const auto& [op, ranks] = key;
    if (pts.size() < 3 || ranks < 2) continue;
    const model::Collective kind = model::parse_collective(op).value_or(model::Collective::send_recv);
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
    f.curve = monotone_curve(sorted);
    if (!(std::isfinite(bus) && bus > 0 && holdable(f.fit))) {
      p.notes.push_back(fmt::format("{} on {} ranks: the samples give no fit a profile can hold, not used", op, ranks));
      continue;
    }
    if (node != nullptr && node->scale_up.domain_gpus >= ranks) {
      const model::CommGroup g = model::resolve_group(ranks, 1, *node, db);
      if (g.scale_up.uni_per_gpu.raw() > 0) f.bus_efficiency = f.bus_bandwidth.raw() / g.scale_up.uni_per_gpu.raw();
      const double steps = kind == model::Collective::all_reduce ? 2.0 * (ranks - 1) : double(ranks - 1);
      f.step_latency = Seconds(std::max(0.0, (a - g.call_latency.raw()) / std::max(1.0, steps)));
      f.call_latency = Seconds(std::min(a, g.call_latency.raw()));
    }
    // The ranges a profile may hold (its reader's bounds): a fit outside them comes from wrong samples.
    if (f.bus_efficiency > kMaxStreamEfficiency || f.intercept.raw() > kMaxFixedCostS ||
        f.step_latency.raw() > kMaxFixedCostS || f.call_latency.raw() > kMaxFixedCostS ||
        units::to_GBps(f.bus_bandwidth) > 1e5) {
      p.notes.push_back(fmt::format("{} on {} ranks: the fit is outside what a profile holds (bus {}, η {:.3g}, "
                                    "latency {}): not used",
                                    op, ranks, units::format(f.bus_bandwidth), f.bus_efficiency,
                                    units::format(f.intercept)));
      continue;
    }
    p.links.push_back(f);
  }
}

// Overlap: medians over every item (they scatter with the message size and the op; the medians are what a
// training step's many collectives see on average). The per-item values are clamped at 0 (a GEMM a little
// faster beside a collective is noise).
void fit_overlap(const std::vector<Samples>& samples, Profile& p) {
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

// Sustained GEMM: its throughput over the median swept throughput of the same 8192³ GEMM, per dtype (bf16, fp8).
void fit_sustained(const std::vector<Samples>& samples, Profile& p) {
  for (const std::string dtype : {"bf16", "fp8"}) {
    std::vector<double> sustained, swept;
    for (const auto& s : samples) {
      const auto& v = dtype == "fp8" ? s.sustained_fp8_tflops : s.sustained_tflops;
      if (v) sustained.push_back(*v);
      for (const auto& g : s.gemm)
        if (g.dtype == dtype && g.m == 8192 && g.n == 8192 && g.k == 8192 && g.median_s > 0)
          swept.push_back(2.0 * 8192.0 * 8192.0 * 8192.0 / g.median_s / 1e12);
    }
    if (sustained.empty()) continue;
    if (swept.empty()) {
      p.notes.push_back(fmt::format("sustained {} GEMM measured but no swept {} 8192³ GEMM to compare it with: not used",
                                    dtype, dtype));
      continue;
    }
    std::sort(sustained.begin(), sustained.end());
    std::sort(swept.begin(), swept.end());
    const double r = sustained[sustained.size() / 2] / swept[swept.size() / 2];
    std::optional<double>& out = dtype == "fp8" ? p.sustained_ratio_fp8 : p.sustained_ratio;
    if (std::isfinite(r) && r > 0.3 && r <= 1.0) out = r;
    else if (std::isfinite(r) && r > 1.0) out = 1.0;  // faster sustained than swept: no penalty
    else p.notes.push_back(fmt::format("sustained/swept {} GEMM ratio {} is implausible: not used", dtype, r));
  }
}

}  // namespace

Result<Profile> fit_profile(const std::vector<Samples>& samples, const hw::GpuSpec& gpu, const hw::HardwareDb& db) {
  Diagnostics d;
  Profile p;
  p.gpu_id = gpu.info.id;
  for (const auto& s : samples) {
    p.samples.push_back(short_name(s.file));
    if (p.gpu_name.empty()) p.gpu_name = s.gpu_name;
    if (p.driver.empty()) p.driver = s.driver;
    if (!s.complete)
      p.notes.push_back(fmt::format("{}: the sweep stopped before its end (\"complete\": false); the items it measured "
                                    "are used",
                                    short_name(s.file)));
    if (s.rejected > 0)
      p.notes.push_back(fmt::format("{}: {} samples were refused by the benches (spread too wide) and are not used",
                                    short_name(s.file), s.rejected));
  }
  // The model's own shape utilisation, at a 100% ceiling and no fixed cost, so that the fit measures only what the
  // shape model does not explain.
  model::Device unit = model::make_device(gpu);
  unit.eff.gemm_bf16 = unit.eff.gemm_fp8 = 1.0;
  unit.eff.kernel_launch = Seconds(0);
  const FitContext cx{samples, gpu, unit, gpu.memory.bandwidth.raw()};
  fit_hbm(cx, p, d);  // first: the GEMM roofline check uses it
  fit_gemm_memory(cx, p);
  fit_gemm_dtypes(cx, p);

  for (const auto& s : samples) {
    if (s.launch_s) p.launch = Seconds(*s.launch_s);
    if (s.graph_kernel_s) p.graph_kernel = Seconds(*s.graph_kernel_s);
  }

  fit_collectives(samples, gpu, db, p);
  fit_overlap(samples, p);
  fit_sustained(samples, p);
  if (p.gemm.empty() && !p.hbm && p.links.empty() && !p.launch && !p.graph_kernel && !p.overlap && !p.sustained_ratio &&
      !p.sustained_ratio_fp8)
    d.error("", "", "nothing could be fitted from these samples");
  if (d.has_errors()) return Result<Profile>(std::move(d));
  return Result<Profile>(std::move(p), std::move(d));
}

// ---------------------------------------------------------------------------------------------------------------
// The model's inputs
// ---------------------------------------------------------------------------------------------------------------

model::EfficiencyProfile to_efficiency(const Profile& p, const hw::GpuSpec& gpu) {
  model::EfficiencyProfile e = model::default_efficiency(gpu);
  const std::string where = p.file.empty() ? "calibration profile of " + p.gpu_id : p.file;
  std::vector<std::string> measured;
  if (p.gemm_memory) {
    e.gemm_hbm = p.gemm_memory->efficiency;
    e.kernel_launch = p.gemm_memory->t0;
    // The benches time operations under 50 µs inside CUDA graphs (bench/common.cuh): t₀ is a GEMM's in-graph fixed
    // cost at this η, the GEMM class's. The other classes keep the row's: the HBM fit's t₀ is the intercept of
    // multi-MB streams, not what a decode step's small kernels cost (2.4 µs each in our H200 decode steps against
    // the stream's 2.03: data/validation/measured/h200-sxm-141gb/kernel_class_cost.json).
    if (e.graph_class.gemm.raw() > 0) e.graph_class.gemm = p.gemm_memory->t0;
    measured.push_back(fmt::format("memory-bound GEMM η {:.3f}, t₀ {}", p.gemm_memory->efficiency,
                                   units::format(p.gemm_memory->t0)));
  }
  for (const auto& g : p.gemm) {
    const std::string depth = g.depth ? fmt::format(", depth c {:.2f}", *g.depth) : std::string();
    if (g.dtype == "bf16") {
      e.gemm_bf16 = g.ceiling;
      if (g.depth) e.gemm_depth_bf16 = *g.depth;
      if (!p.gemm_memory) e.kernel_launch = g.t0;
      measured.push_back(fmt::format("bf16 GEMM η {:.3f}{}", g.ceiling, depth));
    } else if (g.dtype == "fp8") {
      e.gemm_fp8 = g.ceiling;
      if (g.depth) e.gemm_depth_fp8 = *g.depth;
      measured.push_back(fmt::format("fp8 GEMM η {:.3f}{}", g.ceiling, depth));
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
  if (p.sustained_ratio_fp8) {
    e.gemm_sustained_fp8 = *p.sustained_ratio_fp8;
    measured.push_back(fmt::format("sustained fp8 GEMM ×{:.3f} (training)", *p.sustained_ratio_fp8));
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
  model::LinkCalibration c;
  for (const auto& l : p.links)
    if (l.bus_efficiency > 0) c.per_op.push_back({l.op, l.ranks, l.step_latency, l.call_latency, l.bus_efficiency, l.curve});
  // The tier's own α and η (for groups no fit matches): the all-reduce on the most GPUs.
  const LinkFit* best = nullptr;
  for (const auto& l : p.links)
    if (l.op == "all_reduce" && l.bus_efficiency > 0 && (best == nullptr || l.ranks > best->ranks)) best = &l;
  if (best == nullptr && c.per_op.empty()) return std::nullopt;
  const std::string where = p.file.empty() ? p.gpu_id : p.file;
  if (best != nullptr) {
    c.step_latency = best->step_latency;
    c.call_latency = best->call_latency;
    c.bus_efficiency = best->bus_efficiency;
    c.origin = fmt::format("{} (NCCL all-reduce on {} GPUs: bus {} = η {:.3f}, α {})", where, best->ranks,
                           units::format(best->bus_bandwidth), best->bus_efficiency, units::format(best->step_latency));
  } else {
    c.origin = fmt::format("{} (NCCL fits of {} collectives; no all-reduce, so other groups keep the tier's α and η)",
                           where, c.per_op.size());
  }
  return c;
}

}  // namespace gpuplan::calib
