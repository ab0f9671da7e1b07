#pragma once
// Internal to gpuplan::model: the pricer of one transformer layer's op graph for training (layer_cost.hpp's
// layer_cost runs it). Its members are defined in train/layer_cost.cpp (the linears, norms, activations, MoE and the
// elementwise kernels between them) and train/layer_attention.cpp (the attention variants: dense, sliding and chunked
// windows, packed per-document, MLA's kernels, the context-parallel ring, linear attention and DeepSeek's sparse
// attention indexer).
#include <cstdint>
#include <string>
#include <vector>

#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "fp8_quant.hpp"
#include "graph_memo.hpp"
#include "layer_cost.hpp"
#include "linear_gemms.hpp"
#include "mla_projections.hpp"
#include "lora_adapter.hpp"
#include "moe_cost.hpp"
#include "moe_layer.hpp"
#include "norm_loss.hpp"
#include "quant_recipe.hpp"

namespace gpuplan::model::detail {

/// Prices one layer's op graph for training: each op forward and backward on the GPU, plus the elementwise kernels
/// the training stack runs between them (rotary, residual adds, the MLP activation, the MoE token permutation).
/// GEMM shapes are the graph's, split by TP (and the experts by EP).
class TrainingLayerPricer {
 public:
  TrainingLayerPricer(const wl::TransformerArch& arch, const wl::TrainingPlan& training_plan, LayerKind layer_kind,
                      const Device& device, bool keep_op_list);
  LayerCost run();

  // CUDA graphs (wl::CudaGraphScope; Megatron-LM core_v0.14.0 transformer_layer.py, cuda_graphs.py): whether op `o`
  // runs inside the layer's captured graph. Scope "attn" captures TransformerLayer._forward_attention (the input norm,
  // the attention block and its residual add); "full" (layer) and full_iteration the whole layer, except an MoE block
  // whose dispatcher sizes its all-to-all and grouped GEMMs on the host (dropless routing: the split sizes are data,
  // copied to the host each micro-batch, which a graph cannot replay): its router, experts and shared experts keep the
  // eager launch. A fixed capacity with padding (moe_fixed_splits) makes the MoE block static and capturable.
  [[nodiscard]] bool captured(const Op& o, int norms_seen) const {
    switch (plan.cuda_graphs) {
      case wl::CudaGraphScope::none: return false;
      case wl::CudaGraphScope::attention:
        return o.part == Part::attention || o.part == Part::ssm || (o.kind == OpKind::norm && norms_seen == 0);
      case wl::CudaGraphScope::layer:
      case wl::CudaGraphScope::full_iteration:
        return plan.moe_fixed_splits() || !(o.part == Part::router || o.part == Part::routed_experts ||
                                            o.part == Part::shared_experts);
    }
    return false;
  }
  // The per-kernel fixed costs the next ops pay (kernel_fixed reads them): in-graph or eager.
  void use_launch(bool in_graph) {
    d.eff.kernel_launch = in_graph ? graph_launch : eager_launch;
    d.eff.launch_class = in_graph ? graph_class : eager_class;
  }

 private:
  // Op names only when the op list is kept: the sums do not need them, and building them is most of the cost.
  std::string named(const std::string& name, const char* suffix = "") const {
    return keep_ops ? name + suffix : std::string();
  }
  void fwd_gemm(const std::string& name, LinearKind kind, std::int64_t m, std::int64_t k, std::int64_t n,
                std::int64_t batch = 1);
  void separate_gemms(const LinearGemms& g, LinearKind kind);

  // Bytes per output element a SwiGLU / GELU kernel writes: the activation dtype, or under DeepSeek's framework the
  // FP8 copy with its 1×128 scales that the next GEMM reads (swiglu_forward_with_weight_and_per_token_cast_to_fp8).
  [[nodiscard]] double activation_out_bytes() const { return per_axis ? kBlockAxisBytes : e; }
  void price_mla_projections(const Op& o);
  void mla_elementwise();
  void attention_output_store(double elems);
  void activation(const char* nm, double elems, bool again);

