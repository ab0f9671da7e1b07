// The memory timeline (timeline.hpp): training_memory's per-stage terms and memory_activations' per-layer saved
// tensors replayed over the step timeline's schedule.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/timeline.hpp"
#include "memory_core.hpp"

namespace gpuplan::model {

using detail::kFp32Bytes;
using detail::kLossForwardBytes;
using units::Seconds;

namespace {

/// Relative tolerance under which two byte counts are the same sum in another order.
bool same_bytes(double x, double y) { return std::fabs(x - y) <= 1e-9 * std::max(1.0, std::max(std::fabs(x), std::fabs(y))); }

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
  const RuntimeOverheads ov = default_training_overheads();
  const detail::Ctx c = detail::make_ctx(a, plan, ActivationLayout::from_plan);
  const detail::LayerKinds kinds = detail::layer_kinds(a, params);
  const detail::LayerSums sums = detail::layer_sums(c);
  const std::vector<detail::StageShape> shapes = detail::stage_shapes(a, params, plan);
  const TrainingMemory whole = training_memory(a, params, plan, *sys.gpu, ov, Explain::off);
  mt.cuda_context = whole.cuda_context;
  mt.nccl_buffers = whole.nccl_buffers;
  mt.fragmentation = ov.fragmentation;
  mt.model_total = whole.total;

  const int p = std::max(1, plan.par.pp);
  const int v = plan.model_chunks();
  const bool eager = plan.kernels == wl::KernelStyle::eager;
  const double t = c.t, te = double(plan.par.expert_shard());
  // Per layer kind: bytes kept for the backward, the recompute working set, and the parameters per GPU (the share of
  // the stage's gradients and autocast copies a layer's backward produces and frees).
  const double stored_dense = detail::stored_per_token(c, sums.dense) * c.tokens;
  const double stored_moe = detail::stored_per_token(c, sums.moe) * c.tokens;
  const double ws_dense = detail::working_set_per_token(c, sums.dense) * c.tokens;
  const double ws_moe = detail::working_set_per_token(c, sums.moe) * c.tokens;
  const double w_dense = kinds.dense.dense / t + kinds.dense.expert / te;
  const double w_moe = kinds.moe.dense / t + kinds.moe.expert / te;

  std::vector<std::int64_t> chunks = detail::chunk_layers(a, plan, nullptr);
  if (chunks.empty()) {
    mt.error = "the plan's pipeline split cannot be made on this model";
    return mt;
  }
  // Span times of each pass: (stage, forward, micro-batch, chunk) → the layer part [start, end] and the pass end.
  struct Times {
    Seconds start{}, layers_start{}, layers_end{}, end{};
    bool set = false;
  };
  std::map<std::tuple<int, bool, std::int64_t, int>, Times> pass;
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

