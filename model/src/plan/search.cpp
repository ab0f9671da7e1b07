// The parallel-layout search (search.hpp): the enumeration of the layouts the search space allows, their evaluation
// on worker threads (FastTrainingEvaluator, search_evaluator.cpp) and their ranking by the chosen objective.
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

/// One layer split of the search (Layout's split fields).
struct SplitChoice {
  int first = 0, last = 0;
  bool embedding = false, loss = false;
};

/// The splits of one (PP, virtual-stage code) pair: code 0 is DualPipe (one chunk per stage).
using SplitTable = std::map<std::pair<long long, int>, std::vector<SplitChoice>>;

struct Dims {
  /// (virtual-stage code, split) pairs: code 0 is DualPipe (virtual stages 1), else the virtual stages.
  std::vector<std::pair<int, SplitChoice>> stages;
  std::vector<bool> sp;
  std::vector<std::int64_t> micro;
  std::vector<wl::Recompute> recompute;
  /// (ZeRO stage, offload) pairs: CPU offload only with ZeRO ≥ 1.
  std::vector<std::pair<wl::ZeroStage, wl::Offload>> zero;
  [[nodiscard]] std::uint64_t count() const {
    return std::uint64_t(stages.size()) * sp.size() * micro.size() * recompute.size() * zero.size();
  }
};

/// The base plan's split as a choice (its pipeline layout string, if any, stays in the plan: apply_layout keeps it).
SplitChoice base_split(const wl::TrainingPlan& base) {
  const wl::PipelineSplit& sp = base.split;
  return {int(sp.first_stage_layers), int(sp.last_stage_layers), sp.embedding_as_layer, sp.loss_as_layer};
}

/// The layer splits the search tries at PP p and virtual-stage code vc (0: DualPipe), valid ones only, each
/// assignment of layers to chunks once (the first way of writing it kept: even, then the embedding/loss accounting,
/// then first/last stage layers). Megatron-LM's three ways to set a split (wl::PipelineSplit):
///  - the even split (nothing set);
///  - account_for_embedding/loss_in_pipeline_split: the embedding, the loss or both counted as a layer;
///  - decoder_first/last_pipeline_num_layers: the first and/or last stage carry df, dl ∈ [0, max_stage_deficit] layers
///    fewer than the m of each middle stage, m = (L + df + dl) / p (the middle stages divide the rest evenly).
/// Pruned: a split whose heaviest stage holds more layers than the even split's, ⌈L/p⌉ (the middle stages would all
/// run slower than any stage of the even split; the end stages' extra modules weigh about a layer or two); under
/// DualPipe, a split that gives every device the layers an earlier one gives (device 0 holds both end stages).
/// A base plan that sets a split, or a space with vary_split off, gives the base plan's split only (as before the
/// split was a dimension: at v > 1 only where its chunks split).
std::vector<SplitChoice> split_choices(const wl::TransformerArch& a, const wl::TrainingPlan& base,
                                       const SearchSpace& space, long long p, int vc) {
  const int v = std::max(1, vc);
  wl::TrainingPlan probe = base;
  probe.par.pp = int(p);
  probe.par.virtual_stages = v;
  probe.schedule = vc == 0 ? wl::PipelineSchedule::dualpipe
                   : v > 1 ? wl::PipelineSchedule::interleaved
                           : wl::PipelineSchedule::one_f_one_b;
  std::vector<SplitChoice> out;
  const std::int64_t L = a.layers;
  if (base.split.any() || !space.vary_split || p < 2) {
    const bool ok = v == 1 || (base.split.any() ? detail::chunk_split_ok(a, probe, nullptr) : L % (v * p) == 0);
    if (ok) out.push_back(base_split(base));
    return out;
  }
  std::vector<std::vector<std::int64_t>> seen;
  auto consider = [&](const SplitChoice& c) {
    probe.split.first_stage_layers = c.first;
    probe.split.last_stage_layers = c.last;
    probe.split.embedding_as_layer = c.embedding;
    probe.split.loss_as_layer = c.loss;
    const std::vector<std::int64_t> chunks = detail::chunk_layers(a, probe, nullptr);
    if (chunks.empty()) return;
    // No stage above the even split's heaviest, ⌈L/p⌉ layers: a split only moves layers off the end stages (which
    // also hold the embedding, the head, the loss and MTP) onto stages that hold fewer.
    std::vector<std::int64_t> stage(std::size_t(p), 0);
    for (std::size_t j = 0; j < chunks.size(); ++j) stage[j % std::size_t(p)] += chunks[j];
    const bool even = c.first == 0 && c.last == 0 && !c.embedding && !c.loss;
    if (!even && *std::max_element(stage.begin(), stage.end()) > (L + p - 1) / p) return;
    // Under DualPipe device i runs stages i and p − 1 − i (the first and last on device 0): splits that give every
    // device the same layers (first 2 / last 3 and last 1 at PP 16 of 61 layers) differ only in where the few dense
    // layers sit, and one of them is kept. Otherwise each assignment of layers to chunks once.
    std::vector<std::int64_t> key = chunks;
    if (vc == 0) {
      key.assign(std::size_t(p / 2), 0);
      for (long long i = 0; i < p / 2; ++i) key[std::size_t(i)] = stage[std::size_t(i)] + stage[std::size_t(p - 1 - i)];
    }
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) return;
    seen.push_back(std::move(key));
    out.push_back(c);
  };
  consider({});
  consider({0, 0, true, false});
  consider({0, 0, false, true});
  consider({0, 0, true, true});
  const int dmax = std::max(0, space.max_stage_deficit);
  for (int df = 0; df <= dmax; ++df)
    for (int dl = 0; dl <= dmax; ++dl) {
      if ((df == 0 && dl == 0) || (L + df + dl) % p != 0) continue;
      const std::int64_t m = (L + df + dl) / p;
      if (m - df < 1 || m - dl < 1) continue;
      consider({df > 0 ? int(m - df) : 0, dl > 0 ? int(m - dl) : 0, false, false});
    }
  return out;
}

