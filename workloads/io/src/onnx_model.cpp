// An ONNX file read for the vision import (onnx_model.hpp): the ModelProto parsed, its tensors' shapes inferred, and
// what ONNX's inference leaves unknown (the integer shape arithmetic of torch's exports, an Expand of a constant)
// worked out and inferred again. onnx_import.cpp maps the graph onto vision ops.
#include "onnx_model.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

namespace gpuplan::wl_io::detail {

std::int64_t attr_int(const onnx::NodeProto& n, const std::string& name, std::int64_t dflt) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return dflt;
}

namespace {

/// Integer shape arithmetic the exporter left in the graph (Shape → Slice / Mod / Concat → Reshape, as torch's
/// unflatten and expand write it) that ONNX's data propagation does not evaluate: evaluated here on 0-D/1-D integer
/// tensors, and each value a node reads as a non-data input (a Reshape's or Expand's shape) is handed to it as an
/// initializer, so that the next shape inference knows the shapes. True when it rewrote an input.
class ShapeArith {
 public:
  explicit ShapeArith(onnx::ModelProto& m) : g_(*m.mutable_graph()) {}

  bool run() {
    std::unordered_map<std::string, std::vector<std::int64_t>> dims;  // static shapes after inference
    auto take = [&](const onnx::ValueInfoProto& v) {
      if (!v.type().tensor_type().has_shape()) return;
      std::vector<std::int64_t> d;
      for (const auto& x : v.type().tensor_type().shape().dim()) {
        if (!x.has_dim_value()) return;
        d.push_back(x.dim_value());
      }
      dims[v.name()] = d;
    };
    for (const auto& v : g_.input()) take(v);
    for (const auto& v : g_.value_info()) take(v);
    for (const auto& v : g_.output()) take(v);
    std::set<std::string> literal;
    for (const auto& t : g_.initializer()) {
      literal.insert(t.name());
      if (auto v = ints(t)) vals_[t.name()] = *v;
    }
    for (const auto& n : g_.node()) {
      if (n.op_type() == "Constant" && n.output_size() == 1) {
        literal.insert(n.output(0));
        for (const auto& a : n.attribute()) {
          if (a.name() == "value" && a.has_t()) {
            if (auto v = ints(a.t())) vals_[n.output(0)] = *v;
          } else if (a.name() == "value_int") {
            vals_[n.output(0)] = {{}, {a.i()}};
          } else if (a.name() == "value_ints") {
            vals_[n.output(0)] = {{a.ints_size()}, {a.ints().begin(), a.ints().end()}};
          }
        }
        continue;
      }
      if (n.op_type() == "Shape" && n.input_size() == 1 && n.output_size() == 1) {
        auto d = dims.find(n.input(0));
        if (d != dims.end()) {
          auto r = static_cast<std::int64_t>(d->second.size());
          std::int64_t start = attr_int(n, "start", 0), end = attr_int(n, "end", r);
          if (start < 0) start += r;
          if (end < 0) end += r;
          start = std::clamp<std::int64_t>(start, 0, r);
          end = std::clamp<std::int64_t>(end, start, r);
          Val v;
          v.v.assign(d->second.begin() + start, d->second.begin() + end);
          v.dims = {static_cast<std::int64_t>(v.v.size())};
          vals_[n.output(0)] = v;
        }
        continue;
      }
      eval(n);
    }
    bool changed = false;
    for (auto& n : *g_.mutable_node()) {
      if (n.op_type() == "Constant" || n.op_type() == "Shape") continue;
      for (int k = 1; k < n.input_size(); ++k) {
        const std::string in = n.input(k);
        if (in.empty() || literal.count(in) > 0) continue;
        auto v = vals_.find(in);
        if (v == vals_.end()) continue;
        onnx::TensorProto t;
        t.set_name(fmt::format("gpuplan_shape_{}", g_.initializer_size()));
        t.set_data_type(onnx::TensorProto::INT64);
        for (auto d : v->second.dims) t.add_dims(d);
        for (auto x : v->second.v) t.add_int64_data(x);
        n.set_input(k, t.name());
        *g_.add_initializer() = std::move(t);
        changed = true;
      }
    }
    return changed;
  }

 private:
  struct Val {
    std::vector<std::int64_t> dims;  ///< {} scalar, {n} vector
    std::vector<std::int64_t> v;
  };
  onnx::GraphProto& g_;
  std::unordered_map<std::string, Val> vals_;

