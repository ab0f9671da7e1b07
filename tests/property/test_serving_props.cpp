// Serving, KV-cache and collective properties over random valid scenarios (property.hpp says how to reproduce).
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/model/topology.hpp"
#include "property.hpp"

using namespace gpuplan;
using prop::Rng;

namespace {

/// TP sizes a serving engine accepts for the model (as the planner's rule: heads divisible; KV heads divisible or
/// replicated; the FFN width divisible).
bool tp_ok(const wl::TransformerArch& a, int tp) {
  if (a.heads % tp != 0) return false;
  if (!a.mla && a.kv_heads % tp != 0 && tp % a.kv_heads != 0) return false;
  return a.intermediate <= 0 || a.intermediate % tp == 0;
}

struct ServingCase {
  prop::GenArch arch;
  model::ServingSystem sys;
  model::ServingPerfPlan perf;
  std::string describe() const {
    return fmt::format("model: {}\nsystem: node {} GPU {}\nperf: TP {} PP {} EP {} weights {} kv {} compute {} kernels {} "
                       "attention {} graphs {} max_batched_tokens {} max_batch {}",
                       arch.what, sys.node ? sys.node->info.id : "-", sys.gpu->info.id, perf.tp, perf.pp, perf.ep,
                       model::to_string(perf.weights.dtype), model::to_string(perf.kv.dtype),
                       hw::to_string(perf.compute), static_cast<int>(perf.kernels), static_cast<int>(perf.attention),
                       perf.cuda_graphs, perf.max_batched_tokens, perf.max_batch);
  }
};

std::optional<ServingCase> random_serving(Rng& r, const prop::GenArch& a) {
  const auto& nodes = prop::db().nodes;
  for (int attempt = 0; attempt < 50; ++attempt) {
    ServingCase c{a, {}, {}};
    const auto& node = nodes[static_cast<std::size_t>(r.range(0, static_cast<std::int64_t>(nodes.size()) - 1))];
    c.sys = prop::system_of(prop::db(), node.info.id);
    auto& p = c.perf;
    p.tp = r.pow2(std::min(8, std::max(1, node.scale_up.domain_gpus)));
    if (!tp_ok(a.arch, p.tp)) continue;
    p.pp = r.chance(0.7) ? 1 : static_cast<int>(r.range(1, std::min<std::int64_t>(a.arch.layers, 8)));
    p.ep = a.arch.moe && r.chance(0.5) ? r.pow2(p.tp) : 1;
    const bool fp8 = c.sys.gpu->peak(hw::Precision::fp8).has_value();
    static const std::vector<model::StoreDtype> w{model::StoreDtype::bf16, model::StoreDtype::fp16, model::StoreDtype::fp8,
                                                  model::StoreDtype::int8, model::StoreDtype::int4};
    static const std::vector<model::StoreDtype> kv{model::StoreDtype::bf16, model::StoreDtype::fp8, model::StoreDtype::int8,
                                                   model::StoreDtype::int4};
    p.weights = model::default_weight_quant(r.pick(w));
    p.kv = model::default_kv_quant(r.pick(kv));
    if (!fp8 && p.weights.dtype == model::StoreDtype::fp8) p.weights = model::default_weight_quant(model::StoreDtype::bf16);
    if (!fp8 && p.kv.dtype == model::StoreDtype::fp8) p.kv = model::default_kv_quant(model::StoreDtype::bf16);
    if (fp8 && p.weights.dtype == model::StoreDtype::fp8 && r.chance(0.7)) p.compute = hw::Precision::fp8;
    p.kernels = r.chance(0.8) ? wl::KernelStyle::fused : wl::KernelStyle::eager;
    p.attention = r.chance(0.5) ? wl::AttentionKernel::fa2 : wl::AttentionKernel::fa3;
    p.cuda_graphs = r.chance(0.7);
    p.max_batched_tokens = r.pick(std::vector<std::int64_t>{0, 512, 2048, 8192});
    p.max_batch = r.pick(std::vector<std::int64_t>{16, 256, 1024});
    if (r.chance(0.2)) p.step_overhead = units::microseconds(r.uniform(0, 500));
    return c;
  }
  return std::nullopt;
}

/// The replica's pipeline sends cross nodes of a node type with no scale-out link in the data.
/// (The model prices the stage-to-stage sends on one neighbouring pair, TP ranks apart: +inf when that pair crosses
/// nodes; TP 4 × PP 3 on an 8-GPU node keeps its first pair inside the node and stays finite.)
bool spans_without_link(const ServingCase& c) {
  return c.sys.node != nullptr && !c.sys.node->scale_out && c.perf.pp > 1 &&
         2 * c.perf.tp > c.sys.node->scale_up.domain_gpus;
}

model::ForwardBatch random_batch(Rng& r, const wl::TransformerArch& a) {
  model::ForwardBatch b;
  const double max_ctx = static_cast<double>(a.max_position > 0 ? a.max_position : 131072);
  if (r.chance(0.8)) {
    b.decode_seqs = r.chance(0.3) ? r.uniform(0.1, 64) : static_cast<double>(r.range(1, 512));
    b.queries_per_seq = r.chance(0.8) ? 1 : r.range(2, 8);
    b.decode_context = static_cast<std::int64_t>(r.log_uniform(1, max_ctx));
  }
  if (b.decode_seqs == 0 || r.chance(0.4)) {
    b.prefill_seqs = r.chance(0.3) ? r.uniform(0.05, 4) : static_cast<double>(r.range(1, 8));
    b.prefill_tokens = static_cast<std::int64_t>(r.log_uniform(1, std::min(max_ctx, 65536.0)));
    b.prefill_past = r.chance(0.3) ? static_cast<std::int64_t>(r.log_uniform(1, max_ctx)) : 0;
    b.prefill_emits_token = r.chance(0.7);
  }
  return b;
}

}  // namespace

