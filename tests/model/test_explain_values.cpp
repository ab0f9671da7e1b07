// Every explain tree's numbers equal the quantities they explain (issue #20, Deliver 5). For a fixed set of scenarios
// (dense, MoE, PP, the recompute modes, an eager PyTorch loop; parameters, FLOPs, KV cache) the walk checks each node
// that carries a value: finite and not negative; a node declared as a sum equals the sum of its children; a node whose
// result is written as text shows its own value in that text; and the nodes named below equal the fields of the
// result they explain.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include "approx.hpp"

#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::arch;
using gpuplan::test::node_system;

namespace {

constexpr double kRel = 1e-9;

bool close(double a, double b) { return std::fabs(a - b) <= kRel * std::max({1.0, std::fabs(a), std::fabs(b)}); }

/// The checks every node with a value passes; returns the number of nodes with a value.
int walk(const Derivation& d, const std::string& where) {
  int n = 0;
  if (d.has_value()) {
    ++n;
    INFO(where, " › ", d.id, " (", d.title, ") = ", d.value);
    CHECK(std::isfinite(d.value));
    CHECK(d.value >= 0.0);
    if (!d.result.empty()) CHECK_MESSAGE(d.result.find(format_value(d.value, d.unit)) != std::string::npos, d.result);
    if (d.fold == Fold::sum) {
      double sum = 0.0;
      for (const auto& c : d.children) {
        CHECK_MESSAGE(c.has_value(), c.id);
        sum += c.has_value() ? c.value : 0.0;
      }
      CHECK_MESSAGE(close(d.value, sum), "Σ children = ", sum);
    }
  }
  for (const auto& c : d.children) n += walk(c, where);
  return n;
}

/// Node `id` of `d`, when the tree has it, carries `expected`.
void same_if_present(const Derivation& d, const std::string& id, double expected) {
  if (d.find(id) == nullptr) return;
  const Derivation* n = d.find(id);
  INFO(id, " = ", n->value, ", explains ", expected);
  CHECK(n->has_value());
  CHECK(close(n->value, expected));
}

/// Node `id` of `d` carries `expected`.
void same(const Derivation& d, const std::string& id, double expected) {
  const Derivation* n = d.find(id);
  REQUIRE_MESSAGE(n != nullptr, id);
  INFO(id, " = ", n->value, ", explains ", expected);
  CHECK(n->has_value());
  CHECK(close(n->value, expected));
}

struct TrainCase {
  std::string name, model, node;
  std::function<void(wl::TrainingPlan&)> plan;
};

wl::TrainingPlan base(int dp, int tp, int pp, int ep, std::int64_t global, std::int64_t seq) {
  wl::TrainingPlan p;
  p.par.dp = dp;
  p.par.tp = tp;
  p.par.pp = pp;
  p.par.ep = ep;
  p.par.sequence_parallel = tp > 1;
  p.micro_batch = 1;
  p.global_batch = global;
  p.seq_len = seq;
  p.zero = wl::ZeroStage::optimizer;
  return p;
}

/// A PyTorch loop under autocast over fp32 parameters (its peak is the backward's start or end, or the loss's forward
/// under full recompute: the memory tree's components must follow the one reported).
wl::TrainingPlan eager(bool full_recompute) {
  wl::TrainingPlan p = base(8, 1, 1, 1, 16, 2048);
  p.micro_batch = 2;
  p.kernels = wl::KernelStyle::eager;
  p.mixed_precision = wl::MixedPrecision::amp;
  p.precision.weight_bytes = 4;
  p.precision.gradient_bytes = 4;
  p.precision.master_bytes = 0;
  p.zero = wl::ZeroStage::none;
  if (full_recompute) p.recompute = wl::Recompute::full;
  return p;
}

std::vector<TrainCase> train_cases() {
  return {
      {"dense DP 8, ZeRO-1", "llama-3.1-8b", "dgx-h100", [](wl::TrainingPlan& p) { p = base(8, 1, 1, 1, 64, 4096); }},
      {"dense TP 8 PP 4, selective recompute", "llama-3.1-70b", "dgx-h100",
       [](wl::TrainingPlan& p) {
         p = base(4, 8, 4, 1, 128, 8192);
         p.recompute = wl::Recompute::selective;
       }},
      {"dense PP 2, full recompute", "llama-3.1-8b", "dgx-h100",
       [](wl::TrainingPlan& p) {
         p = base(4, 1, 2, 1, 64, 4096);
         p.recompute = wl::Recompute::full;
       }},
      {"MoE TP 2 EP 8", "mixtral-8x7b", "dgx-h100", [](wl::TrainingPlan& p) { p = base(32, 2, 1, 8, 256, 4096); }},
      {"MoE EP 8 PP 2, ZeRO-3", "qwen3-30b-a3b", "dgx-h200",
       [](wl::TrainingPlan& p) {
         p = base(8, 1, 2, 8, 64, 4096);
         p.zero = wl::ZeroStage::parameters;
       }},
      {"dense TP 8 PP 4 CP 2, TP overlap", "llama-3.1-70b", "dgx-h100",
       [](wl::TrainingPlan& p) {
         p = base(4, 8, 4, 1, 64, 32768);
         p.par.cp = 2;
         p.overlap_tp_comm = true;
         p.recompute = wl::Recompute::full;
       }},
      {"dense interleaved PP 4 v 5", "llama-3.1-70b", "dgx-h100",
       [](wl::TrainingPlan& p) {
         p = base(8, 8, 4, 1, 256, 8192);
         p.par.virtual_stages = 5;
         p.schedule = wl::PipelineSchedule::interleaved;
       }},
      {"MoE TP 2 EP 8, EP A2A overlap", "mixtral-8x7b", "dgx-h100",
       [](wl::TrainingPlan& p) {
         p = base(32, 2, 1, 8, 256, 4096);
         p.ep_a2a_overlap = true;
       }},
      {"MoE DualPipe PP 8 EP 8", "qwen3-30b-a3b", "dgx-h200",
       [](wl::TrainingPlan& p) {
         p = base(8, 1, 8, 8, 256, 4096);
         p.schedule = wl::PipelineSchedule::dualpipe;
       }},
      {"LoRA TP 2", "llama-3.1-8b", "dgx-h100",
       [](wl::TrainingPlan& p) {
         p = base(4, 2, 1, 1, 32, 4096);
         p.lora.rank = 16;
       }},
      {"optimizer offload, ZeRO-1", "llama-3.1-8b", "dgx-h100",
       [](wl::TrainingPlan& p) {
         p = base(8, 1, 1, 1, 64, 4096);
         p.offload = wl::Offload::optimizer;
       }},
      {"eager PyTorch loop, AMP", "bench-llama-1b-like", "dgx-h100", [](wl::TrainingPlan& p) { p = eager(false); }},
      {"eager PyTorch loop, AMP, full recompute", "bench-llama-1b-like", "dgx-h100",
       [](wl::TrainingPlan& p) { p = eager(true); }},
  };
}

/// The case's estimate with its derivations (the layout must be feasible: an infeasible one has no trees).
model::TrainingEstimate estimate(const TrainCase& c) {
  wl::TrainingPlan p;
  c.plan(p);
  const auto est = model::estimate_training(arch(c.model), p, node_system(c.node), Explain::on);
  REQUIRE_MESSAGE(est.feasibility.ok, c.name);
  return est;
}

}  // namespace

