// model::build_report: the cheapest layout per item × option comes from search_training / plan_serving and equals
// what estimate_training gives for it; the cheapest option per item is the lowest cost among the feasible ones;
// totals are the sums of the chosen cells; options that cannot do an item are results with reasons.
#include <doctest/doctest.h>
#include "approx.hpp"
#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <string>

#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/report.hpp"
#include "library.hpp"

using namespace gpuplan;
namespace u = gpuplan::units;

namespace {

using test::node_system;

const std::vector<std::string> kNodes{"dgx-h100", "dgx-b200", "dgx-a100"};

/// Llama-3.1-8B, 50B tokens, 4096-token sequences, 256 per step, on 8, 16 or 32 GPUs of each node.
model::TrainingRequest training_item(double deadline_days) {
  model::TrainingRequest t;
  t.id = "cpt";
  t.name = "8B continued pre-training";
  t.arch = test::arch("llama-3.1-8b");
  t.tokens = 5e10;
  t.deadline_days = deadline_days;
  for (const auto& n : kNodes) {
    model::TrainingCellInput c;
    c.sys = node_system(n);
    c.base.seq_len = 4096;
    c.base.global_batch = 256;
    c.base.tokens_to_train = t.tokens;
    c.space.gpus = {8, 16, 32};
    c.price_origin = "test";
    t.cells.push_back(c);
  }
  return t;
}

model::ServingRequest serving_item(double rate) {
  model::ServingRequest s;
  s.id = "chat";
  s.name = "8B chat";
  s.arch = test::arch("llama-3.1-8b");
  s.params = model::parameter_counts(s.arch, Explain::off);
  s.traffic = model::Traffic{rate, 1024, 256, std::nullopt, std::nullopt};
  s.sla.ttft = u::milliseconds(500);
  s.sla.itl = u::milliseconds(30);
  for (const auto& n : kNodes) {
    model::ServingCellInput c;
    c.sys = node_system(n);
    c.options.memory.max_tp = c.sys.node->scale_up.domain_gpus;
    s.cells.push_back(c);
  }
  return s;
}

model::ReportRequest request(double deadline_days = 7, double rate = 10) {
  model::ReportRequest r;
  for (const auto& n : kNodes) r.options.push_back({n, n, std::nullopt});
  r.training.push_back(training_item(deadline_days));
  r.serving.push_back(serving_item(rate));
  r.threads = 1;
  return r;
}

}  // namespace

