// One layer of a serving engine's forward on one GPU: ServingLayerPricer prices the layer's op graph (graph.hpp) for
// one forward batch (each op once, the engine's fused elementwise kernels between them, the TP all-reduces and the EP
// all-to-alls), layer_forward runs it, explain_serving_moe explains an MoE layer; the per-op accumulator (Acc,
// serving_internal.hpp) and the serving device. serving.cpp composes the layers into the forward.
#include "serving_internal.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/topology.hpp"
#include "graph_memo.hpp"
#include "mla_projections.hpp"
#include "moe_cost.hpp"
#include "moe_layer.hpp"
#include "gpuplan/model/wide_ep.hpp"

namespace gpuplan::model {

using units::Bytes;
using units::Seconds;

using detail::moe_dispatch_rows;
using detail::MoeExpertWork;
using detail::MoeLayerTerms;
using detail::Acc;
using detail::at_least_one;

namespace detail {

PassItem pass_item(const OpCost& c) {
  PassItem::Kind k = c.cls == OpClass::gemm        ? PassItem::Kind::gemm
                     : c.cls == OpClass::attention ? PassItem::Kind::attention
                                                   : PassItem::Kind::elementwise;
  return PassItem{c.name, k, c.time, 1,
                  fmt::format("{}: {}, {} moved, {}-bound{}", c.name, units::format(c.time), units::format(c.bytes),
                              to_string(c.bound),
                              c.flops.raw() > 0 ? fmt::format(", {}", units::format(c.flops)) : std::string())};
}

Device serving_device(const ServingPerfPlan& plan, const ServingSystem& sys) {
  // An engine under load runs its forward passes back to back: sustained work, like a training step.
  Device d = sustained_device(*sys.gpu, sys.efficiency, plan.attention);
  apply_launch_costs(d, plan, plan.cuda_graphs);
  // The measured weight-only rates are PyTorch's own int4 kernel (tinygemm, torch._weight_int4pack_mm: a decode
  // kernel whose time grows linearly with the tokens). A serving engine's fused kernels (Marlin class) are not
  // measured: they take the 16-bit ceiling and the memory-bound GEMM bandwidth, and the derivation says so.
  if (plan.kernels == wl::KernelStyle::fused) d.eff.gemm_w4a16 = d.eff.gemm_w4a16_hbm = 0.0;
  return d;
}

}  // namespace detail

namespace {

/// The same op over `k` (possibly fractional, an expectation) independent items in one launch: work × k, one fixed
/// per-kernel cost.
OpCost repeated(OpCost c, double k, const Device& d) {
  const Seconds launch = kernel_fixed(d, c.cls);
  c.time = (c.time - launch) * k + launch;
  c.flops = c.flops * k;
  c.bytes = c.bytes * k;
  return c;
}

/// Prices one layer's op graph (graph.hpp) for one forward batch of a serving engine on one GPU: each op once, the
/// engine's fused elementwise kernels between them (add + norm, rotary + KV write), the TP all-reduces and the EP
/// all-to-alls.
class ServingLayerPricer {
 public:
  ServingLayerPricer(const wl::TransformerArch& arch, const ServingPerfPlan& serving_plan, const ForwardBatch& batch,
                     LayerKind layer_kind, const Device& device, const KvTokenBytes& kv_token,
                     const CommGroup& tp_group, const CommGroup& ep_group, bool keep_ops, bool trace)
      : a(arch), plan(serving_plan), fb(batch), d(device), kvt(kv_token), ep_g(ep_group), keep(keep_ops),
        kind(layer_kind), moe(layer_kind.moe && arch.moe.has_value()), graph(detail::layer_graph(arch, layer_kind)),
        attn(attention_or_reference(arch, *graph)),
        ar(t > 1 ? collective_time(Collective::all_reduce, units::bytes((double(Ti) * double(h)) * e), tp_group) : Seconds(0)) {
    acc.tracing = trace;
  }

