// `gpuplan kv`: KV cache per token, per sequence and per GPU; memory per GPU beside the weights under the serving
// engine's memory knob; max concurrency at a context, max context at a concurrency, and GPUs needed by memory.
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/app/serving_flags.hpp"
#include "scenario_flags.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;
using nlohmann::ordered_json;


std::string both(u::Bytes b) { return fmt::format("{} ({})", u::format(b), u::format(b, u::BytePrefix::binary)); }
std::string gib(u::Bytes b) { return u::format(b, u::BytePrefix::binary); }
std::string count(std::int64_t n, const char* one, const char* many) {
  return fmt::format("{} {}", u::format_count(double(n)), n == 1 ? one : many);
}
std::string replicas_text(const model::ReplicaLayout& l) {
  return fmt::format("TP {} × PP {} × {} of {}", l.tp, l.pp, count(l.replicas, "replica", "replicas"),
                     count(l.max_concurrency, "sequence", "sequences"));
}


ordered_json memory_json(const model::StageMemory& m) {
  return {{"stage", m.layers.stage},
          {"layers", m.layers.count},
          {"capacity_bytes", m.capacity.raw()},
          {"budget_bytes", m.budget.raw()},
          {"weights_bytes", m.weights.raw()},
          {"activations_bytes", m.activations.raw()},
          {"cuda_graphs_bytes", m.cuda_graphs.raw()},
          {"cuda_context_bytes", m.cuda_context.raw()},
          {"nccl_bytes", m.nccl.raw()},
          {"outside_budget_bytes", m.outside_budget.raw()},
          {"kv_pool_bytes", m.kv_pool.raw()},
          {"kv_used_bytes", m.kv_used.raw()},
          {"free_bytes", m.free.raw()},
          {"max_concurrency", m.max_concurrency},
          {"kv_token_capacity", m.kv_token_capacity}};
}

std::string engine_text(const model::ServingMemoryPlan& p) {
  return model::describe_engine_budget(p.engine, p.memory_fraction, p.cuda_graphs_in_budget);
}

/// kv's flags: the serving table's memory keys (kKvKeys, checked and typed by the serving scenario reader) and kv's
/// own questions and textbook simplifications (into `own`).
struct KvFlags {
  ScenarioFlags keys;
  ServingFlags own;
};

/// The serving scenario keys `gpuplan kv` takes: the model, the GPU, the layout and the memory knobs.
const std::set<std::string>& kv_keys() {
  static const std::set<std::string> k{"model", "gpu", "tp", "pp", "block_size", "prefix_tokens", "kv_dtype",
                                       "kv_scales", "kv_scale_bytes", "weight_dtype", "weight_group_size", "engine",
                                       "gpu_memory_utilization", "mem_fraction_static", "usable_fraction",
                                       "cudagraph_in_budget", "enforce_eager", "cuda_graph_GiB", "activation_GiB",
                                       "max_num_batched_tokens", "max_num_seqs", "overheads", "capacity"};
  return k;
}

