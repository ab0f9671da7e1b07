#pragma once
// The interview drills as a table: id, topic, question and the session's outcome of each drill. A
// QSortFilterProxyModel on TopicRole filters by topic. The model only adapts the decoded drill file
// (app/drills.hpp); the answers are computed by the model library when the page checks or reveals one.
#include <vector>

#include <QAbstractTableModel>

#include "gpuplan/app/drills.hpp"

namespace gpuplan::gui {

class DrillListModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kId = 0, kTopic, kQuestion, kOutcome, kColumnCount };
  enum Role { IdRole = Qt::UserRole + 1, TopicRole, OutcomeRole };
  /// A drill's outcome in this session: its latest check, or revealed before it was answered right.
  enum class Outcome { none, right, wrong, revealed };

  explicit DrillListModel(QObject* parent = nullptr);

  void setDrills(app::DrillSet set);  ///< resets the outcomes
  [[nodiscard]] const app::DrillSet& drills() const { return set_; }
  [[nodiscard]] const app::Drill* drill(int row) const;
  [[nodiscard]] int rowOf(const QString& id) const;  ///< -1 when absent

  void setOutcome(int row, Outcome o);
  [[nodiscard]] Outcome outcome(int row) const;
  [[nodiscard]] int count(Outcome o) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  app::DrillSet set_;
  std::vector<Outcome> outcomes_;
};

}  // namespace gpuplan::gui