TEST_SUITE("explain trees carry the numbers they explain") {
  TEST_CASE("training: the memory tree's root and components equal the reported memory") {
    for (const auto& c : train_cases()) {
      INFO(c.name);
      const auto est = estimate(c);
      const Derivation& mem = est.memory.derivation;
      CHECK(walk(mem, c.name) >= 10);
      CHECK(walk(est.derivation, c.name) >= 1);
      const auto& m = est.memory;
      same(mem, "memory", m.total.raw());
      same(mem, "memory.weights", m.weights.raw());
      same(mem, "memory.gradients", m.gradients.raw());
      same(mem, "memory.master_weights", m.master_weights.raw());
      same(mem, "memory.optimizer_states", m.optimizer_states.raw());
      same(mem, "memory.activations", m.activations.raw());
      same(mem, "memory.logits", m.logits.raw());
      same(mem, "memory.cuda_context", m.cuda_context.raw());
      same(mem, "memory.nccl", m.nccl_buffers.raw());
      same(mem, "memory.fragmentation", m.fragmentation.raw());
    }
  }

  TEST_CASE("training: the step tree's root and terms equal the step breakdown") {
    for (const auto& c : train_cases()) {
      INFO(c.name);
      const auto est = estimate(c);
      const Derivation& d = est.derivation;
      CHECK(walk(d, c.name) >= 4);
      same(d, "train", est.step.total.raw());
      same(d, "train.comm", est.step.comm_exposed.raw());
      same(d, "train.optimizer", est.step.optimizer.raw());
      same_if_present(d, "train.bubble", est.step.bubble.raw());
      same_if_present(d, "train.offload", est.step.offload.raw());
      CHECK(est.step.total.raw() == gptest::approx(est.step_time.raw()).epsilon(1e-12));
    }
  }

  TEST_CASE("training: the step node is the step time, each group's node its exposed communication") {
    for (const auto& c : train_cases()) {
      INFO(c.name);
      const auto est = estimate(c);
      const Derivation& d = est.derivation;
      same(d, "train", est.step_time.raw());
      // Communication: a sum over one node per parallel group, each the exposed time of its est.comm entry.
      const Derivation* comm = d.find("train.comm");
      REQUIRE(comm != nullptr);
      CHECK(comm->fold == Fold::sum);
      int groups = 0;
      double dp_exposed = 0.0;
      for (const auto& g : est.comm) {
        if (g.kind == "dp") dp_exposed = g.exposed.raw();
        if (g.group_size <= 1) {
          CHECK(d.find("train.comm." + g.kind) == nullptr);
          CHECK(g.exposed.raw() == 0.0);
          continue;
        }
        ++groups;
        same(d, "train.comm." + g.kind, g.exposed.raw());
      }
      CHECK(groups == static_cast<int>(comm->children.size()));
      // Compute: one micro-batch on the bottleneck stage, the step's GEMM, attention, elementwise and MoE host parts
      // over m; with its exposed communication and head it is that stage's t_i.
      const double m = double(est.micro_batches);
      const auto& s = est.step;
      same(d, "train.compute", (s.gemm + s.attention + s.elementwise + s.moe_host).raw() / m);
      const double t_stage = est.stage_time.at(static_cast<std::size_t>(est.bottleneck_stage)).raw();
      CHECK(d.find("train.compute")->value <= t_stage);
      // The root's formula over its nodes: m·t_stage + bubble + DP exposed + optimizer (+ offload).
      const Derivation* bubble = d.find("train.bubble");
      const Derivation* offload = d.find("train.offload");
      const double composed = m * t_stage + (bubble != nullptr ? bubble->value : 0.0) + dp_exposed +
                              d.find("train.optimizer")->value + (offload != nullptr ? offload->value : 0.0);
      CHECK(close(d.value, composed));
    }
  }

  TEST_CASE("parameters, FLOPs per token and KV cache: each tree's numbers are the counts it explains") {
    for (const char* id : {"llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3",
                           "gpt-oss-120b", "nemotron-h-8b"}) {
      if (test::library().find(id) == nullptr) continue;
      INFO(id);
      const auto& a = arch(id);
      const auto params = model::parameter_counts(a, Explain::on);
      CHECK(walk(params.derivation, id) >= 5);
      same(params.derivation, "params", double(params.total));
      same(params.derivation, "params.attention", double(params.attention));
      same(params.derivation, "params.dense_mlp", double(params.dense_mlp));
      same(params.derivation, "params.norms", double(params.norms));
      same(params.derivation, "params.embedding", double(params.embedding + params.lm_head + params.position_embedding));
      same_if_present(params.derivation, "params.moe", double(params.routed_experts + params.shared_experts + params.router));

      const auto f = model::flops_per_token(a, 8192, Explain::on);
      CHECK(walk(f.derivation, id) == 3);
      same(f.derivation, "flops_per_token", f.forward.raw());
      same(f.derivation, "flops_per_token.matmul", f.matmul_forward.raw());
      same(f.derivation, "flops_per_token.attention", f.attention_forward.raw());

      const auto kv = model::kv_cache_size(a, 32768, 2.0, Explain::on);
      CHECK(walk(kv.derivation, id) >= 1);
      same(kv.derivation, kv.derivation.id, kv.per_token_full.raw());
      const auto tok = model::kv_token_bytes(a, model::KvQuant{}, 8, Explain::on);
      CHECK(walk(tok.derivation, id) >= 1);
      same(tok.derivation, tok.derivation.id, tok.per_layer.raw());
    }
  }

  TEST_CASE("roofline: a GEMM's tree carries the time gemm_cost reports") {
    struct Case {
      const char* gpu;
      model::GemmShape shape;
      hw::Precision p;
    };
    for (const Case c : {Case{"h100-sxm5-80gb", {8192, 8192, 8192, 1}, hw::Precision::bf16},
                         Case{"b200-hgx", {8192, 8192, 8192, 1}, hw::Precision::bf16},
                         Case{"h100-sxm5-80gb", {1, 4096, 4096, 1}, hw::Precision::bf16},          // memory-bound
                         Case{"h200-sxm-141gb", {4096, 50257, 4096, 1}, hw::Precision::bf16},      // unaligned n
                         Case{"h100-sxm5-80gb", {4096, 4095, 4096, 1}, hw::Precision::fp8},        // padded
                         Case{"a100-sxm4-80gb", {2048, 2048, 2048, 8}, hw::Precision::fp16}}) {  // batched
      const hw::GpuSpec* g = test::hardware().find_gpu(c.gpu);
      REQUIRE_MESSAGE(g != nullptr, c.gpu);
      INFO(c.gpu, " ", c.shape.m, "x", c.shape.n, "x", c.shape.k);
      Derivation why;
      const model::OpCost op = model::gemm_cost("g", c.shape, c.p, model::make_device(*g), &why);
      CHECK(walk(why, c.gpu) == 1);
      same(why, "op.g", op.time.raw());
    }
  }

  TEST_CASE("collectives: each tree carries the time collective_cost reports, the hierarchical one as its phases") {
    const auto sys = node_system("dgx-h100");
    int hierarchical = 0;
    for (const int n : {1, 2, 8, 16, 64}) {
      const model::CommGroup g = model::training_comm_group(n, 1, sys);
      for (const model::Collective op : {model::Collective::all_reduce, model::Collective::all_gather,
                                         model::Collective::reduce_scatter, model::Collective::all_to_all,
                                         model::Collective::send_recv, model::Collective::broadcast})
        for (const model::CollectiveAlgorithm algo :
             {model::CollectiveAlgorithm::automatic, model::CollectiveAlgorithm::ring, model::CollectiveAlgorithm::tree,
              model::CollectiveAlgorithm::nvls, model::CollectiveAlgorithm::hierarchical})
          for (const double bytes : {0.0, 4096.0, 64.0 * 1024 * 1024, 4.0 * 1024 * 1024 * 1024}) {
            INFO(n, " GPUs, op ", int(op), ", algorithm ", int(algo), ", ", bytes, " B");
            const auto r = model::collective_cost(op, units::bytes(bytes), g, algo, Explain::on);
            REQUIRE(std::isfinite(r.time.raw()));
            CHECK(walk(r.derivation, "collective") >= 1);
            same(r.derivation, r.derivation.id, r.time.raw());
            if (r.derivation.fold == Fold::sum) {
              ++hierarchical;
              CHECK(r.derivation.children.size() >= 2);
            }
          }
    }
    CHECK(hierarchical > 0);
  }

  TEST_CASE("serving forward pass: the tree carries the time forward_cost reports") {
    struct Case {
      const char* model;
      int tp, pp, ep;
      model::ForwardBatch fb;
    };
    const model::ForwardBatch decode{64, 1, 4096, 0, 0, 0, true}, mixed{64, 1, 4096, 1, 2048, 0, true},
        prefill{0, 1, 0, 4, 8192, 0, true};
    for (const Case& c : {Case{"llama-3.1-70b", 8, 1, 1, decode}, Case{"llama-3.1-70b", 8, 1, 1, mixed},
                         Case{"llama-3.1-70b", 4, 2, 1, prefill}, Case{"mixtral-8x7b", 2, 1, 2, mixed},
                         Case{"qwen3-30b-a3b", 1, 1, 1, decode}, Case{"deepseek-v3", 8, 1, 8, decode}}) {
      INFO(c.model, " TP ", c.tp, " PP ", c.pp, " EP ", c.ep);
      model::ServingPerfPlan p;
      p.tp = c.tp;
      p.pp = c.pp;
      p.ep = c.ep;
      const auto fc = model::forward_cost(arch(c.model), p, c.fb, node_system("dgx-h200"), Explain::on);
      CHECK(walk(fc.derivation, c.model) >= 1);
      same(fc.derivation, "serving.forward", fc.total.raw());
    }
  }

  TEST_CASE("serving memory: the weights and overheads nodes equal the binding stage's memory") {
    struct Case {
      const char* model;
      const char* gpu;
      int tp;
    };
    for (const Case c : {Case{"llama-3.1-70b", "h100-sxm5-80gb", 8}, Case{"qwen3-30b-a3b", "h200-sxm-141gb", 2},
                         Case{"deepseek-v3", "h200-sxm-141gb", 8}}) {
      INFO(c.model);
      const auto& a = arch(c.model);
      const hw::GpuSpec* g = test::hardware().find_gpu(c.gpu);
      REQUIRE(g != nullptr);
      model::ServingMemoryPlan p;
      p.tp = c.tp;
      const auto r = model::serving_memory(a, model::parameter_counts(a, Explain::off), *g, p, Explain::on);
      const auto& bind = r.stages[static_cast<std::size_t>(r.binding_stage)];
      CHECK(walk(r.derivation, c.model) >= 3);
      same(r.derivation, "weights", bind.weights.raw());
      same(r.derivation, "overheads", (bind.cuda_context + bind.nccl + bind.cuda_graphs + bind.activations).raw());
      same(r.derivation, r.token.derivation.id, r.token.per_layer.raw());
    }
  }
}
