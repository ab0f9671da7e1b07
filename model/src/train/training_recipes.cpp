// Training-recipe terms of the step's derivation that framework options add (issue #22): the vocabulary padding
// (Megatron-LM --make-vocab-size-divisible-by) and partial recomputation (--recompute-method / --recompute-num-layers).
#include <fmt/format.h>

#include <algorithm>

#include "gpuplan/core/format.hpp"
#include "memory_activations.hpp"
#include "memory_core.hpp"
#include "training_core.hpp"

namespace gpuplan::model::detail {

void explain_vocab_padding(std::int64_t vocab, const wl::TrainingPlan& plan, Derivation& root) {
  const std::int64_t padded = plan.padded_vocab(vocab);
  const int d = plan.vocab_divisor();
  Derivation n{"train.vocab", "Vocabulary as the framework builds it (embedding rows, LM-head columns, logits)",
               "V_pad = ⌈V / (d·t)⌉ · d·t",
               {},
               fmt::format("{} ({} padding rows, {} per TP rank)", units::format_count(double(padded)),
                           units::format_count(double(padded - vocab)),
                           units::format_count(double(padded / std::max(1, plan.par.tp)))),
               {},
               {}};
  n.inputs.push_back({"V", units::format_count(double(vocab)), "the model's vocabulary", Origin::model_config("vocab_size")});
  n.inputs.push_back(
      {"d", std::to_string(d), "make_vocab_size_divisible_by",
       plan.vocab_divisible_by
           ? Origin::user("vocab_divisible_by / --make-vocab-size-divisible-by")
           : Origin::assumption(plan.kernels == wl::KernelStyle::eager
                                    ? "eager PyTorch modules: the vocabulary as the config gives it (1)"
                                    : "Megatron-LM's default 128 (megatron/training/arguments.py; NeMo and "
                                      "Megatron-Bridge pad by the same rule)")});
  n.inputs.push_back({"t", std::to_string(plan.par.tp), "tensor parallel (vocab-parallel embedding and head)",
                      Origin::user("--tp")});
  n.notes.push_back(
      "megatron/training/tokenizer/tokenizer.py _vocab_size_with_padding: multiple = make_vocab_size_divisible_by × "
      "tensor_model_parallel_size; the padding rows are priced like real ones (weights, gradients, optimizer states, "
      "the LM head's GEMMs, logits and loss passes)");
  if (d > 1 && plan.kernels != wl::KernelStyle::eager)
    n.notes.push_back(
        "Megatron-Bridge pads only a vocabulary taken from the tokenizer (validate_and_set_vocab_size): a recipe whose "
        "model config sets vocab_size itself runs unpadded — give vocab_divisible_by 1");
  root.children.push_back(std::move(n));
}

}  // namespace gpuplan::model::detail

// ---------------------------------------------------------------------------------------------------------------
// Activation CPU offloading (Megatron-Core --cpu-offloading-num-layers; megatron/core/transformer/cpu_offload.py)

namespace gpuplan::model::detail {

std::optional<units::Bandwidth> host_link_rate(const wl::TrainingPlan& plan, const TrainingSystem& sys) {
  const auto link = host_link_bandwidth(sys);
  if (!link) return std::nullopt;
  units::Bandwidth r = *link * kHostLinkEfficiency;
  if (sys.node != nullptr && sys.node->host_memory_bandwidth) {
    // Every GPU of the node streams to host memory at once: each gets its share of the DRAM bandwidth.
    const units::Bandwidth dram =
        *sys.node->host_memory_bandwidth * (kHostDramEfficiency / double(offload_node_gpus(plan, sys)));
    if (dram < r) r = dram;
  }
  return r;
}

double activation_offload_layer_bytes(const wl::TransformerArch& a, const wl::TrainingPlan& plan) {
  if (plan.activation_offload_layers <= 0 || a.layers <= 0) return 0.0;
  // Megatron-Core offloads the tensors a layer saves for its backward (no recomputation is allowed with it): the
  // layer's stored activations of one micro-batch, the mean over the model's dense and MoE layers.
  const Ctx c = make_ctx(a, plan, ActivationLayout::from_plan);
  const LayerSums s = layer_sums(c);
  const double n_moe = double(a.moe_layer_count()), n_dense = double(a.layers) - n_moe;
  return (n_dense * s.dense.all + n_moe * s.moe.all) / double(a.layers) * c.tokens;
}

Seconds activation_offload_layer_time(const wl::TransformerArch& a, const wl::TrainingPlan& plan,
                                      const TrainingSystem& sys) {
  const double bytes = activation_offload_layer_bytes(a, plan);
  const auto rate = host_link_rate(plan, sys);
  if (bytes <= 0 || !rate) return Seconds(0);
  return units::bytes(bytes) / *rate;
}

Seconds activation_offload_exposed(std::int64_t layers, std::int64_t offloaded, Seconds copy_one_layer,
                                   Seconds fwd_mb, Seconds bwd_mb) {
  if (layers <= 0 || offloaded <= 0 || !(copy_one_layer > Seconds(0))) return Seconds(0);
  // AsyncDoubleBufferGroupOffloadHandler: layer_window_map spreads the N offloaded groups over the L layers, one
  // window of w = L/N layers each. Group 0's copy starts after layer 0 and is waited for at the end of its window
  // (w − 1 layers to hide behind), group g's starts at the end of window g − 1 (w layers). The backward mirrors it:
  // a group is reloaded one window ahead of its layers.
  const double w = double(layers) / double(offloaded);
  auto side = [&](Seconds pass) {
    const Seconds layer = pass / double(layers);
    return std::max(Seconds(0), copy_one_layer - layer * (w - 1.0)) +
           std::max(Seconds(0), copy_one_layer - layer * w) * double(offloaded - 1);
  };
  return side(fwd_mb) + side(bwd_mb);
}

}  // namespace gpuplan::model::detail

