#pragma once
// The input pipeline of a vision training step (issue #25 d3): JPEG decode and augmentation on the host's CPU cores
// (a PyTorch DataLoader's worker processes) or on the GPU (nvJPEG / DALI-like), the dataset read from storage, and
// how it meets the GPU's step. The loader prefetches batches in parallel with the GPU, so a step takes the longer of
// the two: t_step = max(t_GPU + t_decode,GPU, t_loader), and the GPU is busy t_GPU / t_step of the time — "GPU
// utilisation 34% because the loader starves it" is this ratio, with the stage that binds named.
//
//   CPU decode:  loader rate per GPU = min(workers, cores per GPU − 1) × r_core (one core per GPU runs the training
//                process itself), capped by storage: BW_storage / (GPUs on the node × bytes per image)
//   GPU decode:  the CPU only reads the files (storage cap as above); the GPU decodes at r_GPU images/s, time the
//                step adds to the GPU's work (t_decode,GPU = images / r_GPU)
//   no workers:  (DataLoader num_workers = 0) the training process prepares each batch itself on its one core,
//                between steps: nothing is prefetched, so t_step = t_GPU + n / r_core (the GPU idles while it loads).
//                A step of a Python training loop waits for its batch before it issues the step's kernels, and
//                logging the loss (loss.item()) synchronises every step, so the two do not overlap.
// The same formula prices the text pipeline of LLM training (issue #27): a sample is a sequence, r_core = 1 / the
// per-sample CPU cost (read, tokenise, collate), `item` and `work` name them in the derivation.
#include <cstdint>
#include <optional>
#include <string>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"

