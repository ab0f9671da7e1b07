// Layout search: the fast evaluator gives estimate_training's numbers bit for bit on random layouts (valid or not, all
// plan options), the best layout equals a brute-force minimum over estimate_training on small cases (by time, by cost,
// with a deadline over several GPU counts), every reported layout is feasible, the ranking does not depend on the
// thread count, cancellation returns the best so far, fixed dimensions restrict the space, and the comparison of
// two layouts adds up to their step-time difference.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/search.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::arch;

// Counts heap allocations, to check that evaluating a layout allocates nothing once the caches are warm. Not under
// AddressSanitizer, which brings its own operator new.
#if !defined(__SANITIZE_ADDRESS__)
#define GPUPLAN_COUNT_ALLOCATIONS 1
namespace {
std::atomic<std::uint64_t> g_allocations{0};
}  // namespace
// GCC 12 at -O3 inlines these into callers and then reports free() of operator new's pointer as a mismatch: a false
// positive for replacement functions that pair malloc with free.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

namespace {

using test::node_system;

wl::TrainingPlan base_plan(std::int64_t seq, std::int64_t global) {
  wl::TrainingPlan p;
  p.seq_len = seq;
  p.global_batch = global;
  return p;
}

void check_equal(const model::LayoutScore& s, const model::TrainingEstimate& e) {
  const bool estimate_valid = e.step_time.raw() > 0;
  REQUIRE(s.valid == estimate_valid);
  if (!s.valid) return;
  CHECK(s.step_time.raw() == e.step_time.raw());
  CHECK(s.memory.raw() == e.memory.total.raw());
  CHECK(s.capacity.raw() == e.memory.capacity.raw());
  CHECK(s.fits == e.memory.fits);
  CHECK(s.fits == e.feasibility.ok);
  CHECK(s.tokens_per_s == e.tokens_per_s);
  CHECK(s.mfu == e.mfu);
  CHECK(s.micro_batches == e.micro_batches);
  CHECK(s.step.gemm.raw() == e.step.gemm.raw());
  CHECK(s.step.attention.raw() == e.step.attention.raw());
  CHECK(s.step.elementwise.raw() == e.step.elementwise.raw());
  CHECK(s.step.embedding_loss.raw() == e.step.embedding_loss.raw());
  CHECK(s.step.recompute.raw() == e.step.recompute.raw());
  CHECK(s.step.comm_exposed.raw() == e.step.comm_exposed.raw());
  CHECK(s.step.bubble.raw() == e.step.bubble.raw());
  CHECK(s.step.optimizer.raw() == e.step.optimizer.raw());
  CHECK(s.step.offload.raw() == e.step.offload.raw());
  REQUIRE(e.comm.size() == 5);
  CHECK(s.comm.tp.raw() == e.comm[0].exposed.raw());
  CHECK(s.comm.cp.raw() == e.comm[1].exposed.raw());
  CHECK(s.comm.ep.raw() == e.comm[2].exposed.raw());
  CHECK(s.comm.pp.raw() == e.comm[3].exposed.raw());
  CHECK(s.comm.dp.raw() == e.comm[4].exposed.raw());
  CHECK(s.has_time_to_train == e.time_to_train.has_value());
  if (e.time_to_train) CHECK(s.time_to_train.raw() == e.time_to_train->raw());
  CHECK(s.has_cost == e.cost.has_value());
  if (e.cost) CHECK(s.cost.raw() == e.cost->raw());
}

/// Brute force: every combination of sizes from small candidate lists whose product is `gpus`, evaluated with
/// estimate_training; the best feasible one by the search's order (objective, then peak memory, then the layout tuple).
struct Brute {
  std::optional<model::Layout> best;
  double best_objective = 0, best_memory = 0;
  std::uint64_t feasible = 0;
};

Brute brute_force(const wl::TransformerArch& a, const wl::TrainingPlan& base, const model::TrainingSystem& sys,
                  const std::vector<long long>& gpu_counts, model::RankBy rank_by,
                  std::optional<units::Seconds> deadline = std::nullopt) {
  Brute b;
  const std::vector<int> sizes{1, 2, 4, 8, 16};
  for (long long n : gpu_counts)
    for (int tp : sizes)
      for (int pp : sizes)
        for (int cp : sizes)
          for (int ep : sizes) {
            if (n % (tp * pp * cp) != 0) continue;
            const int dp = int(n / (tp * pp * cp));
            if (ep > 1 && !a.moe) continue;  // a necessary condition, to keep the brute force quick
            for (int v = 1; v <= 8; ++v)
              for (std::int64_t mb = 1; mb <= base.global_batch; ++mb) {
                if (base.global_batch % mb != 0) continue;  // likewise
                for (int sp = 0; sp < 2; ++sp)
                  for (auto rc : {wl::Recompute::none, wl::Recompute::selective, wl::Recompute::full})
                    for (int z = 0; z <= 3; ++z)
                    for (auto off : {wl::Offload::none, wl::Offload::optimizer})
                    for (int etp : {0, 1}) {
                      // Expert TP 1 beside TP > 1 (parallel folding) on MoE models; 0 = expert TP = TP.
                      if (etp == 1 && (tp == 1 || !a.moe)) continue;
                      model::Layout l{n,  tp, pp, dp, cp, ep, v, mb, sp == 1, rc, static_cast<wl::ZeroStage>(z), off};
                      l.etp = etp;
                      const wl::TrainingPlan plan = model::with_layout(base, l);
                      if (!model::check_training_layout(a, plan, sys).ok) continue;
                      const auto e = model::estimate_training(a, plan, sys, Explain::off);
                      if (!e.feasibility.ok) continue;  // does not fit
                      if (deadline && !(e.time_to_train && *e.time_to_train <= *deadline)) continue;
                      ++b.feasible;
                      const double price = (sys.price ? *sys.price : *sys.gpu->price).raw();
                      const double tpu = e.tokens_per_s / (price * double(n));
                      const double obj = rank_by == model::RankBy::time   ? e.step_time.raw()
                                         : rank_by == model::RankBy::cost ? 1.0 / tpu
                                                                          : -tpu;
                      const double mem = e.memory.total.raw();
                      if (!b.best || obj < b.best_objective ||
                          (obj == b.best_objective &&
                           (mem < b.best_memory || (mem == b.best_memory && l < *b.best)))) {
                        b.best = l;
                        b.best_objective = obj;
                        b.best_memory = mem;
                      }
                    }
              }
          }
  return b;
}

}  // namespace

