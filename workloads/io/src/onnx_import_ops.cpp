// ONNX → vision op list (onnx_io.hpp), op by op: the importer's mapping (onnx_importer.hpp; its bookkeeping is
// onnx_import.cpp, the file is read and its shapes inferred by onnx_model.cpp). The mapping, node by node in the file's
// (topological) order:
//
// - Conv → conv (groups kept: groups = channels is a depthwise conv); ConvTranspose → conv, transposed.
// - BatchNormalization → batch norm (scale and shift are parameters; running mean and variance are buffers, as
//   torchvision counts them); LayerNormalization, InstanceNormalization → layer norm over the normalised size; torch's
//   GroupNorm export (Reshape → InstanceNormalization with constant unit scale → Reshape → Mul → Add) → one norm of C
//   channels whose 2·C parameters are the Mul's and Add's constants. A
//   layer norm decomposed by an older exporter (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add) is priced as those ops.
// - MatMul / Gemm with a constant second operand → linear (its bias Add, or Gemm's C, adds the bias); MatMul of two
//   activations → the attention core when it heads a MatMul → [Mul|Div|Add|Sub|Where|Cast]* → Softmax → MatMul
//   chain (one fused attention op: QKᵀ and PV, tokens × kv tokens × hidden MACs each), else a batched matmul.
// - Max/AveragePool → pool with its window; GlobalAverage/GlobalMaxPool and Reduce* → global pooling (a reduction:
//   reads its input).
// - Unary elementwise ops → activation (ReLU-like at 1 FLOP per element, the rest at the sigmoid/GELU cost); binary
//   ops → add when two full-size activations meet (residual), else a scale/shift of the map by a broadcast tensor.
// - Resize / Upsample → resize. Concat, Transpose, Slice, Split, Gather, Pad, Expand, Tile, … → copy (data movement).
// - Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout, Constant, Shape arithmetic: views, no kernel.
//
// Parameters are the constant float tensors (initializers, Constant nodes) of more than one element that ops consume,
// each counted once: conv/linear weights and biases, norm scales and shifts, and any other (class token, position
// embedding, layer scale, PReLU slopes) as the consuming op's extra parameters. Scalars (exporters' 0.5, √d, ε) are
// constants, not parameters. Weights pre-transposed or reshaped by view ops stay the same parameters.
//
#include <algorithm>
#include <functional>
#include <optional>

#include "onnx_importer.hpp"

namespace gpuplan::wl_io::detail {
namespace {

std::vector<std::int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return {a.ints().begin(), a.ints().end()};
  return {};
}

}  // namespace

void Importer::node(int i, OnnxImport& r) {
  const auto& n = g_.node(i);
  const bool std_domain = n.domain().empty() || n.domain() == "ai.onnx";
  auto it = op_table().find(n.op_type());
  if (!std_domain || it == op_table().end()) {
    diags_.error(file_, where(i),
                 fmt::format("{}: op type '{}{}' is not supported by the ONNX import (docs/onnx-import.md lists the "
                             "supported types)",
                             label(i), n.domain().empty() ? "" : n.domain() + "::", n.op_type()));
    return;
  }
  const Cat cat = it->second;
  // Constant folding an exporter left undone (a weight transposed or reshaped) and shape arithmetic on integer
  // tensors run no kernel of the network: their outputs are constants (or views) too.
  if (cat == Cat::view || (all_const(n) && cat != Cat::conv) || !any_float(n)) {
    ++r.views;
    done_[static_cast<std::size_t>(i)] = true;
    if (n.input_size() > 0 && n.output_size() > 0) {
      if (all_const(n) && n.op_type() == "Identity") {
        // Exporters deduplicate initializers of equal values (an untrained export: every norm scale all ones)
        // and hand each parameter its own name through an Identity: that name is a parameter of its own.
        const_src_[n.output(0)] = n.output(0);
        if (const Shape* s = shape(n.input(0))) shapes_[n.output(0)] = *s;
      } else if (all_const(n) && n.op_type() != "Shape" && n.op_type() != "Size") {
        for (const auto& o : n.output()) const_src_[o] = const_src_.count(n.input(0)) ? const_src_[n.input(0)] : o;
      } else {
        alias(n.input(0), n.output(0));
      }
    }
    return;
  }
  switch (cat) {
    case Cat::conv: conv(i); break;
    case Cat::norm: norm(i, r); break;
    case Cat::act_cheap:
    case Cat::act: act(i, cat == Cat::act_cheap); break;
    case Cat::binary: binary(i); break;
    case Cat::pool: pool(i, false); break;
    case Cat::global_pool: pool(i, true); break;
    case Cat::matmul: matmul(i, r); break;
    case Cat::gemm: gemm(i); break;
    case Cat::resize: resize(i); break;
    case Cat::copy: copy(i); break;
    case Cat::cast: {
      const Shape* x = shape(n.input(0));
      const Shape* y = shape(n.output(0));
      if (x != nullptr && y != nullptr && x->is_float && y->is_float) {
        copy(i);
      } else {
        ++r.views;
        done_[static_cast<std::size_t>(i)] = true;
        alias(n.input(0), n.output(0));
      }
      break;
    }
    case Cat::view: break;
  }
}