  // The MoE layer's terms (moe_layer.hpp, MoeLayerTerms), recorded as each op is added: forward + backward time.
  [[nodiscard]] Seconds priced() const { return lc.fwd.total() + lc.bwd.total(); }
  template <class F>
  void moe_term_as(MoeLayerTerms::Term k, F&& price) {
    const Seconds before = priced();
    price();
    lc.moe.add(k, priced() - before);
    moe_taken += priced() - before;
  }
  template <class F>
  void moe_term(const Op& o, F&& price) {
    if (o.part != Part::router && o.part != Part::routed_experts && o.part != Part::shared_experts) {
      price();
      return;
    }
    const Seconds before = priced();
    moe_taken = Seconds(0);
    price();
    const Seconds dt = priced() - before - moe_taken;
    lc.moe.add(o.part == Part::router           ? MoeLayerTerms::router
               : o.part == Part::shared_experts ? MoeLayerTerms::shared
                                                : MoeLayerTerms::expert_gemm,
               dt);
  }
  void recompute_part(Seconds dt, OpClass cls);
  void op_sac_rerun(double gemm_share);
  // An elementwise op priced by `price` that TorchTitan's op-level policy runs again in the backward.
  template <class F>
  void op_sac_elementwise(F&& price) {
    const Seconds before = lc.fwd.total();
    price();
    if (op_sac) recompute_part(lc.fwd.total() - before, OpClass::elementwise);
  }
  void stream(const std::string& name, double bytes_fwd, double flops_fwd, double bwd_factor = 2.0,
              double rate = 1.0);
  void price_norm(const std::string& name, double elems, std::int64_t row);
  void price_qk_norm();
  void bias_grad(const std::string& name, bool has_bias, std::int64_t n);
  void residual();
  void add_attention(const std::string& name, std::int64_t sq, std::int64_t skv, bool is_causal,
                     std::int64_t chunks = 1);
  [[nodiscard]] double kv_heads_per_gpu(const Op& o) const;
  void fp8_attention_casts(const Op& o);

  // Packed documents (wl::DocumentPacking): the fused kernel runs varlen over cu_seqlens (Transformer Engine's THD
  // layout; flash-attn's varlen API), tiling each document on its own, so a sequence of s tokens holding documents of
  // d_i tokens costs Σ causal d_i × d_i problems instead of one s × s: FLOPs Σ d_i²/2 per head where one document per
  // sequence has s²/2. With the length distribution P(d) (each length cut at s, as a packer cuts a longer example), a
  // sequence holds s/E[d] documents, P(d)·s/E[d] of them of length d. Each length is priced by attention_cost (its
  // FLOPs, bytes, measured rate and sequence law at that document length, dropout per score element), its time above
  // the kernel's fixed cost scaled by that count; the varlen call is one kernel per direction (one fixed cost). Q, K,
  // V and O stream once per token as before (the bytes add up to the s tokens'). Sliding windows and top-k reach
  // apply within a document; chunked attention splits each document into its chunks. Under CP each rank holds 1/cp of
  // every document (Transformer Engine splits each one into 2·cp chunks): priced as 1/cp of the documents' work in
  // one call; the ring's per-step calls and output merges are not priced under packing.
  struct PackedPiece {
    std::int64_t sq, skv;
    bool causal;
    double count;  // problems of this shape per micro-batch on this GPU (per batch·head)
  };
  [[nodiscard]] double packed_mean_length() const;
  [[nodiscard]] std::vector<PackedPiece> packed_pieces(const Op& o) const;
  void price_packed_attention(const Op& o);
  void price_attention(const Op& o);
  void price_ssm(const Op& o);
  void price_indexer(const Op& o);
  void price_linear(const Op& o);
  void price_token_routing(double P);
  void price_router_kernels(std::int64_t experts);
  void price_dispatcher_host();

