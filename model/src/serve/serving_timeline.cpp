// The serving iteration timeline (serving_timeline.hpp): forward_trace's items laid out per stage.
#include "gpuplan/model/serving_timeline.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::model {

using units::Seconds;

namespace {

SpanKind span_kind(const PassItem& it) {
  if (it.name == "LM head") return SpanKind::head_loss;
  if (it.name.rfind("sampling", 0) == 0) return SpanKind::sampling;
  if (it.name == "embedding gather") return SpanKind::embedding;
  switch (it.kind) {
    case PassItem::Kind::gemm: return SpanKind::gemm;
    case PassItem::Kind::attention: return SpanKind::attention;
    case PassItem::Kind::elementwise: return SpanKind::elementwise;
    case PassItem::Kind::comm_tp: return SpanKind::comm_tp;
    case PassItem::Kind::comm_ep: return SpanKind::comm_ep;
  }
  return SpanKind::elementwise;
}

/// Lays out one stage's items from `start`: the GPU lane `gpu_lane`, the host lane `host_lane` (-1 under CUDA graphs).
struct StageLayout {
  StageLayout(StepTimeline& timeline, int s, int gpu_l, int host_l)
      : tl(timeline), stage(s), gpu_lane(gpu_l), host_lane(host_l) {}
  StepTimeline& tl;
  int stage, gpu_lane, host_lane;
  Seconds gpu{}, host{};
  Seconds host_block_start{};
  std::string host_block;
  std::int64_t host_block_kernels = 0;

  void span(int lane, SpanKind k, Seconds a, Seconds b, std::string label, std::string detail) {
    if (!(b > a)) return;
    TimelineSpan s;
    s.lane = lane;
    s.kind = k;
    s.start = a;
    s.end = b;
    s.stage = stage;
    s.label = std::move(label);
    s.detail = std::move(detail);
    tl.spans.push_back(std::move(s));
  }
  /// The host's issue of a block of kernels (a layer) as one span.
  void flush_host() {
    if (host_lane >= 0 && host_block_kernels > 0)
      span(host_lane, SpanKind::host, host_block_start, host, "issue " + host_block,
           fmt::format("the host issues {} kernels of {} in {}", host_block_kernels, host_block,
                       units::format(host - host_block_start)));
    host_block_kernels = 0;
  }
  void item(const PassItem& it, const std::string& block) {
    Seconds start = gpu;
    if (host_lane >= 0) {
      if (block != host_block) {
        flush_host();
        host_block = block;
        host_block_start = host;
      }
      // The kernel can start once its launch is issued (the first of its kernels).
      start = std::max(gpu, host);
      host += it.host;
      host_block_kernels += it.kernels;
      if (start > gpu)
        span(gpu_lane, SpanKind::launch_gap, gpu, start, "idle",
             fmt::format("the GPU waits {} for the host to issue {}", units::format(start - gpu), it.name));
    }
    span(gpu_lane, span_kind(it), start, start + it.time, block.empty() ? it.name : block + " " + it.name, it.detail);
    gpu = start + it.time;
  }
};

}  // namespace

StepTimeline serving_timeline(const wl::TransformerArch& arch, const ServingPerfPlan& plan, const ForwardBatch& batch,
                              const ServingSystem& sys) {
  StepTimeline tl;
  tl.serving_iteration = true;
  const ForwardTrace tr = forward_trace(arch, plan, batch, sys);
  const ForwardCost& fc = tr.cost;
  tl.step_time = fc.total;
  if (!std::isfinite(fc.total.raw())) {
    tl.error = "the iteration has no finite time (a collective over GPUs no link in the data joins)";
    return tl;
  }
  const int pp = std::max(1, plan.pp);
  const bool eager = tr.cpu_per_kernel.raw() > 0;
  for (int s = 0; s < pp; ++s) {
    const std::string tp = plan.tp > 1 ? fmt::format(" (each of TP {})", plan.tp) : std::string();
    tl.lanes.push_back({fmt::format("stage {} · GPU{}", s, tp), s, true});
    if (eager) tl.lanes.push_back({fmt::format("stage {} · host", s), s, false, true});
  }
  const auto layers = std::int64_t(tr.layer_kind.size());
  const Seconds send = pp > 1 ? fc.pp_transfer / double(pp - 1) : Seconds{};
  Seconds t{};
  for (int s = 0; s < pp; ++s) {
    const int gpu_lane = eager ? 2 * s : s;
    StageLayout L(tl, s, gpu_lane, eager ? gpu_lane + 1 : -1);
    if (s > 0) {
      L.span(gpu_lane, SpanKind::comm_pp, t, t + send, "PP recv",
             fmt::format("activations from stage {} ({} per send)", s - 1, units::format(send)));
      t += send;
    }
    L.gpu = L.host = t;
    if (s == 0)
      for (const auto& it : tr.embedding) L.item(it, "");
    const std::int64_t first = layers * s / pp, last = layers * (s + 1) / pp;
    for (std::int64_t l = first; l < last; ++l)
      for (const auto& it : tr.kinds[std::size_t(tr.layer_kind[std::size_t(l)])])
        L.item(it, fmt::format("L{}", l));
    if (s == pp - 1)
      for (const auto& it : tr.head) L.item(it, "");
    L.flush_host();
    // The GPU cannot end its stage before the host has issued it (eager), whatever the last kernel's length.
    t = std::max(L.gpu, L.host);
    if (L.host > L.gpu)
      L.span(gpu_lane, SpanKind::launch_gap, L.gpu, L.host, "idle", "the host is still issuing the stage's kernels");
  }
  if (plan.step_overhead.raw() > 0) {
    const int lane = eager ? 2 * (pp - 1) + 1 : pp - 1;
    StageLayout L(tl, pp - 1, lane, -1);
    L.span(lane, SpanKind::host, t, t + plan.step_overhead, "engine step",
           fmt::format("the engine's per-iteration work not overlapped with the GPU (scheduling, sampling "
                       "bookkeeping, detokenisation): {}",
                       units::format(plan.step_overhead)));
    t += plan.step_overhead;
  }
  tl.end = tl.pipeline_end = t;
  tl.ok = true;
  const double diff = tl.end.raw() - tl.step_time.raw();
  if (std::fabs(diff) > 1e-9 * std::max(1e-12, tl.step_time.raw()))
    tl.notes.push_back(fmt::format(
        "the kernel-by-kernel layout ends {} {} the model's iteration ({}): the model takes a stage as max(GPU, host), "
        "the layout lets each kernel wait for its own launch{}",
        units::format(units::seconds(std::fabs(diff))), diff > 0 ? "after" : "before", units::format(tl.step_time),
        layers % pp != 0 ? "; the stages hold whole layers, the model equal shares" : ""));
  tl.notes.push_back(fmt::format("{} layers{}; {} kernels per stage; {}", layers,
                                 pp > 1 ? fmt::format(" over {} stages", pp) : std::string(), fc.kernels,
                                 eager ? fmt::format("eager: the host issues each kernel in {} on average",
                                                     units::format(tr.cpu_per_kernel))
                                       : "CUDA graphs: one replay, no host issue per kernel"));
  return tl;
}

}  // namespace gpuplan::model
