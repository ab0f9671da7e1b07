#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "gpuplan/wl_io/pipeline_io.hpp"
#include "io_common.hpp"

namespace gpuplan::wl_io {

namespace {

// Bounds of an op of a stage's own op list, the same as the vision library's (widths ≤ 4096, maps ≤ 1024 px per
// side, kernels ≤ 11) so every count stays inside a 64-bit integer; repeats ≤ 256.
constexpr std::int64_t kMaxWidth = 4096, kMaxMap = 1024, kMaxKernel = 11, kMaxRepeat = 256;
// A stage's op list: at most 20000 ops and 1e15 multiply-accumulates per image (EfficientNet-B7 at 600 px has 3.8e10),
// so VisionGraph's 64-bit counts cannot overflow. A pipeline: at most 128 stages (a perception stack has tens), which
// bounds the Monte-Carlo's work; a sensor delivers at least every 1000th frame.
constexpr std::size_t kMaxOps = 20000, kMaxStages = 128;
constexpr double kMaxMacs = 1e15;
constexpr double kMaxSensorEvery = 1000;

FieldSpec positive(std::string key, Presence p, std::string unit, std::string doc, double max) {
  FieldSpec f = field(std::move(key), FieldType::number, p, std::move(doc), 0, max);
  f.min_exclusive = true;
  f.unit = std::move(unit);
  return f;
}

const std::vector<std::string> kDistributions = {"none", "lognormal", "normal"};

}  // namespace

const FieldTable& pipeline_jitter_fields() {
  static const FieldTable t{
      field("distribution", FieldType::string, Presence::required,
            "shape of the stage's duration: none (always the mean), lognormal, normal (clamped at 0)", 0, 0,
            kDistributions),
      field("cv", FieldType::number, Presence::optional,
            "coefficient of variation σ / mean (required unless distribution is none)", 0, 10),
      field("basis", FieldType::string, Presence::required,
            "why this spread: a measurement, a citation, or the assumption stated as one")};
  return t;
}

const FieldTable& pipeline_option_fields() {
  static const FieldTable t{
      field("share_backbone", FieldType::boolean, Presence::optional,
            "heads read one run of their backbone (default true); false: each head runs its own backbone copy"),
      field("int8", FieldType::boolean, Presence::optional,
            "every model stage runs in int8 (TensorRT INT8 engines; default false: each stage's precision)"),
      field("fusion", FieldType::boolean, Presence::optional,
            "TensorRT-like fused engine: batch norm folded into the convolution, activation and residual add in the "
            "GEMM epilogue (default false)"),
      field("cuda_graphs", FieldType::boolean, Presence::optional,
            "model stages replayed from CUDA graphs (default true; false: eager launches with their CPU cost)"),
      field("temporal_reuse", FieldType::boolean, Presence::optional,
            "honour every_k_frames (default true; false: every stage runs every frame)")};
  return t;
}

const FieldTable& pipeline_sensor_fields() {
  static const FieldTable t{
      field("id", FieldType::string, Presence::required, "unique sensor id (stages name it in inputs)"),
      field("kind", FieldType::string, Presence::required, "camera, lidar, radar, imu or other", 0, 0,
            {"camera", "lidar", "radar", "imu", "other"}),
      positive("rate_Hz", Presence::required, "Hz", "frames (sweeps) per second", 10000),
      field("count", FieldType::integer, Presence::optional, "sensors of this kind (default 1)", 1, 64),
      field("notes", FieldType::string, Presence::optional, "free text")};
  return t;
}

const FieldTable& pipeline_op_fields() {
  static const FieldTable t{
      field("kind", FieldType::string, Presence::required,
            "conv (k×k convolution), sepconv (depthwise k×k + pointwise 1×1), upsample (×scale, read once, written "
            "once), add (two maps summed)",
            0, 0, {"conv", "sepconv", "upsample", "add"}),
      field("name", FieldType::string, Presence::required, "op name (numbered .0, .1, … when repeated)"),
      field("c_in", FieldType::integer, Presence::required, "input channels", 1, kMaxWidth),
      field("c_out", FieldType::integer, Presence::optional, "output channels (conv, sepconv; default c_in)", 1,
            kMaxWidth),
      field("h", FieldType::integer, Presence::required, "input map height", 1, kMaxMap),
      field("w", FieldType::integer, Presence::optional, "input map width (default h)", 1, kMaxMap),
      field("kernel", FieldType::integer, Presence::optional, "conv, sepconv: kernel size (default 1 for conv, 3 for "
                                                              "sepconv)", 1, kMaxKernel),
      field("stride", FieldType::integer, Presence::optional, "conv, sepconv: stride (default 1)", 1, 4),
      field("groups", FieldType::integer, Presence::optional, "conv: groups (default 1)", 1, kMaxWidth),
      field("scale", FieldType::integer, Presence::optional, "upsample: factor per side (required for upsample)", 2, 16),
      field("bn", FieldType::boolean, Presence::optional, "a batch norm after the convolution (default false; "
                                                          "without it the convolution has a bias)"),
      field("act", FieldType::string, Presence::optional, "activation after it: none (default), relu, silu", 0, 0,
            {"none", "relu", "silu"}),
      field("repeat", FieldType::integer, Presence::optional, "the op this many times (default 1)", 1, kMaxRepeat)};
  return t;
}

const FieldTable& pipeline_stage_fields() {
  static const FieldTable t = [] {
    FieldSpec jitter = field("jitter", FieldType::object, Presence::optional,
                             "the duration's spread (default: none, the mean every frame)");
    jitter.nested = &pipeline_jitter_fields();
    return FieldTable{
        field("id", FieldType::string, Presence::required, "unique stage id"),
        field("engine", FieldType::string, Presence::required,
              "where it runs: gpu, dla0, dla1, … (a DLA; on hardware without one it falls back to the GPU, as "
              "TensorRT's GPU fallback does), cpu0, cpu1, … (one CPU thread each); stages on one engine serialise"),
        field("model", FieldType::string, Presence::optional, "a vision library model (data/models/vision)"),
        field("resolution_px", FieldType::integer, Presence::optional, "the model's input size (default its own)", 16,
              1024),
        field("ops", FieldType::any, Presence::optional, "the stage's own op list (a task head): list of ops"),
        field("ops_source", FieldType::string, Presence::optional,
              "citation of the op list's structure (required with ops)"),
        positive("cpu_ms", Presence::optional, "ms", "a fixed time instead of a model (tracking, fusion, planning)",
                 10000),
        field("memory_GBps", FieldType::number, Presence::optional,
              "with cpu_ms: DRAM traffic while it runs (the shared-memory model; default 0)", 0, 10000),
        field("precision", FieldType::string, Presence::optional,
              "model stages: int8 (default), fp16 or bf16", 0, 0, {"int8", "fp16", "bf16"}),
        field("batch", FieldType::integer, Presence::optional, "images per run (e.g. one per camera; default 1)", 1,
              256),
        field("backbone", FieldType::string, Presence::optional,
              "a head: the earlier model stage whose features it reads (it waits for it; unshared, it runs its own "
              "copy)"),
        field("after", FieldType::string_list, Presence::optional, "stages that must finish first (listed earlier)"),
        field("inputs", FieldType::string_list, Presence::optional, "sensors it reads"),
        field("every_k_frames", FieldType::integer, Presence::optional,
              "temporal reuse: runs on every k-th frame, its output reused between (default 1)", 1, 1000),
        jitter,
        field("notes", FieldType::string, Presence::optional, "free text")};
  }();
  return t;
}

const FieldTable& pipeline_fields() {
  static const FieldTable t = [] {
    FieldSpec options = field("options", FieldType::object, Presence::optional, "optimisations (all default off "
                                                                                 "except share_backbone, cuda_graphs "
                                                                                 "and temporal_reuse)");
    options.nested = &pipeline_option_fields();
    return FieldTable{
        field("schema", FieldType::integer, Presence::required, "file format version (1)", 1, 1),
        field("kind", FieldType::string, Presence::required, "\"pipeline\"", 0, 0, {"pipeline"}),
        field("name", FieldType::string, Presence::required, "what the pipeline is"),
        field("description", FieldType::string, Presence::optional, "free text"),
        field("hardware", FieldType::string, Presence::optional, "default GPU id or alias (--gpu overrides)"),
        field("sensors", FieldType::any, Presence::required, "list of sensors; the fastest sets the frame rate"),
        positive("deadline_ms", Presence::required, "ms", "end-to-end latency budget of one frame", 10000),
        options,
        field("stages", FieldType::any, Presence::required, "list of stages, in an order they can run"),
        field("sources", FieldType::string_list, Presence::required, "citations of the numbers in the file"),
        field("notes", FieldType::string, Presence::optional, "free text")};
  }();
  return t;
}

const PipelineStage* PipelineSpec::find(const std::string& id) const {
  for (const auto& s : stages)
    if (s.id == id) return &s;
  return nullptr;
}
int PipelineSpec::index_of(const std::string& id) const {
  for (std::size_t i = 0; i < stages.size(); ++i)
    if (stages[i].id == id) return static_cast<int>(i);
  return -1;
}
double PipelineSpec::frame_rate_Hz() const {
  double r = 0;
  for (const auto& s : sensors) r = std::max(r, s.rate_Hz);
  return r;
}

namespace {

/// Expands one op entry into VisionOps (conv → conv [+ BN] [+ activation]; sepconv → depthwise + pointwise [+ BN]
/// [+ activation]; upsample → a streaming op reading the input once and writing the output once, the pricer's
/// pooling-with-window row; add → an add of two maps).
void expand_op(const Json& oj, const std::string& file, const std::string& ptr, Diagnostics& diags,
               std::vector<wl::VisionOp>& out) {
  if (!oj.is_object()) {
    diags.error(file, ptr, fmt::format("expected an op object, got {}", json_io::describe_type(oj)));
    return;
  }
  const std::size_t before = diags.error_count();
  ObjectReader r(oj, pipeline_op_fields(), file, ptr, diags);
  const std::string kind = r.str("kind").value_or("");
  const std::string name = r.str("name").value_or("");
  const std::int64_t c_in = r.integer("c_in").value_or(1);
  const std::int64_t c_out = r.integer("c_out").value_or(c_in);
  const std::int64_t h = r.integer("h").value_or(1);
  const std::int64_t w = r.integer("w").value_or(h);
  const std::int64_t stride = r.integer("stride").value_or(1);
  const std::int64_t groups = r.integer("groups").value_or(1);
  const std::int64_t kernel = r.integer("kernel").value_or(kind == "sepconv" ? 3 : 1);
  const std::int64_t repeat = r.integer("repeat").value_or(1);
  const bool bn = r.boolean("bn").value_or(false);
  const std::string act = r.str("act").value_or("none");
  const bool conv_like = kind == "conv" || kind == "sepconv";
  for (const char* k : {"kernel", "stride", "bn", "act", "c_out"})
    if (!conv_like && r.has(k)) r.error(k, fmt::format("a {} op takes no {}", kind, k));
  if (kind != "conv" && r.has("groups")) r.error("groups", fmt::format("a {} op takes no groups", kind));
  if (kind == "upsample" && !r.has("scale")) r.error("scale", "an upsample op needs scale");
  if (kind != "upsample" && r.has("scale")) r.error("scale", fmt::format("a {} op takes no scale", kind));
  if (kind == "conv" && (c_in % groups != 0 || c_out % groups != 0))
    r.error("groups", fmt::format("groups {} must divide c_in {} and c_out {}", groups, c_in, c_out));
  const std::int64_t scale = r.integer("scale").value_or(2);
  if (kind == "upsample" && (h * scale > kMaxMap || w * scale > kMaxMap))
    r.error("scale", fmt::format("the upsampled map {}×{} exceeds {} px a side", h * scale, w * scale, kMaxMap));
  if (!r.valid() || diags.error_count() > before) return;
  const std::int64_t ho = (h + stride - 1) / stride, wo = (w + stride - 1) / stride;
  for (std::int64_t i = 0; i < repeat; ++i) {
    const std::string n = repeat > 1 ? fmt::format("{}.{}", name, i) : name;
    auto base = [&](wl::VisionOpKind k, std::string nm) {
      wl::VisionOp op;
      op.kind = k;
      op.name = std::move(nm);
      return op;
    };
    if (conv_like) {
      std::int64_t c = c_in;
      if (kind == "sepconv") {
        wl::VisionOp dw = base(wl::VisionOpKind::conv, n + ".dw");
        dw.c_in = dw.c_out = c_in;
        dw.h_in = h, dw.w_in = w, dw.h_out = ho, dw.w_out = wo;
        dw.kernel = kernel, dw.stride = stride, dw.groups = c_in;
        out.push_back(dw);
        wl::VisionOp pw = base(wl::VisionOpKind::conv, n + ".pw");
        pw.c_in = c_in, pw.c_out = c_out, pw.h_in = pw.h_out = ho, pw.w_in = pw.w_out = wo;
        pw.bias = !bn;
        out.push_back(pw);
      } else {
        wl::VisionOp cv = base(wl::VisionOpKind::conv, n);
        cv.c_in = c, cv.c_out = c_out, cv.h_in = h, cv.w_in = w, cv.h_out = ho, cv.w_out = wo;
        cv.kernel = kernel, cv.stride = stride, cv.groups = groups, cv.bias = !bn;
        out.push_back(cv);
      }
      auto map_op = [&](wl::VisionOpKind k, std::string nm) {
        wl::VisionOp op = base(k, std::move(nm));
        op.c_in = op.c_out = c_out, op.h_in = op.h_out = ho, op.w_in = op.w_out = wo;
        return op;
      };
      if (bn) out.push_back(map_op(wl::VisionOpKind::norm, n + ".bn"));
      if (act != "none") {
        wl::VisionOp a = map_op(wl::VisionOpKind::activation, n + "." + act);
        a.act = act == "relu" ? wl::VisionAct::relu : wl::VisionAct::silu;
        out.push_back(a);
      }
    } else if (kind == "upsample") {
      wl::VisionOp u = base(wl::VisionOpKind::pool, n);
      u.pool = wl::VisionPool::avg;
      u.c_in = u.c_out = c_in, u.h_in = h, u.w_in = w, u.h_out = h * scale, u.w_out = w * scale;
      out.push_back(u);
    } else {  // add
      wl::VisionOp a = base(wl::VisionOpKind::add, n);
      a.c_in = a.c_out = c_in, a.h_in = a.h_out = h, a.w_in = a.w_out = w;
      out.push_back(a);
    }
  }
}

bool engine_ok(const std::string& e) {
  auto numbered = [&](const std::string& prefix) {
    if (e.rfind(prefix, 0) != 0 || e.size() == prefix.size() || e.size() > prefix.size() + 2) return false;
    return std::all_of(e.begin() + static_cast<std::ptrdiff_t>(prefix.size()), e.end(),
                       [](char c) { return c >= '0' && c <= '9'; });
  };
  return e == "gpu" || numbered("dla") || numbered("cpu");
}

}  // namespace

Result<PipelineSpec> decode_pipeline(const Json& j, const std::string& file, const VisionLibrary& lib) {
  Diagnostics diags;
  PipelineSpec p;
  p.file = file;
  if (!j.is_object()) {
    diags.error(file, "", fmt::format("expected a pipeline object, got {}", json_io::describe_type(j)));
    return diags;
  }
  ObjectReader top(j, pipeline_fields(), file, "", diags);
  p.name = top.str("name").value_or("");
  p.description = top.str("description").value_or("");
  p.hardware = top.str("hardware").value_or("");
  p.deadline_ms = top.num("deadline_ms").value_or(0);
  p.sources = top.strings("sources").value_or(std::vector<std::string>{});
  if (top.has("sources") && p.sources.empty()) top.error("sources", "cite where the file's numbers come from");
  if (auto o = top.object("options")) {
    p.options.share_backbone = o->boolean("share_backbone").value_or(true);
    p.options.int8 = o->boolean("int8").value_or(false);
    p.options.fusion = o->boolean("fusion").value_or(false);
    p.options.cuda_graphs = o->boolean("cuda_graphs").value_or(true);
    p.options.temporal_reuse = o->boolean("temporal_reuse").value_or(true);
  }

  // Sensors.
  const Json* sj = top.raw("sensors");
  if (sj != nullptr && (!sj->is_array() || sj->empty()))
    diags.error(file, "/sensors", fmt::format("expected a non-empty list of sensors, got {}",
                                              sj->is_array() ? std::string("an empty list") : json_io::describe_type(*sj)));
  else if (sj != nullptr) {
    std::set<std::string> ids;
    for (std::size_t i = 0; i < sj->size(); ++i) {
      const std::string ptr = fmt::format("/sensors/{}", i);
      const Json& e = (*sj)[i];
      if (!e.is_object()) {
        diags.error(file, ptr, fmt::format("expected a sensor object, got {}", json_io::describe_type(e)));
        continue;
      }
      ObjectReader r(e, pipeline_sensor_fields(), file, ptr, diags);
      PipelineSensor s;
      s.id = r.str("id").value_or("");
      s.kind = r.str("kind").value_or("");
      s.rate_Hz = r.num("rate_Hz").value_or(0);
      s.count = static_cast<int>(r.integer("count").value_or(1));
      if (!s.id.empty() && !ids.insert(s.id).second) r.error("id", fmt::format("duplicate sensor id '{}'", s.id));
      if (r.valid()) p.sensors.push_back(std::move(s));
    }
  }
  const double frame_Hz = p.frame_rate_Hz();
  if (frame_Hz > 0 && p.deadline_ms > 1000.0 / frame_Hz * (1 + 1e-9))
    diags.note(file, "/deadline_ms",
               fmt::format("the deadline {} ms is longer than the {:.4g} ms frame period: frames overlap, which the "
                           "model does not schedule (one frame in flight)",
                           p.deadline_ms, 1000.0 / frame_Hz));

  // Stages.
  const Json* st = top.raw("stages");
  if (st != nullptr && (!st->is_array() || st->empty())) {
    diags.error(file, "/stages", fmt::format("expected a non-empty list of stages, got {}",
                                             st->is_array() ? std::string("an empty list") : json_io::describe_type(*st)));
    st = nullptr;
  } else if (st != nullptr && st->size() > kMaxStages) {
    diags.error(file, "/stages", fmt::format("{} stages; at most {}", st->size(), kMaxStages));
    st = nullptr;
  }
  std::vector<std::string> seen;
  for (std::size_t i = 0; st != nullptr && i < st->size(); ++i) {
    const std::string ptr = fmt::format("/stages/{}", i);
    const Json& e = (*st)[i];
    if (!e.is_object()) {
      diags.error(file, ptr, fmt::format("expected a stage object, got {}", json_io::describe_type(e)));
      continue;
    }
    const std::size_t before = diags.error_count();
    ObjectReader r(e, pipeline_stage_fields(), file, ptr, diags);
    PipelineStage s;
    s.pointer = ptr;
    s.id = r.str("id").value_or("");
    s.engine = r.str("engine").value_or("");
    s.model = r.str("model").value_or("");
    s.resolution = r.integer("resolution_px");
    s.ops_source = r.str("ops_source").value_or("");
    s.cpu_ms = r.num("cpu_ms");
    s.memory_GBps = r.num("memory_GBps").value_or(0);
    s.precision = r.str("precision").value_or("int8");
    s.batch = r.integer("batch").value_or(1);
    s.backbone = r.str("backbone").value_or("");
    s.after = r.strings("after").value_or(std::vector<std::string>{});
    s.inputs = r.strings("inputs").value_or(std::vector<std::string>{});
    s.every_k_frames = static_cast<int>(r.integer("every_k_frames").value_or(1));
    if (auto jr = r.object("jitter")) {
      s.jitter.distribution = jr->str("distribution").value_or("none");
      s.jitter.cv = jr->num("cv").value_or(0);
      s.jitter.basis = jr->str("basis").value_or("");
      if (s.jitter.distribution != "none" && !jr->has("cv"))
        jr->error("distribution", fmt::format("a {} spread needs cv", s.jitter.distribution));
      if (s.jitter.distribution == "none" && jr->has("cv") && s.jitter.cv > 0)
        jr->error("cv", "distribution none takes no cv (it is always the mean)");
    }
    if (r.has("engine") && !engine_ok(s.engine))
      r.error("engine", fmt::format("'{}' is not an engine: gpu, dla0…dla99 or cpu0…cpu99", s.engine));
    if (!s.id.empty() && std::find(seen.begin(), seen.end(), s.id) != seen.end())
      r.error("id", fmt::format("duplicate stage id '{}'", s.id));
    const int kinds = (r.has("model") ? 1 : 0) + (r.has("ops") ? 1 : 0) + (r.has("cpu_ms") ? 1 : 0);
    if (kinds != 1)
      diags.error(file, ptr,
                  fmt::format("a stage is a model, an op list or a fixed time: give exactly one of model, ops, cpu_ms "
                              "(got {})",
                              kinds));
    if (r.has("model") && lib.find(s.model) == nullptr)
      r.error("model", fmt::format("unknown vision model '{}'{}", s.model, did_you_mean(s.model, lib.names())));
    if (r.has("model") && s.resolution) {
      if (const auto* m = lib.find(s.model))
        if (const std::string why = wl::vision_input_problem(m->arch, *s.resolution); !why.empty())
          r.error("resolution_px", why);
    }
    if (r.has("resolution_px") && !r.has("model")) r.error("resolution_px", "only a model stage takes resolution_px");
    if (const Json* ops = r.raw("ops")) {
      if (!ops->is_array() || ops->empty())
        r.error("ops", fmt::format("expected a non-empty list of ops, got {}",
                                   ops->is_array() ? std::string("an empty list") : json_io::describe_type(*ops)));
      else
        for (std::size_t k = 0; k < ops->size(); ++k)
          expand_op((*ops)[k], file, fmt::format("{}/ops/{}", ptr, k), diags, s.ops);
      if (!r.has("ops_source")) r.error("ops", "an op list needs ops_source (the citation of its structure)");
      double macs = 0;
      for (const auto& op : s.ops) macs += static_cast<double>(op.macs());
      if (s.ops.size() > kMaxOps)
        r.error("ops", fmt::format("the op list expands to {} ops; at most {}", s.ops.size(), kMaxOps));
      else if (macs > kMaxMacs)
        r.error("ops", fmt::format("the op list has {:.3g} multiply-accumulates per image; at most {:g}", macs, kMaxMacs));
    }
    if (r.has("ops_source") && !r.has("ops")) r.error("ops_source", "ops_source goes with ops");
    const bool fixed = r.has("cpu_ms");
    if (fixed) {
      for (const char* k : {"precision", "batch", "backbone"})
        if (r.has(k)) r.error(k, fmt::format("a fixed-time stage takes no {}", k));
    } else {
      if (r.has("memory_GBps")) r.error("memory_GBps", "memory_GBps goes with cpu_ms (a model's traffic is priced)");
      if (s.engine.rfind("cpu", 0) == 0)
        r.error("engine", "a model or op-list stage runs on gpu or a dla (give a CPU stage cpu_ms)");
    }
    if (r.has("backbone")) {
      const int b = p.index_of(s.backbone);
      if (b < 0)
        r.error("backbone", fmt::format("'{}' is no earlier stage{}", s.backbone, did_you_mean(s.backbone, seen)));
      else if (p.stages[static_cast<std::size_t>(b)].model.empty())
        r.error("backbone", fmt::format("'{}' is not a model stage", s.backbone));
      else if (!r.has("ops"))
        r.error("backbone", "a head on a backbone is an op list (ops)");
      else if (std::find(s.after.begin(), s.after.end(), s.backbone) == s.after.end())
        s.after.push_back(s.backbone);
    }
    for (std::size_t k = 0; k < s.after.size(); ++k) {
      const std::string& a = s.after[k];
      if (a == s.id) r.error("after", fmt::format("stage '{}' cannot wait for itself", a));
      else if (std::find(seen.begin(), seen.end(), a) == seen.end()) {
        bool later = false;
        for (std::size_t m = i + 1; m < st->size(); ++m)
          if ((*st)[m].is_object() && (*st)[m].value("id", Json()) == Json(a)) later = true;
        r.error("after", later ? fmt::format("'{}' is listed after this stage: list stages in an order they can run "
                                             "(a cycle cannot be written)",
                                             a)
                               : fmt::format("unknown stage '{}'{}", a, did_you_mean(a, seen)));
      }
    }
    double slowest = 0;
    for (const auto& in : s.inputs) {
      auto it = std::find_if(p.sensors.begin(), p.sensors.end(), [&](const PipelineSensor& x) { return x.id == in; });
      if (it == p.sensors.end()) {
        std::vector<std::string> names;
        for (const auto& x : p.sensors) names.push_back(x.id);
        r.error("inputs", fmt::format("unknown sensor '{}'{}", in, did_you_mean(in, names)));
        continue;
      }
      const double k = frame_Hz / it->rate_Hz;
      if (k > kMaxSensorEvery)
        r.error("inputs", fmt::format("sensor '{}' at {} Hz delivers every {:.4g} frames of {} Hz; at most every {:g}",
                                      in, it->rate_Hz, k, frame_Hz, kMaxSensorEvery));
      else if (std::abs(k - std::round(k)) > 1e-6)
        r.error("inputs", fmt::format("sensor '{}' at {} Hz does not deliver on a whole number of {} Hz frames", in,
                                      it->rate_Hz, frame_Hz));
      else slowest = std::max(slowest, std::round(k));
    }
    s.sensor_every = slowest > 0 ? static_cast<int>(slowest) : 1;
    seen.push_back(s.id);
    if (diags.error_count() == before && r.valid()) p.stages.push_back(std::move(s));
    else p.stages.push_back(PipelineStage{});  // keeps indices for later stages' checks
    p.stages.back().id = seen.back();
  }
  if (diags.has_errors()) return diags;
  return Result<PipelineSpec>(std::move(p), std::move(diags));
}

Result<PipelineSpec> load_pipeline(const std::string& path, const std::string& shown, const VisionLibrary& lib) {
  Diagnostics diags;
  auto text = json_io::read_text_file(path, diags);
  if (!text) return diags;
  auto j = json_io::parse(*text, shown, diags);
  if (!j) return diags;
  auto r = decode_pipeline(*j, shown, lib);
  return r;
}

}  // namespace gpuplan::wl_io
