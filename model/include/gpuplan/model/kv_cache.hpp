#pragma once
// KV-cache size per token and per sequence for MHA, GQA, MQA, MLA and sliding-window / hybrid layers; KV dtypes with
// their quantisation-scale overhead; paged blocks with block-size waste; shared prefixes; division over TP and PP.
//
// Sources (cited again where used):
//  [DSV2]   DeepSeek-AI 2024, "DeepSeek-V2", arXiv:2405.04434 §2.1.1-2.1.3 (MLA caches the latent c_KV and the decoupled
//           rotary key k_R: (d_c + d_R) elements per token per layer).
//  [PA]     Kwon et al. 2023, "Efficient Memory Management for Large Language Model Serving with PagedAttention",
//           SOSP'23, arXiv:2309.06180 §4.1-4.3 (fixed-size KV blocks; waste only in a sequence's last block; blocks of a
//           shared prefix stored once and reference-counted).
//  [vLLM-kvh]   vllm/config/model.py ModelConfig.get_num_kv_heads: MLA → 1 ("When using MLA during decode it becomes
//           MQA"), else max(1, n_kv // tp) ("We will replicate the KV heads in the case where the number of KV heads is
//           smaller than the tensor parallel size").
//  [vLLM-pp]    vllm/distributed/utils.py get_pp_indices: L // p layers per stage, the remainder one extra each on the
//           stages before the last.
//  [vLLM-swa]   vllm/v1/kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes: cdiv(W − 1 + n, B) + 1 blocks
//           ("+1 here because the sliding window may not start from the beginning of the block").
//  [vLLM-fp8]   docs.vllm.ai/en/latest/features/quantization/quantized_kvcache: FP8 KV with per-tensor scales
//           (k/v_scale = [1] per layer) or per-attention-head scales (k/v_scale = [num_kv_heads]); no per-token scales.
//  [LMD-kv]     lmdeploy.readthedocs.io/en/latest/quantization/kv_quant.html: online int8/int4 KV quantisation,
//           "asymmetric quantization ... applied on a per-head, per-token basis" (a scale and a zero point per token per
//           head for K and for V).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuplan/core/derivation.hpp"
#include "gpuplan/core/units.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model {

struct KvCacheSize {
  units::Bytes per_token_full{};   ///< one token, all attention layers, as if no layer had a sliding window
  units::Bytes per_sequence{};     ///< a sequence of `tokens`, sliding layers capped at their window, + its state
  units::Bytes state_per_sequence{};  ///< recurrent layers: conv + SSM / delta-rule state of one sequence (any length)
  units::Bytes index_per_token{};     ///< DSA: the indexer's key cache per token, all layers (in per_token_full)
  std::int64_t elements_per_token_layer = 0;  ///< cached elements per token in one (full) layer
  Derivation derivation;
};

/// KV cache of one sequence of `tokens` tokens with `bytes_per_element` bytes per cached element (bf16 = 2).
///
/// MHA/GQA/MQA: 2·n_kv·d elements per token per layer (K and V). MLA: r_kv + d_rope elements per token per layer —
/// the compressed latent and the shared rotary key, which is what vLLM and SGLang store (DeepSeek-V2 paper §2.1.1).
/// Sliding-window layers hold min(tokens, window) tokens. Per sequence = Σ_layers tokens_l · elements · bytes.
/// Mamba-2 layers cache no tokens but a state per sequence, whatever its length (mamba2_state_bytes).
KvCacheSize kv_cache_size(const wl::TransformerArch& arch, std::int64_t tokens, double bytes_per_element,
                          Explain explain = Explain::on);

/// The state one sequence keeps in one Mamba-2 layer on one GPU of a TP group of `tp`, as vLLM allocates it
/// (vllm/model_executor/layers/mamba/mamba_utils.py, MambaStateShapeCalculator.mamba2_state_shape and
/// MambaStateDtypeCalculator._mamba_state_dtype): the conv state (d_conv − 1)·(n_h·P + 2·n_g'·N)/t, n_g' = n_g
/// extended to t when t does not divide it (extra_groups_for_head_shards), in the model dtype (mamba_cache_dtype
/// "auto"); the SSM state (n_h/t)·P·N in mamba_ssm_cache_dtype ("auto": the conv state's dtype; the config's
/// mamba_ssm_cache_dtype when it names one, Mamba2Spec::ssm_state_bytes). Neither depends on the sequence length.
struct MambaStateBytes {
  double conv_elements = 0, ssm_elements = 0;  ///< per sequence per layer on one GPU
  units::Bytes conv{}, ssm{};
  [[nodiscard]] units::Bytes total() const { return conv + ssm; }
};
MambaStateBytes mamba2_state_bytes(const wl::TransformerArch& arch, int tp);

