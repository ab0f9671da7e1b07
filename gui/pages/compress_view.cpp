#include "compress_view.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>

#include "compress_chart.hpp"
#include "gpuplan/core/format.hpp"

namespace gpuplan::gui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
QString num(double v, int digits) { return QString::number(v, 'f', digits); }
}  // namespace

CompressView::CompressView(QWidget* parent) : QWidget(parent) {
  metric_ = new QComboBox;
  for (int m = 0; m < charts::CompressChart::kMetricCount; ++m)
    metric_->addItem(charts::CompressChart::unit_of(charts::CompressChart::Metric(m)), m);
  note_ = new QLabel;
  note_->setWordWrap(true);
  note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  table_ = new QTableWidget;
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setVisible(false);
  chart_ = new charts::CompressChart;
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("<b>Compression choices</b> on this replica (as <tt>gpuplan compress</tt>)")));
  row->addStretch(1);
  row->addWidget(new QLabel(tr("bars:")));
  row->addWidget(metric_);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(chart_);
  split->addWidget(table_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* l = new QVBoxLayout(this);
  l->addLayout(row);
  l->addWidget(note_);
  l->addWidget(split, 1);
  connect(metric_, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
}

void CompressView::setResult(const ServingResult& r) {
  study_ = r.compression;
  table_->clear();
  table_->setRowCount(0);
  const QStringList heads{tr("choice"),        tr("weights"),    tr("compute"),   tr("params B"),
                          tr("weights GB"),    tr("weights+KV GB"), tr("fits"),   tr("max batch"),
                          tr("TTFT ms"),       tr("ITL ms"),     tr("decode tok/s"), tr("ITL ×")};
  table_->setColumnCount(int(heads.size()));
  table_->setHorizontalHeaderLabels(heads);
  if (!study_ || study_->rows.empty()) {
    note_->setText(r.valid ? tr("No compression study for this scenario.")
                           : tr("No compression study: the serving scenario does not resolve (see the status)."));
    chart_->setStudy(model::CompressionStudy{}, charts::CompressChart::kDecodeTokens);
    return;
  }
  const auto& base = study_->rows.front();
  table_->setRowCount(int(study_->rows.size()));
  for (std::size_t i = 0; i < study_->rows.size(); ++i) {
    const auto& x = study_->rows[i];
    QStringList cells{q(x.label), q(x.weights), x.refused.empty() ? q(x.compute) : tr("refused: %1").arg(q(x.refused))};
    if (x.refused.empty())
      cells << num(x.params / 1e9, 3) << num(x.weight_bytes.raw() / 1e9, 2) << num(x.memory.raw() / 1e9, 2)
            << (x.fits ? tr("yes") : tr("no")) << QString::number(x.max_batch) << num(x.ttft.raw() * 1e3, 2)
            << num(x.itl.raw() * 1e3, 3) << num(x.decode_tokens_per_s, 0)
            << num(x.itl.raw() > 0 ? base.itl.raw() / x.itl.raw() : 0.0, 2);
    for (int c = 0; c < cells.size(); ++c) {
      auto* it = new QTableWidgetItem(cells[c]);
      if (!x.notes.empty()) it->setToolTip(q(x.notes.front()));
      table_->setItem(int(i), c, it);
    }
  }
  table_->resizeColumnsToContents();
  // The model's note says that accuracy is out of scope (compression.hpp, accuracy_note): shown once, in bold.
  QString text = tr("Batch %1, %2 prompt + %3 output tokens (KV at %4 tokens, decode steps at %5). <b>%6</b>")
                     .arg(study_->batch)
                     .arg(study_->input_tokens)
                     .arg(study_->output_tokens)
                     .arg(study_->context)
                     .arg(study_->decode_context)
                     .arg(q(study_->accuracy_note).toHtmlEscaped());
  for (const auto& s : r.compression_refused) text += "<br>" + tr("not derived: %1").arg(q(s).toHtmlEscaped());
  note_->setText(text);
  redraw();
}

void CompressView::redraw() {
  if (!study_) return;
  chart_->setStudy(*study_, charts::CompressChart::Metric(metric_->currentData().toInt()));
}

}  // namespace gpuplan::gui
