#include "scenario_panel.hpp"

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include "gpuplan/wl_io/scenario_fields.hpp"
#include "model_list.hpp"

namespace gpuplan::gui {
namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }

/// A key's row of the training field table (wl_io::training_fields): labels, tooltips and ranges come from it.
const wl_io::ScenarioField& field(const char* key) {
  const auto* f = wl_io::find_field(wl_io::training_fields(), key);
  if (f == nullptr) qFatal("the training field table has no key '%s'", key);  // a typo here, caught by any start
  return *f;
}
QString label(const char* key) { return q(field(key).label); }
/// Names the widget by its scenario key (tests find it so) and gives it the table's tooltip.
template <class W>
W* keyed(W* w, const char* key) {
  w->setObjectName(QString::fromLatin1(key));
  w->setToolTip(q(field(key).tooltip()));
  return w;
}

/// A spin box over the key's range in the table.
QSpinBox* spin(const char* key, int value) {
  const auto& f = field(key);
  auto* s = keyed(new QSpinBox, key);
  s->setRange(static_cast<int>(f.spec.min), static_cast<int>(f.spec.max));
  s->setValue(value);
  s->setKeyboardTracking(false);  // typing "1024" is one request, not four
  s->setAccelerated(true);
  return s;
}
/// A picker over the key's choices in the table (without other frameworks' spellings of them: "adam" is adamw).
QComboBox* combo(const char* key) {
  auto* c = keyed(new QComboBox, key);
  for (const auto& i : field(key).picker_choices()) c->addItem(q(i), q(i));
  return c;
}
QCheckBox* check(const char* key) { return keyed(new QCheckBox(label(key)), key); }
}  // namespace

