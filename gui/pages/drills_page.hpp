#pragma once
// Interview drills: worked questions from data/drills/textbook.json. Pick a drill (filtered by topic), read the
// question, type an answer in the unit shown and press Check: the verdict with the relative error, then the model's
// answer and its derivation tree (formula, substituted inputs, units, sources). Reveal shows the answer without
// checking. The answer is computed by the model library (app::answer_drill), never stored in the GUI.
#include <memory>
#include <optional>

#include <QWidget>

#include "app_data.hpp"
#include "gpuplan/app/drills.hpp"

class QComboBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QSortFilterProxyModel;
class QTreeView;

namespace gpuplan::gui {

class DrillListModel;
class ExplainPane;

class DrillsPage : public QWidget {
  Q_OBJECT
 public:
  explicit DrillsPage(std::shared_ptr<const AppData> data, QWidget* parent = nullptr);

  /// Selects the drill `id` (clearing the topic filter if it hides it); false when there is no such drill.
  bool selectDrill(const QString& id);
  [[nodiscard]] QString currentId() const;

  [[nodiscard]] DrillListModel* model() const { return model_; }
  [[nodiscard]] QSortFilterProxyModel* proxy() const { return proxy_; }
  [[nodiscard]] QComboBox* topicCombo() const { return topic_; }
  [[nodiscard]] QTreeView* list() const { return list_; }
  [[nodiscard]] QLineEdit* answerEdit() const { return answer_; }
  [[nodiscard]] QLabel* unitLabel() const { return unit_; }
  [[nodiscard]] QPushButton* checkButton() const { return check_; }
  [[nodiscard]] QPushButton* revealButton() const { return reveal_; }
  [[nodiscard]] QLabel* verdictLabel() const { return verdict_; }
  [[nodiscard]] QLabel* answerLabel() const { return model_answer_; }
  [[nodiscard]] QLabel* scoreLabel() const { return score_; }
  [[nodiscard]] ExplainPane* explain() const { return explain_; }

 public slots:
  void check();
  void reveal();

 private:
  void showDrill();
  void showAnswer(const app::Drill& d, const app::DrillAnswer& a);
  void updateScore();
  [[nodiscard]] int currentRow() const;
  std::optional<app::DrillAnswer> answerOf(const app::Drill& d);

  std::shared_ptr<const AppData> data_;
  app::DrillContext ctx_;
  DrillListModel* model_;
  QSortFilterProxyModel* proxy_;
  QComboBox* topic_;
  QTreeView* list_;
  QLabel *title_, *question_, *inputs_, *unit_, *verdict_, *model_answer_, *score_, *status_;
  QLineEdit* answer_;
  QPushButton *check_, *reveal_;
  ExplainPane* explain_;
};

}  // namespace gpuplan::gui
