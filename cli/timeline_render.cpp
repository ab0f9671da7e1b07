#include "timeline_render.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "report_svg.hpp"

namespace gpuplan::cli {

using model::SpanKind;

bool parse_timeline_format(const std::string& s, TimelineFormat& out) {
  if (s == "text") out = TimelineFormat::text;
  else if (s == "svg") out = TimelineFormat::svg;
  else if (s == "json") out = TimelineFormat::json;
  else return false;
  return true;
}

namespace {

/// One character per kind in the text chart, and its legend.
char glyph(SpanKind k) {
  switch (k) {
    case SpanKind::forward: return 'F';
    case SpanKind::backward: return 'B';
    case SpanKind::recompute: return 'R';
    case SpanKind::embedding: return 'e';
    case SpanKind::head_loss: return 'h';
    case SpanKind::extra: return 'x';
    case SpanKind::comm_exposed: return 'w';
    case SpanKind::comm_tp: return 'T';
    case SpanKind::comm_cp: return 'C';
    case SpanKind::comm_ep: return 'E';
    case SpanKind::comm_pp: return 'P';
    case SpanKind::dp_reduce: return 'D';
    case SpanKind::dp_gather: return 'G';
    case SpanKind::dp_wait: return 'W';
    case SpanKind::sm_contention: return 's';
    case SpanKind::dp_copy: return 'y';
    case SpanKind::bubble: return '.';
    case SpanKind::optimizer: return 'O';
    case SpanKind::offload: return 'o';
    case SpanKind::allowance: return 'a';
    case SpanKind::gemm: return 'g';
    case SpanKind::attention: return 'A';
    case SpanKind::elementwise: return 'l';
    case SpanKind::sampling: return 'S';
    case SpanKind::host: return 'H';
    case SpanKind::launch_gap: return '_';
    case SpanKind::data_load: return 'L';
    case SpanKind::data_wait: return '~';
  }
  return '?';
}

const char* colour(SpanKind k) {
  switch (k) {
    case SpanKind::forward: return "#4e79a7";
    case SpanKind::backward: return "#f28e2b";
    case SpanKind::recompute: return "#edc948";
    case SpanKind::embedding: return "#76b7b2";
    case SpanKind::head_loss: return "#59a14f";
    case SpanKind::extra: return "#9c755f";
    case SpanKind::comm_exposed: return "#e15759";
    case SpanKind::comm_tp: return "#b07aa1";
    case SpanKind::comm_cp: return "#ff9da7";
    case SpanKind::comm_ep: return "#d37295";
    case SpanKind::comm_pp: return "#8cd17d";
    case SpanKind::dp_reduce: return "#499894";
    case SpanKind::dp_gather: return "#86bcb6";
    case SpanKind::dp_wait: return "#e15759";
    case SpanKind::sm_contention: return "#fabfd2";
    case SpanKind::dp_copy: return "#bab0ac";
    case SpanKind::bubble: return "#eeeeee";
    case SpanKind::optimizer: return "#79706e";
    case SpanKind::offload: return "#d4a6c8";
    case SpanKind::allowance: return "#cccccc";
    case SpanKind::gemm: return "#4e79a7";
    case SpanKind::attention: return "#f28e2b";
    case SpanKind::elementwise: return "#edc948";
    case SpanKind::sampling: return "#59a14f";
    case SpanKind::host: return "#9c755f";
    case SpanKind::launch_gap: return "#eeeeee";
    case SpanKind::data_load: return "#bcbd22";
    case SpanKind::data_wait: return "#d62728";
  }
  return "#000";
}

constexpr SpanKind kKinds[] = {SpanKind::forward,   SpanKind::backward,     SpanKind::recompute,    SpanKind::embedding,
                               SpanKind::head_loss, SpanKind::extra,        SpanKind::comm_exposed, SpanKind::comm_tp,
                               SpanKind::comm_cp,   SpanKind::comm_ep,      SpanKind::comm_pp,      SpanKind::dp_reduce,
                               SpanKind::dp_gather, SpanKind::dp_wait,      SpanKind::sm_contention, SpanKind::dp_copy,
                               SpanKind::bubble,    SpanKind::optimizer,    SpanKind::offload,      SpanKind::allowance,
                               SpanKind::gemm,      SpanKind::attention,    SpanKind::elementwise,  SpanKind::sampling,
                               SpanKind::host,      SpanKind::launch_gap,   SpanKind::data_load,    SpanKind::data_wait};

const char* kind_words(SpanKind k) {
  switch (k) {
    case SpanKind::forward: return "forward";
    case SpanKind::backward: return "backward";
    case SpanKind::recompute: return "recompute";
    case SpanKind::embedding: return "embedding";
    case SpanKind::head_loss: return "LM head + loss";
    case SpanKind::extra: return "MTP / AMP casts";
    case SpanKind::comm_exposed: return "waiting on TP/CP/EP/PP";
    case SpanKind::comm_tp: return "TP collective";
    case SpanKind::comm_cp: return "CP exchange";
    case SpanKind::comm_ep: return "EP all-to-all";
    case SpanKind::comm_pp: return "PP send";
    case SpanKind::dp_reduce: return "DP gradient bucket";
    case SpanKind::dp_gather: return "DP parameter all-gather";
    case SpanKind::dp_wait: return "waiting on DP";
    case SpanKind::sm_contention: return "SMs lost to overlapped comm";
    case SpanKind::dp_copy: return "DDP/FSDP buffer copies";
    case SpanKind::bubble: return "idle (bubble)";
    case SpanKind::optimizer: return "optimizer";
    case SpanKind::offload: return "offload transfers";
    case SpanKind::allowance: return "pipeline formula allowance";
    case SpanKind::gemm: return "GEMM";
    case SpanKind::attention: return "attention";
    case SpanKind::elementwise: return "norms / rotary / activations";
    case SpanKind::sampling: return "sampling";
    case SpanKind::host: return "host (kernel issue, engine work)";
    case SpanKind::launch_gap: return "GPU idle: waiting for the host";
    case SpanKind::data_load: return "data loader (next batch)";
    case SpanKind::data_wait: return "GPU idle: waiting for the batch";
  }
  return "";
}

std::string ms(units::Seconds s) { return units::format(s); }

}  // namespace

std::string timeline_text(const model::StepTimeline& t, int width) {
  std::string o;
  const double end = std::max(1e-30, t.end.raw());
  o += t.serving_iteration
           ? fmt::format("Serving iteration timeline: {} (the model's iteration time {})\n", ms(t.end), ms(t.step_time))
           : fmt::format("Step timeline: {} (the model's step time {})\n", ms(t.end), ms(t.step_time));
  o += fmt::format("  one column = {}\n\n", ms(units::seconds(end / width)));
  std::size_t name_w = 0;
  for (const auto& l : t.lanes) name_w = std::max(name_w, l.name.size());
  for (std::size_t li = 0; li < t.lanes.size(); ++li) {
    // Each column shows the kind that covers most of its time.
    std::vector<std::map<SpanKind, double>> cover(static_cast<std::size_t>(width));
    for (const auto& s : t.spans) {
      if (s.lane != int(li)) continue;
      const double a = s.start.raw() / end * width, b = s.end.raw() / end * width;
      for (int c = std::max(0, int(std::floor(a))); c < std::min(width, int(std::ceil(b))); ++c) {
        const double lo = std::max(a, double(c)), hi = std::min(b, double(c + 1));
        if (hi > lo) cover[std::size_t(c)][s.kind] += hi - lo;
      }
    }
    std::string row;
    for (const auto& c : cover) {
      if (c.empty()) {
        row += ' ';
        continue;
      }
      auto best = std::max_element(c.begin(), c.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
      row += glyph(best->first);
    }
    o += fmt::format("  {:<{}} |{}|\n", t.lanes[li].name, name_w, row);
  }
  o += "\n  legend:";
  int n = 0;
  for (SpanKind k : kKinds) {
    bool used = false;
    for (const auto& s : t.spans) used = used || s.kind == k;
    if (!used) continue;
    o += fmt::format("{}{} {}", n++ % 5 == 0 ? "\n    " : "   ", glyph(k), kind_words(k));
  }
  o += "\n\nTime per stage (compute stream)\n";
  for (std::size_t li = 0; li < t.lanes.size(); ++li) {
    if (!t.lanes[li].compute) continue;
    std::map<SpanKind, double> sum;
    for (const auto& s : t.spans)
      if (s.lane == int(li)) sum[s.kind] += s.duration().raw();
    std::string parts;
    double total = 0;
    for (SpanKind k : kKinds)
      if (sum.count(k) && sum[k] > 0) {
        parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", kind_words(k), ms(units::seconds(sum[k])));
        total += sum[k];
      }
    o += fmt::format("  {}: {} = {}\n", t.lanes[li].name, ms(units::seconds(total)), parts);
  }
  if (!t.serving_iteration)
    o += fmt::format("\n  pipeline ends at {}; the pipeline formula's allowance {}\n", ms(t.pipeline_end),
                     ms(t.allowance));
  if (t.loader_priced)
    o += fmt::format("  GPU busy {} of the {} step: utilisation {:.0f}% ({}-bound)\n", ms(t.gpu_step), ms(t.step_time),
                     100.0 * t.gpu_utilisation, t.loader_bound);
  else
    o += "\n";
  for (const auto& n2 : t.notes) o += "  note: " + n2 + "\n";
  return o;
}

nlohmann::json timeline_json(const model::StepTimeline& t) {
  nlohmann::json j;
  if (t.serving_iteration) j["what"] = "serving iteration";
  j["step_time_s"] = t.step_time.raw();
  j["end_s"] = t.end.raw();
  j["pipeline_end_s"] = t.pipeline_end.raw();
  j["allowance_s"] = t.allowance.raw();
  if (t.loader_priced) {
    j["gpu_step_s"] = t.gpu_step.raw();
    j["loader_s"] = t.loader.raw();
    j["gpu_utilisation"] = t.gpu_utilisation;
    j["loader_bound"] = t.loader_bound;
  }
  j["lanes"] = nlohmann::json::array();
  for (const auto& l : t.lanes)
    j["lanes"].push_back(
        {{"name", l.name}, {"stage", l.stage}, {"stream", l.host ? "host" : l.compute ? "compute" : "comm"}});
  j["spans"] = nlohmann::json::array();
  for (const auto& s : t.spans) {
    nlohmann::json x{{"lane", s.lane},        {"kind", model::to_string(s.kind)}, {"start_s", s.start.raw()},
                     {"end_s", s.end.raw()},  {"stage", s.stage},                 {"label", s.label},
                     {"detail", s.detail}};
    if (s.micro_batch >= 0) {
      x["micro_batch"] = s.micro_batch;
      x["chunk"] = s.chunk;
    }
    j["spans"].push_back(std::move(x));
  }
  j["notes"] = t.notes;
  return j;
}

std::string timeline_svg(const model::StepTimeline& t, const std::string& title) {
  constexpr double kW = 1200, kLeft = 150, kRight = 20, kRow = 22, kTop = 40;
  const double n = double(t.lanes.size());
  const double end_ms = t.end.raw() * 1e3;
  const auto ticks = axis_ticks(std::max(1e-9, end_ms));
  const double top = ticks.empty() ? end_ms : std::max(end_ms, ticks.back());
  const double plot = kW - kLeft - kRight;
  auto x = [&](double v_s) { return kLeft + v_s * 1e3 / top * plot; };
  const double height = kTop + kRow * n + 70;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"step-timeline\" viewBox=\"0 0 {:g} {:g}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<title>{}</title>\n",
      kW, height, html_escape(title));
  o += fmt::format("<text x=\"{:g}\" y=\"18\" font-weight=\"bold\">{}</text>\n", kLeft,
                   html_escape(fmt::format("{} — step {}", title, ms(t.end))));
  for (double tk : ticks) {
    const double xt = kLeft + tk / top * plot;
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{:g}\" x2=\"{:.1f}\" y2=\"{:g}\" stroke=\"#ddd\"/>\n", xt, kTop - 4, xt,
                     kTop + kRow * n);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:g}\" text-anchor=\"middle\">{:g}</text>\n", xt, kTop + kRow * n + 14, tk);
  }
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:g}\" text-anchor=\"middle\">ms</text>\n", kLeft + plot / 2,
                   kTop + kRow * n + 30);
  for (std::size_t li = 0; li < t.lanes.size(); ++li)
    o += fmt::format("<text x=\"{:g}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLeft - 6,
                     kTop + kRow * double(li) + 15, html_escape(t.lanes[li].name));
  for (const auto& s : t.spans) {
    const double y = kTop + kRow * double(s.lane);
    const double w = std::max(0.3, x(s.end.raw()) - x(s.start.raw()));
    o += fmt::format(
        "<rect class=\"span {}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:g}\" fill=\"{}\"><title>{}"
        "</title></rect>\n",
        model::to_string(s.kind), x(s.start.raw()), y + 3, w, kRow - 6, colour(s.kind),
        html_escape(fmt::format("{} [{} → {}] {}", s.label, ms(s.start), ms(s.end), s.detail)));
  }
  // Legend of the kinds drawn.
  double lx = kLeft;
  const double ly = kTop + kRow * n + 44;
  for (SpanKind k : kKinds) {
    bool used = false;
    for (const auto& s : t.spans) used = used || s.kind == k;
    if (!used) continue;
    const std::string w = kind_words(k);
    if (lx + 16 + 6.0 * double(w.size()) > kW) break;
    o += fmt::format("<rect x=\"{:.1f}\" y=\"{:g}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
                     "<text x=\"{:.1f}\" y=\"{:g}\">{}</text>\n",
                     lx, ly, colour(k), lx + 13, ly + 9, html_escape(w));
    lx += 22 + 6.0 * double(w.size());
  }
  o += "</svg>\n";
  return o;
}

