#pragma once
// The explain tree: a QAbstractItemModel over derivation trees (gpuplan/core/derivation.hpp). A derivation row
// shows title, result and formula; its children are first its substituted inputs (symbol and meaning, value with
// unit, origin: datasheet file + JSON pointer, calibration profile, user input, assumption) and then its
// sub-derivations. The model only adapts: every string comes from the derivation as the model built it.
#include <memory>
#include <vector>

#include <QAbstractItemModel>

#include "gpuplan/core/derivation.hpp"

namespace gpuplan::gui {

class DerivationModel : public QAbstractItemModel {
  Q_OBJECT
 public:
  enum Column { kQuantity = 0, kValue = 1, kFormula = 2, kColumnCount = 3 };
  enum Role { IdRole = Qt::UserRole + 1, KindRole, DetailsRole };  ///< KindRole: "derivation" | "input"

  explicit DerivationModel(QObject* parent = nullptr);

  /// Replaces the trees shown (each root becomes a top-level row).
  void setRoots(std::vector<Derivation> roots);
  [[nodiscard]] const std::vector<Derivation>& roots() const { return roots_; }

  /// The row of the derivation with this id (depth-first, first match), or an invalid index.
  [[nodiscard]] QModelIndex indexForId(const QString& id) const;

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override;
  QModelIndex parent(const QModelIndex& child) const override;
  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;
  Qt::ItemFlags flags(const QModelIndex& index) const override;

 private:
  struct Node {
    int parent = -1;  ///< index into nodes_, -1 for top level
    int row = 0;      ///< row within the parent
    const Derivation* derivation = nullptr;
    const DerivationInput* input = nullptr;
    std::vector<int> children;
  };
  int add(int parent, int row, const Derivation* d, const DerivationInput* in);
  void build(int node);
  [[nodiscard]] const Node* node_of(const QModelIndex& i) const;
  [[nodiscard]] QString details(const Node& n) const;

  std::vector<Derivation> roots_;
  std::vector<Node> nodes_;
  std::vector<int> top_;
};

}  // namespace gpuplan::gui
