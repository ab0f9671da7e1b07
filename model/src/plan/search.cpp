// Parallel-layout search and the fast evaluator behind it (model/include/gpuplan/model/search.hpp).
#include "gpuplan/model/search.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "memory_core.hpp"
#include "training_core.hpp"

namespace gpuplan::model {

// ------------------------------------------------------------------------------------------------------------------
// Layouts
// ------------------------------------------------------------------------------------------------------------------

wl::TrainingPlan with_layout(const wl::TrainingPlan& base, const Layout& l) {
  wl::TrainingPlan p = base;
  p.par.tp = l.tp;
  p.par.pp = l.pp;
  p.par.dp = l.dp;
  p.par.cp = l.cp;
  p.par.ep = l.ep;
  p.par.etp = l.etp;
  p.par.virtual_stages = l.virtual_stages;
  p.par.sequence_parallel = l.sequence_parallel;
  p.schedule = l.dualpipe             ? wl::PipelineSchedule::dualpipe
               : l.virtual_stages > 1 ? wl::PipelineSchedule::interleaved
                                      : wl::PipelineSchedule::one_f_one_b;
  p.micro_batch = l.micro_batch;
  p.recompute = l.recompute;
  p.zero = l.zero;
  p.offload = l.offload;
  return p;
}

Layout layout_of(const wl::TrainingPlan& plan) {
  Layout l;
  l.gpus = plan.par.gpus();
  l.tp = plan.par.tp;
  l.pp = plan.par.pp;
  l.dp = plan.par.dp;
  l.cp = plan.par.cp;
  l.ep = plan.par.ep;
  l.etp = plan.par.etp;
  l.virtual_stages = plan.schedule == wl::PipelineSchedule::interleaved ? plan.par.virtual_stages : 1;
  l.micro_batch = plan.micro_batch;
  l.sequence_parallel = plan.par.sequence_parallel;
  l.recompute = plan.recompute;
  l.zero = plan.zero;
  l.offload = plan.offload;
  l.dualpipe = plan.schedule == wl::PipelineSchedule::dualpipe;
  return l;
}

namespace {

const char* recompute_name(wl::Recompute r) {
  switch (r) {
    case wl::Recompute::none: return "none";
    case wl::Recompute::selective: return "selective";
    case wl::Recompute::full: return "full";
  }
  return "?";
}

}  // namespace

std::string describe(const Layout& l) {
  std::string s = fmt::format("TP {} · PP {}", l.tp, l.pp);
  if (l.virtual_stages > 1) s += fmt::format(" (v={})", l.virtual_stages);
  if (l.dualpipe) s += " DualPipe";
  s += fmt::format(" · DP {} · CP {}", l.dp, l.cp);
  if (l.ep > 1) s += fmt::format(" · EP {}", l.ep);
  if (l.etp > 0 && l.etp != l.tp) s += fmt::format(" · ETP {}", l.etp);
  if (l.sequence_parallel && l.tp > 1) s += " · SP";
  s += fmt::format(" · micro-batch {} · recompute {} · ZeRO {}", l.micro_batch, recompute_name(l.recompute),
                   static_cast<int>(l.zero));
  if (l.offload == wl::Offload::optimizer) s += " · CPU offload";
  return s;
}

std::string to_string(RankBy r) {
  switch (r) {
    case RankBy::time: return "time";
    case RankBy::cost: return "cost";
    case RankBy::tokens_per_usd: return "tokens-per-usd";
  }
  return "?";
}

// ------------------------------------------------------------------------------------------------------------------
// FastTrainingEvaluator
// ------------------------------------------------------------------------------------------------------------------

namespace {

/// Open-addressing map from a few integers to a cached term. Lookups never allocate; an insert may grow the table
/// (once per key, not per layout). References stay valid until the next insert into the same cache.
template <class V, std::size_t N>
class TermCache {
 public:
  using Key = std::array<std::int64_t, N>;

  template <class Make>
  const V& get(const Key& key, Make&& make) {
    if (slots_.empty()) rehash(64);
    std::size_t i = hash(key) & mask_;
    while (slots_[i].used) {
      if (slots_[i].key == key) return slots_[i].value;
      i = (i + 1) & mask_;
    }
    V value = make();
    if (2 * (count_ + 1) > slots_.size()) {
      rehash(slots_.size() * 2);
      i = hash(key) & mask_;
      while (slots_[i].used) i = (i + 1) & mask_;
    }
    Slot& s = slots_[i];
    s.key = key;
    s.value = std::move(value);
    s.used = true;
    ++count_;
    return s.value;
  }
  [[nodiscard]] std::size_t size() const { return count_; }

