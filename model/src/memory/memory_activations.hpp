#pragma once
// Internal to gpuplan::model: the activation-memory model of one transformer layer — the tensors a layer saves for
// its backward ("terms"), each with a width per token, an element size and a tensor-parallel split — and how
// recomputation changes what is kept. memory.cpp composes it with model states and pipeline stages.
// Sources are listed at the top of memory.cpp ([K22] Korthikanti et al. 2022, [HF] transformers modeling code).
#include <string>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/memory.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model::detail {

inline constexpr double kFp32Bytes = 4.0;
inline constexpr double kInt32Bytes = 4.0;
/// Dropout masks are kept as one byte per element ([K22] §4.1: "a mask of size sbh", counted as sbh bytes).
inline constexpr double kMaskBytes = 1.0;
/// DeepSeek-V3's E5M6 activation format (arXiv:2412.19437 §3.3.3): 1 sign + 5 exponent + 6 mantissa bits = 1.5 B.
inline constexpr double kE5m6Bytes = 12.0 / 8.0;
/// FP8 tensors (E4M3/E5M2): one byte per element (their per-tensor scales not counted).
inline constexpr double kFp8Bytes = 1.0;

/// How a saved tensor splits over the tensor-parallel group ([K22] §4.2.1-4.2.2): h-wide tensors outside the TP regions
/// (norm inputs, the inputs of the column-parallel GEMMs, dropout masks) are split only by sequence parallelism;
/// head- and FFN-sharded tensors always split by t.
/// `replicated`: a tensor every TP rank holds whole (the DSA indexer's, run on every rank).
enum class Split { sequence, tensor, replicated };

/// Role of a term under recomputation: `score` terms are the attention core that selective recomputation drops;
/// `input` is the layer input itself (the tensor that full recomputation checkpoints).
enum class Role { plain, score, input };

enum class ActPart { attention, mlp, experts, shared, mixer };

struct Term {
  ActPart part;
  const char* name;   ///< what is saved
  const char* width;  ///< symbolic width per token
  double elements;    ///< elements per token before the TP split
  double elem_bytes;
  Split split;
  Role role;
};

struct Ctx {
  const wl::TransformerArch& a;
  const wl::TrainingPlan& plan;
  ActivationLayout layout;
  double ab = 2.0;       ///< activation bytes
  /// Bytes per element of a saved GEMM input: FP8 GEMMs through Transformer Engine (fused kernels) save the
  /// quantised input for the weight gradient (1 B, columnwise), not the bf16 tensor; otherwise a_b.
  double gi = 2.0;
  /// Which linear layers need their input for a weight gradient. LoRA freezes the base weights: a frozen layer
  /// without an adapter computes only its input gradient, which needs the weight, not the input, so autograd
  /// (PyTorch saves an operand only when the other one requires grad) and Transformer Engine skip saving it.
  bool wgrad_qkv = true, wgrad_o = true, wgrad_mlp = true;
  /// LoRA: the adapters (Megatron-Core's own 16-bit linear layers, not Transformer Engine's) save their input at a_b;
  /// with adapter dropout the dropped-out copy and its 1-byte mask (lora_adapter.hpp).
  bool lora = false;
  bool lora_dropout = false;
  /// Sequence parallel with TP communication overlap: the QKV adapter gathers the sequence after its dropout, so its
  /// mask is the shard and the saved GEMM input the whole sequence (NeMo ParallelLinearAdapter.forward).
  bool lora_gathers = false;
  double t = 1.0;        ///< tensor parallel
  bool sp = false;       ///< sequence parallel
  bool attention_dropout = false;  ///< dropout on the attention probabilities (TransformerArch::attention_dropout_on)
  bool dropout = false;            ///< dropout on the block outputs and the embedding (hidden_dropout_on)
  double s = 0.0;        ///< sequence length (attention-score width)
  double tokens = 0.0;   ///< (s/c)·b tokens of one micro-batch on one GPU
  bool hf() const { return layout == ActivationLayout::hf_eager; }
  /// Eager PyTorch autograd (plain modules or HF): unfused ops keep their own inputs.
  bool eager() const { return layout == ActivationLayout::hf_eager || layout == ActivationLayout::torch_eager; }
  bool gemma_norm() const { return a.model_type.rfind("gemma", 0) == 0; }
  double divisor(Split sp_class) const {
    return sp_class == Split::replicated ? 1.0 : sp_class == Split::tensor || sp ? t : 1.0;
  }
  double bytes_per_token(const Term& x) const { return x.elements * x.elem_bytes / divisor(x.split); }
};

