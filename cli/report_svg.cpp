#include "report_svg.hpp"

#include <algorithm>

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

std::string svg_bar_chart(const BarChart& chart) {
  constexpr double kWidth = 720, kLabel = 150, kText = 190, kRow = 28, kTop = 30, kBar = 18;
  const double plot = kWidth - kLabel - kText;
  double top = chart.reference.value_or(0);
  for (const auto& b : chart.bars)
    if (!b.missing) top = std::max(top, b.value);
  if (!(top > 0)) top = 1;
  const double height = kTop + kRow * double(chart.bars.size()) + (chart.reference ? 24 : 8);
  auto x_of = [&](double v) { return kLabel + plot * std::clamp(v / top, 0.0, 1.0); };
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{}\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\" role=\"img\">\n",
      html_escape(chart.id), kWidth, height, kWidth, height);
  o += fmt::format("<title>{}</title>\n", html_escape(chart.title));
  o += fmt::format("<text class=\"chart-title\" x=\"0\" y=\"18\">{}</text>\n", html_escape(chart.title));
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
    const double y1 = kTop - 6, y2 = kTop + kRow * double(chart.bars.size());
    o += fmt::format("<line class=\"reference\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>\n", x, y1, x, y2);
    o += fmt::format("<text class=\"reference-label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x,
                     y2 + 16, html_escape(chart.reference_label));
  }
  o += "</svg>\n";
  return o;
}

}  // namespace gpuplan::cli
