// FastTrainingEvaluator (search.hpp): estimate_training's step composition (compose_step) over cached terms, one
// evaluator per padded vocabulary, so that the search prices millions of layouts with the same numbers, bit for bit.
#include "gpuplan/model/search.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "memory_core.hpp"
#include "runtime_context.hpp"
#include "quant_recipe.hpp"
#include "parallel_dims.hpp"
#include "training_core.hpp"

namespace gpuplan::model {

// ------------------------------------------------------------------------------------------------------------------
// FastTrainingEvaluator
// ------------------------------------------------------------------------------------------------------------------

// A named namespace, not an anonymous one: FastTrainingEvaluator::Impl (declared in the public header) holds these
// types, and a class with external linkage may not hold a type of an anonymous namespace once this file shares a unity
// translation unit with others (GCC -Wsubobject-linkage).
namespace fast_eval {

/// Open-addressing map from a few integers to a cached term. Lookups never allocate; an insert may grow the table
/// (once per key, not per layout). The values live in a deque beside the table (a ComputeTerms is ~9 KB: a table of
/// them, zeroed and moved at each growth, cost more than the lookups), so references to them stay valid for the
/// cache's life.
template <class V, std::size_t N>
class TermCache {
 public:
  using Key = std::array<std::int64_t, N>;

  TermCache() = default;
  TermCache(const TermCache&) = delete;  // last_value_ points into this cache's values
  TermCache& operator=(const TermCache&) = delete;

  template <class Make>
  const V& get(const Key& key, Make&& make) {
    // The layouts come with their outer dimensions fixed over runs of inner ones (for_each_layout: ZeRO stage and
    // offload innermost), so most lookups ask for the key just asked for: compared before hashing.
    if (last_value_ != nullptr && same(last_key_, key)) return *last_value_;
    if (slots_.empty()) rehash(64);
    std::size_t i = hash(key) & mask_;
    while (slots_[i].used) {
      if (same(slots_[i].key, key)) return remember(key, values_[slots_[i].value]);
      i = (i + 1) & mask_;
    }
    values_.push_back(make());
    if (2 * (values_.size()) > slots_.size()) {
      rehash(slots_.size() * 2);
      i = hash(key) & mask_;
      while (slots_[i].used) i = (i + 1) & mask_;
    }
    slots_[i] = Slot{key, values_.size() - 1, true};
    return remember(key, values_.back());
  }
  [[nodiscard]] std::size_t size() const { return values_.size(); }

 private:
  struct Slot {
    Key key{};
    std::size_t value = 0;  ///< index into values_
    bool used = false;
  };
  const V& remember(const Key& key, const V& v) {
    last_key_ = key;
    last_value_ = &v;
    return v;
  }
  // Element by element: std::array's == calls memcmp, a call per probe for a few integers.
  static bool same(const Key& x, const Key& y) {
    bool eq = true;
    for (std::size_t j = 0; j < N; ++j) eq &= x[j] == y[j];
    return eq;
  }
  // One multiply per element and a final mix of the high bits into the low ones the mask keeps: the keys are a few
  // small integers, looked up ~10 times per layout (a full mix per element cost ~300 instructions per layout).
  static std::size_t hash(const Key& k) {
    std::uint64_t h = 0x9E3779B97F4A7C15ull;
    for (std::int64_t x : k) h = (h ^ static_cast<std::uint64_t>(x)) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 29;
    return static_cast<std::size_t>(h);
  }
  void rehash(std::size_t n) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(n, Slot{});
    mask_ = n - 1;
    for (const Slot& s : old)
      if (s.used) {
        std::size_t i = hash(s.key) & mask_;
        while (slots_[i].used) i = (i + 1) & mask_;
        slots_[i] = s;
      }
  }
  std::vector<Slot> slots_;
  std::deque<V> values_;
  std::size_t mask_ = 0;
  Key last_key_{};
  const V* last_value_ = nullptr;  ///< the value of the last lookup (last_key_'s)
};

using detail::ComputeTerms;
using detail::DpTimes;
using detail::LayerSums;
using detail::StageShape;
using units::Seconds;

using StageShapes = std::vector<StageShape>;

/// The cached evaluator of one model as built (one padded vocabulary: FastTrainingEvaluator::Impl keeps one per
/// padded size, since the padding multiple grows with TP).
struct VocabEvaluator {
  const wl::TransformerArch& a;
  wl::TrainingPlan base;
  const TrainingSystem& sys;
  wl::TrainingPlan plan_;  ///< `base` with the layout being evaluated (apply_layout sets every layout field)
  bool have_gpu = false;
  detail::TrainingConsts k;
  RuntimeOverheads overheads;
  detail::LayerKinds kinds;
  units::Bytes capacity{};
  bool host_link = false;  ///< detail::host_link_bandwidth found (the rules of CPU offload)

