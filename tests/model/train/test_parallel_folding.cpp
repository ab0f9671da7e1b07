// MoE parallel folding (Megatron-Core's expert_tensor_parallel_size, issue #22): the routed experts get their own
// tensor parallel size etp, and each pipeline stage's tp·cp·dp ranks are regrouped as etp·ep·edp for them
// (megatron/core/parallel_state.py initialize_model_parallel, the expert rank generator). Checked here: the layout
// rule, that an explicit etp = tp prices exactly as the default, the expert shard (weights, gradients, optimizer
// states over etp·ep and the expert-DP group), the expert GEMMs' FLOPs, the dispatcher's message size and the TP
// collectives the MoE layers keep.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cmath>
#include <string>

#include "gpuplan/model/memory.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {

struct FoldPlan {
  int tp = 1, dp = 1, ep = 1, etp = 0;
  bool sp = true;
  wl::ZeroStage zero = wl::ZeroStage::none;
};

wl::TrainingPlan folded(const FoldPlan& f) {
  wl::TrainingPlan p;
  p.par.tp = f.tp;
  p.par.dp = f.dp;
  p.par.ep = f.ep;
  p.par.etp = f.etp;
  p.par.sequence_parallel = f.sp && f.tp > 1;
  p.micro_batch = 1;
  p.global_batch = f.dp;  // one micro-batch per step
  p.seq_len = 4096;
  p.zero = f.zero;
  return p;
}

model::TrainingEstimate run(const std::string& model_id, const std::string& node, const FoldPlan& f) {
  return model::estimate_training(test::arch(model_id), folded(f), test::node_system(node), Explain::off);
}

const model::CommCost* comm(const model::TrainingEstimate& e, const std::string& kind) {
  for (const auto& c : e.comm)
    if (c.kind == kind) return &c;
  return nullptr;
}

bool rel_close(double got, double want, double tol) { return want != 0 && std::abs(got / want - 1.0) <= tol; }

}  // namespace