/// The state one sequence keeps in one gated DeltaNet layer on one GPU of a TP group of `tp`, as vLLM allocates it
/// (mamba_utils.py MambaStateShapeCalculator.gated_delta_net_state_shape, gated_delta_net_state_dtype): the conv
/// state (d_conv − 1)·(2·n_k·d_k + n_v·d_v)/t and the recurrent state (n_v/t)·d_k·d_v, both in the model dtype
/// (mamba_cache_dtype 'auto'; GatedDeltaNetSpec::state_bytes). Neither depends on the sequence length.
MambaStateBytes gated_deltanet_state_bytes(const wl::TransformerArch& arch, int tp);

/// The recurrent state of one of the model's recurrent layers (gated DeltaNet or Mamba-2: a model has one kind) on
/// one GPU; zero without recurrent layers.
MambaStateBytes recurrent_state_bytes(const wl::TransformerArch& arch, int tp);

// ---------------------------------------------------------------------------------------------------------------
// Storage element types of the KV cache and of quantized weights.
// ---------------------------------------------------------------------------------------------------------------

enum class StoreDtype { fp32, bf16, fp16, fp8, int8, int4, fp4 };
std::string_view to_string(StoreDtype d);
/// "fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4" (NVFP4); nullopt for anything else.
std::optional<StoreDtype> parse_store_dtype(std::string_view s);
/// Bytes of one stored element, scales excluded (int4 = 0.5).
double element_bytes(StoreDtype d);
/// Whether the type needs quantisation scales (8- and 4-bit types).
bool is_quantized(StoreDtype d);

/// Where the scales of a quantized KV cache live. Per-tensor and per-head scales are a few numbers per layer and add
/// nothing per token; per-token-per-head scales add `scale_bytes` per token per KV head for K and for V.
enum class KvScaleGranularity { none, per_tensor, per_head, per_token_head };
std::string_view to_string(KvScaleGranularity g);
std::optional<KvScaleGranularity> parse_kv_scale_granularity(std::string_view s);

struct KvQuant {
  StoreDtype dtype = StoreDtype::bf16;
  KvScaleGranularity scales = KvScaleGranularity::none;
  double scale_bytes = 0.0;  ///< bytes per scale group (scale + zero point) for per-token-per-head scales
  std::string origin;        ///< where the layout is documented
};

/// The layout engines use by default for each dtype:
///  - fp32/bf16/fp16: no scales.
///  - fp8: per-tensor scales, one k_scale and one v_scale per attention layer ([vLLM-fp8]) — no per-token bytes.
///  - int8/int4: per-token-per-head asymmetric, one fp16 scale and one fp16 zero point (4 B) per token per head for
///    K and for V ([LMD-kv]; the 16-bit storage of the scale and zero point is our assumption, stated as such).
KvQuant default_kv_quant(StoreDtype d);

// ---------------------------------------------------------------------------------------------------------------
// KV bytes per token on one GPU, after the tensor-parallel split.
// ---------------------------------------------------------------------------------------------------------------

struct KvTokenBytes {
  int tp = 1;
  bool mla = false;
  double kv_heads_total = 0;     ///< n_kv of the model (1 latent "head" for MLA)
  double kv_heads_per_gpu = 0;   ///< heads one TP rank stores
  int replication = 1;           ///< TP ranks that store the same head (tp / n_kv when TP > n_kv; tp for MLA)
  double elements_per_layer = 0;           ///< cached elements per token per layer on one GPU
  units::Bytes element_bytes_per_layer{};  ///< elements · element bytes
  units::Bytes scale_bytes_per_layer{};    ///< per-token scale bytes per layer on one GPU
  units::Bytes per_layer{};                ///< one token, one layer, one GPU: elements + scales
  units::Bytes per_token_model{};          ///< one token, all layers, every head stored once (no TP), with scales
  /// DeepSeek sparse attention: the indexer's FP8 key cache per token per layer on one GPU (in per_layer; every TP
  /// rank holds it, like the MLA latent; not in the KV dtype). 0 without DSA.
  units::Bytes index_per_layer{};
  /// Recurrent layers (Mamba-2 or gated DeltaNet): one sequence's state per layer on one GPU (0 without).
  units::Bytes state_per_layer{};
  Derivation derivation;
};