  Acc run() {
    int norms = 0;
    for (const Op& o : graph) {
      switch (o.kind) {
        case OpKind::norm:
          if (o.part == Part::attention) {  // the per-head q/k norm (Qwen3, Gemma 3), not a layer norm
            price_qk_norm();
            break;
          }
          // The layer's norms, in graph order. The first takes the residual add before it (the embedding's, or the
          // last layer's, fused into it by the engines); a pre-norm follows the attention block's residual add;
          // Gemma 2/3's post-norms (norms_per_layer 4: after the attention and after the MLP, before their
          // residual adds) normalise a block's output alone, and their adds go to the next norm.
          if (norms == 0) {
            if (eager) norm("norm", T * double(h) * e * 2.0, 4.0 * T * double(h), h);
            else norm("add + norm", T * double(h) * e * 4.0, 5.0 * T * double(h), h);
          } else if (a.norms_per_layer >= 4 && (norms == 1 || norms == 3)) {
            norm(o.name, T * double(h) * e * 2.0, 4.0 * T * double(h), h);
          } else {
            add_norm("add + norm");
          }
          ++norms;
          break;
        case OpKind::attention: price_attention(o); break;
        case OpKind::ssm: price_ssm(o); break;
        case OpKind::indexer: price_indexer(o); break;
        case OpKind::linear: moe_term(o); break;
        case OpKind::embedding: break;
      }
    }
    if (!kind.ffn) {
      // A mixer-only layer (Nemotron-H): its output projection's all-reduce was the layer's last.
      if (eager) stream("residual add", T * double(h) * e * 3.0, T * double(h));
      return std::move(acc);
    }
    if (moe && ep > 1) {
      // Dispatch and combine: each rank sends its 1/ep share of the token-expert pairs (moe_cost.hpp,
      // moe_dispatch_rows). Plain PyTorch under CUDA graphs can only capture NCCL's all-to-all with fixed split
      // sizes: every rank sends each destination the worst case (its tokens × k slots, empty ones zero), the
      // destinations' expert ids travel in a second all-to-all, and the padded buffers are filled, gathered by
      // expert and scattered back (zero fill, a gather of every slot, the scatter of the results: 5 passes of
      // read or write over them). Engines with their own dispatch kernels send only the routed rows.
      const bool fixed = eager && plan.cuda_graphs;
      const double kk = double(a.moe->experts_per_token);
      const double rows = moe_dispatch_rows(Tm, kk, int(ep), fixed);
      // The one dispatch pricer (moe_a2a.hpp), as training's. A fixed-capacity buffer moves the same bytes whatever
      // the routing; otherwise the busiest rank's rows (ι).
      const detail::A2aCost x = detail::moe_a2a(detail::serving_a2a_input(a, plan, fb, Tm / double(ep), rows, fixed, ep_g), ep_g);
      acc.add_comm("EP dispatch + combine all-to-all", PassItem::Kind::comm_ep, x.dispatch + x.combine, 2);
      acc.moe.add(MoeLayerTerms::dispatch, x.dispatch);
      acc.moe.add(MoeLayerTerms::combine, x.combine);
      const Seconds before_buffers = acc.total();
      if (fixed) {
        acc.add_comm("EP expert-id all-to-all", PassItem::Kind::comm_ep, collective_time(Collective::all_to_all, units::bytes(rows * 8.0), ep_g), 1);
        // The padded buffers (rows of h): zero fill (write), the receiver's gather of every slot into expert order
        // (read + write), the results written back to slot order; the sender writes its routed rows into their
        // slots and takes them back from the returned buffer (a gather, then a write into pair order). The writes
        // into slots are PyTorch's index_put (one element per thread, not vectorised), bound by the SMs' issue rate,
        // not HBM (moe_cost.hpp, kIndexPutElementsPerSmCycle: the same absolute rate on our H100 and H200 profiles).
        const double local = T * kk / double(ep), hb = double(h) * e;
        stream("fixed-capacity send buffer zero fill", rows * hb, 0.0);
        index_put("routed rows into their slots (index_put)", local * hb * 2.0);
        stream("fixed-capacity gather by expert", rows * hb * 2.0, 0.0);
        index_put("results back to slot order (index_put)", rows * hb * 2.0);
        stream("returned rows gathered from their slots", local * hb * 2.0, 0.0);
        index_put("returned rows into pair order (index_put)", local * hb * 2.0);
        // The slot bookkeeping beyond the single-GPU routing (price_eager_routing), one kernel each (int64 indices
        // over the pairs): the pairs sorted by destination rank and the received ones by local expert (three radix
        // passes each), the per-destination and per-expert counts (fill, scatter-add each), the slot offsets
        // (arange, cumsum, subtract, gather) and the expert ids written into their slots (fill, index_put).
        const double pairs = T * kk / double(ep);
        for (const char* n : {"destination sort", "destination sort", "destination sort", "destination counts fill",
                              "destination counts", "slot arange", "slot offsets scan", "slot offsets", "slot index",
                              "expert-id slots fill", "expert-id slots", "received expert sort",
                              "received expert sort", "received expert sort", "received counts fill",
                              "received counts"})
          stream(n, std::max(pairs, rows / double(ep)) * 16.0, 0.0);
      }
      acc.moe.add(MoeLayerTerms::routing, acc.total() - before_buffers);
    }
    // Wide EP (wide_ep.hpp): the combine returns each token to the rank that holds it, so an MoE layer's TP ranks
    // need no second all-reduce (DeepSeek's TP + SP: the reduce-scatter after attention and the all-gather before
    // the next one make the one all-reduce already priced after the output projection).
    const bool combined = moe && dp > 1;
    acc.add_comm("TP all-reduce", PassItem::Kind::comm_tp, combined ? Seconds(0) : ar, t > 1 && !combined ? 1 : 0);
    if (eager) stream("residual add", T * double(h) * e * 3.0, T * double(h));  // fused into the next norm otherwise
    return std::move(acc);
  }

