#pragma once
// The serving simulation's latency table: TTFT, ITL (every token gap), TPOT (per request) and E2E by mean, p50, p90,
// p99 and max, as model::simulate_serving returned them (LatencyStats), with the sample counts. Display text is
// formatted with units; RawRole holds the number itself (seconds, or the count).
#include <array>

#include <QAbstractTableModel>

#include "gpuplan/model/simulate.hpp"

namespace gpuplan::gui {

class SimStatsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Row { kTtft = 0, kItl, kTpot, kE2e, kRowCount };
  enum Column { kMean = 0, kP50, kP90, kP99, kMax, kSamples, kColumnCount };
  enum Role { RawRole = Qt::UserRole + 1 };

  explicit SimStatsModel(QObject* parent = nullptr);
  /// The four latencies of `r`; clear() empties the table.
  void setResult(const model::SimResult& r);
  void clear();

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::array<model::LatencyStats, kRowCount> stats_{};
  bool has_ = false;
};

}  // namespace gpuplan::gui