  // "ep" in the keys below: EP and expert TP together (ek in evaluate).
  TermCache<ComputeTerms, 5> compute;  // tp, cp, micro, sp, ep
  TermCache<Seconds, 3> amp;           // tp, pp, ep
  TermCache<Seconds, 8> dp_copy;       // tp, pp, dp, cp, ep, optimizer shard, micro-batches, zero
  // Each parallel dimension's one-collective term, keyed by its record's term_key (parallel_dims.hpp).
  std::array<TermCache<Seconds, 5>, detail::kDimCount> one;
  TermCache<Seconds, 4> etp_pair;      // tp, cp, micro, etp (parallel folding)
  TermCache<units::Bytes, 4> ep_bytes;  // tp, cp, ep, micro
  TermCache<Seconds, 4> pp_gather;     // tp, cp, micro, sp
  TermCache<Seconds, 3> tp_gather;     // tp, cp, micro (sequence parallelism's re-gathers, LoRA's adapters)
  TermCache<detail::TpQuantTimes, 3> tp_quant;  // tp, cp, micro (quantised TP all-gathers: tp_quant_times)
  TermCache<DpTimes, 8> dp;            // tp, pp, cp, dp, ep, ZeRO stage, model chunks, split
  TermCache<detail::DpBuckets, 8> dp_buckets;  // dp_buckets_key + split: shared by the DP terms of many (dp, cp)
  TermCache<Seconds, 5> opt;           // tp, pp, ep, shard, ZeRO-3
  TermCache<detail::OffloadTimes, 5> offload;  // tp, pp, ep, shard, GPUs per node in use
  TermCache<CommGroup, 2> groups;      // size, stride
  TermCache<CommGroup, 4> dualpipe_groups;  // size, stride, tp·cp·dp, pp: DualPipe's gradient groups (their tiers)
  TermCache<LayerSums, 2> sums;        // tp, sp
  TermCache<StageShapes, 4> shapes;    // pp, v, recompute (full recompute's per-chunk counts: StageShape::recomputed), split
  detail::PricedStages stages_memo;     // compose_step's pricing of the stages of memo_layout (zero, offload cleared)
  std::optional<Layout> memo_layout;
  bool split_applied = false;  ///< plan_'s split was set by a layout (the base plan's is put back before one without)

  VocabEvaluator(const wl::TransformerArch& arch, const wl::TrainingPlan& b, const TrainingSystem& s)
      : a(arch), base(b), sys(s), plan_(b), have_gpu(s.gpu != nullptr) {
    if (!have_gpu) return;
    k = detail::training_consts(a, base, sys);
    overheads = training_overheads(*sys.gpu);
    kinds = detail::layer_kinds(a, k.params);
    capacity = sys.gpu->memory_capacity();
    host_link = detail::host_link_bandwidth(sys).has_value();
  }

  auto with_group(int size, int stride, const auto& term) {
    const CommGroup& g = groups.get({size, stride}, [&] { return training_comm_group(size, stride, sys); });
    return term(g);
  }

