#include "stack_page.hpp"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>

#include "gpuplan/core/format.hpp"
#include "job_controller.hpp"
#include "stack_chart.hpp"

namespace gpuplan::gui {
namespace {
QString q(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }
}  // namespace

StackPage::StackPage(std::shared_ptr<const AppData> app_data, QWidget* parent)
    : QWidget(parent), data_(std::move(app_data)) {
  jobs_ = new JobController(this);
  struct Spec {
    const char* label;
    const char* tip;
    bool on;
  };
  const Spec specs[kToggleCount] = {
      {"AMP bf16", "torch.autocast bf16: GEMMs and attention on the bf16 tensor cores, 16-bit activations", true},
      {"Flash attention", "SDPA's flash backend (FlashAttention-2): no score matrix kept", true},
      {"Fused AdamW", "one fused optimizer kernel instead of PyTorch's 8 foreach passes", true},
      {"torch.compile", "Inductor fuses the elementwise chains (norms, activations, residuals, loss)", true},
      {"DataLoader workers", "worker processes prefetch the batches beside the GPU (off: loaded between steps)", true},
      {"Comm overlap", "gradient reduction, parameter gathers and TP collectives overlapped with compute", false},
      {"Recompute", "activation recomputation: memory for time", false},
      {"CUDA graphs", "the step replayed from a CUDA graph (per-kernel cost of a replay)", false},
      {"FP8 GEMMs", "Transformer Engine FP8 GEMMs (GPUs with FP8 tensor cores)", false}};
  auto* grid = new QGridLayout;
  for (int i = 0; i < kToggleCount; ++i) {
    toggles_[i] = new QCheckBox(tr(specs[i].label));
    toggles_[i]->setToolTip(tr(specs[i].tip));
    toggles_[i]->setChecked(specs[i].on);
    grid->addWidget(toggles_[i], i / 5, i % 5);
    connect(toggles_[i], &QCheckBox::toggled, this, &StackPage::changed);
  }
  workers_ = new QSpinBox;
  workers_->setRange(1, 64);
  workers_->setValue(4);
  workers_->setPrefix(tr("workers "));
  workers_->setKeyboardTracking(false);
  recompute_ = new QComboBox;
  recompute_->addItem(tr("selective"), "selective");
  recompute_->addItem(tr("full"), "full");
  sample_ms_ = new QDoubleSpinBox;
  sample_ms_->setRange(0, 1000);
  sample_ms_->setDecimals(2);
  sample_ms_->setValue(0);
  sample_ms_->setSuffix(tr(" ms/sample"));
  sample_ms_->setKeyboardTracking(false);
  sample_ms_->setToolTip(tr("CPU time to produce one sample (read, tokenise, collate); 0: the input is not priced"));
  auto* knobs = new QHBoxLayout;
  knobs->addWidget(workers_);
  knobs->addWidget(new QLabel(tr("Recompute")));
  knobs->addWidget(recompute_);
  knobs->addWidget(new QLabel(tr("Input CPU cost")));
  knobs->addWidget(sample_ms_);
  knobs->addStretch(1);
  connect(workers_, &QSpinBox::valueChanged, this, &StackPage::changed);
  connect(recompute_, &QComboBox::currentIndexChanged, this, &StackPage::changed);
  connect(sample_ms_, &QDoubleSpinBox::valueChanged, this, &StackPage::changed);

  summary_ = new QLabel(tr("<i>The scenario's plan from a PyTorch fp32 eager baseline through the optimisations "
                           "ticked, in this order.</i>"));
  summary_->setWordWrap(true);
  status_ = new QLabel;
  status_->setWordWrap(true);
  status_->setVisible(false);
  table_ = new QLabel;
  table_->setTextFormat(Qt::RichText);
  table_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  chart_ = new charts::StackChart;
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(4, 4, 4, 4);
  l->addLayout(grid);
  l->addLayout(knobs);
  l->addWidget(summary_);
  l->addWidget(status_);
  l->addWidget(chart_, 1);
  l->addWidget(table_);
}

void StackPage::setScenario(const json_io::Json& scenario, bool calibration) {
  if (scenario == scenario_ && calibration == calibration_ && !last_.diags.has_errors() && last_.valid) return;
  scenario_ = scenario;
  calibration_ = calibration;
  changed();
}

void StackPage::changed() {
  stale_ = true;
  if (isVisible()) run();
}

void StackPage::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (stale_) run();
}

