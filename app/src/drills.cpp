#include "gpuplan/app/drills.hpp"
#include "gpuplan/app/drills_course.hpp"
#include "gpuplan/app/drills_compress.hpp"
#include "gpuplan/app/drills_realtime.hpp"
#include "gpuplan/app/drills_timeline.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/back_of_envelope.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/memory.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/roofline.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_memory.hpp"

#include "drill_field_specs.hpp"

namespace gpuplan::app {

namespace {
namespace u = units;
using json_io::FieldSpec;
using json_io::FieldTable;
using json_io::FieldType;
using json_io::Presence;
using drill_specs::integer;  // drill_field_specs.hpp
using drill_specs::num;
using drill_specs::text;

const std::vector<std::string> kDtypes = {"fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"};

// Shared input specs.
const FieldSpec kPeak = num("peak_TFLOPs", "TFLOP/s", 0, 1e5, "dense peak compute");
const FieldSpec kBw = num("bandwidth_TBps", "TB/s", 0, 1e3, "memory bandwidth");
const FieldSpec kModel = drill_specs::model_field();
const FieldSpec kElemBytes = num("bytes_per_element", "B", 0, 16, "bytes per cached element (bf16 = 2)");
const FieldSpec kParamsB = num("params_B", "1e9 parameters", 0, 1e5, "nominal parameters (the textbook's \"7B\")");
const FieldSpec kTokens = num("tokens", "tokens", 0, 1e16, "tokens");
const FieldSpec kFpe = num("flops_per_element", "FLOP", 0, 1e6, "FLOPs per element", false);
const FieldSpec kBpe = num("bytes_per_element", "B", 0, 1e6, "bytes read + written per element");
const FieldSpec kBytesGB = num("bytes_GB", "GB", 0, 1e6, "buffer per GPU");
const FieldSpec kGpus = integer("gpus", 1, 1e7, "GPUs");

struct Kind {
  std::string name;
  Dimension dim;
  FieldTable inputs;
};

const std::vector<Kind>& kinds() {
  static const FieldTable serving = {
      kModel,
      text("gpu", "a GPU of the hardware data (its vendor \"GB\" label is the capacity)"),
      kParamsB,
      text("weight_dtype", "stored weight format", kDtypes),
      text("kv_dtype", "KV cache format", kDtypes),
      integer("context", 1, 1e8, "tokens per sequence"),
      integer("concurrency", 1, 1e8, "sequences held at once"),
      num("paging_overhead", "", 0, 10, "flat fraction added to the KV", false),
      num("usable_fraction", "", 0, 1, "usable fraction of each GPU's memory"),
  };
  static const std::vector<Kind> k = [] {
    std::vector<Kind> v = {
      {"ridge", Dimension::intensity, {kPeak, kBw}},
      {"gemm_intensity", Dimension::intensity,
       {integer("m", 1, 1e9, "rows of A and C"), integer("n", 1, 1e9, "columns of B and C"),
        integer("k", 1, 1e9, "inner dimension")}},
      {"gemm_padding_speedup", Dimension::ratio,
       {text("gpu", "a GPU of the hardware data"), text("dtype", "the GEMM's 16-bit type", {"bf16", "fp16"}),
        integer("m", 1, 1e9, "rows of A and C"), integer("n", 1, 1e9, "columns of B and C (a leading dimension)"),
        integer("k", 1, 1e9, "inner dimension (a leading dimension)"), integer("pad_m", 1, 1e9, "M after padding"),
        integer("pad_n", 1, 1e9, "N after padding"), integer("pad_k", 1, 1e9, "K after padding")}},
      {"intensity", Dimension::intensity, {num("elements", "", 0, 1e15, "elements the op touches"), kFpe, kBpe}},
      {"attainable", Dimension::flop_rate, {kPeak, kBw, kFpe, kBpe}},
      {"kv_token", Dimension::bytes, {kModel, kElemBytes}},
      {"kv_sequence", Dimension::bytes, {kModel, integer("tokens", 1, 1e9, "tokens in the sequence"), kElemBytes}},
      {"weights_plus_kv", Dimension::bytes,
       {kParamsB, num("weight_bytes", "B", 0, 16, "bytes per weight"), kModel,
        integer("tokens", 1, 1e9, "tokens in the sequence"), kElemBytes}},
      {"serving_memory_needed", Dimension::bytes, serving},
      {"serving_kv_per_sequence", Dimension::bytes, serving},
      {"serving_kv_total", Dimension::bytes, serving},
      {"serving_gpus", Dimension::count, serving},
      {"allreduce_volume", Dimension::bytes, {kBytesGB, kGpus}},
      {"allreduce_time", Dimension::time,
       {kBytesGB, kGpus, num("busbw_GBps", "GB/s", 0, 1e5, "bus bandwidth per GPU"),
        num("latency_us", "µs", 0, 1e6, "α: latency per ring step", false, Presence::optional)}},
      {"train_flops", Dimension::flops, {kParamsB, kTokens}},
      {"train_days", Dimension::time, {kParamsB, kTokens, num("gpus", "", 0, 1e8, "GPUs"), kPeak,
                                        num("mfu", "", 0, 1, "model-FLOPs utilisation")}},
      {"model_states", Dimension::bytes,
       {kModel, kParamsB, num("weight_bytes", "B", 0, 16, "bytes per working weight"),
        num("gradient_bytes", "B", 0, 16, "bytes per gradient"),
        num("master_bytes", "B", 0, 16, "bytes per master weight (0: none)", false),
        text("optimizer", "optimizer", {"adamw", "adamw_8bit", "sgd"}), integer("zero", 0, 3, "ZeRO stage (3 = FSDP)"),
        integer("dp", 1, 1e7, "data-parallel GPUs the states are sharded over")}},
      {"speculative_tokens", Dimension::count,
       {num("acceptance", "", 0, 1, "α: acceptance probability per draft token", false),
        integer("draft_tokens", 0, 1000, "k: draft tokens per step")}},
      {"speculative_speedup", Dimension::ratio,
       {num("acceptance", "", 0, 1, "α: acceptance probability per draft token", false),
        integer("draft_tokens", 0, 1000, "k: draft tokens per step"), num("draft_ms", "ms", 0, 1e6, "draft step"),
        num("target_ms", "ms", 0, 1e6, "target step (= verification step)")}},
      {"decode_floor", Dimension::time, {num("weights_GB", "GB", 0, 1e6, "weights read per token"), kBw}},
      {"prefill_floor", Dimension::time, {kParamsB, kTokens, kPeak}},
      {"pipeline_bubble", Dimension::ratio,
       {integer("pp", 1, 1e4, "pipeline stages"), integer("micro_batches", 1, 1e7, "micro-batches per step"),
        integer("virtual_stages", 1, 1e3, "model chunks per stage (1 = plain 1F1B)")}},
    };
    for (const auto& r : realtime_drill_kinds()) v.push_back({r.name, r.dim, r.inputs});  // drills_realtime.cpp
    for (const auto& r : timeline_drill_kinds()) v.push_back({r.name, r.dim, r.inputs});  // drills_timeline.cpp
    for (const auto& r : course_drill_kinds()) v.push_back({r.name, r.dim, r.inputs});    // drills_course.cpp
    for (const auto& r : compress_drill_kinds()) v.push_back({r.name, r.dim, r.inputs});  // drills_compress.cpp
    return v;
  }();
  return k;
}

const Kind* find_kind(const std::string& name) {
  for (const auto& k : kinds())
    if (k.name == name) return &k;
  return nullptr;
}

std::optional<model::StoreDtype> dtype_of_bytes(double b) {
  if (b == 4) return model::StoreDtype::fp32;
  if (b == 2) return model::StoreDtype::bf16;
  if (b == 1) return model::StoreDtype::fp8;
  if (b == 0.5) return model::StoreDtype::int4;
  return std::nullopt;
}

/// The textbook's serving-memory assumptions as explicit options (what `gpuplan kv --simple` sets): vendor "GB"
/// label, no runtime overheads, nominal bytes per weight, a contiguous cache, the pooled GPU count.
model::ServingMemoryPlan textbook_serving_plan() {
  model::ServingMemoryPlan p;
  p.engine = model::MemoryEngine::plain;
  p.memory_fraction = 1.0;
  p.capacity = model::CapacityBasis::label;
  p.overheads = model::no_serving_overheads();
  p.weight_scale_overhead = false;
  p.block_size = 1;
  p.engine_block_size = false;
  p.gpu_count = model::GpuCountMethod::pooled;
  return p;
}

/// A root node that names the quantity a drill asks for and points at the model's tree below it.
Derivation pick(std::string id, std::string title, std::string formula, std::string result, Derivation child,
                std::vector<DerivationInput> inputs = {}) {
  Derivation d{std::move(id), std::move(title), std::move(formula), std::move(inputs), std::move(result), {}, {}};
  d.children.push_back(std::move(child));
  return d;
}
/// The model's trees name the CLI flag a user-plan input comes from (`--seq`); in a drill it comes from the question.
void attribute_to_question(Derivation& d, const std::string& origin) {
  for (auto& in : d.inputs)
    if (in.origin.kind == OriginKind::user && in.origin.ref.rfind("--", 0) == 0)
      in.origin.ref = origin + " (as " + in.origin.ref + ")";
  for (auto& c : d.children) attribute_to_question(c, origin);
}
}  // namespace

std::vector<std::string> drill_kinds() {
  std::vector<std::string> o;
  for (const auto& k : kinds()) o.push_back(k.name);
  return o;
}

std::optional<Dimension> kind_dimension(const std::string& kind) {
  const Kind* k = find_kind(kind);
  return k ? std::optional<Dimension>(k->dim) : std::nullopt;
}

std::optional<KindAnswer> evaluate_kind(const std::string& kind, const json_io::Json& inputs, const DrillContext& ctx,
                                        const std::string& file, const std::string& pointer, Diagnostics& diags) {
  const Kind* k = find_kind(kind);
  if (k == nullptr) {
    diags.error(file, pointer.substr(0, pointer.rfind('/')) + "/kind",
                fmt::format("unknown kind '{}'{}", kind, did_you_mean(kind, drill_kinds())));
    return std::nullopt;
  }
  if (!inputs.is_object()) {
    diags.error(file, pointer, fmt::format("expected an object of inputs, got {}", json_io::describe_type(inputs)));
    return std::nullopt;
  }
  const std::size_t before = diags.error_count();
  json_io::ObjectReader in(inputs, k->inputs, file, pointer, diags);
  auto n = [&](const char* key) { return in.num(key).value_or(0.0); };
  auto i = [&](const char* key) { return in.integer(key).value_or(0); };
  const wl::TransformerArch* arch = nullptr;
  if (in.has("model")) {
    const std::string id = in.str("model").value_or("");
    const auto* m = ctx.lib ? ctx.lib->find(id) : nullptr;
    if (m == nullptr)
      diags.error(file, in.pointer("model"),
                  fmt::format("unknown model '{}'{}", id, ctx.lib ? did_you_mean(id, ctx.lib->names()) : ""));
    else arch = &m->arch;
  }
  const hw::GpuSpec* gpu = nullptr;
  if (in.has("gpu")) {
    const std::string id = in.str("gpu").value_or("");
    gpu = ctx.db ? ctx.db->find_gpu(id) : nullptr;
    if (gpu == nullptr)
      diags.error(file, in.pointer("gpu"),
                  ctx.db ? fmt::format("unknown GPU '{}'{}", id, did_you_mean(id, ctx.db->gpu_names()))
                         : "this kind needs the hardware data");
  }
  if (!in.valid() || diags.error_count() > before) return std::nullopt;

  const Origin o = Origin::user(ctx.origin);
  KindAnswer a;
  a.dim = k->dim;
  if (kind == "ridge") {
    auto e = model::ridge_point(u::tflops(n("peak_TFLOPs")), u::tb_per_s(n("bandwidth_TBps")), o, o);
    a.value = e.value.raw();
    a.derivation = std::move(e.derivation);
  } else if (kind == "gemm_intensity") {
    // Intensity does not depend on the device; any bf16 device prices the op.
    hw::GpuSpec g;
    g.info.id = "any";
    g.dense_peak[static_cast<std::size_t>(hw::Precision::bf16)] = u::tflops(312);
    g.memory.bandwidth = u::tb_per_s(2.0);
    Derivation why;
    const auto op = model::gemm_cost(fmt::format("{}x{}x{}", i("m"), i("n"), i("k")), {i("m"), i("n"), i("k"), 1},
                                     hw::Precision::bf16, model::make_device(g), &why);
    a.value = op.intensity().raw();
    a.derivation = pick("gemm.intensity", "Arithmetic intensity of a bf16 GEMM", "I = FLOPs / bytes = 2MNK / (2(MK + KN + MN))",
                        u::format(op.intensity()), std::move(why),
                        {{"FLOPs", u::format(op.flops), "2·M·N·K", Origin::derived("gemm")},
                         {"bytes", u::format(op.bytes), "A, B read and C written once, 2 B each", Origin::derived("gemm")}});
  } else if (kind == "intensity" || kind == "attainable") {
    const double el = kind == "intensity" ? n("elements") : 1.0;  // the ratio is what the roof needs
    auto e = model::arithmetic_intensity("the op", u::flop(el * n("flops_per_element")),
                                         u::bytes(el * n("bytes_per_element")), o);
    if (kind == "intensity") {
      a.value = e.value.raw();
      a.derivation = std::move(e.derivation);
    } else {
      auto p = model::attainable(u::tflops(n("peak_TFLOPs")), u::tb_per_s(n("bandwidth_TBps")), e.value, o);
      a.value = p.value.raw();
      a.derivation = std::move(p.derivation);
      a.derivation.children.push_back(std::move(e.derivation));
    }
  } else if (kind == "gemm_padding_speedup") {
    // The GEMM as given against the same GEMM zero-padded (gemm_cost's alignment classes and tiles, the GPU's data).
    const hw::Precision p = in.str("dtype").value_or("bf16") == "fp16" ? hw::Precision::fp16 : hw::Precision::bf16;
    const model::Device dev = model::make_device(*gpu);
    Derivation w_as, w_pad;
    const auto as = model::gemm_cost(fmt::format("{}x{}x{}", i("m"), i("n"), i("k")), {i("m"), i("n"), i("k"), 1}, p,
                                     dev, &w_as);
    const auto pad = model::gemm_cost(fmt::format("{}x{}x{}", i("pad_m"), i("pad_n"), i("pad_k")),
                                      {i("pad_m"), i("pad_n"), i("pad_k"), 1}, p, dev, &w_pad);
    a.value = as.time.raw() / pad.time.raw();
    a.derivation = pick("gemm.padding_speedup", "Speed-up from padding a GEMM's dimensions", "t(as given) / t(padded)",
                        fmt::format("{:.3g}×", a.value), std::move(w_as),
                        {{"t(as given)", u::format(as.time), "the GEMM as given", Origin::derived("gemm")},
                         {"t(padded)", u::format(pad.time), "the padded GEMM (more FLOPs, aligned leading dimensions)",
                          Origin::derived("gemm")}});
    a.derivation.children.push_back(std::move(w_pad));
  } else if (kind == "kv_token" || kind == "kv_sequence") {
    const auto kv = model::kv_cache_size(*arch, kind == "kv_token" ? 1 : i("tokens"), n("bytes_per_element"));
    a.value = (kind == "kv_token" ? kv.per_token_full : kv.per_sequence).raw();
    a.derivation = kv.derivation;
  } else if (kind == "weights_plus_kv" || kind.rfind("serving_", 0) == 0) {
    auto plan = textbook_serving_plan();
    hw::GpuSpec any;  // weights + KV do not depend on the GPU
    any.info.id = any.info.name = "any GPU";
    any.memory.capacity_label = u::gigabytes(80);
    if (kind == "weights_plus_kv") {
      const auto wd = dtype_of_bytes(n("weight_bytes")), kd = dtype_of_bytes(n("bytes_per_element"));
      if (!wd) diags.error(file, in.pointer("weight_bytes"), "expected 4, 2, 1 or 0.5 (fp32, bf16, fp8, int4)");
      if (!kd) diags.error(file, in.pointer("bytes_per_element"), "expected 4, 2, 1 or 0.5 (fp32, bf16, fp8, int4)");
      if (!wd || !kd) return std::nullopt;
      plan.weights = model::default_weight_quant(*wd);
      plan.kv = model::default_kv_quant(*kd);
      plan.context = i("tokens");
      plan.concurrency = 1;
      gpu = &any;
    } else {
      plan.weights = model::default_weight_quant(*model::parse_store_dtype(in.str("weight_dtype").value_or("")));
      plan.kv = model::default_kv_quant(*model::parse_store_dtype(in.str("kv_dtype").value_or("")));
      plan.context = i("context");
      plan.concurrency = i("concurrency");
      plan.paging_overhead = n("paging_overhead");
      plan.memory_fraction = n("usable_fraction");
    }
    plan.nominal_params = n("params_B") * 1e9;
    const auto m = model::serving_memory(*arch, model::parameter_counts(*arch, Explain::off), *gpu, plan);
    if (kind == "serving_kv_per_sequence") {
      a.value = m.kv_bytes_per_sequence.raw();
      a.derivation = pick("drill.kv_per_sequence", "KV cache of one sequence (whole model)", "KV_seq = context · KV_token",
                          u::format(m.kv_bytes_per_sequence), m.derivation);
    } else if (kind == "serving_kv_total") {
      a.value = m.kv_total.raw();
      a.derivation = pick("drill.kv_total", "KV cache of all sequences (× paging overhead)",
                          "KV = concurrency · KV_seq · (1 + paging overhead)", u::format(m.kv_total), m.derivation);
    } else if (kind == "serving_gpus") {
      if (!m.gpus_needed_pooled) {
        diags.error(file, pointer, "the model finds no GPU count that holds this (one sequence does not fit)");
        return std::nullopt;
      }
      a.value = double(*m.gpus_needed_pooled);
      a.derivation = pick("drill.gpus", "GPUs by memory alone (pooled)", "⌈(weights + KV) / usable per GPU⌉",
                          fmt::format("{} GPUs", *m.gpus_needed_pooled), m.derivation);
    } else {
      a.value = m.memory_needed.raw();
      a.derivation = pick("drill.memory_needed", "Weights + KV cache", "M = weights + KV",
                          u::format(m.memory_needed), m.derivation);
    }
  } else if (kind == "allreduce_volume") {
    auto e = model::all_reduce_volume(u::gigabytes(n("bytes_GB")), int(i("gpus")), o);
    a.value = e.value.raw();
    a.derivation = std::move(e.derivation);
  } else if (kind == "allreduce_time") {
    // The textbook's assumption: a measured bus bandwidth (η = 1 on it), α per ring step where given, else none.
    model::CommGroup g;
    g.size = int(i("gpus"));
    g.scale_up_size = g.size;
    g.scale_up.name = "the question's link";
    g.scale_up.uni_per_gpu = u::gb_per_s(n("busbw_GBps"));
    g.scale_up.bus_efficiency = 1.0;
    g.scale_up.latency = u::microseconds(in.num("latency_us").value_or(0.0));
    g.scale_up.origin = ctx.origin;
    auto c = model::collective_cost(model::Collective::all_reduce, u::gigabytes(n("bytes_GB")), g,
                                    model::CollectiveAlgorithm::ring);
    a.value = c.time.raw();
    a.derivation = std::move(c.derivation);
  } else if (kind == "train_flops") {
    const auto f = model::dense_training_flops(n("params_B") * 1e9, n("tokens"));
    a.value = f.raw();
    // The same node time_to_train builds, without the time.
    auto t = model::time_to_train(n("params_B") * 1e9, n("tokens"), 1, u::tflops(1), 1, o);
    a.derivation = t.derivation.children.front();
  } else if (kind == "train_days") {
    auto t = model::time_to_train(n("params_B") * 1e9, n("tokens"), n("gpus"), u::tflops(n("peak_TFLOPs")), n("mfu"), o);
    a.value = t.value.raw();
    a.derivation = std::move(t.derivation);
  } else if (kind == "model_states") {
    // A model of exactly the nominal parameter count, all in its layers (the textbook's "7B" is 7·10⁹).
    const double total = n("params_B") * 1e9;
    model::ParameterCounts p;
    p.total = std::int64_t(total);
    p.attention = p.total;
    p.attention_per_layer = p.total / std::max<std::int64_t>(1, arch->layers);
    wl::TrainingPlan plan;
    plan.seq_len = 2048;
    plan.precision.weight_bytes = n("weight_bytes");
    plan.precision.gradient_bytes = n("gradient_bytes");
    plan.precision.master_bytes = n("master_bytes");
    const std::string opt = in.str("optimizer").value_or("adamw");
    plan.optimizer = opt == "sgd" ? wl::OptimizerKind::sgd : opt == "adamw_8bit" ? wl::OptimizerKind::adamw_8bit
                                                                                 : wl::OptimizerKind::adamw;
    plan.zero = static_cast<wl::ZeroStage>(i("zero"));
    plan.par.dp = int(i("dp"));
    plan.global_batch = plan.par.dp;
    hw::GpuSpec any;  // the capacity only decides "fits"
    any.info.id = any.info.name = "any GPU";
    any.memory.capacity_label = u::gigabytes(80);
    const auto m = model::training_memory(*arch, p, plan, any, model::RuntimeOverheads{});
    const u::Bytes states = m.weights + m.gradients + m.master_weights + m.optimizer_states;
    a.value = states.raw();
    const Origin from = Origin::derived("memory");
    a.derivation = pick("drill.model_states", "Model states per GPU", "weights + gradients + master weights + optimizer states",
                        u::format(states), m.derivation,
                        {{"weights", u::format(m.weights), "working weights (+ a gathered FSDP unit)", from},
                         {"gradients", u::format(m.gradients), "gradients", from},
                         {"master", u::format(m.master_weights), "fp32 master weights", from},
                         {"optimizer", u::format(m.optimizer_states), "optimizer states", from}});
    a.derivation.notes.push_back("activations, logits and runtime overheads are not model states (in the tree below)");
  } else if (kind == "speculative_tokens" || kind == "speculative_speedup") {
    // The textbook's assumption: verifying γ+1 tokens costs one target step.
    const model::Speculation s{n("acceptance"), i("draft_tokens")};
    const auto t = u::milliseconds(in.num("target_ms").value_or(30.0));
    auto r = model::speculative_decoding(s, u::milliseconds(in.num("draft_ms").value_or(2.0)), t, t);
    a.value = kind == "speculative_tokens" ? r.tokens_per_step : r.speedup;
    a.derivation = std::move(r.derivation);
    if (kind == "speculative_tokens")
      a.derivation.notes.push_back("E[tokens per step] does not depend on the draft and target times");
  } else if (kind == "decode_floor") {
    auto e = model::bandwidth_bound_time("the weights", u::gigabytes(n("weights_GB")), u::tb_per_s(n("bandwidth_TBps")), o);
    a.value = e.value.raw();
    a.derivation = std::move(e.derivation);
  } else if (kind == "prefill_floor") {
    auto e = model::compute_bound_time(n("params_B") * 1e9, n("tokens"), u::tflops(n("peak_TFLOPs")), o);
    a.value = e.value.raw();
    a.derivation = std::move(e.derivation);
  } else if (kind == "pipeline_bubble") {
    auto e = model::pipeline_bubble(int(i("pp")), int(i("virtual_stages")), i("micro_batches"), o);
    a.value = e.value;
    a.derivation = std::move(e.derivation);
  } else if (kind == "timeline_stage_idle" || kind == "memory_peak_micro_batches") {
    if (!evaluate_timeline_kind(kind, in, *arch, ctx, o, a, file, diags)) return std::nullopt;
  } else if (arch != nullptr && gpu != nullptr &&
             evaluate_compress_kind(kind, in, *arch, *gpu, ctx, a, file, diags)) {
    if (diags.error_count() > before) return std::nullopt;
  } else if (!evaluate_realtime_kind(kind, in, o, a)) {
    evaluate_course_kind(kind, in, o, a);
  }
  attribute_to_question(a.derivation, ctx.origin);
  return a;
}

// ------------------------------------------------------------------------------------------------ drill files

const Drill* DrillSet::find(const std::string& id) const {
  for (const auto& d : drills)
    if (d.id == id) return &d;
  return nullptr;
}

std::vector<std::string> DrillSet::topics() const {
  std::vector<std::string> o;
  for (const auto& d : drills)
    if (std::find(o.begin(), o.end(), d.topic) == o.end()) o.push_back(d.topic);
  return o;
}

const AnswerUnit& drill_unit(const Drill& d) {
  static const AnswerUnit kNone{"", Dimension::count, 1};
  const AnswerUnit* u = find_unit(d.unit);
  return u ? *u : kNone;
}

namespace {
const FieldTable& file_table_impl() {
  static const FieldTable t = [] {
    FieldTable f;
    FieldSpec schema = integer("schema", 1, 1, "file format version");
    FieldSpec kind = text("kind", "\"drill-set\"", {"drill-set"});
    FieldSpec src = text("source_file", "where the questions and stated answers come from");
    FieldSpec notes = text("notes", "free text");
    notes.presence = Presence::optional;
    FieldSpec drills;
    drills.key = "drills";
    drills.type = FieldType::any;
    drills.presence = Presence::required;
    drills.doc = "the drills";
    return FieldTable{schema, kind, src, notes, drills};
  }();
  return t;
}

const FieldTable& drill_table_impl() {
  static const FieldTable t = [] {
    auto opt = [](FieldSpec f) {
      f.presence = Presence::optional;
      return f;
    };
    FieldSpec inputs;
    inputs.key = "inputs";
    inputs.type = FieldType::object;
    inputs.presence = Presence::required;
    inputs.doc = "the question's inputs (the kind's table)";
    return FieldTable{
        text("id", "unique id (the textbook's row, e.g. T8-2048)"),
        text("topic", "roofline, gemm, training, memory, kv-cache, serving, decode, prefill, collectives, pipeline, "
                      "speculative, vision, realtime, compression"),
        text("question", "the question as shown"),
        text("source", "citation: the textbook.md row, or the paper the formula is from"),
        text("kind", "which model computation answers it"),
        inputs,
        text("unit", "the unit of the answer"),
        num("rel_tolerance", "", 0, 1, "relative tolerance of a right answer", false),
        opt(text("tolerance_why", "why the tolerance is wider than 1% (the source's own rounding); required then")),
        opt(num("stated_answer", "the drill's unit", 0, 0, "the answer the source states (checked against the model)",
                false)),
        opt(num("common_wrong_answer", "the drill's unit", 0, 0, "the common wrong answer the source names", false)),
        opt(text("common_wrong_why", "why the common wrong answer is wrong")),
        opt(text("note", "shown with the answer")),
        opt(text("model_differs", "why the model's answer differs from the stated one")),
    };
  }();
  return t;
}
}  // namespace

const FieldTable& drill_file_fields() { return file_table_impl(); }
const FieldTable& drill_fields() { return drill_table_impl(); }
const FieldTable* drill_kind_inputs(const std::string& kind) {
  const Kind* k = find_kind(kind);
  return k ? &k->inputs : nullptr;
}

Result<DrillSet> decode_drills(const json_io::Json& j, const std::string& file, const DrillContext& ctx) {
  Diagnostics diags;
  DrillSet set;
  set.file = file;
  if (!j.is_object()) {
    diags.error(file, "", fmt::format("expected an object, got {}", json_io::describe_type(j)));
    return diags;
  }
  json_io::ObjectReader top(j, drill_file_fields(), file, "", diags);
  set.source_file = top.str("source_file").value_or("");
  const json_io::Json* arr = top.raw("drills");
  if (arr != nullptr && !arr->is_array()) {
    diags.error(file, "/drills", fmt::format("expected an array of drills, got {}", json_io::describe_type(*arr)));
    arr = nullptr;
  }
  std::set<std::string> ids;
  for (std::size_t idx = 0; arr != nullptr && idx < arr->size(); ++idx) {
    const auto& dj = (*arr)[idx];
    const std::string ptr = fmt::format("/drills/{}", idx);
    if (!dj.is_object()) {
      diags.error(file, ptr, fmt::format("expected a drill object, got {}", json_io::describe_type(dj)));
      continue;
    }
    const std::size_t before = diags.error_count();
    json_io::ObjectReader r(dj, drill_fields(), file, ptr, diags);
    Drill d;
    d.pointer = ptr;
    d.id = r.str("id").value_or("");
    d.topic = r.str("topic").value_or("");
    d.question = r.str("question").value_or("");
    d.source = r.str("source").value_or("");
    d.kind = r.str("kind").value_or("");
    d.unit = r.str("unit").value_or("");
    d.note = r.str("note").value_or("");
    d.rel_tolerance = r.num("rel_tolerance").value_or(0);
    d.tolerance_why = r.str("tolerance_why").value_or("");
    // ±1% holds the source's three-digit answers; a wider tolerance is the source's own coarser rounding and says so
    // (never room for an answer the source calls wrong: the common wrong answer must stay outside it, checked below).
    if (d.rel_tolerance > 0.01 + 1e-12 && d.tolerance_why.empty())
      r.error("rel_tolerance", fmt::format("a tolerance of {}% (wider than 1%) needs tolerance_why: the source's "
                                           "rounding it accepts",
                                           units::format_number(d.rel_tolerance * 100, 3)));
    d.stated_answer = r.num("stated_answer");
    d.common_wrong_answer = r.num("common_wrong_answer");
    d.common_wrong_why = r.str("common_wrong_why").value_or("");
    d.model_differs = r.str("model_differs").value_or("");
    if (!d.id.empty() && !ids.insert(d.id).second) r.error("id", fmt::format("duplicate id '{}'", d.id));
    const auto dim = kind_dimension(d.kind);
    if (r.has("kind") && !dim)
      r.error("kind", fmt::format("unknown kind '{}'{}", d.kind, did_you_mean(d.kind, drill_kinds())));
    const AnswerUnit* unit = find_unit(d.unit);
    if (r.has("unit") && unit == nullptr)
      r.error("unit", fmt::format("unknown unit '{}'{}", d.unit, did_you_mean(d.unit, unit_symbols())));
    else if (unit != nullptr && dim && unit->dim != *dim)
      r.error("unit", fmt::format("'{}' measures {}, but kind '{}' computes {}", d.unit, to_string(unit->dim), d.kind,
                                  to_string(*dim)));
    if (const auto* in = r.raw("inputs")) d.inputs = *in;
    else if (dj.contains("inputs")) d.inputs = dj["inputs"];
    // The inputs are checked by the computation itself, so that a file that decodes can be answered.
    if (dim && r.has("inputs") && ctx.lib != nullptr) {
      DrillContext c = ctx;
      c.origin = d.source;
      (void)evaluate_kind(d.kind, d.inputs, c, file, ptr + "/inputs", diags);
    }
    if (diags.error_count() == before) set.drills.push_back(std::move(d));
  }
  if (diags.has_errors()) return diags;
  return Result<DrillSet>(std::move(set), std::move(diags));
}

Result<DrillSet> load_drills(const std::string& path, const std::string& shown, const DrillContext& ctx) {
  Diagnostics diags;
  auto text = json_io::read_text_file(path, diags);
  if (!text) return diags;
  auto j = json_io::parse(*text, shown, diags);
  if (!j) return diags;
  return decode_drills(*j, shown, ctx);
}

Result<DrillAnswer> answer_drill(const DrillSet& set, const Drill& d, const DrillContext& ctx) {
  Diagnostics diags;
  DrillContext c = ctx;
  c.origin = d.source;
  auto a = evaluate_kind(d.kind, d.inputs, c, set.file, d.pointer + "/inputs", diags);
  if (!a) return diags;
  DrillAnswer r;
  r.value = a->value / drill_unit(d).scale;
  r.derivation = std::move(a->derivation);
  return r;
}

}  // namespace gpuplan::app
