#include "compare_model.hpp"

#include <cmath>

#include <QBrush>
#include <QColor>
#include <QFont>

#include <fmt/format.h>

#include "gpuplan/app/output.hpp"
#include "gpuplan/core/format.hpp"

namespace gpuplan::gui {
namespace u = gpuplan::units;

Snapshot snapshot_of(const TrainingResult& t, const ServingResult& s) {
  Snapshot x;
  if (t.valid && !t.gpus_evaluated.empty()) {
    const auto& g = t.gpus_evaluated[0];
    const auto& par = t.plan.par;
    x.title = fmt::format("{} on {} × {}", t.model_name, t.gpus, g.gpu_name);
    x.layout = fmt::format("TP {} · PP {}{} · DP {} · CP {}{} · {} · ZeRO {}", par.tp, par.pp,
                           t.plan.schedule == wl::PipelineSchedule::interleaved ? fmt::format(" (v={})", par.virtual_stages)
                                                                               : std::string(),
                           t.layout_ok ? std::to_string(par.dp) : std::string("?"), par.cp,
                           par.ep > 1 ? fmt::format(" · EP {}", par.ep) : std::string(),
                           hw::to_string(t.plan.precision.compute), static_cast<int>(t.plan.zero));
    const auto& e = g.est;
    if (e.step_time.raw() > 0) {
      x.step_time_s = e.step_time.raw();
      x.tokens_per_s = e.tokens_per_s;
      x.mfu = e.mfu;
      x.memory_bytes = e.memory.total.raw();
      if (e.time_to_train) x.time_to_train_s = e.time_to_train->raw();
      if (e.cost) x.cost_usd = e.cost->raw();
    }
  }
  if (s.valid) {
    x.serving = fmt::format("{} on {}, TP {}, batch {}", s.model_name, s.gpu_name, s.tp, s.batch);
    x.ttft_s = s.ttft_s;
    x.itl_s = s.itl_s;
    if (s.plan && s.plan->best) {
      x.serving += fmt::format("; planner at {:.4g} req/s", s.rate);
      x.serving_gpus = double(s.plan->best->gpus);
      if (s.plan->best->cost_per_mtok_usd > 0) x.cost_per_mtok_usd = s.plan->best->cost_per_mtok_usd;
    }
  }
  // The price both costs were computed at (the training and the serving request price the same GPU).
  const model::TrainingSystem* sys = t.valid && t.resolved ? &t.resolved->sys
                                     : s.valid && s.planner ? &s.planner->sys
                                                            : nullptr;
  if (sys != nullptr) {
    x.price = app::describe_price(sys->price, sys->gpu, "the scenario");
    x.price_kind = app::price_kind(sys->price, sys->gpu).value_or("");
  }
  return x;
}

const std::vector<CompareModel::Row>& CompareModel::rows() {
  static const std::vector<Row> r = {
      {"scenario", "training scenario", Unit::text, false, nullptr, &Snapshot::title},
      {"layout", "layout", Unit::text, false, nullptr, &Snapshot::layout},
      {"step_time", "step time", Unit::seconds, true, &Snapshot::step_time_s, nullptr},
      {"tokens_per_s", "tokens/s", Unit::rate, false, &Snapshot::tokens_per_s, nullptr},
      {"mfu", "MFU", Unit::ratio, false, &Snapshot::mfu, nullptr},
      {"memory", "memory per GPU", Unit::bytes, true, &Snapshot::memory_bytes, nullptr},
      {"time_to_train", "time to train", Unit::seconds, true, &Snapshot::time_to_train_s, nullptr},
      {"price", "price per GPU-hour", Unit::text, false, nullptr, &Snapshot::price},
      {"cost", "cost", Unit::usd, true, &Snapshot::cost_usd, nullptr, true},
      {"serving", "serving", Unit::text, false, nullptr, &Snapshot::serving},
      {"ttft", "TTFT (at the batch)", Unit::seconds, true, &Snapshot::ttft_s, nullptr},
      {"itl", "ITL (at the batch)", Unit::seconds, true, &Snapshot::itl_s, nullptr},
      {"serving_gpus", "GPUs for the rate", Unit::count, true, &Snapshot::serving_gpus, nullptr},
      {"cost_per_mtok", "$ per M output tokens", Unit::usd_per_mtok, true, &Snapshot::cost_per_mtok_usd, nullptr, true},
  };
  return r;
}

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareModel::setPinned(Snapshot s) {
  pinned_ = std::move(s);
  emit dataChanged(index(0, 0), index(rowCount() - 1, kColumnCount - 1));
}

void CompareModel::clearPinned() {
  pinned_.reset();
  emit dataChanged(index(0, 0), index(rowCount() - 1, kColumnCount - 1));
}

void CompareModel::setCurrent(Snapshot s) {
  current_ = std::move(s);
  emit dataChanged(index(0, 0), index(rowCount() - 1, kColumnCount - 1));
}

int CompareModel::rowOf(const QString& key) const {
  const auto& r = rows();
  for (std::size_t i = 0; i < r.size(); ++i)
    if (key == r[i].key) return int(i);
  return -1;
}

std::optional<double> CompareModel::delta(int row) const {
  if (row < 0 || row >= rowCount() || !pinned_) return std::nullopt;
  const auto& r = rows()[std::size_t(row)];
  if (r.field == nullptr) return std::nullopt;
  const auto& a = (*pinned_).*(r.field);
  const auto& b = current_.*(r.field);
  if (!a || !b) return std::nullopt;
  return *b - *a;
}

std::optional<double> CompareModel::deltaPct(int row) const {
  const auto d = delta(row);
  if (!d) return std::nullopt;
  const double a = *((*pinned_).*(rows()[std::size_t(row)].field));
  if (a == 0) return std::nullopt;
  return *d / a;
}

std::string CompareModel::priceNote() const {
  if (!pinned_) return "";
  return app::mixed_price_note({pinned_->price_kind, current_.price_kind});
}

int CompareModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(rows().size()); }
int CompareModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumnCount; }

