#include "gemm_page.hpp"

#include <algorithm>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>

#include "gemm_chart.hpp"
#include "gpuplan/app/hardware_setup.hpp"
#include "gpuplan/core/format.hpp"

namespace gpuplan::gui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }

QSpinBox* spin(int lo, int hi, int v, const QString& tip) {
  auto* s = new QSpinBox;
  s->setRange(lo, hi);
  s->setValue(v);
  s->setKeyboardTracking(false);
  s->setToolTip(tip);
  return s;
}

/// The note of input `name` of a GEMM's derivation (gemm_cost: "a" the alignment class, "u" the tiles).
std::string input_note(const Derivation& d, const std::string& name) {
  for (const auto& in : d.inputs)
    if (in.symbol == name) return in.value + " (" + in.meaning + ")";
  return {};
}
}  // namespace

GemmPage::GemmPage(std::shared_ptr<const AppData> app_data, QWidget* parent) : QWidget(parent), data_(std::move(app_data)) {
  dtype_ = new QComboBox;
  for (const char* p : {"bf16", "fp16", "fp8", "tf32", "fp32"}) dtype_->addItem(p, p);
  dtype_->setToolTip(tr("The GEMM's precision (fp8: no fallback kernels, priced as padded to 16 bytes)"));
  const char* names[] = {"M", "N", "K"};
  const int defaults[] = {4096, 4096, 4097};
  const QString tips[] = {tr("M: rows of A and C (tokens of an nn.Linear; not a leading dimension)"),
                          tr("N: columns of B and C (output features; a leading dimension)"),
                          tr("K: the inner dimension (input features; a leading dimension)")};
  for (int i = 0; i < 3; ++i) dims_[i] = spin(1, 1'000'000, defaults[i], tips[i]);
  axis_ = new QComboBox;
  for (int i = 0; i < 3; ++i) axis_->addItem(tr("sweep %1").arg(QString::fromLatin1(names[i])), i);
  axis_->setCurrentIndex(2);
  from_ = spin(1, 1'000'000, 4088, tr("first value of the swept dimension"));
  to_ = spin(1, 1'000'000, 4104, tr("last value of the swept dimension"));
  step_ = spin(1, 100'000, 1, tr("step of the sweep"));
  summary_ = new QLabel;
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  chart_ = new charts::GemmChart;

  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("<b>GEMM</b>")));
  row->addWidget(dtype_);
  for (int i = 0; i < 3; ++i) {
    row->addWidget(new QLabel(QString::fromLatin1(names[i])));
    row->addWidget(dims_[i]);
  }
  row->addSpacing(16);
  row->addWidget(axis_);
  row->addWidget(new QLabel(tr("from")));
  row->addWidget(from_);
  row->addWidget(new QLabel(tr("to")));
  row->addWidget(to_);
  row->addWidget(new QLabel(tr("step")));
  row->addWidget(step_);
  row->addStretch(1);
  auto* l = new QVBoxLayout(this);
  l->addLayout(row);
  l->addWidget(summary_);
  l->addWidget(chart_, 1);
  connect(dtype_, &QComboBox::currentIndexChanged, this, [this] { update(); });
  connect(axis_, &QComboBox::currentIndexChanged, this, [this] {
    // A new axis starts its sweep around the shape's own value.
    const int v = dims_[axis_->currentIndex()]->value();
    const QSignalBlocker b1(from_), b2(to_), b3(step_);
    if (axis_->currentIndex() == 0) {
      from_->setValue(1);
      to_->setValue(std::max(1024, v));
      step_->setValue(1);
    } else {
      from_->setValue(std::max(1, v - 8));
      to_->setValue(v + 8);
      step_->setValue(1);
    }
    update();
  });
  for (QSpinBox* s : {dims_[0], dims_[1], dims_[2], from_, to_, step_})
    connect(s, &QSpinBox::valueChanged, this, [this] { update(); });
}

void GemmPage::setGpu(const std::string& gpu_id, bool calibration) {
  if (gpu_id == gpu_id_ && calibration == calibration_ && !shapes_.empty()) return;
  gpu_id_ = gpu_id;
  calibration_ = calibration;
  update();
}