namespace gpuplan::model::detail {

void explain_activation_offload(const wl::TransformerArch& a, const wl::TrainingPlan& plan, const TrainingSystem& sys,
                                const StepTerms& terms, const StepCore& core, Derivation& root) {
  if (plan.activation_offload_layers <= 0) return;
  using units::format;
  const std::int64_t L = core.bottleneck_layers, n = plan.activation_offload_layers;
  const auto rate = host_link_rate(plan, sys);
  const Seconds exposed = activation_offload_exposed(L, n, terms.act_offload_layer, core.fwd.total(), core.bwd.total());
  const hw::GpuSpec& gpu = *sys.gpu;
  const bool c2c = gpu.pcie.empty() && !gpu.host_link.empty();
  Derivation d{"train.activation_offload", "Activation CPU offloading (Megatron-Core cpu_offload.py)",
               "t_copy = A_layer / (BW_link·η_link) ; exposed per micro-batch = Σ_fwd,bwd [max(0, t_copy − (w−1)·t_layer) "
               "+ (N−1)·max(0, t_copy − w·t_layer)], w = L/N",
               {},
               fmt::format("{} exposed per step ({} per micro-batch)", format(exposed * double(core.m)), format(exposed)),
               {},
               {}};
  d.inputs.push_back({"N", std::to_string(n), "decoder layers whose activations go to the host",
                      Origin::user("activation_offload_layers / --cpu-offloading-num-layers")});
  d.inputs.push_back({"L", std::to_string(L), "decoder layers of the (one) pipeline stage", Origin::derived()});
  d.inputs.push_back({"A_layer", format(terms.act_offload_layer_bytes), "one layer's saved activations, one micro-batch",
                      Origin::derived("memory model, no recomputation")});
  if (rate)
    d.inputs.push_back({"BW_link·η_link", fmt::format("{:.1f} GB/s", units::to_GBps(*rate)),
                        c2c ? fmt::format("NVLink-C2C to Grace, shared by {} GPUs, one direction", gpu.host_link_gpus)
                            : std::string("PCIe x16, one direction"),
                        Origin::datasheet(gpu.info.cite(c2c ? "/host_link" : "/pcie"))});
  d.inputs.push_back({"t_copy", format(terms.act_offload_layer), "one layer one way", Origin::derived()});
  d.inputs.push_back({"t_layer", fmt::format("{} fwd, {} bwd", format(core.fwd.total() / double(std::max<std::int64_t>(1, L))),
                                             format(core.bwd.total() / double(std::max<std::int64_t>(1, L)))),
                      "one layer's compute, one micro-batch", Origin::derived()});
  d.notes.push_back(
      "AsyncDoubleBufferGroupOffloadHandler: group g's copy runs on a side stream during the next window of layers "
      "(layer_window_map) and is waited for at the window's end; the backward reloads a group one window ahead. The "
      "copies run on copy engines (no SM share); their HBM traffic is not priced.");
  d.notes.push_back(fmt::format("GPU memory keeps L − N + 1 = {} layers' activations (one group reloaded ahead at the "
                                "backward's start); the host N = {}",
                                L - n + 1, n));
  if (!rate) d.notes.push_back("no host link in the hardware data: the copies are not priced");
  if (c2c)
    d.notes.push_back(fmt::format("η_link {:.2f} is the PCIe Gen5 measurement, assumed for NVLink-C2C (not measured)",
                                  kHostLinkEfficiency));
  (void)a;
  root.children.push_back(std::move(d));
}

}  // namespace gpuplan::model::detail
