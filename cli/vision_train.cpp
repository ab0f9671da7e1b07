// `gpuplan train` with a vision model (vision_run.hpp): the input pipeline from its flags, the step, the epoch and
// the report.
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

namespace gpuplan::cli::vision_run {

namespace {

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

}  // namespace

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

}  // namespace gpuplan::cli::vision_run
