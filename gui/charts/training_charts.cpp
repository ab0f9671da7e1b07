#include "training_charts.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include <QBarCategoryAxis>
#include <QBarSet>
#include <QChart>
#include <QChartView>
#include <QHBoxLayout>
#include <QHorizontalStackedBarSeries>
#include <QLegendMarker>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QStackedBarSeries>
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

QWidget* wrap(QWidget* self, QChartView* v) {
  auto* l = new QVBoxLayout(self);
  l->setContentsMargins(0, 0, 0, 0);
  l->addWidget(v);
  return self;
}

void hide_legend_of(QChart* c, QAbstractSeries* s) {
  for (auto* m : c->legend()->markers(s)) m->setVisible(false);
}


}  // namespace

// ------------------------------------------------------------------------------------------------------------------
// Memory
// ------------------------------------------------------------------------------------------------------------------

MemoryChart::MemoryChart(QWidget* parent) : QWidget(parent), chart_(new QChart) {
  view_ = make_view(chart_, tr("Memory per GPU (heaviest pipeline stage)"), this);
  chart_->legend()->setAlignment(Qt::AlignRight);  // nine parts: a column keeps every name whole
  wrap(this, view_);
}

void MemoryChart::setResult(const TrainingResult& r) {
  clear(chart_);
  struct Part {
    const char* label;
    const char* id;
    u::Bytes model::TrainingMemory::*field;
    int colour;
  };
  static const Part parts[] = {
      {"weights", "memory.weights", &model::TrainingMemory::weights, 0},
      {"gradients", "memory.gradients", &model::TrainingMemory::gradients, 1},
      {"master weights", "memory.master_weights", &model::TrainingMemory::master_weights, 6},
      {"optimizer states", "memory.optimizer_states", &model::TrainingMemory::optimizer_states, 2},
      {"activations", "memory.activations", &model::TrainingMemory::activations, 4},
      {"logits / loss", "memory.logits", &model::TrainingMemory::logits, 5},
      {"CUDA context", "memory.cuda_context", &model::TrainingMemory::cuda_context, 9},
      {"NCCL buffers", "memory.nccl", &model::TrainingMemory::nccl_buffers, 8},
      {"fragmentation", "memory.fragmentation", &model::TrainingMemory::fragmentation, 7},
  };
  std::vector<const GpuEvaluation*> shown;
  for (const auto& g : r.gpus_evaluated)
    if (g.est.memory.capacity.raw() > 0) shown.push_back(&g);
  bars_ = int(shown.size());
  if (shown.empty()) {
    chart_->setTitle(tr("Memory per GPU — no estimate (see the status area)"));
    return;
  }
  chart_->setTitle(tr("Memory per GPU (heaviest pipeline stage) vs HBM capacity"));
  auto* series = new QStackedBarSeries;
  series->setBarWidth(0.55);
  double ymax = 0;
  for (const auto& p : parts) {
    auto* set = new QBarSet(p.label);
    set->setColor(series_colour(p.colour));
    set->setBorderColor(series_colour(p.colour).darker(120));
    for (const auto* g : shown) set->append(u::to_GiB(g->est.memory.*(p.field)));
    const std::string id = p.id;
    const std::string label = p.label;
    std::vector<std::string> values;
    for (const auto* g : shown)
      values.push_back(g->gpu_name + ": " + label + " " + u::format(g->est.memory.*(p.field), u::BytePrefix::binary) +
                       "\npeak " + u::format(g->est.memory.total, u::BytePrefix::binary) + " of " +
                       u::format(g->est.memory.capacity, u::BytePrefix::binary));
    connect(set, &QBarSet::hovered, this, [values](bool on, int i) {
      if (on && i >= 0 && i < int(values.size())) show_tip(q(values[std::size_t(i)]) + tr("\n(click: explain)"));
    });
    connect(set, &QBarSet::clicked, this, [this, id](int) { emit derivationRequested(q(id)); });
    series->append(set);
  }
  QStringList cats;
  for (const auto* g : shown) {
    const auto& m = g->est.memory;
    ymax = std::max({ymax, u::to_GiB(m.total), u::to_GiB(m.capacity)});
    // Short labels: Qt elides a category label wider than its bar slot; the numbers are in the tooltips and the
    // summary above the chart.
    cats << short_gpu_name(g->gpu_name) + (m.fits ? QString() : tr(" ✗ does not fit"));
  }
  chart_->addSeries(series);
  auto* x = new QBarCategoryAxis;
  x->append(cats);
  auto* y = new QValueAxis;
  y->setTitleText(tr("GiB per GPU"));
  y->setRange(0, ymax * 1.08);
  y->applyNiceNumbers();
  y->setLabelFormat("%.0f");
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  series->attachAxis(x);
  series->attachAxis(y);
  // The HBM capacity of each GPU as a short line over its bar.
  auto* hx = new QValueAxis;
  hx->setRange(-0.5, double(shown.size()) - 0.5);
  hx->setVisible(false);
  chart_->addAxis(hx, Qt::AlignBottom);
  for (std::size_t i = 0; i < shown.size(); ++i) {
    auto* line = new QLineSeries;
    line->setName(tr("HBM capacity"));
    QPen pen(Qt::black);
    pen.setWidthF(2.5);
    pen.setStyle(Qt::DashLine);
    line->setPen(pen);
    const double cap = u::to_GiB(shown[i]->est.memory.capacity);
    line->append(double(i) - 0.42, cap);
    line->append(double(i) + 0.42, cap);
    chart_->addSeries(line);
    line->attachAxis(hx);
    line->attachAxis(y);
    if (i > 0) hide_legend_of(chart_, line);
  }
  line_legend_markers(chart_);
}

