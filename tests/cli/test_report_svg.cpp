// The HTML report's chart writer (cli/report_svg.hpp): the value axis' ticks and labels, and the chart's SVG.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "report_svg.hpp"

using namespace gpuplan::cli;

namespace {
std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}
}  // namespace

TEST_CASE("axis ticks: steps of 1, 2, 2.5 or 5 x 10^k, at most five intervals, ending at or above the largest value") {
  // 30-day deadline: top/5 = 6, so steps of 10 (a step of 5 would need six intervals).
  CHECK(axis_ticks(30) == std::vector<double>{0, 10, 20, 30});
  // $3.1M: steps of $1M, the axis ends at the first tick above.
  CHECK(axis_ticks(3.1e6) == std::vector<double>{0, 1e6, 2e6, 3e6, 4e6});
  // $5,679: 5.679 intervals of 1000 is too many, 2.84 of 2000 fits.
  CHECK(axis_ticks(5679) == std::vector<double>{0, 2000, 4000, 6000});
  // Exactly five intervals of 1.
  CHECK(axis_ticks(5) == std::vector<double>{0, 1, 2, 3, 4, 5});
  // 2.5 steps: 11 / 2.5 = 4.4 intervals.
  CHECK(axis_ticks(11) == std::vector<double>{0, 2.5, 5, 7.5, 10, 12.5});
  // Nothing to plot (every option infeasible): a unit axis, never a division by zero.
  CHECK(axis_ticks(0) == std::vector<double>{0, 1});
}

TEST_CASE("axis labels: money with $ and k/M/B, days and counts with k/M") {
  CHECK(axis_label(0, AxisUnit::money) == "$0");
  CHECK(axis_label(250e3, AxisUnit::money) == "$250k");
  CHECK(axis_label(1.5e6, AxisUnit::money) == "$1.5M");
  CHECK(axis_label(2e9, AxisUnit::money) == "$2B");
  CHECK(axis_label(30, AxisUnit::days) == "30");
  CHECK(axis_label(7.5, AxisUnit::days) == "7.5");
  CHECK(axis_label(2500, AxisUnit::count) == "2.5k");
}

TEST_CASE("a bar chart scales its bars to the axis end and draws one tick label per tick and the unit") {
  BarChart ch{"c", "Cost", {{"A", 3.1e6, "$3.1M", true, false}, {"B", 0, "does not fit", false, true}},
              std::nullopt, {}, AxisUnit::money, "US$"};
  const std::string svg = svg_bar_chart(ch);
  CHECK(count(svg, "<text class=\"tick\"") == 5);  // $0 … $4M
  CHECK(svg.find(">$4M</text>") != std::string::npos);
  CHECK(svg.find(">US$</text>") != std::string::npos);
  // The plot is 720 - 150 - 190 = 380 units wide: $3.1M of $4M is 294.5 units.
  CHECK(svg.find("<rect class=\"bar best\" x=\"150.0\" y=\"30.0\" width=\"294.5\"") != std::string::npos);
  CHECK(count(svg, "<rect class=\"bar") == 1);  // the infeasible option has no bar
}
