// The training panel's labels, tooltips and ranges come from the training field table (wl_io/scenario_fields.hpp,
// issue #20 d2): a label written by hand in the panel, or a diagnostics label map beside the table, fails here.
#include <doctest/doctest.h>

#include <QCheckBox>
#include <QFormLayout>
#include <QLabel>
#include <QSpinBox>

#include "gpuplan/wl_io/scenario_fields.hpp"
#include "scenario_panel.hpp"
#include "support.hpp"
#include "training_job.hpp"

using namespace gpuplan;

namespace {
/// The text the panel shows as a widget's label: a check box's own text, else its form row's label.
QString shown_label(QWidget* w) {
  if (auto* c = qobject_cast<QCheckBox*>(w)) return c->text();
  for (QWidget* p = w->parentWidget(); p != nullptr; p = p->parentWidget())
    if (auto* form = qobject_cast<QFormLayout*>(p->layout()))
      if (auto* l = qobject_cast<QLabel*>(form->labelForField(w))) return l->text();
  return {};
}
}  // namespace

TEST_CASE("every training panel input shows the field table's label and tooltip and takes the table's range") {
  gui::ScenarioPanel panel(gui::test::data());
  int keyed = 0;
  for (const auto& f : wl_io::training_fields()) {
    auto* w = panel.findChild<QWidget*>(QString::fromStdString(f.key()));
    if (w == nullptr) continue;  // a key the panel has no widget for (kept as loaded)
    ++keyed;
    CAPTURE(f.key());
    CHECK(shown_label(w).toStdString() == f.label);
    if (f.key() != "dp") CHECK(w->toolTip().toStdString().rfind(f.tooltip(), 0) == 0);  // dp: shown as resolved
    if (auto* s = qobject_cast<QSpinBox*>(w)) {
      CHECK(s->minimum() == int(f.spec.min));
      CHECK(s->maximum() == int(f.spec.max));
    }
  }
  // The 31 keys the panel owned before the table (model ... fp8_params, dp shown as resolved).
  CHECK(keyed == 31);
  auto* tp = panel.findChild<QSpinBox*>("tp");
  REQUIRE(tp != nullptr);
  CHECK(tp->toolTip().toStdString() == "tensor parallel (default: 1)\nscenario key \"tp\", flag --tp");
}

TEST_CASE("diagnostics name a scenario key by the field table's label, and an unknown key by itself") {
  for (const auto& f : wl_io::training_fields()) {
    CAPTURE(f.key());
    CHECK(gui::scenario_key_label(f.key()) == f.label);
  }
  CHECK(gui::scenario_key_label("tp") == "TP");
  CHECK(gui::scenario_key_label("price_usd_per_hour") == "$/GPU-h");
  CHECK(gui::scenario_key_label("no_such_key") == "no_such_key");
}
