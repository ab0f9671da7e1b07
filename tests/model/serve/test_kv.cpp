// KV cache and serving memory (model/include/gpuplan/model/kv_cache.hpp, serving_memory.hpp): the textbook cases
// T11, T18 and T19 exactly under their simplifying assumptions (textbook.md), the fuller model next to them,
// properties, an MLA case (DeepSeek-V3), a sliding-window case (GPT-OSS), the engine knobs, and `gpuplan kv` end to
// end (exit codes and messages).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "test_paths.hpp"
#include "../cli/cli_runner.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "library.hpp"

using namespace gpuplan;
using namespace gpuplan::units::literals;
using gpuplan::test::arch;

namespace {

using test::hardware;
const hw::GpuSpec& gpu(const std::string& id) {
  const hw::GpuSpec* g = hardware().find_gpu(id);
  REQUIRE_MESSAGE(g != nullptr, "GPU not in data: " << id);
  return *g;
}

model::ServingMemory serve(const wl::TransformerArch& a, const hw::GpuSpec& g, const model::ServingMemoryPlan& p,
                           Explain ex = Explain::off) {
  return model::serving_memory(a, model::parameter_counts(a, Explain::off), g, p, ex);
}

/// The textbook's back-of-envelope assumptions as explicit options (what `gpuplan kv --simple` sets): vendor "80 GB",
/// no runtime overheads, nominal bytes per weight, a contiguous cache, the pooled GPU count.
model::ServingMemoryPlan textbook(model::StoreDtype weights, double nominal_params) {
  model::ServingMemoryPlan p;
  p.engine = model::MemoryEngine::plain;
  p.memory_fraction = 1.0;
  p.capacity = model::CapacityBasis::label;
  p.overheads = model::no_serving_overheads();
  p.weights = model::default_weight_quant(weights);
  p.weight_scale_overhead = false;
  p.nominal_params = nominal_params;
  p.block_size = 1;
  p.engine_block_size = false;
  p.gpu_count = model::GpuCountMethod::pooled;
  return p;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("textbook") {
  TEST_CASE("T11: 70B bf16 at 4K, one sequence: 140 GB + 1.34 GB = 141.3 GB -> two 80 GB GPUs by memory alone") {
    auto p = textbook(model::StoreDtype::bf16, 70e9);
    p.context = 4096;
    const auto r = serve(arch("llama-3.1-70b"), gpu("h100-sxm5-80gb"), p);
    CHECK(r.weights_total.raw() == 140e9);
    CHECK(r.kv_bytes_per_token.raw() == 2.0 * 80 * 8 * 128 * 2);  // 320 KiB
    CHECK(r.kv_total.raw() == 4096.0 * 327680.0);                 // 1.342 GB
    CHECK(units::to_GB(r.memory_needed) == gptest::approx(141.34).epsilon(1e-4));
    REQUIRE(r.gpus_needed_pooled.has_value());
    CHECK(*r.gpus_needed_pooled == 2);
    CHECK(*r.gpus_needed == 2);
    // As a layout it is also two: TP 2 holds 70.7 GB per GPU.
    REQUIRE(r.best_layout.has_value());
    CHECK(r.best_layout->gpus() == 2);
    CHECK(r.best_layout->tp == 2);
    // One GPU is infeasible (exit 3), with the reason.
    CHECK_FALSE(r.ok);
    REQUIRE_FALSE(r.reasons.empty());
    CHECK(r.reasons.front().find("leave no KV cache in the usable 80 GB") != std::string::npos);
  }

  TEST_CASE("T11 in the fuller model: the real 70.6B weights, vLLM at 0.9 on device memory, overheads: still two") {
    model::ServingMemoryPlan p;  // defaults: vLLM 0.9, blocks of 16, default overheads, scales
    p.context = 4096;
    p.tp = 2;
    const auto& a = arch("llama-3.1-70b");
    const auto r = serve(a, gpu("h100-sxm5-80gb"), p);
    CHECK(units::to_GB(r.weights_total) == gptest::approx(141.1).epsilon(0.001));  // 70.55B × 2 B
    CHECK(r.ok);
    CHECK(r.max_concurrency >= 1);
    REQUIRE(r.gpus_needed.has_value());
    CHECK(*r.gpus_needed == 2);
    // The pool is what vLLM leaves: 0.9·C − weights − activations − graphs.
    const auto& s = r.stages.front();
    CHECK(s.kv_pool.raw() == gptest::approx((s.capacity * 0.9 - s.weights - s.activations - s.cuda_graphs).raw()));
  }

  TEST_CASE("T18: 7B GQA (8 KV heads), INT4, 1000 users x 1K tokens: 3.5 + 131 x 1.3 = 174 GB -> 3 GPUs at 80% usable") {
    auto p = textbook(model::StoreDtype::int4, 7e9);
    p.context = 1000;
    p.concurrency = 1000;
    p.paging_overhead = 0.3;
    p.memory_fraction = 0.8;
    const auto r = serve(arch("mistral-7b-v0.1"), gpu("h100-sxm5-80gb"), p);
    CHECK(r.weights_total.raw() == 3.5e9);
    CHECK(r.kv_bytes_per_token.raw() == 131072.0);               // 2·32·8·128·2
    CHECK(units::to_GB(r.kv_bytes_per_sequence) == gptest::approx(0.131072));  // "0.13 GB per user"
    CHECK(units::to_GB(r.kv_total) == gptest::approx(131.072 * 1.3));
    CHECK(units::to_GB(r.memory_needed) == gptest::approx(173.89).epsilon(1e-4));  // "174 GB"
    CHECK(units::to_GB(r.usable_per_gpu_pooled) == gptest::approx(64.0));
    REQUIRE(r.gpus_needed.has_value());
    CHECK(*r.gpus_needed == 3);  // not the common "2"
    // Whole-sequence replicas give the same 3 here: 355 users per GPU.
    REQUIRE(r.best_layout.has_value());
    CHECK(r.best_layout->gpus() == 3);
    CHECK(r.best_layout->max_concurrency == 355);
  }

  TEST_CASE("T19: 7B MHA (32 KV heads): 524 GB of KV -> 11 GPUs pooled - 12 as whole-sequence replicas") {
    auto p = textbook(model::StoreDtype::int4, 7e9);
    p.context = 1000;
    p.concurrency = 1000;
    p.paging_overhead = 0.3;
    p.memory_fraction = 0.8;
    const auto r = serve(arch("llama-2-7b"), gpu("h100-sxm5-80gb"), p);
    CHECK(units::to_GB(r.kv_bytes_per_sequence) == gptest::approx(0.524288));  // "0.52 GB per user"
    CHECK(units::to_GB(r.kv_total / 1.3) == gptest::approx(524.288));          // "524 GB KV"
    REQUIRE(r.gpus_needed.has_value());
    CHECK(*r.gpus_needed == 11);
    // A replica holds whole sequences: (64 − 3.5) GB / (0.524 GB × 1.3) = 88 per GPU, and 11 × 88 < 1000.
    REQUIRE(r.best_layout.has_value());
    CHECK(r.best_layout->gpus() == 12);
  }

  TEST_CASE("T18/T19 in the fuller model: real weights with group scales, vLLM 0.9, overheads, blocks of 16") {
    model::ServingMemoryPlan p;
    p.weights = model::default_weight_quant(model::StoreDtype::int4);
    p.context = 1000;
    p.concurrency = 1000;
    const auto gqa = serve(arch("mistral-7b-v0.1"), gpu("h100-sxm5-80gb"), p);
    const auto mha = serve(arch("llama-2-7b"), gpu("h100-sxm5-80gb"), p);
    // int4 g128 with fp16 scale + 4-bit zero: 0.5195 B per quantized weight; embeddings and LM head stay 16-bit.
    CHECK(model::weight_bytes_per_param(p.weights, 4096) == gptest::approx(0.5 + 2.5 / 128));
    CHECK(units::to_GB(gqa.weights_total) > 3.5);
    // Blocks of 16 round 1000 tokens up to 1008.
    CHECK(gqa.kv_total.raw() == gptest::approx(1000.0 * 1008.0 * 131072.0));
    REQUIRE(gqa.gpus_needed.has_value());
    REQUIRE(mha.gpus_needed.has_value());
    CHECK(*gqa.gpus_needed == 2);  // no 30% paging allowance, 0.9 of 85 GB: PagedAttention's waste is the last block
    CHECK(*mha.gpus_needed == 8);
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("kv bytes") {
  TEST_CASE("KV per GPU halves each time TP doubles, up to the 8 KV heads - past them heads are replicated") {
    const auto& a = arch("llama-3.1-70b");
    const auto kv = model::default_kv_quant(model::StoreDtype::bf16);
    double prev = model::kv_token_bytes(a, kv, 1, Explain::off).per_layer.raw();
    for (int tp : {2, 4, 8}) {
      const auto k = model::kv_token_bytes(a, kv, tp, Explain::off);
      CHECK(k.per_layer.raw() == gptest::approx(prev / 2));
      CHECK(k.replication == 1);
      prev = k.per_layer.raw();
    }
    const auto k16 = model::kv_token_bytes(a, kv, 16, Explain::on);
    CHECK(k16.per_layer.raw() == prev);
    CHECK(k16.replication == 2);
    CHECK(k16.kv_heads_per_gpu == 1);
    bool said = false;
    for (const auto& n : k16.derivation.notes) said = said || n.find("replicated on 2 ranks") != std::string::npos;
    CHECK(said);
  }

  TEST_CASE("fp8 KV is exactly half of bf16 (per-tensor scales add nothing per token) - int8/int4 add per-token scales") {
    const auto& a = arch("llama-3.1-8b");  // 8 KV heads of 128
    const auto bf16 = model::kv_token_bytes(a, model::default_kv_quant(model::StoreDtype::bf16), 1, Explain::off);
    const auto fp8 = model::kv_token_bytes(a, model::default_kv_quant(model::StoreDtype::fp8), 1, Explain::off);
    CHECK(fp8.per_layer.raw() * 2 == bf16.per_layer.raw());
    CHECK(fp8.scale_bytes_per_layer.raw() == 0);
    // fp8 with per-token-per-head scales: + 2·n_kv·4 B per layer.
    auto fp8_tok = model::default_kv_quant(model::StoreDtype::fp8);
    fp8_tok.scales = model::KvScaleGranularity::per_token_head;
    CHECK(model::kv_token_bytes(a, fp8_tok, 1, Explain::off).per_layer.raw() == bf16.per_layer.raw() / 2 + 2 * 8 * 4);
    // int8: 1 B per element + fp16 scale + fp16 zero per head per token, for K and V: (d + 4)/(2d) of bf16.
    const auto i8 = model::kv_token_bytes(a, model::default_kv_quant(model::StoreDtype::int8), 1, Explain::off);
    CHECK(i8.per_layer.raw() == gptest::approx(bf16.per_layer.raw() * (128.0 + 4.0) / 256.0));
    const auto i4 = model::kv_token_bytes(a, model::default_kv_quant(model::StoreDtype::int4), 1, Explain::off);
    CHECK(i4.per_layer.raw() == 2 * 8 * (64 + 4));
    CHECK(i4.per_token_model.raw() == 32.0 * 2 * 8 * (64 + 4));
  }

  TEST_CASE("the contiguous sequence KV equals kv_cache_size, sliding layers included (GPT-OSS-20B at 128K)") {
    const auto& a = arch("gpt-oss-20b");
    const auto tok = model::kv_token_bytes(a, model::default_kv_quant(model::StoreDtype::bf16), 1, Explain::off);
    const auto st = model::pipeline_stages(a, 1).front();
    const auto q = model::sequence_kv(a, st, tok, 131072, 1);
    CHECK(q.per_sequence.raw() == model::kv_cache_size(a, 131072, 2.0, Explain::off).per_sequence.raw());
    CHECK(q.block_waste.raw() == 0);
  }

  TEST_CASE("GPT-OSS-120B sliding layers hold 9 blocks of 16 (window 128) while full layers grow with the context") {
    const auto& a = arch("gpt-oss-120b");  // 36 layers alternating sliding (128) and full; 8 KV heads of 64
    REQUIRE(a.sliding_window == 128);
    const auto tok = model::kv_token_bytes(a, model::default_kv_quant(model::StoreDtype::bf16), 1, Explain::off);
    CHECK(tok.per_layer.raw() == 2 * 8 * 64 * 2);
    const auto st = model::pipeline_stages(a, 1).front();
    REQUIRE(st.sliding == 18);
    CHECK(model::kv_blocks(131072, 16, 128) == 9);  // ⌈127/16⌉ + 1
    CHECK(model::kv_blocks(100, 16, 128) == 7);     // not yet past the window
    const auto q = model::sequence_kv(a, st, tok, 131072, 16);
    CHECK(q.per_sequence.raw() == 2048.0 * (18 * 131072 + 18 * 144));
    // A full-attention model of the same shape would need almost twice as much.
    CHECK(q.per_sequence.raw() < 0.51 * 2048.0 * 36 * 131072);
  }

  TEST_CASE("DeepSeek-V3 MLA: 61 x 576 x 2 B = 70,272 B per token on every GPU at any TP (the latent is replicated)") {
    const auto& a = arch("deepseek-v3");
    const auto kv = model::default_kv_quant(model::StoreDtype::bf16);
    for (int tp : {1, 8, 16}) {
      const auto k = model::kv_token_bytes(a, kv, tp, Explain::off);
      CHECK(k.per_layer.raw() * 61 == 70272.0);
      CHECK(k.replication == tp);
    }
    // The MHA formula with 128 KV heads of 192/128 would be ~70x larger: the error users make (N6).
    CHECK(model::kv_token_bytes(a, kv, 1, Explain::off).per_token_model.raw() == 70272.0);
  }

  TEST_CASE("a larger (power-of-two) block never lowers the block waste - the expected waste is (B-1)/2 tokens") {
    const auto& a = arch("llama-3.1-8b");
    const auto tok = model::kv_token_bytes(a, model::default_kv_quant(model::StoreDtype::bf16), 1, Explain::off);
    const auto st = model::pipeline_stages(a, 1).front();
    for (std::int64_t s : {1, 15, 16, 17, 100, 1000, 1023, 4096, 5000}) {
      double prev = -1, prev_expected = -1;
      for (std::int64_t B = 1; B <= 256; B *= 2) {
        const auto q = model::sequence_kv(a, st, tok, s, B);
        CAPTURE(s);
        CAPTURE(B);
        CHECK(q.block_waste.raw() >= prev);
        CHECK(q.expected_block_waste.raw() >= prev_expected);
        CHECK(q.expected_block_waste.raw() == gptest::approx(tok.per_layer.raw() * 32 * double(B - 1) / 2));
        CHECK(q.block_waste.raw() == tok.per_layer.raw() * 32 * double(((s + B - 1) / B) * B - s));
        prev = q.block_waste.raw();
        prev_expected = q.expected_block_waste.raw();
      }
    }
  }

  TEST_CASE("a shared prefix is stored once, in whole blocks only") {
    const auto& a = arch("llama-3.1-8b");
    const auto tok = model::kv_token_bytes(a, model::default_kv_quant(model::StoreDtype::bf16), 1, Explain::off);
    const auto st = model::pipeline_stages(a, 1).front();
    const double per_token = tok.per_layer.raw() * 32;
    const auto q = model::sequence_kv(a, st, tok, 4096, 16, 1000);  // 62 whole blocks = 992 tokens shared
    CHECK(q.shared_prefix_blocks == 62);
    CHECK(q.shared_prefix.raw() == per_token * 992);
    CHECK(q.for_sequences(10).raw() == per_token * (992 + 10 * (4096 - 992)));
    // Shorter than one block: nothing shared (vllm#54607).
    CHECK(model::sequence_kv(a, st, tok, 4096, 16, 15).shared_prefix.raw() == 0);
  }

  TEST_CASE("pipeline stages split layers as vLLM does: the extra layers go to the stages before the last") {
    const auto& a = arch("deepseek-v3");  // 61 layers
    const auto st = model::pipeline_stages(a, 4);
    REQUIRE(st.size() == 4);
    CHECK(st[0].count == 15);
    CHECK(st[1].count == 15);
    CHECK(st[2].count == 16);
    CHECK(st[3].count == 15);
    CHECK(st[0].first_stage);
    CHECK(st[3].last_stage);
    CHECK(st[0].moe == 12);  // the first 3 layers are dense
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("serving memory") {
  TEST_CASE("max concurrency never rises with the context - max context never rises with the concurrency") {
    const auto& a = arch("llama-3.1-8b");
    model::ServingMemoryPlan p;
    std::int64_t prev = std::numeric_limits<std::int64_t>::max();
    for (std::int64_t s : {256, 1000, 2048, 4096, 8192, 32768, 131072}) {
      p.context = s;
      const auto r = serve(a, gpu("h100-sxm5-80gb"), p);
      CAPTURE(s);
      CHECK(r.max_concurrency <= prev);
      prev = r.max_concurrency;
    }
    p.context = 4096;
    std::int64_t prev_ctx = std::numeric_limits<std::int64_t>::max();
    for (std::int64_t n : {1, 2, 8, 64, 256}) {
      p.concurrency = n;
      const auto r = serve(a, gpu("h100-sxm5-80gb"), p);
      CAPTURE(n);
      CHECK(r.max_context_tokens <= prev_ctx);
      prev_ctx = r.max_context_tokens;
    }
  }

  TEST_CASE("max context is the largest that fits: one more token does not") {
    const auto& a = arch("llama-3.1-8b");
    model::ServingMemoryPlan p;
    p.concurrency = 64;
    p.block_size = 1;
    const auto r = serve(a, gpu("h100-sxm5-80gb"), p);
    REQUIRE(r.max_context_limit == "memory");
    const double pool = r.stages.front().kv_pool.raw();
    const double per_token = r.kv_bytes_per_token_per_gpu.raw();
    CHECK(64.0 * double(r.max_context_tokens) * per_token <= pool);
    CHECK(64.0 * double(r.max_context_tokens + 1) * per_token > pool);
  }

  TEST_CASE("weights per GPU do not rise with TP or PP") {
    const auto& a = arch("llama-3.1-70b");
    model::ServingMemoryPlan p;
    double prev = 1e300;
    for (int tp : {1, 2, 4, 8}) {
      p.tp = tp;
      const auto r = serve(a, gpu("h200-sxm-141gb"), p);
      CHECK(r.stages[std::size_t(r.binding_stage)].weights.raw() < prev);
      prev = r.stages[std::size_t(r.binding_stage)].weights.raw();
    }
    p.tp = 1;
    p.pp = 2;
    const auto r2 = serve(a, gpu("h200-sxm-141gb"), p);
    double heaviest = 0;
    for (const auto& s : r2.stages) heaviest = std::max(heaviest, s.weights.raw());
    CHECK(heaviest < serve(a, gpu("h200-sxm-141gb"), model::ServingMemoryPlan{}).stages[0].weights.raw());
  }

  TEST_CASE("vLLM: gpu_memory_utilization is a fraction of total memory - start-up fails when context + NCCL exceed the rest") {
    const auto& a = arch("llama-3.1-8b");
    model::ServingMemoryPlan p;
    // 0.5% of the H100's 79.2 GiB (405 MiB) is less than the file's CUDA context alone (685 + 32 MiB).
    p.memory_fraction = 0.995;
    const auto r = serve(a, gpu("h100-sxm5-80gb"), p);
    CHECK_FALSE(r.ok);
    REQUIRE_FALSE(r.reasons.empty());
    CHECK(r.reasons.front().find("vLLM refuses to start") != std::string::npos);
    p.memory_fraction = 0.9;
    const auto ok = serve(a, gpu("h100-sxm5-80gb"), p);
    CHECK(ok.ok);
    // Before v0.21 CUDA graphs sit outside the fraction: more KV.
    p.cuda_graphs_in_budget = false;
    const auto old = serve(a, gpu("h100-sxm5-80gb"), p);
    CHECK(old.stages[0].kv_pool.raw() == gptest::approx(ok.stages[0].kv_pool.raw() + units::gibibytes(1).raw()));
  }

  TEST_CASE("serving takes the GPU file's CUDA context as training does: 685 + 32 MiB on Hopper, 1343 + 32 elsewhere") {
    const auto& a = arch("llama-3.1-8b");
    const model::ServingMemoryPlan p;  // default overheads: the generic context
    CHECK(p.overheads.cuda_context == units::mebibytes(1343 + 32));
    const auto h100 = serve(a, gpu("h100-sxm5-80gb"), p, Explain::on);
    CHECK(h100.stages[0].cuda_context == units::mebibytes(685 + 32));  // our H200's measurement, the file's figure
    CHECK(h100.plan.overheads.origin.find("h100-sxm5-80gb") != std::string::npos);
    const auto* ctx = h100.derivation.find("overheads");
    REQUIRE(ctx != nullptr);
    REQUIRE_FALSE(ctx->inputs.empty());
    CHECK(ctx->inputs.front().origin.kind == OriginKind::measurement);
    CHECK(ctx->inputs.front().origin.ref.find("#/memory/context_MiB") != std::string::npos);
    // An Ampere file records none: the generic figure, an assumption.
    const auto a100 = serve(a, gpu("a100-sxm4-80gb"), p, Explain::on);
    CHECK(a100.stages[0].cuda_context == units::mebibytes(1343 + 32));
    CHECK(a100.derivation.find("overheads")->inputs.front().origin.kind == OriginKind::assumption);
    // Overheads set to none stay none.
    model::ServingMemoryPlan none = p;
    none.overheads = model::no_serving_overheads();
    CHECK(serve(a, gpu("h100-sxm5-80gb"), none).stages[0].cuda_context.raw() == 0.0);
  }

  TEST_CASE("SGLang: mem_fraction_static of the pre-load free memory holds weights + KV - activations and graphs need the rest") {
    const auto& a = arch("llama-3.1-8b");
    model::ServingMemoryPlan p;
    p.engine = model::MemoryEngine::sglang;
    p.memory_fraction = 0.88;
    const auto r = serve(a, gpu("h100-sxm5-80gb"), p);
    const auto& s = r.stages[0];
    const auto base = s.capacity - s.cuda_context - s.nccl;
    CHECK(s.kv_pool.raw() == gptest::approx((base * 0.88 - s.weights).raw()));
    CHECK(r.ok);
    p.memory_fraction = 0.995;
    const auto tight = serve(a, gpu("h100-sxm5-80gb"), p);
    CHECK_FALSE(tight.ok);
    REQUIRE_FALSE(tight.reasons.empty());
    CHECK(tight.reasons.front().find("lower --mem-fraction-static") != std::string::npos);
  }

  TEST_CASE("DeepSeek-V3 fp8 on 8 x H200 at 32K: fits, MLA-aware - TP 8 stores the whole latent on every GPU") {
    const auto& a = arch("deepseek-v3");
    model::ServingMemoryPlan p;
    p.tp = 8;
    p.context = 32768;
    p.weights = model::default_weight_quant(model::StoreDtype::fp8);
    const auto r = serve(a, gpu("h200-sxm-141gb"), p, Explain::on);
    CHECK(r.ok);
    CHECK(r.plan.block_size == 64);  // FlashMLA on Hopper
    CHECK(r.kv_bytes_per_token_per_gpu.raw() == 70272.0);
    CHECK(r.kv_bytes_per_sequence_per_gpu.raw() == 70272.0 * 32768);
    // ~86 GB of weights per GPU (671B fp8 / 8 plus replicated MLA down-projections and 16-bit embeddings).
    const double w = units::to_GB(r.stages[0].weights);
    CHECK(w > 84.0);
    CHECK(w < 90.0);
    CHECK(r.max_concurrency >= 10);
    CHECK(r.max_concurrency <= 25);
    // With MHA-style accounting (128 heads × (192 + 128) per token) nothing would fit.
    CHECK(r.derivation.find("kv.token") != nullptr);
    bool said = false;
    for (const auto& n : r.notes) said = said || n.find("whole latent cache") != std::string::npos;
    CHECK(said);
    // bf16 weights do not fit on 8 × H200 at all.
    p.weights = model::default_weight_quant(model::StoreDtype::bf16);
    CHECK_FALSE(serve(a, gpu("h200-sxm-141gb"), p).ok);
  }

  TEST_CASE("layout problems are reasons, not crashes: TP 3 on 64 heads, TP 16 on 8 KV heads replicates") {
    const auto& a = arch("llama-3.1-70b");
    model::ServingMemoryPlan p;
    p.tp = 3;
    const auto r = serve(a, gpu("h100-sxm5-80gb"), p);
    CHECK_FALSE(r.ok);
    CHECK(r.reasons.front().find("TP 3 does not divide the 64 query heads") != std::string::npos);
    p.tp = 16;
    const auto r16 = serve(a, gpu("h100-sxm5-80gb"), p);
    CHECK(r16.token.replication == 2);
  }

  TEST_CASE("--gpus: the concurrency must fit on whole replicas of the GPUs given") {
    const auto& a = arch("llama-3.1-8b");
    model::ServingMemoryPlan p;
    p.context = 32768;
    p.concurrency = 1000;
    p.gpus = 2;
    const auto r = serve(a, gpu("h100-sxm5-80gb"), p);
    CHECK_FALSE(r.ok);
    CHECK(r.reasons.back().find("do not fit on 2 GPUs") != std::string::npos);
    REQUIRE(r.gpus_needed.has_value());
    p.gpus = *r.gpus_needed;
    // The layout search may pick a different TP; at TP 1 the count is replicas × 1.
    if (r.best_layout->tp == 1 && r.best_layout->pp == 1) CHECK(serve(a, gpu("h100-sxm5-80gb"), p).ok);
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("gpuplan kv") {
  using namespace gpuplan::cli_test;

  TEST_CASE("T18 with --simple reproduces 3 GPUs and 174 GB, exit 0, and shows the fuller model") {
    const Run r = run({"kv", "--model", "mistral-7b-v0.1", "--simple", "--weight-dtype", "int4", "--params", "7e9",
                       "--context", "1000", "--concurrency", "1000", "--paging-overhead", "0.3", "--usable-fraction",
                       "0.8", "--format", "json"});
    INFO(r.err);
    CHECK(r.rc == 0);
    const auto j = parse_json(r);
    CHECK(j["gpus_needed"] == 3);
    CHECK(j["memory_needed_bytes"].get<double>() == gptest::approx(173.8936e9).epsilon(1e-6));
    CHECK(j["kv_bytes_per_token"] == 131072);
    CHECK(j["feasible"] == true);
    for (const char* key : {"kv_bytes_per_token", "kv_bytes_per_sequence", "max_concurrency", "max_context_tokens",
                            "gpus_needed", "weights_bytes_per_gpu", "feasible", "reasons", "memory_per_gpu",
                            "fuller_model"})
      CHECK_MESSAGE(j.contains(key), key);
  }

  TEST_CASE("every case of data/validation/kv_cases.json gives the textbook's answers") {
    const auto cases = nlohmann::json::parse(slurp(kData + "/validation/kv_cases.json"));
    REQUIRE(cases["cases"].size() >= 3);
    for (const auto& c : cases["cases"]) {
      std::vector<std::string> args{"kv"};
      for (const auto& a : c["args"]) args.push_back(a.get<std::string>());
      args.insert(args.end(), {"--format", "json"});
      const Run r = run(args);
      CAPTURE(c["id"].get<std::string>());
      INFO(r.err);
      CHECK(r.rc == 0);
      const auto j = parse_json(r);
      for (const auto& [key, e] : c["expected"].items()) {
        const auto& captured_key = key;  // clang 14: no structured binding in CAPTURE's lambda
        CAPTURE(captured_key);
        REQUIRE(j.contains(key));
        CHECK(std::abs(j[key].get<double>() - e["value"].get<double>()) <= e["abs_tolerance"].get<double>() * (1 + 1e-9));
      }
    }
  }

  TEST_CASE("a model that does not fit is exit 3 with the reason and the GPUs it needs") {
    const Run r = run({"kv", "--model", "llama-3.1-70b", "--gpu", "h100"});
    CHECK(r.rc == kInfeasible);
    CHECK(contains(r.out, "Infeasible"));
    CHECK(contains(r.out, "No available memory for the cache blocks"));
    CHECK(contains(r.out, "GPUs needed by memory"));
  }

  TEST_CASE("bad input is exit 2 with the flag named: unknown model, unknown GPU, prefix longer than the context") {
    const Run m = run({"kv", "--model", "llama-3.1-7b"});
    CHECK(m.rc == kInvalid);
    CHECK(contains(m.err, "did you mean"));
    const Run g = run({"kv", "--model", "llama-3.1-8b", "--gpu", "h10"});
    CHECK(g.rc == kInvalid);
    CHECK(contains(g.err, "--gpu: error: unknown GPU 'h10'"));
    const Run p = run({"kv", "--model", "llama-3.1-8b", "--context", "100", "--prefix-tokens", "200"});
    CHECK(p.rc == kInvalid);
    CHECK(contains(p.err, "--prefix-tokens: error: a shared prefix of 200 tokens is longer than the context of 100"));
    const Run k = run({"kv", "--model", "llama-3.1-8b", "--engine", "sglang", "--gpu-memory-utilization", "0.9"});
    CHECK(k.rc == kInvalid);
    CHECK(contains(k.err, "--gpu-memory-utilization is a vllm setting but --engine is sglang"));
    const Run f = run({"kv", "--model", "llama-3.1-8b", "--gpu-memory-utilization", "1.5"});
    CHECK(f.rc == kInvalid);
    CHECK(contains(f.err, "1.5 is not a fraction in (0, 1]"));
    const Run s = run({"kv", "--model", "llama-3.1-8b", "--kv-scales", "per-token-head"});
    CHECK(s.rc == kInvalid);
    CHECK(contains(s.err, "a bf16 KV cache has no quantisation scales"));
  }

  TEST_CASE("each engine's fraction flag, name and default come from its policy (engine_memory_knob)") {
    // One table: the flag that names the engine, the name in messages, the default fraction (vLLM 0.9,
    // SGLang's fallback 0.88, a plain runtime 1.0); the budget line `kv` prints is built from the same entry.
    CHECK(model::engine_memory_knob(model::MemoryEngine::vllm).fraction_flag == "--gpu-memory-utilization");
    CHECK(model::engine_memory_knob(model::MemoryEngine::sglang).fraction_flag == "--mem-fraction-static");
    CHECK(model::engine_memory_knob(model::MemoryEngine::plain).fraction_flag == "--usable-fraction");
    CHECK(model::engine_memory_knob(model::MemoryEngine::sglang).default_fraction == gptest::approx(0.88));
    CHECK(model::describe_engine_budget(model::MemoryEngine::vllm, 0.85, false) ==
          "vLLM gpu_memory_utilization 0.85 (CUDA graphs outside the fraction)");
    CHECK(model::describe_engine_budget(model::MemoryEngine::sglang, 0.7, true) == "SGLang mem_fraction_static 0.7");
    CHECK(model::describe_engine_budget(model::MemoryEngine::plain, 0.9, true) == "usable fraction 0.9");
    const Run two = run({"kv", "--model", "llama-3.1-8b", "--mem-fraction-static", "0.8", "--usable-fraction", "0.9"});
    CHECK(two.rc == kInvalid);
    CHECK(contains(two.err, "give one of --gpu-memory-utilization (vLLM), --mem-fraction-static (SGLang), "
                            "--usable-fraction (plain)"));
    // The default fraction is what the flag-less run uses: SGLang's budget is 0.88 of (capacity - context - NCCL).
    const Run d = run({"kv", "--model", "llama-3.1-8b", "--engine", "sglang"});
    REQUIRE(d.rc == 0);
    CHECK(contains(d.out, "SGLang mem_fraction_static 0.88"));
  }

  TEST_CASE("csv has a stable header - --explain prints the derivation") {
    const Run c = run({"kv", "--model", "llama-3.1-8b", "--format", "csv"});
    REQUIRE(c.rc == 0);
    CHECK(starts_with(c.out, "model,gpu,tp,pp,kv_dtype,weight_dtype,context,concurrency,kv_bytes_per_token,"));
    const Run e = run({"kv", "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--weight-dtype", "fp8",
                       "--context", "32768", "--explain"});
    INFO(e.err);
    CHECK(e.rc == 0);
    CHECK(contains(e.out, "When using MLA during decode it becomes MQA"));
    CHECK(contains(e.out, "Engine memory budget (vllm)"));
  }
}
