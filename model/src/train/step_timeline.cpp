// The step timeline (timeline.hpp): estimate_training's per-stage terms laid out on the pipeline schedule.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/timeline.hpp"
#include "gpuplan/model/training_input.hpp"
#include "memory_core.hpp"
#include "parallel_dims.hpp"
#include "training_core.hpp"

namespace gpuplan::model {

using units::format;
using units::Seconds;

const char* to_string(SpanKind k) {
  switch (k) {
    case SpanKind::forward: return "forward";
    case SpanKind::backward: return "backward";
    case SpanKind::recompute: return "recompute";
    case SpanKind::embedding: return "embedding";
    case SpanKind::head_loss: return "head_loss";
    case SpanKind::extra: return "extra";
    case SpanKind::comm_exposed: return "comm_exposed";
    case SpanKind::comm_tp: return "comm_tp";
    case SpanKind::comm_cp: return "comm_cp";
    case SpanKind::comm_ep: return "comm_ep";
    case SpanKind::comm_pp: return "comm_pp";
    case SpanKind::dp_reduce: return "dp_reduce";
    case SpanKind::dp_gather: return "dp_gather";
    case SpanKind::dp_wait: return "dp_wait";
    case SpanKind::sm_contention: return "sm_contention";
    case SpanKind::dp_copy: return "dp_copy";
    case SpanKind::bubble: return "bubble";
    case SpanKind::optimizer: return "optimizer";
    case SpanKind::offload: return "offload";
    case SpanKind::allowance: return "allowance";
    case SpanKind::gemm: return "gemm";
    case SpanKind::attention: return "attention";
    case SpanKind::elementwise: return "elementwise";
    case SpanKind::sampling: return "sampling";
    case SpanKind::host: return "host";
    case SpanKind::launch_gap: return "launch_gap";
    case SpanKind::data_load: return "data_load";
    case SpanKind::data_wait: return "data_wait";
  }
  return "";
}

std::vector<PipeOp> pipeline_order(int pp, int v, std::int64_t m, int stage) {
  std::vector<PipeOp> out;
  pp = std::max(1, pp);
  v = std::max(1, v);
  if (m <= 0 || stage < 0 || stage >= pp) return out;
  const std::int64_t total = m * v;
  const std::int64_t group = std::int64_t(pp) * v;
  auto op = [&](std::int64_t k, bool forward) {
    const std::int64_t in_group = k % group;
    int chunk = int(in_group / pp);
    if (!forward) chunk = v - 1 - chunk;
    return PipeOp{forward, (k / group) * pp + in_group % pp, chunk};
  };
  const std::int64_t warmup = v == 1 ? std::min<std::int64_t>(pp - stage - 1, m)
                                     : std::min<std::int64_t>(2 * std::int64_t(pp - stage - 1) + std::int64_t(v - 1) * pp,
                                                              total);
  out.reserve(std::size_t(2 * total));
  for (std::int64_t k = 0; k < warmup; ++k) out.push_back(op(k, true));
  for (std::int64_t r = 0; r < total - warmup; ++r) {
    out.push_back(op(warmup + r, true));
    out.push_back(op(r, false));
  }
  for (std::int64_t r = total - warmup; r < total; ++r) out.push_back(op(r, false));
  return out;
}

Seconds StepTimeline::compute_time(SpanKind kind) const {
  Seconds s{};
  for (const auto& x : spans)
    if (x.kind == kind && lanes[std::size_t(x.lane)].compute) s += x.duration();
  return s;
}

namespace {

std::string pass_text(const detail::PassCost& c) {
  return fmt::format("GEMM {}, attention {}, elementwise {}{}", format(c.gemm), format(c.attention),
                     format(c.elementwise), c.other > Seconds(0) ? ", other " + format(c.other) : std::string{});
}

/// One pass of one chunk: its parts on the compute stream, its collectives on the comm stream.
struct PassPart {
  SpanKind kind;
  Seconds d;
  std::string what;
};
struct Pass {
  std::vector<PassPart> compute;  // in order
  Seconds total{};
  std::array<Seconds, detail::kDimCount> comm{};  // each dimension's collective time (comm stream), ends with the pass
};

/// What every part of the timeline reads: the plan, the step's per-stage parts (estimate_training's StepLayout), and
/// the schedule's shape.
struct TimelineInputs {
  TimelineInputs(const wl::TrainingPlan& training, const detail::StepLayout& layout, const TrainingEstimate& estimate)
      : plan(training), lay(layout), est(estimate) {}
  const wl::TrainingPlan& plan;
  const detail::StepLayout& lay;
  const TrainingEstimate& est;
  int p = 1;
  int v = 1;
  std::int64_t m = 1;
  double md = 1.0;
  std::vector<std::int64_t> chunks;  // layers of each chunk of each stage (chunk_layers)
  Seconds t0{};  // the pipeline's start: after the first unit's exposed parameter gather
  bool zero3 = false;