  const wl::TransformerArch& a;
  const wl::TrainingPlan& plan;
  // The device; its per-kernel fixed costs switch per op between the eager launch and the in-graph replay
  // (use_launch, under plan.cuda_graphs).
  Device d;
  const Seconds eager_launch;
  const KernelClassCosts eager_class;
  Seconds graph_launch{};
  KernelClassCosts graph_class{};
  const bool keep_ops;
  const LayerKind layer;
  const GraphRef graph;
  const Op attn;
  LayerCost lc;
  const GemmQuantOps quant{a, plan, d, keep_ops};  // the FP8 / FP4 GEMMs' quantisation kernels
  const bool op_sac = plan.recompute == wl::Recompute::selective_op;
  const NormImpl norm_kind = norm_impl(a, plan);  // norm_loss.hpp
  const bool per_axis = one_layout_blockwise(plan);  // DeepSeek's framework: per-axis FP8 casts (quant_recipe.hpp)
  Seconds last_fwd_cast{}, last_fwd_gemm{};  // the last fwd_gemm's forward input cast and GEMM (op_sac_rerun)
  bool norm_input = false;  // the next fwd_gemm's input is a LayerNormLinear's norm output (fp8_quant.hpp)
  bool replicated_input = false;  // the next fwd_gemm is held whole by every TP rank, on its own rows (fp8_quant.hpp)
  MoeExpertWork moe_w;   // the routed experts' work on this GPU (set by the expert ops)
  Seconds moe_taken{};   // time of the op already booked to another MoE term
  const wl::Parallelism& par = plan.par;
  const std::int64_t t = par.tp;
  const std::int64_t s_local = plan.seq_len / par.cp;
  const std::int64_t T = plan.micro_batch * s_local;  // tokens through this GPU's GEMMs
  const std::int64_t T_norm = par.sequence_parallel ? T / t : T;
  const std::int64_t h = a.hidden;
  const hw::Precision gp = plan.precision.compute;
  const double e = plan.precision.activation_bytes;
  const wl::Lora& lora = plan.lora;
  const double base_b = base_weight_bytes(plan);
  const bool dequant = lora_base_dequantised(plan);
  const bool fp8_stored = fp8_stored_weights(plan);  // fp8_quant.hpp
  const bool fp8_base_feeds_gemm = fp8_stored && lora.on();
  const std::int64_t dqk = attn.d_qk, dv = attn.d_v;
  // Element accesses per element (reads + writes) of the non-GEMM ops, fused vs PyTorch eager:
  //  RoPE: fused 2 fwd / 2 bwd; eager rotate_half (x·cos, neg, cat, ·sin, add) 11 fwd / 13 bwd (+ slice_backward).
  //  SwiGLU: fused 3 fwd / 5 bwd; eager silu + mul 5 fwd / 9 bwd (mul_backward ×2, silu_backward).
  //  Norms: norm_loss.hpp (one kernel each way in both, or RMSNorm written as PyTorch ops, op by op).
  const bool eager = plan.kernels == wl::KernelStyle::eager;
  const double rope_f = eager ? 11.0 : 2.0, rope_b = eager ? 13.0 : 2.0;
  const double glu_f = eager ? 5.0 : 3.0, glu_b = eager ? 9.0 : 5.0;
  const bool gated = a.mlp == wl::MlpKind::gated;
  const std::int64_t glu = gated ? 2 : 1;
  // Hidden dropout on the block's output before the residual add: fused into it (Megatron's bias-dropout-add) it
  // writes the 1-byte mask forward and reads it backward; eager, F.dropout is its own kernel each way (read and write
  // the activation, and the mask).
  const double drop = plan.hidden_dropout(a) ? (eager ? 2.0 * e + 1.0 : 1.0) : 0.0;
  const double res_f = 3.0 * e + drop, res_b = 3.0 * e + drop;
  const bool attn_dropout = plan.attention_dropout(a);
  const std::int64_t bh = plan.micro_batch * attn.heads / t;
};

}  // namespace gpuplan::model::detail
