#include "simulation_page.hpp"

#include <algorithm>
#include <cmath>

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSlider>
#include <QSpinBox>
#include <QTableView>
#include <QVBoxLayout>

#include "field_widgets.hpp"
#include "gpuplan/core/format.hpp"
#include "job_controller.hpp"
#include "sim_stats_model.hpp"
#include "simulation_charts.hpp"

namespace gpuplan::gui {
namespace {
namespace u = gpuplan::units;
QString q(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }
QString num(double v, int digits = 3) { return q(u::format_number(v, digits)); }
/// `gpuplan simulate`'s row of `key` (wl_io::simulate_fields): the control's label and tooltip.
const wl_io::ScenarioField& sim(const char* key) { return field_row(wl_io::simulate_fields(), key); }
}  // namespace

double SimulationPage::rateAt(int p) { return kMinRate * std::pow(10.0, double(p) / kStepsPerDecade); }
int SimulationPage::positionOf(double rate) {
  return int(std::lround(kStepsPerDecade * std::log10(std::clamp(rate, kMinRate, kMaxRate) / kMinRate)));
}

SimulationPage::SimulationPage(std::shared_ptr<const AppData> app_data, QWidget* parent)
    : QWidget(parent), data_(std::move(app_data)) {
  jobs_ = new JobController(this);
  const SimulationRequest defaults;
  rate_slider_ = new QSlider(Qt::Horizontal);
  rate_slider_->setRange(0, positionOf(kMaxRate));
  rate_slider_->setValue(positionOf(defaults.rate));
  rate_slider_->setToolTip(tr("Arrival rate (logarithmic, %1 to %2 requests/s): the simulation re-runs as it moves")
                               .arg(kMinRate)
                               .arg(kMaxRate));
  rate_ = new QDoubleSpinBox;
  rate_->setRange(kMinRate, kMaxRate);
  rate_->setDecimals(3);
  rate_->setValue(defaults.rate);
  rate_->setSuffix(tr(" req/s"));
  rate_->setKeyboardTracking(false);
  rate_->setToolTip(tr("Mean arrival rate, requests per second (open loop)"));
  arrival_ = new QComboBox;
  arrival_->addItem(tr("Poisson"), "poisson");
  arrival_->addItem(tr("Bursty (Gamma gaps)"), "gamma");
  keyed(arrival_, sim("arrival"), tr("Poisson: exponential gaps; Gamma: gaps of coefficient of variation CV (> 1: "
                                     "bursts, as BurstGPT fits its traces)"));
  cv_ = new QDoubleSpinBox;
  cv_->setRange(0.1, 20);
  cv_->setDecimals(2);
  cv_->setSingleStep(0.25);
  cv_->setValue(defaults.cv);
  cv_->setKeyboardTracking(false);
  keyed(cv_, sim("cv"));
  cv_->setEnabled(false);
  requests_ = new QSpinBox;
  requests_->setRange(10, int(kMaxSimulatedRequests));
  requests_->setSingleStep(500);
  requests_->setValue(int(defaults.requests));
  requests_->setKeyboardTracking(false);
  keyed(requests_, sim("requests"), tr("Here at most %1, so that the slider stays live").arg(kMaxSimulatedRequests));
  seed_ = new QSpinBox;
  seed_->setRange(0, 1'000'000);
  seed_->setValue(int(defaults.seed));
  seed_->setKeyboardTracking(false);
  keyed(seed_, sim("seed"), tr("The same seed gives the same requests"));

  batching_ = new QComboBox;
  batching_->addItem(tr("continuous"), "continuous");
  batching_->addItem(tr("static"), "static");
  keyed(batching_, sim("batching"), tr("The other policy is simulated too, on the same requests and KV memory: the "
                                       "summary compares them."));
  static_batch_ = new QSpinBox;
  static_batch_->setRange(1, 4096);
  static_batch_->setValue(int(defaults.static_batch));
  static_batch_->setPrefix(tr("B "));
  static_batch_->setKeyboardTracking(false);
  keyed(static_batch_, sim("static_batch"));
  timeout_ = new QDoubleSpinBox;
  timeout_->setRange(0, 3600);
  timeout_->setDecimals(3);
  timeout_->setValue(defaults.static_timeout_s);
  timeout_->setSuffix(tr(" s"));
  timeout_->setKeyboardTracking(false);
  keyed(timeout_, sim("batch_timeout_s"));

  auto* controls = new QHBoxLayout;
  controls->addWidget(new QLabel(tr("Rate")));
  controls->addWidget(rate_slider_, 3);
  controls->addWidget(rate_);
  controls->addWidget(field_label(sim("batching")));
  controls->addWidget(batching_);
  controls->addWidget(static_batch_);
  controls->addWidget(timeout_);
  controls->addSpacing(8);
  controls->addWidget(field_label(sim("arrival")));
  controls->addWidget(arrival_);
  controls->addWidget(field_label(sim("cv")));
  controls->addWidget(cv_);
  controls->addWidget(field_label(sim("requests")));
  controls->addWidget(requests_);
  controls->addWidget(field_label(sim("seed")));
  controls->addWidget(seed_);

  summary_ = new QLabel;
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);
  status_ = new QLabel;
  status_->setTextFormat(Qt::RichText);
  status_->setWordWrap(true);
  status_->setVisible(false);
  stats_ = new SimStatsModel(this);
  table_ = new QTableView;
  table_->setModel(stats_);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionMode(QAbstractItemView::NoSelection);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  // Four rows, always whole: a fixed row height and the table exactly that tall.
  const int row_h = table_->fontMetrics().height() + 6;
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  table_->verticalHeader()->setDefaultSectionSize(row_h);
  table_->setFixedHeight(table_->horizontalHeader()->sizeHint().height() + SimStatsModel::kRowCount * row_h +
                         2 * table_->frameWidth() + 2);
  table_->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  table_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  charts_ = new charts::SimulationCharts;

  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(4, 4, 4, 4);
  l->addLayout(controls);
  l->addWidget(summary_);
  l->addWidget(status_);
  l->addWidget(table_);
  l->addWidget(charts_, 1);