TEST_SUITE("report") {
  TEST_CASE("the cheapest option of an item is the feasible one with the lowest cost - totals are the sums of the chosen cells") {
    const auto res = model::build_report(request());
    REQUIRE(res.training.size() == 1);
    REQUIRE(res.serving.size() == 1);
    const auto& tr = res.training[0];
    REQUIRE(tr.cells.size() == 3);
    REQUIRE(tr.cheapest.has_value());
    for (std::size_t k = 0; k < tr.cells.size(); ++k) {
      CAPTURE(k);
      const auto& c = tr.cells[k];
      if (!c.feasible) continue;
      REQUIRE(c.cost.has_value());
      CHECK(c.time_to_train.raw() <= u::days(7).raw());
      CHECK(tr.cells[*tr.cheapest].cost->raw() <= c.cost->raw());
      // cost = GPU-hours × price; GPU-hours = GPUs × time.
      CHECK(c.gpu_hours == gptest::approx(double(c.gpus) * c.time_to_train.raw() / 3600.0).epsilon(1e-9));
      CHECK(c.cost->raw() == gptest::approx(c.gpu_hours * u::to_usd_per_hour(*c.price)).epsilon(1e-9));
      CHECK(c.peak_memory.raw() <= c.capacity.raw());
    }
    const auto& sv = res.serving[0];
    REQUIRE(sv.cheapest.has_value());
    for (const auto& c : sv.cells)
      if (c.feasible) CHECK(sv.cells[*sv.cheapest].cost_rate.raw() <= c.cost_rate.raw());
    CHECK(res.all_feasible);
    CHECK(res.training_cost.raw() == gptest::approx(tr.cells[*tr.cheapest].cost->raw()));
    CHECK(res.training_gpu_hours == gptest::approx(tr.cells[*tr.cheapest].gpu_hours));
    CHECK(res.serving_cost_rate.raw() == gptest::approx(sv.cells[*sv.cheapest].cost_rate.raw()));
    CHECK(res.serving_gpus == sv.cells[*sv.cheapest].gpus);
    REQUIRE(res.per_option.size() == 3);
    for (std::size_t k = 0; k < 3; ++k) {
      const auto& o = res.per_option[k];
      CHECK(o.covers_all == (tr.cells[k].feasible && sv.cells[k].feasible));
      if (tr.cells[k].cost) CHECK(o.training_cost.raw() == gptest::approx(tr.cells[k].cost->raw()));
    }
  }

  TEST_CASE("with band data the cheapest option is the lowest expected cost (estimate × regime median) and totals carry the range") {
    const auto plain = model::build_report(request());
    const auto& tr0 = plain.training[0];
    REQUIRE(tr0.cheapest.has_value());
    const std::size_t k0 = *tr0.cheapest;
    // Synthetic residuals: five cases in the exact regime of each feasible training cell; the point-cheapest option's
    // regime measured 10× slower than predicted, the others exactly as predicted.
    auto req = request();
    int others = 0;
    for (std::size_t k = 0; k < tr0.cells.size(); ++k) {
      const auto& c = tr0.cells[k];
      if (!c.feasible) continue;
      if (k != k0) ++others;
      const auto& sys = req.training[0].cells[k].sys;
      const model::Regime r{"train", model::generation_of(sys.gpu->family), "dense",
                            model::scale_bucket(c.gpus, sys.node->gpus)};
      for (int i = 0; i < 5; ++i)
        req.bands.push_back({fmt::format("{}-{}", k, i), fmt::format("src{}", i), r, k == k0 ? 10.0 : 1.0, "", ""});
    }
    REQUIRE(others > 0);
    const auto res = model::build_report(req);
    const auto& tr = res.training[0];
    REQUIRE(tr.cheapest.has_value());
    // By hand: the lowest of cost × (10 for k0, 1 otherwise) over the feasible cells.
    std::optional<std::size_t> want;
    auto expected = [&](std::size_t k) { return tr.cells[k].cost->raw() * (k == k0 ? 10.0 : 1.0); };
    for (std::size_t k = 0; k < tr.cells.size(); ++k)
      if (tr.cells[k].feasible && (!want || expected(k) < expected(*want))) want = k;
    CHECK(*tr.cheapest == *want);
    REQUIRE(tr.cells[k0].band.has_value());
    CHECK(tr.cells[k0].band->p50 == gptest::approx(10.0));
    CHECK(tr.cells[k0].band->cases == 5);
    // Constant ratios: the range collapses onto the chosen cell's cost × its ratio.
    const auto& c = tr.cells[*tr.cheapest];
    const double f = *tr.cheapest == k0 ? 10.0 : 1.0;
    CHECK(res.training_cost.raw() == gptest::approx(c.cost->raw()));
    CHECK(res.training_cost_p10.raw() == gptest::approx(c.cost->raw() * f));
    CHECK(res.training_cost_p90.raw() == gptest::approx(c.cost->raw() * f));
  }

  TEST_CASE("a training cell's numbers are estimate_training's for the chosen layout, bit for bit") {
    const auto req = request();
    const auto res = model::build_report(req);
    for (std::size_t k = 0; k < res.training[0].cells.size(); ++k) {
      const auto& c = res.training[0].cells[k];
      if (!c.feasible) continue;
      const auto& in = req.training[0].cells[k];
      const auto est = model::estimate_training(req.training[0].arch, model::with_layout(in.base, *c.layout), in.sys,
                                                Explain::off);
      CHECK(est.step_time.raw() == c.step_time.raw());
      CHECK(est.time_to_train->raw() == c.time_to_train.raw());
      CHECK(est.cost->raw() == c.cost->raw());
      CHECK(est.memory.total.raw() == c.peak_memory.raw());
    }
  }

  TEST_CASE("an impossible deadline is a result with a reason, not an error - the item drops out of the totals") {
    const auto res = model::build_report(request(0.05));
    const auto& tr = res.training[0];
    CHECK_FALSE(tr.cheapest.has_value());
    CHECK_FALSE(res.all_feasible);
    for (const auto& c : tr.cells) {
      CHECK_FALSE(c.feasible);
      REQUIRE_FALSE(c.reasons.empty());
      CHECK(c.reasons[0].rfind("misses the 0.05-day deadline even at 32 GPUs: the fastest layout that fits takes ", 0) == 0);
    }
    CHECK(res.training_cost.raw() == 0.0);
    CHECK(res.totals.notes.size() == 1);
  }

  TEST_CASE("max_gpus caps the GPU counts searched and the GPUs a deployment may use") {
    auto req = request();
    req.options[0].max_gpus = 4;  // below every count of the range
    req.options[1].max_gpus = 8;
    const auto res = model::build_report(req);
    const auto& h100 = res.training[0].cells[0];
    CHECK_FALSE(h100.feasible);
    REQUIRE(h100.reasons.size() == 1);
    CHECK(h100.reasons[0] == "no GPU count of the run's range is within this option's limit of 4 GPUs");
    const auto& b200 = res.training[0].cells[1];
    CHECK(b200.gpu_counts == std::vector<long long>{8});
    if (b200.feasible) CHECK(b200.gpus == 8);
    // 10 req/s of an 8B model needs at least one GPU: a limit of 4 is no constraint there, a limit below the need is.
    auto heavy = request(7, 400);
    heavy.options[0].max_gpus = 1;
    const auto r2 = model::build_report(heavy);
    const auto& s = r2.serving[0].cells[0];
    CHECK_FALSE(s.feasible);
    REQUIRE_FALSE(s.reasons.empty());
    CHECK(s.reasons.back().find("more than this option's limit of 1") != std::string::npos);
  }

  TEST_CASE("unresolved cells carry their reasons - without any price the training rank is by GPU-hours") {
    auto req = request();
    req.training[0].cells[2].unresolved = {"a100-sxm4-80gb has no fp8 tensor cores"};
    const auto res = model::build_report(req);
    CHECK_FALSE(res.training[0].cells[2].feasible);
    CHECK(res.training[0].cells[2].reasons == std::vector<std::string>{"a100-sxm4-80gb has no fp8 tensor cores"});

    auto unpriced = request();
    // Each GPU copied without its price.
    std::vector<hw::GpuSpec> gpus;
    gpus.reserve(3);
    for (auto& c : unpriced.training[0].cells) {
      gpus.push_back(*c.sys.gpu);
      gpus.back().price.reset();
      c.sys.gpu = &gpus.back();
    }
    const auto r2 = model::build_report(unpriced);
    const auto& tr = r2.training[0];
    REQUIRE(tr.cheapest.has_value());
    for (const auto& c : tr.cells) {
      CHECK_FALSE(c.cost.has_value());
      if (c.feasible) CHECK(tr.cells[*tr.cheapest].gpu_hours <= c.gpu_hours);
    }
  }

  TEST_CASE("with Explain::on each cell keeps the choice and the full estimate as its derivation") {
    auto req = request();
    req.explain = Explain::on;
    std::size_t calls = 0;
    req.progress = [&](std::size_t done, std::size_t total, const std::string&) {
      ++calls;
      CHECK(done == calls);
      CHECK(total == 6);
    };
    const auto res = model::build_report(req);
    CHECK(calls == 6);
    const auto& c = res.training[0].cells[*res.training[0].cheapest];
    CHECK(c.derivation.id == "report.training");
    REQUIRE(c.derivation.children.size() == 1);
    CHECK(res.serving[0].cells[0].derivation.id == "report.serving");
    CHECK(res.totals.id == "report.totals");
    CHECK(res.totals.inputs.size() == 2);
  }
}
