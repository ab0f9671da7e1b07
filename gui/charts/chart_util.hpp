#pragma once
// Shared look of the charts (the only folder that includes QtCharts).
#include <QChart>
#include <QChartView>
#include <QColor>
#include <QString>

namespace gpuplan::gui::charts {

/// A chart view with antialiasing, a title and the legend at the bottom.
QChartView* make_view(QChart* chart, const QString& title, QWidget* parent);
/// Legend markers of line series draw a short stretch of the line with the series' own pen (QLegend's
/// MarkerShapeFromSeries), so that a dashed series (a floor, a per-GPU share, a second tier) and the solid one of the
/// same colour do not share one swatch; bar and scatter markers keep their shapes. Call after adding the series.
void line_legend_markers(QChart* chart);
/// A palette colour for series `i` (Tableau 10, readable on white and distinct in print).
QColor series_colour(int i);
/// "NVIDIA H100 SXM5 80GB" -> "H100 SXM5 80GB": vendor prefixes take room on category axes.
QString short_gpu_name(const std::string& name);
/// Shows a tooltip at the mouse pointer (hover callbacks of the series).
void show_tip(const QString& text);
/// Writes the chart as drawn to `path`: SVG (vector, QSvgGenerator) when it ends in .svg, else a PNG at twice the
/// view's pixels. False with `error` set when the file cannot be written.
bool export_chart(QChartView* view, const QString& path, QString* error = nullptr);

}  // namespace gpuplan::gui::charts
