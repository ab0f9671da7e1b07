// `gpuplan validate`: the published inference cases (data/validation/inference_cases.json) and the whole-host runs'
// serving cases through the serving model (validate.hpp validate_inference).
#include "validate.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "gpuplan/calibrate/calibration.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw/lookup.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/roofline.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "common.hpp"  // the application layer's names (resolution, drills, tables) unqualified
#include "gpuplan/app/drills.hpp"
#include "gpuplan/app/resolve.hpp"

namespace gpuplan::cli {

namespace {
using detail::shown_path;
}  // namespace

Result<ValidationSummary> validate_inference(const std::string& cases_file, const hw::HardwareDb& db,
                                             const wl_io::ModelLibrary& lib,
                                             std::vector<std::pair<std::string, ValidationSummary>>* by_source,
                                             const std::string& data_dir) {
  namespace u = units;
  Diagnostics diags;
  auto text = json_io::read_text_file(cases_file, diags);
  if (!text) return Result<ValidationSummary>(std::move(diags));
  auto j = json_io::parse(*text, cases_file, diags);
  if (!j) return Result<ValidationSummary>(std::move(diags));
  const std::string shown = shown_path(cases_file);
  if (!j->is_object() || !j->contains("cases") || !(*j)["cases"].is_array()) {
    diags.error(shown, "/cases", "expected an object with a 'cases' array");
    return Result<ValidationSummary>(std::move(diags));
  }
  ValidationSummary sum;
  for (std::size_t i = 0; i < (*j)["cases"].size(); ++i) {
    const auto& c = (*j)["cases"][i];
    const std::string ptr = fmt::format("/cases/{}", i);
    CaseResult r;
    r.id = c.value("id", std::string{});
    r.dev_case = c.value("dev_case", r.id);
    r.source = c.value("source", std::string{});
    r.model = c.value("model", std::string{});
    r.gpu = c.value("gpu", std::string{});
    r.metric = c.value("metric", std::string{});
    const int tp = c.value("tp", 1), pp = c.value("pp", 1), dp = c.value("attention_dp", 1);
    // Attention-DP with wide EP (wide_ep.hpp): EP = dp·tp unless the case says otherwise.
    const int ep = c.value("ep", dp > 1 ? dp * tp : 1);
    const std::string wdt = c.value("weights", std::string("bf16")), kvdt = c.value("kv", std::string("bf16")),
                      cdt = c.value("compute", std::string("bf16"));
    r.layout = fmt::format("{}TP{}{} PP{} w:{} kv:{} {}", dp > 1 ? fmt::format("DP{} ", dp) : "", tp,
                           ep > 1 ? fmt::format(" EP{}", ep) : "", pp, wdt, kvdt, c.value("engine", std::string{}));
    const auto& in = c.contains("inputs") ? c["inputs"] : json_io::Json::object();
    r.measured = c.contains("measured") ? c["measured"].value("value", 0.0) : 0.0;
    r.unit = r.metric.find("_per_s") != std::string::npos ? "tokens/s" : "s";
    r.note = c.value("notes", std::string{});
    if (!c.value("runnable", false)) {
      r.status = "not runnable";
      r.note = c.value("excluded_reason", std::string{});
      sum.cases.push_back(r);
      continue;
    }
    const auto* m = lib.find(r.model);
    const hw::GpuSpec* gpu = db.find_gpu(r.gpu);
    const auto wd = model::parse_store_dtype(wdt), kd = model::parse_store_dtype(kvdt);
    const auto cp = hw::parse_precision(cdt);
    if (m == nullptr) diags.error(shown, ptr + "/model", fmt::format("unknown model '{}'", r.model));
    if (gpu == nullptr) diags.error(shown, ptr + "/gpu", fmt::format("unknown GPU '{}'", r.gpu));
    if (!wd) diags.error(shown, ptr + "/weights", fmt::format("unknown weight dtype '{}'", wdt));
    if (!kd) diags.error(shown, ptr + "/kv", fmt::format("unknown KV dtype '{}'", kvdt));
    if (!cp) diags.error(shown, ptr + "/compute", fmt::format("unknown precision '{}'", cdt));
    // Expert parallelism as the serving model has it: the experts spread over `ep` of the TP ranks (ep divides tp).
    // With attention-DP (wide EP) the experts spread over all dp·tp GPUs.
    const bool ep_ok = ep >= 1 && tp >= 1 && dp >= 1 && (dp > 1 ? ep == dp * tp : tp % ep == 0) &&
                       ((ep == 1 && dp == 1) || (m != nullptr && m->arch.moe.has_value()));
    if (!ep_ok)
      diags.error(shown, ptr + "/ep",
                  fmt::format("ep {} with tp {} and attention_dp {}: ep must divide tp (or be attention_dp × tp), and "
                              "ep > 1 needs an MoE model",
                              ep, tp, dp));
    if (m == nullptr || gpu == nullptr || !wd || !kd || !cp || !ep_ok) continue;
    model::ServingSystem sys;
    sys.db = &db;
    sys.gpu = gpu;
    sys.node = hw::first_node_of(db, gpu->info.id);
    r.regime = {"serve", model::generation_of(gpu->family), m->arch.moe.has_value() ? "moe" : "dense",
                model::scale_bucket(std::int64_t(tp) * pp * dp, sys.node ? sys.node->gpus : 1)};
    model::ServingPerfPlan plan;
    plan.tp = tp;
    plan.pp = pp;
    plan.ep = dp > 1 ? 1 : ep;
    plan.attention_dp = dp;
    plan.weights = model::default_weight_quant(*wd);
    plan.kv = model::default_kv_quant(*kd);
    plan.compute = *cp;
    plan.max_batched_tokens = 0;  // profiles and static batches: whole prompts
    const std::string style = c.value("kernels", std::string("fused"));
    if (style != "fused" && style != "eager")
      diags.error(shown, ptr + "/kernels", fmt::format("'{}' is not one of fused, eager", style));
    plan.kernels = style == "eager" ? wl::KernelStyle::eager : wl::KernelStyle::fused;
    plan.cuda_graphs = c.value("cuda_graphs", true);
    // "cudnn": cuDNN's fused attention, what PyTorch 2.11's SDPA dispatches on Hopper when no backend is forced
    // (decode_attn_probe.py, session 32: decode and causal prefill both ran cudnn_generated_fort_native_sdpa_*). It is
    // the Hopper-native class of wl::AttentionKernel (fa3: FlashAttention-3 or cuDNN): its decode packs the query group
    // of a KV head in small tiles, where FA2's swapped-GQA layout pads it to 64/128 rows.
    const std::string attn = c.value("attention_kernel", std::string("fa3"));
    if (attn != "fa2" && attn != "fa3" && attn != "cudnn")
      diags.error(shown, ptr + "/attention_kernel", fmt::format("'{}' is not one of fa2, fa3, cudnn", attn));
    plan.attention = attn == "fa2" ? wl::AttentionKernel::fa2 : wl::AttentionKernel::fa3;
    // The MoE dispatcher the run used (SGLang --moe-a2a-backend, --deepep-mode, --enable-two-batch-overlap).
    const std::string a2a = c.value("moe_a2a_backend", std::string("nccl")), mode = c.value("deepep_mode", std::string("auto"));
    if (a2a != "nccl" && a2a != "deepep")
      diags.error(shown, ptr + "/moe_a2a_backend", fmt::format("'{}' is not one of nccl, deepep", a2a));
    if (mode != "auto" && mode != "normal" && mode != "low_latency")
      diags.error(shown, ptr + "/deepep_mode", fmt::format("'{}' is not one of auto, normal, low_latency", mode));
    plan.moe_a2a = a2a == "deepep" ? model::MoeA2aBackend::deepep : model::MoeA2aBackend::nccl;
    plan.deepep_mode = mode == "normal"        ? model::DeepEpMode::normal
                       : mode == "low_latency" ? model::DeepEpMode::low_latency
                                               : model::DeepEpMode::automatic;
    plan.two_batch_overlap = c.value("two_batch_overlap", false);
    const auto& a = m->arch;
    auto in_i = [&](const char* k) -> std::int64_t {
      if (!in.contains(k) || !in[k].is_number()) {
        diags.error(shown, fmt::format("{}/inputs/{}", ptr, k), fmt::format("metric {} needs a number here", r.metric));
        return 1;
      }
      return in[k].get<std::int64_t>();
    };
    // The metric for one system and plan (the built-in defaults, then the calibration profile).
    auto predict = [&](model::ServingPerfPlan pl, const model::ServingSystem& sy) -> std::optional<double> {
      std::optional<double> p;
      if (r.metric == "prefill_time_s") {
        p = model::prefill_time(a, pl, in_i("batch"), in_i("prompt_tokens"), sy).raw();
      } else if (r.metric == "decode_step_time_s") {
        p = model::decode_step_time(a, pl, in_i("batch"), in_i("context_tokens"), sy).raw();
      } else if (r.metric == "request_latency_s") {
        // A static batch: one prefill (emits the first token), then output − 1 decode steps over a growing context.
        const std::int64_t b = in_i("batch"), s = in_i("prompt_tokens"), o = in_i("output_tokens");
        p = (model::prefill_time(a, pl, b, s, sy) +
             model::decode_step_time(a, pl, b, s + o / 2, sy) * double(std::max<std::int64_t>(0, o - 1)))
                .raw();
      } else if (r.metric == "offline_output_tokens_per_s") {
        // Offline max throughput: continuous batching at the largest batch the KV cache holds (each request reserves
        // its whole isl + osl, TensorRT-LLM's default GUARANTEED_NO_EVICT), capped by the engine's max batch.
        const std::int64_t isl = in_i("input_tokens"), osl = in_i("output_tokens");
        model::ServingMemoryPlan mp;
        mp.tp = tp;
        mp.pp = pp;
        mp.expert_dp = dp;
        mp.context = isl + osl;
        mp.kv = pl.kv;
        mp.weights = pl.weights;
        mp.engine = model::MemoryEngine::sglang;
        mp.memory_fraction = in.contains("kv_memory_fraction") && in["kv_memory_fraction"].is_number()
                                 ? in["kv_memory_fraction"].get<double>()
                                 : 0.9;
        const auto mem = model::serving_memory(a, model::parameter_counts(a, Explain::off), *gpu, mp, Explain::off);
        std::int64_t cap = mem.max_concurrency;
        if (in.contains("max_batch") && in["max_batch"].is_number()) cap = std::min(cap, in["max_batch"].get<std::int64_t>());
        pl.max_batched_tokens = 8192;
        pl.max_batch = cap;
        // The engine fills its batch up to what the KV cache holds (in-flight batching never holds sequences back
        // to run faster); an 8192-token budget per iteration.
        if (cap >= 1) p = model::steady_state(a, pl, cap, isl, osl, sy, Explain::off).output_tokens_per_s;
        else r.status = "infeasible";
        r.layout += fmt::format(" B={}", cap);
      }
      return p;
    };
    if (r.metric != "prefill_time_s" && r.metric != "decode_step_time_s" && r.metric != "request_latency_s" &&
        r.metric != "offline_output_tokens_per_s") {
      diags.error(shown, ptr + "/metric", fmt::format("unknown metric '{}'", r.metric));
      continue;
    }
    const std::string layout_before = r.layout;
    if (auto p = predict(plan, sys)) {
      r.predicted = *p;
      r.error = r.measured != 0 ? *p / r.measured - 1.0 : 0.0;
      r.status = "ok";
      model::ServingSystem cal = sys;
      Diagnostics ignore;
      if (!data_dir.empty() && load_calibration(data_dir, cal, false, ignore) && cal.efficiency) {
        model::ServingPerfPlan calibrated_plan = plan;
        model::use_measured_overheads(calibrated_plan, *cal.efficiency);
        r.layout = layout_before;  // the offline metric appends its batch once
        if (auto pc = predict(calibrated_plan, cal)) {
          r.predicted_calibrated = *pc;
          r.error_calibrated = r.measured != 0 ? *pc / r.measured - 1.0 : 0.0;
        }
      }
    }
    sum.cases.push_back(r);
  }
  summarise_validation(sum);
  if (by_source != nullptr) {
    for (const auto& c : sum.cases) {
      auto it = std::find_if(by_source->begin(), by_source->end(), [&](const auto& p) { return p.first == c.source; });
      if (it == by_source->end()) {
        by_source->emplace_back(c.source, ValidationSummary{});
        it = std::prev(by_source->end());
      }
      it->second.cases.push_back(c);
    }
    for (auto& [k, v] : *by_source) summarise_validation(v);
  }
  if (diags.has_errors()) return Result<ValidationSummary>(std::move(diags));
  return Result<ValidationSummary>(std::move(sum), std::move(diags));
}

}  // namespace gpuplan::cli
