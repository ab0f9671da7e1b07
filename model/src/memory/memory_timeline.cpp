// The memory timeline (timeline.hpp): training_memory's per-stage terms and memory_activations' per-layer saved
// tensors replayed over the step timeline's schedule.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/timeline.hpp"
#include "memory_core.hpp"
#include "runtime_context.hpp"
#include "quant_recipe.hpp"

namespace gpuplan::model {

using detail::kFp32Bytes;
using detail::kLossForwardBytes;
using units::Seconds;

namespace {

/// Relative tolerance under which two byte counts are the same sum in another order.
bool same_bytes(double x, double y) { return std::fabs(x - y) <= 1e-9 * std::max(1.0, std::max(std::fabs(x), std::fabs(y))); }

/// The model's terms every stage's replay reads: the plan's shape and, per layer kind (LayerKind::index()), the bytes
/// kept for the backward, the recompute working set, and the parameters per GPU (the share of the stage's gradients
/// and autocast copies a layer's backward produces and frees). The kinds are the peak formula's (memory_core: a
/// hybrid's Mamba-2, gated DeltaNet and mixer-only layers, shared-indexer layers each priced by kind_sum).
struct ReplayTerms {
  ReplayTerms(const wl::TransformerArch& arch, const ParameterCounts& counts, const wl::TrainingPlan& training,
              const detail::Ctx& ctx)
      : a(arch), params(counts), plan(training), c(ctx) {}
  const wl::TransformerArch& a;
  const ParameterCounts& params;
  const wl::TrainingPlan& plan;
  const detail::Ctx& c;
  int p = 1;
  int v = 1;
  bool eager = false;
  double t = 1.0;
  double te = 1.0;
  using PerKind = std::array<double, LayerKind::kCount>;
  PerKind stored{}, ws{}, w{};
};

ReplayTerms replay_terms(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan,
                         const detail::Ctx& c, const detail::LayerKinds& kinds, const detail::LayerSums& sums) {
  ReplayTerms m(a, params, plan, c);
  m.p = std::max(1, plan.par.pp);
  m.v = plan.model_chunks();
  m.eager = plan.kernels == wl::KernelStyle::eager;
  m.t = c.t;
  m.te = double(plan.par.expert_shard());
  const double t = m.t, te = m.te;
  // The kinds the model's layers have (the MTP modules are its last layer's kind).
  for_each_layer_kind(a, [&](LayerKind k, std::int64_t) {
    const auto i = static_cast<std::size_t>(k.index());
    const detail::LayerSum& s = detail::kind_sum(sums, k);
    m.stored[i] = detail::stored_per_token(c, s) * c.tokens;
    m.ws[i] = detail::working_set_per_token(c, s) * c.tokens;
    const detail::LayerParams lp = detail::kind_params(a, kinds, k);
    m.w[i] = lp.dense / t + lp.expert / te;
  });
  return m;
}

/// Span times of one pass: when it starts and ends, and the part its layers take [layers_start, layers_end].
struct Times {
  Seconds start{}, layers_start{}, layers_end{}, end{};
  bool set = false;
};
using PassTimes = std::map<std::tuple<int, bool, std::int64_t, int>, Times>;

/// Each pass of the step timeline: (stage, forward, micro-batch, chunk) → its span times.
PassTimes pass_times(const StepTimeline& st) {
  PassTimes pass;
  for (const auto& s : st.spans) {
    if (s.micro_batch < 0 || !st.lanes[std::size_t(s.lane)].compute) continue;
    Times& x = pass[{s.stage, !s.label.empty() && s.label.front() == 'F', s.micro_batch, s.chunk}];
    if (!x.set) {
      x.start = s.start;
      x.set = true;
    }
    x.end = std::max(x.end, s.end);
    if (s.kind == SpanKind::forward || s.kind == SpanKind::backward || s.kind == SpanKind::recompute) {
      if (x.layers_end == Seconds(0)) x.layers_start = s.start;
      x.layers_end = s.end;
    }
  }
  return pass;
}

/// Stage i's layers per chunk, in model order, each as its kind's LayerKind::index() (MTP modules after the last chunk
/// of the last stage, as the model's last layer kind).
std::vector<std::vector<std::size_t>> stage_layers(const ReplayTerms& m, const std::vector<std::int64_t>& chunks, int i,
                                            const detail::StageShape& sh) {
  const auto& a = m.a;
  const int p = m.p, v = m.v;
  std::vector<std::vector<std::size_t>> chunk_kinds(static_cast<std::size_t>(v));
  auto kind = [&a](std::int64_t l) { return static_cast<std::size_t>(LayerKind::of(a, l).index()); };
  std::int64_t l0 = 0;
  for (std::size_t j = 0; j < chunks.size(); ++j) {
    const int stage = int(j % std::size_t(p)), k = int(j / std::size_t(p));
    for (std::int64_t n = 0; n < chunks[j]; ++n)
      if (stage == i) chunk_kinds[std::size_t(k)].push_back(kind(l0 + n));
    l0 += chunks[j];
  }
  for (std::int64_t n = 0; n < sh.mtp; ++n) chunk_kinds[std::size_t(v - 1)].push_back(kind(a.layers - 1));
  return chunk_kinds;
}

/// One stage's allocation as the replay runs: its constant states, the per-parameter shares of gradients and autocast
/// copies, and the running totals; sample() records the allocation at a time and keeps the peak.
struct StageReplay {
  StageReplay(const detail::StageMemory& memory, const detail::StageShape& shape, bool eager_loop)
      : sm(memory), sh(shape), eager(eager_loop) {}
  const detail::StageMemory& sm;
  const detail::StageShape& sh;
  bool eager = false;
  double states = 0.0;
  double head_w = 0.0, emb_w = 0.0;
  double grad_per_w = 0.0;
  bool full = false;
  double amp_per_w = 0.0;
  double mask_mb = 0.0;
  double acts = 0.0, grads = 0.0, amp = 0.0, cast_cache = 0.0;
  StageMemoryTimeline tl;

