#include "pipeline_page.hpp"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include <fmt/format.h>

#include "explain_pane.hpp"
#include "gantt_chart.hpp"
#include "gpuplan/core/format.hpp"
#include "job_controller.hpp"

namespace gpuplan::gui {
namespace {
namespace u = gpuplan::units;
QString q(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }
QString t(u::Seconds s) { return q(u::format(s)); }
double ms(double s) { return s * 1e3; }
}  // namespace

PipelinePage::PipelinePage(std::shared_ptr<const AppData> app_data, QWidget* parent)
    : QWidget(parent), data_(std::move(app_data)) {
  jobs_ = new JobController(this);
  file_ = new QLineEdit;
  file_->setToolTip(tr("A pipeline file (kind \"pipeline\": stages, engines, sensors, deadline; docs/pipelines.md)"));
  open_ = new QPushButton(tr("Open…"));
  hardware_ = new QComboBox;
  hardware_->addItem(tr("as in the file"), QString());
  for (const auto& g : data_->db.gpus) hardware_->addItem(q(g.info.name.empty() ? g.info.id : g.info.name), q(g.info.id));
  hardware_->setToolTip(tr("The chip the pipeline runs on (`gpuplan pipeline --gpu`): a DLA stage on a chip without "
                           "DLAs runs on its GPU"));
  auto box = [this](const QString& text, const QString& tip) {
    auto* b = new QCheckBox(text);
    b->setToolTip(tip);
    connect(b, &QCheckBox::toggled, this, [this] {
      options_from_file_ = false;
      changed();
    });
    return b;
  };
  share_ = box(tr("Backbone sharing"), tr("Heads read one backbone run (off: every head runs its own backbone copy)"));
  int8_ = box(tr("INT8"), tr("Every model stage in int8 (TensorRT INT8 engines)"));
  fusion_ = box(tr("TensorRT-like fusion"),
                tr("A fused engine: batch norm folded into the convolutions, activation and add in the GEMM epilogue"));
  graphs_ = box(tr("CUDA graphs"), tr("Each model stage replayed from a CUDA graph (off: eager kernel launches)"));
  reuse_ = box(tr("Temporal reuse"), tr("Honour the stages' every_k_frames (off: every stage runs every frame)"));

  auto* row1 = new QHBoxLayout;
  row1->addWidget(new QLabel(tr("Pipeline")));
  row1->addWidget(file_, 3);
  row1->addWidget(open_);
  row1->addSpacing(8);
  row1->addWidget(new QLabel(tr("Hardware")));
  row1->addWidget(hardware_, 1);
  auto* row2 = new QHBoxLayout;
  for (auto* b : {share_, int8_, fusion_, graphs_, reuse_}) row2->addWidget(b);
  row2->addStretch(1);
  auto* busy = new QLabel(tr("<i>scheduling…</i>"));
  busy->setVisible(false);
  row2->addWidget(busy);
  connect(jobs_, &JobController::busyChanged, busy, &QLabel::setVisible);

  summary_ = new QLabel;
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_ = new QLabel;
  status_->setTextFormat(Qt::RichText);
  status_->setWordWrap(true);
  status_->setVisible(false);
  gantt_ = new charts::GanttChart;
  table_ = new QTableWidget(0, kColumnCount);
  table_->setHorizontalHeaderLabels(
      {tr("Stage"), tr("Engine"), tr("Start"), tr("Finish"), tr("Duration"), tr("Critical"), tr("What")});
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  explain_ = new ExplainPane;

  auto* bottom = new QSplitter(Qt::Horizontal);
  bottom->addWidget(table_);
  bottom->addWidget(explain_);
  bottom->setStretchFactor(0, 3);
  bottom->setStretchFactor(1, 2);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(gantt_);
  split->addWidget(bottom);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);

  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(4, 4, 4, 4);
  l->addLayout(row1);
  l->addLayout(row2);
  l->addWidget(summary_);
  l->addWidget(status_);
  l->addWidget(split, 1);