 private:
  double wb(std::int64_t k) const { return weight_bytes_per_param(plan.weights, k); }
  void gemm(const std::string& name, std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t batch = 1,
            double b_bytes = 0) {
    const double bb = b_bytes > 0 ? b_bytes : wb(k);
    GemmShape shape{m, n, k, batch, bb};
    // The block's weights take the compression (a GEMM given its own bytes, the MoE router, stays 16-bit).
    const bool compressed = b_bytes <= 0;
    shape.sparse24 = compressed && plan.weights.sparse24;
    const bool quant = compressed && plan.activation_quant;
    if (quant) {
      // Dynamic per-token quantisation of the GEMM's input: read 16-bit, write the compute type + one fp32 scale.
      const double q = hw::bytes_per_element(gp), rows = double(m) * double(batch);
      stream(name + ": quantise input (per token)", rows * double(k) * (e + q) + rows * 4.0, 3.0 * rows * double(k));
    }
    OpCost c = gemm_cost(name, shape, gp, d);
    acc.add(c, keep);
    if (quant && eager) {
      // The 4-byte accumulator out, scaled by the token and channel scales into 16-bit.
      const double rows = double(m) * double(batch);
      stream(name + ": dequantise output", rows * double(n) * (4.0 + e) + (rows + double(n)) * 4.0,
             2.0 * rows * double(n));
    }
    acc.weights += units::bytes(double(k) * double(n) * double(batch) * bb);
  }
  void stream(const std::string& name, double bytes, double flops, HostCall host = HostCall::binary) {
    if (bytes <= 0) return;
    acc.add(streaming_cost(name, OpClass::elementwise, units::bytes(bytes), units::flop(flops), d), keep, host);
  }
  // An elementwise kernel of one tensor operand (an activation, a flip, a cast, a reduction, a fill): eager PyTorch's
  // host issues it at GELU's cost.
  void unary(const std::string& name, double bytes, double flops) { stream(name, bytes, flops, HostCall::unary); }
  // A kernel the call before it launches (no host call of its own).
  void inner(const std::string& name, double bytes) {
    if (bytes > 0) acc.add_inner(streaming_cost(name, OpClass::elementwise, units::bytes(bytes), units::flop(0), d), keep);
  }
  // PyTorch's index_put of whole rows (x[idx] = y): issue-bound at detail::kIndexPutElementsPerSmCycle.
  void index_put(const std::string& name, double bytes) {
    if (bytes <= 0) return;
    acc.add(detail::index_put_cost(name, units::bytes(bytes), e, d), keep);
  }
  // TensorIterator's non-vectorised elementwise kernel (strided or broadcast operands) over `elements` outputs:
  // issue-bound at detail::kStridedElementwiseElementsPerSmCycle (moe_cost.hpp).
  void strided(const std::string& name, double bytes, double flops, double elements, HostCall host = HostCall::binary) {
    if (bytes <= 0) return;
    acc.add(detail::issue_bound_cost(name, units::bytes(bytes), units::flop(flops), elements,
                                     detail::kStridedElementwiseElementsPerSmCycle, d),
            keep, host);
  }
  // PyTorch's F.silu(x[..., :w]) * x[..., w:] over `rows` rows of a gate|up output `width` wide: the SiLU (read,
  // write) and the gate product (read two, write one), both on strided halves, so both issue-bound (strided).
  void eager_swiglu(const std::string& pre, double rows, double width) {
    const double el = rows * width;
    strided(pre + "SiLU", el * e * 2.0, 4.0 * el, el, HostCall::unary);
    strided(pre + "gate product", el * e * 3.0, el, el);
  }
  // Residual add + norm: one fused kernel (reads x and the residual, writes both), or an add and a norm apart.
  void add_norm(const char* name) {
    if (!eager) {
      norm(name, T * double(h) * e * 4.0, 5.0 * T * double(h), h);
      return;
    }
    stream("residual add", T * double(h) * e * 3.0, T * double(h));
    norm("norm", T * double(h) * e * 2.0, 4.0 * T * double(h), h);
  }
  // A norm kernel over rows of `row` elements (one block per row: norm_cost).
  void norm(const std::string& name, double bytes, double flops, std::int64_t row) {
    if (bytes <= 0) return;
    acc.add(norm_cost(name, units::bytes(bytes), units::flop(flops), row, d), keep, HostCall::norm);
  }
  // Qwen3's / Gemma 3's RMSNorm over each q and k head (graph.hpp: the q/k norm op), rows of head_dim. PyTorch
  // (serve_moe_step.py: F.rms_norm(qk, (d,)) * w) runs the norm and the weight multiply as two kernels; an engine's
  // one fused kernel is assumed (no engine profile here).
  void price_qk_norm() {
    const double elems = T * double(attn.heads + attn.kv_heads) * double(attn.d_qk) / double(t);
    norm("q/k norm", elems * e * 2.0, 4.0 * elems, attn.d_qk);
    if (eager) stream("q/k norm weight", elems * e * 3.0, elems);
  }

