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

/// What the value axis counts: how its tick labels are written ("$1.5M", "30", "12k").
enum class AxisUnit { money, days, count };

struct BarChart {
  std::string id;     ///< the <svg> id ("chart-training-pretrain-cost")
  std::string title;  ///< <title> and the heading above the bars
  std::vector<Bar> bars;
  /// A vertical reference line at this value ("deadline 30 days"), and its label.
  std::optional<double> reference;
  std::string reference_label;
  AxisUnit unit = AxisUnit::count;
  std::string axis_title;  ///< under the tick labels ("US$", "days to train")
};

/// The value axis of a chart whose largest value (bar or reference) is `top` > 0: ticks at 0, step, 2·step, … up to
/// the first multiple of step at or above top, step being the smallest of 1, 2, 2.5 and 5 × 10^k that needs at most
/// five intervals. Returns the tick values, the first 0 and the last the axis' end.
std::vector<double> axis_ticks(double top);

/// A tick label: money "$0", "$250k", "$1.5M", "$2B"; days and counts "0", "25", "2.5k", "1.2M".
std::string axis_label(double v, AxisUnit unit);

/// One <svg> element, 720 units wide (it scales down with the page: CSS width 100%, at most 720 px), one 28-unit
/// row per bar, a value axis with gridlines and tick labels under the bars; each bar is a <rect class="bar"> (class
/// "bar best" when highlighted), so the checks can count them.
std::string svg_bar_chart(const BarChart& chart);

}  // namespace gpuplan::cli
