// The input pipeline of a vision training step (model/src/vision/vision_data.cpp) checked by hand from its formula, the
// node's CPU cores from the hardware data, and `gpuplan train --loader-workers` end to end.
#include <doctest/doctest.h>

#include <cmath>

#include "test_paths.hpp"
#include "cli_runner.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/vision_data.hpp"

using namespace gpuplan;
using gpuplan::cli_test::contains;
using gpuplan::cli_test::parse_json;
using gpuplan::cli_test::run;

namespace {
bool rel_close(double a, double b, double tol = 1e-9) { return std::fabs(a - b) <= tol * std::fabs(b); }
}  // namespace

TEST_CASE("CPU decode: 8 workers with a core each deliver 8 x 222.7 images/s and the step waits for them") {
  model::DataPipelinePlan p;
  p.workers_per_gpu = 8;
  p.node_cores = 112;
  p.gpus_on_node = 8;  // 14 cores a GPU, 13 for its workers
  const auto d = model::vision_data_pipeline(units::seconds(0.050), 256, p, Explain::on);
  CHECK(d.effective_workers == 8);
  CHECK(rel_close(d.cpu_images_per_s, 8 * 222.7));
  CHECK(rel_close(d.loader.raw(), 256.0 / (8 * 222.7)));
  CHECK(rel_close(d.step_time.raw(), 256.0 / (8 * 222.7)));
  CHECK(rel_close(d.gpu_utilisation, 0.050 / (256.0 / (8 * 222.7))));
  CHECK(d.bound == "CPU decode");
  CHECK(contains(d.derivation.result, "CPU decode-bound"));
}

TEST_CASE("workers beyond the cores a GPU has left (its share less one) add nothing") {
  model::DataPipelinePlan p;
  p.workers_per_gpu = 32;
  p.node_cores = 112;
  p.gpus_on_node = 8;
  const auto d = model::vision_data_pipeline(units::seconds(0.050), 256, p, Explain::off);
  CHECK(d.effective_workers == 112 / 8 - 1);
  CHECK(rel_close(d.cpu_images_per_s, 13 * 222.7));
}

TEST_CASE("a fast enough loader leaves the GPU's step, and storage caps the host side when it is slower") {
  model::DataPipelinePlan p;
  p.workers_per_gpu = 13;
  p.node_cores = 112;
  p.gpus_on_node = 8;
  const auto fast = model::vision_data_pipeline(units::seconds(0.100), 256, p, Explain::off);
  CHECK(fast.bound == "GPU");
  CHECK(rel_close(fast.step_time.raw(), 0.100));
  CHECK(fast.gpu_utilisation == 1.0);
  p.storage = units::gb_per_s(1.0);  // 1 GB/s over 8 GPUs at ImageNet's 115.4 KB a JPEG: 1,083 images/s per GPU
  const auto slow = model::vision_data_pipeline(units::seconds(0.100), 256, p, Explain::off);
  const double per_gpu = 1e9 / (8 * 147897477120.0 / 1281167.0);
  CHECK(rel_close(slow.storage_images_per_s, per_gpu));
  CHECK(rel_close(slow.step_time.raw(), 256.0 / per_gpu));
  CHECK(slow.bound == "storage");
}

TEST_CASE("GPU decode adds images / nvJPEG rate to the GPU's step and needs no CPU workers") {
  model::DataPipelinePlan p;
  p.decode = model::ImageDecode::gpu;
  const auto d = model::vision_data_pipeline(units::seconds(0.060), 256, p, Explain::off);
  CHECK(rel_close(d.gpu_decode.raw(), 256.0 / 14513.0));
  CHECK(rel_close(d.step_time.raw(), 0.060 + 256.0 / 14513.0));
  CHECK(d.bound == "GPU");
  CHECK(d.cpu_images_per_s == 0.0);
}

TEST_CASE("the DGX nodes people train vision on carry their CPU cores (MLPerf system descriptions)") {
  auto db = hw_io::load_hardware_db(GPUPLAN_TEST_DATA_DIR);
  REQUIRE(db.ok());
  for (const auto& [id, cores] : std::vector<std::pair<std::string, int>>{{"dgx1-v100", 40}, {"dgx-a100", 128}, {"dgx-h100", 112}}) {
    const hw::NodeSpec* n = db.value().find_node(id);
    REQUIRE(n != nullptr);
    REQUIRE(n->host_cores.has_value());
    CHECK(*n->host_cores == cores);
  }
}

TEST_CASE("gpuplan train --loader-workers: the step is the loader's when it starves the GPU, with the GPU busy fraction") {
  auto r = run({"train", "-m", "resnet50", "--gpu", "h100", "--global-batch", "2048", "--gpus", "8", "--loader-workers", "4",
                "--format", "json"});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const auto j = parse_json(r);
  const auto& d = j["data_pipeline"];
  CHECK(d["bound"] == "CPU decode");
  CHECK(d["node_cores"] == 112);
  CHECK(d["effective_workers"] == 4);
  CHECK(rel_close(j["step_time_s"].get<double>(), 256.0 / (4 * 222.7)));
  CHECK(rel_close(d["gpu_utilisation"].get<double>(), j["gpu_step_time_s"].get<double>() / j["step_time_s"].get<double>()));
  CHECK(rel_close(j["epoch_time_s"].get<double>(), 1281167.0 / j["images_per_s"].get<double>()));
}

TEST_CASE("input-pipeline flags: bad values and flags without a pipeline exit 2, and they are vision-only") {
  auto a = run({"train", "-m", "resnet50", "--gpu", "h100", "--global-batch", "256", "--storage-GBps", "5"});
  CHECK(a.rc == cli_test::kInvalid);
  CHECK(contains(a.err, "--storage-GBps"));
  CHECK(contains(a.err, "give --loader-workers N (CPU decode) or --decode gpu"));
  auto b = run({"train", "-m", "resnet50", "--gpu", "h100", "--global-batch", "256", "--loader-workers", "4", "--decode-rate", "0"});
  CHECK(b.rc == cli_test::kInvalid);
  CHECK(contains(b.err, "--decode-rate"));
  auto c = run({"train", "-m", "resnet50", "--gpu", "h100", "--global-batch", "256", "--decode", "tpu"});
  CHECK(c.rc == cli_test::kInvalid);
  CHECK(contains(c.err, "'tpu'"));
  auto t = run({"train", "-m", "llama-3.1-8b", "--gpu", "h100", "--loader-workers", "4"});
  CHECK(t.rc == cli_test::kInvalid);
  CHECK(contains(t.err, "--loader-workers"));
}