bool StackPage::idle() const { return !jobs_->busy() && !(stale_ && isVisible()); }

StackRequest StackPage::request() const {
  StackRequest r;
  r.scenario = scenario_;
  r.calibration = calibration_;
  r.sample_ms = sample_ms_->value();
  const model::OptKind kinds[kToggleCount] = {model::OptKind::amp,       model::OptKind::flash,
                                              model::OptKind::fused_optimizer, model::OptKind::compile,
                                              model::OptKind::workers,   model::OptKind::overlap,
                                              model::OptKind::recompute, model::OptKind::cuda_graphs,
                                              model::OptKind::fp8};
  for (int i = 0; i < kToggleCount; ++i) {
    if (!toggles_[i]->isChecked()) continue;
    model::OptStep s;
    s.kind = kinds[i];
    s.workers = workers_->value();
    s.recompute = recompute_->currentData().toString() == "full" ? wl::Recompute::full : wl::Recompute::selective;
    r.steps.push_back(s);
  }
  return r;
}

void StackPage::run() {
  stale_ = false;
  auto shared = data_;
  const StackRequest req = request();
  jobs_->submit<StackResult>([shared, req] { return evaluate_stack(*shared, req); },
                             [this](StackResult& r) { setResult(r); });
}

void StackPage::setResult(StackResult& r) {
  last_ = std::move(r);
  QString st;
  for (const auto& d : last_.diags.items()) {
    if (d.severity == Severity::note) continue;
    st += QString("<span style='color:%1'>%2</span><br>")
              .arg(d.severity == Severity::error ? "#b00020" : "#a05a00", q(d.to_string()));
  }
  for (const auto& n : last_.stack.notes) st += "<span style='color:gray'>" + q(n) + "</span><br>";
  status_->setText(st);
  status_->setVisible(!st.isEmpty());
  chart_->setResult(last_);
  if (!last_.valid) {
    summary_->setText(tr("<span style='color:#b00020'><b>No stack</b></span>"));
    table_->clear();
    emit stacked();
    return;
  }
  const auto& rows = last_.stack.rows;
  summary_->setText(tr("<b>%1</b> — %2 → %3 per step, <b>×%4</b> cumulative <span style='color:gray'>(`gpuplan train "
                       "--stack %5`)</span>")
                        .arg(q(last_.title), q(units::format(rows.front().step_time)),
                             q(units::format(rows.back().step_time)))
                        .arg(rows.back().cumulative_speedup, 0, 'f', 2)
                        .arg(q(stack_flag(last_.request))));
  QString t = "<table cellspacing=0 cellpadding=3 border=1><tr><th>stage</th><th>ms/step</th><th>× prev</th><th>× "
              "base</th><th>peak GiB</th><th>tokens/s</th><th>MFU</th><th>$ / M tokens</th><th>input</th></tr>";
  for (const auto& row : rows)
    t += QString("<tr><td>%1%2</td><td align=right>%3</td><td align=right>%4</td><td align=right>%5</td><td "
                 "align=right>%6</td><td align=right>%7</td><td align=right>%8%</td><td align=right>%9</td><td>%10</td></tr>")
             .arg(q(row.name), row.fits ? QString() : tr(" ✗ does not fit"))
             .arg(row.step_time.raw() * 1e3, 0, 'g', 4)
             .arg(row.speedup, 0, 'f', 3)
             .arg(row.cumulative_speedup, 0, 'f', 3)
             .arg(units::to_GiB(row.peak), 0, 'f', 2)
             .arg(row.tokens_per_s, 0, 'f', 0)
             .arg(100 * row.mfu, 0, 'f', 1)
             .arg(row.usd_per_million_tokens ? QString::number(*row.usd_per_million_tokens, 'g', 4) : QString("—"))
             .arg(row.loader_bound.empty() ? tr("not priced") : q(row.loader_bound));
  table_->setText(t + "</table>");
  emit stacked();
}

}  // namespace gpuplan::gui