 private:
  struct Slot {
    Key key{};
    V value{};
    bool used = false;
  };
  static std::size_t hash(const Key& k) {
    std::uint64_t h = 0x9E3779B97F4A7C15ull;
    for (std::int64_t x : k) {
      h ^= static_cast<std::uint64_t>(x) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
      h ^= h >> 31;
      h *= 0xBF58476D1CE4E5B9ull;
    }
    h ^= h >> 29;
    return static_cast<std::size_t>(h);
  }
  void rehash(std::size_t n) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(n, Slot{});
    mask_ = n - 1;
    count_ = 0;
    for (Slot& s : old)
      if (s.used) {
        std::size_t i = hash(s.key) & mask_;
        while (slots_[i].used) i = (i + 1) & mask_;
        slots_[i] = std::move(s);
        ++count_;
      }
  }
  std::vector<Slot> slots_;
  std::size_t mask_ = 0, count_ = 0;
};

using detail::ComputeTerms;
using detail::DpTimes;
using detail::LayerSums;
using detail::StageShape;
using units::Seconds;

using StageShapes = std::vector<StageShape>;

}  // namespace

namespace {
/// The cached evaluator of one model as built (one padded vocabulary: FastTrainingEvaluator::Impl keeps one per
/// padded size, since the padding multiple grows with TP).
struct VocabEvaluator {
  const wl::TransformerArch& a;
  wl::TrainingPlan base;
  const TrainingSystem& sys;
  bool have_gpu = false;
  detail::TrainingConsts k;
  RuntimeOverheads overheads;
  detail::LayerKinds kinds;
  units::Bytes capacity{};

  // "ep" in the keys below: EP and expert TP together (ek in evaluate).
  TermCache<ComputeTerms, 5> compute;  // tp, cp, micro, sp, ep
  TermCache<Seconds, 3> amp;           // tp, pp, ep
  TermCache<Seconds, 8> dp_copy;       // tp, pp, dp, cp, ep, optimizer shard, micro-batches, zero
  TermCache<Seconds, 4> tp;            // tp, cp, micro, sp
  TermCache<Seconds, 4> etp_pair;      // tp, cp, micro, etp (parallel folding)
  TermCache<Seconds, 3> cp;            // tp, cp, micro
  TermCache<Seconds, 4> ep;            // tp, cp, ep, micro
  TermCache<units::Bytes, 4> ep_bytes;  // tp, cp, ep, micro
  TermCache<Seconds, 5> pp;            // tp, cp, dp, micro, sp
  TermCache<Seconds, 4> pp_gather;     // tp, cp, micro, sp
  TermCache<DpTimes, 6> dp;            // tp, pp, cp, dp, ep, ZeRO stage
  TermCache<Seconds, 4> opt;           // tp, pp, ep, shard
  TermCache<detail::OffloadTimes, 5> offload;  // tp, pp, ep, shard, GPUs per node in use
  TermCache<CommGroup, 2> groups;      // size, stride
  TermCache<LayerSums, 2> sums;        // tp, sp
  TermCache<StageShapes, 3> shapes;    // pp, v, recompute (full recompute's per-chunk counts: StageShape::recomputed)

  VocabEvaluator(const wl::TransformerArch& arch, const wl::TrainingPlan& b, const TrainingSystem& s)
      : a(arch), base(b), sys(s), have_gpu(s.gpu != nullptr) {
    if (!have_gpu) return;
    k = detail::training_consts(a, base, sys);
    overheads = default_training_overheads();
    kinds = detail::layer_kinds(a, k.params);
    capacity = sys.gpu->memory_capacity();
  }

  // Copied out: a reference into `groups` would not survive the next insert.
  auto with_group(int size, int stride, const auto& term) {
    const CommGroup& g = groups.get({size, stride}, [&] { return training_comm_group(size, stride, sys); });
    return term(g);
  }