  // Mamba-2 (graph.hpp add_mamba2): the prompt's tokens through the conv1d and the chunked SSD scan, which
  // leaves each sequence's final state in the cache; each decode token updates the state it reads (no KV).
  void price_ssm(const Op& o) {
    const std::int64_t heads_gpu = std::max<std::int64_t>(1, o.heads / t);
    const std::int64_t channels_gpu = std::max<std::int64_t>(1, o.conv_channels / t);
    const std::int64_t groups_gpu = std::max<std::int64_t>(1, o.groups / t);
    if (fb.prefill_seqs > 0 && fb.prefill_tokens > 0) {
      const double tokens = fb.prefill_seqs * double(fb.prefill_tokens);
      acc.add(o.delta_rule ? gated_delta_scan_cost("prefill conv1d + gated delta rule", heads_gpu, o.d_qk, o.d_v,
                                                   o.chunk, channels_gpu, o.conv_kernel, tokens, fb.prefill_tokens, e,
                                                   false, gp, d)
                           : ssd_scan_cost("prefill conv1d + SSD scan", heads_gpu, o.d_v, o.d_qk, groups_gpu, o.chunk,
                                           channels_gpu, o.conv_kernel, tokens, fb.prefill_tokens, e, false, gp, d),
              keep);
    }
    if (fb.decode_seqs > 0) {
      // Gated DeltaNet or Mamba-2: the decode step reads and writes the layer's recurrent state, no KV cache.
      const double steps = fb.decode_seqs * double(fb.queries_per_seq);
      acc.add(o.delta_rule ? gated_delta_state_update_cost("decode gated delta state update", steps, heads_gpu, o.d_qk,
                                                           o.d_v, channels_gpu, o.conv_kernel, kvt.state_per_layer, e, d)
                           : ssm_state_update_cost("decode SSM state update", steps, heads_gpu, o.d_v, o.d_qk,
                                                   channels_gpu, o.conv_kernel, kvt.state_per_layer, e, d),
              keep);
      acc.kv += kvt.state_per_layer * steps;
    }
    const double inner = double(heads_gpu) * double(o.d_v);
    stream("gated RMSNorm", T * inner * e * 3.0, 5.0 * T * inner);
  }

  // DeepSeek sparse attention's lightning indexer (graph.hpp add_indexer; every TP rank runs it whole): its
  // projections, the FP8 scoring of each prompt token against the tokens before it (past + its causal share) and
  // each decode query against the whole held context, reading the FP8 key cache; the top-k it selects is what the
  // attention reads (price_attention, price_decode).
  void price_indexer(const Op& o) {
    // One GEMM of the projections' weight count (wq_b reads the r_q-wide query latent, wk and weights_proj h).
    gemm(o.name, Ti, std::max<std::int64_t>(1, o.matmul_elements() / o.out), o.out);
    if (fb.prefill_seqs > 0 && fb.prefill_tokens > 0) {
      const double s = double(fb.prefill_tokens), past = double(fb.prefill_past);
      const double pairs = fb.prefill_seqs * s * (past + (s + 1.0) / 2.0);
      acc.add(indexer_cost("prefill indexer scoring + top-k", fb.prefill_seqs * s, pairs, o.heads, o.d_qk,
                           fb.prefill_seqs * (past + s), o.index_cache_bytes, false, d),
              keep);
    }
    if (fb.decode_seqs > 0) {
      const double held = double(fb.decode_context + fb.queries_per_seq);
      const double q = fb.decode_seqs * double(fb.queries_per_seq);
      acc.add(indexer_cost("decode indexer scoring + top-k", q, q * held, o.heads, o.d_qk, fb.decode_seqs * held,
                           o.index_cache_bytes, false, d),
              keep);
      acc.kv += units::bytes(fb.decode_seqs * held * o.index_cache_bytes);
    }
  }

  void price_qkv(const Op& o) {
    if (o.part == Part::ssm) {  // Mamba-2's in_proj: a column-parallel GEMM, no rotary, no KV write
      gemm(o.name, Ti, h, std::max<std::int64_t>(1, o.out / t));
      return;
    }
    if (attn.is_mla()) {
      // MLA's projections as their GEMMs (graph/mla_projections.hpp): q_a and kv_a (the down projections) whole on
      // every TP rank, one fused GEMM (vLLM's and SGLang's fused_qkv_a_proj [vLLM-dsv2]), q_b and kv_b split over TP
      // by their outputs. kv_b is priced as one GEMM over the latent in prefill and decode alike: the absorbed
      // decode's two per-head bmm (q_nope·W_UK, the latent output·W_UV) multiply the same weights,
      // r_kv·n_q·(d_nope + d_v).
      for (const MlaProjection& p : mla_projections(attn, h, true))
        gemm(p.name, Ti, p.in, p.replicated ? p.out : std::max<std::int64_t>(1, p.out / t));
    } else {
      gemm(o.name, Ti, h, o.out / t);
    }
    if (attn.is_mla()) {
      // MLA's latent RMSNorms (vLLM's q_a_layernorm and kv_a_layernorm), a norm kernel each over the query latent
      // r_q (none without one) and the key-value latent r_kv, as training prices them (train/layer_cost.cpp).
      const double rq = double(attn.mla.q_rank), rkv = double(attn.mla.kv_rank);
      norm("MLA query latent norm", T * rq * e * 2.0, 4.0 * T * rq, attn.mla.q_rank);
      norm("MLA key-value latent norm", T * rkv * e * 2.0, 4.0 * T * rkv, attn.mla.kv_rank);
    }
    const std::int64_t rope_dim = attn.is_mla() ? attn.mla.d_rope : a.head_dim;
    const double rope_elems = T * double((attn.heads + (attn.is_mla() ? 1 : attn.kv_heads)) * rope_dim) / double(t);
    if (!eager) {
      stream("rotary + KV write", rope_elems * e * 2.0 + T * kvt.per_layer.raw(), 3.0 * rope_elems);
    } else {
      unary("rotary: half swap", rope_elems * e * 2.0, 0.0);
      stream("rotary: x·cos", rope_elems * e * 2.0, rope_elems);
      stream("rotary: + swapped·sin", rope_elems * e * 3.0, 2.0 * rope_elems);
      stream("K cache write", T * kvt.per_layer.raw(), 0.0);  // reads k, writes the cache: ≈ 2 × half the token's KV
      stream("V cache write", T * kvt.per_layer.raw(), 0.0);
    }
  }

