#include "collectives_chart.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <QCategoryAxis>
#include <QChart>
#include <QChartView>
#include <QLabel>
#include <QLegend>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QSplitter>
#include <QVBoxLayout>
#include <QValueAxis>

#include "chart_util.hpp"
#include "gpuplan/core/format.hpp"

namespace gpuplan::gui::charts {
namespace {
namespace u = gpuplan::units;
QString q(const std::string& s) { return QString::fromStdString(s); }

void clear(QChart* c) {
  c->removeAllSeries();
  for (auto* a : c->axes()) {
    c->removeAxis(a);
    delete a;
  }
}

/// Message sizes are powers of two: the x axis is log2(bytes) on a category axis labelled in KiB/MiB/GiB (a log axis
/// would print 1.04858e+06).
QCategoryAxis* size_axis(double lo, double hi) {
  auto* a = new QCategoryAxis;
  a->setLabelsPosition(QCategoryAxis::AxisLabelsPositionOnValue);
  a->setTitleText(QObject::tr("message size per rank (NCCL's count)"));
  for (int e = int(std::ceil(lo)); e <= int(std::floor(hi)); ++e) {
    if (e % 2 != 0) continue;
    const char* unit = e >= 30 ? "GiB" : e >= 20 ? "MiB" : "KiB";
    const int shift = e >= 30 ? 30 : e >= 20 ? 20 : 10;
    a->append(QString("%1 %2").arg(1LL << (e - shift)).arg(unit), e);
  }
  a->setRange(lo - 0.2, hi + 0.4);  // room for the first and last labels
  return a;
}

QPen tier_pen(int op, int tier) {
  QPen p(series_colour(op), tier == 0 ? 2.5 : 2.0);
  if (tier != 0) p.setStyle(Qt::DashLine);
  return p;
}
}  // namespace

CollectivesChart::CollectivesChart(QWidget* parent)
    : QWidget(parent), time_chart_(new QChart), bw_chart_(new QChart) {
  header_ = new QLabel;
  header_->setWordWrap(true);
  header_->setTextFormat(Qt::RichText);
  header_->setTextInteractionFlags(Qt::LinksAccessibleByMouse | Qt::LinksAccessibleByKeyboard);
  connect(header_, &QLabel::linkActivated, this, &CollectivesChart::derivationRequested);
  time_view_ = make_view(time_chart_, tr("Collective time vs message size"), this);
  bw_view_ = make_view(bw_chart_, tr("Bus bandwidth vs message size"), this);
  bw_chart_->legend()->hide();  // the same series as above
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(time_view_);
  split->addWidget(bw_view_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(4, 4, 4, 4);
  l->addWidget(header_);
  l->addWidget(split, 1);
}

QString CollectivesChart::pointText(int tier, int op, int index) const {
  if (tier < 0 || tier >= int(result_.tiers.size())) return {};
  const auto& t = result_.tiers[std::size_t(tier)];
  if (op < 0 || op >= int(t.curves.size())) return {};
  const auto& c = t.curves[std::size_t(op)];
  if (index < 0 || index >= int(c.points.size())) return {};
  const auto& p = c.points[std::size_t(index)];
  return tr("%1 on %2\n%3: %4 (%5)\nalgorithm bandwidth %6 · bus bandwidth %7%8")
      .arg(q(collective_name(c.op)), q(t.label), q(u::format(u::Bytes(p.bytes), u::BytePrefix::binary)),
           q(u::format(u::Seconds(p.time_s))), q(algorithm_name(p.algorithm)),
           q(u::format(u::Bandwidth(p.algbw_Bps))), q(u::format(u::Bandwidth(p.busbw_Bps))),
           t.calibrated ? tr("\nNVLink α and η calibrated") : QString());
}

void CollectivesChart::setResult(const CollectivesResult& r) {
  result_ = r;
  clear(time_chart_);
  clear(bw_chart_);
  series_ = 0;
  QString head;
  for (std::size_t i = 0; i < r.tiers.size(); ++i) {
    const auto& t = r.tiers[i];
    head += QString("<b>%1</b> %2 — %3 <a href=\"%4\" style=\"text-decoration:none\">[explain]</a><br>")
                .arg(i == 0 ? tr("solid") : tr("dashed"), q(t.label).toHtmlEscaped(),
                     t.feasible ? q(t.fabric).toHtmlEscaped() : tr("no link in the data"), q(t.sample.id));
  }
  if (!r.calibration.empty())
    head += tr("<span style='color:#2e7d32'>NVLink α and η calibrated: %1</span>").arg(q(r.calibration).toHtmlEscaped());
  else if (r.profile_used)
    head += tr("<span style='color:gray'>The GPU's calibration profile holds no NVLink measurement: link α and η from "
               "the model's cited tables.</span>");
  else
    head += tr("<span style='color:gray'>No calibration profile: link α and η from the model's cited tables.</span>");
  for (const auto& n : r.notes) head += "<br><span style='color:gray'>" + q(n).toHtmlEscaped() + "</span>";
  header_->setText(head);
  if (r.tiers.empty()) {
    time_chart_->setTitle(tr("Collectives — no communicator in this scenario"));
    return;
  }
  time_chart_->setTitle(tr("Collective time vs message size"));
  double xlo = std::numeric_limits<double>::max(), xhi = 0, ylo = std::numeric_limits<double>::max(), yhi = 0, bwhi = 0;
  for (const auto& t : r.tiers)
    for (const auto& c : t.curves)
      for (const auto& p : c.points) {
        xlo = std::min(xlo, std::log2(p.bytes));
        xhi = std::max(xhi, std::log2(p.bytes));
        ylo = std::min(ylo, p.time_s * 1e3);
        yhi = std::max(yhi, p.time_s * 1e3);
        bwhi = std::max(bwhi, p.busbw_Bps / 1e9);
      }
  if (yhi <= 0) return;
  auto* x = size_axis(xlo, xhi);
  auto* y = new QLogValueAxis;
  y->setBase(10);
  y->setLabelFormat("%g");
  y->setTitleText(tr("time (ms)"));
  y->setMinorTickCount(-1);
  y->setRange(std::pow(10.0, std::floor(std::log10(ylo))), std::pow(10.0, std::ceil(std::log10(yhi))));
  time_chart_->addAxis(x, Qt::AlignBottom);
  time_chart_->addAxis(y, Qt::AlignLeft);
  auto* bx = size_axis(xlo, xhi);
  auto* by = new QValueAxis;
  by->setTitleText(tr("busbw (GB/s)"));
  by->setLabelFormat("%.0f");
  by->setRange(0, bwhi * 1.08);
  by->applyNiceNumbers();
  bw_chart_->addAxis(bx, Qt::AlignBottom);
  bw_chart_->addAxis(by, Qt::AlignLeft);
  for (int ti = 0; ti < int(r.tiers.size()); ++ti) {
    const auto& t = r.tiers[std::size_t(ti)];
    for (int oi = 0; oi < int(t.curves.size()); ++oi) {
      const auto& c = t.curves[std::size_t(oi)];
      if (c.points.empty()) continue;
      auto* ts = new QLineSeries;
      auto* bs = new QLineSeries;
      ts->setName(q(collective_name(c.op)));
      bs->setName(ts->name());
      ts->setPen(tier_pen(oi, ti));
      bs->setPen(tier_pen(oi, ti));
      for (const auto& p : c.points) {
        ts->append(std::log2(p.bytes), p.time_s * 1e3);
        bs->append(std::log2(p.bytes), p.busbw_Bps / 1e9);
      }
      time_chart_->addSeries(ts);
      ts->attachAxis(x);
      ts->attachAxis(y);
      // One legend entry per collective (colour); the tier is the line style, named in the header above.
      if (ti > 0 && !r.tiers[0].curves[std::size_t(oi)].points.empty())
        for (auto* m : time_chart_->legend()->markers(ts)) m->setVisible(false);
      bw_chart_->addSeries(bs);
      bs->attachAxis(bx);
      bs->attachAxis(by);
      ++series_;
      const double x0 = std::log2(c.points.front().bytes);
      const int n = int(c.points.size());
      auto hover = [this, ti, oi, x0, n](const QPointF& p, bool on) {
        if (!on) return;
        const int i = std::clamp(int(std::lround(p.x() - x0)), 0, n - 1);
        show_tip(pointText(ti, oi, i));
      };
      connect(ts, &QLineSeries::hovered, this, hover);
      connect(bs, &QLineSeries::hovered, this, hover);
      const QString id = q(t.sample.id);
      connect(ts, &QLineSeries::clicked, this, [this, id](const QPointF&) { emit derivationRequested(id); });
    }
  }
  line_legend_markers(time_chart_);
  line_legend_markers(bw_chart_);
}

}  // namespace gpuplan::gui::charts