TEST_CASE("property: serving forward costs, decode/prefill times and steady states are finite and >= 0") {
  int n = 0;
  for (const int i : prop::case_indices(1000)) {
    Rng r("serving-finite", i);
    const auto a = prop::random_arch(r);
    const auto c = random_serving(r, a);
    if (!c) continue;
    const auto b = random_batch(r, a.arch);
    INFO(prop::repro(i) << "\n" << c->describe() << "\nbatch: decode " << b.decode_seqs << " × " << b.queries_per_seq
                        << " at " << b.decode_context << ", prefill " << b.prefill_seqs << " × " << b.prefill_tokens
                        << " past " << b.prefill_past);
    const auto f = model::forward_cost(a.arch, c->perf, b, c->sys, Explain::off);
    auto bad = prop::bad_values(f);
    if (spans_without_link(*c)) {
      // A replica over several nodes of a node type with no scale-out link in the data: the stage-to-stage sends are
      // "not possible on this hardware", which collective_cost reports as +inf; the pass is +inf, never NaN.
      CHECK(f.total.raw() == std::numeric_limits<double>::infinity());
      CHECK_FALSE(std::isnan(f.stage.raw()));
      ++n;
      continue;
    }
    CHECK_MESSAGE(bad.empty(), "not finite or negative: " << prop::join(bad));
    CHECK(f.total.raw() >= f.stage.raw() * (1 - 1e-12));
    const std::int64_t batch = r.range(1, 256), isl = r.range(1, 8192), osl = r.range(1, 2048);
    const auto ss = model::steady_state(a.arch, c->perf, batch, isl, osl, c->sys, Explain::off);
    bad = prop::bad_values(ss);
    CHECK_MESSAGE(bad.empty(), "steady state (" << batch << ", " << isl << ", " << osl << "): " << prop::join(bad));
    CHECK(prop::good(model::decode_step_time(a.arch, c->perf, batch, isl + osl, c->sys).raw()));
    CHECK(prop::good(model::prefill_time(a.arch, c->perf, r.range(1, 8), isl, c->sys).raw()));
    ++n;
  }
  MESSAGE("serving cases: " << n);
  CHECK(n > 500);
}

