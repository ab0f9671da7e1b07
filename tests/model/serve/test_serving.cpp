// Serving latency model (model/include/gpuplan/model/serving.hpp): one forward pass of the engine (weights and KV
// read, FLOPs, kernels) checked against values derived by hand from the architecture; decode at batch 1 sandwiched
// between the HBM roofline and the roofline plus per-kernel costs; quantized weights; MoE experts touched; the
// properties any serving model must have (monotone in batch, context and prompt, TP shrinks the per-GPU weights);
// speculative decoding (Leviathan et al. eq. 1); the steady state's identities; the capacity planner; eager mode's
// CPU bound; and extreme but valid inputs.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "test_paths.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/efficiency.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "library.hpp"

#include <nlohmann/json.hpp>

using namespace gpuplan;
using gpuplan::test::arch;

namespace {

const hw::HardwareDb& hardware() { return test::hardware(); }

using test::node_system;
model::ServingSystem h100() { return node_system("dgx-h100"); }

model::ServingPerfPlan plan_of(int tp = 1, model::StoreDtype weights = model::StoreDtype::bf16,
                               model::StoreDtype kv = model::StoreDtype::bf16) {
  model::ServingPerfPlan p;
  p.tp = tp;
  p.weights = model::default_weight_quant(weights);
  p.kv = model::default_kv_quant(kv);
  return p;
}

/// `seqs` sequences decoding one token each with `context` tokens cached.
model::ForwardBatch decode(double seqs, std::int64_t context) { return {seqs, 1, context, 0, 0, 0, true}; }

model::ForwardCost cost(const std::string& id, const model::ServingPerfPlan& p, const model::ForwardBatch& b,
                        Explain ex = Explain::off) {
  return model::forward_cost(arch(id), p, b, h100(), ex);
}

bool finite_positive(units::Seconds t) { return std::isfinite(t.raw()) && t.raw() > 0; }

// ---- Llama 3.1 8B by hand (config: h 4096, i 14336, 32 heads, 8 KV heads of 128, 32 layers, V 128256) ----
// Linear layers of one block (input k × output n):
//   QKV   4096 × (32 + 2·8)·128 = 4096 × 6144  = 25,165,824
//   O     4096 × 4096                          = 16,777,216
//   up/gate 4096 × 2·14336 = 4096 × 28672      = 117,440,512
//   down  14336 × 4096                         = 58,720,256
//   block total                                = 218,103,808; × 32 layers = 6,979,321,856
// LM head 4096 × 128256 = 525,336,576 (kept in 16-bit whatever the weight format).
constexpr double kL8Linear = 6'979'321'856.0;
constexpr double kL8Head = 525'336'576.0;
// Σ of the output widths n of a block's four GEMMs: 6144 + 4096 + 28672 + 4096 = 43,008 (one per-channel scale each).
constexpr double kL8OutputsPerBlock = 43'008.0;
// KV per token per layer on one GPU at TP 1: K and V × 8 heads × 128 × 2 B = 4096 B.
constexpr double kL8KvPerTokenLayer = 2.0 * 8 * 128 * 2;

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("serving forward pass") {
  TEST_CASE("Llama 3.1 8B bf16 batch 1: weights read = 2 B x (linear layers + LM head) = 15,009,316,864 B") {
    const auto fc = cost("llama-3.1-8b", plan_of(), decode(1, 1024));
    // 2 B × (6,979,321,856 + 525,336,576) = 2 × 7,504,658,432.
    CHECK(fc.weight_bytes.raw() == gptest::approx(2.0 * (kL8Linear + kL8Head)).epsilon(1e-12));
    CHECK(fc.weight_bytes.raw() == gptest::approx(15'009'316'864.0).epsilon(1e-12));
    // The same from the parameter counts: everything but the embedding table and the norms is a linear layer here.
    const auto pc = model::parameter_counts(arch("llama-3.1-8b"), Explain::off);
    const double linear = double(pc.attention + pc.dense_mlp + pc.lm_head);
    CHECK(fc.weight_bytes.raw() == gptest::approx(2.0 * linear).epsilon(0.01));
    // 9 kernels per block (add+norm, QKV, rotary+KV write, decode attention, O, add+norm, up/gate, SwiGLU, down),
    // then the final add + norm, LM head, sampling and the embedding gather; no collectives at TP 1: 32·9 + 4 = 292.
    CHECK(fc.kernels == 32 * 9 + 4);
    CHECK(fc.comm.raw() == 0);
    CHECK(fc.tokens == 1);
  }

  TEST_CASE("decode at batch 1 is bandwidth-bound: between the HBM roofline and the roofline plus kernel costs") {
    const auto sys = h100();
    const auto fc = cost("llama-3.1-8b", plan_of(), decode(1, 1024));
    const units::Seconds t = model::decode_step_time(arch("llama-3.1-8b"), plan_of(), 1, 1024, sys);
    CHECK(t == fc.total);
    const double bw = sys.gpu->memory.bandwidth.raw();                 // 3.35 TB/s
    const double eta = model::default_efficiency(*sys.gpu).hbm;        // 0.887 (BabelStream triad 2.97/3.35)
    CHECK(bw == gptest::approx(3.35e12));
    CHECK(eta == gptest::approx(0.887));
    // The ideal floor: 15.009 GB / 3.35 TB/s = 4.48 ms.
    const double floor = fc.weight_bytes.raw() / bw;
    CHECK(floor == gptest::approx(4.4804e-3).epsilon(1e-4));
    CHECK(t.raw() > floor);
    // Every op costs max(FLOPs/compute, bytes/(BW·η)) + its kernel class's fixed cost (in a CUDA graph: GEMM,
    // attention, other; efficiency.hpp KernelClassCosts) and reads at least its weights or its KV, so
    // t ≥ (weights + KV)/(BW·η) + Σ fixed. Batch 1 is memory-bound, so the other bytes (activations, norms,
    // sampling: ~10 MB) stay within 1% of the 15 GB streamed: t ≤ 1.01·(weights + KV)/(BW·η) + Σ fixed.
    const double kv = 32.0 * 1025 * kL8KvPerTokenLayer;  // the new token attends to 1024 cached + itself
    CHECK(fc.kv_bytes.raw() == gptest::approx(kv).epsilon(1e-12));
    const double stream = (fc.weight_bytes.raw() + fc.kv_bytes.raw()) / (bw * eta);  // ≈ 5.096 ms
    model::ServingPerfPlan none = plan_of();  // the same step with no fixed cost at all
    none.kernel_cost_by_class = false;
    none.kernel_overhead_graph = units::Seconds(0);
    const double kernels = t.raw() - model::decode_step_time(arch("llama-3.1-8b"), none, 1, 1024, sys).raw();
    CHECK(kernels > double(fc.kernels) * 1e-6);  // 292 kernels, none free
    CHECK(t.raw() >= stream + kernels - 1e-12);
    CHECK(t.raw() <= 1.01 * stream + kernels);
    // The brief's bound: floor/η + the kernels' fixed costs + a 2% margin (KV is 0.9% of the weights).
    CHECK(t.raw() <= floor / eta * 1.02 + kernels);
    // Each GEMM at m = 1 is memory-bound.
    const auto ex = cost("llama-3.1-8b", plan_of(), decode(1, 1024), Explain::on);
    int gemms = 0;
    for (const auto& op : ex.ops)
      if (op.cls == model::OpClass::gemm) {
        CAPTURE(op.name);
        CHECK(op.bound == model::Bound::memory);
        ++gemms;
      }
    CHECK(gemms == 5);  // QKV, O, up/gate, down, LM head
  }

  TEST_CASE("a graphed decode step runs the kernels our H200 profile counts: 19 per Llama-3-8B layer, 48 per Qwen3-30B-A3B") {
    // data/validation/measured/h200-sxm-141gb/kernel_class_cost.json (PyTorch ops in one CUDA graph, batch 1, 1024
    // tokens): Llama-3-8B 613 kernels = 32 layers × 19 + 5; the Qwen3-30B-A3B shape 2,310 = 48 × 48 + 6. A layer's
    // count is the step's at L layers less the step's at L - 1.
    const auto sys = node_system("dgx-h200");
    model::ServingPerfPlan p = plan_of();
    p.kernels = wl::KernelStyle::eager;
    p.cuda_graphs = true;
    auto per_layer = [&](const std::string& id, std::int64_t model::ForwardCost::*field) {
      wl::TransformerArch a = arch(id), b = arch(id);
      b.layers = a.layers - 1;
      return model::forward_cost(a, p, decode(1, 1024), sys).*field - model::forward_cost(b, p, decode(1, 1024), sys).*field;
    };
    // Dense: 16 calls (norm, QKV, 3 rotary, K and V writes, attention, O, add, norm, up/gate, SiLU, product, down,
    // add) and 3 kernels they launch beyond: the flash split-KV combine and the split-K reduces of O (4096 × 4096)
    // and down (14336 → 4096).
    CHECK(per_layer("llama-3-8b", &model::ForwardCost::kernels) == 16);
    CHECK(per_layer("llama-3-8b", &model::ForwardCost::gpu_kernels) == 19);
    // MoE: 41 calls as before, the q/k norm's 2 (norm, weight multiply) and 3 device copies; the combine and the
    // O projection's split-K reduce (4096 → 2048) beyond them.
    CHECK(per_layer("qwen3-30b-a3b", &model::ForwardCost::kernels) == 46);
    CHECK(per_layer("qwen3-30b-a3b", &model::ForwardCost::gpu_kernels) == 48);
    // At batch 64 flash no longer splits (64 × 8 KV heads fill the 132 SMs): 17 per dense layer, as the b = 64 profile
    // (548 = 32 × 17 + 4: cuBLAS also stops splitting O at m = 64, which the m·n/k < 64 rule follows: 64 ≥ 64).
    wl::TransformerArch a = arch("llama-3-8b"), b = arch("llama-3-8b");
    b.layers = a.layers - 1;
    CHECK(model::forward_cost(a, p, decode(64, 1024), sys).gpu_kernels -
              model::forward_cost(b, p, decode(64, 1024), sys).gpu_kernels == 17);
  }

  TEST_CASE("a graphed Llama-3-8B decode step on the H200, class by class, as our profile of it measures (issue #27)") {
    // data/validation/measured/h200-sxm-141gb/kernel_class_cost.json, part step, Llama-3-8B at b = 1, 1024 tokens
    // (torch.profiler over 3 replays; each kernel's duration plus the idle time before it, per replay): GEMMs 193
    // kernels (128 layer GEMMs, the LM head, 64 split-K reduces) 3,914.6 + 121.1 µs; flash split-KV and combine 64
    // kernels 332.2 + 40.9 µs; the rest (65 norms, 290 elementwise, 1 memset) 391.1 + 30.0 + 574.1 + 119.1 + 0.7 + 0.9
    // µs; span 5,524 µs (our serving measurement of the same step: 5.508 ms, measured_inference_cases.json).
    const auto sys = node_system("dgx-h200");
    model::ServingPerfPlan p = plan_of();
    p.kernels = wl::KernelStyle::eager;
    p.cuda_graphs = true;
    p.attention = wl::AttentionKernel::fa2;
    p.max_batched_tokens = 0;
    const auto fc = model::forward_cost(arch("llama-3-8b"), p, decode(1, 1024), sys);
    CHECK(fc.gemm.raw() == gptest::approx(4035.8e-6).epsilon(0.03));         // model 4,107 µs: +1.8%
    // (the same step on 2026-11-29, kernel_class_cost_steps_2026-11-29.json: GEMMs 4,120, attention 375, the rest
    // 412 + 667 + 2 µs)
    CHECK(fc.attention.raw() == gptest::approx(373.1e-6).epsilon(0.03));     // 374 µs
    CHECK(fc.elementwise.raw() == gptest::approx(1115.9e-6).epsilon(0.03));  // 1,107 µs, 408 of them the 65 norms
    CHECK(fc.total.raw() == gptest::approx(5.508e-3).epsilon(0.03));
    // Every kernel the profile shows but its memset: 32 × 19 + the final norm, LM head, sampling and embedding gather.
    CHECK(fc.gpu_kernels == 612);
  }

  TEST_CASE("kernel classes: cuBLAS's split-K where the H200 profiles show it, a norm's latency grows with its row") {
    // The six decode GEMMs at m = 1 (kernel_class_cost.json): split O and down, not QKV, gate/up or the router.
    CHECK(model::gemm_splits_k(1, 4096, 4096));    // Llama-3-8B O
    CHECK(model::gemm_splits_k(1, 4096, 14336));   // Llama-3-8B down
    CHECK(model::gemm_splits_k(1, 2048, 4096));    // Qwen3-30B-A3B O
    CHECK_FALSE(model::gemm_splits_k(1, 6144, 4096));   // Llama-3-8B QKV
    CHECK_FALSE(model::gemm_splits_k(1, 28672, 4096));  // Llama-3-8B up/gate
    CHECK_FALSE(model::gemm_splits_k(1, 5120, 2048));   // Qwen3-30B-A3B QKV
    CHECK_FALSE(model::gemm_splits_k(1, 128, 2048));    // the router
    // docs/gemm-shapes.md: 4096 × 4096 splits at m ≤ 16, not at m = 64.
    CHECK(model::gemm_splits_k(16, 4096, 4096));
    CHECK_FALSE(model::gemm_splits_k(64, 4096, 4096));
    // A norm kernel inside our H200's graphed decode steps (kernel_class_cost.json, kernel_class_cost_steps_2026-11-29
    // .json, parts step): 6.02-6.48 µs per norm of 4096 (Llama-3-8B, b = 1-16, mean of the six 6.29), and the
    // Qwen3-30B-A3B shape's 97 norms of 2048 with 48 q/k norms over rows of 128 in 497.8 and 489.4 µs (b = 1, two
    // days): the law 1.93 µs + 1.06 ns × row (measured.json) gives both within 2%.
    const auto sys = node_system("dgx-h200");
    model::Device d = model::sustained_device(*sys.gpu, sys.efficiency, wl::AttentionKernel::fa2);
    model::ServingPerfPlan p = plan_of();
    model::apply_launch_costs(d, p, true);
    CHECK(model::norm_fixed(d, 4096).raw() == gptest::approx(6.29e-6).epsilon(0.02));
    CHECK(97.0 * model::norm_fixed(d, 2048).raw() + 48.0 * model::norm_fixed(d, 128).raw() ==
          gptest::approx(493.6e-6).epsilon(0.02));
    CHECK(model::norm_fixed(d, 8192).raw() > model::norm_fixed(d, 4096).raw());  // one block per row: the row's latency
    // Decode attention: PyTorch's flash split-KV call (two kernels) 10.7 µs, one fused kernel 5.1 µs, beyond bytes.
    const units::Bytes kv = units::bytes(2.0 * 8 * 128 * 2);
    const auto split = model::decode_attention_cost("a", 1, 1, 32, 8, 1024, 128, 128, kv, 16, hw::Precision::bf16, d, true);
    const auto fused = model::decode_attention_cost("a", 1, 1, 32, 8, 1024, 128, 128, kv, 16, hw::Precision::bf16, d, false);
    CHECK(split.extra_kernels == 1);
    CHECK(fused.extra_kernels == 0);
    CHECK((split.time - fused.time).raw() == gptest::approx(10.7e-6 - 5.1e-6).epsilon(1e-6));
    // Eager (no graph): every kernel the single launch cost, norms included.
    model::Device e = d;
    model::apply_launch_costs(e, p, false);
    CHECK(model::norm_fixed(e, 8192).raw() == gptest::approx(p.kernel_overhead_eager.raw()));
  }

  TEST_CASE("in a CUDA graph each kernel pays its class's measured fixed cost, and one given cost prices them all alike") {
    // Issue #27: our H200 sweeps time a memory-bound GEMM's, a streaming kernel's and a decode attention call's fixed
    // cost inside a graph apart (data/hardware/efficiency/measured.json graph_*_us). Each op of a decode step is
    // priced at its roofline time plus its class's cost: the step minus the same step at no fixed cost, op by op.
    const auto sys = h100();
    const model::KernelClassCosts g = model::default_efficiency(*sys.gpu).graph_class;
    REQUIRE(g.measured());
    model::ServingPerfPlan none = plan_of();
    none.kernel_cost_by_class = false;
    none.kernel_overhead_graph = units::Seconds(0);
    const auto zero = cost("llama-3.1-8b", none, decode(1, 1024), Explain::on);
    auto deltas = [&](const model::ServingPerfPlan& p) {
      const auto fc = cost("llama-3.1-8b", p, decode(1, 1024), Explain::on);
      REQUIRE(fc.ops.size() == zero.ops.size());
      std::vector<std::pair<model::OpCost, double>> d;
      for (std::size_t i = 0; i < fc.ops.size(); ++i) d.emplace_back(fc.ops[i], (fc.ops[i].time - zero.ops[i].time).raw());
      return d;
    };
    int seen[4] = {0, 0, 0, 0};
    const double h = 4096;  // Llama-3.1-8B's norms run rows of the hidden size
    for (const auto& entry : deltas(plan_of())) {
      const model::OpCost& op = entry.first;  // named, not a structured binding: clang 14's CAPTURE cannot take one
      const double dt = entry.second;
      CAPTURE(op.name);
      const bool norm = op.name.find("norm") != std::string::npos;
      // An engine's decode attention is one fused kernel (5.1 µs); the norms' cost is their row's latency.
      const double want = op.cls == model::OpClass::gemm        ? g.gemm.raw()
                          : op.cls == model::OpClass::attention ? g.attention_fused.raw()
                          : norm                                ? (g.norm + g.norm_per_element * h).raw()
                                                                : g.elementwise.raw();
      CHECK(dt == gptest::approx(want).epsilon(1e-9));
      ++seen[op.cls == model::OpClass::gemm ? 0 : op.cls == model::OpClass::attention ? 1 : norm ? 3 : 2];
    }
    CHECK(seen[0] >= 4);  // QKV, O, up/gate, down (+ the LM head where it is listed)
    CHECK(seen[1] >= 1);
    CHECK(seen[2] >= 1);
    CHECK(seen[3] >= 2);  // the layer's two add + norm kernels
    CHECK(g.attention_fused.raw() == gptest::approx(5.1e-6));
    CHECK((g.norm + g.norm_per_element * h).raw() == gptest::approx(6.272e-6).epsilon(1e-3));  // 1.93 + 4096 × 1.06 ns
    // --kernel-overhead-us 2.5: every kernel 2.5 µs, whatever its class; without graphs the eager 5 µs alike.
    model::ServingPerfPlan flat = plan_of();
    flat.kernel_cost_by_class = false;
    for (const auto& [op, dt] : deltas(flat)) CHECK(dt == gptest::approx(2.5e-6).epsilon(1e-9));
    model::ServingPerfPlan eager = plan_of();
    eager.cuda_graphs = false;
    model::ServingPerfPlan eager_none = none;
    eager_none.cuda_graphs = false;
    eager_none.kernel_overhead_eager = units::Seconds(0);
    const auto e1 = cost("llama-3.1-8b", eager, decode(1, 1024), Explain::on);
    const auto e0 = cost("llama-3.1-8b", eager_none, decode(1, 1024), Explain::on);
    REQUIRE(e1.ops.size() == e0.ops.size());
    for (std::size_t i = 0; i < e1.ops.size(); ++i) CHECK((e1.ops[i].time - e0.ops[i].time).raw() == gptest::approx(5e-6));
    // A GPU whose row has no per-class measurement keeps the plan's single cost (A100: 2.5 µs per kernel).
    model::ServingSystem a100 = node_system("dgx-a100");
    CHECK_FALSE(model::default_efficiency(*a100.gpu).graph_class.measured());
    model::Device d = model::sustained_device(*a100.gpu, a100.efficiency, wl::AttentionKernel::fa3);
    model::apply_launch_costs(d, plan_of(), true);
    CHECK(model::kernel_fixed(d, model::OpClass::attention).raw() == gptest::approx(2.5e-6));
  }

  TEST_CASE("fp8 weights: 1 B + one fp32 scale per output channel - the LM head stays 16-bit") {
    const auto bf = cost("llama-3.1-8b", plan_of(), decode(1, 1024));
    auto p = plan_of(1, model::StoreDtype::fp8);
    p.compute = hw::Precision::fp8;
    const auto f8 = cost("llama-3.1-8b", p, decode(1, 1024));
    // Σ k·n·(1 + 4/k) = linear + 4 B × Σ n = 6,979,321,856 + 4 × 43,008 × 32 (= 5,505,024) ; + 2 B × LM head.
    const double expected = kL8Linear + 4.0 * kL8OutputsPerBlock * 32 + 2.0 * kL8Head;  // 8,035,500,032
    CHECK(f8.weight_bytes.raw() == gptest::approx(expected).epsilon(1e-12));
    CHECK(f8.weight_bytes.raw() == gptest::approx(8'035'500'032.0).epsilon(1e-12));
    // Roughly half: 8.0355 / 15.0093 = 0.5354 (the 16-bit LM head keeps it above ½).
    const double ratio = f8.weight_bytes.raw() / bf.weight_bytes.raw();
    CHECK(ratio == gptest::approx(0.53537).epsilon(1e-4));
    CHECK(ratio > 0.5);
    CHECK(ratio < 0.55);
    // Bandwidth-bound: the step is faster, by less than the byte ratio (kernel costs do not shrink).
    CHECK(f8.total < bf.total);
    CHECK(f8.total.raw() > ratio * bf.total.raw());
  }

  TEST_CASE("int4 group 128: 0.5 + 2.5/128 = 0.51953125 B per quantized weight - the LM head stays 16-bit") {
    CHECK(model::weight_bytes_per_param(model::default_weight_quant(model::StoreDtype::int4), 4096) == 0.51953125);
    const auto i4 = cost("llama-3.1-8b", plan_of(1, model::StoreDtype::int4), decode(1, 1024));
    // Quantized layers: (weight_bytes − 2 B × LM head) / linear params = 0.51953125.
    CHECK((i4.weight_bytes.raw() - 2.0 * kL8Head) / kL8Linear == gptest::approx(0.51953125).epsilon(1e-12));
    // 6,979,321,856 × 0.51953125 = 3,625,975,808 ; + 1,050,673,152.
    CHECK(i4.weight_bytes.raw() == gptest::approx(4'676'648'960.0).epsilon(1e-12));
  }

  TEST_CASE("KV read per step = layers x seqs x (context + 1) x 4 KiB for Llama 3.1 8B - fp8 KV is exactly half") {
    const auto bf = cost("llama-3.1-8b", plan_of(), decode(8, 1024));
    // 32 layers × 8 sequences × 1025 tokens (1024 cached + the new one) × 2·8·128·2 B.
    CHECK(bf.kv_bytes.raw() == gptest::approx(32.0 * 8 * 1025 * kL8KvPerTokenLayer).epsilon(1e-12));
    CHECK(bf.kv_bytes.raw() == gptest::approx(1'074'790'400.0).epsilon(1e-12));
    // fp8 with per-tensor scales: 1 B per element, nothing per token.
    const auto f8 = cost("llama-3.1-8b", plan_of(1, model::StoreDtype::bf16, model::StoreDtype::fp8), decode(8, 1024));
    CHECK(f8.kv_bytes.raw() == gptest::approx(bf.kv_bytes.raw() / 2).epsilon(1e-12));
    // Weights do not depend on the KV format.
    CHECK(f8.weight_bytes == bf.weight_bytes);
    // TP 2: each GPU holds 4 of the 8 KV heads: half the KV per GPU.
    const auto tp2 = cost("llama-3.1-8b", plan_of(2), decode(8, 1024));
    CHECK(tp2.kv_bytes.raw() == gptest::approx(bf.kv_bytes.raw() / 2).epsilon(1e-12));
  }

  TEST_CASE("large-batch decode is compute-bound: batch 512 GEMMs do 2 x params x 512 FLOPs at the GEMM ceiling") {
    const auto sys = h100();
    const auto b1 = cost("llama-3.1-8b", plan_of(), decode(1, 1024));
    const auto b512 = cost("llama-3.1-8b", plan_of(), decode(512, 1024), Explain::on);
    // GEMM FLOPs: 2 × 512 × (linear + LM head) = 2 × 512 × 7,504,658,432 = 7.6848e12.
    const double gemm_flops = 2.0 * 512 * (kL8Linear + kL8Head);
    // Attention over 1025 keys: 2 × (512·32 queries) × 1025 × (128 + 128) × 32 layers = 2.75e11 (3.6%); norms,
    // rotary, SwiGLU and sampling a little more.
    const double attn_flops = 2.0 * 512 * 32 * 1025 * 256 * 32;
    CHECK(b512.flops.raw() >= gemm_flops + attn_flops);
    CHECK(b512.flops.raw() == gptest::approx(gemm_flops).epsilon(0.05));
    // With the whole model's 8.03e9 parameters (embedding included) it is also within 5%.
    const auto pc = model::parameter_counts(arch("llama-3.1-8b"), Explain::off);
    CHECK(b512.flops.raw() == gptest::approx(2.0 * double(pc.total) * 512).epsilon(0.05));
    // The GEMMs cannot beat the measured ceiling: 7.6848e12 / (989.4 TF × 0.752) = 10.33 ms.
    const double ceiling = sys.gpu->peak(hw::Precision::bf16)->raw() * model::default_efficiency(*sys.gpu).gemm_bf16;
    CHECK(b512.gemm.raw() >= gemm_flops / ceiling);
    // At batch 1 they stream 15.0 GB: ≤ 1.01 × 15.0 GB / (3.35 TB/s × 0.887) + 129 GEMM calls × 4.6 µs (the H100's
    // in-graph GEMM class, measured.json graph_gemm_us) ≈ 5.70 ms. So batch 512 costs at least 10.33 / 5.70 = 1.8×
    // the batch-1 GEMM time.
    const double b1_gemm_bound = 1.01 * b1.weight_bytes.raw() / (3.35e12 * 0.887) + (32 * 4 + 1) * 4.6e-6;
    CHECK(b1.gemm.raw() <= b1_gemm_bound);
    CHECK(b512.gemm.raw() > 1.8 * b1.gemm.raw());
    // The big GEMMs are compute-bound now.
    for (const auto& op : b512.ops)
      if (op.name == "MLP up/gate" || op.name == "MLP down" || op.name == "QKV projection") {
        CAPTURE(op.name);
        CHECK(op.bound == model::Bound::compute);
      }
    // Weights are read once per pass whatever the batch.
    CHECK(b512.weight_bytes == b1.weight_bytes);
    CHECK(b512.tokens == 512);
  }

  TEST_CASE("MoE: Mixtral 8x7B reads 2 of 8 experts per layer at batch 1 and all 8 at batch 64") {
    // Touched experts with top-k of E under uniform routing: E·(1 − (1 − k/E)^T).
    auto touched = [](double T) { return 8.0 * (1.0 - std::pow(1.0 - 2.0 / 8.0, T)); };
    CHECK(touched(1) == gptest::approx(2.0));
    CHECK(touched(64) == gptest::approx(8.0 * (1.0 - std::pow(0.75, 64))));  // 7.99999992
    // Per layer (bf16): QKV 4096·6144·2 + O 4096·4096·2 + router 4096·8·2 = 83,951,616 B; one expert
    // (4096·28672 + 14336·4096)·2 = 352,321,536 B; LM head 4096·32000·2 = 262,144,000 B.
    auto weights = [](double experts) { return 32.0 * (83'951'616.0 + experts * 352'321'536.0) + 262'144'000.0; };
    const auto b1 = cost("mixtral-8x7b", plan_of(), decode(1, 1024));
    const auto b64 = cost("mixtral-8x7b", plan_of(), decode(64, 1024));
    CHECK(b1.weight_bytes.raw() == gptest::approx(weights(touched(1))).epsilon(1e-9));     // 25,497,174,016
    CHECK(b64.weight_bytes.raw() == gptest::approx(weights(touched(64))).epsilon(1e-6));   // 93,142,908,928
    CHECK(b64.weight_bytes.raw() / b1.weight_bytes.raw() ==
          gptest::approx(weights(touched(64)) / weights(touched(1))).epsilon(1e-6));       // 3.653
    // Between 1 and 64 the expected count is fractional and the weights follow it: batch 2 touches 3.5 experts on
    // average, not ⌈3.5⌉ = 4.
    CHECK(touched(2) == gptest::approx(3.5));
    const auto b2 = cost("mixtral-8x7b", plan_of(), decode(2, 1024));
    CHECK(b2.weight_bytes.raw() == gptest::approx(weights(3.5)).epsilon(1e-9));
    // Never more than all experts.
    const auto b4096 = cost("mixtral-8x7b", plan_of(), decode(4096, 1024));
    CHECK(b4096.weight_bytes.raw() == gptest::approx(weights(8)).epsilon(1e-12));
  }

  TEST_CASE("Llama 4 Scout: a chunked layer's decode reads half a chunk, its prefill is causal within each chunk") {
    // 12 global layers read the whole context; 36 chunked layers (8192-token chunks) the tokens of the current
    // chunk, on average (8192 + 1) / 2 = 4096 once the context passes a chunk. bf16 KV at TP 1: 2·8·128·2 = 4096 B
    // per layer and token. Decode at 32,768 held + 1 new: 4096 · (12 · 32,769 + 36 · 4,096) = 2,214,641,664 B.
    const auto d = cost("llama-4-scout-17b-16e", plan_of(), decode(1, 32768));
    CHECK(d.kv_bytes.raw() == gptest::approx(2'214'641'664.0));
    // A 16K prompt: the global layers' causal 16384² triangle, the chunked layers' two 8192² triangles (half).
    const auto p = cost("llama-4-scout-17b-16e", plan_of(), {0, 1, 0, 1, 16384, 0, true}, Explain::on);
    double chunked = 0, global = 0;
    for (const auto& o : p.ops) {
      if (o.name.rfind("prefill attention (chunked)", 0) == 0) chunked += o.flops.raw();
      else if (o.name.rfind("prefill attention", 0) == 0) global += o.flops.raw();
    }
    REQUIRE(global > 0);
    CHECK(chunked == gptest::approx(global / 2).epsilon(1e-3));
  }

  TEST_CASE("eager MoE routing runs 24 kernels per MoE layer, as profiled - fused engines gather and scatter in their GEMMs") {
    // data/validation/measured/h100-sxm5-80gb/moe_kernels_profile.json: 48 kernels per MoE layer of an eager
    // Qwen3-30B-A3B-shaped decode step, 24 of them the routing (softmax, top-k, renormalise, sort, offsets, gather,
    // combine). Fused: the single permute/unpermute pass instead.
    auto p = plan_of();
    p.kernels = wl::KernelStyle::eager;
    const auto eager = cost("qwen3-30b-a3b", p, decode(1, 1024), Explain::on);
    p.kernels = wl::KernelStyle::fused;
    const auto fused = cost("qwen3-30b-a3b", p, decode(1, 1024), Explain::on);
    auto count = [](const model::ForwardCost& f, auto pred) {
      return std::count_if(f.ops.begin(), f.ops.end(), [&](const model::OpCost& o) { return pred(o.name); });
    };
    const auto routing = [](const std::string& n) {
      for (const char* w : {"router logits", "router softmax", "top-k", "pair index", "expert-id sort", "expert counts",
                            "expert offsets", "routing-weight", "grouped-GEMM", "token gather", "unpermute gather",
                            "combine:"})
        if (n.rfind(w, 0) == 0) return true;
      return false;
    };
    CHECK(count(eager, routing) == 24);
    CHECK(count(fused, routing) == 0);
    CHECK(count(fused, [](const std::string& n) { return n == "token permute/unpermute"; }) == 1);
    CHECK(count(eager, [](const std::string& n) { return n == "token permute/unpermute"; }) == 0);
    // At batch 1 each routing kernel costs about its fixed time: 48 layers × 24 kernels add ≥ 48·24·t_kernel.
    CHECK(eager.kernels - fused.kernels >= 48 * 23);
  }

  TEST_CASE("MoE experts are one grouped GEMM, as training prices them: 100 experts of 4×7168×256 on an H100") {
    // Measured on an H100 (issue #21): 140 µs with torch.bmm, 172 µs with torch._grouped_mm. The grouped GEMM is
    // memory-bound (the 367 MB of expert weights); one narrow expert GEMM repeated 100 times (split-K, a wave and a
    // launch each) came to 428 µs.
    const model::Device d = model::make_device(*h100().gpu);
    const auto grouped = model::gemm_cost("experts", {4, 256, 7168, 100, 2.0}, hw::Precision::bf16, d);
    CHECK(grouped.time.raw() == gptest::approx(140e-6).epsilon(0.15));
    const auto one = model::gemm_cost("expert", {4, 256, 7168, 1, 2.0}, hw::Precision::bf16, d);
    CHECK(100.0 * one.time.raw() > 2.5 * grouped.time.raw());
    // The serving forward prices the touched experts that way: Qwen3-235B-A22B (128 experts of width 1536, top-8,
    // h 4096) at TP 8 decoding 16 sequences touches 128·(1 − (1 − 8/128)^16) ≈ 82.4 experts, ⌈16·8/82.4⌉ = 2 token
    // rows each, width 1536/8 = 192 per GPU: one grouped GEMM of 83, scaled to the expectation.
    const model::ServingPerfPlan p = plan_of(8);
    const auto fc = cost("qwen3-235b-a22b", p, decode(16, 1024), Explain::on);
    const model::OpCost* up = nullptr;
    for (const auto& op : fc.ops)
      if (op.name == "expert up/gate") up = &op;
    REQUIRE(up != nullptr);
    const model::Device sd = [&] {  // the engine's device, as forward_cost makes it
      model::Device x = model::sustained_device(*h100().gpu, h100().efficiency, p.attention);
      model::apply_launch_costs(x, p, p.cuda_graphs);
      return x;
    }();
    const double touched = 128.0 * (1.0 - std::pow(1.0 - 8.0 / 128.0, 16.0));
    REQUIRE(touched == gptest::approx(82.42).epsilon(1e-3));
    const double launch = model::kernel_fixed(sd, model::OpClass::gemm).raw();
    const auto g = model::gemm_cost("", {2, 2 * 192, 4096, 83, 2.0}, hw::Precision::bf16, sd);
    // The grouped kernel's law over the batched GEMM (model/src/ops/moe_cost.hpp: 1.065 × + 11 µs, moe_grouped_gemm.json).
    CHECK(up->time.raw() ==
          gptest::approx(1.065 * ((g.time.raw() - launch) * touched / 83.0 + launch) + 11e-6).epsilon(1e-12));
    const auto g1 = model::gemm_cost("", {2, 2 * 192, 4096, 1, 2.0}, hw::Precision::bf16, sd);
    CHECK(up->time.raw() < 0.5 * ((g1.time.raw() - launch) * touched + launch));  // the per-expert form it replaced
  }

  TEST_CASE("grouped expert GEMMs measured on an H100 (588 cases, 2026-11-26): bf16 within 10% (bmm) and 18% (_grouped_mm)") {
    // data/validation/measured/h100-sxm5-80gb/moe_grouped_gemm.json (scripts/measure/moe_grouped_gemm.py): E experts
    // of m×k×n each, 1-4096 tokens per expert, priced as the training step and the serving forward price them (one
    // GEMM with batch = E) on the built-in sustained H100. The fp8 grouped kernel (_scaled_grouped_mm) is slower
    // than the dense fp8 GEMM the model assumes: a known gap of issue #21, bounded here so that it cannot grow.
    std::ifstream in(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured/h100-sxm5-80gb/moe_grouped_gemm.json");
    REQUIRE(in.good());
    std::stringstream ss;
    ss << in.rdbuf();
    const auto j = nlohmann::json::parse(ss.str());
    const model::Device d = model::sustained_device(*h100().gpu, std::nullopt, wl::AttentionKernel::fa3);
    std::map<std::string, std::vector<double>> err;
    for (const auto& c : j.at("cases")) {
      const bool fp8 = c.at("dtype") == "fp8";
      const model::GemmShape s{c.at("tokens_per_expert").get<std::int64_t>(), c.at("n").get<std::int64_t>(),
                               c.at("k").get<std::int64_t>(), c.at("experts").get<std::int64_t>(), fp8 ? 1.0 : 2.0};
      const double t = model::gemm_cost("", s, fp8 ? hw::Precision::fp8 : hw::Precision::bf16, d).time.raw();
      err[c.at("method").get<std::string>()].push_back(std::fabs(t / c.at("median_s").get<double>() - 1.0));
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    REQUIRE(err["bmm"].size() == 196);
    CHECK(median(err["bmm"]) <= 0.10);                // 7.1% when written
    CHECK(median(err["grouped_mm"]) <= 0.18);         // 14.4%
    CHECK(median(err["scaled_grouped_mm"]) <= 0.40);  // 35%: the known fp8 gap
  }

  TEST_CASE("MoE expert parallel: EP 8 in TP 8 leaves one expert per GPU, read whole") {
    // Mixtral TP 8 EP 8: each GPU holds 1 expert (not split, tp/ep = 1); at batch 64 it is touched
    // (1·(1 − 0.75^64) ≈ 1). Per GPU: QKV 4096·768·2 + O 512·4096·2 + router 4096·8·2 = 10,551,296 B per layer,
    // the expert 352,321,536 B, LM head 4096·4000·2 = 32,768,000 B.
    auto p = plan_of(8);
    p.ep = 8;
    const auto fc = cost("mixtral-8x7b", p, decode(64, 1024));
    CHECK(fc.weight_bytes.raw() == gptest::approx(32.0 * (10'551'296.0 + 352'321'536.0) + 32'768'000.0).epsilon(1e-6));
    CHECK(fc.comm.raw() > 0);  // TP all-reduces and the EP all-to-alls
  }

  TEST_CASE("MLA decode reads the 576-element latent per token and layer on every TP rank (DeepSeek-V3)") {
    // kv_lora_rank 512 + rope 64 = 576 elements × 2 B = 1152 B per token per layer, not divided by TP.
    auto p = plan_of(8, model::StoreDtype::fp8);
    p.compute = hw::Precision::fp8;
    const auto fc = model::forward_cost(arch("deepseek-v3"), p, decode(4, 4096), node_system("dgx-h200"));
    CHECK(fc.kv_bytes.raw() == gptest::approx(61.0 * 4 * 4097 * 1152).epsilon(1e-12));
    CHECK(finite_positive(fc.total));
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("serving properties") {
  TEST_CASE("decode step never falls as the batch grows from 1 to 512 (Llama 3.1 8B, context 1024)") {
    const auto& a = arch("llama-3.1-8b");
    const auto sys = h100();
    units::Seconds prev{};
    for (std::int64_t b = 1; b <= 512; ++b) {
      const units::Seconds t = model::decode_step_time(a, plan_of(), b, 1024, sys);
      CAPTURE(b);
      CHECK(t >= prev);
      prev = t;
    }
  }

  TEST_CASE("decode throughput rises with the batch where the measured GEMMs' does: stream-K at every batch, the built-in rows' 128-row cliff") {
    // Measured (gemm_graph_staircase.json, our H100 in CUDA graphs): the four Llama-2-7B layer GEMMs of a decode step
    // take 167.4 µs at M = 120, 169.0 at 128, 168.5 at 142, 171.0 at 160 — tokens per µs of GEMM rise from 0.757 at
    // M = 128 to 0.843 at 142 (+11%), never dipping by more than 1.6% on the way (cuBLAS changes tiles). The issue's
    // cliff (Llama-2-7B on A100: 2,595 tok/s at batch 128, 2,204 at 142) came from whole 128-row tiles in waves.
    const auto j = [] {
      std::ifstream in(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured/h100-sxm5-80gb/gemm_graph_staircase.json");
      REQUIRE(in.good());
      return nlohmann::json::parse(in);
    }();
    std::map<int, double> gemm_us;
    std::map<int, int> layers;
    for (const auto& r : j.at("results"))
      if (r.at("dtype") == "bf16") {
        gemm_us[r.at("M").get<int>()] += r.at("time_median_s").get<double>() * 1e6;
        layers[r.at("M").get<int>()] += 1;
      }
    REQUIRE(layers.at(128) == 4);
    REQUIRE(layers.at(142) == 4);
    CHECK(142.0 / gemm_us.at(142) > 1.10 * 128.0 / gemm_us.at(128));
    double best = 0;
    for (int m = 120; m <= 160; ++m) {
      REQUIRE(layers.at(m) == 4);
      best = std::max(best, m / gemm_us.at(m));
      CHECK(m / gemm_us.at(m) > 0.98 * best);  // no measured dip beyond 2% between 120 and 160
    }
    // The model with the stream-K decomposition, on the H100 the GEMMs were measured on: decode throughput never falls
    // from batch 1 to 256 (Llama-2-7B and Llama-3.1-8B, context 1024). On an A100 (not measured) the step
    // 128 → 142 rises too (2,572 → 2,616 tok/s for Llama-2-7B), but stream-K's 1% tile margin leaves dips of 1-4%
    // past 160 there.
    auto stream_k_system = [&](const char* gpu) {
      model::ServingSystem s = h100();
      s.node = nullptr;
      s.gpu = hardware().find_gpu(gpu);
      REQUIRE(s.gpu != nullptr);
      auto e = model::default_efficiency(*s.gpu);
      e.stream_k = true;
      s.efficiency = e;
      return s;
    };
    for (const char* id : {"llama-2-7b", "llama-3.1-8b"}) {
      CAPTURE(id);
      const auto s = stream_k_system("h100-sxm5-80gb");
      double prev = 0;
      for (std::int64_t b = 1; b <= 256; ++b) {
        const double thr = double(b) / model::decode_step_time(arch(id), plan_of(), b, 1024, s).raw();
        CAPTURE(b);
        CHECK(thr >= prev);
        prev = thr;
      }
    }
    const auto a100_sk = stream_k_system("a100-sxm4-80gb");
    CHECK(142.0 / model::decode_step_time(arch("llama-2-7b"), plan_of(), 142, 1024, a100_sk).raw() >
          128.0 / model::decode_step_time(arch("llama-2-7b"), plan_of(), 128, 1024, a100_sk).raw());
    // The built-in rows (whole tiles in waves, EfficiencyProfile::stream_k off) fell at batch 129 on an H100 (−4.9%
    // for Llama-2-7B, −5.5% for Llama-3.1-8B) while their tiles were 128 rows whatever M; with the tile rows following
    // M (ops.cpp tile_rows: 129 rows as two of 72) they rise there too.
    const auto sys = h100();
    for (const char* id : {"llama-2-7b", "llama-3.1-8b"}) {
      CAPTURE(id);
      const double t128 = 128.0 / model::decode_step_time(arch(id), plan_of(), 128, 1024, sys).raw();
      const double t129 = 129.0 / model::decode_step_time(arch(id), plan_of(), 129, 1024, sys).raw();
      const double t142 = 142.0 / model::decode_step_time(arch(id), plan_of(), 142, 1024, sys).raw();
      CHECK(t129 >= t128);
      CHECK(t142 > t129);
    }
  }

  /// Steady-state output tokens/s (prompt 128, output 256: prefill chunks mixed in) and decode-only tokens/s (context
  /// 256) at every batch from 1 to what the KV cache holds (0.9 of the memory less the weights, at most 512), for
  /// models and GPUs of #27's monotone-in-batch property.
  struct BatchSweep {
    std::string label;
    std::vector<double> steady, decode;  // index = batch
  };
  std::vector<BatchSweep> batch_sweeps() {
    struct Case {
      const char* model;
      const char* node;
      int tp;
    };
    std::vector<BatchSweep> out;
    for (const Case& c : {Case{"llama-2-7b", "dgx-a100", 1}, Case{"llama-2-13b", "dgx-a100", 1},
                          Case{"llama-2-7b", "dgx-h100", 1}, Case{"llama-3.1-8b", "dgx-h200", 1},
                          Case{"llama-3-70b", "dgx-h100", 4}, Case{"llama-3.1-8b", "l40s-8", 1}}) {
      const auto& a = arch(c.model);
      const auto sys = node_system(c.node);
      const auto p = plan_of(c.tp);
      const double weights = 2.0 * double(model::parameter_counts(a, Explain::off).total) / c.tp;
      const double kv_seq = model::kv_token_bytes(a, p.kv, c.tp, Explain::off).per_layer.raw() * double(a.layers) * (128 + 256);
      const auto fits = std::int64_t((0.9 * sys.gpu->memory_capacity().raw() - weights) / kv_seq);
      const std::int64_t b_max = std::min<std::int64_t>(512, fits);
      BatchSweep s{std::string(c.model) + " on " + c.node, std::vector<double>(std::size_t(b_max + 1), 0.0),
                   std::vector<double>(std::size_t(b_max + 1), 0.0)};
      for (std::int64_t b = 1; b <= b_max; ++b) {
        s.steady[std::size_t(b)] = model::steady_state(a, p, b, 128, 256, sys, Explain::off).output_tokens_per_s;
        s.decode[std::size_t(b)] = double(b) / model::decode_step_time(a, p, b, 256, sys).raw();
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  TEST_CASE("serving throughput over batch, built-in rows: no 128-row cliff, no neighbouring batch below 0.86 of the last") {
    // #27: "throughput is monotone in batch wherever the measured one is". Every measured serving sweep we have
    // (measured_inference_cases.json: Llama-3-8B decode steps on our H100 and H200 at batch 1…256, contexts 1K-8K;
    // measured_moe_inference_cases.json: the Qwen3-30B-A3B shape on the H100) rises in batch/step at every step. Before
    // the tile rows followed M (ops.cpp tile_rows), the built-in rows padded M to whole 128-row tiles and the
    // steady-state throughput fell at batch 129 by 5-30% (gpuplan serve, prompt 128, output 256: Llama-2-7B A100
    // 5,166 → 4,086 tok/s, Llama-2-13B A100 3,021 → 2,208, Llama-2-7B H100 9,679 → 8,312, Llama-3-8B H200
    // 16,801 → 11,757, Llama-3-70B TP4 H100 5,201 → 4,074, Llama-3-8B L40S 4,169 → 3,960) and again at 257 and 385.
    // Now the worst step from one batch to the next, steady state or decode only, is 0.884 (a tile row growing by 8
    // rows at a compute-bound shape, or a split-K slice lost; 0.866 before 16-bit GEMMs of more than 128 rows could
    // run the tile turned, ops.cpp swapped_tiles, 2026-11-30), and the issue's own example is flat (Llama-2-7B on
    // A100, 128 → 142: −0.4%, was −15%). Strict monotonicity is not the target: measured at one-row steps (our H200,
    // Llama-3-8B decode, data/validation/measured_batch_steps.json) the throughput itself falls by 1-4.4% where cuBLAS
    // changes tiling, and the test "one-row batch steps on our H200" (tests/validation) checks that the model falls
    // only where the measured one does. (A should-fail test of strict monotonicity stood here until that measurement.)
    const auto sweeps = batch_sweeps();
    REQUIRE(sweeps.size() == 6);
    double worst = 1.0;
    for (const auto& s : sweeps) {
      CAPTURE(s.label);
      REQUIRE(s.steady.size() > 160);
      for (std::size_t b = 1; b + 1 < s.steady.size(); ++b) {
        worst = std::min({worst, s.steady[b + 1] / s.steady[b], s.decode[b + 1] / s.decode[b]});
        CHECK(s.steady[b + 1] > 0.86 * s.steady[b]);
        CHECK(s.decode[b + 1] > 0.86 * s.decode[b]);
      }
    }
    CHECK(worst == gptest::approx(0.884).epsilon(0.002));
    CHECK(sweeps[0].steady[142] / sweeps[0].steady[128] == gptest::approx(0.996).epsilon(0.002));
  }

  TEST_CASE("decode step never falls as the context grows from 1K to 32K") {
    const auto& a = arch("llama-3.1-8b");
    const auto sys = h100();
    for (std::int64_t b : {1, 8, 64}) {
      units::Seconds prev{};
      for (std::int64_t ctx = 1024; ctx <= 32768; ctx += 1024) {
        const units::Seconds t = model::decode_step_time(a, plan_of(), b, ctx, sys);
        CAPTURE(b);
        CAPTURE(ctx);
        CHECK(t >= prev);
        prev = t;
      }
    }
  }

  TEST_CASE("prefill time never falls with the prompt length or the batch, across the chunking budget") {
    const auto& a = arch("llama-3.1-8b");
    const auto sys = h100();
    const auto p = plan_of();
    REQUIRE(p.max_batched_tokens == 8192);
    units::Seconds prev{};
    for (std::int64_t s : {1, 2, 16, 100, 128, 129, 512, 1000, 2048, 4096, 8191, 8192, 8193, 10000, 16384, 16385,
                           24576, 32768, 65536}) {
      const units::Seconds t = model::prefill_time(a, p, 1, s, sys);
      CAPTURE(s);
      CHECK(t > prev);
      prev = t;
    }
    for (std::int64_t s : {512, 1024, 3000, 10000}) {
      prev = units::Seconds{};
      for (std::int64_t b = 1; b <= 40; ++b) {
        const units::Seconds t = model::prefill_time(a, p, b, s, sys);
        CAPTURE(s);
        CAPTURE(b);
        CHECK(t >= prev);
        prev = t;
      }
    }
  }

  TEST_CASE("a prompt within the budget is one pass - past the budget the chunks add up") {
    const auto& a = arch("llama-3.1-8b");
    const auto sys = h100();
    const auto p = plan_of();
    // 4096 tokens: one pass of one prompt.
    CHECK(model::prefill_time(a, p, 1, 4096, sys) ==
          model::forward_cost(a, p, {0, 1, 0, 1, 4096, 0, true}, sys, Explain::off).total);
    // 16384 tokens: a chunk of 8192 that emits nothing, then 8192 more attending to the 8192 cached.
    const auto c1 = model::forward_cost(a, p, {0, 1, 0, 1, 8192, 0, false}, sys, Explain::off);
    const auto c2 = model::forward_cost(a, p, {0, 1, 0, 1, 8192, 8192, true}, sys, Explain::off);
    CHECK(model::prefill_time(a, p, 1, 16384, sys).raw() == gptest::approx((c1.total + c2.total).raw()).epsilon(1e-12));
  }

  TEST_CASE("TP halves the weights each GPU reads (Llama 3.1 70B) and makes the batch-1 step faster") {
    const auto& a = arch("llama-3.1-70b");
    const auto sys = h100();
    // forward_cost does not check memory, so TP 1 of 70B (139 GB) is still a valid question.
    const auto t1 = model::forward_cost(a, plan_of(1), decode(1, 1024), sys, Explain::off);
    const auto t2 = model::forward_cost(a, plan_of(2), decode(1, 1024), sys, Explain::off);
    const auto t4 = model::forward_cost(a, plan_of(4), decode(1, 1024), sys, Explain::off);
    // TP 1: 80 × (8192·10240 + 8192·8192 + 8192·57344 + 28672·8192) + 8192·128256 = 69,501,714,432 params × 2 B.
    CHECK(t1.weight_bytes.raw() == gptest::approx(2.0 * 69'501'714'432.0).epsilon(1e-12));
    // Every sharded dimension divides by 2 and 4 (10240, 8192, 57344, 28672, 128256): exactly halves.
    CHECK(t2.weight_bytes.raw() == gptest::approx(t1.weight_bytes.raw() / 2).epsilon(1e-12));
    CHECK(t4.weight_bytes.raw() == gptest::approx(t2.weight_bytes.raw() / 2).epsilon(1e-12));
    // Two all-reduces per layer (+ the logits all-gather) cost less than the halved weight stream saves.
    CHECK(t2.comm.raw() > 0);
    CHECK(t2.kernels == t1.kernels + 2 * 80 + 1);
    CHECK(t2.total < t1.total);
    CHECK(t4.total < t2.total);
    CHECK(model::decode_step_time(a, plan_of(2), 1, 1024, sys) == t2.total);
  }

  TEST_CASE("eager mode: a step is never shorter than kernels x 12 us of CPU issue - with CUDA graphs it can be") {
    const auto sys = h100();
    auto eager = plan_of();
    eager.cuda_graphs = false;
    eager.cpu_cost_by_op = false;  // one figure for every call (--cpu-per-kernel-us 12)
    eager.cpu_per_kernel = units::microseconds(12.0);
    // SmolLM2 360M streams 0.72 GB (0.27 ms) but issues 32·9 + 4 = 292 kernels (the final add + norm, LM head,
    // sampling and embedding gather beside the layers): the CPU binds at 3.504 ms.
    const auto small = model::forward_cost(arch("smollm2-360m"), eager, decode(1, 1024), sys, Explain::off);
    CHECK(small.kernels == 292);
    CHECK(small.total.raw() == gptest::approx(292 * 12e-6).epsilon(1e-12));
    CHECK(small.overhead.raw() > 0);
    const auto small_graph = model::forward_cost(arch("smollm2-360m"), plan_of(), decode(1, 1024), sys, Explain::off);
    CHECK(small_graph.total.raw() < 292 * 12e-6);
    CHECK(small_graph.overhead.raw() == 0);
    // Llama 3.1 8B: the GPU binds (15 GB streamed); eager pays 5 µs per kernel, a CUDA graph each kernel its class's
    // cost (H100 row: GEMM 4.6, fused attention 5.1, norm 1.93 + 4096 × 1.06 ns = 6.3, other 2.4 µs):
    // t_eager − t_graphs = 292 × 5 µs − the graph's fixed costs (the step less the same step at no fixed cost).
    const auto& a = arch("llama-3.1-8b");
    const units::Seconds te = model::decode_step_time(a, eager, 1, 1024, sys);
    const units::Seconds tg = model::decode_step_time(a, plan_of(), 1, 1024, sys);
    model::ServingPerfPlan none = plan_of();
    none.kernel_cost_by_class = false;
    none.kernel_overhead_graph = units::Seconds(0);
    const double fixed_graph = (tg - model::decode_step_time(a, none, 1, 1024, sys)).raw();
    CHECK(fixed_graph > 292 * 2.4e-6);  // every kernel at least the smallest class
    CHECK(fixed_graph < 292 * 6.5e-6);  // and at most the largest
    CHECK(te.raw() >= 292 * 12e-6);
    CHECK((te - tg).raw() == gptest::approx(292 * 5e-6 - fixed_graph).epsilon(1e-9));
    // A step overhead not hidden by the engine adds to every step as it is.
    auto slow = plan_of();
    slow.step_overhead = units::milliseconds(1.0);
    CHECK((model::decode_step_time(a, slow, 1, 1024, sys) - tg).raw() == gptest::approx(1e-3).epsilon(1e-9));
  }

  TEST_CASE("eager host time call by call, each at its kind's measured cost - checked on our tiny-Llama host runs") {
    // eager_host_ops.json (inference, µs per call): linear 38.4, layer norm 32.9, MHA core 36.2, GELU 12.5, add 23.6.
    // A PyTorch decode layer (serve_step.py) issues 4 GEMMs, 2 norms, the attention, 2 one-operand kernels (the rotary
    // half flip, SiLU) and 7 of two or more (x·cos, addcmul, K and V copies into the cache, 2 residual adds, the gate
    // product); the head a norm, the LM head, sampling and the embedding gather (two-operand).
    using model::HostCall;
    auto us = [](HostCall c) { return model::eager_host_per_call(c).raw() * 1e6; };
    CHECK(us(HostCall::gemm) == gptest::approx(38.4));
    CHECK(us(HostCall::norm) == gptest::approx(32.9));
    CHECK(us(HostCall::attention) == gptest::approx(113.0 - 2 * 38.4));
    CHECK(us(HostCall::unary) == gptest::approx(12.5));
    CHECK(us(HostCall::binary) == gptest::approx(23.6));
    const double layer_us = 4 * 38.4 + 2 * 32.9 + 36.2 + 2 * 12.5 + 7 * 23.6;  // 445.8
    const double head_us = 32.9 + 38.4 + 23.6 + 23.6;
    model::ServingPerfPlan p = plan_of();
    p.kernels = wl::KernelStyle::eager;
    p.cuda_graphs = false;
    p.attention = wl::AttentionKernel::fa2;
    const auto fc = cost("llama-3-8b", p, decode(8, 1024));
    CHECK(fc.kernels == 32 * 16 + 4);
    CHECK(fc.host.raw() == gptest::approx((32 * layer_us + head_us) * 1e-6).epsilon(1e-9));
    CHECK(fc.stage.raw() == gptest::approx(fc.host.raw()).epsilon(1e-9));  // host-bound at batch 8
    // --cpu-per-kernel-us: one figure for every call.
    model::ServingPerfPlan flat = p;
    flat.cpu_cost_by_op = false;
    flat.cpu_per_kernel = units::microseconds(30.0);
    CHECK(cost("llama-3-8b", flat, decode(8, 1024)).host.raw() == gptest::approx(516 * 30e-6).epsilon(1e-9));
    // Out of sample (the table was measured on module chains, not on these steps): serve_tiny_host.json, the same
    // decode code at a Llama shape too small for the GPU to bound its eager step (hidden 256, 32 layers, 4/2 heads,
    // FFN 768, vocabulary 2048), 516 calls, on the host that measured the table: eager 13.37 / 14.34 / 14.39 /
    // 15.12 ms at batch 1 / 8, context 128 / 1024. The model: 14.38 ms at each (+7.6, +0.3, -0.1, -4.9%).
    wl::TransformerArch tiny = arch("llama-3-8b");
    tiny.hidden = 256;
    tiny.heads = 4;
    tiny.kv_heads = 2;
    tiny.head_dim = 64;
    tiny.intermediate = 768;
    tiny.vocab = 2048;
    std::ifstream in(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured/h100-sxm5-80gb/serve_tiny_host.json");
    REQUIRE(in.good());
    const auto j = nlohmann::json::parse(in);
    int points = 0;
    for (const auto& pt : j.at("decode_points")) {
      const double b = pt.at("batch").get<double>();
      const auto ctx = pt.at("context_tokens").get<std::int64_t>();
      const double measured = pt.at("decode_step_time_eager_s").get<double>();
      const auto t = model::forward_cost(tiny, p, decode(b, ctx), h100());
      CAPTURE(b);
      CAPTURE(ctx);
      CHECK(t.kernels == 516);
      CHECK(t.stage.raw() == gptest::approx(t.host.raw()).epsilon(1e-9));  // the host bounds it
      CHECK(std::fabs(t.total.raw() / measured - 1.0) < 0.10);
      ++points;
    }
    CHECK(points == 4);
  }

  TEST_CASE("extreme but valid inputs give finite positive times: context 1,000,000 and batch 100,000") {
    const auto& a = arch("llama-3.1-8b");
    const auto sys = h100();
    const auto fc = model::forward_cost(a, plan_of(), decode(100'000, 1'000'000), sys, Explain::on);
    CHECK(finite_positive(fc.total));
    CHECK(std::isfinite(fc.flops.raw()));
    // 32 × 1e5 × 1,000,001 × 4096 B = 1.31e19 B of KV.
    CHECK(fc.kv_bytes.raw() == gptest::approx(32.0 * 1e5 * 1'000'001 * 4096).epsilon(1e-12));
    CHECK(finite_positive(model::decode_step_time(a, plan_of(), 100'000, 1'000'000, sys)));
    CHECK(finite_positive(model::decode_step_time(a, plan_of(), 1, 1'000'000, sys)));
    CHECK(finite_positive(model::prefill_time(a, plan_of(), 1, 1'000'000, sys)));
    CHECK(finite_positive(model::prefill_time(a, plan_of(), 100'000, 1000, sys)));
    const auto ss = model::steady_state(a, plan_of(), 100'000, 1'000'000, 1000, sys, Explain::on);
    CHECK(finite_positive(ss.iteration));
    CHECK(finite_positive(ss.ttft));
    CHECK(finite_positive(ss.request_latency));
    CHECK(std::isfinite(ss.output_tokens_per_s));
    CHECK(ss.output_tokens_per_s > 0);
    // MoE and MLA at the same extremes.
    CHECK(finite_positive(
        model::forward_cost(arch("mixtral-8x7b"), plan_of(), decode(100'000, 1'000'000), sys, Explain::off).total));
    CHECK(finite_positive(
        model::forward_cost(arch("deepseek-v3"), plan_of(8), decode(100'000, 1'000'000), sys, Explain::off).total));
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("speculative decoding") {
  TEST_CASE("expected tokens per step (1 - a^(g+1)) / (1 - a): 3.68928 at a 0.8 g 5, g + 1 at a 1, 1 at a 0") {
    // (1 − 0.8^6)/0.2 = (1 − 0.262144)/0.2 = 3.68928.
    CHECK(model::expected_tokens_per_step({0.8, 5}) == gptest::approx(3.68928).epsilon(1e-12));
    CHECK(model::expected_tokens_per_step({1.0, 5}) == 6.0);
    CHECK(model::expected_tokens_per_step({0.0, 5}) == 1.0);
    // (1 − 0.5^5)/0.5 = 1.9375.
    CHECK(model::expected_tokens_per_step({0.5, 4}) == gptest::approx(1.9375).epsilon(1e-12));
    // No draft tokens: the target's own token only.
    CHECK(model::expected_tokens_per_step({0.8, 0}) == gptest::approx(1.0).epsilon(1e-12));
    // Never more than γ + 1, increasing in α.
    double prev = 0;
    for (double alpha = 0; alpha <= 1.0 + 1e-12; alpha += 0.05) {
      const double e = model::expected_tokens_per_step({std::min(alpha, 1.0), 7});
      CAPTURE(alpha);
      CHECK(e >= prev);
      CHECK(e <= 8.0 + 1e-12);
      prev = e;
    }
  }

  TEST_CASE("speedup = E x t_target / (g x t_draft + t_verify)") {
    // α 0.8, γ 5, draft 2 ms, target 20 ms, verify 22 ms: step = 5·2 + 22 = 32 ms; per token 32/3.68928 = 8.67377 ms;
    // speedup = 3.68928 × 20 / 32 = 2.3058.
    const auto r = model::speculative_decoding({0.8, 5}, units::milliseconds(2), units::milliseconds(20),
                                               units::milliseconds(22));
    CHECK(r.tokens_per_step == gptest::approx(3.68928).epsilon(1e-12));
    CHECK(r.step.raw() == gptest::approx(32e-3).epsilon(1e-12));
    CHECK(r.per_token.raw() == gptest::approx(32e-3 / 3.68928).epsilon(1e-12));
    CHECK(r.speedup == gptest::approx(3.68928 * 20.0 / 32.0).epsilon(1e-12));
    CHECK(r.speedup == gptest::approx(2.3058).epsilon(1e-12));
    // The textbook form with t_verify = t_target: E / (γ·c + 1), c = 1/10, α 0.7, γ 4:
    // E = (1 − 0.7^5)/0.3 = 2.77310, speedup = 2.77310 / 1.4 = 1.98078.
    const auto t = model::speculative_decoding({0.7, 4}, units::milliseconds(1), units::milliseconds(10),
                                               units::milliseconds(10));
    CHECK(t.speedup == gptest::approx((1 - std::pow(0.7, 5)) / 0.3 / 1.4).epsilon(1e-12));
    CHECK(t.speedup == gptest::approx(1.98078).epsilon(1e-5));
    // A draft that is never accepted only costs: 1 × 10 / (4·1 + 10) = 0.714.
    const auto z = model::speculative_decoding({0.0, 4}, units::milliseconds(1), units::milliseconds(10),
                                               units::milliseconds(10));
    CHECK(z.speedup == gptest::approx(10.0 / 14.0).epsilon(1e-12));
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("serving steady state") {
  TEST_CASE("throughput = batch / iteration, requests = throughput / osl, ITL never below the decode-only step") {
    const auto& a = arch("llama-3.1-8b");
    const auto sys = h100();
    for (std::int64_t b : {1, 7, 64, 256}) {
      for (const auto& lens : {std::pair<std::int64_t, std::int64_t>{1024, 256}, {8000, 100}, {20000, 2000}}) {
        const std::int64_t isl = lens.first, osl = lens.second;  // (not a structured binding: CAPTURE's lambda, clang 14)
        const auto ss = model::steady_state(a, plan_of(), b, isl, osl, sys, Explain::off);
        CAPTURE(b);
        CAPTURE(isl);
        CAPTURE(osl);
        CHECK(ss.batch == b);
        // Prefill demand per iteration b·isl/osl against the 8192-token budget minus the b decodes: above it the
        // replica admits prompts only as fast as the budget allows and the throughput scales down by that share.
        const double demand = double(b) * double(isl) / double(osl), room = double(8192 - b);
        CHECK(ss.prefill_bound == (demand > room));
        if (demand <= room) CHECK(ss.output_tokens_per_s == double(b) / ss.iteration.raw());
        else CHECK(ss.output_tokens_per_s == gptest::approx(double(b) / ss.iteration.raw() * room / demand).epsilon(1e-12));
        CHECK(ss.requests_per_s == gptest::approx(ss.output_tokens_per_s / double(osl)).epsilon(1e-12));
        CHECK(ss.input_tokens_per_s == gptest::approx(ss.output_tokens_per_s * double(isl) / double(osl)).epsilon(1e-12));
        CHECK(ss.iteration >= ss.itl_decode_only);
        // The decode-only floor is the decode step at the mean context isl + osl/2.
        CHECK(ss.itl_decode_only == model::decode_step_time(a, plan_of(), b, isl + osl / 2, sys));
        CHECK(ss.prefill == model::prefill_time(a, plan_of(), 1, isl, sys));
        CHECK(ss.ttft >= ss.prefill);
        CHECK(ss.request_latency.raw() ==
              gptest::approx((ss.ttft + ss.iteration * double(osl - 1)).raw()).epsilon(1e-12));
      }
    }
  }

  TEST_CASE("iterations carry whole chunks: the mean interpolates the passes with ⌊n⌋ and ⌈n⌉ chunks") {
    // Budget 8192 tokens. n = (B·isl/osl, capped at the room 8192 − B) / chunk chunks per iteration on average.
    const auto& a = arch("llama-3.1-8b");
    const auto sys = h100();
    const auto p = plan_of();
    auto pass = [&](std::int64_t b, std::int64_t ctx, double chunks, std::int64_t chunk, std::int64_t past) {
      return model::forward_cost(a, p, model::ForwardBatch{double(b), 1, ctx, chunks, chunk, past, true}, sys,
                                 Explain::off)
          .total.raw();
    };
    // B 64, 1024 in / 256 out: 256 prompt tokens per iteration, chunk 1024, n = 0.25: one iteration in four
    // carries a whole prompt, the others only decodes.
    {
      const auto ss = model::steady_state(a, p, 64, 1024, 256, sys, Explain::off);
      const double d = pass(64, 1024 + 128, 0, 0, 0), f1 = pass(64, 1024 + 128, 1, 1024, 0);
      CHECK(ss.itl_decode_only.raw() == gptest::approx(d).epsilon(1e-12));
      CHECK(ss.iteration.raw() == gptest::approx(0.75 * d + 0.25 * f1).epsilon(1e-12));
      CHECK(ss.ttft.raw() == gptest::approx(std::max(ss.prefill.raw(), f1)).epsilon(1e-12));
      // An arrival waits for the running iteration: E[I²] / (2·E[I]) over the same mix.
      CHECK(ss.iteration_residual.raw() ==
            gptest::approx((0.75 * d * d + 0.25 * f1 * f1) / (2.0 * (0.75 * d + 0.25 * f1))).epsilon(1e-12));
    }
    // B 128, 2048 in / 100 out: 2621.44 tokens per iteration, n = 1.28: 72% of iterations carry one prompt, 28% two.
    {
      const auto ss = model::steady_state(a, p, 128, 2048, 100, sys, Explain::off);
      const double f1 = pass(128, 2048 + 50, 1, 2048, 0), f2 = pass(128, 2048 + 50, 2, 2048, 0);
      CHECK(ss.iteration.raw() == gptest::approx(0.72 * f1 + 0.28 * f2).epsilon(1e-9));
      CHECK(ss.iteration_residual.raw() ==
            gptest::approx((0.72 * f1 * f1 + 0.28 * f2 * f2) / (2.0 * (0.72 * f1 + 0.28 * f2))).epsilon(1e-9));
    }
    // B 256, 8000 in / 100 out: prefill-bound; the room of 7936 tokens is one chunk per iteration (n = 1), the
    // prompt in 2 chunks with 32 tokens cached on average.
    {
      const auto ss = model::steady_state(a, p, 256, 8000, 100, sys, Explain::off);
      CHECK(ss.prefill_bound);
      const double f1 = pass(256, 8000 + 50, 1, 7936, 32);
      CHECK(ss.iteration.raw() == gptest::approx(f1).epsilon(1e-12));
      CHECK(ss.ttft.raw() == gptest::approx(std::max(ss.prefill.raw(), 2 * f1)).epsilon(1e-12));
      CHECK(ss.iteration_residual.raw() == gptest::approx(f1 / 2.0).epsilon(1e-12));  // one pass, repeated
    }
  }

  TEST_CASE("a cached prefix is not computed again: the prompt's new tokens attend to it, TTFT and iterations fall") {
    const auto& a = arch("llama-3.1-8b");
    const auto sys = h100();
    auto p = plan_of();
    const auto none = model::steady_state(a, p, 64, 2048, 256, sys, Explain::off);
    p.cached_prefix_tokens = 1488;  // a 1500-token system prompt: its 93 full blocks of 16
    const auto pb = model::prompt_pass(p, 2048);
    CHECK(pb.prefill_tokens == 560);
    CHECK(pb.prefill_past == 1488);
    CHECK(model::prefill_time(a, p, 1, 2048, sys) ==
          model::forward_cost(a, p, model::ForwardBatch{0, 1, 0, 1.0, 560, 1488, true}, sys, Explain::off).total);
    const auto cached = model::steady_state(a, p, 64, 2048, 256, sys, Explain::off);
    CHECK(cached.prefill < none.prefill * 0.5);
    CHECK(cached.iteration < none.iteration);
    // B 64: 64·560/256 = 140 new prompt tokens per iteration, one 560-token chunk in four iterations, past 1488.
    const double d = model::decode_step_time(a, p, 64, 2048 + 128, sys).raw();
    const double f1 =
        model::forward_cost(a, p, model::ForwardBatch{64, 1, 2048 + 128, 1, 560, 1488, true}, sys, Explain::off).total.raw();
    CHECK(cached.iteration.raw() == gptest::approx(0.75 * d + 0.25 * f1).epsilon(1e-12));
    // At least one token is always computed: the prompt's logits come from its last token.
    p.cached_prefix_tokens = 4096;
    CHECK(model::prompt_pass(p, 2048).prefill_tokens == 1);
  }

  TEST_CASE("pipeline parallel: pp micro-batches in flight, each token crossing every stage") {
    const auto& a = arch("llama-3.1-70b");
    const auto sys = h100();
    auto p = plan_of(4);
    p.pp = 2;
    const auto ss = model::steady_state(a, p, 64, 2048, 256, sys, Explain::off);
    CHECK(ss.output_tokens_per_s == double(64) / ss.iteration.raw());
    CHECK(ss.iteration >= ss.itl_decode_only);
    // decode_step_time with PP runs batch/pp = 32 per micro-batch.
    const auto fc = model::forward_cost(a, p, decode(32, 2048 + 128), sys, Explain::off);
    CHECK(model::decode_step_time(a, p, 64, 2048 + 128, sys) == fc.total);
    CHECK(fc.pp_transfer.raw() > 0);
    CHECK(fc.total > fc.stage);
  }

  TEST_CASE("a replica over GPUs that no link joins is unpriceable (+inf) in every quantity, never NaN") {
    // TP 9 x PP 2 of MI300X: the mi300x-8 node has no scale-out network, so the TP collectives (the logits'
    // all-gather in the head among them) are +inf. The pass total was (stage - head)·PP + head = inf - inf = NaN
    // (CI's fuzz stage, stop 39; tests/fuzz/regressions/serving_scenario/tp9-pp2-on-a-node-without-scale-out.json).
    const auto& a = arch("llama-3.1-8b");
    const auto sys = node_system("mi300x-8");
    auto p = plan_of(9);
    p.pp = 2;
    const auto fc = model::forward_cost(a, p, decode(8, 1024), sys, Explain::off);
    CHECK(std::isinf(fc.stage.raw()));
    CHECK(std::isinf(fc.total.raw()));
    const auto ss = model::steady_state(a, p, 16, 512, 64, sys, Explain::on);
    for (double v : {ss.iteration.raw(), ss.itl_decode_only.raw(), ss.prefill.raw(), ss.ttft.raw(),
                     ss.request_latency.raw(), ss.iteration_residual.raw()}) {
      CHECK(std::isinf(v));
      CHECK(v > 0);
    }
    CHECK(ss.output_tokens_per_s == 0.0);
    CHECK(std::isinf(model::prefill_time(a, p, 4, 3000, sys).raw()));
    p.max_batched_tokens = 256;  // chunked: sum − before over +inf chunks
    CHECK(std::isinf(model::prefill_time(a, p, 4, 3000, sys).raw()));
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("serving planner") {
  namespace {
  model::ServingPlanResult plan70(double rate, std::optional<double> itl_ms, bool disaggregated = false) {
    const auto& a = arch("llama-3.1-70b");
    model::Traffic tr{rate, 2048, 500, std::nullopt, std::nullopt};
    model::Sla sla;
    sla.ttft = units::seconds(1.0);
    if (itl_ms) sla.itl = units::milliseconds(*itl_ms);
    model::ServingPlanOptions opt;
    opt.disaggregated = disaggregated;
    return model::plan_serving(a, model::parameter_counts(a, Explain::off), plan_of(), tr, sla, h100(), opt,
                               Explain::on);
  }
  }  // namespace

  TEST_CASE("Llama 3.1 70B on H100 at 20 req/s, 2048 in / 500 out, TTFT 1 s, ITL 50 ms: feasible, cheapest layout") {
    const auto r = plan70(20, 50);
    REQUIRE(r.feasible);
    REQUIRE(r.best.has_value());
    const auto& b = *r.best;
    CHECK(b.meets_sla);
    CHECK(b.misses.empty());
    CHECK(r.reasons.empty());
    CHECK(b.gpus == b.replicas * b.tp * b.pp);
    CHECK(b.itl.raw() <= 50e-3);
    CHECK(b.ttft.raw() <= 1.0);
    CHECK(b.ttft == b.state.ttft + b.iteration_wait + b.queue_wait);
    // The wait for the running iteration: its mean residual, at least half a mean iteration.
    CHECK(b.iteration_wait == b.state.iteration_residual);
    CHECK(b.iteration_wait >= b.itl * (0.5 / double(b.pp)));
    CHECK(b.batch >= 1);
    CHECK(b.batch <= b.max_batch_memory);
    // Enough replicas, and not one more than needed: replicas = ⌈20 / λ_r⌉.
    CHECK(double(b.replicas) * b.replica_requests_per_s >= 20.0);
    CHECK(double(b.replicas - 1) * b.replica_requests_per_s < 20.0);
    CHECK(b.replica_requests_per_s == b.state.requests_per_s);
    // 70B bf16 (139 GB) needs TP ≥ 2 on 80 GB GPUs; TP 1 is reported as not fitting.
    CHECK(b.tp >= 2);
    bool tp1_note = false;
    for (const auto& n : r.notes) tp1_note = tp1_note || n.find("TP 1 PP 1: the weights and one sequence") == 0;
    CHECK(tp1_note);
    // The cheapest: no evaluated layout meets the SLA with fewer GPUs.
    for (const auto& c : r.per_tp) {
      CAPTURE(c.tp);
      if (c.meets_sla) CHECK(c.gpus >= b.gpus);
      CHECK(c.gpus == c.replicas * c.tp * c.pp);
    }
    // $/Mtok = GPUs × $2.69/h / (20 req/s × 500 tokens) × 10⁶.
    CHECK(b.cost_per_mtok_usd == gptest::approx(double(b.gpus) * 2.69 / 3600.0 / (20.0 * 500.0) * 1e6).epsilon(1e-9));
    // Whole model, one token: 80 layers × 2 × 8 × 128 × 2 B = 327,680 B.
    CHECK(r.kv_bytes_per_token.raw() == 327'680.0);
  }

  TEST_CASE("the prompt queue's service is the prefill work a prompt adds to the iterations, so ρ < 1 when replicas keep up") {
    const auto r = plan70(20, 50);
    REQUIRE(r.best.has_value());
    for (const auto& c : r.per_tp) {
      CAPTURE(c.tp);
      const double share = 1.0 - (c.state.itl_decode_only / c.state.iteration).raw();
      CHECK(c.prefill_service.raw() == gptest::approx(share / c.replica_requests_per_s).epsilon(1e-12));
      CHECK(c.queue_rho == gptest::approx(20.0 / double(c.replicas) * c.prefill_service.raw()).epsilon(1e-12));
      CHECK(c.queue_rho < 1.0);
      CHECK(c.queue_wait ==
            model::prefill_queue_wait(c.queue_rho, c.prefill_service, 0.99, model::LengthDist::fixed(2048)));
    }
    // DeepSeek-V3 on 16 H200s at 20 req/s without a TTFT target: the KV-capacity batch keeps up (its steady state
    // serves 20.07 req/s per replica); its prompt queue printed 1e30 s when it priced a prompt's prefill alone.
    const auto& ds = arch("deepseek-v3");
    model::Traffic tr{20.0, 1024, 256, std::nullopt, std::nullopt};
    model::ServingPlanOptions opt;
    const auto sys = node_system("dgx-h200");
    const auto d = model::plan_serving(ds, model::parameter_counts(ds, Explain::off), plan_of(), tr, model::Sla{},
                                       sys, opt, Explain::off);
    REQUIRE(d.best.has_value());
    CHECK(d.best->queue_rho < 1.0);
    CHECK(d.best->ttft.raw() < 10.0);
  }

  TEST_CASE("the planner warns when the prompt's own prefill takes over half the TTFT target (the cliff)") {
    // Llama 3.1 70B, 2048 in: a 1 s target leaves room; at a target just above the best layout's own prefill the
    // note appears, and it says so when the own prefill alone exceeds the target.
    auto has_note = [](const model::ServingPlanResult& r, const char* w) {
      for (const auto& n : r.notes)
        if (n.find(w) != std::string::npos) return true;
      return false;
    };
    const auto& a = arch("llama-3.1-70b");
    const auto params = model::parameter_counts(a, Explain::off);
    model::Traffic tr{20.0, 2048, 500, std::nullopt, std::nullopt};
    model::ServingPlanOptions opt;
    auto plan_at = [&](double ttft_s) {
      model::Sla sla;
      sla.ttft = units::seconds(ttft_s);
      return model::plan_serving(a, params, plan_of(), tr, sla, h100(), opt, Explain::off);
    };
    const auto easy = plan_at(10.0);
    REQUIRE(easy.best.has_value());
    const double own = (easy.best->ttft - easy.best->queue_wait - easy.best->iteration_wait).raw();
    CHECK_FALSE(has_note(easy, "of the TTFT target"));
    const auto tight = plan_at(own * 0.5);
    REQUIRE(tight.best.has_value());
    const double own_t = (tight.best->ttft - tight.best->queue_wait - tight.best->iteration_wait).raw();
    CHECK(has_note(tight, own_t > own * 0.5 ? "exceeds the TTFT target" : "of the TTFT target"));
  }

  TEST_CASE("the TTFT–GPU frontier: each step is what the planner answers for that target, and a cliff is explained") {
    // Llama 3.1 70B, 2048 in / 500 out at 20 req/s on TP 8: a 170 ms p99 target is near the prompt's own prefill.
    const auto& a = arch("llama-3.1-70b");
    const auto params = model::parameter_counts(a, Explain::off);
    model::Traffic tr{20.0, 2048, 500, std::nullopt, std::nullopt};
    model::ServingPlanOptions opt;
    opt.tp_options = {8};
    auto plan_at = [&](double ttft_s) {
      model::Sla sla;
      sla.ttft = units::seconds(ttft_s);
      return model::plan_serving(a, params, plan_of(), tr, sla, h100(), opt, Explain::off);
    };
    const auto r = plan_at(0.17);
    REQUIRE(r.feasible);
    REQUIRE(r.ttft_frontier.size() >= 3);
    for (std::size_t i = 1; i < r.ttft_frontier.size(); ++i) {
      CHECK(r.ttft_frontier[i].ttft > r.ttft_frontier[i - 1].ttft);
      CHECK(r.ttft_frontier[i].gpus < r.ttft_frontier[i - 1].gpus);
    }
    // Planning again with a step's TTFT as the target answers that step's GPUs and batch; a hair below it, more GPUs.
    for (std::size_t i = 0; i < std::min<std::size_t>(4, r.ttft_frontier.size()); ++i) {
      const auto& f = r.ttft_frontier[i];
      CAPTURE(i);
      const auto at = plan_at(f.ttft.raw() * (1.0 + 1e-9));
      REQUIRE(at.feasible);
      CHECK(at.best->gpus == f.gpus);
      CHECK(at.best->batch == f.batch);
      if (i > 0) CHECK(plan_at(f.ttft.raw() * (1.0 - 1e-9)).best->gpus > f.gpus);
    }
    // The plan's own step is on the frontier, and a looser target saves over a third of the GPUs: the note says so.
    bool own = false;
    for (const auto& f : r.ttft_frontier) own = own || (f.gpus == r.best->gpus && f.batch == r.best->batch);
    CHECK(own);
    REQUIRE(2 * r.best->gpus >= 3 * r.ttft_frontier.back().gpus);
    bool noted = false;
    for (const auto& n : r.notes) noted = noted || n.rfind("GPUs against the TTFT target at TP 8 × PP 1", 0) == 0;
    CHECK(noted);
    // With a target past the frontier's last step there is no cliff to explain.
    const auto loose = plan_at(r.ttft_frontier.back().ttft.raw() * 1.01);
    REQUIRE(loose.feasible);
    CHECK(loose.best->gpus == loose.ttft_frontier.back().gpus);
    for (const auto& n : loose.notes) CHECK(n.find("GPUs against the TTFT target") == std::string::npos);
  }

  TEST_CASE("a closed loop of users: λ = N / (TTFT + R + (osl − 1)·ITL + think time), no queueing, replicas for it") {
    const auto& a = arch("llama-3.1-70b");
    const auto params = model::parameter_counts(a, Explain::off);
    model::Sla sla;
    sla.ttft = units::seconds(1.0);
    sla.itl = units::milliseconds(50);
    model::ServingPlanOptions opt;
    auto plan_users = [&](std::int64_t n, double think_s) {
      model::Traffic tr{1.0, 2048, 500, std::nullopt, std::nullopt};
      tr.concurrency = n;
      tr.think_time = units::seconds(think_s);
      return model::plan_serving(a, params, plan_of(), tr, sla, h100(), opt, Explain::on);
    };
    const auto r = plan_users(256, 0.0);
    REQUIRE(r.feasible);
    const auto& b = *r.best;
    const double cycle = (b.state.ttft + b.state.iteration_residual + b.itl * 499.0).raw();
    CHECK(b.requests_per_s == gptest::approx(256.0 / cycle).epsilon(1e-12));
    CHECK(r.traffic.requests_per_s == b.requests_per_s);
    CHECK(b.queue_wait.raw() == 0.0);
    CHECK(b.iteration_wait == b.state.iteration_residual);  // no queue: the whole running iteration's residual
    CHECK(b.ttft == b.state.ttft + b.iteration_wait);
    CHECK(double(b.replicas) * b.replica_requests_per_s >= b.requests_per_s);
    CHECK(double(b.replicas - 1) * b.replica_requests_per_s < b.requests_per_s);
    CHECK(b.cost_per_mtok_usd ==
          gptest::approx(double(b.gpus) * 2.69 / 3600.0 / (b.requests_per_s * 500.0) * 1e6).epsilon(1e-9));
    bool noted = false;
    for (const auto& n : r.notes) noted = noted || n.rfind("closed loop: 256 users", 0) == 0;
    CHECK(noted);
    // Users who think for 60 s between requests offer far less load: at most N / Z, and fewer GPUs.
    const auto slow = plan_users(256, 60.0);
    REQUIRE(slow.feasible);
    CHECK(slow.best->requests_per_s < 256.0 / 60.0);
    CHECK(slow.best->gpus <= b.gpus);
    // More users never need fewer GPUs.
    std::int64_t prev = 0;
    for (std::int64_t n : {1, 16, 64, 256, 1024}) {
      const auto rn = plan_users(n, 0.0);
      REQUIRE(rn.best.has_value());
      CAPTURE(n);
      CHECK(rn.best->gpus >= prev);
      prev = rn.best->gpus;
    }
  }

  TEST_CASE("an ITL of 1 ms is infeasible: the best achievable is given with the reasons") {
    const auto r = plan70(20, 1);
    CHECK_FALSE(r.feasible);
    REQUIRE(r.best.has_value());
    CHECK_FALSE(r.best->meets_sla);
    REQUIRE_FALSE(r.reasons.empty());
    for (const auto& reason : r.reasons) {
      CAPTURE(reason);
      CHECK(reason.rfind("best achievable misses: ", 0) == 0);
    }
    CHECK(r.reasons.front().rfind("best achievable misses: ITL ", 0) == 0);
    // A 70B step streams at least 139 GB / 8 GPUs / 3.35 TB/s = 5.2 ms: far above 1 ms.
    CHECK(r.best->itl.raw() > 139e9 / 8 / 3.35e12);
  }

  TEST_CASE("more traffic never needs fewer GPUs") {
    std::int64_t prev = 0;
    for (double rate : {1.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0}) {
      const auto r = plan70(rate, 50);
      CAPTURE(rate);
      REQUIRE(r.feasible);
      CHECK(r.best->gpus >= prev);
      prev = r.best->gpus;
    }
  }

  TEST_CASE("disaggregated pools: prefill GPUs + decode GPUs = GPUs, whole replicas in each pool") {
    const auto r = plan70(20, 50, true);
    REQUIRE(r.best.has_value());
    REQUIRE(r.disaggregated.has_value());
    const auto& d = *r.disaggregated;
    CHECK(d.prefill_gpus + d.decode_gpus == d.gpus);
    CHECK(d.prefill_gpus >= d.prefill_tp);
    CHECK(d.decode_gpus >= d.decode_tp);
    CHECK(d.prefill_gpus % (d.prefill_tp * r.best->pp) == 0);
    CHECK(d.decode_gpus % (d.decode_tp * r.best->pp) == 0);
    CHECK(d.kv_transfer.raw() > 0);
    CHECK(d.ttft > d.kv_transfer);
    CHECK(d.decode_batch >= 1);
    if (d.meets_sla) {
      CHECK(d.itl.raw() <= 50e-3);
      CHECK(d.ttft.raw() <= 1.0);
    }
    CHECK(d.cost_per_mtok_usd == gptest::approx(double(d.gpus) * 2.69 / 3600.0 / (20.0 * 500.0) * 1e6).epsilon(1e-9));
  }

  TEST_CASE("a prefill pool of more than a million replicas still has its TTFT (it was reported as 0 s)") {
    const auto r = plan70(1e7, 50, true);  // λ · t_prefill is above 10⁶: the pool search used to start past its end
    REQUIRE(r.disaggregated.has_value());
    const auto& d = *r.disaggregated;
    CHECK(d.ttft > d.kv_transfer);
    CHECK(d.prefill_gpus > 1000000);
    CHECK(d.prefill_gpus % d.prefill_tp == 0);
  }

  TEST_CASE("replica counts saturate at 1e12: the layout misses its SLA and GPU counts stay exact (no int64 overflow)") {
    const auto r = plan70(1e20, 50, true);
    REQUIRE(r.best.has_value());
    CHECK_FALSE(r.feasible);
    const auto& b = *r.best;
    CHECK(b.replicas == 1000000000000LL);
    CHECK(b.gpus == b.replicas * b.tp * b.pp);
    CHECK_FALSE(b.meets_sla);
    bool named = false;
    for (const auto& m : b.misses) named = named || m.find("needs more than 1e+12 replicas") != std::string::npos;
    CHECK(named);
    REQUIRE(r.disaggregated.has_value());
    CHECK_FALSE(r.disaggregated->meets_sla);
    CHECK(r.disaggregated->ttft > r.disaggregated->kv_transfer);
  }
}

// ---------------------------------------------------------------------------------------------------------------
TEST_SUITE("request length distributions") {
  TEST_CASE("fixed, empirical and lognormal lengths: mean, mean square, quantiles") {
    const auto f = model::LengthDist::fixed(1000);
    CHECK(f.mean() == 1000.0);
    CHECK(f.quantile(0.99) == 1000);
    model::LengthDist e{{{100, 0.5}, {1000, 0.4}, {10000, 0.1}}};
    CHECK(e.mean() == gptest::approx(50 + 400 + 1000));                       // 1450
    CHECK(e.mean_square() == gptest::approx(0.5 * 1e4 + 0.4 * 1e6 + 0.1 * 1e8));  // 10,405,000
    CHECK(e.quantile(0.5) == 100);
    CHECK(e.quantile(0.9) == 1000);
    CHECK(e.quantile(0.99) == 10000);
    // Lognormal(mean 2048, sd 1500) at 32 equal-probability points: the discretised mean and sd land near the
    // asked ones (the conditional medians of the slices under-represent the far tail a little).
    const auto l = model::lognormal_lengths(2048, 1500);
    double total = 0;
    for (const auto& [v, p] : l.points) total += p;
    CHECK(total == gptest::approx(1.0));
    CHECK(l.mean() == gptest::approx(2048).epsilon(0.05));
    const double sd = std::sqrt(l.mean_square() - l.mean() * l.mean());
    CHECK(sd == gptest::approx(1500).epsilon(0.15));
    CHECK(l.quantile(0.5) < 2048);  // right-skewed: median below the mean
    CHECK(l.quantile(0.99) > 2 * 2048);
  }

  TEST_CASE("the planner with distributions: TTFT of the p99 prompt, decode context weighted by output length") {
    const auto& a = arch("llama-3.1-70b");
    const auto sys = h100();
    const auto params = model::parameter_counts(a, Explain::off);
    model::Sla sla;
    sla.ttft = units::milliseconds(5000);
    sla.itl = units::milliseconds(50);
    model::ServingPlanOptions opt;
    opt.tp_options = {8};
    model::Traffic fixed{5.0, 1450, 500, std::nullopt, std::nullopt};
    model::Traffic mixed{5.0, 1450, 500, model::LengthDist{{{100, 0.5}, {1000, 0.4}, {10000, 0.1}}},
                         model::LengthDist::fixed(500)};
    const auto rf = model::plan_serving(a, params, plan_of(), fixed, sla, sys, opt, Explain::off);
    const auto rm = model::plan_serving(a, params, plan_of(), mixed, sla, sys, opt, Explain::off);
    REQUIRE(rf.best.has_value());
    REQUIRE(rm.best.has_value());
    // Same mean prompt: TTFT (without queueing) is the 10,000-token prompt's prefill at p99, not the 1450-token one.
    const auto p99 = model::prefill_time(a, plan_of(8), 1, 10000, sys);
    // (TTFT is the larger of that prefill and its chunks' iterations: equal to it up to rounding when it is the larger.)
    INFO("mixed TTFT " << (rm.best->ttft - rm.best->queue_wait).raw() << " s, p99 prefill " << p99.raw() << " s");
    CHECK((rm.best->ttft - rm.best->queue_wait).raw() >= p99.raw() * (1.0 - 1e-12));
    CHECK(rf.best->ttft - rf.best->queue_wait < p99);
    // The notes say what was assumed.
    bool noted = false;
    for (const auto& n : rm.notes) noted = noted || n.find("the prompt at p99 has 10000 tokens") != std::string::npos;
    CHECK(noted);
  }
}
