// Vision inference and training (vision.hpp): the passes (vision_pass.cpp) composed into an inference run and a
// training step (the optimizer, DDP's gradient all-reduce and buffer broadcast, the host's issue flow), with their
// derivations.
#include "gpuplan/model/vision.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/collectives.hpp"
#include "vision_kernels.hpp"
#include "vision_pass.hpp"

namespace gpuplan::model {

using wl::VisionOp;
using wl::VisionOpKind;

const char* to_string(VisionOptimizer o) { return o == VisionOptimizer::adamw ? "adamw" : "sgd-momentum"; }

namespace {

using detail::finish;
using detail::price_pass;
using detail::Pricer;
using detail::with_launch;

std::string ms(units::Seconds s) { return units::format(s); }

}  // namespace

namespace {
/// One child per kernel of the pass (when the pass kept them): its FLOPs, bytes, bound and time.
std::vector<Derivation> op_children(const VisionPassCost& pc) {
  std::vector<Derivation> out;
  out.reserve(pc.ops.size());
  for (std::size_t i = 0; i < pc.ops.size(); ++i) {
    const OpCost& c = pc.ops[i];
    out.push_back({fmt::format("vision.op.{}", i),
                   c.name,
                   "t = max(FLOPs / (P·η), bytes / (BW·η_hbm)) + t_kernel",
                   {{"FLOPs", units::format(c.flops), to_string(c.cls), Origin::derived()},
                    {"bytes", units::format(c.bytes), "tensors moved", Origin::derived()}},
                   fmt::format("{} ({}-bound)", ms(c.time), to_string(c.bound)),
                   {},
                   {}});
  }
  return out;
}

Derivation pass_derivation(const std::string& id, const std::string& title, const VisionPassCost& pc,
                           const VisionRunPlan& plan) {
  return {id,
          title,
          "t = max(Σ_ops t_op, kernels · t_cpu) ; t_op = max(FLOPs / (P·η), bytes / (BW·η_hbm)) + t_kernel",
          {{"Σ GEMM", ms(pc.gemm), "convolutions (implicit GEMM) and linear layers", Origin::derived()},
           {"Σ depthwise", ms(pc.depthwise), "depthwise convolutions, streamed", Origin::derived()},
           {"Σ attention", ms(pc.attention), "fused attention (ViT)", Origin::derived()},
           {"Σ elementwise", ms(pc.elementwise), "norms, activations, adds, scales, pooling", Origin::derived()},
           {"Σ casts", ms(pc.casts), "autocast weight (and gradient) casts", Origin::derived()},
           {"kernels", fmt::format("{:g}", pc.kernels), "kernel launches of the pass", Origin::derived()},
           {"t_kernel", ms(plan.cuda_graphs ? plan.launch.kernel_overhead_graph : plan.launch.kernel_overhead_eager),
            plan.cuda_graphs ? "per-kernel cost inside a CUDA graph" : "eager launch per kernel",
            plan.launch.overhead_origin.rfind("measured", 0) == 0 ? Origin::calibration(plan.launch.overhead_origin)
                                                                   : Origin::assumption(plan.launch.overhead_origin)},
           {"t_cpu", plan.cuda_graphs ? std::string("0 (CUDA graph)") : ms(plan.launch.cpu_per_kernel),
            "CPU time to issue one eager kernel", Origin::assumption(plan.launch.overhead_origin)}},
          fmt::format("{} (GPU {}, CPU issue {}{})", ms(pc.time), ms(pc.gpu_time), ms(pc.cpu_issue),
                      pc.host_ops > units::Seconds{}
                          ? ": eager PyTorch's measured host cost of each module call summed (eager_host_ops.json)"
                          : ""),
          {},
          op_children(pc)};
}
}  // namespace

namespace {
/// DDP's buffer broadcast before each forward (torch.nn.parallel.DistributedDataParallel with broadcast_buffers=True,
/// the default): every batch norm holds running_mean and running_var (fp32, C each) and num_batches_tracked (one
/// int64). _broadcast_coalesced flattens the buffers of each dtype into one tensor (a cat kernel), broadcasts it from
/// rank 0 (one NCCL broadcast per dtype), and copies each buffer back (one device-to-device copy per buffer tensor).
/// The host issues those copies one by one while the forward waits behind them, so the term is the broadcasts plus
/// the longer of the kernels' GPU time and the host's issue time (the pass pricing's max(GPU, kernels · t_cpu)).
/// Layer norm holds no buffers: ViT pays nothing. Our 2-GPU ResNet-50 profile (vision_ddp_profile_x2.json) shows
/// exactly these kernels in the forward: 159 = 53 × 3 copies, 2 cat, 2 broadcasts.
void buffer_broadcast(const wl::VisionGraph& g, const VisionTrainPlan& plan, const Device& d, VisionTraining& r) {
  double fp32 = 0, int64 = 0;
  std::int64_t tensors = 0;
  for (const auto& op : g.ops)
    if (op.kind == VisionOpKind::norm && op.norm == wl::VisionNorm::batch) {
      fp32 += 2.0 * static_cast<double>(op.c_out);
      int64 += 1.0;
      tensors += 3;
    }
  if (tensors == 0) return;
  r.buffer_tensors = tensors;
  r.buffer_bytes = units::bytes(4.0 * fp32 + 8.0 * int64);
  auto bcast = [&](double bytes) {
    return collective_cost(Collective::broadcast, units::bytes(bytes), plan.dp, CollectiveAlgorithm::automatic,
                           Explain::off)
        .time;
  };
  const units::Seconds broadcasts = bcast(4.0 * fp32) + bcast(8.0 * int64);
  // Flatten (cat: read + write) and copy back (read + write) of every byte; one kernel per copy, two cats.
  const double kernels = static_cast<double>(tensors) + 2.0;
  const OpCost moves =
      streaming_cost("DDP buffer flatten and copy-back", OpClass::elementwise, r.buffer_bytes * 4.0, units::flop(0), d);
  const units::Seconds gpu = moves.time + plan.run.launch.kernel_overhead_eager * kernels;
  const units::Seconds host = plan.run.launch.cpu_per_kernel * kernels;
  r.buffer_sync = broadcasts + std::max(gpu, host);
}
}  // namespace

VisionInference vision_inference(const wl::VisionGraph& g, const VisionRunPlan& plan, const Device& d,
                                 Explain explain, bool keep_ops) {
  VisionInference r;
  r.pass = vision_forward(g, plan, d, keep_ops || explain == Explain::on);
  r.latency = r.pass.time;
  r.images_per_second = r.latency.raw() > 0 ? static_cast<double>(plan.batch) / r.latency.raw() : 0.0;
  if (explain == Explain::on) {
    r.derivation = pass_derivation("vision.latency", "Forward latency of one batch", r.pass, plan);
    r.derivation.notes.push_back(fmt::format(
        "{} image{} of {}×{} px, {} ops, {} MACs per image; {}{}{}{}", plan.batch, plan.batch == 1 ? "" : "s",
        g.resolution, g.resolution,
        g.ops.size(), units::format_number(static_cast<double>(g.macs()), 4), hw::to_string(plan.compute),
        plan.autocast ? " autocast (fp32 weights cast each forward)" : " weights", plan.fold_bn ? ", BN folded" : "",
        plan.fuse_epilogue ? ", activation/add fused into the GEMM epilogue" : ""));
  }
  return r;
}

namespace {
/// The step's phases on two resources in series: the host issues each phase's kernels (eager: the pass's host time,
/// the optimizer's Python step), the GPU runs them. The GPU ends a phase after its own work on it and no earlier than
/// the host's issue of the phase's last kernel: t_host += host; t_gpu = max(t_gpu + gpu, t_host). The host runs ahead
/// while the GPU is the bound (large batches: the sum of the GPU's phases), the GPU waits while it is not (small
/// batches: the host's sum). Under CUDA graphs the host's terms are 0.
units::Seconds issue_flow(const VisionTraining& r, std::int64_t accumulation, units::Seconds opt_gpu,
                          units::Seconds opt_host) {
  double host = 0, gpu = 0;
  for (std::int64_t a = 0; a < std::max<std::int64_t>(1, accumulation); ++a) {
    host += r.forward.cpu_issue.raw();
    gpu = std::max(gpu + r.forward.gpu_time.raw() + r.buffer_sync.raw(), host);
    host += r.backward.cpu_issue.raw();
    gpu = std::max(gpu + r.backward.gpu_time.raw(), host);
  }
  host += opt_host.raw();
  gpu = std::max(gpu + (opt_gpu + r.exposed_comm + r.comm_slowdown + r.bucket_copies).raw(), host);
  return units::seconds(gpu);
}

/// DDP's gradient sync over plan.dp (after the backward): the bucketed all-reduce, what the backward hides of it, the
/// GEMM throughput lost beside it, the bucket copies, and the buffer broadcast before each forward.
void ddp_gradient_sync(const wl::VisionGraph& g, const VisionTrainPlan& plan, const Device& d, VisionTraining& r) {
  // DDP: the fp32 gradients (4 B per parameter) in buckets; all but the last overlap the last micro-batch's
  // backward, the last (the first layers' gradients) is ready only when the backward ends.
  const double grad_bytes = 4.0 * static_cast<double>(g.parameters());
  const double bucket = std::max(1.0, plan.bucket_bytes.raw());
  const double full = std::floor(grad_bytes / bucket);
  const double rest = grad_bytes - full * bucket;
  auto ar = [&](double bytes) {
    return collective_cost(Collective::all_reduce, units::bytes(bytes), plan.dp, CollectiveAlgorithm::automatic,
                           Explain::off)
        .time;
  };
  const units::Seconds t_full = full > 0 ? ar(bucket) : units::Seconds{};
  const units::Seconds t_rest = rest > 0 ? ar(rest) : units::Seconds{};
  r.allreduce = t_full * full + t_rest;
  const units::Seconds last = rest > 0 ? t_rest : t_full;
  const units::Seconds hidden_part = r.allreduce - last;
  r.exposed_comm = last + std::max(units::Seconds{}, hidden_part - r.backward.time);
  const double loss = d.eff.comm_compute_loss;
  r.comm_slowdown = std::min(hidden_part, r.backward.gemm) * loss;
  const OpCost copies = streaming_cost("DDP bucket copies", OpClass::elementwise, units::bytes(4.0 * grad_bytes),
                                       units::flop(0), d);
  r.bucket_copies = copies.time;
  if (plan.broadcast_buffers) buffer_broadcast(g, plan, d, r);
}

/// Memory: fp32 weights and gradients, optimizer states, the compute-type weight copies autocast keeps for the
/// backward, and the activations saved for it: each op's saved tensor counted once (its input — conv, linear,
/// norm, SE scale, pooling with a window — or its output — activation), attention's Q, K, V, O and row statistics.
void training_memory(const wl::VisionGraph& g, const VisionTrainPlan& plan, const VisionRunPlan& run,
                     VisionTraining& r) {
  const double params = static_cast<double>(g.parameters());
  const double n = static_cast<double>(run.batch);
  const double e = hw::bytes_per_element(run.compute);
  r.memory.weights = units::bytes(4.0 * params);
  r.memory.gradients = units::bytes(4.0 * params);
  r.memory.optimizer = units::bytes((plan.optimizer == VisionOptimizer::adamw ? 8.0 : 4.0) * params);
  double matmul = 0;
  for (const auto& op : g.ops) matmul += static_cast<double>(op.matmul_weights());
  r.memory.weight_copies = units::bytes(run.autocast ? e * matmul : 0.0);
  std::vector<bool> saved(g.ops.size() + 1, false);  // saved[i + 1]: op i's output; saved[0]: the image
  double act = 0;
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const VisionOp& op = g.ops[i];
    const bool saves_input = op.kind == VisionOpKind::conv || op.kind == VisionOpKind::linear ||
                             op.kind == VisionOpKind::matmul ||
                             op.kind == VisionOpKind::norm || op.kind == VisionOpKind::mul ||
                             (op.kind == VisionOpKind::pool && op.pool != wl::VisionPool::global_avg);
    if (saves_input && !saved[i]) {
      saved[i] = true;
      act += static_cast<double>(op.in_elements()) * e;
    }
    if (op.kind == VisionOpKind::activation && !saved[i + 1]) {
      saved[i + 1] = true;
      act += static_cast<double>(op.out_elements()) * e;
    }
    if (op.kind == VisionOpKind::attention) {
      const double t = static_cast<double>(op.h_in * op.w_in);
      act += t * static_cast<double>(op.c_out) * e + t * static_cast<double>(op.heads) * 4.0;  // O and row stats
      saved[i + 1] = true;
    }
  }
  r.memory.activations = units::bytes(act * n);
}

/// The step's derivation: its phases, and the input pipeline above it when the plan has one.
void training_derivation(const wl::VisionGraph& g, const VisionTrainPlan& plan, const VisionRunPlan& run,
                         const Device& d, units::Seconds opt_host, double bytes_per_param, VisionTraining& r) {
  const double params = static_cast<double>(g.parameters());
  const double acc = static_cast<double>(std::max<std::int64_t>(1, plan.accumulation));
  r.derivation = {"vision.step_time",
                  "Training step time on one GPU",
                  "t_step: per phase t_host += host issue; t_gpu = max(t_gpu + GPU time, t_host) over a × (fwd + buffers, "
                  "bwd), then opt + t_comm,exposed + t_comm,beside + t_copies (= a · (t_fwd + t_bwd + t_buffers) + "
                  "t_opt + … when the GPU is the bound)",
                  {{"a", fmt::format("{:g}", acc), "micro-batches per step (gradient accumulation)", Origin::user("--global-batch / --micro-batch")},
                   {"t_fwd", ms(r.forward.time), "forward pass (training: batch statistics)", Origin::derived()},
                   {"t_bwd", ms(r.backward.time), "data- and weight-gradient GEMMs, elementwise backward",
                    Origin::derived()},
                   {"t_opt", ms(r.optimizer),
                    fmt::format("{} over {} fp32 parameters, {:g} B each, streamed{}", to_string(plan.optimizer),
                                units::format_number(params, 4), bytes_per_param,
                                opt_host > units::Seconds{}
                                    ? fmt::format("; the host's Python step and zero_grad {} ({} parameter tensors)",
                                                  ms(opt_host), detail::parameter_tensors(g))
                                    : std::string()),
                    Origin::derived()},
                   {"t_comm,exposed", ms(r.exposed_comm),
                    fmt::format("DDP over {} GPUs: last bucket + what the backward does not hide of the {} all-reduce "
                                "(buckets of {})",
                                plan.dp.size, ms(r.allreduce), units::format(plan.bucket_bytes)),
                    Origin::derived()},
                   {"t_comm,beside", ms(r.comm_slowdown),
                    "GEMM throughput lost while the bucket all-reduces run beside the backward",
                    d.eff.calibrated ? Origin::calibration(d.eff.origin) : Origin::assumption(d.eff.origin)},
                   {"t_copies", ms(r.bucket_copies), "gradients copied into the buckets and back (4 × 4 B per parameter)",
                    Origin::derived()},
                   {"t_buffers", ms(r.buffer_sync),
                    r.buffer_tensors > 0
                        ? fmt::format("DDP broadcast_buffers before each forward: {} batch-norm buffers ({}) broadcast "
                                      "from rank 0, flattened and copied back (max of GPU time and host issue of {} "
                                      "kernels)",
                                      r.buffer_tensors, units::format(r.buffer_bytes), r.buffer_tensors + 2)
                        : std::string("no DDP buffer broadcast (one GPU, no batch norm, or broadcast_buffers off)"),
                    Origin::derived()}},
                  ms(r.gpu_step_time),
                  {fmt::format("{} images per micro-batch; model FLOPs 3 × 2 × MACs × images = {}; MFU {:.1f}%", run.batch,
                               units::format(r.model_flops), 100.0 * r.mfu)},
                  {pass_derivation("vision.forward", "Forward pass", r.forward, run),
                   pass_derivation("vision.backward", "Backward pass", r.backward, run)}};
  if (r.data) {  // the step the run sees: the GPU's against its input pipeline
    Derivation gpu = std::move(r.derivation);
    Derivation top = r.data->derivation;
    top.children.insert(top.children.begin(), std::move(gpu));
    r.derivation = std::move(top);
  }
}

}  // namespace

