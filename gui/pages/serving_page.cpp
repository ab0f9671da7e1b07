#include "serving_page.hpp"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QTabWidget>
#include <QGridLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>

#include "gpuplan/core/format.hpp"
#include "model_list.hpp"
#include "serving_charts.hpp"

namespace gpuplan::gui {
namespace {
namespace u = gpuplan::units;
QString q(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }
QSpinBox* spin(int lo, int hi, int v, const QString& tip) {
  auto* s = new QSpinBox;
  s->setRange(lo, hi);
  s->setValue(v);
  s->setToolTip(tip);
  s->setKeyboardTracking(false);
  return s;
}
QDoubleSpinBox* dspin(double lo, double hi, double v, int decimals, const QString& suffix, const QString& tip) {
  auto* s = new QDoubleSpinBox;
  s->setRange(lo, hi);
  s->setDecimals(decimals);
  s->setValue(v);
  s->setSuffix(suffix);
  s->setToolTip(tip);
  s->setKeyboardTracking(false);
  return s;
}
}  // namespace

ServingPage::ServingPage(std::shared_ptr<const AppData> app_data, QWidget* parent)
    : QWidget(parent), data_(std::move(app_data)) {
  model_ = new QComboBox;
  fill_model_combo(model_, data_->library);  // the panel's list: released models, then the benchmark shapes
  gpu_ = new QComboBox;
  for (const auto& g : data_->db.gpus)
    gpu_->addItem(QString::fromStdString(g.info.name.empty() ? g.info.id : g.info.name), QString::fromStdString(g.info.id));
  weights_ = new QComboBox;
  for (const char* d : {"bf16", "fp8", "int8", "int4", "fp4"}) weights_->addItem(d, d);
  weights_->setToolTip(tr("Weight format (fp8/fp4 checkpoints run fp8/fp4 GEMMs where the GPU has them)"));
  kv_ = new QComboBox;
  for (const char* d : {"bf16", "fp8", "int8", "int4"}) kv_->addItem(d, d);
  kv_->setToolTip(tr("KV-cache format"));
  tp_ = spin(1, 72, 8, tr("Tensor parallel size of one replica"));
  prompt_ = spin(1, 10'000'000, 2048, tr("Prompt tokens per request"));
  output_ = spin(1, 10'000'000, 512, tr("Output tokens per request"));
  batch_ = spin(1, 4096, 64, tr("Concurrent sequences at the operating point"));
  rate_ = dspin(0.001, 1e6, 10, 3, tr(" req/s"), tr("Request rate of the capacity planner (open loop, Poisson arrivals)"));
  ttft_ = dspin(0, 1e6, 1000, 0, tr(" ms"), tr("SLA: time to first token at p99, queueing included (0 = none)"));
  ttft_->setSpecialValueText(tr("none"));
  itl_ = dspin(0, 1e6, 50, 1, tr(" ms"), tr("SLA: inter-token latency, mean iteration (0 = none)"));
  itl_->setSpecialValueText(tr("none"));
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
  add(tr("Model"), model_);
  add(tr("GPU"), gpu_);
  add(tr("TP"), tp_);
  add(tr("Batch"), batch_);
  add(tr("Weights"), weights_);
  add(tr("KV cache"), kv_);
  add(tr("Prompt"), prompt_);
  add(tr("Output"), output_);
  add(tr("Rate"), rate_);
  add(tr("SLA TTFT"), ttft_);
  add(tr("SLA ITL"), itl_);
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
