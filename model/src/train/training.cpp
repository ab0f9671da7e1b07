// The public entry points of training.hpp: estimate_training (the step's terms from step_terms.cpp, composed by
// compose_step.cpp, with the communication table and the derivation), the pipeline assignment, the communicator of a
// parallel group, the DP copy bytes and the scaling helpers.
#include "gpuplan/model/training.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/topology.hpp"
#include "gpuplan/model/utilisation.hpp"
#include "training_core.hpp"
#include "runtime_context.hpp"
#include "optimizer_rate.hpp"
#include "parallel_dims.hpp"
#include "graph_memo.hpp"

namespace gpuplan::model {

using units::Bytes;
using units::Seconds;

units::Seconds time_at_mfu(units::Flops total, double gpus, units::FlopRate peak, double mfu) {
  return total / (peak * (gpus * mfu));
}

StrongScaling strong_scaling(units::Seconds base_time, long long base_gpus, units::Seconds time, long long gpus) {
  StrongScaling r;
  if (gpus <= 0 || base_gpus <= 0) return r;
  r.ideal = base_time * (double(base_gpus) / double(gpus));
  r.efficiency = time.raw() > 0 ? (r.ideal / time).raw() : 0.0;
  return r;
}

double pipeline_bubble_fraction(int pp, int virtual_stages, std::int64_t micro_batches) {
  if (pp <= 1 || micro_batches <= 0) return 0.0;
  return static_cast<double>(pp - 1) / (static_cast<double>(std::max(1, virtual_stages)) * double(micro_batches));
}

static double dp_grad_passes(const wl::TrainingPlan& plan) {
  // PyTorch DDP (gradient_as_bucket_view) reduces each bucket as its gradients become ready, during the backward, and
  // divides it in place: one read + write pass. DDP has no reduction after the backward; eager code that reduces
  // after it (overlap_grad_reduce false) does it by hand, as apex's delay_allreduce and our moe_train_step.py do: the
  // gradients flattened into one buffer (a copy), all-reduced, divided in place, and copied back into each .grad —
  // three passes. Measured in the EP 1 x DP 4 step's CUDA-only profile (data/validation/measured/h100-sxm5-80gb/
  // moe_train_L4_s4096_b1_ep1_w4_cudaprof.json, 2.59e9 fp32 gradients): 13.3 ms of device copies (flatten and copy
  // back) and 6.9 ms of the divide, where the one-pass term gave 7.2 ms.
  return plan.overlap_grad_reduce ? 1.0 : 3.0;
}

double dp_copy_bytes(const wl::TransformerArch& a, const ParameterCounts& params, const wl::TrainingPlan& plan) {
  // DeepSpeed 0.3.13-0.5.x's ZeRO-3 copies around its per-tensor list collectives, whatever the model's kernels
  // (detail::fsdp_copy_bytes).
  if (plan.zero == wl::ZeroStage::parameters && plan.zero3_gather == wl::Zero3Gather::per_tensor_blocking &&
      detail::optimizer_shard(plan) > 1)
    return detail::fsdp_copy_bytes(params, plan);
  if (plan.kernels != wl::KernelStyle::eager || detail::dense_grad_group_size(plan) <= 1) return 0.0;
  // DDP: each gradient that is reduced into its bucket, read + write: the dense ones (over dp·cp), the routed
  // experts' only where their expert-data-parallel group has more than one GPU (EP = DP·CP leaves nothing to reduce;
  // our EP 4 step on 4 H100s syncs only the dense gradients: data/validation/measured/h100-sxm5-80gb/
  // moe_train_L4_s4096_b1_ep4_w4.json).
  if (plan.zero == wl::ZeroStage::none)
    return 2.0 * dp_grad_passes(plan) * detail::dp_reduced_params(a, params, plan) * plan.precision.gradient_bytes;
  if (plan.zero == wl::ZeroStage::parameters && detail::optimizer_shard(plan) > 1)
    return detail::fsdp_copy_bytes(params, plan);
  return 0.0;
}

PipelineAssignment pipeline_assignment(const wl::TransformerArch& arch, const wl::TrainingPlan& plan) {
  PipelineAssignment r;
  r.chunk_layers = detail::chunk_layers(arch, plan, &r.error);
  if (r.chunk_layers.empty()) return r;
  const std::size_t p = static_cast<std::size_t>(std::max(1, plan.par.pp));
  r.stage_layers.assign(p, 0);
  for (std::size_t j = 0; j < r.chunk_layers.size(); ++j) r.stage_layers[j % p] += r.chunk_layers[j];
  return r;
}

CommGroup training_comm_group(int size, int stride, const TrainingSystem& sys) {
  if (size <= 1 || sys.node == nullptr || sys.db == nullptr) return CommGroup{};
  std::optional<hw::ClusterSpec> cl;
  if (sys.cluster != nullptr) cl = *sys.cluster;
  CommGroup g = resolve_group(size, stride, *sys.node, *sys.db, cl);
  if (sys.scale_up_calibration) apply_calibration(g, *sys.scale_up_calibration);
  return g;
}

namespace {

using detail::LayerCost;
using detail::PassCost;

std::string tier_text(const CommGroup& g) {
  if (g.size <= 1) return "none";
  if (g.domains() <= 1) return g.scale_up.name;
  const std::string out = g.scale_out ? g.scale_out->name : std::string("?");
  if (g.scale_up_size <= 1) return fmt::format("{} across {} scale-up domains", out, g.domains());
  return fmt::format("{} × {} inside, {} across {} domains", g.scale_up_size, g.scale_up.name, out, g.domains());
}

CommCost comm_cost(const char* kind, std::string collective, int group_size, const CommGroup& g,
                   const detail::CommNumbers& n) {
  CommCost c;
  c.kind = kind;
  c.collective = std::move(collective);
  c.group_size = group_size;
  c.tier = tier_text(g);
  c.time = n.time;
  c.exposed = n.exposed;
  c.bytes_per_step = n.bytes;
  return c;
}

}  // namespace

TrainingEstimate estimate_training(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                   const TrainingSystem& sys, Explain explain) {
  return detail::estimate_training_laid_out(arch, plan, sys, explain, nullptr);
}

TrainingEstimate detail::estimate_training_laid_out(const wl::TransformerArch& arch, const wl::TrainingPlan& plan,
                                                    const TrainingSystem& sys, Explain explain, StepLayout* layout) {
  // The model as the framework builds it: the vocabulary padded to a multiple of divisor × tp (training_recipes.cpp).
  const wl::TransformerArch a = wl::with_padded_vocab(arch, plan);
  const detail::GraphMemoScope graphs(a);  // the layer and head graphs of `a`, built once for the whole estimate
  TrainingEstimate est;
  est.feasibility = check_training_layout(a, plan, sys);
  if (!est.feasibility.ok) return est;
  using units::format;
  const auto& par = plan.par;
  const hw::GpuSpec& gpu = *sys.gpu;
  const detail::TrainingConsts k = detail::training_consts(a, plan, sys);
  const Device& d = k.d;
  const ParameterCounts& params = k.params;

  // ---- the terms: compute of one micro-batch, one collective of each kind, the optimizer pass ----
  detail::StepTerms terms;
  LayerCost first;
  const detail::ComputeTerms compute = detail::compute_terms(a, plan, d, &first);
  terms.compute = &compute;
  if (plan.mixed_precision == wl::MixedPrecision::amp) terms.amp_casts = detail::amp_cast_time(a, params, plan, d);
  // Megatron-Core rank order (parallel_state.py): the dense grid tp-cp-dp-pp, tp innermost; the expert grid
  // etp-ep-edp-pp over the same GPUs (tp·cp·dp regrouped as etp·ep·edp: parallel folding; etp = tp by default).
  // Gradients: dense over dp·cp (stride tp), routed experts over the expert-data-parallel group (stride etp·ep).
  const int n_dp = detail::dense_grad_group_size(plan), n_edp = detail::expert_grad_group_size(plan);
  const auto& dims = detail::parallel_dims();
  std::array<CommGroup, detail::kDimCount> groups;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    groups[i] = detail::dim_group(dims[i], plan, sys);
    if (dims[i].one != nullptr && dims[i].priced(a, plan)) terms.*dims[i].one = dims[i].one_time(a, plan, groups[i]);
  }
  const CommGroup& tp_g = groups[detail::kTp];
  const CommGroup& dp_g = groups[detail::kDp];
  const int etp = par.expert_tp();
  const CommGroup edp_g = detail::grad_comm_group(n_edp, etp * par.ep, plan, sys);
  const CommGroup& ep_g = groups[detail::kEp];
  // The terms only one dimension has.
  if (par.tp > 1 && (plan.lora.on() || par.sequence_parallel))
    terms.tp_gather_one = detail::tp_gather_time(a, plan, tp_g);
  if (par.tp > 1 && par.sequence_parallel) terms.tp_quant = detail::tp_quant_times(a, plan, tp_g);
  if (detail::expert_tp_folded(a, plan) && etp > 1)
    terms.etp_one = detail::etp_collective_time(a, plan, training_comm_group(etp, 1, sys));
  if (par.ep > 1 && a.moe) {
    const detail::MoeDispatch md = detail::moe_dispatch(a, plan, ep_g);
    terms.ep_bytes_one = (md.dispatch_bytes + md.combine_bytes) * 0.5;
  }
  if (par.pp > 1) terms.pp_gather_one = detail::pp_gather_time(a, plan, tp_g);
  const std::vector<detail::StageShape> stages = detail::stage_shapes(a, params, plan);
  terms.stages = &stages;
  if (n_dp > 1) {
    terms.dp = detail::dp_collective_times(a, params, plan, dp_g, edp_g);
    terms.dp_copy_bytes = units::bytes(dp_copy_bytes(a, params, plan));
    terms.dp_copy = detail::dp_copy_time(terms.dp_copy_bytes, plan, d);
  }
  terms.optimizer_parts = detail::optimizer_step(a, params, plan, d);
  terms.optimizer = terms.optimizer_parts.time;
  if (plan.offload == wl::Offload::optimizer) terms.offload = detail::offload_times(a, params, plan, sys);
  if (plan.activation_offload_layers > 0) {
    terms.act_offload_layer = detail::activation_offload_layer_time(a, plan, sys);
    terms.act_offload_layer_bytes = units::bytes(detail::activation_offload_layer_bytes(a, plan));
  }

