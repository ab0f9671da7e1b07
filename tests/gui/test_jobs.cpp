#include <doctest/doctest.h>
#include "approx.hpp"

#include <atomic>
#include <vector>

#include <QThread>

#include "job_controller.hpp"
#include "serving_job.hpp"
#include "support.hpp"
#include "training_job.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"

using namespace gpuplan;
using gui::JobController;
using gui::test::wait_until;

TEST_CASE("the job controller delivers only the latest of a burst of requests") {
  JobController jobs;
  std::vector<int> delivered;
  std::atomic<int> computed{0};
  int dropped = 0;
  QObject::connect(&jobs, &JobController::dropped, [&](quint64) { ++dropped; });
  constexpr int n = 20;
  for (int i = 0; i < n; ++i)
    jobs.submit<int>(
        [i, &computed] {
          ++computed;
          QThread::msleep(5);
          return i;
        },
        [&delivered](int& v) { delivered.push_back(v); });
  CHECK(jobs.latest() == quint64(n));
  REQUIRE(wait_until([&] { return !jobs.busy(); }));
  REQUIRE(delivered.size() == 1);
  CHECK(delivered[0] == n - 1);
  CHECK(dropped == n - 1);
  // Stale requests are skipped before they run: far fewer evaluations than requests.
  CHECK(computed.load() < n);
}

TEST_CASE("a result that arrives after a newer request is dropped, and the newer one is delivered") {
  JobController jobs;
  std::vector<int> delivered;
  std::atomic<bool> first_started{false}, release{false};
  jobs.submit<int>(
      [&] {
        first_started = true;
        while (!release) QThread::msleep(1);
        return 1;
      },
      [&](int& v) { delivered.push_back(v); });
  REQUIRE(wait_until([&] { return first_started.load(); }));
  jobs.submit<int>([] { return 2; }, [&](int& v) { delivered.push_back(v); });
  release = true;
  REQUIRE(wait_until([&] { return !jobs.busy(); }));
  CHECK(delivered == std::vector<int>{2});
}

TEST_CASE("a training request is evaluated with the CLI's resolution: four GPUs, rooflines and a scaling sweep") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::TrainingRequest req;
  req.scenario = {{"model", "llama-3.1-70b"}, {"gpu", "h100"}, {"gpus", 1024}, {"tp", 8}, {"pp", 4},
                  {"global_batch", 1024}, {"seq", 8192}, {"tokens", 15e12}};
  req.compare_gpus = {"a100-sxm4-80gb", "h200-sxm-141gb", "b200-hgx"};
  const auto r = gui::evaluate_training(*data, req);
  REQUIRE(r.valid);
  REQUIRE(r.gpus_evaluated.size() == 4);
  CHECK(r.gpus_evaluated[0].gpu_id == "h100-sxm5-80gb");
  CHECK(r.plan.par.dp == 32);
  CHECK(r.rooflines.size() == 4);
  CHECK(r.scaling.size() == 4);
  const auto& h100 = r.gpus_evaluated[0].est;
  const auto& a100 = r.gpus_evaluated[1].est;
  CHECK(h100.feasibility.ok);
  CHECK(h100.step_time < a100.step_time);
  CHECK_FALSE(h100.derivation.empty());
  CHECK(a100.derivation.empty());  // compare GPUs are evaluated without derivations
  // The scaling sweep holds the scenario's own point with the estimate's own time to train.
  bool found = false;
  for (const auto& s : r.scaling[0].samples)
    if (s.gpus == 1024) {
      found = true;
      CHECK(s.time_to_train_s == gptest::approx(h100.time_to_train->raw()));
      CHECK(s.efficiency > 0);
      CHECK(s.efficiency <= 1.0 + 1e-9);
    }
  CHECK(found);
  // The roofline corner is the model's ridge point.
  CHECK(r.rooflines[0].ridge_FLOP_per_B == gptest::approx(r.rooflines[0].peak_FLOPps / r.rooflines[0].bandwidth_Bps));
}

