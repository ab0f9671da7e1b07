// dp_buckets: the data-parallel gradient buckets of the pipeline stage whose last bucket nothing hides, priced tensor
// by tensor from the op graph (graph.hpp) as Megatron-Core forms them (PyTorch DDP: still count and divide).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <utility>
#include <vector>

#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/params.hpp"
#include "memory_core.hpp"
#include "training_core.hpp"
#include "graph_memo.hpp"

namespace gpuplan::model::detail {

namespace {

/// One buffer's walk: tensors arrive in reverse parameter order; a bucket closes at the first tensor boundary at or
/// past its size (Megatron-Core param_and_grad_buffer.py _ParamAndGradBuffer.__init__: `(param_end_index -
/// bucket_start_index) >= bucket_size`; PyTorch reducer.cpp compute_bucket_assignment_by_size: `bucket.size >=
/// bucket_size_limit`); the rest forms the last bucket.
struct BucketWalk {
  double size = 0.0;  ///< parameters per bucket; 0: one bucket
  double open = 0.0, closed = 0.0, last = 0.0;
  void add(double n) {
    if (n <= 0.0) return;
    open += n;
    if (size > 0.0 && open >= size) close();
  }
  void close() {
    if (open <= 0.0) return;
    ++closed;
    last = open;
    open = 0.0;
  }
  [[nodiscard]] double buckets() const { return closed + (open > 0.0 ? 1.0 : 0.0); }
  [[nodiscard]] double last_bucket() const { return open > 0.0 ? open : last; }
};

/// The tensors of one op on one GPU as Megatron-Core holds them: one fused tensor per copy (linear_qkv holds Q, K and
/// V; linear_fc1 gate and up), the routed experts' E/ep local copies each split over the expert TP ranks; norms,
/// routers and replicated projections whole, the rest 1/tp. Calls f(elements) per tensor, in reverse order.
template <class F>
void op_tensors_reversed(const Op& op, const wl::TrainingPlan& plan, F&& f) {
  const bool routed = op.part == model::Part::routed_experts;
  const double tp = double(routed ? plan.par.expert_tp() : plan.par.tp);
  double per_copy = 0.0;
  for (std::size_t i = 0; i < op.weight_count; ++i) {
    const WeightTensor& w = op.weights[i];
    if (w.tied) continue;
    const bool whole = w.split == TpSplit::replicated || w.split == TpSplit::small;
    per_copy += double(w.elements) / double(std::max<std::int64_t>(1, op.copies)) / (whole ? 1.0 : tp);
  }
  const double copies = routed ? std::max(1.0, double(op.copies) / double(std::max(1, plan.par.ep))) : 1.0;
  for (double c = 0; c < copies; ++c) f(routed ? per_copy : per_copy * double(op.copies));
}

/// The configured bucket before the stage is known: dp_bucket_size, PyTorch DDP's 25 MiB, or Megatron's default.
double configured_bucket(const wl::TrainingPlan& plan) {
  if (plan.dp_bucket_size > 0) return double(plan.dp_bucket_size);
  if (plan.kernels == wl::KernelStyle::eager && plan.zero == wl::ZeroStage::none)
    return 25.0 * 1024 * 1024 / plan.precision.gradient_bytes;
  return megatron_bucket_params(plan);
}

}  // namespace

double megatron_bucket_params(const wl::TrainingPlan& plan) {
  // megatron/training/training.py get_model (core_r0.14.0): bucket_size = max(40000000, 1000000 ×
  // get_data_parallel_world_size(with_context_parallel=True)) when neither --ddp-bucket-size nor --ddp-num-buckets is
  // given; it is set there before DistributedDataParallel's own default (DP without CP) can apply.
  return std::max(4.0e7, 1.0e6 * double(plan.par.dp) * double(std::max(1, plan.par.cp)));
}

DpBucketsKey dp_buckets_key(const wl::TrainingPlan& plan) {
  // Every layout field dp_buckets below reads, directly or through chunk_layers, configured_bucket and
  // expert_grad_group_size; DP and CP only through the bucket size and the expert group.
  const auto& par = plan.par;
  return {par.tp,
          std::int64_t(par.ep) * 4096 + par.expert_tp(),
          plan.dualpipe() ? -par.pp : par.pp,
          plan.model_chunks(),
          plan.zero == wl::ZeroStage::none ? 0 : 1,
          std::bit_cast<std::int64_t>(configured_bucket(plan)),
          expert_grad_group_size(plan) > 1 ? 1 : 0};
}

DpBuckets dp_buckets(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  // Megatron-Core (NVIDIA/Megatron-LM core_r0.14.0, 32ad5c89a6b6d7bb1ed75b81a4f845751d8955cc):
  //  - distributed_data_parallel.py DistributedDataParallel.__init__: bucketing only on pipeline rank 0 and only for
  //    its first model chunk (training.py get_model: disable_bucketing=(model_chunk_idx > 0)); every other chunk is
  //    one bucket. Those are reduced while the stages downstream still run their cool-down backwards; pipeline rank 0's
  //    first chunk finishes last, and its last bucket (the embedding's) is the one nothing hides.
  //  - routed experts (allreduce = False) go to a buffer of their own, reduced over the expert-data-parallel group,
  //    bucketed by the same size;
  //  - with the distributed optimizer a shared (tied) embedding on pipeline rank 0 of a PP > 1 model is a bucket of
  //    its own (_does_param_require_new_bucket);
  //  - bucket ends are padded to lcm(DP, 128) (and 2^16 with --ddp-pad-buckets-for-high-nccl-busbw) parameters: at
  //    most 0.2% of a 40M bucket at DP ≤ 384, left out;
  //  - overlap_grad_reduce off: bucket_size None, one bucket.
  // PyTorch DDP (eager kernels, no ZeRO): still ceil(P / 25 MiB of gradients) (below).
  DpBuckets b;
  const int p = std::max(1, plan.par.pp), v = plan.model_chunks();
  const bool torch_ddp =
      plan.dp_bucket_size == 0 && plan.kernels == wl::KernelStyle::eager && plan.zero == wl::ZeroStage::none;
  std::vector<std::int64_t> chunks = chunk_layers(a, plan, nullptr);
  if (chunks.empty()) {  // a split that cannot be made (the layout rules report it): even chunks
    chunks.assign(std::size_t(p) * std::size_t(v), 0);
    for (std::int64_t l = 0; l < a.layers; ++l) ++chunks[std::size_t(l % (std::int64_t(p) * v))];
  }
  const bool lora = plan.lora.on();
  // One layer's tensors of each kind met so far (a model has a few), in reverse parameter order: a layer's walk reads
  // them instead of its op graph (an array over every kind, zeroed per call, cost more than the walk; the graph's
  // ops and weights once per layer, the search ~250 instructions per layout).
  struct Tensor {
    model::Part part;
    double n;
  };
  std::vector<std::pair<std::size_t, std::vector<Tensor>>> layer_tensors;
  auto tensors_of = [&](LayerKind kind) -> const std::vector<Tensor>& {
    const auto ki = static_cast<std::size_t>(kind.index());
    for (const auto& t : layer_tensors)
      if (t.first == ki) return t.second;
    std::vector<Tensor> ts;
    if (lora) {
      const LoraLayerParams lp = lora_layer_params(a, plan.lora, kind);
      ts.push_back({model::Part::attention, (lp.dense + lp.expert) / double(plan.par.tp)});
    } else {
      const GraphRef g = layer_graph(a, kind);
      for (const Op* op = g.end(); op != g.begin();) {
        --op;
        op_tensors_reversed(*op, plan, [&](double n) { ts.push_back({op->part, n}); });
      }
    }
    return layer_tensors.emplace_back(ki, std::move(ts)).second;
  };
  const GraphRef head = head_graph(a);
  // Stage 0's tensors, chunk by chunk (chunk k holds the layers of global chunk k·p); f(part, elements) in reverse
  // parameter order within a chunk: output layer and final norm (PP 1), layers last to first, embedding.
  auto walk_chunk = [&](int k, auto&& f) {
    std::int64_t start = 0;
    for (std::size_t j = 0; j < std::size_t(k) * std::size_t(p); ++j) start += chunks[j];
    const std::int64_t end = start + chunks[std::size_t(k) * std::size_t(p)];
    const bool first = k == 0, whole = p == 1 && v == 1;
    auto head_part = [&](model::Part part) {
      for (const Op& op : head)
        if (op.part == part && !lora) op_tensors_reversed(op, plan, [&](double n) { f(part, n); });
    };
    if (whole) {
      head_part(model::Part::lm_head);
      head_part(model::Part::final_norm);
    }
    for (std::int64_t l = end - 1; l >= start; --l)
      for (const Tensor& t : tensors_of(LayerKind::of(a, l))) f(t.part, t.n);
    if (first) {
      head_part(model::Part::position_embedding);
      head_part(model::Part::embedding);
    }
  };
  // The bucket size: dp_bucket_size or the stack's default. (Megatron-LM's --ddp-num-buckets n would give
  // num_parameters // n, the parameters of pipeline rank 0 over all its chunks: not a scenario key yet.)
  b.size = configured_bucket(plan);
  const double size = plan.overlap_grad_reduce ? b.size : 0.0;
  const bool tied_own_bucket = a.tied_embeddings && p > 1 && plan.zero != wl::ZeroStage::none && !lora;
  const bool experts_reduced = expert_grad_group_size(plan) > 1;
  if (torch_ddp) {
    // PyTorch DDP keeps the count-and-divide rule for now: ceil(P / bucket) calls, the last max(bucket, embedding).
    // Its reducer closes buckets at tensor boundaries too (reducer.cpp compute_bucket_assignment_by_size; the first
    // 1 MiB), and Hugging Face modules hold q, k, v, gate and up apart: on our measured DDP steps that gives 34-58
    // calls where this rule counts up to 288, and walking them moved our own H200 DDP cases the wrong way
    // (w7b L8 DDP 4: +2.7% → +11.5%; data/validation/ANALYSIS.md, session 23): the waits of the calls that are not
    // made were covering something else, not yet found.
    double total = 0.0, emb = 0.0;
    for (int k = 0; k < v; ++k)
      walk_chunk(k, [&](model::Part part, double n) {
        if (part != model::Part::routed_experts || experts_reduced) total += n;
        if (part == model::Part::embedding || part == model::Part::position_embedding) emb += n;
      });
    b.dense_calls = b.calls = std::max(1.0, std::ceil(total / b.size));
    b.last = std::max(b.size, emb);
    return b;
  }
  for (int k = 0; k < v; ++k) {
    BucketWalk dense{k == 0 ? size : 0.0};
    BucketWalk expert{k == 0 ? size : 0.0};
    const bool first = k == 0;
    walk_chunk(k, [&](model::Part part, double n) {
      if (part == model::Part::routed_experts) return expert.add(n);
      if (part == model::Part::embedding && tied_own_bucket) {  // the shared embedding: a bucket of its own
        dense.close();
        dense.add(n);
        return dense.close();
      }
      dense.add(n);
    });
    b.dense_calls += dense.buckets();
    if (experts_reduced) b.expert_calls += expert.buckets();
    if (first) b.last = dense.last_bucket();
  }
  b.calls = std::max(1.0, b.dense_calls + b.expert_calls);
  return b;
}

}  // namespace gpuplan::model::detail