void add_kv_options(CLI::App& c, KvFlags& k) {
  k.keys.add(c, wl_io::serving_fields(), {}, [](const wl_io::ScenarioField& f) { return kv_keys().count(f.key()) == 1; });
  c.get_option("--model")->required();
  ServingFlags& f = k.own;
  c.add_option("--gpus", f.gpus, "GPUs available (whole TP×PP replicas): check the concurrency fits on them")
      ->check(CLI::Range(1LL, 10'000'000LL));  // the GPU counts train --gpus takes; replicas × sequences stays in int64
  c.add_option("--context", f.context, "tokens per sequence (prompt + output)")
      ->check(CLI::Range(1LL, 100'000'000LL))
      ->capture_default_str();
  c.add_option("--concurrency", f.concurrency, "concurrent sequences")
      ->check(CLI::Range(1LL, 1'000'000'000LL))
      ->capture_default_str();
  c.add_option("--params", f.params, "nominal parameter count for the weights, e.g. 7e9 (textbook)");
  c.add_flag("--no-scale-overhead", f.no_scale_overhead, "nominal bytes per weight, no quantisation scales");
  c.add_option("--paging-overhead", f.paging_overhead, "flat fraction added to the KV (textbook, e.g. 0.3)");
  c.add_option("--gpu-count", f.gpu_count, "layout (whole-sequence replicas) or pooled (textbook)")
      ->check(CLI::IsMember({"layout", "pooled"}));
  c.add_flag("--simple", f.simple,
             "textbook back-of-envelope: vendor GB, no overheads, nominal weight bytes, contiguous KV, pooled GPU count");
}

/// kv's flags as the memory flags: the table's keys read as a serving scenario (ranges, choices; a bad value is
/// refused against its flag), over kv's own.
std::optional<ServingFlags> kv_flags(const KvFlags& k, Diagnostics& diags) {
  nlohmann::json j = nlohmann::json::object();
  std::map<std::string, std::string> origin;
  k.keys.overlay(j, origin);
  auto sc = wl_io::decode_serving_scenario(j, "(flags)", "", origin);
  diags.append(sc.diagnostics());
  if (!sc.ok()) return std::nullopt;
  ServingFlags f = k.own;
  set_memory_keys(sc.value(), f);
  if (!sc.value().gpu.empty()) f.gpu = sc.value().gpu;
  return f;
}

int run_kv(const GlobalOptions& g, const KvFlags& k) {
  Diagnostics diags;
  const auto given = kv_flags(k, diags);
  if (!given) return report(diags);
  const ServingFlags& f = *given;
  // The data directory first, on its own: a missing one is reported after the flags' notes, a broken database alone.
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return report(diags);
  const auto ws = app::load_workspace(*dir);
  if (!ws.ok()) return report(ws.diagnostics());
  const hw::HardwareDb& db = ws->db;
  const wl_io::ModelLibrary& lib = ws->library;
  auto m = wl_io::resolve_model(lib, f.model);
  if (!m.ok()) return report(m.diagnostics());
  const hw::GpuSpec* gpu = db.find_gpu(f.gpu);
  if (gpu == nullptr) {
    diags.error("", "--gpu", fmt::format("unknown GPU '{}'{}", f.gpu, did_you_mean(f.gpu, db.gpu_names())));
    return report(diags);
  }
  const auto& arch = m->arch;
  auto plan = make_memory_plan(f, db, *gpu, diags);
  if (!plan) return report(diags);
  report(m.diagnostics());  // notes

  const Explain ex = g.explain ? Explain::on : Explain::off;
  const auto params = model::parameter_counts(arch, Explain::off);
  const auto r = model::serving_memory(arch, params, *gpu, *plan, ex);
  // With --simple, the same question without the simplifications, to show what they hide.
  std::optional<model::ServingMemory> fuller;
  if (f.simple) {
    model::ServingMemoryPlan full = *plan;
    full.engine = model::MemoryEngine::vllm;
    full.memory_fraction = 0.9;
    full.capacity = model::CapacityBasis::device;
    full.overheads = model::default_serving_overheads();
    full.weight_scale_overhead = true;
    full.nominal_params.reset();
    full.paging_overhead = 0.0;
    full.block_size = 16;
    full.engine_block_size = true;
    full.gpu_count = model::GpuCountMethod::layout;
    full.gpus.reset();
    fuller = model::serving_memory(arch, params, *gpu, full, Explain::off);
  }
  const auto& bind = r.stages[static_cast<std::size_t>(r.binding_stage)];
  const auto& pl = r.plan;
  const Format fmt_ = parse_format(g.format);
  const int rc = r.ok ? kExitOk : kExitInfeasible;
  auto opt = [](const std::optional<std::int64_t>& v) -> ordered_json { return v ? ordered_json(*v) : ordered_json(); };

  if (fmt_ == Format::json) {
    ordered_json o;
    o["model"] = arch.id;
    o["gpu"] = gpu->info.id;
    o["layout"] = {{"tp", pl.tp}, {"pp", pl.pp}, {"gpus", pl.gpus ? ordered_json(*pl.gpus) : ordered_json()}};
    o["engine"] = {{"name", std::string(model::to_string(pl.engine))},
                   {"memory_fraction", pl.memory_fraction},
                   {"cuda_graphs_in_budget", pl.cuda_graphs_in_budget},
                   {"capacity_basis", pl.capacity == model::CapacityBasis::label ? "label" : "device"},
                   {"max_num_batched_tokens", pl.max_num_batched_tokens},
                   {"max_num_seqs", pl.max_num_seqs}};
    o["kv_dtype"] = std::string(model::to_string(pl.kv.dtype));
    o["kv_scales"] = std::string(model::to_string(pl.kv.scales));
    o["weight_dtype"] = std::string(model::to_string(pl.weights.dtype));
    o["context"] = pl.context;
    o["concurrency"] = pl.concurrency;
    o["block_size"] = pl.block_size;
    o["prefix_tokens"] = pl.prefix_tokens;
    o["kv_bytes_per_token"] = r.kv_bytes_per_token.raw();
    o["kv_bytes_per_token_per_gpu"] = r.kv_bytes_per_token_per_gpu.raw();
    o["kv_bytes_per_sequence"] = r.kv_bytes_per_sequence.raw();
    o["kv_bytes_per_sequence_per_gpu"] = r.kv_bytes_per_sequence_per_gpu.raw();
    o["kv_block_waste_bytes_per_sequence_per_gpu"] = bind.sequence.block_waste.raw();
    o["kv_expected_block_waste_bytes_per_sequence_per_gpu"] = bind.sequence.expected_block_waste.raw();
    o["kv_shared_prefix_bytes_per_gpu"] = bind.sequence.shared_prefix.raw();
    o["kv_heads_per_gpu"] = r.token.kv_heads_per_gpu;
    o["kv_replication"] = r.token.replication;
    o["kv_token_capacity"] = r.kv_token_capacity;
    o["max_concurrency"] = r.max_concurrency;
    o["max_context_tokens"] = r.max_context_tokens;
    o["max_context_limited_by"] = r.max_context_limit;
    o["gpus_needed"] = opt(r.gpus_needed);
    o["gpus_needed_pooled"] = opt(r.gpus_needed_pooled);
    o["gpus_needed_layout"] = r.best_layout ? ordered_json{{"tp", r.best_layout->tp}, {"pp", r.best_layout->pp},
                                                           {"replicas", r.best_layout->replicas},
                                                           {"sequences_per_replica", r.best_layout->max_concurrency},
                                                           {"gpus", r.best_layout->gpus()}}
                                            : ordered_json();
    o["weights_bytes_total"] = r.weights_total.raw();
    o["kv_bytes_total"] = r.kv_total.raw();
    o["memory_needed_bytes"] = r.memory_needed.raw();
    o["weights_bytes_per_gpu"] = bind.weights.raw();
    o["binding_stage"] = r.binding_stage;
    o["memory_per_gpu"] = memory_json(bind);
    ordered_json stages = ordered_json::array();
    for (const auto& s : r.stages) stages.push_back(memory_json(s));
    o["stages"] = stages;
    o["feasible"] = r.ok;
    o["reasons"] = r.reasons;
    o["notes"] = r.notes;
    if (fuller)
      o["fuller_model"] = {{"gpus_needed", opt(fuller->gpus_needed)},
                           {"memory_needed_bytes", fuller->memory_needed.raw()},
                           {"weights_bytes_total", fuller->weights_total.raw()},
                           {"kv_bytes_total", fuller->kv_total.raw()},
                           {"max_concurrency", fuller->max_concurrency},
                           {"weights_bytes_per_gpu", fuller->stages[std::size_t(fuller->binding_stage)].weights.raw()}};
    if (g.explain) o["derivation"] = derivation_json(r.derivation);
    out(json_text(o));
    return rc;
  }
  if (fmt_ == Format::csv) {
    Table t;
    t.columns = {{"model", "model"}, {"gpu", "gpu"}, {"tp", "tp", true}, {"pp", "pp", true},
                 {"kv_dtype", "kv dtype"}, {"weight_dtype", "weight dtype"}, {"context", "context", true},
                 {"concurrency", "concurrency", true}, {"kv_bytes_per_token", "KV B/token", true},
                 {"kv_bytes_per_sequence", "KV B/seq", true}, {"kv_bytes_per_sequence_per_gpu", "KV B/seq/GPU", true},
                 {"weights_bytes_per_gpu", "weights B/GPU", true}, {"kv_pool_bytes_per_gpu", "KV pool B/GPU", true},
                 {"kv_token_capacity", "KV tokens", true}, {"max_concurrency", "max concurrency", true},
                 {"max_context_tokens", "max context", true}, {"gpus_needed", "GPUs", true},
                 {"memory_needed_bytes", "memory needed B", true}, {"feasible", "feasible"}};
    t.rows.push_back({arch.id, gpu->info.id, std::to_string(pl.tp), std::to_string(pl.pp),
                      std::string(model::to_string(pl.kv.dtype)), std::string(model::to_string(pl.weights.dtype)),
                      std::to_string(pl.context), std::to_string(pl.concurrency), plain_number(r.kv_bytes_per_token.raw()),
                      plain_number(r.kv_bytes_per_sequence.raw()), plain_number(r.kv_bytes_per_sequence_per_gpu.raw()),
                      plain_number(bind.weights.raw()), plain_number(bind.kv_pool.raw()), std::to_string(r.kv_token_capacity),
                      std::to_string(r.max_concurrency), std::to_string(r.max_context_tokens),
                      r.gpus_needed ? std::to_string(*r.gpus_needed) : "", plain_number(r.memory_needed.raw()),
                      r.ok ? "true" : "false"});
    out(t.render(Format::csv));
    return rc;
  }

  // text / md
  std::vector<Section> sec;
  Section head{fmt::format("{} on {}", arch.name.empty() ? arch.id : arch.name, gpu->info.name), {}};
  head.rows = {{"layout", fmt::format("TP {} · PP {}{}", pl.tp, pl.pp,
                                      pl.gpus ? fmt::format(" · {} GPUs", *pl.gpus) : std::string())},
               {"engine", engine_text(pl)},
               {"workload", fmt::format("{} × {} tokens{}", count(pl.concurrency, "sequence", "sequences"),
                                        u::format_count(double(pl.context)),
                                        pl.prefix_tokens > 0 ? fmt::format(", {} shared prefix tokens",
                                                                           u::format_count(double(pl.prefix_tokens)))
                                                             : std::string())},
               {"dtypes", fmt::format("KV {}{}, weights {}{}", model::to_string(pl.kv.dtype),
                                      model::is_quantized(pl.kv.dtype)
                                          ? fmt::format(" ({} scales)", model::to_string(pl.kv.scales))
                                          : std::string(),
                                      model::to_string(pl.weights.dtype),
                                      pl.nominal_params ? fmt::format(" × {}B nominal parameters",
                                                                      u::format_number(*pl.nominal_params / 1e9, 4))
                                                        : std::string())}};
  sec.push_back(head);
  if (!r.ok) {
    Section s{"Infeasible", {}};
    for (const auto& x : r.reasons) s.rows.emplace_back("-", x);
    sec.push_back(s);
  }
  Section kv{"KV cache", {}};
  kv.rows = {{"per token (whole model)", both(r.kv_bytes_per_token)},
             {"per token per GPU",
              r.token.mla ? fmt::format("{} (the MLA latent, whole on each of the {} TP ranks)",
                                        both(r.kv_bytes_per_token_per_gpu), pl.tp)
                          : fmt::format("{} ({} of {} KV heads per GPU{})", both(r.kv_bytes_per_token_per_gpu),
                                        u::format_number(r.token.kv_heads_per_gpu),
                                        u::format_number(r.token.kv_heads_total),
                                        r.token.replication > 1
                                            ? fmt::format(", each on {} ranks", r.token.replication)
                                            : std::string())},
             {fmt::format("per sequence of {}", u::format_count(double(pl.context))), both(r.kv_bytes_per_sequence)},
             {"per sequence per GPU", fmt::format("{} in blocks of {} ({} in the last, partly filled blocks; {} "
                                                  "expected over random lengths)",
                                                  both(r.kv_bytes_per_sequence_per_gpu), pl.block_size,
                                                  u::format(bind.sequence.block_waste),
                                                  u::format(bind.sequence.expected_block_waste))}};
  if (pl.prefix_tokens > 0)
    kv.rows.emplace_back("shared prefix per GPU", fmt::format("{} stored once; each sequence adds {}",
                                                              both(bind.sequence.shared_prefix),
                                                              both(bind.sequence.unique)));
  if (pl.paging_overhead > 0)
    kv.rows.emplace_back("paging overhead", u::format(u::Ratio(pl.paging_overhead)) + " added to the KV");
  sec.push_back(kv);

  Section mem{pl.pp > 1 ? fmt::format("Memory per GPU (stage {} of {}, the one that holds the fewest sequences)",
                                      r.binding_stage, pl.pp)
                        : std::string("Memory per GPU"),
              {}};
  mem.rows = {{"capacity", fmt::format("{}{}", both(bind.capacity),
                                       pl.capacity == model::CapacityBasis::label ? " (vendor label)" : " (device)")},
              {"engine budget", both(bind.budget)},
              {"weights", both(bind.weights)},
              {"activations (peak)", gib(bind.activations)},
              {"CUDA graphs", gib(bind.cuda_graphs)},
              {"CUDA context", gib(bind.cuda_context)},
              {"NCCL buffers", gib(bind.nccl)}};
  if (bind.outside_budget.raw() > 0) mem.rows.emplace_back("  of which outside the fraction", gib(bind.outside_budget));
  mem.rows.emplace_back("KV pool", fmt::format("{} = {} tokens", both(bind.kv_pool),
                                               u::format_count(double(bind.kv_token_capacity))));
  mem.rows.emplace_back(fmt::format("KV of {}", count(pl.concurrency, "sequence", "sequences")), both(bind.kv_used));
  mem.rows.emplace_back("KV pool left", both(bind.free));
  mem.rows.emplace_back("total with this workload",
                        fmt::format("{} of {}", both(bind.weights + bind.activations + bind.cuda_graphs +
                                                     bind.cuda_context + bind.nccl + bind.kv_used),
                                    both(bind.capacity)));
  sec.push_back(mem);

  Section cap{"Capacity", {}};
  cap.rows = {{fmt::format("max concurrency at {} tokens", u::format_count(double(pl.context))),
               fmt::format("{} per replica (TP {} × PP {})", count(r.max_concurrency, "sequence", "sequences"),
                           pl.tp, pl.pp)},
              {fmt::format("max context at {}", count(pl.concurrency, "sequence", "sequences")),
               fmt::format("{} tokens (limited by {})", u::format_count(double(r.max_context_tokens)),
                           r.max_context_limit)},
              {"memory needed (weights + KV)", fmt::format("{} = {} + {}", both(r.memory_needed), u::format(r.weights_total),
                                                           u::format(r.kv_total))}};
  std::string layout_line = r.best_layout ? fmt::format("{} ({})", r.best_layout->gpus(), replicas_text(*r.best_layout))
                                          : "no layout holds one sequence";
  std::string pooled_line = r.gpus_needed_pooled ? fmt::format("{} (⌈{} / {} usable per GPU⌉)", *r.gpus_needed_pooled,
                                                               u::format(r.memory_needed), u::format(r.usable_per_gpu_pooled))
                                                  : "-";
  if (pl.gpu_count == model::GpuCountMethod::pooled) {
    cap.rows.emplace_back("GPUs needed by memory", pooled_line);
    cap.rows.emplace_back("  as whole-sequence replicas", layout_line);
  } else {
    cap.rows.emplace_back("GPUs needed by memory", layout_line);
    cap.rows.emplace_back("  pooled (textbook)", pooled_line);
  }
  sec.push_back(cap);
  if (fuller) {
    Section fs{"Without the simplifications (vLLM 0.9, device memory, overheads, scales, blocks of 16)", {}};
    const auto& fb = fuller->stages[std::size_t(fuller->binding_stage)];
    fs.rows = {{"weights", fmt::format("{} (here {})", u::format(fuller->weights_total), u::format(r.weights_total))},
               {"KV", fmt::format("{} (here {})", u::format(fuller->kv_total), u::format(r.kv_total))},
               {"KV pool per GPU", fmt::format("{} at TP {} × PP {}", both(fb.kv_pool), pl.tp, pl.pp)},
               {"max concurrency", u::format_count(double(fuller->max_concurrency))},
               {"GPUs needed by memory",
                fuller->best_layout ? fmt::format("{} ({})", fuller->best_layout->gpus(),
                                                  replicas_text(*fuller->best_layout))
                                    : std::string("no layout holds one sequence")}};
    sec.push_back(fs);
  }
  if (!r.notes.empty()) {
    Section n{"Notes", {}};
    for (const auto& x : r.notes) n.rows.emplace_back("-", x);
    sec.push_back(n);
  }
  out(render_sections(sec, fmt_));
  if (g.explain) out(render_derivation(r.derivation, fmt_));
  return rc;
}

}  // namespace

void register_kv(CLI::App& app, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<KvFlags>();
  auto* c = app.add_subcommand("kv", "KV cache per token/sequence/GPU, memory beside the weights, max concurrency and "
                                     "context, GPUs needed by memory");
  add_kv_options(*c, *f);
  add_format_option(*c, g);
  c->add_flag("--explain", g.explain, "print the derivation of every number");
  c->callback([&g, f, &rc] { rc = run_kv(g, *f); });
}

}  // namespace gpuplan::cli