  // The slider moves the spin box (the request's rate); the spin box, typed in, moves the slider.
  connect(rate_slider_, &QSlider::valueChanged, this, [this](int p) { rate_->setValue(rateAt(p)); });
  connect(rate_, &QDoubleSpinBox::valueChanged, this, [this](double v) {
    const QSignalBlocker b(rate_slider_);
    rate_slider_->setValue(positionOf(v));
    changed();
  });
  connect(arrival_, &QComboBox::currentIndexChanged, this, [this] {
    cv_->setEnabled(arrival_->currentData().toString() == "gamma");
    changed();
  });
  connect(cv_, &QDoubleSpinBox::valueChanged, this, &SimulationPage::changed);
  connect(batching_, &QComboBox::currentIndexChanged, this, &SimulationPage::changed);
  connect(static_batch_, &QSpinBox::valueChanged, this, &SimulationPage::changed);
  connect(timeout_, &QDoubleSpinBox::valueChanged, this, &SimulationPage::changed);
  for (auto* s : {requests_, seed_}) connect(s, &QSpinBox::valueChanged, this, &SimulationPage::changed);
  auto* busy = new QLabel(tr("<i>simulating…</i>"));
  busy->setVisible(false);
  controls->addWidget(busy);
  connect(jobs_, &JobController::busyChanged, busy, &QLabel::setVisible);
  summary_->setText(tr("<i>The replica of the serving page above, simulated request by request.</i>"));
}

void SimulationPage::setServing(const ServingRequest& r) {
  // Only what the simulation reads: the planner's batch, rate and SLA edited above leave it as it is.
  const auto& o = serving_;
  const bool same = has_serving_ && r.model == o.model && r.gpu == o.gpu && r.tp == o.tp &&
                    r.weight_dtype == o.weight_dtype && r.kv_dtype == o.kv_dtype && r.prompt_tokens == o.prompt_tokens &&
                    r.output_tokens == o.output_tokens && r.calibration == o.calibration;
  serving_ = r;
  has_serving_ = true;
  if (!same) changed();
}

void SimulationPage::changed() {
  stale_ = true;
  if (isVisible()) run();
}

void SimulationPage::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (stale_) run();
}

bool SimulationPage::idle() const { return !jobs_->busy() && !(stale_ && isVisible()); }

SimulationRequest SimulationPage::request() const {
  SimulationRequest r;
  r.serving = serving_;
  r.rate = rate_->value();
  r.gamma = arrival_->currentData().toString() == "gamma";
  r.cv = cv_->value();
  r.requests = requests_->value();
  r.seed = std::uint64_t(seed_->value());
  r.batching = batching_->currentData().toString() == "static" ? model::Batching::static_ : model::Batching::continuous;
  r.static_batch = static_batch_->value();
  r.static_timeout_s = timeout_->value();
  return r;
}

