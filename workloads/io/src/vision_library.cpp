#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "gpuplan/wl_io/vision_io.hpp"
#include "io_common.hpp"

namespace gpuplan::wl_io {

namespace fs = std::filesystem;

namespace {

// Bounds that keep every per-image count of the op list (multiply-accumulates of the largest op times the most ops)
// inside a 64-bit integer: widths ≤ 4096, resolution ≤ 1024 px, ≤ 64 blocks per stage, ≤ 8 stages, kernels ≤ 11.
constexpr long long kMaxWidth = 4096, kMaxResolution = 1024, kMaxDepth = 64, kMaxStages = 8, kMaxKernel = 11;

const FieldTable& published_fields() {
  static const FieldTable t{
      field("params", FieldType::integer, Presence::required, "published parameter count", 1, 1e12),
      field("gmacs", FieldType::number, Presence::required,
            "published multiply-accumulates per image, 1e9 (torchvision's \"GFLOPS\"; papers' \"FLOPs\")", 1e-6, 1e6),
      field("resolution_px", FieldType::integer, Presence::required, "input size the figure is for", 1, kMaxResolution),
      field("gmacs_rounding", FieldType::number, Presence::optional,
            "how far the published gmacs may be from the exact count: half its last digit (default 0.0005, "
            "torchvision's 3 decimals)", 0, 10),
      field("source", FieldType::string, Presence::required, "where the figures are published")};
  return t;
}

const FieldTable& stage_fields() {
  static const FieldTable t{
      field("expand", FieldType::integer, Presence::required, "MBConv expansion ratio", 1, 16),
      field("kernel", FieldType::integer, Presence::required, "depthwise kernel size", 1, kMaxKernel),
      field("stride", FieldType::integer, Presence::required, "stride of the stage's first block", 1, 4),
      field("in", FieldType::integer, Presence::required, "input channels (B0)", 1, kMaxWidth),
      field("out", FieldType::integer, Presence::required, "output channels (B0)", 1, kMaxWidth),
      field("repeats", FieldType::integer, Presence::required, "blocks (B0)", 1, kMaxDepth)};
  return t;
}

/// The architecture keys shared by a family's `base` and its variants.
FieldTable arch_fields() {
  FieldSpec block = field("block", FieldType::string, Presence::optional, "resnet: bottleneck (default) or basic");
  block.choices = {"bottleneck", "basic"};
  return FieldTable{
      field("resolution_px", FieldType::integer, Presence::optional, "input height and width (default 224)", 16, kMaxResolution),
      field("in_channels", FieldType::integer, Presence::optional,
            "image channels (default 3); detr: the backbone feature map's channels", 1, kMaxWidth),
      field("classes", FieldType::integer, Presence::optional, "classifier outputs (default 1000)", 1, 100000),
      block,
      field("stem_width", FieldType::integer, Presence::optional, "resnet: stem channels", 1, kMaxWidth),
      field("depths", FieldType::any, Presence::optional,
            "resnet, convnext: blocks per stage (list of integers); detr: [encoder layers, decoder layers]"),
      field("widths", FieldType::any, Presence::optional,
            "resnet: bottleneck width per stage; convnext: channels per stage; unet: channels per level; fpn: the backbone maps' channels, strides 4, 8, 16, … (list of integers)"),
      field("expansion", FieldType::integer, Presence::optional, "resnet: bottleneck expansion (4)", 1, 16),
      field("stages", FieldType::any, Presence::optional,
            "efficientnet: the B0 stages, list of {expand, kernel, stride, in, out, repeats}"),
      field("width_mult", FieldType::number, Presence::optional, "efficientnet: width coefficient", 0.1, 8),
      field("depth_mult", FieldType::number, Presence::optional, "efficientnet: depth coefficient", 0.1, 8),
      field("stem_channels", FieldType::integer, Presence::optional, "efficientnet: stem channels before scaling", 1, kMaxWidth),
      field("divisor", FieldType::integer, Presence::optional, "efficientnet: channel rounding (8)", 1, 64),
      field("se_divisor", FieldType::integer, Presence::optional, "efficientnet: squeeze channels = in / this (4)", 1, 64),
      field("head_multiplier", FieldType::integer, Presence::optional, "efficientnet: head width / last stage width (4)", 1, 16),
      field("patch", FieldType::integer, Presence::optional,
            "vit: patch size; convnext: stem patch size; detr: the feature map's stride", 1, 64),
      field("kernel", FieldType::integer, Presence::optional, "convnext: depthwise kernel (7)", 1, kMaxKernel),
      field("mlp_ratio", FieldType::integer, Presence::optional, "convnext: MLP width / channels (4)", 1, 16),
      field("hidden", FieldType::integer, Presence::optional, "vit, detr: hidden size; fpn: pyramid channels", 1, kMaxWidth),
      field("layers", FieldType::integer, Presence::optional, "vit: encoder blocks", 1, kMaxDepth),
      field("heads", FieldType::integer, Presence::optional, "vit, detr: attention heads", 1, 256),
      field("mlp", FieldType::integer, Presence::optional, "vit, detr: MLP (FFN) width; fpn: the semantic branch's channels", 1, 4 * kMaxWidth),
      field("queries", FieldType::integer, Presence::optional, "detr: object queries (100)", 1, 4096),
      field("max_channels", FieldType::integer, Presence::optional,
            "yolov8: channel cap before the width multiple (1024 for n/s, 768 for m, 512 for l/x)", 8, kMaxWidth)};
}

std::vector<std::int64_t> int_list(const ObjectReader& r, const std::string& key, long long max) {
  std::vector<std::int64_t> out;
  const Json* v = r.raw(key);
  if (v == nullptr) return out;
  if (!v->is_array() || v->empty() || v->size() > static_cast<std::size_t>(kMaxStages)) {
    r.error(key, fmt::format("expected a list of 1 to {} integers, got {}", kMaxStages, json_io::describe_value(*v)));
    return {};
  }
  for (const auto& e : *v) {
    if (!json_io::is_integral(e) || e.get<double>() < 1 || e.get<double>() > static_cast<double>(max)) {
      r.error(key, fmt::format("{} is not an integer from 1 to {}", json_io::describe_value(e), max));
      return {};
    }
    out.push_back(e.get<std::int64_t>());
  }
  return out;
}

void apply_arch(const ObjectReader& r, const std::string& file, Diagnostics& diags, wl::VisionArch& a) {
  if (auto v = r.integer("resolution_px")) a.resolution = *v;
  if (auto v = r.integer("in_channels")) a.in_channels = *v;
  if (auto v = r.integer("classes")) a.classes = *v;
  if (auto v = r.str("block")) a.bottleneck = *v == "bottleneck";
  if (auto v = r.integer("stem_width")) a.stem_width = *v;
  if (r.has("depths")) a.depths = int_list(r, "depths", kMaxDepth);
  if (r.has("widths")) a.widths = int_list(r, "widths", kMaxWidth);
  if (auto v = r.integer("expansion")) a.expansion = *v;
  if (const Json* s = r.raw("stages")) {
    a.stages.clear();
    if (!s->is_array() || s->empty() || s->size() > static_cast<std::size_t>(kMaxStages)) {
      r.error("stages", fmt::format("expected a list of 1 to {} stages", kMaxStages));
    } else {
      for (std::size_t i = 0; i < s->size(); ++i) {
        ObjectReader sr((*s)[i], stage_fields(), file, r.pointer("stages") + "/" + std::to_string(i), diags);
        if (!sr.valid()) continue;
        wl::MbConvStage st;
        st.expand = sr.integer("expand").value_or(1);
        st.kernel = sr.integer("kernel").value_or(3);
        st.stride = sr.integer("stride").value_or(1);
        st.in = sr.integer("in").value_or(1);
        st.out = sr.integer("out").value_or(1);
        st.repeats = sr.integer("repeats").value_or(1);
        a.stages.push_back(st);
      }
    }
  }
  if (auto v = r.num("width_mult")) a.width_mult = *v;
  if (auto v = r.num("depth_mult")) a.depth_mult = *v;
  if (auto v = r.integer("stem_channels")) a.stem_channels = *v;
  if (auto v = r.integer("divisor")) a.divisor = *v;
  if (auto v = r.integer("se_divisor")) a.se_divisor = *v;
  if (auto v = r.integer("head_multiplier")) a.head_multiplier = *v;
  if (auto v = r.integer("patch")) a.patch = *v;
  if (auto v = r.integer("kernel")) a.kernel = *v;
  if (auto v = r.integer("mlp_ratio")) a.mlp_ratio = *v;
  if (auto v = r.integer("hidden")) a.hidden = *v;
  if (auto v = r.integer("layers")) a.layers = *v;
  if (auto v = r.integer("heads")) a.heads = *v;
  if (auto v = r.integer("mlp")) a.mlp = *v;
  if (auto v = r.integer("max_channels")) a.max_channels = *v;
  if (auto v = r.integer("queries")) a.queries = *v;
}

/// What a family needs, checked on the merged base + variant; then every op must keep a map of at least 1×1.
void check_arch(const wl::VisionArch& a, const std::string& file, const std::string& ptr, Diagnostics& diags) {
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) diags.error(file, ptr, fmt::format("a {} model needs {}", wl::to_string(a.family), what));
    return ok;
  };
  bool ok = true;
  switch (a.family) {
    case wl::VisionFamily::resnet:
    case wl::VisionFamily::convnext:
      ok = need(!a.depths.empty() && a.depths.size() == a.widths.size(),
                "'depths' and 'widths' of the same length (one entry per stage)");
      break;
    case wl::VisionFamily::efficientnet: ok = need(!a.stages.empty(), "'stages'"); break;
    case wl::VisionFamily::vit:
      ok = need(a.hidden > 0 && a.layers > 0 && a.heads > 0 && a.mlp > 0, "'hidden', 'layers', 'heads' and 'mlp'") &&
           need(a.hidden % a.heads == 0, fmt::format("'heads' ({}) to divide 'hidden' ({})", a.heads, a.hidden)) &&
           need(a.resolution % a.patch == 0,
                fmt::format("'patch' ({}) to divide 'resolution_px' ({})", a.patch, a.resolution));
      break;
    case wl::VisionFamily::yolov8: break;
    case wl::VisionFamily::detr:
      ok = need(a.depths.size() == 2, "'depths': [encoder layers, decoder layers]") &&
           need(a.hidden > 0 && a.heads > 0 && a.mlp > 0, "'hidden', 'heads' and 'mlp'") &&
           need(a.hidden % a.heads == 0, fmt::format("'heads' ({}) to divide 'hidden' ({})", a.heads, a.hidden));
      break;  // every key has a default (yolov8n's multiples come from the file)
    case wl::VisionFamily::unet:
      ok = need(a.widths.size() >= 2, "'widths': the channels of at least two levels");
      break;
    case wl::VisionFamily::fpn:
      ok = need(a.widths.size() >= 2 && a.widths.size() <= 6, "'widths': the channels of 2 to 6 backbone maps (C2…)") &&
           need(a.hidden > 0 && a.mlp > 0, "'hidden' (pyramid channels) and 'mlp' (semantic branch channels)");
      break;
    case wl::VisionFamily::onnx: ok = need(false, "an ONNX file (it is no library family)"); break;
  }
  if (!ok) return;
  if (const std::string why = wl::vision_input_problem(a, a.resolution); !why.empty()) diags.error(file, ptr, why);
}

}  // namespace

