#pragma once
// The ONNX op types the vision import maps, by category, and a tensor's static shape (onnx_import.cpp and
// onnx_import_ops.cpp, through onnx_importer.hpp). Internal to gpuplan_wl_io.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpuplan::wl_io::detail {

enum class Cat { view, conv, norm, act_cheap, act, binary, pool, global_pool, matmul, gemm, resize, copy, cast };

inline const std::map<std::string, Cat>& op_table() {
  static const std::map<std::string, Cat> t = [] {
    std::map<std::string, Cat> m;
    for (const char* n : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Constant", "Shape",
                          "Size", "ConstantOfShape", "Range"})
      m[n] = Cat::view;
    for (const char* n : {"Conv", "ConvTranspose"}) m[n] = Cat::conv;
    for (const char* n : {"BatchNormalization", "LayerNormalization", "InstanceNormalization"}) m[n] = Cat::norm;
    for (const char* n : {"Relu", "LeakyRelu", "PRelu", "Clip", "Abs", "Neg", "Floor", "Ceil", "Round", "Sign", "Not",
                          "Reciprocal", "ThresholdedRelu", "IsNaN", "IsInf"})
      m[n] = Cat::act_cheap;
    for (const char* n : {"Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Gelu", "Erf", "Elu", "Selu", "Celu",
                          "Softplus", "Softsign", "Mish", "Softmax", "LogSoftmax", "Exp", "Log", "Sqrt", "Sin", "Cos"})
      m[n] = Cat::act;
    for (const char* n : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Where", "Equal", "Less",
                          "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Mod"})
      m[n] = Cat::binary;
    for (const char* n : {"MaxPool", "AveragePool", "LpPool"}) m[n] = Cat::pool;
    for (const char* n : {"GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
                          "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp", "ArgMax",
                          "ArgMin"})
      m[n] = Cat::global_pool;
    m["MatMul"] = Cat::matmul;
    m["Gemm"] = Cat::gemm;
    for (const char* n : {"Resize", "Upsample"}) m[n] = Cat::resize;
    for (const char* n : {"Concat", "Transpose", "Slice", "Split", "Gather", "GatherElements", "GatherND", "Pad",
                          "Expand", "Tile", "DepthToSpace", "SpaceToDepth", "ScatterND", "ScatterElements", "Trilu"})
      m[n] = Cat::copy;
    m["Cast"] = Cat::cast;
    return m;
  }();
  return t;
}

/// A tensor's static shape; dims < 0 are unknown.
struct Shape {
  std::vector<std::int64_t> dims;
  bool is_float = false;
  bool known = false;
  [[nodiscard]] std::int64_t numel() const {
    std::int64_t n = 1;
    for (auto d : dims) n *= d;
    return n;
  }
};

}  // namespace gpuplan::wl_io::detail
