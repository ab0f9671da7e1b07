// What Megatron-Core's MoE layer runs beyond the expert GEMMs (issues #21, #24; docs/megatron-moe-layer.md):
// Transformer Engine's GroupedLinear quantising each expert's rows on its own, the all-to-all dispatcher's second
// permutation (rows sorted by local expert and back), and the routing weights' own all-to-all. The layout is the
// Megatron-Bridge 25.09 DGX-B200 Qwen3-30B-A3B row's: TP 1, DP 8, EP 8, one 4096-token micro-batch, FP8 current
// scaling; 16 local experts of 32,768 rows / 16 = 2048 rows each (balanced top-8 routing).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <string>

#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"
#include "megatron_moe_rows.hpp"

using namespace gpuplan;

namespace {

using test::qwen3_b200_row;

const model::OpCost* op_named(const model::TrainingEstimate& e, const std::string& name) {
  for (const auto& op : e.layer_ops)
    if (op.name == name) return &op;
  return nullptr;
}

const model::OpCost& op(const model::TrainingEstimate& e, const std::string& name) {
  const model::OpCost* o = op_named(e, name);
  REQUIRE_MESSAGE(o != nullptr, name);
  return *o;
}

int ops_containing(const model::TrainingEstimate& e, const std::string& part) {
  return int(std::count_if(e.layer_ops.begin(), e.layer_ops.end(),
                           [&](const model::OpCost& o) { return o.name.find(part) != std::string::npos; }));
}

const model::CommCost& comm_of(const model::TrainingEstimate& e, const std::string& kind) {
  const auto it = std::find_if(e.comm.begin(), e.comm.end(), [&](const model::CommCost& c) { return c.kind == kind; });
  REQUIRE_MESSAGE(it != e.comm.end(), kind);
  return *it;
}

constexpr double kRows = 4096.0 * 8.0;  // T·k rows this GPU's experts compute (and it sends), balanced
constexpr double kHidden = 2048.0, kWidth = 768.0;

}  // namespace

