#include "report_svg.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace gpuplan::cli {

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::vector<double> axis_ticks(double top) {
  if (!(top > 0) || !std::isfinite(top)) return {0, 1};
  const double mag = std::pow(10.0, std::floor(std::log10(top / 5)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (top / (m * mag) <= 5 + 1e-9) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  for (int i = 0; i <= 6; ++i) {
    t.push_back(step * i);
    if (step * i >= top * (1 - 1e-12)) break;
  }
  return t;
}

std::string axis_label(double v, AxisUnit unit) {
  const double a = std::fabs(v);
  std::string num;
  auto trim = [](double x) {
    std::string s = fmt::format("{:.1f}", x);
    if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
    return s;
  };
  if (a >= 1e9) num = trim(v / 1e9) + (unit == AxisUnit::money ? "B" : "G");
  else if (a >= 1e6) num = trim(v / 1e6) + "M";
  else if (a >= 1e3) num = trim(v / 1e3) + "k";
  else num = trim(v);
  return unit == AxisUnit::money ? "$" + num : num;
}

std::string svg_bar_chart(const BarChart& chart) {
  constexpr double kWidth = 720, kLabel = 150, kText = 190, kRow = 28, kTop = 30, kBar = 18;
  const double plot = kWidth - kLabel - kText;
  double top = chart.reference.value_or(0);
  for (const auto& b : chart.bars)
    if (!b.missing) top = std::max(top, b.value);
  const std::vector<double> ticks = axis_ticks(top);
  const double end = ticks.back();
  const double y2 = kTop + kRow * double(chart.bars.size());  // the axis line
  const double height = y2 + 34 + (chart.reference ? 16 : 0);
  auto x_of = [&](double v) { return kLabel + plot * std::clamp(v / end, 0.0, 1.0); };
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{}\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\" preserveAspectRatio=\"xMinYMin meet\" role=\"img\">\n",
      html_escape(chart.id), kWidth, height, kWidth, height);
  o += fmt::format("<title>{}</title>\n", html_escape(chart.title));
  o += fmt::format("<text class=\"chart-title\" x=\"0\" y=\"18\">{}</text>\n", html_escape(chart.title));
  // Value axis: gridlines behind the bars, the axis line and tick labels under them, the unit under the labels.
  for (double t : ticks) {
    const double x = x_of(t);
    o += fmt::format("<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>\n", x, kTop - 4, x, y2);
    o += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x, y2 + 14,
                     html_escape(axis_label(t, chart.unit)));
  }
  o += fmt::format("<line class=\"axis\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>\n", kLabel, y2,
                   kLabel + plot, y2);
  if (!chart.axis_title.empty())
    o += fmt::format("<text class=\"axis-title\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                     kLabel + plot / 2, y2 + 28, html_escape(chart.axis_title));
  for (std::size_t i = 0; i < chart.bars.size(); ++i) {
    const auto& b = chart.bars[i];
    const double y = kTop + kRow * double(i);
    o += fmt::format("<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", kLabel - 8,
                     y + kBar - 4, html_escape(b.label));
    if (b.missing) {
      o += fmt::format("<text class=\"value missing\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", kLabel + 4, y + kBar - 4,
                       html_escape(b.text));
      continue;
    }
    const double w = std::max(1.0, x_of(b.value) - kLabel);
    o += fmt::format("<rect class=\"bar{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.0f}\"/>\n",
                     b.highlight ? " best" : "", kLabel, y, w, kBar);
    o += fmt::format("<text class=\"value\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", kLabel + w + 6, y + kBar - 4,
                     html_escape(b.text));
  }
  if (chart.reference) {
    const double x = x_of(*chart.reference);
    o += fmt::format("<line class=\"reference\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>\n", x,
                     kTop - 6, x, y2);
    o += fmt::format("<text class=\"reference-label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x,
                     y2 + 44, html_escape(chart.reference_label));
  }
  o += "</svg>\n";
  return o;
}

}  // namespace gpuplan::cli
