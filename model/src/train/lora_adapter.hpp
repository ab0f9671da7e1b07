#pragma once
// Internal to gpuplan::model: the passes of one LoRA adapter beside a frozen linear layer, one micro-batch on one GPU
// (layer_cost.cpp adds them to the layer). Source: NeMo's ParallelLinearAdapter (nemo/collections/llm/peft/utils.py,
// 25.04; the same forward in nemo/collections/nlp/modules/common/megatron/adapters/parallel_adapters.py, 24.09) and
// LoRALinear (nemo/collections/llm/peft/lora.py): dropout on the adapter's input (dropout_position 'pre'), x·A and ·B
// as Megatron-Core's own ColumnParallelLinear / RowParallelLinear (megatron.core.tensor_parallel: 16-bit GEMMs outside
// Transformer Engine's FP8 autocast), the output times alpha/rank, added to the frozen layer's output.
#include <cstdint>
#include <string>
#include <vector>

#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/wl/training.hpp"

namespace gpuplan::model::detail {

/// One kernel of the adapter: forward or backward pass, and whether it is a GEMM (counted in the layer's FLOPs).
struct LoraPass {
  bool forward = true;
  bool gemm = false;
  OpCost op;
};

/// Elements of the adapter's input and output per GPU, for the frozen layer's GEMM m×k → m×n on this GPU.
/// in: what dropout and the backward's gradient sum touch; out: what the scale and the sum with the layer's output
/// touch. Column-parallel layers (QKV, fc1): the input is the norm output, m·k; under sequence parallelism with TP
/// communication overlap the adapter receives the sequence shard (m·k/t) and gathers it after its dropout (NeMo:
/// the layer's ub_overlap_ag keeps return_layernorm_output_gathered off). Row-parallel layers (O, fc2): the input is
/// the TP shard (k = in/t already); the output is the layer's, m·n, reduce-scattered to m·n/t under sequence
/// parallelism (all2all_hp2sp).
struct LoraAdapterElements {
  double in = 0.0, out = 0.0;
};
LoraAdapterElements lora_adapter_elements(const wl::TrainingPlan& plan, LinearKind kind, std::int64_t m, std::int64_t k,
                                          std::int64_t n, std::int64_t batch);

/// The adapter's kernels beside a frozen linear layer (GEMM m×k → m×n on this GPU, `batch` of them), at the 16-bit
/// precision of `compute`: x·A, ·B and, backward, the dgrad and wgrad of each (Hu et al. 2021 §4.1); dropout
/// forward and backward when plan.lora.dropout > 0 (torch native_dropout: read a_b, write a_b and a 1-byte mask;
/// backward read a_b and the mask, write a_b); the scale by alpha/rank each way (read and write a_b); the sum with the
/// layer's output (read 2·a_b, write a_b) and, backward, the sum of the two input gradients (the same).
std::vector<LoraPass> lora_adapter_passes(const std::string& name, const wl::TrainingPlan& plan, LinearKind kind,
                                          std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t batch,
                                          hw::Precision compute, const Device& d, bool keep_names);

/// The adapters' own TP collectives of one layer and micro-batch, forward + backward, each moving one layer
/// activation (tp_message), run in line with the adapter (not behind a GEMM): exposed. NeMo ParallelLinearAdapter
/// under TP > 1 — a column-parallel layer's adapter (QKV, fc1) under sequence parallelism with TP overlap gathers the
/// sequence itself (gather_from_sequence_parallel_region: all-gather forward, reduce-scatter backward; without TP
/// overlap Transformer Engine hands it the gathered norm output: none); a row-parallel layer's (O, fc2) under sequence
/// parallelism returns to the sequence shard by all2all_hp2sp (a2a_experimental, MLPerf's LORA_A2A=1: one all-to-all
/// each way, a reduce-scatter's bytes) and without it gathers its output (gather_output: one all-gather forward).
/// The rank-r exchanges of linear_in (m × r) are negligible. `moe`: the layer's MLP is routed experts (no adapter
/// collectives: is_expert).
double lora_tp_collectives(const wl::TrainingPlan& plan, bool moe);

}  // namespace gpuplan::model::detail
