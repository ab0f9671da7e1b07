#pragma once
// Internal to gpuplan_wl_io: an ONNX file read into a ModelProto with its tensors' shapes inferred (onnx_model.cpp),
// for the mapping of its graph onto vision ops (onnx_import.cpp).
#include <cstdint>
#include <string>

#include <onnx/onnx_pb.h>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/wl_io/onnx_io.hpp"

namespace gpuplan::wl_io::detail {

/// A node's integer attribute `name`, `dflt` when the node has none.
std::int64_t attr_int(const onnx::NodeProto& n, const std::string& name, std::int64_t dflt);

/// Reads the ONNX model at `path` (`display` names it in diagnostics) into `m` and infers its tensors' shapes, with
/// the shape arithmetic ONNX's inference leaves to us; sets r.opset and r.producer. False, with the errors in `diags`,
/// when the file is missing, over 2 GiB, not an ONNX model, or its shapes cannot be inferred.
bool read_onnx_model(const std::string& path, const std::string& display, onnx::ModelProto& m, OnnxImport& r,
                     Diagnostics& diags);

}  // namespace gpuplan::wl_io::detail
