#include "derivation_model.hpp"

#include <QFont>

namespace gpuplan::gui {
namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
QString html(const std::string& s) { return q(s).toHtmlEscaped(); }
QString origin_text(const Origin& o) {
  const QString kind = q(to_string(o.kind));
  return o.ref.empty() ? kind : kind + ": " + q(o.ref);
}
}  // namespace

DerivationModel::DerivationModel(QObject* parent) : QAbstractItemModel(parent) {}

int DerivationModel::add(int parent, int row, const Derivation* d, const DerivationInput* in) {
  nodes_.push_back(Node{parent, row, d, in, {}});
  return int(nodes_.size()) - 1;
}

void DerivationModel::build(int node) {
  const Derivation* d = nodes_[std::size_t(node)].derivation;
  if (d == nullptr) return;
  int row = 0;
  std::vector<int> kids;
  for (const auto& in : d->inputs) kids.push_back(add(node, row++, nullptr, &in));
  for (const auto& c : d->children) kids.push_back(add(node, row++, &c, nullptr));
  nodes_[std::size_t(node)].children = kids;
  for (int k : kids) build(k);
}

void DerivationModel::setRoots(std::vector<Derivation> roots) {
  beginResetModel();
  roots_ = std::move(roots);
  nodes_.clear();
  top_.clear();
  // Nodes refer to each other by position in nodes_ (internalId), never by pointer: nodes_ grows while building.
  for (std::size_t i = 0; i < roots_.size(); ++i) top_.push_back(add(-1, int(i), &roots_[i], nullptr));
  for (int t : std::vector<int>(top_)) build(t);
  endResetModel();
}

const DerivationModel::Node* DerivationModel::node_of(const QModelIndex& i) const {
  if (!i.isValid()) return nullptr;
  const auto id = static_cast<std::size_t>(i.internalId());
  return id < nodes_.size() ? &nodes_[id] : nullptr;
}

QModelIndex DerivationModel::index(int row, int column, const QModelIndex& parent) const {
  if (row < 0 || column < 0 || column >= kColumnCount) return {};
  const std::vector<int>* kids = &top_;
  if (parent.isValid()) {
    if (parent.column() != 0) return {};
    const Node* p = node_of(parent);
    if (p == nullptr) return {};
    kids = &p->children;
  }
  if (row >= int(kids->size())) return {};
  return createIndex(row, column, quintptr((*kids)[std::size_t(row)]));
}

QModelIndex DerivationModel::parent(const QModelIndex& child) const {
  const Node* n = node_of(child);
  if (n == nullptr || n->parent < 0) return {};
  const Node& p = nodes_[std::size_t(n->parent)];
  return createIndex(p.row, 0, quintptr(n->parent));
}

int DerivationModel::rowCount(const QModelIndex& parent) const {
  if (!parent.isValid()) return int(top_.size());
  if (parent.column() != 0) return 0;
  const Node* n = node_of(parent);
  return n != nullptr ? int(n->children.size()) : 0;
}

int DerivationModel::columnCount(const QModelIndex&) const { return kColumnCount; }

Qt::ItemFlags DerivationModel::flags(const QModelIndex& index) const {
  if (!index.isValid()) return Qt::NoItemFlags;
  return Qt::ItemIsEnabled | Qt::ItemIsSelectable;
}

QVariant DerivationModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case kQuantity: return tr("Quantity");
    case kValue: return tr("Value");
    case kFormula: return tr("Formula / source");
    default: return {};
  }
}

QString DerivationModel::details(const Node& n) const {
  QString s;
  if (n.input != nullptr) {
    const auto& in = *n.input;
    s += "<h3>" + html(in.symbol) + " = " + html(in.value) + "</h3>";
    if (!in.meaning.empty()) s += "<p>" + html(in.meaning) + "</p>";
    s += "<p><b>Source:</b> " + origin_text(in.origin).toHtmlEscaped() + "</p>";
    return s;
  }
  const auto& d = *n.derivation;
  s += "<h3>" + html(d.title) + "</h3>";
  s += "<p><b>= " + html(d.result_text()) + "</b></p>";
  if (!d.formula.empty()) s += "<p><b>Formula:</b> <code>" + html(d.formula) + "</code></p>";
  if (!d.inputs.empty()) {
    s += "<table border=1 cellspacing=0 cellpadding=3><tr><th>symbol</th><th>value</th><th>meaning</th><th>source</th></tr>";
    for (const auto& in : d.inputs)
      s += "<tr><td>" + html(in.symbol) + "</td><td>" + html(in.value) + "</td><td>" + html(in.meaning) + "</td><td>" +
           origin_text(in.origin).toHtmlEscaped() + "</td></tr>";
    s += "</table>";
  }
  if (!d.notes.empty()) {
    s += "<p><b>Notes</b></p><ul>";
    for (const auto& note : d.notes) s += "<li>" + html(note) + "</li>";
    s += "</ul>";
  }
  s += "<p style='color:gray'>id: " + html(d.id) + "</p>";
  return s;
}

QVariant DerivationModel::data(const QModelIndex& index, int role) const {
  const Node* n = node_of(index);
  if (n == nullptr) return {};
  const bool is_input = n->input != nullptr;
  switch (role) {
    case Qt::DisplayRole:
    case Qt::ToolTipRole:
      if (is_input) {
        const auto& in = *n->input;
        switch (index.column()) {
          case kQuantity: return in.meaning.empty() ? q(in.symbol) : q(in.symbol) + " — " + q(in.meaning);
          case kValue: return q(in.value);
          case kFormula: return origin_text(in.origin);
          default: return {};
        }
      } else {
        const auto& d = *n->derivation;
        switch (index.column()) {
          case kQuantity: return q(d.title);
          case kValue: return q(d.result_text());
          case kFormula: return q(d.formula);
          default: return {};
        }
      }
    case Qt::FontRole:
      if (!is_input && index.column() == kQuantity) {
        QFont f;
        f.setBold(true);
        return f;
      }
      return {};
    case IdRole: return is_input ? QString() : q(n->derivation->id);
    case KindRole: return is_input ? QStringLiteral("input") : QStringLiteral("derivation");
    case DetailsRole: return details(*n);
    default: return {};
  }
}

QModelIndex DerivationModel::indexForId(const QString& id) const {
  const std::string want = id.toStdString();
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.derivation != nullptr && n.derivation->id == want) return createIndex(n.row, 0, quintptr(i));
  }
  return {};
}

}  // namespace gpuplan::gui