ScenarioPanel::ScenarioPanel(std::shared_ptr<const AppData> app_data, QWidget* parent)
    : QWidget(parent), data_(std::move(app_data)) {
  model_ = keyed(new QComboBox, "model");
  fill_model_combo(model_, data_->library);  // released models, then the benchmark shapes under a heading
  gpu_ = keyed(new QComboBox, "gpu");
  for (const auto& g : data_->db.gpus) gpu_->addItem(q(g.info.name.empty() ? g.info.id : g.info.name), q(g.info.id));
  node_ = keyed(new QComboBox, "node");
  node_->addItem(tr("(auto)"), QString());
  for (const auto& n : data_->db.nodes) node_->addItem(q(n.info.id), q(n.info.id));
  cluster_ = keyed(new QComboBox, "cluster");
  cluster_->addItem(tr("(none)"), QString());
  for (const auto& c : data_->db.clusters) cluster_->addItem(q(c.info.id), q(c.info.id));

  gpus_ = spin("gpus", 1024);
  tp_ = spin("tp", 8);
  pp_ = spin("pp", 4);
  cp_ = spin("cp", 1);
  ep_ = spin("ep", 1);
  micro_ = spin("micro_batch", 1);
  global_ = spin("global_batch", 1024);
  seq_ = spin("seq", 8192);
  seq_->setSingleStep(1024);
  tokens_ = keyed(new QDoubleSpinBox, "tokens");
  tokens_->setRange(0, 1e6);
  tokens_->setDecimals(3);
  tokens_->setSuffix(tr(" T"));
  tokens_->setValue(15);
  tokens_->setKeyboardTracking(false);
  tokens_->setToolTip(tokens_->toolTip() + tr("\nhere in trillions (0 = none)"));
  precision_ = combo("precision");
  optimizer_ = combo("optimizer");
  opt_states_ = keyed(new QComboBox, "optimizer_states");
  opt_states_->addItem(tr("fp32"), "fp32");
  opt_states_->addItem(tr("bf16 (DeepSeek-V3, NeMo optim.dtype)"), "bf16");
  fp8_params_ = check("fp8_params");
  zero_ = keyed(new QComboBox, "zero");
  zero_->addItem(tr("0 — none"), 0);
  zero_->addItem(tr("1 — optimizer states"), 1);
  zero_->addItem(tr("2 — + gradients"), 2);
  zero_->addItem(tr("3 — + parameters (FSDP)"), 3);
  recompute_ = combo("recompute");
  flash_ = check("flash_attention");
  flash_->setChecked(true);
  sp_ = check("sequence_parallel");
  sp_->setChecked(true);
  calib_ = new QCheckBox(tr("Use calibration profiles"));
  calib_->setChecked(true);
  calib_->setToolTip(tr("data/calibration/<gpu>/profile.json where one exists (as the CLI without --no-calibration)"));
  schedule_ = keyed(new QComboBox, "schedule");
  schedule_->addItem(tr("1F1B"), "1f1b");
  schedule_->addItem(tr("interleaved 1F1B"), "interleaved");
  schedule_->addItem(tr("DualPipe (DeepSeek-V3)"), "dualpipe");
  vstages_ = spin("virtual_stages", 1);
  offload_ = keyed(new QComboBox, "offload");
  offload_->addItem(tr("none"), "none");
  offload_->addItem(tr("optimizer → CPU (ZeRO-Offload)"), "optimizer");
  lora_rank_ = spin("lora_rank", 0);
  lora_targets_ = keyed(new QComboBox, "lora_targets");
  lora_targets_->addItem(tr("all linear layers"), "all");
  lora_targets_->addItem(tr("QKV projection"), "qkv");
  lora_targets_->addItem(tr("attention (QKV + output)"), "attention");
  lora_targets_->addItem(tr("MLP"), "mlp");
  lora_base_ = keyed(new QComboBox, "lora_base");
  lora_base_->addItem(tr("as the precision"), "same");
  lora_base_->addItem(tr("NF4 (QLoRA, 4.127 bits)"), "nf4");
  lora_base_->addItem(tr("int8"), "int8");
  lora_base_->addItem(tr("fp8"), "fp8");
  ov_grad_ = check("overlap_grad_reduce");
  ov_grad_->setChecked(true);
  ov_param_ = check("overlap_param_gather");
  ov_param_->setChecked(true);
  ov_tp_ = check("overlap_tp_comm");
  ov_tp_->setChecked(false);
  dp_ = new QLabel;
  dp_->setObjectName("dp");
  dp_->setToolTip(tr("Data-parallel size as resolved from GPUs / (TP·PP·CP)"));

  auto* hw = new QGroupBox(tr("Model and hardware"));
  auto* hf = new QFormLayout(hw);
  hf->addRow(label("model"), model_);
  hf->addRow(label("gpu"), gpu_);
  hf->addRow(label("node"), node_);
  hf->addRow(label("cluster"), cluster_);
  hf->addRow(label("gpus"), gpus_);

  auto* par = new QGroupBox(tr("Parallelism"));
  auto* pf = new QFormLayout(par);
  pf->addRow(label("tp"), tp_);
  pf->addRow(label("pp"), pp_);
  pf->addRow(label("cp"), cp_);
  pf->addRow(label("ep"), ep_);
  pf->addRow(label("dp"), dp_);
  pf->addRow(label("schedule"), schedule_);
  pf->addRow(label("virtual_stages"), vstages_);
  pf->addRow(sp_);

  auto* run = new QGroupBox(tr("Batch and training"));
  auto* rf = new QFormLayout(run);
  rf->addRow(label("micro_batch"), micro_);
  rf->addRow(label("global_batch"), global_);
  rf->addRow(label("seq"), seq_);
  rf->addRow(label("tokens"), tokens_);
  rf->addRow(label("precision"), precision_);
  rf->addRow(label("optimizer"), optimizer_);
  rf->addRow(label("optimizer_states"), opt_states_);
  rf->addRow(fp8_params_);
  rf->addRow(label("zero"), zero_);
  rf->addRow(label("recompute"), recompute_);
  rf->addRow(label("offload"), offload_);
  rf->addRow(label("lora_rank"), lora_rank_);
  rf->addRow(label("lora_targets"), lora_targets_);
  rf->addRow(label("lora_base"), lora_base_);
  rf->addRow(flash_);
  rf->addRow(ov_grad_);
  rf->addRow(ov_param_);
  rf->addRow(ov_tp_);

  auto* cmp = new QGroupBox(tr("Compare with"));
  auto* cf = new QFormLayout(cmp);
  for (int i = 0; i < 3; ++i) {
    auto* c = new QComboBox;
    c->addItem(tr("(none)"), QString());
    for (const auto& g : data_->db.gpus) c->addItem(q(g.info.name.empty() ? g.info.id : g.info.name), q(g.info.id));
    c->setToolTip(tr("Another GPU type evaluated with the same plan (its own default node)"));
    compare_.push_back(c);
    cf->addRow(tr("GPU %1").arg(i + 2), c);
  }
  cf->addRow(calib_);

  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(4, 4, 4, 4);
  for (auto* g : {hw, par, run, cmp}) {
    qobject_cast<QFormLayout*>(g->layout())->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
    l->addWidget(g);
  }
  l->addStretch(1);
  // Long GPU names must not widen the panel: the combos elide instead.
  for (auto* c : findChildren<QComboBox*>()) {
    c->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    c->setMinimumContentsLength(10);
  }

  for (auto* c : {model_, gpu_, node_, cluster_, precision_, optimizer_, zero_, recompute_, schedule_, offload_,
                  lora_targets_, lora_base_, opt_states_})
    connect(c, &QComboBox::currentIndexChanged, this, &ScenarioPanel::emitChanged);
  for (auto* c : compare_) connect(c, &QComboBox::currentIndexChanged, this, &ScenarioPanel::emitChanged);
  // Adapter targets and base storage mean something only with adapters.
  auto lora_enable = [this] {
    lora_targets_->setEnabled(lora_rank_->value() > 0);
    lora_base_->setEnabled(lora_rank_->value() > 0);
  };
  connect(lora_rank_, &QSpinBox::valueChanged, this, lora_enable);
  lora_enable();
  // bf16 moments exist for AdamW and SGD; FP8 parameters feed FP8 GEMMs only.
  auto precision_enable = [this] {
    opt_states_->setEnabled(optimizer_->currentData().toString() != "adamw-8bit");
    fp8_params_->setEnabled(precision_->currentData().toString() == "fp8");
  };
  connect(optimizer_, &QComboBox::currentIndexChanged, this, precision_enable);
  connect(precision_, &QComboBox::currentIndexChanged, this, precision_enable);
  precision_enable();
  for (auto* s : {gpus_, tp_, pp_, cp_, ep_, micro_, global_, seq_, vstages_, lora_rank_})
    connect(s, &QSpinBox::valueChanged, this, &ScenarioPanel::emitChanged);
  connect(tokens_, &QDoubleSpinBox::valueChanged, this, &ScenarioPanel::emitChanged);
  for (auto* b : {flash_, sp_, calib_, ov_grad_, ov_param_, ov_tp_, fp8_params_})
    connect(b, &QCheckBox::toggled, this, &ScenarioPanel::emitChanged);
  // Picking a schedule by hand brings v along (interleaving needs v ≥ 2, 1F1B has v = 1); a loaded file is shown as
  // it is, and the model says what it thinks of it.
  connect(schedule_, &QComboBox::currentIndexChanged, this, [this] {
    if (loading_) return;
    const bool inter = schedule_->currentData().toString() == "interleaved";
    if (inter && vstages_->value() < 2) vstages_->setValue(2);
    if (!inter && vstages_->value() != 1) vstages_->setValue(1);
  });
  setDefaults();
}

