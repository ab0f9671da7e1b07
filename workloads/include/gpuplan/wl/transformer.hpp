#pragma once
// Transformer architecture description (dense, GQA/MQA, MLA, MoE, sliding-window and hybrid attention). Pure value
// type; import from our model files and from Hugging Face config.json lives in workloads/io. Sizes are element
// counts (dimensionless integers), not physical quantities.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuplan/wl/vision.hpp"

namespace gpuplan::wl {

enum class MlpKind { gated, plain };            ///< gated = SwiGLU/GeGLU (3 matrices), plain = GELU/ReLU (2)
enum class NormKind { rmsnorm, layernorm };      ///< layernorm has a bias vector, rmsnorm does not
enum class PositionKind { rope, learned, alibi, none };
/// What a layer's attention reaches back to: the whole context; a sliding window of the last `sliding_window` tokens
/// (Mistral, Gemma 2/3, GPT-OSS); or the aligned chunk of `attention_chunk` tokens the query is in (Llama 4's
/// chunked local attention: query i sees keys j <= i with j / C == i / C, transformers' chunked_overlay).
enum class AttentionSpan { full, sliding, chunked };
/// What mixes information across the tokens of a layer: attention (its span above), a Mamba-2 state-space layer
/// (Dao & Gu 2024, arXiv:2405.21060), nothing (Nemotron-H's MLP-only and MoE-only layers), or gated DeltaNet linear
/// attention (Yang, Kautz & Hatamizadeh 2024, arXiv:2412.06464; Qwen3-Next's linear_attention layers).
enum class Mixer : std::uint8_t { attention, mamba2, none, gated_deltanet };

/// A gated DeltaNet mixer (transformers' Qwen3NextGatedDeltaNet, modeling_qwen3_next.py): in_proj_qkvz
/// h -> (q, k: n_k·d_k each; v, z: n_v·d_v each), in_proj_ba h -> (beta, a: n_v each), a depthwise causal conv1d
/// (no bias) over (q, k, v), per value head A_log and dt_bias, the gated delta rule with a d_k × d_v state per value
/// head (q and k repeated to the n_v value heads), a gated RMSNorm over d_v (one weight vector shared by the heads),
/// out_proj n_v·d_v -> h.
struct GatedDeltaNetSpec {
  std::int64_t key_heads = 0;      ///< linear_num_key_heads (n_k)
  std::int64_t value_heads = 0;    ///< linear_num_value_heads (n_v)
  std::int64_t key_dim = 0;        ///< linear_key_head_dim (d_k)
  std::int64_t value_dim = 0;      ///< linear_value_head_dim (d_v)
  std::int64_t conv_kernel = 4;    ///< linear_conv_kernel_dim
  /// Chunk of the chunked gated delta rule in training / prefill: 64 (flash-linear-attention's chunk_gated_delta_rule
  /// and transformers' torch_chunk_gated_delta_rule default; not a config key).
  std::int64_t chunk = 64;
  /// Bytes per element of the state in a serving engine's cache: the model dtype (vLLM's
  /// MambaStateDtypeCalculator.gated_delta_net_state_dtype, mamba_cache_dtype 'auto').
  double state_bytes = 2.0;
  [[nodiscard]] std::int64_t key_width() const { return key_heads * key_dim; }
  [[nodiscard]] std::int64_t value_width() const { return value_heads * value_dim; }
  /// Channels through the conv1d: q, k and v, 2·n_k·d_k + n_v·d_v.
  [[nodiscard]] std::int64_t conv_channels() const { return 2 * key_width() + value_width(); }
};

/// DeepSeek sparse attention (DeepSeek-V3.2-Exp, inference/model.py Indexer; transformers / vLLM deepseek_v32): a
/// lightning indexer scores every past token for each query with `index_heads` small heads of `index_head_dim`
/// (q from the MLA query latent, one shared key per token, a per-head weight from the hidden state; ReLU, weighted
/// sum), in FP8, and the main MLA attention reads only the `topk` best keys.
struct SparseAttentionSpec {
  std::int64_t index_heads = 0;     ///< index_n_heads
  std::int64_t index_head_dim = 0;  ///< index_head_dim
  std::int64_t topk = 0;            ///< index_topk
  /// Per layer: true where the layer runs no indexer of its own and its attention reads the top-k keys the last
  /// layer with an indexer selected (GLM-5.1's IndexShare: transformers' GlmMoeDsaConfig.indexer_types "shared",
  /// GlmMoeDsaAttention builds no GlmMoeDsaIndexer there); empty: every attention layer has its own.
  std::vector<bool> shared;
  /// Bytes per token and layer of the indexer's key cache: index_head_dim FP8 values + one float32 scale per 128
  /// (vLLM DeepseekV32IndexerCache: head_dim + head_dim // 128 · 4; the reference inference code's k_cache +
  /// k_scale_cache), whatever the KV dtype.
  [[nodiscard]] double key_cache_bytes() const { return double(index_head_dim + index_head_dim / 128 * 4); }
};

/// A Mamba-2 mixer (transformers' NemotronHMamba2Mixer / Mamba2Mixer): in_proj h -> (z, x, B, C, dt), a depthwise
/// causal conv1d over (x, B, C), the SSD scan with per-head A_log, D, dt_bias, a gated RMSNorm over d_inner, out_proj.
struct Mamba2Spec {
  std::int64_t heads = 0;        ///< mamba_num_heads (n_h)
  std::int64_t head_dim = 0;     ///< mamba_head_dim (P)
  std::int64_t state = 0;        ///< ssm_state_size (N)
  std::int64_t groups = 1;       ///< n_groups: B and C are shared by the heads of a group
  std::int64_t conv_kernel = 4;  ///< conv_kernel (d_conv)
  std::int64_t chunk = 256;      ///< chunk_size of the SSD scan (Q)
  bool conv_bias = true;         ///< use_conv_bias
  bool proj_bias = false;        ///< mamba_proj_bias: biases on in_proj and out_proj
  /// Bytes per element of the SSM state in a serving engine's cache: the model dtype (2) unless the config names
  /// mamba_ssm_cache_dtype (float32: 4), which vLLM then uses; ssm_state_origin says which.
  double ssm_state_bytes = 2.0;
  std::string ssm_state_origin = "vLLM's default 'auto'";
  /// d_inner = n_h·P: the width of x, z and the output.
  [[nodiscard]] std::int64_t inner() const { return heads * head_dim; }
  /// Channels through the conv1d: x, B and C, d_inner + 2·n_groups·N.
  [[nodiscard]] std::int64_t conv_channels() const { return inner() + 2 * groups * state; }
};

struct MoeSpec {
  std::int64_t num_experts = 0;          ///< routed experts per MoE layer
  std::int64_t experts_per_token = 0;    ///< top-k
  std::int64_t expert_intermediate = 0;  ///< FFN width of one routed expert
  std::int64_t shared_experts = 0;       ///< always-active experts (DeepSeek), each of shared_intermediate width
  std::int64_t shared_intermediate = 0;
  bool shared_expert_gate = false;       ///< a sigmoid gate h->1 on the shared expert (Qwen2-MoE)
  bool router_bias = false;
  bool expert_bias = false;              ///< biases inside each expert's projections (GPT-OSS)
  std::int64_t correction_bias = 0;      ///< per-expert score-correction vector length per layer (DeepSeek-V3)
  /// Group-limited routing (DeepSeek-V2 §2.2.3 device-limited, DeepSeek-V3 §2.1.2 node-limited routing; HF n_group /
  /// topk_group, Megatron-Core --moe-router-num-groups / --moe-router-group-topk): the experts are split into
  /// `router_groups` equal groups and each token's top-k is taken among the experts of its best `router_group_topk`
  /// groups. 0: no limit (plain top-k over all experts).
  std::int64_t router_groups = 0;
  std::int64_t router_group_topk = 0;
  [[nodiscard]] bool group_limited() const { return router_groups > 1 && router_group_topk > 0 && router_group_topk < router_groups; }
};

struct MlaSpec {
  std::int64_t q_lora_rank = 0;  ///< 0 = queries projected directly from the hidden state
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
};

/// The vision tower of a multimodal model (issue #23): its encoder, merger and projector as one ViT description
/// (VisionArch of family vit with its VitOptions; workloads/vision.hpp), run once per image; the last op's tokens are
/// the image tokens that enter the language model's prompt.
struct VisionTower {
  std::string kind;               ///< the vision_config's model_type (siglip_vision_model, clip_vision_model, ...)
  VisionArch encoder;             ///< family vit; `resolution` is the image side in pixels
  std::string resolution_origin;  ///< where the image size comes from (the config's image_size, or an assumption)
  [[nodiscard]] VisionGraph graph() const { return build_vision_graph(encoder); }
  /// Image tokens per image the language model reads (the last op's tokens).
  [[nodiscard]] std::int64_t tokens_per_image() const;
};

struct TransformerArch {
  std::string id;
  std::string name;
  std::string model_type;  ///< Hugging Face model_type ("llama", "gpt2", "deepseek_v3")
  std::string source;      ///< file it was read from (for citations), or ""