TEST_SUITE("search") {
  TEST_CASE("the fast evaluator gives estimate_training's step time, breakdown and memory bit for bit") {
    struct Where {
      const char* model;
      const char* node;
    };
    const Where where[] = {{"gpt3-175b", "dgx-h100"},   {"llama-3.1-8b", "dgx-h100"}, {"llama-3.1-70b", "dgx-a100"},
                           {"deepseek-v3", "dgx-h200"}, {"gpt-oss-20b", "dgx-h100"},  {"gemma-1.1-2b", "mi300x-8"},
                           {"mixtral-8x7b", "gb200-nvl72"}};
    std::mt19937_64 rng(20240607);
    auto pick = [&](std::vector<long long> v) { return v[rng() % v.size()]; };
    std::uint64_t compared = 0, valid = 0;
    for (const auto& w : where) {
      CAPTURE(w.model);
      CAPTURE(w.node);
      const auto& a = arch(w.model);
      model::TrainingSystem sys = node_system(w.node);
      for (int variant = 0; variant < 6; ++variant) {
        wl::TrainingPlan base = base_plan(pick({1024, 2048, 4096, 8192}), pick({32, 64, 96, 256}));
        if (variant % 3 == 1) base.precision.compute = hw::Precision::fp8;
        if (variant == 2) base.kernels = wl::KernelStyle::eager;
        if (variant == 3) base.mixed_precision = wl::MixedPrecision::amp;
        if (variant == 4) base.flash_attention = false;
        if (variant == 5) {
          base.overlap_tp_comm = true;
          base.overlap_grad_reduce = false;
          base.attention_kernel = wl::AttentionKernel::fa2;
          base.par.shard_group = 8;
          sys.price = units::usd_per_hour(3.5);
          // Deferred LM-head wgrads (#22): the bubble reads the compute terms, so the evaluator may not use its memo.
          base.defer_embedding_wgrad = true;
          base.dp_sharp = true;
        }
        if (variant % 2 == 0) base.tokens_to_train = 1e12;
        // One evaluator per base plan: its caches see many keys in a random order.
        model::FastTrainingEvaluator ev(a, base, sys);
        for (int i = 0; i < 120; ++i) {
          model::Layout l;
          l.tp = int(pick({1, 2, 4, 8, 16, 3}));
          l.pp = int(pick({1, 2, 4, 3, 8}));
          l.cp = int(pick({1, 1, 2, 4}));
          l.dp = int(pick({1, 2, 4, 8, 32}));
          l.ep = a.moe ? int(pick({1, 2, 4, 8})) : int(pick({1, 1, 1, 2}));
          l.virtual_stages = int(pick({1, 1, 2, 3, 4}));
          l.micro_batch = pick({1, 2, 4});
          l.sequence_parallel = rng() % 2 == 0;
          l.recompute = static_cast<wl::Recompute>(rng() % 3);
          l.zero = static_cast<wl::ZeroStage>(rng() % 4);
          l.offload = rng() % 4 == 0 ? wl::Offload::optimizer : wl::Offload::none;
          // MoE parallel folding: expert TP 1 or 2 beside any attention TP, a third of the time.
          if (a.moe && rng() % 3 == 0) l.etp = int(pick({1, 2}));
          l.gpus = static_cast<long long>(l.tp) * l.pp * l.dp * l.cp;
          CAPTURE(model::describe(l));
          const auto e = model::estimate_training(a, model::with_layout(base, l), sys, Explain::off);
          check_equal(ev.evaluate(l), e);
          // Twice: the second evaluation runs from the caches.
          check_equal(ev.evaluate(l), e);
          // The same layout with another ZeRO stage or offload, just after it: the stages' pricing is then the
          // evaluator's memo of the last layout's (StepTerms::stages_memo), the DP, optimizer and memory terms its own.
          model::Layout other = l;
          other.zero = static_cast<wl::ZeroStage>((static_cast<int>(l.zero) + 1 + int(rng() % 3)) % 4);
          other.offload = rng() % 2 == 0 ? wl::Offload::optimizer : wl::Offload::none;
          CAPTURE(model::describe(other));
          check_equal(ev.evaluate(other), model::estimate_training(a, model::with_layout(base, other), sys, Explain::off));
          ++compared;
          valid += e.step_time.raw() > 0 ? 1 : 0;
        }
      }
    }
    CHECK(compared == 5040);
    CHECK(valid > 500);  // the random layouts exercise the evaluated path, not just the layout rules
  }

  TEST_CASE("the fast evaluator gives estimate_training's numbers bit for bit under DualPipe too") {
    // DualPipe's gradient groups span the mirror stages' domains (grad_comm_group_tiers): the evaluator caches them
    // by (size, stride, tp·cp·dp, PP), and the DP buckets by dp_buckets_key. Random layouts over both, with DP·CP on
    // either side of Megatron's 40-rank bucket knee (the bucket size grows past it).
    const auto& a = arch("deepseek-v3");
    const model::TrainingSystem sys = node_system("hgx-h800");
    std::mt19937_64 rng(20261129);
    auto pick = [&](std::vector<long long> v) { return v[rng() % v.size()]; };
    wl::TrainingPlan base = base_plan(4096, 512);
    base.schedule = wl::PipelineSchedule::dualpipe;
    model::FastTrainingEvaluator ev(a, base, sys);
    std::uint64_t valid = 0;
    for (int i = 0; i < 160; ++i) {
      model::Layout l;
      l.tp = int(pick({1, 2, 4}));
      l.pp = int(pick({2, 4, 8, 16}));
      l.cp = int(pick({1, 1, 2}));
      l.dp = int(pick({2, 4, 8, 16, 32, 64}));
      l.ep = int(pick({1, 4, 8, 16, 32}));
      l.dualpipe = true;
      l.micro_batch = 1;
      l.recompute = static_cast<wl::Recompute>(rng() % 3);
      l.zero = static_cast<wl::ZeroStage>(rng() % 4);
      if (rng() % 3 == 0) l.etp = 1;
      l.gpus = static_cast<long long>(l.tp) * l.pp * l.dp * l.cp;
      CAPTURE(model::describe(l));
      const auto e = model::estimate_training(a, model::with_layout(base, l), sys, Explain::off);
      check_equal(ev.evaluate(l), e);
      valid += e.step_time.raw() > 0 ? 1 : 0;
    }
    CHECK(valid > 40);
  }

  TEST_CASE("evaluating a layout allocates nothing once its terms are cached") {
#if defined(GPUPLAN_COUNT_ALLOCATIONS)
    const auto& a = arch("deepseek-v3");  // MoE, MLA, EP: every term kind
    auto sys = node_system("dgx-h200");
    wl::TrainingPlan base = base_plan(4096, 1024);
    base.tokens_to_train = 1e12;
    model::SearchSpace space;
    space.gpus = {1024};
    const auto layouts = model::enumerate_layouts(a, base, space, &sys);
    REQUIRE(layouts.size() > 1000);
    model::FastTrainingEvaluator ev(a, base, sys);
    double sum = 0;
    const std::uint64_t cold = g_allocations.load();
    for (const auto& l : layouts) sum += ev.evaluate(l).step_time.raw();  // fills the caches
    const std::uint64_t before = g_allocations.load();
    CHECK(before > cold);  // the counter counts: filling the caches allocates
    for (const auto& l : layouts) sum += ev.evaluate(l).step_time.raw();
    CHECK(g_allocations.load() - before == 0);
    CHECK(sum > 0);
    CHECK(ev.cached_terms() > 0);
#else
    MESSAGE("allocation counting is off under AddressSanitizer");
#endif
  }

  TEST_CASE("the best layout is the brute-force minimum of estimate_training (dense model, by step time)") {
    const auto& a = arch("llama-3.1-8b");
    const auto sys = node_system("dgx-h100");
    const wl::TrainingPlan base = base_plan(2048, 16);
    model::SearchSpace space;
    space.vary_split = false;  // the brute force lays the layers out evenly (the split: tests below)
    space.gpus = {8};
    const auto r = model::search_training(a, base, sys, space, {});
    REQUIRE(r.error.empty());
    REQUIRE(!r.top.empty());
    const Brute b = brute_force(a, base, sys, {8}, model::RankBy::time);
    REQUIRE(b.best);
    CHECK(r.top.front().layout == *b.best);
    CHECK(r.top.front().objective == b.best_objective);
    CHECK(r.eligible <= b.feasible);  // the brute force also counts the equivalent layouts the search leaves out
  }

  TEST_CASE("the best layout is the brute-force minimum on an MoE model, ranked by cost over two GPU counts") {
    const auto& a = arch("gpt-oss-20b");
    auto sys = node_system("dgx-h100");
    sys.price = units::usd_per_hour(2.0);
    const wl::TrainingPlan base = base_plan(1024, 8);
    model::SearchSpace space;
    space.vary_split = false;  // the brute force lays the layers out evenly (the split: tests below)
    space.gpus = {4, 8};
    model::SearchOptions o;
    o.rank_by = model::RankBy::cost;
    const auto r = model::search_training(a, base, sys, space, o);
    REQUIRE(r.error.empty());
    REQUIRE(!r.top.empty());
    const Brute b = brute_force(a, base, sys, {4, 8}, model::RankBy::cost);
    REQUIRE(b.best);
    CHECK(r.top.front().layout == *b.best);
    CHECK(r.top.front().objective == b.best_objective);
  }

  TEST_CASE("with a deadline the cheapest layout that meets it wins, and it is the brute-force minimum") {
    const auto& a = arch("llama-3.1-8b");
    const auto sys = node_system("dgx-h100");
    wl::TrainingPlan base = base_plan(2048, 16);
    base.tokens_to_train = 2e10;
    model::SearchSpace space;
    space.vary_split = false;  // the brute force lays the layers out evenly (the split: tests below)
    space.gpus = {8, 16};
    // The brute force tries 1 to 8 model chunks per stage; the search's own list goes further (16 chunks on 2 stages
    // is the cheapest layout here once a DP call beside compute costs the compute a wait: parallel_dims.hpp
    // dp_beside_compute_share), so the search is held to the brute force's list.
    space.virtual_stages = {1, 2, 3, 4, 5, 6, 7, 8};
    model::SearchOptions o;
    o.rank_by = model::RankBy::cost;
    // Shorter than the fastest time on 8 GPUs: the deadline excludes the smaller cluster.
    model::SearchOptions fastest;
    model::SearchSpace on8 = space;
    on8.gpus = {8};
    const auto r8 = model::search_training(a, base, sys, on8, fastest);
    REQUIRE(!r8.top.empty());
    REQUIRE(r8.top.front().score.has_time_to_train);
    o.deadline = r8.top.front().score.time_to_train * 0.9;
    const auto r = model::search_training(a, base, sys, space, o);
    REQUIRE(!r.top.empty());
    for (const auto& p : r.top) {
      CHECK(p.score.time_to_train <= *o.deadline);
      CHECK(p.layout.gpus > 8);
    }
    CHECK(r.eligible < r.fitting);
    const Brute b = brute_force(a, base, sys, {8, 16}, model::RankBy::cost, o.deadline);
    REQUIRE(b.best);
    CHECK(r.top.front().layout == *b.best);
  }

  TEST_CASE("every reported layout is valid and fits, as estimate_training says") {
    const auto& a = arch("gpt3-175b");
    const auto sys = node_system("dgx-h100");
    const wl::TrainingPlan base = base_plan(2048, 1536);
    model::SearchSpace space;
    space.gpus = {1024};
    model::SearchOptions o;
    o.top = 25;
    const auto r = model::search_training(a, base, sys, space, o);
    REQUIRE(r.top.size() == 25);
    CHECK(r.total == model::enumerate_layouts(a, base, space, &sys).size());
    CHECK(r.evaluated == r.total);
    CHECK(!r.cancelled);
    for (std::size_t i = 0; i < r.top.size(); ++i) {
      const auto& p = r.top[i];
      CAPTURE(model::describe(p.layout));
      const wl::TrainingPlan plan = model::with_layout(base, p.layout);
      CHECK(model::check_training_layout(a, plan, sys).ok);
      const auto e = model::estimate_training(a, plan, sys, Explain::off);
      CHECK(e.feasibility.ok);
      CHECK(e.memory.fits);
      CHECK(e.step_time.raw() == p.score.step_time.raw());
      CHECK(p.layout.gpus == plan.par.gpus());
      if (i > 0) CHECK(model::ranks_before(r.top[i - 1], p));
    }
  }

  TEST_CASE("the ranking does not depend on the thread count (1, 2, 8)") {
    const auto& a = arch("llama-3.1-70b");
    const auto sys = node_system("dgx-h100");
    const wl::TrainingPlan base = base_plan(4096, 256);
    model::SearchSpace space;
    space.gpus = {64, 128};
    std::vector<model::SearchResult> results;
    for (unsigned threads : {1u, 2u, 8u}) {
      model::SearchOptions o;
      o.threads = threads;
      o.keep_all = true;
      results.push_back(model::search_training(a, base, sys, space, o));
    }
    CHECK(results[2].threads == 8);
    CHECK(results[0].all.size() == results[0].total);
    for (std::size_t i = 1; i < results[0].all.size(); ++i)
      CHECK(model::ranks_before(results[0].all[i - 1], results[0].all[i]));
    for (std::size_t k = 1; k < results.size(); ++k) {
      const auto& x = results[0];
      const auto& y = results[k];
      REQUIRE(x.all.size() == y.all.size());
      REQUIRE(x.top.size() == y.top.size());
      CHECK(x.eligible == y.eligible);
      CHECK(x.fitting == y.fitting);
      for (std::size_t i = 0; i < x.all.size(); ++i) {
        CHECK(x.all[i].layout == y.all[i].layout);
        CHECK(x.all[i].objective == y.all[i].objective);
        CHECK(x.all[i].rank_class == y.all[i].rank_class);
      }
      for (std::size_t i = 0; i < x.top.size(); ++i) CHECK(x.top[i].layout == y.top[i].layout);
      CHECK(x.least_memory->layout == y.least_memory->layout);
      CHECK(x.fastest_fitting->layout == y.fastest_fitting->layout);
    }
  }

  TEST_CASE("cancelling returns the best of the layouts evaluated so far") {
    const auto& a = arch("llama-3.1-70b");
    const auto sys = node_system("dgx-h100");
    const wl::TrainingPlan base = base_plan(4096, 256);
    model::SearchSpace space;
    space.gpus = {128};
    std::atomic<bool> cancel{false};
    model::SearchOptions o;
    o.threads = 1;
    o.keep_all = true;
    o.cancel = &cancel;
    int calls = 0;
    o.progress = [&](std::uint64_t done, std::uint64_t total) {
      CHECK(done <= total);
      if (++calls == 3) cancel.store(true);  // as the CLI's SIGINT handler does
    };
    const auto r = model::search_training(a, base, sys, space, o);
    CHECK(r.cancelled);
    CHECK(r.evaluated > 0);
    CHECK(r.evaluated < r.total);
    CHECK(r.all.size() == r.evaluated);
    REQUIRE(!r.top.empty());
    // The best so far is the best of what was evaluated.
    const auto it = std::find_if(r.all.begin(), r.all.end(), [](const auto& p) { return p.rank_class == 0; });
    REQUIRE(it != r.all.end());
    CHECK(it->layout == r.top.front().layout);
  }

  TEST_CASE("fixed dimensions restrict the space and the rest is searched") {
    const auto& a = arch("llama-3.1-70b");
    const auto sys = node_system("dgx-h100");
    const wl::TrainingPlan base = base_plan(4096, 256);
    model::SearchSpace space;
    space.gpus = {64};
    space.tp = {8};
    space.recompute = {wl::Recompute::full};
    const auto layouts = model::enumerate_layouts(a, base, space);
    REQUIRE(!layouts.empty());
    bool pp_varies = false;
    for (const auto& l : layouts) {
      CHECK(l.tp == 8);
      CHECK(l.recompute == wl::Recompute::full);
      CHECK(l.gpus == 64);
      CHECK(static_cast<long long>(l.tp) * l.pp * l.dp * l.cp == 64);
      pp_varies = pp_varies || l.pp != layouts.front().pp;
    }
    CHECK(pp_varies);
  }

  TEST_CASE("the search varies expert TP and finds a folded layout where one is better") {
    // Qwen3-30B-A3B (128 experts of width 768) on 16 H100s at attention TP 2: with expert TP = TP each expert GEMM is
    // split in two and EP must divide DP·CP = 8; folding (expert TP 1, Megatron-Core parallel_state.py's expert grid
    // over TP·CP·DP) keeps the experts' GEMMs whole, drops the expert half's TP collectives and lets EP reach 16.
    const auto& a = arch("qwen3-30b-a3b");
    const auto sys = node_system("dgx-h100");
    wl::TrainingPlan base = base_plan(4096, 128);
    base.precision.compute = hw::Precision::bf16;
    model::SearchSpace space;
    space.gpus = {16};
    space.tp = {2};
    space.pp = {1};
    const auto folded = model::search_training(a, base, sys, space, {});
    REQUIRE(folded.error.empty());
    REQUIRE(!folded.top.empty());
    model::SearchSpace unfolded_space = space;
    unfolded_space.etp = {0};  // the space before parallel folding was searched
    const auto unfolded = model::search_training(a, base, sys, unfolded_space, {});
    REQUIRE(!unfolded.top.empty());
    const auto& best = folded.top.front();
    CAPTURE(model::describe(best.layout));
    CAPTURE(model::describe(unfolded.top.front().layout));
    CHECK(best.layout.etp == 1);
    CHECK(best.score.step_time.raw() < unfolded.top.front().score.step_time.raw());
    CHECK(folded.total > unfolded.total);  // the folded layouts are added, none taken away
    for (const auto& p : unfolded.top) CHECK(p.layout.etp == 0);
    // Folding admits EP 16 at DP 8, which expert TP = TP cannot (EP must divide DP·CP = 8).
    bool ep16 = false;
    for (const auto& l : model::enumerate_layouts(a, base, space)) ep16 = ep16 || (l.ep == 16 && l.etp == 1);
    CHECK(ep16);
    // The fast evaluator's folded score is estimate_training's.
    const auto e = model::estimate_training(a, model::with_layout(base, best.layout), sys, Explain::off);
    CHECK(e.step_time.raw() == best.score.step_time.raw());
  }

  TEST_CASE("the layer split is a dimension: the even split and Megatron's first/last-stage layers, each once") {
    // Llama 3.1 8B, 32 layers. At PP 5 (one chunk per stage) the even split is 7, 7, 6, 6, 6 (the first 32 mod 5
    // stages one more). The embedding/loss accounting needs 33 or 34 layers to split by 5: none. First/last stages
    // df, dl ≤ 4 layers below the middle stages' m = (32 + df + dl) / 5, and no stage above the even split's
    // heaviest, ⌈32/5⌉ = 7: m = 7, df + dl = 3:
    //   last 4 (7, 7, 7, 7, 4); first 6 last 5 (6, 7, 7, 7, 5); first 5 last 6 (5, 7, 7, 7, 6); first 4 (4, 7, 7, 7, 7)
    // (m = 8, df + dl = 8: first 4 last 4 (4, 8, 8, 8, 4) holds 8 on a stage: left out). Five splits.
    const auto& a = arch("llama-3.1-8b");
    REQUIRE(a.layers == 32);
    const wl::TrainingPlan base = base_plan(2048, 20);
    model::SearchSpace space;
    space.gpus = {5};
    space.tp = {1};
    space.pp = {5};
    space.micro_batch = {1};
    space.recompute = {wl::Recompute::none};
    space.virtual_stages = {1};
    using Splits = std::vector<std::pair<int, int>>;
    auto splits = [&](const wl::TransformerArch& m, const wl::TrainingPlan& b, const model::SearchSpace& sp) {
      Splits out;
      for (const auto& l : model::enumerate_layouts(m, b, sp)) {
        CHECK_FALSE((l.embedding_as_layer || l.loss_as_layer));
        out.emplace_back(l.first_stage_layers, l.last_stage_layers);
      }
      return out;
    };
    CHECK(splits(a, base, space) == Splits{{0, 0}, {0, 4}, {6, 5}, {5, 6}, {4, 0}});
    // At most 1 layer off an end: df + dl = 3 is out of reach, only the even split.
    space.max_stage_deficit = 1;
    CHECK(splits(a, base, space) == Splits{{0, 0}});
    // The split off, or set by the base plan: the base plan's only.
    space.max_stage_deficit = 4;
    space.vary_split = false;
    CHECK(splits(a, base, space) == Splits{{0, 0}});
    space.vary_split = true;
    wl::TrainingPlan fixed = base;
    fixed.split.last_stage_layers = 4;
    CHECK(splits(a, fixed, space) == Splits{{0, 4}});
    // PP 1 has no split to vary.
    space.gpus = {1};
    space.pp = {1};
    CHECK(splits(a, base, space) == Splits{{0, 0}});
  }

  TEST_CASE("the split dimension finds the interleaved schedule's uneven splits and Megatron's accounting") {
    // 30 layers (Llama 3.1 8B cut to 30) at PP 4, v = 2: 30 is no multiple of the 8 chunks, so the even split cannot
    // interleave. The embedding and the loss counted: 32 / 8 = 4 per chunk, the first and last one layer less:
    // chunks (3, 4, 4, 4 | 4, 4, 4, 3), stages 7, 8, 8, 7 (⌈30/4⌉ = 8: kept). First/last at m = 8, df + dl = 2:
    // last 6 (8, 8, 8, 6: 4 and 3 per chunk) and first 6; first 7 last 7 splits no stage in two. Megatron's flags.
    wl::TransformerArch a = arch("llama-3.1-8b");
    a.layers = 30;
    const wl::TrainingPlan base = base_plan(2048, 16);
    model::SearchSpace space;
    space.gpus = {4};
    space.tp = {1};
    space.pp = {4};
    space.micro_batch = {1};
    space.recompute = {wl::Recompute::none};
    space.virtual_stages = {2};
    struct S {
      int f, l;
      bool e, o;
      bool operator==(const S&) const = default;
    };
    std::vector<S> got;
    std::vector<model::Layout> layouts = model::enumerate_layouts(a, base, space);
    for (const auto& l : layouts) {
      CHECK(l.virtual_stages == 2);
      got.push_back({l.first_stage_layers, l.last_stage_layers, l.embedding_as_layer, l.loss_as_layer});
    }
    CHECK(got == std::vector<S>{{0, 0, true, true}, {0, 6, false, false}, {6, 0, false, false}});
    REQUIRE(layouts.size() == 3);
    CHECK(model::pipeline_assignment(a, model::with_layout(base, layouts[0])).chunk_layers ==
          std::vector<std::int64_t>{3, 4, 4, 4, 4, 4, 4, 3});
    CHECK(model::pipeline_assignment(a, model::with_layout(base, layouts[1])).chunk_layers ==
          std::vector<std::int64_t>{4, 4, 4, 3, 4, 4, 4, 3});
    CHECK(model::megatron_split_flags(layouts[0]) ==
          "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split");
    CHECK(model::megatron_split_flags(layouts[1]) == "--decoder-last-pipeline-num-layers 6");
    model::Layout l = layouts[1];
    l.first_stage_layers = 7;
    CHECK(model::megatron_split_flags(l) ==
          "--decoder-first-pipeline-num-layers 7 --decoder-last-pipeline-num-layers 6");
    CHECK(model::layout_of(model::with_layout(base, layouts[2])) == layouts[2]);
    // At PP 3 (32 layers, one chunk) the embedding counted gives 10, 11, 11 against the even 11, 11, 10; the loss
    // counted gives the even split's 11, 11, 10 again and is left out as a repeat.
    const auto& full = arch("llama-3.1-8b");
    space.gpus = {3};
    space.pp = {3};
    space.virtual_stages = {1};
    got.clear();
    for (const auto& x : model::enumerate_layouts(full, base_plan(2048, 18), space))
      got.push_back({x.first_stage_layers, x.last_stage_layers, x.embedding_as_layer, x.loss_as_layer});
    CHECK(got == std::vector<S>{{0, 0, false, false}, {0, 0, true, false}});
  }

  TEST_CASE("the searched split is priced bit for bit as estimate_training prices the plan with it") {
    // Gemma 2B (18 layers: uneven at PP 4, 8, 16) dense, and DeepSeek-V3 (61 layers, MoE, DualPipe) on H800s: every
    // 7th (11th) layout in enumeration order, so that the evaluator's plan goes from a split to the even one and back;
    // then again from the caches.
    struct Where {
      const char* model;
      const char* node;
      long long gpus;
      std::size_t stride;
    };
    for (const Where w : {Where{"gemma-1.1-2b", "dgx-h100", 16, 7}, Where{"deepseek-v3", "hgx-h800", 64, 11}}) {
      CAPTURE(w.model);
      const auto& a = arch(w.model);
      const auto sys = node_system(w.node);
      wl::TrainingPlan base = base_plan(4096, 64);
      model::SearchSpace space;
      space.gpus = {w.gpus};
      space.micro_batch = {1, 2};
      if (a.moe) space.tp = {1, 2};
      const auto layouts = model::enumerate_layouts(a, base, space, &sys);
      model::FastTrainingEvaluator ev(a, base, sys);
      std::uint64_t uneven = 0, valid = 0;
      for (int pass = 0; pass < 2; ++pass)
        for (std::size_t i = 0; i < layouts.size(); i += w.stride) {
          const auto& l = layouts[i];
          CAPTURE(model::describe(l));
          const auto e = model::estimate_training(a, model::with_layout(base, l), sys, Explain::off);
          check_equal(ev.evaluate(l), e);
          uneven += l.split_set() ? 1 : 0;
          valid += l.split_set() && e.step_time.raw() > 0 ? 1 : 0;
        }
      CHECK(uneven > 20);
      CHECK(valid > 10);
    }
  }

  TEST_CASE("the space leaves out only layouts that equal one it keeps") {
    const auto& a = arch("llama-3.1-8b");
    const wl::TrainingPlan base = base_plan(2048, 16);
    model::SearchSpace space;
    space.gpus = {8};
    const auto layouts = model::enumerate_layouts(a, base, space);
    for (const auto& l : layouts) {
      CHECK(l.recompute != wl::Recompute::selective);  // flash attention: selective = none
      if (static_cast<long long>(l.dp) * l.cp == 1) CHECK(l.zero == wl::ZeroStage::none);  // nothing to shard over
      if (l.tp == 1) CHECK(!l.sequence_parallel);
    }
    wl::TrainingPlan unfused = base;
    unfused.flash_attention = false;
    bool selective = false;
    for (const auto& l : model::enumerate_layouts(a, unfused, space))
      selective = selective || l.recompute == wl::Recompute::selective;
    CHECK(selective);
  }

  TEST_CASE("a search that cannot rank says why") {
    const auto& a = arch("llama-3.1-8b");
    auto sys = node_system("mi355x-8");  // no indicative price in the data (MI300X has one since #22, MI325X since #22 d3)
    const wl::TrainingPlan base = base_plan(2048, 16);
    model::SearchSpace space;
    space.gpus = {8};
    model::SearchOptions o;
    o.rank_by = model::RankBy::cost;
    CHECK(model::search_training(a, base, sys, space, o).error ==
          "ranking by cost needs a price per GPU-hour (--price; the GPU file has none)");
    o.rank_by = model::RankBy::time;
    o.deadline = units::days(30);
    CHECK(model::search_training(a, base, sys, space, o).error == "a deadline needs a token budget (--tokens)");
    CHECK(model::search_training(a, base, sys, model::SearchSpace{}, {}).error == "no GPU count to search");
    // 405B on 8 GPUs: nothing fits; the smallest footprint is reported.
    const auto& big = arch("llama-3.1-405b");
    const auto r = model::search_training(big, base, node_system("dgx-h100"), space, {});
    CHECK(r.top.empty());
    CHECK(r.fitting == 0);
    REQUIRE(r.least_memory);
    CHECK(r.least_memory->score.memory > r.least_memory->score.capacity);
    // A global batch that no DP divides: no layout at all, and the note says so.
    model::SearchSpace odd;
    odd.gpus = {6};
    odd.tp = {1};
    odd.cp = {1};
    odd.pp = {1};
    const auto r2 = model::search_training(a, base_plan(2048, 7), node_system("dgx-h100"), odd, {});
    CHECK(r2.total == 0);
    REQUIRE(!r2.notes.empty());
    bool said = false;
    for (const auto& n : r2.notes)
      said = said || n == "no layout divides the 6 GPUs with a data-parallel size that divides the global batch of 7";
    CHECK(said);
  }

  TEST_CASE("the comparison of two layouts adds up to their step-time difference") {
    const auto& a = arch("gpt3-175b");
    const auto sys = node_system("dgx-h100");
    const wl::TrainingPlan base = base_plan(2048, 1536);
    model::SearchSpace space;
    space.gpus = {1024};
    const auto r = model::search_training(a, base, sys, space, {});
    REQUIRE(r.top.size() >= 2);
    const auto& la = r.top[0].layout;
    const auto& lb = r.top[1].layout;
    const auto ea = model::estimate_training(a, model::with_layout(base, la), sys, Explain::off);
    const auto eb = model::estimate_training(a, model::with_layout(base, lb), sys, Explain::off);
    const auto c = model::compare_layouts(la, ea, lb, eb);
    CHECK(!c.changes.empty());
    double sum = 0;
    for (const auto& t : c.terms) {
      sum += (t.second - t.first).raw();
      CHECK(t.first.raw() != t.second.raw());
    }
    CHECK(sum == gptest::approx((c.step_second - c.step_first).raw()).epsilon(1e-9));
    CHECK(c.step_first <= c.step_second);
    for (std::size_t i = 1; i < c.terms.size(); ++i)
      CHECK(std::abs((c.terms[i - 1].second - c.terms[i - 1].first).raw()) >=
            std::abs((c.terms[i].second - c.terms[i].first).raw()));
    CHECK(c.headroom_first.raw() == (ea.memory.capacity - ea.memory.total).raw());
  }
}
