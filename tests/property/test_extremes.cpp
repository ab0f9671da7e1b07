// Extreme but valid inputs: 1e15 parameters (a synthetic architecture), a 1M-token context, 100k GPUs. Each gives
// finite answers or a clear infeasibility (a result with reasons), never an overflow, a NaN or a crash.
#include <fmt/format.h>

#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/search.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "property.hpp"

using namespace gpuplan;

namespace {

/// About 1e15 parameters: 4000 layers of width 131072 (1024 heads of 128), FFN 4×, vocabulary 256k.
wl::TransformerArch quadrillion() {
  return prop::import_config(
      R"({"model_type": "llama", "hidden_size": 131072, "num_hidden_layers": 4000, "num_attention_heads": 1024,
          "num_key_value_heads": 64, "head_dim": 128, "intermediate_size": 393216, "vocab_size": 256000,
          "max_position_embeddings": 1048576, "hidden_act": "silu"})");
}
/// A 1e15-parameter MoE: 100 layers, 8192 experts of width 8192 at hidden 32768, MLA attention.
wl::TransformerArch quadrillion_moe() {
  return prop::import_config(
      R"({"model_type": "deepseek_v3", "hidden_size": 32768, "num_hidden_layers": 100, "num_attention_heads": 256,
          "num_key_value_heads": 256, "intermediate_size": 131072, "vocab_size": 256000,
          "max_position_embeddings": 1048576, "q_lora_rank": 3072, "kv_lora_rank": 1024, "qk_nope_head_dim": 128,
          "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 8192, "num_experts_per_tok": 16,
          "moe_intermediate_size": 8192, "n_shared_experts": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1})");
}

void check_training(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const model::TrainingSystem& sys,
                    const std::string& what) {
  INFO(what);
  const auto e = model::estimate_training(a, plan, sys, Explain::on);
  if (!e.feasibility.ok) {
    CHECK_MESSAGE(!e.feasibility.reasons.empty(), "infeasible without a reason");
    MESSAGE(what << ": infeasible — " << prop::join(e.feasibility.reasons));
    return;
  }
  const auto bad = prop::bad_values(e);
  CHECK_MESSAGE(bad.empty(), "not finite or negative: " << prop::join(bad));
  CHECK(e.step_time.raw() > 0);
  MESSAGE(what << fmt::format(": step {:.4g} s, {:.4g} tokens/s, MFU {:.3f}, {:.4g} GiB per GPU{}", e.step_time.raw(),
                              e.tokens_per_s, e.mfu, e.memory.total.raw() / 1073741824.0,
                              e.memory.fits ? "" : " (does not fit)"));
}

}  // namespace

TEST_CASE("extremes: 1e15 parameters count, FLOP and KV without overflow") {
  for (const auto& a : {quadrillion(), quadrillion_moe()}) {
    const auto p = model::parameter_counts(a, Explain::on);
    INFO("layers " << a.layers << " hidden " << a.hidden << ": total " << p.total << " active " << p.active);
    CHECK(p.total > 5e14);
    CHECK(p.total < 2e15);
    CHECK(p.active > 0);
    CHECK(p.active <= p.total);
    for (const std::int64_t ctx : {std::int64_t{1}, std::int64_t{4096}, std::int64_t{1} << 20}) {
      const auto f = model::flops_per_token(a, ctx, Explain::on);
      CHECK(prop::good(f.training.raw()));
      CHECK(f.training.raw() > 0);
      const auto kv = model::kv_cache_size(a, ctx, 2.0, Explain::on);
      CHECK(prop::good(kv.per_sequence.raw()));
    }
  }
}

