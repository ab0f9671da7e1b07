#include "simulation_job.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/model/sim_kv.hpp"
#include "gpuplan/app/resolve.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"

namespace gpuplan::gui {
namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

model::ArrivalSpec arrival_spec(const SimulationRequest& req) {
  model::ArrivalSpec a;
  a.kind = req.gamma ? model::ArrivalSpec::Kind::gamma : model::ArrivalSpec::Kind::poisson;
  a.rate_per_s = req.rate;
  a.cv = req.gamma ? req.cv : 1.0;
  a.count = req.requests;
  a.input.kind = a.output.kind = model::LengthSampler::Kind::fixed;
  a.input.a = a.input.b = double(req.serving.prompt_tokens);
  a.output.a = a.output.b = double(req.serving.output_tokens);
  a.seed = req.seed;
  return a;
}

SimulationResult evaluate_simulation(const AppData& data, const SimulationRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  SimulationResult out;
  out.request = req;
  // The page's own controls, checked as `gpuplan simulate` checks its flags (the widgets' ranges keep them inside),
  // each named by its label in simulate's field table.
  auto at = [](const char* key) { return wl_io::key_label(wl_io::simulate_fields(), key); };
  if (!(req.rate > 0 && req.rate < 1e9))
    out.diags.error("", "Rate", fmt::format("{} is not a rate in (0, 10⁹) requests/s", req.rate));
  if (req.gamma && !(req.cv > 0 && req.cv <= 100))
    out.diags.error("", at("cv"), fmt::format("{} is not a coefficient of variation in (0, 100]", req.cv));
  if (req.requests < 1 || req.requests > kMaxSimulatedRequests)
    out.diags.error("", at("requests"),
                    fmt::format("{} is not a request count in [1, {}]", req.requests, kMaxSimulatedRequests));
  if (req.static_batch < 1 || req.static_batch > 1'000'000)
    out.diags.error("", at("static_batch"), fmt::format("{} is not a batch size in [1, 10⁶] requests", req.static_batch));
  if (!(req.static_timeout_s >= 0 && req.static_timeout_s < 1e9))
    out.diags.error("", at("batch_timeout_s"),
                    fmt::format("{} is not a timeout in [0, 10⁹) seconds", req.static_timeout_s));
  if (out.diags.has_errors()) return out;

  const ServingRequest& s = req.serving;
  const auto sc = serving_scenario(s, out.diags);
  if (!sc) return out;
  auto where = [](const std::string& k) {
    return k == "gpu" ? std::string("GPU") : k == "tp" ? std::string("TP") : k == "model" ? std::string("Model") : k;
  };
  auto r = app::resolve_serving(*sc, data.data_dir, !s.calibration, data.db, data.library, where, out.diags);
  if (!r) return out;
  model::ServingPerfPlan perf = r->perf;
  const hw::GpuSpec& gpu = *r->sys.gpu;
  out.model_name = r->arch.name.empty() ? r->arch.id : r->arch.name;
  out.gpu_name = gpu.info.name.empty() ? gpu.info.id : gpu.info.name;
  out.max_batched_tokens = perf.max_batched_tokens;
  out.max_seqs = perf.max_batch;

  const auto t1 = std::chrono::steady_clock::now();
  const auto requests = model::generate_requests(arrival_spec(req));
  const model::SimKvPool pool = model::sim_kv_pool(r->arch, r->params, gpu, r->memory, perf, requests);
  if (!pool.fits) {
    out.diags.error("", "TP", fmt::format("{} does not fit on TP {} of {}: no KV block is left for requests",
                                          r->arch.id, perf.tp, gpu.info.id));
    return out;
  }
  out.block_size = pool.block_size;
  out.kv_blocks = pool.blocks;
  perf.kv_block_tokens = pool.block_size;  // prefix-cache hits in the engine's blocks, as `gpuplan simulate`
  model::SimOptions opt;
  opt.block_size = pool.block_size;
  opt.kv_blocks = pool.blocks;
  opt.keep_samples = true;
  const double span = double(req.requests) / req.rate;
  opt.series_interval_s = span / double(std::max(1, req.series_points));
  out.series_interval_s = opt.series_interval_s;
  opt.static_batch = req.static_batch;
  opt.static_timeout_s = req.static_timeout_s;
  opt.batching = req.batching;
  out.sim = model::simulate_serving(r->arch, perf, r->sys, requests, opt);
  opt.batching = req.batching == model::Batching::static_ ? model::Batching::continuous : model::Batching::static_;
  opt.keep_samples = false;
  opt.series_interval_s = 0;
  out.other = model::simulate_serving(r->arch, perf, r->sys, requests, opt);
  out.simulate_ms = ms_since(t1);
  out.valid = true;
  out.total_ms = ms_since(t0);
  return out;
}

}  // namespace gpuplan::gui
