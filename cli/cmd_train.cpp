// `gpuplan train`: step time, throughput, MFU, memory, communication, time to train and cost for one plan.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "resolve.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;
using nlohmann::ordered_json;

struct TrainFlags {
  std::string scenario;
  std::optional<std::string> model, gpu, node, cluster, schedule, precision, optimizer, recompute, attention_kernel,
      kernels, mixed_precision;
  std::optional<long long> gpus, tp, pp, dp, cp, ep, virtual_stages, micro_batch, global_batch, seq, zero, shard_group;
  std::optional<bool> sequence_parallel, flash_attention, overlap_grad_reduce, overlap_param_gather, overlap_tp_comm;
  std::optional<double> gradient_bytes, tokens, price;
  bool no_calibration = false;
};

/// Flags as a JSON overlay over the scenario file, remembering which flag each key came from.
void overlay(const TrainFlags& f, nlohmann::json& j, std::map<std::string, std::string>& origin) {
  auto put = [&](const char* key, const char* flag, const auto& v) {
    if (v) {
      j[key] = *v;
      origin[key] = flag;
    }
  };
  put("model", "--model", f.model);
  put("gpu", "--gpu", f.gpu);
  put("node", "--node", f.node);
  put("cluster", "--cluster", f.cluster);
  put("schedule", "--schedule", f.schedule);
  put("precision", "--precision", f.precision);
  put("optimizer", "--optimizer", f.optimizer);
  put("recompute", "--recompute", f.recompute);
  put("attention_kernel", "--attention-kernel", f.attention_kernel);
  put("kernels", "--kernels", f.kernels);
  put("mixed_precision", "--mixed-precision", f.mixed_precision);
  put("gpus", "--gpus", f.gpus);
  put("tp", "--tp", f.tp);
  put("pp", "--pp", f.pp);
  put("dp", "--dp", f.dp);
  put("cp", "--cp", f.cp);
  put("ep", "--ep", f.ep);
  put("virtual_stages", "--virtual-stages", f.virtual_stages);
  put("micro_batch", "--micro-batch", f.micro_batch);
  put("global_batch", "--global-batch", f.global_batch);
  put("seq", "--seq", f.seq);
  put("zero", "--zero", f.zero);
  put("shard_group", "--shard-group", f.shard_group);
  put("sequence_parallel", "--sp", f.sequence_parallel);
  put("flash_attention", "--flash", f.flash_attention);
  put("overlap_grad_reduce", "--overlap-grad-reduce", f.overlap_grad_reduce);
  put("overlap_param_gather", "--overlap-param-gather", f.overlap_param_gather);
  put("overlap_tp_comm", "--overlap-tp", f.overlap_tp_comm);
  put("gradient_bytes", "--gradient-bytes", f.gradient_bytes);
  put("tokens", "--tokens", f.tokens);
  put("price_usd_per_hour", "--price", f.price);
}

ordered_json bytes_json(const model::TrainingMemory& m) {
  return {{"weights_bytes", m.weights.raw()},
          {"gradients_bytes", m.gradients.raw()},
          {"master_weights_bytes", m.master_weights.raw()},
          {"optimizer_states_bytes", m.optimizer_states.raw()},
          {"activations_bytes", m.activations.raw()},
          {"logits_bytes", m.logits.raw()},
          {"cuda_context_bytes", m.cuda_context.raw()},
          {"nccl_buffers_bytes", m.nccl_buffers.raw()},
          {"fragmentation_bytes", m.fragmentation.raw()}};
}

