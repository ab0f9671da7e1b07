#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/vision.hpp"
#include "gpuplan/wl_io/onnx_io.hpp"
#include "gpuplan/wl_io/vision_io.hpp"
#include "gpuplan/app/resolve.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "vision_cmd.hpp"

namespace gpuplan::cli {

namespace {

namespace u = gpuplan::units;

/// The flags each vision command takes (long names); every other flag given is refused by name.
const std::set<std::string>& accepted(VisionCommand which) {
  static const std::set<std::string> serve{"model",       "gpu",          "batch",        "compute",
                                           "enforce-eager", "kernel-overhead-us", "cpu-per-kernel-us",
                                           "no-calibration", "format",      "explain",      "resolution",
                                           "fold-bn",     "fuse-epilogue", "autocast",
                                           "data-dir"};
  static const std::set<std::string> train{"model",      "gpu",        "node",    "gpus",           "global-batch",
                                           "micro-batch", "precision", "optimizer", "format",       "explain",
                                           "resolution", "autocast",   "no-calibration", "data-dir", "loader-workers",
                                           "decode",     "decode-rate", "storage-GBps", "image-kB", "epochs",
                                           "epoch-images", "fused-training"};
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
           Diagnostics& diags, Setup& s, const std::string& node = "") {
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return false;
  s.data_dir = *dir;
  auto db = hw_io::load_hardware_db(*dir);
  diags.append(db.diagnostics());
  if (!db.ok()) return false;
  s.db = std::move(db).value();
  if (!vision_device(s.data_dir, s.db, gpu_name, no_calibration, diags, s.sys, s.device, s.launch, node)) return false;
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

/// The input pipeline of `train` from its flags: none unless --loader-workers (CPU decode) or --decode gpu is given.
void data_pipeline_plan(const CLI::App& cmd, const VisionFlags& v, const Setup& s, long long gpus, Diagnostics& diags,
                        model::VisionTrainPlan& plan) {
  if (!v.loader_workers && !v.decode) {
    for (const char* n : {"decode-rate", "storage-GBps", "image-kB"})
      if (given(cmd, n))
        diags.error("", std::string("--") + n, "describes the input pipeline: give --loader-workers N (CPU decode) or --decode gpu");
    return;
  }
  model::DataPipelinePlan dp;
  const std::string dec = v.decode.value_or("cpu");
  if (dec == "gpu") dp.decode = model::ImageDecode::gpu;
  else if (dec != "cpu") diags.error("", "--decode", fmt::format("'{}': the images are decoded on the cpu or the gpu", dec));
  if (dp.decode == model::ImageDecode::cpu) {
    if (!v.loader_workers) diags.error("", "--decode", "CPU decode needs the DataLoader's worker processes per GPU: --loader-workers N");
    else if (*v.loader_workers < 1 || *v.loader_workers > 4096)
      diags.error("", "--loader-workers", fmt::format("{} is not a worker count (1 to 4096 per GPU)", *v.loader_workers));
    else dp.workers_per_gpu = static_cast<int>(*v.loader_workers);
  } else if (v.loader_workers) {
    diags.error("", "--loader-workers", "GPU decode (--decode gpu) has no CPU decode workers to count");
  }
  if (v.decode_rate) {
    if (!(*v.decode_rate > 0) || !std::isfinite(*v.decode_rate))
      diags.error("", "--decode-rate", fmt::format("{} is not a positive rate (images/s)", *v.decode_rate));
    else if (dp.decode == model::ImageDecode::cpu) {
      dp.cpu_images_per_s_per_core = *v.decode_rate;
      dp.cpu_rate_origin = Origin::user("--decode-rate (images/s per core)");
    } else {
      dp.gpu_images_per_s = *v.decode_rate;
      dp.gpu_rate_origin = Origin::user("--decode-rate (images/s per GPU)");
    }
  }
  if (s.sys.node != nullptr && s.sys.node->host_cores) {
    dp.node_cores = *s.sys.node->host_cores;
    dp.cores_origin = Origin::datasheet(s.sys.node->info.cite("/host/cores"));
  } else if (dp.decode == model::ImageDecode::cpu) {
    diags.note("", "--node",
               fmt::format("{} has no CPU core count in its data: the {} workers are not capped by cores",
                           s.sys.node != nullptr ? s.sys.node->info.id : std::string("no node"), dp.workers_per_gpu));
    dp.cores_origin = Origin::assumption("the node's cores are not in its data");
  }
  dp.gpus_on_node = static_cast<int>(gpus);
  if (v.storage_GBps) {
    if (!(*v.storage_GBps > 0) || !std::isfinite(*v.storage_GBps))
      diags.error("", "--storage-GBps", fmt::format("{} is not a positive bandwidth (GB/s)", *v.storage_GBps));
    else {
      dp.storage = u::gb_per_s(*v.storage_GBps);
      dp.storage_origin = Origin::user("--storage-GBps (the node's dataset read bandwidth)");
    }
  }
  if (v.image_kB) {
    if (!(*v.image_kB > 0) || !std::isfinite(*v.image_kB))
      diags.error("", "--image-kB", fmt::format("{} is not a positive size (kB per encoded image)", *v.image_kB));
    else {
      dp.bytes_per_image = u::bytes(*v.image_kB * 1000.0);
      dp.bytes_origin = Origin::user("--image-kB");
    }
  }
  plan.data = dp;
}

nlohmann::json data_json(const model::DataPipeline& d, const model::DataPipelinePlan& p) {
  return {{"decode", model::to_string(p.decode)},
          {"workers_per_gpu", p.workers_per_gpu},
          {"effective_workers", d.effective_workers},
          {"node_cores", p.node_cores},
          {"cpu_images_per_s_per_core", p.cpu_images_per_s_per_core},
          {"cpu_images_per_s_per_gpu", d.cpu_images_per_s},
          {"storage_images_per_s_per_gpu", d.storage_images_per_s},
          {"loader_images_per_s_per_gpu", d.loader_images_per_s},
          {"loader_time_s", d.loader.raw()},
          {"gpu_decode_s", d.gpu_decode.raw()},
          {"gpu_utilisation", d.gpu_utilisation},
          {"bound", d.bound}};
}

Section data_section(const model::DataPipeline& d, const model::DataPipelinePlan& p) {
  Section sec{"Input pipeline", {}};
  if (p.decode == model::ImageDecode::cpu)
    sec.rows.push_back({"JPEG decode + augmentation",
                        fmt::format("CPU: {} workers per GPU, {} with a core of their own ({}), {} images/s each → {} images/s per GPU",
                                    p.workers_per_gpu, d.effective_workers,
                                    p.node_cores > 0 ? fmt::format("{} cores over {} GPU{}", p.node_cores, p.gpus_on_node,
                                                                   p.gpus_on_node == 1 ? "" : "s")
                                                     : std::string("cores not in the node's data"),
                                    u::format_number(p.cpu_images_per_s_per_core, 4),
                                    u::format_number(d.cpu_images_per_s, 4))});
  else
    sec.rows.push_back({"JPEG decode", fmt::format("GPU (nvJPEG-class), {} images/s: {} added to the GPU's step",
                                                   u::format_number(p.gpu_images_per_s, 4), u::format(d.gpu_decode))});
  sec.rows.push_back({"storage", d.storage_images_per_s > 0
                                     ? fmt::format("{} images/s per GPU ({} over {} GPU{}, {} per image)",
                                                   u::format_number(d.storage_images_per_s, 4), u::format(p.storage),
                                                   p.gpus_on_node, p.gpus_on_node == 1 ? "" : "s", u::format(p.bytes_per_image))
                                     : std::string("not limiting (dataset in the page cache; --storage-GBps to set)")});
  sec.rows.push_back({"loader time per step", u::format(d.loader)});
  sec.rows.push_back({"GPU busy", fmt::format("{:.0f}% of the step ({}-bound)", 100.0 * d.gpu_utilisation, d.bound)});
  return sec;
}

int run_serve(const GlobalOptions& g, const CLI::App& cmd, const VisionFlags& v, const wl_io::VisionEntry& m) {
  Diagnostics diags;
  Setup s;
  const std::string gpu = value<std::string>(cmd, "gpu").value_or("h100-sxm5-80gb");
  if (!setup(g, cmd, gpu, given(cmd, "no-calibration") != nullptr, diags, s)) return report(diags);
  model::VisionRunPlan plan;
  plan.launch = s.launch;
  plan.batch = value<long long>(cmd, "batch").value_or(1);
  // serve's --batch and --compute are the serving field table's (checked by its reader for a transformer); a vision
  // model reads them here: batch in the key's range, compute one of the vision precisions.
  if (const auto* f = wl_io::find_field(wl_io::serving_fields(), "batch");
      f != nullptr && !(double(plan.batch) >= f->spec.min && double(plan.batch) <= f->spec.max))
    diags.error("", "--batch", fmt::format("value {} is out of range: expected >= {} and <= {}", plan.batch,
                                           plain_number(f->spec.min), plain_number(f->spec.max)));
  const std::string compute = value<std::string>(cmd, "compute").value_or("bf16");
  if (!(compute == "bf16" || compute == "fp16" || compute == "fp8" || compute == "int8" || compute == "fp4"))
    diags.error("", "--compute", fmt::format("'{}' is not one of 'bf16', 'fp16', 'fp8', 'int8'", compute));
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
  // Eager: the measured host cost per module call, unless a CPU time per kernel is given (then kernels × it).
  plan.host_per_op = given(cmd, "cpu-per-kernel-us") == nullptr;
  plan.fold_bn = v.fold_bn;
  plan.fuse_epilogue = v.fuse_epilogue;
  if (v.resolution)
    if (const std::string why = wl::vision_input_problem(m.arch, *v.resolution); !why.empty())
      diags.error("", "--resolution", why);
  if (diags.has_errors()) return report(diags);
  report(diags);  // notes
  const auto graph = wl_io::vision_graph(m, v.resolution.value_or(0));
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
  if (!setup(g, cmd, *gpu, given(cmd, "no-calibration") != nullptr, diags, s, value<std::string>(cmd, "node").value_or("")))
    return report(diags);
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
  if (v.fused_training) {
    if (v.autocast && plan.run.autocast)
      diags.error("", "--autocast", "the fused training engine keeps 16-bit weights (no per-forward casts): drop --autocast true");
    if (plan.run.compute != hw::Precision::bf16 && plan.run.compute != hw::Precision::fp16)
      diags.error("", "--fused-training", "the fused training engine runs bf16 or fp16");
    plan.run.fused_training = true;
    plan.run.cuda_graphs = true;
    plan.run.autocast = false;
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
  data_pipeline_plan(cmd, v, s, gpus, diags, plan);
  const double epoch_images = v.epoch_images ? static_cast<double>(*v.epoch_images) : model::kImageNetTrainImages;
  if (v.epoch_images && *v.epoch_images < 1) diags.error("", "--epoch-images", fmt::format("{} is not an image count", *v.epoch_images));
  if (v.epochs && !(*v.epochs > 0)) diags.error("", "--epochs", fmt::format("{} is not a positive number of epochs", *v.epochs));
  if (diags.has_errors()) return report(diags);
  report(diags);  // notes
  const auto graph = wl_io::vision_graph(m, v.resolution.value_or(0));
  const Explain ex = g.explain ? Explain::on : Explain::off;
  const auto r = model::vision_training(graph, plan, s.device, ex);
  const double epoch_s = r.images_per_second > 0 ? epoch_images / r.images_per_second : 0.0;
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
                     {"fused_training", plan.run.fused_training},
                     {"optimizer", model::to_string(plan.optimizer)},
                     {"step_time_s", r.step_time.raw()},
                     {"gpu_step_time_s", r.gpu_step_time.raw()},
                     {"images_per_s", r.images_per_second},
                     {"epoch_images", epoch_images},
                     {"epoch_time_s", epoch_s},
                     {"forward", pass_json(r.forward)},
                     {"backward", pass_json(r.backward)},
                     {"optimizer_s", r.optimizer.raw()},
                     {"allreduce_s", r.allreduce.raw()},
                     {"exposed_comm_s", r.exposed_comm.raw() + r.comm_slowdown.raw() + r.bucket_copies.raw()},
                     {"buffer_broadcast_s_per_forward", r.buffer_sync.raw()},
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
    if (v.epochs) j["time_to_train_s"] = *v.epochs * epoch_s;
    if (r.data) j["data_pipeline"] = data_json(*r.data, *plan.data);
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
                  {"step time", r.data ? fmt::format("{} ({}-bound; the GPU's step {}, busy {:.0f}%)", u::format(r.step_time),
                                                     r.data->bound, u::format(r.gpu_step_time), 100.0 * r.data->gpu_utilisation)
                                       : fmt::format("{} (images already on the GPU: give --loader-workers N or --decode gpu to "
                                                     "price the input pipeline)", u::format(r.step_time))},
                  {"throughput", fmt::format("{} images/s", u::format_number(r.images_per_second, 4))},
                  {"epoch", fmt::format("{} for {} images{}", u::format(u::seconds(epoch_s)), u::format_number(epoch_images, 7),
                                        v.epochs ? fmt::format("; {} epochs: {}", u::format_number(*v.epochs, 4),
                                                               u::format(u::seconds(*v.epochs * epoch_s)))
                                                 : std::string())},
                  {"MFU", fmt::format("{:.1f}%", 100.0 * r.mfu)},
                  {"DDP gradient all-reduce", gpus > 1 ? fmt::format("{}, {} not hidden (incl. GEMMs slowed beside it and "
                                                                     "bucket copies)",
                                                                     u::format(r.allreduce),
                                                                     u::format(r.exposed_comm + r.comm_slowdown + r.bucket_copies))
                                                       : std::string("none (one GPU)")},
                  {"DDP buffer broadcast", r.buffer_tensors > 0
                                               ? fmt::format("{} before each forward ({} batch-norm buffers, {})",
                                                             u::format(r.buffer_sync), r.buffer_tensors,
                                                             u::format(r.buffer_bytes))
                                               : std::string("none")}}});
  if (r.data) sec.push_back(data_section(*r.data, *plan.data));
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
  if (which == VisionCommand::train) {
    cmd.add_option("--loader-workers", v.loader_workers,
                   "DataLoader worker processes per GPU: vision models decode JPEGs on the CPU (prices the input "
                   "pipeline; default: images already on the GPU); transformers, with --timeline and "
                   "--loader-sample-ms, the step timeline's data-loader lane (0: loaded in the training process)");
    cmd.add_option("--decode", v.decode, "vision models: where the JPEGs are decoded: cpu (default with --loader-workers) or gpu");
    cmd.add_option("--decode-rate", v.decode_rate,
                   "vision models: decode + augmentation images/s per CPU core (cpu) or per GPU (gpu); default: our "
                   "measurement");
    cmd.add_option("--storage-GBps", v.storage_GBps,
                   "vision models: the node's dataset read bandwidth in GB/s (default: not limiting, cached)");
    cmd.add_option("--image-kB", v.image_kB, "vision models: mean encoded image size in kB (default: ImageNet's 115)");
    cmd.add_option("--epochs", v.epochs, "vision models: epochs to train (time_to_train_s)");
    cmd.add_option("--epoch-images", v.epoch_images, "vision models: images per epoch (default: ImageNet-1k's 1,281,167)");
    cmd.add_flag("--fused-training", v.fused_training,
                 "vision models: a fused conv-BN-ReLU training engine (cuDNN fused ops, as MLPerf's MXNet ResNet-50): "
                 "BN statistics in the conv epilogue, scale-bias-ReLU in the next conv's prologue, the step as one "
                 "graph, 16-bit weights kept by the optimizer (no autocast casts)");
  }
  if (which == VisionCommand::serve) {
    cmd.add_flag("--fold-bn", v.fold_bn, "vision models: batch norm folded into the convolutions (inference engines)");
    cmd.add_flag("--fuse-epilogue", v.fuse_epilogue,
                 "vision models: activation and residual add fused into the conv/GEMM epilogue (TensorRT-like)");
  }
}

std::optional<wl_io::VisionEntry> import_onnx_entry(const std::string& path, Diagnostics& diags) {
  auto r = wl_io::import_onnx_vision(path, path);
  diags.append(r.diagnostics());
  if (!r.ok()) return std::nullopt;
  wl_io::VisionEntry e;
  e.arch.id = r->graph.id;
  e.arch.family = wl::VisionFamily::onnx;
  e.arch.resolution = r->graph.resolution;
  e.name = std::filesystem::path(path).filename().string();
  e.file = path;
  e.imported = r->graph;
  return e;
}

std::optional<int> run_vision_if_named(const GlobalOptions& g, const CLI::App& cmd, const VisionFlags& v,
                                       VisionCommand which) {
  const std::vector<std::string> vision_only = which == VisionCommand::serve
                                                   ? std::vector<std::string>{"resolution", "autocast", "fold-bn", "fuse-epilogue"}
                                                   : std::vector<std::string>{"resolution", "autocast",
                                                                              "decode", "decode-rate", "storage-GBps",
                                                                              "image-kB", "epochs", "epoch-images",
                                                                              "fused-training"};
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
  std::optional<wl_io::VisionEntry> onnx;
  if (wl_io::is_onnx_path(*name)) {  // an ONNX file: imported, whatever the data directory holds
    auto e = import_onnx_entry(*name, diags);
    if (!e) return report(diags);
    onnx = std::move(*e);
  }
  const auto dir = onnx ? std::optional<std::string>("") : find_data_dir(g.data_dir, diags);
  if (!dir) return std::nullopt;  // the transformer command reports the missing data directory
  wl_io::VisionLibrary empty;
  auto lib = onnx ? Result<wl_io::VisionLibrary>(empty) : wl_io::load_vision_library(*dir);
  if (!lib.ok()) {
    diags.append(lib.diagnostics());
    return report(diags);
  }
  const wl_io::VisionEntry* m = onnx ? &*onnx : lib->find(*name);
  if (m == nullptr) {
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