  void price_attention(const Op& o) {
    const std::int64_t heads_gpu = std::max<std::int64_t>(1, o.heads / t);
    if (fb.prefill_seqs > 0 && fb.prefill_tokens > 0) {
      const std::int64_t s = fb.prefill_tokens, past = fb.prefill_past;
      std::int64_t s_kv = past > 0 ? past + s / 2 : s;
      bool causal = past == 0;
      auto price = [&](const char* name, std::int64_t bh, std::int64_t sq, std::int64_t skv, bool is_causal) {
        for (const OpCost& c : attention_cost(name, bh, sq, skv, o.d_qk, o.d_v, is_causal, true, false, gp, d))
          acc.add(repeated(c, fb.prefill_seqs, d), keep);
      };
      if (o.chunked && o.window < past + s && past == 0) {
        // Chunked local attention (Llama 4): each aligned chunk of C tokens attends causally within itself, so a
        // prompt from position 0 is ⌊s/C⌋ causal C × C problems (one batched call) and a causal remainder.
        const std::int64_t C = o.window;
        if (s / C > 0) price("prefill attention (chunked)", heads_gpu * (s / C), C, C, true);
        if (s % C > 0) price("prefill attention (last chunk)", heads_gpu, s % C, s % C, true);
        return price_decode(o, heads_gpu);
      }
      if (o.window > 0 && o.window < past + s) {
        // Sliding: the last W tokens. Chunked, a prompt piece after `past` tokens: the part of its chunk already
        // held, on average half a chunk, and half of its own (at most one chunk).
        s_kv = o.chunked ? std::min<std::int64_t>(s_kv, o.window / 2 + std::min<std::int64_t>(s, o.window) / 2)
                         : std::min<std::int64_t>(s_kv, o.window);
        causal = false;
      }
      if (o.topk > 0 && o.topk < past + s) {
        // DeepSeek sparse attention: each query reads its top-k selected keys (as a sliding window of k).
        s_kv = std::min<std::int64_t>(s_kv, o.topk);
        causal = false;
      }
      price("prefill attention", heads_gpu, s, s_kv, causal);
    }
    price_decode(o, heads_gpu);
  }

  void price_decode(const Op& o, std::int64_t heads_gpu) {
    if (fb.decode_seqs > 0) {
      const std::int64_t held = fb.decode_context + fb.queries_per_seq;
      // A sliding layer reads the last W tokens; a chunked layer the tokens of the current chunk, on average half
      // of it once the context passes one chunk (held mod C runs over 1..C as the sequence grows).
      std::int64_t ctx = held;
      if (o.window > 0 && !o.chunked) ctx = std::min(held, o.window);
      else if (o.chunked && held > o.window) ctx = std::max<std::int64_t>(1, (o.window + 1) / 2);
      // DeepSeek sparse attention: the top-k selected entries of the latent cache (the indexer read the rest).
      if (o.topk > 0) ctx = std::min(ctx, o.topk);
      const Bytes read_per_token = kvt.per_layer - kvt.index_per_layer;
      // MMA tile rows the query group of one KV head is padded to (see ServingPerfPlan::attention).
      const std::int64_t kv_gpu = attn.is_mla() ? 1 : std::max<std::int64_t>(1, std::llround(kvt.kv_heads_per_gpu));
      std::int64_t tile_q = 16;
      if (plan.attention == wl::AttentionKernel::fa2)
        tile_q = fb.decode_seqs * double(kv_gpu) < double(d.gpu->compute_units) ? 64 : 128;
      // Decode runs MLA absorbed (MQA over the latent): scores over r_kv + d_rope, values of width r_kv.
      const std::int64_t dec_dqk = attn.is_mla() ? o.cache_elements : o.d_qk;
      const std::int64_t dec_dv = attn.is_mla() ? attn.mla.kv_rank : o.d_v;
      // PyTorch's SDPA (the eager-ops engine) runs flash decode split over the context, with a combine kernel, when
      // the sequences × KV heads leave SMs idle (kernel_class_cost.json: split at batch 1 and 8, not at 64); an
      // engine's decode kernel is priced as one fused kernel (cuDNN-type; its split, if any, inside).
      const bool split_kv = eager && fb.decode_seqs * double(kv_gpu) < double(d.gpu->compute_units);
      OpCost c = decode_attention_cost("decode attention", fb.decode_seqs, fb.queries_per_seq, heads_gpu, kv_gpu, ctx,
                                       dec_dqk, dec_dv, read_per_token, tile_q, gp, d, split_kv);
      acc.add(c, keep);
      acc.kv += read_per_token * (fb.decode_seqs * double(ctx));
    }
  }

