#pragma once
// Compare mode: "Pin" keeps the current results as A; every later edit is B; the table shows A, B and B − A for the
// headline numbers (CompareModel). "Unpin" clears A.
#include <QWidget>

class QLabel;
class QPushButton;
class QTableView;

namespace gpuplan::gui {

class CompareModel;

class ComparePage : public QWidget {
  Q_OBJECT
 public:
  explicit ComparePage(QWidget* parent = nullptr);
  [[nodiscard]] CompareModel* model() const { return model_; }
  [[nodiscard]] QTableView* table() const { return table_; }
  [[nodiscard]] QPushButton* pinButton() const { return pin_; }
  [[nodiscard]] QPushButton* unpinButton() const { return unpin_; }
  /// Refreshes the hint and the buttons after the model's pinned state changed.
  void refresh();
 signals:
  void pinRequested();
  void unpinRequested();

 private:
  CompareModel* model_;
  QTableView* table_;
  QPushButton *pin_, *unpin_;
  QLabel* hint_;
};

}  // namespace gpuplan::gui
