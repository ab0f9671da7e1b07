#include <doctest/doctest.h>
#include "approx.hpp"

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/roofline.hpp"
#include "library.hpp"

using namespace gpuplan;
using namespace gpuplan::units::literals;
using gpuplan::test::arch;

TEST_CASE("training FLOPs per token equal Megatron-LM's 72·l·h²·(1 + s/6h + V/12lh) without recompute") {
  // Narayanan et al. SC'21 eq. 3 is 96·B·s·l·h²(1 + s/6h + V/16lh) *with* recompute (4 passes); without it the
  // same derivation gives 72·B·s·l·h²(1 + s/6h + V/12lh) per step, i.e. per token divide by B·s.
  const auto& a = arch("megatron-gpt-145.6b");
  const double l = double(a.layers), h = double(a.hidden), V = double(a.vocab), s = 2048;
  const double expected = 72 * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  const auto f = model::flops_per_token(a, 2048, Explain::off);
  CHECK(f.training.raw() == gptest::approx(expected).epsilon(1e-12));
}

TEST_CASE("matmul FLOPs are 2 per active non-embedding weight plus the LM head") {
  const auto& a = arch("llama-3.1-8b");
  const auto p = model::parameter_counts(a, Explain::off);
  const auto f = model::flops_per_token(a, 1, Explain::off);
  // untied: active = matmul weights + embedding + norms
  CHECK(f.matmul_params == p.total - p.embedding - p.norms);
}

TEST_CASE("attention FLOPs grow linearly with context and sliding layers stop at the window") {
  const auto& llama = arch("llama-3.1-8b");
  const auto a1 = model::flops_per_token(llama, 1000, Explain::off).attention_forward;
  const auto a2 = model::flops_per_token(llama, 2000, Explain::off).attention_forward;
  CHECK(a2.raw() == gptest::approx(2 * a1.raw()));
  // 4·L·h·c for MHA-sized heads: Llama 3.1 8B has n_q·d = h.
  CHECK(a1.raw() == gptest::approx(4.0 * 32 * 4096 * 1000));
  const auto& oss = arch("gpt-oss-20b");  // half the layers slide over 128 tokens
  const auto short_ctx = model::flops_per_token(oss, 128, Explain::off).attention_forward;
  const auto long_ctx = model::flops_per_token(oss, 1280, Explain::off).attention_forward;
  CHECK(long_ctx.raw() == gptest::approx(short_ctx.raw() * (10 + 1) / 2));
}

TEST_CASE("KV cache, Llama-2-7B bf16: 512 KiB per token, 1.07/2.15/4.29/17.2 GB (textbook T8, T9)") {
  const auto& a = arch("llama-2-7b");
  const auto k = model::kv_cache_size(a, 2048, 2.0, Explain::off);
  CHECK(k.per_token_full.raw() == 524288.0);
  CHECK(units::format(k.per_token_full, units::BytePrefix::binary) == "512 KiB");
  CHECK(units::to_GB(k.per_sequence) == gptest::approx(1.07).epsilon(0.005));
  CHECK(units::to_GB(model::kv_cache_size(a, 4096, 2.0, Explain::off).per_sequence) == gptest::approx(2.15).epsilon(0.005));
  CHECK(units::to_GB(model::kv_cache_size(a, 8192, 2.0, Explain::off).per_sequence) == gptest::approx(4.29).epsilon(0.005));
  CHECK(units::to_GB(model::kv_cache_size(a, 32768, 2.0, Explain::off).per_sequence) == gptest::approx(17.2).epsilon(0.005));
}

TEST_CASE("KV cache, Llama-3-70B GQA 8K bf16: 2.68 GB = 2.5 GiB per sequence (textbook T10)") {
  const auto k = model::kv_cache_size(arch("llama-3-70b"), 8192, 2.0, Explain::off);
  CHECK(units::to_GB(k.per_sequence) == gptest::approx(2.68).epsilon(0.005));
  CHECK(units::to_GiB(k.per_sequence) == gptest::approx(2.5));
}

TEST_CASE("KV cache, 70B at 4K is 1.34 GB (textbook T11)") {
  CHECK(units::to_GB(model::kv_cache_size(arch("llama-3.1-70b"), 4096, 2.0, Explain::off).per_sequence) ==
        gptest::approx(1.34).epsilon(0.005));
}

TEST_CASE("MLA caches the latent: DeepSeek-V3 stores (512 + 64)·61 elements per token") {
  const auto k = model::kv_cache_size(arch("deepseek-v3"), 1, 2.0, Explain::on);
  CHECK(k.per_token_full.raw() == (512 + 64) * 61 * 2);
  CHECK(k.elements_per_token_layer == 576);
  REQUIRE_FALSE(k.derivation.notes.empty());
}

TEST_CASE("sliding-window layers cap the cache: GPT-OSS-20B at 128K") {
  const auto& a = arch("gpt-oss-20b");  // 24 layers, 12 sliding (128 tokens), 8 KV heads of 64
  const auto k = model::kv_cache_size(a, 131072, 2.0, Explain::off);
  const double per_layer_token = 2.0 * 8 * 64 * 2;
  CHECK(k.per_token_full.raw() == per_layer_token * 24);
  CHECK(k.per_sequence.raw() == per_layer_token * (12.0 * 131072 + 12.0 * 128));
}

TEST_CASE("fp8 KV halves bf16 KV") {
  const auto& a = arch("llama-3.1-8b");
  CHECK(model::kv_cache_size(a, 4096, 1.0, Explain::off).per_sequence.raw() * 2 ==
        model::kv_cache_size(a, 4096, 2.0, Explain::off).per_sequence.raw());
}

TEST_CASE("ridge points: H100 295, H200 206, B200 281 FLOP/B (textbook T2)") {
  auto ridge = [](units::FlopRate p, units::Bandwidth b) {
    return model::ridge_point(p, b, Origin::datasheet("x"), Origin::datasheet("y"), Explain::off).value.raw();
  };
  CHECK(ridge(989_TFLOPs, 3.35_TBps) == gptest::approx(295.2).epsilon(0.001));
  CHECK(ridge(989_TFLOPs, 4.8_TBps) == gptest::approx(206.0).epsilon(0.001));
  CHECK(ridge(2250_TFLOPs, 8.0_TBps) == gptest::approx(281.25));
}
