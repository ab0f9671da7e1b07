// `gpuplan pipeline FILE`: a real-time multi-model pipeline (docs/pipelines.md) on one chip — per-stage latency, the
// schedule as a Gantt chart against the deadline (text, Markdown, JSON, SVG), the critical path, the deadline at the
// mean and at P99, the slack. Exit 0 when P99 meets the deadline, 3 when it does not (the report is printed either
// way), 2 on invalid input.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "pipeline_render.hpp"

namespace gpuplan::cli {
namespace {

struct PipelineFlags {
  std::string file, gpu, node, format = "text";
  std::string share_backbone, int8, fusion, cuda_graphs, temporal_reuse;
  int frames = 20000;
  long long seed = 1;
  bool no_calibration = false;
};

bool parse_switch(const std::string& v, const char* flag, std::optional<bool>& out, Diagnostics& diags) {
  if (v.empty()) return true;
  if (v == "on" || v == "true") out = true;
  else if (v == "off" || v == "false") out = false;
  else {
    diags.error("", flag, fmt::format("'{}' is not on or off", v));
    return false;
  }
  return true;
}

int run_pipeline(const GlobalOptions& g, const PipelineFlags& f) {
  Diagnostics diags;
  auto dir = find_data_dir(g.data_dir, diags);
  if (!dir) return report(diags);
  const auto ws = app::load_workspace(*dir, {.hardware = true, .models = false});
  diags.append(ws.diagnostics());
  if (!ws.ok()) return report(diags);
  const hw::HardwareDb& db = ws->db;
  auto spec = app::load_pipeline_spec(*dir, f.file, f.file);
  diags.append(spec.diagnostics());
  if (!spec.ok()) return report(diags);

  app::PipelineRequest req;
  req.data_dir = *dir;
  req.db = &db;
  req.spec = spec.value();
  req.gpu = f.gpu;
  req.node = f.node;
  req.no_calibration = f.no_calibration;
  req.rt.frames = f.frames;
  req.rt.seed = static_cast<std::uint64_t>(f.seed);
  req.explain = g.explain ? Explain::on : Explain::off;
  parse_switch(f.share_backbone, "--share-backbone", req.overrides.share_backbone, diags);
  parse_switch(f.int8, "--int8", req.overrides.int8, diags);
  parse_switch(f.fusion, "--fusion", req.overrides.fusion, diags);
  parse_switch(f.cuda_graphs, "--cuda-graphs", req.overrides.cuda_graphs, diags);
  parse_switch(f.temporal_reuse, "--temporal-reuse", req.overrides.temporal_reuse, diags);
  if (diags.has_errors()) return report(diags);
  auto r = app::evaluate_pipeline(req);
  diags.append(r.diagnostics());
  if (!r.ok()) return report(diags);
  report(diags);  // notes
  const PipelineResult& res = r.value();
  if (f.format == "json") out(json_text(pipeline_json(res, g.explain)));
  else if (f.format == "svg") out(pipeline_svg(res));
  else out(pipeline_text(res, f.format == "md", g.explain));
  return res.schedule.meets_p ? kExitOk : kExitInfeasible;
}

}  // namespace

void register_pipeline(CLI::App& app, GlobalOptions& g, int& rc) {
  auto f = std::make_shared<PipelineFlags>();
  auto* c = app.add_subcommand(
      "pipeline", "schedule a real-time multi-model pipeline on one chip: Gantt, critical path, deadline at mean and P99");
  c->add_option("FILE", f->file, "pipeline file (docs/pipelines.md; e.g. data/scenarios/ad-perception.json)")->required();
  c->add_option("--gpu", f->gpu, "GPU id or alias (default: the file's hardware)");
  c->add_option("--node", f->node, "node id (picks its GPU)");
  c->add_option("--format,-f", f->format, "output format")
      ->check(CLI::IsMember({"text", "md", "json", "svg"}))
      ->capture_default_str();
  c->add_option("--share-backbone", f->share_backbone, "on|off: heads read one backbone run (file's options)");
  c->add_option("--int8", f->int8, "on|off: every model stage in int8");
  c->add_option("--fusion", f->fusion, "on|off: TensorRT-like fused engine (BN folded, epilogue fusion)");
  c->add_option("--cuda-graphs", f->cuda_graphs, "on|off: model stages replayed from CUDA graphs");
  c->add_option("--temporal-reuse", f->temporal_reuse, "on|off: honour every_k_frames");
  c->add_option("--frames", f->frames, "Monte-Carlo frames for P99")->check(CLI::Range(100, 1000000))->capture_default_str();
  c->add_option("--seed", f->seed, "Monte-Carlo seed")->check(CLI::Range(0LL, 1LL << 62))->capture_default_str();
  c->add_flag("--no-calibration", f->no_calibration, "use the built-in efficiency defaults");
  c->add_flag("--explain", g.explain, "print the derivation");
  c->callback([&g, &rc, f] { rc = run_pipeline(g, *f); });
}

}  // namespace gpuplan::cli
