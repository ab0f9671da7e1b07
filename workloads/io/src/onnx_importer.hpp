#pragma once
// Internal to gpuplan_wl_io: the ONNX → vision op importer (onnx_io.hpp import_onnx_vision). onnx_import.cpp holds the
// graph bookkeeping (tensor shapes, the export batch, parameters counted once, the ops pushed); onnx_import_ops.cpp the
// mapping of each ONNX op to vision ops.
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "gpuplan/wl_io/onnx_io.hpp"
#include "onnx_model.hpp"
#include "onnx_ops.hpp"

namespace gpuplan::wl_io::detail {

using wl::VisionOp;
using wl::VisionOpKind;

inline std::string dims_text(const std::vector<std::int64_t>& d) {
  std::string s;
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "×" : "") + (d[i] < 0 ? std::string("?") : std::to_string(d[i]));
  return d.empty() ? "scalar" : s;
}

class Importer {
 public:
  Importer(onnx::ModelProto& m, std::string display, Diagnostics& diags)
      : m_(m), g_(*m.mutable_graph()), file_(std::move(display)), diags_(diags) {}

  bool run(OnnxImport& r);

 private:
  onnx::ModelProto& m_;
  onnx::GraphProto& g_;
  std::string file_;
  Diagnostics& diags_;
  std::unordered_map<std::string, Shape> shapes_;
  std::unordered_map<std::string, std::string> const_src_;  ///< constant tensor → the initializer/constant it views
  std::set<std::string> data_inputs_;
  std::set<std::string> counted_;  ///< parameter tensors already counted
  std::unordered_map<std::string, std::vector<int>> consumers_;
  std::unordered_map<std::string, std::int64_t> producer_;  ///< tensor → index of the op that wrote it
  std::vector<bool> done_;
  std::vector<VisionOp> ops_;
  std::int64_t batch_ = 1;
  std::string batch_symbol_;

  std::string where(int i) const { return fmt::format("/graph/node/{}", i); }
  std::string label(int i) const;
  void record(const std::string& name, const onnx::TypeProto& t);
  void collect_shapes();
  void find_batch(OnnxImport& r);
  const Shape* shape(const std::string& name) const;
  bool is_const(const std::string& name) const { return const_src_.count(name) > 0; }

  /// The static shape of a node's tensor, or an error naming it.
  const Shape* need(int i, const std::string& name);

  std::int64_t per_image(std::int64_t numel) const { return batch_ > 1 && numel % batch_ == 0 ? numel / batch_ : numel; }

  /// (C, H, W) per image of a tensor: [N, C, H, W] → C, H, W; otherwise C = the last dimension and H = the rest.
  void chw(const Shape& s, std::int64_t& c, std::int64_t& h, std::int64_t& w) const;

  /// Counts a constant float tensor of more than one element as parameters, once; returns the elements counted.
  std::int64_t claim(const std::string& name);
  /// A constant's source is claimed (counted with the op's own structure, e.g. a conv weight) without adding extras.
  void mark(const std::string& name);
  VisionOp base(int i, VisionOpKind k) const;

  /// Input map from the first input, output map from the first output.
  bool io_maps(int i, VisionOp& op);
  void push(int i, VisionOp op, const std::vector<std::string>& outputs);
  void push(int i, VisionOp op) { push(i, std::move(op), {g_.node(i).output().begin(), g_.node(i).output().end()}); }

  void alias(const std::string& from, const std::string& to);
  bool all_const(const onnx::NodeProto& n) const;
  /// Whether a node touches a float activation (or a tensor of unknown type, which the mapping then names).
  bool any_float(const onnx::NodeProto& n) const;
  void node(int i, OnnxImport& r);
  void conv(int i);

  /// torch's GroupNorm export below opset 18: Reshape(N, G, −1) → InstanceNormalization (constant unit scale, zero
  /// shift: no parameters) → Reshape back → Mul(weight) → Add(bias). One per-sample norm of the C channels, its 2·C
  /// parameters the Mul's and Add's constants (C each). True when node i heads the pattern (and it was pushed).
  bool group_norm(int i);
  void norm(int i, OnnxImport& r);
  void act(int i, bool cheap);
  void binary(int i);
  void pool(int i, bool global);
  void resize(int i);
  void copy(int i);

  /// A linear layer: rows × K times the constant K × N.
  void linear(int i, const std::string& x, std::int64_t k, std::int64_t nout, bool bias, const std::string& weight);
  void gemm(int i);
  void generic_matmul(int i, std::int64_t m_rows, std::int64_t k, std::int64_t nout, std::int64_t groups);

  /// The single consumer of a tensor, or -1.
  int sole_consumer(const std::string& t) const;
  void matmul(int i, OnnxImport& r);

  /// MatMul(Q, Kᵀ) → [Mul|Div|Add|Sub|Where|Cast]* → Softmax → [Cast|Dropout]* → MatMul(P, V): one attention op.
  bool attention(int i, const Shape& a, const Shape& b, OnnxImport& r);
};

}  // namespace gpuplan::wl_io::detail