TEST_CASE("property: KV-cache sizes are finite, >= 0, grow with the context and do not grow with TP") {
  int n = 0;
  for (const int i : prop::case_indices(1500)) {
    Rng r("kv-sizes", i);
    const auto a = prop::random_arch(r);
    INFO(prop::repro(i) << "\nmodel: " << a.what);
    const std::int64_t t1 = static_cast<std::int64_t>(r.log_uniform(1, 1 << 20));
    const std::int64_t t2 = t1 + r.range(0, 100000);
    const double eb = r.pick(std::vector<double>{4, 2, 1, 0.5});
    const auto k1 = model::kv_cache_size(a.arch, t1, eb, Explain::off);
    const auto k2 = model::kv_cache_size(a.arch, t2, eb, Explain::off);
    INFO("tokens " << t1 << " / " << t2 << ", " << eb << " B per element");
    CHECK(prop::good(k1.per_token_full.raw()));
    CHECK(prop::good(k1.per_sequence.raw()));
    CHECK(k1.elements_per_token_layer >= 0);
    // Tokens cost at most their full per-token KV; a hybrid's Mamba-2 layers add one state per sequence on top.
    CHECK(prop::good(k1.state_per_sequence.raw()));
    CHECK(k1.state_per_sequence.raw() == k2.state_per_sequence.raw());
    CHECK(k1.per_sequence.raw() <=
          (k1.per_token_full.raw() * static_cast<double>(t1) + k1.state_per_sequence.raw()) * (1 + 1e-12));
    CHECK(k2.per_sequence.raw() >= k1.per_sequence.raw());
    static const std::vector<model::StoreDtype> kv{model::StoreDtype::fp32, model::StoreDtype::bf16, model::StoreDtype::fp8,
                                                   model::StoreDtype::int8, model::StoreDtype::int4, model::StoreDtype::fp4};
    const auto q = model::default_kv_quant(r.pick(kv));
    double prev = -1;
    for (int tp = 1; tp <= 64; tp *= 2) {
      const auto tb = model::kv_token_bytes(a.arch, q, tp, Explain::off);
      INFO("TP " << tp << " kv " << model::to_string(q.dtype));
      CHECK(prop::good(tb.per_layer.raw()));
      CHECK(prop::good(tb.per_token_model.raw()));
      if (prev >= 0) CHECK(tb.per_layer.raw() <= prev * (1 + 1e-12));
      prev = tb.per_layer.raw();
      const int pp = static_cast<int>(r.range(1, std::min<std::int64_t>(a.arch.layers, 8)));
      const auto stages = model::pipeline_stages(a.arch, pp);
      std::int64_t layers = 0;
      for (const auto& st : stages) {
        layers += st.count;
        const auto sk = model::sequence_kv(a.arch, st, tb, t1, r.pick(std::vector<std::int64_t>{1, 16, 64, 128}),
                                           r.chance(0.3) ? r.range(0, t1) : 0);
        CHECK(prop::good(sk.per_sequence.raw()));
        CHECK(prop::good(sk.unique.raw()));
        CHECK(prop::good(sk.shared_prefix.raw()));
        CHECK(prop::good(sk.block_waste.raw()));
        CHECK(sk.per_sequence.raw() >= sk.exact.raw() * (1 - 1e-12));
      }
      CHECK(layers == a.arch.layers);
    }
    ++n;
  }
  MESSAGE("KV cases: " << n);
}

