#pragma once
// Calibration: raw benchmark samples (written by calibrate/bench on a real GPU) → a fitted profile
// (data/calibration/<gpu-id>/profile.json) → the model's efficiency inputs. The fits are few, physical parameters:
//  - GEMM, per precision: t = t₀ + 2mnk / (P · η · u(shape)), u the model's own tile/wave utilisation (ops.hpp), fitted
//    on compute-bound shapes (intensity ≥ 2 × ridge) by least squares on relative error → ceiling η, fixed cost t₀;
//  - HBM: t = t₀ + bytes moved / (BW · η_hbm) over buffers ≫ L2 → η_hbm;
//  - memory-bound GEMMs (decode shapes, intensity < ridge / 4): t = t₀ + bytes / (BW · η_gemm) → the bandwidth at
//    which GEMM kernels stream weights, and their fixed cost (a kernel's ramp-up and tail);
//  - kernel launch and CUDA-graph replay per kernel, as measured;
//  - NVLink collectives, per collective and rank count: a = the latency of the smallest messages, B_bus = the bus
//    bandwidth of the largest, t = a + S · busfactor / B_bus → bus efficiency η = B_bus / (per-GPU link bandwidth)
//    and per-step latency α = (a − t_call) / steps.
// Nothing here is fitted to an end-to-end result: the reference cases check the model, they do not tune it.
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/hw/hardware.hpp"
#include "gpuplan/model/efficiency.hpp"
#include "gpuplan/model/topology.hpp"

namespace gpuplan::calib {

// ---------------------------------------------------------------------------------------------------------------
// Raw samples
// ---------------------------------------------------------------------------------------------------------------

struct GemmSample {
  std::string dtype;  ///< bf16, fp16, fp8, tf32, fp32
  std::string shape;  ///< square, qkv, o, up, down, lm_head, ...
  std::int64_t m = 0, n = 0, k = 0;
  double median_s = 0;
};
struct StreamSample {
  std::string op;  ///< copy, read, triad, l2_read, h2d, d2h
  double bytes = 0;  ///< as the bench reports it (buffer size)
  double median_s = 0;
  double gbps = 0;   ///< bytes moved / time, GB/s, as the bench counts them
};
struct CollectiveSample {
  std::string op;  ///< all_reduce, all_gather, reduce_scatter, all_to_all, send_recv
  int ranks = 0;
  double bytes = 0;
  double median_s = 0;
};
struct Samples {
  std::string file;
  std::string gpu_name;
  std::string driver;
  int sm_count = 0;
  double l2_bytes = 0;
  std::vector<GemmSample> gemm;
  std::vector<StreamSample> hbm;
  std::optional<double> launch_s;        ///< eager launch interval of an empty kernel
  std::optional<double> graph_kernel_s;  ///< per kernel inside a replayed graph
  std::vector<CollectiveSample> collectives;
  int rejected = 0;  ///< samples the bench refused (spread too wide)
};

/// Reads a samples file written by the benches; diagnostics carry the file and JSON pointer.
Result<Samples> read_samples(const std::string& path);

// ---------------------------------------------------------------------------------------------------------------
// Fits and the profile
// ---------------------------------------------------------------------------------------------------------------

/// Quality of a fit over the points it explains.
struct FitQuality {
  int points = 0;
  double median_rel_error = 0;
  double max_rel_error = 0;
};
struct GemmFit {
  std::string dtype;
  double ceiling = 0;  ///< η: achieved / dense peak on large, well-shaped GEMMs
  units::Seconds t0{};
  FitQuality fit;        ///< on the compute-bound points used
  FitQuality all;        ///< the whole roofline (compute and memory bound) over every point of this dtype
};
struct StreamFit {
  double efficiency = 0;  ///< η_hbm
  units::Seconds t0{};
  FitQuality fit;
};
struct LinkFit {
  std::string op;
  int ranks = 0;
  units::Seconds intercept{};       ///< a: time of an empty collective
  units::Bandwidth bus_bandwidth{};  ///< B_bus: asymptotic bus bandwidth
  double bus_efficiency = 0;         ///< B_bus / per-GPU link bandwidth (per direction)
  units::Seconds step_latency{};     ///< α = (a − t_call) / steps, ≥ 0
  units::Seconds call_latency{};     ///< t_call: the model's NCCL base latency, or a when a is smaller
  FitQuality fit;
};
struct Profile {
  int schema = 1;
  std::string gpu_id;
  std::string gpu_name;  ///< as the driver names it
  std::string driver;
  std::vector<std::string> samples;  ///< the sample files it was fitted from
  std::vector<GemmFit> gemm;
  std::optional<StreamFit> hbm;
  std::optional<StreamFit> gemm_memory;  ///< memory-bound bf16/fp16 GEMMs: weight-streaming η and the fixed cost t₀
  std::optional<units::Seconds> launch;
  std::optional<units::Seconds> graph_kernel;
  std::vector<LinkFit> links;
  std::vector<std::string> notes;
  std::string file;  ///< where it was read from (not written)
};

/// Fits a profile for `gpu` from one or more sample files (single-GPU suites and collective runs).
Result<Profile> fit_profile(const std::vector<Samples>& samples, const hw::GpuSpec& gpu, const hw::HardwareDb& db);

/// Deterministic JSON text of a profile (stable key order, fixed precision).
std::string profile_json(const Profile& p);
Result<Profile> read_profile(const std::string& path);

/// The model's efficiency row for `gpu` with the profile's measurements in place of the built-in defaults (fields
/// the profile does not measure keep the default; `origin` names the profile).
model::EfficiencyProfile to_efficiency(const Profile& p, const hw::GpuSpec& gpu);
/// The measured NVLink tier (from the all-reduce fit with the most ranks), if the profile has one.
std::optional<model::LinkCalibration> scale_up_calibration(const Profile& p);

/// Writes `text` to `path` atomically: a temporary file in the same folder, then rename; an existing file is never
/// left half-written. Creates the folder. False with a diagnostic on failure.
bool write_file_atomically(const std::string& path, const std::string& text, Diagnostics& diags);

}  // namespace gpuplan::calib
