// Training properties over random valid scenarios (property.hpp says how to reproduce a case).
#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "gpuplan/model/memory.hpp"
#include "gpuplan/model/search.hpp"
#include "property.hpp"

using namespace gpuplan;
using prop::Rng;

namespace {

/// A copy of the database with one kind of hardware number multiplied by `f` (> 1: better hardware).
enum class Knob { hbm, compute, scale_up, scale_out };
const char* name(Knob k) {
  switch (k) {
    case Knob::hbm: return "HBM bandwidth";
    case Knob::compute: return "compute peaks (every precision)";
    case Knob::scale_up: return "scale-up bandwidth (GPU NVLink/xGMI port, NVLink/PCIe/C2C link specs)";
    case Knob::scale_out: return "scale-out bandwidth (NICs and IB/Ethernet ports)";
  }
  return "?";
}
hw::HardwareDb scaled(const hw::HardwareDb& base, Knob k, double f) {
  hw::HardwareDb d = base;
  for (auto& g : d.gpus) {
    if (k == Knob::hbm) g.memory.bandwidth = g.memory.bandwidth * f;
    if (k == Knob::compute)
      for (auto& p : g.dense_peak)
        if (p) *p = *p * f;
    if (k == Knob::scale_up && g.scale_up) g.scale_up->per_gpu_uni = g.scale_up->per_gpu_uni * f;
  }
  for (auto& l : d.links) {
    const bool out = l.type == hw::LinkType::infiniband || l.type == hw::LinkType::ethernet;
    if ((k == Knob::scale_up && !out) || (k == Knob::scale_out && out)) {
      for (auto* b : {&l.per_link_uni, &l.x16_uni, &l.port, &l.gpu_to_gpu_bidir, &l.reduction})
        if (*b) **b = **b * f;
    }
  }
  if (k == Knob::scale_out)
    for (auto& n : d.nodes)
      if (n.scale_out) n.scale_out->nic = n.scale_out->nic * f;
  return d;
}

model::TrainingSystem rebind(const model::TrainingSystem& s, const hw::HardwareDb& d) {
  model::TrainingSystem o = s;
  o.db = &d;
  o.node = s.node ? d.find_node(s.node->info.id) : nullptr;
  o.gpu = d.find_gpu(s.gpu->info.id);
  return o;
}

/// Relative slack for "non-increasing": floating-point reassociation only, nothing a model change could hide in.
constexpr double kSlack = 1e-9;

}  // namespace

TEST_CASE("property: every time, byte, FLOP count and rate of a training estimate is finite and >= 0") {
  int evaluated = 0, infeasible = 0;
  for (const int i : prop::case_indices(1500)) {
    Rng r("training-finite", i);
    const auto a = prop::random_arch(r);
    const auto t = prop::random_training(r, a);
    if (!t) continue;
    INFO(prop::repro(i) << "\n" << t->describe());
    const auto e = model::estimate_training(a.arch, t->plan, t->sys, Explain::off);
    if (!e.feasibility.ok) {
      ++infeasible;
      CHECK_MESSAGE(!e.feasibility.reasons.empty(), "infeasible without a reason");
      continue;
    }
    ++evaluated;
    const auto bad = prop::bad_values(e);
    CHECK_MESSAGE(bad.empty(), "not finite or negative: " << prop::join(bad));
    CHECK(e.step_time.raw() > 0);
    CHECK(e.memory.total.raw() > 0);
    CHECK(e.mfu <= 1.0);
  }
  MESSAGE("training estimates checked: " << evaluated << " (+" << infeasible << " infeasible with reasons)");
  CHECK(evaluated > 500);
}

