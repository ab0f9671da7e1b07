// The step and memory timelines (timeline.hpp): the pipeline order against the schedules' published rules, the step
// timeline's spans against the step model's terms (they sum to its step time), the memory timeline's peak against
// the peak-memory formula (equal, or different by exactly the stated cause).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "test_paths.hpp"
#include "gpuplan/model/memory.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/timeline.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/model/training_input.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::arch;

namespace {

using test::node_system;

struct Layout {
  int tp = 1, pp = 1, dp = 1, v = 1;
  std::int64_t micro = 1, global = 1, seq = 4096;
  wl::ZeroStage zero = wl::ZeroStage::none;
  wl::Recompute recompute = wl::Recompute::none;
};

wl::TrainingPlan plan_of(const Layout& l) {
  wl::TrainingPlan p;
  p.par.tp = l.tp;
  p.par.pp = l.pp;
  p.par.dp = l.dp;
  p.par.sequence_parallel = l.tp > 1;
  p.par.virtual_stages = l.v;
  if (l.v > 1) p.schedule = wl::PipelineSchedule::interleaved;
  p.micro_batch = l.micro;
  p.global_batch = l.global;
  p.seq_len = l.seq;
  p.zero = l.zero;
  p.recompute = l.recompute;
  return p;
}

double rel(double x, double ref) { return std::fabs(x - ref) / std::max(1e-30, std::fabs(ref)); }

std::string ops_text(const std::vector<model::PipeOp>& ops) {
  std::string s;
  for (const auto& o : ops) {
    s += fmt::format("{}{}{}.{}", s.empty() ? "" : " ", o.forward ? 'F' : 'B', o.micro_batch, o.chunk);
  }
  return s;
}

bool pass_span(model::SpanKind k) {
  using K = model::SpanKind;
  return k == K::forward || k == K::backward || k == K::recompute || k == K::embedding || k == K::head_loss ||
         k == K::extra || k == K::comm_exposed;
}

}  // namespace

TEST_CASE("1F1B: stage i warms up with pp − i − 1 forwards, then alternates, then drains") {
  // Narayanan et al. 2021 §2.2.1 (Figure 4, top): PP 4, 8 micro-batches.
  CHECK(ops_text(model::pipeline_order(4, 1, 8, 0)) ==
        "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 F6.0 B3.0 F7.0 B4.0 B5.0 B6.0 B7.0");
  CHECK(ops_text(model::pipeline_order(4, 1, 8, 3)) ==
        "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0 F4.0 B4.0 F5.0 B5.0 F6.0 B6.0 F7.0 B7.0");
  // Fewer micro-batches than stages: every forward first.
  CHECK(ops_text(model::pipeline_order(4, 1, 2, 0)) == "F0.0 F1.0 B0.0 B1.0");
}