  // The DP terms: the gradient reduction and parameter gathers (keyed without ZeRO 1 vs 2), their buckets (keyed by
  // dp_buckets_key) and, with eager kernels, the PyTorch wrappers' copies.
  void dp_terms(const wl::TrainingPlan& plan, std::int64_t ek, int pp_key, std::int64_t split_key, detail::StepTerms& t) {
    const auto& par = plan.par;
    const int n_dp = detail::dense_grad_group_size(plan);
    if (n_dp <= 1) return;
    const int etp = par.expert_tp();
    const auto zero = static_cast<std::int64_t>(plan.zero);
    // ZeRO 1 and 2 move the same bytes in the same buckets (dp_collective_times reads whether the stage is none or
    // 3 only): one entry.
    const auto dp_zero = static_cast<std::int64_t>(plan.zero == wl::ZeroStage::gradients ? wl::ZeroStage::optimizer
                                                                                          : plan.zero);
    t.dp = dp.get({par.tp, pp_key, par.cp, par.dp, ek, dp_zero, plan.model_chunks(), split_key}, [&] {
      const int n_edp = detail::expert_grad_group_size(plan);
      const detail::DpBucketsKey bk = detail::dp_buckets_key(plan);
      const detail::DpBuckets& b = dp_buckets.get({bk[0], bk[1], bk[2], bk[3], bk[4], bk[5], bk[6], split_key},
                                                  [&] { return detail::dp_buckets(a, plan); });
      // References into the caches stay valid across inserts (their values live in a deque). DualPipe's mirror
      // copies change the groups' tiers (grad_comm_group_tiers, which reads tp·cp·dp and PP); dp_collective_times
      // puts the plan's CTA cap on either.
      if (plan.dualpipe()) {
        const std::int64_t grid = std::int64_t(par.tp) * par.cp * par.dp;
        const CommGroup& g = dualpipe_groups.get(
            {n_dp, par.tp, grid, par.pp}, [&] { return detail::grad_comm_group_tiers(n_dp, par.tp, plan, sys); });
        const CommGroup& ge = dualpipe_groups.get({n_edp, etp * par.ep, grid, par.pp}, [&] {
          return detail::grad_comm_group_tiers(n_edp, etp * par.ep, plan, sys);
        });
        return detail::dp_collective_times(a, k.params, plan, g, ge, b);
      }
      const CommGroup& g = groups.get({n_dp, par.tp}, [&] { return training_comm_group(n_dp, par.tp, sys); });
      const CommGroup& ge =
          groups.get({n_edp, etp * par.ep}, [&] { return training_comm_group(n_edp, etp * par.ep, sys); });
      return detail::dp_collective_times(a, k.params, plan, g, ge, b);
    });
    if (plan.kernels == wl::KernelStyle::eager)
      t.dp_copy = dp_copy.get({par.tp, pp_key, par.dp, par.cp, ek,
                               static_cast<std::int64_t>(detail::optimizer_shard(plan)), plan.micro_batches(), zero},
                              [&] { return detail::dp_copy_time(a, k.params, plan, k.d); });
  }

