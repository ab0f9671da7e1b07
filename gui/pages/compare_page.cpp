#include "compare_page.hpp"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>

#include "compare_model.hpp"

namespace gpuplan::gui {

ComparePage::ComparePage(QWidget* parent) : QWidget(parent), model_(new CompareModel(this)) {
  pin_ = new QPushButton(tr("Pin current scenario (A)"));
  pin_->setToolTip(tr("Keep the current training and serving results as A; edits after this are B (Ctrl+P)"));
  unpin_ = new QPushButton(tr("Unpin"));
  unpin_->setToolTip(tr("Forget A"));
  hint_ = new QLabel;
  hint_->setWordWrap(true);
  table_ = new QTableView;
  table_->setModel(model_);
  table_->setAlternatingRowColors(true);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setWordWrap(true);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(CompareModel::kQuantity, QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(CompareModel::kPinned, QHeaderView::Stretch);
  table_->horizontalHeader()->setSectionResizeMode(CompareModel::kCurrent, QHeaderView::Stretch);
  table_->horizontalHeader()->setSectionResizeMode(CompareModel::kDelta, QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(CompareModel::kDeltaPct, QHeaderView::ResizeToContents);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(pin_);
  buttons->addWidget(unpin_);
  buttons->addStretch(1);
  auto* l = new QVBoxLayout(this);
  l->setContentsMargins(4, 4, 4, 4);
  l->addLayout(buttons);
  l->addWidget(hint_);
  l->addWidget(table_, 1);
  connect(pin_, &QPushButton::clicked, this, &ComparePage::pinRequested);
  connect(unpin_, &QPushButton::clicked, this, &ComparePage::unpinRequested);
  connect(model_, &QAbstractItemModel::dataChanged, this, [this] {
    table_->resizeRowsToContents();
    refresh();  // B's price kind may have changed
  });
  refresh();
}

void ComparePage::refresh() {
  unpin_->setEnabled(model_->pinned());
  const std::string note = model_->priceNote();
  hint_->setText(model_->pinned()
                     ? tr("A is pinned. Change anything in the scenario panel or the serving page: B and the deltas follow "
                          "(green: better, red: worse). Pin again to make the current scenario the new A.") +
                           (note.empty() ? QString() : tr(" Note on the costs: %1.").arg(QString::fromStdString(note)))
                     : tr("Nothing pinned. Pin the current scenario, then change the GPU, precision, layout, …: this "
                          "table shows both side by side with the difference of every headline number."));
}

}  // namespace gpuplan::gui