int run_train(const GlobalOptions& g, const TrainFlags& f) {
  Diagnostics diags;
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return report(diags);
  nlohmann::json j = nlohmann::json::object();
  std::string file = "(flags)";
  if (!f.scenario.empty()) {
    file = f.scenario;
    auto text = json_io::read_text_file(f.scenario, diags);
    if (!text) return report(diags);
    auto parsed = json_io::parse(*text, f.scenario, diags);
    if (!parsed) return report(diags);
    j = *parsed;
    if (!j.is_object()) {
      diags.error(f.scenario, "/", "expected an object of training scenario keys (docs/scenario.md)");
      return report(diags);
    }
  }
  std::map<std::string, std::string> origin;
  overlay(f, j, origin);
  auto sc = wl_io::decode_training_scenario(j, file, origin);
  if (!sc.ok()) return report(sc.diagnostics());
  wl_io::TrainingScenario s = sc.value();
  auto db = hw_io::load_hardware_db(*dir);
  if (!db.ok()) return report(db.diagnostics());
  auto lib = wl_io::load_model_library(*dir);
  if (!lib.ok()) return report(lib.diagnostics());
  auto where = [&](const std::string& key) {
    auto it = origin.find(key);
    if (it != origin.end()) return it->second;
    return j.contains(key) ? file + ": /" + key : "--" + key;
  };
  auto resolved = resolve_training(s, j.contains("global_batch"), *db, *lib, where, diags);
  if (!resolved) return report(diags);
  if (!load_calibration(*dir, resolved->sys, f.no_calibration, diags)) return report(diags);
  const auto& sys = resolved->sys;
  const auto& arch = resolved->arch;
  const auto& plan = resolved->plan;
  const auto& par = plan.par;
  const auto& pre = resolved->pre;

  const Format fmt_ = parse_format(g.format);
  model::TrainingEstimate est;
  if (pre.ok) est = model::estimate_training(arch, plan, sys, g.explain ? Explain::on : Explain::off);
  else est.feasibility = pre;
  report(diags);  // notes

  if (fmt_ == Format::json || fmt_ == Format::csv) {
    ordered_json o;
    o["model"] = arch.id;
    o["gpu"] = sys.gpu->info.id;
    o["node"] = sys.node ? sys.node->info.id : "";
    o["gpus"] = par.gpus();
    o["layout"] = {{"tp", par.tp}, {"pp", par.pp}, {"dp", par.dp}, {"cp", par.cp}, {"ep", par.ep},
                   {"sequence_parallel", par.sequence_parallel}, {"virtual_stages", par.virtual_stages},
                   {"micro_batch", plan.micro_batch}, {"global_batch", plan.global_batch}, {"seq", plan.seq_len},
                   {"micro_batches", est.micro_batches}};
    o["feasible"] = est.feasibility.ok;
    o["reasons"] = est.feasibility.reasons;
    if (est.step_time.raw() > 0) {
      o["step_time_s"] = est.step_time.raw();
      o["tokens_per_s"] = est.tokens_per_s;
      o["tokens_per_s_per_gpu"] = est.tokens_per_s / double(par.gpus());
      o["mfu"] = est.mfu;
      o["hfu"] = est.hfu;
      o["model_flops_per_step"] = est.model_flops_per_step.raw();
      o["breakdown"] = {{"gemm_s", est.step.gemm.raw()}, {"attention_s", est.step.attention.raw()},
                        {"elementwise_s", est.step.elementwise.raw()}, {"embedding_loss_s", est.step.embedding_loss.raw()},
                        {"recompute_s", est.step.recompute.raw()}, {"comm_exposed_s", est.step.comm_exposed.raw()},
                        {"bubble_s", est.step.bubble.raw()}, {"optimizer_s", est.step.optimizer.raw()}};
      ordered_json comm;
      for (const auto& c : est.comm)
        comm[c.kind] = {{"collective", c.collective}, {"group_size", c.group_size}, {"tier", c.tier},
                        {"bytes_per_step", c.bytes_per_step.raw()}, {"time_s", c.time.raw()}, {"exposed_s", c.exposed.raw()}};
      o["comm"] = comm;
      o["memory"] = {{"peak_bytes_per_gpu", est.memory.total.raw()}, {"capacity_bytes", est.memory.capacity.raw()},
                     {"fits", est.memory.fits}, {"breakdown", bytes_json(est.memory)}};
      if (est.time_to_train) o["time_to_train_s"] = est.time_to_train->raw();
      if (est.gpu_hours) o["gpu_hours"] = *est.gpu_hours;
      if (est.cost) o["cost_usd"] = est.cost->raw();
      if (est.energy) o["energy_kWh"] = est.energy->raw() / 3.6e6;
    }
    if (g.explain && !est.derivation.empty()) o["derivation"] = derivation_json(est.derivation);
    if (fmt_ == Format::json) {
      out(o.dump(2) + "\n");
    } else {
      Table t;
      t.columns = {{"model", "model"}, {"gpu", "gpu"}, {"gpus", "gpus", true}, {"tp", "tp", true}, {"pp", "pp", true},
                   {"dp", "dp", true}, {"cp", "cp", true}, {"feasible", "feasible"}, {"step_time_s", "step s", true},
                   {"tokens_per_s", "tokens/s", true}, {"mfu", "MFU", true}, {"peak_bytes_per_gpu", "peak B/GPU", true},
                   {"time_to_train_s", "time to train s", true}, {"cost_usd", "cost $", true}};
      auto num = [](double v) { return fmt::format("{:.10g}", v); };
      t.rows.push_back({arch.id, sys.gpu->info.id, std::to_string(par.gpus()), std::to_string(par.tp),
                        std::to_string(par.pp), std::to_string(par.dp), std::to_string(par.cp),
                        est.feasibility.ok ? "true" : "false", est.step_time.raw() > 0 ? num(est.step_time.raw()) : "",
                        est.step_time.raw() > 0 ? num(est.tokens_per_s) : "", est.step_time.raw() > 0 ? num(est.mfu) : "",
                        est.step_time.raw() > 0 ? num(est.memory.total.raw()) : "",
                        est.time_to_train ? num(est.time_to_train->raw()) : "", est.cost ? num(est.cost->raw()) : ""});
      out(t.render(Format::csv));
    }
    return est.feasibility.ok ? kExitOk : kExitInfeasible;
  }

  std::vector<Section> sec;
  const long long shown_gpus = s.gpus && !pre.ok ? *s.gpus : par.gpus();
  Section head{fmt::format("{} on {} × {}", arch.name.empty() ? arch.id : arch.name, shown_gpus, sys.gpu->info.name), {}};
  head.rows = {{"layout", fmt::format("TP {} · PP {}{} · DP {} · CP {}{}{}", par.tp, par.pp,
                                      plan.schedule == wl::PipelineSchedule::interleaved ? fmt::format(" (v={})", par.virtual_stages) : "",
                                      par.dp, par.cp, par.ep > 1 ? fmt::format(" · EP {}", par.ep) : "",
                                      par.sequence_parallel && par.tp > 1 ? " · SP" : "")},
               {"batch", fmt::format("{} sequences × {} tokens per step, micro-batch {}, {} micro-batches",
                                     plan.global_batch, plan.seq_len, plan.micro_batch, est.micro_batches)},
               {"node", sys.node ? sys.node->info.id : "single GPU"}};
  sec.push_back(head);
  if (!est.feasibility.ok) {
    Section r{"Infeasible", {}};
    for (const auto& reason : est.feasibility.reasons) r.rows.emplace_back("-", reason);
    sec.push_back(r);
  }
  if (est.step_time.raw() > 0) {
    Section perf{"Throughput", {}};
    perf.rows = {{"step time", u::format(est.step_time)},
                 {"tokens/s", fmt::format("{} ({} per GPU)", u::format_number(est.tokens_per_s, 4),
                                          u::format_number(est.tokens_per_s / double(par.gpus()), 4))},
                 {"MFU / HFU", fmt::format("{} / {}", u::format(u::Ratio(est.mfu)), u::format(u::Ratio(est.hfu)))}};
    if (est.time_to_train) {
      perf.rows.emplace_back("time to train", fmt::format("{} for {} tokens", u::format(*est.time_to_train),
                                                          u::format_number(*plan.tokens_to_train, 3)));
      perf.rows.emplace_back("GPU-hours", u::format_number(*est.gpu_hours, 4));
      if (est.cost) perf.rows.emplace_back("cost", u::format(*est.cost));
      if (est.energy) perf.rows.emplace_back("energy (estimate: TDP × busy time)", u::format(*est.energy));
    }
    sec.push_back(perf);
    const auto& b = est.step;
    auto pct = [&](u::Seconds x) { return fmt::format("{} ({})", u::format(x), u::format(u::Ratio(x / est.step_time))); };
    Section bd{"Step breakdown", {}};
    bd.rows = {{"GEMM", pct(b.gemm)}, {"attention", pct(b.attention)}, {"elementwise", pct(b.elementwise)},
               {"embedding + LM head + loss", pct(b.embedding_loss)}};
    if (b.recompute.raw() > 0) bd.rows.emplace_back("  of which recompute", pct(b.recompute));
    for (const auto& c : est.comm)
      if (c.group_size > 1)
        bd.rows.emplace_back(fmt::format("{} comm exposed", c.kind),
                             fmt::format("{} of {} total ({} over {})", pct(c.exposed), u::format(c.time), c.collective, c.tier));
    bd.rows.emplace_back("pipeline bubble", pct(b.bubble));
    bd.rows.emplace_back("optimizer", pct(b.optimizer));
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
    sec.push_back(mem);
  }
  out(render_sections(sec, fmt_));
  if (g.explain && !est.derivation.empty()) out(render_derivation(est.derivation, fmt_));
  return est.feasibility.ok ? kExitOk : kExitInfeasible;
}

}  // namespace