TEST_CASE("interleaved 1F1B: 2(pp − i − 1) + (v − 1)·pp warm-up forwards, chunks in groups of pp micro-batches") {
  // Megatron-Core forward_backward_pipelining_with_interleaving, PP 2, v 2, 4 micro-batches. Stage 0 warms up with
  // 2·1 + 1·2 = 4 forwards: virtual micro-batches k = 0..3 are (mb 0, chunk 0), (1, 0), (0, 1), (1, 1); backwards
  // run the chunks in reverse order.
  CHECK(ops_text(model::pipeline_order(2, 2, 4, 0)) ==
        "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  // Stage 1 warms up with (v − 1)·pp = 2.
  CHECK(ops_text(model::pipeline_order(2, 2, 4, 1)) ==
        "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
}

TEST_CASE("the step timeline lays out the step model's terms: its spans sum to the step time the model reports") {
  struct C {
    const char* name;
    const char* model;
    const char* node;
    Layout l;
  };
  std::vector<C> cs;
  {
    Layout l;
    l.dp = 8;
    l.global = 64;
    l.zero = wl::ZeroStage::optimizer;
    cs.push_back({"llama-3.1-8b DP 8 ZeRO-1", "llama-3.1-8b", "dgx-h100", l});
  }
  {
    Layout l;
    l.tp = 8;
    l.pp = 4;
    l.global = 16;
    cs.push_back({"llama-3.1-70b TP 8 PP 4, 16 micro-batches", "llama-3.1-70b", "dgx-h100", l});
  }
  {
    Layout l;
    l.tp = 8;
    l.pp = 4;
    l.v = 2;
    l.dp = 2;
    l.global = 64;
    l.recompute = wl::Recompute::selective;
    cs.push_back({"llama-3.1-70b TP 8 PP 4 v 2 DP 2", "llama-3.1-70b", "dgx-h100", l});
  }
  {
    Layout l;
    l.tp = 8;
    l.dp = 8;
    l.global = 64;
    l.zero = wl::ZeroStage::parameters;
    l.recompute = wl::Recompute::full;
    cs.push_back({"llama-3.1-70b TP 8 DP 8 ZeRO-3 full recompute", "llama-3.1-70b", "dgx-h100", l});
  }
  for (const auto& x : cs) {
    INFO(std::string(x.name));
    const auto& a = arch(x.model);
    const auto plan = plan_of(x.l);
    const auto sys = node_system(x.node);
    const auto est = model::estimate_training(a, plan, sys, Explain::off);
    REQUIRE(est.step_time.raw() > 0);
    const auto tl = model::training_timeline(a, plan, sys);
    REQUIRE_MESSAGE(tl.ok, tl.error);
    CHECK(tl.step_time.raw() == est.step_time.raw());
    if (x.l.v == 1) {
      CHECK(rel(tl.end.raw(), est.step_time.raw()) < 1e-9);
      CHECK(tl.allowance.raw() >= -1e-12 * est.step_time.raw());
    } else {
      // Interleaved: the formula's fill and drain (Σ t_i − max t_i)/v spread each stage's work evenly over its v
      // chunks; the schedule runs the embedding in chunk 0 of stage 0 and the LM head in the last chunk of the last
      // stage, so it can take longer, by less than those two per micro-batch (t_0 − t_1 and t_3 − t_1 here: the
      // stages hold equal layers). The layout then ends after the step time by exactly that amount.
      const double embed = est.stage_time[0].raw() - est.stage_time[1].raw();
      const double head = est.stage_time[3].raw() - est.stage_time[1].raw();
      CHECK(tl.allowance.raw() <= 0);
      CHECK(-tl.allowance.raw() < embed + head);
      CHECK(rel(tl.end.raw(), est.step_time.raw() - tl.allowance.raw()) < 1e-9);
      CHECK(tl.notes.front().find("longer than the model's pipeline formula") != std::string::npos);
    }
    // Every stage's passes hold exactly m micro-batches of its t_i (compose_step's per-stage time).
    REQUIRE(est.stage_time.size() == std::size_t(x.l.pp));
    for (int i = 0; i < x.l.pp; ++i) {
      double sum = 0.0;
      for (const auto& s : tl.spans)
        if (s.stage == i && tl.lanes[std::size_t(s.lane)].compute && pass_span(s.kind)) sum += s.duration().raw();
      CHECK(rel(sum, est.stage_time[std::size_t(i)].raw() * double(est.micro_batches)) < 1e-9);
    }
    // The compute stream never runs two things at once, and every span lies inside the step.
    for (std::size_t lane = 0; lane < tl.lanes.size(); ++lane) {
      if (!tl.lanes[lane].compute) continue;
      std::vector<std::pair<double, double>> iv;
      for (const auto& s : tl.spans)
        if (s.lane == int(lane)) iv.emplace_back(s.start.raw(), s.end.raw());
      std::sort(iv.begin(), iv.end());
      for (std::size_t k = 1; k < iv.size(); ++k) CHECK(iv[k].first >= iv[k - 1].second - 1e-12);
    }
    for (const auto& s : tl.spans) {
      CHECK(s.start.raw() >= -1e-15);
      CHECK(s.end.raw() <= tl.end.raw() * (1 + 1e-9));
    }
    // The optimizer span is the model's optimizer time.
    CHECK(rel(tl.compute_time(model::SpanKind::optimizer).raw(), est.step.optimizer.raw() * x.l.pp) < 1e-9);
  }
}

TEST_CASE("1F1B with the slowest stage last: the schedule takes exactly the pipeline formula's time") {
  // Stage times t_i (the last stage carries the LM head, so it is the slowest): the simulated 1F1B makespan is
  // Σ t_i + (m − 1)·max t_i, the model's m·max t_i + (Σ t_i − max t_i).
  const auto& a = arch("llama-3.1-70b");
  Layout l;
  l.tp = 8;
  l.pp = 4;
  l.global = 16;
  const auto plan = plan_of(l);
  const auto sys = node_system("dgx-h100");
  const auto est = model::estimate_training(a, plan, sys, Explain::off);
  REQUIRE(est.bottleneck_stage == 3);
  const auto tl = model::training_timeline(a, plan, sys);
  REQUIRE(tl.ok);
  double sum = 0, mx = 0;
  for (const auto& t : est.stage_time) {
    sum += t.raw();
    mx = std::max(mx, t.raw());
  }
  CHECK(std::fabs(tl.allowance.raw()) < 1e-9 * est.step_time.raw());
  CHECK(rel(tl.pipeline_end.raw(), sum + 15.0 * mx) < 1e-9);
  // The first stage idles (p − 1) stage times in all: its bubble spans.
  double idle = 0;
  for (const auto& s : tl.spans)
    if (s.stage == 0 && s.kind == model::SpanKind::bubble) idle += s.duration().raw();
  CHECK(rel(idle, tl.pipeline_end.raw() - 16.0 * est.stage_time[0].raw()) < 1e-9);
}

TEST_CASE("DualPipe is refused with its reason, not laid out wrongly") {
  auto plan = plan_of({});
  plan.par.pp = 4;
  plan.global_batch = 16;
  plan.schedule = wl::PipelineSchedule::dualpipe;
  const auto tl = model::training_timeline(arch("llama-3.1-8b"), plan, node_system("dgx-h100"));
  CHECK_FALSE(tl.ok);
  CHECK(tl.error.find("DualPipe") != std::string::npos);
}

// ------------------------------------------------------------------------------------------ data-loader lane

namespace {

/// Llama-3.1-8B, DP 8 on a DGX H100 (112 host cores: 112/8 − 1 = 13 for each GPU's workers), 8 sequences per GPU.
struct LoaderCase {
  const wl::TransformerArch& a = arch("llama-3.1-8b");
  wl::TrainingPlan plan = [] {
    Layout l;
    l.dp = 8;
    l.global = 64;
    return plan_of(l);
  }();
  model::TrainingSystem sys = node_system("dgx-h100");
  model::TrainingEstimate est = model::estimate_training(a, plan, sys, Explain::off);
  model::TextLoader loader(double sample_s) const {
    model::TextLoader l;
    l.sample_cpu = units::seconds(sample_s);
    l.node_cores = 112;
    return l;
  }
};

}  // namespace

TEST_CASE("the data-loader lane: a starved GPU waits for the batch at the step's start, and the step is the loader's") {
  const LoaderCase c;
  const double gpu = c.est.step_time.raw();
  REQUIRE(gpu > 0);
  // One worker, 8 sequences of 3·t_GPU/8 CPU each: the loader needs 3·t_GPU per batch (vision_data_pipeline's rule:
  // n / (min(w, c)·r_core)), so the step is 3·t_GPU and the GPU busy a third of it — the course's "GPU utilisation
  // 34% because the loader starves it".
  const double sample = 3.0 * gpu / 8.0;
  const auto base = model::training_timeline(c.a, c.plan, c.sys);
  const auto tl = model::training_timeline(c.a, c.plan, c.sys, c.loader(sample), 1);
  REQUIRE(tl.ok);
  REQUIRE(tl.loader_priced);
  CHECK(rel(tl.loader.raw(), 3.0 * gpu) < 1e-12);
  CHECK(rel(tl.step_time.raw(), 3.0 * gpu) < 1e-12);
  CHECK(rel(tl.end.raw(), tl.step_time.raw()) < 1e-9);
  CHECK(tl.gpu_step.raw() == gpu);
  CHECK(tl.gpu_utilisation == gptest::approx(1.0 / 3.0).epsilon(1e-12));
  CHECK(tl.notes.front().find("GPU utilisation 33% because the loader starves it") != std::string::npos);
  // The same number as the stack's input pipeline (one formula).
  const auto pipe = model::training_input_pipeline(c.plan, c.sys, c.est.step_time, c.loader(sample), 1, Explain::off);
  CHECK(pipe.step_time.raw() == tl.step_time.raw());
  // Its own host lane holding the batch's preparation, and a wait of t_loader − t_GPU on the compute stream.
  REQUIRE(tl.lanes.size() == base.lanes.size() + 1);
  CHECK(tl.lanes.back().host);
  CHECK_FALSE(tl.lanes.back().compute);
  int loads = 0, waits = 0;
  for (const auto& s : tl.spans) {
    if (s.kind == model::SpanKind::data_load) {
      ++loads;
      CHECK(s.lane == int(tl.lanes.size()) - 1);
      CHECK(s.start.raw() == 0.0);
      CHECK(rel(s.end.raw(), 3.0 * gpu) < 1e-12);
    } else if (s.kind == model::SpanKind::data_wait) {
      ++waits;
      CHECK(tl.lanes[std::size_t(s.lane)].compute);
      CHECK(s.start.raw() == 0.0);
      CHECK(rel(s.duration().raw(), 2.0 * gpu) < 1e-9);
    }
  }
  CHECK(loads == 1);
  CHECK(waits == 1);
  // The rest of the step moved after the wait, unchanged.
  REQUIRE(tl.spans.size() == base.spans.size() + 2);
  for (std::size_t k = 0; k < base.spans.size(); ++k) {
    CHECK(tl.spans[k].kind == base.spans[k].kind);
    CHECK(std::fabs(tl.spans[k].start.raw() - (base.spans[k].start.raw() + 2.0 * gpu)) < 1e-12 * gpu);
    CHECK(std::fabs(tl.spans[k].duration().raw() - base.spans[k].duration().raw()) < 1e-12 * gpu);
  }
}

TEST_CASE("the data-loader lane: workers hide the loader behind the step, capped by the node's cores, none loads in process") {
  const LoaderCase c;
  const double gpu = c.est.step_time.raw();
  const double sample = 3.0 * gpu / 8.0;
  auto waits = [](const model::StepTimeline& t) {
    double w = 0;
    for (const auto& s : t.spans)
      if (s.kind == model::SpanKind::data_wait && s.lane == 0) w += s.duration().raw();
    return w;
  };
  // Four workers: 8·(3 t/8)/4 = 0.75 t per batch, prepared beside the step: no wait, the GPU busy throughout.
  const auto four = model::training_timeline(c.a, c.plan, c.sys, c.loader(sample), 4);
  REQUIRE(four.ok);
  CHECK(rel(four.loader.raw(), 0.75 * gpu) < 1e-12);
  CHECK(four.step_time.raw() == gpu);
  CHECK(four.gpu_utilisation == 1.0);
  CHECK(waits(four) == 0.0);
  CHECK(four.notes.front().find("starves") == std::string::npos);
  // No workers: the training process loads the 8 sequences itself before the step (3 t), the GPU idle meanwhile.
  const auto none = model::training_timeline(c.a, c.plan, c.sys, c.loader(sample), 0);
  REQUIRE(none.ok);
  CHECK(rel(none.step_time.raw(), 4.0 * gpu) < 1e-12);
  CHECK(rel(waits(none), 3.0 * gpu) < 1e-9);
  CHECK(none.lanes.back().name.find("in process") != std::string::npos);
  // The step falls (never rises) as workers are added, until the GPU binds; past 13 workers per GPU (112 cores over
  // 8 GPUs, less the training process's) more workers change nothing.
  double prev = model::training_timeline(c.a, c.plan, c.sys, c.loader(64.0 * gpu / 8.0), 0).step_time.raw();
  for (int w = 1; w <= 16; ++w) {
    const auto t = model::training_timeline(c.a, c.plan, c.sys, c.loader(64.0 * gpu / 8.0), w);
    CHECK(t.step_time.raw() <= prev);
    prev = t.step_time.raw();
    if (w >= 13) CHECK(rel(t.loader.raw(), 8.0 * (64.0 * gpu / 8.0) / 13.0) < 1e-12);
  }
  // Without a per-sample cost nothing is laid out, and the note says so.
  const auto off = model::training_timeline(c.a, c.plan, c.sys);
  CHECK_FALSE(off.loader_priced);
  CHECK(off.notes.back().find("no data-loading term") != std::string::npos);
}

// ------------------------------------------------------------------------------------------ memory timeline

namespace {

/// The memory timeline's peak on every stage against the formula's allocated peak for that stage.
void check_equal_peaks(const model::MemoryTimeline& mt) {
  REQUIRE_MESSAGE(mt.ok, mt.error);
  for (const auto& s : mt.stages) {
    INFO("stage " << s.stage << ": " << s.peak_event << " / " << s.peak_difference);
    CHECK(rel(s.peak.raw(), s.model_peak.raw()) < 1e-9);
    CHECK(s.peak_difference.empty());
  }
}

}  // namespace

TEST_CASE("the memory timeline's peak is the peak-memory formula's, per stage and recompute mode") {
  const auto sys = node_system("dgx-h100");
  for (auto rc : {wl::Recompute::none, wl::Recompute::selective, wl::Recompute::full}) {
    INFO("recompute " << int(rc));
    Layout l;
    l.dp = 8;
    l.global = 64;
    l.zero = wl::ZeroStage::optimizer;
    l.recompute = rc;
    check_equal_peaks(model::training_memory_timeline(arch("llama-3.1-8b"), plan_of(l), sys));
    // Pipeline stages hold pp − i micro-batches (1F1B), interleaved 2(pp − i − 1) + (v − 1)·pp + 1 chunks.
    Layout pl;
    pl.tp = 8;
    pl.pp = 4;
    pl.global = 16;
    pl.recompute = rc;
    check_equal_peaks(model::training_memory_timeline(arch("llama-3.1-70b"), plan_of(pl), sys));
    pl.v = 2;
    check_equal_peaks(model::training_memory_timeline(arch("llama-3.1-70b"), plan_of(pl), sys));
  }
  // Recompute modules (Megatron-Core --recompute-modules): the per-layer terms already leave the module outputs out.
  auto plan = plan_of({});
  plan.recompute_modules = wl::recompute_layernorm;
  check_equal_peaks(model::training_memory_timeline(arch("llama-3.1-8b"), plan, sys));
}

TEST_CASE("the memory timeline: activations grow through the forward and are freed through the backward") {
  const auto& a = arch("llama-3.1-8b");
  auto plan = plan_of({});
  const auto mt = model::training_memory_timeline(a, plan, node_system("dgx-h100"));
  REQUIRE(mt.ok);
  const auto& s = mt.stages.at(0);
  const double per_layer = model::activation_bytes_per_layer(a, plan).raw();
  // After layer k of the forward: states + (k + 1) layers' saved tensors.
  int forward_layers = 0;
  double prev = s.states.raw();
  for (const auto& x : s.samples) {
    if (x.event.find("saved tensors") != std::string::npos && x.event.rfind("forward", 0) == 0) {
      ++forward_layers;
      CHECK(rel(x.allocated.raw() - s.states.raw(), per_layer * forward_layers) < 1e-9);
      CHECK(x.allocated.raw() > prev);
      prev = x.allocated.raw();
    }
  }
  CHECK(forward_layers == a.layers);
  // The step ends where it started (Megatron keeps its gradient buffers: they are states).
  CHECK(rel(s.samples.back().allocated.raw(), s.states.raw()) < 1e-12);
  // Time runs forward.
  for (std::size_t k = 1; k < s.samples.size(); ++k) CHECK(s.samples[k].time.raw() >= s.samples[k - 1].time.raw());
}

TEST_CASE("full recompute with a working set larger than the logits: the formula's peak is the timeline's") {
  // The head's backward frees the final-norm and output-layer inputs (2·s·b·h·a_b/t) with the logits before the first
  // layer is recomputed, so the formula adds max(0, working set − logits − head inputs) on top of them: the peak the
  // replay reaches. GPT-3 175B's 51200-word vocabulary over TP 8 with TE's cross entropy keeps 2·6400 B of logits per
  // token, less than one layer's working set.
  const auto& a = arch("gpt3-175b");
  Layout l;
  l.tp = 8;
  l.dp = 1;
  l.global = 1;
  l.seq = 2048;
  l.recompute = wl::Recompute::full;
  const auto plan = plan_of(l);
  const auto mt = model::training_memory_timeline(a, plan, node_system("dgx-h100"));
  REQUIRE(mt.ok);
  const auto& s = mt.stages.at(0);
  const double T = 2048, h = double(a.hidden), t = 8;
  auto none = plan;
  none.recompute = wl::Recompute::none;
  // Working set per layer = everything the layer saves but its input (h·a_b/t per token with SP).
  const double ws = model::activation_bytes_per_layer(a, none).raw() - T * h * 2 / t;
  const double logits = T * double(a.vocab) / t * 2;
  const double head_inputs = T * 2 * h * 2 / t;
  REQUIRE(ws > logits + head_inputs);
  CHECK(rel(s.peak.raw(), s.model_peak.raw()) < 1e-9);
  CHECK(s.peak_difference.empty());
  const auto m = model::training_memory(a, model::parameter_counts(a, Explain::off), plan,
                                        hw::GpuSpec{}, model::RuntimeOverheads{}, Explain::off);
  CHECK(rel(m.logits.raw(), logits) < 1e-12);
}

TEST_CASE("a PyTorch loop with gradient accumulation: the timeline holds the gradients the formula leaves out") {
  // bench-llama-1b-like in a PyTorch loop (fp32 params and gradients under autocast), 2 micro-batches: the second
  // forward saves its activations while the first backward's fp32 gradients (4 B per parameter) are allocated.
  const auto& a = arch("bench-llama-1b-like");
  const auto p = model::parameter_counts(a, Explain::off);
  Layout l;
  l.seq = 2048;
  l.micro = 4;
  l.global = 8;
  auto plan = plan_of(l);
  plan.kernels = wl::KernelStyle::eager;
  plan.mixed_precision = wl::MixedPrecision::amp;
  plan.precision.weight_bytes = 4;
  plan.precision.gradient_bytes = 4;
  plan.precision.master_bytes = 0;
  plan.attention_kernel = wl::AttentionKernel::fa2;
  const auto mt = model::training_memory_timeline(a, plan, node_system("dgx-h100"));
  REQUIRE(mt.ok);
  const auto& s = mt.stages.at(0);
  CHECK(rel(s.peak.raw() - s.model_peak.raw(), 4.0 * double(p.total)) < 1e-9);
  CHECK(s.peak_difference.find("gradient accumulation") != std::string::npos);
  // One micro-batch: the formula's peak (the backward's start) exactly.
  plan.global_batch = 4;
  check_equal_peaks(model::training_memory_timeline(a, plan, node_system("dgx-h100")));
}

TEST_CASE("a PyTorch loop under full recompute: gradients made in the backward beside a recomputed layer exceed both of the formula's candidates") {
  // 7B-wide, 8 layers, seq 4096 × 4 (the M-h100-…-w7b_L8_s4096_b4_ckpt validation case's plan): each layer's fp32
  // gradient (0.81 GB) exceeds its checkpoint (0.13 GB), so by layer 0's recomputation the gradients made so far
  // and its working set (3.4 GB) top both the loss's moments and the backward's end.
  const auto& a = arch("bench-llama-7b-width-l8");
  Layout l;
  l.micro = 4;
  l.global = 4;
  l.recompute = wl::Recompute::full;
  auto plan = plan_of(l);
  plan.kernels = wl::KernelStyle::eager;
  plan.mixed_precision = wl::MixedPrecision::amp;
  plan.precision.weight_bytes = 4;
  plan.precision.gradient_bytes = 4;
  plan.precision.master_bytes = 0;
  const auto mt = model::training_memory_timeline(a, plan, node_system("dgx-h100"));
  REQUIRE(mt.ok);
  const auto& s = mt.stages.at(0);
  CHECK(s.peak.raw() > s.model_peak.raw());
  CHECK(s.peak_event == "backward micro-batch 0: layer 0 recomputed (working set)");
  CHECK(s.peak_difference.find("gradients during the backward") != std::string::npos);
}

TEST_CASE("hybrids: the memory timeline prices each layer by its kind, and its peak is the formula's") {
  // Nemotron-H-56B (Mamba-2, attention and FFN-only layers) and Qwen3-Next-80B-A3B (gated DeltaNet and gated attention,
  // every layer MoE), from the corpus's verbatim configs: the replay adds each layer's own saved tensors
  // (detail::kind_sum, the peak formula's per-kind sums), so its peak is the formula's on every stage, and a forward's
  // per-layer steps take one value per layer kind.
  const std::string corpus = std::string(GPUPLAN_TEST_FIXTURES) + "/hf_corpus/";
  struct Case {
    std::string dir;
    std::size_t kinds;
    Layout l;
  };
  Layout nh;
  nh.tp = 8;
  nh.pp = 2;
  nh.global = 8;
  Layout qn;
  qn.tp = 2;
  qn.pp = 4;
  qn.global = 8;
  for (const Case& x : {Case{"nvidia--Nemotron-H-56B-Base-8K", 3, nh}, Case{"Qwen--Qwen3-Next-80B-A3B-Thinking", 2, qn}}) {
    CAPTURE(x.dir);
    const auto m = wl_io::load_model_file(corpus + x.dir + "/config.json");
    REQUIRE_MESSAGE(m.ok(), m.diagnostics().to_string());
    REQUIRE(m->arch.hybrid());
    for (auto rc : {wl::Recompute::none, wl::Recompute::selective}) {
      CAPTURE(int(rc));
      Layout l = x.l;
      l.recompute = rc;
      const auto plan = plan_of(l);
      const auto mt = model::training_memory_timeline(m->arch, plan, node_system("dgx-h100"));
      check_equal_peaks(mt);
      // The whole-model peak: the formula's allocated bytes of its heaviest stage (the vocabulary padded as the
      // framework pads it).
      const auto padded = wl::with_padded_vocab(m->arch, plan);
      const auto tm = model::training_memory(padded, model::parameter_counts(padded, Explain::off), plan,
                                             *node_system("dgx-h100").gpu, model::default_training_overheads(),
                                             Explain::off);
      double peak = 0.0;
      for (const auto& s : mt.stages) peak = std::max(peak, s.peak.raw());
      CHECK(rel(peak, (tm.total - tm.cuda_context - tm.nccl_buffers - tm.fragmentation).raw()) < 1e-9);
      // The first stage's first forward: one step per layer, as many distinct steps as layer kinds.
      std::vector<double> steps;
      double prev = -1.0;
      for (const auto& s : mt.stages.at(0).samples) {
        if (s.event.rfind("forward micro-batch 0: layer", 0) != 0) {
          if (!steps.empty()) break;
          prev = s.allocated.raw();
          continue;
        }
        steps.push_back(s.allocated.raw() - prev);
        prev = s.allocated.raw();
      }
      REQUIRE(!steps.empty());
      std::vector<double> distinct;
      for (double d : steps)
        if (std::none_of(distinct.begin(), distinct.end(), [d](double e) { return rel(d, e) < 1e-9; })) distinct.push_back(d);
      CHECK(distinct.size() == x.kinds);
    }
  }
}