void Importer::conv(int i) {
  const auto& n = g_.node(i);
  const bool transposed = n.op_type() == "ConvTranspose";
  if (n.input_size() < 2) {
    diags_.error(file_, where(i), fmt::format("{}: a convolution needs a weight input", label(i)));
    return;
  }
  VisionOp op = base(i, VisionOpKind::conv);
  if (!io_maps(i, op)) return;
  const Shape* wt = need(i, n.input(1));
  if (wt == nullptr) return;
  if (wt->dims.size() < 3 || wt->dims.size() > 4) {
    diags_.error(file_, where(i),
                 fmt::format("{}: weight '{}' is {}; 1-D and 2-D convolutions are modelled", label(i), n.input(1),
                             dims_text(wt->dims)));
    return;
  }
  op.groups = std::max<std::int64_t>(1, attr_int(n, "group", 1));
  op.transposed = transposed;
  op.kernel = wt->dims[2];
  const std::int64_t kw = wt->dims.size() == 4 ? wt->dims[3] : 1;
  op.kernel_w = kw != op.kernel ? kw : 0;
  const auto strides = attr_ints(n, "strides");
  op.stride = strides.empty() ? 1 : strides[0];
  op.bias = n.input_size() >= 3 && !n.input(2).empty();
  // The weight holds C_out × C_in/groups × k (conv) or C_in × C_out/groups × k (transposed).
  const std::int64_t expect = op.c_out * (op.c_in / op.groups) * op.kernel_area();
  if (op.c_in % op.groups != 0 || op.c_out % op.groups != 0 || wt->numel() != expect) {
    diags_.error(file_, where(i),
                 fmt::format("{}: weight '{}' is {}, which does not fit {} → {} channels in {} group(s)", label(i),
                             n.input(1), dims_text(wt->dims), op.c_in, op.c_out, op.groups));
    return;
  }
  mark(n.input(1));
  if (op.bias) {
    const Shape* b = shape(n.input(2));
    if (b == nullptr || b->numel() != op.c_out) {
      diags_.error(file_, where(i), fmt::format("{}: bias '{}' does not hold {} values", label(i), n.input(2), op.c_out));
      return;
    }
    if (is_const(n.input(2))) mark(n.input(2));
  }
  if (!is_const(n.input(1))) {
    diags_.error(file_, where(i),
                 fmt::format("{}: weight '{}' is no initializer or constant (exported with export_params=False?); "
                             "export the weights (their data may be stripped: shapes suffice)",
                             label(i), n.input(1)));
    return;
  }
  push(i, std::move(op));
}

/// torch's GroupNorm export below opset 18: Reshape(N, G, −1) → InstanceNormalization (constant unit scale, zero
/// shift: no parameters) → Reshape back → Mul(weight) → Add(bias). One per-sample norm of the C channels, its 2·C
/// parameters the Mul's and Add's constants (C each). True when node i heads the pattern (and it was pushed).
bool Importer::group_norm(int i) {
  const auto& n = g_.node(i);
  if (n.op_type() != "InstanceNormalization" || n.input_size() < 3) return false;
  const int rs = sole_consumer(n.output(0));
  if (rs < 0 || g_.node(rs).op_type() != "Reshape") return false;
  const int mul = sole_consumer(g_.node(rs).output(0));
  if (mul < 0 || g_.node(mul).op_type() != "Mul") return false;
  const int add = sole_consumer(g_.node(mul).output(0));
  if (add < 0 || g_.node(add).op_type() != "Add") return false;
  auto other_const = [&](int k, const std::string& data) {
    for (const auto& in : g_.node(k).input())
      if (in != data && is_const(in)) return in;
    return std::string();
  };
  const std::string w = other_const(mul, g_.node(rs).output(0)), b = other_const(add, g_.node(mul).output(0));
  const Shape* y = shape(g_.node(add).output(0));
  const Shape* ws = w.empty() ? nullptr : shape(w);
  const Shape* bs = b.empty() ? nullptr : shape(b);
  if (y == nullptr || !y->known || y->dims.size() < 2 || ws == nullptr || bs == nullptr) return false;
  VisionOp op = base(i, VisionOpKind::norm);
  op.norm = wl::VisionNorm::layer;
  chw(*y, op.c_out, op.h_out, op.w_out);
  if (ws->numel() != op.c_out || bs->numel() != op.c_out) return false;
  op.c_in = op.c_out;
  op.h_in = op.h_out;
  op.w_in = op.w_out;
  for (const std::string& t : {n.input(1), n.input(2), w, b}) mark(t);
  done_[static_cast<std::size_t>(rs)] = done_[static_cast<std::size_t>(mul)] = true;
  done_[static_cast<std::size_t>(add)] = true;
  push(i, std::move(op), {g_.node(add).output(0)});
  return true;
}

