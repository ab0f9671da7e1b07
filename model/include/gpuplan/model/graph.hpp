#pragma once
// The op graph of a transformer: one description of what a layer (and the embedding / LM head around the layers)
// contains, from which the quantities that depend only on the model are folded — parameters by component, matmul
// FLOPs per token, LoRA adapter sizes, weights per GPU under tensor parallelism, KV-cache elements.
//
// A layer is a short list of ops in execution order (norm, QKV projection, attention, output projection, norm, MLP
// or router + experts + shared experts). Each op carries the weight tensors it owns, each with how tensor
// parallelism splits it (the Megatron-LM / vLLM layouts) and whether it takes part in a matmul, so that every
// per-model quantity is one fold over the same ops (docs/design/op-graph-plan.md; DESIGN.md §11). Building a graph
// allocates nothing: the ops sit in a fixed array and their names are literals.
#include <array>
#include <cstdint>

#include "gpuplan/model/params.hpp"
#include "gpuplan/wl/transformer.hpp"

namespace gpuplan::model {

enum class OpKind : std::uint8_t {
  linear,     ///< a (possibly fused) linear layer: one GEMM per copy
  attention,  ///< the attention core (scores, softmax, weighted values)
  norm,       ///< RMSNorm / LayerNorm
  embedding,  ///< token or position lookup
  ssm,        ///< Mamba-2's / gated DeltaNet's sequence mixing: the conv1d, the chunked scan (state update in
              ///< decode), the gated norm
  indexer,    ///< DeepSeek sparse attention's lightning indexer: its projections and its FP8 scoring of past tokens
};

/// The component an op's weights are counted under (ParameterCounts' fields).
enum class Part : std::uint8_t {
  attention, dense_mlp, router, routed_experts, shared_experts, norms,  // per layer
  embedding, position_embedding, final_norm, lm_head,                    // around the layers
  ssm,  ///< per layer: a Mamba-2 or gated DeltaNet mixer's projections, conv1d, A_log, (D), dt_bias and gated norm
  mtp,  ///< a multi-token-prediction module's own ops (its norms and projection; its layer is a layer kind's)
};

/// How tensor parallelism splits a weight tensor across the t ranks of a TP group.
enum class TpSplit : std::uint8_t {
  split,       ///< column- or row-parallel: each rank holds 1/t
  kv_heads,    ///< K and V projections: split by KV head, so replicated once t exceeds the KV heads
  replicated,  ///< every rank holds all of it: MLA's down-projections and their norms (vLLM's ReplicatedLinear)
  small,       ///< norms and the router: held whole, kept in 16 bits when the weights are quantised
};

/// One weight tensor of an op (all copies: the E routed experts together).
struct WeightTensor {
  std::int64_t elements = 0;
  TpSplit split = TpSplit::split;
  bool matmul = true;  ///< multiplied in a GEMM (FLOPs count it); false: biases, norm weights, sinks, gates
  bool tied = false;   ///< the LM head tied to the embedding: a matmul, not a parameter of its own
};

struct Op {
  OpKind kind = OpKind::linear;
  Part part = Part::attention;
  LinearKind linear = LinearKind::qkv;  ///< linear ops: what LoRA targets call it
  const char* name = "";
  /// Linear ops: input and output features of one copy, as one adapter pair sees the (fused) layer. Norms: the
  /// normalised width (in = out = h); the embedding: the width of its output (out = h).
  std::int64_t in = 0, out = 0;
  std::int64_t copies = 1;  ///< routed experts: E; otherwise 1
  std::int64_t active = 1;  ///< copies one token passes through (top-k for routed experts)
  std::array<WeightTensor, 8> weights{};
  std::uint8_t weight_count = 0;
  /// Attention ops: query and KV heads, head dims, KV-cache elements per token.
  std::int64_t heads = 0, kv_heads = 0, d_qk = 0, d_v = 0, cache_elements = 0;
  /// Attention ops: how far back a query reaches, in tokens (0: the whole context), and how: a sliding window of the
  /// last `window` tokens, or (chunked) the aligned chunk of `window` tokens the query is in (Llama 4).
  std::int64_t window = 0;
  bool chunked = false;
  /// SSM ops (Mamba-2): heads holds n_h, d_v the head dim P, d_qk the state size N; groups n_g sharing B and C,
  /// the SSD chunk Q, the conv1d's channels and kernel. state_elements: what one sequence keeps between tokens,
  /// independent of its length: the conv state (d_conv − 1)·channels and the SSM state n_h·P·N.
  std::int64_t groups = 0, chunk = 0, conv_channels = 0, conv_kernel = 0;
  /// SSM ops of gated DeltaNet (the gated delta rule): heads holds the value heads n_v, d_v their dim, d_qk the key
  /// dim d_k (the state is d_k × d_v per value head), groups the key heads n_k, chunk the chunk of the chunked form.
  bool delta_rule = false;
  /// Indexer ops (DeepSeek sparse attention): heads / d_qk the indexer's heads and head dim, topk the keys the main
  /// attention keeps per query, index_cache_bytes the indexer's key cache per token (FP8 + scale). The attention op
  /// of such a layer carries the same topk (it reads at most topk keys per query) and MLA's MQA-mode head dims.
  std::int64_t topk = 0;
  double index_cache_bytes = 0.0;
  /// MLA attention ops (DeepSeek-V2/V3, arXiv:2405.04434 §2.1): the query latent's rank r_q (0: the queries are
  /// projected from h directly), the key-value latent's rank r_kv, and one head's no-rope and rotary query/key parts
  /// and value width as the up-projections produce them (the MHA form; d_qk and d_v above are what the attention
  /// kernel runs: under DeepSeek sparse attention MLA's MQA form over the latent). `on` false on other ops.
  struct MlaShape {
    bool on = false;
    std::int64_t q_rank = 0, kv_rank = 0, d_nope = 0, d_rope = 0, d_v = 0;
  } mla{};
  [[nodiscard]] bool is_mla() const { return mla.on; }
  [[nodiscard]] std::int64_t conv_state_elements() const { return (conv_kernel - 1) * conv_channels; }
  [[nodiscard]] std::int64_t ssm_state_elements() const { return heads * d_v * d_qk; }