void SimulationPage::run() {
  stale_ = false;
  clock_.start();
  auto shared = data_;
  const SimulationRequest req = request();
  jobs_->submit<SimulationResult>([shared, req] { return evaluate_simulation(*shared, req); },
                                  [this](SimulationResult& r) { setResult(r); });
}

void SimulationPage::setResult(SimulationResult& r) {
  last_ = std::move(r);
  has_result_ = true;
  const auto& res = last_;
  QString st;
  for (const auto& d : res.diags.items()) {
    if (d.severity == Severity::note) continue;  // the resolution's notes: the serving page above shows them
    const char* colour = d.severity == Severity::error ? "#b00020" : d.severity == Severity::warning ? "#a05a00" : "gray";
    st += QString("<span style='color:%1'>%2</span><br>").arg(colour, q(d.to_string()));
  }
  for (const auto& n : res.sim.notes) st += "<span style='color:#a05a00'>" + q(n) + "</span><br>";
  status_->setText(st);
  status_->setVisible(!st.isEmpty());
  charts_->setResult(res);
  if (!res.valid) {
    stats_->clear();
    summary_->setText(tr("<span style='color:#b00020'><b>No simulation</b></span>"));
    emit simulated();
    return;
  }
  stats_->setResult(res.sim);
  const auto& s = res.sim;
  const auto& rq = res.request;
  const QString arrivals = rq.gamma ? tr("bursty Gamma arrivals (CV %1)").arg(rq.cv) : tr("Poisson arrivals");
  const double busy = s.duration_s > 0 ? 100.0 * s.busy_s / s.duration_s : 0.0;
  summary_->setText(
      tr("<b>%1 on %2, TP %3</b> — prompt %4, output %5 tokens · %6 at <b>%7 req/s</b>, %8 requests, seed %9"
         "<br>engine: token budget %10, max %11 sequences, %12 KV blocks of %13 tokens"
         "<br><b>%14 of %15 completed</b> in %16 simulated · throughput <b>%17 req/s</b>, %18 output tok/s · "
         "mean batch %19 · KV utilisation <b>%20% mean, %21% peak</b> · <b>%22 preemptions</b> · busy %23% · "
         "%24 iterations <span style='color:gray'>(simulated in %25 ms)</span>")
          .arg(q(res.model_name), q(res.gpu_name))
          .arg(rq.serving.tp)
          .arg(rq.serving.prompt_tokens)
          .arg(rq.serving.output_tokens)
          .arg(arrivals, num(rq.rate, 4))
          .arg(rq.requests)
          .arg(qulonglong(rq.seed))
          .arg(res.max_batched_tokens)
          .arg(res.max_seqs)
          .arg(res.kv_blocks)
          .arg(res.block_size)
          .arg(s.completed)
          .arg(s.requests)
          .arg(q(u::format(u::Seconds(s.duration_s))), num(s.requests_per_s), num(s.output_tokens_per_s, 4),
               num(s.mean_running), num(100 * s.kv_utilisation_mean), num(100 * s.kv_utilisation_peak))
          .arg(s.preemptions)
          .arg(busy, 0, 'f', 1)
          .arg(s.iterations)
          .arg(res.simulate_ms, 0, 'f', 0));
  // Static against continuous on the same requests and KV memory (issue #27 d4).
  const bool is_static = rq.batching == model::Batching::static_;
  const model::SimResult& sr = is_static ? s : res.other;
  const model::SimResult& cr = is_static ? res.other : s;
  summary_->setText(
      summary_->text() +
      tr("<br><b>static</b> (B %1, timeout %2 s): %3 output tok/s, queue p50 %4, TTFT p50 %5 / p99 %6, %7 batches of "
         "%8, %9% padding · <b>continuous</b>: %10 output tok/s, queue p50 %11, TTFT p50 %12 / p99 %13")
          .arg(rq.static_batch)
          .arg(num(rq.static_timeout_s))
          .arg(num(sr.output_tokens_per_s, 4), q(u::format(u::Seconds(sr.queue.p50))),
               q(u::format(u::Seconds(sr.ttft.p50))), q(u::format(u::Seconds(sr.ttft.p99))))
          .arg(sr.batches)
          .arg(num(sr.mean_batch))
          .arg(num(100 * sr.padding_fraction))
          .arg(num(cr.output_tokens_per_s, 4), q(u::format(u::Seconds(cr.queue.p50))),
               q(u::format(u::Seconds(cr.ttft.p50))), q(u::format(u::Seconds(cr.ttft.p99)))));
  summary_->setToolTip(tr("updated %1 ms after the last change").arg(clock_.elapsed()));
  emit simulated();
}

}  // namespace gpuplan::gui
