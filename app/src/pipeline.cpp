#include "gpuplan/app/pipeline.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/vision.hpp"
#include "gpuplan/app/vision_setup.hpp"
#include "gpuplan/wl_io/vision_io.hpp"

namespace gpuplan::app {

namespace {
namespace u = units;
constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

hw::Precision precision_of(const std::string& s) {
  return s == "fp16" ? hw::Precision::fp16 : s == "bf16" ? hw::Precision::bf16 : hw::Precision::int8;
}

model::RtJitter jitter_of(const std::string& s) {
  return s == "lognormal" ? model::RtJitter::lognormal : s == "normal" ? model::RtJitter::normal : model::RtJitter::none;
}

/// The device a DLA stage is priced on: the chip's GPU with its peaks replaced by one DLA's dense rates (the file's
/// engine peaks over its count). Assumption, stated in the stage's derivation: the same op-level pricing (GEMM
/// efficiency of the GPU's family, the chip's shared memory bandwidth) at the DLA's peak — there is no DLA
/// measurement in the data.
struct DlaDevice {
  hw::GpuSpec spec;
  model::Device device;
};
std::optional<DlaDevice> dla_device(const model::Device& gpu_dev, const hw::EngineSpec& e) {
  DlaDevice d;
  d.spec = *gpu_dev.gpu;
  d.spec.info.id = gpu_dev.gpu->info.id + "/" + e.kind;
  for (std::size_t p = 0; p < d.spec.dense_peak.size(); ++p)
    d.spec.dense_peak[p] = e.dense_peak[p] ? std::optional<u::FlopRate>(*e.dense_peak[p] / static_cast<double>(e.count))
                                           : std::nullopt;
  d.device = gpu_dev;
  return d;
}

/// lcm of two frame counts.
int lcm(int a, int b) { return a / std::gcd(a, b) * b; }

}  // namespace

Result<wl_io::PipelineSpec> load_pipeline_spec(const std::string& data_dir, const std::string& path,
                                               const std::string& shown) {
  Diagnostics diags;
  auto lib = wl_io::load_vision_library(data_dir);
  diags.append(lib.diagnostics());
  if (!lib.ok()) return diags;
  auto spec = wl_io::load_pipeline(path, shown, lib.value());
  diags.append(spec.diagnostics());
  if (!spec.ok()) return diags;
  return Result<wl_io::PipelineSpec>(std::move(spec).value(), std::move(diags));
}

Result<PipelineResult> evaluate_pipeline(const PipelineRequest& req) {
  Diagnostics diags;
  PipelineResult res;
  res.spec = req.spec;
  auto& spec = res.spec;
  const auto& ov = req.overrides;
  if (ov.share_backbone) spec.options.share_backbone = *ov.share_backbone;
  if (ov.int8) spec.options.int8 = *ov.int8;
  if (ov.fusion) spec.options.fusion = *ov.fusion;
  if (ov.cuda_graphs) spec.options.cuda_graphs = *ov.cuda_graphs;
  if (ov.temporal_reuse) spec.options.temporal_reuse = *ov.temporal_reuse;
  const std::string& file = spec.file;

  std::string gpu_name = req.gpu;
  if (gpu_name.empty() && req.node.empty()) gpu_name = spec.hardware;
  if (gpu_name.empty() && req.node.empty()) {
    diags.error("", "--gpu", fmt::format("{} names no hardware: give --gpu or --node", file));
    return diags;
  }
  model::TrainingSystem sys;
  model::Device dev;
  model::ServingPerfPlan launch;
  if (!vision_device(req.data_dir, *req.db, gpu_name, req.no_calibration, diags, sys, dev, launch, req.node))
    return diags;
  res.gpu = sys.gpu;
  const hw::EngineSpec* dla = nullptr;
  for (const auto& e : sys.gpu->engines)
    if (e.kind == "dla") dla = &e;
  std::optional<DlaDevice> dla_dev;
  if (dla != nullptr && dla->count > 0) dla_dev = dla_device(dev, *dla);
  if (dla_dev) dla_dev->device.gpu = &dla_dev->spec;

  wl_io::VisionLibrary lib;
  {
    auto l = wl_io::load_vision_library(req.data_dir);
    diags.append(l.diagnostics());
    if (!l.ok()) return diags;
    lib = std::move(l).value();
  }

  // Which backbone stages have heads; unshared, such a backbone is not run on its own: each head runs a copy.
  const std::size_t n = spec.stages.size();
  std::vector<bool> has_heads(n, false);
  for (const auto& s : spec.stages)
    if (!s.backbone.empty()) has_heads[static_cast<std::size_t>(spec.index_of(s.backbone))] = true;
  const bool share = spec.options.share_backbone;

  res.rt.deadline = u::milliseconds(spec.deadline_ms);
  const double hz = spec.frame_rate_Hz();
  res.rt.period = model::frame_period(hz, Origin::user(file)).value;
  // The shared memory's capacity is what streaming reaches on it (datasheet × η_hbm), the rate each stage's own
  // memory time was priced at: stages running together share that.
  if (sys.gpu->memory.shared_with_cpu) res.rt.shared_bandwidth = dev.stream_bandwidth();

  std::vector<wl::VisionGraph> graphs(n);
  u::Flops backbone_flops{}, head_flops{}, other_flops{};
  int heads = 0;
  // Backbone FLOPs counted once per head in the "separate" total: Σ over backbones of (heads on it)·B.
  u::Flops separate_backbones{};
  for (std::size_t i = 0; i < n; ++i) {
    const auto& s = spec.stages[i];
    PipelineStageInfo info;
    info.id = s.id;
    info.engine_asked = s.engine;
    info.rt_index = npos;
    if (!s.cpu_ms) {
      wl::VisionGraph g;
      if (!s.model.empty()) {
        const auto* m = lib.find(s.model);
        g = wl::build_vision_graph(m->arch, s.resolution.value_or(0));
      } else {
        g.id = s.id;
        g.ops = s.ops;
      }
      graphs[i] = g;
      const u::Flops f = u::flop(2.0 * static_cast<double>(g.macs()) * static_cast<double>(s.batch));
      info.model_flops = f;
      info.precision = spec.options.int8 ? "int8" : s.precision;
      if (!s.backbone.empty()) {
        head_flops += f;
        ++heads;
        const auto& b = spec.stages[static_cast<std::size_t>(spec.index_of(s.backbone))];
        separate_backbones += u::flop(2.0 * static_cast<double>(graphs[static_cast<std::size_t>(spec.index_of(s.backbone))].macs()) *
                                      static_cast<double>(b.batch));
      } else if (has_heads[i]) {
        backbone_flops += f;
      } else {
        other_flops += f;
      }
    }
    res.stages.push_back(info);
  }
  {
    // One backbone with n heads: the formula's n·B + ΣH; several backbones: each head counts its own backbone.
    const Origin o = Origin::derived(file);
    auto sh = model::backbone_sharing_flops(backbone_flops, head_flops, std::max(1, heads), true, o);
    auto sep = model::backbone_sharing_flops(backbone_flops, head_flops, std::max(1, heads), false, o);
    const long backbones = std::count(has_heads.begin(), has_heads.end(), true);
    res.flops_shared = sh.value + other_flops;
    res.flops_separate = (backbones <= 1 ? sep.value : separate_backbones + head_flops) + other_flops;
    res.flops_as_run = share ? res.flops_shared : res.flops_separate;
    res.flops_derivation = share ? sh.derivation : sep.derivation;
  }

  // Stages of the schedule.
  std::vector<std::size_t> rt_of(n, npos);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& s = spec.stages[i];
    if (!share && has_heads[i]) continue;  // runs inside each head
    model::RtStage rs;
    rs.id = s.id;
    rs.engine = s.engine;
    rs.jitter = jitter_of(s.jitter.distribution);
    rs.cv = s.jitter.cv;
    rs.every = spec.options.temporal_reuse ? lcm(s.every_k_frames, s.sensor_every) : s.sensor_every;
    // Dependencies: an unshared backbone's place is taken by its own dependencies.
    std::vector<std::size_t> deps;
    std::function<void(const std::string&)> add_dep = [&](const std::string& id) {
      const auto j = static_cast<std::size_t>(spec.index_of(id));
      if (rt_of[j] != npos) {
        if (std::find(deps.begin(), deps.end(), rt_of[j]) == deps.end()) deps.push_back(rt_of[j]);
      } else {
        for (const auto& a : spec.stages[j].after) add_dep(a);
      }
    };
    for (const auto& a : s.after) add_dep(a);
    rs.deps = deps;
    const bool on_dla = s.engine.rfind("dla", 0) == 0;
    if (on_dla) {
      const int idx = std::stoi(s.engine.substr(3));
      if (!dla_dev) {
        rs.engine = "gpu";
        diags.note(file, s.pointer + "/engine",
                   fmt::format("{} has no DLA: '{}' runs on the GPU (TensorRT's GPU fallback)", sys.gpu->info.id, s.id));
      } else if (idx >= dla->count) {
        diags.error(file, s.pointer + "/engine",
                    fmt::format("'{}': {} has {} DLA engines (dla0…dla{})", s.engine, sys.gpu->info.id, dla->count,
                                dla->count - 1));
        continue;
      }
    }
    if (s.cpu_ms) {
      rs.mean = u::milliseconds(*s.cpu_ms);
      rs.dram_bytes = u::bytes(s.memory_GBps * 1e9 * *s.cpu_ms * 1e-3);
      rs.what = fmt::format("fixed {:.10g} ms", *s.cpu_ms);
      rs.derivation = {"rt.stage." + s.id,
                       s.id,
                       "t = cpu_ms (given)",
                       {{"t", u::format(rs.mean), "fixed time of the stage", Origin::user(file + "#" + s.pointer + "/cpu_ms")}},
                       u::format(rs.mean),
                       {},
                       {}};
    } else {
      const bool dla_here = on_dla && rs.engine != "gpu";
      const model::Device& d = dla_here ? dla_dev->device : dev;
      model::VisionRunPlan plan;
      plan.launch = launch;
      plan.batch = s.batch;
      plan.compute = precision_of(spec.options.int8 ? "int8" : s.precision);
      plan.autocast = false;
      plan.cuda_graphs = spec.options.cuda_graphs;
      plan.fold_bn = spec.options.fusion;
      plan.fuse_epilogue = spec.options.fusion;
      if (!d.gpu->peak(plan.compute)) {
        diags.error(file, s.pointer + (spec.options.int8 ? "" : "/precision"),
                    fmt::format("{} has no {} rate in the hardware data{}", dla_here ? d.gpu->info.id : sys.gpu->info.id,
                                hw::to_string(plan.compute), spec.options.int8 ? " (options.int8)" : ""));
        continue;
      }
      wl::VisionGraph g = graphs[i];
      std::string what = s.model.empty() ? fmt::format("{} ops", g.ops.size()) : s.model;
      if (!share && !s.backbone.empty()) {  // the head runs its own backbone copy first
        const auto& b = graphs[static_cast<std::size_t>(spec.index_of(s.backbone))];
        wl::VisionGraph merged = b;
        merged.id = b.id + "+" + s.id;
        merged.ops.insert(merged.ops.end(), g.ops.begin(), g.ops.end());
        g = std::move(merged);
        what = fmt::format("{} + {}", spec.stages[static_cast<std::size_t>(spec.index_of(s.backbone))].model, what);
      }
      const auto r = model::vision_inference(g, plan, d, req.explain, true);
      rs.mean = r.latency;
      for (const auto& op : r.pass.ops) rs.dram_bytes += op.bytes;
      rs.what = fmt::format("{}, {}, batch {}{}", what, hw::to_string(plan.compute), s.batch,
                            dla_here ? " (DLA: the GPU's op pricing at one DLA's peak, an assumption)" : "");
      rs.derivation = r.derivation;
      if (!rs.derivation.empty()) {
        rs.derivation.id = "rt.stage." + s.id;
        rs.derivation.title = s.id + ": " + rs.derivation.title;
      }
    }
    rt_of[i] = res.rt.stages.size();
    res.stages[i].rt_index = rt_of[i];
    res.rt.stages.push_back(std::move(rs));
  }
  if (diags.has_errors()) return diags;
  res.schedule = model::rt_schedule(res.rt, req.rt, req.explain);
  return Result<PipelineResult>(std::move(res), std::move(diags));
}

}  // namespace gpuplan::app