  for (int i = 0; i < p; ++i) {
    detail::MemoryCore core;
    detail::memory_core(a, params, plan, ov, c, kinds, sums, {shapes[std::size_t(i)]}, core);
    const detail::StageMemory& sm = core.first;
    StageMemoryTimeline tl;
    tl.stage = i;
    tl.model_peak = units::bytes(sm.total - sm.ctx - sm.nccl - sm.frag);
    // Allocated throughout: the model states and the buffers the peak formula holds for the whole step.
    const double states = sm.weights + sm.gathered_w + sm.fp8_cache + sm.master + sm.opt + sm.gathered_g +
                          (eager ? 0.0 : sm.grads);
    tl.states = units::bytes(states);
    // This stage's layers per chunk, in model order (MTP modules after the last chunk of the last stage, as the
    // model's last layer kind).
    std::vector<std::vector<bool>> chunk_moe(static_cast<std::size_t>(v));
    std::int64_t l0 = 0;
    for (std::size_t j = 0; j < chunks.size(); ++j) {
      const int stage = int(j % std::size_t(p)), k = int(j / std::size_t(p));
      for (std::int64_t n = 0; n < chunks[j]; ++n)
        if (stage == i) chunk_moe[std::size_t(k)].push_back(a.is_moe_layer(l0 + n));
      l0 += chunks[j];
    }
    const detail::StageShape& sh = shapes[std::size_t(i)];
    for (std::int64_t n = 0; n < sh.mtp; ++n) chunk_moe[std::size_t(v - 1)].push_back(a.is_moe_layer(a.layers - 1));
    // Eager (set_to_none): each unit's gradients appear in its backward; shares by parameters per GPU (the layers,
    // the LM head with the final norm, the embedding) of the stage's gradient bytes; autocast's weight copies the
    // same way without the embedding.
    const double head_w = sh.last ? (double(params.lm_head) + (a.tied_embeddings && p > 1 ? double(params.embedding) : 0.0)) / t : 0.0;
    const double emb_w = sh.first ? double(params.embedding + params.position_embedding) / t : 0.0;
    double layer_w = 0.0;
    for (const auto& ch : chunk_moe)
      for (bool moe : ch) layer_w += moe ? w_moe : w_dense;
    const double grad_per_w = eager && (layer_w + head_w + emb_w) > 0 ? sm.grads / (layer_w + head_w + emb_w) : 0.0;
    // Under full recomputation the layers' copies live only through the forward (autocast's cache, freed when the
    // forward and loss leave autocast) and again while each layer is recomputed; the LM head keeps its own
    // (memory_core: amp_copies is then the head's alone).
    const bool full = plan.recompute == wl::Recompute::full;
    const double amp_base = full ? head_w : layer_w + head_w;
    const double amp_per_w = sm.amp_copies > 0 && amp_base > 0 ? sm.amp_copies / amp_base : 0.0;
    const double mask_mb = sm.inflight_mb > 0 ? sm.extra_first / sm.inflight_mb : 0.0;

    double acts = 0.0, grads = 0.0, amp = 0.0, cast_cache = 0.0;
    auto sample = [&](Seconds time, std::string ev) {
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
    };
    sample(Seconds(0), "step start: model states");
    const std::vector<PipeOp> ops = pipeline_order(p, v, plan.micro_batches(), i);
    for (const PipeOp& o : ops) {
      const Times& tm = pass[{i, o.forward, o.micro_batch, o.chunk}];
      const auto& layers = chunk_moe[std::size_t(o.chunk)];
      const double n = double(std::max<std::size_t>(1, layers.size()));
      const Seconds dt = (tm.layers_end - tm.layers_start) / n;
      const std::string tag = fmt::format("micro-batch {}{}", o.micro_batch,
                                          v > 1 ? fmt::format(" chunk {}", o.chunk) : std::string{});
      const bool first_chunk = sh.first && o.chunk == 0, last_chunk = sh.last && o.chunk == v - 1;
      if (o.forward) {
        if (first_chunk && mask_mb > 0) {
          acts += mask_mb;
          sample(tm.start, "forward " + tag + ": embedding dropout mask");
        }
        for (std::size_t l = 0; l < layers.size(); ++l) {
          acts += layers[l] ? stored_moe : stored_dense;
          (full ? cast_cache : amp) += (layers[l] ? w_moe : w_dense) * amp_per_w;
          sample(tm.layers_start + dt * double(l + 1), fmt::format("forward {}: layer {} saved tensors", tag, l));
        }
        if (last_chunk) {
          // A PyTorch loop's loss buffers (memory_core: a_b + 4 + 4 bytes per logit) are the logits and log_softmax's
          // fp32 output, kept from the forward, and the fp32 incoming gradient its backward allocates (measured:
          // mem_*.json); Megatron's fused cross entropy keeps its a_b + 4 from the forward.
          const double bwd_grad = eager ? sm.logits_b * kFp32Bytes / (c.ab + 2.0 * kFp32Bytes) : 0.0;
          acts += sm.extra_last + sm.logits_b - bwd_grad;
          amp += head_w * amp_per_w;
          if (eager) {
            // While the loss's forward runs it holds kLossForwardBytes per logit beside the bf16 logits; it keeps
            // the fp32 log-softmax (4 B) once done.
            const double per_logit = sm.logits_b / (c.ab + 2.0 * kFp32Bytes);
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
      } else {
        for (std::size_t r = layers.size(); r-- > 0;) {
          const std::size_t l = r;
          const Seconds at = tm.layers_start + dt * double(layers.size() - 1 - l);
          const double ws = (layers[l] ? ws_moe : ws_dense) + (full ? (layers[l] ? w_moe : w_dense) * amp_per_w : 0.0);
          if (ws > 0) {
            acts += ws;
            sample(at, fmt::format("backward {}: layer {} recomputed (working set)", tag, l));
            acts -= ws;
          }
          acts -= layers[l] ? stored_moe : stored_dense;
          if (!full) amp -= (layers[l] ? w_moe : w_dense) * amp_per_w;
          grads += (layers[l] ? w_moe : w_dense) * grad_per_w;
          sample(at + dt, fmt::format("backward {}: layer {} done, its saved tensors freed", tag, l));
        }
        if (first_chunk && mask_mb > 0) acts -= mask_mb;
        if (first_chunk && emb_w > 0 && eager) grads += emb_w * grad_per_w;
        if (first_chunk) sample(tm.end, "backward " + tag + ": embedding backward done");
      }
      // Gradient accumulation: a PyTorch loop's gradients stay allocated across the micro-batches.
    }
    // The optimizer step reads the gradients and updates the states in place; a PyTorch loop's zero_grad
    // (set_to_none) then frees the gradients.
    sample(st.end, "optimizer step done");
    if (eager && grads > 0) {
      grads = 0.0;
      sample(st.end, "zero_grad(set_to_none): gradients freed");
    }
    // Why the replay's peak differs from the formula's, where it does (each cause is tested).
    const double diff = tl.model_peak.raw() - tl.peak.raw();
    if (!same_bytes(tl.model_peak.raw(), tl.peak.raw())) {
      std::vector<std::string> why;
      const double ws_max = std::max(sh.layers - sh.moe_layers > 0 ? ws_dense : 0.0, sh.moe_layers > 0 ? ws_moe : 0.0);
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
    mt.stages.push_back(std::move(tl));
  }
  mt.notes.push_back(
      "allocated bytes as torch.cuda.memory_allocated() counts them: the CUDA context, NCCL buffers and the "
      "fragmentation reserve of the peak estimate are outside");
  mt.notes.push_back("times are the step timeline's; the layers of one pass are evenly spaced within it");
  mt.ok = true;
  return mt;
}

}  // namespace gpuplan::model
