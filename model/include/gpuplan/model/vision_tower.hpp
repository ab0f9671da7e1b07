#pragma once
// A multimodal model's vision tower (issue #23): its parameters, FLOPs and tokens per image, from the tower's op list
// (wl::VisionTower::graph(), one ViT description with the encoder, merger and projector), and its inference time on
// a GPU priced by the vision pricer (model/vision.hpp).
#include <cstdint>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model {

struct VisionTowerCounts {
  std::int64_t parameters = 0;          ///< encoder + merger + projector
  std::int64_t projector_parameters = 0;  ///< the merger's norm and the projector's linear layers
  std::int64_t patches = 0;             ///< patches the encoder sees per image
  std::int64_t tokens_per_image = 0;    ///< image tokens the language model reads per image
  units::Flops flops_per_image{};       ///< 2 × multiply-accumulates of the tower's ops (wl/vision.hpp convention)
  Derivation derivation;
};

/// Counts of `t`: parameters and MACs folded over its op list; FLOPs = 2·MACs (convolutions, linear layers, the two
/// attention matmuls; norms and activations are not counted, as vision papers count).
VisionTowerCounts vision_tower_counts(const wl::VisionTower& t, Explain explain = Explain::on);

}  // namespace gpuplan::model
