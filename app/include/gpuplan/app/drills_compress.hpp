#pragma once
// The drill kinds of the course's compression playground (issue #27): the stored size of a compressed model, and the
// decode (ITL) and prefill (TTFT) speedups of a compression choice on a GPU — each evaluated by the compression study
// (model/compression.hpp) on the GPU's built-in efficiency row. drills.cpp lists them with the other kinds.
#include <string>
#include <vector>

#include "gpuplan/app/drills.hpp"

namespace gpuplan::app {

struct CompressKind {
  std::string name;
  Dimension dim;
  json_io::FieldTable inputs;
};
const std::vector<CompressKind>& compress_drill_kinds();

/// Evaluates one of compress_drill_kinds() from its validated inputs (`arch`, `gpu` resolved from its "model" and
/// "gpu"); false for another kind. A choice that does not parse, or that the GPU refuses, is an error at its "choice".
bool evaluate_compress_kind(const std::string& kind, const json_io::ObjectReader& in, const wl::TransformerArch& arch,
                            const hw::GpuSpec& gpu, const DrillContext& ctx, KindAnswer& a, const std::string& file,
                            Diagnostics& diags);

}  // namespace gpuplan::app
