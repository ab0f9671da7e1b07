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
#include <cstdint>
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
/// One overlap item of the collectives bench: a collective beside a bf16 GEMM loop on the same GPU.
struct OverlapSample {
  std::string op;
  int ranks = 0;
  double bytes = 0;
  double coll_alone_s = 0, coll_overlap_s = 0;  ///< per collective, alone and beside the GEMMs
  double gemm_alone_s = 0, gemm_overlap_s = 0;  ///< per GEMM, alone and beside the collectives
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
  std::vector<OverlapSample> overlap;
  std::optional<double> sustained_tflops;      ///< the sustained bench: bf16 8192³ GEMM throughput after ~20–30 s at it
  std::optional<double> sustained_fp8_tflops;  ///< the same for the fp8 8192³ GEMM (files since 2026-11-23)
  int rejected = 0;  ///< samples the bench refused (spread too wide)
  bool complete = true;  ///< false: the sweep stopped before its end (its "complete" key); its samples stand
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
  double ceiling = 0;  ///< η: achieved / dense peak on large, well-shaped GEMMs, at the reference K (8192)
  units::Seconds t0{};
  /// The depth law's fixed cost per output tile (main-loop iterations; efficiency.hpp), fitted when the samples hold a
  /// depth sweep (`gpuplan-bench depth`); otherwise the built-in value is used and this stays empty.
  std::optional<double> depth;
  FitQuality fit;        ///< on the compute-bound points used
  FitQuality all;        ///< the whole roofline (compute and memory bound) over every point of this dtype
};
struct StreamFit {
  double efficiency = 0;  ///< η_hbm
  units::Seconds t0{};
  FitQuality fit;
};
/// The range a profile's streaming fits may take (the profile reader's bounds): η in (0, 1.5] of the datasheet
/// bandwidth, t₀ in [0, 1] s. A fit outside it says the samples are wrong and is not used.
inline constexpr double kMaxStreamEfficiency = 1.5;
inline constexpr double kMaxFixedCostS = 1.0;
/// The largest |relative error| a profile's fit quality may state (the reader's bound): a fit missing its samples by
/// more than 10^6 times says the samples are wrong (fuzz_calib: a link fit at 4.4·10^6 did not read back) and is not used.
inline constexpr double kMaxFitRelError = 1e6;
struct LinkFit {
  std::string op;
  int ranks = 0;
  units::Seconds intercept{};       ///< a: time of an empty collective
  units::Bandwidth bus_bandwidth{};  ///< B_bus: asymptotic bus bandwidth
  double bus_efficiency = 0;         ///< B_bus / per-GPU link bandwidth (per direction)
  units::Seconds step_latency{};     ///< α = (a − t_call) / steps, ≥ 0
  units::Seconds call_latency{};     ///< t_call: the model's NCCL base latency, or a when a is smaller
  FitQuality fit;
  /// The measured time against the message size, as a monotone piecewise curve: the median per size, sorted by size,
  /// each time raised to the largest before it (a bigger message never costs less). The model interpolates it in
  /// log-log between measured sizes; the α–β line above covers sizes outside the sweep.
  std::vector<std::pair<double, double>> curve;  ///< (bytes, seconds)
};
/// Communication beside compute (the overlap items): medians over every accepted item (all ops, sizes, rank counts).
///  - compute_loss: the fraction of GEMM throughput a running collective takes, 1 − t_gemm,alone / t_gemm,overlap;
///  - wait_kernels: how much longer a collective call takes beside compute, in units of the duration of the compute
///    kernel beside it, (t_coll,overlap − t_coll,alone) / t_gemm,alone. A GEMM grid holds every SM, so a collective's
///    kernel starts when the kernel in flight drains: the delay scales with the compute kernels, not the message.
struct OverlapFit {
  double compute_loss = 0;
  double wait_kernels = 0;
  int points = 0;
  double compute_loss_min = 0, compute_loss_max = 0;
  double wait_kernels_min = 0, wait_kernels_max = 0;
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
  std::optional<OverlapFit> overlap;
  /// Sustained / swept throughput of the bf16 8192³ GEMM: what holding the tensor cores busy for tens of seconds
  /// (power cap) costs against the sweep's ~40 ms per shape. Applied to the GEMM ceilings of training steps.
  std::optional<double> sustained_ratio;
  /// The same for the fp8 8192³ GEMM, applied to fp8 GEMM ceilings (absent: the model uses the bf16 ratio).
  std::optional<double> sustained_ratio_fp8;
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

}  // namespace gpuplan::calib