  connect(open_, &QPushButton::clicked, this, [this] {
    const auto path = QFileDialog::getOpenFileName(this, tr("Open pipeline"), QFileInfo(file()).absolutePath(),
                                                   tr("Pipeline (*.json)"));
    if (!path.isEmpty()) setFile(path);
  });
  connect(file_, &QLineEdit::editingFinished, this, [this] { setFile(file_->text()); });
  connect(hardware_, &QComboBox::currentIndexChanged, this, &PipelinePage::changed);
  connect(table_, &QTableWidget::currentCellChanged, this, [this](int row) {
    if (row < 0 || table_->item(row, kStage) == nullptr) return;
    explain_->selectId("rt.stage." + table_->item(row, kStage)->text());
  });

  summary_->setText(tr("<i>A real-time pipeline: stages on the GPU, DLA and CPU engines against the frame deadline.</i>"));
  const QString bundled = QString::fromStdString(data_->data_dir) + "/scenarios/ad-perception.json";
  if (QFileInfo::exists(bundled)) file_->setText(bundled);
}

QString PipelinePage::file() const { return file_->text(); }

void PipelinePage::setFile(const QString& path) {
  if (path == file_->text() && has_result_ && last_.request.file == path.toStdString()) return;
  file_->setText(path);
  options_from_file_ = true;  // the new file's `options` set the toggles
  changed();
}

void PipelinePage::changed() {
  stale_ = true;
  if (isVisible()) run();
}

void PipelinePage::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (stale_) run();
}

bool PipelinePage::idle() const { return !jobs_->busy() && !(stale_ && isVisible()); }

PipelinePageRequest PipelinePage::request() const {
  PipelinePageRequest r;
  r.file = file_->text().toStdString();
  r.gpu = hardware_->currentData().toString().toStdString();
  if (!options_from_file_) {
    r.overrides.share_backbone = share_->isChecked();
    r.overrides.int8 = int8_->isChecked();
    r.overrides.fusion = fusion_->isChecked();
    r.overrides.cuda_graphs = graphs_->isChecked();
    r.overrides.temporal_reuse = reuse_->isChecked();
  }
  return r;
}

void PipelinePage::run() {
  stale_ = false;
  auto shared = data_;
  const PipelinePageRequest req = request();
  jobs_->submit<PipelinePageResult>([shared, req] { return evaluate_pipeline_page(*shared, req); },
                                    [this](PipelinePageResult& r) { setResult(r); });
}

