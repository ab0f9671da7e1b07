#include "gpuplan/model/vision_tower.hpp"

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::model {

VisionTowerCounts vision_tower_counts(const wl::VisionTower& t, Explain explain) {
  VisionTowerCounts c;
  const wl::VisionGraph g = t.graph();
  c.parameters = g.parameters();
  for (const auto& op : g.ops) {
    if (op.name.rfind("merger.", 0) == 0 || op.name.rfind("projector.", 0) == 0) c.projector_parameters += op.parameters();
    if (op.name == "conv_proj") c.patches = op.h_out * op.w_out;
  }
  c.tokens_per_image = t.tokens_per_image();
  c.flops_per_image = units::Flops(2.0 * static_cast<double>(g.macs()));
  if (explain == Explain::on) {
    using units::format_count;
    const auto& a = t.encoder;
    Derivation& d = c.derivation;
    d.id = "vision_tower";
    d.title = "Vision tower";
    d.formula = "Σ over the tower's ops: parameters; FLOPs = 2·Σ MACs (patch conv, linear layers, QKᵀ and PV)";
    const Origin cfg = Origin::model_config(t.kind);
    d.inputs = {{"image", fmt::format("{}×{} px", a.resolution, a.resolution), t.resolution_origin, cfg},
                {"patch", format_count(double(a.patch)), "patch side (px)", cfg},
                {"width", format_count(double(a.hidden)), "encoder width", cfg},
                {"layers", format_count(double(a.layers)), "encoder blocks", cfg},
                {"mlp", format_count(double(a.mlp)), "encoder MLP width", cfg},
                {"merge", format_count(double(a.vit.merge)), "patches per image token", cfg}};
    d.result = fmt::format("{} parameters, {} FLOP and {} tokens per image", format_count(double(c.parameters)),
                           units::format(c.flops_per_image), c.tokens_per_image);
    d.notes.push_back(fmt::format("{} patches; the projector (and merger norm) holds {} parameters", c.patches,
                                  format_count(double(c.projector_parameters))));
  }
  return c;
}

}  // namespace gpuplan::model
