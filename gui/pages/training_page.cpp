#include "training_page.hpp"

#include <QLabel>
#include <QSplitter>
#include <QVBoxLayout>

#include "gpuplan/core/format.hpp"
#include "training_charts.hpp"

namespace gpuplan::gui {
namespace {
namespace u = gpuplan::units;
QString q(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }
QString link(const QString& id, const QString& text) {
  return QString("<a href=\"%1\" style=\"text-decoration:none\">%2</a>").arg(id, text);
}
}  // namespace

TrainingPage::TrainingPage(QWidget* parent) : QWidget(parent) {
  summary_ = new QLabel;
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::LinksAccessibleByMouse | Qt::LinksAccessibleByKeyboard);
  summary_->setMinimumHeight(64);
  connect(summary_, &QLabel::linkActivated, this, &TrainingPage::derivationRequested);
  memory_ = new charts::MemoryChart;
  step_ = new charts::StepChart;
  connect(memory_, &charts::MemoryChart::derivationRequested, this, &TrainingPage::derivationRequested);
  connect(step_, &charts::StepChart::derivationRequested, this, &TrainingPage::derivationRequested);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(memory_);
  split->addWidget(step_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(4, 4, 4, 4);
  l->addWidget(summary_);
  l->addWidget(split, 1);
}

void TrainingPage::setResult(const TrainingResult& r) {
  memory_->setResult(r);
  step_->setResult(r);
  if (!r.valid || r.gpus_evaluated.empty()) {
    summary_->setText(tr("<span style='color:#b00020'><b>No estimate</b> — see the status area below the "
                         "scenario.</span>"));
    return;
  }
  const auto& g = r.gpus_evaluated[0];
  const auto& e = g.est;
  const auto& par = r.plan.par;
  QString head = QString("<b style='font-size:large'>%1 on %2 × %3</b> &nbsp; TP %4 · PP %5 · DP %6 · CP %7%8 · "
                         "%9 × %10 tokens per step")
                     .arg(q(r.model_name))
                     .arg(r.gpus)
                     .arg(q(g.gpu_name))
                     .arg(par.tp)
                     .arg(par.pp)
                     .arg(r.layout_ok ? QString::number(par.dp) : QString("?"))
                     .arg(par.cp)
                     .arg(par.ep > 1 ? QString(" · EP %1").arg(par.ep) : QString())
                     .arg(r.plan.global_batch)
                     .arg(r.plan.seq_len);
  if (e.step_time.raw() <= 0) {
    QString reasons;
    for (const auto& why : e.feasibility.reasons) reasons += "<li>" + q(why) + "</li>";
    summary_->setText(head + "<br><span style='color:#b00020'><b>Infeasible:</b></span><ul>" + reasons + "</ul>");
    return;
  }
  auto cell = [](const QString& name, const QString& value) {
    return QString("<td style='padding-right:18px'><span style='color:gray'>%1</span><br><b style='font-size:large'>%2</b></td>")
        .arg(name, value);
  };
  QString row = "<table><tr>";
  row += cell(tr("step time"), link("train", q(u::format(e.step_time))));
  row += cell(tr("tokens/s"), link("train", q(u::format_number(e.tokens_per_s, 4))));
  row += cell(tr("MFU"), link("train.mfu", q(u::format(u::Ratio(e.mfu)))));
  row += cell(tr("memory / GPU"),
              link("memory", q(u::format(e.memory.total, u::BytePrefix::binary)) + " / " +
                                 q(u::format(e.memory.capacity, u::BytePrefix::binary)) + (e.memory.fits ? "" : " ✗")));
  row += cell(tr("exposed comm"), link("train.comm", q(u::format(e.step.comm_exposed))));
  row += cell(tr("bubble"), link("train.bubble", q(u::format(e.step.bubble))));
  if (e.time_to_train) row += cell(tr("time to train"), link("train", q(u::format(*e.time_to_train))));
  if (e.cost) row += cell(tr("cost"), link("train", q(u::format(*e.cost))));
  row += "</tr></table>";
  QString warn;
  if (!e.feasibility.ok) {
    warn = "<span style='color:#b00020'><b>Infeasible:</b> ";
    for (const auto& why : e.feasibility.reasons) warn += q(why) + "; ";
    warn += "</span>";
  }
  summary_->setText(head + row + warn);
}

}  // namespace gpuplan::gui
