#include "serving_job.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/model/serving_timeline.hpp"
#include "gpuplan/app/resolve.hpp"
#include "gpuplan/app/studies.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"

namespace gpuplan::gui {

std::optional<wl_io::ServingScenario> serving_scenario(const ServingRequest& req, Diagnostics& diags) {
  wl_io::ServingScenario sc;
  sc.model = req.model;
  sc.gpu = req.gpu;
  sc.tp = req.tp;
  for (auto [key, text, into] : {std::tuple{"weight_dtype", &req.weight_dtype, &sc.weight_dtype},
                                 std::tuple{"kv_dtype", &req.kv_dtype, &sc.kv_dtype}}) {
    *into = model::parse_store_dtype(*text);
    if (!*into)
      diags.error("", wl_io::serving_key_label(key),
                  fmt::format("'{}' is not one of fp32, bf16, fp16, fp8, int8, int4, fp4", *text));
  }
  sc.input_tokens = req.prompt_tokens;
  sc.output_tokens = req.output_tokens;
  if (diags.has_errors()) return std::nullopt;
  return sc;
}

ServingResult evaluate_serving(const AppData& data, const ServingRequest& req) {
  ServingResult out;
  out.tp = req.tp;
  out.prompt_tokens = req.prompt_tokens;
  out.output_tokens = req.output_tokens;
  out.batch = req.batch;
  // The same resolution as `gpuplan serve` (app::resolve_serving): model, hardware, calibration, memory plan,
  // precision and per-kernel overheads.
  auto given = serving_scenario(req, out.diags);
  if (!given) return out;
  wl_io::ServingScenario& sc = *given;
  sc.batch = req.batch;
  if (req.capacity) {
    sc.rate = req.rate;
    if (req.ttft_ms > 0) sc.ttft_ms = req.ttft_ms;
    if (req.itl_ms > 0) sc.itl_ms = req.itl_ms;
    // The planner's question as `gpuplan serve --scenario` reads it (TP left to the planner, as here).
    out.scenario = {{"model", req.model}, {"gpu", req.gpu}, {"weight_dtype", req.weight_dtype}, {"kv_dtype", req.kv_dtype},
                    {"input_tokens", req.prompt_tokens}, {"output_tokens", req.output_tokens}, {"rate", req.rate}};
    if (req.ttft_ms > 0) out.scenario["ttft_ms"] = req.ttft_ms;
    if (req.itl_ms > 0) out.scenario["itl_ms"] = req.itl_ms;
  }
  auto where = [](const std::string& k) {
    return k == "gpu" ? std::string("GPU") : k == "tp" ? std::string("TP") : k == "model" ? std::string("Model")
           : k == "rate" ? std::string("Rate") : k == "ttft_ms" ? std::string("SLA TTFT") : k == "itl_ms" ? std::string("SLA ITL") : k;
  };
  auto r = app::resolve_serving(sc, data.data_dir, !req.calibration, data.db, data.library, where, out.diags);
  if (!r) return out;
  const auto& arch = r->arch;
  const auto& sys = r->sys;
  const auto& perf = r->perf;
  const auto& params = r->params;
  const hw::GpuSpec& gpu = *sys.gpu;
  out.model_name = arch.name.empty() ? arch.id : arch.name;
  out.gpu_name = gpu.info.name.empty() ? gpu.info.id : gpu.info.name;
  auto memplan = r->memory;
  memplan.tp = req.tp;
  memplan.pp = 1;
  memplan.context = req.prompt_tokens + req.output_tokens;
  memplan.concurrency = 1;

  // Memory at prompt + output.
  const auto mem = model::serving_memory(arch, params, gpu, memplan, Explain::on);
  out.memory_ok = mem.ok;
  out.reasons = mem.reasons;
  out.notes = mem.notes;
  out.kv_bytes_per_token = mem.kv_bytes_per_token.raw();
  out.weights_total_bytes = mem.weights_total.raw();
  out.max_concurrency = mem.max_concurrency;
  if (!mem.stages.empty()) {
    const auto& st = mem.stages[static_cast<std::size_t>(std::clamp(mem.binding_stage, 0, int(mem.stages.size()) - 1))];
    out.weights_per_gpu_bytes = st.weights.raw();
    out.kv_pool_per_gpu_bytes = st.kv_pool.raw();
    out.capacity_per_gpu_bytes = st.capacity.raw();
  }
  if (req.tp > 1 && sys.node == nullptr)
    out.diags.error("", "TP", fmt::format("{} has no node in the data: TP {} needs a scale-up fabric", gpu.info.id, req.tp));
  if (out.diags.has_errors()) return out;
  out.valid = true;

  // TTFT and ITL vs batch under continuous batching (steady_state: prefill chunks piggyback on decode iterations),
  // and the KV cache vs context up to the model's maximum position.
  out.batches = app::batch_study(arch, perf, sys, req.prompt_tokens, req.output_tokens, mem.max_concurrency);
  out.contexts = app::context_study(arch, params, gpu, memplan);
  // The operating point.
  const std::int64_t batch = std::max<std::int64_t>(1, req.batch);
  const auto ss = model::steady_state(arch, perf, batch, req.prompt_tokens, req.output_tokens, sys, Explain::on);
  out.ttft_s = ss.ttft.raw();
  out.itl_s = ss.iteration.raw();
  out.output_tokens_per_s = ss.output_tokens_per_s;
  out.requests_per_s = ss.requests_per_s;
  if (!ss.derivation.empty()) out.derivations.push_back(ss.derivation);
  if (!mem.derivation.empty()) out.derivations.push_back(mem.derivation);

  // The iteration timelines (`gpuplan serve --timeline`, --timeline-pass decode / prefill).
  out.decode_timeline = model::serving_timeline(
      arch, perf, model::ForwardBatch{double(batch), 1, req.prompt_tokens + req.output_tokens / 2, 0, 0, 0, true}, sys);
  out.prefill_timeline = model::serving_timeline(arch, perf, model::prompt_pass(perf, req.prompt_tokens), sys);
  // The compression choices (`gpuplan compress` with its default set), priced on the same replica.
  {
    std::vector<model::CompressionChoice> choices;
    for (const auto& v : model::default_compression_variants(arch)) {
      auto p = model::parse_compression(v);
      if (!p.choice) continue;
      const auto d = model::derive_architecture(arch, *p.choice, nullptr);
      if (!d.error.empty()) out.compression_refused.push_back(p.choice->label + ": " + d.error);
      else choices.push_back(std::move(*p.choice));
    }
    auto cmem = r->memory;
    cmem.tp = req.tp;
    out.compression = model::compression_study(arch, perf, cmem, sys, choices,
                                               std::vector<const wl::TransformerArch*>(choices.size(), nullptr), batch,
                                               req.prompt_tokens, req.output_tokens, Explain::off);
  }

  // The capacity planner, as `gpuplan serve --rate R` without --tp: the planner chooses TP and the batch.
  if (req.capacity && r->rate) {
    app::ResolvedServing rs = *r;
    rs.tp_given = false;
    out.rate = *rs.rate;
    // Rates from 1/64 to 64 × the operating rate (factors of 2) and the operating rate itself.
    out.capacity = app::capacity_study(rs, out.rate);
    auto plan = model::plan_serving(arch, params, rs.perf, rs.traffic(), rs.sla, rs.sys, rs.plan_options(), Explain::on);
    if (!plan.derivation.empty()) out.derivations.push_back(plan.derivation);  // id "serving.plan"
    out.plan = std::move(plan);
    out.planner = std::move(rs);
  }
  return out;
}

}  // namespace gpuplan::gui