  LayoutScore evaluate(const Layout& l) {
    LayoutScore r;
    if (!have_gpu) return r;
    const wl::TrainingPlan plan = with_layout(base, l);
    if (!detail::layout_rules(a, plan, sys, nullptr)) return r;
    const auto& par = plan.par;
    const std::int64_t sp = par.sequence_parallel ? 1 : 0, mb = plan.micro_batch;
    // The expert grid in the keys of the terms that depend on it: EP and expert TP (parallel folding) in one key.
    const std::int64_t ek = std::int64_t(par.ep) * 4096 + par.expert_tp();
    // PP in the keys of the terms that depend on the parameters a GPU holds: negative under DualPipe (two stages per
    // device, params_per_gpu).
    const int pp_key = plan.dualpipe() ? -par.pp : par.pp;
    const Device& d = k.d;

    detail::StepTerms t;
    t.compute =
        compute.get({par.tp, par.cp, mb, sp, ek}, [&] { return detail::compute_terms(a, plan, d, nullptr); });
    if (plan.mixed_precision == wl::MixedPrecision::amp)
      t.amp_casts = amp.get({par.tp, pp_key, ek}, [&] { return detail::amp_cast_time(a, k.params, plan, d); });
    if (par.tp > 1)
      t.tp_one = tp.get({par.tp, par.cp, mb, sp}, [&] {
        return with_group(par.tp, 1, [&](const CommGroup& g) { return detail::tp_collective_time(a, plan, g); });
      });
    if (par.cp > 1)
      t.cp_one = cp.get({par.tp, par.cp, mb}, [&] {
        return with_group(par.cp, par.tp, [&](const CommGroup& g) { return detail::cp_collective_time(a, plan, g); });
      });
    // The expert grid's strides (etp = tp unless the layout folds).
    const int etp = par.expert_tp();
    if (detail::expert_tp_folded(a, plan) && etp > 1)
      t.etp_one = etp_pair.get({par.tp, par.cp, mb, etp}, [&] {
        return with_group(etp, 1, [&](const CommGroup& g) { return detail::etp_collective_time(a, plan, g); });
      });
    if (par.ep > 1 && a.moe)
      t.ep_one = ep.get({par.tp, par.cp, ek, mb}, [&] {
        return with_group(par.ep, etp, [&](const CommGroup& g) { return detail::ep_collective_time(a, plan, g); });
      });
    if (par.ep > 1 && a.moe)
      t.ep_bytes_one = ep_bytes.get({par.tp, par.cp, ek, mb}, [&] {
        return with_group(par.ep, etp, [&](const CommGroup& g) {
          const detail::MoeDispatch md = detail::moe_dispatch(a, plan, g);
          return (md.dispatch_bytes + md.combine_bytes) * 0.5;
        });
      });
    if (par.pp > 1) {
      t.pp_one = pp.get({par.tp, par.cp, par.dp, mb, sp}, [&] {
        return with_group(2, par.tp * par.cp * par.dp,
                          [&](const CommGroup& g) { return detail::pp_collective_time(a, plan, g); });
      });
      if (plan.pp_scatter_gather && par.tp > 1 && !par.sequence_parallel)
        t.pp_gather_one = pp_gather.get({par.tp, par.cp, mb, sp}, [&] {
          return with_group(par.tp, 1, [&](const CommGroup& g) { return detail::pp_gather_time(a, plan, g); });
        });
    }
    const int n_dp = detail::dense_grad_group_size(plan);
    if (n_dp > 1) {
      const auto zero = static_cast<std::int64_t>(plan.zero);
      t.dp = dp.get({par.tp, pp_key, par.cp, par.dp, ek, zero}, [&] {
        const int n_edp = detail::expert_grad_group_size(plan);
        // Copied out: a reference into `groups` would not survive the next insert.
        const CommGroup g = groups.get({n_dp, par.tp}, [&] { return training_comm_group(n_dp, par.tp, sys); });
        const CommGroup& ge = groups.get({n_edp, etp * par.ep},
                                         [&] { return training_comm_group(n_edp, etp * par.ep, sys); });
        return detail::dp_collective_times(a, k.params, plan, g, ge);
      });
      if (plan.kernels == wl::KernelStyle::eager)
        t.dp_copy = dp_copy.get({par.tp, pp_key, par.dp, par.cp, ek,
                                 static_cast<std::int64_t>(detail::optimizer_shard(plan)), plan.micro_batches(), zero},
                                [&] { return detail::dp_copy_time(a, k.params, plan, d); });
    }
    const double shard = detail::optimizer_shard(plan);
    t.optimizer = opt.get({par.tp, pp_key, ek, static_cast<std::int64_t>(shard)},
                          [&] { return detail::optimizer_time(a, k.params, plan, d); });
    if (plan.offload == wl::Offload::optimizer) {
      t.offload = offload.get({par.tp, pp_key, ek, static_cast<std::int64_t>(shard),
                               detail::offload_node_gpus(plan, sys)},
                              [&] { return detail::offload_times(a, k.params, plan, sys); });
    }
    if (plan.activation_offload_layers > 0) {
      t.act_offload_layer = detail::activation_offload_layer_time(a, plan, sys);
      t.act_offload_layer_bytes = units::bytes(detail::activation_offload_layer_bytes(a, plan));
    }

    const int p = std::max(1, par.pp);
    const int v = plan.model_chunks();
    const int v_key = plan.dualpipe() ? 0 : v;  // DualPipe's devices hold two stages: their own shapes
    // A reference into `shapes`: valid until its next insert (none comes before memory_core below).
    const auto rc_key = static_cast<std::int64_t>(plan.recompute);
    const StageShapes& sh = shapes.get({p, v_key, rc_key}, [&] { return detail::stage_shapes(a, k.params, plan); });
    t.stages = &sh;
    detail::StepCore core;
    detail::compose_step(a, plan, k, t, core);
    r.micro_batches = core.m;
    r.step = core.step;
    r.comm = {core.tp.exposed, core.cp.exposed, core.ep.exposed, core.pp.exposed, core.dp.exposed};
    if (!core.ok) return r;
    r.valid = true;
    r.step_time = core.step.total;
    r.tokens_per_s = core.tokens_per_s;
    r.mfu = core.mfu;
    r.has_time_to_train = core.has_time_to_train;
    r.time_to_train = core.time_to_train;
    r.has_cost = core.has_cost;
    r.cost = core.cost;
    if (k.price) {
      r.has_price = true;
      r.tokens_per_usd = core.tokens_per_s / (k.price->raw() * double(par.gpus()));
    }

    const detail::Ctx c = detail::make_ctx(a, plan, ActivationLayout::from_plan);
    const LayerSums ls = sums.get({par.tp, c.sp ? 1 : 0}, [&] { return detail::layer_sums(c); });
    detail::MemoryCore mem;
    detail::memory_core(a, k.params, plan, overheads, c, kinds, ls,
                        shapes.get({p, v_key, rc_key}, [&] { return detail::stage_shapes(a, k.params, plan); }), mem);
    r.memory = units::bytes(mem.heaviest().total);
    r.capacity = capacity;
    r.fits = r.memory <= r.capacity;
    if (!detail::offload_fits_host(mem.host(), plan, sys))
      r.fits = false;
    return r;
  }