// ------------------------------------------------------------------------------------------------------ memory

std::string memory_timeline_text(const model::MemoryTimeline& m, int width, int height) {
  std::string o;
  auto gib = [](units::Bytes b) { return units::format(b, units::BytePrefix::binary); };
  o += "Memory timeline (bytes allocated, as torch.cuda.memory_allocated() counts them)\n";
  for (const auto& s : m.stages) {
    o += fmt::format("\nstage {}: states {}, peak {} at {} ({}); the peak formula's {}\n", s.stage, gib(s.states),
                     gib(s.peak), ms(s.peak_time), s.peak_event, gib(s.model_peak));
    if (!s.peak_difference.empty()) o += "  the timeline's peak is " + s.peak_difference + "\n";
    if (s.samples.empty()) continue;
    const double t_end = std::max(1e-30, s.samples.back().time.raw());
    // The axis runs from the lowest allocation (the states, at the step's start) to the peak: the states would
    // otherwise flatten what changes.
    double floor = s.peak.raw();
    for (const auto& x : s.samples) floor = std::min(floor, x.allocated.raw());
    const double top = std::max(floor + 1.0, s.peak.raw());
    // The highest allocation within each column (a step function between samples).
    std::vector<double> col(static_cast<std::size_t>(width), 0.0);
    double cur = s.samples.front().allocated.raw();
    std::size_t k = 0;
    for (int c = 0; c < width; ++c) {
      const double hi = t_end * double(c + 1) / width;
      double mx = cur;
      while (k < s.samples.size() && s.samples[k].time.raw() <= hi) {
        cur = s.samples[k].allocated.raw();
        mx = std::max(mx, cur);
        ++k;
      }
      col[std::size_t(c)] = mx;
    }
    for (int r = height; r >= 1; --r) {
      const double level = floor + (top - floor) * double(r) / height;
      std::string row;
      for (double v : col) row += v >= level - (top - floor) / (2.0 * height) ? '#' : ' ';
      o += fmt::format("  {:>10} |{}\n",
                       r == height ? gib(units::bytes(top)) : r == height / 2 ? gib(units::bytes((top + floor) / 2)) : "",
                       row);
    }
    o += fmt::format("  {:>10} +{}\n", gib(units::bytes(floor)), std::string(std::size_t(width), '-'));
    o += fmt::format("  {:>10}  0{:>{}}\n", "", ms(units::seconds(t_end)), width - 1);
  }
  o += fmt::format("\nreserved outside the allocator: CUDA context {}, NCCL buffers {}; the peak estimate adds {:g}% "
                   "fragmentation: {} per GPU\n",
                   gib(m.cuda_context), gib(m.nccl_buffers), m.fragmentation * 100, gib(m.model_total));
  for (const auto& n : m.notes) o += "note: " + n + "\n";
  return o;
}

