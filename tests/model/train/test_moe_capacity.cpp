// Megatron-Core's expert capacity (moe_capacity_factor, moe_pad_to_capacity; issue #21 item 3): Megatron-Bridge's
// token-drop runs (apply_moe_token_drop at fa0315ae2: capacity factor 1.0, every expert padded to its capacity) know
// the all-to-all split sizes without a device→host copy (Megatron-LM core_v0.14.0 23e00ed0,
// megatron/core/transformer/moe/token_dispatcher.py MoEAlltoAllTokenDispatcher.preprocess: drop_and_pad returns
// before any sync point), the padded rows travel and reach the expert GEMMs, and a capacity below the balanced load
// drops tokens. The layout is the Megatron-Bridge 25.09 DGX-B200 Qwen3-30B-A3B row's: TP 1, DP 8, EP 8, one
// 4096-token micro-batch, FP8 current scaling; balanced top-8 routing puts T·k = 32,768 rows on each GPU's 16
// local experts (2048 rows each).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>

#include "gpuplan/model/training.hpp"
#include "gpuplan/wl_io/scenario_io.hpp"
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

double flops_of(const model::TrainingEstimate& e, const std::string& name) {
  const model::OpCost* o = op_named(e, name);
  REQUIRE_MESSAGE(o != nullptr, name);
  return o->flops.raw();
}

const DerivationInput* input(const Derivation& d, const std::string& symbol) {
  for (const auto& i : d.inputs)
    if (i.symbol == symbol) return &i;
  return nullptr;
}

model::TrainingEstimate run(const wl::TrainingPlan& p, Explain x = Explain::off) {
  return model::estimate_training(test::arch("qwen3-30b-a3b"), p, test::node_system("dgx-b200"), x);
}

constexpr double kRows = 4096.0 * 8.0;  // T·k routed rows per GPU, balanced
constexpr double kHidden = 2048.0, kWidth = 768.0;

}  // namespace