void ScenarioPanel::emitChanged() {
  if (!loading_) emit changed();
}

void ScenarioPanel::selectData(QComboBox* c, const QString& data) {
  const int i = c->findData(data);
  if (i >= 0) c->setCurrentIndex(i);
}

void ScenarioPanel::setDefaults() {
  loading_ = true;
  selectData(model_, "llama-3.1-70b");
  selectData(gpu_, "h100-sxm5-80gb");
  node_->setCurrentIndex(0);
  cluster_->setCurrentIndex(0);
  gpus_->setValue(1024);
  tp_->setValue(8);
  pp_->setValue(4);
  cp_->setValue(1);
  ep_->setValue(1);
  micro_->setValue(1);
  global_->setValue(1024);
  seq_->setValue(8192);
  tokens_->setValue(15);
  selectData(precision_, "bf16");
  selectData(optimizer_, "adamw");
  selectData(opt_states_, "fp32");
  fp8_params_->setChecked(false);
  zero_->setCurrentIndex(0);
  selectData(recompute_, "none");
  flash_->setChecked(true);
  sp_->setChecked(true);
  selectData(schedule_, "1f1b");
  vstages_->setValue(1);
  selectData(offload_, "none");
  lora_rank_->setValue(0);
  selectData(lora_targets_, "all");
  selectData(lora_base_, "same");
  ov_grad_->setChecked(true);
  ov_param_->setChecked(true);
  ov_tp_->setChecked(false);
  selectData(compare_[0], "a100-sxm4-80gb");
  selectData(compare_[1], "h200-sxm-141gb");
  selectData(compare_[2], "b200-hgx");
  extra_ = json_io::Json::object();
  loading_ = false;
  emit changed();
}

