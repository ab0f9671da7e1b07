#include "serving_page.hpp"

#include <algorithm>
#include <cassert>
#include <limits>

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QTabWidget>
#include <QGridLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>

#include "gpuplan/core/format.hpp"
#include "field_widgets.hpp"
#include "gpuplan/wl_io/scenario_fields.hpp"
#include "model_list.hpp"
#include "serving_charts.hpp"

namespace gpuplan::gui {
namespace {
namespace u = gpuplan::units;
QString q(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }
/// The serving field table's row of `key` (wl_io::serving_fields): the widget's label, tooltip, range and choices.
const wl_io::ScenarioField& field(const char* key) { return field_row(wl_io::serving_fields(), key); }
/// A spin box over the key's range (the table's; the page's own where the table has none).
QSpinBox* spin(const char* key, int lo, int hi, int v) {
  const auto& f = field(key);
  auto* s = new QSpinBox;
  if (f.spec.min != 0.0 || f.spec.max != 0.0) {
    lo = static_cast<int>(f.spec.min);
    hi = static_cast<int>(std::min(f.spec.max, double(std::numeric_limits<int>::max())));
  }
  s->setRange(lo, hi);
  s->setValue(v);
  keyed(s, f);
  s->setKeyboardTracking(false);
  return s;
}
QDoubleSpinBox* dspin(const char* key, double lo, double hi, double v, int decimals, const QString& suffix,
                      const QString& note) {
  const auto& f = field(key);
  auto* s = new QDoubleSpinBox;
  if (f.spec.min != 0.0 || f.spec.max != 0.0) {
    lo = f.spec.min;
    hi = f.spec.max;
  }
  s->setRange(lo, hi);
  s->setDecimals(decimals);
  s->setValue(v);
  s->setSuffix(suffix);
  keyed(s, f, note);
  s->setKeyboardTracking(false);
  return s;
}
/// A combo box of the key's choices.
QComboBox* choices(const char* key, const QString& note) {
  const auto& f = field(key);
  auto* c = new QComboBox;
  for (const auto& v : f.spec.choices) c->addItem(QString::fromStdString(v), QString::fromStdString(v));
  keyed(c, f, note);
  return c;
}
QString label_of(const char* key) { return QString::fromStdString(field(key).label); }
}  // namespace

ServingPage::ServingPage(std::shared_ptr<const AppData> app_data, QWidget* parent)
    : QWidget(parent), data_(std::move(app_data)) {
  model_ = new QComboBox;
  fill_model_combo(model_, data_->library);  // the panel's list: released models, then the benchmark shapes
  keyed(model_, field("model"));
  gpu_ = new QComboBox;
  for (const auto& g : data_->db.gpus)
    gpu_->addItem(QString::fromStdString(g.info.name.empty() ? g.info.id : g.info.name), QString::fromStdString(g.info.id));
  keyed(gpu_, field("gpu"));
  weights_ = choices("weight_dtype", tr("fp8/fp4 checkpoints run fp8/fp4 GEMMs where the GPU has them"));
  kv_ = choices("kv_dtype", {});
  tp_ = spin("tp", 1, 1024, 8);
  prompt_ = spin("input_tokens", 1, 10'000'000, 2048);
  output_ = spin("output_tokens", 1, 10'000'000, 512);
  batch_ = spin("batch", 1, 4096, 64);
  rate_ = dspin("rate", 0.001, 1e6, 10, 3, tr(" req/s"), tr("open loop, Poisson arrivals"));
  ttft_ = dspin("ttft_ms", 0, 1e6, 1000, 0, tr(" ms"), tr("p99, queueing included; 0 = none"));
  ttft_->setSpecialValueText(tr("none"));
  itl_ = dspin("itl_ms", 0, 1e6, 50, 1, tr(" ms"), tr("0 = none"));
  itl_->setSpecialValueText(tr("none"));
  weights_->setCurrentIndex(std::max(0, weights_->findData("bf16")));
  kv_->setCurrentIndex(std::max(0, kv_->findData("bf16")));
  model_->setCurrentIndex(std::max(0, model_->findData("llama-3.1-70b")));
  gpu_->setCurrentIndex(std::max(0, gpu_->findData("h100-sxm5-80gb")));

  auto* g = new QGridLayout;
  int c = 0;
  auto add = [&](const QString& label, QWidget* w) {
    g->addWidget(new QLabel(label), c / 8, c % 8);
    ++c;
    g->addWidget(w, c / 8, c % 8);
    ++c;
  };
  add(label_of("model"), model_);
  add(label_of("gpu"), gpu_);
  add(label_of("tp"), tp_);
  add(label_of("batch"), batch_);
  add(label_of("weight_dtype"), weights_);
  add(label_of("kv_dtype"), kv_);
  add(label_of("input_tokens"), prompt_);
  add(label_of("output_tokens"), output_);
  add(label_of("rate"), rate_);
  add(label_of("ttft_ms"), ttft_);
  add(label_of("itl_ms"), itl_);
  for (auto* cb : {model_, gpu_, weights_, kv_}) {
    cb->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    cb->setMinimumContentsLength(8);
  }
  g->setColumnStretch(1, 3);
  g->setColumnStretch(3, 3);
  summary_ = new QLabel;
  summary_->setTextFormat(Qt::RichText);
  summary_->setWordWrap(true);
  connect(summary_, &QLabel::linkActivated, this, &ServingPage::derivationRequested);
  status_ = new QLabel;
  status_->setWordWrap(true);
  status_->setTextFormat(Qt::RichText);
  charts_ = new charts::ServingCharts;
  capacity_ = new charts::CapacityCharts;
  connect(capacity_, &charts::CapacityCharts::derivationRequested, this, &ServingPage::derivationRequested);
  views_ = new QTabWidget;
  views_->setDocumentMode(true);
  views_->addTab(charts_, tr("Latency && KV cache"));
  views_->addTab(capacity_, tr("Capacity (GPUs, $/Mtok vs rate)"));
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(4, 4, 4, 4);
  l->addLayout(g);
  l->addWidget(summary_);
  l->addWidget(status_);
  l->addWidget(views_, 1);

  auto user = [this] {
    if (!following_) own_choice_ = true;
    emit changed();
  };
  connect(model_, &QComboBox::currentIndexChanged, this, user);
  connect(gpu_, &QComboBox::currentIndexChanged, this, user);
  for (auto* cb : {weights_, kv_}) connect(cb, &QComboBox::currentIndexChanged, this, &ServingPage::changed);
  for (auto* s : {tp_, prompt_, output_, batch_}) connect(s, &QSpinBox::valueChanged, this, &ServingPage::changed);
  for (auto* s : {rate_, ttft_, itl_}) connect(s, &QDoubleSpinBox::valueChanged, this, &ServingPage::changed);
}

void ServingPage::addModel(const QString& path, const QString& label) {
  const QSignalBlocker b(model_);  // listing it is not a choice: followTraining selects it while following
  add_imported_model(model_, path, label);
}

void ServingPage::followTraining(const QString& model_id, const QString& gpu_id) {
  if (own_choice_) return;
  following_ = true;
  const int mi = model_->findData(model_id), gi = gpu_->findData(gpu_id);
  const bool change = (mi >= 0 && mi != model_->currentIndex()) || (gi >= 0 && gi != gpu_->currentIndex());
  {
    const QSignalBlocker b1(model_), b2(gpu_);
    if (mi >= 0) model_->setCurrentIndex(mi);
    if (gi >= 0) gpu_->setCurrentIndex(gi);
  }
  following_ = false;
  if (change) emit changed();
}

ServingRequest ServingPage::request() const {
  ServingRequest r;
  r.model = model_->currentData().toString().toStdString();
  r.gpu = gpu_->currentData().toString().toStdString();
  r.tp = tp_->value();
  r.weight_dtype = weights_->currentData().toString().toStdString();
  r.kv_dtype = kv_->currentData().toString().toStdString();
  r.prompt_tokens = prompt_->value();
  r.output_tokens = output_->value();
  r.batch = batch_->value();
  r.rate = rate_->value();
  r.ttft_ms = ttft_->value();
  r.itl_ms = itl_->value();
  return r;
}

QString ServingPage::plannerLine(const ServingResult& r) {
  if (!r.plan || !r.plan->best) return {};
  const auto& b = *r.plan->best;
  const QString cost = b.cost_per_mtok_usd > 0 ? QString("$%1 per million output tokens").arg(b.cost_per_mtok_usd, 0, 'g', 3)
                                               : tr("no price for this GPU");
  // The layout in the CLI's words (model::replica_layout, as `gpuplan serve --rate` prints it).
  return QString("<br>%1 at <b>%2 req/s</b>: <a href=\"serving.plan\" style=\"text-decoration:none\"><b>%3 GPUs</b> = "
                 "%4</a>, batch %5 · TTFT p99 %6 · ITL %7 · %8")
      .arg(r.plan->feasible ? tr("Capacity planner") : tr("<span style='color:#b00020'>No layout meets the SLA</span> — best"))
      .arg(r.rate, 0, 'g', 4)
      .arg(b.gpus)
      .arg(q(model::replica_layout(b.replicas, b.tp, b.pp)))
      .arg(b.batch)
      .arg(q(u::format(b.ttft)), q(u::format(b.itl)), cost);
}

void ServingPage::setResult(const ServingResult& r) {
  charts_->setResult(r);
  capacity_->setResult(r);
  QString st;
  for (const auto& d : r.diags.items()) {
    const char* colour = d.severity == Severity::error ? "#b00020" : d.severity == Severity::warning ? "#a05a00" : "gray";
    st += QString("<span style='color:%1'>%2</span><br>").arg(colour, q(d.to_string()));
  }
  for (const auto& why : r.reasons) st += "<span style='color:#b00020'>" + q(why) + "</span><br>";
  status_->setText(st);
  status_->setVisible(!st.isEmpty());
  if (!r.valid) {
    summary_->setText(tr("<span style='color:#b00020'><b>No estimate</b></span>"));
    return;
  }
  auto link = [](const char* id, const QString& text) {
    return QString("<a href=\"%1\" style=\"text-decoration:none\">%2</a>").arg(id, text);
  };
  summary_->setText(
      QString("<b>%1 on %2, TP %3</b> — at batch %4: TTFT %5, ITL %6, %7 output tokens/s per replica, %8 requests/s"
              "<br>weights %9 per GPU · KV %10 per token (whole model) · KV pool %11 per GPU of %12 · "
              "max %13 sequences of %14 tokens")
          .arg(q(r.model_name), q(r.gpu_name))
          .arg(r.tp)
          .arg(r.batch)
          .arg(link("serving.steady_state", q(u::format(u::Seconds(r.ttft_s)))), link("serving.steady_state", q(u::format(u::Seconds(r.itl_s)))),
               q(u::format_number(r.output_tokens_per_s, 4)), q(u::format_number(r.requests_per_s, 3)))
          .arg(link("kv", q(u::format(u::Bytes(r.weights_per_gpu_bytes), u::BytePrefix::binary))),
               link("kv", q(u::format(u::Bytes(r.kv_bytes_per_token), u::BytePrefix::binary))),
               q(u::format(u::Bytes(r.kv_pool_per_gpu_bytes), u::BytePrefix::binary)),
               q(u::format(u::Bytes(r.capacity_per_gpu_bytes), u::BytePrefix::binary)))
          .arg(r.max_concurrency)
          .arg(r.prompt_tokens + r.output_tokens) +
      plannerLine(r));
}

}  // namespace gpuplan::gui