  void add(std::int64_t elements, TpSplit split, bool matmul = true, bool tied = false);
  /// All weight elements of this op that are parameters (tied tensors excluded).
  [[nodiscard]] std::int64_t parameters() const;
  /// Weight elements of this op's matmul tensors (all copies).
  [[nodiscard]] std::int64_t matmul_elements() const;
  /// Weight elements of this op in matmuls, per token: the matmul tensors × active / copies.
  [[nodiscard]] std::int64_t matmul_per_token() const;
};

/// What distinguishes one layer from another in a model: a {mixer} × {FFN} pair. The mixer is attention — global,
/// or local: a sliding window or an aligned chunk, whichever the model's local layers use
/// (TransformerArch::local_span; a model does not mix the two) —, a Mamba-2 SSM, or none; the FFN dense, MoE or
/// none (Nemotron-H's layers are mixer-only or FFN-only).
struct LayerKind {
  bool moe = false;    ///< the FFN is MoE (when ffn)
  bool local = false;  ///< the attention is local (when the mixer is attention)
  wl::Mixer mixer = wl::Mixer::attention;
  bool ffn = true;
  /// DeepSeek sparse attention without an indexer of its own: the layer reads the top-k of the last layer that ran
  /// one (TransformerArch::has_indexer; GLM-5.1's shared indexer layers).
  bool shared_index = false;
  /// A dense index of the kind, 0..kCount-1; the four attention + FFN kinds come first, in the order
  /// (dense, global), (dense, local), (MoE, global), (MoE, local); the shared-indexer kinds last.
  static constexpr int kCount = 64;
  [[nodiscard]] int index() const {
    return (((static_cast<int>(mixer) * 2 + (ffn ? 0 : 1)) * 2 + (moe ? 1 : 0)) * 2 + (local ? 1 : 0)) +
           (shared_index ? 32 : 0);
  }
  [[nodiscard]] static LayerKind from_index(int i) {
    LayerKind k;
    k.local = (i & 1) != 0;
    k.moe = (i & 2) != 0;
    k.ffn = (i & 4) == 0;
    k.mixer = static_cast<wl::Mixer>((i & 31) >> 3);
    k.shared_index = (i & 32) != 0;
    return k;
  }
  /// Layer l's kind in model a (flags that do not apply are cleared, so equal layers have equal kinds).
  [[nodiscard]] static LayerKind of(const wl::TransformerArch& a, std::int64_t l) {
    LayerKind k;
    k.mixer = a.mixer(l);
    k.ffn = a.has_ffn(l);
    k.moe = k.ffn && a.is_moe_layer(l);
    k.local = k.mixer == wl::Mixer::attention && a.is_local_layer(l);
    k.shared_index = k.mixer == wl::Mixer::attention && a.dsa.has_value() && !a.has_indexer(l);
    return k;
  }
};

/// The name of a layer kind's attention: "full attention", "sliding-window attention" or "chunked attention",
/// "gated full attention" with an output gate (Qwen3-Next), "MLA + DeepSeek sparse attention (...)"; of another
/// mixer: "Mamba-2 SSM", "gated DeltaNet (linear attention)" or "no mixer".
const char* attention_span_name(const wl::TransformerArch& a, LayerKind kind);
/// The name of a layer kind's FFN: "dense FFN", "MoE", "MoE with shared experts" or "no FFN".
const char* ffn_name(const wl::TransformerArch& a, LayerKind kind);

/// The ops of one graph, in execution order (a layer has at most 13).
class OpGraph {
 public:
  static constexpr std::size_t kCapacity = 16;
  Op& push(Op op);
  [[nodiscard]] const Op* begin() const { return ops_.data(); }
  [[nodiscard]] const Op* end() const { return ops_.data() + size_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] const Op& operator[](std::size_t i) const { return ops_[i]; }
  /// The attention op (nullptr when the graph has none).
  [[nodiscard]] const Op* attention() const;
  /// The SSM op (nullptr when the graph has none).
  [[nodiscard]] const Op* ssm() const;
  /// The DeepSeek sparse attention indexer op (nullptr when the graph has none).
  [[nodiscard]] const Op* indexer() const;
  /// Σ parameters() of the ops in `part`.
  [[nodiscard]] std::int64_t parameters(Part part) const;
  [[nodiscard]] std::int64_t parameters() const;
  /// Σ weight elements split as `split` (parameters only).
  [[nodiscard]] std::int64_t weights(TpSplit split) const;
  [[nodiscard]] std::int64_t matmul_per_token() const;