TEST_CASE("extremes: training 1e15 parameters on 100k GPUs is finite or clearly infeasible") {
  const auto sys = prop::system_of(prop::db(), "dgx-h100");
  {
    const auto a = quadrillion();
    wl::TrainingPlan plan;
    plan.seq_len = 4096;
    plan.par.tp = 8;
    plan.par.pp = 125;  // 32 layers per stage
    plan.par.dp = 100;  // 8 · 125 · 100 = 100,000 GPUs
    plan.par.sequence_parallel = true;
    plan.micro_batch = 1;
    plan.global_batch = 100 * 1000;
    plan.zero = wl::ZeroStage::optimizer;
    plan.recompute = wl::Recompute::full;
    plan.tokens_to_train = 1e14;
    REQUIRE(plan.par.gpus() == 100000);
    check_training(a, plan, sys, "1e15 dense, TP 8 × PP 125 × DP 100 on 100k H100");
    plan.schedule = wl::PipelineSchedule::interleaved;
    plan.par.virtual_stages = 4;
    check_training(a, plan, sys, "same, interleaved v=4");
    plan.par.pp = 1;
    plan.par.dp = 12500;
    plan.global_batch = 12500;
    plan.zero = wl::ZeroStage::parameters;
    plan.schedule = wl::PipelineSchedule::one_f_one_b;
    plan.par.virtual_stages = 1;
    check_training(a, plan, sys, "1e15 dense, TP 8 × FSDP 12500 (does not fit: a clear reason)");
  }
  {
    const auto a = quadrillion_moe();
    wl::TrainingPlan plan;
    plan.seq_len = 8192;
    plan.par.tp = 8;
    plan.par.pp = 20;
    plan.par.dp = 625;  // 8 · 20 · 625 = 100,000
    plan.par.ep = 1;
    plan.micro_batch = 1;
    plan.global_batch = 625 * 64;
    plan.zero = wl::ZeroStage::optimizer;
    plan.recompute = wl::Recompute::selective;
    check_training(a, plan, sys, "1e15 MoE+MLA, TP 8 × PP 20 × DP 625");
    plan.par.ep = 5;
    check_training(a, plan, sys, "1e15 MoE+MLA, EP 4");
  }
  {
    const auto* m = prop::library().find("llama-3.1-70b");
    REQUIRE(m != nullptr);
    wl::TrainingPlan plan;
    plan.seq_len = 8192;
    plan.par.tp = 8;
    plan.par.dp = 12500;
    plan.global_batch = 12500 * 4;
    plan.zero = wl::ZeroStage::parameters;
    plan.tokens_to_train = 1.5e13;
    check_training(m->arch, plan, sys, "llama-3.1-70b, TP 8 × FSDP 12500 = 100k GPUs");
    // On the SuperPOD cluster (fewer nodes than the plan needs): clear infeasibility or finite.
    model::TrainingSystem c = sys;
    c.cluster = prop::db().find_cluster("dgx-h100-superpod-su");
    if (c.cluster != nullptr) check_training(m->arch, plan, c, "same on the dgx-h100-superpod-su cluster");
  }
}

TEST_CASE("extremes: a 1M-token context in training, KV, serving memory and forward passes") {
  const auto sys = prop::system_of(prop::db(), "gb200-nvl72");
  const std::int64_t ctx = std::int64_t{1} << 20;
  for (const char* id : {"llama-3.1-8b", "deepseek-v3", "mixtral-8x7b", "gpt-oss-120b"}) {
    const auto* m = prop::library().find(id);
    REQUIRE(m != nullptr);
    const auto& a = m->arch;
    INFO(id);
    wl::TrainingPlan plan;
    plan.seq_len = ctx;
    plan.par.tp = 8;
    plan.par.cp = 8;
    plan.par.sequence_parallel = true;
    plan.recompute = wl::Recompute::full;
    plan.global_batch = 1;
    if (model::check_training_layout(a, plan, sys).ok) check_training(a, plan, sys, std::string(id) + " seq 1M, TP 8 × CP 8");

    const auto kv = model::kv_cache_size(a, ctx, 2.0, Explain::on);
    CHECK(prop::good(kv.per_sequence.raw()));
    model::ServingMemoryPlan mp;
    mp.tp = 8;
    mp.context = ctx;
    mp.concurrency = 4;
    const auto sm = model::serving_memory(a, model::parameter_counts(a, Explain::off), *sys.gpu, mp, Explain::on);
    const auto bad = prop::bad_values(sm);
    CHECK_MESSAGE(bad.empty(), prop::join(bad));
    CHECK((sm.ok || !sm.reasons.empty()));

    model::ServingPerfPlan perf;
    perf.tp = 8;
    model::ForwardBatch b;
    b.decode_seqs = 4;
    b.decode_context = ctx;
    b.prefill_seqs = 1;
    b.prefill_tokens = 8192;
    b.prefill_past = ctx - 8192;
    const auto f = model::forward_cost(a, perf, b, sys, Explain::on);
    const auto fb = prop::bad_values(f);
    CHECK_MESSAGE(fb.empty(), prop::join(fb));
    CHECK(prop::good(model::prefill_time(a, perf, 1, ctx, sys).raw()));
    const auto ss = model::steady_state(a, perf, 4, ctx - 1000, 1000, sys, Explain::on);
    const auto sb = prop::bad_values(ss);
    CHECK_MESSAGE(sb.empty(), prop::join(sb));
  }
}