const FieldTable& vision_variant_fields() {
  static const FieldTable t = [] {
    FieldTable f = arch_fields();
    FieldSpec published = field("published", FieldType::object, Presence::optional,
                                "the publisher's parameter count and multiply-accumulates per image");
    published.nested = &published_fields();
    f.insert(f.begin(), {field("id", FieldType::string, Presence::required, "identifier (`-m` takes it)"),
                         field("name", FieldType::string, Presence::required, "display name"),
                         field("aliases", FieldType::string_list, Presence::optional, "other names"), published,
                         field("notes", FieldType::string, Presence::optional, "free text")});
    return f;
  }();
  return t;
}

const FieldTable& vision_family_fields() {
  static const FieldTable arch = arch_fields();
  static const FieldTable t = [] {
    FieldSpec schema = field("schema", FieldType::integer, Presence::required, "schema version (1)", 1, 1);
    FieldSpec kind = field("kind", FieldType::string, Presence::required, "entity kind");
    kind.choices = {"vision_family"};
    FieldSpec family = field("family", FieldType::string, Presence::required, "architecture family");
    family.choices = {"resnet", "efficientnet", "convnext", "vit", "yolov8", "detr", "unet", "fpn"};
    FieldSpec base = field("base", FieldType::object, Presence::optional, "architecture keys every variant shares");
    base.nested = &arch;
    return FieldTable{schema, kind, family, base,
                      field("variants", FieldType::any, Presence::required, "the models: list of variant objects"),
                      field("sources", FieldType::string_list, Presence::required, "citations of the architecture"),
                      field("notes", FieldType::string, Presence::optional, "free text")};
  }();
  return t;
}

