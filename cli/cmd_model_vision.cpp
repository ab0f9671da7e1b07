// `gpuplan model show` for a vision model: a library entry (data/models/vision) or an ONNX file (issue #25): the op
// list's parameters and multiply-accumulates, its ops by kind, the publisher's counts where the library has them, and
// what the ONNX import read. --explain lists every op with its shapes and counts.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuplan/core/format.hpp"
#include "gpuplan/wl_io/onnx_io.hpp"
#include "gpuplan/wl_io/vision_io.hpp"
#include "vision_cmd.hpp"

namespace gpuplan::cli {
namespace {

namespace u = gpuplan::units;

const char* kind_name(wl::VisionOpKind k) {
  switch (k) {
    case wl::VisionOpKind::conv: return "conv";
    case wl::VisionOpKind::linear: return "linear";
    case wl::VisionOpKind::norm: return "norm";
    case wl::VisionOpKind::activation: return "activation";
    case wl::VisionOpKind::pool: return "pool";
    case wl::VisionOpKind::add: return "add";
    case wl::VisionOpKind::mul: return "mul";
    case wl::VisionOpKind::attention: return "attention";
    case wl::VisionOpKind::embedding: return "embedding";
    case wl::VisionOpKind::matmul: return "matmul";
    case wl::VisionOpKind::resize: return "resize";
    case wl::VisionOpKind::copy: return "copy";
  }
  return "?";
}

constexpr wl::VisionOpKind kVisionKinds[] = {wl::VisionOpKind::conv,      wl::VisionOpKind::linear, wl::VisionOpKind::norm,
                                       wl::VisionOpKind::activation, wl::VisionOpKind::pool, wl::VisionOpKind::add,
                                       wl::VisionOpKind::mul,       wl::VisionOpKind::attention,
                                       wl::VisionOpKind::embedding, wl::VisionOpKind::matmul,
                                       wl::VisionOpKind::resize,    wl::VisionOpKind::copy};

std::string shape(std::int64_t c, std::int64_t h, std::int64_t w) { return fmt::format("{}×{}×{}", c, h, w); }

}  // namespace

std::optional<int> show_vision_model(const GlobalOptions& g, const std::string& name) {
  Diagnostics diags;
  std::optional<wl_io::VisionEntry> entry;
  std::optional<wl_io::OnnxImport> onnx;
  if (wl_io::is_onnx_path(name)) {
    auto r = wl_io::import_onnx_vision(name, name);
    diags.append(r.diagnostics());
    if (!r.ok()) return report(diags);
    onnx = std::move(r).value();
    wl_io::VisionEntry e;
    e.arch.id = onnx->graph.id;
    e.arch.family = wl::VisionFamily::onnx;
    e.name = name;
    e.file = name;
    e.imported = onnx->graph;
    entry = std::move(e);
  } else {
    Diagnostics quiet;
    const auto dir = find_data_dir(g.data_dir, quiet);
    if (!dir) return std::nullopt;
    auto lib = wl_io::load_vision_library(*dir);
    if (!lib.ok()) return report(lib.diagnostics());
    const wl_io::VisionEntry* e = lib->find(name);
    if (e == nullptr) return std::nullopt;
    entry = *e;
  }
  const wl_io::VisionEntry& m = *entry;
  const wl::VisionGraph graph = wl_io::vision_graph(m);
  const double macs = static_cast<double>(graph.macs());
  const Format f = parse_format(g.format);
  if (f == Format::json || f == Format::csv) {
    nlohmann::ordered_json j;
    j["id"] = m.arch.id;
    j["name"] = m.name;
    j["workload"] = "vision";
    j["family"] = wl::to_string(m.arch.family);
    j["file"] = m.file;
    j["resolution_px"] = graph.resolution;
    j["params"] = graph.parameters();
    j["macs_per_image"] = graph.macs();
    j["flops_per_image"] = 2.0 * macs;
    j["ops"] = nlohmann::ordered_json::object();
    for (auto k : kVisionKinds)
      if (graph.count(k) > 0) j["ops"][kind_name(k)] = graph.count(k);
    if (m.published)
      j["published"] = {{"params", m.published->params},
                        {"gmacs", m.published->gmacs},
                        {"resolution_px", m.published->resolution},
                        {"source", m.published->source}};
    if (onnx) {
      j["onnx"] = {{"producer", onnx->producer},       {"opset", onnx->opset},
                   {"batch", onnx->batch},             {"inputs", onnx->inputs},
                   {"nodes", onnx->nodes},             {"views", onnx->views},
                   {"attention_patterns", onnx->attention_patterns},
                   {"bn_buffers", onnx->buffers},      {"parameter_tensors", onnx->parameter_tensors},
                   {"node_types", onnx->node_types}};
    }
    if (g.explain) {
      j["op_list"] = nlohmann::ordered_json::array();
      for (const auto& op : graph.ops)
        j["op_list"].push_back({{"name", op.name},
                                {"kind", kind_name(op.kind)},
                                {"in", {op.c_in, op.h_in, op.w_in}},
                                {"out", {op.c_out, op.h_out, op.w_out}},
                                {"kernel", op.kernel_area()},
                                {"groups", op.groups},
                                {"params", op.parameters()},
                                {"macs", op.macs()}});
    }
    out(json_text(j));
    return report(diags);
  }
  std::vector<Section> sec;
  Section s{fmt::format("Vision model: {} ({})", m.name, wl::to_string(m.arch.family)),
            {{"id", m.arch.id},
             {"file", m.file},
             {"input", graph.resolution > 0 ? fmt::format("{}×{} px", graph.resolution, graph.resolution)
                                            : std::string("not an image (token or feature input)")},
             {"parameters", fmt::format("{} ({})", graph.parameters(), u::format_number(static_cast<double>(graph.parameters()), 4))},
             {"MACs per image", fmt::format("{} ({} GMACs, {} GFLOPs)", graph.macs(), u::format_number(macs / 1e9, 4),
                                            u::format_number(2.0 * macs / 1e9, 4))}}};
  std::string kinds;
  for (auto k : kVisionKinds)
    if (graph.count(k) > 0) kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", graph.count(k), kind_name(k));
  s.rows.push_back({"ops", fmt::format("{} ({})", graph.ops.size(), kinds)});
  sec.push_back(s);
  if (m.published)
    sec.push_back({"Published",
                   {{"parameters", std::to_string(m.published->params)},
                    {"GMACs per image", fmt::format("{:g} at {} px", m.published->gmacs, m.published->resolution)},
                    {"source", m.published->source}}});
  if (onnx) {
    std::string types;
    for (const auto& [t, n] : onnx->node_types) types += fmt::format("{}{} {}", types.empty() ? "" : ", ", n, t);
    std::string ins;
    for (const auto& i : onnx->inputs) ins += (ins.empty() ? "" : "; ") + i;
    sec.push_back({"ONNX import",
                   {{"producer", onnx->producer.empty() ? std::string("(none)") : onnx->producer},
                    {"opset", std::to_string(onnx->opset)},
                    {"inputs", ins},
                    {"nodes", fmt::format("{} read: {} ops, {} views (no kernel), {} attention chains fused",
                                          onnx->nodes, graph.ops.size(), onnx->views, onnx->attention_patterns)},
                    {"node types", types},
                    {"parameter tensors", std::to_string(onnx->parameter_tensors)},
                    {"BN buffers (not parameters)", std::to_string(onnx->buffers)}}});
  }
  if (g.explain) {
    Section ops{"Ops (per image)", {}};
    for (const auto& op : graph.ops)
      ops.rows.push_back({op.name, fmt::format("{} {} → {}{}, {} params, {} MACs", kind_name(op.kind),
                                               shape(op.c_in, op.h_in, op.w_in), shape(op.c_out, op.h_out, op.w_out),
                                               op.kind == wl::VisionOpKind::conv
                                                   ? fmt::format(" (k{}{}, g{}{})", op.kernel,
                                                                 op.kernel_w > 0 ? fmt::format("×{}", op.kernel_w) : "",
                                                                 op.groups, op.transposed ? ", transposed" : "")
                                                   : std::string(),
                                               op.parameters(), op.macs())});
    sec.push_back(ops);
  }
  out(render_sections(sec, f));
  return report(diags);
}

}  // namespace gpuplan::cli