  /// The chunk's share of its stage's work.
  [[nodiscard]] double chunk_share(int stage, int chunk) const {
    if (v == 1 || chunks.empty()) return 1.0 / double(v);
    std::int64_t sum = 0;
    for (int k = 0; k < v; ++k) sum += chunks[std::size_t(k * p + stage)];
    return sum > 0 ? double(chunks[std::size_t(chunk * p + stage)]) / double(sum) : 1.0 / double(v);
  }
};

/// Pass `chunk` of stage i, forward or backward: its compute parts in order (embedding, AMP casts, layers, LM head,
/// MTP; or recompute and backward; then the exposed collectives) and its collectives' time on the comm stream.
Pass make_pass(const TimelineInputs& tx, int i, int chunk, bool forward) {
  const detail::StepLayout& lay = tx.lay;
  const int p = tx.p, v = tx.v;
  const double md = tx.md;
  const detail::StageParts& sp = lay.stages[std::size_t(i)];
  const double sh = tx.chunk_share(i, chunk);
  Pass ps;
  auto share = [&](double fwd_share) { return forward ? fwd_share : 1.0 - fwd_share; };
  // The pass's share of each dimension's communication (the forward's share: the record's fwd_share).
  Seconds exposed{};
  for (std::size_t k = 0; k < detail::kDimCount; ++k) {
    const detail::ParallelDim& dim = detail::parallel_dims()[k];
    if (dim.stage == nullptr) continue;
    const double s = share(dim.fwd_share(tx.plan));
    exposed += (sp.*dim.stage).exposed * s;
    ps.comm[k] = (sp.*dim.stage).time * (s * sh / md);
  }
  exposed = exposed * (sh / md);
  const bool first_chunk = i == 0 && chunk == 0, last_chunk = i == p - 1 && chunk == v - 1;
  if (forward) {
    if (sp.embed > Seconds(0) && first_chunk)
      ps.compute.push_back({SpanKind::embedding, sp.embed, "embedding lookup, forward and backward (its gradient)"});
    if (sp.amp > Seconds(0) && chunk == 0)
      ps.compute.push_back({SpanKind::extra, sp.amp, "PyTorch AMP weight casts and gradient copies"});
    const detail::PassCost c = sp.fwd.scaled(sh);
    ps.compute.push_back({SpanKind::forward, c.total(), "layers forward: " + pass_text(c)});
    if (sp.head > Seconds(0) && last_chunk)
      ps.compute.push_back({SpanKind::head_loss, sp.head, "LM head and loss, forward and backward"});
    if (sp.mtp > Seconds(0) && last_chunk)
      ps.compute.push_back({SpanKind::extra, sp.mtp, "multi-token-prediction modules beyond their layers"});
  } else {
    const detail::PassCost r = sp.recompute.scaled(sh), b = sp.bwd.scaled(sh);
    if (r.total() > Seconds(0))
      ps.compute.push_back({SpanKind::recompute, r.total(), "recomputed forward: " + pass_text(r)});
    ps.compute.push_back({SpanKind::backward, b.total(), "layers backward: " + pass_text(b)});
  }
  if (exposed > Seconds(0))
    ps.compute.push_back({SpanKind::comm_exposed, exposed, "waiting on the exposed part of this pass's collectives"});
  for (const auto& x : ps.compute) ps.total += x.d;
  return ps;
}

using Key = std::tuple<int, bool, std::int64_t, int>;  // stage, forward, micro-batch, chunk
using Placed = std::vector<std::vector<std::pair<PipeOp, Pass>>>;

/// Simulates the schedule: a pass starts when its stage is free and its input is there. `done` gets each pass's
/// (start, end), `placed` each stage's passes in order; false if the schedule deadlocks.
bool schedule_passes(const TimelineInputs& tx, std::map<Key, std::pair<Seconds, Seconds>>& done, Placed& placed) {
  const int p = tx.p, v = tx.v;
  const std::int64_t m = tx.m;
  const Seconds t0 = tx.t0;
  placed.assign(static_cast<std::size_t>(p), {});
  std::vector<std::vector<PipeOp>> order(static_cast<std::size_t>(p));
  std::vector<std::size_t> next(std::size_t(p), 0);
  std::vector<Seconds> free_at(std::size_t(p), t0);
  for (int i = 0; i < p; ++i) order[std::size_t(i)] = pipeline_order(p, v, m, i);
  auto dep = [&](int i, const PipeOp& o, bool& ready) -> Seconds {
    ready = true;
    auto need = [&](const Key& k) -> Seconds {
      auto it = done.find(k);
      if (it == done.end()) {
        ready = false;
        return Seconds(0);
      }
      return it->second.second;
    };
    if (o.forward) {
      if (i > 0) return need({i - 1, true, o.micro_batch, o.chunk});
      if (o.chunk > 0) return need({p - 1, true, o.micro_batch, o.chunk - 1});
      return t0;
    }
    if (i < p - 1) return need({i + 1, false, o.micro_batch, o.chunk});
    if (o.chunk == v - 1) return need({p - 1, true, o.micro_batch, o.chunk});
    return need({0, false, o.micro_batch, o.chunk + 1});
  };
  bool progress = true;
  std::size_t left = 0;
  for (const auto& o : order) left += o.size();
  while (left > 0 && progress) {
    progress = false;
    for (int i = 0; i < p; ++i) {
      auto& n = next[std::size_t(i)];
      while (n < order[std::size_t(i)].size()) {
        const PipeOp& o = order[std::size_t(i)][n];
        bool ready = false;
        const Seconds in = dep(i, o, ready);
        if (!ready) break;
        Pass ps = make_pass(tx, i, o.chunk, o.forward);
        const Seconds start = std::max(free_at[std::size_t(i)], in);
        const Seconds end = start + ps.total;
        done[{i, o.forward, o.micro_batch, o.chunk}] = {start, end};
        free_at[std::size_t(i)] = end;
        placed[std::size_t(i)].push_back({o, std::move(ps)});
        ++n;
        --left;
        progress = true;
      }
    }
  }
  return left == 0;
}

/// The pipeline's spans: each pass's compute parts, the bubbles between them, its collectives on the comm stream,
/// and each stage's drain to the pipeline's end.
void pipeline_spans(const TimelineInputs& tx, std::map<Key, std::pair<Seconds, Seconds>>& done, const Placed& placed,
                    StepTimeline& tl) {
  const auto& plan = tx.plan;
  const detail::DpParts& dp = tx.lay.dp;
  const int p = tx.p, v = tx.v;
  const double md = tx.md;
  const Seconds t0 = tx.t0;
  const bool zero3 = tx.zero3;
  for (int i = 0; i < p; ++i) {
    const int lc = 2 * i, lm = 2 * i + 1;
    Seconds cursor = t0;
    for (const auto& pr : placed[std::size_t(i)]) {
      const PipeOp& o = pr.first;
      const Pass& ps = pr.second;
      const auto se = done[{i, o.forward, o.micro_batch, o.chunk}];
      if (se.first > cursor)
        tl.spans.push_back({lc, SpanKind::bubble, cursor, se.first, i, -1, 0, "idle",
                            "pipeline bubble: this stage waits for its input"});
      const std::string tag = fmt::format("{}{}{}", o.forward ? "F" : "B", o.micro_batch,
                                          v > 1 ? fmt::format(".{}", o.chunk) : std::string{});
      Seconds t = se.first;
      for (const auto& part : ps.compute) {
        tl.spans.push_back({lc, part.kind, t, t + part.d, i, o.micro_batch, o.chunk, tag,
                            fmt::format("{} micro-batch {}{}: {} — {}", o.forward ? "forward" : "backward",
                                        o.micro_batch, v > 1 ? fmt::format(", chunk {}", o.chunk) : std::string{},
                                        format(part.d), part.what)});
        t += part.d;
      }
      cursor = se.second;
      // Collectives on the comm stream, ending with the pass (their exposed part is the compute stream's wait).
      auto comm = [&](SpanKind k, Seconds d, const char* what) {
        if (!(d > Seconds(0))) return;
        const Seconds s = std::max(se.first, se.second - d);
        tl.spans.push_back({lm, k, s, se.second, i, o.micro_batch, o.chunk, tag,
                            fmt::format("{} of {} micro-batch {}: {}", what, o.forward ? "forward" : "backward",
                                        o.micro_batch, format(d))});
      };
      for (std::size_t k = 0; k < detail::kDimCount; ++k) {
        const detail::ParallelDim& dim = detail::parallel_dims()[k];
        if (dim.stage != nullptr) comm(dim.span, ps.comm[k], dim.span_text(plan, o.forward));
      }
      if (zero3 && dp.gather > Seconds(0)) {
        const Seconds g = dp.gather / (2.0 * md * double(v));
        tl.spans.push_back({lm, SpanKind::dp_gather, se.first, se.first + g, i, o.micro_batch, o.chunk, "AG",
                            fmt::format("ZeRO-3 parameter all-gather for this pass: {}", format(g))});
      }
    }
    tl.pipeline_end = std::max(tl.pipeline_end, cursor);
  }
  for (int i = 0; i < p; ++i) {
    Seconds last{};
    for (const auto& x : tl.spans)
      if (x.lane == 2 * i) last = std::max(last, x.end);
    if (last < tl.pipeline_end)
      tl.spans.push_back({2 * i, SpanKind::bubble, last, tl.pipeline_end, i, -1, 0, "idle",
                          "pipeline drain: this stage's last backward is done, the first stage's is not"});
  }
}

/// After the pipeline, the model's terms in order on every stage: the formula's allowance, the DP reduction and
/// gathers, the SM share, buffer copies, the optimizer and the offload.
void after_pipeline(const TimelineInputs& tx, StepTimeline& tl) {
  const auto& plan = tx.plan;
  const auto& est = tx.est;
  const detail::DpParts& dp = tx.lay.dp;
  const int p = tx.p, v = tx.v;
  const Seconds t0 = tx.t0;
  const bool zero3 = tx.zero3;
  // steady + bubble of the model = total − DP exposed − optimizer − offload.
  const Seconds dp_exposed = dp.reduce_exposed + dp.gather_exposed +
                             (dp.reduce_hidden + dp.gather_hidden) * dp.sm_share + dp.copy;
  const Seconds model_pipe = est.step.total - dp_exposed - est.step.optimizer - est.step.offload;
  tl.allowance = model_pipe - (tl.pipeline_end - t0);
  // The same sum in another order: rounding, not a difference of the schedule.
  if (std::fabs(tl.allowance.raw()) <= 1e-9 * est.step_time.raw()) tl.allowance = Seconds(0);
  Seconds t = tl.pipeline_end;
  auto all_stages = [&](SpanKind k, Seconds d, const std::string& label, const std::string& what) {
    if (!(d > Seconds(0))) return;
    for (int i = 0; i < p; ++i) tl.spans.push_back({2 * i, k, t, t + d, i, -1, 0, label, what});
    t += d;
  };
  if (tl.allowance > Seconds(0)) {
    all_stages(SpanKind::allowance, tl.allowance, "formula",
               fmt::format("the pipeline formula m·max t_i + (Σ t_i − max t_i)/v counts {} more than this schedule "
                           "(work of the stages after the slowest that its drain overlaps)",
                           format(tl.allowance)));
  } else if (tl.allowance < Seconds(0)) {
    tl.notes.push_back(fmt::format(
        "this schedule takes {} longer than the model's pipeline formula, which spreads each stage's work evenly "
        "over its {} chunks (the schedule runs the embedding in the first chunk and the LM head in the last)",
        format(Seconds(0) - tl.allowance), v));
  }
  // DP reduction: buckets back to back on each stage's comm stream, the last ones after the backward.
  if (dp.reduce > Seconds(0)) {
    const double calls = std::max(1.0, dp.reduce_calls);
    const int shown = int(std::min(calls, 64.0));
    const Seconds each = dp.reduce / double(shown);
    const Seconds end = t + dp.reduce_exposed;
    for (int i = 0; i < p; ++i)
      for (int b = 0; b < shown; ++b) {
        const Seconds s = std::max(t0, end - each * double(shown - b));
        tl.spans.push_back({2 * i + 1, SpanKind::dp_reduce, s, std::max(s, end - each * double(shown - b - 1)), i, -1,
                            0, fmt::format("DP {}", b + 1),
                            fmt::format("DP gradient {} bucket {} of {}{}: {}",
                                        plan.zero == wl::ZeroStage::none ? "all-reduce" : "reduce-scatter", b + 1,
                                        units::format_count(calls), shown < calls ? " (drawn as 64)" : "",
                                        format(each))});
      }
  }
  all_stages(SpanKind::dp_wait, dp.reduce_exposed, "DP wait",
             fmt::format("the DP reduction's exposed tail (the last bucket has no backward left to hide behind): {} of "
                         "{} total",
                         format(dp.reduce_exposed), format(dp.reduce)));
  if (!zero3 && dp.gather > Seconds(0)) {
    for (int i = 0; i < p; ++i)
      tl.spans.push_back({2 * i + 1, SpanKind::dp_gather, Seconds(0), dp.gather, i, -1, 0, "DP AG",
                          fmt::format("parameter all-gather of the updated shards beside the first forward: {} ({} "
                                      "exposed before the first layer)",
                                      format(dp.gather), format(dp.gather_exposed))});
  }
  if (t0 > Seconds(0))
    for (int i = 0; i < p; ++i)
      tl.spans.push_back({2 * i, SpanKind::dp_wait, Seconds(0), t0, i, -1, 0, "AG wait",
                          fmt::format("waiting on the first unit's parameter all-gather: {}", format(t0))});
  all_stages(SpanKind::sm_contention, (dp.reduce_hidden + dp.gather_hidden) * dp.sm_share, "beside DP",
             fmt::format("compute lost beside the hidden DP collectives (their SM share, or the kernels' wait for "
                         "each call's kernel): ({} + {}) × {:.3g}",
                         format(dp.reduce_hidden), format(dp.gather_hidden), dp.sm_share));
  all_stages(SpanKind::dp_copy, dp.copy, "buffer copies",
             "PyTorch DDP/FSDP copies into and out of the communication buffers");
  all_stages(SpanKind::optimizer, est.step.optimizer, "optimizer",
             fmt::format("{} step over this GPU's shard{}: {}", plan.optimizer == wl::OptimizerKind::sgd ? "SGD" : "AdamW",
                         plan.offload == wl::Offload::optimizer ? " (on the CPU)" : "", format(est.step.optimizer)));
  all_stages(SpanKind::offload, est.step.offload, "offload",
             "CPU offload: exposed gradient and weight transfers over the host link");
  tl.end = t;
  tl.ok = true;
  tl.notes.push_back(
      "kernel launches are inside each op's time (a fixed cost per kernel in the roofline), not separate gaps");
}

/// The input pipeline on its own host lane, and the GPU's wait for the batch at the step's start (the rest of the
/// step moved after it): training_input_pipeline's terms, laid out.
void add_input_pipeline(StepTimeline& tl, const wl::TrainingPlan& plan, const TrainingSystem& sys,
                        const TextLoader& loader, int workers) {
  const DataPipeline pipe = training_input_pipeline(plan, sys, tl.step_time, loader, workers, Explain::off);
  tl.loader_priced = true;
  tl.gpu_step = tl.step_time;
  tl.loader = pipe.loader;
  tl.gpu_utilisation = pipe.gpu_utilisation;
  tl.loader_bound = pipe.bound;
  const double n = pipe.loader.raw() * pipe.loader_images_per_s;  // sequences per GPU per step
  const Seconds wait = std::max(Seconds(0), pipe.step_time - tl.step_time);
  if (wait > Seconds(0)) {
    for (auto& x : tl.spans) {
      x.start += wait;
      x.end += wait;
    }
    tl.pipeline_end += wait;
    tl.end += wait;
  }
  const std::string source =
      pipe.in_process ? std::string("the training process itself, between steps (no DataLoader workers)")
                      : fmt::format("{} DataLoader worker{} per GPU{}", workers, workers == 1 ? "" : "s",
                                    pipe.effective_workers < workers
                                        ? fmt::format(" ({} with a core of their own)", pipe.effective_workers)
                                        : std::string());
  const std::string what =
      fmt::format("{:g} sequences per GPU at {} of CPU each, by {}: {:.4g} sequences/s, {} per batch", n,
                  format(*loader.sample_cpu), source, pipe.loader_images_per_s, format(pipe.loader));
  const int lane = int(tl.lanes.size());
  for (int li = 0; li < lane; ++li) {
    if (!tl.lanes[std::size_t(li)].compute || !(wait > Seconds(0))) continue;
    tl.spans.push_back({li, SpanKind::data_wait, Seconds(0), wait, tl.lanes[std::size_t(li)].stage, -1, 0, "data wait",
                        pipe.in_process ? fmt::format("the GPU idles while the training process loads the batch: {}",
                                                      format(wait))
                                        : fmt::format("the GPU waits {} for the batch: the loader needs {} per batch, "
                                                      "the GPU {} per step",
                                                      format(wait), format(pipe.loader), format(tl.gpu_step))});
  }
  tl.lanes.push_back({pipe.in_process ? std::string("host · loading (in process)")
                                      : fmt::format("host · loader ({} worker{})", workers, workers == 1 ? "" : "s"),
                      0, false, true});
  tl.spans.push_back({lane, SpanKind::data_load, Seconds(0), pipe.loader, 0, -1, 0,
                      pipe.in_process ? "load batch" : "next batch", what});
  tl.step_time = pipe.step_time;
  tl.notes.insert(tl.notes.begin(),
                  fmt::format("GPU utilisation {:.0f}%{}: input pipeline {}; the GPU's step {}, the step with its input {} "
                              "({}-bound)",
                              100.0 * pipe.gpu_utilisation,
                              pipe.gpu_utilisation < 0.995 ? " because the loader starves it" : "", what,
                              format(tl.gpu_step), format(pipe.step_time), pipe.bound));
}

}  // namespace

StepTimeline training_timeline(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const TrainingSystem& sys,
                               const TextLoader& loader, int loader_workers) {
  StepTimeline tl;
  if (plan.dualpipe()) {
    tl.error = "the DualPipe schedule is not laid out (its forward and backward chunks run overlapped pairwise)";
    return tl;
  }
  detail::StepLayout lay;
  const TrainingEstimate est = detail::estimate_training_laid_out(a, plan, sys, Explain::off, &lay);
  if (!(est.step_time > Seconds(0)) || lay.stages.empty()) {
    tl.error = est.feasibility.reasons.empty() ? std::string("the step time could not be evaluated")
                                               : est.feasibility.reasons.front();
    return tl;
  }
  TimelineInputs tx(plan, lay, est);
  tx.p = std::max(1, plan.par.pp);
  tx.v = plan.model_chunks();
  tx.m = est.micro_batches;
  const int p = tx.p, v = tx.v;
  const std::int64_t m = tx.m;
  tl.step_time = est.step_time;
  if (v > 1 && m % p != 0) {
    tl.error = fmt::format("the interleaved schedule needs the {} micro-batches divisible by PP {}", m, p);
    return tl;
  }
  tx.chunks = detail::chunk_layers(a, plan, nullptr);
  tx.md = double(m);

  for (int i = 0; i < p; ++i) {
    tl.lanes.push_back({fmt::format("stage {} · compute", i), i, true});
    tl.lanes.push_back({fmt::format("stage {} · comm", i), i, false});
  }
  // ZeRO ≥ 1 gathers parameters; the first unit's gather is exposed before the first layer (compose_step's
  // gather_exposed), so the pipeline starts after it.
  tx.t0 = lay.dp.gather_exposed;
  tx.zero3 = plan.zero == wl::ZeroStage::parameters;

  std::map<Key, std::pair<Seconds, Seconds>> done;
  Placed placed;
  if (!schedule_passes(tx, done, placed)) {
    tl.error = "the pipeline schedule deadlocked (an internal error: please report the plan)";
    return tl;
  }
  pipeline_spans(tx, done, placed, tl);
  after_pipeline(tx, tl);
  tl.gpu_step = tl.step_time;
  if (loader.sample_cpu && loader.sample_cpu->raw() > 0)
    add_input_pipeline(tl, plan, sys, loader, loader_workers);
  else
    tl.notes.push_back("no data-loading term: token batches are assumed prefetched off the critical path (give a "
                       "per-sample CPU cost and DataLoader workers to lay the loader out)");
  return tl;
}

}  // namespace gpuplan::model
