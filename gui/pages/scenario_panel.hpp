#pragma once
// The training scenario as widgets. Its state *is* the scenario JSON object `gpuplan train --scenario` reads
// (docs/scenario.md): scenario() builds it from the widgets, setScenario() fills the widgets from a decoded one. Keys
// the panel has no widget for (kernels, price, shard group, ...) are kept as loaded and written back on save.
#include <memory>
#include <optional>
#include <vector>

#include <QWidget>

#include "app_data.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QSpinBox;

namespace gpuplan::gui {

class ScenarioPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ScenarioPanel(std::shared_ptr<const AppData> data, QWidget* parent = nullptr);

  [[nodiscard]] json_io::Json scenario() const;
  /// Fills the widgets from a decoded scenario; `raw` is the object it came from (its unknown-to-the-panel keys are
  /// kept); `resolved_global_batch` is the global batch resolution derived when the file gives none (micro × DP, as
  /// the CLI). Emits changed() once.
  void setScenario(const wl_io::TrainingScenario& s, const json_io::Json& raw,
                   std::optional<long long> resolved_global_batch = std::nullopt);
  /// Adds a model file (a Hugging Face config.json or a gpuplan model JSON) to the model list and selects it.
  void addModelPath(const QString& path, const QString& label);
  [[nodiscard]] std::vector<std::string> compareGpus() const;
  [[nodiscard]] bool calibration() const;
  /// The first-start scenario: Llama-3.1-70B on 1,024 H100 (TP 8, PP 4, seq 8192, global batch 1024, 15T tokens),
  /// compared with A100 80GB, H200 and B200.
  void setDefaults();
  /// Shows what resolution derived (DP) next to the inputs.
  void showDerived(int dp);

  // Direct access for tests and the screenshot script.
  QComboBox* gpuCombo() const { return gpu_; }
  QComboBox* modelCombo() const { return model_; }
  QSpinBox* tpSpin() const { return tp_; }
  QComboBox* precisionCombo() const { return precision_; }
  QComboBox* optimizerCombo() const { return optimizer_; }
  QComboBox* scheduleCombo() const { return schedule_; }
  QSpinBox* virtualStagesSpin() const { return vstages_; }
  QComboBox* offloadCombo() const { return offload_; }
  QSpinBox* loraRankSpin() const { return lora_rank_; }
  QComboBox* loraTargetsCombo() const { return lora_targets_; }
  QComboBox* loraBaseCombo() const { return lora_base_; }
  QComboBox* zeroCombo() const { return zero_; }
  QCheckBox* overlapGradReduce() const { return ov_grad_; }
  QCheckBox* overlapParamGather() const { return ov_param_; }
  QCheckBox* overlapTpComm() const { return ov_tp_; }
  QComboBox* optimizerStatesCombo() const { return opt_states_; }
  QCheckBox* fp8ParamsCheck() const { return fp8_params_; }
  QSpinBox* gpusSpin() const { return gpus_; }
  QComboBox* compareCombo(int i) const { return compare_[std::size_t(i)]; }

 signals:
  void changed();
  /// A model file joined the model list (import, or a scenario file naming a path): the serving page lists it too.
  void modelAdded(const QString& path, const QString& label);

 private:
  void emitChanged();
  static void selectData(QComboBox* c, const QString& data);

  std::shared_ptr<const AppData> data_;
  json_io::Json extra_ = json_io::Json::object();
  bool loading_ = false;
  QComboBox *model_, *gpu_, *node_, *cluster_, *precision_, *optimizer_, *zero_, *recompute_, *schedule_, *offload_;
  QComboBox *lora_targets_, *lora_base_, *opt_states_;
  QSpinBox *gpus_, *tp_, *pp_, *cp_, *ep_, *micro_, *global_, *seq_, *vstages_, *lora_rank_;
  QDoubleSpinBox* tokens_;
  QCheckBox *flash_, *sp_, *calib_, *ov_grad_, *ov_param_, *ov_tp_, *fp8_params_;
  std::vector<QComboBox*> compare_;
  QLabel* dp_;
};

}  // namespace gpuplan::gui
