// Segmentation networks of the vision library (issue #25 deliverable 1): the U-Net of Ronneberger et al. 2015 and the
// FPN segmentation head (torchvision's FeaturePyramidNetwork + the Panoptic FPN semantic branch), their counts worked
// out here independently of workloads/src/vision_seg.cpp, and their graph-only ONNX files
// (scripts/make_onnx_fixtures.py) importing with the library's counts.
#include <doctest/doctest.h>

#include <string>

#include "test_paths.hpp"
#include "gpuplan/wl/vision.hpp"
#include "gpuplan/wl_io/onnx_io.hpp"
#include "gpuplan/wl_io/vision_io.hpp"

namespace {
using namespace gpuplan;

const wl_io::VisionLibrary& lib() {
  static const wl_io::VisionLibrary l = [] {
    auto r = wl_io::load_vision_library(GPUPLAN_TEST_DATA_DIR);
    REQUIRE(r.ok());
    return r.value();
  }();
  return l;
}

wl::VisionGraph graph(const std::string& id) {
  const auto* e = lib().find(id);
  REQUIRE(e != nullptr);
  return wl::build_vision_graph(e->arch);
}

std::int64_t conv3(std::int64_t cin, std::int64_t cout, bool bias = true) { return cin * cout * 9 + (bias ? cout : 0); }

const std::string kOnnx = std::string(GPUPLAN_TEST_FIXTURES) + "/onnx/";

wl::VisionGraph import(const std::string& file) {
  auto r = wl_io::import_onnx_vision(kOnnx + file, file);
  INFO(r.diagnostics().to_string());
  REQUIRE(r.ok());
  return r.value().graph;
}
}  // namespace

TEST_CASE("U-Net: Fig. 1 of Ronneberger et al. 2015 - 572 px in, 388 px out, 31,030,658 parameters, 150.428 GMACs") {
  const auto g = graph("unet");
  REQUIRE(!g.ops.empty());
  CHECK(g.ops.back().h_out == 388);
  CHECK(g.ops.back().c_out == 2);
  // Parameters level by level (biases included), the figure's channels.
  const std::int64_t enc = conv3(1, 64) + conv3(64, 64) + conv3(64, 128) + conv3(128, 128) + conv3(128, 256) +
                           conv3(256, 256) + conv3(256, 512) + conv3(512, 512) + conv3(512, 1024) + conv3(1024, 1024);
  std::int64_t dec = 0;
  for (std::int64_t c : {512, 256, 128, 64}) dec += (2 * c) * c * 4 + c + conv3(2 * c, c) + conv3(c, c);
  CHECK(enc + dec + 64 * 2 + 2 == 31030658);
  CHECK(g.parameters() == 31030658);
  // MACs from the figure's printed map sizes: each 3×3 conv's output side, each up-convolution's input side.
  struct C {
    std::int64_t side, cin, cout;
  };
  const C convs[] = {{570, 1, 64},     {568, 64, 64},     {282, 64, 128},   {280, 128, 128},  {138, 128, 256},
                     {136, 256, 256},  {66, 256, 512},    {64, 512, 512},   {30, 512, 1024},  {28, 1024, 1024},
                     {54, 1024, 512},  {52, 512, 512},    {102, 512, 256},  {100, 256, 256},  {198, 256, 128},
                     {196, 128, 128},  {390, 128, 64},    {388, 64, 64}};
  std::int64_t macs = 0;
  for (const C& c : convs) macs += c.side * c.side * c.cin * c.cout * 9;
  const C ups[] = {{28, 1024, 512}, {52, 512, 256}, {100, 256, 128}, {196, 128, 64}};
  for (const C& u : ups) macs += u.side * u.side * u.cin * u.cout * 4;
  macs += 388 * 388 * 64 * 2;
  CHECK(macs == 150428424448);
  CHECK(g.macs() == macs);
  CHECK(g.count(wl::VisionOpKind::conv) == 23);  // "In total the network has 23 convolutional layers"
  CHECK(g.count(wl::VisionOpKind::copy) == 4);   // crop-and-concatenate per decoder level
  CHECK(g.count(wl::VisionOpKind::pool) == 4);
}