TEST_SUITE("parallel folding") {
  TEST_CASE("EP beyond DP x CP: expert TP x EP must divide TP x CP x DP") {
    // Qwen3-235B-A22B as Megatron-Bridge's 25.09 GB200 recipe runs it: TP 2, DP 32, EP 64, expert TP 1.
    const auto& a = test::arch("qwen3-235b-a22b");
    const auto sys = test::node_system("gb200-nvl72");
    const auto unfolded = model::check_training_layout(a, folded({2, 32, 64, 0}), sys);
    CHECK_FALSE(unfolded.ok);
    REQUIRE(unfolded.reasons.size() == 1);
    CHECK(unfolded.reasons[0] ==
          "EP 64 must divide DP × CP = 32 (or fold the experts: with --etp 1 the experts' EP divides TP × CP × DP = 64)");
    CHECK(model::check_training_layout(a, folded({2, 32, 64, 1}), sys).ok);
    // An explicit expert TP equal to TP is the default: still refused.
    CHECK_FALSE(model::check_training_layout(a, folded({2, 32, 64, 2}), sys).ok);
    // 128 experts over EP 128 divide, but 1 · 128 does not divide the stage's 64 ranks.
    const auto over = model::check_training_layout(a, folded({2, 32, 128, 1}), sys);
    REQUIRE(over.reasons.size() == 1);
    CHECK(over.reasons[0] == "expert TP 1 × EP 128 = 128 must divide TP × CP × DP = 64 (Megatron-Core's expert grid "
                             "etp·ep·edp is the stage's tp·cp·dp ranks regrouped)");
    // Megatron-LM refuses MoE with TP > 1 without sequence parallelism.
    FoldPlan no_sp{2, 32, 64, 1};
    no_sp.sp = false;
    const auto nsp = model::check_training_layout(a, folded(no_sp), sys);
    REQUIRE_FALSE(nsp.ok);
    CHECK(nsp.reasons[0].find("needs sequence parallelism") != std::string::npos);
    // A dense model has no experts to fold.
    CHECK_FALSE(model::check_training_layout(test::arch("llama-3.1-8b"), folded({2, 4, 1, 1}), sys).ok);
  }

  TEST_CASE("an explicit expert TP equal to TP prices exactly as the default") {
    const auto def = run("mixtral-8x7b", "dgx-h100", {2, 4, 2, 0, true, wl::ZeroStage::optimizer});
    const auto same = run("mixtral-8x7b", "dgx-h100", {2, 4, 2, 2, true, wl::ZeroStage::optimizer});
    REQUIRE(def.step_time.raw() > 0);  // priced (8 GPUs hold Mixtral's states only with ZeRO: the fit is not the point)
    REQUIRE(same.step_time.raw() > 0);  // priced (8 GPUs hold Mixtral's states only with ZeRO: the fit is not the point)
    CHECK(def.step_time.raw() == same.step_time.raw());
    CHECK(def.memory.total.raw() == same.memory.total.raw());
  }

  TEST_CASE("the routed experts' shard depends on etp x ep only") {
    // TP 2 · DP 4 on one DGX H100. Experts split 4 ways either by EP 2 × expert TP 2 (the default) or by EP 4 ×
    // expert TP 1 (folded): the same weights, gradients and optimizer states per GPU (expert-DP group 8 / 4 = 2 both).
    const auto& a = test::arch("mixtral-8x7b");
    const auto params = model::parameter_counts(a, Explain::off);
    const auto& gpu = *test::node_system("dgx-h100").gpu;
    auto mem = [&](const FoldPlan& f) {
      return model::training_memory(a, params, folded(f), gpu, model::default_training_overheads(), Explain::off);
    };
    const auto ep2 = mem({2, 4, 2, 0, true, wl::ZeroStage::optimizer});
    const auto ep4 = mem({2, 4, 4, 1, true, wl::ZeroStage::optimizer});
    CHECK(ep2.weights.raw() == gptest::approx(ep4.weights.raw()).epsilon(1e-12));
    CHECK(ep2.gradients.raw() == gptest::approx(ep4.gradients.raw()).epsilon(1e-12));
    CHECK(ep2.optimizer_states.raw() == gptest::approx(ep4.optimizer_states.raw()).epsilon(1e-12));
    // Halving the shard (EP 2 × expert TP 1) adds the routed experts' (1/2 − 1/4) share of weights.
    const auto ep2_etp1 = mem({2, 4, 2, 1, true, wl::ZeroStage::optimizer});
    const auto p = folded({2, 4, 2, 1});
    CHECK(rel_close(ep2_etp1.weights.raw() - ep4.weights.raw(),
                    double(params.routed_experts) * (0.5 - 0.25) * p.precision.weight_bytes, 1e-9));
    // ZeRO-1 shards the experts' states over the expert-DP group, tp·cp·dp / (etp·ep) ranks: etp·ep·edp is the stage's
    // 8 GPUs whatever the fold, so each GPU keeps 1/8 of the routed experts' states at EP 2 and at EP 4.
    CHECK(ep2_etp1.optimizer_states.raw() == gptest::approx(ep4.optimizer_states.raw()).epsilon(1e-12));
    CHECK(ep2_etp1.master_weights.raw() == gptest::approx(ep4.master_weights.raw()).epsilon(1e-12));
  }

  TEST_CASE("expert GEMMs under expert TP: the FLOPs per GPU do not move, the dispatcher sends etp/tp of the rows") {
    // TP 2 with expert TP 1 and EP 4 against the default (expert TP 2, EP 2): T·k·ep·etp/tp rows of width i_e/etp.
    const auto folded4 = run("mixtral-8x7b", "dgx-h100", {2, 4, 4, 1});
    const auto plain2 = run("mixtral-8x7b", "dgx-h100", {2, 4, 2, 0});
    REQUIRE(folded4.step_time.raw() > 0);  // priced (8 GPUs hold Mixtral's states only with ZeRO: the fit is not the point)
    REQUIRE(plain2.step_time.raw() > 0);  // priced (8 GPUs hold Mixtral's states only with ZeRO: the fit is not the point)
    auto expert_flops = [](const model::TrainingEstimate& e, const std::string& name) {
      double f = 0;
      for (const auto& op : e.layer_ops)
        if (op.name == name) f += op.flops.raw();
      return f;
    };
    for (const char* name : {"expert up/gate", "expert down"}) {
      CAPTURE(name);
      REQUIRE(expert_flops(plain2, name) > 0);
      CHECK(rel_close(expert_flops(folded4, name), expert_flops(plain2, name), 1e-12));
    }
    // Dispatcher: the same 4 GPUs' tokens without TP (DP 8, EP 4) send T·k·h per GPU; with TP 2 and expert TP 1
    // each GPU sends only its sequence shard, half of it.
    const auto no_tp = run("mixtral-8x7b", "dgx-h100", {1, 8, 4, 0});
    const auto* e_fold = comm(folded4, "ep");
    const auto* e_none = comm(no_tp, "ep");
    REQUIRE(e_fold != nullptr);
    REQUIRE(e_none != nullptr);
    CHECK(rel_close(e_fold->bytes_per_step.raw(), 0.5 * e_none->bytes_per_step.raw(), 1e-12));
  }

  TEST_CASE("with expert TP 1 the MoE layers keep only the attention's TP collectives") {
    // Mixtral: every layer is an MoE layer and has no shared experts, so half of the TP pairs remain.
    const auto f = run("mixtral-8x7b", "dgx-h100", {2, 4, 4, 1});
    const auto u = run("mixtral-8x7b", "dgx-h100", {2, 4, 2, 0});
    const auto* tf = comm(f, "tp");
    const auto* tu = comm(u, "tp");
    REQUIRE(tf != nullptr);
    REQUIRE(tu != nullptr);
    CHECK(rel_close(tf->bytes_per_step.raw(), 0.5 * tu->bytes_per_step.raw(), 1e-12));
    CHECK(tf->time.raw() < tu->time.raw());
  }
}