void Importer::norm(int i, OnnxImport& r) {
  if (group_norm(i)) return;
  const auto& n = g_.node(i);
  VisionOp op = base(i, VisionOpKind::norm);
  const Shape* x = need(i, n.input(0));
  if (x == nullptr) return;
  std::int64_t c = 1;
  if (n.op_type() == "LayerNormalization") {
    op.norm = wl::VisionNorm::layer;
    auto axis = attr_int(n, "axis", -1);
    const auto rank = static_cast<std::int64_t>(x->dims.size());
    if (axis < 0) axis += rank;
    for (std::int64_t d = std::clamp<std::int64_t>(axis, 0, rank); d < rank; ++d) c *= x->dims[static_cast<std::size_t>(d)];
  } else {
    op.norm = n.op_type() == "BatchNormalization" ? wl::VisionNorm::batch : wl::VisionNorm::layer;
    c = x->dims.size() >= 2 ? x->dims[1] : 1;
  }
  const std::int64_t e = per_image(x->numel());
  op.c_in = op.c_out = c;
  op.h_in = op.h_out = std::max<std::int64_t>(1, e / std::max<std::int64_t>(1, c));
  op.w_in = op.w_out = 1;
  if (x->dims.size() == 4 && x->dims[0] == batch_ && op.norm == wl::VisionNorm::batch) {
    op.h_in = op.h_out = x->dims[2];
    op.w_in = op.w_out = x->dims[3];
  }
  // Scale and shift: c each (parameters); batch norm's mean and variance: buffers.
  for (int k = 1; k < n.input_size() && k < 3; ++k) {
    const Shape* p = shape(n.input(k));
    if (p != nullptr && p->known && p->numel() != c) {
      diags_.error(file_, where(i),
                   fmt::format("{}: '{}' is {}, expected {} values (the normalised size)", label(i), n.input(k),
                               dims_text(p->dims), c));
      return;
    }
    mark(n.input(k));
  }
  if (n.op_type() == "BatchNormalization")
    for (int k = 3; k < n.input_size() && k < 5; ++k)
      if (const Shape* p = shape(n.input(k)); p != nullptr && counted_.insert("buffer:" + n.input(k)).second)
        r.buffers += p->numel();
  push(i, std::move(op), {n.output(0)});
}

void Importer::act(int i, bool cheap) {
  const auto& n = g_.node(i);
  VisionOp op = base(i, VisionOpKind::activation);
  if (!io_maps(i, op)) return;
  const std::string& t = n.op_type();
  op.act = cheap ? wl::VisionAct::relu
           : t == "Gelu" || t == "Erf" ? wl::VisionAct::gelu
           : t == "HardSwish" || t == "Mish" || t == "Elu" || t == "Selu" || t == "Celu" || t == "Softplus"
               ? wl::VisionAct::silu
               : wl::VisionAct::sigmoid;
  for (int k = 1; k < n.input_size(); ++k) op.extra_params += claim(n.input(k));  // PReLU's slopes
  push(i, std::move(op));
}