  // Routed experts (moe_layer.hpp, as training prices them): E/ep on this GPU, their width split over the TP ranks
  // inside the EP group (etp = t/ep), the T tokens every TP rank holds routed over the group; the expected distinct
  // experts they touch (uniform top-k routing), this GPU's share, the busiest rank's rows under a skew (ι).
  void price_experts(const Op& o) {
    const std::int64_t width = o.linear == LinearKind::expert_in ? o.out / glu : o.in;
    const MoeExpertWork w =
        detail::moe_expert_work({T, t, std::max<std::int64_t>(1, t / ep), ep, plan.moe_imbalance}, o.copies, o.active, width);
    acc.moe.work = w;
    const double routed = w.rows;  // token-expert pairs this GPU computes
    const std::int64_t ie = w.width;
    // One grouped GEMM over the touched experts: ⌈touched⌉ expert GEMMs in one launch share the SMs' tiles and
    // waves, scaled to the expected (fractional) count.
    auto experts = [&](const std::string& name, std::int64_t k_dim, std::int64_t n_dim) {
      const double bb = wb(k_dim);
      GemmShape shape{w.rows_per_expert, n_dim, k_dim, w.groups, bb};
      shape.sparse24 = plan.weights.sparse24;
      if (plan.activation_quant)
        stream(name + ": quantise input (per token)", routed * double(k_dim) * (e + hw::bytes_per_element(gp)) + routed * 4.0,
               3.0 * routed * double(k_dim));
      acc.add(detail::moe_expert_gemm(gemm_cost(name, shape, gp, d), w, d), keep);
      acc.weights += units::bytes(double(k_dim) * double(n_dim) * w.touched * bb);
    };
    if (o.linear == LinearKind::expert_in) {
      experts(o.name, h, glu * ie);
      if (eager && gated) {
        // PyTorch's F.silu(h[:, :i]) * h[:, i:] (serve_moe_step.py, node_serve_step.py): two kernels, 2 + 3 passes,
        // as the dense MLP's eager SwiGLU here and training's eager experts (layer_cost.cpp, glu_f = 5). Under the
        // fixed-capacity EP dispatch (CUDA graphs, run()) the grouped GEMM's output holds every received slot, and
        // node_serve_step.py's moe_static applies the SwiGLU to all of them (its rows past the last offset too):
        // the elementwise passes run over the slots (moe_dispatch_rows), not only the routed rows the GEMM computes.
        const bool fixed_slots = plan.cuda_graphs && ep > 1;
        const double act_rows =
            fixed_slots ? std::max(routed, moe_dispatch_rows(Tm, double(a.moe->experts_per_token), int(ep), true)) : routed;
        // Both run on strided halves of the GEMM's output: TensorIterator's non-vectorised kernel, issue-bound.
        eager_swiglu("expert ", act_rows, double(ie));
      } else {
        unary("expert activation", routed * double(ie) * e * (gated ? 3.0 : 2.0), 4.0 * routed * double(ie));
      }
    } else {
      experts(o.name, ie, h);
      // Fused engines gather the tokens into expert order and scatter them back inside their MoE kernels' prologue
      // and epilogue: one pass each way. Eager PyTorch runs them as kernels of their own (price_eager_routing).
      const Seconds before = acc.total();
      if (!eager) stream("token permute/unpermute", Tm * double(o.active) * double(h) * e * 4.0 / double(ep), 0.0);
      moe_routing += acc.total() - before;
    }
  }

  // The MoE layer's terms (MoeLayerTerms): each op of the router, the routed and the shared experts booked to its
  // term as it is added; the routing kernels the router and the experts run beside them to t_routing.
  void moe_term(const Op& o) {
    if (!moe || (o.part != Part::router && o.part != Part::routed_experts && o.part != Part::shared_experts)) {
      price_linear(o);
      return;
    }
    const Seconds before = acc.total();
    moe_routing = Seconds(0);
    price_linear(o);
    acc.moe.add(MoeLayerTerms::routing, moe_routing);
    acc.moe.add(o.part == Part::router           ? MoeLayerTerms::router
                : o.part == Part::shared_experts ? MoeLayerTerms::shared
                                                 : MoeLayerTerms::expert_gemm,
                acc.total() - before - moe_routing);
  }

