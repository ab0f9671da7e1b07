// A training layer's parameters are the fold of its op graph's weights (stage_shapes.cpp layer_params; issue #20:
// "no layer quantity is computed outside the graph"), and the stages hold those layers. Sizes by hand from the
// models' config.json (data/models/llama-3.1-8b.json, deepseek-v3.json).
#include <doctest/doctest.h>
#include "approx.hpp"

#include "gpuplan/model/params.hpp"
#include "library.hpp"
#include "memory_core.hpp"

using namespace gpuplan;
using gptest::approx;

namespace {

model::LayerKind moe_kind() {
  model::LayerKind k;
  k.moe = true;
  return k;
}

}  // namespace

TEST_CASE("a Llama-3.1-8B layer holds 218,112,000 parameters, none of them experts, and the final norm 4,096") {
  // h 4096, 32 query and 8 KV heads of 128, SwiGLU width 14336, two RMSNorms, no biases:
  // q 4096·4096 + k, v 2·4096·8·128 + o 4096·4096 + MLP 3·4096·14336 + norms 2·4096.
  const auto& a = test::arch("llama-3.1-8b");
  const double layer = 4096.0 * 4096 + 2.0 * 4096 * 8 * 128 + 4096.0 * 4096 + 3.0 * 4096 * 14336 + 2.0 * 4096;
  CHECK(layer == 218'112'000.0);
  const model::detail::LayerParams lp = model::detail::layer_params(a, model::LayerKind{});
  CHECK(lp.dense == approx(layer));
  CHECK(lp.expert == 0.0);
  const model::detail::LayerKinds k = model::detail::layer_kinds(a, model::parameter_counts(a, Explain::off));
  CHECK(k.dense.dense == approx(layer));
  CHECK(k.moe.dense == approx(layer));  // no MoE layer: the MoE kind is the dense layer
  CHECK(k.final_norm == approx(4096.0));
}

TEST_CASE("a DeepSeek-V3 layer: MLA and the dense FFN, or MLA with the router and shared expert beside 256 experts") {
  // h 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128, qk_rope 64, v 128 (arXiv:2412.19437 §2.1):
  // q_a 7168·1536 + its norm 1536 + q_b 1536·128·192 + kv_a 7168·576 + its norm 512 + kv_b 512·128·256
  // + o 128·128·7168; two RMSNorms 2·7168.
  const auto& a = test::arch("deepseek-v3");
  const double mla = 7168.0 * 1536 + 1536 + 1536.0 * 128 * 192 + 7168.0 * 576 + 512 + 512.0 * 128 * 256 +
                     128.0 * 128 * 7168;
  CHECK(mla == 187'107'328.0);
  const double norms = 2.0 * 7168;
  // The first three layers: a dense SwiGLU FFN of 18432.
  const model::detail::LayerParams dense = model::detail::layer_params(a, model::LayerKind{});
  CHECK(dense.dense == approx(mla + norms + 3.0 * 7168 * 18432));
  CHECK(dense.expert == 0.0);
  // The other 58: router 7168·256 + the score-correction bias 256, one shared expert 3·7168·2048 (replicated over
  // EP), 256 routed experts of 3·7168·2048 (split over EP).
  const model::detail::LayerParams moe = model::detail::layer_params(a, moe_kind());
  CHECK(moe.dense == approx(mla + norms + 7168.0 * 256 + 256 + 3.0 * 7168 * 2048));
  CHECK(moe.expert == approx(256.0 * 3 * 7168 * 2048));
  const model::ParameterCounts p = model::parameter_counts(a, Explain::off);
  const model::detail::LayerKinds k = model::detail::layer_kinds(a, p);
  CHECK(k.moe.expert == approx(moe.expert));
  CHECK(k.final_norm == approx(7168.0));
  // One stage holds every layer: the layers, embedding, final norm and LM head are the model's count.
  wl::TrainingPlan plan;
  const auto stages = model::detail::stage_shapes(a, p, plan);
  REQUIRE(stages.size() == 1);
  CHECK(stages[0].p_dense == approx(3 * dense.dense + 58 * moe.dense));
  CHECK(stages[0].p_expert == approx(58 * moe.expert));
  CHECK(stages[0].p_dense + stages[0].p_expert + double(p.embedding + p.lm_head) + k.final_norm ==
        approx(double(p.total)));
}

TEST_CASE("a nominal count (the textbook's 7B on Llama-2-7B's 32 layers) is spread over the layers, no final norm") {
  const auto& a = test::arch("llama-2-7b");
  model::ParameterCounts p;
  p.total = 7'000'000'000;
  p.attention = p.total;
  p.attention_per_layer = p.total / a.layers;
  const model::detail::LayerKinds k = model::detail::layer_kinds(a, p);
  CHECK(k.dense.dense == approx(218'750'000.0));
  CHECK(k.moe.dense == approx(218'750'000.0));
  CHECK(k.dense.expert == 0.0);
  CHECK(k.final_norm == 0.0);
}
