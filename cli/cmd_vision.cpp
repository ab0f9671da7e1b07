#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/vision.hpp"
#include "gpuplan/wl_io/vision_io.hpp"
#include "resolve.hpp"
#include "vision_cmd.hpp"

namespace gpuplan::cli {

bool vision_device(const std::string& data_dir, const hw::HardwareDb& db, const std::string& gpu, bool no_calibration,
                   Diagnostics& diags, model::TrainingSystem& sys, model::Device& device, model::ServingPerfPlan& launch,
                   const std::string& node) {
  auto where = [](const std::string& key) { return "--" + key; };
  if (!resolve_hardware(gpu, node, "", db, where, diags, sys)) return false;
  if (!load_calibration(data_dir, sys, no_calibration, diags)) return false;
  // PyTorch's scaled_dot_product_attention runs FlashAttention-2 kernels (ViT's attention).
  device = model::sustained_device(*sys.gpu, sys.efficiency, wl::AttentionKernel::fa2);
  if (sys.efficiency) model::use_measured_overheads(launch, *sys.efficiency);
  return true;
}

namespace {

namespace u = gpuplan::units;

/// The flags each vision command takes (long names); every other flag given is refused by name.
const std::set<std::string>& accepted(VisionCommand which) {
  static const std::set<std::string> serve{"model",       "gpu",          "batch",        "compute",
                                           "enforce-eager", "kernel-overhead-us", "cpu-per-kernel-us",
                                           "no-calibration", "format",      "explain",      "resolution",
                                           "fold-bn",     "fuse-epilogue", "autocast",
                                           "data-dir"};
  static const std::set<std::string> train{"model",      "gpu",        "gpus",    "global-batch",   "micro-batch",
                                           "precision",  "optimizer",  "format",  "explain",        "resolution",
                                           "autocast",   "no-calibration", "data-dir"};
  return which == VisionCommand::serve ? serve : train;
}

std::string long_name(const CLI::Option& o) {
  const auto& l = o.get_lnames();
  return l.empty() ? o.get_name() : l.front();
}

const CLI::Option* given(const CLI::App& cmd, const std::string& name) {
  const CLI::Option* o = cmd.get_option_no_throw("--" + name);
  return o != nullptr && o->count() > 0 ? o : nullptr;
}

template <class T>
std::optional<T> value(const CLI::App& cmd, const std::string& name) {
  const CLI::Option* o = given(cmd, name);
  if (o == nullptr) return std::nullopt;
  return o->as<T>();
}

std::string join(const std::set<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "--" : ", --") + n;
  return s;
}

double gib(u::Bytes b) { return u::to_GiB(b); }

u::Bytes capacity(const hw::GpuSpec& gpu) {
  return gpu.memory.device_reported ? *gpu.memory.device_reported : gpu.memory.capacity_label;
}

struct Setup {
  std::string data_dir;
  hw::HardwareDb db;
  model::TrainingSystem sys;
  model::Device device;
  model::ServingPerfPlan launch;
};

/// Hardware, calibration profile, the sustained device and the per-kernel costs (measured where the profile has them).
bool setup(const GlobalOptions& g, const CLI::App& cmd, const std::string& gpu_name, bool no_calibration,
           Diagnostics& diags, Setup& s) {
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return false;
  s.data_dir = *dir;
  auto db = hw_io::load_hardware_db(*dir);
  diags.append(db.diagnostics());
  if (!db.ok()) return false;
  s.db = std::move(db).value();
  if (!vision_device(s.data_dir, s.db, gpu_name, no_calibration, diags, s.sys, s.device, s.launch)) return false;
  if (auto v = value<double>(cmd, "kernel-overhead-us")) {
    if (!(*v >= 0)) diags.error("", "--kernel-overhead-us", "must be ≥ 0");
    (given(cmd, "enforce-eager") ? s.launch.kernel_overhead_eager : s.launch.kernel_overhead_graph) = u::microseconds(*v);
    s.launch.overhead_origin += fmt::format("; per-kernel overhead {} µs (--kernel-overhead-us)", plain_number(*v));
  }
  if (auto v = value<double>(cmd, "cpu-per-kernel-us")) {
    if (!(*v >= 0)) diags.error("", "--cpu-per-kernel-us", "must be ≥ 0");
    s.launch.cpu_per_kernel = u::microseconds(*v);
    s.launch.overhead_origin += fmt::format("; CPU {} µs per eager kernel (--cpu-per-kernel-us)", plain_number(*v));
  }
  return !diags.has_errors();
}

std::optional<bool> parse_bool(const std::string& s) {
  if (s == "true" || s == "on" || s == "1") return true;
  if (s == "false" || s == "off" || s == "0") return false;
  return std::nullopt;
}

nlohmann::json pass_json(const model::VisionPassCost& p) {
  return {{"time_s", p.time.raw()},
          {"gpu_time_s", p.gpu_time.raw()},
          {"cpu_issue_s", p.cpu_issue.raw()},
          {"kernels", p.kernels},
          {"gemm_s", p.gemm.raw()},
          {"depthwise_s", p.depthwise.raw()},
          {"attention_s", p.attention.raw()},
          {"elementwise_s", p.elementwise.raw()},
          {"casts_s", p.casts.raw()}};
}

Section pass_section(const std::string& title, const model::VisionPassCost& p) {
  return {title,
          {{"time", u::format(p.time)},
           {"GPU time", u::format(p.gpu_time)},
           {"CPU issue (eager)", u::format(p.cpu_issue)},
           {"kernels", fmt::format("{:g}", p.kernels)},
           {"GEMMs (conv, linear)", u::format(p.gemm)},
           {"depthwise convs", u::format(p.depthwise)},
           {"attention", u::format(p.attention)},
           {"elementwise", u::format(p.elementwise)},
           {"autocast casts", u::format(p.casts)}}};
}

int run_serve(const GlobalOptions& g, const CLI::App& cmd, const VisionFlags& v, const wl_io::VisionEntry& m) {
  Diagnostics diags;
  Setup s;
  const std::string gpu = value<std::string>(cmd, "gpu").value_or("h100-sxm5-80gb");
  if (!setup(g, cmd, gpu, given(cmd, "no-calibration") != nullptr, diags, s)) return report(diags);
  model::VisionRunPlan plan;
  plan.launch = s.launch;
  plan.batch = value<long long>(cmd, "batch").value_or(1);
  const std::string compute = value<std::string>(cmd, "compute").value_or("bf16");
  plan.compute = compute == "fp16" ? hw::Precision::fp16
                 : compute == "fp8" ? hw::Precision::fp8
                 : compute == "int8" ? hw::Precision::int8
                                     : hw::Precision::bf16;
  if (compute == "fp4") diags.error("", "--compute", "fp4 is not modelled for vision models (bf16, fp16, fp8, int8)");
  if (!s.sys.gpu->peak(plan.compute))
    diags.error("", "--compute", fmt::format("{} has no {} tensor cores", s.sys.gpu->info.id, compute));
  // Inference holds its weights in the compute type (model.to(bf16), an engine's int8 weights); --autocast true
  // prices fp32 weights under torch.autocast instead.
  plan.autocast = false;
  if (v.autocast) {
    auto b = parse_bool(*v.autocast);
    const bool sixteen = plan.compute == hw::Precision::bf16 || plan.compute == hw::Precision::fp16;
    if (!b) diags.error("", "--autocast", fmt::format("'{}' is not true or false", *v.autocast));
    else if (*b && !sixteen)
      diags.error("", "--autocast", fmt::format("autocast casts fp32 weights to bf16/fp16, not to {}", compute));
    else plan.autocast = *b;
  }
  plan.cuda_graphs = given(cmd, "enforce-eager") == nullptr;
  plan.fold_bn = v.fold_bn;
  plan.fuse_epilogue = v.fuse_epilogue;
  if (v.resolution)
    if (const std::string why = wl::vision_input_problem(m.arch, *v.resolution); !why.empty())
      diags.error("", "--resolution", why);
  if (diags.has_errors()) return report(diags);
  report(diags);  // notes
  const auto graph = wl::build_vision_graph(m.arch, v.resolution.value_or(0));
  const Explain ex = g.explain ? Explain::on : Explain::off;
  const auto r = model::vision_inference(graph, plan, s.device, ex);
  const Format f = parse_format(g.format);
  const double macs = static_cast<double>(graph.macs());
  if (f == Format::json) {
    nlohmann::json j{{"workload", "vision"},
                     {"model", m.arch.id},
                     {"gpu", s.sys.gpu->info.id},
                     {"batch", plan.batch},
                     {"resolution_px", graph.resolution},
                     {"compute", std::string(hw::to_string(plan.compute))},
                     {"autocast", plan.autocast},
                     {"cuda_graphs", plan.cuda_graphs},
                     {"fold_bn", plan.fold_bn},
                     {"fuse_epilogue", plan.fuse_epilogue},
                     {"latency_s", r.latency.raw()},
                     {"throughput_images_per_s", r.images_per_second},
                     {"params", graph.parameters()},
                     {"macs_per_image", graph.macs()},
                     {"flops_per_image", 2.0 * macs},
                     {"forward", pass_json(r.pass)}};
    if (g.explain) j["derivation"] = derivation_json(r.derivation);
    out(json_text(j));
    return kExitOk;
  }
  std::vector<Section> sec;
  sec.push_back({fmt::format("Vision inference: {} on {}", m.name, s.sys.gpu->info.id),
                 {{"batch", fmt::format("{} images of {}×{} px", plan.batch, graph.resolution, graph.resolution)},
                  {"precision", fmt::format("{}{}", hw::to_string(plan.compute), plan.autocast ? " (autocast)" : "")},
                  {"execution", fmt::format("{}{}{}", plan.cuda_graphs ? "CUDA graph" : "eager",
                                            plan.fold_bn ? ", BN folded" : "",
                                            plan.fuse_epilogue ? ", epilogue fusion" : "")},
                  {"latency", u::format(r.latency)},
                  {"throughput", fmt::format("{} images/s", u::format_number(r.images_per_second, 4))},
                  {"parameters", u::format_number(static_cast<double>(graph.parameters()), 4)},
                  {"MACs per image", u::format_number(macs, 4)}}});
  sec.push_back(pass_section("Forward pass", r.pass));
  out(render_sections(sec, f));
  if (g.explain) out(render_derivation(r.derivation, f));
  return kExitOk;
}

int run_train(const GlobalOptions& g, const CLI::App& cmd, const VisionFlags& v, const wl_io::VisionEntry& m) {
  Diagnostics diags;
  Setup s;
  const auto gpu = value<std::string>(cmd, "gpu");
  if (!gpu) {
    diags.error("", "--gpu", "no GPU given");
    return report(diags);
  }
  long long gpus = 1;
  if (auto n = value<std::string>(cmd, "gpus")) {
    const bool digits = !n->empty() && n->size() <= 6 && std::all_of(n->begin(), n->end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    gpus = digits ? std::stoll(*n) : 0;
    if (gpus < 1) {
      diags.error("", "--gpus", fmt::format("'{}' is not a GPU count (a vision train takes one count, no range)", *n));
      return report(diags);
    }
  }
  if (!setup(g, cmd, *gpu, given(cmd, "no-calibration") != nullptr, diags, s)) return report(diags);
  model::VisionTrainPlan plan;
  plan.run.launch = s.launch;
  plan.run.cuda_graphs = false;
  const auto global_given = value<long long>(cmd, "global-batch");
  if (!global_given) {
    diags.error("", "--global-batch", "no global batch given (images per step)");
    return report(diags);
  }
  const long long global = *global_given;
  if (global < 1 || global % gpus != 0)
    diags.error("", "--global-batch",
                fmt::format("{} images do not split evenly over {} GPU{}", global, gpus, gpus == 1 ? "" : "s"));
  const long long per_gpu = std::max(1LL, global / gpus);
  const long long micro = value<long long>(cmd, "micro-batch").value_or(per_gpu);
  if (micro < 1 || per_gpu % micro != 0)
    diags.error("", "--micro-batch",
                fmt::format("{} must be a positive divisor of the {} images per GPU (global = micro × accumulation "
                            "steps × GPUs)",
                            micro, per_gpu));
  plan.run.batch = micro;
  plan.accumulation = micro >= 1 ? per_gpu / std::max(1LL, micro) : 1;
  if (gpus > 1) {
    const int node_gpus = s.sys.node != nullptr ? s.sys.node->gpus : 0;
    if (gpus > node_gpus)
      diags.error("", "--gpus",
                  fmt::format("{} GPUs: data-parallel training of a vision model is modelled inside one node ({} "
                              "holds {})",
                              gpus, s.sys.node != nullptr ? s.sys.node->info.id : std::string("no node"), node_gpus));
    else
      plan.dp = model::training_comm_group(static_cast<int>(gpus), 1, s.sys);
  }
  const std::string prec = value<std::string>(cmd, "precision").value_or("bf16");
  if (prec == "bf16" || prec == "fp16") {
    plan.run.compute = prec == "fp16" ? hw::Precision::fp16 : hw::Precision::bf16;
    plan.run.autocast = true;
  } else if (prec == "tf32" || prec == "fp32") {
    plan.run.compute = prec == "tf32" ? hw::Precision::tf32 : hw::Precision::fp32;
    plan.run.autocast = false;
  } else {
    diags.error("", "--precision",
                fmt::format("'{}': vision training is modelled in bf16, fp16 (autocast), tf32 or fp32", prec));
  }
  if (v.autocast) {
    auto b = parse_bool(*v.autocast);
    if (!b) diags.error("", "--autocast", fmt::format("'{}' is not true or false", *v.autocast));
    else if (*b && !plan.run.autocast) diags.error("", "--autocast", "autocast needs --precision bf16 or fp16");
    else plan.run.autocast = *b;
  }
  const std::string opt = value<std::string>(cmd, "optimizer").value_or("sgd");
  if (opt == "sgd") plan.optimizer = model::VisionOptimizer::sgd_momentum;
  else if (opt == "adamw") plan.optimizer = model::VisionOptimizer::adamw;
  else diags.error("", "--optimizer", fmt::format("'{}': vision training takes sgd (with momentum) or adamw", opt));
  if (!s.sys.gpu->peak(plan.run.compute))
    diags.error("", "--precision", fmt::format("{} has no {} peak in its data", s.sys.gpu->info.id, prec));
  if (v.resolution)
    if (const std::string why = wl::vision_input_problem(m.arch, *v.resolution); !why.empty())
      diags.error("", "--resolution", why);
  if (diags.has_errors()) return report(diags);
  report(diags);  // notes
  const auto graph = wl::build_vision_graph(m.arch, v.resolution.value_or(0));
  const Explain ex = g.explain ? Explain::on : Explain::off;
  const auto r = model::vision_training(graph, plan, s.device, ex);
  const u::Bytes cap = capacity(*s.sys.gpu);
  const bool fits = r.memory.total() <= cap;
  const Format f = parse_format(g.format);
  if (f == Format::json) {
    nlohmann::json j{{"workload", "vision"},
                     {"model", m.arch.id},
                     {"gpu", s.sys.gpu->info.id},
                     {"gpus", gpus},
                     {"global_batch", global},
                     {"micro_batch", micro},
                     {"accumulation_steps", plan.accumulation},
                     {"resolution_px", graph.resolution},
                     {"precision", prec},
                     {"autocast", plan.run.autocast},
                     {"optimizer", model::to_string(plan.optimizer)},
                     {"step_time_s", r.step_time.raw()},
                     {"images_per_s", r.images_per_second},
                     {"forward", pass_json(r.forward)},
                     {"backward", pass_json(r.backward)},
                     {"optimizer_s", r.optimizer.raw()},
                     {"allreduce_s", r.allreduce.raw()},
                     {"exposed_comm_s", r.exposed_comm.raw() + r.comm_slowdown.raw() + r.bucket_copies.raw()},
                     {"model_flops_per_step", r.model_flops.raw()},
                     {"mfu", r.mfu},
                     {"memory_GiB",
                      {{"weights", gib(r.memory.weights)},
                       {"weight_copies", gib(r.memory.weight_copies)},
                       {"gradients", gib(r.memory.gradients)},
                       {"optimizer", gib(r.memory.optimizer)},
                       {"activations", gib(r.memory.activations)},
                       {"total", gib(r.memory.total())},
                       {"capacity", gib(cap)}}},
                     {"fits", fits}};
    if (g.explain) j["derivation"] = derivation_json(r.derivation);
    out(json_text(j));
    return fits ? kExitOk : kExitInfeasible;
  }
  std::vector<Section> sec;
  sec.push_back({fmt::format("Vision training: {} on {}", m.name, s.sys.gpu->info.id),
                 {{"batch", fmt::format("{} images of {}×{} px per step ({} × {} per GPU), {} GPU{}", global,
                                        graph.resolution, graph.resolution, micro, plan.accumulation, gpus,
                                        gpus == 1 ? "" : "s (DDP)")},
                  {"precision", fmt::format("{}{}", prec, plan.run.autocast ? " (autocast, fp32 weights)" : "")},
                  {"optimizer", model::to_string(plan.optimizer)},
                  {"step time", u::format(r.step_time)},
                  {"throughput", fmt::format("{} images/s", u::format_number(r.images_per_second, 4))},
                  {"MFU", fmt::format("{:.1f}%", 100.0 * r.mfu)},
                  {"DDP gradient all-reduce", gpus > 1 ? fmt::format("{}, {} not hidden (incl. GEMMs slowed beside it and "
                                                                     "bucket copies)",
                                                                     u::format(r.allreduce),
                                                                     u::format(r.exposed_comm + r.comm_slowdown + r.bucket_copies))
                                                       : std::string("none (one GPU)")}}});
  sec.push_back(pass_section("Forward pass (one micro-batch)", r.forward));
  sec.push_back(pass_section("Backward pass (one micro-batch)", r.backward));
  sec.push_back({"Memory",
                 {{"weights (fp32)", u::format(r.memory.weights)},
                  {"autocast weight copies", u::format(r.memory.weight_copies)},
                  {"gradients (fp32)", u::format(r.memory.gradients)},
                  {"optimizer states", u::format(r.memory.optimizer)},
                  {"saved activations", u::format(r.memory.activations)},
                  {"total", fmt::format("{} of {}{}", u::format(r.memory.total()), u::format(cap),
                                        fits ? "" : ": does not fit")}}});
  out(render_sections(sec, f));
  if (g.explain) out(render_derivation(r.derivation, f));
  return fits ? kExitOk : kExitInfeasible;
}

}  // namespace

void add_vision_options(CLI::App& cmd, VisionFlags& v, VisionCommand which) {
  cmd.add_option("--resolution", v.resolution, "vision models: input height and width in px (default: the model's)")
      ->check(CLI::Range(16LL, 1024LL));
  cmd.add_option("--autocast", v.autocast,
                 "vision models: fp32 weights cast to bf16/fp16 every forward (torch.autocast; default: train true, "
                 "serve false: weights held in the compute type)");
  if (which == VisionCommand::serve) {
    cmd.add_flag("--fold-bn", v.fold_bn, "vision models: batch norm folded into the convolutions (inference engines)");
    cmd.add_flag("--fuse-epilogue", v.fuse_epilogue,
                 "vision models: activation and residual add fused into the conv/GEMM epilogue (TensorRT-like)");
  }
}

std::optional<int> run_vision_if_named(const GlobalOptions& g, const CLI::App& cmd, const VisionFlags& v,
                                       VisionCommand which) {
  const std::vector<std::string> vision_only = which == VisionCommand::serve
                                                   ? std::vector<std::string>{"resolution", "autocast", "fold-bn", "fuse-epilogue"}
                                                   : std::vector<std::string>{"resolution", "autocast"};
  auto refuse_vision_flags = [&](const std::string& why) -> std::optional<int> {
    Diagnostics diags;
    for (const auto& n : vision_only)
      if (given(cmd, n)) diags.error("", "--" + n, fmt::format("applies to vision models only; {}", why));
    if (diags.has_errors()) return report(diags);
    return std::nullopt;
  };
  const auto name = value<std::string>(cmd, "model");
  if (!name) return refuse_vision_flags("no -m/--model names one");
  Diagnostics diags;
  const auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return std::nullopt;  // the transformer command reports the missing data directory
  auto lib = wl_io::load_vision_library(*dir);
  if (!lib.ok()) {
    diags.append(lib.diagnostics());
    return report(diags);
  }
  const wl_io::VisionEntry* m = lib->find(*name);
  if (m == nullptr) {
    if (which == VisionCommand::serve && value<std::string>(cmd, "compute") == std::optional<std::string>("int8"))
      diags.error("", "--compute", fmt::format("int8 tensor-core compute is modelled for vision models, not for '{}'", *name));
    if (diags.has_errors()) return report(diags);
    return refuse_vision_flags(fmt::format("'{}' is not a vision model", *name));
  }
  // Every flag given must mean something for a vision model.
  const auto& ok = accepted(which);
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->count() == 0) continue;
    const std::string n = long_name(*o);
    if (ok.count(n) == 0 && n != "help")
      diags.error("", "--" + n,
                  fmt::format("does not apply to a vision model ('{}', {}); `gpuplan {}` takes {} for one",
                              m->arch.id, wl::to_string(m->arch.family),
                              which == VisionCommand::serve ? "serve" : "train", join(ok)));
  }
  for (const auto& extra : cmd.remaining())
    diags.error("", extra, fmt::format("does not apply to a vision model ('{}')", m->arch.id));
  if (diags.has_errors()) return report(diags);
  return which == VisionCommand::serve ? run_serve(g, cmd, v, *m) : run_train(g, cmd, v, *m);
}

}  // namespace gpuplan::cli