json_io::Json ScenarioPanel::scenario() const {
  json_io::Json j = extra_;
  j["model"] = model_->currentData().toString().toStdString();
  j["gpu"] = gpu_->currentData().toString().toStdString();
  if (const auto n = node_->currentData().toString(); !n.isEmpty()) j["node"] = n.toStdString();
  if (const auto c = cluster_->currentData().toString(); !c.isEmpty()) j["cluster"] = c.toStdString();
  j["gpus"] = gpus_->value();
  j["tp"] = tp_->value();
  j["pp"] = pp_->value();
  j["cp"] = cp_->value();
  j["ep"] = ep_->value();
  j["sequence_parallel"] = sp_->isChecked();
  j["micro_batch"] = micro_->value();
  j["global_batch"] = global_->value();
  j["seq"] = seq_->value();
  j["precision"] = precision_->currentData().toString().toStdString();
  j["optimizer"] = optimizer_->currentData().toString().toStdString();
  if (opt_states_->isEnabled()) j["optimizer_states"] = opt_states_->currentData().toString().toStdString();
  if (fp8_params_->isEnabled() && fp8_params_->isChecked()) j["fp8_params"] = true;
  j["zero"] = zero_->currentData().toInt();
  j["recompute"] = recompute_->currentData().toString().toStdString();
  j["flash_attention"] = flash_->isChecked();
  j["schedule"] = schedule_->currentData().toString().toStdString();
  j["virtual_stages"] = vstages_->value();
  j["offload"] = offload_->currentData().toString().toStdString();
  if (lora_rank_->value() > 0) {  // targets and base without a rank are an error for the decoder
    j["lora_rank"] = lora_rank_->value();
    j["lora_targets"] = lora_targets_->currentData().toString().toStdString();
    j["lora_base"] = lora_base_->currentData().toString().toStdString();
  }
  j["overlap_grad_reduce"] = ov_grad_->isChecked();
  j["overlap_param_gather"] = ov_param_->isChecked();
  j["overlap_tp_comm"] = ov_tp_->isChecked();
  if (tokens_->value() > 0) j["tokens"] = tokens_->value() * 1e12;
  return j;
}