void Importer::binary(int i) {
  const auto& n = g_.node(i);
  const Shape* y = need(i, n.output(0));
  if (y == nullptr) return;
  const std::int64_t e_out = per_image(y->numel());
  std::vector<std::string> full;
  std::int64_t extra = 0;
  for (const auto& in : n.input()) {
    if (in.empty()) continue;
    if (is_const(in)) {
      extra += claim(in);
      continue;
    }
    const Shape* s = need(i, in);
    if (s == nullptr) return;
    if (per_image(s->numel()) == e_out) full.push_back(in);
  }
  VisionOp op = base(i, full.size() >= 2 ? VisionOpKind::add : VisionOpKind::mul);
  chw(*y, op.c_out, op.h_out, op.w_out);
  op.c_in = op.c_out;
  op.h_in = op.h_out;
  op.w_in = op.w_out;
  op.extra_params = extra;
  if (full.size() >= 2) {
    auto p = producer_.find(full[1]);
    op.residual_from = p != producer_.end() ? p->second : -1;
  }
  push(i, std::move(op));
}

void Importer::pool(int i, bool global) {
  const auto& n = g_.node(i);
  VisionOp op = base(i, VisionOpKind::pool);
  if (!io_maps(i, op)) return;
  if (global) {
    op.pool = wl::VisionPool::global_avg;
  } else {
    op.pool = n.op_type() == "MaxPool" ? wl::VisionPool::max : wl::VisionPool::avg;
    const auto k = attr_ints(n, "kernel_shape");
    const auto s = attr_ints(n, "strides");
    op.kernel = k.empty() ? 1 : k[0];
    op.stride = s.empty() ? 1 : s[0];
  }
  push(i, std::move(op));
}

void Importer::resize(int i) {
  VisionOp op = base(i, VisionOpKind::resize);
  if (!io_maps(i, op)) return;
  push(i, std::move(op));
}

void Importer::copy(int i) {
  const auto& n = g_.node(i);
  std::int64_t e = 0, extra = 0;
  for (const auto& o : n.output()) {
    if (o.empty()) continue;
    const Shape* s = need(i, o);
    if (s == nullptr) return;
    e += per_image(s->numel());
  }
  for (const auto& in : n.input())
    if (!in.empty()) extra += claim(in);  // a class token concatenated, query embeddings tiled
  VisionOp op = base(i, VisionOpKind::copy);
  op.c_in = op.c_out = std::max<std::int64_t>(1, e);
  op.h_in = op.h_out = op.w_in = op.w_out = 1;
  op.extra_params = extra;
  push(i, std::move(op));
}

/// A linear layer: rows × K times the constant K × N.
void Importer::linear(int i, const std::string& x, std::int64_t k, std::int64_t nout, bool bias,
                      const std::string& weight) {
  const Shape* xs = need(i, x);
  if (xs == nullptr) return;
  VisionOp op = base(i, VisionOpKind::linear);
  const std::int64_t rows = std::max<std::int64_t>(1, per_image(xs->numel()) / std::max<std::int64_t>(1, k));
  op.c_in = k;
  op.c_out = nout;
  op.h_in = op.h_out = rows;
  op.w_in = op.w_out = 1;
  op.bias = bias;
  mark(weight);
  push(i, std::move(op));
}

void Importer::gemm(int i) {
  const auto& n = g_.node(i);
  if (n.input_size() < 2) {
    diags_.error(file_, where(i), fmt::format("{}: Gemm needs two inputs", label(i)));
    return;
  }
  const Shape* a = need(i, n.input(0));
  const Shape* b = need(i, n.input(1));
  if (a == nullptr || b == nullptr) return;
  if (a->dims.size() != 2 || b->dims.size() != 2) {
    diags_.error(file_, where(i), fmt::format("{}: Gemm takes 2-D inputs, got {} and {}", label(i),
                                              dims_text(a->dims), dims_text(b->dims)));
    return;
  }
  const bool ta = attr_int(n, "transA", 0) != 0, tb = attr_int(n, "transB", 0) != 0;
  const std::int64_t k = ta ? a->dims[0] : a->dims[1];
  const std::int64_t nout = tb ? b->dims[0] : b->dims[1];
  if (is_const(n.input(1)) && !ta) {
    bool bias = false;
    if (n.input_size() >= 3 && !n.input(2).empty()) {
      const Shape* c = shape(n.input(2));
      if (c != nullptr && is_const(n.input(2)) && c->numel() == nout) {
        bias = true;
        mark(n.input(2));
      }
    }
    linear(i, n.input(0), k, nout, bias, n.input(1));
    return;
  }
  generic_matmul(i, a->dims[ta ? 1 : 0], k, nout, 1);
}

