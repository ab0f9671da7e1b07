// `gpuplan serve` / `gpuplan train` with a vision model: the JSON keys of issue #25, the flags that do not apply
// refused by name (exit 2), and the vision-only flags refused for a transformer.
#include <algorithm>
#include <cmath>
#include <vector>

#include "approx.hpp"
#include "cli_runner.hpp"

using namespace gpuplan::cli_test;

TEST_CASE("gpuplan serve -m resnet50 --gpu h100 --batch 8 gives latency_s and images/s") {
  auto r = run({"serve", "-m", "resnet50", "--gpu", "h100", "--batch", "8", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = parse_json(r);
  CHECK(j["workload"] == "vision");
  CHECK(j["batch"] == 8);
  CHECK(j["params"] == 25557032);
  const double lat = j["latency_s"].get<double>();
  CHECK(lat > 0);
  CHECK(j["throughput_images_per_s"].get<double>() == gptest::approx(8.0 / lat));
  CHECK(j["cuda_graphs"] == true);
}

TEST_CASE("gpuplan train -m resnet50 --gpu h100 --global-batch 256 gives step_time_s and memory") {
  auto r = run({"train", "-m", "resnet50", "--gpu", "h100", "--global-batch", "256", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = parse_json(r);
  const double step = j["step_time_s"].get<double>();
  CHECK(step > 0);
  CHECK(j["images_per_s"].get<double>() == gptest::approx(256.0 / step));
  CHECK(j["memory_GiB"]["total"].get<double>() > 0);
  CHECK(j["fits"] == true);
}

TEST_CASE("flags that mean nothing for a vision model are refused by name with exit 2") {
  auto r = run({"train", "-m", "resnet50", "--gpu", "h100", "--global-batch", "256", "--seq", "4096", "--tp", "2"});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--seq"));
  CHECK(contains(r.err, "--tp"));
  CHECK(contains(r.err, "does not apply to a vision model ('resnet50', resnet)"));
  auto s = run({"serve", "-m", "vit-b-16", "--kv-dtype", "fp8", "--input-tokens", "10"});
  CHECK(s.rc == kInvalid);
  CHECK(contains(s.err, "--kv-dtype"));
  CHECK(contains(s.err, "--input-tokens"));
}

TEST_CASE("vision-only flags are refused for a transformer") {
  auto r = run({"serve", "-m", "llama-3.1-8b", "--fold-bn"});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--fold-bn"));
  CHECK(contains(r.err, "applies to vision models only; 'llama-3.1-8b' is not a vision model"));
}

// A transformer's --compute int8 is W8A8 (issue #27 item 5; docs/cli.md `serve`, app/src/resolve.cpp): int8 weights,
// per-token activation quantisation, int8 tensor cores. Without int8 weights it is refused by that rule, not by the
// field table's choices.
TEST_CASE("a transformer's int8 compute is W8A8: it needs int8 weights, and with them decodes faster than bf16") {
  auto t = run({"serve", "-m", "llama-3.1-8b", "--gpu", "h100", "--compute", "int8"});
  CHECK(t.rc == kInvalid);
  CHECK(contains(t.err, "--compute: error: int8 GEMMs (W8A8) need int8 weights (--weight-dtype int8), not bf16"));
  auto i8 = run({"serve", "-m", "llama-3.1-8b", "--gpu", "h100", "--batch", "8", "--compute", "int8", "--weight-dtype",
                 "int8", "--format", "json"});
  auto bf = run({"serve", "-m", "llama-3.1-8b", "--gpu", "h100", "--batch", "8", "--format", "json"});
  REQUIRE(i8.rc == 0);
  REQUIRE(bf.rc == 0);
  const auto a = parse_json(i8);
  const auto b = parse_json(bf);
  CHECK(a["compute"] == "int8");
  CHECK(a["weight_dtype"] == "int8");
  // Decoding 8 sequences of an 8B model streams its weights each step: 1-byte weights make the step shorter.
  CHECK(a["decode_step_s"].get<double>() < b["decode_step_s"].get<double>());
}

TEST_CASE("vision training with DDP: the per-GPU step grows by the exposed all-reduce and the BN-buffer broadcast") {
  auto one = run({"train", "-m", "resnet50", "--gpu", "h100", "--global-batch", "256", "--format", "json"});
  auto two = run({"train", "-m", "resnet50", "--gpu", "h100", "--global-batch", "512", "--gpus", "2", "--format", "json"});
  REQUIRE(one.rc == 0);
  REQUIRE(two.rc == 0);
  const auto a = parse_json(one), b = parse_json(two);
  CHECK(b["gpus"] == 2);
  CHECK(b["allreduce_s"].get<double>() > 0);
  // One micro-batch per step: one forward, one buffer broadcast (ResNet-50's batch norms); one GPU has none.
  CHECK(a["buffer_broadcast_s_per_forward"].get<double>() == 0);
  CHECK(b["buffer_broadcast_s_per_forward"].get<double>() > 0);
  CHECK(b["step_time_s"].get<double>() ==
        gptest::approx(a["step_time_s"].get<double>() + b["exposed_comm_s"].get<double>() +
                        b["buffer_broadcast_s_per_forward"].get<double>()));
  CHECK(b["images_per_s"].get<double>() == gptest::approx(512.0 / b["step_time_s"].get<double>()));
  auto big = run({"train", "-m", "resnet50", "--gpu", "h100", "--global-batch", "256", "--gpus", "16"});
  CHECK(big.rc == kInvalid);
  CHECK(contains(big.err, "modelled inside one node"));
  auto odd = run({"train", "-m", "resnet50", "--gpu", "h100", "--global-batch", "255", "--gpus", "2"});
  CHECK(odd.rc == kInvalid);
  CHECK(contains(odd.err, "255 images do not split evenly over 2 GPUs"));
}

TEST_CASE("--explain prints the derivation of a vision latency") {
  auto r = run({"serve", "-m", "efficientnet-b4", "--batch", "4", "--enforce-eager", "--explain"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(contains(r.out, "Forward latency of one batch"));
  CHECK(contains(r.out, "t = max(Σ_ops t_op, kernels · t_cpu)"));
}

TEST_CASE("CUDA-graph inference on an H100 is within issue 25's 15 percent median of our own measurements") {
  // data/validation/measured/h100-sxm5-80gb/vision_inference_profile.json: torchvision ResNet-50, EfficientNet-B4
  // and ViT-B/16, bf16 weights, batch 1-256, one CUDA graph per forward (scripts/measure/vision_bench.py). Nothing
  // of it is fitted; eager and training cases are reported by `gpuplan validate` without a target asserted here.
  auto r = run({"validate", "--format", "json"});
  REQUIRE(r.rc == 0);
  const auto j = parse_json(r);
  const auto& v = j["vision"];
  const auto& graph = v["by_kind"]["inference-graph"];
  CHECK(graph["evaluated"] == 27);
  CHECK(graph["median_abs_error"].get<double>() <= 0.15);
  CHECK(v["by_kind"]["inference-eager"]["evaluated"] == 27);
  CHECK(v["by_kind"]["training"]["evaluated"] == 11);
  // DDP steps on 2 and 4 GPUs of one node.
  CHECK(v["by_kind"]["training-ddp"]["evaluated"] == 5);
}

TEST_CASE("issue 25's training steps on an H100 are within 15 percent median of our measurements, and the kinds are all run") {
  // The issue's `train -m <model> --gpu h100 --global-batch 256` for ResNet-50 and ViT-B/16 (EfficientNet-B4 was
  // measured up to 64 images a GPU: its largest batch stands in), against vision_train_*.json. The memory-bound
  // kernels' bandwidth fractions come from a per-kernel profile of these runs (vision_train_profile.json); this
  // asserts the target, not a fit.
  auto r = run({"validate", "--format", "json"});
  REQUIRE(r.rc == 0);
  const auto j = parse_json(r);
  const auto& v = j["vision"];
  std::vector<double> errs;
  for (const auto& c : v["cases"]) {
    const std::string id = c["id"].get<std::string>();
    if (id == "h100-sxm5-80gb-resnet50-train-b256-x1" || id == "h100-sxm5-80gb-vit_b_16-train-b256-x1" ||
        id == "h100-sxm5-80gb-efficientnet_b4-train-b64-x1")
      errs.push_back(std::fabs(c["error"].get<double>()));
  }
  REQUIRE(errs.size() == 3);
  std::sort(errs.begin(), errs.end());
  CHECK(errs[1] <= 0.15);
  CHECK(v["by_kind"]["training-loader"]["evaluated"] == 4);
  CHECK(v["by_kind"]["published-pytorch"]["evaluated"] == 4);
  // MLPerf's MXNet ResNet-50 (DGX-1 V100, DGX A100, DGX H100), priced with the fused conv-BN-ReLU training engine:
  // each within 15% (it was -38% to -44% priced as eager PyTorch).
  CHECK(v["by_kind"]["published-mlperf"]["evaluated"] == 3);
  CHECK(v["by_kind"]["published-mlperf"]["max_abs_error"].get<double>() <= 0.15);
}

TEST_CASE("an input size the network cannot take is refused at --resolution") {
  auto r = run({"serve", "-m", "convnext-t", "--resolution", "16"});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--resolution: error: at 16 px the feature map vanishes"));
  auto v = run({"train", "-m", "vit-b-16", "--gpu", "h100", "--global-batch", "8", "--resolution", "230"});
  CHECK(v.rc == kInvalid);
  CHECK(contains(v.err, "a ViT takes a multiple of its patch size (16 px), not 230 px"));
}

TEST_CASE("a vision training step that does not fit in the GPU's memory is infeasible: exit 3") {
  auto r = run({"train", "-m", "vit-l-16", "--gpu", "h100", "--global-batch", "1024", "--format", "json"});
  CHECK(r.rc == kInfeasible);
  const auto j = parse_json(r);
  CHECK(j["fits"] == false);
  CHECK(j["memory_GiB"]["total"].get<double>() > j["memory_GiB"]["capacity"].get<double>());
}
