#include "fuzz_paths.hpp"

#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.hpp"
#include "gpuplan/calibrate/calibration.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/timeline.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/wl_io/plan_io.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "gpuplan/app/resolve.hpp"

namespace gpuplan::fuzz {
namespace {

namespace fs = std::filesystem;

int g_report_fd = 2;

void write_report(const std::string& text) {
  std::string line = "gpuplan fuzz: ";
  line += text;
  line += '\n';
  std::fflush(stderr);
  for (std::size_t done = 0; done < line.size();) {  // write(2) straight to the descriptor: nothing buffered is lost
    const ssize_t n = ::write(g_report_fd, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
}

void trap_on_violation(const std::string& what) {
  write_report("invariant violated: " + what);
  __builtin_trap();
}
ViolationHandler g_handler = &trap_on_violation;

void violated(const std::string& what) { g_handler(what); }

/// Every reported quantity must be a finite, non-negative number.
void check_value(double v, std::string_view what) {
  if (!std::isfinite(v) || v < 0) violated(fmt::format("{} = {} (expected finite and >= 0)", what, v));
}

void check_estimate(const model::TrainingEstimate& e) {
  const auto& s = e.step;
  check_value(s.gemm.raw(), "step.gemm_s");
  check_value(s.attention.raw(), "step.attention_s");
  check_value(s.elementwise.raw(), "step.elementwise_s");
  check_value(s.embedding_loss.raw(), "step.embedding_loss_s");
  check_value(s.recompute.raw(), "step.recompute_s");
  check_value(s.comm_exposed.raw(), "step.comm_exposed_s");
  check_value(s.bubble.raw(), "step.bubble_s");
  check_value(s.optimizer.raw(), "step.optimizer_s");
  check_value(s.total.raw(), "step.total_s");
  check_value(e.step_time.raw(), "step_time_s");
  check_value(e.tokens_per_s, "tokens_per_s");
  check_value(e.mfu, "mfu");
  check_value(e.hfu, "hfu");
  check_value(e.model_flops_per_step.raw(), "model_flops_per_step");
  check_value(e.hardware_flops_per_step.raw(), "hardware_flops_per_step");
  check_value(static_cast<double>(e.micro_batches), "micro_batches");
  check_value(e.bubble_fraction, "bubble_fraction");
  for (const auto& c : e.comm) {
    check_value(c.bytes_per_step.raw(), "comm[" + c.kind + "].bytes_per_step");
    check_value(c.time.raw(), "comm[" + c.kind + "].time_s");
    check_value(c.exposed.raw(), "comm[" + c.kind + "].exposed_s");
    check_value(c.group_size, "comm[" + c.kind + "].group_size");
  }
  const auto& m = e.memory;
  check_value(m.weights.raw(), "memory.weights");
  check_value(m.gradients.raw(), "memory.gradients");
  check_value(m.master_weights.raw(), "memory.master_weights");
  check_value(m.optimizer_states.raw(), "memory.optimizer_states");
  check_value(m.activations.raw(), "memory.activations");
  check_value(m.logits.raw(), "memory.logits");
  check_value(m.cuda_context.raw(), "memory.cuda_context");
  check_value(m.nccl_buffers.raw(), "memory.nccl_buffers");
  check_value(m.fragmentation.raw(), "memory.fragmentation");
  check_value(m.total.raw(), "memory.total");
  check_value(m.capacity.raw(), "memory.capacity");
  if (e.time_to_train) check_value(e.time_to_train->raw(), "time_to_train_s");
  if (e.gpu_hours) check_value(*e.gpu_hours, "gpu_hours");
  if (e.cost) check_value(e.cost->raw(), "cost_usd");
  if (e.energy) check_value(e.energy->raw(), "energy_J");
  for (const auto& op : e.layer_ops) {
    check_value(op.flops.raw(), "layer_ops[" + op.name + "].flops");
    check_value(op.bytes.raw(), "layer_ops[" + op.name + "].bytes");
    check_value(op.time.raw(), "layer_ops[" + op.name + "].time_s");
  }
}

void check_arch_formulas(const wl::TransformerArch& a) {
  const auto p = model::parameter_counts(a, Explain::on);
  const std::pair<std::int64_t, const char*> counts[] = {
      {p.embedding, "embedding"}, {p.position_embedding, "position_embedding"}, {p.attention, "attention"},
      {p.dense_mlp, "dense_mlp"}, {p.router, "router"}, {p.routed_experts, "routed_experts"},
      {p.shared_experts, "shared_experts"}, {p.norms, "norms"}, {p.lm_head, "lm_head"}, {p.mtp, "mtp"},
      {p.total, "total"}, {p.active, "active"}};
  for (const auto& [v, name] : counts)
    if (v < 0) violated(fmt::format("parameter_counts.{} = {} (negative: integer overflow?)", name, v));
  if (p.active > p.total) violated(fmt::format("parameter_counts: active {} > total {}", p.active, p.total));

  std::vector<std::int64_t> contexts{1, 2048, 1 << 20};
  if (a.max_position > 0) contexts.push_back(a.max_position);
  for (const std::int64_t c : contexts) {
    const auto f = model::flops_per_token(a, c, Explain::on);
    if (f.matmul_params < 0) violated(fmt::format("flops_per_token({}).matmul_params = {}", c, f.matmul_params));
    check_value(f.matmul_forward.raw(), "flops_per_token.matmul_forward");
    check_value(f.attention_forward.raw(), "flops_per_token.attention_forward");
    check_value(f.training.raw(), "flops_per_token.training");
    for (const double b : {2.0, 0.5}) {
      const auto k = model::kv_cache_size(a, c, b, Explain::on);
      if (k.elements_per_token_layer < 0) violated(fmt::format("kv_cache_size.elements_per_token_layer = {}", k.elements_per_token_layer));
      check_value(k.per_token_full.raw(), "kv_cache_size.per_token_full");
      check_value(k.per_sequence.raw(), "kv_cache_size.per_sequence");
    }
  }
}

/// One single-GPU and one 8-GPU tensor-parallel step of `a` on a DGX H100: the training formulas on absurd sizes.
void check_arch_training(const wl::TransformerArch& a, const Shipped& data) {
  model::TrainingSystem sys;
  sys.db = &data.db;
  sys.node = data.db.find_node("dgx-h100");
  sys.gpu = sys.node != nullptr ? data.db.find_gpu(sys.node->gpu) : nullptr;
  if (sys.gpu == nullptr) return;
  for (const int tp : {1, 8}) {
    wl::TrainingPlan plan;
    plan.seq_len = a.max_position > 0 ? std::min<std::int64_t>(a.max_position, 4096) : 2048;
    plan.par.tp = tp;
    plan.par.sequence_parallel = tp > 1;
    if (!model::check_training_layout(a, plan, sys).ok) continue;
    check_estimate(model::estimate_training(a, plan, sys, Explain::off));
    // The step and memory timelines lay the same terms out: finite times and sizes, or a stated error.
    const model::StepTimeline tl = model::training_timeline(a, plan, sys);
    if (tl.ok)
      for (const auto& s : tl.spans) {
        check_value(s.start.raw(), "training_timeline.span.start");
        check_value(s.end.raw(), "training_timeline.span.end");
      }
    const model::MemoryTimeline mt = model::training_memory_timeline(a, plan, sys);
    if (mt.ok)
      for (const auto& st : mt.stages) check_value(st.peak.raw(), "training_memory_timeline.peak");
  }
}

/// A per-process scratch directory for decoders that only take a path.
const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / fmt::format("gpuplan-fuzz-{}", ::getpid());
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

bool safe_file_stem(const std::string& s) {
  if (s.empty() || s.size() > 100 || s[0] == '.') return false;
  for (const char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.')) return false;
  return true;
}


/// Writes `bytes` to a per-process scratch file named `name` and returns its path (decoders that only take a path).
fs::path scratch_file(const std::string& name, std::string_view bytes) {
  const fs::path path = scratch_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

void check_fit_quality(const calib::FitQuality& q, const std::string& what) {
  check_value(q.points, what + ".points");
  check_value(q.median_rel_error, what + ".median_rel_error");
  check_value(q.max_rel_error, what + ".max_rel_error");
}

/// Every number a profile holds (fitted or read) must be finite and >= 0.
void check_profile(const calib::Profile& p) {
  for (const auto& g : p.gemm) {
    check_value(g.ceiling, "profile.gemm[" + g.dtype + "].ceiling");
    check_value(g.t0.raw(), "profile.gemm[" + g.dtype + "].t0_s");
    check_fit_quality(g.fit, "profile.gemm[" + g.dtype + "].fit");
    check_fit_quality(g.all, "profile.gemm[" + g.dtype + "].roofline_check");
  }
  for (const auto* s : {p.hbm ? &*p.hbm : nullptr, p.gemm_memory ? &*p.gemm_memory : nullptr}) {
    if (s == nullptr) continue;
    check_value(s->efficiency, "profile.stream.efficiency");
    check_value(s->t0.raw(), "profile.stream.t0_s");
    check_fit_quality(s->fit, "profile.stream.fit");
  }
  if (p.launch) check_value(p.launch->raw(), "profile.launch_s");
  if (p.graph_kernel) check_value(p.graph_kernel->raw(), "profile.graph_kernel_s");
  for (const auto& l : p.links) {
    const std::string w = "profile.links[" + l.op + "]";
    check_value(l.ranks, w + ".ranks");
    check_value(l.intercept.raw(), w + ".intercept_s");
    check_value(l.bus_bandwidth.raw(), w + ".bus_bandwidth");
    check_value(l.bus_efficiency, w + ".bus_efficiency");
    check_value(l.step_latency.raw(), w + ".step_latency_s");
    check_value(l.call_latency.raw(), w + ".call_latency_s");
    check_fit_quality(l.fit, w + ".fit");
  }
}

/// The model with a profile's efficiencies and measured NVLink tier: llama-3.1-8b, TP 8 with sequence parallelism on
/// a DGX of the profile's GPU (or a DGX H100), as `gpuplan train --calibration` would run it.
void check_profile_in_model(const calib::Profile& p, const Shipped& data) {
  const hw::NodeSpec* node = nullptr;
  for (const auto& n : data.db.nodes)
    if (n.gpu == p.gpu_id && n.scale_up.domain_gpus >= 8) node = &n;
  if (node == nullptr) node = data.db.find_node("dgx-h100");
  const auto* m = data.lib.find("llama-3.1-8b");
  if (node == nullptr || m == nullptr) return;
  model::TrainingSystem sys;
  sys.db = &data.db;
  sys.node = node;
  sys.gpu = data.db.find_gpu(node->gpu);
  if (sys.gpu == nullptr) return;
  sys.efficiency = calib::to_efficiency(p, *sys.gpu);
  sys.scale_up_calibration = calib::scale_up_calibration(p);
  wl::TrainingPlan plan;
  plan.seq_len = 4096;
  plan.global_batch = 8;
  plan.par.tp = 8;
  plan.par.sequence_parallel = true;
  if (!model::check_training_layout(m->arch, plan, sys).ok) return;
  const auto est = model::estimate_training(m->arch, plan, sys, Explain::on);
  if (est.feasibility.ok) check_estimate(est);
}


/// FNV-1a of the input: picks the output format and flags of a CLI run, so that a saved input replays the same way.
std::uint64_t input_hash(std::string_view bytes) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

/// Runs `gpuplan ARGS...` (the subcommands of cli/main.cpp that read a scenario or plan) with stdout and stderr
/// captured; returns the exit code and what it printed to stdout.
std::pair<int, std::string> run_gpuplan(const std::vector<std::string>& args_in) {
  std::vector<std::string> args{"gpuplan"};
  args.insert(args.end(), args_in.begin(), args_in.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  CLI::App app{"gpuplan (fuzz)"};
  app.require_subcommand(1);
  app.fallthrough();
  cli::GlobalOptions g;
  app.add_option("--data-dir", g.data_dir, "data directory");
  int rc = cli::kExitOk;
  cli::register_serve(app, g, rc);
  cli::register_pipeline(app, g, rc);
  cli::register_report(app, g, rc);
  cli::guard_flag_values(app);
  std::ostringstream captured, errors;
  std::streambuf* const out = std::cout.rdbuf(captured.rdbuf());
  std::streambuf* const err = std::cerr.rdbuf(errors.rdbuf());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    rc = cli::exit_for_parse_error(app, e);
  } catch (...) {
    std::cout.rdbuf(out);
    std::cerr.rdbuf(err);
    throw;
  }
  std::cout.rdbuf(out);
  std::cerr.rdbuf(err);
  if (std::getenv("GPUPLAN_FUZZ_VERBOSE") != nullptr) {  // to see what an input does: the command, exit code, output
    std::string cmd;
    for (const auto& a : args) cmd += " " + a;
    std::fprintf(stderr, "gpuplan fuzz:%s -> exit %d\n%s%s\n", cmd.c_str(), rc, errors.str().c_str(), captured.str().c_str());
  }
  return {rc, captured.str()};
}

}  // namespace

std::optional<std::string> non_finite_text(const std::string& text) {
  auto alpha = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_'; };
  for (const char* w : {"inf", "nan", "Inf", "NaN"}) {
    for (std::size_t at = text.find(w); at != std::string::npos; at = text.find(w, at + 1)) {
      const std::size_t end = at + 3;
      if ((at == 0 || !alpha(text[at - 1])) && (end >= text.size() || !alpha(text[end]))) {
        const std::size_t from = text.rfind('\n', at);
        const std::size_t to = text.find('\n', at);
        return text.substr(from == std::string::npos ? 0 : from + 1,
                           std::min<std::size_t>(200, (to == std::string::npos ? text.size() : to) - (from == std::string::npos ? 0 : from + 1)));
      }
    }
  }
  return std::nullopt;
}

namespace {

void check_cli_run(const std::string& what, int rc, const std::string& output) {
  if (rc != cli::kExitOk && rc != cli::kExitInvalid && rc != cli::kExitInfeasible)
    violated(fmt::format("{}: exit code {}", what, rc));
  if (auto line = non_finite_text(output)) violated(fmt::format("{}: a non-finite number in the output: '{}'", what, *line));
}

/// A model name the fuzzer may use: a library id or alias as it is; anything else (a path, a URL) becomes `fallback`
/// so that the CLI reads no file. Non-strings stay, so that their type diagnostic is still exercised.
void library_model_only(json_io::Json& obj, const char* key, const char* fallback, const wl_io::ModelLibrary& lib,
                        bool add_when_missing) {
  if (!obj.is_object()) return;
  const auto it = obj.find(key);
  if (it == obj.end()) {
    if (add_when_missing) obj[key] = fallback;
    return;
  }
  if (it->is_string() && lib.find(it->get<std::string>()) == nullptr) *it = fallback;
}

void check_candidate(const model::ServingCandidate& c, const std::string& w) {
  check_value(c.state.iteration.raw(), w + ".state.iteration_s");
  check_value(c.state.itl_decode_only.raw(), w + ".state.itl_decode_only_s");
  check_value(c.state.prefill.raw(), w + ".state.prefill_s");
  check_value(c.state.ttft.raw(), w + ".state.ttft_s");
  check_value(c.state.request_latency.raw(), w + ".state.request_latency_s");
  check_value(c.state.output_tokens_per_s, w + ".state.output_tokens_per_s");
  check_value(c.state.input_tokens_per_s, w + ".state.input_tokens_per_s");
  check_value(c.state.requests_per_s, w + ".state.requests_per_s");
  check_value(c.queue_wait.raw(), w + ".queue_wait_s");
  check_value(c.ttft.raw(), w + ".ttft_s");
  check_value(c.itl.raw(), w + ".itl_s");
  check_value(c.requests_per_s, w + ".requests_per_s");
  check_value(c.replica_requests_per_s, w + ".replica_requests_per_s");
  check_value(c.cost_rate.raw(), w + ".cost_rate");
  check_value(c.cost_per_mtok_usd, w + ".cost_per_mtok_usd");
  if (c.batch < 1 || c.batch > c.max_batch_memory)
    violated(fmt::format("{}: batch {} outside 1..KV capacity {}", w, c.batch, c.max_batch_memory));
  if (c.replicas < 1 || c.gpus != c.replicas * c.tp * c.pp * c.dp)
    violated(fmt::format("{}: GPUs {} != replicas {} x TP {} x PP {}", w, c.gpus, c.replicas, c.tp, c.pp));
}

void check_plan(const model::ServingPlanResult& r) {
  check_value(r.kv_bytes_per_token.raw(), "plan.kv_bytes_per_token");
  check_value(r.traffic.requests_per_s, "plan.traffic.requests_per_s");
  for (std::size_t i = 0; i < r.per_tp.size(); ++i) check_candidate(r.per_tp[i], fmt::format("plan.per_tp[{}]", i));
  if (r.best) check_candidate(*r.best, "plan.best");
  if (r.feasible && !r.best) violated("plan: feasible without a best layout");
  if (r.disaggregated) {
    const auto& d = *r.disaggregated;
    check_value(d.kv_transfer.raw(), "plan.disaggregated.kv_transfer_s");
    check_value(d.ttft.raw(), "plan.disaggregated.ttft_s");
    check_value(d.itl.raw(), "plan.disaggregated.itl_s");
    check_value(d.cost_per_mtok_usd, "plan.disaggregated.cost_per_mtok_usd");
    if (d.ttft < d.kv_transfer)
      violated(fmt::format("plan.disaggregated: TTFT {} s < its own KV transfer {} s", d.ttft.raw(), d.kv_transfer.raw()));
    if (d.gpus != d.prefill_gpus + d.decode_gpus || d.prefill_gpus < 1 || d.decode_gpus < 1)
      violated(fmt::format("plan.disaggregated: GPUs {} != {} prefill + {} decode", d.gpus, d.prefill_gpus, d.decode_gpus));
  }
}

/// A scratch file for the CLI to read (the fuzzers run in an empty working directory; the name is per process).
/// The input's own text must not trip the "no inf/nan in the output" check when the CLI echoes it (a description
/// "DGX inf0", an unknown node "inf", a number given as the string "nan" quoted in a diagnostic): every "inf" / "nan"
/// in its keys and string values, in any case, becomes "i_f" / "n_n" before the CLI sees it. Numbers stay numbers.
std::string neutral_text(std::string t) {
  for (std::size_t i = 0; i + 3 <= t.size(); ++i) {
    const auto lower = [&](std::size_t k) { return char(std::tolower(static_cast<unsigned char>(t[i + k]))); };
    if ((lower(0) == 'i' && lower(1) == 'n' && lower(2) == 'f') || (lower(0) == 'n' && lower(1) == 'a' && lower(2) == 'n'))
      t[i + 1] = '_';
  }
  return t;
}
json_io::Json neutral_json(const json_io::Json& j) {
  if (j.is_string()) return neutral_text(j.get<std::string>());
  if (j.is_array()) {
    json_io::Json out = json_io::Json::array();
    for (const auto& e : j) out.push_back(neutral_json(e));
    return out;
  }
  if (j.is_object()) {
    json_io::Json out = json_io::Json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[neutral_text(it.key())] = neutral_json(it.value());
    return out;
  }
  return j;
}
fs::path scratch_json(const std::string& name, const json_io::Json& j) {
  return scratch_file(name, neutral_json(j).dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace

void set_violation_handler(ViolationHandler h) { g_handler = h != nullptr ? h : &trap_on_violation; }

void set_report_fd(int fd) { g_report_fd = fd >= 0 ? fd : 2; }

void report_line(const std::string& text) { write_report(text); }

const Shipped& shipped(const std::string& data_dir) {
  static const Shipped s = [&] {
    Shipped r;
    auto db = hw_io::load_hardware_db(data_dir);
    auto lib = wl_io::load_model_library(data_dir);
    if (!db.ok() || !lib.ok()) {
      std::fprintf(stderr, "gpuplan fuzz: cannot load the shipped data from '%s':\n%s%s\n", data_dir.c_str(),
                   db.diagnostics().to_string().c_str(), lib.diagnostics().to_string().c_str());
      std::abort();
    }
    r.db = std::move(db).value();
    r.lib = std::move(lib).value();
    r.data_dir = data_dir;
    return r;
  }();
  return s;
}

void run_hw(std::string_view bytes, const Shipped& data) {
  const std::string file = "fuzz-hw.json";
  Diagnostics diags;
  const auto j = json_io::parse(bytes, file, diags);
  (void)diags.to_string();
  if (!j || !j->is_object()) return;
  const auto kind = j->find("kind");
  if (kind == j->end() || !kind->is_string()) return;
  const auto& k = kind->get_ref<const std::string&>();
  static hw::HardwareDb db = data.db;  // the shipped entities plus the one decoded now (removed again below)
  Diagnostics refs;
  auto with = [&](auto result, auto& into) {
    (void)result.diagnostics().to_string();
    if (!result.ok()) return;
    into.push_back(std::move(result).value());
    hw_io::check_references(db, refs);
    (void)refs.to_string();
    into.pop_back();
  };
  // Every decoder on every input (the fuzzer need not guess "kind" first); the matching one also gets checked.
  if (k == "gpu") with(hw_io::decode_gpu(*j, file), db.gpus);
  else (void)hw_io::decode_gpu(*j, file).diagnostics().to_string();
  if (k == "link") with(hw_io::decode_link(*j, file), db.links);
  else (void)hw_io::decode_link(*j, file).diagnostics().to_string();
  if (k == "node") with(hw_io::decode_node(*j, file), db.nodes);
  else (void)hw_io::decode_node(*j, file).diagnostics().to_string();
  if (k == "cluster") with(hw_io::decode_cluster(*j, file), db.clusters);
  else (void)hw_io::decode_cluster(*j, file).diagnostics().to_string();
  // A measured-efficiency table: decoded, then resolved onto the GPUs with the shipped tables (a GPU that gets a row
  // from it must price a GEMM to a finite, positive time), then the shipped resolution is restored.
  auto eff = hw_io::decode_efficiency(*j, file);
  (void)eff.diagnostics().to_string();
  if (k == "efficiency" && eff.ok()) {
    db.efficiency.push_back(std::move(eff).value());
    Diagnostics res;
    hw_io::resolve_efficiency(db, res);
    (void)res.to_string();
    if (!res.has_errors())
      for (const auto& g : db.gpus) {
        if (!g.efficiency || !g.peak(hw::Precision::bf16)) continue;
        const auto op = model::gemm_cost("fuzz", {512, 512, 512, 1}, hw::Precision::bf16, model::make_device(g));
        if (!(op.time.raw() > 0.0) || !std::isfinite(op.time.raw()))
          violated("a GEMM priced with a decoded efficiency row is not a positive finite time on " + g.info.id);
      }
    db.efficiency.pop_back();
    Diagnostics back;
    hw_io::resolve_efficiency(db, back);
    if (back.has_errors()) violated("the shipped efficiency tables no longer resolve: " + back.to_string());
  }
}

void run_model(std::string_view bytes, const Shipped& data) {
  const std::string file = "fuzz-model.json";
  Diagnostics diags;
  const auto j = json_io::parse(bytes, file, diags);
  if (!j) return;
  auto use = [&](const Result<wl::TransformerArch>& r) {
    (void)r.diagnostics().to_string();
    if (!r.ok()) return;
    check_arch_formulas(r.value());
    check_arch_training(r.value(), data);
  };
  use(wl_io::import_hf_config(*j, file));
  if (j->is_object() && j->contains("config")) use(wl_io::import_hf_config((*j)["config"], file, "/config"));

  // The model-file decoder reads a path: give it a copy named after the file's id, so that seeds stay valid.
  std::string stem = "fuzz-model";
  if (j->is_object() && j->contains("id") && (*j)["id"].is_string() && safe_file_stem((*j)["id"].get<std::string>()))
    stem = (*j)["id"].get<std::string>();
  const fs::path path = scratch_dir() / (stem + ".json");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto m = wl_io::load_model_file(path.string());
  (void)m.diagnostics().to_string();
  std::error_code ec;
  fs::remove(path, ec);
  if (m.ok()) check_arch_formulas(m->arch);
}

void run_scenario(std::string_view bytes, const Shipped& data) {
  const std::string file = "fuzz-scenario.json";
  Diagnostics diags;
  const auto j = json_io::parse(bytes, file, diags);
  if (!j || !j->is_object()) return;  // `gpuplan train --scenario` refuses a non-object the same way
  auto sc = wl_io::decode_training_scenario(*j, file);
  (void)sc.diagnostics().to_string();
  if (!sc.ok()) return;
  wl_io::TrainingScenario s = sc.value();
  // Only shipped models: a path would make the fuzzer read files.
  if (s.model.empty() || data.lib.find(s.model) == nullptr) s.model = "llama-3.1-8b";
  if (s.gpu.empty() && s.node.empty() && s.cluster.empty()) s.node = "dgx-h100";
  auto where = [&](const std::string& key) { return j->contains(key) ? file + ": /" + key : "--" + key; };
  Diagnostics rd;
  auto r = app::resolve_training(s, j->contains("global_batch"), data.db, data.lib, where, rd);
  (void)rd.to_string();
  if (!r) return;
  const auto layout = model::check_training_layout(r->arch, r->plan, r->sys);
  if (!r->pre.ok || !layout.ok) return;
  const auto est = model::estimate_training(r->arch, r->plan, r->sys, Explain::on);
  if (!est.feasibility.ok) return;
  check_estimate(est);
}

/// File-name fuzzing: an argument that is exactly one of these tokens becomes a hostile path (the fuzzer may not
/// spell paths itself: arguments with '/' or ".." are refused so that it cannot read files outside its folder).
/// Endless and special devices, a folder, a path that is not UTF-8, a 4 KiB path, and generated files: 200,000
/// nesting levels, a key twice, 65 MiB (created once per process in the scratch folder).
std::string special_path(const std::string& a) {
  if (a.size() < 2 || a[0] != '@') return a;
  static const fs::path dir = scratch_dir();
  if (a == "@zero") return "/dev/zero";
  if (a == "@urandom") return "/dev/urandom";
  if (a == "@null") return "/dev/null";
  if (a == "@full") return "/dev/full";
  if (a == "@dir") return dir.string();
  if (a == "@long") return dir.string() + "/" + std::string(4096, 'x') + ".json";
  if (a == "@nonutf8") {
    static const fs::path p = scratch_file("\xff\xfe-scenario.json", R"({"model": "llama-3.1-8b", "global_batch": 8})");
    return p.string();
  }
  if (a == "@deep") {
    static const fs::path p = scratch_file("deep.json", std::string(200000, '['));
    return p.string();
  }
  if (a == "@dup") {
    static const fs::path p = scratch_file("dup.json", R"({"model": "llama-3.1-8b", "model": "mixtral-8x7b"})");
    return p.string();
  }
  if (a == "@big") {
    static const fs::path p = scratch_file("big.json", std::string(65u << 20, ' ') + "{}");
    return p.string();
  }
  return a;
}

void run_cli(std::string_view bytes) {
  std::vector<std::string> args{"gpuplan"};
  std::string cur;
  for (const char c : bytes) {
    if (c == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) args.push_back(cur);
  if (args.size() > 64) return;
  for (auto& a : args) {
    if (a.find('/') != std::string::npos || a.find("..") != std::string::npos) return;
    a = special_path(a);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());

  // As cli/main.cpp builds it, less `validate` (runs every validation case), `schema` (constant output), `simulate`
  // (--requests up to its range is minutes of legitimate work: a timeout, not a finding), `calibrate`/`bench` (files,
  // GPU) and `report`/`drill` (their own paths above).
  CLI::App app{"gpuplan (fuzz)"};
  app.set_version_flag("--version", "gpuplan fuzz");
  app.require_subcommand(1);
  app.fallthrough();
  cli::GlobalOptions g;
  app.add_option("--data-dir", g.data_dir, "data directory");
  int rc = cli::kExitOk;
  cli::register_hw(app, g, rc);
  cli::register_model(app, g, rc);
  cli::register_train(app, g, rc);
  cli::register_roofline(app, g, rc);
  cli::register_kv(app, g, rc);
  cli::register_serve(app, g, rc);
  cli::register_collective(app, g, rc);
  cli::register_mfu(app, g, rc);
  cli::register_pipeline(app, g, rc);
  cli::register_compress(app, g, rc);
  cli::guard_flag_values(app);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    (void)e;
  }
  if (rc != cli::kExitOk && rc != cli::kExitInvalid && rc != cli::kExitInfeasible)
    violated(fmt::format("CLI returned exit code {}", rc));
}

void run_calib(std::string_view bytes, const Shipped& data) {
  const fs::path path = scratch_file("fuzz-calib.json", bytes);
  // As samples: read, fit for two GPUs (one with NVLink collectives data in the shipped samples), write, read back.
  auto samples = calib::read_samples(path.string());
  (void)samples.diagnostics().to_string();
  if (samples.ok()) {
    for (const char* gpu_id : {"h100-sxm5-80gb", "h200-sxm-141gb"}) {
      const auto* gpu = data.db.find_gpu(gpu_id);
      if (gpu == nullptr) continue;
      auto fitted = calib::fit_profile({samples.value()}, *gpu, data.db);
      (void)fitted.diagnostics().to_string();
      if (!fitted.ok()) continue;
      check_profile(fitted.value());
      const fs::path written = scratch_file("fuzz-calib-profile.json", calib::profile_json(fitted.value()));
      auto back = calib::read_profile(written.string());
      if (!back.ok())
        violated("a fitted profile does not read back: " + back.diagnostics().to_string());
      else
        check_profile_in_model(back.value(), data);
    }
  }
  // As a profile.
  auto profile = calib::read_profile(path.string());
  (void)profile.diagnostics().to_string();
  if (profile.ok()) {
    check_profile(profile.value());
    check_profile_in_model(profile.value(), data);
  }
}

void run_serving_scenario(std::string_view bytes, const Shipped& data) {
  const std::string file = "fuzz-serving.json";
  Diagnostics diags;
  auto j = json_io::parse(bytes, file, diags);
  (void)diags.to_string();
  if (!j || !j->is_object()) return;  // `gpuplan serve --scenario` refuses a non-object the same way
  library_model_only(*j, "model", "llama-3.1-8b", data.lib, /*add_when_missing=*/true);
  library_model_only(*j, "draft_model", "bench-llama-1b-like", data.lib, /*add_when_missing=*/false);
  auto sc = wl_io::decode_serving_scenario(*j, file);
  (void)sc.diagnostics().to_string();
  if (sc.ok()) {
    auto where = [&](const std::string& key) { return j->contains(key) ? file + ": /" + key : "--" + key; };
    Diagnostics rd;
    const auto r = app::resolve_serving(sc.value(), data.data_dir, false, data.db, data.lib, where, rd);
    (void)rd.to_string();
    if (r && r->planner()) {
      check_plan(model::plan_serving(r->arch, r->params, r->perf, r->traffic(), r->sla, r->sys, r->plan_options(),
                                     Explain::on));
    } else if (r) {
      model::ServingMemoryPlan mp = r->memory;
      mp.tp = r->perf.tp;
      mp.pp = r->perf.pp;
      mp.context = r->input_tokens + r->output_tokens;
      mp.concurrency = 1;
      const auto mem = model::serving_memory(r->arch, r->params, *r->sys.gpu, mp, Explain::on);
      const std::int64_t cap = std::min(mem.max_concurrency, r->perf.max_batch);
      if (cap >= 1) {
        const std::int64_t b = std::min<std::int64_t>(r->batch.value_or(cap), cap);
        // One replica may be unpriceable (+inf: a pipeline across nodes without a scale-out link; the CLI then says
        // so, exit 3), never NaN or negative.
        auto not_nan = [](double v, const char* what) {
          if (std::isnan(v) || v < 0) violated(fmt::format("{} = {} (expected >= 0, not NaN)", what, v));
        };
        const auto ss = model::steady_state(r->arch, r->perf, b, r->input_tokens, r->output_tokens, r->sys, Explain::on);
        not_nan(ss.iteration.raw(), "steady_state.iteration_s");
        not_nan(ss.ttft.raw(), "steady_state.ttft_s");
        not_nan(ss.output_tokens_per_s, "steady_state.output_tokens_per_s");
        not_nan(model::prefill_time(r->arch, r->perf, 1, r->input_tokens, r->sys).raw(), "prefill_time_s");
        not_nan(model::decode_step_time(r->arch, r->perf, b, r->input_tokens + r->output_tokens / 2, r->sys).raw(),
                "decode_step_time_s");
      }
    }
  }
  // The whole command, as a user runs it.
  const std::uint64_t h = input_hash(bytes);
  static const char* const formats[] = {"text", "md", "json", "csv"};
  std::vector<std::string> args{"serve", "--scenario", scratch_json("fuzz-serving-cli.json", *j).string(), "--format",
                                formats[h % 4]};
  if ((h >> 2) % 4 == 0) args.emplace_back("--explain");
  const auto [rc, output] = run_gpuplan(args);
  check_cli_run("serve --scenario", rc, output);
}

void run_plan(std::string_view bytes, const Shipped& data) {
  const std::string file = "fuzz-plan.json";
  Diagnostics diags;
  auto j = json_io::parse(bytes, file, diags);
  (void)diags.to_string();
  if (!j) return;
  auto plan = wl_io::decode_plan(*j, file);  // the decoder on the input as it is
  (void)plan.diagnostics().to_string();
  if (!j->is_object()) return;

  // Bounded work: a small plan that the report builds in well under a second even instrumented.
  auto truncate = [&](const char* key, std::size_t n) {
    auto it = j->find(key);
    if (it != j->end() && it->is_array() && it->size() > n) it->erase(it->begin() + static_cast<std::ptrdiff_t>(n), it->end());
  };
  truncate("options", 2);
  truncate("training", 1);
  truncate("serving", 2);
  constexpr long long kMaxGpus = 8;
  if (auto it = j->find("options"); it != j->end() && it->is_array())
    for (auto& o : *it) {
      if (!o.is_object()) continue;
      const auto m = o.find("max_gpus");
      if (m == o.end() || (m->is_number() && m->get<double>() > double(kMaxGpus))) o["max_gpus"] = kMaxGpus;
    }
  for (const char* items : {"training", "serving"})
    if (auto it = j->find(items); it != j->end() && it->is_array())
      for (auto& item : *it)
        if (item.is_object() && item.contains("scenario")) {
          library_model_only(item["scenario"], "model", "llama-3.1-8b", data.lib, /*add_when_missing=*/false);
          library_model_only(item["scenario"], "draft_model", "bench-llama-1b-like", data.lib, false);
        }

  const std::uint64_t h = input_hash(bytes);
  static const char* const formats[] = {"md", "text", "json", "csv", "html"};
  const std::string format = formats[h % 5];
  std::vector<std::string> args{"report", scratch_json("fuzz-plan-cli.json", *j).string(), "--threads", "1",
                                "--format", format};
  if ((h >> 3) % 4 == 0) args.emplace_back("--explain");
  const auto [rc, output] = run_gpuplan(args);
  check_cli_run("report", rc, output);
  if (format == "json" && rc != cli::kExitInvalid && !nlohmann::json::accept(output))
    violated("report --format json: the output is not JSON");
}

}  // namespace gpuplan::fuzz
