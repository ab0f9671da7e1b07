// MLA's projections priced as the GEMMs a framework runs (model/src/graph/mla_projections.hpp; issue #20 F3, F4; F13's
// adapter widths: tests/model/graph/test_graph.cpp;
// docs/design/op-graph-plan.md §5): q_a and kv_a held whole by every TP rank, q_b and kv_b split over TP by their
// outputs. Shapes by hand from DeepSeek-V3's config (arXiv:2412.19437; HF config.json: hidden 7168, 128 heads,
// q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>
#include <vector>

#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {

const model::OpCost* mla_op(const std::vector<model::OpCost>& ops, const std::string& name) {
  for (const auto& o : ops)
    if (o.name == name) return &o;
  return nullptr;
}

double mla_flops(const std::vector<model::OpCost>& ops, const std::string& name) {
  const model::OpCost* o = mla_op(ops, name);
  REQUIRE_MESSAGE(o != nullptr, name);
  return o->flops.raw();
}

wl::TrainingPlan mla_plan(int tp, bool sp) {
  wl::TrainingPlan p;
  p.par.tp = tp;
  p.par.sequence_parallel = sp;
  p.micro_batch = 1;
  p.seq_len = 4096;
  p.global_batch = 1;
  return p;
}

}  // namespace

TEST_CASE("training prices MLA's down-projections whole on the sequence shard and its up-projections split by TP") {
  // TP 2 with sequence parallelism, 4096 tokens: q_a (7168 → 1536) and kv_a (7168 → 512 + 64) run on this rank's
  // 2048 tokens at full width (Megatron-Core's duplicated TELinear on [s/TP, b, h]); q_b (1536 → 128·192) and kv_b
  // (512 → 128·256) on all 4096 tokens, 64 heads each. FLOPs 2·m·k·n.
  const auto& a = test::arch("deepseek-v3");
  REQUIRE(a.mla);
  const auto e = model::estimate_training(a, mla_plan(2, true), test::node_system("dgx-h100"), Explain::on);
  const auto& ops = e.layer_ops;
  CHECK(mla_flops(ops, "MLA q down-projection") == gptest::approx(2.0 * 2048 * 7168 * 1536));
  CHECK(mla_flops(ops, "MLA q up-projection") == gptest::approx(2.0 * 4096 * 1536 * (64 * 192)));
  CHECK(mla_flops(ops, "MLA kv down-projection") == gptest::approx(2.0 * 2048 * 7168 * 576));
  CHECK(mla_flops(ops, "MLA kv up-projection") == gptest::approx(2.0 * 4096 * 512 * (64 * 256)));
  // The backward GEMMs of the same shapes (dgrad shown).
  CHECK(mla_flops(ops, "MLA q down-projection dgrad") == gptest::approx(2.0 * 2048 * 7168 * 1536));
  CHECK(mla_flops(ops, "MLA kv up-projection dgrad") == gptest::approx(2.0 * 4096 * 512 * (64 * 256)));
  CHECK(mla_op(ops, "QKV projection") == nullptr);
  // The latent norms run on the down-projections' rows: 2048 tokens, read and write 2 B each.
  const model::OpCost* qn = mla_op(ops, "MLA query latent norm");
  REQUIRE(qn != nullptr);
  CHECK(qn->bytes.raw() == gptest::approx(2048.0 * 1536 * 4));
  // Without sequence parallelism every rank runs the down-projections on all 4096 tokens.
  const auto f = model::estimate_training(a, mla_plan(2, false), test::node_system("dgx-h100"), Explain::on);
  CHECK(mla_flops(f.layer_ops, "MLA q down-projection") == gptest::approx(2.0 * 4096 * 7168 * 1536));
  CHECK(mla_flops(f.layer_ops, "MLA kv up-projection") == gptest::approx(2.0 * 4096 * 512 * (64 * 256)));
}

TEST_CASE("serving prices MLA's down-projections as one fused GEMM whole on every TP rank, the up-projections split") {
  // TP 8, one 512-token prompt: q_a and kv_a as one GEMM 7168 → 1536 + 512 + 64 (vLLM's and SGLang's
  // fused_qkv_a_proj), q_b and kv_b on 16 heads.
  const auto& a = test::arch("deepseek-v3");
  model::ServingSystem s = test::node_system("dgx-h100");
  model::ServingPerfPlan p;
  p.weights = model::default_weight_quant(model::StoreDtype::bf16);
  p.kv = model::default_kv_quant(model::StoreDtype::bf16);
  p.tp = 8;
  const auto fw = model::forward_cost(a, p, {0, 1, 0, 1, 512, 0, true}, s);
  CHECK(mla_flops(fw.ops, "MLA q/kv down-projection") == gptest::approx(2.0 * 512 * 7168 * (1536 + 576)));
  CHECK(mla_flops(fw.ops, "MLA q up-projection") == gptest::approx(2.0 * 512 * 1536 * (16 * 192)));
  CHECK(mla_op(fw.ops, "MLA q down-projection") == nullptr);
  CHECK(mla_flops(fw.ops, "MLA kv up-projection") == gptest::approx(2.0 * 512 * 512 * (16 * 256)));
}

TEST_CASE("training rotates MLA's query heads' rotary parts and the one shared rotary key") {
  // TP 2, 4096 tokens: 64 query heads × d_rope 64 plus the shared key's 64 per token (F4; not n_kv = 128 key heads),
  // fused: read and write 2 B each forward.
  const auto& a = test::arch("deepseek-v3");
  const auto e = model::estimate_training(a, mla_plan(2, true), test::node_system("dgx-h100"), Explain::on);
  const model::OpCost* r = mla_op(e.layer_ops, "rotary");
  REQUIRE(r != nullptr);
  CHECK(r->bytes.raw() == gptest::approx(4096.0 * (64 * 64 + 64) * 2 * 2));
}
