// The fused conv-BN-ReLU training engine (VisionRunPlan::fused_training; model/src/vision/vision_kernels.hpp FusedRole,
// vision_fused.cpp): which of ResNet-50's eager kernels disappear, which remain as what, and what it leaves alone.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>

#include "test_paths.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/vision.hpp"
#include "gpuplan/wl_io/vision_io.hpp"

namespace {
using namespace gpuplan;

model::Device h100() {
  static const hw::HardwareDb db = [] {
    auto r = hw_io::load_hardware_db(GPUPLAN_TEST_DATA_DIR);
    REQUIRE(r.ok());
    return r.value();
  }();
  const hw::GpuSpec* g = db.find_gpu("h100-sxm5-80gb");
  REQUIRE(g != nullptr);
  return model::make_device(*g);
}

wl::VisionGraph graph(const std::string& id) {
  static const wl_io::VisionLibrary lib = [] {
    auto r = wl_io::load_vision_library(GPUPLAN_TEST_DATA_DIR);
    REQUIRE(r.ok());
    return r.value();
  }();
  const auto* e = lib.find(id);
  REQUIRE(e != nullptr);
  return wl::build_vision_graph(e->arch);
}

model::VisionTrainPlan train_plan(bool fused) {
  model::VisionTrainPlan p;
  p.run.batch = 256;
  p.run.compute = hw::Precision::fp16;
  p.run.autocast = !fused;
  p.run.cuda_graphs = fused;
  p.run.fused_training = fused;
  return p;
}

int count_named(const model::VisionPassCost& pc, const std::string& what) {
  int n = 0;
  for (const auto& op : pc.ops) n += op.name.find(what) != std::string::npos ? 1 : 0;
  return n;
}
}  // namespace

TEST_CASE("fused training engine on ResNet-50: BN statistics, scale-bias-ReLU and the ReLU passes disappear") {
  const auto g = graph("resnet50");
  auto eager_plan = train_plan(false);
  eager_plan.run.cuda_graphs = true;  // the same per-kernel cost on both sides: the GEMMs compare exactly
  const auto eager = model::vision_training(g, eager_plan, h100(), Explain::on);
  const auto fused = model::vision_training(g, train_plan(true), h100(), Explain::on);
  // 53 batch norms: each a finalize kernel forward and one dReLU-fork-dBN kernel backward; no statistics pass.
  CHECK(count_named(fused.forward, "BN finalize") == 53);
  CHECK(count_named(fused.backward, "dReLU-fork-dBN") == 53);
  CHECK(count_named(fused.forward, " statistics") == 0);
  CHECK(count_named(eager.forward, " statistics") == 53);
  // 16 bottleneck outputs: scale, bias, add and ReLU in one kernel; the stem's BN-ReLU before max pooling is the one
  // activated map materialised on its own; the 32 ReLUs inside the blocks are prologues of the next convolution.
  CHECK(count_named(fused.forward, "scale-bias-add-ReLU") == 16);
  CHECK(count_named(fused.forward, "scale-bias-ReLU") == 1);  // the stem's "relu"
  CHECK(count_named(fused.forward, ".relu") == 0);              // layerN.M.relu1 / relu2 / relu: no kernel
  CHECK(count_named(eager.forward, ".relu") == 48);
  // The GEMMs are the same convolutions (fp16 either way).
  CHECK(fused.forward.gemm.raw() == gptest::approx(eager.forward.gemm.raw()).epsilon(1e-12));
  CHECK(fused.backward.gemm.raw() == gptest::approx(eager.backward.gemm.raw()).epsilon(1e-12));
  // What the engine saves is memory-bound time: at least the eager BN statistics passes forward and the ReLU
  // backward passes (which it drops whole) beside what it adds (finalize kernels, block outputs, dBN at streaming rate).
  double stats = 0, relu_bwd = 0;
  for (const auto& op : eager.forward.ops) stats += op.name.find(" statistics") != std::string::npos ? op.time.raw() : 0.0;
  for (const auto& op : eager.backward.ops)
    relu_bwd += op.name.find("relu") != std::string::npos ? op.time.raw() : 0.0;
  CHECK(stats > 0);
  CHECK(relu_bwd > 0);
  CHECK(fused.forward.elementwise.raw() < eager.forward.elementwise.raw() - stats);
  CHECK(fused.backward.elementwise.raw() < eager.backward.elementwise.raw() - relu_bwd);
  CHECK(fused.step_time.raw() < eager.step_time.raw());
}

TEST_CASE("fused training engine leaves layer-norm and SiLU networks' kernels alone") {
  // ViT-B/16 has no batch norm: the same elementwise kernels; EfficientNet's SiLU is no ReLU and its residual adds
  // have no activation (the fused-ops API's is ReLU): its batch norms stay eager.
  const auto vit = graph("vit-b-16");
  auto pe = train_plan(false);
  auto pf = train_plan(true);
  pf.run.autocast = true;  // isolate the engine from the weight casts
  pf.run.cuda_graphs = false;
  const auto e = model::vision_training(vit, pe, h100(), Explain::off);
  const auto f = model::vision_training(vit, pf, h100(), Explain::off);
  CHECK(f.forward.elementwise.raw() == gptest::approx(e.forward.elementwise.raw()).epsilon(1e-12));
  CHECK(f.backward.elementwise.raw() == gptest::approx(e.backward.elementwise.raw()).epsilon(1e-12));
  const auto eff = graph("efficientnet-b4");
  const auto fe = model::vision_training(eff, pf, h100(), Explain::on);
  CHECK(count_named(fe.forward, "scale-bias-add-ReLU") == 0);
  CHECK(count_named(fe.forward, " statistics") > 0);
}