TEST_CASE("bad panel values and infeasible layouts come back as diagnostics and reasons, named by the panel's labels") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::TrainingRequest req;
  req.scenario = {{"model", "llama-3.1-70b"}, {"gpu", "h100"}, {"gpus", 1024}, {"tp", 0}};
  auto r = gui::evaluate_training(*data, req);
  CHECK_FALSE(r.valid);
  REQUIRE(r.diags.has_errors());
  CHECK(r.diags.to_string().find("TP: error") != std::string::npos);

  req.scenario = {{"model", "llama-3.1-70b"}, {"gpu", "h100"}, {"gpus", 1000}, {"tp", 8}, {"pp", 4}, {"global_batch", 1024}};
  r = gui::evaluate_training(*data, req);
  REQUIRE(r.valid);
  CHECK_FALSE(r.layout_ok);
  REQUIRE_FALSE(r.gpus_evaluated.empty());
  CHECK_FALSE(r.gpus_evaluated[0].est.feasibility.ok);
  REQUIRE_FALSE(r.gpus_evaluated[0].est.feasibility.reasons.empty());
  CHECK(r.gpus_evaluated[0].est.feasibility.reasons[0].find("not divisible") != std::string::npos);

  req.scenario = {{"model", "llama-3.1-70b"}, {"gpu", "h1000"}};
  r = gui::evaluate_training(*data, req);
  CHECK_FALSE(r.valid);
  CHECK(r.diags.to_string().find("GPU: error: unknown GPU 'h1000'") != std::string::npos);
}

TEST_CASE("a serving request gives TTFT/ITL vs batch and KV vs context from the model") {
  const auto data = gui::test::data();
  REQUIRE(data != nullptr);
  gui::ServingRequest req;
  const auto r = gui::evaluate_serving(*data, req);
  INFO(r.diags.to_string());
  REQUIRE(r.valid);
  REQUIRE(r.batches.size() > 5);
  CHECK(r.batches.front().batch == 1);
  CHECK(r.batches.back().itl_s > r.batches.front().itl_s);  // a bigger batch is never faster per step
  REQUIRE(r.contexts.size() > 3);
  CHECK(r.contexts.back().kv_per_sequence_bytes > r.contexts.front().kv_per_sequence_bytes);
  CHECK(r.contexts.back().max_concurrency <= r.contexts.front().max_concurrency);
  CHECK(r.max_concurrency > 0);
  CHECK(r.derivations.size() == 3);  // steady state, memory, the capacity planner at the operating rate
}

TEST_CASE("a training scenario survives encode -> decode unchanged") {
  json_io::Json j = {{"model", "llama-3.1-70b"}, {"gpu", "h100"}, {"gpus", 1024}, {"tp", 8}, {"pp", 4}, {"cp", 2},
                     {"global_batch", 512}, {"seq", 4096}, {"precision", "fp8"}, {"optimizer", "adamw-8bit"},
                     {"zero", 1}, {"recompute", "selective"}, {"flash_attention", false}, {"virtual_stages", 2},
                     {"overlap_tp_comm", true}, {"tokens", 1e12}, {"price_usd_per_hour", 2.5}};
  auto a = wl_io::decode_training_scenario(j, "a.json");
  REQUIRE(a.ok());
  const auto enc = wl_io::encode_training_scenario(a.value());
  auto b = wl_io::decode_training_scenario(enc, "b.json");
  REQUIRE(b.ok());
  CHECK(wl_io::encode_training_scenario(b.value()) == enc);
  CHECK(b->plan.schedule == wl::PipelineSchedule::interleaved);
  CHECK(b->plan.par.cp == 2);
  CHECK(b->plan.precision.compute == hw::Precision::fp8);
  CHECK(b->plan.zero == wl::ZeroStage::optimizer);
  CHECK(b->plan.recompute == wl::Recompute::selective);
  CHECK_FALSE(b->plan.flash_attention);
  CHECK(b->plan.overlap_tp_comm);
  CHECK(*b->price_usd_per_hour == 2.5);
  CHECK_FALSE(enc.contains("dp"));  // derived from gpus, not given
}
