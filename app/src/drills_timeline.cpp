#include "gpuplan/app/drills_timeline.hpp"

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/timeline.hpp"

#include "drill_field_specs.hpp"

namespace gpuplan::app {

namespace {
using json_io::FieldSpec;
using json_io::FieldType;
using json_io::Presence;
using drill_specs::integer;  // drill_field_specs.hpp
using drill_specs::text;


json_io::FieldTable plan_inputs() {
  return {text("model", "a model of the library (data/models)"), text("node", "a node of the hardware data (dgx-h100)"),
          integer("tp", 1, 1024, "tensor parallel"), integer("pp", 1, 1024, "pipeline stages"),
          integer("micro_batches", 1, 1e6, "micro-batches per step (micro-batch 1, DP 1)"),
          integer("seq", 1, 1e7, "sequence length")};
}
}  // namespace

const std::vector<TimelineKind>& timeline_drill_kinds() {
  static const std::vector<TimelineKind> k = {
      {"timeline_stage_idle", Dimension::ratio, plan_inputs()},
      {"memory_peak_micro_batches", Dimension::count, plan_inputs()},
  };
  return k;
}

bool evaluate_timeline_kind(const std::string& kind, const json_io::ObjectReader& in, const wl::TransformerArch& arch,
                            const DrillContext& ctx, const Origin& o, KindAnswer& a, const std::string& file,
                            Diagnostics& diags) {
  const std::string node_id = in.str("node").value_or("");
  model::TrainingSystem sys;
  sys.db = ctx.db;
  sys.node = ctx.db ? ctx.db->find_node(node_id) : nullptr;
  if (sys.node == nullptr) {
    diags.error(file, in.pointer("node"),
                ctx.db ? fmt::format("unknown node '{}'", node_id) : std::string("this kind needs the hardware data"));
    return false;
  }
  sys.gpu = ctx.db->find_gpu(sys.node->gpu);
  if (sys.gpu == nullptr) {
    diags.error(file, in.pointer("node"), fmt::format("node '{}' names GPU '{}', which the hardware data lacks", node_id,
                                                      sys.node->gpu));
    return false;
  }
  wl::TrainingPlan plan;
  plan.par.tp = int(in.integer("tp").value_or(1));
  plan.par.pp = int(in.integer("pp").value_or(1));
  plan.par.sequence_parallel = plan.par.tp > 1;
  plan.micro_batch = 1;
  plan.global_batch = in.integer("micro_batches").value_or(1);
  plan.seq_len = in.integer("seq").value_or(2048);
  const model::StepTimeline tl = model::training_timeline(arch, plan, sys);
  if (!tl.ok) {
    diags.error(file, in.pointer("pp"), "cannot lay out this plan: " + tl.error);
    return false;
  }
  const std::string what = fmt::format("{} on {} × {}, TP {} PP {}, {} micro-batches of {} tokens", arch.id,
                                       plan.par.gpus(), sys.gpu->info.id, plan.par.tp, plan.par.pp,
                                       plan.global_batch, plan.seq_len);
  if (kind == "timeline_stage_idle") {
    // Stage 0's compute stream: the bubble spans' share of the step, read off the laid-out timeline.
    units::Seconds idle{};
    for (const auto& s : tl.spans)
      if (s.lane == 0 && s.kind == model::SpanKind::bubble) idle += s.duration();
    a.value = (idle / tl.end).raw();
    a.derivation = {"drill.timeline_stage_idle",
                    "Idle share of the first stage's compute stream in one step",
                    "idle = Σ bubble spans of stage 0 / step",
                    {{"idle", units::format(idle), "stage 0's bubble spans (waiting for its input)", o},
                     {"step", units::format(tl.end), what, Origin::derived("training_timeline")}},
                    units::format(units::Ratio(a.value)),
                    {"equal stages: (p − 1)/(m + p − 1) of the step; the LM head and embedding make the last and first "
                     "stage slower, so the others idle a little more"},
                    {}};
    return true;
  }
  // memory_peak_micro_batches: micro-batches whose forward has run on stage 0 and whose backward has not, at the
  // memory timeline's peak.
  const model::MemoryTimeline mt = model::training_memory_timeline(arch, plan, sys);
  if (!mt.ok || mt.stages.empty()) {
    diags.error(file, in.pointer("pp"), "cannot lay out this plan's memory: " + mt.error);
    return false;
  }
  const auto& s0 = mt.stages.front();
  double held = 0;
  for (std::int64_t mb = 0; mb < plan.global_batch; ++mb) {
    bool fwd = false, bwd = false;
    for (const auto& sp : tl.spans) {
      if (sp.lane != 0 || sp.micro_batch != mb) continue;
      if (sp.kind == model::SpanKind::forward && sp.end.raw() <= s0.peak_time.raw() + 1e-15) fwd = true;
      if (sp.kind == model::SpanKind::backward && sp.end.raw() <= s0.peak_time.raw() + 1e-15) bwd = true;
    }
    held += fwd && !bwd ? 1 : 0;
  }
  a.value = held;
  a.derivation = {"drill.memory_peak_micro_batches",
                  "Micro-batches whose activations the first stage holds at its memory peak",
                  "count of micro-batches forwarded and not yet backwarded on stage 0 at the peak",
                  {{"peak", units::format(s0.peak, units::BytePrefix::binary),
                    fmt::format("at {}: {}", units::format(s0.peak_time), s0.peak_event), Origin::derived("training_memory_timeline")},
                   {"plan", what, "the plan laid out", o}},
                  fmt::format("{:g}", held),
                  {"1F1B: stage i warms up with p − i − 1 forwards, so it holds min(p − i, m) micro-batches at its peak "
                   "(Korthikanti et al. 2022 §4.2.3)"},
                  {}};
  return true;
}

}  // namespace gpuplan::app