  LayoutScore evaluate(const Layout& l) {
    LayoutScore r;
    if (!have_gpu) return r;
    if (split_applied && !l.split_set()) {
      plan_.split = base.split;
      split_applied = false;
    }
    apply_layout(plan_, l);
    split_applied = split_applied || l.split_set();
    const wl::TrainingPlan& plan = plan_;
    // The layer split in the keys of the terms that read the stages' layers (stage shapes, DP buckets): the layout's
    // split fields (a base plan's layout string is the same for every layout).
    const std::int64_t split_key = std::int64_t(l.first_stage_layers) | (std::int64_t(l.last_stage_layers) << 20) |
                                   (std::int64_t(l.embedding_as_layer) << 40) | (std::int64_t(l.loss_as_layer) << 41);
    if (!detail::layout_rules(a, plan, sys, nullptr, host_link)) return r;
    const auto& par = plan.par;
    const std::int64_t sp = par.sequence_parallel ? 1 : 0, mb = plan.micro_batch;
    // The expert grid in the keys of the terms that depend on it: EP and expert TP (parallel folding) in one key.
    const std::int64_t ek = std::int64_t(par.ep) * 4096 + par.expert_tp();
    // PP in the keys of the terms that depend on the parameters a GPU holds: negative under DualPipe (two stages per
    // device, params_per_gpu).
    const int pp_key = plan.dualpipe() ? -par.pp : par.pp;
    const Device& d = k.d;

    detail::StepTerms t;
    // The stages' pricing is kept from the last layout priced when this one differs from it only in its ZeRO stage
    // or offload (StepTerms::stages_memo; for_each_layout varies those innermost): then compose_step reads none of
    // the stages' terms, and they are not looked up.
    Layout staged = l;
    staged.zero = wl::ZeroStage::none;
    staged.offload = wl::Offload::none;
    t.stages_memo = &stages_memo;
    // Deferred LM-head wgrads (--defer-embedding-wgrad-compute) need the compute terms in the bubble (N·W beside the
    // drain), which a memoised pricing does not look up: such a plan prices its stages every time.
    t.stages_memo_valid = memo_layout.has_value() && *memo_layout == staged && !plan.defer_embedding_wgrad;
    memo_layout = staged;
    // The expert grid's strides (etp = tp unless the layout folds).
    const int etp = par.expert_tp();
    if (!t.stages_memo_valid) {
      // A reference into `compute`: valid until its next insert (none before compose_step below).
      t.compute =
          &compute.get({par.tp, par.cp, mb, sp, ek}, [&] { return detail::compute_terms(a, plan, d, nullptr); });
      if (plan.mixed_precision == wl::MixedPrecision::amp)
        t.amp_casts = amp.get({par.tp, pp_key, ek}, [&] { return detail::amp_cast_time(a, k.params, plan, d); });
      for (std::size_t i = 0; i < detail::kDimCount; ++i) {
        const detail::ParallelDim& dim = detail::parallel_dims()[i];
        if (dim.one == nullptr || !dim.priced(a, plan)) continue;
        t.*dim.one = one[i].get(dim.term_key(plan), [&] {
          return with_group(dim.comm_size(plan), dim.stride(plan),
                            [&](const CommGroup& g) { return dim.one_time(a, plan, g); });
        });
      }
      if (detail::expert_tp_folded(a, plan) && etp > 1)
        t.etp_one = etp_pair.get({par.tp, par.cp, mb, etp}, [&] {
          return with_group(etp, 1, [&](const CommGroup& g) { return detail::etp_collective_time(a, plan, g); });
        });
      if (par.ep > 1 && a.moe)
        t.ep_bytes_one = ep_bytes.get({par.tp, par.cp, ek, mb}, [&] {
          return with_group(par.ep, etp, [&](const CommGroup& g) {
            const detail::MoeDispatch md = detail::moe_dispatch(a, plan, g);
            return (md.dispatch_bytes + md.combine_bytes) * 0.5;
          });
        });
      if (par.pp > 1 && plan.pp_scatter_gather && par.tp > 1 && !par.sequence_parallel)
        t.pp_gather_one = pp_gather.get({par.tp, par.cp, mb, sp}, [&] {
          return with_group(par.tp, 1, [&](const CommGroup& g) { return detail::pp_gather_time(a, plan, g); });
        });
      if (par.tp > 1 && (plan.lora.on() || par.sequence_parallel))
        t.tp_gather_one = tp_gather.get({par.tp, par.cp, mb}, [&] {
          return with_group(par.tp, 1, [&](const CommGroup& g) { return detail::tp_gather_time(a, plan, g); });
        });
      if (par.tp > 1 && par.sequence_parallel)
        t.tp_quant = tp_quant.get({par.tp, par.cp, mb}, [&] {
          return with_group(par.tp, 1, [&](const CommGroup& g) { return detail::tp_quant_times(a, plan, g); });
        });
    }
    dp_terms(plan, ek, pp_key, split_key, t);
    const double shard = detail::optimizer_shard(plan);
    // ZeRO-3 in the key: the FP8 weights' quantisation once per step is not priced under it (weight_quantisation_time).
    const std::int64_t zero3 = plan.zero == wl::ZeroStage::parameters ? 1 : 0;
    t.optimizer = opt.get({par.tp, pp_key, ek, static_cast<std::int64_t>(shard), zero3},
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
    // A reference into `shapes`: valid until its next insert (none comes before memory_core below, which reads it too).
    const auto rc_key = static_cast<std::int64_t>(plan.recompute);
    const StageShapes& sh =
        shapes.get({p, v_key, rc_key, split_key}, [&] { return detail::stage_shapes(a, kinds, k.params, plan); });
    t.stages = &sh;
    detail::StepCore core;
    detail::compose_step(a, plan, k, t, core);
    r.micro_batches = core.m;
    r.step = core.step;
    for (const detail::ParallelDim& dim : detail::parallel_dims()) r.comm.*dim.score = (core.*dim.step).exposed;
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
    // A reference (a copy of the per-kind sums cost ~190 instructions per layout): no insert before memory_core.
    const LayerSums& ls = sums.get({par.tp, c.sp ? 1 : 0}, [&] { return detail::layer_sums(c); });
    detail::MemoryCore mem;
    detail::memory_core(a, k.params, plan, overheads, c, kinds, ls, sh, detail::fp8_any_layout(*sys.gpu), mem);
    r.memory = units::bytes(mem.heaviest().total);
    r.capacity = capacity;
    r.fits = r.memory <= r.capacity;
    if (!detail::offload_fits_host(mem.host(), plan, sys))
      r.fits = false;
    return r;
  }

  [[nodiscard]] std::size_t cached() const {
    std::size_t n = compute.size() + amp.size() + dp_copy.size() + pp_gather.size() + tp_gather.size() +
                    tp_quant.size() + dp.size() + dp_buckets.size() + dualpipe_groups.size() + etp_pair.size() +
                    opt.size() + offload.size() + groups.size() + sums.size() + shapes.size();
    for (const auto& c : one) n += c.size();
    return n;
  }
};
}  // namespace fast_eval

struct FastTrainingEvaluator::Impl {
  using VocabEvaluator = fast_eval::VocabEvaluator;
  const wl::TransformerArch& arch;
  wl::TrainingPlan base;
  const TrainingSystem& sys;
  /// Padded vocabulary → the model built with it and its evaluator (stable addresses: the evaluator refers to it).
  std::map<std::int64_t, std::pair<std::unique_ptr<wl::TransformerArch>, std::unique_ptr<VocabEvaluator>>> by_vocab;

