#include "gpuplan/app/drills_realtime.hpp"

#include "gpuplan/model/realtime.hpp"

#include "drill_field_specs.hpp"

namespace gpuplan::app {

namespace {
using json_io::FieldSpec;
using json_io::FieldType;
using json_io::Presence;
using drill_specs::integer;  // drill_field_specs.hpp
using drill_specs::num;
using drill_specs::text;

}  // namespace

const std::vector<RealtimeKind>& realtime_drill_kinds() {
  static const std::vector<RealtimeKind> k = {
      {"frame_budget", Dimension::time, {num("rate_Hz", "Hz", 0, 1e5, "sensor frame rate")}},
      {"speedup_needed", Dimension::ratio,
       {num("latency_ms", "ms", 0, 1e7, "latency today"), num("deadline_ms", "ms", 0, 1e7, "deadline")}},
      {"backbone_sharing", Dimension::flops,
       {num("backbone_GFLOPs", "GFLOP", 0, 1e7, "backbone FLOPs per frame"),
        num("heads_GFLOPs", "GFLOP", 0, 1e7, "all heads' FLOPs per frame"), integer("heads", 1, 1000, "task heads"),
        text("sharing", "shared: one backbone for all heads; separate: a backbone per head", {"shared", "separate"})}},
      {"scaling_efficiency", Dimension::ratio,
       {num("time_one_gpu_h", "h", 0, 1e7, "time on one GPU"), num("time_n_gpus_min", "min", 0, 1e9, "time on n GPUs"),
        integer("gpus", 1, 1e7, "n: GPUs")}},
      {"stage_quantile", Dimension::time,
       {num("mean_ms", "ms", 0, 1e7, "mean duration"), num("cv", "", 0, 10, "coefficient of variation σ / mean"),
        text("distribution", "the duration's distribution", {"lognormal", "normal"}),
        num("quantile", "", 0, 1, "the quantile (0.99 = P99)")}},
  };
  return k;
}

bool evaluate_realtime_kind(const std::string& kind, const json_io::ObjectReader& in, const Origin& o, KindAnswer& a) {
  auto n = [&](const char* key) { return in.num(key).value_or(0.0); };
  if (kind == "frame_budget") {
    auto e = model::frame_period(n("rate_Hz"), o);
    a.value = e.value.raw();
    a.derivation = std::move(e.derivation);
  } else if (kind == "speedup_needed") {
    auto e = model::deadline_speedup(units::milliseconds(n("latency_ms")), units::milliseconds(n("deadline_ms")), o);
    a.value = e.value;
    a.derivation = std::move(e.derivation);
  } else if (kind == "backbone_sharing") {
    auto e = model::backbone_sharing_flops(units::flop(n("backbone_GFLOPs") * 1e9), units::flop(n("heads_GFLOPs") * 1e9),
                                           static_cast<int>(in.integer("heads").value_or(1)),
                                           in.str("sharing").value_or("shared") == "shared", o);
    a.value = e.value.raw();
    a.derivation = std::move(e.derivation);
  } else if (kind == "scaling_efficiency") {
    auto e = model::scaling_efficiency(units::hours(n("time_one_gpu_h")), units::seconds(60 * n("time_n_gpus_min")),
                                       static_cast<int>(in.integer("gpus").value_or(1)), o);
    a.value = e.value;
    a.derivation = std::move(e.derivation);
  } else if (kind == "stage_quantile") {
    auto e = model::stage_quantile(
        in.str("distribution").value_or("lognormal") == "normal" ? model::RtJitter::normal : model::RtJitter::lognormal,
        units::milliseconds(n("mean_ms")), n("cv"), n("quantile"), o);
    a.value = e.value.raw();
    a.derivation = std::move(e.derivation);
  } else {
    return false;
  }
  return true;
}

}  // namespace gpuplan::app