/// KV bytes per token per layer on one GPU of a TP group of `tp`.
///
/// GQA/MHA/MQA: heads per GPU = n_kv / tp when tp ≤ n_kv, else 1 — the head is replicated on tp / n_kv ranks
/// ([vLLM-kvh]). MLA: the latent is one shared "head" that every TP rank stores whole ([vLLM-kvh]; vLLM's MLA backends
/// run decode as MQA over the latent), so MLA's cache per GPU does not fall with TP. Elements per layer per GPU:
/// 2·heads_gpu·d (K and V), or r_kv + d_rope for MLA ([DSV2] §2.1). Scales per token: 2·heads_gpu·scale_bytes
/// (1·scale_bytes for the MLA latent) when they are per token per head, else 0.
KvTokenBytes kv_token_bytes(const wl::TransformerArch& arch, const KvQuant& kv, int tp, Explain explain = Explain::on);

// ---------------------------------------------------------------------------------------------------------------
// Pipeline stages and paged blocks.
// ---------------------------------------------------------------------------------------------------------------

/// The layers of one pipeline stage.
struct StageLayers {
  int stage = 0;
  std::int64_t first = 0;    ///< index of the first layer
  std::int64_t count = 0;    ///< layers on the stage
  std::int64_t sliding = 0;  ///< of which local-attention layers (a sliding window, or Llama 4's chunks)
  std::int64_t moe = 0;      ///< of which MoE layers
  std::int64_t stateful = 0;   ///< of which Mamba-2 layers (a state per sequence, no KV)
  std::int64_t uncached = 0;   ///< of which layers that cache nothing (no attention: Mamba-2 or FFN-only layers)
  bool first_stage = false;  ///< holds the input embedding
  bool last_stage = false;   ///< holds the final norm and the LM head
  [[nodiscard]] std::int64_t full() const { return count - sliding - uncached; }
};

/// Layers per stage as vLLM splits them ([vLLM-pp]): ⌊L/p⌋ each, the L mod p extra layers one each on the stages
/// just before the last. p is clamped to [1, L].
std::vector<StageLayers> pipeline_stages(const wl::TransformerArch& arch, int pp);

/// Blocks of `block_size` tokens that one sequence of `tokens` tokens holds in one layer ([PA] §4.2): ⌈s/B⌉ for a
/// full-attention layer; for a sliding-window layer of window W at most ⌈(W − 1)/B⌉ + 1 ([vLLM-swa] with no tokens
/// in flight), i.e. min(s, W) when B = 1 (contiguous cache). A chunked layer (`chunked`, chunk C = `window`) holds
/// the current aligned chunk: at most ⌈C/B⌉ blocks when B divides C, one more when a chunk starts inside a block.
std::int64_t kv_blocks(std::int64_t tokens, std::int64_t block_size, std::int64_t window = 0, bool chunked = false);

/// KV cache of sequences on one GPU (one pipeline stage, one TP rank).
struct SequenceKv {
  std::int64_t tokens = 0;         ///< tokens per sequence
  std::int64_t block_size = 1;     ///< tokens per block (1 = contiguous, no paging waste)
  std::int64_t prefix_tokens = 0;  ///< shared prompt prefix
  std::int64_t shared_prefix_blocks = 0;  ///< full blocks of the prefix, stored once per full-attention layer
  units::Bytes exact{};            ///< one sequence, tokens × per-token bytes of its layers, no block rounding
  units::Bytes per_sequence{};     ///< one sequence alone, block-rounded (what it occupies with no sharing)
  units::Bytes unique{};           ///< what each further sequence adds when the prefix is shared
  units::Bytes shared_prefix{};    ///< the shared prefix blocks, stored once
  units::Bytes block_waste{};      ///< per_sequence − exact: the partly filled last blocks of this length
  units::Bytes expected_block_waste{};  ///< (B − 1)/2 tokens per layer: the mean over uniformly spread lengths
  units::Bytes state{};            ///< the Mamba-2 layers' state of one sequence (in exact, per_sequence and unique)
  /// Bytes that n sequences occupy together: shared_prefix + n·unique (n = 0 → 0).
  [[nodiscard]] units::Bytes for_sequences(std::int64_t n) const {
    return n <= 0 ? units::Bytes{} : shared_prefix + unique * static_cast<double>(n);
  }
};

/// KV of sequences of `tokens` on the layers of `stage`, with `token` bytes per layer per GPU.
///
/// Per layer: blocks = kv_blocks(s, B, window), bytes = blocks·B·per_layer. A shared prefix of P tokens is stored
/// once in its ⌊P/B⌋ full blocks ([PA] §4.3; vLLM's prefix cache shares full blocks only — a prefix shorter than one
/// block is not shared) on full-attention layers; sliding-window and chunked layers drop old blocks, so they are not
/// shared.
SequenceKv sequence_kv(const wl::TransformerArch& arch, const StageLayers& stage, const KvTokenBytes& token,
                       std::int64_t tokens, std::int64_t block_size, std::int64_t prefix_tokens = 0);

}  // namespace gpuplan::model
