// Transformer Engine's FP8 quantisation kernels per GEMM (issue #24; quant_recipe.hpp te_quant_passes): the amax pass
// of current scaling, the cast or cast-transpose, the FP8 transpose after a sequence-parallel all-gather, MXFP8's
// two-axis quantise and its scale swizzles. Expected bytes are worked out by hand from TE 2.7's kernels as the
// header cites them, on Llama-3-70B (h 8192, fc1 2·28672, 64 query and 8 key/value heads of 128) and Llama-3-8B.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::arch;

namespace {

const model::OpCost* op_named(const model::TrainingEstimate& e, const std::string& name) {
  for (const auto& op : e.layer_ops)
    if (op.name == name) return &op;
  return nullptr;
}

double op_bytes(const model::TrainingEstimate& e, const std::string& name) {
  const model::OpCost* op = op_named(e, name);
  REQUIRE_MESSAGE(op != nullptr, name);
  return op->bytes.raw();
}

int ops_containing(const model::TrainingEstimate& e, const std::string& part) {
  return int(std::count_if(e.layer_ops.begin(), e.layer_ops.end(),
                           [&](const model::OpCost& o) { return o.name.find(part) != std::string::npos; }));
}

// Llama-3-70B at TP 4 with sequence parallelism, one 8192-token micro-batch (the Megatron-Bridge H100 layout's layer).
wl::TrainingPlan tp4_sp(wl::QuantRecipe r) {
  wl::TrainingPlan p;
  p.par.tp = 4;
  p.par.sequence_parallel = true;
  p.seq_len = 8192;
  p.micro_batch = 1;
  p.global_batch = 1;
  p.precision.compute = hw::Precision::fp8;
  p.precision.recipe = r;
  return p;
}

wl::TrainingPlan one_gpu(wl::QuantRecipe r) {
  wl::TrainingPlan p = tp4_sp(r);
  p.par.tp = 1;
  p.par.sequence_parallel = false;
  return p;
}

constexpr double T = 8192.0, h = 8192.0;

}  // namespace

