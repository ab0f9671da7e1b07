#pragma once
// What the pages share to show a scenario field table's row (gpuplan/wl_io/scenario_fields.hpp): the row of a key,
// the control named after its key (tests find it so) with the table's tooltip, and the table's label.
#include <cassert>

#include <QLabel>
#include <QString>
#include <QWidget>

#include "gpuplan/wl_io/scenario_fields.hpp"

namespace gpuplan::gui {

/// The row of `key` in `table`: a page names only keys of its table.
inline const wl_io::ScenarioField& field_row(const wl_io::ScenarioFieldTable& table, const char* key) {
  const wl_io::ScenarioField* f = wl_io::find_field(table, key);
  assert(f != nullptr && "a page's control names a key of its field table");
  return *f;
}

/// Names `w` after its key and gives it the table's tooltip, then what the page adds (`note`).
inline void keyed(QWidget* w, const wl_io::ScenarioField& f, const QString& note = {}) {
  w->setObjectName(QString::fromStdString(f.key()));
  QString tip = QString::fromStdString(f.tooltip());
  if (!note.isEmpty()) tip += "\n" + note;
  w->setToolTip(tip);
}

/// The row's GUI label.
inline QLabel* field_label(const wl_io::ScenarioField& f) { return new QLabel(QString::fromStdString(f.label)); }

}  // namespace gpuplan::gui