  [[nodiscard]] std::size_t cached() const {
    return compute.size() + amp.size() + dp_copy.size() + tp.size() + cp.size() + ep.size() + pp.size() +
           pp_gather.size() + dp.size() + etp_pair.size() +
           opt.size() + offload.size() + groups.size() + sums.size() + shapes.size();
  }
};
}  // namespace

struct FastTrainingEvaluator::Impl {
  const wl::TransformerArch& arch;
  wl::TrainingPlan base;
  const TrainingSystem& sys;
  /// Padded vocabulary → the model built with it and its evaluator (stable addresses: the evaluator refers to it).
  std::map<std::int64_t, std::pair<std::unique_ptr<wl::TransformerArch>, std::unique_ptr<VocabEvaluator>>> by_vocab;

  Impl(const wl::TransformerArch& a, const wl::TrainingPlan& b, const TrainingSystem& s) : arch(a), base(b), sys(s) {}

  LayoutScore evaluate(const Layout& l) {
    const std::int64_t v = with_layout(base, l).padded_vocab(arch.vocab);
    auto it = by_vocab.find(v);
    if (it == by_vocab.end()) {
      auto padded = std::make_unique<wl::TransformerArch>(arch);
      padded->vocab = v;
      auto ev = std::make_unique<VocabEvaluator>(*padded, base, sys);
      it = by_vocab.emplace(v, std::make_pair(std::move(padded), std::move(ev))).first;
    }
    return it->second.second->evaluate(l);
  }
  [[nodiscard]] std::size_t cached() const {
    std::size_t n = 0;
    for (const auto& e : by_vocab) n += e.second.second->cached();
    return n;
  }
};

FastTrainingEvaluator::FastTrainingEvaluator(const wl::TransformerArch& arch, const wl::TrainingPlan& base,
                                             const TrainingSystem& sys)
    : impl_(std::make_unique<Impl>(arch, base, sys)) {}
FastTrainingEvaluator::~FastTrainingEvaluator() = default;
FastTrainingEvaluator::FastTrainingEvaluator(FastTrainingEvaluator&&) noexcept = default;
FastTrainingEvaluator& FastTrainingEvaluator::operator=(FastTrainingEvaluator&&) noexcept = default;
LayoutScore FastTrainingEvaluator::evaluate(const Layout& l) { return impl_->evaluate(l); }
std::size_t FastTrainingEvaluator::cached_terms() const { return impl_->cached(); }

// ------------------------------------------------------------------------------------------------------------------
// Search
// ------------------------------------------------------------------------------------------------------------------

namespace {
double memory_of(const SearchPoint& p) { return p.score.memory.raw(); }
double memory_of(const RankedLayout& r) { return r.memory_bytes; }
template <class P>
bool rank_order(const P& a, const P& b) {
  if (a.rank_class != b.rank_class) return a.rank_class < b.rank_class;
  if (a.objective != b.objective) return a.objective < b.objective;
  // Equal objective (e.g. ZeRO 1 and 2 take the same time): more memory headroom first.
  if (memory_of(a) != memory_of(b)) return memory_of(a) < memory_of(b);
  return a.layout < b.layout;
}
}  // namespace

bool ranks_before(const RankedLayout& a, const RankedLayout& b) { return rank_order(a, b); }
bool ranks_before(const SearchPoint& a, const SearchPoint& b) { return rank_order(a, b); }