void ScenarioPanel::setScenario(const wl_io::TrainingScenario& s, const json_io::Json& raw,
                                std::optional<long long> resolved_global_batch) {
  loading_ = true;
  // What the panel does not show is carried through; what it shows comes from the decoded scenario (absent keys
  // take the decoder's defaults, exactly as the CLI would run the file).
  // The panel owns the keys its widgets are named after (keyed() above; "dp" is shown as resolved).
  extra_ = json_io::Json::object();
  if (raw.is_object())
    for (const auto& [k, v] : raw.items())
      if (findChild<QWidget*>(QString::fromStdString(k)) == nullptr) extra_[k] = v;
  const auto enc = wl_io::encode_training_scenario(s);
  if (model_->findData(q(s.model)) < 0) {
    const auto* m = data_->library.find(s.model);
    if (m != nullptr) selectData(model_, q(m->arch.id));
    else addModelPath(q(s.model), q(s.model));
  } else {
    selectData(model_, q(s.model));
  }
  if (!s.gpu.empty()) {
    const auto* g = data_->db.find_gpu(s.gpu);
    selectData(gpu_, q(g != nullptr ? g->info.id : s.gpu));
  }
  selectData(node_, q(s.node));
  selectData(cluster_, q(s.cluster));
  if (s.node.empty() && !s.gpu.empty()) node_->setCurrentIndex(0);
  if (s.cluster.empty()) cluster_->setCurrentIndex(0);
  if (s.node.empty() && s.gpu.empty() && !s.cluster.empty()) {
    // A cluster alone: show its GPU.
    if (const auto* c = data_->db.find_cluster(s.cluster))
      if (const auto* n = data_->db.find_node(c->node)) selectData(gpu_, q(n->gpu));
  } else if (s.gpu.empty() && !s.node.empty()) {
    if (const auto* n = data_->db.find_node(s.node)) selectData(gpu_, q(n->gpu));
  }
  const auto& p = s.plan;
  gpus_->setValue(static_cast<int>(s.gpus ? *s.gpus : p.par.gpus()));
  tp_->setValue(p.par.tp);
  pp_->setValue(p.par.pp);
  cp_->setValue(p.par.cp);
  ep_->setValue(p.par.ep);
  sp_->setChecked(p.par.sequence_parallel);
  micro_->setValue(static_cast<int>(p.micro_batch));
  seq_->setValue(static_cast<int>(p.seq_len));
  // Without a global batch in the file the CLI takes micro × DP at resolution; the caller passes what it resolved.
  global_->setValue(static_cast<int>(resolved_global_batch.value_or(p.global_batch)));
  tokens_->setValue(p.tokens_to_train ? *p.tokens_to_train / 1e12 : 0.0);
  selectData(precision_, q(enc.value("precision", "bf16")));
  // From the typed plan, not the file's text: a file may spell adamw as Megatron-LM does ("adam").
  selectData(optimizer_, p.optimizer == wl::OptimizerKind::adamw_8bit ? "adamw-8bit"
                         : p.optimizer == wl::OptimizerKind::sgd      ? "sgd"
                                                                      : "adamw");
  selectData(opt_states_, p.optimizer_states == wl::StateDtype::bf16 ? "bf16" : "fp32");
  fp8_params_->setChecked(p.precision.fp8_params);
  zero_->setCurrentIndex(static_cast<int>(p.zero));
  selectData(recompute_, q(enc.value("recompute", "none")));
  flash_->setChecked(p.flash_attention);
  selectData(schedule_, p.schedule == wl::PipelineSchedule::interleaved ? "interleaved"
                        : p.schedule == wl::PipelineSchedule::dualpipe  ? "dualpipe"
                                                                        : "1f1b");
  vstages_->setValue(p.par.virtual_stages);
  selectData(offload_, p.offload == wl::Offload::optimizer ? "optimizer" : "none");
  lora_rank_->setValue(p.lora.rank);
  selectData(lora_targets_, QString::fromUtf8(wl::to_string(p.lora.targets)));
  selectData(lora_base_, QString::fromUtf8(wl::to_string(p.lora.base)));
  ov_grad_->setChecked(p.overlap_grad_reduce);
  ov_param_->setChecked(p.overlap_param_gather);
  ov_tp_->setChecked(p.overlap_tp_comm);
  loading_ = false;
  emit changed();
}

void ScenarioPanel::addModelPath(const QString& path, const QString& label) {
  const bool added = model_->findData(path) < 0;
  const int i = add_imported_model(model_, path, label);
  if (added) emit modelAdded(path, label);  // before the selection's changed(): the serving page lists it first
  model_->setCurrentIndex(i);
}

std::vector<std::string> ScenarioPanel::compareGpus() const {
  std::vector<std::string> out;
  for (auto* c : compare_)
    if (const auto id = c->currentData().toString(); !id.isEmpty()) out.push_back(id.toStdString());
  return out;
}

bool ScenarioPanel::calibration() const { return calib_->isChecked(); }

void ScenarioPanel::showDerived(int dp) { dp_->setText(dp > 0 ? QString::number(dp) : tr("—")); }

}  // namespace gpuplan::gui