  std::int64_t hidden = 0;
  std::int64_t layers = 0;
  std::int64_t heads = 0;     ///< query heads
  std::int64_t kv_heads = 0;  ///< key/value heads (== heads for MHA, 1 for MQA)
  std::int64_t head_dim = 0;
  std::int64_t intermediate = 0;  ///< dense FFN width
  std::int64_t vocab = 0;
  std::int64_t max_position = 0;

  bool tied_embeddings = false;
  MlpKind mlp = MlpKind::gated;
  NormKind norm = NormKind::rmsnorm;
  PositionKind position = PositionKind::rope;
  bool qkv_bias = false;
  bool o_bias = false;
  bool mlp_bias = false;
  bool qk_norm = false;          ///< per-head RMSNorm on q and k (Qwen3, Gemma 3)
  bool qk_norm_weights = true;   ///< the q/k norm has a weight per head dim (RMSNorm); Llama 4's L2 norm has none
  bool attention_sinks = false;  ///< one learned logit per head per layer (GPT-OSS)
  /// A sigmoid gate on the attention output, its h x n_q·d projection fused into q_proj (Qwen3-Next's gated
  /// attention: q_proj is h x 2·n_q·d; transformers' Qwen3NextAttention).
  bool attention_output_gate = false;
  std::int64_t norms_per_layer = 2;  ///< pre-attention + pre-MLP; Gemma 2/3 add post-attention and post-MLP (4)
  std::int64_t mtp_layers = 0;   ///< multi-token-prediction modules (DeepSeek-V3), counted apart from the main model
  /// Dropout probabilities the model trains with, as its config states them (attention_dropout / attn_pdrop /
  /// attention_probs_dropout_prob; hidden_dropout / resid_pdrop / hidden_dropout_prob); absent: see *_dropout_on().
  std::optional<double> attention_dropout;
  std::optional<double> hidden_dropout;