struct LayerSum {
  double all = 0.0;    ///< bytes per token, every term
  double score = 0.0;  ///< the attention-core part (selective recomputation drops it)
  double input = 0.0;  ///< the layer input itself
};

Ctx make_ctx(const wl::TransformerArch& a, const wl::TrainingPlan& plan, ActivationLayout layout);

/// Saved tensors of one layer, per token of one micro-batch, before the TP split: a fold over the layer's op graph
/// (each op's saved tensors by its kind, in execution order, then the blocks' norms and dropout masks).
std::vector<Term> layer_terms(const Ctx& c, const OpGraph& g);
/// The same for a layer of kind `kind` (its graph: build_layer_graph), or the model's attention + FFN layer (dense or
/// MoE).
std::vector<Term> layer_terms(const Ctx& c, LayerKind kind);
std::vector<Term> layer_terms(const Ctx& c, bool moe_layer);

LayerSum sum_terms(const Ctx& c, const std::vector<Term>& terms);

/// The saved tensors of the ops around the layers (build_head_graph), per token of one micro-batch, before the TP
/// split ([K22] §4.3): on the first stage the dropout mask of the embedding's output (elements 0 without dropout); on
/// the last the final norm's input and the LM head's input, beside `vocab` logits per token (the LM head's output
/// width, split over TP by the vocabulary-parallel head; their bytes: stage_memory.cpp logit_bytes).
struct HeadTerms {
  Term mask{}, norm_input{}, head_input{};
  double vocab = 0.0;
};
HeadTerms head_terms(const Ctx& c, const OpGraph& head);

/// Full recomputation checkpoints the layer input: s·b·h·a_b ([K22] §5, "2sbh"), split by t with SP.
double checkpoint_per_token(const Ctx& c);

/// TorchTitan's op-level selective activation checkpointing (wl::Recompute::selective_op; pytorch/torchtitan
/// 9dec370ad26b, torchtitan/parallelisms/parallelize_llama.py, _save_list and _apply_ac_to_transformer_block): what
/// one dense attention + MLP block keeps for its backward, per token before the TP split — the checkpoint's input and
/// the outputs of the ops the policy saves: the odd-numbered aten.mm of the block in TorchTitan's Llama order (wq 1,
/// wk 2, wv 3, wo 4, w1 5, w3 6, w2 7) and the flash SDPA (output and log-sum-exp). `reused_only`: only the kept
/// tensors the block's backward also reads (the recomputation reuses them instead of allocating them again).
std::vector<Term> op_sac_terms(const Ctx& c, bool reused_only = false);

/// Bytes per token one layer keeps for one micro-batch until its backward, by recomputation mode.
double stored_per_token(const Ctx& c, const LayerSum& s);

/// Transient bytes per token while one layer is recomputed for its backward (one layer, one micro-batch): the
/// attention core under selective recomputation; the whole layer but its (already checkpointed) input under full.
double working_set_per_token(const Ctx& c, const LayerSum& s);

Derivation layer_derivation(const Ctx& c, bool moe_layer, const std::string& id);
/// The same for one layer of kind `kind`, titled with the kind's mixer and FFN names.
Derivation layer_derivation(const Ctx& c, LayerKind kind, const std::string& id);

}  // namespace gpuplan::model::detail
