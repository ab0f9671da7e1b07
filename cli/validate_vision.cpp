// `gpuplan validate`: our own vision measurements (data/validation/measured/<gpu>/vision_*.json, written by
// scripts/measure/vision_bench.py: torchvision models, inference in bf16 weights eager and as one CUDA graph, training
// steps under bf16 autocast) predicted by the same setup and pricer as `gpuplan serve` / `gpuplan train` with a vision
// model. Nothing of these measurements is fitted.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/model/vision.hpp"
#include "gpuplan/wl_io/vision_io.hpp"
#include "validate.hpp"
#include "vision_cmd.hpp"

namespace gpuplan::cli {

namespace {
namespace fs = std::filesystem;
using json_io::Json;

double num(const Json& j, const char* key) { return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0; }
std::string str(const Json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}
/// Published ResNet-50 training throughput (data/validation/vision_published.json): DeepLearningExamples' PyTorch
/// tables and MLPerf's fused MXNet runs, each on its node's GPU with DDP over the node, GPU step only.
void published_vision_cases(const std::string& data_dir, const hw::HardwareDb& db, const wl_io::VisionLibrary& lib,
                            Diagnostics& diags, ValidationSummary& sum) {
  const std::string shown = "validation/vision_published.json";
  const fs::path file = fs::path(data_dir) / "validation" / "vision_published.json";
  std::error_code ec;
  if (!fs::exists(file, ec)) return;
  auto text = json_io::read_text_file(file.string(), diags);
  if (!text) return;
  auto j = json_io::parse(*text, shown, diags);
  if (!j || !j->is_object() || !j->contains("cases") || !(*j)["cases"].is_array()) return;
  for (const auto& c : (*j)["cases"]) {
    CaseResult r;
    r.source = shown + " (" + str(c, "source") + ")";
    r.model = str(c, "model");
    r.id = str(c, "id");
    r.metric = "images_per_s";
    r.unit = "images/s";
    const std::string node = str(c, "node");
    const auto gpus = static_cast<std::int64_t>(num(c, "gpus"));
    const auto batch = static_cast<std::int64_t>(num(c, "batch_per_gpu"));
    r.layout = fmt::format("{} GPU{} of {}, {} images per GPU, {} AMP, {}", gpus, gpus == 1 ? "" : "s", node, batch,
                           str(c, "precision"), str(c, "stack"));
    r.convention = "published-" + str(c, "stack");
    r.measured = num(c, "images_per_s");
    const hw::NodeSpec* n = db.find_node(node);
    const auto* e = lib.find(r.model);
    if (n == nullptr || e == nullptr || gpus < 1 || gpus > n->gpus || batch < 1 || r.measured <= 0) {
      r.status = "not runnable";
      r.note = n == nullptr ? "node not in the hardware data" : "not runnable";
      sum.cases.push_back(r);
      continue;
    }
    r.gpu = n->gpu;
    model::TrainingSystem sys;
    model::Device device;
    model::ServingPerfPlan launch;
    if (!vision_device(data_dir, db, n->gpu, false, diags, sys, device, launch, node)) continue;
    model::VisionTrainPlan plan;
    plan.run.launch = launch;
    plan.run.batch = batch;
    // DeepLearningExamples' PyTorch: eager, autocast. MLPerf's MXNet ResNet: the fused conv-BN-ReLU engine, fp16
    // weights kept beside the fp32 masters by its multi-precision optimizer (no cast per forward), the step issued as
    // one graph (no host-bound launches at these batches).
    const bool fused = str(c, "stack") == "mlperf";
    plan.run.autocast = !fused;
    plan.run.cuda_graphs = fused;
    plan.run.fused_training = fused;
    plan.run.compute = str(c, "precision") == "bf16" ? hw::Precision::bf16 : hw::Precision::fp16;
    plan.optimizer = str(c, "optimizer") == "adamw" ? model::VisionOptimizer::adamw : model::VisionOptimizer::sgd_momentum;
    if (gpus > 1) plan.dp = model::training_comm_group(static_cast<int>(gpus), 1, sys);
    // PyTorch DDP broadcasts the batch-norm buffers before every forward; MLPerf's MXNet runs all-reduce gradients
    // through Horovod-style communication and broadcast no buffers.
    plan.broadcast_buffers = str(c, "stack") == "pytorch";
    const auto t = model::vision_training(wl::build_vision_graph(e->arch), plan, device, Explain::off);
    r.predicted = t.images_per_second;
    r.error = *r.predicted / r.measured - 1.0;
    r.status = "ok";
    r.note = fmt::format("epoch {:.0f} s measured, {:.0f} s predicted", model::kImageNetTrainImages / r.measured,
                         model::kImageNetTrainImages / *r.predicted);
    sum.cases.push_back(r);
  }
}
}  // namespace

Result<ValidationSummary> validate_vision(const std::string& data_dir, const hw::HardwareDb& db) {
  Diagnostics diags;
  ValidationSummary sum;
  auto lib = wl_io::load_vision_library(data_dir);
  if (!lib.ok()) return Result<ValidationSummary>(lib.diagnostics());
  const fs::path root = fs::path(data_dir) / "validation" / "measured";
  std::error_code ec;
  std::vector<fs::path> files;
  if (fs::is_directory(root, ec))
    for (const auto& d : fs::directory_iterator(root, ec))
      if (d.is_directory())
        for (const auto& e : fs::directory_iterator(d.path(), ec)) {
          const std::string name = e.path().filename().string();
          if (name.rfind("vision_", 0) == 0 && e.path().extension() == ".json") files.push_back(e.path());
        }
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    const std::string gpu_id = file.parent_path().filename().string();
    const std::string shown = "validation/measured/" + gpu_id + "/" + file.filename().string();
    auto text = json_io::read_text_file(file.string(), diags);
    if (!text) continue;
    auto j = json_io::parse(*text, shown, diags);
    if (!j || !j->is_object()) continue;
    model::TrainingSystem sys;
    model::Device device;
    model::ServingPerfPlan launch;
    if (db.find_gpu(gpu_id) == nullptr ||
        !vision_device(data_dir, db, gpu_id, false, diags, sys, device, launch))
      continue;
    auto base = [&](const std::string& model) {
      CaseResult r;
      r.source = shown;
      r.gpu = gpu_id;
      r.model = model;
      r.unit = "s";
      return r;
    };
    if (j->contains("inference") && (*j)["inference"].is_array())
      for (const auto& rec : (*j)["inference"]) {
        const std::string m = str(rec, "model");
        const auto* e = lib->find(m);
        for (const char* mode : {"graph", "eager"}) {
          CaseResult r = base(m);
          const auto batch = static_cast<std::int64_t>(num(rec, "batch"));
          r.id = fmt::format("{}-{}-b{}-{}", gpu_id, m, batch, mode);
          r.metric = "latency_s";
          r.layout = fmt::format("batch {}, {}, {}", batch, str(rec, "dtype"),
                                 std::string(mode) == "graph" ? "CUDA graph" : "eager");
          r.convention = std::string("inference-") + mode;
          if (!rec.contains(mode) || e == nullptr || batch < 1) {
            r.status = "not runnable";
            r.note = e == nullptr ? "not in the vision library" : str(rec, "status");
            sum.cases.push_back(r);
            continue;
          }
          r.measured = num(rec[mode], "latency_median_s");
          model::VisionRunPlan plan;
          plan.launch = launch;
          plan.batch = batch;
          plan.compute = str(rec, "dtype") == "fp16" ? hw::Precision::fp16 : hw::Precision::bf16;
          plan.autocast = false;  // the model cast to bf16, as `gpuplan serve` prices it by default
          plan.cuda_graphs = std::string(mode) == "graph";
          const auto g = wl::build_vision_graph(e->arch, static_cast<std::int64_t>(num(rec, "resolution")));
          const auto v = model::vision_inference(g, plan, device, Explain::off);
          r.predicted = v.latency.raw();
          r.error = *r.predicted / r.measured - 1.0;
          r.status = "ok";
          sum.cases.push_back(r);
        }
      }
    if (str(*j, "kind") == "loader_train" && j->contains("runs") && (*j)["runs"].is_array()) {
      // ResNet-50 fed by a real JPEG DataLoader (scripts/measure/loader_train.py): the measured GPU-only step and the
      // lent host's cores, the pipeline's per-core rate from the model's default (our dataload measurement).
      const std::string m = str(*j, "model");
      const auto* e = lib->find(m);
      const auto batch = static_cast<std::int64_t>(num(*j, "batch"));
      const double cpus = num(*j, "cpus");
      for (const auto& run : (*j)["runs"]) {
        CaseResult r = base(m);
        const auto w = static_cast<int>(num(run, "workers"));
        r.id = fmt::format("{}-{}-loader-b{}-w{}", gpu_id, m, batch, w);
        r.metric = "step_time_s";
        r.layout = fmt::format("{} images, {} DataLoader workers on a {}-core host, 1 GPU", batch, w, cpus);
        r.convention = "training-loader";
        r.measured = num(run, "train_step_s");
        if (e == nullptr || batch < 1 || w < 1 || r.measured <= 0) {
          r.status = "not runnable";
          r.note = "no measurement";
          sum.cases.push_back(r);
          continue;
        }
        model::DataPipelinePlan dp;
        dp.workers_per_gpu = w;
        dp.node_cores = static_cast<int>(cpus);
        dp.cores_origin = Origin::measurement(shown + "#/cpus");
        dp.gpus_on_node = 1;
        dp.bytes_per_image = units::bytes(num(*j, "mean_jpeg_bytes"));
        const auto d = model::vision_data_pipeline(units::seconds(num(*j, "gpu_only_step_s")), batch, dp, Explain::off);
        r.predicted = d.step_time.raw();
        r.error = *r.predicted / r.measured - 1.0;
        r.status = "ok";
        r.note = fmt::format("{}-bound, GPU busy {:.0f}% (measured {:.0f}%)", d.bound, 100.0 * d.gpu_utilisation,
                             100.0 * num(run, "gpu_busy_fraction"));
        sum.cases.push_back(r);
      }
    }
    if (j->contains("training") && (*j)["training"].is_array())
      for (const auto& rec : (*j)["training"]) {
        const std::string m = str(rec, "model");
        const auto* e = lib->find(m);
        CaseResult r = base(m);
        const auto batch = static_cast<std::int64_t>(num(rec, "batch_per_gpu"));
        const auto gpus = static_cast<std::int64_t>(num(rec, "gpus"));
        r.id = fmt::format("{}-{}-train-b{}-x{}", gpu_id, m, batch, gpus);
        r.metric = "step_time_s";
        r.layout = fmt::format("{} images per GPU, {} GPU{}, {}, {}", batch, gpus, gpus == 1 ? "" : "s",
                               str(rec, "dtype"), str(rec, "optimizer"));
        r.convention = gpus > 1 ? "training-ddp" : "training";
        r.measured = num(rec, "step_median_s");
        const int node_gpus = sys.node != nullptr ? sys.node->gpus : 0;
        if (e == nullptr || batch < 1 || r.measured <= 0 || gpus < 1 || gpus > node_gpus) {
          r.status = "not runnable";
          r.note = gpus > node_gpus ? "data-parallel training beyond one node is not modelled" : "no measurement";
          sum.cases.push_back(r);
          continue;
        }
        model::VisionTrainPlan plan;
        plan.run.launch = launch;
        plan.run.batch = batch;
        plan.run.autocast = true;
        plan.run.cuda_graphs = false;
        plan.optimizer = str(rec, "optimizer").find("AdamW") != std::string::npos ? model::VisionOptimizer::adamw
                                                                                    : model::VisionOptimizer::sgd_momentum;
        if (gpus > 1) plan.dp = model::training_comm_group(static_cast<int>(gpus), 1, sys);  // DDP, as `train --gpus`
        const auto g = wl::build_vision_graph(e->arch, static_cast<std::int64_t>(num(rec, "resolution")));
        const auto t = model::vision_training(g, plan, device, Explain::off);
        r.predicted = t.step_time.raw();
        r.error = *r.predicted / r.measured - 1.0;
        r.status = "ok";
        sum.cases.push_back(r);
      }
  }
  published_vision_cases(data_dir, db, *lib, diags, sum);
  summarise_validation(sum);
  if (diags.has_errors()) return Result<ValidationSummary>(std::move(diags));
  return Result<ValidationSummary>(std::move(sum), std::move(diags));
}

std::vector<std::pair<std::string, ValidationSummary>> split_by_convention(const ValidationSummary& all) {
  std::vector<std::pair<std::string, ValidationSummary>> out;
  for (const auto& c : all.cases) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == c.convention; });
    if (it == out.end()) {
      out.emplace_back(c.convention, ValidationSummary{});
      it = out.end() - 1;
    }
    it->second.cases.push_back(c);
  }
  for (auto& p : out) summarise_validation(p.second);
  return out;
}

}  // namespace gpuplan::cli
