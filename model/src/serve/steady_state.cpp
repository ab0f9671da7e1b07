// Serving's steady state (serving.hpp): the prompt tokens a prefix cache saves, the prefill and decode times of a
// batch, a multimodal model's vision encoder, and the steady state of a continuous-batching engine at batch B with its
// derivation.
#include "gpuplan/model/serving.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/vision.hpp"
#include "graph_memo.hpp"

namespace gpuplan::model {

using units::Bytes;
using units::Seconds;

std::int64_t cached_prompt_tokens(const ServingPerfPlan& plan, std::int64_t prompt) {
  prompt = std::max<std::int64_t>(1, prompt);
  const std::int64_t shared = std::clamp<std::int64_t>(plan.cached_prefix_tokens, 0, prompt - 1);
  if (!(plan.prefix_hit_rate > 0)) return shared;
  const std::int64_t block = std::max<std::int64_t>(1, plan.kv_block_tokens);
  const auto hit = std::int64_t(std::clamp(plan.prefix_hit_rate, 0.0, 1.0) * double(prompt - shared)) / block * block;
  return std::min(prompt - 1, shared + hit);
}

ForwardBatch prompt_pass(const ServingPerfPlan& plan, std::int64_t prompt) {
  prompt = std::max<std::int64_t>(1, prompt);
  const std::int64_t cached = cached_prompt_tokens(plan, prompt);
  return ForwardBatch{0, 1, 0, 1.0, prompt - cached, cached, true};
}

namespace {
/// How a serving engine runs a multimodal request's images through the tower: vision_encoder_time and its
/// derivation in the steady state share it.
VisionRunPlan vision_encoder_plan(const ServingPerfPlan& plan) {
  VisionRunPlan vp;
  vp.batch = plan.images_per_request;
  // Towers stay 16-bit when the language model is quantized (vLLM's quantization configs skip them).
  vp.compute = plan.compute == hw::Precision::fp16 ? hw::Precision::fp16 : hw::Precision::bf16;
  vp.autocast = false;
  vp.cuda_graphs = false;  // engines run the encoder eagerly (vLLM captures only the decoder's graphs)
  vp.launch = plan;
  return vp;
}
// Serving engines run a ViT's attention with FlashAttention-2-class kernels (non-causal, variable length).
Device vision_encoder_device(const ServingSystem& sys) {
  return sustained_device(*sys.gpu, sys.efficiency, wl::AttentionKernel::fa2);
}
}  // namespace

Seconds vision_encoder_time(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ServingSystem& sys) {
  if (!a.vision || plan.images_per_request <= 0 || sys.gpu == nullptr) return Seconds{};
  return vision_forward(a.vision->graph(), vision_encoder_plan(plan), vision_encoder_device(sys)).time;
}

Seconds prefill_time(const wl::TransformerArch& a, const ServingPerfPlan& plan, std::int64_t batch,
                     std::int64_t prompt, const ServingSystem& sys) {
  batch = std::max<std::int64_t>(1, batch);
  prompt = std::max<std::int64_t>(1, prompt);
  // A cached prefix is not computed again: the prompt's new tokens attend to it (prompt_pass).
  const ForwardBatch fresh_pass = prompt_pass(plan, prompt);
  const std::int64_t cached = fresh_pass.prefill_past;
  prompt = fresh_pass.prefill_tokens;
  const std::int64_t budget = plan.max_batched_tokens;
  Seconds sum{}, last_total{}, last_stage{};
  auto pass = [&](const ForwardBatch& fb) {
    const ForwardCost c = forward_cost(a, plan, fb, sys, Explain::off);
    sum += c.stage;
    last_total = c.total;
    last_stage = c.stage;
  };
  if (budget <= 0 || batch * prompt <= budget) {
    pass(ForwardBatch{0, 1, 0, double(batch), prompt, cached, true});
  } else if (prompt <= budget) {
    // Full passes of ⌊budget/prompt⌋ prompts (identical: costed once), then the rest.
    const std::int64_t per_pass = std::max<std::int64_t>(1, budget / prompt);
    const std::int64_t full = batch / per_pass, rest = batch % per_pass;
    pass(ForwardBatch{0, 1, 0, double(per_pass), prompt, cached, true});
    sum += last_stage * double(full - 1);
    if (rest > 0) pass(ForwardBatch{0, 1, 0, double(rest), prompt, cached, true});
  } else {
    // Each prompt in chunks of the budget, attending to its earlier chunks; every prompt costs the same.
    Seconds one{};
    for (std::int64_t past = 0; past < prompt; past += budget) {
      const std::int64_t chunk = std::min(budget, prompt - past);
      const Seconds before = sum;
      pass(ForwardBatch{0, 1, 0, 1.0, chunk, cached + past, past + chunk >= prompt});
      one += sum - before;
    }
    sum += one * double(batch - 1);
  }
  // Passes stream through the stages; the last one still has to cross all of them. A multimodal prompt's images go
  // through the vision tower first (on the first stage, before the language model's passes).
  // An unpriceable pass (+inf: a collective over GPUs that no link joins) leaves the prefill unpriceable; the sums
  // above (sum − before, sum − last_stage) would make inf − inf of it.
  if (!std::isfinite(sum.raw())) return Seconds(std::numeric_limits<double>::infinity());
  return sum - last_stage + last_total + vision_encoder_time(a, plan, sys) * double(batch);
}

Seconds decode_step_time(const wl::TransformerArch& a, const ServingPerfPlan& plan, std::int64_t batch,
                         std::int64_t context, const ServingSystem& sys) {
  const double micro = std::max(1.0, double(batch) / double(std::max(1, plan.pp)));
  return forward_cost(a, plan, ForwardBatch{micro, 1, context, 0, 0, 0, true}, sys, Explain::off).total;
}

SteadyState steady_state(const wl::TransformerArch& a, const ServingPerfPlan& plan, std::int64_t batch,
                         std::int64_t isl, std::int64_t osl, const ServingSystem& sys, Explain explain,
                         std::optional<std::int64_t> decode_context) {
  using units::format;
  const detail::GraphMemoScope graphs(a);  // the layer and head graphs of `a`: each built once here
  SteadyState ss;
  batch = std::max<std::int64_t>(1, batch);
  isl = std::max<std::int64_t>(1, isl);
  osl = std::max<std::int64_t>(1, osl);
  ss.batch = batch;
  const double pp = double(std::max(1, plan.pp));
  const double micro = std::max(1.0, double(batch) / pp);
  const std::int64_t ctx = decode_context ? std::max<std::int64_t>(1, *decode_context) : isl + osl / 2;
  // A cached prefix: each prompt computes only its new tokens, attending to the cached ones (prefill_time).
  const ForwardBatch one = prompt_pass(plan, isl);
  const std::int64_t cached = one.prefill_past, fresh = one.prefill_tokens;
  // Prefill riding on each iteration: batch/osl prompts per iteration on average (one finishes every osl/batch
  // iterations and is replaced), in chunks of what the token budget leaves beside the decodes.
  const std::int64_t room = plan.max_batched_tokens > 0
                                ? std::max<std::int64_t>(1, plan.max_batched_tokens - std::llround(micro))
                                : fresh;
  const std::int64_t chunk = std::min(fresh, room);
  const double chunks = std::ceil(double(fresh) / double(chunk));
  // Prefill tokens per iteration: what the finishing sequences need, at most what the budget leaves. When the budget
  // is the limit, prompts are admitted only as fast as it allows and the decodes wait for them (prefill-bound).
  const double demand = micro * double(fresh) / double(osl);
  const double served = plan.max_batched_tokens > 0 ? std::min(demand, double(room)) : demand;
  ss.prefill_bound = served < demand * (1.0 - 1e-9);
  // The chunks arrive whole: on average n = served / chunk of them per iteration, so iterations carry ⌊n⌋ or ⌈n⌉
  // chunks (a fraction n − ⌊n⌋ of them ⌈n⌉) and the mean iteration interpolates the two forward passes. (Pricing one
  // pass with n fractional chunks instead spread a prompt thinly over every iteration: for an MoE model each sliver
  // touched experts a whole chunk touches once, so a few decodes plus 1/37 of a prompt cost nearly a whole prompt's
  // expert reads, on every iteration.)
  const double n = served / double(chunk);
  const double n_lo = std::floor(n), frac = n - n_lo;
  const std::int64_t past = cached + (chunks > 1 ? (fresh - chunk) / 2 : 0);
  auto pass = [&](double k, Explain e) {
    return forward_cost(a, plan, ForwardBatch{micro, 1, ctx, k, chunk, past, true}, sys, e);
  };
  const ForwardCost it = pass(std::max(1.0, std::ceil(n)), explain);  // an iteration carrying chunks
  ss.itl_decode_only = decode_step_time(a, plan, batch, ctx, sys);
  const Seconds lo = n_lo > 0 ? (frac > 0 ? pass(n_lo, Explain::off).total : it.total) : ss.itl_decode_only;
  ss.iteration = frac > 0 ? lo * (1.0 - frac) + it.total * frac : lo;
  // The mean residual of the running iteration at a random arrival: E[I²] / (2·E[I]) over the mix of the two passes.
  const double i2 = frac > 0 ? (1.0 - frac) * lo.raw() * lo.raw() + frac * it.total.raw() * it.total.raw()
                             : lo.raw() * lo.raw();
  ss.iteration_residual = std::isfinite(ss.iteration.raw()) ? Seconds(i2 / (2.0 * ss.iteration.raw()) / pp)
                                                            : ss.iteration;  // unpriceable: inf/inf is not a wait
  ss.prefill = prefill_time(a, plan, 1, isl, sys);
  // A prompt's own chunks ride on iterations that carry at least one chunk.
  const Seconds carrying = n < 1.0 ? it.total : ss.iteration;
  ss.ttft = std::max(ss.prefill, carrying * chunks);
  ss.request_latency = ss.ttft + ss.iteration * double(osl - 1);
  ss.output_tokens_per_s = double(batch) / ss.iteration.raw() * (served / demand);
  ss.input_tokens_per_s = ss.output_tokens_per_s * double(isl) / double(osl);
  ss.requests_per_s = ss.output_tokens_per_s / double(osl);
  if (explain == Explain::on) {
    ss.derivation = {"serving.steady_state",
                     "Continuous batching, steady state",
                     "n = B/osl · isl / chunk chunks per iteration ; iteration = (1 − φ)·forward(B decodes, ⌊n⌋ chunks) "
                     "+ φ·forward(B decodes, ⌈n⌉ chunks), φ = n − ⌊n⌋ ; ITL = iteration ; throughput = B / ITL ; "
                     "λ = throughput / osl ; TTFT = max(prefill alone, chunks × iteration carrying a chunk) ; "
                     "R = E[I²] / (2·E[I]) = ((1 − φ)·I_⌊n⌋² + φ·I_⌈n⌉²) / (2·iteration) (÷ PP)",
                     {{"B", std::to_string(batch), "concurrent sequences", Origin::user("--batch")},
                      {"isl", std::to_string(isl), "prompt tokens", Origin::user("--input-tokens")},
                      {"osl", std::to_string(osl), "output tokens", Origin::user("--output-tokens")},
                      {"budget", std::to_string(plan.max_batched_tokens), "tokens per iteration (chunked prefill)",
                       Origin::user("--max-batched-tokens")}},
                     fmt::format("ITL {}, TTFT {}, {:.0f} output tokens/s, {:.3g} requests/s; an arrival waits R = {} "
                                 "for the running iteration to end",
                                 format(ss.iteration), format(ss.ttft), ss.output_tokens_per_s, ss.requests_per_s,
                                 format(ss.iteration_residual)),
                     {fmt::format("decode-only iteration {}; {:.3g} chunks of {} tokens per iteration on average, an "
                                  "iteration carrying {:g} takes {}; prefill of one prompt alone {}",
                                  format(ss.itl_decode_only), n, chunk, std::max(1.0, std::ceil(n)), format(it.total),
                                  format(ss.prefill)) +
                      (ss.prefill_bound ? fmt::format("; prefill-bound: the token budget admits {:.3g} of the {:.3g} "
                                                      "prompt tokens per iteration the finishing sequences need",
                                                      served, demand)
                                        : std::string())},
                     {it.derivation}};
    if (plan.pp > 1)
      ss.derivation.notes.push_back(fmt::format("PP {}: {} micro-batches of {:g} sequences in flight", plan.pp, plan.pp, micro));
    if (a.vision && plan.images_per_request > 0 && sys.gpu != nullptr) {
      // The tower's forward is in the prefill alone (prefill_time): the same pass, with its own derivation.
      VisionInference vi = vision_inference(a.vision->graph(), vision_encoder_plan(plan), vision_encoder_device(sys),
                                            Explain::on);
      vi.derivation.children.clear();  // the tower's ops one by one: gpuplan model show lists the tower; too long here
      vi.derivation.id = "serving.vision_tower";
      vi.derivation.title = fmt::format("Vision tower ({}): {} image{} per request, {} tokens each, before the prefill",
                                        a.vision->kind, plan.images_per_request,
                                        plan.images_per_request == 1 ? "" : "s", a.vision->tokens_per_image());
      ss.derivation.notes.push_back(fmt::format("the prefill of one prompt alone includes the vision tower's {} for "
                                                "its {} image{}",
                                                format(vi.latency), plan.images_per_request,
                                                plan.images_per_request == 1 ? "" : "s"));
      ss.derivation.children.push_back(std::move(vi.derivation));
    }
    if (cached > 0)
      ss.derivation.notes.push_back(fmt::format(
          "prefix cache: {} of the {} prompt tokens are cached ({}whole blocks: not computed again); each prompt "
          "computes {} new tokens attending to them",
          cached, isl,
          plan.prefix_hit_rate > 0 ? fmt::format("the shared prefix's {} and a {:g} hit rate on the rest, in ",
                                                 std::min(plan.cached_prefix_tokens, isl - 1), plan.prefix_hit_rate)
                                   : std::string("the shared prefix's "),
          fresh));
  }
  return ss;
}

}  // namespace gpuplan::model
