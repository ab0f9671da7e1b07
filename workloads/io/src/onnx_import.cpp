// ONNX → vision op list (onnx_io.hpp): the entry points, and the importer's bookkeeping over the graph (tensor shapes
// and types, the export batch, constant tensors counted once as parameters, the ops pushed in order). The file is read
// and its shapes inferred by onnx_model.cpp; each op's mapping is onnx_import_ops.cpp.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>

#include "onnx_importer.hpp"

namespace gpuplan::wl_io {
namespace detail {
namespace {

bool float_type(std::int32_t t) {
  using T = onnx::TensorProto;
  return t == T::FLOAT || t == T::FLOAT16 || t == T::DOUBLE || t == T::BFLOAT16;
}

}  // namespace

bool Importer::run(OnnxImport& r) {
  collect_shapes();
  find_batch(r);
  for (int i = 0; i < g_.node_size(); ++i)
    for (const auto& in : g_.node(i).input()) consumers_[in].push_back(i);
  done_.assign(static_cast<std::size_t>(g_.node_size()), false);
  for (int i = 0; i < g_.node_size() && !diags_.has_errors(); ++i) {
    if (done_[static_cast<std::size_t>(i)]) continue;
    node(i, r);
  }
  r.nodes = g_.node_size();
  for (const auto& n : g_.node()) ++r.node_types[n.op_type()];
  r.parameter_tensors = static_cast<std::int64_t>(counted_.size());
  r.graph.ops = std::move(ops_);
  return !diags_.has_errors();
}

std::string Importer::label(int i) const {
  const auto& n = g_.node(i);
  return fmt::format("node '{}' ({})", n.name().empty() ? fmt::format("#{}", i) : n.name(), n.op_type());
}

void Importer::record(const std::string& name, const onnx::TypeProto& t) {
  if (!t.has_tensor_type()) return;
  Shape s;
  s.is_float = float_type(t.tensor_type().elem_type());
  if (t.tensor_type().has_shape()) {
    s.known = true;
    for (const auto& d : t.tensor_type().shape().dim()) {
      if (d.has_dim_value()) {
        s.dims.push_back(d.dim_value());
      } else if (d.has_dim_param() && !batch_symbol_.empty() && d.dim_param() == batch_symbol_) {
        s.dims.push_back(1);
      } else {
        s.dims.push_back(-1);
        s.known = false;
      }
    }
  }
  shapes_[name] = std::move(s);
}

void Importer::collect_shapes() {
  std::set<std::string> inits;
  for (const auto& t : g_.initializer()) {
    inits.insert(t.name());
    Shape s;
    s.is_float = float_type(t.data_type());
    s.known = true;
    s.dims.assign(t.dims().begin(), t.dims().end());
    shapes_[t.name()] = s;
    const_src_[t.name()] = t.name();
  }
  for (const auto& in : g_.input()) {
    if (inits.count(in.name()) > 0) continue;
    data_inputs_.insert(in.name());
    // The first dimension of the first data input, when symbolic, is the batch (counted as 1).
    if (batch_symbol_.empty() && in.type().has_tensor_type() && in.type().tensor_type().has_shape() &&
        in.type().tensor_type().shape().dim_size() > 1 && in.type().tensor_type().shape().dim(0).has_dim_param())
      batch_symbol_ = in.type().tensor_type().shape().dim(0).dim_param();
  }
  for (const auto& in : g_.input())
    if (inits.count(in.name()) == 0) record(in.name(), in.type());
  for (const auto& v : g_.value_info()) record(v.name(), v.type());
  for (const auto& v : g_.output()) record(v.name(), v.type());
  for (const auto& n : g_.node()) {
    if (n.op_type() != "Constant" || n.output_size() < 1) continue;
    const_src_[n.output(0)] = n.output(0);
    for (const auto& a : n.attribute()) {
      if (a.name() != "value" || !a.has_t()) continue;
      Shape s;
      s.is_float = float_type(a.t().data_type());
      s.known = true;
      s.dims.assign(a.t().dims().begin(), a.t().dims().end());
      shapes_[n.output(0)] = s;
    }
  }
}

void Importer::find_batch(OnnxImport& r) {
  bool first = true;
  for (const auto& in : g_.input()) {
    if (data_inputs_.count(in.name()) == 0) continue;
    const Shape* s = shape(in.name());
    std::string dims = s != nullptr ? dims_text(s->dims) : "?";
    if (first && s != nullptr && s->dims.size() >= 2 && s->dims[0] > 0) {
      const bool symbolic = in.type().tensor_type().shape().dim(0).has_dim_param();
      batch_ = symbolic ? 1 : s->dims[0];
      if (symbolic) dims += fmt::format(" (batch '{}' counted as 1)", batch_symbol_);
      if (s->dims.size() == 4) r.graph.resolution = s->dims[2];
    }
    first = false;
    r.inputs.push_back(fmt::format("{} [{}]", in.name(), dims));
  }
  r.batch = batch_;
}

const Shape* Importer::shape(const std::string& name) const {
  auto it = shapes_.find(name);
  return it == shapes_.end() ? nullptr : &it->second;
}

/// The static shape of a node's tensor, or an error naming it.
const Shape* Importer::need(int i, const std::string& name) {
  const Shape* s = shape(name);
  if (s == nullptr || !s->known) {
    diags_.error(file_, where(i),
                 fmt::format("{}: tensor '{}' has no static shape after ONNX shape inference ({}); export with fixed "
                             "input sizes",
                             label(i), name, s == nullptr ? "no type" : dims_text(s->dims)));
    return nullptr;
  }
  return s;
}

/// (C, H, W) per image of a tensor: [N, C, H, W] → C, H, W; otherwise C = the last dimension and H = the rest.
void Importer::chw(const Shape& s, std::int64_t& c, std::int64_t& h, std::int64_t& w) const {
  const std::int64_t e = per_image(s.numel());
  if (s.dims.size() == 4 && s.dims[0] == batch_) {
    c = s.dims[1];
    h = s.dims[2];
    w = s.dims[3];
    return;
  }
  c = s.dims.empty() ? 1 : std::max<std::int64_t>(1, s.dims.back());
  h = std::max<std::int64_t>(1, e / c);
  w = 1;
}

/// Counts a constant float tensor of more than one element as parameters, once; returns the elements counted.
std::int64_t Importer::claim(const std::string& name) {
  auto it = const_src_.find(name);
  if (it == const_src_.end()) return 0;
  const Shape* s = shape(it->second);
  if (s == nullptr || !s->is_float || s->numel() <= 1) return 0;
  if (!counted_.insert(it->second).second) return 0;
  return s->numel();
}

/// A constant's source is claimed (counted with the op's own structure, e.g. a conv weight) without adding extras.
void Importer::mark(const std::string& name) {
  auto it = const_src_.find(name);
  if (it != const_src_.end()) counted_.insert(it->second);
}

VisionOp Importer::base(int i, VisionOpKind k) const {
  VisionOp op;
  op.kind = k;
  const auto& n = g_.node(i);
  op.name = n.name().empty() ? fmt::format("{}_{}", n.op_type(), i) : n.name();
  return op;
}

/// Input map from the first input, output map from the first output.
bool Importer::io_maps(int i, VisionOp& op) {
  const auto& n = g_.node(i);
  const Shape* x = need(i, n.input(0));
  const Shape* y = need(i, n.output(0));
  if (x == nullptr || y == nullptr) return false;
  chw(*x, op.c_in, op.h_in, op.w_in);
  chw(*y, op.c_out, op.h_out, op.w_out);
  return true;
}

void Importer::push(int i, VisionOp op, const std::vector<std::string>& outputs) {
  ops_.push_back(std::move(op));
  const auto idx = static_cast<std::int64_t>(ops_.size()) - 1;
  for (const auto& o : outputs) producer_[o] = idx;
  done_[static_cast<std::size_t>(i)] = true;
}

void Importer::alias(const std::string& from, const std::string& to) {
  auto c = const_src_.find(from);
  if (c != const_src_.end()) const_src_[to] = c->second;
  auto p = producer_.find(from);
  if (p != producer_.end()) producer_[to] = p->second;
}

bool Importer::all_const(const onnx::NodeProto& n) const {
  for (const auto& in : n.input())
    if (!in.empty() && !is_const(in)) return false;
  return true;
}

/// Whether a node touches a float activation (or a tensor of unknown type, which the mapping then names).
bool Importer::any_float(const onnx::NodeProto& n) const {
  for (const auto* list : {&n.input(), &n.output()})
    for (const auto& t : *list) {
      if (t.empty() || is_const(t)) continue;
      const Shape* s = shape(t);
      if (s == nullptr || s->is_float) return true;
    }
  return false;
}

/// The single consumer of a tensor, or -1.
int Importer::sole_consumer(const std::string& t) const {
  auto it = consumers_.find(t);
  if (it == consumers_.end() || it->second.size() != 1) return -1;
  for (const auto& o : g_.output())
    if (o.name() == t) return -1;
  return it->second.front();
}

}  // namespace detail

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

bool is_onnx_path(const std::string& name) {
  const std::string l = lower(name);
  return l.size() > 5 && l.compare(l.size() - 5, 5, ".onnx") == 0;
}

std::vector<std::string> onnx_supported_ops() {
  std::vector<std::string> out;
  for (const auto& [name, cat] : detail::op_table()) out.push_back(name);
  return out;
}

Result<OnnxImport> import_onnx_vision(const std::string& path, const std::string& display) {
  Diagnostics diags;
  onnx::ModelProto m;
  OnnxImport r;
  if (!detail::read_onnx_model(path, display, m, r, diags)) return Result<OnnxImport>(std::move(diags));
  r.graph.id = std::filesystem::path(path).stem().string();
  r.graph.family = wl::VisionFamily::onnx;
  detail::Importer imp(m, display, diags);
  if (!imp.run(r)) return Result<OnnxImport>(std::move(diags));
  return Result<OnnxImport>(std::move(r), std::move(diags));
}

}  // namespace gpuplan::wl_io
