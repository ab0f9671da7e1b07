#include "serve_timeline.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common.hpp"
#include "gpuplan/model/serving_timeline.hpp"
#include "timeline_render.hpp"

namespace gpuplan::cli {

void add_serve_timeline_options(CLI::App& c, ServeTimelineFlags& f) {
  c.add_option("--timeline", f.format,
               "print one engine iteration as a timeline (text, svg or json) instead of the report: each layer's "
               "kernels, TP collectives, host issue gaps, LM head and sampling");
  c.add_option("--timeline-pass", f.pass,
               "which iteration --timeline lays out: decode (the batch's decode-only step, default) or prefill (one "
               "prompt)");
}

int check_serve_timeline(const ServeTimelineFlags& f, bool planner) {
  Diagnostics d;
  TimelineFormat tf{};
  if (f.format && !parse_timeline_format(*f.format, tf))
    d.error("", "--timeline", fmt::format("'{}' is not a timeline format: give {}", *f.format, kTimelineFormats));
  if (f.pass != "decode" && f.pass != "prefill")
    d.error("", "--timeline-pass", fmt::format("'{}' is not an iteration: give decode or prefill", f.pass));
  else if (!f.format && f.pass != "decode")
    d.error("", "--timeline-pass", "applies to --timeline only: add --timeline text|svg|json");
  if (f.format && planner)
    d.error("", "--timeline",
            "lays out one replica's iteration: drop --rate / --concurrency (give --tp and --batch for the layout)");
  return d.has_errors() ? report(d) : 0;
}

int run_serve_timeline(const ServeTimelineFlags& f, const wl::TransformerArch& arch, const model::ServingPerfPlan& perf,
                       const model::ServingSystem& sys, std::int64_t batch, std::int64_t isl, std::int64_t osl) {
  TimelineFormat tf = TimelineFormat::text;
  parse_timeline_format(f.format.value_or("text"), tf);
  const bool prefill = f.pass == "prefill";
  const double micro = std::max(1.0, double(batch) / double(std::max(1, perf.pp)));
  model::ForwardBatch fb = prefill ? model::prompt_pass(perf, isl)
                                   : model::ForwardBatch{micro, 1, isl + osl / 2, 0, 0, 0, true};
  // A prompt longer than the engine's token budget is prefilled in chunks (prefill_time): the first chunk is shown.
  const bool chunked = prefill && perf.max_batched_tokens > 0 && fb.prefill_tokens > perf.max_batched_tokens;
  if (chunked) fb = model::ForwardBatch{0, 1, 0, 1.0, perf.max_batched_tokens, fb.prefill_past, false};
  const model::StepTimeline t = model::serving_timeline(arch, perf, fb, sys);
  if (!t.ok) {
    Diagnostics d;
    d.error("", "--timeline", "cannot lay out this iteration: " + t.error);
    return report(d);
  }
  const std::string what =
      chunked ? fmt::format("first {}-token chunk of a {}-token prompt (chunked prefill)", fb.prefill_tokens, isl)
      : prefill ? fmt::format("prefill of one {}-token prompt", isl)
              : fmt::format("decode step of {} sequence{} at context {}", micro, micro == 1.0 ? "" : "s", isl + osl / 2);
  const std::string title = fmt::format("{} on {} (TP {} × PP {}{}): {}", arch.name.empty() ? arch.id : arch.name,
                                        sys.gpu->info.name, perf.tp, perf.pp, perf.cuda_graphs ? ", CUDA graphs" : ", eager",
                                        what);
  if (tf == TimelineFormat::json) {
    nlohmann::json j = timeline_json(t);
    j["title"] = title;
    out(json_text(j));
  } else if (tf == TimelineFormat::svg) {
    out(timeline_svg(t, title));
  } else {
    out(title + "\n" + timeline_text(t));
  }
  return kExitOk;
}

}  // namespace gpuplan::cli