  static std::optional<Val> ints(const onnx::TensorProto& t) {
    if (t.dims_size() > 1) return std::nullopt;
    Val v;
    v.dims.assign(t.dims().begin(), t.dims().end());
    const std::int64_t n = t.dims_size() == 0 ? 1 : t.dims(0);
    if (n > 64) return std::nullopt;
    if (t.data_type() == onnx::TensorProto::INT64) {
      if (t.int64_data_size() == n) {
        v.v.assign(t.int64_data().begin(), t.int64_data().end());
      } else if (t.raw_data().size() == static_cast<std::size_t>(n) * 8) {
        v.v.resize(static_cast<std::size_t>(n));
        std::memcpy(v.v.data(), t.raw_data().data(), t.raw_data().size());
      } else {
        return std::nullopt;
      }
    } else if (t.data_type() == onnx::TensorProto::INT32) {
      if (t.int32_data_size() == n) {
        v.v.assign(t.int32_data().begin(), t.int32_data().end());
      } else if (t.raw_data().size() == static_cast<std::size_t>(n) * 4) {
        std::vector<std::int32_t> w(static_cast<std::size_t>(n));
        std::memcpy(w.data(), t.raw_data().data(), t.raw_data().size());
        v.v.assign(w.begin(), w.end());
      } else {
        return std::nullopt;
      }
    } else {
      return std::nullopt;
    }
    return v;
  }

  const Val* in(const onnx::NodeProto& n, int k) const {
    if (k >= n.input_size() || n.input(k).empty()) return nullptr;
    auto it = vals_.find(n.input(k));
    return it == vals_.end() ? nullptr : &it->second;
  }

  static std::int64_t at(const Val& v, std::size_t i) { return v.v.size() == 1 ? v.v[0] : v.v[i]; }