// ------------------------------------------------------------------------------------------------------------------
// Step time
// ------------------------------------------------------------------------------------------------------------------

StepChart::StepChart(QWidget* parent) : QWidget(parent), chart_(new QChart) {
  view_ = make_view(chart_, tr("Step time"), this);
  chart_->legend()->setAlignment(Qt::AlignRight);
  wrap(this, view_);
}

void StepChart::setResult(const TrainingResult& r) {
  clear(chart_);
  std::vector<const GpuEvaluation*> shown;
  for (const auto& g : r.gpus_evaluated)
    if (g.est.step_time.raw() > 0) shown.push_back(&g);
  if (shown.empty()) {
    chart_->setTitle(tr("Step time — no estimate (see the status area)"));
    return;
  }
  // Horizontal bars stack bottom-up: reversed, the scenario's own GPU is the top bar.
  std::reverse(shown.begin(), shown.end());
  double tmax = 0;
  for (const auto* g : shown) tmax = std::max(tmax, g->est.step_time.raw());
  const bool ms = tmax < 1.0;
  const double scale = ms ? 1e3 : 1.0;
  chart_->setTitle(tr("Step time on the critical path (compute, exposed communication, bubble, optimizer) and MFU"));
  struct Part {
    QString label;
    QString id;
    std::function<u::Seconds(const model::TrainingEstimate&)> get;
    int colour;
  };
  std::vector<Part> parts = {
      {tr("GEMM"), "train.compute", [](const model::TrainingEstimate& e) { return e.step.gemm; }, 0},
      {tr("attention"), "train.compute", [](const model::TrainingEstimate& e) { return e.step.attention; }, 10},
      {tr("elementwise"), "train.compute", [](const model::TrainingEstimate& e) { return e.step.elementwise; }, 3},
      {tr("embedding, head, loss"), "train.compute", [](const model::TrainingEstimate& e) { return e.step.embedding_loss; }, 9},
  };
  bool moe_host = false;
  for (const auto* g : shown) moe_host = moe_host || g->est.step.moe_host.raw() > 0;
  if (moe_host)
    parts.push_back({tr("MoE host syncs"), "train.moe", [](const model::TrainingEstimate& e) { return e.step.moe_host; }, 11});
  int colour = 1;
  for (const char* kind : {"tp", "cp", "ep", "pp", "dp", "fsdp"}) {
    bool any = false;
    for (const auto* g : shown)
      for (const auto& c : g->est.comm)
        if (c.kind == kind && c.group_size > 1 && c.exposed.raw() > 0) any = true;
    if (!any) continue;
    const std::string k = kind;
    parts.push_back({QString("%1 comm").arg(q(k).toUpper()), "train.comm",
                     [k](const model::TrainingEstimate& e) {
                       for (const auto& c : e.comm)
                         if (c.kind == k) return c.exposed;
                       return u::Seconds{};
                     },
                     colour == 1 ? 1 : colour == 2 ? 2 : colour == 3 ? 5 : colour == 4 ? 7 : 8});
    ++colour;
  }
  parts.push_back({tr("pipeline bubble"), "train.bubble", [](const model::TrainingEstimate& e) { return e.step.bubble; }, 6});
  parts.push_back({tr("optimizer"), "train.optimizer", [](const model::TrainingEstimate& e) { return e.step.optimizer; }, 4});

  auto* series = new QHorizontalStackedBarSeries;
  series->setBarWidth(0.6);
  for (const auto& p : parts) {
    auto* set = new QBarSet(p.label);
    set->setColor(series_colour(p.colour));
    set->setBorderColor(series_colour(p.colour).darker(120));
    std::vector<QString> tips;
    for (const auto* g : shown) {
      const u::Seconds t = p.get(g->est);
      set->append(t.raw() * scale);
      tips.push_back(QString("%1: %2 %3 (%4 of the step)")
                         .arg(q(g->gpu_name), p.label, q(u::format(t)), q(u::format(u::Ratio(t / g->est.step_time)))));
    }
    connect(set, &QBarSet::hovered, this, [tips](bool on, int i) {
      if (on && i >= 0 && i < int(tips.size())) show_tip(tips[std::size_t(i)] + tr("\n(click: explain)"));
    });
    const QString id = p.id;
    connect(set, &QBarSet::clicked, this, [this, id](int) { emit derivationRequested(id); });
    series->append(set);
  }
  QStringList cats;
  for (const auto* g : shown)
    cats << QString("%1 — %2, MFU %3").arg(short_gpu_name(g->gpu_name), q(u::format(g->est.step_time)),
                                           q(u::format(u::Ratio(g->est.mfu))));
  chart_->addSeries(series);
  auto* y = new QBarCategoryAxis;
  y->append(cats);
  auto* x = new QValueAxis;
  x->setTitleText(ms ? tr("milliseconds per step") : tr("seconds per step"));
  x->setRange(0, tmax * scale * 1.05);
  x->applyNiceNumbers();
  chart_->addAxis(y, Qt::AlignLeft);
  chart_->addAxis(x, Qt::AlignBottom);
  series->attachAxis(x);
  series->attachAxis(y);
}

