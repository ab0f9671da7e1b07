#pragma once
// Parameter counts of a transformer, by component, total and active per token.
#include <cstdint>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/wl/training.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model {

/// Parameter counts (elements, not bytes). All fields cover the whole model; `*_per_layer` are one layer.
struct ParameterCounts {
  std::int64_t embedding = 0;            ///< token embedding V·h
  std::int64_t position_embedding = 0;   ///< learned absolute positions P·h (GPT-2 style), else 0
  std::int64_t attention = 0;            ///< all layers: projections, their biases, q/k norms, sinks
  std::int64_t attention_sinks = 0;      ///< all layers' attention sinks (one learned logit per query head), in `attention`
  std::int64_t ssm = 0;                  ///< all Mamba-2 layers: in/out projections, conv1d, A_log, D, dt_bias, gated norm
  std::int64_t dense_mlp = 0;            ///< all dense-FFN layers
  std::int64_t router = 0;               ///< all MoE layers: gating matrices (+ biases)
  std::int64_t routed_experts = 0;       ///< all MoE layers, all routed experts
  std::int64_t shared_experts = 0;       ///< all MoE layers, shared experts (+ their gates)
  std::int64_t norms = 0;                ///< per-layer pre-attention/pre-MLP norms + final norm
  std::int64_t lm_head = 0;              ///< 0 when tied to the embedding
  std::int64_t mtp = 0;                  ///< multi-token-prediction modules (not part of total)
  std::int64_t vision = 0;               ///< a multimodal model's vision tower: encoder, merger and projector (in the
                                         ///< total, not in `active`: it runs once per image, not per text token)

  std::int64_t attention_per_layer = 0;
  std::int64_t dense_mlp_per_layer = 0;
  std::int64_t expert = 0;               ///< one routed expert
  std::int64_t active_routed_experts = 0;  ///< all MoE layers, top-k experts only

  std::int64_t total = 0;   ///< every weight of the main model (MTP excluded)
  std::int64_t active = 0;  ///< weights a token touches: total minus the routed experts it skips

  Derivation derivation;
};

/// Counts parameters by component.
///
/// Per layer: attention q,k,v,o = h·n_q·d + 2·h·n_kv·d + n_q·d·h (+ biases, + 2·d for per-head q/k norms, + n_q sink
/// logits); MLA (DeepSeek-V2/V3, arXiv:2405.04434 §2.1) q = h·r_q + r_q + r_q·n_q·(d_nope+d_rope),
/// kv = h·(r_kv + d_rope) + r_kv + r_kv·n_q·(d_nope+d_v), o = n_q·d_v·h; gated MLP 3·h·i, plain MLP 2·h·i (+ biases);
/// MoE: router h·E, E experts of 3·h·i_e each, shared experts; norms 2h (RMSNorm) or 4h (LayerNorm) per layer.
/// Model: embedding V·h, learned positions P·h, final norm, LM head V·h unless tied.
/// Active = total − (E − k)·expert per MoE layer (the routed experts a token does not visit).
/// Matches the published counts of GPT-3, Megatron GPT (Narayanan et al. 2021 eq. for P), Llama, Mixtral, Qwen,
/// DeepSeek-V3 and GPT-OSS within 0.5% (tests/model).
ParameterCounts parameter_counts(const wl::TransformerArch& arch, Explain explain = Explain::on);

/// The linear layers of a decoder layer, as LoRA targets name them (gate: the shared experts' h→1 gate; lm_head:
/// the output layer; mtp_proj: a multi-token-prediction module's 2h → h projection; none of them, like the router,
/// gets an adapter here).
enum class LinearKind { qkv, attention_out, mlp_in, mlp_out, expert_in, expert_out, router, gate, lm_head, mtp_proj };
/// Whether LoRA puts an adapter beside this linear layer (never the router, a gate or the LM head).
bool lora_targets(const wl::Lora& l, LinearKind k);

/// LoRA adapter parameters of one layer, before TP/EP: r·(d_in + d_out) per targeted linear layer (A: d_in × r,
/// B: r × d_out; Hu et al. 2021 §4.1). `dense` holds the attention and dense/shared-expert adapters, `expert` the
/// routed experts' (one adapter pair per expert and linear). Fused layers take one adapter (the QKV projection,
/// the MLP's up/gate), as Megatron-Core/NeMo place them.
struct LoraLayerParams {
  double dense = 0.0;
  double expert = 0.0;
};
LoraLayerParams lora_layer_params(const wl::TransformerArch& a, const wl::Lora& l, bool moe_layer);
struct LayerKind;
/// The adapters of one layer of kind `kind` (graph.hpp).
LoraLayerParams lora_layer_params(const wl::TransformerArch& a, const wl::Lora& l, LayerKind kind);
/// All adapters of the model (0 without LoRA).
double lora_adapter_params(const wl::TransformerArch& a, const wl::Lora& l);
/// Bytes per stored base weight of `plan`: the precision's weight bytes, or under LoRA the frozen base's storage —
/// int8 and fp8 1 B (a per-channel scale, negligible), nf4 with double quantisation 4.127 bits (QLoRA §3: 4 bits +
/// 8-bit absmax per 64 + fp32 per 256 blocks of those).
double base_weight_bytes(const wl::TrainingPlan& plan);
/// Bytes per LoRA adapter weight: the working-weight bytes, except under FP8 parameters, which are Transformer
/// Engine's layers only: the adapters are Megatron-Core's own linear layers and keep 16-bit weights (2 B).
double lora_adapter_weight_bytes(const wl::TrainingPlan& plan);

}  // namespace gpuplan::model