TEST_SUITE("moe capacity") {
  TEST_CASE("padded to a capacity of 1: no dispatcher host sync, the same expert GEMMs and all-to-all") {
    const auto dropless = run(qwen3_b200_row());
    // Dropless at EP 8: the tokens per expert copied to the host once per layer forward, 0.32 ms (moe_cost.cpp).
    const model::OpCost* sync = op_named(dropless, "MoE dispatcher host sync");
    REQUIRE(sync != nullptr);
    CHECK(sync->time.raw() == gptest::approx(0.32e-3).epsilon(1e-9));
    auto p = qwen3_b200_row();
    p.moe_capacity_factor = 1.0;
    p.moe_pad_to_capacity = true;
    REQUIRE(p.moe_fixed_splits());
    const auto drop = run(p);
    CHECK(op_named(drop, "MoE dispatcher host sync") == nullptr);
    // Capacity 1·8·4096·8/128 = 2048 rows per expert: the balanced load, so fc1 is 2·32,768·2048·(2·768) as dropless.
    const double fc1 = 2.0 * kRows * kHidden * 2.0 * kWidth;
    CHECK(flops_of(dropless, "expert up/gate") == gptest::approx(fc1).epsilon(1e-12));
    CHECK(flops_of(drop, "expert up/gate") == gptest::approx(fc1).epsilon(1e-12));
    // 48 MoE layers × (forward) 0.32 ms of host sync per micro-batch less; the rest of the step is the same work.
    CHECK(drop.step.total < dropless.step.total);
  }

  TEST_CASE("padding to a capacity of 1.25 sends and computes 1.25 times the balanced rows") {
    auto p = qwen3_b200_row();
    p.moe_capacity_factor = 1.25;
    p.moe_pad_to_capacity = true;
    CHECK(p.moe_load() == 1.25);
    const auto e = run(p, Explain::on);
    // 16 experts × capacity 1.25·2048 = 2560 rows = 40,960 rows: fc1 2·40,960·2048·1536, fc2 2·40,960·768·2048.
    CHECK(flops_of(e, "expert up/gate") == gptest::approx(2.0 * 40960.0 * kHidden * 2.0 * kWidth).epsilon(1e-12));
    CHECK(flops_of(e, "expert down") == gptest::approx(2.0 * 40960.0 * kWidth * kHidden).epsilon(1e-12));
    CHECK(op_named(e, "MoE dispatcher host sync") == nullptr);
    // The explain node says what the capacity does and that the splits need no host sync.
    const Derivation* node = e.derivation.find("train.moe");
    REQUIRE(node != nullptr);
    const DerivationInput* cf = input(*node, "capacity factor");
    REQUIRE(cf != nullptr);
    CHECK(cf->value == "1.25");
    CHECK(cf->meaning.find("padding included") != std::string::npos);
    CHECK(input(*node, "host syncs")->value == "0");
    CHECK(input(*node, "ι")->value == "1.25");
    // The padding's cost over the balanced load is the term the node names.
    CHECK(input(*node, "t_imbalance")->value != "0 s");
  }

  TEST_CASE("a capacity of 0.5 without padding drops half the routed rows and keeps the host sync") {
    auto p = qwen3_b200_row();
    p.moe_capacity_factor = 0.5;
    CHECK(p.moe_load() == 0.5);
    CHECK_FALSE(p.moe_fixed_splits());
    const auto e = run(p, Explain::on);
    CHECK(flops_of(e, "expert up/gate") == gptest::approx(2.0 * 16384.0 * kHidden * 2.0 * kWidth).epsilon(1e-12));
    REQUIRE(op_named(e, "MoE dispatcher host sync") != nullptr);
    CHECK(e.step.total < run(qwen3_b200_row()).step.total);
    const DerivationInput* cf = input(*e.derivation.find("train.moe"), "capacity factor");
    REQUIRE(cf != nullptr);
    CHECK(cf->meaning.find("drops tokens even under balanced routing") != std::string::npos);
    // Without padding the capacity only caps a skew: ι 1.5 under f 1.2 leaves the busiest rank at 1.2.
    p.moe_capacity_factor = 1.2;
    p.moe_imbalance = 1.5;
    CHECK(p.moe_load() == 1.2);
  }

  TEST_CASE("scenario keys: padding needs a capacity factor, a dense model refuses one") {
    const auto bad = wl_io::decode_training_scenario(
        json_io::Json{{"model", "qwen3-30b-a3b"}, {"moe_pad_to_capacity", true}}, "s.json");
    CHECK_FALSE(bad.ok());
    CHECK(bad.diagnostics().to_string().find("/moe_pad_to_capacity") != std::string::npos);
    CHECK(bad.diagnostics().to_string().find("needs moe_capacity_factor") != std::string::npos);
    const auto good = wl_io::decode_training_scenario(
        json_io::Json{{"model", "qwen3-30b-a3b"}, {"moe_capacity_factor", 1.0}, {"moe_pad_to_capacity", true}}, "s.json");
    REQUIRE(good.ok());
    CHECK(*good->plan.moe_capacity_factor == 1.0);
    CHECK(good->plan.moe_pad_to_capacity);
    const auto zero = wl_io::decode_training_scenario(
        json_io::Json{{"model", "qwen3-30b-a3b"}, {"moe_capacity_factor", 0.0}}, "s.json");
    CHECK_FALSE(zero.ok());
    auto dense = qwen3_b200_row();
    dense.par.ep = 1;
    dense.moe_capacity_factor = 1.0;
    const auto e = model::estimate_training(test::arch("llama-3.1-8b"), dense, test::node_system("dgx-b200"),
                                            Explain::off);
    REQUIRE_FALSE(e.feasibility.ok);
    bool named = false;
    for (const auto& r : e.feasibility.reasons)
      named = named || r.find("an expert capacity factor needs a mixture-of-experts model") != std::string::npos;
    CHECK(named);
  }
}
