// `gpuplan calibrate` end to end on the recorded samples (no GPU needed) and its diagnostics.
#include <doctest/doctest.h>

#include "../cli/cli_runner.hpp"

using namespace gpuplan::cli_test;

TEST_CASE("calibrate fit on the recorded H100 samples (two GPUs, sweeps, bf16 and fp8 sustained runs, 2-/4-GPU "
          "collectives and overlap items) reproduces the shipped profile") {
  const std::string dir = kData + "/calibration/h100-sxm5-80gb/";
  const Run r = run({"calibrate", "fit", dir + "samples-2026-11-22.json", dir + "samples-2026-11-22-second-gpu.json",
                     dir + "samples-gemm-bf16-2026-11-22.json", dir + "samples-sustained-2026-11-22.json",
                     dir + "samples-gemm-bf16-fp8-2026-11-22.json", dir + "samples-sustained-bf16-fp8-2026-11-22.json",
                     dir + "samples-depth-1-2026-11-22.json", dir + "samples-depth-2-2026-11-22.json",
                     dir + "samples-collectives-4gpu-dense-2026-11-26.json",
                     dir + "samples-collectives-2gpu-dense-2026-11-26.json", dir + "samples-overlap-4gpu-2026-11-26.json",
                     dir + "samples-overlap-2gpu-2026-11-26.json", "--dry-run", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out == slurp(kData + "/calibration/h100-sxm5-80gb/profile.json"));
  CHECK(contains(r.out, "\"all_to_all\""));  // the 2026-11-26 NVLink sweeps on 2 and 4 GPUs
  CHECK(contains(r.out, "\"dtype\": \"bf16\""));
  CHECK(contains(r.out, "\"gemm_memory\""));
  CHECK(contains(r.out, "\"gemm_sustained_ratio_fp8\""));
  CHECK(contains(r.out, "\"depth_iterations\""));  // fitted from the two depth sweeps
}

TEST_CASE("calibrate fit on the recorded H200 suite, sweep, sustained run, 2-/4-GPU collectives and overlap items "
          "reproduces the shipped profile") {
  const std::string dir = kData + "/calibration/h200-sxm-141gb/";
  const Run r = run({"calibrate", "fit", dir + "samples-2026-11-22.json", dir + "samples-gemm-bf16-2026-11-22.json",
                     dir + "samples-sustained-2026-11-22.json", dir + "samples-collectives-2gpu-2026-11-22.json",
                     dir + "samples-collectives-4gpu-2026-11-22.json", dir + "samples-collectives-2gpu-dense-2026-11-22.json",
                     dir + "samples-collectives-2gpu-dense-first-host-2026-11-22.json",
                     dir + "samples-collectives-4gpu-dense-2026-11-22.json", dir + "samples-overlap-2gpu-2026-11-22.json",
                     dir + "samples-overlap-4gpu-2026-11-22.json", dir + "samples-gemm-bf16-fp8-2026-11-22.json",
                     dir + "samples-sustained-bf16-fp8-2026-11-22.json", dir + "samples-depth-1-2026-11-22.json",
                     dir + "samples-depth-2-2026-11-22.json", "--gpu", "h200", "--dry-run", "--format", "json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.out == slurp(dir + "profile.json"));
  // Two of the dense sweeps stopped early (the bench hung; data/calibration/README.md): their items are used, and said so.
  CHECK(contains(r.out, "samples-collectives-4gpu-dense-2026-11-22.json: the sweep stopped before its end"));
  CHECK_FALSE(contains(r.out, "samples-collectives-2gpu-dense-2026-11-22.json: the sweep stopped"));
  CHECK(contains(r.out, "\"op\": \"all_reduce\""));
  CHECK(contains(r.out, "\"ranks\": 4"));
  CHECK(contains(r.out, "\"overlap\""));
  CHECK(contains(r.out, "\"gemm_sustained_ratio\""));
}

TEST_CASE("calibrate show prints the profile against the built-in defaults") {
  const Run r = run({"calibrate", "show", "h100"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK(contains(r.out, "bf16 GEMM ceiling η"));
  CHECK(contains(r.out, "(built-in 0.757)"));
  CHECK(contains(r.out, "memory-bound GEMM streaming η"));
}

TEST_CASE("calibrate: bad input exits 2 with the file, pointer or flag") {
  SUBCASE("a samples file that is not one") {
    const Run r = run({"calibrate", "fit", kData + "/hardware/gpus/h100-sxm5-80gb.json", "--dry-run"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "h100-sxm5-80gb.json: /kind: error: expected \"gpuplan-calibration-samples\""));
  }
  SUBCASE("an unknown GPU") {
    const Run r = run({"calibrate", "fit", kData + "/calibration/h100-sxm5-80gb/samples-2026-11-22.json", "--gpu",
                       "h1000", "--dry-run"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--gpu: error: no GPU 'h1000' in the database"));
  }
  SUBCASE("samples of another GPU than --gpu") {
    const Run r = run({"calibrate", "fit", kData + "/calibration/h100-sxm5-80gb/samples-2026-11-22.json", "--gpu",
                       "h200", "--dry-run"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "/device/name: error: taken on NVIDIA H100 80GB HBM3 (h100-sxm5-80gb), not on h200-sxm-141gb"));
  }
  SUBCASE("run with a bench that does not exist") {
    const Run r = run({"calibrate", "run", "--bench", "/nonexistent/gpuplan-bench"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "--bench: error: '/nonexistent/gpuplan-bench' does not exist"));
  }
  SUBCASE("run without a GPU (CI has none)") {
    const Run r = run({"calibrate", "run", "--bench", kExe});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "error: no NVIDIA GPU is visible"));
  }
  SUBCASE("a fractional rank count (it was cut to an integer silently)") {
    auto j = nlohmann::json::parse(slurp(kData + "/calibration/h200-sxm-141gb/samples-collectives-2gpu-2026-11-22.json"));
    j["collectives"][0]["ranks"] = 1.5;
    const std::string path = (std::filesystem::temp_directory_path() / "gpuplan-test-calibrate-cli-ranks.json").string();
    std::ofstream(path) << j.dump(1);
    const Run r = run({"calibrate", "fit", path, "--gpu", "h200", "--dry-run"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, path + ": /collectives/0/ranks: error: expected an integer, found a number 1.5\n"));
    std::filesystem::remove(path);
  }
  SUBCASE("show for a GPU without a profile") {
    const Run r = run({"calibrate", "show", "a100-sxm4-80gb"});
    CHECK(r.rc == kInvalid);
    CHECK(contains(r.err, "calibration/a100-sxm4-80gb/profile.json"));
  }
}
