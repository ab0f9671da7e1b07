// Training recipes of issue #22 (and #27's vocabulary bug): vocabulary padding (Megatron-LM
// --make-vocab-size-divisible-by, tokenizer.py _vocab_size_with_padding) and partial recompute (Megatron-Core
// --recompute-method uniform|block --recompute-num-layers N, transformer_block.py _checkpointed_forward). Expected
// values are worked out by hand from those rules and from the memory and step formulas (memory.cpp, training.cpp).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::arch;

namespace {

model::TrainingSystem dgx_h100() { return test::node_system("dgx-h100"); }

bool near(double a, double b, double rel = 1e-9) { return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b)); }

wl::TrainingPlan one_gpu(std::int64_t seq) {
  wl::TrainingPlan p;
  p.seq_len = seq;
  p.micro_batch = 1;
  p.global_batch = 1;
  return p;
}

}  // namespace

TEST_SUITE("training recipes") {
  TEST_CASE("vocabulary padding: GPT-3's 50,257 become 50,304 at TP 1 and 51,200 at TP 8 (multiple 128 × TP)") {
    wl::TrainingPlan p;
    CHECK(p.vocab_divisor() == 128);     // fused kernels: Megatron-LM's default
    CHECK(p.padded_vocab(50257) == 50304);  // 393 × 128
    p.par.tp = 8;
    CHECK(p.padded_vocab(50257) == 51200);  // 50 × 1024
    CHECK(p.padded_vocab(51200) == 51200);  // already a multiple: unchanged
    p.par.tp = 4;
    CHECK(p.padded_vocab(128256) == 128512);  // Llama 3 at TP 4: 251 × 512
    p.kernels = wl::KernelStyle::eager;
    CHECK(p.vocab_divisor() == 1);  // PyTorch modules keep the config's vocabulary
    CHECK(p.padded_vocab(50257) == 50260);  // eager with TP 4: only the TP split (⌈50257/4⌉·4)
    p.par.tp = 1;
    CHECK(p.padded_vocab(50257) == 50257);
    p.kernels = wl::KernelStyle::fused;
    p.vocab_divisible_by = 1;  // Megatron-Bridge with vocab_size set in the model config
    CHECK(p.padded_vocab(50257) == 50257);
  }

  TEST_CASE("the padding rows cost weights, logits and FLOPs: GPT-3 175B at TP 8 against the unpadded vocabulary") {
    const auto& a = arch("gpt3-175b");
    REQUIRE(a.vocab == 50257);
    REQUIRE(a.tied_embeddings);
    auto plan = one_gpu(2048);
    plan.par.tp = 8;
    plan.par.sequence_parallel = true;
    auto unpadded = plan;
    unpadded.vocab_divisible_by = 1;  // 50257 → ⌈50257/8⌉·8 = 50264
    REQUIRE(unpadded.padded_vocab(50257) == 50264);
    const auto sys = dgx_h100();
    const auto e = model::estimate_training(a, plan, sys);
    const auto u = model::estimate_training(a, unpadded, sys);
    const double extra_rows = 51200.0 - 50264.0, h = 12288.0, tokens = 2048.0;
    // Tied embeddings on one stage: the embedding matrix is the head; per GPU (V_pad − V)·h/t weights of 2 B.
    CHECK(near((e.memory.weights - u.memory.weights).raw(), extra_rows * h / 8.0 * 2.0));
    // Logits of the last stage: tokens · ΔV/t · 2 B (TE's cross entropy, the plan default, writes its gradient into
    // the logits; Megatron's own would add its 4 B fp32 upcast).
    CHECK(near((e.memory.logits - u.memory.logits).raw(), tokens * extra_rows / 8.0 * 2.0));
    // Model FLOPs: the LM head is 2·V·h per token forward, 6·V·h with the backward (Megatron counts padded_vocab_size).
    CHECK(near((e.model_flops_per_step - u.model_flops_per_step).raw(), 6.0 * extra_rows * h * tokens));
    // Time: unpadded, each TP rank's head is 50,264/8 = 6,283 columns, a leading dimension of 12,566 B that is no
    // multiple of 16 B — the misaligned GEMM the padding exists to avoid (#27); padded, 6,400 columns: faster despite
    // the 936 extra rows.
    CHECK(e.step_time < u.step_time);
    // The derivation says how the vocabulary was padded.
    const Derivation* v = e.derivation.find("train.vocab");
    REQUIRE(v != nullptr);
    CHECK(v->result.find("51,200") == 0);
  }

  TEST_CASE("block recompute of N layers per chunk repeats N/c of the forward and keeps the other layers whole") {
    const auto& a = arch("llama-3-8b");  // 32 layers
    const auto sys = dgx_h100();
    auto none = one_gpu(4096), full = none, block = none;
    full.recompute = block.recompute = wl::Recompute::full;
    block.recompute_method = wl::RecomputeMethod::block;
    block.recompute_num_layers = 8;
    const auto en = model::estimate_training(a, none, sys), ef = model::estimate_training(a, full, sys),
               eb = model::estimate_training(a, block, sys);
    // Time: 8 of 32 layers recomputed → a quarter of full recompute's repeated forward.
    CHECK(near(eb.step.recompute.raw(), 0.25 * ef.step.recompute.raw()));
    CHECK(near((eb.hardware_flops_per_step - eb.model_flops_per_step).raw(),
               0.25 * (ef.hardware_flops_per_step - ef.model_flops_per_step).raw()));
    // Memory: 24 layers keep everything, 8 keep their input. Per layer, none − full = all − checkpoint (the working
    // set of one recomputed layer is below the logits buffer it replaces at the peak, so it adds nothing here):
    // block − full = 24/32 · (none − full).
    REQUIRE(ef.memory.logits.raw() > 0);
    CHECK(near((eb.memory.activations - ef.memory.activations).raw(),
               24.0 / 32.0 * (en.memory.activations - ef.memory.activations).raw(), 1e-9));
    // N at least the chunk's layers: the classic full recompute.
    block.recompute_num_layers = 32;
    const auto eall = model::estimate_training(a, block, sys);
    CHECK(eall.step_time == ef.step_time);
    CHECK(eall.memory.total == ef.memory.total);
  }

  TEST_CASE("block recompute counts per model chunk: PP 4 × VP 2 of 32 layers, chunks of 4, block 3 → 6 of 8 per stage") {
    const auto& a = arch("llama-3-8b");
    auto sys = dgx_h100();
    auto full = one_gpu(4096);
    full.par.pp = 4;
    full.par.virtual_stages = 2;
    full.schedule = wl::PipelineSchedule::interleaved;
    full.global_batch = 8;
    full.recompute = wl::Recompute::full;
    auto block = full;
    block.recompute_method = wl::RecomputeMethod::block;
    block.recompute_num_layers = 3;
    const auto ef = model::estimate_training(a, full, sys), eb = model::estimate_training(a, block, sys);
    REQUIRE(ef.step.recompute.raw() > 0);
    CHECK(near(eb.step.recompute.raw(), 0.75 * ef.step.recompute.raw()));
  }

  TEST_CASE("uniform recompute in groups of 2: half the checkpoints, every forward repeated, one more layer rebuilt") {
    const auto& a = arch("llama-3-8b");
    const auto sys = dgx_h100();
    auto none = one_gpu(4096), full = none;
    full.recompute = wl::Recompute::full;
    auto uni = full;
    uni.recompute_num_layers = 2;  // method uniform (the default)
    // Megatron's own cross entropy: its fp32 upcast makes the logits buffer T·V·6 B.
    none.cross_entropy = full.cross_entropy = uni.cross_entropy = wl::CrossEntropyKernel::unfused;
    const auto en = model::estimate_training(a, none, sys), ef = model::estimate_training(a, full, sys),
               eu = model::estimate_training(a, uni, sys);
    CHECK(eu.step.recompute == ef.step.recompute);
    CHECK(eu.hardware_flops_per_step == ef.hardware_flops_per_step);
    // Per token: checkpoint k = h·2 B (the layer input); all = one layer's saved bytes = (none − full)/(32·T) + k.
    const double T = 4096.0, k = 4096.0 * 2.0;
    const double all = (en.memory.activations - ef.memory.activations).raw() / (32.0 * T) + k;
    // The working set of a group (2·all − input) stays below the logits buffer (T·V·6 B) it never coexists with, so
    // only the checkpoints count: uniform 2 − full = (16 − 32)·k·T.
    REQUIRE(2.0 * all < 128256.0 * 6.0);
    CHECK(near((eu.memory.activations - ef.memory.activations).raw(), -16.0 * k * T, 1e-9));
    // Groups of 8 and 16: their working sets (8·all − input, 16·all − input) exceed the logits buffer, so the peak
    // holds them: uniform 16 − uniform 8 = (2 − 4)·k·T + 8·all·T.
    auto u8 = full, u16 = full;
    u8.recompute_num_layers = 8;
    u16.recompute_num_layers = 16;
    REQUIRE(7.0 * all > 128256.0 * 6.0);
    const auto e8 = model::estimate_training(a, u8, sys), e16 = model::estimate_training(a, u16, sys);
    CHECK(near((e16.memory.activations - e8.memory.activations).raw(), (-2.0 * k + 8.0 * all) * T, 1e-9));
  }

  TEST_CASE("activation offloading of 16 of Llama-3-8B's 32 layers: 17 layers stay on the GPU, 16 on the host") {
    const auto& a = arch("llama-3-8b");
    const auto sys = dgx_h100();
    auto none = one_gpu(4096), off = none, full = none;
    off.activation_offload_layers = 16;
    full.recompute = wl::Recompute::full;
    const auto en = model::estimate_training(a, none, sys), eo = model::estimate_training(a, off, sys),
               ef = model::estimate_training(a, full, sys);
    // Stored layers = activations − the last stage's final-norm and head inputs (2·T·h·2 B; no dropout mask).
    const double T = 4096.0, h = 4096.0;
    const double stored = en.memory.activations.raw() - 2.0 * T * h * 2.0;
    CHECK(near(eo.memory.activations.raw(), en.memory.activations.raw() - 15.0 / 32.0 * stored, 1e-9));
    CHECK(near(eo.memory.host_offloaded.raw(), 16.0 / 32.0 * stored, 1e-9));
    // Time: one layer's activations over PCIe Gen5 x16 at 63 GB/s × 0.86; windows of w = 32/16 = 2 layers: the first
    // copy hides behind 1 layer, the other 15 behind 2, in the forward and again (reload) in the backward.
    const double copy = stored / 32.0 / (63e9 * 0.86);
    const double fwd = ef.step.recompute.raw();  // full recompute repeats exactly one forward (one micro-batch)
    // One GPU, one micro-batch: step = forward + backward + embedding/head + optimizer.
    const double bwd = (en.step.total - en.step.embedding_loss - en.step.optimizer).raw() - fwd;
    auto side = [&](double pass) {
      const double t = pass / 32.0;
      return std::max(0.0, copy - t) + 15.0 * std::max(0.0, copy - 2.0 * t);
    };
    const double exposed = side(fwd) + side(bwd);
    CHECK(near(eo.step.offload.raw(), exposed, 1e-9));
    CHECK(near((eo.step_time - en.step_time).raw(), exposed, 1e-9));
    const Derivation* d = eo.derivation.find("train.activation_offload");
    REQUIRE(d != nullptr);
  }

  TEST_CASE("activation offloading follows Megatron-Core's rules: N < L, PP 1, no recomputation") {
    const auto& a = arch("llama-3-8b");
    const auto sys = dgx_h100();
    auto p = one_gpu(4096);
    p.activation_offload_layers = 32;
    CHECK(model::check_training_layout(a, p, sys).reasons.at(0).find("fewer than the model's 32 layers") !=
          std::string::npos);
    p.activation_offload_layers = 8;
    p.par.pp = 2;
    p.global_batch = 2;
    CHECK(model::check_training_layout(a, p, sys).reasons.at(0).find("no pipeline parallelism with CPU offloading") !=
          std::string::npos);
    p.par.pp = 1;
    p.recompute = wl::Recompute::selective;
    CHECK(model::check_training_layout(a, p, sys).reasons.at(0).find("activation recomputation") != std::string::npos);
  }

  TEST_CASE("a GB200's host link is its share of the Grace NVLink-C2C: 450 GB/s / 2 GPUs × 0.86 = 193.5 GB/s") {
    const model::TrainingSystem s = test::node_system("gb200-nvl72");
    auto p = one_gpu(4096);
    p.activation_offload_layers = 8;
    const auto e = model::estimate_training(arch("llama-3-8b"), p, s);
    const Derivation* d = e.derivation.find("train.activation_offload");
    REQUIRE(d != nullptr);
    bool seen = false;
    for (const auto& in : d->inputs)
      if (in.symbol == "BW_link·η_link") {
        seen = true;
        CHECK(in.value == "193.5 GB/s");
      }
    CHECK(seen);
    CHECK(e.step.offload.raw() >= 0.0);
  }

  TEST_CASE("low-precision recipes on a B200: MXFP8 and NVFP4 casts and weight caches by their scale layouts") {
    const model::TrainingSystem s = test::node_system("dgx-b200");
    const auto& a = arch("llama-3-8b");
    auto bf16 = one_gpu(4096), fp8 = bf16, mx = bf16, fp4 = bf16;
    fp8.precision.compute = mx.precision.compute = hw::Precision::fp8;
    mx.precision.recipe = wl::QuantRecipe::mxfp8;
    fp4.precision.compute = hw::Precision::fp4;
    fp4.precision.recipe = wl::QuantRecipe::nvfp4;
    const auto eb = model::estimate_training(a, bf16, s), e8 = model::estimate_training(a, fp8, s),
               em = model::estimate_training(a, mx, s), e4 = model::estimate_training(a, fp4, s);
    REQUIRE(em.feasibility.reasons.empty() == e8.feasibility.reasons.empty());
    // Cached weight copies per GEMM weight: delayed 1 B on a B200 (its FP8 GEMMs read either layout: no transpose,
    // quant_recipe.hpp fp8_any_layout), MXFP8 2·(1 + 1/32), NVFP4 2·(1/2 + 1/16): each axis quantised separately.
    const double cache8 = (e8.memory.weights - eb.memory.weights).raw();
    REQUIRE(cache8 > 0);
    CHECK(near((em.memory.weights - eb.memory.weights).raw(), cache8 * (2.0 * (1.0 + 1.0 / 32.0)) / 1.0));
    CHECK(near((e4.memory.weights - eb.memory.weights).raw(), cache8 * (2.0 * (0.5 + 1.0 / 16.0)) / 1.0));
    // The cast of a GEMM input: 2 + 1 B per element with delayed scaling on a B200 (the row-wise copy only: the
    // output projection's input; the QKV input is cast by the norm's kernel), MXFP8 2 + 2·(1 + 1/32); NVFP4
    // reads the tensor for its amax, then again, and writes 2·(1/2 + 1/16): 5.125 B.
    auto cast_bytes = [](const model::TrainingEstimate& e, const std::string& name) {
      for (const auto& op : e.layer_ops)
        if (op.name == name) return op.bytes.raw();
      return 0.0;
    };
    const double b8 = cast_bytes(e8, "output projection fp8 cast"), b4 = cast_bytes(e4, "output projection nvfp4 cast"),
                 bm = cast_bytes(em, "output projection mxfp8 quantise (row + column)");
    REQUIRE(b8 > 0);
    CHECK(near(b4, b8 * 5.125 / 3.0));
    CHECK(near(bm, b8 * (2.0 + 2.0 * (1.0 + 1.0 / 32.0)) / 3.0));
    // FP4 GEMMs at the FP4 rate: the step is faster than FP8's.
    CHECK(e4.step_time < e8.step_time);
  }

  TEST_CASE("Hopper has no MXFP8 or FP4 tensor cores: the recipes are refused with the reason") {
    const auto sys = dgx_h100();
    const auto& a = arch("llama-3-8b");
    auto p = one_gpu(4096);
    p.precision.compute = hw::Precision::fp8;
    p.precision.recipe = wl::QuantRecipe::mxfp8;
    const auto f = model::check_training_layout(a, p, sys);
    REQUIRE_FALSE(f.ok);
    CHECK(f.reasons.at(0).find("MXFP8 needs block-scaled (microscaling) tensor cores") != std::string::npos);
    p.precision.recipe = wl::QuantRecipe::blockwise;  // per-tile FP8 runs on Hopper
    CHECK(model::check_training_layout(a, p, sys).ok);
    p.precision.compute = hw::Precision::fp4;
    p.precision.recipe = wl::QuantRecipe::nvfp4;
    const auto g = model::check_training_layout(a, p, sys);
    REQUIRE_FALSE(g.ok);
    CHECK(g.reasons.at(0).find("FP4 training needs FP4 tensor cores") != std::string::npos);
  }
  TEST_CASE("the dense MLP recomputed (Megatron-Core 'mlp'): DeepSeek-V3's 3 dense layers keep only the MLP's input") {
    // PP 1, one micro-batch of 4096 tokens in flight, bf16 (saved GEMM inputs 2 B). Per token a dense layer no longer
    // keeps fc1's output [gate | up] (2·18432·2 B) or the gated product (18432·2 B); the MLP input (h·2 B) stays, now
    // as the checkpoint's input: 3·18432·2 = 110,592 B per token per dense layer. The 58 MoE layers are not touched
    // (transformer_layer.py sets recompute_mlp only when the layer is not an MoE layer).
    const auto& a = arch("deepseek-v3");
    const auto sys = dgx_h100();
    wl::TrainingPlan plan;
    plan.par.dp = 64;
    plan.par.ep = 64;
    plan.seq_len = 4096;
    plan.global_batch = 64;
    plan.zero = wl::ZeroStage::optimizer;
    const auto before = model::estimate_training(a, plan, sys, Explain::off);
    plan.recompute_modules = wl::recompute_mlp;
    const auto after = model::estimate_training(a, plan, sys, Explain::off);
    CHECK(near((before.memory.activations - after.memory.activations).raw(), 4096.0 * 3.0 * 110592.0));
    // Its forward runs again in the backward: fc1, the SwiGLU and fc2 of 3 layers, less than a tenth of the forward.
    CHECK(before.step.recompute.raw() == 0);
    CHECK(after.step.recompute.raw() > 0);
    CHECK(after.step.recompute.raw() < 0.1 * before.step.gemm.raw());
    // A model without dense layers has nothing to recompute: refused with the reason.
    const auto& q = arch("qwen3-30b-a3b");
    wl::TrainingPlan qp;
    qp.recompute_modules = wl::recompute_mlp;
    const auto f = model::check_training_layout(q, qp, sys);
    REQUIRE_FALSE(f.ok);
    CHECK(f.reasons.at(0).find("recompute module mlp: every layer of the model is an MoE layer") != std::string::npos);
  }

  TEST_CASE("the EP all-to-all overlap hides the paired passes' dispatch and combine, not the warm-up's") {
    // PP 1, EP 8 over 8 H100s, 8 micro-batches: Megatron-Core pairs the forward of one micro-batch with the backward
    // of another in the steady 1F1B phase; without pipelining one pass of the 8 has no partner (W = 1). The compute
    // of Qwen3-30B-A3B's 4096-token micro-batch exceeds its all-to-all, so the 7/8 paired part is hidden but for the
    // SM share of its kernels: exposed = time · (1/8 + 7/8 · share), between time/8 and time.
    const auto& a = arch("qwen3-30b-a3b");
    const auto sys = dgx_h100();
    wl::TrainingPlan plan;
    plan.par.dp = 8;
    plan.par.ep = 8;
    plan.seq_len = 4096;
    plan.global_batch = 64;
    plan.zero = wl::ZeroStage::optimizer;
    const auto plain = model::estimate_training(a, plan, sys, Explain::off);
    plan.ep_a2a_overlap = true;
    const auto over = model::estimate_training(a, plan, sys, Explain::off);
    REQUIRE(over.step_time.raw() > 0);
    const double t = over.comm[2].time.raw();
    REQUIRE(t > 0);
    CHECK(plain.comm[2].exposed.raw() == gptest::approx(t));
    CHECK(over.comm[2].exposed.raw() >= t / 8.0 * (1 - 1e-12));
    CHECK(over.comm[2].exposed.raw() < 0.5 * t);
    CHECK(over.step_time < plain.step_time);
    // Megatron-Core's rules: with PP > 1 the interleaved schedule, and no full recomputation.
    plan.par.dp = 4;
    plan.par.ep = 4;
    plan.par.pp = 2;
    const auto f = model::check_training_layout(a, plan, sys);
    REQUIRE_FALSE(f.ok);
    CHECK(f.reasons.at(0).find("needs the interleaved schedule") != std::string::npos);
    plan.par.pp = 1;
    plan.par.dp = 8;
    plan.par.ep = 8;
    plan.recompute = wl::Recompute::full;
    const auto g = model::check_training_layout(a, plan, sys);
    REQUIRE_FALSE(g.ok);
    CHECK(g.reasons.at(0).find("does not run with full recomputation") != std::string::npos);
  }
}