TEST_CASE("FPN head: the pyramid reproduces torchvision's fasterrcnn_resnet50_fpn 41,755,286 with ResNet-50 and the heads") {
  const auto g = graph("fpn-seg-head");
  std::int64_t pyramid = 0, semantic = 0;
  for (const auto& op : g.ops) (op.name.rfind("fpn.", 0) == 0 ? pyramid : semantic) += op.parameters();
  // torchvision.ops.FeaturePyramidNetwork([256, 512, 1024, 2048], 256): 1×1 inner and 3×3 layer convs with bias.
  CHECK(pyramid == (256 + 512 + 1024 + 2048) * 256 + 4 * 256 + 4 * conv3(256, 256));
  CHECK(pyramid == 3344384);
  // The backbone's convolutions (FrozenBatchNorm2d holds buffers only; no fc) from the library's ResNet-50.
  std::int64_t trunk = 0;
  for (const auto& op : graph("resnet50").ops)
    if (op.kind == wl::VisionOpKind::conv) trunk += op.parameters();
  CHECK(trunk == 23454912);
  // RPNHead: 3×3 conv 256 with bias, objectness 1×1 to 3 anchors, deltas 1×1 to 12; TwoMLPHead fc6 (256·7·7 → 1024),
  // fc7; FastRCNNPredictor: 91 classes, 4·91 box deltas.
  const std::int64_t rpn = conv3(256, 256) + (256 * 3 + 3) + (256 * 12 + 12);
  const std::int64_t box = (256 * 49 * 1024 + 1024) + (1024 * 1024 + 1024) + (1024 * 91 + 91) + (1024 * 364 + 364);
  CHECK(trunk + pyramid + rpn + box == 41755286);  // FasterRCNN_ResNet50_FPN_Weights.COCO_V1 num_params
  // The semantic branch (Panoptic FPN, Detectron2's SemSegFPNHead): 4 convs 256→128 and 3 convs 128→128 without
  // bias, 7 GroupNorms of 128 (weight and bias), the 1×1 predictor to 54 classes with bias.
  CHECK(semantic == 4 * conv3(256, 128, false) + 3 * conv3(128, 128, false) + 7 * 256 + 128 * 54 + 54);
  CHECK(g.parameters() == 4975158);
  // MACs at 800 px: C2…C5 at 200, 100, 50, 25 px.
  const std::int64_t s2 = 200 * 200, s3 = 100 * 100, s4 = 50 * 50, s5 = 25 * 25;
  const std::int64_t inner = (s2 * 256 + s3 * 512 + s4 * 1024 + s5 * 2048) * 256;
  const std::int64_t layer = (s2 + s3 + s4 + s5) * 256 * 256 * 9;
  const std::int64_t c256 = 256 * 128 * 9, c128 = 128 * 128 * 9;
  const std::int64_t sem = s2 * c256 + s3 * c256 + (s4 * c256 + s3 * c128) + (s5 * c256 + s4 * c128 + s3 * c128) +
                           s2 * 128 * 54;
  CHECK(g.macs() == inner + layer + sem);
  CHECK(g.macs() == 55511040000);
  CHECK(g.ops.back().h_out == 800);
  CHECK(g.ops.back().c_out == 54);
}

TEST_CASE("U-Net and FPN-head ONNX files import with the library's parameter and MAC counts") {
  struct Case {
    const char* file;
    const char* id;
  };
  for (const Case c : {Case{"unet.onnx", "unet"}, Case{"fpn_seg_head.onnx", "fpn-seg-head"}}) {
    INFO(c.file);
    const auto onnx = import(c.file);
    const auto g = graph(c.id);
    CHECK(onnx.parameters() == g.parameters());
    CHECK(onnx.macs() == g.macs());
    CHECK(onnx.count(wl::VisionOpKind::conv) == g.count(wl::VisionOpKind::conv));
  }
}
