#include "serving_timeline_view.hpp"

#include <map>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "gpuplan/core/format.hpp"
#include "timeline_chart.hpp"

namespace gpuplan::gui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
QString t(units::Seconds s) { return q(units::format(s)); }
}  // namespace

ServingTimelineView::ServingTimelineView(QWidget* parent) : QWidget(parent) {
  pass_ = new QComboBox;
  pass_->addItem(tr("decode step at the operating batch"), "decode");
  pass_->addItem(tr("prefill of one prompt"), "prefill");
  summary_ = new QLabel;
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  chart_ = new charts::TimelineChart;
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("<b>One engine iteration</b>")));
  row->addStretch(1);
  row->addWidget(pass_);
  auto* hint = new QLabel(tr("Wheel: zoom · drag: pan · double click: whole iteration · hover: the kernel's terms"));
  hint->setEnabled(false);
  auto* l = new QVBoxLayout(this);
  l->addLayout(row);
  l->addWidget(summary_);
  l->addWidget(chart_, 1);
  l->addWidget(hint);
  connect(pass_, &QComboBox::currentIndexChanged, this, [this] { show_pass(); });
}

void ServingTimelineView::setResult(const ServingResult& r) {
  decode_ = r.decode_timeline;
  prefill_ = r.prefill_timeline;
  decode_what_ = tr("decode step of %1 sequences at context %2").arg(r.batch).arg(r.prompt_tokens + r.output_tokens / 2);
  prefill_what_ = tr("prefill of one %1-token prompt").arg(r.prompt_tokens);
  show_pass();
}

void ServingTimelineView::show_pass() {
  const bool prefill = pass_->currentData().toString() == "prefill";
  const model::StepTimeline& tl = prefill ? prefill_ : decode_;
  chart_->setTimeline(tl);
  if (!tl.ok) {
    summary_->setText(tl.error.empty() ? tr("No iteration: the serving scenario does not resolve.")
                                       : tr("No iteration: %1").arg(q(tl.error)));
    return;
  }
  std::map<model::SpanKind, units::Seconds> by;
  for (const auto& s : tl.spans) by[s.kind] += s.duration();
  auto at = [&](model::SpanKind k) { return by.count(k) ? by[k] : units::Seconds{}; };
  using K = model::SpanKind;
  QString text = tr("<b>%1: %2</b> (the model's iteration %3). GEMM %4, attention %5, norms/rotary/activations %6, "
                    "TP/EP collectives %7, LM head %8, sampling %9")
                     .arg(prefill ? prefill_what_ : decode_what_, t(tl.end), t(tl.step_time),
                          t(at(K::gemm)), t(at(K::attention)), t(at(K::elementwise)),
                          t(at(K::comm_tp) + at(K::comm_ep)), t(at(K::head_loss)), t(at(K::sampling)));
  if (at(K::launch_gap).raw() > 0)
    text += tr("; <b>GPU idle waiting for the host %1</b> (eager: the host issues every kernel)").arg(t(at(K::launch_gap)));
  if (at(K::comm_pp).raw() > 0) text += tr("; PP sends %1").arg(t(at(K::comm_pp)));
  for (const auto& n : tl.notes) text += "<br>" + q(n).toHtmlEscaped();
  summary_->setText(text);
}

}  // namespace gpuplan::gui