TEST_SUITE("megatron moe ops") {
  TEST_CASE("current scaling: each pass of a grouped expert GEMM's quantisation is one kernel per local expert") {
    const auto sys = test::node_system("dgx-b200");
    const auto e = model::estimate_training(test::arch("qwen3-30b-a3b"), qwen3_b200_row(wl::QuantRecipe::tensorwise),
                                            sys, Explain::off);
    const std::string p = " fp8 tensorwise";
    // The dense QKV projection's launch-only scale kernel is one kernel's fixed cost; the experts' runs 16 times.
    const double fixed = op(e, "QKV projection" + p + " scale from amax").time.raw();
    CHECK(op(e, "expert up/gate" + p + " scale from amax (x16 experts)").time.raw() == gptest::approx(16.0 * fixed));
    CHECK(op(e, "expert down grad" + p + " scale from amax (x16 experts)").time.raw() ==
          gptest::approx(16.0 * fixed));
    // The bytes are the whole operand's, once: fc1's input 32,768 × 2048 read for the amax (2 B), fc2's output
    // gradient the same; fc2's input 32,768 × 768.
    const model::OpCost& amax_in = op(e, "expert up/gate" + p + " amax (x16 experts)");
    CHECK(amax_in.bytes.raw() == gptest::approx(kRows * kHidden * 2.0));
    CHECK(op(e, "expert down" + p + " amax (x16 experts)").bytes.raw() == gptest::approx(kRows * kWidth * 2.0));
    // Each kernel still streams at the amax kernel's measured rate (0.916 of copy, quant_recipe.hpp): the time beyond
    // 16 fixed costs against the residual add's time per byte.
    const model::OpCost& res = op(e, "residual add");
    const double per_byte = (res.time.raw() - fixed) / res.bytes.raw();
    CHECK(amax_in.bytes.raw() * per_byte / (amax_in.time.raw() - 16.0 * fixed) == gptest::approx(0.916).epsilon(0.002));
    // 4 operands (fc1 and fc2, input and output gradient) × 3 passes (amax, scale, cast), every one per expert.
    CHECK(ops_containing(e, "(x16 experts)") == 12);
  }

  TEST_CASE("delayed scaling: Transformer Engine's one fused multi-tensor cast covers every expert") {
    const auto e = model::estimate_training(test::arch("qwen3-30b-a3b"), qwen3_b200_row(wl::QuantRecipe::delayed),
                                            test::node_system("dgx-b200"), Explain::off);
    CHECK(ops_containing(e, "experts)") == 0);
    CHECK(op(e, "expert up/gate fp8 cast").bytes.raw() == gptest::approx(kRows * kHidden * 3.0));
  }

  TEST_CASE("the all-to-all dispatcher sorts the received rows by local expert and restores them: P rows each way") {
    const auto sys = test::node_system("dgx-b200");
    const auto& a = test::arch("qwen3-30b-a3b");
    const auto e = model::estimate_training(a, qwen3_b200_row(wl::QuantRecipe::tensorwise), sys, Explain::off);
    // 32,768 rows of 2048 bf16 elements read and written: 268 MB forward, the same backward, for each of the two.
    const double rows_rw = kRows * kHidden * 2.0 * 2.0;
    CHECK(op(e, "sort received rows by local expert (permutation 2)").bytes.raw() == gptest::approx(rows_rw));
    CHECK(op(e, "sort received rows by local expert (permutation 2) bwd").bytes.raw() == gptest::approx(rows_rw));
    CHECK(op(e, "restore rows to source-rank order (unpermutation 2)").bytes.raw() == gptest::approx(rows_rw));
    // EP 1 (nothing received) and one expert per GPU (Mixtral 8x7B at EP 8: the rows arrive in expert order) have
    // no second permutation.
    wl::TrainingPlan ep1 = qwen3_b200_row(wl::QuantRecipe::tensorwise);
    ep1.par.ep = 1;
    CHECK(ops_containing(model::estimate_training(a, ep1, sys, Explain::off), "permutation 2") == 0);
    CHECK(ops_containing(model::estimate_training(test::arch("mixtral-8x7b"),
                                                  qwen3_b200_row(wl::QuantRecipe::tensorwise), sys, Explain::off),
                         "permutation 2") == 0);
    // Nor DeepEP, whose dispatch lands the rows in expert order.
    wl::TrainingPlan deepep = qwen3_b200_row(wl::QuantRecipe::tensorwise);
    deepep.ep_dispatch = wl::EpDispatch::deepep;
    CHECK(ops_containing(model::estimate_training(a, deepep, sys, Explain::off), "permutation 2") == 0);
  }

  TEST_CASE("the routing weights travel in an all-to-all of their own, forward and backward") {
    const auto sys = test::node_system("dgx-b200");
    const auto& a = test::arch("qwen3-30b-a3b");
    const wl::TrainingPlan megatron = qwen3_b200_row(wl::QuantRecipe::tensorwise);
    wl::TrainingPlan eager = megatron;  // our own dispatcher weights the combined rows on the source GPU
    eager.kernels = wl::KernelStyle::eager;
    const auto em = model::estimate_training(a, megatron, sys, Explain::off);
    const auto ee = model::estimate_training(a, eager, sys, Explain::off);
    // 32,768 fp32 weights (131 KB) to the 8 GPUs of the EP group, once forward and once backward, in each of the 48
    // MoE layers of the one micro-batch; the rows' all-to-alls are the same in both plans.
    const model::CommGroup g = model::training_comm_group(8, 1, sys);
    const double probs = model::collective_time(model::Collective::all_to_all, units::bytes(kRows * 4.0), g).raw();
    REQUIRE(probs > 0);
    CHECK(comm_of(em, "ep").time.raw() - comm_of(ee, "ep").time.raw() == gptest::approx(2.0 * 48.0 * probs));
  }
}
