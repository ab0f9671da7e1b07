// The serving engine's profiled activation peak, folded over the layer kinds' op graphs (serving_memory.cpp
// serving_activation_peak; issue #20): N·b·(2h + the widest layer's max(attention, FFN) per GPU) + 2·S·V·4.
// Widths by hand from each model's config.json (data/models/).
#include <doctest/doctest.h>
#include "approx.hpp"

#include "gpuplan/model/serving_memory.hpp"
#include "library.hpp"

using namespace gpuplan;
using gptest::approx;

TEST_CASE("Llama-3.1-8B at TP 2: its FFN is the widest, 3·14336/2 per token beside 2h, plus the sampler's logits") {
  // Attention per GPU: q and output 16 heads, k and v 4 KV heads, of 128: (2·16 + 2·4)·128 = 5120; the SwiGLU's gate,
  // up and product 3·14336/2 = 21504. 8192 batched tokens × 2 B × (2·4096 + 21504) + 2·256 sequences·128256·4 B.
  const auto b = model::serving_activation_peak(test::arch("llama-3.1-8b"), 2, 8192, 256, 2.0);
  CHECK(b.raw() == approx(8192.0 * 2 * (2 * 4096 + 21504) + 2.0 * 256 * 128256 * 4));
}

TEST_CASE("DeepSeek-V3 at TP 8: MLA's expanded prefill attention is wider than its dense or MoE FFN") {
  // 16 of 128 heads per GPU: q and k of 128 + 64, v and output of 128: 16·(2·192 + 2·128) = 10240. FFN: the dense
  // layers 3·18432/8 = 6912, the MoE layers 3·(8 routed + 1 shared)·2048/8 = 6912. Vocabulary 129280.
  const auto b = model::serving_activation_peak(test::arch("deepseek-v3"), 8, 8192, 256, 2.0);
  CHECK(b.raw() == approx(8192.0 * 2 * (2 * 7168 + 10240) + 2.0 * 256 * 129280 * 4));
}

TEST_CASE("Mixtral 8x7B at TP 2: the two routed experts a token visits, each 3·14336 wide, over TP") {
  // Attention (2·16 + 2·4)·128 = 5120; FFN 2 experts · 3·14336 / 2 = 43008. Vocabulary 32000.
  const auto b = model::serving_activation_peak(test::arch("mixtral-8x7b"), 2, 2048, 256, 2.0);
  CHECK(b.raw() == approx(2048.0 * 2 * (2 * 4096 + 43008) + 2.0 * 256 * 32000 * 4));
}
