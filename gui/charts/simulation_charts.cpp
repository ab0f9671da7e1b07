#include "simulation_charts.hpp"

#include <algorithm>
#include <cmath>

#include <QChart>
#include <QChartView>
#include <QGridLayout>
#include <QLineSeries>
#include <QScatterSeries>
#include <QValueAxis>

#include "chart_util.hpp"
#include "gpuplan/core/format.hpp"

namespace gpuplan::gui::charts {
namespace {
namespace u = gpuplan::units;
void clear(QChart* c) {
  c->removeAllSeries();
  for (auto* a : c->axes()) {
    c->removeAxis(a);
    delete a;
  }
}
QString secs(double s) { return QString::fromStdString(u::format(u::Seconds(s))); }

/// The empirical CDF of sorted samples at nearest rank, F(x_(i)) = (i + 1)/n, at most kMaxCurvePoints of it.
std::vector<QPointF> cdf_of_sorted(const std::vector<double>& v) {
  std::vector<QPointF> out;
  const std::size_t n = v.size();
  if (n == 0) return out;
  const std::size_t m = std::min<std::size_t>(n, SimulationCharts::kMaxCurvePoints);
  out.reserve(m);
  for (std::size_t k = 1; k <= m; ++k) {
    const std::size_t i = (k * n + m - 1) / m - 1;  // ceil(k·n/m) − 1: the last rank always included
    out.emplace_back(v[i], double(i + 1) / double(n));
  }
  return out;
}

/// The CDF of a histogram of (value, count) buckets in ascending value.
std::vector<QPointF> cdf_of_buckets(const std::vector<std::pair<double, std::int64_t>>& b) {
  std::int64_t n = 0;
  for (const auto& x : b) n += x.second;
  std::vector<QPointF> all;
  if (n == 0) return all;
  all.reserve(b.size());
  std::int64_t seen = 0;
  for (const auto& x : b) {
    seen += x.second;
    all.emplace_back(x.first, double(seen) / double(n));
  }
  if (all.size() <= std::size_t(SimulationCharts::kMaxCurvePoints)) return all;
  std::vector<QPointF> out;
  const std::size_t m = SimulationCharts::kMaxCurvePoints;
  for (std::size_t k = 1; k <= m; ++k) out.push_back(all[(k * all.size() + m - 1) / m - 1]);
  return out;
}
}  // namespace

SimulationCharts::SimulationCharts(QWidget* parent) : QWidget(parent), series_chart_(new QChart) {
  static const char* const titles[] = {"TTFT", "ITL", "E2E"};
  auto* g = new QGridLayout(this);
  g->setContentsMargins(0, 0, 0, 0);
  for (int d = 0; d < kDistCount; ++d) {
    dist_charts_[d] = new QChart;
    dist_views_[d] = make_view(dist_charts_[d], tr(titles[d]), this);
    dist_views_[d]->setMinimumSize(260, 220);
  }
  series_view_ = make_view(series_chart_, tr("Time series"), this);
  series_view_->setMinimumSize(260, 220);
  g->addWidget(dist_views_[kTtft], 0, 0);
  g->addWidget(dist_views_[kItl], 0, 1);
  g->addWidget(dist_views_[kE2e], 1, 0);
  g->addWidget(series_view_, 1, 1);
}

void SimulationCharts::setDistribution(Dist d, const QString& title, const std::vector<QPointF>& cdf_s,
                                       const model::LatencyStats& st) {
  QChart* c = dist_charts_[d];
  clear(c);
  c->setTitle(title);
  if (cdf_s.empty()) return;
  // Milliseconds below 2 s at p99, seconds above.
  const double k = st.p99 < 2.0 ? 1e3 : 1.0;
  scale_[d] = k;
  auto* x = new QValueAxis;
  x->setTitleText(k == 1e3 ? tr("milliseconds") : tr("seconds"));
  x->setLabelFormat("%g");
  auto* y = new QValueAxis;
  y->setTitleText(tr("fraction ≤ x"));
  y->setRange(0, 1);
  y->setLabelFormat("%.1f");
  c->addAxis(x, Qt::AlignBottom);
  c->addAxis(y, Qt::AlignLeft);
  auto* line = new QLineSeries;
  line->setName(tr("CDF"));
  line->setPen(QPen(series_colour(0), 2.0));
  // A step at each point: the CDF holds its value up to the next sample.
  double prev_y = 0;
  for (const auto& p : cdf_s) {
    line->append(p.x() * k, prev_y);
    line->append(p.x() * k, p.y());
    prev_y = p.y();
  }
  c->addSeries(line);
  line->attachAxis(x);
  line->attachAxis(y);
  connect(line, &QLineSeries::hovered, this, [k](const QPointF& p, bool on) {
    if (on) show_tip(QString("%1 of samples ≤ %2").arg(p.y(), 0, 'f', 3).arg(secs(p.x() / k)));
  });
  const struct {
    const char* name;
    double q, v;
    int colour;
  } marks[] = {{"p50", 0.50, st.p50, 4}, {"p90", 0.90, st.p90, 1}, {"p99", 0.99, st.p99, 2}};
  for (const auto& m : marks) {
    auto* s = new QScatterSeries;
    s->setName(QString("%1 %2").arg(m.name, secs(m.v)));
    s->setMarkerSize(10);
    s->setColor(series_colour(m.colour));
    s->setBorderColor(series_colour(m.colour).darker(140));
    s->append(m.v * k, m.q);
    c->addSeries(s);
    s->attachAxis(x);
    s->attachAxis(y);
  }
  const double lo = cdf_s.front().x() * k, hi = std::max(cdf_s.back().x(), st.max) * k;
  const double pad = std::max(1e-9, 0.04 * (hi - lo));
  x->setRange(std::max(0.0, lo - pad), hi + pad);
  x->applyNiceNumbers();
  line_legend_markers(c);  // a line's marker in its own pen (issue 29)
}

void SimulationCharts::setResult(const SimulationResult& r) {
  clear(series_chart_);
  if (!r.valid) {
    for (int d = 0; d < kDistCount; ++d) clear(dist_charts_[d]);
    dist_charts_[kTtft]->setTitle(tr("TTFT — no simulation (see the status line)"));
    dist_charts_[kItl]->setTitle(tr("ITL"));
    dist_charts_[kE2e]->setTitle(tr("E2E"));
    series_chart_->setTitle(tr("Time series"));
    return;
  }
  const auto& s = r.sim;
  setDistribution(kTtft, tr("TTFT: %1 requests, queueing included").arg(s.ttft.samples),
                  cdf_of_sorted(s.samples.ttft), s.ttft);
  setDistribution(kItl, tr("ITL: %1 token gaps").arg(s.itl.samples), cdf_of_buckets(s.samples.itl), s.itl);
  setDistribution(kE2e, tr("E2E: arrival to last token"), cdf_of_sorted(s.samples.e2e), s.e2e);

  series_chart_->setTitle(tr("Replica over simulated time (every %1)").arg(secs(r.series_interval_s)));
  auto* x = new QValueAxis;
  x->setTitleText(tr("simulated seconds"));
  x->setLabelFormat("%g");
  auto* y = new QValueAxis;
  y->setTitleText(tr("sequences"));
  y->setLabelFormat("%g");
  auto* ky = new QValueAxis;
  ky->setTitleText(tr("KV in use (%)"));
  ky->setRange(0, 100);
  ky->setLabelFormat("%g");
  series_chart_->addAxis(x, Qt::AlignBottom);
  series_chart_->addAxis(y, Qt::AlignLeft);
  series_chart_->addAxis(ky, Qt::AlignRight);
  auto* running = new QLineSeries;
  running->setName(tr("running (batch)"));
  running->setPen(QPen(series_colour(0), 2.0));
  auto* waiting = new QLineSeries;
  waiting->setName(tr("waiting (queue)"));
  waiting->setPen(QPen(series_colour(2), 2.0));
  auto* kv = new QLineSeries;
  kv->setName(tr("KV in use"));
  QPen kp(series_colour(4), 1.5);
  kp.setStyle(Qt::DashLine);
  kv->setPen(kp);
  double ymax = 1, tmax = 0;
  const std::size_t stride = (s.series.size() + kMaxSeriesPoints - 1) / kMaxSeriesPoints;
  for (std::size_t i = 0; i < s.series.size(); i += std::max<std::size_t>(1, stride)) {
    const auto& p = s.series[i];
    running->append(p.t_s, double(p.running));
    waiting->append(p.t_s, double(p.waiting));
    kv->append(p.t_s, 100.0 * p.kv_utilisation);
  }
  for (const auto& p : s.series) {
    ymax = std::max({ymax, double(p.running), double(p.waiting)});
    tmax = std::max(tmax, p.t_s);
  }
  for (auto* l : {running, waiting}) {
    series_chart_->addSeries(l);
    l->attachAxis(x);
    l->attachAxis(y);
  }
  series_chart_->addSeries(kv);
  kv->attachAxis(x);
  kv->attachAxis(ky);
  auto tip = [](const QString& what, const QString& unit) {
    return [what, unit](const QPointF& p, bool on) {
      if (on) show_tip(QString("t = %1 s: %2 %3%4").arg(p.x(), 0, 'g', 5).arg(what).arg(p.y(), 0, 'g', 4).arg(unit));
    };
  };
  connect(running, &QLineSeries::hovered, this, tip(tr("running"), ""));
  connect(waiting, &QLineSeries::hovered, this, tip(tr("waiting"), ""));
  connect(kv, &QLineSeries::hovered, this, tip(tr("KV in use"), "%"));
  x->setRange(0, std::max(tmax, r.series_interval_s));
  x->applyNiceNumbers();
  y->setRange(0, ymax * 1.05);
  y->applyNiceNumbers();
  line_legend_markers(series_chart_);  // the dashed KV line is told from the solid ones (issue 29)
}

std::vector<QPointF> SimulationCharts::markers(Dist d) const {
  std::vector<QPointF> out;
  for (auto* s : dist_charts_[d]->series())
    if (auto* sc = qobject_cast<QScatterSeries*>(s))
      for (const auto& p : sc->points()) out.emplace_back(p.x() / scale_[d], p.y());
  return out;
}

std::vector<QPointF> SimulationCharts::curve(Dist d) const {
  std::vector<QPointF> out;
  for (auto* s : dist_charts_[d]->series())
    if (qobject_cast<QScatterSeries*>(s) == nullptr)
      if (auto* l = qobject_cast<QLineSeries*>(s))
        for (const auto& p : l->points()) out.emplace_back(p.x() / scale_[d], p.y());
  return out;
}

std::vector<QPointF> SimulationCharts::series(int which) const {
  std::vector<QPointF> out;
  const auto all = series_chart_->series();
  if (which < 0 || which >= all.size()) return out;
  if (auto* l = qobject_cast<QLineSeries*>(all[which]))
    for (const auto& p : l->points()) out.push_back(p);
  return out;
}

}  // namespace gpuplan::gui::charts
