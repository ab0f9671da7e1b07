// The unfused optimizer step (wl::OptimizerImpl foreach / for_loop; issue #27 d3): PyTorch's multi-tensor and
// per-parameter AdamW and SGD, priced pass by pass. The fused step stays training.cpp's optimizer_time.
//
// Sources (pytorch/pytorch, 2.x):
//  [adam]  torch/optim/adam.py, _multi_tensor_adam (decoupled weight decay, AdamW): _foreach_mul_(params, 1 − lr·wd);
//          _foreach_lerp_(exp_avgs, grads, 1 − β1); _foreach_mul_(exp_avg_sqs, β2);
//          _foreach_addcmul_(exp_avg_sqs, grads, grads, 1 − β2); exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_sqs);
//          _foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt); _foreach_add_(exp_avg_sq_sqrt, eps);
//          _foreach_addcdiv_(params, exp_avgs, exp_avg_sq_sqrt, step_size) — 8 passes; _single_tensor_adam issues the
//          same 8 ops per parameter tensor (mul_, lerp_, mul_, addcmul_, sqrt, div, add_, addcdiv_).
//  [sgd]   torch/optim/sgd.py, _multi_tensor_sgd with momentum: _foreach_mul_(bufs, momentum),
//          _foreach_add_(bufs, grads), _foreach_add_(params, bufs, alpha = −lr) — 3 passes.
//  [mta]   aten/src/ATen/native/cuda/MultiTensorApply.cuh: a multi-tensor kernel takes at most
//          depth_to_max_tensors = {110, 64, 48, 36, 30} tensors (by the number of tensor lists, 1…5) and
//          depth_to_max_blocks = 320 chunks of kChunkSize = 65,536 elements; a foreach op launches again when either
//          fills.
#include <algorithm>
#include <cmath>

#include "gpuplan/model/memory.hpp"
#include "gpuplan/model/serving.hpp"
#include "training_core.hpp"
#include "graph_memo.hpp"

