#pragma once
// Real-time pipeline files (`gpuplan pipeline FILE`; data/scenarios/ad-perception.json; docs/pipelines.md): sensors
// with their rates, the frame deadline, the stages — a model of the vision library or an op list of its own (a task
// head), or a fixed CPU time — with the engine each runs on, what each waits for, a jitter model, and the options
// (backbone sharing, INT8, TensorRT-like fusion, CUDA graphs, temporal reuse). Decoded strictly: unknown keys, wrong
// types, out-of-range values, unknown ids, dependency on a later stage, a stage that is neither a model nor a CPU
// time — all reported at once with file and JSON pointer (exit 2 at the CLI).
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl/vision.hpp"
#include "gpuplan/wl_io/vision_io.hpp"

namespace gpuplan::wl_io {

struct PipelineSensor {
  std::string id, kind;  ///< kind: camera, lidar, radar, imu, other
  double rate_Hz = 0;
  int count = 1;
};

struct PipelineJitter {
  std::string distribution = "none";  ///< none, lognormal, normal
  double cv = 0;                      ///< coefficient of variation σ / mean
  std::string basis;                  ///< why this spread (measurement, citation or stated assumption)
};

struct PipelineStage {
  std::string id, engine, pointer;
  std::string model;                  ///< a vision library id ("" when the stage has ops or a CPU time)
  std::optional<std::int64_t> resolution;
  std::vector<wl::VisionOp> ops;      ///< a stage's own op list (a head), expanded
  std::string ops_source;             ///< the citation of the op list
  std::optional<double> cpu_ms;       ///< a fixed time (any engine) instead of a model
  double memory_GBps = 0;             ///< DRAM traffic while a fixed-time stage runs (the shared-memory model)
  std::string precision = "int8";     ///< int8, fp16, bf16 (a model stage)
  std::int64_t batch = 1;
  std::string backbone;               ///< the stage whose features this head reads ("" when none)
  std::vector<std::string> after;     ///< stages that must finish first (listed earlier)
  std::vector<std::string> inputs;    ///< sensors it reads
  int every_k_frames = 1;             ///< temporal reuse: runs every k-th frame
  int sensor_every = 1;               ///< its slowest input sensor delivers every this many frames
  PipelineJitter jitter;
};

struct PipelineOptions {
  bool share_backbone = true;  ///< heads read one backbone run (false: each head runs its own copy)
  bool int8 = false;           ///< every model stage in int8 (TensorRT INT8 engines)
  bool fusion = false;         ///< TensorRT-like fused engine: BN folded, activation/add in the GEMM epilogue
  bool cuda_graphs = true;     ///< each model stage replayed from a CUDA graph (false: eager launches)
  bool temporal_reuse = true;  ///< honour every_k_frames (false: every stage every frame)
};

struct PipelineSpec {
  std::string file;  ///< as shown in messages
  std::string name, description, hardware;  ///< hardware: default GPU id ("" = none)
  std::vector<PipelineSensor> sensors;
  double deadline_ms = 0;
  PipelineOptions options;
  std::vector<PipelineStage> stages;
  std::vector<std::string> sources;
  [[nodiscard]] const PipelineStage* find(const std::string& id) const;
  [[nodiscard]] int index_of(const std::string& id) const;  ///< -1 when absent
  /// The frame rate: the fastest sensor's.
  [[nodiscard]] double frame_rate_Hz() const;
};

/// Field tables (the decoder and the generated field reference).
const json_io::FieldTable& pipeline_fields();
const json_io::FieldTable& pipeline_sensor_fields();
const json_io::FieldTable& pipeline_stage_fields();
const json_io::FieldTable& pipeline_op_fields();
const json_io::FieldTable& pipeline_jitter_fields();
const json_io::FieldTable& pipeline_option_fields();

/// Decodes a pipeline file; model ids are checked against `lib`.
Result<PipelineSpec> decode_pipeline(const json_io::Json& j, const std::string& file, const VisionLibrary& lib);
Result<PipelineSpec> load_pipeline(const std::string& path, const std::string& shown, const VisionLibrary& lib);

}  // namespace gpuplan::wl_io
