#include "gpuplan/app/report_sections.hpp"

#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/disagg_pools.hpp"
#include "gpuplan/model/wide_ep.hpp"

namespace gpuplan::app {
namespace {

namespace u = gpuplan::units;

std::string ms(u::Seconds s) { return u::format(s); }

/// The plan's uneven pipeline split in words ("" for the default split).
std::string split_text(const wl::TrainingPlan& plan) {
  const auto& sp = plan.split;
  if (!sp.layout.empty()) return fmt::format(" · layout {}", sp.layout);
  if (sp.first_last())
    return fmt::format(" · stage layers{}{}",
                       sp.first_stage_layers > 0 ? fmt::format(" first {}", sp.first_stage_layers) : "",
                       sp.last_stage_layers > 0 ? fmt::format(" last {}", sp.last_stage_layers) : "");
  if (sp.accounts())
    return fmt::format(" · {} counted as a layer",
                       sp.embedding_as_layer && sp.loss_as_layer ? "embedding and loss"
                       : sp.embedding_as_layer                   ? "embedding"
                                                                 : "loss");
  return "";
}

}  // namespace

std::string band_note(const model::Band& b) {
  return fmt::format("{}, {} cases{}", b.regime, b.cases, b.level > 0 ? " — pooled: too few in the finer regime" : "");
}

std::string layout_text(const wl::TrainingPlan& plan) {
  const auto& par = plan.par;
  return fmt::format("TP {} · PP {}{} · DP {} · CP {}{}{}", par.tp, par.pp,
                     plan.schedule == wl::PipelineSchedule::interleaved ? fmt::format(" (v={})", par.virtual_stages)
                     : plan.dualpipe()                                  ? std::string(" DualPipe")
                                                                        : std::string(),
                     par.dp, par.cp,
                     (par.ep > 1 ? fmt::format(" · EP {}", par.ep) : std::string()) +
                         (par.expert_tp() != par.tp ? fmt::format(" · ETP {} (EDP {})", par.expert_tp(), par.expert_dp())
                                                    : std::string()),
                     par.sequence_parallel && par.tp > 1 ? " · SP" : "") +
         (par.pp > 1 ? split_text(plan) : std::string()) +
         (plan.lora.on() ? fmt::format(" · LoRA r{} on {}{}", plan.lora.rank, wl::to_string(plan.lora.targets),
                                       plan.lora.base == wl::LoraBase::same
                                           ? std::string()
                                           : fmt::format(" ({} base)", wl::to_string(plan.lora.base)))
                         : std::string());
}

/// The text/Markdown sections of one estimate after its head section: Infeasible, Throughput, Step breakdown, Memory.
std::vector<Section> estimate_sections(const model::TrainingSystem& sys, const wl::TrainingPlan& plan,
                                       const model::TrainingEstimate& est, const model::Band* band) {
  const auto& par = plan.par;
  std::vector<Section> sec;
  if (!est.feasibility.ok) {
    Section r{"Infeasible", {}};
    for (const auto& reason : est.feasibility.reasons) r.rows.emplace_back("-", reason);
    sec.push_back(r);
  }
  if (est.step_time.raw() > 0) {
    Section perf{"Throughput", {}};
    // With a band: "(p10–p90: lo–hi, regime, n cases)" after each time, rate and cost.
    auto tband = [&](u::Seconds t) {
      return band ? fmt::format(" (p10–p90: {}–{}, {})", u::format(t * band->p10), u::format(t * band->p90), band_note(*band))
                  : std::string();
    };
    perf.rows = {{"step time", u::format(est.step_time) + tband(est.step_time)},
                 {"tokens/s", fmt::format("{} ({} per GPU){}", u::format_number(est.tokens_per_s, 4),
                                          u::format_number(est.tokens_per_s / double(par.gpus()), 4),
                                          band ? fmt::format(" (p10–p90: {}–{})", u::format_number(est.tokens_per_s / band->p90, 4),
                                                             u::format_number(est.tokens_per_s / band->p10, 4))
                                               : std::string())},
                 {"MFU / HFU", fmt::format("{} / {}", u::format(u::Ratio(est.mfu)), u::format(u::Ratio(est.hfu)))}};
    if (est.time_to_train) {
      perf.rows.emplace_back("time to train", fmt::format("{} for {} tokens{}", u::format(*est.time_to_train),
                                                          u::format_number(*plan.tokens_to_train, 3),
                                                          band ? fmt::format(" (p10–p90: {}–{})",
                                                                             u::format(*est.time_to_train * band->p10),
                                                                             u::format(*est.time_to_train * band->p90))
                                                               : std::string()));
      perf.rows.emplace_back("GPU-hours", u::format_number(*est.gpu_hours, 4));
      if (est.cost)
        perf.rows.emplace_back("cost", fmt::format("{} at {}{}", u::format(*est.cost), describe_price(sys.price, sys.gpu),
                                                   band ? fmt::format(" (p10–p90: {}–{})", u::format(*est.cost * band->p10),
                                                                      u::format(*est.cost * band->p90))
                                                        : std::string()));
      if (est.energy) perf.rows.emplace_back("energy (estimate: TDP × busy time)", u::format(*est.energy));
    }
    sec.push_back(perf);
    const auto& b = est.step;
    auto pct = [&](u::Seconds x) { return fmt::format("{} ({})", u::format(x), u::format(u::Ratio(x / est.step_time))); };
    Section bd{"Step breakdown", {}};
    bd.rows = {{"GEMM", pct(b.gemm)}, {"attention", pct(b.attention)}, {"elementwise", pct(b.elementwise)},
               {"embedding + LM head + loss", pct(b.embedding_loss)}};
    if (b.recompute.raw() > 0) bd.rows.emplace_back("  of which recompute", pct(b.recompute));
    if (b.moe_host.raw() > 0) bd.rows.emplace_back("MoE dispatcher host syncs", pct(b.moe_host));
    for (const auto& c : est.comm)
      if (c.group_size > 1)
        bd.rows.emplace_back(fmt::format("{} comm exposed", c.kind),
                             fmt::format("{} of {} total ({} over {})", pct(c.exposed), u::format(c.time), c.collective, c.tier));
    bd.rows.emplace_back("pipeline bubble", pct(b.bubble));
    const bool offloaded = plan.offload == wl::Offload::optimizer;
    bd.rows.emplace_back(offloaded ? "optimizer (on the CPU)" : "optimizer", pct(b.optimizer));
    if (offloaded || plan.activation_offload_layers > 0) bd.rows.emplace_back("offload transfers exposed", pct(b.offload));
    sec.push_back(bd);
    const auto& mm = est.memory;
    Section mem{fmt::format("Memory per GPU ({} of {})", u::format(mm.total, u::BytePrefix::binary),
                            u::format(mm.capacity, u::BytePrefix::binary)),
                {}};
    auto gib = [](u::Bytes x) { return u::format(x, u::BytePrefix::binary); };
    mem.rows = {{"weights", gib(mm.weights)}, {"gradients", gib(mm.gradients)}, {"master weights", gib(mm.master_weights)},
                {"optimizer states", gib(mm.optimizer_states)}, {"activations", gib(mm.activations)},
                {"logits / loss", gib(mm.logits)}, {"CUDA context", gib(mm.cuda_context)},
                {"NCCL buffers", gib(mm.nccl_buffers)}, {"fragmentation", gib(mm.fragmentation)},
                {"fits", mm.fits ? "yes" : "no"}};
    if (plan.offload == wl::Offload::optimizer || plan.activation_offload_layers > 0)
      mem.rows.insert(mem.rows.end() - 1, {"in host memory (offload)", gib(mm.host_offloaded)});
    sec.push_back(mem);
  }
  return sec;
}

std::vector<Section> training_sections(const wl::TransformerArch& arch, long long shown_gpus,
                                       const model::TrainingSystem& sys, const wl::TrainingPlan& plan,
                                       const model::TrainingEstimate& est, const model::Band* band) {
  std::vector<Section> sec;
  Section head{fmt::format("{} on {} × {}", arch.name.empty() ? arch.id : arch.name, shown_gpus, sys.gpu->info.name), {}};
  head.rows = {{"layout", layout_text(plan)},
               // A layout refused before it is priced has no micro-batch count: the line says nothing rather than 0.
               {"batch", fmt::format("{} sequences × {} tokens per step, micro-batch {}{}", plan.global_batch,
                                     plan.seq_len, plan.micro_batch,
                                     est.micro_batches > 0 ? fmt::format(", {} micro-batches", est.micro_batches)
                                                           : std::string())},
               {"node", sys.node ? sys.node->info.id : "single GPU"}};
  sec.push_back(head);
  for (auto& x : estimate_sections(sys, plan, est, band)) sec.push_back(std::move(x));
  return sec;
}

std::vector<Section> planner_sections(const ResolvedServing& rs, const model::ServingPlanResult& r,
                                      const model::Band* band) {
  const auto& arch = rs.arch;
  const hw::GpuSpec& gpu = *rs.sys.gpu;
  const model::ServingPerfPlan& perf = rs.perf;
  const model::Traffic tr = rs.traffic();
  const model::Sla& sla = rs.sla;
  const std::int64_t isl = rs.input_tokens;
  const std::int64_t osl = rs.output_tokens;
  std::vector<Section> sec;
  const std::string load =
      tr.concurrency ? fmt::format("{} users{} (closed loop: {:.3g} req/s at the chosen layout)", *tr.concurrency,
                                   tr.think_time.raw() > 0 ? ", think time " + ms(tr.think_time) : std::string(),
                                   r.traffic.requests_per_s)
                     : plain_number(tr.requests_per_s) + " req/s";
  Section head{fmt::format("Serving {} on {} — {}, {} in / {} out", arch.name.empty() ? arch.id : arch.name,
                           gpu.info.id, load, isl, osl),
               {}};
  head.rows.emplace_back("SLA", fmt::format("TTFT p{} {}, ITL {}", plain_number(rs.percentile),
                                            sla.ttft ? ms(*sla.ttft) : std::string("none"),
                                            sla.itl ? ms(*sla.itl) : std::string("none")));
  head.rows.emplace_back("weights / KV / compute",
                         fmt::format("{} / {} / {}", model::to_string(perf.weights.dtype), model::to_string(perf.kv.dtype),
                                     hw::to_string(perf.compute)));
  head.rows.emplace_back("KV per token (whole model)", u::format(r.kv_bytes_per_token));
  sec.push_back(head);
  if (r.best) {
    const auto& b = *r.best;
    Section ans{r.feasible ? "Answer" : "No layout meets the SLA — best achievable", {}};
    ans.rows = {{"GPUs", fmt::format("{} = {}", b.gpus,
                                     b.dp > 1 ? model::group_layout(b.replicas, b.dp, b.tp, b.pp)
                                              : model::replica_layout(b.replicas, b.tp, b.pp))},
                {b.dp > 1 ? "per group" : "per replica",
                 b.dp > 1 ? fmt::format("{} ranks × {} concurrent sequences (KV holds {} per rank), {:.3g} req/s, {:.0f} "
                                        "output tok/s",
                                        b.dp, b.batch, b.max_batch_memory, b.replica_requests_per_s,
                                        b.state.output_tokens_per_s * double(b.dp))
                          : fmt::format("{} concurrent sequences (KV holds {}), {:.3g} req/s, {:.0f} output tok/s",
                                        b.batch, b.max_batch_memory, b.replica_requests_per_s,
                                        b.state.output_tokens_per_s)},
                {"TTFT", fmt::format("{} at p{} ({} prefill, {} for the running iteration, {} queueing)", ms(b.ttft),
                                     plain_number(rs.percentile), ms(b.ttft - b.queue_wait - b.iteration_wait),
                                     ms(b.iteration_wait), ms(b.queue_wait))},
                {"ITL", fmt::format("{} (decode-only step {})", ms(b.itl), ms(b.state.itl_decode_only))},
                {"cost", b.cost_rate.raw() > 0 ? fmt::format("${:.2f}/hour, ${:.3g} per million output tokens, at {}",
                                                             u::to_usd_per_hour(b.cost_rate), b.cost_per_mtok_usd,
                                                             describe_price(rs.sys.price, rs.sys.gpu))
                                               : std::string("no price for this GPU (give --price)")}};
    if (band != nullptr) {
      // Measured/predicted time of the regime's validation cases: the latencies scale with it, the GPUs for the same
      // traffic too (whole replicas).
      auto reps = [&](double q) { return std::int64_t(std::ceil(double(b.replicas) * q - 1e-9)) * b.tp * b.pp * b.dp; };
      ans.rows.emplace_back("error band (p10–p90)",
                            fmt::format("GPUs {}–{}, TTFT {}–{}, ITL {}–{} ({})", reps(band->p10), reps(band->p90),
                                        ms(b.ttft * band->p10), ms(b.ttft * band->p90), ms(b.itl * band->p10),
                                        ms(b.itl * band->p90), band_note(*band)));
    }
    for (const auto& reason : r.reasons) ans.rows.emplace_back("reason", reason);
    sec.push_back(ans);
  }
  if (r.disaggregated) {
    const auto& d = *r.disaggregated;
    Section ds{"Disaggregated prefill / decode pools", {}};
    ds.rows = {{"GPUs", d.prefill_gpu.empty()
                            ? fmt::format("{} = {} prefill (TP {}) + {} decode (TP {})", d.gpus, d.prefill_gpus,
                                          d.prefill_tp, d.decode_gpus, d.decode_tp)
                            : fmt::format("{} = {}", d.gpus, model::pools_layout(d))},
               {"TTFT", fmt::format("{} incl. KV transfer {} over {}", ms(d.ttft), ms(d.kv_transfer), d.transfer_tier)},
               {"ITL", fmt::format("{} at decode batch {}", ms(d.itl), d.decode_batch)},
               {"cost", d.prefill_gpu.empty()
                            ? fmt::format("${:.3g} per million output tokens", d.cost_per_mtok_usd)
                            : fmt::format("${:.3g} per million output tokens: prefill ${:.2f}/hour ({} × {}), decode "
                                          "${:.2f}/hour ({} × {}), each at its GPU's own price",
                                          d.cost_per_mtok_usd, u::to_usd_per_hour(d.prefill_cost_rate),
                                          d.prefill_gpus, d.prefill_gpu, u::to_usd_per_hour(d.decode_cost_rate),
                                          d.decode_gpus, d.decode_gpu)},
               {"SLA", d.meets_sla ? "meets" : "misses"}};
    sec.push_back(ds);
  }
  if (!r.notes.empty()) {
    Section n{"Notes", {}};
    for (const auto& x : r.notes) n.rows.emplace_back("-", x);
    sec.push_back(n);
  }
  return sec;
}

Table planner_table(const model::ServingPlanResult& r) {
  Table t{{{"tp", "TP", true},
           {"batch", "batch", true},
           {"cap", "KV cap", true},
           {"ttft", "TTFT", false},
           {"itl", "ITL", false},
           {"rps", "req/s/replica", true},
           {"gpus", "GPUs", true},
           {"cost", "$/Mtok", true},
           {"ok", "SLA", false}},
          {}};
  for (const auto& c : r.per_tp)
    t.rows.push_back({std::to_string(c.tp), std::to_string(c.batch), std::to_string(c.max_batch_memory), ms(c.ttft),
                      ms(c.itl), fmt::format("{:.3g}", c.replica_requests_per_s), std::to_string(c.gpus),
                      fmt::format("{:.3g}", c.cost_per_mtok_usd), c.meets_sla ? "meets" : "misses"});
  return t;
}

}  // namespace gpuplan::app