namespace {
/// Does a replica of (tp, pp) hold `concurrency` sequences of `context` tokens with the planner's memory knobs?
model::ServingMemory replica_memory(const wl::TransformerArch& a, const model::ServingMemoryPlan& knobs,
                                    const hw::GpuSpec& gpu, int tp, int pp, std::int64_t context,
                                    std::int64_t concurrency) {
  model::ServingMemoryPlan mp = knobs;
  mp.tp = tp;
  mp.pp = pp;
  mp.context = context;
  mp.concurrency = concurrency;
  mp.gpus.reset();
  return model::serving_memory(a, model::parameter_counts(a, Explain::off), gpu, mp, Explain::off);
}
bool holds(const model::ServingMemory& m) {
  for (const auto& s : m.stages)
    if (s.free.raw() < 0) return false;
  return !m.stages.empty();
}
std::string stages_line(const model::ServingMemory& m) {
  std::string s;
  for (const auto& st : m.stages)
    s += fmt::format(" [stage {}: pool {:.6g} used {:.6g} free {:.6g} max {}]", st.layers.stage, st.kv_pool.raw(),
                     st.kv_used.raw(), st.free.raw(), st.max_concurrency);
  return s;
}
}  // namespace

TEST_CASE("property: serving memory is finite - the GPU count it gives holds the sequences' KV cache") {
  int n = 0, counted = 0;
  for (const int i : prop::case_indices(600)) {
    Rng r("serving-memory", i);
    const auto a = prop::random_arch(r);
    const auto& gpus = prop::db().gpus;
    const auto& gpu = gpus[static_cast<std::size_t>(r.range(0, static_cast<std::int64_t>(gpus.size()) - 1))];
    model::ServingMemoryPlan mp;
    mp.tp = r.pow2(8);
    if (!tp_ok(a.arch, mp.tp)) mp.tp = 1;
    mp.pp = r.chance(0.7) ? 1 : static_cast<int>(r.range(1, std::min<std::int64_t>(a.arch.layers, 8)));
    const std::int64_t max_ctx = a.arch.max_position > 0 ? a.arch.max_position : 131072;
    mp.context = static_cast<std::int64_t>(r.log_uniform(1, static_cast<double>(max_ctx)));
    mp.concurrency = static_cast<std::int64_t>(r.log_uniform(1, 4096));
    mp.block_size = r.pick(std::vector<std::int64_t>{1, 16, 32, 128});
    mp.prefix_tokens = r.chance(0.2) ? r.range(0, mp.context) : 0;
    mp.kv = model::default_kv_quant(r.pick(std::vector<model::StoreDtype>{model::StoreDtype::bf16, model::StoreDtype::int8, model::StoreDtype::int4}));
    mp.weights = model::default_weight_quant(r.pick(std::vector<model::StoreDtype>{model::StoreDtype::bf16, model::StoreDtype::int8, model::StoreDtype::int4}));
    mp.engine = r.pick(std::vector<model::MemoryEngine>{model::MemoryEngine::vllm, model::MemoryEngine::sglang, model::MemoryEngine::plain});
    mp.memory_fraction = r.uniform(0.5, 0.98);
    mp.paging_overhead = r.chance(0.2) ? r.uniform(0, 0.5) : 0.0;
    if (r.chance(0.2)) mp.overheads = model::no_serving_overheads();
    mp.capacity = r.chance(0.5) ? model::CapacityBasis::device : model::CapacityBasis::label;
    mp.gpu_count = r.chance(0.8) ? model::GpuCountMethod::layout : model::GpuCountMethod::pooled;
    INFO(prop::repro(i) << "\nmodel: " << a.what << "\nGPU " << gpu.info.id << " TP " << mp.tp << " PP " << mp.pp
                        << " context " << mp.context << " concurrency " << mp.concurrency << " block " << mp.block_size
                        << " prefix " << mp.prefix_tokens << " kv " << model::to_string(mp.kv.dtype) << " weights "
                        << model::to_string(mp.weights.dtype) << " engine " << model::to_string(mp.engine)
                        << " fraction " << mp.memory_fraction << " paging " << mp.paging_overhead);
    const auto m = model::serving_memory(a.arch, model::parameter_counts(a.arch, Explain::off), gpu, mp, Explain::off);
    const auto bad = prop::bad_values(m);
    CHECK_MESSAGE(bad.empty(), "not finite or negative: " << prop::join(bad));
    ++n;
    if (mp.gpu_count == model::GpuCountMethod::layout && m.best_layout) {
      const auto& l = *m.best_layout;
      ++counted;
      CHECK(m.gpus_needed == l.gpus());
      CHECK(l.replicas * l.max_concurrency >= mp.concurrency);
      const std::int64_t per_replica = (mp.concurrency + l.replicas - 1) / l.replicas;
      const auto check = replica_memory(a.arch, m.plan, gpu, l.tp, l.pp, mp.context, per_replica);
      CHECK_MESSAGE(holds(check), "the layout TP " << l.tp << " × PP " << l.pp << " × " << l.replicas << " replicas does not hold "
                                                   << per_replica << " sequences per replica:" << stages_line(check));
    }
  }
  MESSAGE("serving memory cases: " << n << ", GPU counts checked: " << counted);
  CHECK(counted > 100);
}