nlohmann::json memory_timeline_json(const model::MemoryTimeline& m) {
  nlohmann::json j;
  j["cuda_context_bytes"] = m.cuda_context.raw();
  j["nccl_buffers_bytes"] = m.nccl_buffers.raw();
  j["fragmentation"] = m.fragmentation;
  j["model_total_bytes"] = m.model_total.raw();
  j["stages"] = nlohmann::json::array();
  for (const auto& s : m.stages) {
    nlohmann::json st{{"stage", s.stage},
                      {"states_bytes", s.states.raw()},
                      {"peak_bytes", s.peak.raw()},
                      {"peak_time_s", s.peak_time.raw()},
                      {"peak_event", s.peak_event},
                      {"model_peak_bytes", s.model_peak.raw()},
                      {"peak_difference", s.peak_difference}};
    st["samples"] = nlohmann::json::array();
    for (const auto& x : s.samples)
      st["samples"].push_back({{"time_s", x.time.raw()},
                               {"allocated_bytes", x.allocated.raw()},
                               {"activations_bytes", x.activations.raw()},
                               {"gradients_bytes", x.gradients.raw()},
                               {"event", x.event}});
    j["stages"].push_back(std::move(st));
  }
  j["notes"] = m.notes;
  return j;
}

std::string memory_timeline_svg(const model::MemoryTimeline& m, const std::string& title) {
  constexpr double kW = 1000, kH = 420, kLeft = 80, kRight = 20, kTop = 40, kBottom = 60;
  double t_end = 0, top = 0;
  for (const auto& s : m.stages) {
    if (!s.samples.empty()) t_end = std::max(t_end, s.samples.back().time.raw());
    top = std::max(top, std::max(s.peak.raw(), s.model_peak.raw()));
  }
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const auto yt = axis_ticks(std::max(1e-9, top / gib));
  const double ytop = yt.empty() ? top / gib : std::max(top / gib, yt.back());
  const auto xt = axis_ticks(std::max(1e-9, t_end * 1e3));
  const double xtop = xt.empty() ? t_end * 1e3 : std::max(t_end * 1e3, xt.back());
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto X = [&](double s) { return kLeft + s * 1e3 / xtop * pw; };
  auto Y = [&](double b) { return kTop + ph - b / gib / ytop * ph; };
  static const char* kColours[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#e15759"};
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"memory-timeline\" viewBox=\"0 0 {:g} {:g}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<title>{}</title>\n",
      kW, kH, html_escape(title));
  o += fmt::format("<text x=\"{:g}\" y=\"18\" font-weight=\"bold\">{}</text>\n", kLeft, html_escape(title));
  for (double v : yt) {
    o += fmt::format("<line x1=\"{:g}\" y1=\"{:.1f}\" x2=\"{:g}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>"
                     "<text x=\"{:g}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n",
                     kLeft, Y(v * gib), kW - kRight, Y(v * gib), kLeft - 6, Y(v * gib) + 4, v);
  }
  for (double v : xt)
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:g}\" text-anchor=\"middle\">{:g}</text>\n", X(v / 1e3), kTop + ph + 14, v);
  o += fmt::format("<text x=\"{:.1f}\" y=\"{:g}\" text-anchor=\"middle\">ms</text>\n", kLeft + pw / 2, kTop + ph + 30);
  o += fmt::format("<text x=\"14\" y=\"{:.1f}\" transform=\"rotate(-90 14 {:.1f})\" text-anchor=\"middle\">GiB "
                   "allocated</text>\n",
                   kTop + ph / 2, kTop + ph / 2);
  for (std::size_t i = 0; i < m.stages.size(); ++i) {
    const auto& s = m.stages[i];
    const char* c = kColours[i % 8];
    std::string pts;
    double prev = s.samples.empty() ? 0.0 : s.samples.front().allocated.raw();
    for (const auto& x : s.samples) {
      pts += fmt::format("{:.1f},{:.1f} {:.1f},{:.1f} ", X(x.time.raw()), Y(prev), X(x.time.raw()), Y(x.allocated.raw()));
      prev = x.allocated.raw();
    }
    o += fmt::format("<polyline class=\"stage\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\">"
                     "<title>{}</title></polyline>\n",
                     c, pts,
                     html_escape(fmt::format("stage {}: peak {} at {} ({})", s.stage,
                                             units::format(s.peak, units::BytePrefix::binary), ms(s.peak_time),
                                             s.peak_event)));
    o += fmt::format("<circle class=\"peak\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{}</title></circle>\n",
                     X(s.peak_time.raw()), Y(s.peak.raw()), c,
                     html_escape(fmt::format("stage {} peak {}: {}", s.stage,
                                             units::format(s.peak, units::BytePrefix::binary), s.peak_event)));
    o += fmt::format("<text x=\"{:g}\" y=\"{:g}\" fill=\"{}\">stage {}</text>\n", kLeft + 70.0 * double(i),
                     kH - 12, c, s.stage);
  }
  o += "</svg>\n";
  return o;
}

}  // namespace gpuplan::cli