  // ---- the step ----
  detail::StepCore core;
  core.stage_times = &est.stage_time;
  core.layout = layout;
  detail::compose_step(a, plan, k, terms, core);
  const std::int64_t m = core.m;
  est.micro_batches = m;
  est.bottleneck_stage = core.bottleneck;
  est.comm.clear();
  for (std::size_t i = 0; i < dims.size(); ++i)
    est.comm.push_back(comm_cost(dims[i].kind, dims[i].collective(a, plan), dims[i].group_size(plan), groups[i],
                                 core.*dims[i].step));
  est.bubble_fraction = core.bubble_fraction;
  est.step = core.step;
  const StepBreakdown& s = est.step;
  est.step_time = s.total;
  if (!core.ok) {
    est.feasibility.fail("the step time could not be evaluated (a communication group has no usable link)");
    est.step_time = Seconds(0);
    return est;
  }
  est.tokens_per_s = core.tokens_per_s;
  est.model_flops_per_step = core.model_flops;
  est.hardware_flops_per_step = core.hardware_flops;
  est.mfu = core.mfu;
  est.hfu = core.hfu;

  // ---- memory ----
  est.memory = training_memory(a, params, plan, gpu, training_overheads(gpu), explain);
  if (!est.memory.fits) {
    est.feasibility.fail(detail::does_not_fit_message(a, params, plan, sys, est.memory));
  }

