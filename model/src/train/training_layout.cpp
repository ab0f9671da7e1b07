// Training layout feasibility (check_training_layout) and the "does not fit" message with the changes that would fit.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/memory.hpp"
#include "gpuplan/model/training.hpp"
#include "quant_recipe.hpp"
#include "dp_instances.hpp"
#include "training_core.hpp"
#include "runtime_context.hpp"

namespace gpuplan::model {

namespace detail {

/// The verdict of the layout rules: `fail(message-maker)` records the message when collecting (f set), else stops at
/// the first failure.
struct Rules {
  Feasibility* f = nullptr;
  bool ok = true;
  std::optional<bool> host_link;  ///< whether the GPU has a host link, when the caller knows it (layout_rules)
  /// Returns true when the caller should stop here.
  template <class Message>
  bool fail(Message&& message) {
    ok = false;
    if (f != nullptr) f->fail(message());
    return f == nullptr;
  }
};

// Each group of rules returns false to stop at its failure (when not collecting every message).

/// The parallel sizes against the model's heads, FFN and layers, and the pipeline schedules' rules.
bool parallel_rules(const wl::TransformerArch& a, const wl::TrainingPlan& plan, Rules& r) {
  auto fail = [&r](auto&& message) { return r.fail(message); };
  Feasibility* f = r.f;
  const auto& p = plan.par;
  if (p.tp < 1 || p.pp < 1 || p.dp < 1 || p.cp < 1 || p.ep < 1) {
    fail([] { return std::string("every parallel size must be at least 1"); });
    return false;
  }
  if (a.heads % p.tp != 0 && fail([&] {
        std::string options;
        for (std::int64_t t = 1; t <= std::min<std::int64_t>(a.heads, 64); ++t)
          if (a.heads % t == 0 && (a.mla || a.kv_heads % t == 0 || t % a.kv_heads == 0))
            options += (options.empty() ? "" : ", ") + std::to_string(t);
        return fmt::format("TP {} does not divide the {} attention heads (TP sizes that work: {})", p.tp, a.heads,
                           options);
      }))
    return false;
  if (!a.mla && a.kv_heads % p.tp != 0 && p.tp % a.kv_heads != 0 &&
      fail([&] { return fmt::format("TP {} neither divides nor is a multiple of the {} KV heads", p.tp, a.kv_heads); }))
    return false;
  if (a.intermediate % p.tp != 0 &&
      fail([&] { return fmt::format("TP {} does not divide the FFN width {}", p.tp, a.intermediate); }))
    return false;
  // Pipeline stages: the layers of every (stage, chunk) by chunk_layers (memory_core.hpp), which holds the rules:
  // 1F1B takes any PP up to the layer count (uneven stages: the first L mod PP stages hold one more layer, as Llama 3
  // 405B's 126 layers on PP 16); the interleaved schedule needs equal chunks unless the plan gives an uneven split
  // (Megatron-Core's embedding/loss accounting, first/last stage layer counts or a pipeline layout).
  if (p.pp > a.layers && !plan.split.any()) {
    if (fail([&] { return fmt::format("PP {} exceeds the {} layers", p.pp, a.layers); })) return false;
  } else {
    std::string why;
    if (!chunk_split_ok(a, plan, f != nullptr ? &why : nullptr) && fail([&] { return why; })) return false;
  }
  if (plan.schedule == wl::PipelineSchedule::interleaved && (p.pp < 2 || p.virtual_stages < 2) &&
      fail([] { return std::string("the interleaved schedule needs PP ≥ 2 and virtual stages ≥ 2"); }))
    return false;
  // Megatron-Core's interleaved schedule runs the micro-batches in groups of PP per chunk (schedules.py,
  // microbatch_group_size_per_vp_stage, default PP): it refuses fewer than PP micro-batches, and a last group of fewer
  // than PP ("dependency bubbles in the pipeline").
  if (plan.schedule == wl::PipelineSchedule::interleaved && p.pp > 1 && p.virtual_stages > 1 && plan.micro_batch >= 1 &&
      plan.global_batch % (plan.micro_batch * p.dp) == 0) {
    const std::int64_t m = plan.micro_batches();
    if ((m < p.pp || m % p.pp != 0) && fail([&] {
          return fmt::format("the interleaved schedule runs the micro-batches in groups of PP = {}: {} micro-batches "
                             "per step are {} (Megatron-Core refuses fewer than PP, or a last group smaller than PP)",
                             p.pp, m, m < p.pp ? "fewer" : "not a multiple");
        }))
      return false;
  }
  // DualPipe (deepseek-ai/DualPipe dualpipe.py, DualPipe.step): the ranks pair up from both ends (PP even), the
  // micro-batches split between the two directions (an even number), and the schedule's steady phase needs at least
  // PP micro-batches per direction (num_chunks >= 2·num_ranks).
  if (plan.schedule == wl::PipelineSchedule::dualpipe) {
    if ((p.pp < 2 || p.pp % 2 != 0) &&
        fail([&] { return fmt::format("DualPipe pairs the pipeline ranks from both ends: PP {} must be even and ≥ 2", p.pp); }))
      return false;
    if (p.virtual_stages > 1 &&
        fail([] { return std::string("DualPipe holds two stages per rank by itself: leave virtual stages at 1"); }))
      return false;
    if (plan.micro_batch >= 1 && plan.global_batch % (plan.micro_batch * p.dp) == 0 && p.pp >= 2) {
      const std::int64_t m = plan.micro_batches();
      if ((m % 2 != 0 || m < 2 * std::int64_t(p.pp)) && fail([&] {
            return fmt::format("DualPipe needs an even number of micro-batches, at least 2·PP = {}: this step has {} "
                               "(deepseek-ai/DualPipe: num_chunks % 2 == 0 and num_chunks >= 2·num_ranks)",
                               2 * p.pp, m);
          }))
        return false;
    }
  }
  return true;
}

namespace {
/// Whether TorchTitan's op-level selective AC (wl::Recompute::selective_op) is modelled for this model and plan: the
/// kept and recomputed ops (memory_activations.cpp op_sac_terms, layer_cost.cpp op_sac_rerun) follow TorchTitan's
/// Llama block (wq, wk, wv, wo, w1, w3, w2 as bias-free aten.mm, the SDPA flash kernel) on one TP rank.
bool op_sac_expressible(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  const bool dense_attention = !a.moe && !a.mla && !a.mamba && !a.gdn && !a.dsa && !a.attention_output_gate;
  const bool no_bias = !a.qkv_bias && !a.o_bias && !a.mlp_bias;
  return dense_attention && no_bias && plan.flash_attention && plan.par.tp <= 1;
}
}  // namespace

/// Multi-token prediction, recompute modules and activation offloading against the model and the plan.
bool module_rules(const wl::TransformerArch& a, const wl::TrainingPlan& plan, Rules& r) {
  auto fail = [&r](auto&& message) { return r.fail(message); };
  const auto& p = plan.par;
  if (plan.mtp_layers > a.mtp_layers &&
      fail([&] {
        return fmt::format("{} multi-token-prediction modules asked for; the model has {} (num_nextn_predict_layers)",
                           plan.mtp_layers, a.mtp_layers);
      }))
    return false;
  if (plan.recomputes(wl::recompute_mla_up_proj) && !a.mla &&
      fail([] { return std::string("recompute module mla_up_proj: the model has no MLA attention"); }))
    return false;
  if (plan.recompute == wl::Recompute::selective_op && !op_sac_expressible(a, plan) && fail([] {
        return std::string(
            "recompute selective_op (TorchTitan's op-level policy, 9dec370: keep every odd aten.mm output of a block, "
            "the SDPA outputs and the reduce-scatters) is modelled for dense attention + MLP layers without linear "
            "biases (a bias turns mm into addmm, which the policy neither keeps nor counts), with flash attention and "
            "TP 1 (under TP the kept reduce-scatters and the recomputed sequence-parallel all-gathers are not "
            "modelled): use recompute selective or full");
      }))
    return false;
  if (plan.norm_kernel == wl::NormKernel::composite && a.norm != wl::NormKind::rmsnorm && fail([] {
        return std::string("norm_kernel composite prices RMSNorm written as PyTorch ops (TorchTitan's, Hugging Face's); "
                           "the model uses LayerNorm (PyTorch's nn.LayerNorm is one fused kernel): leave it out");
      }))
    return false;
  // Megatron-Core TransformerConfig.__post_init__ on overlap_moe_expert_parallel_comm: 'only supported with expert
  // model parallelism', 'virtual_pipeline_model_parallel_size must be specified when pipeline_model_parallel_size > 1',
  // 'disable full recomputation'.
  if (plan.ep_a2a_overlap && (p.ep <= 1 || !a.moe) &&
      fail([] { return std::string("the EP all-to-all overlap needs expert parallelism (ep > 1) and an MoE model"); }))
    return false;
  // Megatron-Core TransformerConfig.__post_init__ (core_v0.14.0 and main): "CUDA graphs not supported with CPU
  // offloading."
  if (plan.cuda_graphs != wl::CudaGraphScope::none && plan.activation_offload_layers > 0 &&
      fail([] { return std::string("CUDA graphs do not run with activation CPU offloading (Megatron-Core: 'CUDA "
                                   "graphs not supported with CPU offloading.')"); }))
    return false;
  if (plan.moe_capacity_factor && !a.moe &&
      fail([] { return std::string("an expert capacity factor needs a mixture-of-experts model"); }))
    return false;
  if (plan.ep_a2a_overlap && p.pp > 1 && plan.model_chunks() <= 1 &&
      fail([] { return std::string("the EP all-to-all overlap with pipeline parallelism needs the interleaved "
                                   "schedule (Megatron-Core: 'virtual_pipeline_model_parallel_size must be "
                                   "specified when pipeline_model_parallel_size > 1')"); }))
    return false;
  if (plan.ep_a2a_overlap && plan.recompute == wl::Recompute::full &&
      fail([] { return std::string("the EP all-to-all overlap does not run with full recomputation (Megatron-Core: "
                                   "'disable full recomputation when enabling overlap_moe_expert_parallel_comm')"); }))
    return false;
  if (plan.recomputes(wl::recompute_mlp) && a.moe && a.moe_layer_count() >= a.layers &&
      fail([] { return std::string("recompute module mlp: every layer of the model is an MoE layer (Megatron-Core "
                                   "recomputes only the dense MLP of non-MoE layers)"); }))
    return false;
  if (plan.recomputes(wl::recompute_moe_act) && !a.moe &&
      fail([] { return std::string("recompute module moe_act: the model has no MoE layers"); }))
    return false;
  if (plan.activation_fp8_input_store && (a.mlp != wl::MlpKind::gated || plan.kernels == wl::KernelStyle::eager) &&
      fail([] {
        return std::string("activation_func_fp8_input_store: Megatron-Core keeps the activation input in FP8 only "
                           "for SwiGLU ('Storing activation input in FP8 is supported only for SwiGLU', "
                           "TransformerConfig) in its fused kernels: the model needs a gated MLP and fused kernels");
      }))
    return false;
  if (plan.fp8_dot_product_attention &&
      (!detail::quantised_gemms(plan) || plan.kernels == wl::KernelStyle::eager || !plan.flash_attention) &&
      fail([] {
        return std::string("fp8_dot_product_attention: Transformer Engine's FP8 attention runs inside an FP8 autocast "
                           "region and only in its fused attention backends (Megatron-Core: TEDotProductAttention): "
                           "it needs precision fp8 (or fp4), fused kernels and fused attention");
      }))
    return false;
  if (plan.attention_output == wl::AttentionOutputStore::e5m6 &&
      (!detail::quantised_gemms(plan) || plan.kernels == wl::KernelStyle::eager || !plan.flash_attention) &&
      fail([] {
        return std::string("attention output store e5m6: the shared 12-bit copy replaces the fused attention kernel's "
                           "output and the O projection's FP8 input; it needs --precision fp8 (or fp4), fused kernels "
                           "and flash attention");
      }))
    return false;
  // An FP8 weight copy transposes exactly only where its scales do not run along one axis: per tensor, or per 128x128
  // block (DeepSeek-V3 §3.3.2); MXFP8 and NVFP4 quantise each axis separately, so the other layout is not a transpose.
  if (plan.fp8_weight_copies == wl::Fp8WeightCopies::cached_one_layout && detail::quantised_gemms(plan) &&
      (plan.precision.recipe == wl::QuantRecipe::mxfp8 || plan.precision.recipe == wl::QuantRecipe::nvfp4) &&
      fail([&] {
        return fmt::format("fp8_weight_copies cached_one_layout with the {} recipe: its column-wise weight copy is "
                           "quantised along the other axis, not transposed from the row-wise one; use delayed, "
                           "tensorwise or blockwise, or fp8_weight_copies cached",
                           wl::to_string(plan.precision.recipe));
      }))
    return false;
  if (plan.activation_offload_layers > 0) {
    // Megatron-Core TransformerConfig.__post_init__: 'CPU offloading can be done only for layers less than
    // num_layers', 'no support for Pipeline parallelism with CPU offloading', 'CPU offloading does not work when
    // activation recomputation is enabled'.
    const std::int64_t n = plan.activation_offload_layers;
    if (n >= a.layers && fail([&] {
          return fmt::format("activation offloading of {} layers: Megatron-Core offloads fewer than the model's {} "
                             "layers (cpu_offloading_num_layers < num_layers)",
                             n, a.layers);
        }))
      return false;
    if (p.pp > 1 && fail([&] {
          return fmt::format("activation offloading with PP {}: Megatron-Core has no pipeline parallelism with CPU "
                             "offloading (use PP 1)",
                             p.pp);
        }))
      return false;
    if ((plan.recompute != wl::Recompute::none || plan.recompute_modules != 0) && fail([] {
          return std::string("activation offloading with activation recomputation: Megatron-Core refuses the mix "
                             "('CPU offloading does not work when activation recomputation is enabled')");
        }))
      return false;
  }
  if (plan.recompute_modules != 0 && plan.recompute == wl::Recompute::full &&
      fail([] { return std::string("recompute full already recomputes every module: give no recompute modules"); }))
    return false;
  return true;
}

/// Batch sizes and sequence length against DP and CP, expert parallelism and the hybrid shard group.
bool batch_and_group_rules(const wl::TransformerArch& a, const wl::TrainingPlan& plan, Rules& r) {
  auto fail = [&r](auto&& message) { return r.fail(message); };
  const auto& p = plan.par;
  if (plan.micro_batch < 1 || plan.global_batch < 1 || plan.seq_len < 1) {
    if (fail([] { return std::string("batch sizes and sequence length must be ≥ 1"); })) return false;
  } else if (plan.global_batch % (plan.micro_batch * p.dp) != 0 && fail([&] {
               return fmt::format("global batch {} is not divisible by micro-batch {} × DP {} = {}", plan.global_batch,
                                  plan.micro_batch, p.dp, plan.micro_batch * p.dp);
             }))
    return false;
  if (p.cp > 1 && plan.seq_len % (2 * p.cp) != 0 && fail([&] {
        return fmt::format("sequence {} is not divisible by 2·CP = {} (load-balanced causal context parallelism)",
                           plan.seq_len, 2 * p.cp);
      }))
    return false;
  if (p.etp < 0 && fail([] { return std::string("expert TP must be at least 1 (0: the attention TP)"); })) return false;
  if (p.etp > 0 && p.etp != p.tp) {
    // Parallel folding (Megatron-Core parallel_state.py initialize_model_parallel: the expert grid
    // etp × ep × edp × pp over the world; arguments.py: expert_tensor_parallel_size).
    if (!a.moe) {
      if (fail([&] { return fmt::format("expert TP {} (≠ TP {}) needs a mixture-of-experts model", p.etp, p.tp); }))
        return false;
    } else if (a.moe->expert_intermediate % p.etp != 0 && fail([&] {
                 return fmt::format("expert TP {} does not divide the expert FFN width {}", p.etp,
                                    a.moe->expert_intermediate);
               })) {
      return false;
    }
    if (p.tp > 1 && !p.sequence_parallel && fail([&] {
          return fmt::format("expert TP {} with TP {} needs sequence parallelism (Megatron-LM arguments.py: 'When "
                             "using MoE and tensor parallelism, sequence parallelism must be used.')",
                             p.etp, p.tp);
        }))
      return false;
  }
  if (p.ep > 1) {
    if (!a.moe) {
      if (fail([] { return std::string("EP > 1 needs a mixture-of-experts model"); })) return false;
    } else if (a.moe->num_experts % p.ep != 0 &&
               fail([&] { return fmt::format("EP {} does not divide the {} experts", p.ep, a.moe->num_experts); })) {
      return false;
    }
  }
  if (a.moe && (p.ep > 1 || p.expert_tp() != p.tp)) {
    const long long stage = static_cast<long long>(p.tp) * p.cp * p.dp;
    if (stage % p.expert_shard() != 0 && fail([&] {
          if (p.expert_tp() != p.tp)
            return fmt::format("expert TP {} × EP {} = {} must divide TP × CP × DP = {} (Megatron-Core's expert grid "
                               "etp·ep·edp is the stage's tp·cp·dp ranks regrouped)",
                               p.expert_tp(), p.ep, p.expert_shard(), stage);
          std::string m = fmt::format("EP {} must divide DP × CP = {}", p.ep, p.dp * p.cp);
          if (p.tp > 1 && stage % p.ep == 0)
            m += fmt::format(" (or fold the experts: with --etp 1 the experts' EP divides TP × CP × DP = {})", stage);
          return m;
        }))
      return false;
  }
  // The hybrid shard group (ZeRO 3's HYBRID_SHARD; ZeRO 1/2: Megatron-Core's partial distributed optimizer) slices the
  // dp·cp ranks (parallel_state.py: "Data parallel size should be divisible by partial DistOpt shard factor").
  if (plan.zero != wl::ZeroStage::none && p.shard_group > 0 && (p.dp * std::max(1, p.cp)) % p.shard_group != 0 &&
      fail([&] {
        return p.cp > 1 ? fmt::format("hybrid shard group {} does not divide DP × CP = {}", p.shard_group, p.dp * p.cp)
                        : fmt::format("hybrid shard group {} does not divide DP {}", p.shard_group, p.dp);
      }))
    return false;
  // The experts' data-parallel group is cut into as many instances (parallel_state.py
  // intra_partial_expert_data_parallel_size = expert-DP / N).
  if (const int inst = dp_optimizer_instances(plan);
      a.moe && inst > 1 && p.expert_dp() % inst != 0 && fail([&] {
        return fmt::format("the expert-data-parallel group of {} ranks (TP × CP × DP / (expert TP × EP) = {} / {}) is "
                           "not divisible by the {} optimizer instances of the hybrid shard group {} (Megatron-LM, "
                           "parallel_state.py: \"Expert data parallel size should be divisible by partial DistOpt "
                           "shard factor\")",
                           p.expert_dp(), static_cast<long long>(p.tp) * std::max(1, p.cp) * p.dp, p.expert_shard(),
                           inst, p.shard_group);
      }))
    return false;
  return true;
}

/// The system (GPU, node, scale-out), the low-precision recipes against the hardware, the optimizer and CPU offload.
bool system_rules(const wl::TrainingPlan& plan, const TrainingSystem& sys, Rules& r) {
  auto fail = [&r](auto&& message) { return r.fail(message); };
  const auto& p = plan.par;
  if (sys.gpu == nullptr && fail([] { return std::string("no GPU given"); })) return false;
  if (p.gpus() > 1 && sys.node == nullptr && fail([] {
        return std::string("more than one GPU needs a node shape (give --node, or a GPU that a shipped node uses)");
      }))
    return false;
  if (sys.node != nullptr && !sys.node->scale_out &&
      p.gpus() > std::max<long long>(sys.node->gpus, sys.node->scale_up.domain_gpus) && fail([&] {
        return fmt::format("{} GPUs span several {} nodes, but the node data has no scale-out network (its NICs are "
                           "not sourced): use at most {} GPUs or a node with a scale-out network",
                           p.gpus(), sys.node->info.id, std::max(sys.node->gpus, sys.node->scale_up.domain_gpus));
      }))
    return false;
  if (plan.precision.fp8_params && plan.precision.compute != hw::Precision::fp8 && fail([] {
        return std::string("FP8 parameters feed FP8 GEMMs: fp8_params needs precision fp8");
      }))
    return false;
  {
    // Low-precision recipes and the hardware (capabilities from the GPU data: an FP4 rate marks the block-scaled
    // tensor cores that MXFP8 and NVFP4 need — Blackwell and later; Hopper has per-tensor FP8 only).
    const auto& pr = plan.precision;
    const bool fp4_rate = sys.gpu != nullptr && sys.gpu->peak(hw::Precision::fp4).has_value();
    // A view (the search checks every layout: a copy of the id per layout cost more than the rules it names).
    const std::string_view gpu_id = sys.gpu != nullptr ? std::string_view(sys.gpu->info.id) : "this GPU";
    if (pr.compute == hw::Precision::fp4) {
      if (pr.recipe != wl::QuantRecipe::nvfp4 && fail([] {
            return std::string("FP4 training is priced as NVFP4 (Transformer Engine NVFP4BlockScaling): recipe nvfp4");
          }))
        return false;
      if (!fp4_rate && fail([&] {
            return fmt::format("FP4 training needs FP4 tensor cores: {} has no FP4 rate in its data (Blackwell and "
                               "later have one)",
                               gpu_id);
          }))
        return false;
      if (sys.gpu != nullptr && sys.gpu->vendor != "NVIDIA" && fail([&] {
            return fmt::format("NVFP4 (E4M3 scales per 16 elements) is NVIDIA's format: {} is {}", gpu_id,
                               sys.gpu->vendor);
          }))
        return false;
    } else if (pr.compute == hw::Precision::fp8) {
      if (pr.recipe == wl::QuantRecipe::nvfp4 && fail([] {
            return std::string("the nvfp4 recipe takes precision fp4, not fp8");
          }))
        return false;
      if (pr.recipe == wl::QuantRecipe::mxfp8 && !fp4_rate && fail([&] {
            return fmt::format("MXFP8 needs block-scaled (microscaling) tensor cores: {} has none (Hopper runs FP8 "
                               "with per-tensor scales only: use the delayed, tensorwise or blockwise recipe)",
                               gpu_id);
          }))
        return false;
    } else if (pr.recipe != wl::QuantRecipe::delayed && fail([&] {
                 return fmt::format("the {} recipe scales fp8/fp4 GEMM operands: precision is {}",
                                    wl::to_string(pr.recipe), hw::to_string(pr.compute));
               })) {
      return false;
    }
  }
  if (plan.optimizer_states == wl::StateDtype::bf16 && plan.optimizer == wl::OptimizerKind::adamw_8bit && fail([] {
        return std::string("bf16 optimizer states apply to AdamW and SGD; 8-bit AdamW keeps its own 8-bit states");
      }))
    return false;
  if (plan.offload == wl::Offload::optimizer) {
    if (plan.zero == wl::ZeroStage::none && fail([] {
          return std::string("CPU offload of the optimizer needs ZeRO ≥ 1 (ZeRO-Offload moves each GPU's shard of "
                             "the optimizer states): add --zero 1 or higher");
        }))
      return false;
    if (plan.optimizer == wl::OptimizerKind::adamw_8bit && fail([] {
          return std::string("CPU offload runs the optimizer on the CPU with fp32 states (DeepSpeed CPU Adam): "
                             "8-bit AdamW cannot be offloaded");
        }))
      return false;
    const bool link = r.host_link ? *r.host_link : host_link_bandwidth(sys).has_value();
    if (!link && fail([&] {
          return fmt::format("CPU offload needs the GPU's host link: {} names no PCIe link with an x16 rate",
                             sys.gpu->info.id);
        }))
      return false;
    if ((sys.node == nullptr || !sys.node->host_memory_bandwidth) && fail([&] {
          return fmt::format("CPU offload needs the node's host DRAM bandwidth (host.memory_bandwidth_GBps): {}",
                             sys.node == nullptr ? std::string("no node given")
                                                 : "node " + sys.node->info.id + " does not give it");
        }))
      return false;
  }
  return true;
}

bool layout_rules(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const TrainingSystem& sys,
                  Feasibility* f, std::optional<bool> host_link) {
  Rules r{f, true, host_link};
  if (!parallel_rules(a, plan, r) || !module_rules(a, plan, r) || !batch_and_group_rules(a, plan, r) ||
      !system_rules(plan, sys, r))
    return false;
  return r.ok;
}

std::string does_not_fit_message(const wl::TransformerArch& a, const ParameterCounts& params,
                                 const wl::TrainingPlan& plan, const TrainingSystem& sys,
                                 const TrainingMemory& memory) {
  using units::format;
  const auto& par = plan.par;
  const hw::GpuSpec& gpu = *sys.gpu;
  const Bytes over = memory.total - memory.capacity;
  // What would make it fit: single changes to the plan, each checked with the memory model.
  std::vector<std::string> fixes;
  auto try_fix = [&](const std::string& what, wl::TrainingPlan alt) {
    if (!check_training_layout(a, alt, sys).ok) return;
    const TrainingMemory mm = training_memory(a, params, alt, gpu, training_overheads(gpu), Explain::off);
    if (mm.fits) fixes.push_back(fmt::format("{} ({})", what, format(mm.total, units::BytePrefix::binary)));
  };
  if (plan.recompute != wl::Recompute::full) {
    auto alt = plan;
    alt.recompute = wl::Recompute::full;
    try_fix("--recompute full", alt);
  }
  const std::size_t before_zero = fixes.size();
  if (std::int64_t(par.dp) * std::max(1, par.cp) > 1)  // ZeRO shards over dp·cp
    for (int z = static_cast<int>(plan.zero) + 1; z <= 3; ++z) {
      auto alt = plan;
      alt.zero = static_cast<wl::ZeroStage>(z);
      try_fix(fmt::format("--zero {}", z), alt);
    }
  const bool zero_fits = fixes.size() > before_zero;
  if (plan.micro_batch > 1) {
    auto alt = plan;
    alt.micro_batch = 1;
    try_fix("--micro-batch 1", alt);
  }
  // Offload only where sharding alone does not do it (it costs host-link and CPU time).
  if (plan.offload == wl::Offload::none && plan.optimizer != wl::OptimizerKind::adamw_8bit && !zero_fits) {
    auto alt = plan;
    alt.offload = wl::Offload::optimizer;
    if (alt.zero == wl::ZeroStage::none) alt.zero = wl::ZeroStage::optimizer;
    try_fix(plan.zero == wl::ZeroStage::none ? "--offload optimizer --zero 1" : "--offload optimizer", alt);
  }
  // MoE: expert parallelism shards the routed experts over EP ranks of DP × CP (the layout rules: EP divides the
  // experts and DP × CP); the smallest power-of-two EP that fits, DP unchanged.
  if (a.moe) {
    const std::size_t before_ep = fixes.size();
    for (int ep = std::max(1, par.ep) * 2; ep <= a.moe->num_experts && fixes.size() == before_ep; ep *= 2) {
      auto alt = plan;
      alt.par.ep = ep;
      try_fix(fmt::format("--ep {}", ep), alt);
    }
  }
  if (par.dp % 2 == 0) {
    for (const char* dim : {"pp", "tp"}) {
      auto alt = plan;
      (dim[0] == 'p' ? alt.par.pp : alt.par.tp) *= 2;
      alt.par.dp /= 2;
      if (alt.par.tp > 1) alt.par.sequence_parallel = true;
      try_fix(fmt::format("--{} {} with DP {}", dim, dim[0] == 'p' ? alt.par.pp : alt.par.tp, alt.par.dp), alt);
    }
  }
  return fmt::format("does not fit: needs {} per GPU, {} available ({} over). {}",
                     format(memory.total, units::BytePrefix::binary),
                     format(memory.capacity, units::BytePrefix::binary),
                     format(over, units::BytePrefix::binary),
                     fixes.empty() ? fmt::format("No single change of recompute, ZeRO stage, micro-batch, {}TP or PP "
                                                 "makes it fit: use more GPUs or a GPU with more memory",
                                                 a.moe ? "EP, " : "")
                                   : "It would fit with: " + [&] {
                                       std::string j;
                                       for (const auto& f : fixes) j += (j.empty() ? "" : "; ") + f;
                                       return j;
                                     }());
}

double dualpipe_paired_share(int pp, std::int64_t m, int device) {
  if (pp < 2 || m <= 0) return 1.0;
  const std::int64_t h = std::min(device, pp - 1 - device);
  std::int64_t pairs = m - 3 * std::int64_t(pp) / 2 + 1 + h;
  if (h == pp / 2 - 1) --pairs;  // the middle ranks' first step-4 pair runs unoverlapped
  return std::clamp(double(pairs) / double(m), 0.0, 1.0);
}

}  // namespace detail

Feasibility check_training_layout(const wl::TransformerArch& a, const wl::TrainingPlan& plan,
                                  const TrainingSystem& sys) {
  Feasibility f;
  detail::layout_rules(a, plan, sys, &f);
  return f;
}

}  // namespace gpuplan::model