struct Enumerator {
  const wl::TransformerArch& a;
  const wl::TrainingPlan& base;
  const SearchSpace& space;
  std::vector<wl::Offload> offload;  ///< the offload values to enumerate
  SplitTable splits = {};            ///< split_choices of every (PP, virtual-stage code) the space reaches (prepare)

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

  /// The virtual-stage codes at PP p, in enumeration order: 1, the interleaved counts, 0 for DualPipe.
  [[nodiscard]] std::vector<int> stage_codes(long long p) const {
    std::vector<int> codes{1};
    if (p > 1)
      for (std::int64_t v = 2; v * p <= a.layers + 2; ++v) codes.push_back(int(v));
    std::erase_if(codes, [&](int v) { return !allowed(space.virtual_stages, v); });
    // DualPipe rides on the virtual-stage dimension of the enumeration as 0 (virtual stages 1, Layout::dualpipe).
    const bool dual_ok = p >= 2 && p % 2 == 0 && allowed(space.virtual_stages, 1);
    const bool dual_default = a.moe.has_value();
    if (space.dualpipe.empty() ? dual_ok && dual_default : dual_ok && allowed(space.dualpipe, true))
      codes.push_back(0);
    if (!space.dualpipe.empty() && !allowed(space.dualpipe, false))
      std::erase_if(codes, [](int v) { return v != 0; });
    return codes;
  }

  /// Fills `splits` for every PP the space reaches (before items(); dims() only looks them up).
  void prepare() {
    for (long long n : space.gpus) {
      if (n < 1) continue;
      for (long long p : divisors(n)) {
        if (!pp_ok(p)) continue;
        for (int vc : stage_codes(p))
          if (splits.find({p, vc}) == splits.end()) splits.emplace(std::pair{p, vc}, split_choices(a, base, space, p, vc));
      }
    }
  }

  [[nodiscard]] Dims dims(const Layout& l) const {
    Dims d;
    for (int vc : stage_codes(l.pp)) {
      const auto it = splits.find({l.pp, vc});
      if (it == splits.end()) continue;
      for (const SplitChoice& c : it->second) d.stages.emplace_back(vc, c);
    }
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
              const SplitChoice bs = base_split(base);
              it.base.first_stage_layers = bs.first;
              it.base.last_stage_layers = bs.last;
              it.base.embedding_as_layer = bs.embedding;
              it.base.loss_as_layer = bs.loss;
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
  for (const auto& [v, split] : dm.stages) {
    l.virtual_stages = std::max(1, v);
    l.dualpipe = v == 0;
    l.first_stage_layers = split.first;
    l.last_stage_layers = split.last;
    l.embedding_as_layer = split.embedding;
    l.loss_as_layer = split.loss;
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

/// What the search did with the layer split, said once.
std::string split_note(const wl::TrainingPlan& base, const SearchSpace& space, const SplitTable& splits) {
  if (base.split.any()) return "layer split over the pipeline stages: the plan's, at every PP (it is not searched)";
  if (!space.vary_split) return "layer split over the pipeline stages: even (not searched)";
  std::size_t uneven = 0;
  for (const auto& e : splits)
    for (const SplitChoice& c : e.second) uneven += c.first > 0 || c.last > 0 || c.embedding || c.loss ? 1 : 0;
  return fmt::format(
      "layer split over the pipeline stages, searched at each PP and virtual-stage count: even, the embedding "
      "and/or the loss counted as a layer, and the first and/or last stage up to {} layers lighter than the middle "
      "stages (Megatron-LM's --decoder-first/last-pipeline-num-layers), each assignment once: {} uneven splits",
      std::max(0, space.max_stage_deficit), uneven);
}

double training_time(const SearchPoint& p) {
  return p.score.has_time_to_train ? p.score.time_to_train.raw() : p.score.step_time.raw();
}

}  // namespace

std::vector<Layout> enumerate_layouts(const wl::TransformerArch& arch, const wl::TrainingPlan& base,
                                      const SearchSpace& space, const TrainingSystem* sys) {
  Enumerator en{arch, base, space, offload_values(base, space, sys)};
  en.prepare();
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

  Enumerator en{arch, base, space, offload_values(base, space, &sys)};
  en.prepare();
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
  res.notes.push_back(split_note(base, space, en.splits));
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

}  // namespace gpuplan::model
