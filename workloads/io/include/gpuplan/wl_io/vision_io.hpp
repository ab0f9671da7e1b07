#pragma once
// The vision model library: data/models/vision/*.json, one file per architecture family with a base description and
// its variants (ResNet-50/101; EfficientNet-B0…B7 by compound scaling; ConvNeXt-T; ViT-B/16, ViT-L/16). Each variant
// becomes a wl::VisionArch; its op list comes from wl::build_vision_graph. The transformer library
// (data/models/*.json) does not read this folder.
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/core/diagnostics.hpp"
#include "gpuplan/json_io/reader.hpp"
#include "gpuplan/wl/vision.hpp"

namespace gpuplan::wl_io {

/// The publisher's counts of a vision model, checked by the tests and shown by `gpuplan model show`.
struct VisionPublished {
  std::int64_t params = 0;
  double gmacs = 0;                 ///< multiply-accumulates per image, 1e9 (torchvision's "GFLOPS")
  std::int64_t resolution = 0;      ///< the input size the figure is for
  double gmacs_rounding = 0.0005;   ///< |exact − gmacs| allowed by the figure's rounding (half its last digit)
  std::string source;
};

struct VisionEntry {
  wl::VisionArch arch;
  std::string name;
  std::vector<std::string> aliases;
  std::string file;  ///< relative to the data directory ("models/vision/resnet.json")
  std::string pointer;  ///< the variant's JSON pointer in the file ("/variants/0")
  std::optional<VisionPublished> published;
  std::vector<std::string> sources;  ///< "id: ref"
  std::string notes;
  /// An ONNX file's op list (onnx_io.hpp), used as it is (arch.family is onnx); absent for library entries, whose
  /// op list comes from wl::build_vision_graph(arch).
  std::optional<wl::VisionGraph> imported;
};

/// The op list of an entry: the imported one, or the library description built at `resolution` (0: the model's).
wl::VisionGraph vision_graph(const VisionEntry& e, std::int64_t resolution = 0);

struct VisionLibrary {
  std::vector<VisionEntry> models;
  [[nodiscard]] const VisionEntry* find(const std::string& id_or_alias) const;
  [[nodiscard]] std::vector<std::string> names() const;
};

/// The fields of a vision family file, of its variants and of the shared architecture keys (for the field reference).
const json_io::FieldTable& vision_family_fields();
const json_io::FieldTable& vision_variant_fields();

/// Decodes one family file; `display` is the name diagnostics and citations use for it.
Result<std::vector<VisionEntry>> load_vision_family(const std::string& path, const std::string& display);

/// Loads every <data_dir>/models/vision/*.json, sorted by file name (an absent folder is an empty library); duplicate
/// ids or aliases are errors.
Result<VisionLibrary> load_vision_library(const std::string& data_dir);

}  // namespace gpuplan::wl_io