TEST_CASE("property: step time does not rise when HBM bandwidth, compute peak, scale-up or scale-out bandwidth rises") {
  int compared = 0;
  for (const int i : prop::case_indices(300)) {
    Rng r("training-monotone-hardware", i);
    const auto a = prop::random_arch(r);
    const auto t = prop::random_training(r, a);
    if (!t) continue;
    const auto before = model::estimate_training(a.arch, t->plan, t->sys, Explain::off);
    if (!before.feasibility.ok) continue;
    for (const Knob k : {Knob::hbm, Knob::compute, Knob::scale_up, Knob::scale_out}) {
      const double f = r.chance(0.5) ? 2.0 : r.uniform(1.01, 10.0);
      const hw::HardwareDb d = scaled(prop::db(), k, f);
      const auto sys = rebind(t->sys, d);
      const auto after = model::estimate_training(a.arch, t->plan, sys, Explain::off);
      INFO(prop::repro(i) << "\n" << t->describe() << "\n" << name(k) << " × " << f);
      REQUIRE_MESSAGE(after.feasibility.ok, "better hardware made the plan infeasible: " << prop::join(after.feasibility.reasons));
      CHECK_MESSAGE(after.step_time.raw() <= before.step_time.raw() * (1 + kSlack),
                    fmt::format("step time rose from {:.9g} s to {:.9g} s (gemm {:.6g}→{:.6g}, attention {:.6g}→{:.6g}, "
                                "elementwise {:.6g}→{:.6g}, embedding/loss {:.6g}→{:.6g}, comm {:.6g}→{:.6g}, bubble "
                                "{:.6g}→{:.6g}, optimizer {:.6g}→{:.6g})",
                                before.step_time.raw(), after.step_time.raw(), before.step.gemm.raw(),
                                after.step.gemm.raw(), before.step.attention.raw(), after.step.attention.raw(),
                                before.step.elementwise.raw(), after.step.elementwise.raw(),
                                before.step.embedding_loss.raw(), after.step.embedding_loss.raw(),
                                before.step.comm_exposed.raw(), after.step.comm_exposed.raw(), before.step.bubble.raw(),
                                after.step.bubble.raw(), before.step.optimizer.raw(), after.step.optimizer.raw()));
      // Memory does not depend on bandwidths or peaks at all.
      CHECK(after.memory.total.raw() == before.memory.total.raw());
      ++compared;
    }
  }
  MESSAGE("hardware scalings compared: " << compared);
  CHECK(compared > 400);
}

namespace {

/// Model states per GPU: weights (incl. ZeRO-3 gathered units) + gradients + master weights + optimizer states.
double states(const model::TrainingMemory& m) {
  return (m.weights + m.gradients + m.master_weights + m.optimizer_states).raw();
}
/// What a plan change can add legitimately besides: one NCCL communicator more and the fragmentation share.
struct MemCase {
  prop::GenArch arch;
  prop::TrainingCase base;
};

std::optional<model::TrainingMemory> memory_of(const prop::TrainingCase& t, const wl::TrainingPlan& plan) {
  if (!model::check_training_layout(t.arch.arch, plan, t.sys).ok) return std::nullopt;
  return model::training_memory(t.arch.arch, model::parameter_counts(t.arch.arch, Explain::off), plan, *t.sys.gpu,
                                model::default_training_overheads(), Explain::off);
}

std::string mem_line(const model::TrainingMemory& m) {
  return fmt::format("weights {:.6g} grads {:.6g} master {:.6g} optimizer {:.6g} activations {:.6g} logits {:.6g} "
                     "nccl {:.6g} frag {:.6g} total {:.6g}",
                     m.weights.raw(), m.gradients.raw(), m.master_weights.raw(), m.optimizer_states.raw(),
                     m.activations.raw(), m.logits.raw(), m.nccl_buffers.raw(), m.fragmentation.raw(), m.total.raw());
}

}  // namespace