void PipelinePage::setResult(PipelinePageResult& r) {
  last_ = std::move(r);
  has_result_ = true;
  const auto& res = last_;
  QString st;
  for (const auto& d : res.diags.items()) {
    const char* colour = d.severity == Severity::error ? "#b00020" : d.severity == Severity::warning ? "#a05a00" : "gray";
    st += QString("<span style='color:%1'>%2</span><br>").arg(colour, q(d.to_string()));
  }
  status_->setText(st);
  status_->setVisible(!st.isEmpty());
  table_->setRowCount(0);
  if (!res.valid) {
    gantt_->clear();
    explain_->setDerivations({});
    summary_->setText(tr("<span style='color:#b00020'><b>No schedule</b></span> — see the messages below"));
    emit evaluated();
    return;
  }
  const auto& p = res.result;
  const auto& s = p.schedule;
  // The toggles show the options as run (the file's, until one is changed here).
  {
    const auto& o = p.spec.options;
    const std::pair<QCheckBox*, bool> states[] = {
        {share_, o.share_backbone}, {int8_, o.int8}, {fusion_, o.fusion}, {graphs_, o.cuda_graphs}, {reuse_, o.temporal_reuse}};
    for (const auto& b : states) {
      const QSignalBlocker block(b.first);
      b.first->setChecked(b.second);
    }
  }
  {
    const QSignalBlocker block(hardware_);
    hardware_->setItemText(0, tr("as in the file (%1)").arg(q(p.spec.hardware)));
  }

  // Frame 0's stages, in start order: the Gantt's rows and the table's.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < p.rt.stages.size(); ++i)
    if (i < s.frame0.size() && s.frame0[i].ran) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&s](std::size_t a, std::size_t b) { return s.frame0[a].start_s < s.frame0[b].start_s; });
  auto critical = [&s](std::size_t i) {
    return std::find(s.critical_path.begin(), s.critical_path.end(), i) != s.critical_path.end();
  };
  QVector<charts::GanttBar> bars;
  table_->setRowCount(int(order.size()));
  int row = 0;
  for (std::size_t i : order) {
    const auto& st_i = p.rt.stages[i];
    const auto& run = s.frame0[i];
    charts::GanttBar b;
    b.id = QString::fromStdString(st_i.id);
    b.engine = QString::fromStdString(st_i.engine);
    b.what = QString::fromStdString(st_i.what);
    b.start_ms = ms(run.start_s);
    b.finish_ms = ms(run.finish_s);
    b.critical = critical(i);
    bars.push_back(b);
    const QString cells[kColumnCount] = {b.id,
                                         b.engine,
                                         t(u::Seconds(run.start_s)),
                                         t(u::Seconds(run.finish_s)),
                                         t(u::Seconds(run.finish_s - run.start_s)),
                                         b.critical ? tr("yes") : QString(),
                                         b.what};
    for (int c = 0; c < kColumnCount; ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      if (c == kStart || c == kFinish || c == kDuration) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      if (b.critical) item->setForeground(QColor(0xc0, 0x10, 0x20));
      table_->setItem(row, c, item);
    }
    ++row;
  }
  gantt_->setData(bars, ms(p.rt.deadline.raw()), ms(s.latency_mean_frame0.raw()), ms(s.latency_p.raw()));

  // One pass of formatting (no chained QString::arg, which would re-scan a file's name for %N).
  auto e = [](const std::string& x) { return q(x).toStdString(); };
  auto ts = [&e](u::Seconds x) { return e(u::format(x)); };
  auto verdict = [](bool ok) {
    return std::string(ok ? "<b style='color:#1b7a2f'>met</b>" : "<b style='color:#b00020'>missed</b>");
  };
  std::string path, engines;
  for (std::size_t i : s.critical_path) path += (path.empty() ? "" : " → ") + e(p.rt.stages[i].id);
  for (const auto& en : s.engines)
    engines += fmt::format("{}{} {:.0f}%", engines.empty() ? "" : ", ", e(en.engine), 100 * en.utilisation);
  const std::string text = fmt::format(
      "<b>{}</b> on <b>{}</b> — frame every {}, deadline <b>{}</b>"
      "<br>mean (frame 0 at mean stage times): <b>{}</b>, deadline {}, slack {} · "
      "Monte-Carlo over {} frames: mean {}, <b>P{:g} {}</b>, deadline {}, slack {}, {:.2f}% of frames late{}"
      "<br>critical path: {} · engine load per frame: {} · model FLOPs per frame: {} (backbone shared {}, one copy "
      "per head {})",
      e(p.spec.name.empty() ? p.spec.file : p.spec.name), e(p.gpu->info.name.empty() ? p.gpu->info.id : p.gpu->info.name),
      ts(p.rt.period), ts(p.rt.deadline), ts(s.latency_mean_frame0), verdict(s.meets_mean), ts(s.slack_mean),
      s.options.frames, ts(s.latency_mc_mean), 100 * s.options.quantile, ts(s.latency_p), verdict(s.meets_p),
      ts(s.slack_p), 100 * s.miss_rate,
      s.keeps_up ? "" : " · <b style='color:#b00020'>an engine is busier than the frame period</b>", path, engines,
      e(u::format(p.flops_as_run)), e(u::format(p.flops_shared)), e(u::format(p.flops_separate)));
  summary_->setText(QString::fromStdString(text));

  std::vector<Derivation> roots;
  if (!s.derivation.empty()) roots.push_back(s.derivation);
  for (std::size_t i : order)
    if (!p.rt.stages[i].derivation.empty()) roots.push_back(p.rt.stages[i].derivation);
  if (!p.flops_derivation.empty()) roots.push_back(p.flops_derivation);
  explain_->setDerivations(std::move(roots));
  emit evaluated();
}

}  // namespace gpuplan::gui
