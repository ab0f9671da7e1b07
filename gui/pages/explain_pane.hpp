#pragma once
// The explain tree and the selected node's details (formula, substituted inputs with units and sources, notes).
#include <vector>

#include <QWidget>

#include "gpuplan/core/derivation.hpp"

class QTextBrowser;
class QTreeView;

namespace gpuplan::gui {

class DerivationModel;

class ExplainPane : public QWidget {
  Q_OBJECT
 public:
  explicit ExplainPane(QWidget* parent = nullptr);
  /// Replaces the trees; the selected node is kept (by id) when it still exists.
  void setDerivations(std::vector<Derivation> roots);
  /// Selects, expands to and scrolls to the derivation `id`; false when it is not in the tree.
  bool selectId(const QString& id);
  [[nodiscard]] DerivationModel* model() const { return model_; }
  [[nodiscard]] QTreeView* tree() const { return tree_; }
  [[nodiscard]] QString selectedId() const { return selected_; }

 private:
  void showDetails();
  DerivationModel* model_;
  QTreeView* tree_;
  QTextBrowser* details_;
  QString selected_;
};

}  // namespace gpuplan::gui
