#pragma once
// The serving page's "Iteration timeline" view (issue #27 d2): one engine iteration at the operating point, kernel by
// kernel, on the step timeline's zoomable Gantt chart — each layer's GEMMs, attention, norms and TP collectives, the
// LM head and sampling, the host issuing kernels and the GPU waiting for it in eager mode (model::serving_timeline,
// the same as `gpuplan serve --timeline`). The serving job computes both passes; this view renders them.
#include <QWidget>

#include "serving_job.hpp"

class QComboBox;
class QLabel;

namespace gpuplan::gui {
namespace charts {
class TimelineChart;
}

class ServingTimelineView : public QWidget {
  Q_OBJECT
 public:
  explicit ServingTimelineView(QWidget* parent = nullptr);
  void setResult(const ServingResult& r);
  [[nodiscard]] QComboBox* passCombo() const { return pass_; }
  [[nodiscard]] charts::TimelineChart* chart() const { return chart_; }
  [[nodiscard]] QLabel* summary() const { return summary_; }

 private:
  void show_pass();
  QComboBox* pass_;
  QLabel* summary_;
  charts::TimelineChart* chart_;
  model::StepTimeline decode_, prefill_;
  QString decode_what_, prefill_what_;
};

}  // namespace gpuplan::gui
