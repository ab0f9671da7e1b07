#include "drills_page.hpp"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTreeView>
#include <QVBoxLayout>

#include "drill_list_model.hpp"
#include "explain_pane.hpp"
#include "gpuplan/core/format.hpp"

namespace gpuplan::gui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
QString h(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }
QString num(double v) { return q(units::format_number(v, 4)); }
QString coloured(const char* colour, const QString& html) {
  return QString("<span style='color:%1'>%2</span>").arg(colour, html);
}
}  // namespace

DrillsPage::DrillsPage(std::shared_ptr<const AppData> app_data, QWidget* parent)
    : QWidget(parent), data_(std::move(app_data)), model_(new DrillListModel(this)), proxy_(new QSortFilterProxyModel(this)) {
  ctx_ = {&data_->library, &data_->db, ""};
  proxy_->setSourceModel(model_);
  proxy_->setFilterRole(DrillListModel::TopicRole);
  proxy_->setFilterKeyColumn(DrillListModel::kId);

  // Left: topic filter and the list.
  topic_ = new QComboBox;
  list_ = new QTreeView;
  list_->setModel(proxy_);
  list_->setRootIsDecorated(false);
  list_->setUniformRowHeights(true);
  list_->setAlternatingRowColors(true);
  list_->setSelectionBehavior(QAbstractItemView::SelectRows);
  list_->setSelectionMode(QAbstractItemView::SingleSelection);
  list_->setColumnHidden(DrillListModel::kQuestion, true);
  list_->header()->setStretchLastSection(false);
  list_->header()->setSectionResizeMode(DrillListModel::kId, QHeaderView::Stretch);
  list_->header()->setSectionResizeMode(DrillListModel::kTopic, QHeaderView::ResizeToContents);
  list_->header()->setSectionResizeMode(DrillListModel::kOutcome, QHeaderView::ResizeToContents);
  score_ = new QLabel;
  auto* left = new QWidget;
  auto* ll = new QVBoxLayout(left);
  ll->setContentsMargins(0, 0, 0, 0);
  auto* tl = new QHBoxLayout;
  tl->addWidget(new QLabel(tr("Topic")));
  tl->addWidget(topic_, 1);
  ll->addLayout(tl);
  ll->addWidget(list_, 1);
  ll->addWidget(score_);

  // Right: the question, the answer box, the verdict and the derivation.
  title_ = new QLabel;
  question_ = new QLabel;
  question_->setWordWrap(true);
  question_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont f = question_->font();
  f.setPointSizeF(f.pointSizeF() * 1.25);
  question_->setFont(f);
  inputs_ = new QLabel;
  inputs_->setWordWrap(true);
  answer_ = new QLineEdit;
  answer_->setPlaceholderText(tr("your answer, e.g. 156, 1.2e3 or 70 GB"));
  answer_->setClearButtonEnabled(true);
  unit_ = new QLabel;
  check_ = new QPushButton(tr("Check"));
  check_->setDefault(true);
  reveal_ = new QPushButton(tr("Reveal"));
  reveal_->setToolTip(tr("Show the model's answer and its derivation without checking"));
  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("Answer")));
  row->addWidget(answer_, 1);
  row->addWidget(unit_);
  row->addWidget(check_);
  row->addWidget(reveal_);
  verdict_ = new QLabel;
  verdict_->setWordWrap(true);
  model_answer_ = new QLabel;
  model_answer_->setWordWrap(true);
  model_answer_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_ = new QLabel;
  status_->setWordWrap(true);
  status_->setVisible(false);
  explain_ = new ExplainPane;
  auto* right = new QWidget;
  auto* rl = new QVBoxLayout(right);
  rl->setContentsMargins(6, 0, 0, 0);
  rl->addWidget(status_);
  rl->addWidget(title_);
  rl->addWidget(question_);
  rl->addWidget(inputs_);
  rl->addLayout(row);
  rl->addWidget(verdict_);
  rl->addWidget(model_answer_);
  rl->addWidget(explain_, 1);

  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(left);
  split->addWidget(right);
  split->setStretchFactor(0, 1);
  split->setStretchFactor(1, 3);
  split->setSizes({260, 780});
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(4, 4, 4, 4);
  l->addWidget(split);

  // The drill file of the data directory; problems are shown, not hidden.
  auto set = app::load_drills(data_->data_dir + "/drills/textbook.json", "data/drills/textbook.json", ctx_);
  if (set.ok()) {
    model_->setDrills(std::move(set.value()));
  } else {
    status_->setText(coloured("#b00020", h(set.diagnostics().to_string())));
    status_->setVisible(true);
  }
  topic_->addItem(tr("All topics"), QString());
  for (const auto& t : model_->drills().topics()) topic_->addItem(q(t), q(t));

  connect(topic_, &QComboBox::currentIndexChanged, this, [this] {
    const QString t = topic_->currentData().toString();
    proxy_->setFilterRegularExpression(t.isEmpty() ? QString() : "^" + QRegularExpression::escape(t) + "$");
    if (currentRow() < 0 && proxy_->rowCount() > 0) list_->setCurrentIndex(proxy_->index(0, 0));
  });
  connect(list_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, [this] { showDrill(); });
  connect(check_, &QPushButton::clicked, this, &DrillsPage::check);
  connect(answer_, &QLineEdit::returnPressed, this, &DrillsPage::check);
  connect(reveal_, &QPushButton::clicked, this, &DrillsPage::reveal);
  if (proxy_->rowCount() > 0) list_->setCurrentIndex(proxy_->index(0, 0));
  else showDrill();
  updateScore();
}

