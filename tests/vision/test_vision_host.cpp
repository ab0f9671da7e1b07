// Eager PyTorch's host time (model/src/vision/vision_host.cpp): the sum of the measured per-module-call costs
// (data/validation/measured/h100-sxm5-80gb/eager_host_ops.json) over the op list, and the optimizer's Python step.
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
}  // namespace

TEST_CASE("eager ResNet-50 at batch 1 is host-bound: the host time is the measured module calls summed") {
  const auto g = graph("resnet50");
  model::VisionRunPlan p;
  p.batch = 1;
  p.autocast = false;
  p.cuda_graphs = false;
  const auto v = model::vision_inference(g, p, h100(), Explain::off);
  // 53 convolutions (no bias) 19.3 µs, 53 batch norms 43.2, 49 ReLUs 57.6 − 43.2, 16 adds 23.6, max and global
  // pooling 26.7 each, the classifier 38.4 (eager_host_ops.json, inference mode).
  const double us = 53 * 19.3 + 53 * 43.2 + 49 * (57.6 - 43.2) + 16 * 23.6 + 2 * 26.7 + 38.4;
  CHECK(v.pass.host_ops.raw() == gptest::approx(us * 1e-6));
  CHECK(v.pass.cpu_issue.raw() == gptest::approx(us * 1e-6));
  CHECK(v.latency.raw() == gptest::approx(us * 1e-6));  // the GPU's 1.5 ms is hidden behind the host
  CHECK(v.pass.gpu_time.raw() < v.pass.cpu_issue.raw());
  // A CUDA graph issues nothing from the host; the per-kernel model stays available (host_per_op off).
  p.cuda_graphs = true;
  CHECK(model::vision_inference(g, p, h100(), Explain::off).pass.cpu_issue.raw() == 0.0);
  p.cuda_graphs = false;
  p.host_per_op = false;
  const auto k = model::vision_inference(g, p, h100(), Explain::off);
  CHECK(k.pass.cpu_issue.raw() == gptest::approx(k.pass.kernels * p.launch.cpu_per_kernel.raw()));
}

TEST_CASE("eager training at a small batch: forward, backward and the optimizer's Python step bound the step") {
  const auto g = graph("resnet50");
  model::VisionTrainPlan tp;
  tp.run.batch = 32;
  tp.run.cuda_graphs = false;
  const auto r = model::vision_training(g, tp, h100(), Explain::off);
  // Training forward (autocast, autograd): conv 43.3, BN 59.3, ReLU 81.5 − 59.3, add 26.8, pools 31.0, linear 92.3.
  const double fwd = 53 * 43.3 + 53 * 59.3 + 49 * (81.5 - 59.3) + 16 * 26.8 + 2 * 31.0 + 92.3;
  const double bwd = 53 * 94.2 + 53 * 78.7 + 49 * (138.0 - 78.7) + 16 * 12.9 + 2 * 47.4 + 164.8;
  CHECK(r.forward.host_ops.raw() == gptest::approx(fwd * 1e-6));
  CHECK(r.backward.host_ops.raw() == gptest::approx(bwd * 1e-6));
  // Host-bound from end to end: the step is the host's sum, the optimizer's Python step included (SGD foreach over
  // ResNet-50's 161 parameter tensors: 515 µs + 161 × (6.36 + 3.5 for zero_grad)); the GPU's optimizer time stays
  // the streamed update.
  CHECK(r.optimizer.raw() < 1e-3);
  CHECK(r.step_time.raw() == gptest::approx((fwd + bwd + 515.0 + 161 * 9.86) * 1e-6));
  // At batch 256 the GPU is the bound and the host hides behind it.
  tp.run.batch = 256;
  const auto big = model::vision_training(g, tp, h100(), Explain::off);
  CHECK(big.forward.cpu_issue.raw() < big.forward.gpu_time.raw());
  CHECK(big.step_time.raw() >= big.forward.gpu_time.raw() + big.backward.gpu_time.raw());
  CHECK(big.step_time.raw() > 3.0 * (fwd + bwd) * 1e-6);
}