  /// The base plan with the layout's TP, the one layout field the padded vocabulary depends on
  /// (TrainingPlan::padded_vocab): a whole plan copied per layout only to pad the vocabulary cost more than a lookup.
  wl::TrainingPlan vocab_probe;
  /// The evaluator of the last layout's TP (layouts come TP by TP).
  int last_tp = 0;
  VocabEvaluator* last = nullptr;

  Impl(const wl::TransformerArch& a, const wl::TrainingPlan& b, const TrainingSystem& s)
      : arch(a), base(b), sys(s), vocab_probe(b) {}

  LayoutScore evaluate(const Layout& l) {
    if (last == nullptr || l.tp != last_tp) {
      vocab_probe.par.tp = l.tp;
      const std::int64_t v = vocab_probe.padded_vocab(arch.vocab);
      auto it = by_vocab.find(v);
      if (it == by_vocab.end()) {
        auto padded = std::make_unique<wl::TransformerArch>(arch);
        padded->vocab = v;
        auto ev = std::make_unique<VocabEvaluator>(*padded, base, sys);
        it = by_vocab.emplace(v, std::make_pair(std::move(padded), std::move(ev))).first;
      }
      last_tp = l.tp;
      last = it->second.second.get();
    }
    return last->evaluate(l);
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

}  // namespace gpuplan::model