TEST_CASE("property: plan_serving's answers are finite and every candidate's batch fits in its replica's KV cache") {
  int n = 0, candidates = 0;
  for (const int i : prop::case_indices(60)) {
    Rng r("serving-plan", i);
    const auto a = prop::random_arch(r, r.chance(0.5) ? prop::ArchKind::library : prop::ArchKind::any);
    const auto c = random_serving(r, a);
    if (!c) continue;
    model::Traffic tr;
    tr.requests_per_s = r.log_uniform(0.01, 1000);
    tr.input_tokens = static_cast<std::int64_t>(r.log_uniform(1, 32768));
    tr.output_tokens = static_cast<std::int64_t>(r.log_uniform(1, 4096));
    if (r.chance(0.2)) tr.input = model::lognormal_lengths(static_cast<double>(tr.input_tokens), r.uniform(1, 2000), 8);
    model::Sla sla;
    if (r.chance(0.7)) sla.ttft = units::seconds(r.log_uniform(0.05, 10));
    if (r.chance(0.7)) sla.itl = units::seconds(r.log_uniform(0.005, 0.2));
    model::ServingPlanOptions opt;
    opt.disaggregated = r.chance(0.2);
    if (r.chance(0.5)) opt.tp_options = {1, 2, 4, 8};
    auto perf = c->perf;
    perf.pp = 1;
    INFO(prop::repro(i) << "\n" << c->describe() << "\ntraffic " << tr.requests_per_s << " req/s, " << tr.input_tokens
                        << " in / " << tr.output_tokens << " out" << (tr.input ? " (lognormal in)" : "")
                        << ", disaggregated " << opt.disaggregated);
    const auto params = model::parameter_counts(a.arch, Explain::off);
    const auto res = model::plan_serving(a.arch, params, perf, tr, sla, c->sys, opt, Explain::off);
    const auto bad = prop::bad_values(res);
    CHECK_MESSAGE(bad.empty(), "not finite or negative: " << prop::join(bad));
    CHECK((res.feasible || !res.reasons.empty() || !res.best));
    ++n;
    const model::LengthDist in_d = tr.input ? *tr.input : model::LengthDist::fixed(tr.input_tokens);
    const std::int64_t ctx = std::max<std::int64_t>(1, std::llround(in_d.mean())) + tr.output_tokens;
    for (const auto& cand : res.per_tp) {
      ++candidates;
      INFO("candidate TP " << cand.tp << " PP " << cand.pp << " batch " << cand.batch << " (KV capacity "
                           << cand.max_batch_memory << "), " << cand.replicas << " replicas, " << cand.gpus << " GPUs");
      CHECK(cand.batch >= 1);
      CHECK(cand.batch <= cand.max_batch_memory);
      CHECK(cand.gpus == cand.replicas * cand.tp * cand.pp);
      CHECK(static_cast<double>(cand.replicas) * cand.replica_requests_per_s >= tr.requests_per_s * (1 - 1e-9));
      model::ServingMemoryPlan knobs = opt.memory;
      knobs.kv = perf.kv;
      knobs.weights = perf.weights;
      const auto m = replica_memory(a.arch, knobs, *c->sys.gpu, cand.tp, cand.pp, ctx, cand.batch);
      CHECK_MESSAGE(holds(m), "the replica's memory has no room for the batch's KV:" << stages_line(m));
    }
  }
  MESSAGE("plans: " << n << ", candidates checked: " << candidates);
  CHECK(candidates > 40);
}