  if (!detail::offload_fits_host(est.memory.host_offloaded.raw(), plan, sys)) {
    const double need = detail::offload_host_bytes_per_node(est.memory.host_offloaded.raw(), plan, sys);
    est.memory.fits = false;  // "fits" covers every memory the plan needs: the GPU's and the host's
    est.feasibility.fail(fmt::format(
        "CPU offload does not fit in host memory: the node's GPUs keep {} of offloaded {} on the host, {} has {}",
        format(units::bytes(need)),
        plan.activation_offload_layers > 0
            ? (plan.offload == wl::Offload::optimizer ? "master weights, optimizer states and activations" : "activations")
            : "master weights and optimizer states",
        sys.node->info.id, format(*sys.node->host_memory)));
  }

  // ---- time to train, cost, energy ----
  if (core.has_time_to_train) {
    est.time_to_train = core.time_to_train;
    est.gpu_hours = core.gpu_hours;
  }
  if (core.has_cost) est.cost = core.cost;
  if (core.has_energy) est.energy = core.energy;
  est.layer_ops = first.ops;

  if (explain == Explain::on) {
    detail::explain_training(a, plan, sys, k, terms, first, core, est);
    detail::explain_vocab_padding(arch.vocab, plan, est.derivation);
    detail::explain_activation_offload(a, plan, sys, terms, core, est.derivation);
  }
  return est;
}

}  // namespace gpuplan::model