TEST_CASE("property: per-GPU memory does not rise with TP, PP, ZeRO stage or recompute level") {
  // Which terms, precisely (docs/reliability.md "Property tests"):
  //  - TP ×2 (DP, PP fixed): model states, activations and logits each non-increasing (SP on in both).
  //  - PP ×k (only pipelines that split the layers evenly, 1F1B): model states of the heaviest stage and its
  //    activations + logits non-increasing (1F1B keeps p micro-batches of L/p layers in flight on the first stage).
  //  - ZeRO 0 → 1 → 2 → 3 (DP·CP > 1, shard group = DP·CP): master + optimizer states non-increasing at each step;
  //    activations equal; gradients non-increasing
  //    from 1 to 2; total non-increasing from 0 to 2. ZeRO-3 trades the weight shard for two gathered layers, so its
  //    total may exceed ZeRO-2's when a layer is larger than the saved shard: not a property.
  //  - recompute none → selective → full: activations non-increasing; everything else unchanged.
  int tp_pairs = 0, pp_pairs = 0, zero_pairs = 0, rc_pairs = 0;
  for (const int i : prop::case_indices(400)) {
    Rng r("training-monotone-memory", i);
    const auto a = prop::random_arch(r);
    auto t = prop::random_training(r, a);
    if (!t) continue;
    const auto base_mem = memory_of(*t, t->plan);
    if (!base_mem) continue;
    INFO(prop::repro(i) << "\n" << t->describe());

    // TP doubled.
    {
      auto p = t->plan;
      p.par.tp *= 2;
      p.par.sequence_parallel = true;
      auto q = t->plan;
      q.par.sequence_parallel = q.par.tp > 1;
      const auto lo = memory_of(*t, q), hi = memory_of(*t, p);
      if (lo && hi) {
        ++tp_pairs;
        INFO("TP " << q.par.tp << " → " << p.par.tp << "\n  " << mem_line(*lo) << "\n  " << mem_line(*hi));
        CHECK(states(*hi) <= states(*lo) * (1 + kSlack));
        CHECK(hi->activations.raw() <= lo->activations.raw() * (1 + kSlack));
        CHECK(hi->logits.raw() <= lo->logits.raw() * (1 + kSlack));
      }
    }
    // PP raised to a multiple, both splitting the layers evenly, 1F1B.
    {
      auto q = t->plan;
      q.schedule = wl::PipelineSchedule::one_f_one_b;
      q.par.virtual_stages = 1;
      const auto L = a.arch.layers;
      // Layers of one kind only: with dense and MoE (or sliding and full) layers mixed, an even split of the layers is
      // not an even split of the activations, and the first stage holds p micro-batches of its own layers.
      const bool uniform = (!a.arch.moe || a.arch.moe_layer_count() == L) && a.arch.sliding_layer_count() == 0;
      if (uniform && L % q.par.pp == 0) {
        for (const int k : {2, 3, 4}) {
          auto p = q;
          p.par.pp *= k;
          if (L % p.par.pp != 0) continue;
          const auto lo = memory_of(*t, q), hi = memory_of(*t, p);
          if (!lo || !hi) continue;
          ++pp_pairs;
          INFO("PP " << q.par.pp << " → " << p.par.pp << " (" << L << " layers)\n  " << mem_line(*lo) << "\n  "
                     << mem_line(*hi));
          CHECK(states(*hi) <= states(*lo) * (1 + kSlack));
          // Activations and logits together: a single stage is also the last, whose logits/loss buffers absorb the
          // recomputation working set (they do not coexist, memory.cpp), so with PP 1 part of the activations is
          // reported under logits; the first stage of a pipeline reports it under activations.
          // The first stage also keeps the embedding-output dropout mask of each in-flight micro-batch ([K22] §4.3,
          // 1 byte per element): that part grows with p by design and is allowed for.
          const double mask = double(std::min<std::int64_t>(p.par.pp, std::max<std::int64_t>(1, p.micro_batches())) -
                                     std::min<std::int64_t>(q.par.pp, std::max<std::int64_t>(1, q.micro_batches()))) *
                              double(p.micro_batch) * double(p.seq_len) * double(a.arch.hidden);
          // A PyTorch loop (eager kernels) that peaks at the backward's end holds no activations there (see the
          // ZeRO check below): compare only peaks at which both hold them.
          if ((lo->activations + lo->logits).raw() > 0 && (hi->activations + hi->logits).raw() > 0)
            CHECK((hi->activations + hi->logits).raw() <=
                  (lo->activations + lo->logits).raw() * (1 + kSlack) + std::max(0.0, mask));
          break;
        }
      }
    }
    // ZeRO stages.
    if (static_cast<long long>(t->plan.par.dp) * t->plan.par.cp > 1) {
      std::optional<model::TrainingMemory> m[4];
      for (int z = 0; z < 4; ++z) {
        auto p = t->plan;
        p.zero = static_cast<wl::ZeroStage>(z);
        p.par.shard_group = 0;  // the same shard group (the whole DP·CP group) at every stage
        m[z] = memory_of(*t, p);
      }
      for (int z = 0; z + 1 < 4; ++z) {
        if (!m[z] || !m[z + 1]) continue;
        ++zero_pairs;
        INFO("ZeRO " << z << " → " << z + 1 << "\n  " << mem_line(*m[z]) << "\n  " << mem_line(*m[z + 1]));
        // Per stage; the reported (heaviest) stage can change with the ZeRO stage, and stages hold different
        // parameters (embedding, head, LoRA adapters), so compare when the same stage is reported (same logits).
        if (m[z + 1]->stage == m[z]->stage)
          CHECK((m[z + 1]->master_weights + m[z + 1]->optimizer_states).raw() <=
                (m[z]->master_weights + m[z]->optimizer_states).raw() * (1 + kSlack));
        if (z == 1) CHECK(m[2]->gradients.raw() <= m[1]->gradients.raw() * (1 + kSlack));
        if (z < 2) CHECK(m[z + 1]->total.raw() <= m[z]->total.raw() * (1 + kSlack));
        // The same stage reported (uneven pipelines: the heaviest stage can change with the ZeRO stage; logits
        // are held only by the last stage): its activations do not depend on the ZeRO stage. The breakdown is what is
        // alive at the peak: a PyTorch loop (eager kernels) whose gradients outweigh its activations peaks at the
        // backward's end, with no activations alive, and the ZeRO stage can move its peak there or back.
        const bool both_hold_activations = m[z]->activations.raw() > 0 && m[z + 1]->activations.raw() > 0;
        if (m[z + 1]->stage == m[z]->stage && both_hold_activations)
          CHECK(m[z + 1]->activations.raw() == m[z]->activations.raw());
      }
    }
    // Recompute levels.
    {
      std::optional<model::TrainingMemory> m[3];
      for (int k = 0; k < 3; ++k) {
        auto p = t->plan;
        p.recompute = static_cast<wl::Recompute>(k);
        m[k] = memory_of(*t, p);
      }
      for (int k = 0; k + 1 < 3; ++k) {
        if (!m[k] || !m[k + 1]) continue;
        ++rc_pairs;
        INFO("recompute " << k << " → " << k + 1 << "\n  " << mem_line(*m[k]) << "\n  " << mem_line(*m[k + 1]));
        CHECK(m[k + 1]->activations.raw() <= m[k]->activations.raw() * (1 + kSlack));
        CHECK(m[k + 1]->total.raw() <= m[k]->total.raw() * (1 + kSlack));
        // (Model states are not compared: with PP the heaviest stage may change from the first to the last.)
      }
    }
  }
  MESSAGE("memory pairs compared: TP " << tp_pairs << ", PP " << pp_pairs << ", ZeRO " << zero_pairs << ", recompute "
                                       << rc_pairs);
  CHECK(tp_pairs > 50);
  CHECK(pp_pairs > 20);
  CHECK(zero_pairs > 50);
  CHECK(rc_pairs > 200);
}

