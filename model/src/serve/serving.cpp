// The serving forward (serving.hpp): one engine iteration priced layer kind by layer kind (serving_layer.cpp), with
// the LM head, the embedding, the pipeline stages in sequence and its derivation; forward_trace records it kernel by
// kernel; use_measured_overheads takes the calibration profile's per-kernel costs.
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_timeline.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/graph.hpp"
#include "layer_kinds_text.hpp"
#include "graph_memo.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/topology.hpp"
#include "moe_cost.hpp"
#include "moe_layer.hpp"
#include "gpuplan/model/wide_ep.hpp"
#include "gpuplan/model/vision.hpp"
#include "serving_internal.hpp"

namespace gpuplan::model {

using units::Bytes;
using units::Seconds;
using detail::Acc;
using detail::at_least_one;
using detail::explain_serving_moe;
using detail::layer_forward;
using detail::serving_device;

void use_measured_overheads(ServingPerfPlan& plan, const EfficiencyProfile& eff) {
  std::vector<std::string> used;
  if (eff.calibrated && eff.kernel_launch.raw() > 0) {
    // The fixed cost of a memory-bound GEMM timed inside a CUDA graph (replay gap + the kernel's ramp and tail).
    plan.kernel_overhead_graph = std::max(eff.kernel_launch, eff.graph_kernel);
    used.push_back(fmt::format("{} per kernel inside a CUDA graph (memory-bound GEMM fixed cost; empty-kernel replay "
                               "gap {})",
                               units::format(plan.kernel_overhead_graph), units::format(eff.graph_kernel)));
  } else if (eff.graph_kernel.raw() > 0) {
    plan.kernel_overhead_graph = eff.graph_kernel;
    used.push_back(fmt::format("CUDA-graph replay {} per kernel", units::format(eff.graph_kernel)));
  }
  if (eff.eager_launch.raw() > 0) {
    plan.kernel_overhead_eager = eff.eager_launch;
    used.push_back(fmt::format("eager launch {} per kernel", units::format(eff.eager_launch)));
  }
  if (used.empty()) return;
  std::string what;
  for (const auto& u : used) what += (what.empty() ? "" : ", ") + u;
  plan.overhead_origin = "measured: " + what + " (" + eff.origin + "); " + plan.overhead_origin;
}

void apply_launch_costs(Device& d, const ServingPerfPlan& plan, bool cuda_graphs) {
  d.eff.kernel_launch = cuda_graphs ? plan.kernel_overhead_graph : plan.kernel_overhead_eager;
  d.eff.launch_class = cuda_graphs && plan.kernel_cost_by_class && d.eff.graph_class.measured() ? d.eff.graph_class
                                                                                                : KernelClassCosts{};
}

namespace {
ForwardCost forward_cost_traced(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                                const ServingSystem& sys, Explain explain, ForwardTrace* trace);
}  // namespace

ForwardCost forward_cost(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                         const ServingSystem& sys, Explain explain) {
  return forward_cost_traced(a, plan, fb, sys, explain, nullptr);
}

ForwardTrace forward_trace(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                           const ServingSystem& sys) {
  ForwardTrace t;
  t.cost = forward_cost_traced(a, plan, fb, sys, Explain::off, &t);
  if (plan.cuda_graphs) return t;
  // Eager: each item's issue time on the host, as forward_cost sums it (Acc::host).
  Seconds host{};
  std::int64_t calls = 0;
  auto issue = [&](std::vector<PassItem>& items, double times) {
    for (auto& it : items) {
      it.host = !plan.cpu_cost_by_op ? plan.cpu_per_kernel * double(it.kernels)
                : it.own_call       ? eager_host_per_call(it.host_call) * double(it.kernels)
                                    : Seconds{};
      host += it.host * times;
      calls += std::llround(double(it.kernels) * times);
    }
  };
  std::vector<double> layers_of(t.kinds.size(), 0.0);
  for (int k : t.layer_kind) layers_of[std::size_t(k)] += 1.0;
  for (std::size_t k = 0; k < t.kinds.size(); ++k) issue(t.kinds[k], layers_of[k]);
  issue(t.embedding, 1.0);
  issue(t.head, 1.0);
  t.cpu_per_kernel = calls > 0 ? host / double(calls) : plan.cpu_per_kernel;
  return t;
}

namespace {
/// The eager host term's input (no CUDA graph): the stage's calls at their kinds' measured host costs, or one given cost each.
DerivationInput eager_host_input(const ServingPerfPlan& plan, const ForwardCost& fc) {
  if (!plan.cpu_cost_by_op)
    return {"t_cpu", fmt::format("{} ({} per call)", units::format(fc.host), units::format(plan.cpu_per_kernel)),
            "host time to issue the stage's calls", Origin::user("--cpu-per-kernel-us")};
  return {"t_cpu",
          fmt::format("{} ({} per call on average)", units::format(fc.host),
                      units::format(fc.host / double(std::max<std::int64_t>(1, fc.kernels)))),
          "host time to issue the stage's calls, each at its kind's measured cost (GEMM, norm, attention, "
          "one-operand or other elementwise, collective)",
          Origin::measurement(plan.overhead_origin)};
}

/// The forward's derivation: its inputs, the MoE layer's (and wide EP's, two-batch overlap's) explain nodes.
Derivation explain_forward(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                           const ServingSystem& sys, const ForwardCost& fc, const Device& d, const KvTokenBytes& kvt,
                           const CommGroup& tp_g, const CommGroup& ep_g,
                           const std::array<Acc, LayerKind::kCount>& kinds, bool overlap, double T) {
  using units::format;
  const hw::GpuSpec& gpu = *sys.gpu;
  Derivation dv{
      "serving.forward",
      "One engine iteration (forward pass)",
      "t = Σ_layers Σ_ops [max(FLOPs/(P·η), bytes/(BW·η_hbm)) + t_kernel] + t_comm + LM head (+ PP stages in "
      "sequence) ; eager: max(GPU, Σ_calls t_cpu(call))",
      {{"tokens", units::format_number(T, 4), fmt::format("{:g} decoding × {} + {:g} prompts × {} new tokens",
                                                          fb.decode_seqs, fb.queries_per_seq, fb.prefill_seqs,
                                                          fb.prefill_tokens),
        Origin::derived()},
       {"context", std::to_string(fb.decode_context), "tokens each decoding sequence holds", Origin::derived()},
       {"TP×PP", fmt::format("{}×{}", plan.tp, plan.pp), "replica layout", Origin::user("--tp/--pp")},
       {"weights", std::string(to_string(plan.weights.dtype)), "weight storage (bytes incl. group scales)",
        Origin::user(plan.weights.origin)},
       {"KV/token/layer/GPU", format(kvt.per_layer), "KV cache read per token per layer on one GPU", Origin::derived()},
       {"P", format(d.peak(plan.compute)), fmt::format("dense {} peak", hw::to_string(plan.compute)),
        Origin::datasheet(gpu.info.cite("/dense_peak"))},
       {"BW", format(gpu.memory.bandwidth), "HBM bandwidth", Origin::datasheet(gpu.info.cite("/memory/bandwidth_TBps"))},
       {"η_hbm", units::format_number(d.eff.hbm, 3), "measured streaming fraction", Origin::measurement(d.eff.origin)},
       d.eff.launch_class.measured()
           ? DerivationInput{"t_kernel",
                             fmt::format("GEMM {}, attention {}, other {}", format(d.eff.launch_class.gemm),
                                         format(d.eff.launch_class.attention), format(d.eff.launch_class.elementwise)),
                             "fixed cost per kernel inside a CUDA graph, by kernel class",
                             Origin::measurement(d.eff.origin)}
           : DerivationInput{"t_kernel", format(d.eff.kernel_launch),
                             plan.cuda_graphs ? "per-kernel gap under CUDA graphs" : "eager launch",
                             Origin::assumption(plan.overhead_origin)},
       {"kernels", fmt::format("{} ({} running)", fc.kernels, fc.gpu_kernels),
        "kernel calls per stage (and the kernels they run: split-K reduces, split-KV combines)", Origin::derived()}},
      fmt::format("{} ({} per stage: GEMM {}, attention {}, elementwise {}, comm {}, overhead {})", format(fc.total),
                  format(fc.stage), format(fc.gemm), format(fc.attention), format(fc.elementwise), format(fc.comm),
                  format(fc.overhead)),
      {fmt::format("weights read per GPU {}; KV read per GPU {}; {} per GPU", format(fc.weight_bytes),
                   format(fc.kv_bytes), format(fc.flops))},
      {}};
  dv.set(fc.total.raw(), Unit::seconds);  // the pass a token sees (its result's first number)
  if (!plan.cuda_graphs) dv.inputs.push_back(eager_host_input(plan, fc));
  if (plan.tp > 1) dv.notes.push_back("TP: 2 all-reduces per layer over " + tp_g.scale_up.name);
  if (detail::names_layer_kinds(a))
    dv.notes.push_back(fmt::format(
        "layer kinds (each priced from its own op graph): {}{}{}", detail::layer_kinds_text(a),
        a.recurrent_layer_count() > 0 ? "; the recurrent layers' decode reads and writes their state, not a KV cache"
                                      : "",
        a.dsa ? "; the indexer scores every held token (FP8), the attention reads its top-k" : ""));
  for (std::int64_t l = 0; a.moe && l < a.layers; ++l) {
    const LayerKind kind = LayerKind::of(a, l);
    if (!kind.moe) continue;
    dv.children.push_back(
        explain_serving_moe(a, plan, fb, kind, kinds[static_cast<std::size_t>(kind.index())], d, kvt, tp_g, ep_g));
    if (plan.attention_dp > 1) dv.children.push_back(explain_wide_ep(a, plan, fb, ep_g, fc));
    if (overlap)
      dv.children.push_back(detail::explain_tbo(a, plan, fb, kind, kinds[std::size_t(kind.index())], d,
                                                           kvt, tp_g, ep_g));
    break;
  }
  return dv;
}

ForwardCost forward_cost_traced(const wl::TransformerArch& a, const ServingPerfPlan& plan, const ForwardBatch& fb,
                                const ServingSystem& sys, Explain explain, ForwardTrace* trace) {
  using units::format;
  const detail::GraphMemoScope graphs(a);  // the layer and head graphs of `a`, once per pass (or per planner scope)
  ForwardCost fc;
  const Device d = serving_device(plan, sys);
  const KvTokenBytes kvt = kv_token_bytes(a, plan.kv, plan.tp, Explain::off);
  const CommGroup tp_g = training_comm_group(plan.tp, 1, sys);
  const CommGroup ep_g = training_comm_group(serving_ep(plan), 1, sys);
  const CommGroup pp_g = training_comm_group(plan.pp > 1 ? 2 : 1, plan.tp, sys);
  const double e = plan.activation_bytes;
  const double T = fb.decode_seqs * double(fb.queries_per_seq) + fb.prefill_seqs * double(fb.prefill_tokens);
  fc.tokens = T;
  const std::int64_t Ti = at_least_one(T);
  const bool keep = explain == Explain::on;

  // Layers by kind ({mixer} × {FFN}), each costed once; the op list in the order the kinds first appear.
  Acc all;
  std::array<Acc, LayerKind::kCount> kinds;
  std::array<bool, LayerKind::kCount> have{};
  std::array<double, LayerKind::kCount> count{};
  std::array<int, LayerKind::kCount> slot{};
  std::array<Acc, LayerKind::kCount> tbo;  // the kinds under two-batch overlap (ep_overlap.cpp), when it applies
  const bool overlap = detail::tbo_applies(a, plan, fb);
  for (std::int64_t l = 0; l < a.layers; ++l) {
    const LayerKind kind = LayerKind::of(a, l);
    const auto k = static_cast<std::size_t>(kind.index());
    count[k] += 1.0;
    if (!have[k]) {
      kinds[k] = layer_forward(a, plan, fb, kind, d, kvt, tp_g, ep_g, keep && fc.ops.size() < 64, trace != nullptr);
      for (auto& op : kinds[k].ops) fc.ops.push_back(op);
      if (overlap) tbo[k] = detail::tbo_layer(a, plan, fb, kind, d, kvt, tp_g, ep_g);
      have[k] = true;
      if (trace != nullptr) {
        slot[k] = int(trace->kinds.size());
        trace->kinds.push_back(std::move(kinds[k].items));
      }
    }
    if (trace != nullptr) trace->layer_kind.push_back(slot[k]);
  }
  const double per_stage = 1.0 / double(std::max(1, plan.pp));
  for (std::size_t k = 0; k < kinds.size(); ++k)
    if (have[k]) all.scale_add(overlap ? tbo[k] : kinds[k], count[k] * per_stage);

  // The head graph's ops (graph.hpp build_head_graph): the final norm and the LM head on the last stage, the
  // embedding lookups (the tokens', and a learned position embedding's) on the first.
  const detail::GraphRef head_graph = detail::head_graph(a);
  const Op* final_norm = nullptr;
  const Op* lm_head = nullptr;
  for (const Op& o : head_graph) {
    if (o.kind == OpKind::norm) final_norm = &o;
    if (o.kind == OpKind::linear && o.linear == LinearKind::lm_head) lm_head = &o;
  }
  Acc head;
  head.tracing = trace != nullptr;
  // The final norm over every token of the pass (last stage; HF's and vLLM's model.norm), one norm kernel; with fused
  // kernels the last layer's residual add is fused into it, as each layer's first norm takes the one before it. Our
  // H200 decode profiles count it (kernel_class_cost.json: 65 norms in a 32-layer Llama-3-8B step, 2 per layer + 1).
  if (final_norm != nullptr) {
    const double norm_elems = T * double(final_norm->in);
    if (plan.kernels == wl::KernelStyle::eager)
      head.add(norm_cost("final norm", units::bytes(norm_elems * e * 2.0), units::flop(4.0 * norm_elems), final_norm->in, d),
               keep, HostCall::norm);
    else
      head.add(norm_cost("final add + norm", units::bytes(norm_elems * e * 4.0), units::flop(5.0 * norm_elems),
                         final_norm->in, d),
               keep, HostCall::norm);
  }
  const double emit = fb.decode_seqs * double(fb.queries_per_seq) + (fb.prefill_emits_token ? fb.prefill_seqs : 0.0);
  if (emit > 0 && lm_head != nullptr) {
    // The vocabulary-parallel LM head on the tokens that emit: its shard of the vocabulary per GPU.
    const std::int64_t mi = at_least_one(emit);
    const std::int64_t v_local = std::max<std::int64_t>(1, lm_head->out / plan.tp);
    OpCost lm = gemm_cost("LM head", {mi, v_local, lm_head->in, 1, 2.0}, sixteen_bit_of(plan.compute), d);
    head.add(lm, keep);
    head.weights += units::bytes(double(lm_head->in) * double(v_local) * 2.0);
    head.add(streaming_cost("sampling (softmax, top-k/p)", OpClass::elementwise,
                            units::bytes(emit * double(v_local) * 4.0 * 2.0), units::flop(5.0 * emit * double(v_local)), d),
             keep);
    if (plan.tp > 1) {
      head.add_comm("TP all-gather of the logits", PassItem::Kind::comm_tp,
                    collective_time(Collective::all_gather, units::bytes(emit * double(lm_head->out) * 4.0), tp_g), 1);
    }
  }
  for (const Op& o : head_graph) {
    if (o.kind != OpKind::embedding) continue;
    // A lookup reads and writes T rows of the op's width.
    head.add(streaming_cost(o.part == Part::position_embedding ? "position embedding gather" : "embedding gather",
                            OpClass::embedding, units::bytes(T * double(o.out) * e * 2.0), units::flop(0), d),
             keep);
  }
  for (const auto& op : head.ops) fc.ops.push_back(op);
  if (trace != nullptr) {
    // The embedding gather runs before the first layer (first stage), the rest after the last (last stage).
    for (auto& it : head.items)
      (it.name.ends_with("embedding gather") ? trace->embedding : trace->head).push_back(std::move(it));
  }

  Acc stage = all;
  stage.scale_add(head, 1.0);
  fc.gemm = stage.gemm;
  fc.attention = stage.attention;
  fc.elementwise = stage.elementwise;
  fc.comm = stage.comm;
  fc.flops = stage.flops;
  fc.weight_bytes = stage.weights;
  fc.kv_bytes = stage.kv;
  fc.kernels = stage.kernels;
  fc.gpu_kernels = stage.gpu_kernels;
  Seconds gpu_time = stage.total();
  // Eager: the CPU issues every kernel, each call at its kind's measured host cost; the GPU cannot run ahead of it.
  Seconds cpu_time{};
  if (!plan.cuda_graphs) cpu_time = stage.host(plan);
  fc.host = cpu_time;
  fc.overhead = std::max(Seconds(0), cpu_time - gpu_time) + plan.step_overhead;
  fc.stage = std::max(gpu_time, cpu_time);
  if (plan.pp > 1)
    fc.pp_transfer = collective_time(Collective::send_recv, units::bytes((double(Ti) * double(layer_boundary_width(a))) * e), pp_g) * double(plan.pp - 1);
  // All stages in sequence on a token's path (stages are equal up to the head, which only the last one runs). A stage
  // that cannot be priced (+inf: a collective over GPUs that no link joins) makes the pass unpriceable; stage − head
  // would then be inf − inf.
  fc.total = std::isfinite(fc.stage.raw())
                 ? (fc.stage - head.total()) * double(std::max(1, plan.pp)) + head.total() + fc.pp_transfer +
                       plan.step_overhead
                 : fc.stage;
  fc.stage += plan.step_overhead;

  if (explain == Explain::on) fc.derivation = explain_forward(a, plan, fb, sys, fc, d, kvt, tp_g, ep_g, kinds, overlap, T);
  return fc;
}

}  // namespace

}  // namespace gpuplan::model