QString CompareModel::format(const Row& r, double v) const {
  switch (r.unit) {
    case Unit::seconds: return QString::fromStdString(u::format(u::Seconds(v)));
    case Unit::rate: return QString::fromStdString(u::format_number(v, 4));
    case Unit::ratio: return QString::fromStdString(u::format(u::Ratio(v)));
    case Unit::bytes: return QString::fromStdString(u::format(u::Bytes(v), u::BytePrefix::binary));
    case Unit::usd: return QString::fromStdString(u::format(u::Usd(v)));
    case Unit::count: return QString::number(v, 'f', 0);
    case Unit::usd_per_mtok: return QString("$%1").arg(v, 0, 'g', 3);
    case Unit::text: break;
  }
  return {};
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= kColumnCount) return {};
  const auto& r = rows()[std::size_t(index.row())];
  const int col = index.column();
  if (role == KeyRole) return QString(r.key);
  if (role == DeltaRole) {
    const auto d = delta(index.row());
    return d ? QVariant(*d) : QVariant();
  }
  if (role == DeltaPctRole) {
    const auto d = deltaPct(index.row());
    return d ? QVariant(*d) : QVariant();
  }
  if (role == Qt::FontRole && (col == kQuantity || r.unit == Unit::text)) {
    QFont f;
    f.setBold(r.unit == Unit::text);
    return f;
  }
  if (role == Qt::TextAlignmentRole && col != kQuantity && r.unit != Unit::text)
    return int(Qt::AlignRight | Qt::AlignVCenter);
  const std::string note = r.cost ? priceNote() : std::string();
  if (role == Qt::ForegroundRole && (col == kDelta || col == kDeltaPct)) {
    const auto d = delta(index.row());
    if (!d || *d == 0 || !note.empty()) return {};  // spot against on-demand is neither better nor worse
    const bool better = r.lower_is_better ? *d < 0 : *d > 0;
    return QBrush(better ? QColor(0x2e7d32) : QColor(0xb00020));
  }
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
  if (role == Qt::ToolTipRole && !note.empty() && col != kQuantity) return QString::fromStdString(note);
  if (col == kQuantity) return QString(r.label);
  if (r.unit == Unit::text) {
    if (col == kPinned) return pinned_ ? QString::fromStdString((*pinned_).*(r.text)) : QString();
    if (col == kCurrent) return QString::fromStdString(current_.*(r.text));
    return {};
  }
  // With kinds mixed, each cost names its kind ("$423 (spot)") and each delta both ("… (on-demand → spot)").
  auto value = [&](const Snapshot& s) {
    const auto& v = s.*(r.field);
    if (!v) return QString("—");
    return format(r, *v) + (note.empty() ? QString() : QString(" (%1)").arg(QString::fromStdString(s.price_kind)));
  };
  const QString kinds = note.empty() ? QString()
                                     : QString(" (%1 → %2)")
                                           .arg(QString::fromStdString(pinned_->price_kind),
                                                QString::fromStdString(current_.price_kind));
  if (col == kPinned) return pinned_ ? value(*pinned_) : QString();
  if (col == kCurrent) return value(current_);
  if (col == kDelta) {
    const auto d = delta(index.row());
    if (!d) return QString();
    const QString sign = *d > 0 ? "+" : *d < 0 ? "−" : "±";
    return sign + format(r, std::fabs(*d)) + kinds;
  }
  const auto p = deltaPct(index.row());
  if (!p) return QString();
  return QString("%1%2%").arg(*p > 0 ? "+" : *p < 0 ? "−" : "±").arg(std::fabs(*p) * 100.0, 0, 'f', 1) + kinds;
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Vertical) return section + 1;
  switch (section) {
    case kQuantity: return tr("quantity");
    case kPinned: return tr("pinned (A)");
    case kCurrent: return tr("current (B)");
    case kDelta: return tr("Δ = B − A");
    case kDeltaPct: return tr("Δ %");
    default: return {};
  }
}

}  // namespace gpuplan::gui