 private:
  std::array<Op, kCapacity> ops_{};
  std::size_t size_ = 0;
};

/// The ops of one decoder layer of kind `kind`: pre-attention norm, QKV projection (MLA: the down- and
/// up-projections as one fused block, its norms replicated), attention, output projection, the pre-MLP norm (and
/// Gemma's post-norms), then the dense MLP, or the router, the routed experts and the shared experts.
/// Shapes are whole-model (before any parallel split).
OpGraph build_layer_graph(const wl::TransformerArch& a, LayerKind kind);

/// The layer's attention op; for a layer without attention, that of the model's full-attention layer (the head
/// shapes a pricer's per-layer constants read; nothing of it is priced there).
Op attention_or_reference(const wl::TransformerArch& a, const OpGraph& g);

/// The ops around the layers: token embedding, learned positions, final norm, LM head (tied or not).
OpGraph build_head_graph(const wl::TransformerArch& a);

/// DeepSeek-V3's multi-token-prediction module around its transformer layer (arXiv:2412.19437 §2.2.1): the RMSNorms of
/// the previous depth's hidden state and of the next token's embedding (hnorm, enorm), the projection M of their
/// concatenation (eh_proj, 2h → h, no bias) and the module's norm before the shared output head (shared_head.norm).
/// Its transformer layer is one of the model's layer kinds (build_layer_graph); the embedding and the output head are
/// the main model's (build_head_graph).
OpGraph build_mtp_graph(const wl::TransformerArch& a);

/// The width of the residual stream a layer takes and gives, whole-model: h. Every layer graph's first op reads it and
/// its last op writes it (build_layer_graph builds them from here); read directly where a graph per call would cost
/// more than the quantity (the training step's TP, EP and PP messages, per layout in the search).
std::int64_t layer_boundary_width(const wl::TransformerArch& a);

/// What one attention layer caches per token, whole-model: 2·n_kv·d (K and V), or MLA's latent and shared rotary key
/// r_kv + d_rope. The attention op's cache_elements (build_layer_graph sets it from here); read directly where a
/// graph per call would cost more than the quantity (the training step's CP K/V exchange, per layout in the search).
std::int64_t attention_cache_elements(const wl::TransformerArch& a);

/// Calls f(kind, count) for each distinct layer kind present in the model, in LayerKind::index() order (for
/// attention + FFN models: dense/MoE × global/local).
template <class F>
void for_each_layer_kind(const wl::TransformerArch& a, F&& f) {
  std::array<std::int64_t, LayerKind::kCount> count{};
  for (std::int64_t l = 0; l < a.layers; ++l) ++count[static_cast<std::size_t>(LayerKind::of(a, l).index())];
  for (int i = 0; i < LayerKind::kCount; ++i)
    if (count[static_cast<std::size_t>(i)] > 0) f(LayerKind::from_index(i), count[static_cast<std::size_t>(i)]);
}

}  // namespace gpuplan::model