VisionTraining vision_training(const wl::VisionGraph& g, const VisionTrainPlan& plan, const Device& d0,
                               Explain explain) {
  VisionTraining r;
  VisionRunPlan run = plan.run;
  run.fold_bn = false;
  run.fuse_epilogue = false;
  const Device d = with_launch(d0, run);
  {
    Pricer pr(run, d, explain == Explain::on);
    price_pass(g, run, d, true, false, pr);
    r.forward = finish(pr.pass(), run, g, detail::HostMode::train_fwd);
  }
  {
    Pricer pr(run, d, explain == Explain::on);
    price_pass(g, run, d, true, true, pr);
    r.backward = finish(pr.pass(), run, g, detail::HostMode::train_bwd);
  }
  // Optimizer: fp32 master weights, multi-tensor (foreach) kernels streaming every parameter.
  const double params = static_cast<double>(g.parameters());
  // torch.optim.SGD (foreach) with momentum and weight decay, as ImageNet recipes run it: g' = g + wd·p (read 8, write
  // 4), buf = m·buf (8), buf += g' (12), p −= lr·buf (12): 44 B per parameter in four multi-tensor passes (our H100
  // profile: 13 multi_tensor_apply kernels, 0.49 ms for ResNet-50's 25.6 M parameters = 2.30 TB/s at 44 B). Fused
  // AdamW: 28 B in one pass.
  const double bytes_per_param = plan.optimizer == VisionOptimizer::adamw ? 28.0 : 44.0;
  const OpCost opt = streaming_cost("optimizer step", OpClass::optimizer, units::bytes(params * bytes_per_param),
                                    units::flop(params * (plan.optimizer == VisionOptimizer::adamw ? 12.0 : 4.0)), d);
  r.optimizer = opt.time;
  // Eager: the step is issued by Python (the optimizer's per-group loop, foreach or fused kernels, zero_grad): when the
  // GPU has caught up, the phase lasts the host's time (measured per parameter tensor, vision_host.cpp).
  units::Seconds opt_host{};
  if (!run.cuda_graphs && run.host_per_op)
    if (const auto h = detail::optimizer_host_seconds(plan.optimizer == VisionOptimizer::adamw,
                                                      detail::parameter_tensors(g)))
      opt_host = units::seconds(*h);
  const double acc = static_cast<double>(std::max<std::int64_t>(1, plan.accumulation));
  if (plan.dp.size > 1) ddp_gradient_sync(g, plan, d, r);
  r.gpu_step_time = issue_flow(r, plan.accumulation, opt.time, opt_host);
  r.step_time = r.gpu_step_time;
  const double n = static_cast<double>(run.batch);
  if (plan.data) {
    r.data = vision_data_pipeline(r.gpu_step_time, run.batch * std::max<std::int64_t>(1, plan.accumulation), *plan.data,
                                  explain);
    r.step_time = r.data->step_time;
  }
  const double replicas = static_cast<double>(std::max(1, plan.dp.size));
  r.images_per_second = r.step_time.raw() > 0 ? n * acc * replicas / r.step_time.raw() : 0.0;
  r.model_flops = units::flop(3.0 * 2.0 * static_cast<double>(g.macs()) * n * acc);
  r.mfu = r.step_time.raw() > 0 ? (r.model_flops / r.step_time).raw() / d.peak(run.compute).raw() : 0.0;

  training_memory(g, plan, run, r);

  if (explain == Explain::on) training_derivation(g, plan, run, d, opt_host, bytes_per_param, r);
  return r;
}

}  // namespace gpuplan::model