namespace {

template <class T>
bool allowed(const std::vector<T>& list, T v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

std::vector<long long> divisors(long long n) {
  std::vector<long long> lo, hi;
  for (long long d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      lo.push_back(d);
      if (d != n / d) hi.push_back(n / d);
    }
  lo.insert(lo.end(), hi.rbegin(), hi.rend());
  return lo;
}

/// One unit of work: a (GPU count, TP, CP, PP, DP, EP) split; the inner dimensions are enumerated by the worker.
struct Item {
  Layout base;
  std::uint64_t count = 0;
};

struct Dims {
  std::vector<int> virtual_stages;
  std::vector<bool> sp;
  std::vector<std::int64_t> micro;
  std::vector<wl::Recompute> recompute;
  /// (ZeRO stage, offload) pairs: CPU offload only with ZeRO ≥ 1.
  std::vector<std::pair<wl::ZeroStage, wl::Offload>> zero;
  [[nodiscard]] std::uint64_t count() const {
    return std::uint64_t(virtual_stages.size()) * sp.size() * micro.size() * recompute.size() * zero.size();
  }
};

struct Enumerator {
  const wl::TransformerArch& a;
  const wl::TrainingPlan& base;
  const SearchSpace& space;
  std::vector<wl::Offload> offload;  ///< the offload values to enumerate

  [[nodiscard]] bool tp_ok(long long t) const {
    return a.heads % t == 0 && (a.mla || a.kv_heads % t == 0 || t % a.kv_heads == 0) && a.intermediate % t == 0 &&
           allowed(space.tp, int(t));
  }
  [[nodiscard]] bool cp_ok(long long c) const {
    return (c == 1 || base.seq_len % (2 * c) == 0) && allowed(space.cp, int(c));
  }
  [[nodiscard]] bool pp_ok(long long p) const {
    return p <= a.layers && allowed(space.pp, int(p));  // uneven stages allowed (1F1B; interleaving needs even chunks)
  }

  [[nodiscard]] Dims dims(const Layout& l) const {
    Dims d;
    d.virtual_stages.push_back(1);
    if (l.pp > 1)
      for (std::int64_t v = 2; v * l.pp <= a.layers + 2; ++v) {
        if (!base.split.any()) {
          if (a.layers % (v * l.pp) == 0) d.virtual_stages.push_back(int(v));
          continue;
        }
        // An uneven split: the chunk counts its rule allows (chunk_layers, the one assignment).
        wl::TrainingPlan probe = base;
        probe.par.pp = l.pp;
        probe.par.virtual_stages = int(v);
        probe.schedule = wl::PipelineSchedule::interleaved;
        if (detail::chunk_split_ok(a, probe, nullptr)) d.virtual_stages.push_back(int(v));
      }
    std::erase_if(d.virtual_stages, [&](int v) { return !allowed(space.virtual_stages, v); });
    // DualPipe rides on the virtual-stage dimension of the enumeration as 0 (virtual stages 1, Layout::dualpipe).
    const bool dual_ok = l.pp >= 2 && l.pp % 2 == 0 && allowed(space.virtual_stages, 1);
    const bool dual_default = a.moe.has_value();
    if (space.dualpipe.empty() ? dual_ok && dual_default : dual_ok && allowed(space.dualpipe, true))
      d.virtual_stages.push_back(0);
    if (!space.dualpipe.empty() && !allowed(space.dualpipe, false))
      std::erase_if(d.virtual_stages, [](int v) { return v != 0; });
    for (bool s : {false, true})
      if ((!s || l.tp > 1) && allowed(space.sequence_parallel, s)) d.sp.push_back(s);
    if (base.global_batch % l.dp == 0)
      for (long long m : divisors(base.global_batch / l.dp))
        if (allowed(space.micro_batch, std::int64_t(m))) d.micro.push_back(m);
    if (space.recompute.empty()) {
      d.recompute = {wl::Recompute::none, wl::Recompute::selective, wl::Recompute::full};
      // Selective recomputation recomputes the attention core, which FlashAttention never stores: the same as none.
      if (base.flash_attention) std::erase(d.recompute, wl::Recompute::selective);
    } else {
      d.recompute = space.recompute;
    }
    std::vector<wl::ZeroStage> zero;
    if (space.zero.empty()) {
      zero = {wl::ZeroStage::none};
      if (std::int64_t(l.dp) * l.cp > 1)
        zero.insert(zero.end(), {wl::ZeroStage::optimizer, wl::ZeroStage::gradients, wl::ZeroStage::parameters});
    } else {
      zero = space.zero;
    }
    for (wl::ZeroStage z : zero)
      for (wl::Offload o : offload)
        if (o == wl::Offload::none || z != wl::ZeroStage::none) d.zero.emplace_back(z, o);
    return d;
  }

  /// Expert TP values at attention TP t: the space's list, else the base plan's (a plan that sets etp keeps it),
  /// else the attention's TP (0) and, at t > 1, full folding (1).
  [[nodiscard]] std::vector<int> expert_tps(int t) const {
    if (!space.etp.empty()) return space.etp;
    if (base.par.etp > 0) return {base.par.etp};
    if (t > 1) return {0, 1};
    return {0};
  }

  [[nodiscard]] std::vector<Item> items() const {
    std::vector<Item> out;
    for (long long n : space.gpus) {
      if (n < 1) continue;
      for (long long t : divisors(n)) {
        if (!tp_ok(t)) continue;
        for (long long c : divisors(n / t)) {
          if (!cp_ok(c)) continue;
          for (long long p : divisors(n / t / c)) {
            if (!pp_ok(p)) continue;
            const long long dp = n / t / c / p;
            if (!allowed(space.dp, int(dp)) || base.global_batch % dp != 0) continue;
            // (EP, expert TP) pairs: expert TP = TP needs EP | DP·CP; parallel folding (etp ≠ tp) regroups the
            // stage's TP·CP·DP ranks as etp·EP·expert-DP, so etp·EP | TP·CP·DP (Megatron-Core parallel_state.py).
            std::vector<std::pair<long long, int>> experts{{1, base.par.etp}};
            if (a.moe) {
              experts.clear();
              for (int f : expert_tps(int(t)))
                for (long long e : divisors(a.moe->num_experts)) {
                  const long long grid = f == 0 || f == int(t) ? dp * c : t * dp * c;
                  const long long shard = f == 0 || f == int(t) ? e : e * f;
                  if (grid % shard == 0) experts.emplace_back(e, f);
                }
            }
            for (const auto& [e, f] : experts) {
              if (!allowed(space.ep, int(e))) continue;
              Item it;
              it.base.gpus = n;
              it.base.tp = int(t);
              it.base.cp = int(c);
              it.base.pp = int(p);
              it.base.dp = int(dp);
              it.base.ep = int(e);
              it.base.etp = f;
              it.count = dims(it.base).count();
              if (it.count > 0) out.push_back(it);
            }
          }
        }
      }
    }
    return out;
  }
};

/// Calls `f(layout)` for every inner combination of an item, in the enumeration order.
template <class F>
void for_each_layout(const Item& it, const Dims& dm, F&& f) {
  Layout l = it.base;
  for (int v : dm.virtual_stages) {
    l.virtual_stages = std::max(1, v);
    l.dualpipe = v == 0;
    for (bool sp : dm.sp) {
      l.sequence_parallel = sp;
      for (std::int64_t mb : dm.micro) {
        l.micro_batch = mb;
        for (wl::Recompute rc : dm.recompute) {
          l.recompute = rc;
          for (const auto& [z, o] : dm.zero) {
            l.zero = z;
            l.offload = o;
            f(l);
          }
        }
      }
    }
  }
}

struct alignas(64) Local {  // one per thread, on its own cache lines
  std::vector<SearchPoint> top;
  std::vector<RankedLayout> all;
  std::optional<SearchPoint> least_memory, fastest_fitting;
  std::uint64_t evaluated = 0, valid = 0, fitting = 0, eligible = 0;
};

/// `b` replaces `cur` when it is smaller by `key`, ties broken by the layout: deterministic whatever the threads.
template <class Key>
void keep_min(std::optional<SearchPoint>& cur, const SearchPoint& b, Key key) {
  if (!cur || key(b) < key(*cur) || (key(b) == key(*cur) && b.layout < cur->layout)) cur = b;
}

/// Why the system cannot run CPU offload ("" when it can).
std::string offload_why_not(const wl::TrainingPlan& base, const TrainingSystem* sys) {
  if (base.optimizer == wl::OptimizerKind::adamw_8bit) return "8-bit AdamW runs on the GPU only";
  if (sys == nullptr) return "no system given";
  if (!detail::host_link_bandwidth(*sys)) return "the GPU's host link is not in the data";
  if (sys->node == nullptr || !sys->node->host_memory_bandwidth) return "the node's host DRAM bandwidth is not in the data";
  return {};
}

/// The offload values to enumerate: the space's list, else off and (where the system allows it) on.
std::vector<wl::Offload> offload_values(const wl::TrainingPlan& base, const SearchSpace& space,
                                        const TrainingSystem* sys) {
  if (!space.offload.empty()) return space.offload;
  std::vector<wl::Offload> v{wl::Offload::none};
  if (offload_why_not(base, sys).empty()) v.push_back(wl::Offload::optimizer);
  return v;
}

double training_time(const SearchPoint& p) {
  return p.score.has_time_to_train ? p.score.time_to_train.raw() : p.score.step_time.raw();
}

}  // namespace

std::vector<Layout> enumerate_layouts(const wl::TransformerArch& arch, const wl::TrainingPlan& base,
                                      const SearchSpace& space, const TrainingSystem* sys) {
  const Enumerator en{arch, base, space, offload_values(base, space, sys)};
  std::vector<Layout> out;
  for (const Item& it : en.items()) for_each_layout(it, en.dims(it.base), [&](const Layout& l) { out.push_back(l); });
  return out;
}

SearchResult search_training(const wl::TransformerArch& arch, const wl::TrainingPlan& base, const TrainingSystem& sys,
                             const SearchSpace& space, const SearchOptions& options) {
  SearchResult res;
  if (space.gpus.empty()) {
    res.error = "no GPU count to search";
    return res;
  }
  std::optional<units::UsdPerSecond> price = sys.price;
  if (!price && sys.gpu != nullptr) price = sys.gpu->price;
  if (options.rank_by != RankBy::time && !price) {
    res.error = fmt::format("ranking by {} needs a price per GPU-hour (--price; the GPU file has none)",
                            to_string(options.rank_by));
    return res;
  }
  if (options.deadline && !base.tokens_to_train) {
    res.error = "a deadline needs a token budget (--tokens)";
    return res;
  }

  const Enumerator en{arch, base, space, offload_values(base, space, &sys)};
  const std::vector<Item> items = en.items();
  for (const Item& it : items) res.total += it.count;

  // What the space leaves out, said once.
  if (space.recompute.empty() && base.flash_attention)
    res.notes.push_back(
        "selective recomputation is not enumerated: it recomputes the attention core, which flash attention never "
        "stores, so it equals recompute none here");
  if (space.pp.empty()) {
    for (long long n : space.gpus) {
      std::string pps;
      for (long long p : divisors(n))
        if (en.pp_ok(p)) pps += (pps.empty() ? "" : ", ") + std::to_string(p);
      res.notes.push_back(fmt::format("{} GPUs: PP sizes that divide both the {} layers and the GPU count: {}", n,
                                      arch.layers, pps.empty() ? "none" : pps));
    }
  }
  if (space.offload.empty()) {
    const std::string why = offload_why_not(base, &sys);
    res.notes.push_back(why.empty() ? std::string("CPU offload of the optimizer (ZeRO-Offload) is searched with ZeRO "
                                                  "≥ 1; activation offload is not modelled")
                                    : "CPU offload is not searched: " + why);
  }

  unsigned threads = options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::max(1u, std::min<unsigned>(threads, unsigned(std::max<std::size_t>(1, items.size()))));
  res.threads = threads;
  const std::size_t top_n = std::size_t(std::max(0, options.top));

  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> done{0};
  std::vector<Local> locals(threads);

  auto classify = [&](SearchPoint& p) {
    const LayoutScore& s = p.score;
    if (!s.valid) {
      p.rank_class = 3;
      p.objective = 0;
      return;
    }
    switch (options.rank_by) {
      case RankBy::time: p.objective = s.step_time.raw(); break;
      case RankBy::cost: p.objective = 1.0 / s.tokens_per_usd; break;  // USD per token
      case RankBy::tokens_per_usd: p.objective = -s.tokens_per_usd; break;
    }
    if (!s.fits) p.rank_class = 2;
    else if (options.deadline && !(s.has_time_to_train && s.time_to_train <= *options.deadline)) p.rank_class = 1;
    else p.rank_class = 0;
  };

  auto work = [&](Local& loc, bool caller) {
    FastTrainingEvaluator ev(arch, base, sys);
    for (;;) {
      if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) break;
      const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= items.size()) break;
      const Item& it = items[i];
      for_each_layout(it, en.dims(it.base), [&](const Layout& l) {
        SearchPoint p;
        p.layout = l;
        p.score = ev.evaluate(l);
        classify(p);
        ++loc.evaluated;
        if (p.rank_class <= 2) {
          ++loc.valid;
          keep_min(loc.least_memory, p, [](const SearchPoint& x) { return x.score.memory.raw(); });
        }
        if (p.rank_class <= 1) {
          ++loc.fitting;
          keep_min(loc.fastest_fitting, p, training_time);
        }
        if (p.rank_class == 0) {
          ++loc.eligible;
          if (loc.top.size() < top_n || (top_n > 0 && rank_order(p, loc.top.back()))) {
            loc.top.insert(std::upper_bound(loc.top.begin(), loc.top.end(), p, rank_order<SearchPoint>), p);
            if (loc.top.size() > top_n) loc.top.pop_back();
          }
        }
        if (options.keep_all) loc.all.push_back({p.layout, p.objective, p.rank_class, p.score.memory.raw()});
      });
      const std::uint64_t d = done.fetch_add(it.count, std::memory_order_relaxed) + it.count;
      if (caller && options.progress) options.progress(d, res.total);
    }
  };

  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (unsigned i = 1; i < threads; ++i) pool.emplace_back(work, std::ref(locals[i]), false);
  work(locals[0], true);
  for (auto& t : pool) t.join();

  for (Local& loc : locals) {
    res.evaluated += loc.evaluated;
    res.valid += loc.valid;
    res.fitting += loc.fitting;
    res.eligible += loc.eligible;
    res.top.insert(res.top.end(), loc.top.begin(), loc.top.end());
    if (options.keep_all) res.all.insert(res.all.end(), loc.all.begin(), loc.all.end());
    if (loc.least_memory)
      keep_min(res.least_memory, *loc.least_memory, [](const SearchPoint& x) { return x.score.memory.raw(); });
    if (loc.fastest_fitting) keep_min(res.fastest_fitting, *loc.fastest_fitting, training_time);
  }
  std::sort(res.top.begin(), res.top.end(), rank_order<SearchPoint>);
  if (res.top.size() > top_n) res.top.resize(top_n);
  std::sort(res.all.begin(), res.all.end(), rank_order<RankedLayout>);
  res.cancelled = res.evaluated < res.total;
  if (options.progress) options.progress(res.evaluated, res.total);

  // Why nothing may rank.
  if (items.empty() || res.valid == 0) {
    // The reasons of the simplest layout: all GPUs data parallel, micro-batch 1.
    Layout simple;
    simple.gpus = space.gpus.front();
    simple.dp = int(space.gpus.front());
    if (!items.empty()) simple = items.front().base;
    const Feasibility f = check_training_layout(arch, with_layout(base, simple), sys);
    if (items.empty())
      res.notes.push_back(fmt::format(
          "no layout divides the {} GPUs with a data-parallel size that divides the global batch of {}",
          space.gpus.front(), base.global_batch));
    for (const auto& r : f.reasons) res.notes.push_back(fmt::format("{}: {}", describe(simple), r));
  }
  return res;
}

