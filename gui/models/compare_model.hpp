#pragma once
// Compare mode: the pinned scenario and the current one side by side, with the difference of each headline number
// (absolute and relative). A QAbstractTableModel over two snapshots of model results; every value in it is a number
// a model function returned (estimate_training, steady_state, plan_serving). The only arithmetic is the delta of two
// such numbers, which is what the view is for.
#include <optional>
#include <string>
#include <vector>

#include <QAbstractTableModel>

#include "serving_job.hpp"
#include "training_job.hpp"

namespace gpuplan::gui {

/// The headline numbers of one evaluation (training and, when present, serving), taken from the results.
struct Snapshot {
  std::string title;   ///< "Llama 3.1 70B on 1024 × NVIDIA H100 SXM5 80GB"
  std::string layout;  ///< "TP 8 · PP 4 · DP 32 · CP 1 · bf16"
  std::string serving; ///< "Llama 3.1 70B on H100, TP 8, batch 64, 10 req/s"
  std::string price;       ///< "$2.69/GPU-h on-demand (RunPod Secure Cloud, 2026-05)"; "" without a price
  std::string price_kind;  ///< app::price_kind's words: "on-demand", "spot", "as given"; "" without a price
  std::optional<double> step_time_s, tokens_per_s, mfu, memory_bytes, time_to_train_s, cost_usd;
  std::optional<double> ttft_s, itl_s, serving_gpus, cost_per_mtok_usd;
};

/// The snapshot of a training and a serving result (either may be invalid: its numbers are then absent).
Snapshot snapshot_of(const TrainingResult& t, const ServingResult& s);

class CompareModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kQuantity = 0, kPinned, kCurrent, kDelta, kDeltaPct, kColumnCount };
  enum Role { KeyRole = Qt::UserRole + 1, DeltaRole, DeltaPctRole };  ///< raw values (double) for tests/exports

  explicit CompareModel(QObject* parent = nullptr);

  void setPinned(Snapshot s);
  void clearPinned();
  void setCurrent(Snapshot s);
  [[nodiscard]] bool pinned() const { return pinned_.has_value(); }
  [[nodiscard]] const std::optional<Snapshot>& pinnedSnapshot() const { return pinned_; }
  [[nodiscard]] const Snapshot& currentSnapshot() const { return current_; }

  /// The row of a quantity key ("step_time", "tokens_per_s", "mfu", "memory", "time_to_train", "price", "cost", "ttft",
  /// "itl", "serving_gpus", "cost_per_mtok"), -1 when unknown.
  [[nodiscard]] int rowOf(const QString& key) const;
  /// current − pinned and (current − pinned) / pinned of a row; nullopt when either side lacks the number.
  [[nodiscard]] std::optional<double> delta(int row) const;
  [[nodiscard]] std::optional<double> deltaPct(int row) const;
  /// Why the cost rows of A and B are not comparable as they stand (one priced on-demand, the other spot:
  /// app::mixed_price_note); "" when they are. While it is set, the cost cells name their price kind, the cost deltas
  /// name both kinds and carry no better/worse colour, and the tooltip says why (#22 deliverable 3).
  [[nodiscard]] std::string priceNote() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  enum class Unit { text, seconds, rate, ratio, bytes, usd, count, usd_per_mtok };
  struct Row {
    const char* key;
    const char* label;
    Unit unit;
    bool lower_is_better;
    std::optional<double> Snapshot::*field;  ///< nullptr for the text rows
    std::string Snapshot::*text;
    bool cost = false;  ///< a money row: its values depend on the price and its kind
  };
  static const std::vector<Row>& rows();
  [[nodiscard]] QString format(const Row& r, double v) const;

  std::optional<Snapshot> pinned_;
  Snapshot current_;
};

}  // namespace gpuplan::gui
