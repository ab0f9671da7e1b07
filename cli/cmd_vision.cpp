// `gpuplan serve` and `gpuplan train` with a vision model (vision_cmd.hpp): the flags a vision model takes, the
// dispatch on -m, the device setup and `serve`; `train`: vision_train.cpp.
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
#include "vision_run.hpp"

namespace gpuplan::cli {

using namespace vision_run;

namespace {

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

std::string join(const std::set<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "--" : ", --") + n;
  return s;
}

}  // namespace

namespace vision_run {

double gib(u::Bytes b) { return u::to_GiB(b); }

u::Bytes capacity(const hw::GpuSpec& gpu) {
  return gpu.memory.device_reported ? *gpu.memory.device_reported : gpu.memory.capacity_label;
}

bool setup(const GlobalOptions& g, const CLI::App& cmd, const std::string& gpu_name, bool no_calibration,
           Diagnostics& diags, Setup& s, const std::string& node) {
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return false;
  s.data_dir = *dir;
  auto ws = app::load_workspace(*dir, {.hardware = true, .models = false});
  diags.append(ws.diagnostics());
  if (!ws.ok()) return false;
  s.db = std::move(ws).value().db;
  if (!vision_device(s.data_dir, s.db, gpu_name, no_calibration, diags, s.sys, s.device, s.launch, node)) return false;
  if (auto v = value<double>(cmd, "kernel-overhead-us")) {
    if (!(*v >= 0)) diags.error("", "--kernel-overhead-us", "must be ≥ 0");
    (given(cmd, "enforce-eager") ? s.launch.kernel_overhead_eager : s.launch.kernel_overhead_graph) = u::microseconds(*v);
    s.launch.kernel_cost_by_class = false;  // the given cost for every kernel, whatever its class
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

}  // namespace vision_run

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