TEST_CASE("property: search_training returns only valid, fitting layouts, ranked, with estimate_training's numbers") {
  int searches = 0, ranked = 0;
  for (const int i : prop::case_indices(24)) {
    Rng r("search-feasible", i);
    const auto a = prop::random_arch(r, r.chance(0.5) ? prop::ArchKind::library : prop::ArchKind::any, /*small=*/true);
    static const std::vector<std::string> nodes{"dgx-h100", "dgx-a100", "mi300x-8", "gb200-nvl72", "dgx1-v100"};
    const auto sys = prop::system_of(prop::db(), r.pick(nodes));
    wl::TrainingPlan base;
    base.seq_len = std::min<std::int64_t>(a.arch.max_position > 0 ? a.arch.max_position : 4096,
                                          r.pick(std::vector<std::int64_t>{512, 2048, 4096}));
    base.global_batch = r.pick(std::vector<std::int64_t>{16, 64, 256});
    if (r.chance(0.5)) base.tokens_to_train = 1e11;
    model::SearchSpace space;
    space.gpus = {r.pick(std::vector<long long>{8, 16, 32})};
    if (r.chance(0.5)) space.virtual_stages = {1};
    if (r.chance(0.5)) space.micro_batch = {1, 2};
    if (r.chance(0.5)) space.cp = {1};
    model::SearchOptions opt;
    opt.top = 5;
    opt.threads = 2;
    if (base.tokens_to_train && r.chance(0.3)) opt.rank_by = model::RankBy::cost;
    const auto res = model::search_training(a.arch, base, sys, space, opt);
    INFO(prop::repro(i) << "\nmodel: " << a.what << "\nnode " << sys.node->info.id << " gpus " << space.gpus[0]
                        << " seq " << base.seq_len << " global " << base.global_batch);
    if (!res.error.empty()) continue;
    ++searches;
    CHECK(res.top.size() <= 5);
    CHECK(res.eligible >= res.top.size());
    for (std::size_t k = 0; k < res.top.size(); ++k) {
      const auto& pt = res.top[k];
      ++ranked;
      const auto plan = model::with_layout(base, pt.layout);
      INFO("top " << k + 1 << ": " << model::describe(pt.layout));
      CHECK(pt.rank_class == 0);
      CHECK(pt.score.valid);
      CHECK(pt.score.fits);
      CHECK(pt.layout.gpus == space.gpus[0]);
      CHECK(plan.par.gpus() == pt.layout.gpus);
      CHECK(model::check_training_layout(a.arch, plan, sys).ok);
      const auto e = model::estimate_training(a.arch, plan, sys, Explain::off);
      CHECK_MESSAGE(e.feasibility.ok, prop::join(e.feasibility.reasons));
      CHECK(e.memory.fits);
      CHECK(e.memory.total.raw() <= e.memory.capacity.raw());
      CHECK(e.step_time.raw() == pt.score.step_time.raw());
      CHECK(e.memory.total.raw() == pt.score.memory.raw());
      if (k > 0) CHECK_FALSE(model::ranks_before(pt, res.top[k - 1]));
    }
  }
  MESSAGE("searches: " << searches << ", ranked layouts checked: " << ranked);
  CHECK(searches > 10);
  CHECK(ranked > 20);
}

