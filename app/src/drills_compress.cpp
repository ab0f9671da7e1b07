#include "gpuplan/app/drills_compress.hpp"

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


const FieldSpec kModel = text("model", "a model of the library (data/models)");
const FieldSpec kGpu = text("gpu", "a GPU of the hardware data");
const FieldSpec kChoice = text("choice", "a compression choice as `gpuplan compress --variants` takes it (w4a16, 2:4, ...)");
}  // namespace

const std::vector<CompressKind>& compress_drill_kinds() {
  static const std::vector<CompressKind> k = {
      {"compressed_weights", Dimension::bytes, {kModel, kGpu, kChoice}},
      {"compression_itl_speedup", Dimension::ratio,
       {kModel, kGpu, kChoice, integer("batch", 1, 1e6, "sequences decoding together"),
        integer("context", 1, 1e8, "tokens each sequence holds")}},
      {"compression_ttft_ratio", Dimension::ratio,
       {kModel, kGpu, kChoice, integer("prompt", 1, 1e8, "prompt tokens (one prompt, alone)")}},
  };
  return k;
}

bool evaluate_compress_kind(const std::string& kind, const json_io::ObjectReader& in, const wl::TransformerArch& arch,
                            const hw::GpuSpec& gpu, const DrillContext& ctx, KindAnswer& a, const std::string& file,
                            Diagnostics& diags) {
  bool known = false;
  for (const auto& k : compress_drill_kinds()) known = known || k.name == kind;
  if (!known) return false;
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
