#include <doctest/doctest.h>

#include <QAbstractItemModelTester>
#include <QTreeView>

#include "derivation_model.hpp"
#include "explain_pane.hpp"
#include "support.hpp"
#include "training_job.hpp"

using namespace gpuplan;
using gpuplan::gui::DerivationModel;

namespace {
Derivation small_tree() {
  Derivation root{"a", "Root", "x = y + z", {{"y", "1 s", "first", Origin::user("--y")}, {"z", "2 s", "second", Origin::assumption("guess")}},
                  "3 s", {"a note"}, {}};
  root.children.push_back(Derivation{"a.b", "Child", "y = 1", {{"k", "1", "constant", Origin::constant("")}}, "1 s", {}, {}});
  root.children[0].children.push_back(Derivation{"a.b.c", "Grandchild", "", {}, "0", {}, {}});
  return root;
}
}  // namespace

TEST_CASE("the explain tree passes QAbstractItemModelTester through resets, on a hand-made and on a real derivation") {
  DerivationModel m;
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  m.setRoots({small_tree()});
  CHECK(m.rowCount() == 1);
  const QModelIndex root = m.index(0, 0);
  // Inputs first, then sub-derivations.
  REQUIRE(m.rowCount(root) == 3);
  CHECK(m.index(0, DerivationModel::kQuantity, root).data().toString() == "y — first");
  CHECK(m.index(0, DerivationModel::kValue, root).data().toString() == "1 s");
  CHECK(m.index(0, DerivationModel::kFormula, root).data().toString() == "user plan: --y");
  CHECK(m.index(1, DerivationModel::kFormula, root).data().toString() == "assumption: guess");
  CHECK(m.index(2, 0, root).data().toString() == "Child");
  CHECK(m.index(0, DerivationModel::kFormula).data().toString() == "x = y + z");
  CHECK(m.index(0, 0, root).data(DerivationModel::KindRole).toString() == "input");
  CHECK(m.rowCount(m.index(0, 1)) == 0);  // only column 0 has children

  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::TrainingRequest req;
  req.scenario = {{"model", "llama-3.1-70b"}, {"gpu", "h100"}, {"gpus", 1024}, {"tp", 8}, {"pp", 4},
                  {"global_batch", 1024}, {"seq", 8192}, {"tokens", 15e12}};
  req.scaling = false;
  const auto r = gui::evaluate_training(*data, req);
  REQUIRE(r.valid);
  REQUIRE(!r.gpus_evaluated.empty());
  m.setRoots({r.gpus_evaluated[0].est.derivation, r.rooflines[0].ridge});
  CHECK(m.rowCount() == 2);
  m.setRoots({});
  CHECK(m.rowCount() == 0);
  m.setRoots({r.gpus_evaluated[0].est.derivation});
}

TEST_CASE("the explain tree finds every derivation by id, and a missing id gives an invalid index") {
  DerivationModel m;
  m.setRoots({small_tree()});
  const QModelIndex c = m.indexForId("a.b.c");
  REQUIRE(c.isValid());
  CHECK(c.data().toString() == "Grandchild");
  CHECK(c.parent().data().toString() == "Child");
  CHECK(c.parent().parent().data().toString() == "Root");
  CHECK(m.indexForId("a.b").data(DerivationModel::IdRole).toString() == "a.b");
  CHECK_FALSE(m.indexForId("nope").isValid());
  // The details show formula, inputs with their sources, and notes.
  const QString details = m.indexForId("a").data(DerivationModel::DetailsRole).toString();
  CHECK(details.contains("x = y + z"));
  CHECK(details.contains("assumption: guess"));
  CHECK(details.contains("a note"));
}

TEST_CASE("selecting an id in the explain pane expands to it and keeps it across a new result") {
  gui::ExplainPane pane;
  pane.setDerivations({small_tree()});
  REQUIRE(pane.selectId("a.b.c"));
  CHECK(pane.tree()->currentIndex().data().toString() == "Grandchild");
  CHECK(pane.tree()->isExpanded(pane.model()->indexForId("a.b")));
  pane.setDerivations({small_tree()});  // a new result with the same tree
  CHECK(pane.selectedId() == "a.b.c");
  CHECK(pane.tree()->currentIndex().data().toString() == "Grandchild");
  CHECK_FALSE(pane.selectId("missing"));
}
