// The Interview drills tab (gui/pages/drills_page.*, gui/models/drill_list_model.*): the drill list under
// QAbstractItemModelTester (also through the topic filter), and the page offscreen: a right answer says "correct",
// a wrong one "wrong", bad input says why without scoring, Reveal shows the answer and the derivation.
#include <doctest/doctest.h>

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QTabWidget>
#include <QTreeView>

#include "derivation_model.hpp"
#include "drill_list_model.hpp"
#include "drills_page.hpp"
#include "explain_pane.hpp"
#include "main_window.hpp"
#include "support.hpp"

using namespace gpuplan;
using gui::DrillListModel;
using gui::DrillsPage;

namespace {
app::DrillSet shipped() {
  const auto d = gui::test::data();
  REQUIRE(d != nullptr);
  auto s = app::load_drills(d->data_dir + "/drills/textbook.json", "data/drills/textbook.json",
                            {&d->library, &d->db, ""});
  REQUIRE_MESSAGE(s.ok(), s.diagnostics().to_string());
  return s.value();
}

void answer(DrillsPage& p, const char* id, const char* text) {
  REQUIRE(p.selectDrill(id));
  REQUIRE(p.currentId() == id);
  p.answerEdit()->setText(text);
  p.checkButton()->click();
}
}  // namespace

TEST_CASE("the drill list passes QAbstractItemModelTester through a reset, outcomes and the topic filter") {
  DrillListModel m;
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  QSortFilterProxyModel proxy;
  proxy.setSourceModel(&m);
  proxy.setFilterRole(DrillListModel::TopicRole);
  QAbstractItemModelTester proxy_tester(&proxy, QAbstractItemModelTester::FailureReportingMode::Fatal);
  CHECK(m.rowCount() == 0);
  m.setDrills(shipped());
  REQUIRE(m.rowCount() >= 30);
  CHECK(m.columnCount() == DrillListModel::kColumnCount);
  const int t1 = m.rowOf("T1");
  REQUIRE(t1 >= 0);
  CHECK(m.index(t1, DrillListModel::kTopic).data().toString() == "roofline");
  CHECK(m.index(t1, DrillListModel::kQuestion).data().toString().contains("A100"));
  CHECK(m.index(t1, DrillListModel::kOutcome).data().toString().isEmpty());
  m.setOutcome(t1, DrillListModel::Outcome::right);
  CHECK(m.index(t1, DrillListModel::kOutcome).data().toString() == "✓");
  CHECK(m.count(DrillListModel::Outcome::right) == 1);
  proxy.setFilterRegularExpression("^kv-cache$");
  CHECK(proxy.rowCount() > 0);
  CHECK(proxy.rowCount() < m.rowCount());
  for (int r = 0; r < proxy.rowCount(); ++r) CHECK(proxy.index(r, 0).data(DrillListModel::TopicRole) == "kv-cache");
  m.setDrills(shipped());  // a reset clears the outcomes
  CHECK(m.count(DrillListModel::Outcome::right) == 0);
  CHECK(m.rowOf("no such drill") == -1);
}

TEST_CASE("offscreen drills: the right answer is correct, a wrong one is wrong, and the derivation is shown after a check") {
  DrillsPage p(gui::test::data());
  p.resize(1100, 700);
  p.show();
  REQUIRE(p.model()->rowCount() >= 30);
  // Before answering, nothing is given away.
  REQUIRE(p.selectDrill("T1"));
  CHECK(p.unitLabel()->text() == "FLOP/B");
  CHECK_FALSE(p.explain()->isVisible());
  CHECK(p.answerLabel()->text().isEmpty());

  answer(p, "T1", "156");
  CHECK(p.verdictLabel()->text().contains("correct"));
  CHECK(p.explain()->isVisible());
  CHECK(p.explain()->model()->indexForId("roofline.ridge").isValid());
  CHECK(p.answerLabel()->text().contains("156 FLOP/B"));
  CHECK(p.scoreLabel()->text().contains("<b>1</b> right of 1 tried"));

  answer(p, "T2-H100", "291");  // the common wrong answer (3.4 TB/s)
  CHECK(p.verdictLabel()->text().contains("wrong"));
  CHECK(p.verdictLabel()->text().contains("-1.4%"));
  CHECK(p.verdictLabel()->text().contains("common mistake"));
  CHECK(p.scoreLabel()->text().contains("<b>1</b> right of 2 tried"));

  // Units convert; bad input says why and does not count.
  answer(p, "T5", "112e9 B");
  CHECK(p.verdictLabel()->text().contains("correct"));
  answer(p, "T20", "4 GB");
  CHECK(p.verdictLabel()->text().contains("is a unit of bytes"));
  answer(p, "T20", "fast");
  CHECK(p.verdictLabel()->text().contains("is not a number"));
  CHECK(p.scoreLabel()->text().contains("<b>2</b> right of 3 tried"));
  CHECK_FALSE(p.explain()->isVisible());
}

TEST_CASE("offscreen drills: Reveal shows the model's answer and derivation without checking, and the topic filter narrows") {
  DrillsPage p(gui::test::data());
  REQUIRE(p.selectDrill("T22"));
  p.revealButton()->click();
  CHECK(p.verdictLabel()->text().isEmpty());
  CHECK(p.answerLabel()->text().contains("Model's answer: 22.75 GB"));
  CHECK(p.answerLabel()->text().contains("Where the model differs"));
  CHECK(p.explain()->model()->indexForId("drill.model_states").isValid());
  CHECK(p.model()->outcome(p.model()->rowOf("T22")) == DrillListModel::Outcome::revealed);
  CHECK(p.scoreLabel()->text().contains("1 revealed"));
  // A right answer after revealing stays "revealed".
  answer(p, "T22", "22.75");
  CHECK(p.verdictLabel()->text().contains("correct"));
  CHECK(p.model()->outcome(p.model()->rowOf("T22")) == DrillListModel::Outcome::revealed);

  const int all = p.proxy()->rowCount();
  const int i = p.topicCombo()->findData("collectives");
  REQUIRE(i > 0);
  p.topicCombo()->setCurrentIndex(i);
  CHECK(p.proxy()->rowCount() < all);
  CHECK(p.proxy()->rowCount() >= 3);
  // The current drill follows the filter.
  CHECK(p.model()->drill(p.model()->rowOf(p.currentId()))->topic == "collectives");
  REQUIRE(p.selectDrill("T1"));                     // selecting a hidden drill clears the filter
  CHECK(p.topicCombo()->currentIndex() == 0);
  CHECK_FALSE(p.selectDrill("nope"));
}

TEST_CASE("the main window has an Interview drills tab") {
  gui::MainWindow w(gui::test::data());
  REQUIRE(w.drillsPage() != nullptr);
  const int i = w.tabs()->indexOf(w.drillsPage());
  REQUIRE(i >= 0);
  CHECK(w.tabs()->tabText(i) == "Interview drills");
  REQUIRE(gui::test::wait_until([&] { return w.idle(); }));
}