void register_train(CLI::App& app, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<TrainFlags>();
  auto* c = app.add_subcommand("train", "training step time, MFU, memory, communication, time to train and cost");
  c->add_option("--scenario", f->scenario, "scenario JSON (keys of docs/scenario.md); flags override it");
  c->add_option("--model,-m", f->model, "model: library id or path to a config.json");
  c->add_option("--gpu", f->gpu, "GPU id or alias");
  c->add_option("--node", f->node, "node id (dgx-h100, ...)");
  c->add_option("--cluster", f->cluster, "cluster id");
  c->add_option("--gpus", f->gpus, "total GPUs");
  c->add_option("--tp", f->tp, "tensor parallel");
  c->add_option("--pp", f->pp, "pipeline parallel");
  c->add_option("--dp", f->dp, "data parallel (default: gpus / (tp·pp·cp))");
  c->add_option("--cp", f->cp, "context parallel");
  c->add_option("--ep", f->ep, "expert parallel");
  c->add_option("--sp", f->sequence_parallel, "sequence parallelism (default: on when TP > 1)");
  c->add_option("--virtual-stages", f->virtual_stages, "interleaved pipeline chunks per stage");
  c->add_option("--schedule", f->schedule, "1f1b or interleaved");
  c->add_option("--micro-batch", f->micro_batch, "sequences per micro-batch");
  c->add_option("--global-batch", f->global_batch, "sequences per step");
  c->add_option("--seq", f->seq, "sequence length");
  c->add_option("--precision", f->precision, "bf16, fp16, fp8, tf32, fp32");
  c->add_option("--gradient-bytes", f->gradient_bytes, "bytes per gradient element (2 or 4)");
  c->add_option("--optimizer", f->optimizer, "adamw, adamw-8bit, sgd");
  c->add_option("--zero", f->zero, "ZeRO / FSDP stage 0-3");
  c->add_option("--shard-group", f->shard_group, "hybrid shard group size");
  c->add_option("--recompute", f->recompute, "none, selective, full");
  c->add_option("--flash", f->flash_attention, "fused attention (default true)");
  c->add_option("--kernels", f->kernels, "fused (Megatron/TE, default) or eager (PyTorch modules)");
  c->add_option("--mixed-precision", f->mixed_precision, "megatron (bf16 params + fp32 main, default) or amp (fp32 params, autocast)");
  c->add_option("--attention-kernel", f->attention_kernel, "fa2 or fa3 (default fa3: FA3/cuDNN on Hopper+, FA2 on Ampere)");
  c->add_option("--overlap-grad-reduce", f->overlap_grad_reduce, "overlap DP reduction with backward (default true)");
  c->add_option("--overlap-param-gather", f->overlap_param_gather, "overlap parameter gathers (default true)");
  c->add_option("--overlap-tp", f->overlap_tp_comm, "overlap TP communication with GEMMs (default false)");
  c->add_option("--tokens", f->tokens, "token budget for time to train and cost");
  c->add_option("--price", f->price, "$/GPU-hour (default: the GPU's indicative price)");
  add_format_option(*c, g);
  c->add_flag("--explain", g.explain, "print the derivation tree");
  c->add_flag("--no-calibration", f->no_calibration,
              "ignore data/calibration/<gpu>/profile.json: use the built-in efficiency defaults");
  c->callback([&g, f, &rc] { rc = run_train(g, *f); });
}

}  // namespace gpuplan::cli