TEST_CASE("extremes: serving plans for 1e6 requests/s, 1M-token prompts and a 1e15-parameter model") {
  const auto sys = prop::system_of(prop::db(), "dgx-h100");
  struct Case {
    wl::TransformerArch arch;
    double rate;
    std::int64_t in, out;
  };
  const std::vector<Case> cases{{prop::library().find("llama-3.1-8b")->arch, 1e6, 1024, 256},
                                {prop::library().find("llama-3.1-8b")->arch, 1.0, std::int64_t{1} << 20, 100},
                                {quadrillion(), 10.0, 2048, 256},
                                {prop::library().find("deepseek-v3")->arch, 1e5, 100000, 10000},
                                {prop::library().find("llama-3.1-405b")->arch, 10.0, 1 << 17, 1024}};
  const auto amd = prop::system_of(prop::db(), "mi300x-8");  // no scale-out link in the data
  for (const auto& c : cases)
    for (const auto* s : {&sys, &amd}) {
    INFO(c.arch.id << " on " << s->node->info.id << " rate " << c.rate << " in " << c.in << " out " << c.out);
    model::Traffic tr;
    tr.requests_per_s = c.rate;
    tr.input_tokens = c.in;
    tr.output_tokens = c.out;
    model::Sla sla;
    sla.ttft = units::seconds(2.0);
    sla.itl = units::milliseconds(50);
    model::ServingPlanOptions opt;
    opt.disaggregated = true;
    const auto r = model::plan_serving(c.arch, model::parameter_counts(c.arch, Explain::off), model::ServingPerfPlan{},
                                       tr, sla, *s, opt, Explain::on);
    const auto bad = prop::bad_values(r);
    CHECK_MESSAGE(bad.empty(), prop::join(bad));
    CHECK((r.feasible || !r.reasons.empty()));
    if (r.best) MESSAGE(c.arch.id << ": best " << r.best->gpus << " GPUs (" << r.best->replicas << " replicas)");
    else MESSAGE(c.arch.id << ": " << prop::join(r.reasons));
    }
}

TEST_CASE("extremes: collectives over 100k GPUs and 1 TB buffers are finite") {
  const auto* node = prop::db().find_node("dgx-h100");
  REQUIRE(node != nullptr);
  for (const int size : {8, 1024, 100000, 131072}) {
    const auto g = model::resolve_group(size, 1, *node, prop::db());
    for (const auto op : {model::Collective::all_reduce, model::Collective::all_gather, model::Collective::reduce_scatter,
                          model::Collective::all_to_all})
      for (const double b : {1.0, 1e12}) {
        INFO("size " << size << " op " << static_cast<int>(op) << " bytes " << b);
        const auto c = model::collective_cost(op, units::bytes(b), g, model::CollectiveAlgorithm::automatic, Explain::on);
        CHECK(prop::good(c.time.raw()));
        CHECK(c.time.raw() > 0);
      }
  }
}

TEST_CASE("extremes: a search over a 1e15-parameter model on 100k GPUs terminates with finite answers") {
  const auto a = quadrillion();
  const auto sys = prop::system_of(prop::db(), "dgx-h100");
  wl::TrainingPlan base;
  base.seq_len = 4096;
  base.global_batch = 100000;
  model::SearchSpace space;
  space.gpus = {100000};
  space.tp = {8};
  space.pp = {100, 125, 250};
  space.cp = {1};
  space.virtual_stages = {1};
  space.micro_batch = {1};
  model::SearchOptions opt;
  opt.threads = 2;
  const auto r = model::search_training(a, base, sys, space, opt);
  CHECK(r.error.empty());
  CHECK(r.evaluated == r.total);
  for (const auto& p : r.top) {
    CHECK(p.score.fits);
    CHECK(prop::good(p.score.step_time.raw()));
    CHECK(prop::good(p.score.memory.raw()));
  }
  if (r.least_memory) CHECK(prop::good(r.least_memory->score.memory.raw()));
  MESSAGE("1e15 on 100k GPUs: " << r.total << " layouts, " << r.valid << " valid, " << r.fitting << " fit");
}
