#pragma once
// ONNX import (issue #25): an exported network (a .onnx file, weights optional: initializers need their shapes only)
// becomes the same vision op list the library builds (wl::VisionGraph), so that `gpuplan model show`, `serve` and
// `train` price it like a library model. Reading goes through Debian's libonnx (its protobuf ModelProto classes and
// onnx::shape_inference::InferShapes, which gives every tensor its shape); the mapping rules are in onnx_import.cpp's
// header comment. An op type outside onnx_supported_ops() is an error naming the node and the type, never dropped.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/wl/vision.hpp"

namespace gpuplan::wl_io {

struct OnnxImport {
  wl::VisionGraph graph;          ///< family onnx; id = the file's stem
  std::string producer;           ///< producer_name and version of the file ("pytorch 2.4.0")
  std::int64_t opset = 0;         ///< the default-domain opset the file imports
  std::int64_t batch = 1;         ///< the batch size it was exported with (a symbolic batch counts as 1)
  std::vector<std::string> inputs;  ///< the data inputs, "name [1×3×224×224]"
  std::map<std::string, std::int64_t> node_types;  ///< ONNX op type → nodes read
  std::int64_t nodes = 0;          ///< nodes read
  std::int64_t views = 0;          ///< nodes that move no data (reshape, flatten, squeeze, shape arithmetic, constants)
  std::int64_t attention_patterns = 0;  ///< MatMul–Softmax–MatMul chains recognised as one attention op
  std::int64_t buffers = 0;        ///< batch-norm running mean and variance elements (buffers, not parameters)
  std::int64_t parameter_tensors = 0;  ///< initializers (and constants) counted as parameters
};

/// Reads `path` (diagnostics name it `display`) and maps it to a vision op list. Errors (exit 2): not an ONNX model,
/// no graph, an op type not supported (node name and type), a tensor without a static shape after shape inference,
/// a weight whose shape does not fit its op.
Result<OnnxImport> import_onnx_vision(const std::string& path, const std::string& display);

/// The ONNX op types (default domain) the importer maps, sorted.
std::vector<std::string> onnx_supported_ops();

/// True when `name` ends in ".onnx" (case-insensitive): `-m` and `model show` read it as an ONNX file.
bool is_onnx_path(const std::string& name);

}  // namespace gpuplan::wl_io