void Importer::generic_matmul(int i, std::int64_t m_rows, std::int64_t k, std::int64_t nout, std::int64_t groups) {
  const auto& n = g_.node(i);
  VisionOp op = base(i, VisionOpKind::matmul);
  op.c_in = k;
  op.c_out = nout;
  op.groups = std::max<std::int64_t>(1, groups);
  op.h_in = op.h_out = std::max<std::int64_t>(1, m_rows * op.groups);
  op.w_in = op.w_out = 1;
  for (const auto& in : n.input())
    if (!in.empty()) op.extra_params += claim(in);
  push(i, std::move(op));
}

void Importer::matmul(int i, OnnxImport& r) {
  const auto& n = g_.node(i);
  const Shape* a = need(i, n.input(0));
  const Shape* b = need(i, n.input(1));
  if (a == nullptr || b == nullptr) return;
  if (a->dims.empty() || b->dims.empty()) {
    diags_.error(file_, where(i), fmt::format("{}: MatMul of a scalar", label(i)));
    return;
  }
  const std::int64_t k = a->dims.back();
  if (is_const(n.input(1)) && b->dims.size() == 2) {
    linear(i, n.input(0), k, b->dims[1], false, n.input(1));
    return;
  }
  const std::int64_t nout = b->dims.size() >= 2 ? b->dims.back() : 1;
  const std::int64_t m_rows = a->dims.size() >= 2 ? a->dims[a->dims.size() - 2] : 1;
  const std::int64_t groups = std::max<std::int64_t>(1, per_image(a->numel()) / std::max<std::int64_t>(1, m_rows * k));
  if (attention(i, *a, *b, r)) return;
  generic_matmul(i, m_rows, k, nout, groups);
}

/// MatMul(Q, Kᵀ) → [Mul|Div|Add|Sub|Where|Cast]* → Softmax → [Cast|Dropout]* → MatMul(P, V): one attention op.
bool Importer::attention(int i, const Shape& a, const Shape& b, OnnxImport& r) {
  const auto& n = g_.node(i);
  if (a.dims.size() < 2 || b.dims.size() < 2) return false;
  std::vector<int> chain;
  std::string t = n.output(0);
  int softmax = -1;
  for (int step = 0; step < 6 && softmax < 0; ++step) {
    const int c = sole_consumer(t);
    if (c < 0) return false;
    const auto& cn = g_.node(c);
    const std::string& ty = cn.op_type();
    if (ty == "Softmax") softmax = c;
    else if (ty != "Mul" && ty != "Div" && ty != "Add" && ty != "Sub" && ty != "Where" && ty != "Cast")
      return false;
    chain.push_back(c);
    t = cn.output(0);
  }
  if (softmax < 0) return false;
  int pv = -1;
  for (int step = 0; step < 3 && pv < 0; ++step) {
    const int c = sole_consumer(t);
    if (c < 0) return false;
    const auto& cn = g_.node(c);
    if (cn.op_type() == "MatMul" && cn.input(0) == t) pv = c;
    else if (cn.op_type() != "Cast" && cn.op_type() != "Dropout") return false;
    chain.push_back(c);
    t = cn.output(0);
  }
  if (pv < 0) return false;
  const auto& pvn = g_.node(pv);
  const Shape* v = shape(pvn.input(1));
  if (v == nullptr || !v->known || v->dims.size() < 2 || is_const(pvn.input(1))) return false;
  const std::int64_t tq = a.dims[a.dims.size() - 2], dqk = a.dims.back();
  const std::int64_t s = b.dims.back(), dv = v->dims.back();
  if (dqk != dv || v->dims[v->dims.size() - 2] != s) return false;
  const std::int64_t heads = per_image(a.numel()) / std::max<std::int64_t>(1, tq * dqk);
  VisionOp op = base(i, VisionOpKind::attention);
  op.heads = std::max<std::int64_t>(1, heads);
  op.c_out = op.heads * dv;
  op.c_in = 3 * op.c_out;
  op.h_in = op.h_out = tq;
  op.w_in = op.w_out = 1;
  op.kv_tokens = s != tq ? s : 0;
  // A relative position bias or mask table added to the scores is a parameter of the attention.
  for (int c : chain)
    for (const auto& in : g_.node(c).input())
      if (!in.empty() && is_const(in)) op.extra_params += claim(in);
  for (int c : chain) done_[static_cast<std::size_t>(c)] = true;
  ++r.attention_patterns;
  push(i, std::move(op), {pvn.output(0)});
  return true;
}

}  // namespace gpuplan::wl_io::detail