  // Eager PyTorch routing of an MoE layer, kernel by kernel as our profile of one Qwen3-30B-A3B-shaped decode step
  // lists them (data/validation/measured/h100-sxm5-80gb/moe_kernels_profile.json: 48 kernels per MoE layer, 24 of
  // them the routing below): the router logits to fp32 and their softmax, the top-k (select, then sort the k),
  // the renormalisation of the k weights (sum, divide), the sort of the token-expert pairs by expert (radix sort,
  // with its fill/arange index buffers), the per-expert offsets (scan, index_put, scatter, bucketing), the grouped
  // GEMMs' data preparation and int32 offset copies, the token gather into expert order, the outputs' gather back
  // into pair order (ye[inv] in serve_moe_step.py: a row gather, priced until 2026-11-27 as a 12-byte "weight
  // gather", right at decode and 2 × 134 MB short per layer in a 4096-token prefill), and the weighted combine
  // (scale by the weight, sum over the k). Each is one kernel: at decode they cost their fixed time, in prefill
  // their bytes. Fused engines (kernels fused) run one top-k-softmax and one alignment kernel instead, with the
  // gather and scatter inside their grouped GEMMs (price_experts).
  void price_eager_routing(std::int64_t experts) {
    const double E = double(experts), k = double(a.moe->experts_per_token), pairs = T * k, local = pairs / double(ep);
    const double hb = double(h) * e;
    // Host calls (serve_moe_step.py's moe(), one Python call each unless said): .float(), softmax, topk (its sort of
    // the k inside), sum, divide, zeros and ones_like (fills), argsort (its index arange and copies inside), the
    // counts' scatter_add_, cumsum (its first pass inside) and .to(int32) (the second copy inside _grouped_mm with its
    // data preparation), the pair-index divide, inv[sidx] = arange (arange, index_put), the gathers, the combine.
    unary("router logits to fp32", T * E * 6.0, 0.0);
    unary("router softmax", T * E * 8.0, 5.0 * T * E);
    unary("top-k select", T * E * 4.0 + pairs * 12.0, T * E);
    inner("top-k sort", pairs * 24.0);
    unary("top-k weight sum", pairs * 4.0 + T * 4.0, pairs);
    stream("top-k renormalise", pairs * 8.0 + T * 4.0, pairs);
    unary("pair index fill", pairs * 8.0, 0.0);
    unary("pair index fill", pairs * 8.0, 0.0);
    unary("pair index arange", pairs * 8.0, 0.0);
    inner("pair index arange", pairs * 8.0);
    unary("expert-id sort (radix)", pairs * 32.0, 0.0);
    stream("expert counts (bucketize)", pairs * 16.0, pairs);
    inner("expert offsets scan init", E * 8.0);
    unary("expert offsets scan", E * 16.0, E);
    stream("expert offsets index_put", pairs * 8.0, 0.0);
    // Three device-to-device copies per MoE layer in our H200 profile (cudaMemcpyAsync nodes, "Memcpy DtoD",
    // 0.9 µs each: PyTorch's copy_ of a contiguous tensor of one dtype, as its sorts and scans copy their inputs
    // before working in place; the profile has no call stacks to attribute each).
    for (const char* n : {"device copy", "device copy", "device copy"}) inner(n, pairs * 16.0);
    stream("routing-weight scatter", pairs * 12.0, 0.0);
    unary("grouped-GEMM offsets to int32", E * 12.0, 0.0);
    inner("grouped-GEMM offsets to int32", E * 12.0);
    for (const char* n : {"grouped-GEMM data preparation", "grouped-GEMM data preparation"}) inner(n, E * 64.0);
    stream("token gather (permute)", local * hb * 2.0, 0.0);
    // The expert outputs gathered back into pair order (ye[inv]: a row gather, read + write of the routed rows). Under
    // the fixed-capacity EP dispatch the returned rows' gather from their slots is that pass (run()).
    if (!(plan.cuda_graphs && ep > 1)) stream("unpermute gather (rows back to pair order)", local * hb * 2.0, 0.0);
    // The weight broadcast over each row: TensorIterator's non-vectorised kernel, issue-bound.
    strided("combine: scale by weight", local * hb * 3.0, local * double(h), local * double(h));
    unary("combine: sum over top-k", local * hb + T * hb, local * double(h));
  }

  void price_linear(const Op& o) {
    switch (o.linear) {
      case LinearKind::qkv: price_qkv(o); break;
      case LinearKind::attention_out:
        gemm(o.name, Ti, o.in / t, h);
        acc.add_comm("TP all-reduce", PassItem::Kind::comm_tp, ar, t > 1 ? 1 : 0);
        break;
      case LinearKind::router:
        gemm(o.name, Ti, h, o.out, 1, 2.0);
        if (eager) {
          const Seconds before = acc.total();
          price_eager_routing(o.out);
          moe_routing += acc.total() - before;
        }
        break;
      case LinearKind::expert_in:
      case LinearKind::expert_out: price_experts(o); break;
      case LinearKind::mlp_in: {
        const std::int64_t width = std::max<std::int64_t>(1, o.out / glu / t);
        gemm(o.name, Ti, h, glu * width);
        // The dense MLP's activation, and the shared experts' (vLLM's and SGLang's shared experts are an MLP of
        // their own with its SiluAndMul: Qwen2MoeMLP, DeepseekV2MLP, Llama4's shared_expert).
        const std::string pre = o.part == Part::shared_experts ? "shared expert " : "";
        if (eager && gated) {
          // F.silu(x[..., :w]) * x[..., w:] on the fused gate|up output's strided halves: the non-vectorised kernel
          // the experts run (price_experts), issue-bound.
          eager_swiglu(pre, T, double(width));
        } else {
          unary(pre + (gated ? "SwiGLU" : "GELU"), T * double(width) * e * (gated ? 3.0 : 2.0), 4.0 * T * double(width));
        }
        break;
      }
      case LinearKind::mlp_out: gemm(o.name, Ti, std::max<std::int64_t>(1, o.in / t), h); break;
      case LinearKind::gate:     // the shared experts' h→1 gate: a dot product per token, not priced
      case LinearKind::lm_head:   // not a layer op
      case LinearKind::mtp_proj:  // the MTP module's (build_mtp_graph), not a layer op
        break;
    }
  }