namespace gpuplan::model {

enum class ImageDecode { cpu, gpu };
const char* to_string(ImageDecode d);

/// Our measurement on the lent H100 host (16 vCPU Intel Xeon, KVM guest; Pillow 12.3, torchvision 0.26): PIL decode
/// + RandomResizedCrop(224) + flip + ToTensor + Normalize of 500×375 JPEGs (quality 90, mean 79.5 KB) in 16 worker
/// processes, 3,564 img/s = 223 img/s per worker with every core busy (286 img/s on one idle core)
/// (data/validation/measured/h100-sxm5-80gb/dataload_cpu_nvjpeg.json, pil_scaling at 16 workers).
inline constexpr double kCpuDecodeImagesPerSecondPerCore = 222.7;
inline constexpr const char* kCpuDecodeOrigin =
    "measured: PIL decode + RandomResizedCrop + flip + ToTensor + Normalize, 16 workers on 16 vCPUs, 223 img/s per "
    "worker (data/validation/measured/h100-sxm5-80gb/dataload_cpu_nvjpeg.json)";
/// nvJPEG batched decode on the H100 (torchvision.io.decode_jpeg(device="cuda"), batch 256): 14,513 img/s (the same
/// file, gpu_nvjpeg.decode_batch256_images_per_s); an assumption on other GPUs.
inline constexpr double kGpuDecodeImagesPerSecond = 14513.0;
inline constexpr const char* kGpuDecodeOrigin =
    "measured on an H100: nvJPEG batched decode (torchvision.io.decode_jpeg on cuda, batch 256), 14,513 img/s "
    "(data/validation/measured/h100-sxm5-80gb/dataload_cpu_nvjpeg.json); an assumption on other GPUs";
/// ImageNet-1k's training set: 1,281,167 images (the MLPerf logs' train_samples) in a 138 GB archive
/// (ILSVRC2012_img_train.tar, image-net.org download page: 147,897,477,120 bytes), 115 KB a JPEG on average.
inline constexpr double kImageNetTrainImages = 1281167.0;
inline constexpr double kImageNetMeanJpegBytes = 147897477120.0 / 1281167.0;

struct DataPipelinePlan {
  ImageDecode decode = ImageDecode::cpu;
  int workers_per_gpu = 0;  ///< DataLoader worker processes per training process (one per GPU); 0: in-process loading
  std::string item = "images";                      ///< what one sample is (explain text)
  std::string work = "JPEG decode + augmentation";  ///< what a worker does per sample (explain text)
  std::string cpu_bound = "CPU decode";             ///< DataPipeline::bound when the CPU workers bind
  double cpu_images_per_s_per_core = kCpuDecodeImagesPerSecondPerCore;
  Origin cpu_rate_origin = Origin::measurement(kCpuDecodeOrigin);
  double gpu_images_per_s = kGpuDecodeImagesPerSecond;
  Origin gpu_rate_origin = Origin::measurement(kGpuDecodeOrigin);
  int node_cores = 0;           ///< physical CPU cores of the node (0: not in the data: the workers are not capped)
  Origin cores_origin;
  int gpus_on_node = 1;         ///< training processes sharing the node's cores and storage
  units::Bandwidth storage{};   ///< the node's dataset read bandwidth; 0: not limiting (cached in host memory)
  Origin storage_origin = Origin::assumption("not limiting: the dataset is read from the page cache");
  units::Bytes bytes_per_image = units::bytes(kImageNetMeanJpegBytes);
  Origin bytes_origin = Origin::datasheet("ImageNet-1k train: 147,897,477,120 B / 1,281,167 images (image-net.org)");
};

struct DataPipeline {
  units::Seconds gpu_step{};       ///< the GPU's step without the input (forward, backward, optimizer, comm)
  units::Seconds gpu_decode{};     ///< GPU decode: the decode the GPU adds to its step (0 for CPU decode)
  units::Seconds loader{};         ///< time the host side needs to deliver one step's images to one GPU
  units::Seconds step_time{};      ///< max(gpu_step + gpu_decode, loader)
  double cpu_images_per_s = 0;     ///< per GPU: decode workers × per-core rate (0 for GPU decode)
  double storage_images_per_s = 0; ///< per GPU: storage bandwidth / (GPUs × bytes per image); 0: not limiting
  double loader_images_per_s = 0;  ///< per GPU: what the host delivers (the smaller of the two)
  int effective_workers = 0;       ///< workers that have a core of their own
  bool in_process = false;         ///< no workers: the training process loads each batch between steps (serial)
  double gpu_utilisation = 1;      ///< (gpu_step + gpu_decode) / step_time
  std::string bound;               ///< "GPU", "CPU decode" or "storage"
  Derivation derivation;
};

/// One step of `images_per_gpu` images per GPU fed by the pipeline of `p`, against a GPU step of `gpu_step`.
/// Preconditions (the CLI checks what a user can type): images_per_gpu ≥ 1, workers ≥ 0, rates > 0.
DataPipeline vision_data_pipeline(units::Seconds gpu_step, std::int64_t images_per_gpu, const DataPipelinePlan& p,
                                  Explain explain);

/// The text input pipeline of LLM training: each sample (one sequence) costs `sample_cpu` seconds of one CPU core to
/// produce (read, tokenise, collate); none given: the loader is not priced (the GPU is never starved).
struct TextLoader {
  std::optional<units::Seconds> sample_cpu;
  Origin sample_origin = Origin::user("--loader-sample-ms");
  int node_cores = 0;  ///< the node's CPU cores (0: not in the data: workers are not capped)
  Origin cores_origin;
};

/// The text pipeline against a GPU step: vision_data_pipeline's formula (CPU decode, `workers` DataLoader workers per
/// GPU, 0 = in the training process) with one sequence a sample, r_core = 1 / sample_cpu, `gpus_on_node` training
/// processes sharing the node's cores. Precondition: loader.sample_cpu > 0, samples_per_gpu ≥ 1, workers ≥ 0.
DataPipeline text_data_pipeline(units::Seconds gpu_step, std::int64_t samples_per_gpu, const TextLoader& loader,
                                int workers, int gpus_on_node, Explain explain);

}  // namespace gpuplan::model
