#pragma once
// A small SVG writer for the charts of `gpuplan report --format html`: horizontal bar charts with value labels and
// an optional reference line (a deadline), as inline SVG text — no scripts, no external resources.
#include <optional>
#include <string>
#include <vector>

namespace gpuplan::cli {

/// Escapes &, <, >, " and ' for HTML/SVG text and attribute values.
std::string html_escape(const std::string& s);

struct Bar {
  std::string label;  ///< left of the bar ("H100")
  double value = 0;   ///< bar length; ignored when `missing`
  std::string text;   ///< right of the bar ("$1.14M")
  bool highlight = false;  ///< the cheapest: drawn in the accent colour
  bool missing = false;    ///< no value (infeasible): no bar, the text in grey
};

struct BarChart {
  std::string id;     ///< the <svg> id ("chart-training-pretrain-cost")
  std::string title;  ///< <title> and the heading above the bars
  std::vector<Bar> bars;
  /// A vertical reference line at this value ("deadline 30 days"), and its label.
  std::optional<double> reference;
  std::string reference_label;
};

/// One <svg> element, 720 px wide, one 28 px row per bar; each bar is a <rect class="bar"> (class "bar best" when
/// highlighted), so the checks can count them.
std::string svg_bar_chart(const BarChart& chart);

}  // namespace gpuplan::cli