// ------------------------------------------------------------------------------------------------------------------
// Roofline
// ------------------------------------------------------------------------------------------------------------------

RooflineChart::RooflineChart(QWidget* parent) : QWidget(parent), chart_(new QChart) {
  view_ = make_view(chart_, tr("Roofline"), this);
  chart_->legend()->setAlignment(Qt::AlignRight);
  wrap(this, view_);
}

void RooflineChart::setResult(const TrainingResult& r) {
  clear(chart_);
  points_ = 0;
  if (r.rooflines.empty()) {
    chart_->setTitle(tr("Roofline — no estimate (see the status area)"));
    return;
  }
  const auto prec = q(std::string(hw::to_string(r.plan.precision.compute)));
  chart_->setTitle(tr("Roofline (%1): one layer's ops on %2 (forward + backward) over each GPU's datasheet roof")
                       .arg(prec, r.gpus_evaluated.empty() ? QString() : short_gpu_name(r.gpus_evaluated[0].gpu_name)));
  auto* x = new QLogValueAxis;
  x->setBase(10);
  x->setTitleText(tr("arithmetic intensity (FLOP/B)"));
  x->setLabelFormat("%g");
  x->setMinorTickCount(-1);
  auto* y = new QLogValueAxis;
  y->setBase(10);
  y->setTitleText(tr("attainable TFLOP/s"));
  y->setLabelFormat("%g");
  y->setMinorTickCount(-1);
  chart_->addAxis(x, Qt::AlignBottom);
  chart_->addAxis(y, Qt::AlignLeft);
  double ymin = std::numeric_limits<double>::max(), ymax = 0;
  int i = 0;
  for (const auto& c : r.rooflines) {
    auto* line = new QLineSeries;
    line->setName(QString("%1\nridge %2 FLOP/B").arg(short_gpu_name(c.gpu_name)).arg(c.ridge_FLOP_per_B, 0, 'f', 0));
    // Roofs in blue, orange, green, yellow: red and purple are kept for the ops.
    static const int roof_colour[] = {0, 1, 4, 5};
    QPen pen(series_colour(roof_colour[i % 4]));
    pen.setWidthF(i == 0 ? 3.0 : 2.0);
    if (i > 0) pen.setStyle(Qt::DashLine);
    line->setPen(pen);
    for (const auto& [xi, yi] : c.points) {
      line->append(xi, yi / 1e12);
      ymin = std::min(ymin, yi / 1e12);
      ymax = std::max(ymax, yi / 1e12);
    }
    chart_->addSeries(line);
    line->attachAxis(x);
    line->attachAxis(y);
    ++i;
  }
  // The ops of one layer (forward + backward, one micro-batch) on the current GPU, coloured by what bounds them.
  if (!r.gpus_evaluated.empty()) {
    const auto& ops = r.gpus_evaluated[0].est.layer_ops;
    struct Group {
      model::Bound bound;
      QString name;
      QColor colour;
      QScatterSeries* s = nullptr;
      std::vector<QString> tips;
    };
    std::vector<Group> groups = {{model::Bound::memory, tr("memory-bound op"), QColor(0x9467bd), nullptr, {}},
                                 {model::Bound::compute, tr("compute-bound op"), QColor(0xd62728), nullptr, {}},
                                 {model::Bound::launch, tr("launch-bound op"), QColor(0x7f7f7f), nullptr, {}}};
    for (auto& g : groups) {
      g.s = new QScatterSeries;
      g.s->setName(g.name);
      g.s->setColor(g.colour);
      g.s->setBorderColor(g.colour.darker(130));
      g.s->setMarkerSize(9);
    }
    for (const auto& op : ops) {
      if (op.flops.raw() <= 0 || op.bytes.raw() <= 0 || op.time.raw() <= 0) continue;
      for (auto& g : groups)
        if (g.bound == op.bound) {
          const double xi = op.intensity().raw(), yi = op.achieved().raw() / 1e12;
          g.s->append(xi, yi);
          ymin = std::min(ymin, yi);
          g.tips.push_back(QString("<b>%1</b> (%2)<br>%3 · %4 · %5<br>intensity %6 · achieved %7<br>%8-bound, η %9")
                               .arg(q(op.name).toHtmlEscaped(), q(model::to_string(op.cls)), q(u::format(op.flops)),
                                    q(u::format(op.bytes)), q(u::format(op.time)), q(u::format(op.intensity())),
                                    q(u::format(op.achieved())), q(model::to_string(op.bound)))
                               .arg(op.efficiency, 0, 'f', 3));
          ++points_;
        }
    }
    for (auto& g : groups) {
      if (g.s->count() == 0) {
        delete g.s;
        continue;
      }
      chart_->addSeries(g.s);
      g.s->attachAxis(x);
      g.s->attachAxis(y);
      auto* s = g.s;
      auto tips = g.tips;
      connect(s, &QScatterSeries::hovered, this, [s, tips](const QPointF& p, bool on) {
        if (!on) return;
        const auto pts = s->points();
        int best = -1;
        double bd = std::numeric_limits<double>::max();
        for (int k = 0; k < pts.size(); ++k) {
          const double d = std::abs(std::log(pts[k].x() / p.x())) + std::abs(std::log(pts[k].y() / p.y()));
          if (d < bd) {
            bd = d;
            best = k;
          }
        }
        if (best >= 0 && best < int(tips.size())) show_tip(tips[std::size_t(best)]);
      });
      connect(s, &QScatterSeries::clicked, this, [this](const QPointF&) { emit derivationRequested("train.layer"); });
    }
  }
  x->setRange(0.1, 1e5);
  y->setRange(std::pow(10.0, std::floor(std::log10(std::max(ymin, 1e-4)))), std::pow(10.0, std::ceil(std::log10(ymax * 1.5))));
  line_legend_markers(chart_);
}