  void eval(const onnx::NodeProto& n) {
    if (n.output_size() < 1) return;
    const std::string& t = n.op_type();
    const Val* a = in(n, 0);
    if (a == nullptr) return;
    Val r;
    if (t == "Identity" || t == "Cast" || t == "Reshape" || t == "Squeeze" || t == "Unsqueeze" || t == "Flatten") {
      r.v = a->v;
      r.dims = {static_cast<std::int64_t>(a->v.size())};
      if ((t == "Squeeze" || t == "Reshape") && a->v.size() == 1) {
        const Val* shp = in(n, 1);
        if (t == "Squeeze" || (shp != nullptr && shp->v.empty())) r.dims = {};
      }
    } else if (t == "Add" || t == "Sub" || t == "Mul" || t == "Div" || t == "Mod" || t == "Equal" || t == "Max" ||
               t == "Min") {
      const Val* b = in(n, 1);
      if (b == nullptr || (a->v.size() != b->v.size() && a->v.size() != 1 && b->v.size() != 1)) return;
      const std::size_t len = std::max(a->v.size(), b->v.size());
      r.dims = a->v.size() >= b->v.size() ? a->dims : b->dims;
      for (std::size_t i = 0; i < len; ++i) {
        const std::int64_t x = at(*a, i), y = at(*b, i);
        if ((t == "Div" || t == "Mod") && y == 0) return;
        r.v.push_back(t == "Add" ? x + y
                      : t == "Sub" ? x - y
                      : t == "Mul" ? x * y
                      : t == "Div" ? x / y
                      : t == "Mod" ? ((x % y) + y) % y
                      : t == "Max" ? std::max(x, y)
                      : t == "Min" ? std::min(x, y)
                                   : static_cast<std::int64_t>(x == y));
      }
    } else if (t == "Where") {
      const Val* b = in(n, 1);
      const Val* c = in(n, 2);
      if (b == nullptr || c == nullptr) return;
      const std::size_t len = std::max({a->v.size(), b->v.size(), c->v.size()});
      for (const Val* x : {a, b, c})
        if (x->v.size() != len && x->v.size() != 1) return;
      r.dims = {static_cast<std::int64_t>(len)};
      for (std::size_t i = 0; i < len; ++i) r.v.push_back(at(*a, i) != 0 ? at(*b, i) : at(*c, i));
    } else if (t == "ConstantOfShape") {
      if (a->v.size() != 1 || a->v[0] < 0 || a->v[0] > 64) return;
      std::int64_t fill = 0;
      for (const auto& at_ : n.attribute())
        if (at_.name() == "value" && at_.has_t())
          if (auto v = ints(at_.t()); v && !v->v.empty()) fill = v->v[0];
      r.dims = {a->v[0]};
      r.v.assign(static_cast<std::size_t>(a->v[0]), fill);
    } else if (t == "Concat") {
      r.dims = {0};
      for (int k = 0; k < n.input_size(); ++k) {
        const Val* x = in(n, k);
        if (x == nullptr) return;
        r.v.insert(r.v.end(), x->v.begin(), x->v.end());
      }
      r.dims = {static_cast<std::int64_t>(r.v.size())};
    } else if (t == "Gather") {
      const Val* idx = in(n, 1);
      if (idx == nullptr || a->dims.size() != 1) return;
      const auto len = static_cast<std::int64_t>(a->v.size());
      for (auto i : idx->v) {
        if (i < 0) i += len;
        if (i < 0 || i >= len) return;
        r.v.push_back(a->v[static_cast<std::size_t>(i)]);
      }
      r.dims = idx->dims;
    } else if (t == "Slice") {
      const Val* st = in(n, 1);
      const Val* en = in(n, 2);
      const Val* step = in(n, 4);
      if (st == nullptr || en == nullptr || st->v.size() != 1 || en->v.size() != 1 || a->dims.size() != 1) return;
      const auto len = static_cast<std::int64_t>(a->v.size());
      const std::int64_t sp = step != nullptr && step->v.size() == 1 ? step->v[0] : 1;
      if (sp != 1) return;
      std::int64_t s0 = st->v[0], e0 = en->v[0];
      if (s0 < 0) s0 += len;
      if (e0 < 0) e0 += len;
      s0 = std::clamp<std::int64_t>(s0, 0, len);
      e0 = std::clamp<std::int64_t>(e0, s0, len);
      r.v.assign(a->v.begin() + s0, a->v.begin() + e0);
      r.dims = {static_cast<std::int64_t>(r.v.size())};
    } else {
      return;
    }
    vals_[n.output(0)] = std::move(r);
  }
};

/// Gives each Expand of an initializer (or Constant) whose output shape inference left unknown its input's shape,
/// and drops the other inferred value_info so that the next inference starts clean. True when it patched one.
bool patch_constant_expands(onnx::ModelProto& m) {
  auto& g = *m.mutable_graph();
  std::unordered_map<std::string, const onnx::TensorProto*> consts;
  for (const auto& t : g.initializer()) consts[t.name()] = &t;
  for (const auto& n : g.node())
    if (n.op_type() == "Constant" && n.output_size() == 1)
      for (const auto& a : n.attribute())
        if (a.name() == "value" && a.has_t()) consts[n.output(0)] = &a.t();
  std::unordered_map<std::string, const onnx::ValueInfoProto*> vi;
  for (const auto& v : g.value_info()) vi[v.name()] = &v;
  std::vector<onnx::ValueInfoProto> fixed;
  for (const auto& n : g.node()) {
    if (n.op_type() != "Expand" || n.input_size() < 1 || n.output_size() < 1) continue;
    auto c = consts.find(n.input(0));
    if (c == consts.end()) continue;
    auto v = vi.find(n.output(0));
    bool known = v != vi.end() && v->second->type().tensor_type().has_shape();
    if (known)
      for (const auto& d : v->second->type().tensor_type().shape().dim()) known = known && d.has_dim_value();
    if (known) continue;
    onnx::ValueInfoProto out;
    out.set_name(n.output(0));
    auto* tt = out.mutable_type()->mutable_tensor_type();
    tt->set_elem_type(c->second->data_type());
    for (auto d : c->second->dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
    fixed.push_back(std::move(out));
  }
  if (fixed.empty()) return false;
  g.clear_value_info();
  for (auto& f : fixed) *g.add_value_info() = std::move(f);
  return true;
}

}  // namespace

bool read_onnx_model(const std::string& path, const std::string& display, onnx::ModelProto& m, OnnxImport& r,
                     Diagnostics& diags) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    diags.error(display, "", "no such file (an ONNX model was expected)");
    return false;
  }
  // Protobuf refuses messages over 2 GiB; an export with its weights is read too (only shapes are used).
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > (std::uintmax_t{2} << 30)) {
    diags.error(display, "", "larger than 2 GiB: save the model with its weights as external data (shapes suffice)");
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string bytes = buf.str();
  if (!in || !m.ParseFromString(bytes) || !m.has_graph() || m.graph().node_size() == 0) {
    diags.error(display, "",
                "not an ONNX model: no ModelProto with a graph of nodes could be read (a .onnx file from torch.onnx."
                "export or onnx.save was expected)");
    return false;
  }
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") r.opset = o.version();
  r.producer = m.producer_name() + (m.producer_version().empty() ? "" : " " + m.producer_version());
  // Node-level inference errors are not thrown (error_mode 0): a node the schema registry cannot infer leaves its
  // outputs without shapes, and the mapping (onnx_import.cpp) names the first tensor it needs and lacks.
  auto infer = [&] {
    try {
      onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(),
                                         onnx::ShapeInferenceOptions(false, 0, true));
      return true;
    } catch (const std::exception& e) {
      diags.error(display, "", fmt::format("ONNX shape inference failed: {}", e.what()));
      return false;
    }
  };
  if (!infer()) return false;
  // A parameter broadcast over the batch (ViT's class token: Expand to a shape computed with Where/Equal, which
  // ONNX's data propagation does not evaluate) leaves its output and everything after it without shapes: such an
  // Expand keeps its input's shape per image (the batch counts as 1), and inference runs again.
  for (int pass = 0; pass < 8 && (ShapeArith(m).run() || patch_constant_expands(m)); ++pass)
    if (!infer()) return false;
  return true;
}

}  // namespace gpuplan::wl_io::detail
