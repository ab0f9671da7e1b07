#include "gpuplan/app/drills_compress.hpp"

#include <array>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/compression.hpp"

#include "drill_field_specs.hpp"

namespace gpuplan::app {

namespace {
using json_io::FieldSpec;
using json_io::FieldType;
using json_io::Presence;
using drill_specs::integer;  // drill_field_specs.hpp
using drill_specs::text;


const FieldSpec kGpu = text("gpu", "a GPU of the hardware data");
const FieldSpec kChoice = text("choice", "a compression choice as `gpuplan compress --variants` takes it (w4a16, 2:4, ...)");

/// How the engine runs the decode step, one side of an inference before/after (the course's "TensorRT-style fusion,
/// INT8, batch, CUDA graphs vs eager"): eager = PyTorch eager (its unfused kernels, each launched from the host);
/// graphs = the same kernels captured in a CUDA graph; engine = a serving engine's fused kernels in a CUDA graph.
FieldSpec mode(const std::string& side) {
  return text(side + "_mode", "how the decode step runs: eager, graphs (eager kernels in a CUDA graph) or engine "
                              "(fused kernels in a CUDA graph)",
              {"eager", "graphs", "engine"});
}

model::ServingPerfPlan plan_of_mode(const std::string& m) {
  model::ServingPerfPlan p;
  p.kernels = m == "engine" ? wl::KernelStyle::fused : wl::KernelStyle::eager;
  p.cuda_graphs = m != "eager";
  return p;
}
}  // namespace

const std::vector<CompressKind>& compress_drill_kinds() {
  static const std::vector<CompressKind> k = {
      {"compressed_weights", Dimension::bytes, {drill_specs::model_field(), kGpu, kChoice}},
      {"compression_itl_speedup", Dimension::ratio,
       {drill_specs::model_field(), kGpu, kChoice, integer("batch", 1, 1e6, "sequences decoding together"),
        integer("context", 1, 1e8, "tokens each sequence holds")}},
      {"compression_ttft_ratio", Dimension::ratio,
       {drill_specs::model_field(), kGpu, kChoice, integer("prompt", 1, 1e8, "prompt tokens (one prompt, alone)")}},
      {"inference_before_after", Dimension::ratio,
       {drill_specs::model_field(), kGpu, integer("context", 2, 1e8, "tokens each sequence holds"), mode("before"), mode("after"),
        text("before_choice", "the before side's weights (a compression choice: baseline, w8a8-int8, ...)"),
        text("after_choice", "the after side's weights"),
        integer("before_batch", 1, 1e6, "sequences decoding together, before"),
        integer("after_batch", 1, 1e6, "sequences decoding together, after")}},
  };
  return k;
}

namespace {
/// Decode throughput after / before: each side is a compression study of its choice on its plan (mode), batch / ITL
/// at the same context.
bool evaluate_before_after(const json_io::ObjectReader& in, const wl::TransformerArch& arch, const hw::GpuSpec& gpu,
                           const DrillContext& ctx, KindAnswer& a, const std::string& file, Diagnostics& diags) {
  model::ServingSystem sys;
  sys.db = ctx.db;
  sys.gpu = &gpu;
  const std::int64_t context = in.integer("context").value_or(2);
  struct Side {
    std::string mode, choice;
    std::int64_t batch = 1;
    model::CompressionRow row;
  };
  std::array<Side, 2> sides;
  for (int i = 0; i < 2; ++i) {
    const std::string side = i == 0 ? "before" : "after";
    Side& s = sides[std::size_t(i)];
    s.mode = in.str(side + "_mode").value_or("eager");
    s.choice = in.str(side + "_choice").value_or("baseline");
    s.batch = in.integer(side + "_batch").value_or(1);
    auto parsed = model::parse_compression(s.choice);
    if (!parsed.choice) {
      diags.error(file, in.pointer(side + "_choice"), parsed.error);
      return true;
    }
    // The study's decode context is input + output/2: an output of 2 tokens puts the decode step at `context`.
    const auto st = model::compression_study(arch, plan_of_mode(s.mode), model::ServingMemoryPlan{}, sys,
                                             {*parsed.choice}, {}, s.batch, context - 1, 2, Explain::on);
    s.row = st.rows.back();
    if (!s.row.refused.empty()) {
      diags.error(file, in.pointer(side + "_choice"),
                  fmt::format("'{}' cannot run on {}: {}", s.choice, gpu.info.id, s.row.refused));
      return true;
    }
  }
  const Side& b = sides[0];
  const Side& f = sides[1];
  const double tb = double(b.batch) / b.row.itl.raw(), ta = double(f.batch) / f.row.itl.raw();
  a.value = ta / tb;
  auto label = [](const Side& s) { return fmt::format("{}, {}, batch {}", s.mode, s.choice, s.batch); };
  a.derivation = {"drill.inference_before_after",
                  "Decode throughput of " + arch.id + " on " + gpu.info.id + ": " + label(f) + " against " + label(b),
                  "(batch_after / ITL_after) / (batch_before / ITL_before)",
                  {{"ITL before", units::format(b.row.itl), label(b), Origin::derived("decode_step_time")},
                   {"ITL after", units::format(f.row.itl), label(f), Origin::derived("decode_step_time")}},
                  fmt::format("{:.3g}×", a.value),
                  {"eager: PyTorch's unfused kernels, each launched by the host (a step is never shorter than the "
                   "host's issue of its calls, each at its kind's measured cost); graphs: the same kernels replayed from a CUDA graph; engine: "
                   "a serving engine's fused kernels in a CUDA graph"},
                  {b.row.derivation, f.row.derivation}};
  return true;
}
}  // namespace

bool evaluate_compress_kind(const std::string& kind, const json_io::ObjectReader& in, const wl::TransformerArch& arch,
                            const hw::GpuSpec& gpu, const DrillContext& ctx, KindAnswer& a, const std::string& file,
                            Diagnostics& diags) {
  bool known = false;
  for (const auto& k : compress_drill_kinds()) known = known || k.name == kind;
  if (!known) return false;
  if (kind == "inference_before_after") return evaluate_before_after(in, arch, gpu, ctx, a, file, diags);
  const std::string text = in.str("choice").value_or("");
  auto parsed = model::parse_compression(text);
  if (!parsed.choice) {
    diags.error(file, in.pointer("choice"), parsed.error);
    return true;
  }
  model::ServingSystem sys;
  sys.db = ctx.db;
  sys.gpu = &gpu;
  const model::ServingPerfPlan base;
  const model::ServingMemoryPlan memory;
  const std::int64_t batch = kind == "compression_itl_speedup" ? in.integer("batch").value_or(1) : 1;
  const std::int64_t context = kind == "compression_itl_speedup" ? in.integer("context").value_or(1) : 1;
  const std::int64_t prompt = kind == "compression_ttft_ratio" ? in.integer("prompt").value_or(1) : 1;
  // The study's decode context is input + output/2: an output of 2 tokens puts the decode step at `context` tokens.
  const auto st = model::compression_study(arch, base, memory, sys, {*parsed.choice}, {}, batch,
                                           kind == "compression_itl_speedup" ? std::max<std::int64_t>(1, context - 1) : prompt,
                                           2, Explain::on);
  const model::CompressionRow& b = st.rows.front();
  const model::CompressionRow& r = st.rows.back();
  if (!r.refused.empty()) {
    diags.error(file, in.pointer("choice"), fmt::format("'{}' cannot run on {}: {}", text, gpu.info.id, r.refused));
    return true;
  }
  Derivation d;
  if (kind == "compressed_weights") {
    a.value = r.weight_bytes.raw();
    d = {"drill.compressed_weights", "Stored weights of " + arch.id + " as " + text,
         "Σ params·bytes per weight (scales and indices included; embeddings and LM head 16-bit)",
         {}, units::format(r.weight_bytes), r.notes, {r.derivation}};
  } else if (kind == "compression_itl_speedup") {
    a.value = b.itl.raw() / r.itl.raw();
    d = {"drill.compression_itl", "Decode speedup of " + text, "ITL(baseline) / ITL(choice)",
         {{"ITL baseline", units::format(b.itl), "decode step, 16-bit", Origin::derived()},
          {"ITL " + text, units::format(r.itl), "decode step, compressed", Origin::derived()}},
         fmt::format("{:.3g}×", a.value), r.notes, {b.derivation, r.derivation}};
  } else {
    a.value = r.ttft.raw() / b.ttft.raw();
    d = {"drill.compression_ttft", "Prefill time of " + text + " against 16-bit", "TTFT(choice) / TTFT(baseline)",
         {{"TTFT baseline", units::format(b.ttft), "one prompt, 16-bit", Origin::derived()},
          {"TTFT " + text, units::format(r.ttft), "one prompt, compressed", Origin::derived()}},
         fmt::format("{:.3g}", a.value), r.notes, {b.derivation, r.derivation}};
  }
  d.notes.push_back(st.accuracy_note);
  a.derivation = std::move(d);
  return true;
}

}  // namespace gpuplan::app
