// Serving memory per GPU and the KV cache that fits beside the weights (model/include/gpuplan/model/serving_memory.hpp,
// where the sources [vLLM-mem], [vLLM-cg], [SGL-mem], [vLLM-def], [vLLM-mla], [vLLM-dsv2], [GPTQ], [FP8W] are listed).
#include "gpuplan/model/serving_memory.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/memory.hpp"
#include "graph_memo.hpp"
#include "runtime_context.hpp"
#include "engine_policy.hpp"
#include "serving_memory_internal.hpp"

namespace gpuplan::model {
namespace {

/// ⌊x⌋ that forgives the last bits of a quotient meant to be exact (64e9·0.8/… style textbook inputs).
constexpr double kMaxCount = 4e18;  // below INT64_MAX: the cast stays defined for any quotient
std::int64_t floor_count(double x) {
  if (!(x > 0.0)) return 0;
  return static_cast<std::int64_t>(std::min(kMaxCount, std::floor(x * (1.0 + 1e-12))));
}
std::int64_t ceil_count(double x) {
  if (!(x > 0.0)) return 0;
  return static_cast<std::int64_t>(std::min(kMaxCount, std::ceil(x * (1.0 - 1e-12))));
}

/// How one GPU of layout TP `tp` holds the weights: `heads_gpu` KV heads per rank, the plan's wide EP and bytes.
WeightStorage storage(const Ctx& c, int tp, double heads_gpu) {
  WeightStorage s;
  s.tp = std::max(1, tp);
  s.kv_share = c.a.mla ? 1.0 : heads_gpu / double(std::max<std::int64_t>(1, c.a.kv_heads));
  s.expert_dp = std::max(1, c.plan.expert_dp);
  s.bytes = c.wq_bytes;
  s.bytes16 = c.w16_bytes;
  return s;
}

/// Weights on one GPU of `st` at TP t with `heads_gpu` KV heads per rank: a fold over the op graphs of its layers
/// and of the ops around them it holds (graph_weights.hpp).
Bytes stage_weights(const Ctx& c, const StageLayers& st, int tp, int pp, double heads_gpu) {
  if (c.plan.nominal_params) {
    return units::bytes(*c.plan.nominal_params * c.wq_bytes / (double(std::max(1, tp)) * double(std::max(1, pp))));
  }
  const WeightStorage s = storage(c, tp, heads_gpu);
  std::array<double, LayerKind::kCount> layers{};  // layers of each kind on this stage
  for (std::int64_t l = st.first; l < st.first + st.count; ++l) layers[c.layer_kind[static_cast<std::size_t>(l)]] += 1.0;
  double b = 0.0;
  for (std::size_t k = 0; k < layers.size(); ++k)
    if (layers[k] > 0) b += layers[k] * weight_bytes_per_gpu(c.kinds[k], s);
  b += weight_bytes_per_gpu(stage_head_weights(c.head, st.first_stage, st.last_stage), s);
  // A multimodal model's vision tower (issue #23): 16-bit, its linear layers split over TP as vLLM's towers run them
  // (Column/RowParallelLinear in siglip.py, clip.py, mllama4.py, qwen2_5_vl.py), on the first stage with the
  // embedding.
  if (st.first_stage) b += double(c.p.vision) / double(s.tp) * c.w16_bytes;
  return units::bytes(b);
}

/// Every weight once (one GPU holding the whole model).
Bytes total_weights(const Ctx& c) {
  if (c.plan.nominal_params) return units::bytes(*c.plan.nominal_params * c.wq_bytes);
  WeightStorage s = storage(c, 1, 1.0);
  s.kv_share = 1.0;
  s.expert_dp = 1;
  double b = 0.0;
  for (const std::uint8_t k : c.layer_kind) b += weight_bytes_per_gpu(c.kinds[k], s);
  b += weight_bytes_per_gpu(graph_weights(c.head), s) + double(c.p.vision) * c.w16_bytes;
  return units::bytes(b);
}

std::vector<std::string> layout_problems(const wl::TransformerArch& a, int tp, int pp) {
  std::vector<std::string> r;
  if (a.heads % tp != 0)
    r.push_back(fmt::format("TP {} does not divide the {} query heads (each rank needs whole heads)", tp, a.heads));
  if (!a.mla && a.kv_heads > 0 && a.kv_heads % tp != 0 && tp % a.kv_heads != 0)
    r.push_back(fmt::format("TP {} and {} KV heads: one must divide the other to split or replicate whole KV heads "
                            "(vLLM QKVParallelLinear)",
                            tp, a.kv_heads));
  if (pp > a.layers) r.push_back(fmt::format("PP {} exceeds the {} layers", pp, a.layers));
  return r;
}

LayoutEval evaluate_layout(const Ctx& c, int tp, int pp, Explain explain_token) {
  const auto& plan = c.plan;
  LayoutEval e;
  e.layout_reasons = layout_problems(c.a, tp, pp);
  e.token = kv_token_bytes(c.a, plan.kv, tp, explain_token);
  const double ovh = 1.0 + std::max(0.0, plan.paging_overhead);
  const Bytes C = c.capacity;
  const Bytes ctx_b = plan.overheads.cuda_context;
  const Bytes nccl = plan.overheads.nccl_per_communicator * double(communicators(tp, pp));
  const Bytes graphs = plan.overheads.cuda_graphs;
  // The profiled activation peak falls with TP: estimate it for this layout's TP (the GPU-count search tries other
  // TPs than the plan's; with the plan's peak a smaller TP looked roomier than it is and the count did not fit). A
  // peak the user gave stays as given.
  const Bytes act = tp != plan.tp && !plan.overheads.activations && plan.overheads.estimate_activations
                        ? serving_activation_peak(c.a, tp, plan.max_num_batched_tokens, plan.max_num_seqs,
                                                  plan.activation_bytes)
                        : c.activations;
  std::set<std::string> engine_reasons;
  for (const StageLayers& st : pipeline_stages(c.a, pp)) {
    StageMemory m;
    m.layers = st;
    m.capacity = C;
    m.weights = stage_weights(c, st, tp, pp, e.token.kv_heads_per_gpu);
    m.activations = act;
    m.cuda_graphs = graphs;
    m.cuda_context = ctx_b;
    m.nccl = nccl;
    detail::engine_policy(plan.engine).budget(m, plan, engine_reasons);
    m.sequence = sequence_kv(c.a, st, e.token, plan.context, plan.block_size, plan.prefix_tokens);
    const double pool_eff = m.kv_pool.raw() / ovh;
    if (pool_eff >= m.sequence.per_sequence.raw() && m.sequence.unique.raw() > 0)
      m.max_concurrency = floor_count((pool_eff - m.sequence.shared_prefix.raw()) / m.sequence.unique.raw());
    m.kv_used = m.sequence.for_sequences(plan.concurrency) * ovh;
    m.free = m.kv_pool - m.kv_used;
    // Tokens are cached by the attention layers only (a hybrid's recurrent and FFN-only layers hold none).
    const double per_token_stage = e.token.per_layer.raw() * double(st.count - st.uncached);
    const double B = double(std::max<std::int64_t>(1, plan.block_size));
    if (per_token_stage > 0 && m.kv_pool.raw() > 0)
      m.kv_token_capacity = floor_count(m.kv_pool.raw() / (B * per_token_stage)) * std::int64_t(B);
    e.stages.push_back(m);
  }
  e.engine_reasons.assign(engine_reasons.begin(), engine_reasons.end());
  e.max_concurrency = e.stages.empty() ? 0 : e.stages.front().max_concurrency;
  for (std::size_t i = 0; i < e.stages.size(); ++i) {
    const auto& s = e.stages[i];
    const auto& b = e.stages[static_cast<std::size_t>(e.binding)];
    if (s.max_concurrency < b.max_concurrency || (s.max_concurrency == b.max_concurrency && s.free < b.free))
      e.binding = static_cast<int>(i);
  }
  e.max_concurrency = e.stages.empty() ? 0 : e.stages[static_cast<std::size_t>(e.binding)].max_concurrency;
  return e;
}

/// Whether `n` sequences of `s` tokens fit on every stage of `e`.
bool fits(const Ctx& c, const LayoutEval& e, std::int64_t s, std::int64_t n) {
  const double ovh = 1.0 + std::max(0.0, c.plan.paging_overhead);
  for (const auto& m : e.stages) {
    const SequenceKv q = sequence_kv(c.a, m.layers, e.token, s, c.plan.block_size, c.plan.prefix_tokens);
    if (m.kv_pool.raw() <= 0 || q.for_sequences(n).raw() * ovh > m.kv_pool.raw()) return false;
  }
  return true;
}

}  // namespace

// ------------------------------------------------------------------------------------------------------------------

WeightQuant default_weight_quant(StoreDtype d) {
  WeightQuant w;
  w.dtype = d;
  switch (d) {
    case StoreDtype::fp32:
    case StoreDtype::bf16:
    case StoreDtype::fp16:
      w.origin = "unquantized";
      break;
    case StoreDtype::fp8:
      w.group_size = 0;
      w.group_bytes = 4.0;
      w.origin = "one fp32 scale per output channel (llm-compressor FP8_DYNAMIC); DeepSeek-V3's 128×128 blocks "
                 "of fp32 scales are smaller still";
      break;
    case StoreDtype::int8:
      w.group_size = 0;
      w.group_bytes = 4.0;
      w.origin = "assumption: one fp32 scale per output channel (W8A8 per-channel)";
      break;
    case StoreDtype::int4:
      w.group_size = 128;
      w.group_bytes = 2.5;
      w.origin = "GPTQ/AWQ layout: group 128, fp16 scale + 4-bit packed zero point per group";
      break;
    case StoreDtype::fp4:
      w.group_size = 16;
      w.group_bytes = 1.0;
      w.origin = "NVFP4: E2M1 values in blocks of 16 with one FP8 (E4M3) scale per block, plus one fp32 scale per "
                 "tensor (NVIDIA, 'Introducing NVFP4 for Efficient and Accurate Low-Precision Inference', 2025): "
                 "0.5 + 1/16 = 0.5625 B per weight";
      break;
  }
  return w;
}

double weight_bytes_per_param(const WeightQuant& w, std::int64_t input_width) {
  const double group = double(w.group_size > 0 ? w.group_size : std::max<std::int64_t>(1, input_width));
  const double dense = element_bytes(w.dtype) + (is_quantized(w.dtype) ? w.group_bytes / group : 0.0);
  return w.sparse24 ? 0.5 * dense + kSparse24IndexBytes : dense;
}

EngineBatchDefaults vllm_batch_defaults(const hw::GpuSpec& gpu) {
  // arg_utils.py: `device_memory >= 70 * GiB_bytes and "a100" not in device_name`.
  std::string name = gpu.info.name + " " + gpu.info.id;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  if (gpu.memory_capacity() >= units::gibibytes(70) && name.find("a100") == std::string::npos) return {8192, 1024};
  return {2048, 256};
}

ServingOverheads default_serving_overheads() {
  const RuntimeOverheads t = default_training_overheads();
  ServingOverheads o;
  o.cuda_context = t.cuda_context;
  o.nccl_per_communicator = t.nccl_buffers;
  o.cuda_graphs = units::gibibytes(1.0);
  o.estimate_activations = true;
  o.origin = t.origin +
             "; CUDA graphs 1 GiB (assumption: vLLM logs 'CUDA graphs can take additional 1~3 GiB memory per GPU'; "
             "reported captures 0.36-2.4 GiB, gpustack/runner PR#251, vllm#7553, vllm PR#21489); activations estimated "
             "from the profiling pass";
  return o;
}

ServingOverheads no_serving_overheads() {
  ServingOverheads o;
  o.estimate_activations = false;
  o.origin = "none (textbook: by memory alone)";
  return o;
}

namespace {

/// What one token of a layer of graph g holds at its peak on one GPU of a TP group of t, in elements: the larger of
/// its attention's q, k, v and output — prefill expands MLA's latent: q and k of d_nope + d_rope per head (the query
/// width the QKV projection writes beside the cached latent), v and the output of d_v (the output projection's
/// input), and GQA's K/V heads on this GPU, max(1, n_kv/t), whole — and its FFN's up/gate outputs and their product
/// (fc1's output and its activation): each up/gate and down op's width times the copies a token visits (the top-k
/// routed experts, the shared ones), over t.
double peak_layer_width(const OpGraph& g, int tp) {
  const double t = double(std::max(1, tp));
  std::int64_t ffn = 0, q_width = 0, o_width = 0;
  for (const Op& op : g) {
    if (op.kind != OpKind::linear) continue;
    if (op.linear == LinearKind::mlp_in || op.linear == LinearKind::expert_in) ffn += op.active * op.out;
    else if (op.linear == LinearKind::mlp_out || op.linear == LinearKind::expert_out) ffn += op.active * op.in;
    else if (op.part == Part::attention && op.linear == LinearKind::qkv) q_width = op.out;
    else if (op.part == Part::attention && op.linear == LinearKind::attention_out) o_width = op.in;
  }
  double attn = 0.0;
  if (const Op* at = g.attention()) {
    const double nq = double(at->heads) / t;
    if (at->is_mla()) {
      const double d_qk = double((q_width - at->cache_elements) / at->heads), d_v = double(o_width / at->heads);
      attn = nq * (2.0 * d_qk + 2.0 * d_v);
    } else {
      const double kv_gpu = double(std::max<std::int64_t>(1, at->kv_heads / std::max(1, tp)));
      attn = (2.0 * nq + 2.0 * kv_gpu) * double(at->d_qk);  // q, k, v, output
    }
  }
  return std::max(attn, double(ffn) / t);
}

}  // namespace

units::Bytes serving_activation_peak(const wl::TransformerArch& a, int tp, std::int64_t batched_tokens,
                                     std::int64_t max_seqs, double activation_bytes) {
  // The widest layer kind the model has, folded over its op graphs.
  double widest = 0.0;
  for_each_layer_kind(a, [&](LayerKind kind, std::int64_t) {
    widest = std::max(widest, peak_layer_width(*detail::layer_graph(a, kind), tp));
  });
  const double h = double(layer_boundary_width(a));
  const double per_token = activation_bytes * (2.0 * h + widest);
  // The sampler's fp32 logits and probabilities over the LM head's output, gathered over TP.
  std::int64_t vocab = 0;
  for (const Op& op : detail::head_graph(a))
    if (op.part == Part::lm_head) vocab = op.out;
  const double logits = 2.0 * double(max_seqs) * double(vocab) * 4.0;
  return units::bytes(double(batched_tokens) * per_token + logits);
}

namespace {

/// The plan as the engine runs it: sizes at least 1, and the engine's own adjustments (vLLM's MLA block size).
void normalise_plan(const wl::TransformerArch& a, const hw::GpuSpec& gpu, ServingMemory& r) {
  ServingMemoryPlan& plan = r.plan;
  plan.tp = std::max(1, plan.tp);
  plan.pp = std::max(1, plan.pp);
  plan.block_size = std::max<std::int64_t>(1, plan.block_size);
  plan.context = std::max<std::int64_t>(1, plan.context);
  plan.concurrency = std::max<std::int64_t>(1, plan.concurrency);

  if (plan.engine_block_size) detail::engine_policy(plan.engine).adjust_plan(a, gpu, plan, r.notes);
  // The default overheads carry the generic CUDA context; on a GPU whose file records its own, serving takes that one,
  // as training does (training_overheads). Overheads set to none stay none.
  const RuntimeOverheads generic = default_training_overheads();
  if (gpu.memory.context && plan.overheads.cuda_context == generic.cuda_context) {
    const RuntimeOverheads own = training_overheads(gpu);
    plan.overheads.cuda_context = own.cuda_context;
    if (plan.overheads.origin.rfind(generic.origin, 0) == 0)
      plan.overheads.origin.replace(0, generic.origin.size(), own.origin);
  }
}

/// The context every layout's evaluation reads: capacity, bytes per weight, each layer kind's weights by TP split,
/// and the activation peak.
Ctx serving_ctx(const wl::TransformerArch& a, const ParameterCounts& params, const hw::GpuSpec& gpu,
                const ServingMemoryPlan& plan) {
  Ctx c{a, params, gpu, plan, {}, 2.0, 2.0, {}, {}, {}, {}, *detail::head_graph(a)};
  c.capacity = plan.capacity == CapacityBasis::label ? gpu.memory.capacity_label : gpu.memory_capacity();
  c.w16_bytes = plan.weights.dtype == StoreDtype::fp32 ? 4.0 : 2.0;
  c.wq_bytes = plan.weight_scale_overhead ? weight_bytes_per_param(plan.weights, a.hidden)
                                          : element_bytes(plan.weights.dtype);
  // Each layer kind's op graph is folded once; a layout then prices the classes (stage_weights).
  for_each_layer_kind(a, [&](LayerKind k, std::int64_t) {
    c.kinds[static_cast<std::size_t>(k.index())] = graph_weights(*detail::layer_graph(a, k));
  });
  c.layer_kind.resize(static_cast<std::size_t>(std::max<std::int64_t>(0, a.layers)));
  for (std::int64_t l = 0; l < a.layers; ++l)
    c.layer_kind[static_cast<std::size_t>(l)] = static_cast<std::uint8_t>(LayerKind::of(a, l).index());
  c.dense = graph_weights(*detail::layer_graph(a, LayerKind{}));
  if (plan.overheads.activations) c.activations = *plan.overheads.activations;
  else if (plan.overheads.estimate_activations)
    c.activations = serving_activation_peak(a, plan.tp, plan.max_num_batched_tokens, plan.max_num_seqs,
                                            plan.activation_bytes);
  return c;
}

/// The longest context at the plan's concurrency (bisection; monotone in s), and what limits it.
void max_context(const Ctx& c, const LayoutEval& e, ServingMemory& r) {
  const wl::TransformerArch& a = c.a;
  const ServingMemoryPlan& plan = r.plan;
  const std::int64_t cap = a.max_position > 0 ? a.max_position : std::int64_t{100'000'000};
  if (!fits(c, e, 1, plan.concurrency)) {
    r.max_context_tokens = 0;
    r.max_context_limit = "memory";
  } else if (fits(c, e, cap, plan.concurrency)) {
    r.max_context_tokens = cap;
    r.max_context_limit = a.max_position > 0 ? "max_position_embeddings" : "search limit";
  } else {
    std::int64_t lo = 1, hi = cap;  // fits(lo), !fits(hi)
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      (fits(c, e, mid, plan.concurrency) ? lo : hi) = mid;
    }
    r.max_context_tokens = lo;
    r.max_context_limit = "memory";
  }
}

/// GPUs needed by memory: pooled (textbook) and the fewest over TP × PP × replicas.
void gpus_by_memory(const Ctx& c, const LayoutEval& e, ServingMemory& r) {
  const wl::TransformerArch& a = c.a;
  const ServingMemoryPlan& plan = r.plan;
  const StageMemory& bind = r.stages[static_cast<std::size_t>(r.binding_stage)];
  // Pooled (textbook): (weights + KV) over what one GPU's budget leaves after its fixed overheads.
  const StageMemory& s0 = bind;
  const Bytes fixed = detail::engine_policy(plan.engine).pooled_fixed(s0, plan);
  r.usable_per_gpu_pooled = s0.budget - fixed;
  if (r.usable_per_gpu_pooled.raw() > 0)
    r.gpus_needed_pooled = std::max<std::int64_t>(1, ceil_count(r.memory_needed.raw() / r.usable_per_gpu_pooled.raw()));

  // Layout: the fewest GPUs over TP × PP × replicas.
  std::vector<int> tps{plan.tp}, pps{plan.pp};
  for (int t = 1; t <= plan.max_tp && t <= a.heads; t *= 2) tps.push_back(t);
  for (int p = 1; p <= plan.max_pp && p <= a.layers; p *= 2) pps.push_back(p);
  std::sort(tps.begin(), tps.end());
  tps.erase(std::unique(tps.begin(), tps.end()), tps.end());
  std::sort(pps.begin(), pps.end());
  pps.erase(std::unique(pps.begin(), pps.end()), pps.end());
  for (int t : tps)
    for (int p : pps) {
      const LayoutEval le = (t == plan.tp && p == plan.pp) ? e : evaluate_layout(c, t, p, Explain::off);
      if (!le.layout_reasons.empty() || !le.engine_reasons.empty() || le.max_concurrency < 1) continue;
      ReplicaLayout l{t, p, ceil_count(double(plan.concurrency) / double(le.max_concurrency)), le.max_concurrency};
      const bool better = !r.best_layout || l.gpus() < r.best_layout->gpus() ||
                          (l.gpus() == r.best_layout->gpus() &&
                           (t * p < r.best_layout->tp * r.best_layout->pp ||
                            (t * p == r.best_layout->tp * r.best_layout->pp && p < r.best_layout->pp)));
      if (better) r.best_layout = l;
    }
  if (plan.gpu_count == GpuCountMethod::pooled) r.gpus_needed = r.gpus_needed_pooled;
  else if (r.best_layout) r.gpus_needed = r.best_layout->gpus();
}

/// The plan's feasibility: the layout's and engine's reasons, a KV pool that holds no sequence, a GPU count that is
/// not whole replicas or holds too few sequences, a context beyond the model's positions.
void check_feasibility(const wl::TransformerArch& a, const LayoutEval& e, double ovh, ServingMemory& r) {
  const ServingMemoryPlan& plan = r.plan;
  const StageMemory& bind = r.stages[static_cast<std::size_t>(r.binding_stage)];
  auto fail = [&](std::string s) {
    r.ok = false;
    r.reasons.push_back(std::move(s));
  };
  for (const auto& s : e.layout_reasons) fail(s);
  for (const auto& s : e.engine_reasons) fail(s);
  if (e.layout_reasons.empty()) {
    if (bind.kv_pool.raw() <= 0) {
      fail(detail::engine_policy(plan.engine)
               .no_kv_cache(bind, plan, plan.pp > 1 ? fmt::format(" on stage {}", bind.layers.stage) : ""));
    } else if (r.max_concurrency < 1) {
      fail(fmt::format("one sequence of {} tokens needs {} of KV per GPU{} but the KV pool holds {} ({} tokens){}",
                       format_count(double(plan.context)), both(bind.sequence.per_sequence * ovh),
                       plan.pp > 1 ? fmt::format(" on stage {}", bind.layers.stage) : "", both(bind.kv_pool),
                       format_count(double(bind.kv_token_capacity)),
                       detail::engine_policy(plan.engine).sequence_too_long(bind, plan)));
    }
    if (plan.gpus) {
      const std::int64_t per_replica = std::int64_t(plan.tp) * plan.pp;
      if (*plan.gpus % per_replica != 0) {
        fail(fmt::format("{} GPUs are not a whole number of TP {} × PP {} replicas", *plan.gpus, plan.tp, plan.pp));
      } else if (r.max_concurrency >= 1) {
        const std::int64_t replicas = *plan.gpus / per_replica;
        if (replicas * r.max_concurrency < plan.concurrency)
          fail(fmt::format("{} sequences of {} tokens do not fit on {} GPUs: {} replicas × {} sequences = {}; by "
                           "memory they need {} GPUs{}",
                           format_count(double(plan.concurrency)), format_count(double(plan.context)), *plan.gpus,
                           replicas, r.max_concurrency, replicas * r.max_concurrency,
                           ceil_count(double(plan.concurrency) / double(r.max_concurrency)) * per_replica,
                           r.best_layout && r.best_layout->gpus() <
                                                ceil_count(double(plan.concurrency) / double(r.max_concurrency)) * per_replica
                               ? fmt::format(" at TP {} × PP {}, {} with TP {} × PP {} × {} replicas", plan.tp, plan.pp,
                                             r.best_layout->gpus(), r.best_layout->tp, r.best_layout->pp,
                                             r.best_layout->replicas)
                               : fmt::format(" at TP {} × PP {}", plan.tp, plan.pp)));
      }
    }
  }
  if (a.max_position > 0 && plan.context > a.max_position) {
    const std::string msg = fmt::format("context {} exceeds the model's max_position_embeddings {}",
                                        format_count(double(plan.context)), format_count(double(a.max_position)));
    if (!detail::engine_policy(plan.engine).refuses_long_context()) r.notes.push_back(msg);
    else fail(msg + " (vLLM and SGLang refuse a longer max_model_len / context_length without an override)");
  }
}

/// Notes on the layout: KV heads replicated by TP, MLA's latent on every TP rank, FP8 without FP8 tensor cores.
void layout_notes(const wl::TransformerArch& a, const hw::GpuSpec& gpu, const LayoutEval& e, ServingMemory& r) {
  const ServingMemoryPlan& plan = r.plan;
  if (!a.mla && e.token.replication > 1)
    r.notes.push_back(fmt::format("TP {} > {} KV heads: each KV head is stored on {} ranks; KV per GPU stops falling "
                                  "at TP {}",
                                  plan.tp, a.kv_heads, e.token.replication, a.kv_heads));
  if (a.mla && plan.tp > 1)
    r.notes.push_back(fmt::format("MLA: every one of the {} TP ranks stores the whole latent cache (vLLM treats the "
                                  "latent as one KV head); PP or data-parallel attention divides it, TP does not",
                                  plan.tp));
  if (is_quantized(plan.weights.dtype) && plan.weights.dtype == StoreDtype::fp8 && !gpu.peak(hw::Precision::fp8))
    r.notes.push_back(fmt::format("{} has no FP8 tensor cores: FP8 weights run weight-only (dequantised to 16-bit) "
                                  "where the engine supports it",
                                  gpu.info.name));
  if (plan.kv.dtype == StoreDtype::fp8 && !gpu.peak(hw::Precision::fp8))
    r.notes.push_back(fmt::format("{} has no FP8 tensor cores: an fp8 KV cache is stored in fp8 but dequantised for "
                                  "attention", gpu.info.name));
}

}  // namespace

