#pragma once
// The GEMMs one linear op of the layer graph (graph.hpp) runs as, by implementation: a fused projection is one GEMM
// (Megatron-Core's linear_qkv, linear_fc1), or one per projection where the implementation holds them as separate
// modules (projections_apart). Defined in graph/transformer_graph.cpp, beside the builders that lay out the tensors
// it splits.
#include <array>
#include <cstdint>

#include "gpuplan/model/graph.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model::detail {

/// Up to three GEMMs of one linear op, each reading the op's input (width `in`) and writing `out[i]` features,
/// whole-model (before the TP split). Their widths add up to the op's output width.
struct LinearGemms {
  std::array<std::int64_t, 3> out{};
  std::array<const char*, 3> name{};
  int count = 0;
};

/// Fused, or `separate` false: one GEMM of the op's width, named as the op. Separate: an attention QKV projection
/// (not MLA's down/up block, not an SSM's in_proj) as Q (with Qwen3-Next's output gate, which q_proj emits), K and V;
/// a gated MLP's or shared experts' up projection as gate and up. Routed experts stay one grouped GEMM per expert.
LinearGemms linear_gemms(const wl::TransformerArch& a, const Op& o, bool separate);

/// Whether the training stack holds the projections apart: eager kernels are PyTorch modules, which hold q, k, v and
/// gate, up as separate nn.Linear layers in the Llama family (Hugging Face transformers' LlamaAttention q_proj /
/// k_proj / v_proj and LlamaMLP gate_proj / up_proj; pytorch/torchtitan's Attention wq / wk / wv and FeedForward
/// w1 / w3; our scripts/measure/train_step.py wq / wk / wv, gate / up) and one fused QKV module in the GPT style
/// (plain MLP, LayerNorm: GPT-2's c_attn, GPT-NeoX's query_key_value, llm-foundry's MPT Wqkv, our
/// scripts/measure/mpt_fsdp_step.py Wqkv), as optimizer_step.cpp op_module_tensors counts their tensors. Fused
/// kernels (Megatron-Core's linear_qkv, linear_fc1) fuse them. A stack that compiles separate modules
/// (torch.compile leaves them apart: Inductor's linear batching is opt-in, pre_grad_fusion_options) is not told
/// apart from Megatron's by the plan yet.
inline bool projections_apart(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  return plan.kernels == wl::KernelStyle::eager && !a.gpt_style();
}

}  // namespace gpuplan::model::detail