// ------------------------------------------------------------------------------------------------------------------
// Scaling
// ------------------------------------------------------------------------------------------------------------------

ScalingChart::ScalingChart(QWidget* parent) : QWidget(parent), time_chart_(new QChart), eff_chart_(new QChart) {
  time_view_ = make_view(time_chart_, tr("Time to train vs GPUs"), this);
  eff_view_ = make_view(eff_chart_, tr("Scaling efficiency"), this);
  // One above the other: each chart gets the full width, so the legends (one entry per GPU) stay whole.
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(0, 0, 0, 0);
  l->addWidget(time_view_, 3);
  l->addWidget(eff_view_, 2);
}

void ScalingChart::setResult(const TrainingResult& r) {
  clear(time_chart_);
  clear(eff_chart_);
  bool ttt = false;
  for (const auto& s : r.scaling) ttt = ttt || s.time_to_train;
  const bool any = std::any_of(r.scaling.begin(), r.scaling.end(), [](const auto& s) { return !s.samples.empty(); });
  if (!any) {
    time_chart_->setTitle(tr("Scaling — no estimate (see the status area)"));
    eff_chart_->setTitle(tr("Scaling efficiency"));
    return;
  }
  const double unit = ttt ? 86400.0 : 1.0;
  time_chart_->setTitle(ttt ? tr("Time to train vs GPUs (DP sweep, global batch %1)").arg(r.plan.global_batch)
                            : tr("Step time vs GPUs (DP sweep, global batch %1; set Tokens for time to train)")
                                  .arg(r.plan.global_batch));
  eff_chart_->setTitle(tr("Strong-scaling efficiency: ideal time / predicted time, against the smallest GPU count that fits"));
  auto* x = new QLogValueAxis;
  x->setBase(2);
  x->setLabelFormat("%g");
  x->setTitleText(tr("GPUs"));
  x->setMinorTickCount(0);
  auto* y = new QLogValueAxis;
  y->setBase(10);
  y->setLabelFormat("%g");
  y->setTitleText(ttt ? tr("days") : tr("seconds per step"));
  y->setMinorTickCount(-1);
  auto* ex = new QLogValueAxis;
  ex->setBase(2);
  ex->setLabelFormat("%g");
  ex->setTitleText(tr("GPUs"));
  auto* ey = new QValueAxis;
  ey->setRange(0, 100);
  ey->setTickCount(6);
  ey->setLabelFormat("%.0f%%");
  ey->setTitleText(tr("efficiency"));
  time_chart_->addAxis(x, Qt::AlignBottom);
  time_chart_->addAxis(y, Qt::AlignLeft);
  eff_chart_->addAxis(ex, Qt::AlignBottom);
  eff_chart_->addAxis(ey, Qt::AlignLeft);
  double xmin = std::numeric_limits<double>::max(), xmax = 0, ymin = std::numeric_limits<double>::max(), ymax = 0;
  int i = 0;
  for (const auto& s : r.scaling) {
    if (s.samples.empty()) {
      ++i;
      continue;
    }
    const QColor col = series_colour(i == 0 ? 0 : i + 1 == 2 ? 2 : i + 2);
    auto* pred = new QLineSeries;
    pred->setName(short_gpu_name(s.gpu_name));
    pred->setPen(QPen(col, 2.5));
    pred->setPointsVisible(true);
    auto* ideal = new QLineSeries;
    ideal->setName(tr("ideal (linear, dashed)"));
    QPen ip(col, 1.5);
    ip.setStyle(Qt::DashLine);
    ideal->setPen(ip);
    auto* eff = new QLineSeries;
    eff->setName(short_gpu_name(s.gpu_name));
    eff->setPen(QPen(col, 2.5));
    eff->setPointsVisible(true);
    auto* nofit = new QScatterSeries;
    nofit->setName(tr("does not fit in memory"));
    nofit->setMarkerShape(QScatterSeries::MarkerShapeRectangle);
    nofit->setMarkerSize(11);
    nofit->setColor(Qt::white);
    nofit->setBorderColor(Qt::red);
    for (const auto& p : s.samples) {
      const double g = double(p.gpus);
      pred->append(g, p.time_to_train_s / unit);
      ideal->append(g, p.ideal_time_s / unit);
      eff->append(g, p.efficiency * 100.0);
      if (!p.fits) nofit->append(g, p.time_to_train_s / unit);
      xmin = std::min(xmin, g);
      xmax = std::max(xmax, g);
      ymin = std::min({ymin, p.time_to_train_s / unit, p.ideal_time_s / unit});
      ymax = std::max({ymax, p.time_to_train_s / unit, p.ideal_time_s / unit});
    }
    for (auto* ser : {pred, ideal}) {
      time_chart_->addSeries(ser);
      ser->attachAxis(x);
      ser->attachAxis(y);
    }
    if (i > 0) hide_legend_of(time_chart_, ideal);
    if (nofit->count() > 0) {
      time_chart_->addSeries(nofit);
      nofit->attachAxis(x);
      nofit->attachAxis(y);
      if (i > 0) hide_legend_of(time_chart_, nofit);
    } else {
      delete nofit;
    }
    eff_chart_->addSeries(eff);
    eff->attachAxis(ex);
    eff->attachAxis(ey);
    ++i;
  }
  // The scenario itself.
  if (r.gpus > 0 && !r.scaling.empty() && !r.gpus_evaluated.empty() && r.gpus_evaluated[0].est.step_time.raw() > 0) {
    const auto& e = r.gpus_evaluated[0].est;
    auto* now = new QScatterSeries;
    now->setName(tr("this scenario"));
    now->setMarkerSize(14);
    now->setColor(Qt::black);
    now->setBorderColor(Qt::white);
    now->append(double(r.gpus), (e.time_to_train ? e.time_to_train->raw() : e.step_time.raw()) / unit);
    time_chart_->addSeries(now);
    now->attachAxis(x);
    now->attachAxis(y);
  }
  x->setRange(xmin / 1.4, xmax * 1.4);
  ex->setRange(xmin / 1.4, xmax * 1.4);
  y->setRange(std::pow(10.0, std::floor(std::log10(ymin))), std::pow(10.0, std::ceil(std::log10(ymax))));
  line_legend_markers(time_chart_);
  line_legend_markers(eff_chart_);
}

}  // namespace gpuplan::gui::charts