int DrillsPage::currentRow() const {
  const QModelIndex i = proxy_->mapToSource(list_->currentIndex());
  return i.isValid() ? i.row() : -1;
}

QString DrillsPage::currentId() const {
  const app::Drill* d = model_->drill(currentRow());
  return d ? q(d->id) : QString();
}

bool DrillsPage::selectDrill(const QString& id) {
  const int row = model_->rowOf(id);
  if (row < 0) return false;
  QModelIndex i = proxy_->mapFromSource(model_->index(row, 0));
  if (!i.isValid()) {
    topic_->setCurrentIndex(0);
    i = proxy_->mapFromSource(model_->index(row, 0));
  }
  list_->setCurrentIndex(i);
  list_->scrollTo(i);
  return true;
}

void DrillsPage::showDrill() {
  const app::Drill* d = model_->drill(currentRow());
  answer_->clear();
  verdict_->clear();
  model_answer_->clear();
  explain_->setDerivations({});
  explain_->setVisible(false);
  check_->setEnabled(d != nullptr);
  reveal_->setEnabled(d != nullptr);
  answer_->setEnabled(d != nullptr);
  if (d == nullptr) {
    title_->clear();
    question_->setText(tr("No drill selected."));
    inputs_->clear();
    unit_->clear();
    return;
  }
  title_->setText(QString("<b>%1</b> · %2 · <span style='color:#666'>%3</span>").arg(h(d->id), h(d->topic), h(d->source)));
  question_->setText(q(d->question));
  QStringList given;
  for (const auto& [k, v] : d->inputs.items()) given << QString("%1 = %2").arg(q(k), q(v.is_string() ? v.get<std::string>() : v.dump()));
  inputs_->setText(coloured("#666", tr("Inputs: %1").arg(given.join(", ").toHtmlEscaped())));
  unit_->setText(q(d->unit));
  answer_->setFocus();
}

std::optional<app::DrillAnswer> DrillsPage::answerOf(const app::Drill& d) {
  auto a = app::answer_drill(model_->drills(), d, ctx_);
  if (!a.ok()) {
    verdict_->setText(coloured("#b00020", h(a.diagnostics().to_string())));
    return std::nullopt;
  }
  return std::move(a.value());
}

void DrillsPage::check() {
  const int row = currentRow();
  const app::Drill* d = model_->drill(row);
  if (d == nullptr) return;
  auto given = app::parse_answer(answer_->text().toStdString(), app::drill_unit(*d));
  if (!given.ok()) {
    verdict_->setText(coloured("#a05a00", "⚠ " + h(given.diagnostics().items().front().message)));
    return;
  }
  const auto a = answerOf(*d);
  if (!a) return;
  const auto v = app::check_answer(given.value(), a->value, d->rel_tolerance, d->common_wrong_answer);
  QString html = coloured(v.correct ? "#2e7d32" : "#b00020",
                          QString("<b>%1</b> %2").arg(v.correct ? "✓" : "✗", h(app::describe(v, d->unit, d->rel_tolerance))));
  if (v.common_wrong && !d->common_wrong_why.empty()) html += "<br>" + tr("The common mistake: %1.").arg(h(d->common_wrong_why));
  verdict_->setText(html);
  if (model_->outcome(row) != DrillListModel::Outcome::revealed)
    model_->setOutcome(row, v.correct ? DrillListModel::Outcome::right : DrillListModel::Outcome::wrong);
  showAnswer(*d, *a);
  updateScore();
}

void DrillsPage::reveal() {
  const int row = currentRow();
  const app::Drill* d = model_->drill(row);
  if (d == nullptr) return;
  const auto a = answerOf(*d);
  if (!a) return;
  if (model_->outcome(row) != DrillListModel::Outcome::right) model_->setOutcome(row, DrillListModel::Outcome::revealed);
  showAnswer(*d, *a);
  updateScore();
}

void DrillsPage::showAnswer(const app::Drill& d, const app::DrillAnswer& a) {
  QString html = tr("<b>Model's answer: %1 %2</b>").arg(num(a.value), h(d.unit));
  if (d.stated_answer) html += tr(" · stated in %1: %2 %3").arg(h(d.source), num(*d.stated_answer), h(d.unit));
  if (!d.note.empty()) html += "<br>" + h(d.note);
  if (!d.tolerance_why.empty())
    html += "<br>" + coloured("#666", tr("Tolerance ±%1%: %2").arg(num(d.rel_tolerance * 100), h(d.tolerance_why)));
  if (!d.model_differs.empty()) html += "<br>" + coloured("#a05a00", tr("Where the model differs: %1").arg(h(d.model_differs)));
  if (d.common_wrong_answer && !d.common_wrong_why.empty())
    html += "<br>" + coloured("#666", tr("Common wrong answer: %1 %2 (%3)").arg(num(*d.common_wrong_answer), h(d.unit),
                                                                           h(d.common_wrong_why)));
  model_answer_->setText(html);
  explain_->setVisible(true);
  explain_->setDerivations({a.derivation});
  explain_->tree()->expandToDepth(1);
}

void DrillsPage::updateScore() {
  const int right = model_->count(DrillListModel::Outcome::right), wrong = model_->count(DrillListModel::Outcome::wrong),
            shown = model_->count(DrillListModel::Outcome::revealed);
  score_->setText(tr("Score: <b>%1</b> right of %2 tried · %3 revealed · %4 drills")
                      .arg(right)
                      .arg(right + wrong)
                      .arg(shown)
                      .arg(model_->rowCount()));
}

}  // namespace gpuplan::gui
