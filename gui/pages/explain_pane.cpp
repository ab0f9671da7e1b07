#include "explain_pane.hpp"

#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QSplitter>
#include <QTextBrowser>
#include <QTreeView>
#include <QVBoxLayout>

#include "derivation_model.hpp"

namespace gpuplan::gui {

ExplainPane::ExplainPane(QWidget* parent) : QWidget(parent), model_(new DerivationModel(this)) {
  tree_ = new QTreeView;
  tree_->setModel(model_);
  tree_->setUniformRowHeights(true);
  tree_->setAlternatingRowColors(true);
  tree_->setSelectionBehavior(QAbstractItemView::SelectRows);
  tree_->header()->setStretchLastSection(true);
  tree_->setColumnWidth(DerivationModel::kQuantity, 190);
  tree_->setColumnWidth(DerivationModel::kValue, 105);
  details_ = new QTextBrowser;
  details_->setOpenLinks(false);
  auto* title = new QLabel(tr("<b>Explain</b> — every number with its formula, inputs and sources. "
                              "Click a number or a bar to find it here."));
  title->setWordWrap(true);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(tree_);
  split->addWidget(details_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(4, 4, 4, 4);
  l->addWidget(title);
  l->addWidget(split, 1);
  connect(tree_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this](const QModelIndex& cur) {
    const QString id = cur.data(DerivationModel::IdRole).toString();
    if (!id.isEmpty()) selected_ = id;
    showDetails();
  });
}

void ExplainPane::setDerivations(std::vector<Derivation> roots) {
  const QString keep = selected_;
  model_->setRoots(std::move(roots));
  tree_->expandToDepth(0);
  if (keep.isEmpty() || !selectId(keep)) {
    if (model_->rowCount() > 0) tree_->setCurrentIndex(model_->index(0, 0));
  }
  showDetails();
}

bool ExplainPane::selectId(const QString& id) {
  const QModelIndex i = model_->indexForId(id);
  if (!i.isValid()) return false;
  for (QModelIndex p = i.parent(); p.isValid(); p = p.parent()) tree_->expand(p);
  tree_->expand(i);
  tree_->setCurrentIndex(i);
  tree_->scrollTo(i, QAbstractItemView::PositionAtTop);
  selected_ = id;
  showDetails();
  return true;
}

void ExplainPane::showDetails() {
  const QModelIndex cur = tree_->currentIndex();
  details_->setHtml(cur.isValid() ? cur.data(DerivationModel::DetailsRole).toString()
                                  : tr("<p>No derivation yet.</p>"));
}

}  // namespace gpuplan::gui
