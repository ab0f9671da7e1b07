// The LoRA adapter's passes beside a frozen linear layer (model/src/train/lora_adapter.hpp) and the tensors it keeps
// (model/src/memory/memory_activations.cpp), checked on the MLPerf Llama 2 70B LoRA recipe: NeMo's
// ParallelLinearAdapter (nemo/collections/llm/peft/utils.py at 25.04-alpha.rc1, the forward of the adapter:
// dropout on the input when dropout_position is 'pre', linear_in, linear_out, `x * (alpha / dim)`) and LoRALinear
// (nemo/collections/llm/peft/lora.py: `linear_output + adapter_output`); MLPerf Training v5.0 NVIDIA
// nyx_n1_ngc25.04_nemo train.py: LoRA(dim=16, alpha=32, dropout=0.1, dropout_position="pre",
// target_modules=["linear_proj", "linear_qkv"]).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>

#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::arch;

namespace {

// Llama 2 70B (h 8192, 64 query heads and 8 KV heads of 128: QKV width 10240), one 8192-token sequence per GPU,
// FP8 GEMMs with an FP8 base, rank 16 on QKV and the output projection: the v5.0 B200 row's plan.
wl::TrainingPlan mlperf_plan(int tp, double dropout) {
  wl::TrainingPlan p;
  p.seq_len = 8192;
  p.micro_batch = 1;
  p.par.tp = tp;
  p.par.dp = 8 / tp;
  p.par.sequence_parallel = tp > 1;
  p.overlap_tp_comm = tp > 1;
  p.global_batch = p.par.dp;
  p.precision.compute = hw::Precision::fp8;
  p.precision.fp8_params = true;
  p.precision.weight_bytes = 1.0;
  p.zero = wl::ZeroStage::optimizer;
  p.lora.rank = 16;
  p.lora.targets = wl::LoraTargets::attention;
  p.lora.base = wl::LoraBase::fp8;
  p.lora.dropout = dropout;
  return p;
}

const model::OpCost* find(const model::TrainingEstimate& e, const std::string& name) {
  for (const auto& op : e.layer_ops)
    if (op.name == name) return &op;
  return nullptr;
}

double bytes_of(const model::TrainingEstimate& e, const std::string& name) {
  const model::OpCost* op = find(e, name);
  REQUIRE_MESSAGE(op != nullptr, "no op " << name);
  return op->bytes.raw();
}

}  // namespace

TEST_SUITE("LoRA adapter passes (NeMo ParallelLinearAdapter)") {
  TEST_CASE("TP 1: dropout, scale and the two sums stream the adapter's input and output, in bf16") {
    const auto sys = test::node_system("dgx-b200");
    const auto e = model::estimate_training(arch("llama-2-70b"), mlperf_plan(1, 0.1), sys, Explain::on);
    const double m = 8192, h = 8192, nqkv = 10240;
    // Dropout: read 2 B, write 2 B and the 1-byte bool mask (torch native_dropout); backward read 2 + 1, write 2.
    CHECK(bytes_of(e, "QKV projection LoRA dropout") == gptest::approx(m * h * 5.0));
    CHECK(bytes_of(e, "QKV projection LoRA dropout bwd") == gptest::approx(m * h * 5.0));
    CHECK(bytes_of(e, "output projection LoRA dropout") == gptest::approx(m * h * 5.0));
    // x * (alpha / dim) on the adapter's output (read + write 2 B) each way, and linear_output + adapter_output (read
    // 2 + 2, write 2); backward the input's two gradients summed (the same 6 B) over the adapter's input.
    CHECK(bytes_of(e, "QKV projection LoRA scale") == gptest::approx(m * nqkv * 4.0));
    CHECK(bytes_of(e, "QKV projection LoRA scale bwd") == gptest::approx(m * nqkv * 4.0));
    CHECK(bytes_of(e, "QKV projection LoRA output sum") == gptest::approx(m * nqkv * 6.0));
    CHECK(bytes_of(e, "QKV projection LoRA input-gradient sum") == gptest::approx(m * h * 6.0));
    CHECK(bytes_of(e, "output projection LoRA output sum") == gptest::approx(m * h * 6.0));
    // x·A is Megatron-Core's own ColumnParallelLinear, outside Transformer Engine's FP8: 2·m·h·r FLOPs on a bf16
    // input (2 B per element of the 8192 × 8192 input at least).
    const model::OpCost* a = find(e, "QKV projection LoRA A");
    REQUIRE(a != nullptr);
    CHECK(a->flops.raw() == gptest::approx(2.0 * m * h * 16));
    CHECK(a->bytes.raw() >= m * h * 2.0);
    // Without dropout the two dropout kernels are gone; the rest stays.
    const auto nod = model::estimate_training(arch("llama-2-70b"), mlperf_plan(1, 0.0), sys, Explain::on);
    CHECK(find(nod, "QKV projection LoRA dropout") == nullptr);
    CHECK(find(nod, "QKV projection LoRA scale") != nullptr);
    CHECK(nod.step_time < e.step_time);
  }

  TEST_CASE("TP 4 with sequence parallelism and TP overlap: the QKV adapter drops out its sequence shard") {
    // NeMo: with the layer's ub_overlap_ag the norm output reaches the adapter as the sequence shard (m/t × h); the
    // adapter's dropout runs there and gather_from_sequence_parallel_region follows. The output projection's adapter
    // takes the h/t shard of the attention output and its output goes back to the sequence shard (all2all_hp2sp):
    // m · h / t either way.
    const auto sys = test::node_system("dgx-h100");
    const auto e = model::estimate_training(arch("llama-2-70b"), mlperf_plan(4, 0.1), sys, Explain::on);
    const double m = 8192, h = 8192, nqkv = 10240;
    CHECK(bytes_of(e, "QKV projection LoRA dropout") == gptest::approx(m / 4 * h * 5.0));
    CHECK(bytes_of(e, "QKV projection LoRA scale") == gptest::approx(m * nqkv / 4 * 4.0));
    CHECK(bytes_of(e, "output projection LoRA dropout") == gptest::approx(m * h / 4 * 5.0));
    CHECK(bytes_of(e, "output projection LoRA output sum") == gptest::approx(m * h / 4 * 6.0));
  }

  TEST_CASE("memory: the dropped-out copies and masks the adapters keep") {
    // Per token and layer, FP8 GEMMs, FlashAttention: without dropout the QKV adapter keeps the 16-bit norm output
    // (2h B) and the output adapter the attention output FlashAttention keeps anyway (0). With dropout the QKV
    // adapter keeps its dropped-out copy instead (2h) plus the mask (h), the output adapter its copy (2h) and mask
    // (h): 4h B more, × 8192 tokens × 80 layers = 20 GiB for Llama 2 70B.
    const auto sys = test::node_system("dgx-b200");
    const auto with = model::estimate_training(arch("llama-2-70b"), mlperf_plan(1, 0.1), sys, Explain::off);
    const auto without = model::estimate_training(arch("llama-2-70b"), mlperf_plan(1, 0.0), sys, Explain::off);
    const double h = 8192, tokens = 8192, layers = 80;
    CHECK(with.memory.activations.raw() - without.memory.activations.raw() ==
          gptest::approx(4.0 * h * tokens * layers).epsilon(1e-6));
  }
}
