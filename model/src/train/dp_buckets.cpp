// dp_buckets: the data-parallel gradient buckets of the pipeline stage whose last bucket nothing hides, priced tensor
// by tensor from the op graph (graph.hpp) as Megatron-Core forms them, or parameter by parameter as PyTorch DDP does.
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
#include "linear_gemms.hpp"

namespace gpuplan::model::detail {

namespace {

/// One buffer's walk: tensors arrive in reverse parameter order; a bucket closes at the first tensor boundary at or
/// past its size (Megatron-Core param_and_grad_buffer.py _ParamAndGradBuffer.__init__: `(param_end_index -
/// bucket_start_index) >= bucket_size`; PyTorch reducer.cpp compute_bucket_assignment_by_size: `bucket.size >=
/// bucket_size_limit`); the rest forms the last bucket.
struct BucketWalk {
  double size = 0.0;  ///< parameters per bucket; 0: one bucket
  double first = 0.0;  ///< parameters of the first bucket when it has its own limit (PyTorch DDP's 1 MiB); 0: size
  double open = 0.0, closed = 0.0, last = 0.0;
  void add(double n) {
    if (n <= 0.0) return;
    open += n;
    const double limit = closed == 0.0 && first > 0.0 ? first : size;
    if (size > 0.0 && open >= limit) close();
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

/// The parameter tensors of one op on one GPU as PyTorch modules hold them (PyTorch DDP's reducer walks them one by
/// one): each weight and bias its own tensor, and where the modules hold the projections apart (projections_apart:
/// linear_gemms splits the op) the graph's [K | V] tensor is k_proj's and v_proj's, its [gate | up] gate_proj's and
/// up_proj's, two equal halves (as optimizer_step.cpp op_module_tensors counts them). Calls f(elements) per tensor,
/// in reverse parameter order.
template <class F>
void module_tensors_reversed(const wl::TransformerArch& a, const Op& op, const wl::TrainingPlan& plan, F&& f) {
  const bool routed = op.part == model::Part::routed_experts;
  const double tp = double(routed ? plan.par.expert_tp() : plan.par.tp);
  const double local = routed ? 1.0 / double(std::max(1, plan.par.ep)) : 1.0;  // this GPU's E/ep experts
  const bool apart = linear_gemms(a, op, projections_apart(a, plan)).count > 1;
  for (std::size_t i = op.weight_count; i-- > 0;) {
    const WeightTensor& w = op.weights[i];
    if (w.tied) continue;
    const bool whole = w.split == TpSplit::replicated || w.split == TpSplit::small;
    const double n = double(w.elements) * local / (whole ? 1.0 : tp);
    const bool two = apart && w.matmul && (w.split == TpSplit::kv_heads || op.linear == LinearKind::mlp_in);
    f(two ? n / 2.0 : n);
    if (two) f(n / 2.0);
  }
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
          (plan.zero == wl::ZeroStage::none ? 0 : 1) + (plan.kernels == wl::KernelStyle::eager ? 2 : 0),
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
        auto put = [&](double n) { ts.push_back({op->part, n}); };
        if (torch_ddp) module_tensors_reversed(a, *op, plan, put);
        else op_tensors_reversed(*op, plan, put);
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
      for (const Op& op : head) {
        if (op.part != part || lora) continue;
        if (torch_ddp) module_tensors_reversed(a, op, plan, [&](double n) { f(part, n); });
        else op_tensors_reversed(op, plan, [&](double n) { f(part, n); });
      }
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
    // PyTorch DDP (torch/nn/parallel/distributed.py _ddp_init_helper; torch/csrc/distributed/c10d/reducer.cpp
    // Reducer::rebuild_buckets and compute_bucket_assignment_by_size; pytorch/pytorch 25562d3d): the first iteration
    // runs one bucket (find_unused_parameters False), then the reducer rebuilds its buckets once, in the order the
    // gradients became ready (reverse parameter order here), with the limits [dist._DEFAULT_FIRST_BUCKET_BYTES =
    // 1 MiB, bucket_cap_mb = 25 MiB]: a bucket closes at the first parameter tensor that brings it to its limit.
    // Parameters are the modules' tensors (module_tensors_reversed), one reducer for all of them (routed experts
    // with a DP peer too). Our 1B-like step (16 layers, q/k/v and gate/up apart, untied head; fp32 gradients):
    // the head, then per layer [norm, down], [up], [gate], [norm, o, v, k, q], then the embedding: 66 calls, as the
    // profile's NCCL all-reduce kernels count (data/validation/ANALYSIS.md, session 32 set C).
    BucketWalk w{size, size > 0.0 ? 1024.0 * 1024.0 / plan.precision.gradient_bytes : 0.0};
    for (int k = 0; k < v; ++k)
      walk_chunk(k, [&](model::Part part, double n) {
        if (part != model::Part::routed_experts || experts_reduced) w.add(n);
      });
    b.dense_calls = b.calls = std::max(1.0, w.buckets());
    b.last = w.last_bucket();
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