QString GemmPage::cliLine() const {
  std::string dims[3];
  for (int i = 0; i < 3; ++i) dims[i] = std::to_string(dims_[i]->value());
  const int a = axis_->currentIndex();
  dims[a] = std::to_string(from_->value()) + ".." + std::to_string(to_->value());
  if (step_->value() > 1) {  // appended in parts: GCC 12's -Wrestrict misreads ":" + std::string&&
    dims[a] += ':';
    dims[a] += std::to_string(step_->value());
  }
  return QString("gpuplan roofline --gemm %1x%2x%3 --gpu %4 --precision %5%6")
      .arg(q(dims[0]), q(dims[1]), q(dims[2]), q(gpu_id_), dtype_->currentData().toString(),
           calibration_ ? QString() : QStringLiteral(" --no-calibration"));
}

void GemmPage::update() {
  shapes_.clear();
  const hw::GpuSpec* gpu = data_ ? data_->db.find_gpu(gpu_id_) : nullptr;
  const auto prec = hw::parse_precision(dtype_->currentData().toString().toStdString());
  if (gpu == nullptr || !prec) {
    summary_->setText(tr("No GEMM: the scenario's GPU '%1' is not in the hardware data.").arg(q(gpu_id_)));
    chart_->setSweep({}, 0, -1, QString());
    return;
  }
  // The GPU's calibration profile where the data has one, as `gpuplan roofline` (burst rates: one op).
  model::TrainingSystem cal;
  cal.gpu = gpu;
  Diagnostics diags;
  app::load_calibration(data_->data_dir, cal, !calibration_, diags);
  model::Device d = model::make_device(*gpu);
  if (cal.efficiency) d.eff = *cal.efficiency;
  const std::int64_t m = dims_[0]->value(), n = dims_[1]->value(), k = dims_[2]->value();
  const app::GemmPadding pad = app::gemm_padding(d, *prec, m, n, k);
  shapes_ = {pad.as_given, pad.padded};
  const auto& s = pad.as_given;
  const auto& p = pad.padded;
  const bool same = p.n == n && p.k == k;
  summary_->setText(
      tr("<b>%1×%2×%3 %4 on %5: %6</b>, %7 TFLOP/s (%8-bound). Alignment a = %9. Tiles u = %10.<br>%11<br>"
         "<i>CLI:</i> <code>%12</code>")
          .arg(m)
          .arg(n)
          .arg(k)
          .arg(dtype_->currentText(), q(gpu->info.name.empty() ? gpu->info.id : gpu->info.name),
               q(units::format(s.cost.time)))
          .arg(s.tflops, 0, 'f', 0)
          .arg(q(model::to_string(s.cost.bound)), q(input_note(pad.derivation, "a")).toHtmlEscaped(),
               q(input_note(pad.derivation, "u")).toHtmlEscaped(),
               same ? tr("Its leading dimensions K and N are already multiples of 16 bytes: nothing to pad.")
                    : tr("Padded to %1×%2×%3 (K and N to multiples of 16 bytes): %4, <b>%5× faster</b> for %6% more "
                         "FLOPs.")
                          .arg(p.m)
                          .arg(p.n)
                          .arg(p.k)
                          .arg(q(units::format(p.cost.time)))
                          .arg(pad.speedup, 0, 'f', 2)
                          .arg(100.0 * pad.extra_flops, 0, 'f', 1),
               cliLine().toHtmlEscaped()));
  const int a = axis_->currentIndex();
  std::array<std::vector<std::int64_t>, 3> dims{std::vector<std::int64_t>{m}, {n}, {k}};
  std::string error;
  const int lo = std::min(from_->value(), to_->value()), hi = std::max(from_->value(), to_->value());
  dims[std::size_t(a)] = app::parse_gemm_dim(
      std::to_string(lo) + ".." + std::to_string(hi) + ":" + std::to_string(step_->value()), error);
  const auto pts = app::gemm_shape_sweep(d, *prec, dims);
  int chosen = -1;
  const std::int64_t own = a == 0 ? m : a == 1 ? n : k;
  for (std::size_t i = 0; i < pts.size(); ++i)
    if ((a == 0 ? pts[i].m : a == 1 ? pts[i].n : pts[i].k) == own) chosen = int(i);
  chart_->setSweep(pts, a, chosen,
                   tr("%1 on %2: time per GEMM over %3").arg(dtype_->currentText(), q(gpu->info.id),
                                                             axis_->currentText().mid(6)));
}

}  // namespace gpuplan::gui
