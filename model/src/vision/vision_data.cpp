#include "gpuplan/model/vision_data.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::model {

const char* to_string(ImageDecode d) { return d == ImageDecode::gpu ? "gpu" : "cpu"; }

DataPipeline vision_data_pipeline(units::Seconds gpu_step, std::int64_t images_per_gpu, const DataPipelinePlan& p,
                                  Explain explain) {
  DataPipeline r;
  r.gpu_step = gpu_step;
  const double n = static_cast<double>(std::max<std::int64_t>(1, images_per_gpu));
  const int gpus = std::max(1, p.gpus_on_node);
  // Cores a GPU's loader can use: its share of the node less the one its training process runs on.
  const int cores_per_gpu = p.node_cores > 0 ? std::max(1, p.node_cores / gpus - 1) : 0;
  r.in_process = p.decode == ImageDecode::cpu && p.workers_per_gpu <= 0;
  if (r.in_process) {
    r.cpu_images_per_s = p.cpu_images_per_s_per_core;  // the training process's own core
  } else if (p.decode == ImageDecode::cpu) {
    r.effective_workers = cores_per_gpu > 0 ? std::min(p.workers_per_gpu, cores_per_gpu) : p.workers_per_gpu;
    r.cpu_images_per_s = static_cast<double>(std::max(0, r.effective_workers)) * p.cpu_images_per_s_per_core;
  } else {
    r.gpu_decode = units::seconds(n / p.gpu_images_per_s);
  }
  if (p.storage.raw() > 0 && p.bytes_per_image.raw() > 0)
    r.storage_images_per_s = p.storage.raw() / (static_cast<double>(gpus) * p.bytes_per_image.raw());
  // What the host delivers per GPU: the CPU decode rate (none for GPU decode: the files are read only), capped by storage.
  double host = p.decode == ImageDecode::cpu ? r.cpu_images_per_s : 0.0;
  if (r.storage_images_per_s > 0) host = host > 0 ? std::min(host, r.storage_images_per_s) : r.storage_images_per_s;
  r.loader_images_per_s = host;
  r.loader = host > 0 ? units::seconds(n / host) : units::Seconds{};
  const units::Seconds gpu_side = r.gpu_step + r.gpu_decode;
  r.step_time = r.in_process ? gpu_side + r.loader : std::max(gpu_side, r.loader);
  r.gpu_utilisation = r.step_time.raw() > 0 ? gpu_side.raw() / r.step_time.raw() : 1.0;
  if (r.in_process)
    r.bound = r.loader > gpu_side ? p.cpu_bound + " (in the training process)" : "GPU (the in-process loading adds to it)";
  else if (r.loader > gpu_side)
    r.bound = p.decode == ImageDecode::cpu && (r.storage_images_per_s <= 0 || r.cpu_images_per_s <= r.storage_images_per_s)
                  ? p.cpu_bound
                  : "storage";
  else r.bound = "GPU";

  if (explain == Explain::on) {
    using units::format;
    std::vector<DerivationInput> in;
    in.push_back({"t_GPU", format(r.gpu_step), "the GPU's step (forward, backward, optimizer, communication)",
                  Origin::derived()});
    in.push_back({"n", fmt::format("{:g}", n), p.item + " per GPU per step", Origin::user("--global-batch / --gpus")});
    if (r.in_process) {
      in.push_back({"r_core", fmt::format("{:.4g} {}/s", p.cpu_images_per_s_per_core, p.item),
                    p.work + " on the training process's own core (no DataLoader workers)", p.cpu_rate_origin});
    } else if (p.decode == ImageDecode::cpu) {
      in.push_back({"w", fmt::format("{}", p.workers_per_gpu), "DataLoader workers per GPU", Origin::user("--loader-workers")});
      in.push_back({"c", p.node_cores > 0 ? fmt::format("{} − 1 = {}", p.node_cores / gpus, cores_per_gpu) : "not in the data",
                    fmt::format("cores per GPU for its workers: the node's {} over {} GPU{}, less the training process's",
                                p.node_cores > 0 ? std::to_string(p.node_cores) : std::string("(unknown)"), gpus,
                                gpus == 1 ? "" : "s"),
                    p.cores_origin});
      in.push_back({"r_core", fmt::format("{:.4g} {}/s", p.cpu_images_per_s_per_core, p.item),
                    p.work + " per worker on its own core", p.cpu_rate_origin});
    } else {
      in.push_back({"r_GPU", fmt::format("{:.4g} images/s", p.gpu_images_per_s), "GPU (nvJPEG) decode rate",
                    p.gpu_rate_origin});
    }
    in.push_back({"BW_storage", p.storage.raw() > 0 ? format(p.storage) : std::string("not limiting"),
                  "the node's dataset read bandwidth", p.storage_origin});
    in.push_back({"B_img", format(p.bytes_per_image), "bytes per encoded image", p.bytes_origin});
    const std::string formula =
        r.in_process ? "t_step = t_GPU + n / r_core (no workers: the batch is loaded between steps)"
        : p.decode == ImageDecode::cpu
            ? "t_step = max(t_GPU, n / min(min(w, c) · r_core, BW_storage / (GPUs · B_img)))"
            : "t_step = max(t_GPU + n / r_GPU, n · GPUs · B_img / BW_storage)";
    r.derivation = {"vision.data_pipeline",
                    "Input pipeline against the GPU step",
                    formula,
                    std::move(in),
                    fmt::format("{} ({}-bound; GPU busy {:.0f}%)", format(r.step_time), r.bound, 100.0 * r.gpu_utilisation),
                    {fmt::format("host delivers {} {}/s per GPU{}; the GPU consumes {:.4g}", 
                                 r.loader_images_per_s > 0 ? fmt::format("{:.4g}", r.loader_images_per_s) : std::string("(not limiting)"),
                                 p.item,
                                 r.in_process ? std::string(" (in the training process, between steps)")
                                 : p.decode == ImageDecode::cpu ? fmt::format(" ({} workers with a core each)", r.effective_workers)
                                                               : std::string(" (file reads only)"),
                                 gpu_side.raw() > 0 ? n / gpu_side.raw() : 0.0)},
                    {}};
  }
  return r;
}

DataPipeline text_data_pipeline(units::Seconds gpu_step, std::int64_t samples_per_gpu, const TextLoader& loader,
                                int workers, int gpus_on_node, Explain explain) {
  DataPipelinePlan dp;
  dp.decode = ImageDecode::cpu;
  dp.workers_per_gpu = std::max(0, workers);
  dp.cpu_images_per_s_per_core = loader.sample_cpu && loader.sample_cpu->raw() > 0 ? 1.0 / loader.sample_cpu->raw() : 0.0;
  dp.cpu_rate_origin = loader.sample_origin;
  dp.node_cores = loader.node_cores;
  dp.cores_origin = loader.cores_origin;
  dp.gpus_on_node = std::max(1, gpus_on_node);
  dp.item = "sequences";
  dp.work = "read + tokenise + collate";
  dp.cpu_bound = "CPU loader";
  return vision_data_pipeline(gpu_step, samples_per_gpu, dp, explain);
}

}  // namespace gpuplan::model