namespace gpuplan::model::detail {

namespace {
/// One elementwise pass of the update: bytes per parameter as multiples of the weight (w), gradient (g) and one
/// state element (s), and the number of tensor lists the multi-tensor kernel takes (its depth).
struct Pass {
  double w, g, s;
  int depth;
};
// AdamW [adam]: mul_(p) 2w; lerp_(m, g) 2s + g; mul_(v) 2s; addcmul_(v, g, g) 2s + g (the gradient read once: the
// same tensor twice); sqrt(v) → t 2s; div_(t) 2s; add_(t) 2s; addcdiv_(p, m, t) 2w + 2s.
constexpr Pass kAdamW[] = {{2, 0, 0, 1}, {0, 1, 2, 2}, {0, 0, 2, 1}, {0, 1, 2, 3},
                           {0, 0, 2, 2}, {0, 0, 2, 1}, {0, 0, 2, 1}, {2, 0, 2, 3}};
// SGD with momentum [sgd]: mul_(buf) 2s; add_(buf, g) 2s + g; add_(p, buf) 2w + s.
constexpr Pass kSgd[] = {{0, 0, 2, 1}, {0, 1, 2, 2}, {2, 0, 1, 2}};
constexpr double kMtaMaxTensors[] = {110, 64, 48, 36, 30};
constexpr double kMtaMaxElements = 320.0 * 65536.0;
}  // namespace

namespace {
/// The tensors one op's weights are as the PyTorch (Hugging Face) modules hold them. The graph keeps a fused
/// layer's weights together where its modules keep them apart: K and V (one kv_heads tensor, k_proj and v_proj), a
/// gated MLP's gate and up projections (gate_proj, up_proj, per expert), a LayerNorm's weight and bias, the q/k norm's
/// q_norm and k_norm, an SSM's per-head vectors (A_log, D, dt_bias). A GPT-style model's query_key_value (c_attn)
/// is one module for Q, K and V. The LM head tied to the embedding is no tensor of its own.
/// The per-head vectors an SSM op holds in one tensor (transformer_graph.cpp add_mamba2 / add_gated_deltanet).
std::int64_t ssm_vectors(const Op& op) { return op.delta_rule ? 2 : 3; }

double op_module_tensors(const wl::TransformerArch& a, const Op& op) {
  if (op.kind == OpKind::linear && op.linear == LinearKind::qkv && op.part == Part::attention && a.gpt_style() &&
      !a.mla)
    return a.qkv_bias ? 2.0 : 1.0;  // the fused query_key_value weight (and its bias)
  const bool gated_up = a.mlp == wl::MlpKind::gated &&
                        (op.linear == LinearKind::mlp_in || op.linear == LinearKind::expert_in);
  double n = 0;
  for (std::uint8_t i = 0; i < op.weight_count; ++i) {
    const WeightTensor& w = op.weights[i];
    if (w.tied) continue;
    double modules = 1.0;
    if (op.kind == OpKind::linear && w.split == TpSplit::kv_heads) modules = 2.0;  // k_proj, v_proj
    else if (op.kind == OpKind::linear && gated_up) modules = 2.0;                 // gate_proj, up_proj
    else if (op.kind == OpKind::norm && op.part == Part::attention) modules = 2.0; // q_norm, k_norm
    else if (op.kind == OpKind::norm && a.norm == wl::NormKind::layernorm) modules = 2.0;  // weight, bias
    else if (op.kind == OpKind::indexer && !w.matmul && w.split == TpSplit::replicated) modules = 2.0;  // k_norm
    else if (op.kind == OpKind::ssm && w.split == TpSplit::split && w.elements == ssm_vectors(op) * op.heads)
      modules = double(ssm_vectors(op));  // Mamba-2's A_log, D, dt_bias; gated DeltaNet's A_log, dt_bias
    n += modules * double(op.copies);
  }
  return n;
}

double graph_module_tensors(const wl::TransformerArch& a, const OpGraph& g) {
  double n = 0;
  for (const Op& op : g) n += op_module_tensors(a, op);
  return n;
}
}  // namespace

double parameter_tensors(const wl::TransformerArch& a) {
  // Every layer kind's graph times its layers, then the head's (embedding, learned positions, final norm, an untied
  // LM head). The MTP modules are not counted (as the modules of the main model alone).
  double total = 0;
  for_each_layer_kind(a, [&](LayerKind kind, std::int64_t count) {
    total += double(count) * graph_module_tensors(a, *layer_graph(a, kind));
  });
  return total + graph_module_tensors(a, *head_graph(a));
}

double stage_parameter_tensors(double model_tensors, const wl::TrainingPlan& plan) {
  return std::ceil(model_tensors / double(std::max(1, plan.par.pp)));
}
double stage_parameter_tensors(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  return stage_parameter_tensors(parameter_tensors(a), plan);
}

namespace {
/// The passes of the plan's optimizer and the bytes of one weight (the tensor updated), gradient and state element.
struct PassBytes {
  const Pass *begin, *end;
  double w, g, s;
};
PassBytes pass_bytes(const wl::TrainingPlan& plan) {
  const auto& pr = plan.precision;
  const bool sgd = plan.optimizer == wl::OptimizerKind::sgd;
  // The tensor the optimizer updates: the fp32 master copy when there is one (then copied into the working weight:
  // read master, write weight), else the parameter itself (PyTorch AMP, fp32 training).
  return {sgd ? std::begin(kSgd) : std::begin(kAdamW), sgd ? std::end(kSgd) : std::end(kAdamW),
          pr.master_bytes > 0 ? pr.master_bytes : pr.weight_bytes, pr.gradient_bytes,
          optimizer_state_bytes(plan) / (sgd ? 1.0 : 2.0)};  // one state element (m or v; the momentum)
}
}  // namespace

double unfused_bytes_per_param(const wl::TrainingPlan& plan) {
  const PassBytes b = pass_bytes(plan);
  double sum = 0;
  for (const Pass* p = b.begin; p != b.end; ++p) sum += p->w * b.w + p->g * b.g + p->s * b.s;
  if (plan.precision.master_bytes > 0) sum += plan.precision.master_bytes + plan.precision.weight_bytes;
  return sum;
}

UnfusedOptimizer unfused_optimizer_step(const wl::TransformerArch& a, double p_shard, const wl::TrainingPlan& plan,
                                        const Device& d) {
  UnfusedOptimizer o;
  const auto& pr = plan.precision;
  const PassBytes pb = pass_bytes(plan);
  // This GPU's tensors: the model's over the pipeline stages (TP splits each tensor, it does not add any).
  o.tensors = std::max(1.0, stage_parameter_tensors(a, plan));
  const Seconds launch = d.eff.kernel_launch;
  const Seconds cpu_per_kernel = ServingPerfPlan{}.cpu_per_kernel;
  o.cpu_per_kernel = cpu_per_kernel;
  Seconds gpu{};
  o.bytes_per_param = unfused_bytes_per_param(plan);
  for (const Pass* p = pb.begin; p != pb.end; ++p) {
    const double bytes = p_shard * (p->w * pb.w + p->g * pb.g + p->s * pb.s);
    const double kernels =
        plan.optimizer_impl == wl::OptimizerImpl::for_loop
            ? o.tensors
            : std::max(std::ceil(o.tensors / kMtaMaxTensors[p->depth - 1]), std::ceil(p_shard / kMtaMaxElements));
    o.kernels += kernels;
    // Streaming time of the pass plus the fixed cost of each of its launches (streaming_cost adds one).
    gpu += streaming_cost("optimizer pass", OpClass::optimizer, units::bytes(bytes), units::flop(p_shard * 2.0), d).time +
           launch * (kernels - 1.0);
  }
  if (pr.master_bytes > 0) {  // the updated master copied into the working weight
    const double bytes = p_shard * (pr.master_bytes + pr.weight_bytes);
    o.kernels += 1;
    gpu += streaming_cost("master → weight copy", OpClass::optimizer, units::bytes(bytes), units::flop(0), d).time;
  }
  o.gpu = gpu;
  // The CPU issues each kernel (framework dispatch + launch), but it runs ahead of the GPU: while the GPU still works
  // through the backward's queued kernels, the optimizer's are issued behind them, so the issue time is hidden unless
  // the whole step is host-bound (measured: 1,184 for-loop kernels of GPT-2 small cost the step 3.8 ms more than the
  // fused kernel on an H100, not the 14 ms the CPU spends issuing them; optstack_gpt2.json). The step prices the GPU's
  // side; the CPU's is kept for the derivation.
  o.cpu = cpu_per_kernel * o.kernels;
  o.time = o.gpu;
  return o;
}

}  // namespace gpuplan::model::detail
