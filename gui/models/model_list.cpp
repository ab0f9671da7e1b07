#include "model_list.hpp"

#include <QFont>
#include <QStandardItemModel>

namespace gpuplan::gui {
namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
/// The index of the first entry after the released group (the separator), or count() when there is none.
int end_of_released(const QComboBox* combo) {
  for (int i = 0; i < combo->count(); ++i) {
    const QVariant k = combo->itemData(i, kModelKindRole);
    if (!k.isValid() || ModelKind(k.toInt()) == ModelKind::heading || ModelKind(k.toInt()) == ModelKind::benchmark_shape)
      return i;
  }
  return combo->count();
}
}  // namespace

void fill_model_combo(QComboBox* combo, const wl_io::ModelLibrary& lib) {
  combo->clear();
  auto add = [combo](const wl_io::ModelEntry& m, ModelKind kind) {
    combo->addItem(q(m.arch.name.empty() ? m.arch.id : m.arch.name), q(m.arch.id));
    combo->setItemData(combo->count() - 1, int(kind), kModelKindRole);
    if (!m.hf_repo.empty()) combo->setItemData(combo->count() - 1, q(m.hf_repo), Qt::ToolTipRole);
  };
  for (const auto& m : lib.models)
    if (!m.benchmark_shape) add(m, ModelKind::released);
  bool heading = false;
  for (const auto& m : lib.models) {
    if (!m.benchmark_shape) continue;
    if (!heading) {
      combo->insertSeparator(combo->count());
      combo->addItem(QObject::tr("Benchmark and paper shapes (not released models)"));
      const int h = combo->count() - 1;
      combo->setItemData(h, int(ModelKind::heading), kModelKindRole);
      if (auto* sm = qobject_cast<QStandardItemModel*>(combo->model())) {
        QStandardItem* item = sm->item(h);
        item->setFlags(item->flags() & ~(Qt::ItemIsSelectable | Qt::ItemIsEnabled));
        QFont f = item->font();
        f.setBold(true);
        item->setFont(f);
      }
      heading = true;
    }
    add(m, ModelKind::benchmark_shape);
  }
}

int add_imported_model(QComboBox* combo, const QString& path, const QString& label) {
  if (const int i = combo->findData(path); i >= 0) return i;
  const int at = end_of_released(combo);
  combo->insertItem(at, label, path);
  combo->setItemData(at, int(ModelKind::imported), kModelKindRole);
  combo->setItemData(at, path, Qt::ToolTipRole);
  return at;
}

ModelKind model_kind(const QComboBox* combo, int index) {
  const QVariant k = combo->itemData(index, kModelKindRole);
  return k.isValid() ? ModelKind(k.toInt()) : ModelKind::heading;  // the separator: not a model
}

}  // namespace gpuplan::gui