// ------------------------------------------------------------------------------------------------------------------
// Comparison
// ------------------------------------------------------------------------------------------------------------------

LayoutComparison compare_layouts(const Layout& la, const TrainingEstimate& a, const Layout& lb,
                                 const TrainingEstimate& b) {
  LayoutComparison c;
  auto change = [&](const char* name, auto x, auto y) {
    if (x != y) c.changes.push_back(fmt::format("{} {} → {}", name, x, y));
  };
  change("GPUs", la.gpus, lb.gpus);
  change("TP", la.tp, lb.tp);
  change("PP", la.pp, lb.pp);
  change("virtual stages", la.virtual_stages, lb.virtual_stages);
  change("DP", la.dp, lb.dp);
  change("CP", la.cp, lb.cp);
  change("EP", la.ep, lb.ep);
  if ((la.etp > 0 && la.etp != la.tp) || (lb.etp > 0 && lb.etp != lb.tp))
    change("expert TP", la.etp > 0 ? la.etp : la.tp, lb.etp > 0 ? lb.etp : lb.tp);
  if (la.sequence_parallel != lb.sequence_parallel)
    c.changes.push_back(
        fmt::format("SP {} → {}", la.sequence_parallel ? "on" : "off", lb.sequence_parallel ? "on" : "off"));
  change("micro-batch", la.micro_batch, lb.micro_batch);
  if (la.recompute != lb.recompute)
    c.changes.push_back(fmt::format("recompute {} → {}", recompute_name(la.recompute), recompute_name(lb.recompute)));
  change("ZeRO", static_cast<int>(la.zero), static_cast<int>(lb.zero));
  if (la.offload != lb.offload)
    c.changes.push_back(fmt::format("CPU offload {} → {}", la.offload == wl::Offload::optimizer ? "on" : "off",
                                    lb.offload == wl::Offload::optimizer ? "on" : "off"));

  const StepBreakdown& x = a.step;
  const StepBreakdown& y = b.step;
  c.terms = {{"GEMM", x.gemm, y.gemm},
             {"attention", x.attention, y.attention},
             {"elementwise", x.elementwise, y.elementwise},
             {"embedding + LM head + loss", x.embedding_loss, y.embedding_loss}};
  for (std::size_t i = 0; i < a.comm.size() && i < b.comm.size(); ++i)
    c.terms.push_back({a.comm[i].kind + " comm exposed", a.comm[i].exposed, b.comm[i].exposed});
  c.terms.push_back({"pipeline bubble", x.bubble, y.bubble});
  c.terms.push_back({"optimizer", x.optimizer, y.optimizer});
  c.terms.push_back({"offload transfers", x.offload, y.offload});
  std::erase_if(c.terms, [](const TermDelta& d) { return d.first == d.second; });
  std::stable_sort(c.terms.begin(), c.terms.end(), [](const TermDelta& p, const TermDelta& q) {
    return std::abs((p.second - p.first).raw()) > std::abs((q.second - q.first).raw());
  });
  c.step_first = a.step_time;
  c.step_second = b.step_time;
  c.headroom_first = a.memory.capacity - a.memory.total;
  c.headroom_second = b.memory.capacity - b.memory.total;
  return c;
}

}  // namespace gpuplan::model