  void sample(Seconds time, std::string ev) {
    MemorySample s;
    s.time = time;
    s.activations = units::bytes(acts);
    s.gradients = units::bytes(grads + (eager ? 0.0 : sm.grads) + sm.gathered_g);
    s.allocated = units::bytes(states + acts + grads + amp + cast_cache);
    s.event = std::move(ev);
    if (s.allocated.raw() > tl.peak.raw() + 1e-6 * std::max(1.0, tl.peak.raw()) || tl.samples.empty()) {
      tl.peak = s.allocated;
      tl.peak_time = s.time;
      tl.peak_event = s.event;
    }
    tl.samples.push_back(std::move(s));
  }
};

/// The shares of one stage's gradient bytes and autocast copies per parameter on this GPU.
void stage_shares(const ReplayTerms& m, const std::vector<std::vector<std::size_t>>& chunk_kinds, StageReplay& run) {
  const auto& a = m.a;
  const auto& params = m.params;
  const auto& plan = m.plan;
  const auto& sm = run.sm;
  const auto& sh = run.sh;
  const int p = m.p;
  const bool eager = m.eager;
  const double t = m.t;
  // Eager (set_to_none): each unit's gradients appear in its backward; shares by parameters per GPU (the layers,
  // the LM head with the final norm, the embedding) of the stage's gradient bytes; autocast's weight copies the
  // same way without the embedding.
  const double head_w = sh.last ? (double(params.lm_head) + (a.tied_embeddings && p > 1 ? double(params.embedding) : 0.0)) / t : 0.0;
  const double emb_w = sh.first ? double(params.embedding + params.position_embedding) / t : 0.0;
  double layer_w = 0.0;
  for (const auto& ch : chunk_kinds)
    for (std::size_t k : ch) layer_w += m.w[k];
  const double grad_per_w = eager && (layer_w + head_w + emb_w) > 0 ? sm.grads / (layer_w + head_w + emb_w) : 0.0;
  // Under full recomputation the layers' copies live only through the forward (autocast's cache, freed when the
  // forward and loss leave autocast) and again while each layer is recomputed; the LM head keeps its own
  // (memory_core: amp_copies is then the head's alone).
  const bool full = plan.recompute == wl::Recompute::full;
  const double amp_base = full ? head_w : layer_w + head_w;
  const double amp_per_w = sm.amp_copies > 0 && amp_base > 0 ? sm.amp_copies / amp_base : 0.0;
  const double mask_mb = sm.inflight_mb > 0 ? sm.extra_first / sm.inflight_mb : 0.0;
  run.head_w = head_w;
  run.emb_w = emb_w;
  run.grad_per_w = grad_per_w;
  run.full = full;
  run.amp_per_w = amp_per_w;
  run.mask_mb = mask_mb;
}

/// A forward pass of one micro-batch through the stage's chunk: the embedding's dropout mask, each layer's saved
/// tensors (and autocast copies), and on the last chunk the loss and the LM head's backward.
void replay_forward(const ReplayTerms& m, const Times& tm, const std::vector<std::size_t>& layers, Seconds dt,
                    const std::string& tag, bool first_chunk, bool last_chunk, StageReplay& run) {
  const auto& c = m.c;
  const auto& sm = run.sm;
  const bool eager = m.eager;
  const double head_w = run.head_w, grad_per_w = run.grad_per_w, amp_per_w = run.amp_per_w, mask_mb = run.mask_mb;
  const bool full = run.full;
  double &acts = run.acts, &grads = run.grads, &amp = run.amp, &cast_cache = run.cast_cache;
  auto sample = [&run](Seconds time, std::string ev) { run.sample(time, std::move(ev)); };
  if (first_chunk && mask_mb > 0) {
    acts += mask_mb;
    sample(tm.start, "forward " + tag + ": embedding dropout mask");
  }
  for (std::size_t l = 0; l < layers.size(); ++l) {
    acts += m.stored[layers[l]];
    (full ? cast_cache : amp) += m.w[layers[l]] * amp_per_w;
    sample(tm.layers_start + dt * double(l + 1), fmt::format("forward {}: layer {} saved tensors", tag, l));
  }
  if (last_chunk) {
    // A PyTorch loop's loss buffers (memory_core: a_b + 4 + 4 bytes per logit) are the logits and log_softmax's
    // fp32 output, kept from the forward, and the fp32 incoming gradient its backward allocates (measured:
    // mem_*.json); Megatron's fused cross entropy keeps its a_b + 4 from the forward.
    const double main_logits = sm.logits_b - sm.mtp_logits;  // the MTP heads' saved softmax: stage_activations
    const double bwd_grad = eager ? main_logits * kFp32Bytes / (c.ab + 2.0 * kFp32Bytes) : 0.0;
    acts += sm.extra_last + sm.logits_b - bwd_grad;
    amp += head_w * amp_per_w;
    if (eager) {
      // While the loss's forward runs it holds kLossForwardBytes per logit beside the bf16 logits; it keeps
      // the fp32 log-softmax (4 B) once done.
      const double per_logit = main_logits / (c.ab + 2.0 * kFp32Bytes);
      acts += per_logit * (kLossForwardBytes - kFp32Bytes);
      sample(tm.end, "forward " + tag + ": the loss's forward (its buffers beside the bf16 logits)");
      acts -= per_logit * (kLossForwardBytes - kFp32Bytes);
    }
    sample(tm.end, "forward " + tag + ": final norm, LM head inputs, logits and loss buffers");
    if (bwd_grad > 0 || cast_cache > 0) {
      acts += bwd_grad;
      cast_cache = 0.0;
      sample(tm.end, "backward " + tag + ": the loss's fp32 gradient beside the logits");
    }
    // The head's backward runs right after the loss: its buffers are freed, its gradients appear.
    acts -= sm.extra_last + sm.logits_b;
    amp -= head_w * amp_per_w;
    grads += head_w * grad_per_w;
    sample(tm.end, "backward " + tag + ": LM head and loss backward done");
  }
}

/// A backward pass: each layer in reverse, its recompute working set, its saved tensors freed and its gradients
/// created; on the first chunk the embedding's.
void replay_backward(const ReplayTerms& m, const Times& tm, const std::vector<std::size_t>& layers, Seconds dt,
                     const std::string& tag, bool first_chunk, StageReplay& run) {
  const bool eager = m.eager;
  const double emb_w = run.emb_w, grad_per_w = run.grad_per_w, amp_per_w = run.amp_per_w, mask_mb = run.mask_mb;
  const bool full = run.full;
  double &acts = run.acts, &grads = run.grads, &amp = run.amp;
  auto sample = [&run](Seconds time, std::string ev) { run.sample(time, std::move(ev)); };
  for (std::size_t r = layers.size(); r-- > 0;) {
    const std::size_t l = r;
    const Seconds at = tm.layers_start + dt * double(layers.size() - 1 - l);
    const std::size_t k = layers[l];
    const double ws = m.ws[k] + (full ? m.w[k] * amp_per_w : 0.0);
    if (ws > 0) {
      acts += ws;
      sample(at, fmt::format("backward {}: layer {} recomputed (working set)", tag, l));
      acts -= ws;
    }
    acts -= m.stored[k];
    if (!full) amp -= m.w[k] * amp_per_w;
    grads += m.w[k] * grad_per_w;
    sample(at + dt, fmt::format("backward {}: layer {} done, its saved tensors freed", tag, l));
  }
  if (first_chunk && mask_mb > 0) acts -= mask_mb;
  if (first_chunk && emb_w > 0 && eager) grads += emb_w * grad_per_w;
  if (first_chunk) sample(tm.end, "backward " + tag + ": embedding backward done");
}

/// Why the replay's peak differs from the formula's, where it does (each cause is tested).
void explain_peak_difference(const ReplayTerms& m, StageReplay& run) {
  const auto& plan = m.plan;
  const auto& sm = run.sm;
  const auto& sh = run.sh;
  const bool eager = m.eager;
  StageMemoryTimeline& tl = run.tl;
  const double diff = tl.model_peak.raw() - tl.peak.raw();
  if (!same_bytes(tl.model_peak.raw(), tl.peak.raw())) {
    std::vector<std::string> why;
    double ws_max = 0.0;  // the largest working set of the stage's layer kinds
    for (std::size_t k = 0; k < sh.kind_layers.size(); ++k)
      if (sh.kind_layers[k] > 0) ws_max = std::max(ws_max, m.ws[k]);
    if (sh.last && ws_max > sm.logits_b)
      why.push_back(fmt::format(
          "the formula keeps the final-norm and output-layer inputs ({}) beside the recompute working set; the "
          "head's backward frees them before the first layer is recomputed: min(that, working set − logits) = {}",
          units::format(units::bytes(sm.extra_last), units::BytePrefix::binary),
          units::format(units::bytes(std::min(sm.extra_last, ws_max - sm.logits_b)), units::BytePrefix::binary)));
    if (eager && plan.micro_batches() > 1)
      why.push_back(
          "a PyTorch loop with gradient accumulation keeps the first micro-batch's gradients while the next "
          "forward saves its activations; the formula's peak (the larger of the backward's start without "
          "gradients and its end without activations) leaves them out");
    if (eager && ws_max > 0 && diff < 0)
      why.push_back(
          "a PyTorch loop creates each layer's gradients during the backward: beside a recomputed layer's working "
          "set they exceed both of the formula's candidates (the backward's start without gradients, its end "
          "without activations)");
    if (why.empty())
      why.push_back("layers of different kinds: the formula adds the largest working set to every saved tensor");
    tl.peak_difference = fmt::format("{} {} than the formula: {}", units::format(units::bytes(std::fabs(diff)), units::BytePrefix::binary),
                                     diff > 0 ? "less" : "more", fmt::join(why, "; "));
  }
}

/// What memory_core reads besides the model's terms.
struct MemoryInputs {
  const RuntimeOverheads& ov;
  const detail::LayerKinds& kinds;
  const detail::LayerSums& sums;
  const std::vector<detail::StageShape>& shapes;
  bool fp8_any_layout = false;
};

/// Stage i's replay: its memory terms (memory_core), then every pass of its pipeline order, the optimizer step and
/// zero_grad.
StageMemoryTimeline stage_timeline(const ReplayTerms& m, const MemoryInputs& in, const StepTimeline& st,
                                   PassTimes& pass, const std::vector<std::int64_t>& chunks, int i) {
  const auto& plan = m.plan;
  const int p = m.p, v = m.v;
  const bool eager = m.eager;
  detail::MemoryCore core;
  const std::vector<detail::StageShape> one{in.shapes[std::size_t(i)]};  // core's stage points here
  detail::memory_core(m.a, m.params, plan, in.ov, m.c, in.kinds, in.sums, one,
                      in.fp8_any_layout, core);
  const detail::StageMemory& sm = core.first;
  const detail::StageShape& sh = in.shapes[std::size_t(i)];
  StageReplay run(sm, sh, eager);
  StageMemoryTimeline& tl = run.tl;
  tl.stage = i;
  tl.model_peak = units::bytes(sm.total - sm.ctx - sm.nccl - sm.frag);
  // Allocated throughout: the model states and the buffers the peak formula holds for the whole step.
  run.states = sm.weights + sm.gathered_w + sm.fp8_cache + sm.master + sm.opt + sm.gathered_g +
               (eager ? 0.0 : sm.grads);
  tl.states = units::bytes(run.states);
  const std::vector<std::vector<std::size_t>> chunk_kinds = stage_layers(m, chunks, i, sh);
  stage_shares(m, chunk_kinds, run);
  auto sample = [&run](Seconds time, std::string ev) { run.sample(time, std::move(ev)); };
  sample(Seconds(0), "step start: model states");
  const std::vector<PipeOp> ops = pipeline_order(p, v, plan.micro_batches(), i);
  for (const PipeOp& o : ops) {
    const Times& tm = pass[{i, o.forward, o.micro_batch, o.chunk}];
    const auto& layers = chunk_kinds[std::size_t(o.chunk)];
    const double n = double(std::max<std::size_t>(1, layers.size()));
    const Seconds dt = (tm.layers_end - tm.layers_start) / n;
    const std::string tag = fmt::format("micro-batch {}{}", o.micro_batch,
                                        v > 1 ? fmt::format(" chunk {}", o.chunk) : std::string{});
    const bool first_chunk = sh.first && o.chunk == 0, last_chunk = sh.last && o.chunk == v - 1;
    if (o.forward)
      replay_forward(m, tm, layers, dt, tag, first_chunk, last_chunk, run);
    else
      replay_backward(m, tm, layers, dt, tag, first_chunk, run);
    // Gradient accumulation: a PyTorch loop's gradients stay allocated across the micro-batches.
  }
  // The optimizer step reads the gradients and updates the states in place; a PyTorch loop's zero_grad
  // (set_to_none) then frees the gradients.
  sample(st.end, "optimizer step done");
  if (eager && run.grads > 0) {
    run.grads = 0.0;
    sample(st.end, "zero_grad(set_to_none): gradients freed");
  }
  explain_peak_difference(m, run);
  return std::move(run.tl);
}

}  // namespace

MemoryTimeline training_memory_timeline(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                        const TrainingSystem& sys) {
  MemoryTimeline mt;
  // The model as the framework builds it (the vocabulary padded), as estimate_training prices it.
  const wl::TransformerArch a = wl::with_padded_vocab(arch, plan);
  const StepTimeline st = training_timeline(arch, plan, sys);
  if (!st.ok) {
    mt.error = st.error;
    return mt;
  }
  const ParameterCounts params = parameter_counts(a, Explain::off);
  const RuntimeOverheads ov = training_overheads(*sys.gpu);
  const detail::Ctx c = detail::make_ctx(a, plan, ActivationLayout::from_plan);
  const detail::LayerKinds kinds = detail::layer_kinds(a, params);
  const detail::LayerSums sums = detail::layer_sums(c);
  const std::vector<detail::StageShape> shapes = detail::stage_shapes(a, kinds, params, plan);
  const TrainingMemory whole = training_memory(a, params, plan, *sys.gpu, ov, Explain::off);
  mt.cuda_context = whole.cuda_context;
  mt.nccl_buffers = whole.nccl_buffers;
  mt.fragmentation = detail::fragmentation_fraction(ov, plan);
  mt.model_total = whole.total;

  const ReplayTerms m = replay_terms(a, params, plan, c, kinds, sums);
  std::vector<std::int64_t> chunks = detail::chunk_layers(a, plan, nullptr);
  if (chunks.empty()) {
    mt.error = "the plan's pipeline split cannot be made on this model";
    return mt;
  }
  PassTimes pass = pass_times(st);
  for (int i = 0; i < m.p; ++i) mt.stages.push_back(stage_timeline(m, {ov, kinds, sums, shapes, detail::fp8_any_layout(*sys.gpu)}, st, pass, chunks, i));
  mt.notes.push_back(
      "allocated bytes as torch.cuda.memory_allocated() counts them: the CUDA context, NCCL buffers and the "
      "fragmentation reserve of the peak estimate are outside");
  mt.notes.push_back("times are the step timeline's; the layers of one pass are evenly spaced within it");
  mt.ok = true;
  return mt;
}

}  // namespace gpuplan::model