Result<std::vector<VisionEntry>> load_vision_family(const std::string& path, const std::string& display) {
  Diagnostics diags;
  auto text = json_io::read_text_file(path, diags);
  if (!text) return Result<std::vector<VisionEntry>>(std::move(diags));
  auto j = json_io::parse(*text, display, diags);
  if (!j) return Result<std::vector<VisionEntry>>(std::move(diags));
  if (!j->is_object()) {
    diags.error(display, "/", "expected a vision family object (kind \"vision_family\")");
    return Result<std::vector<VisionEntry>>(std::move(diags));
  }
  ObjectReader r(*j, vision_family_fields(), display, "", diags);
  if (!r.valid()) return Result<std::vector<VisionEntry>>(std::move(diags));
  const std::string fam = r.str("family").value_or("resnet");
  wl::VisionArch base;
  base.family = fam == "efficientnet" ? wl::VisionFamily::efficientnet
                : fam == "convnext"   ? wl::VisionFamily::convnext
                : fam == "vit"        ? wl::VisionFamily::vit
                : fam == "yolov8"     ? wl::VisionFamily::yolov8
                : fam == "detr"       ? wl::VisionFamily::detr
                : fam == "unet"       ? wl::VisionFamily::unet
                : fam == "fpn"        ? wl::VisionFamily::fpn
                                      : wl::VisionFamily::resnet;
  if (auto b = r.object("base"); b && b->valid()) apply_arch(*b, display, diags, base);
  const std::vector<std::string> sources = r.strings("sources").value_or(std::vector<std::string>{});
  std::vector<VisionEntry> out;
  const Json* vs = r.raw("variants");
  if (vs == nullptr || !vs->is_array() || vs->empty()) {
    r.error("variants", "expected a non-empty list of variant objects");
    return Result<std::vector<VisionEntry>>(std::move(diags));
  }
  for (std::size_t i = 0; i < vs->size(); ++i) {
    const std::string ptr = "/variants/" + std::to_string(i);
    ObjectReader vr((*vs)[i], vision_variant_fields(), display, ptr, diags);
    if (!vr.valid()) continue;
    VisionEntry e;
    e.arch = base;
    apply_arch(vr, display, diags, e.arch);
    e.arch.id = vr.str("id").value_or("");
    e.name = vr.str("name").value_or(e.arch.id);
    e.aliases = vr.strings("aliases").value_or(std::vector<std::string>{});
    e.notes = vr.str("notes").value_or("");
    e.file = display;
    e.pointer = ptr;
    e.sources = sources;
    if (auto p = vr.object("published"); p && p->valid()) {
      VisionPublished pub;
      pub.params = p->integer("params").value_or(0);
      pub.gmacs = p->num("gmacs").value_or(0);
      pub.resolution = p->integer("resolution_px").value_or(0);
      pub.gmacs_rounding = p->num("gmacs_rounding").value_or(0.0005);
      pub.source = p->str("source").value_or("");
      e.published = pub;
    }
    if (diags.has_errors()) continue;
    check_arch(e.arch, display, ptr, diags);
    if (!diags.has_errors()) out.push_back(std::move(e));
  }
  if (diags.has_errors()) return Result<std::vector<VisionEntry>>(std::move(diags));
  return Result<std::vector<VisionEntry>>(std::move(out), std::move(diags));
}

