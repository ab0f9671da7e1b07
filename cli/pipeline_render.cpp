#include "pipeline_render.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "common.hpp"
#include "gpuplan/core/format.hpp"
#include "report_svg.hpp"

namespace gpuplan::cli {

namespace {
namespace u = units;

std::string ms(double s) { return fmt::format("{:.2f} ms", s * 1e3); }

std::string options_line(const wl_io::PipelineOptions& o) {
  return fmt::format("backbone {}, int8 {}, fusion {}, CUDA graphs {}, temporal reuse {}",
                     o.share_backbone ? "shared" : "per head", o.int8 ? "on" : "per stage", o.fusion ? "on" : "off",
                     o.cuda_graphs ? "on" : "off", o.temporal_reuse ? "on" : "off");
}

std::string verdict(bool met) { return met ? "MET" : "MISSED"; }

/// The chart's time span: the later of the deadline and the makespan, plus 5%.
double span_s(const PipelineResult& r) {
  return 1.05 * std::max(r.rt.deadline.raw(), r.schedule.latency_mean_frame0.raw());
}

std::string text_gantt(const PipelineResult& r) {
  constexpr int kWidth = 64;
  const double span = span_s(r);
  const int dl = static_cast<int>(std::lround(r.rt.deadline.raw() / span * kWidth));
  std::size_t label = 5;
  for (const auto& s : r.rt.stages) label = std::max(label, s.id.size() + s.engine.size() + 3);
  std::string o;
  for (std::size_t i = 0; i < r.rt.stages.size(); ++i) {
    const auto& run = r.schedule.frame0[i];
    std::string row(kWidth + 1, ' ');
    const int a = static_cast<int>(std::lround(run.start_s / span * kWidth));
    int b = static_cast<int>(std::lround(run.finish_s / span * kWidth));
    if (b <= a) b = a + 1;
    for (int c = a; c < b && c <= kWidth; ++c) row[static_cast<std::size_t>(c)] = '#';
    if (dl >= 0 && dl <= kWidth && row[static_cast<std::size_t>(dl)] == ' ') row[static_cast<std::size_t>(dl)] = '|';
    std::string name = fmt::format("{} [{}]", r.rt.stages[i].id, r.rt.stages[i].engine);
    o += fmt::format("{:<{}} {}\n", name, label, row);
  }
  std::string axis(kWidth + 1, ' ');
  axis[0] = '0';
  std::string dlabel = fmt::format("| deadline {}", ms(r.rt.deadline.raw()));
  o += fmt::format("{:<{}} 0 ms{}{}\n", "", label, std::string(static_cast<std::size_t>(std::max(0, dl - 4)), ' '),
                   dlabel);
  o += fmt::format("{:<{}} (one column = {:.2f} ms; # = the stage runs, frame 0 at mean durations)\n", "", label,
                   span / kWidth * 1e3);
  return o;
}

}  // namespace

std::string pipeline_text(const PipelineResult& r, bool md, bool explain) {
  const auto& s = r.schedule;
  const auto& spec = r.spec;
  std::string o;
  const std::string h = md ? "## " : "";
  o += fmt::format("{}Pipeline: {} on {}\n\n", h, spec.name, r.gpu->info.id);
  const double hz = spec.frame_rate_Hz();
  o += fmt::format("{}frame: {:g} Hz ({} period), deadline {}\n", md ? "- " : "", hz, ms(r.rt.period.raw()),
                   ms(r.rt.deadline.raw()));
  o += fmt::format("{}options: {}\n", md ? "- " : "", options_line(spec.options));
  o += fmt::format("{}memory: {}\n", md ? "- " : "",
                   r.rt.shared_bandwidth
                       ? fmt::format("one memory shared by GPU, DLAs and CPU, {} sustained (stages running together "
                                     "share it in proportion to their demand)",
                                     u::format(*r.rt.shared_bandwidth))
                       : std::string("the GPU's own memory (CPU stages use the host's)"));
  o += fmt::format("{}model FLOPs per frame: {} as run (backbone shared {}, a backbone per head {})\n\n", md ? "- " : "",
                   u::format(r.flops_as_run), u::format(r.flops_shared), u::format(r.flops_separate));

  Table t;
  t.columns = {{"stage", "stage", false},     {"engine", "engine", false},   {"every", "every", true},
               {"mean_ms", "mean ms", true},  {"start_ms", "start ms", true}, {"finish_ms", "finish ms", true},
               {"jitter", "jitter", false},   {"what", "what", false}};
  for (std::size_t i = 0; i < r.rt.stages.size(); ++i) {
    const auto& st = r.rt.stages[i];
    const auto& run = s.frame0[i];
    t.rows.push_back({st.id, st.engine, fmt::format("{}", st.every), fmt::format("{:.3f}", st.mean.raw() * 1e3),
                      fmt::format("{:.3f}", run.start_s * 1e3), fmt::format("{:.3f}", run.finish_s * 1e3),
                      st.jitter == model::RtJitter::none ? std::string("none")
                                                         : fmt::format("{} cv {:g}", to_string(st.jitter), st.cv),
                      st.what});
  }
  o += t.render(md ? Format::md : Format::text);
  o += "\n";
  o += md ? "### Gantt chart (frame 0)\n\n```\n" : "Gantt chart (frame 0: every stage runs, mean durations)\n";
  o += text_gantt(r);
  o += md ? "```\n\n" : "\n";
  std::string path;
  for (std::size_t i : s.critical_path) path += (path.empty() ? "" : " → ") + r.rt.stages[i].id;
  o += fmt::format("{}critical path: {}\n", md ? "- " : "", path);
  o += fmt::format("{}latency at the mean (frame 0): {} — deadline {}, slack {}\n", md ? "- " : "",
                   ms(s.latency_mean_frame0.raw()), verdict(s.meets_mean), ms(s.slack_mean.raw()));
  o += fmt::format("{}P{:g} (Monte-Carlo, {} frames, seed {}): {} — deadline {}, slack {}; mean over frames {}; {:.2f}% "
                   "of frames miss\n",
                   md ? "- " : "", 100 * s.options.quantile, s.options.frames, s.options.seed, ms(s.latency_p.raw()),
                   verdict(s.meets_p), ms(s.slack_p.raw()), ms(s.latency_mc_mean.raw()), 100 * s.miss_rate);
  std::string loads;
  for (const auto& e : s.engines)
    loads += fmt::format("{}{} {:.0f}%", loads.empty() ? "" : ", ", e.engine, 100 * e.utilisation);
  o += fmt::format("{}engine load per frame period: {}{}\n", md ? "- " : "", loads,
                   s.keeps_up ? "" : " — an engine is busy longer than the frame period: the pipeline cannot keep up");
  if (explain) {
    o += "\n";
    o += render_derivation(r.flops_derivation, md ? Format::md : Format::text);
    o += render_derivation(s.derivation, md ? Format::md : Format::text);
  }
  return o;
}

nlohmann::json pipeline_json(const PipelineResult& r, bool explain) {
  const auto& s = r.schedule;
  nlohmann::json stages = nlohmann::json::array();
  for (std::size_t i = 0; i < r.rt.stages.size(); ++i) {
    const auto& st = r.rt.stages[i];
    const auto& run = s.frame0[i];
    std::string asked;
    double flops = 0;
    for (const auto& info : r.stages)
      if (info.rt_index == i) {
        asked = info.engine_asked;
        flops = info.model_flops.raw();
      }
    stages.push_back({{"id", st.id},
                      {"engine", st.engine},
                      {"engine_in_file", asked},
                      {"every_k_frames", st.every},
                      {"mean_s", st.mean.raw()},
                      {"start_s", run.start_s},
                      {"finish_s", run.finish_s},
                      {"dram_bytes", st.dram_bytes.raw()},
                      {"model_flops", flops},
                      {"jitter", {{"distribution", to_string(st.jitter)}, {"cv", st.cv}}},
                      {"what", st.what}});
  }
  nlohmann::json path = nlohmann::json::array();
  for (std::size_t i : s.critical_path) path.push_back(r.rt.stages[i].id);
  nlohmann::json engines = nlohmann::json::array();
  for (const auto& e : s.engines)
    engines.push_back({{"engine", e.engine}, {"busy_per_frame_s", e.busy_per_frame.raw()}, {"utilisation", e.utilisation}});
  const auto& o = r.spec.options;
  nlohmann::json j{{"pipeline", r.spec.name},
                   {"file", r.spec.file},
                   {"gpu", r.gpu->info.id},
                   {"deadline_s", r.rt.deadline.raw()},
                   {"period_s", r.rt.period.raw()},
                   {"shared_memory_bandwidth_Bps",
                    r.rt.shared_bandwidth ? nlohmann::json(r.rt.shared_bandwidth->raw()) : nlohmann::json()},
                   {"options",
                    {{"share_backbone", o.share_backbone},
                     {"int8", o.int8},
                     {"fusion", o.fusion},
                     {"cuda_graphs", o.cuda_graphs},
                     {"temporal_reuse", o.temporal_reuse}}},
                   {"flops_per_frame", {{"as_run", r.flops_as_run.raw()}, {"backbone_shared", r.flops_shared.raw()},
                                        {"backbone_per_head", r.flops_separate.raw()}}},
                   {"stages", stages},
                   {"critical_path", path},
                   {"latency_mean_s", s.latency_mean_frame0.raw()},
                   {"slack_mean_s", s.slack_mean.raw()},
                   {"meets_deadline_mean", s.meets_mean},
                   {"latency_p99_s", s.latency_p.raw()},
                   {"slack_p99_s", s.slack_p.raw()},
                   {"meets_deadline_p99", s.meets_p},
                   {"latency_mean_over_frames_s", s.latency_mc_mean.raw()},
                   {"miss_rate", s.miss_rate},
                   {"monte_carlo", {{"frames", s.options.frames}, {"seed", s.options.seed}, {"quantile", s.options.quantile}}},
                   {"engines", engines},
                   {"keeps_up", s.keeps_up}};
  if (explain) {
    j["derivation"] = derivation_json(s.derivation);
    j["flops_derivation"] = derivation_json(r.flops_derivation);
  }
  return j;
}

std::string pipeline_svg(const PipelineResult& r) {
  const auto& s = r.schedule;
  constexpr double kW = 720, kLeft = 170, kRight = 20, kRow = 24, kTop = 40;
  const std::size_t n = r.rt.stages.size();
  const double span_ms = span_s(r) * 1e3;
  const auto ticks = axis_ticks(span_ms);
  const double top = ticks.empty() ? span_ms : std::max(span_ms, ticks.back());
  const double plot = kW - kLeft - kRight;
  auto x = [&](double v_ms) { return kLeft + v_ms / top * plot; };
  const double height = kTop + kRow * static_cast<double>(n) + 50;
  static const char* kColours[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f"};
  std::vector<std::string> engines;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"pipeline-gantt\" viewBox=\"0 0 {:g} {:g}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<title>{}</title>\n",
      kW, height, html_escape(fmt::format("{} on {}: frame 0 against the {} deadline", r.spec.name, r.gpu->info.id,
                                          ms(r.rt.deadline.raw()))));
  o += fmt::format("<text x=\"{:g}\" y=\"18\" font-weight=\"bold\">{}</text>\n", kLeft,
                   html_escape(fmt::format("{} on {} — mean {} ({}), P99 {} ({})", r.spec.name, r.gpu->info.id,
                                           ms(s.latency_mean_frame0.raw()), verdict(s.meets_mean), ms(s.latency_p.raw()),
                                           verdict(s.meets_p))));
  for (double t : ticks) {
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:g}\" x2=\"{:.1f}\" y2=\"{:g}\" stroke=\"#ddd\"/>\n", x(t), kTop - 6, x(t),
                     kTop + kRow * static_cast<double>(n));
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:g}\" text-anchor=\"middle\">{:g}</text>\n", x(t),
                     kTop + kRow * static_cast<double>(n) + 16, t);
  }
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:g}\" text-anchor=\"middle\">ms</text>\n", kLeft + plot / 2,
                   kTop + kRow * static_cast<double>(n) + 34);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& st = r.rt.stages[i];
    const auto& run = s.frame0[i];
    auto it = std::find(engines.begin(), engines.end(), st.engine);
    if (it == engines.end()) it = engines.insert(engines.end(), st.engine);
    const auto colour = kColours[static_cast<std::size_t>(it - engines.begin()) % 7];
    const double y = kTop + kRow * static_cast<double>(i);
    o += fmt::format("<text x=\"{:g}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6, y + 15,
                     html_escape(fmt::format("{} [{}]", st.id, st.engine)));
    const double w = std::max(1.0, x(run.finish_s * 1e3) - x(run.start_s * 1e3));
    o += fmt::format(
        "<rect class=\"stage\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:g}\" fill=\"{}\"><title>{}</title>"
        "</rect>\n",
        x(run.start_s * 1e3), y + 3, w, kRow - 6, colour,
        html_escape(fmt::format("{}: {} → {} ({})", st.id, ms(run.start_s), ms(run.finish_s), st.what)));
  }
  const double xd = x(r.rt.deadline.raw() * 1e3);
  o += fmt::format("<line class=\"deadline\" x1=\"{:.1f}\" y1=\"{:g}\" x2=\"{:.1f}\" y2=\"{:g}\" stroke=\"#d62728\" "
                   "stroke-width=\"2\" stroke-dasharray=\"6 3\"/>\n",
                   xd, kTop - 10, xd, kTop + kRow * static_cast<double>(n));
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:g}\" fill=\"#d62728\" text-anchor=\"end\">{}</text>\n", xd - 4, kTop - 12,
                   html_escape(fmt::format("deadline {}", ms(r.rt.deadline.raw()))));
  o += "</svg>\n";
  return o;
}

}  // namespace gpuplan::cli
