#include "sim_stats_model.hpp"

#include "gpuplan/core/format.hpp"

namespace gpuplan::gui {

SimStatsModel::SimStatsModel(QObject* parent) : QAbstractTableModel(parent) {}

void SimStatsModel::setResult(const model::SimResult& r) {
  beginResetModel();
  stats_ = {r.ttft, r.itl, r.tpot, r.e2e};
  has_ = true;
  endResetModel();
}

void SimStatsModel::clear() {
  beginResetModel();
  stats_ = {};
  has_ = false;
  endResetModel();
}

int SimStatsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() || !has_ ? 0 : kRowCount; }
int SimStatsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QVariant SimStatsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || !has_ || index.row() < 0 || index.row() >= kRowCount || index.column() < 0 ||
      index.column() >= kColumnCount)
    return {};
  const auto& s = stats_[std::size_t(index.row())];
  const double v = index.column() == kMean  ? s.mean
                   : index.column() == kP50 ? s.p50
                   : index.column() == kP90 ? s.p90
                   : index.column() == kP99 ? s.p99
                   : index.column() == kMax ? s.max
                                            : double(s.samples);
  if (role == RawRole) return index.column() == kSamples ? QVariant(qlonglong(s.samples)) : QVariant(v);
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  if (index.column() == kSamples) return QString::number(s.samples);
  if (s.samples == 0) return QStringLiteral("—");
  return QString::fromStdString(units::format(units::Seconds(v)));
}

QVariant SimStatsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Horizontal) {
    static const char* const cols[] = {"mean", "p50", "p90", "p99", "max", "samples"};
    return section >= 0 && section < kColumnCount ? tr(cols[section]) : QVariant();
  }
  static const char* const rows[] = {"TTFT", "ITL (token gaps)", "TPOT (per request)", "E2E"};
  return section >= 0 && section < kRowCount ? tr(rows[section]) : QVariant();
}

}  // namespace gpuplan::gui
