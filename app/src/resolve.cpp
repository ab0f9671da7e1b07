#include "gpuplan/app/resolve.hpp"
#include "gpuplan/app/input_pipeline.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "gpuplan/calibrate/calibration.hpp"
#include "gpuplan/app/output.hpp"
#include "gpuplan/app/serving_flags.hpp"

namespace gpuplan::app {

std::optional<ResolvedTraining> resolve_training(wl_io::TrainingScenario s, bool global_batch_given,
                                                 const hw::HardwareDb& db, const wl_io::ModelLibrary& lib,
                                                 const std::function<std::string(const std::string&)>& where,
                                                 Diagnostics& diags) {
  if (s.model.empty()) diags.error("", where("model"), "no model given (a library id such as llama-3.1-70b, or a config.json)");
  if (s.gpu.empty() && s.node.empty() && s.cluster.empty()) diags.error("", where("gpu"), "no GPU, node or cluster given");
  if (diags.has_errors()) return std::nullopt;
  auto m = wl_io::resolve_model(lib, s.model);
  if (!m.ok()) {
    for (auto d : m.diagnostics().items()) {
      if (d.pointer == "MODEL") d.pointer = where("model");
      diags.add(d);
    }
    return std::nullopt;
  }
  ResolvedTraining r;
  r.arch = m->arch;
  if (!resolve_hardware(s.gpu, s.node, s.cluster, db, where, diags, r.sys)) return std::nullopt;
  if (s.price_usd_per_hour) r.sys.price = units::usd_per_hour(*s.price_usd_per_hour);

  auto& par = s.plan.par;
  const long long per_replica = static_cast<long long>(par.tp) * par.pp * par.cp;
  if (s.gpus && !s.dp_given) {
    if (*s.gpus % per_replica != 0)
      r.pre.fail(fmt::format("{} GPUs are not divisible by TP × PP × CP = {}", *s.gpus, per_replica));
    else
      par.dp = static_cast<int>(*s.gpus / per_replica);
  } else if (s.gpus && s.dp_given && *s.gpus != per_replica * par.dp) {
    r.pre.fail(fmt::format("{} GPUs ≠ TP × PP × DP × CP = {}", *s.gpus, per_replica * par.dp));
  }
  if (!global_batch_given) s.plan.global_batch = s.plan.micro_batch * par.dp;
  r.plan = s.plan;
  if (!r.pre.ok) {
    // Report every other problem of the layout too, not just the GPU count.
    const auto rest = model::check_training_layout(r.arch, r.plan, r.sys);
    for (const auto& reason : rest.reasons)
      if (reason.find("global batch") == std::string::npos) r.pre.fail(reason);
  }
  return r;
}

model::SearchSpace fixed_search_space(const std::function<bool(const std::string&)>& given, const wl::TrainingPlan& base,
                                      const wl::TransformerArch& arch, std::vector<long long> gpus) {
  model::SearchSpace space;
  space.gpus = std::move(gpus);
  if (given("tp")) space.tp = {base.par.tp};
  if (given("pp")) space.pp = {base.par.pp};
  if (given("dp")) space.dp = {base.par.dp};
  if (given("cp")) space.cp = {base.par.cp};
  if (given("ep")) space.ep = {base.par.ep};
  if (given("virtual_stages")) space.virtual_stages = {base.par.virtual_stages};
  if (given("schedule")) {
    space.dualpipe = {base.schedule == wl::PipelineSchedule::dualpipe};
    if (base.schedule != wl::PipelineSchedule::interleaved) space.virtual_stages = {1};
    else if (space.virtual_stages.empty())
      for (int v = 2; v <= arch.layers && v <= 1024; ++v) space.virtual_stages.push_back(v);
  }
  if (given("micro_batch")) space.micro_batch = {base.micro_batch};
  if (given("sequence_parallel")) space.sequence_parallel = {base.par.sequence_parallel};
  if (given("recompute")) space.recompute = {base.recompute};
  if (given("zero")) space.zero = {base.zero};
  if (given("offload")) space.offload = {base.offload};
  return space;
}

/// The highest request rate the planner sizes a deployment for (requests/s).
constexpr double kMaxRate = 1e9;

model::Traffic ResolvedServing::traffic() const {
  model::Traffic t{rate.value_or(0.0), input_tokens, output_tokens, input_dist, output_dist};
  if (concurrency) {
    t.concurrency = *concurrency;
    t.think_time = units::seconds(think_time_s);
  }
  return t;
}

model::ServingPlanOptions ResolvedServing::plan_options() const {
  model::ServingPlanOptions opt;
  opt.memory = memory;
  if (tp_given) opt.tp_options = {perf.tp};
  if (pp_given) opt.pp_options = {perf.pp};
  opt.disaggregated = disaggregated;
  if (prefill_sys) opt.prefill_system = &*prefill_sys;
  if (decode_sys) opt.decode_system = &*decode_sys;
  opt.prefill_attention_dp = prefill_attention_dp;
  opt.decode_attention_dp = decode_attention_dp;
  return opt;
}

namespace {

/// The MoE dispatcher keys (moe_a2a_backend, deepep_mode, two_batch_overlap) onto the perf plan, after its EP is set.
void resolve_moe_dispatcher(const wl_io::ServingScenario& s, const wl::TransformerArch& arch,
                            model::ServingPerfPlan& perf, const std::function<std::string(const std::string&)>& where,
                            Diagnostics& diags) {
  const bool ep = model::serving_ep(perf) > 1;
  for (const auto& [given, key] : {std::pair{s.moe_a2a_backend.has_value(), "moe_a2a_backend"},
                                   std::pair{s.deepep_mode.has_value(), "deepep_mode"},
                                   std::pair{s.two_batch_overlap.value_or(false), "two_batch_overlap"}}) {
    if (!given) continue;
    if (!arch.moe) diags.error("", where(key), "needs a mixture-of-experts model");
    else if (!ep)
      diags.error("", where(key), "needs expert parallelism across GPUs (--ep > 1, or --attention-dp > 1 for wide EP)");
  }
  // The decoder has checked that a DeepEP mode comes with the DeepEP backend.
  if (s.moe_a2a_backend) perf.moe_a2a = *s.moe_a2a_backend;
  if (s.deepep_mode) perf.deepep_mode = *s.deepep_mode;
  perf.two_batch_overlap = s.two_batch_overlap.value_or(false);
}

}  // namespace

std::optional<ResolvedServing> resolve_serving(const wl_io::ServingScenario& s, const std::string& data_dir,
                                               bool no_calibration, const hw::HardwareDb& db,
                                               const wl_io::ModelLibrary& lib,
                                               const std::function<std::string(const std::string&)>& where,
                                               Diagnostics& diags) {
  namespace u = gpuplan::units;
  if (s.model.empty()) {
    diags.error("", where("model"), "no model given (a library id such as llama-3.1-70b, or a config.json)");
    return std::nullopt;
  }
  auto m = wl_io::resolve_model(lib, s.model);
  if (!m.ok()) {
    for (auto d : m.diagnostics().items()) {
      if (d.pointer == "MODEL") d.pointer = where("model");
      diags.add(d);
    }
    return std::nullopt;
  }
  ResolvedServing r;
  r.arch = m->arch;
  const auto& arch = r.arch;
  auto& sys = r.sys;
  const std::string gpu_name = s.gpu.empty() && s.node.empty() && s.cluster.empty() ? "h100-sxm5-80gb" : s.gpu;
  if (!resolve_hardware(gpu_name, s.node, s.cluster, db, where, diags, sys)) return std::nullopt;
  if (!load_calibration(data_dir, sys, no_calibration, diags)) return std::nullopt;
  const hw::GpuSpec& gpu = *sys.gpu;
  if (s.price_usd_per_hour) {
    if (!(*s.price_usd_per_hour >= 0))
      diags.error("", where("price_usd_per_hour"),
                  fmt::format("{} is not a price in $/GPU-hour", plain_number(*s.price_usd_per_hour)));
    sys.price = u::usd_per_hour(*s.price_usd_per_hour);
  }
  ServingFlags f;
  set_memory_keys(s, f);
  f.gpu = gpu.info.id;
  // The request's lengths first: the memory plan checks the shared prefix against them. One replica runs at the mean
  // lengths (the planner uses the distributions whole).
  r.input_dist = s.input_dist;
  r.output_dist = s.output_dist;
  r.input_tokens = r.input_dist ? std::max<std::int64_t>(1, std::llround(r.input_dist->mean())) : s.input_tokens.value_or(1024);
  r.output_tokens = r.output_dist ? std::max<std::int64_t>(1, std::llround(r.output_dist->mean())) : s.output_tokens.value_or(256);
  // A multimodal request (issue #23): its images' tokens join the prompt; the tower's time is the perf plan's.
  if (const long long images = s.images_per_request.value_or(0); images > 0) {
    if (r.input_dist) {
      diags.error("", where("images_per_request"),
                  "images with a prompt-length distribution (input_dist) are not modelled: give --input-tokens");
    } else if (!arch.vision) {
      diags.error("", where("images_per_request"),
                  fmt::format("{}: the model has no vision tower gpuplan reads (SigLIP of Gemma 3, CLIP of LLaVA, "
                              "Llama 4's, Qwen2.5-VL's from a config.json)",
                              images));
    } else {
      const std::int64_t image_tokens = images * arch.vision->tokens_per_image();
      diags.note("", where("images_per_request"),
                 fmt::format("{} image{} of {} tokens each ({}) add {} tokens to the {}-token prompt", images,
                             images == 1 ? "" : "s", arch.vision->tokens_per_image(), arch.vision->resolution_origin,
                             image_tokens, r.input_tokens));
      r.input_tokens += image_tokens;
      r.perf.images_per_request = images;
    }
  }
  // A shared prefix is part of every prompt. (make_memory_plan's own check is against `context`, which serving sets
  // per layout to prompt + output; its default of 4096 tokens, `gpuplan kv`'s, must not apply here.)
  f.context = std::max<long long>(r.input_tokens + r.output_tokens, f.prefix_tokens);  // the prefix: checked here
  if (f.prefix_tokens > r.input_tokens)
    diags.error("", where("prefix_tokens"),
                fmt::format("a shared prefix of {} tokens is longer than the prompt of {} tokens{}", f.prefix_tokens,
                            r.input_tokens, r.input_dist ? " (the mean of input_dist)" : ""));
  auto memplan = make_memory_plan(f, db, gpu, diags, where);
  auto& perf = r.perf;
  if (memplan) {
    r.memory = *memplan;
    perf.weights = memplan->weights;
    perf.kv = memplan->kv;
    perf.max_batched_tokens = memplan->max_num_batched_tokens;
    perf.max_batch = memplan->max_num_seqs;
    // The shared prefix's full blocks stay in the prefix cache (as the memory model stores them once): its prefill
    // is computed once, not per prompt.
    const std::int64_t block = std::max<std::int64_t>(1, memplan->block_size);
    perf.cached_prefix_tokens = memplan->prefix_tokens / block * block;
  }
  perf.tp = f.tp;
  perf.pp = f.pp;
  perf.cuda_graphs = !f.enforce_eager;
  if (sys.efficiency) model::use_measured_overheads(perf, *sys.efficiency);
  const model::StoreDtype wd = f.weight_dtype;
  const std::string_view wd_name = model::to_string(wd);
  const bool gpu_fp8 = gpu.peak(hw::Precision::fp8).has_value();
  const bool gpu_fp4 = gpu.peak(hw::Precision::fp4).has_value();
  if (s.compute) {
    perf.compute = *s.compute;
    // W8A8 int8 (model/compression.hpp): int8 weights, per-token activation quantisation, int32 accumulation.
    if (perf.compute == hw::Precision::int8) {
      if (!gpu.peak(hw::Precision::int8))
        diags.error("", where("compute"), fmt::format("{} has no int8 tensor-core rate in its data", gpu.info.id));
      if (wd != model::StoreDtype::int8)
        diags.error("", where("compute"),
                    fmt::format("int8 GEMMs (W8A8) need int8 weights (--weight-dtype int8), not {}", wd_name));
      perf.activation_quant = true;
    }
    if (perf.compute == hw::Precision::fp8 && !gpu_fp8)
      diags.error("", where("compute"), fmt::format("{} has no fp8 tensor cores", gpu.info.id));
    if (perf.compute == hw::Precision::fp4 && !gpu_fp4)
      diags.error("", where("compute"), fmt::format("{} has no fp4 tensor cores", gpu.info.id));
    if (perf.compute == hw::Precision::fp8 && wd != model::StoreDtype::fp8)
      diags.error("", where("compute"), fmt::format("fp8 GEMMs need fp8 weights (--weight-dtype fp8), not {}", wd_name));
    if (perf.compute == hw::Precision::fp4 && wd != model::StoreDtype::fp4)
      diags.error("", where("compute"), fmt::format("fp4 GEMMs need fp4 weights (--weight-dtype fp4), not {}", wd_name));
  } else {
    perf.compute = (wd == model::StoreDtype::fp8 && gpu_fp8)   ? hw::Precision::fp8
                   : (wd == model::StoreDtype::fp4 && gpu_fp4) ? hw::Precision::fp4
                                                               : hw::Precision::bf16;
  }
  if (s.attention_dp) {
    // Attention-DP with wide EP (wide_ep.hpp): EP = dp·tp over the whole group, experts whole on each GPU.
    const long long dp = *s.attention_dp, ep = dp * f.tp;
    if (!arch.moe)
      diags.error("", where("attention_dp"), "attention-DP with wide EP needs a mixture-of-experts model");
    else if (arch.moe->num_experts % ep != 0)
      diags.note("", where("attention_dp"),
                 fmt::format("wide EP = attention-DP {} × TP {} = {} does not divide the {} routed experts: each GPU "
                             "is taken to hold E/EP = {:.3g} of them on average, in memory and work (engines fill whole "
                             "slots with redundant experts, e.g. DeepSeek's EPLB: 256 experts on 320 decode GPUs)",
                             dp, f.tp, ep, arch.moe->num_experts, double(arch.moe->num_experts) / double(ep)));
    if (s.ep && *s.ep != ep)
      diags.error("", where("ep"),
                  fmt::format("with attention-DP {} the experts spread over all {} × {} GPUs: EP is {}, not {}", dp,
                              dp, f.tp, ep, *s.ep));
    perf.attention_dp = static_cast<int>(dp);
    if (memplan) memplan->expert_dp = static_cast<int>(dp);
    r.memory.expert_dp = static_cast<int>(dp);
  }
  if (s.ep && !(s.attention_dp && *s.attention_dp > 1)) {
    const long long ep = *s.ep;
    if (!arch.moe) diags.error("", where("ep"), "EP needs a mixture-of-experts model");
    else if (arch.moe->num_experts % ep != 0 || f.tp % ep != 0)
      diags.error("", where("ep"), fmt::format("EP {} must divide the {} experts and TP {}", ep, arch.moe->num_experts, f.tp));
    perf.ep = static_cast<int>(ep);
  }
  if (s.moe_imbalance) {
    if (!arch.moe) diags.error("", where("moe_imbalance"), "a load imbalance needs a mixture-of-experts model");
    else if (!(*s.moe_imbalance >= 1.0)) diags.error("", where("moe_imbalance"), "must be ≥ 1 (1: uniform routing)");
    else perf.moe_imbalance = *s.moe_imbalance;
  }
  resolve_moe_dispatcher(s, arch, perf, where, diags);
  std::vector<std::string> overhead_notes;
  if (s.step_overhead_ms) {
    if (*s.step_overhead_ms < 0) diags.error("", where("step_overhead_ms"), "must be ≥ 0");
    perf.step_overhead = u::milliseconds(*s.step_overhead_ms);
    overhead_notes.push_back(fmt::format("engine step overhead {} ms (--step-overhead-ms)", plain_number(*s.step_overhead_ms)));
  }
  if (s.kernel_overhead_us) {
    if (*s.kernel_overhead_us < 0) diags.error("", where("kernel_overhead_us"), "must be ≥ 0");
    (perf.cuda_graphs ? perf.kernel_overhead_graph : perf.kernel_overhead_eager) = u::microseconds(*s.kernel_overhead_us);
    perf.kernel_cost_by_class = false;  // the given cost for every kernel, whatever its class
    overhead_notes.push_back(fmt::format("per-kernel overhead {} µs (--kernel-overhead-us)", plain_number(*s.kernel_overhead_us)));
  }
  if (s.cpu_per_kernel_us) {
    if (*s.cpu_per_kernel_us < 0) diags.error("", where("cpu_per_kernel_us"), "must be ≥ 0");
    perf.cpu_per_kernel = u::microseconds(*s.cpu_per_kernel_us);
    perf.cpu_cost_by_op = false;  // the given cost for every call, whatever the op
    overhead_notes.push_back(fmt::format("eager CPU {} µs per call (--cpu-per-kernel-us)", plain_number(*s.cpu_per_kernel_us)));
  }
  for (const auto& n : overhead_notes) perf.overhead_origin += "; " + n;
  r.percentile = s.percentile.value_or(99.0);
  if (s.ttft_ms && !(*s.ttft_ms > 0)) diags.error("", where("ttft_ms"), "must be > 0");
  if (s.itl_ms && !(*s.itl_ms > 0)) diags.error("", where("itl_ms"), "must be > 0");
  if (!(r.percentile > 0 && r.percentile < 100)) diags.error("", where("percentile"), "must be in (0, 100), e.g. 99");
  if (s.rate && !(*s.rate > 0)) diags.error("", where("rate"), "must be > 0 requests/s");
  if (s.prefix_hit_rate && !(*s.prefix_hit_rate >= 0 && *s.prefix_hit_rate < 1))
    diags.error("", where("prefix_hit_rate"),
                fmt::format("{} is not a fraction of prompt tokens in [0, 1)", plain_number(*s.prefix_hit_rate)));
  perf.prefix_hit_rate = s.prefix_hit_rate.value_or(0.0);
  if (s.rate && *s.rate > kMaxRate)
    diags.error("", where("rate"), fmt::format("{} requests/s is more than the planner sizes (at most {:g})",
                                               plain_number(*s.rate), kMaxRate));
  if (s.rate && s.concurrency)
    diags.error("", where("concurrency"), "give either a request rate (open loop) or a concurrency (closed loop), not both");
  if (s.think_time_s && !s.concurrency)
    diags.error("", where("think_time_s"), "a think time needs a concurrency (closed-loop users)");
  if (s.think_time_s && !(*s.think_time_s >= 0)) diags.error("", where("think_time_s"), "must be ≥ 0 seconds");
  if (s.spec_acceptance.has_value() != s.spec_tokens.has_value())
    diags.error("", where(s.spec_acceptance ? "spec_tokens" : "spec_acceptance"),
                "speculative decoding needs both --spec-acceptance and --spec-tokens");
  if (s.spec_acceptance && !(*s.spec_acceptance >= 0 && *s.spec_acceptance <= 1))
    diags.error("", where("spec_acceptance"), "must be a probability in [0, 1]");
  if (s.spec_acceptance && !s.draft_model && !s.draft_ms)
    diags.error("", where("draft_model"), "speculative decoding needs the draft's cost: --draft-model ID or --draft-ms");
  r.params = model::parameter_counts(arch, Explain::off);
  if (diags.has_errors() || !memplan) return std::nullopt;

  r.rate = s.rate;
  r.concurrency = s.concurrency;
  r.think_time_s = s.think_time_s.value_or(0.0);
  if (s.ttft_ms) r.sla.ttft = u::milliseconds(*s.ttft_ms);
  if (s.itl_ms) r.sla.itl = u::milliseconds(*s.itl_ms);
  r.sla.percentile = r.percentile / 100.0;
  r.batch = s.batch;
  r.tp_given = s.tp.has_value();
  r.pp_given = s.pp.has_value();
  r.disaggregated = s.disaggregated;
  // Pools on their own GPU types: each resolved as --gpu is (a node holding it, its calibration, its price).
  auto pool_system = [&](const std::optional<std::string>& name, const char* key) -> std::optional<model::ServingSystem> {
    if (!name) return std::nullopt;
    if (!s.disaggregated) {
      diags.error("", where(key), fmt::format("'{}': a pool GPU needs --disaggregated (separate prefill and decode "
                                              "pools)", *name));
      return std::nullopt;
    }
    model::ServingSystem ps;
    auto pool_where = [&](const std::string&) { return where(key); };
    if (!resolve_hardware(*name, "", "", db, pool_where, diags, ps)) return std::nullopt;
    if (!load_calibration(data_dir, ps, no_calibration, diags)) return std::nullopt;
    if (sys.cluster != nullptr && sys.cluster->node == (ps.node ? ps.node->info.id : std::string())) ps.cluster = sys.cluster;
    return ps;
  };
  r.prefill_sys = pool_system(s.prefill_gpu, "prefill_gpu");
  r.decode_sys = pool_system(s.decode_gpu, "decode_gpu");
  for (const auto& [v, key] : {std::pair{s.prefill_attention_dp, "prefill_attention_dp"},
                               std::pair{s.decode_attention_dp, "decode_attention_dp"}}) {
    if (!v) continue;
    if (!arch.moe) diags.error("", where(key), "attention-DP with wide EP needs a mixture-of-experts model");
    else if (!s.disaggregated) diags.error("", where(key), "a pool's attention-DP needs --disaggregated");
    else (std::string(key) == "prefill_attention_dp" ? r.prefill_attention_dp : r.decode_attention_dp) = int(*v);
  }
  if (diags.has_errors()) return std::nullopt;
  if (s.spec_acceptance) {
    r.speculation = model::Speculation{*s.spec_acceptance, *s.spec_tokens};
    r.draft_ms = s.draft_ms;
    if (s.draft_model) {
      auto dm = wl_io::resolve_model(lib, *s.draft_model);
      if (!dm.ok()) {
        for (auto d : dm.diagnostics().items()) {
          if (d.pointer == "MODEL") d.pointer = where("draft_model");
          diags.add(d);
        }
        return std::nullopt;
      }
      r.draft = dm->arch;
    }
  }
  return r;
}

model::TextLoader text_loader(const model::TrainingSystem& sys, std::optional<double> sample_ms, const std::string& where) {
  model::TextLoader loader;
  if (sample_ms && *sample_ms > 0) {
    loader.sample_cpu = units::Seconds(*sample_ms * 1e-3);
    loader.sample_origin = Origin::user(where);
  }
  if (sys.node != nullptr && sys.node->host_cores) {
    loader.node_cores = *sys.node->host_cores;
    loader.cores_origin = Origin::datasheet(sys.node->info.cite("/host/cores"));
  } else {
    loader.cores_origin = Origin::assumption("the node's cores are not in its data: the workers are not capped");
  }
  return loader;
}

}  // namespace gpuplan::app
