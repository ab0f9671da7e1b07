// The training panel's and the serving page's labels, tooltips, ranges and choices come from the field tables
// (wl_io/scenario_fields.hpp, issue #20 d2): a label written by hand in a page, or a diagnostics label map beside the
// table, fails here.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QGridLayout>
#include <QFormLayout>
#include <QLabel>
#include <QSpinBox>

#include "gpuplan/wl_io/scenario_fields.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
#include "scenario_panel.hpp"
#include "serving_page.hpp"
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
/// The label left of a widget in its page's grid (the serving page's layout: label, widget, label, widget, ...).
QString grid_label(const QWidget& page, QWidget* w) {
  for (auto* grid : page.findChildren<QGridLayout*>()) {
    const int at = grid->indexOf(w);
    if (at < 0) continue;
    int row = 0, col = 0, rs = 0, cs = 0;
    grid->getItemPosition(at, &row, &col, &rs, &cs);
    // Eight columns: a label and its widget may wrap onto the next row.
    const int prev = row * grid->columnCount() + col - 1;
    QLayoutItem* item = prev >= 0 ? grid->itemAtPosition(prev / grid->columnCount(), prev % grid->columnCount()) : nullptr;
    if (item != nullptr)
      if (auto* l = qobject_cast<QLabel*>(item->widget())) return l->text();
  }
  return {};
}
}  // namespace

TEST_CASE("every serving page input shows the serving table's label and tooltip, range and choices") {
  gui::ServingPage page(gui::test::data());
  int keyed = 0;
  for (const auto& f : wl_io::serving_fields()) {
    auto* w = page.findChild<QWidget*>(QString::fromStdString(f.key()));
    if (w == nullptr) continue;  // a key the page has no widget for
    ++keyed;
    CAPTURE(f.key());
    CHECK(grid_label(page, w).toStdString() == f.label);
    CHECK(w->toolTip().toStdString().rfind(f.tooltip(), 0) == 0);
    const bool ranged = f.spec.min != 0.0 || f.spec.max != 0.0;
    if (auto* s = qobject_cast<QSpinBox*>(w); s != nullptr && ranged) {
      CHECK(s->minimum() == int(f.spec.min));
      CHECK(s->maximum() == int(f.spec.max));
    }
    if (auto* d = qobject_cast<QDoubleSpinBox*>(w); d != nullptr && ranged) {
      CHECK(d->minimum() == f.spec.min);
      CHECK(d->maximum() == f.spec.max);
    }
    if (auto* c = qobject_cast<QComboBox*>(w); c != nullptr && !f.spec.choices.empty()) {
      REQUIRE(c->count() == int(f.spec.choices.size()));
      for (int i = 0; i < c->count(); ++i) CHECK(c->itemData(i).toString().toStdString() == f.spec.choices[std::size_t(i)]);
    }
  }
  // model, gpu, tp, batch, weight_dtype, kv_dtype, input_tokens, output_tokens, rate, ttft_ms, itl_ms.
  CHECK(keyed == 11);
  auto* tp = page.findChild<QSpinBox*>("tp");
  REQUIRE(tp != nullptr);
  CHECK(tp->maximum() == 1024);
  CHECK(wl_io::serving_key_label("input_tokens") == "Prompt");
}

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

TEST_CASE("every training picker offers the table's choices, and a loaded file's value is shown, not replaced") {
  gui::ScenarioPanel panel(gui::test::data());
  int pickers = 0;
  for (const auto& f : wl_io::training_fields()) {
    auto* c = panel.findChild<QComboBox*>(QString::fromStdString(f.key()));
    if (c == nullptr || f.spec.choices.empty()) continue;
    ++pickers;
    const std::string key = f.key();
    CAPTURE(key);
    std::vector<std::string> offered;
    for (int i = 0; i < c->count(); ++i) offered.push_back(c->itemData(i).toString().toStdString());
    std::vector<std::string> wanted = f.picker_choices();
    std::sort(offered.begin(), offered.end());
    std::sort(wanted.begin(), wanted.end());
    CHECK(offered == wanted);
  }
  // precision, optimizer, optimizer_states, recompute, schedule, offload, lora_targets, lora_base.
  CHECK(pickers == 8);
  // The GUI offered no DualPipe and no FP4 until 2026-11-29: a loaded DeepSeek-V3 file showed (and recomputed) 1F1B.
  Diagnostics diags;
  const auto raw = json_io::parse(R"({"model": "deepseek-v3", "gpu": "h800", "gpus": 2048, "pp": 16, "ep": 64,
      "schedule": "dualpipe", "precision": "fp4", "optimizer": "adam", "micro_batch": 1, "global_batch": 15360,
      "seq": 4096})", "test.json", diags);
  REQUIRE(raw.has_value());
  auto s = wl_io::decode_training_scenario(*raw, "test.json");
  REQUIRE(s.ok());
  panel.setScenario(s.value(), *raw);
  const auto out = panel.scenario();
  CHECK(out.value("schedule", "") == "dualpipe");
  CHECK(out.value("precision", "") == "fp4");
  CHECK(out.value("optimizer", "") == "adamw");  // Megatron-LM's "adam", shown as the adamw it means
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