wl::VisionGraph vision_graph(const VisionEntry& e, std::int64_t resolution) {
  return e.imported ? *e.imported : wl::build_vision_graph(e.arch, resolution);
}

const VisionEntry* VisionLibrary::find(const std::string& id_or_alias) const {
  for (const auto& m : models)
    if (m.arch.id == id_or_alias) return &m;
  for (const auto& m : models)
    for (const auto& a : m.aliases)
      if (a == id_or_alias) return &m;
  return nullptr;
}

std::vector<std::string> VisionLibrary::names() const {
  std::vector<std::string> out;
  for (const auto& m : models) {
    out.push_back(m.arch.id);
    out.insert(out.end(), m.aliases.begin(), m.aliases.end());
  }
  return out;
}

Result<VisionLibrary> load_vision_library(const std::string& data_dir) {
  Diagnostics diags;
  VisionLibrary lib;
  const fs::path dir = fs::path(data_dir) / "models" / "vision";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Result<VisionLibrary>(std::move(lib), std::move(diags));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::map<std::string, std::string> seen;
  for (const auto& f : files) {
    const std::string display = (fs::path("models") / "vision" / f.filename()).generic_string();
    auto fam = load_vision_family(f.string(), display);
    diags.append(fam.diagnostics());
    if (!fam.ok()) continue;
    for (auto& e : std::move(fam).value()) {
      bool clash = false;
      auto claim = [&](const std::string& n, const std::string& ptr) {
        auto [it, inserted] = seen.emplace(n, display);
        if (!inserted) {
          diags.error(display, ptr, fmt::format("'{}' is already used by {}", n, it->second));
          clash = true;
        }
      };
      claim(e.arch.id, e.pointer + "/id");
      for (std::size_t i = 0; i < e.aliases.size(); ++i) claim(e.aliases[i], e.pointer + "/aliases/" + std::to_string(i));
      if (!clash) lib.models.push_back(std::move(e));
    }
  }
  if (diags.has_errors()) return Result<VisionLibrary>(std::move(diags));
  return Result<VisionLibrary>(std::move(lib), std::move(diags));
}

}  // namespace gpuplan::wl_io