ServingMemory serving_memory(const wl::TransformerArch& a, const ParameterCounts& params, const hw::GpuSpec& gpu,
                             const ServingMemoryPlan& plan_in, Explain explain) {
  const detail::GraphMemoScope graphs(a);  // the layer and head graphs of `a`: each built once here
  ServingMemory r;
  r.plan = plan_in;
  normalise_plan(a, gpu, r);
  const ServingMemoryPlan& plan = r.plan;
  const Ctx c = serving_ctx(a, params, gpu, plan);

  // ---- the plan's layout ----
  const LayoutEval e = evaluate_layout(c, plan.tp, plan.pp, explain);
  r.token = e.token;
  r.stages = e.stages;
  r.binding_stage = e.binding;
  r.max_concurrency = e.max_concurrency;
  const StageMemory& bind = r.stages[static_cast<std::size_t>(r.binding_stage)];
  r.kv_token_capacity = bind.kv_token_capacity;
  r.kv_bytes_per_token_per_gpu = e.token.per_layer * double(bind.layers.count - bind.layers.uncached);
  r.kv_bytes_per_sequence_per_gpu = bind.sequence.per_sequence;

  // ---- whole-model numbers (every head once, one stage) ----
  const KvTokenBytes tok1 = kv_token_bytes(a, plan.kv, 1, Explain::off);
  const StageLayers whole = pipeline_stages(a, 1).front();
  const SequenceKv seq1 = sequence_kv(a, whole, tok1, plan.context, plan.block_size, plan.prefix_tokens);
  const double ovh = 1.0 + std::max(0.0, plan.paging_overhead);
  r.kv_bytes_per_token = tok1.per_token_model;
  r.kv_bytes_per_sequence = seq1.exact;
  r.kv_total = seq1.for_sequences(plan.concurrency) * ovh;
  r.weights_total = total_weights(c);
  r.memory_needed = r.weights_total + r.kv_total;

  // ---- max context at the concurrency ----
  max_context(c, e, r);

  // ---- GPUs needed by memory ----
  gpus_by_memory(c, e, r);

  // ---- feasibility of the plan ----
  check_feasibility(a, e, ovh, r);

  // ---- notes ----
  layout_notes(a, gpu, e, r);

  // ---- derivation ----
  if (explain == Explain::on) explain_serving_memory(c, e, r);
  return r;
}

}  // namespace gpuplan::model
