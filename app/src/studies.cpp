#include "gpuplan/app/studies.hpp"

#include <algorithm>
#include <cmath>

namespace gpuplan::app {
namespace {
constexpr long long kMaxScalingGpus = 131072;
constexpr int kScalingPoints = 14;
}  // namespace

ScalingSeries strong_scaling_study(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                   const model::TrainingSystem& sys, const std::string& gpu_name) {
  ScalingSeries s;
  s.gpu_name = gpu_name;
  s.time_to_train = plan.tokens_to_train.has_value();
  const long long per_replica = static_cast<long long>(plan.par.tp) * plan.par.pp * plan.par.cp;
  // DP from 1 up to 4× the current (at least 8 points), doubling; the global batch stays: strong scaling.
  const long long dp_max = std::max<long long>(static_cast<long long>(plan.par.dp) * 4, 128);
  const ScalingSample* base = nullptr;
  for (long long dp = 1; dp <= dp_max && dp * per_replica <= kMaxScalingGpus && int(s.samples.size()) < kScalingPoints * 2;
       dp *= 2) {
    wl::TrainingPlan p = plan;
    p.par.dp = static_cast<int>(dp);
    if (p.global_batch % (p.micro_batch * dp) != 0) continue;  // the layout is invalid: not a point of the curve
    const auto est = model::estimate_training(arch, p, sys, Explain::off);
    if (est.step_time.raw() <= 0) continue;
    ScalingSample x;
    x.gpus = p.par.gpus();
    x.dp = p.par.dp;
    x.feasible = est.feasibility.ok;
    x.fits = est.memory.fits;
    x.step_time_s = est.step_time.raw();
    x.time_to_train_s = est.time_to_train ? est.time_to_train->raw() : est.step_time.raw();
    x.mfu = est.mfu;
    s.samples.push_back(x);
  }
  // Keep the last kScalingPoints points (the large end matters most), then scale against the first that fits.
  if (int(s.samples.size()) > kScalingPoints)
    s.samples.erase(s.samples.begin(), s.samples.end() - kScalingPoints);
  for (const auto& x : s.samples)
    if (x.fits) {
      base = &x;
      break;
    }
  if (base == nullptr && !s.samples.empty()) base = &s.samples.front();
  if (base != nullptr) {
    const ScalingSample b = *base;
    for (auto& x : s.samples) {
      const auto r = model::strong_scaling(units::Seconds(b.time_to_train_s), b.gpus, units::Seconds(x.time_to_train_s), x.gpus);
      x.ideal_time_s = r.ideal.raw();
      x.efficiency = r.efficiency;
    }
  }
  return s;
}

std::vector<BatchPoint> batch_study(const wl::TransformerArch& arch, const model::ServingPerfPlan& perf,
                                    const model::ServingSystem& sys, std::int64_t prompt_tokens,
                                    std::int64_t output_tokens, std::int64_t max_concurrency) {
  std::vector<BatchPoint> out;
  for (std::int64_t b = 1; b <= 1024; b *= 2) {
    const auto st = model::steady_state(arch, perf, b, prompt_tokens, output_tokens, sys, Explain::off);
    BatchPoint p;
    p.batch = b;
    p.ttft_s = st.ttft.raw();
    p.itl_s = st.iteration.raw();
    p.itl_decode_only_s = st.itl_decode_only.raw();
    p.output_tokens_per_s = st.output_tokens_per_s;
    p.fits = b <= max_concurrency;
    out.push_back(p);
  }
  return out;
}

std::vector<ContextPoint> context_study(const wl::TransformerArch& arch, const model::ParameterCounts& params,
                                        const hw::GpuSpec& gpu, const model::ServingMemoryPlan& memory) {
  std::vector<ContextPoint> out;
  const std::int64_t max_ctx = arch.max_position > 0 ? arch.max_position : 131072;
  for (std::int64_t c = 1024; c <= max_ctx; c *= 2) {
    auto plan = memory;
    plan.context = c;
    const auto mc = model::serving_memory(arch, params, gpu, plan, Explain::off);
    ContextPoint p;
    p.context = c;
    p.kv_per_sequence_bytes = mc.kv_bytes_per_sequence.raw();
    p.kv_per_sequence_per_gpu_bytes = mc.kv_bytes_per_sequence_per_gpu.raw();
    p.max_concurrency = mc.max_concurrency;
    out.push_back(p);
  }
  return out;
}

std::vector<CapacityPoint> capacity_study(const ResolvedServing& rs, double rate) {
  std::vector<CapacityPoint> out;
  for (int k = -6; k <= 6; ++k) {
    ResolvedServing at = rs;
    at.rate = rate * std::pow(2.0, k);
    const auto pr = model::plan_serving(at.arch, at.params, at.perf, at.traffic(), at.sla, at.sys, at.plan_options(),
                                        Explain::off);
    if (!pr.best) continue;
    const auto& b = *pr.best;
    CapacityPoint c;
    c.rate = *at.rate;
    c.meets_sla = pr.feasible;
    c.tp = b.tp;
    c.pp = b.pp;
    c.batch = b.batch;
    c.replicas = b.replicas;
    c.gpus = b.gpus;
    c.ttft_s = b.ttft.raw();
    c.itl_s = b.itl.raw();
    c.cost_per_mtok_usd = b.cost_per_mtok_usd;
    out.push_back(c);
  }
  return out;
}

}  // namespace gpuplan::app
