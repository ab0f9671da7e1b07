#include "timeline_page.hpp"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>

#include "gpuplan/core/format.hpp"
#include "timeline_chart.hpp"

namespace gpuplan::gui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
QString t(units::Seconds s) { return q(units::format(s)); }
QString gib(units::Bytes b) { return q(units::format(b, units::BytePrefix::binary)); }
}  // namespace

TimelinePage::TimelinePage(QWidget* parent) : QWidget(parent) {
  summary_ = new QLabel;
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  step_ = new charts::TimelineChart;
  step_->setToolTip(QString());
  memory_summary_ = new QLabel;
  memory_summary_->setWordWrap(true);
  recompute_ = new QComboBox;
  recompute_->addItem(tr("recompute: none"), 0);
  recompute_->addItem(tr("recompute: selective"), 1);
  recompute_->addItem(tr("recompute: full"), 2);
  recompute_->setToolTip(tr("Activation recomputation for the memory timeline (the step above keeps the scenario's)"));
  memory_ = new charts::MemoryTimelineChart;

  workers_ = new QSpinBox;
  workers_->setRange(0, 64);
  workers_->setValue(0);
  workers_->setPrefix(tr("DataLoader workers "));
  workers_->setSpecialValueText(tr("DataLoader workers: none (in process)"));
  workers_->setKeyboardTracking(false);
  workers_->setToolTip(tr("DataLoader worker processes per GPU: they prepare the next batch beside the step "
                          "(none: the training process loads each batch between steps, the GPU idle meanwhile)"));
  sample_ms_ = new QDoubleSpinBox;
  sample_ms_->setRange(0, 1000);
  sample_ms_->setDecimals(2);
  sample_ms_->setValue(0);
  sample_ms_->setSuffix(tr(" ms/sample"));
  sample_ms_->setSpecialValueText(tr("loader not priced"));
  sample_ms_->setKeyboardTracking(false);
  sample_ms_->setToolTip(tr("CPU time to produce one sample (read, tokenise, collate); 0: the input pipeline is not "
                            "priced (batches assumed prefetched)"));
  connect(workers_, &QSpinBox::valueChanged, this, &TimelinePage::loaderChanged);
  connect(sample_ms_, &QDoubleSpinBox::valueChanged, this, &TimelinePage::loaderChanged);

  auto* top = new QWidget;
  auto* tl = new QVBoxLayout(top);
  tl->setContentsMargins(0, 0, 0, 0);
  auto* loader_row = new QHBoxLayout;
  loader_row->addWidget(new QLabel(tr("<b>Input pipeline</b>")));
  loader_row->addWidget(workers_);
  loader_row->addWidget(sample_ms_);
  loader_row->addStretch(1);
  tl->addLayout(loader_row);
  tl->addWidget(summary_);
  tl->addWidget(step_, 1);
  auto* hint = new QLabel(tr("Wheel: zoom · drag: pan · double click: whole step · hover: the model's terms"));
  hint->setEnabled(false);
  tl->addWidget(hint);
  auto* bottom = new QWidget;
  auto* bl = new QVBoxLayout(bottom);
  bl->setContentsMargins(0, 0, 0, 0);
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("<b>Memory over the step</b> (bytes allocated per GPU)")));
  row->addStretch(1);
  row->addWidget(recompute_);
  bl->addLayout(row);
  bl->addWidget(memory_summary_);
  bl->addWidget(memory_, 1);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(top);
  split->addWidget(bottom);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* l = new QVBoxLayout(this);
  l->addWidget(split);
  connect(recompute_, &QComboBox::currentIndexChanged, this, [this] { showMemory(); });
}

void TimelinePage::setResult(const TrainingResult& r) {
  const auto& tl = r.timeline;
  step_->setTimeline(tl);
  if (!tl.ok) {
    summary_->setText(tl.error.empty() ? tr("No timeline: the scenario does not resolve to a valid layout.")
                                       : tr("No timeline: %1").arg(q(tl.error)));
  } else {
    units::Seconds compute{}, idle{}, wait{}, starved{};
    for (const auto& s : tl.spans) {
      if (s.lane != 0) continue;  // stage 0's compute stream
      switch (s.kind) {
        case model::SpanKind::bubble: idle += s.duration(); break;
        case model::SpanKind::comm_exposed:
        case model::SpanKind::dp_wait: wait += s.duration(); break;
        case model::SpanKind::data_wait: starved += s.duration(); break;
        default: compute += s.duration();
      }
    }
    const QString input =
        tl.loader_priced
            ? tr(" <b>GPU utilisation %1%</b>%2 (%3-bound: the loader needs %4 per batch, the GPU %5 per step).")
                  .arg(100.0 * tl.gpu_utilisation, 0, 'f', 0)
                  .arg(tl.gpu_utilisation < 0.995 ? tr(" because the loader starves it: idle %1 waiting for the batch")
                                                        .arg(t(starved))
                                                  : QString())
                  .arg(q(tl.loader_bound).toHtmlEscaped(), t(tl.loader), t(tl.gpu_step))
            : QString();
    summary_->setText(tr("<b>One training step: %1</b> (the model's step time %2). Stage 0: busy %3, waiting on "
                         "collectives %4, idle in bubbles %5.%6%7")
                          .arg(t(tl.end), t(tl.step_time), t(compute), t(wait), t(idle), input,
                               tl.loader_priced || tl.notes.empty()
                                   ? QString()
                                   : QStringLiteral(" <i>%1</i>").arg(q(tl.notes.front()).toHtmlEscaped())));
  }
  memory_timelines_ = r.memory_timelines;
  {
    const QSignalBlocker block(recompute_);
    recompute_->setCurrentIndex(r.valid ? int(r.plan.recompute) : 0);
  }
  showMemory();
}

int TimelinePage::loaderWorkers() const { return workers_->value(); }
double TimelinePage::loaderSampleMs() const { return sample_ms_->value(); }

void TimelinePage::showMemory() {
  const int i = recompute_->currentIndex();
  if (i < 0 || std::size_t(i) >= memory_timelines_.size()) {
    memory_->setTimeline({});
    memory_summary_->clear();
    return;
  }
  const auto& m = memory_timelines_[std::size_t(i)];
  memory_->setTimeline(m);
  if (!m.ok) {
    memory_summary_->setText(q(m.error));
    return;
  }
  const model::StageMemoryTimeline* worst = nullptr;
  for (const auto& s : m.stages)
    if (worst == nullptr || s.peak.raw() > worst->peak.raw()) worst = &s;
  if (worst == nullptr) return;
  memory_summary_->setText(
      tr("Peak %1 allocated on stage %2 at %3: %4. The peak-memory estimate: %5 per GPU with the CUDA context, NCCL "
         "buffers and fragmentation.%6")
          .arg(gib(worst->peak))
          .arg(worst->stage)
          .arg(t(worst->peak_time), q(worst->peak_event).toHtmlEscaped(), gib(m.model_total),
               worst->peak_difference.empty() ? QString()
                                              : QStringLiteral(" <i>Timeline vs formula: %1</i>")
                                                    .arg(q(worst->peak_difference).toHtmlEscaped())));
}

}  // namespace gpuplan::gui