  std::optional<MoeSpec> moe;
  std::optional<MlaSpec> mla;
  std::vector<bool> moe_layer;            ///< per layer: true if the FFN is MoE (size == layers when moe)
  std::vector<AttentionSpan> attention;   ///< per layer (size == layers)
  std::optional<Mamba2Spec> mamba;        ///< the Mamba-2 mixer of the mamba2 layers
  std::optional<GatedDeltaNetSpec> gdn;   ///< the gated DeltaNet mixer of the gated_deltanet layers
  std::optional<SparseAttentionSpec> dsa; ///< DeepSeek sparse attention on every attention layer (indexers: has_indexer)
  std::vector<Mixer> mixers;              ///< per layer (empty: attention on every layer)
  std::vector<bool> ffn_absent;           ///< per layer: true when the layer has no FFN (empty: every layer has one)
  std::int64_t sliding_window = 0;        ///< tokens, for sliding layers
  std::int64_t attention_chunk = 0;       ///< tokens, for chunked layers (Llama 4's attention_chunk_size)
  std::optional<VisionTower> vision;      ///< a multimodal model's vision tower (its parameters are in the total)

  /// Notes on what the importer assumed (absent keys resolved by documented defaults).
  std::vector<std::string> assumptions;

  [[nodiscard]] bool is_moe_layer(std::int64_t i) const {
    return moe.has_value() && i >= 0 && static_cast<std::size_t>(i) < moe_layer.size() && moe_layer[static_cast<std::size_t>(i)];
  }
  /// Layer i's token mixer (attention beyond the list).
  [[nodiscard]] Mixer mixer(std::int64_t i) const {
    return i >= 0 && static_cast<std::size_t>(i) < mixers.size() ? mixers[static_cast<std::size_t>(i)] : Mixer::attention;
  }
  [[nodiscard]] bool is_attention_layer(std::int64_t i) const { return mixer(i) == Mixer::attention; }
  /// Whether layer i has an FFN (dense or MoE); Nemotron-H's mixer-only layers have none.
  [[nodiscard]] bool has_ffn(std::int64_t i) const {
    return !(i >= 0 && static_cast<std::size_t>(i) < ffn_absent.size() && ffn_absent[static_cast<std::size_t>(i)]);
  }
  /// Whether any layer is other than attention + FFN (a state-space mixer, or a mixer-only / FFN-only layer).
  [[nodiscard]] bool hybrid() const;
  [[nodiscard]] std::int64_t attention_layer_count() const;
  [[nodiscard]] std::int64_t mamba_layer_count() const;
  [[nodiscard]] std::int64_t gdn_layer_count() const;
  /// Layers that keep a recurrent state per sequence instead of a KV cache (Mamba-2 and gated DeltaNet).
  [[nodiscard]] std::int64_t recurrent_layer_count() const { return mamba_layer_count() + gdn_layer_count(); }
  /// Whether attention layer i runs its own DeepSeek sparse attention indexer (and caches its keys).
  [[nodiscard]] bool has_indexer(std::int64_t i) const {
    return dsa.has_value() && is_attention_layer(i) &&
           !(i >= 0 && static_cast<std::size_t>(i) < dsa->shared.size() && dsa->shared[static_cast<std::size_t>(i)]);
  }
  /// Layers with an indexer of their own (0 without DeepSeek sparse attention).
  [[nodiscard]] std::int64_t indexer_layer_count() const;
  [[nodiscard]] bool is_recurrent_layer(std::int64_t i) const {
    return mixer(i) == Mixer::mamba2 || mixer(i) == Mixer::gated_deltanet;
  }
  [[nodiscard]] bool is_sliding_layer(std::int64_t i) const {
    return sliding_window > 0 && is_attention_layer(i) && span(i) == AttentionSpan::sliding;
  }
  [[nodiscard]] bool is_chunked_layer(std::int64_t i) const {
    return attention_chunk > 0 && is_attention_layer(i) && span(i) == AttentionSpan::chunked;
  }
  /// Layer i's attention is local: a sliding window or an aligned chunk (a model has one kind or the other, never
  /// both: the importer refuses the mix), its reach local_span() tokens.
  [[nodiscard]] bool is_local_layer(std::int64_t i) const { return is_sliding_layer(i) || is_chunked_layer(i); }
  /// The reach of the local layers in tokens: the sliding window, or the chunk; 0 when every layer is global.
  [[nodiscard]] std::int64_t local_span() const { return sliding_window > 0 ? sliding_window : attention_chunk; }
  /// Whether the local layers attend within aligned chunks (Llama 4) rather than a sliding window.
  [[nodiscard]] bool local_is_chunked() const { return sliding_window <= 0 && attention_chunk > 0; }
  /// Tokens that layer i holds in its cache (and attends to, at most) in a context of `context` tokens:
  /// min(context, window) on sliding-window layers, min(context, chunk) on chunked layers (the cache peaks at one
  /// full chunk), the whole context elsewhere.
  [[nodiscard]] std::int64_t attended_tokens(std::int64_t i, std::int64_t context) const {
    return is_local_layer(i) && local_span() < context ? local_span() : context;
  }
  /// Keys one query's attention core reads on layer i at `context`: attended_tokens, capped at the top-k under
  /// DeepSeek sparse attention (the KV cache still holds every token: attended_tokens).
  [[nodiscard]] std::int64_t attention_keys(std::int64_t i, std::int64_t context) const {
    const std::int64_t c = attended_tokens(i, context);
    return dsa && dsa->topk > 0 && dsa->topk < c ? dsa->topk : c;
  }
  /// Whether training applies dropout to the attention probabilities / to the attention and MLP outputs (and the
  /// embedding): the config's probability when it states one, else the assumption that GPT-style models (two-matrix
  /// MLP with LayerNorm: GPT-2/3, Megatron GPT, BERT; transformers' GPT-2 default is 0.1) train with it and
  /// gated/RMSNorm models (Llama, Mistral, Qwen, DeepSeek, Gemma) without.
  [[nodiscard]] bool attention_dropout_on() const;
  [[nodiscard]] bool hidden_dropout_on() const;
  [[nodiscard]] bool gpt_style() const { return mlp == MlpKind::plain && norm == NormKind::layernorm; }
  [[nodiscard]] std::int64_t moe_layer_count() const;
  [[nodiscard]] std::int64_t sliding_layer_count() const;
  [[nodiscard]] std::int64_t chunked_layer_count() const;
  [[nodiscard]] std::int64_t local_layer_count() const { return sliding_layer_count() + chunked_layer_count(); }
  /// Layer i's attention span as listed (full beyond the list).
  [[nodiscard]] AttentionSpan span(std::int64_t i) const {
    return i >= 0 && static_cast<std::size_t>(i) < attention.size() ? attention[static_cast<std::size_t>(i)]
                                                                    : AttentionSpan::full;
  }
};

}  // namespace gpuplan::wl
