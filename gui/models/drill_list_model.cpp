#include "drill_list_model.hpp"

#include <algorithm>

#include <QBrush>
#include <QColor>

namespace gpuplan::gui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

DrillListModel::DrillListModel(QObject* parent) : QAbstractTableModel(parent) {}

void DrillListModel::setDrills(app::DrillSet set) {
  beginResetModel();
  set_ = std::move(set);
  outcomes_.assign(set_.drills.size(), Outcome::none);
  endResetModel();
}

const app::Drill* DrillListModel::drill(int row) const {
  return row >= 0 && row < int(set_.drills.size()) ? &set_.drills[std::size_t(row)] : nullptr;
}

int DrillListModel::rowOf(const QString& id) const {
  for (std::size_t i = 0; i < set_.drills.size(); ++i)
    if (q(set_.drills[i].id) == id) return int(i);
  return -1;
}

void DrillListModel::setOutcome(int row, Outcome o) {
  if (row < 0 || row >= int(outcomes_.size()) || outcomes_[std::size_t(row)] == o) return;
  outcomes_[std::size_t(row)] = o;
  emit dataChanged(index(row, 0), index(row, kColumnCount - 1));
}

DrillListModel::Outcome DrillListModel::outcome(int row) const {
  return row >= 0 && row < int(outcomes_.size()) ? outcomes_[std::size_t(row)] : Outcome::none;
}

int DrillListModel::count(Outcome o) const { return int(std::count(outcomes_.begin(), outcomes_.end(), o)); }

int DrillListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(set_.drills.size());
}

int DrillListModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant DrillListModel::data(const QModelIndex& index, int role) const {
  const app::Drill* d = index.isValid() ? drill(index.row()) : nullptr;
  if (d == nullptr || index.column() < 0 || index.column() >= kColumnCount) return {};
  const Outcome o = outcome(index.row());
  switch (role) {
    case IdRole: return q(d->id);
    case TopicRole: return q(d->topic);
    case OutcomeRole: return int(o);
    case Qt::ToolTipRole: return q(d->question + "\n(" + d->source + ")");
    case Qt::DisplayRole:
      switch (index.column()) {
        case kId: return q(d->id);
        case kTopic: return q(d->topic);
        case kQuestion: return q(d->question);
        case kOutcome:
          switch (o) {
            case Outcome::right: return QStringLiteral("✓");
            case Outcome::wrong: return QStringLiteral("✗");
            case Outcome::revealed: return tr("shown");
            case Outcome::none: return QString();
          }
      }
      return {};
    case Qt::ForegroundRole:
      if (index.column() == kOutcome && o == Outcome::right) return QBrush(QColor("#2e7d32"));
      if (index.column() == kOutcome && o == Outcome::wrong) return QBrush(QColor("#b00020"));
      return {};
    default: return {};
  }
}

QVariant DrillListModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case kId: return tr("Drill");
    case kTopic: return tr("Topic");
    case kQuestion: return tr("Question");
    case kOutcome: return tr("Result");
    default: return {};
  }
}

}  // namespace gpuplan::gui