  const wl::TransformerArch& a;
  const ServingPerfPlan& plan;
  const ForwardBatch& fb;
  const Device& d;
  const KvTokenBytes& kvt;
  const CommGroup& ep_g;
  const bool keep;
  const LayerKind kind;
  const bool moe;
  const detail::GraphRef graph;  // the memo's when a GraphMemoScope of `a` is open (graph_memo.hpp)
  const Op attn;
  const std::int64_t t = plan.tp;
  const std::int64_t h = a.hidden;
  const double e = plan.activation_bytes;
  const hw::Precision gp = plan.compute;
  const double T = fb.decode_seqs * double(fb.queries_per_seq) + fb.prefill_seqs * double(fb.prefill_tokens);
  const std::int64_t Ti = at_least_one(T);
  const bool eager = plan.kernels == wl::KernelStyle::eager;
  const bool gated = a.mlp == wl::MlpKind::gated;
  const std::int64_t glu = gated ? 2 : 1;
  const std::int64_t ep = serving_ep(plan);
  const std::int64_t dp = std::max(1, plan.attention_dp);
  const double Tm = T * double(dp);  // tokens the EP group routes: every attention-DP rank's (T without attention-DP)
  const Seconds ar;
  Acc acc;
  Seconds moe_routing{};  // routing kernels inside the op being booked (moe_term)
};

}  // namespace

namespace detail {

/// One layer (of a kind) on one GPU for one forward batch.
Acc layer_forward(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb, LayerKind kind,
                  const Device& d, const KvTokenBytes& kvt, const CommGroup& tp_g, const CommGroup& ep_g, bool keep,
                  bool trace) {
  return ServingLayerPricer(a, plan, fb, kind, d, kvt, tp_g, ep_g, keep, trace).run();
}

/// The explain node of one MoE layer of this forward (moe_layer.hpp, the same node training shows): `layer` is the
/// first MoE layer kind as priced; at ι > 1 it is priced again at ι = 1 for the imbalance term.
Derivation explain_serving_moe(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                               LayerKind kind, const Acc& layer, const Device& d, const KvTokenBytes& kvt,
                               const CommGroup& tp_g, const CommGroup& ep_g) {
  MoeLayerTerms m = layer.moe;
  if (plan.moe_imbalance > 1.0) {
    ServingPerfPlan flat = plan;
    flat.moe_imbalance = 1.0;
    m.imbalance = m.total() - layer_forward(a, flat, fb, kind, d, kvt, tp_g, ep_g, false, false).moe.total();
  }
  const char* pass = fb.prefill_seqs > 0 && fb.decode_seqs > 0 ? "one engine iteration, prefill + decode"
                     : fb.prefill_seqs > 0                     ? "prefill, forward"
                                                               : "decode step, forward";
  const int ep = serving_ep(plan);
  Derivation r = detail::explain_moe_terms(
      "serving.moe", pass, m,
      plan.attention_dp > 1
          ? fmt::format("attention-DP {} ranks × TP {}, experts over all of them: wide EP {}, expert TP 1 ({} tokens)",
                        plan.attention_dp, plan.tp, ep, units::format_number(m.work.group_tokens, 4))
          : fmt::format("attention TP {}, experts EP {} inside it, expert TP {} ({} tokens)", plan.tp, ep,
                        std::max(1, plan.tp / ep), units::format_number(m.work.group_tokens, 4)),
      plan.moe_imbalance > 1.0 ? Origin::user("--moe-imbalance")
                               : Origin::assumption("uniform routing over the experts; give --moe-imbalance for a "
                                                    "hot-expert skew"));
  if (ep > 1)
    r.notes.push_back(plan.kernels == wl::KernelStyle::eager && plan.cuda_graphs
                          ? "EP: plain PyTorch under CUDA graphs captures NCCL's all-to-all with fixed split sizes: "
                            "each GPU sends T·k rows (every destination the worst case), not T·k/ep, plus the expert "
                            "ids and the padded buffers' fill, gather and scatter (t_routing); a skew does not change "
                            "the bytes"
                          : detail::serving_a2a_note(a, plan, fb, ep_g));
  return r;
}

}  // namespace detail

}  // namespace gpuplan::model
