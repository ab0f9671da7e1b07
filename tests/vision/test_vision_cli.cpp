// `gpuplan serve` / `gpuplan train` with a vision model: the JSON keys of issue #25, the flags that do not apply
// refused by name (exit 2), and the vision-only flags refused for a transformer.
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
  CHECK(j["throughput_images_per_s"].get<double>() == doctest::Approx(8.0 / lat));
  CHECK(j["cuda_graphs"] == true);
}

TEST_CASE("gpuplan train -m resnet50 --gpu h100 --global-batch 256 gives step_time_s and memory") {
  auto r = run({"train", "-m", "resnet50", "--gpu", "h100", "--global-batch", "256", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = parse_json(r);
  const double step = j["step_time_s"].get<double>();
  CHECK(step > 0);
  CHECK(j["images_per_s"].get<double>() == doctest::Approx(256.0 / step));
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

TEST_CASE("vision-only flags are refused for a transformer, and int8 compute too") {
  auto r = run({"serve", "-m", "llama-3.1-8b", "--fold-bn"});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "--fold-bn"));
  CHECK(contains(r.err, "applies to vision models only; 'llama-3.1-8b' is not a vision model"));
  auto t = run({"serve", "-m", "llama-3.1-8b", "--compute", "int8"});
  CHECK(t.rc == kInvalid);
  CHECK(contains(t.err, "int8 tensor-core compute is modelled for vision models"));
}

TEST_CASE("vision training on more than one GPU is refused with the reason, not run as one GPU") {
  auto r = run({"train", "-m", "resnet50", "--gpu", "h100", "--global-batch", "256", "--gpus", "8"});
  CHECK(r.rc == kInvalid);
  CHECK(contains(r.err, "data-parallel training of vision models"));
}

TEST_CASE("--explain prints the derivation of a vision latency") {
  auto r = run({"serve", "-m", "efficientnet-b4", "--batch", "4", "--enforce-eager", "--explain"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(contains(r.out, "Forward latency of one batch"));
  CHECK(contains(r.out, "t = max(Σ_ops t_op, kernels · t_cpu)"));
}