TEST_CASE("property: collectives cost 0 on one GPU - finite, >= 0 and non-decreasing in the message size otherwise "
          "(+inf where no link joins the domains)") {
  static const std::vector<model::Collective> ops{model::Collective::all_reduce, model::Collective::all_gather,
                                                  model::Collective::reduce_scatter, model::Collective::all_to_all,
                                                  model::Collective::send_recv, model::Collective::broadcast};
  static const std::vector<model::CollectiveAlgorithm> algos{
      model::CollectiveAlgorithm::automatic, model::CollectiveAlgorithm::ring, model::CollectiveAlgorithm::tree,
      model::CollectiveAlgorithm::nvls, model::CollectiveAlgorithm::hierarchical};
  int n = 0;
  for (const int i : prop::case_indices(3000)) {
    Rng r("collectives", i);
    const auto& nodes = prop::db().nodes;
    const auto& node = nodes[static_cast<std::size_t>(r.range(0, static_cast<std::int64_t>(nodes.size()) - 1))];
    std::optional<hw::ClusterSpec> cluster;
    for (const auto& c : prop::db().clusters)
      if (c.node == node.info.id && r.chance(0.5)) cluster = c;
    const int size = r.chance(0.2) ? 1 : static_cast<int>(r.log_uniform(1, 100000));
    const int stride = r.chance(0.5) ? 1 : r.pow2(64);
    const auto g = model::resolve_group(size, stride, node, prop::db(), cluster);
    const auto op = r.pick(ops);
    const auto algo = r.pick(algos);
    const double b1 = r.chance(0.1) ? 0.0 : r.log_uniform(1, 1e12);
    const double b2 = b1 * r.uniform(1, 100) + 1;
    INFO(prop::repro(i) << "\nnode " << node.info.id << (cluster ? " cluster " + cluster->info.id : std::string())
                        << " size " << size << " stride " << stride << " (scale-up members " << g.scale_up_size
                        << ") op " << static_cast<int>(op) << " algorithm " << static_cast<int>(algo) << " bytes " << b1
                        << " / " << b2);
    const auto c1 = model::collective_cost(op, units::bytes(b1), g, algo, Explain::off);
    const auto c2 = model::collective_cost(op, units::bytes(b2), g, algo, Explain::off);
    if (g.domains() > 1 && !g.scale_out && size > 1) {
      // Spans scale-up domains of a node with no scale-out link in the data: "not possible on this hardware" is +inf.
      CHECK(c2.time.raw() == std::numeric_limits<double>::infinity());
      CHECK((b1 == 0.0 ? c1.time.raw() == 0.0 : c1.time.raw() == std::numeric_limits<double>::infinity()));
      ++n;
      continue;
    }
    CHECK(prop::good(c1.time.raw()));
    CHECK(prop::good(c2.time.raw()));
    CHECK(prop::good(c1.algbw.raw()));
    CHECK(prop::good(c1.busbw.raw()));
    CHECK(c2.time.raw() >= c1.time.raw() * (1 - 1e-12));
    if (size == 1) {
      CHECK(c1.time.raw() == 0.0);
      CHECK(c2.time.raw() == 0.0);
    }
    if (size == 1 || b1 == 0.0) CHECK(model::bus_factor(op, size) >= 0.0);
    ++n;
  }
  // The three the issue names, on every node, with the derivation on as well.
  for (const auto& node : prop::db().nodes) {
    const auto g = model::resolve_group(1, 1, node, prop::db());
    for (const auto op : {model::Collective::all_reduce, model::Collective::all_gather, model::Collective::reduce_scatter})
      for (const auto algo : algos) {
        INFO("node " << node.info.id << " op " << static_cast<int>(op) << " algorithm " << static_cast<int>(algo));
        CHECK(model::collective_cost(op, units::bytes(1e9), g, algo, Explain::on).time.raw() == 0.0);
      }
  }
  MESSAGE("collective cases: " << n);
}