TEST_SUITE("fp8 te casts") {
  TEST_CASE("current scaling on H100 at TP 4 with SP: shard casts before the gather, the transpose after it") {
    const auto e = model::estimate_training(arch("llama-3-70b"), tp4_sp(wl::QuantRecipe::tensorwise),
                                            test::node_system("dgx-h100"), Explain::off);
    const std::string p = " fp8 tensorwise";
    // QKV: its input is the norm's output, whose kernel took the amax: no amax pass. The row-wise cast of this
    // GPU's T/4 shard (read 2 B, write 1 B), then the transpose of the gathered T × h FP8 tensor (1 + 1 B).
    CHECK(op_named(e, "QKV projection" + p + " amax") == nullptr);
    CHECK(op_bytes(e, "QKV projection" + p + " cast") == gptest::approx(T / 4.0 * h * 3.0));
    CHECK(op_bytes(e, "QKV projection" + p + " transpose") == gptest::approx(T * h * 2.0));
    // Its output gradient (T × (64 + 2·8)·128 / 4 = T × 2560) is not gathered: amax (2 B) and cast-transpose (4 B).
    CHECK(op_bytes(e, "QKV projection grad" + p + " amax") == gptest::approx(T * 2560.0 * 2.0));
    CHECK(op_bytes(e, "QKV projection grad" + p + " cast-transpose") == gptest::approx(T * 2560.0 * 4.0));
    // The output projection's input (T × h/4) is not a norm's: amax, then cast-transpose; its gradient is gathered.
    CHECK(op_bytes(e, "output projection" + p + " amax") == gptest::approx(T * h / 4.0 * 2.0));
    CHECK(op_bytes(e, "output projection" + p + " cast-transpose") == gptest::approx(T * h / 4.0 * 4.0));
    CHECK(op_bytes(e, "output projection grad" + p + " amax") == gptest::approx(T / 4.0 * h * 2.0));
    CHECK(op_bytes(e, "output projection grad" + p + " transpose") == gptest::approx(T * h * 2.0));
    // MLP down: input T × 28672/4 (amax 2 B + cast-transpose 4 B), gathered gradient.
    CHECK(op_bytes(e, "MLP down" + p + " cast-transpose") == gptest::approx(T * 7168.0 * 4.0));
    // One launch-only scale kernel per quantised operand: 2 per linear, 4 linears.
    CHECK(ops_containing(e, " scale from amax") == 8);
    // Each pass at its measured fraction of the streaming rate (quant_recipe.hpp: amax 0.916, cast-transpose 0.861,
    // FP8 transpose 0.800): its time beyond the fixed cost (the launch-only scale kernel's time) against a streaming
    // op's (the residual add) per byte.
    const model::OpCost* scale = op_named(e, "output projection" + p + " scale from amax");
    const model::OpCost* res = op_named(e, "residual add");
    REQUIRE(scale != nullptr);
    REQUIRE(res != nullptr);
    const double fixed = scale->time.raw(), per_byte = (res->time.raw() - fixed) / res->bytes.raw();
    auto rate = [&](const std::string& name) {
      const model::OpCost* o = op_named(e, name);
      REQUIRE_MESSAGE(o != nullptr, name);
      return o->bytes.raw() * per_byte / (o->time.raw() - fixed);
    };
    CHECK(rate("output projection" + p + " amax") == gptest::approx(0.916).epsilon(0.002));
    CHECK(rate("output projection" + p + " cast-transpose") == gptest::approx(0.861).epsilon(0.002));
    CHECK(rate("QKV projection" + p + " transpose") == gptest::approx(0.800).epsilon(0.002));
    CHECK(rate("QKV projection" + p + " cast") == gptest::approx(1.0).epsilon(0.002));
  }

  TEST_CASE("delayed scaling on H100 at TP 1: the norm writes FP8, only its transpose is left") {
    const auto e = model::estimate_training(arch("llama-3-70b"), one_gpu(wl::QuantRecipe::delayed),
                                            test::node_system("dgx-h100"), Explain::off);
    CHECK(op_named(e, "QKV projection fp8 cast") == nullptr);
    CHECK(op_named(e, "QKV projection fp8 cast-transpose") == nullptr);
    CHECK(op_bytes(e, "QKV projection fp8 transpose") == gptest::approx(T * h * 2.0));
    CHECK(op_bytes(e, "MLP up/gate fp8 transpose") == gptest::approx(T * h * 2.0));
    // Not a norm's output: the fused cast-transpose, 2 + 1 + 1 B, its amax from the history (no amax pass).
    CHECK(op_bytes(e, "output projection fp8 cast-transpose") == gptest::approx(T * h * 4.0));
    CHECK(ops_containing(e, " amax") == 0);
  }

  TEST_CASE("current scaling costs an amax pass per non-norm operand over delayed, on a B200 at TP 1") {
    const auto sys = test::node_system("dgx-b200");
    const auto& a = arch("llama-3-8b");
    const auto ed = model::estimate_training(a, one_gpu(wl::QuantRecipe::delayed), sys, Explain::off);
    const auto ec = model::estimate_training(a, one_gpu(wl::QuantRecipe::tensorwise), sys, Explain::off);
    // Blackwell's FP8 GEMMs read either layout: a cast writes the row-wise copy only, and no transpose is built.
    CHECK(op_bytes(ec, "QKV projection fp8 tensorwise cast") == gptest::approx(T * 4096.0 * 3.0));
    CHECK(op_named(ed, "QKV projection fp8 cast") == nullptr);  // delayed: the norm's kernel casts
    CHECK(ops_containing(ec, " transpose") == 0);
    CHECK(ops_containing(ed, " transpose") == 0);
    // Amax passes: 6 of the 8 operands (the two norm outputs take theirs from the norm kernel).
    CHECK(ops_containing(ec, "tensorwise amax") == 6);
    CHECK(ops_containing(ec, "tensorwise scale from amax") == 8);
    CHECK(ec.step_time > ed.step_time);
  }

  TEST_CASE("MXFP8 on a B200: one two-axis quantise per operand, norm output or not, and six scale swizzles per linear") {
    const auto e = model::estimate_training(arch("llama-3-8b"), one_gpu(wl::QuantRecipe::mxfp8),
                                            test::node_system("dgx-b200"), Explain::off);
    const double both = 2.0 + 2.0 * (1.0 + 1.0 / 32.0);
    CHECK(op_bytes(e, "QKV projection mxfp8 quantise (row + column)") == gptest::approx(T * 4096.0 * both));
    CHECK(op_bytes(e, "QKV projection grad mxfp8 quantise (row + column)") ==
          gptest::approx(T * (4096.0 + 2.0 * 1024.0) * both));
    CHECK(ops_containing(e, " amax") == 0);
    CHECK(ops_containing(e, " mxfp8 scale swizzle") == 24);
    // The quantise at TE's published B200 rate, 0.757 of the streaming rate.
    const model::OpCost* res = op_named(e, "residual add");
    const model::OpCost* q = op_named(e, "output projection mxfp8 quantise (row + column)");
    REQUIRE(res != nullptr);
    REQUIRE(q != nullptr);
    // Fixed cost and time per byte from two streaming ops of different sizes (a swizzle and the residual add).
    const model::OpCost* sw = op_named(e, "QKV projection mxfp8 scale swizzle W");
    REQUIRE(sw != nullptr);
    const double per_byte = (res->time.raw() - sw->time.raw()) / (res->bytes.raw() - sw->bytes.raw());
    const double fixed = sw->time.raw() - sw->bytes.raw() * per_byte;
    CHECK(q->bytes.raw() * per_byte / (q->time.raw() - fixed) == gptest::approx(0.757).epsilon(0.01));
    // The weight's scales: read and write 1 B per 32 weights (QKV 4096 × 6144).
    CHECK(op_bytes(e, "QKV projection mxfp8 scale swizzle W") == gptest::approx(4096.0 * 6144.0 * 2.0 / 32.0));
  }
}

TEST_SUITE("fp8 te casts") {
  TEST_CASE("the MoE router stays 16-bit under FP8: no casts, its GEMM at the bf16 rate") {
    const auto sys = test::node_system("dgx-b200");
    const auto& a = arch("qwen3-30b-a3b");
    wl::TrainingPlan p = one_gpu(wl::QuantRecipe::tensorwise);
    p.seq_len = 4096;
    wl::TrainingPlan b = p;
    b.precision.compute = hw::Precision::bf16;
    b.precision.recipe = wl::QuantRecipe::delayed;  // a recipe other than the default needs fp8
    const auto e = model::estimate_training(a, p, sys, Explain::off), eb = model::estimate_training(a, b, sys, Explain::off);
    CHECK(ops_containing(e, "router fp8") == 0);
    CHECK(ops_containing(e, "expert up/gate fp8 tensorwise cast") == 1);  // the experts are FP8
    const model::OpCost* r = op_named(e, "router");
    const model::OpCost* rb = op_named(eb, "router");
    REQUIRE(r != nullptr);
    REQUIRE(rb != nullptr);
    CHECK(r->time.raw() == gptest::approx(rb->time.raw()).scale(0).epsilon(1e-12));
  }
}
