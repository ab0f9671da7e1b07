#include "gpuplan/model/params.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/graph.hpp"
#include "graph_memo.hpp"
#include "mla_projections.hpp"

namespace gpuplan::model {
namespace {

using std::int64_t;

/// The counts: a fold over the op graph (graph.hpp), the weights of each layer kind and of the ops around them;
/// `dense_layers` gets the number of layers with a dense FFN.
ParameterCounts count_parameters(const wl::TransformerArch& a, int64_t& dense_layers) {
  ParameterCounts c;
  const detail::GraphRef dense_layer = detail::layer_graph(a, LayerKind{false, false});
  const detail::GraphRef head = detail::head_graph(a);
  c.attention_per_layer = dense_layer->parameters(Part::attention);
  c.dense_mlp_per_layer = dense_layer->parameters(Part::dense_mlp);
  const int64_t norm_unit = head->parameters(Part::final_norm);

  const int64_t moe_layers = a.moe_layer_count();
  dense_layers = 0;
  c.embedding = head->parameters(Part::embedding);
  c.position_embedding = head->parameters(Part::position_embedding);
  c.lm_head = head->parameters(Part::lm_head);
  c.norms = norm_unit;

  // One fold per distinct layer kind ({mixer} × {FFN}), times its count.
  int64_t router_per_layer = 0, shared_per_layer = 0;
  if (a.moe) {
    const detail::GraphRef moe_layer = detail::layer_graph(a, LayerKind{true, false});
    c.expert = a.moe->num_experts > 0 ? moe_layer->parameters(Part::routed_experts) / a.moe->num_experts : 0;
    router_per_layer = moe_layer->parameters(Part::router);
    shared_per_layer = moe_layer->parameters(Part::shared_experts);
  }
  for_each_layer_kind(a, [&](LayerKind kind, int64_t count) {
    const detail::GraphRef g = detail::layer_graph(a, kind);
    c.attention += count * g->parameters(Part::attention);
    // The attention core's own weights are its sinks (the projections are the linear ops around it).
    if (const Op* core = g->attention()) c.attention_sinks += count * core->parameters();
    c.ssm += count * g->parameters(Part::ssm);
    c.norms += count * g->parameters(Part::norms);
    if (kind.ffn && !(kind.moe && a.moe)) {
      c.dense_mlp += count * g->parameters(Part::dense_mlp);
      dense_layers += count;
    }
  });
  if (a.moe) {
    const auto& m = *a.moe;
    c.router = moe_layers * router_per_layer;
    c.routed_experts = moe_layers * m.num_experts * c.expert;
    c.shared_experts = moe_layers * shared_per_layer;
    c.active_routed_experts = moe_layers * m.experts_per_token * c.expert;
  }
  c.vision = a.vision ? a.vision->graph().parameters() : 0;
  c.active = c.embedding + c.position_embedding + c.attention + c.ssm + c.dense_mlp + c.router +
             c.active_routed_experts + c.shared_experts + c.norms + c.lm_head;
  c.total = c.active - c.active_routed_experts + c.routed_experts + c.vision;

  if (a.mtp_layers > 0) {
    // DeepSeek-V3 MTP module (arXiv:2412.19437 §2.2): its own ops (build_mtp_graph: two RMSNorms, the 2h→h
    // projection, the norm before the shared head) and one full-attention transformer layer, MoE in an MoE model;
    // embedding and output head are shared with the main model.
    c.mtp = a.mtp_layers *
            (build_mtp_graph(a).parameters() + detail::layer_graph(a, LayerKind{a.moe.has_value(), false})->parameters());
  }
  return c;
}

}  // namespace

ParameterCounts parameter_counts(const wl::TransformerArch& a, Explain explain) {
  int64_t dense_layers = 0;
  ParameterCounts c = count_parameters(a, dense_layers);
  const int64_t h = a.hidden, L = a.layers;
  const int64_t moe_layers = a.moe_layer_count();

  if (explain == Explain::on) {
    using units::format_count;
    const Origin cfg = Origin::model_config(a.source);
    Derivation& d = c.derivation;
    d.id = "params";
    d.title = "Parameter count";
    d.formula = "embedding + positions + L·(attention + norms) + dense FFN + MoE (router + experts + shared) + final norm + LM head";
    d.inputs = {{"h", format_count(double(h)), "hidden size", cfg},
                {"L", format_count(double(L)), "layers", cfg},
                {"V", format_count(double(a.vocab)), "vocabulary", cfg},
                {"n_q", format_count(double(a.heads)), "query heads", cfg},
                {"n_kv", format_count(double(a.kv_heads)), "KV heads", cfg},
                {"d", format_count(double(a.head_dim)), "head dim", cfg},
                {"i", format_count(double(a.intermediate)), "dense FFN width", cfg}};
    d.result = fmt::format("{} total, {} active", format_count(double(c.total)), format_count(double(c.active)));
    d.set(double(c.total), Unit::count, Fold::sum);
    d.notes = a.assumptions;

    Derivation att_d{"params.attention", "Attention", "", {}, {}, {}, {}};
    att_d.set(double(c.attention), Unit::count);
    if (a.mla) {
      const auto& m = *a.mla;
      att_d.formula = "L·[h·r_q + r_q + r_q·n_q·(d_nope+d_rope) + h·(r_kv+d_rope) + r_kv + r_kv·n_q·(d_nope+d_v) + n_q·d_v·h]";
      att_d.inputs = {{"r_q", format_count(double(m.q_lora_rank)), "q_lora_rank", cfg},
                      {"r_kv", format_count(double(m.kv_lora_rank)), "kv_lora_rank", cfg},
                      {"d_nope", format_count(double(m.qk_nope_head_dim)), "qk_nope_head_dim", cfg},
                      {"d_rope", format_count(double(m.qk_rope_head_dim)), "qk_rope_head_dim", cfg},
                      {"d_v", format_count(double(m.v_head_dim)), "v_head_dim", cfg}};
    } else {
      att_d.formula = std::string(a.attention_output_gate ? "L_A·[2·h·n_q·d (query + output gate)" : "L·[h·n_q·d") +
                      " + 2·h·n_kv·d + n_q·d·h" + std::string(a.qkv_bias ? " + n_q·d + 2·n_kv·d" : "") +
                      (a.o_bias ? " + h" : "") + (a.qk_norm ? " + 2·d" : "") + (a.attention_sinks ? " + n_q" : "") + "]";
    }
    if (a.attention_sinks)
      att_d.notes.push_back("attention sinks: one learned logit per query head per layer (n_q·L parameters; a "
                            "softmax term per score, no FLOPs or bytes worth counting)");
    if (a.dsa && a.mla) {
      const auto& x = *a.dsa;
      att_d.formula += " + L_I·[r_q·n_i·d_i + h·d_i + 2·d_i + h·n_i] (DSA lightning indexer)";
      att_d.inputs.push_back({"L_I", format_count(double(a.indexer_layer_count())),
                              a.indexer_layer_count() < a.attention_layer_count()
                                  ? "layers with an indexer of their own (the others share the last one's top-k)"
                                  : "layers with an indexer (every attention layer)",
                              cfg});
      att_d.inputs.push_back({"n_i", format_count(double(x.index_heads)), "index_n_heads", cfg});
      att_d.inputs.push_back({"d_i", format_count(double(x.index_head_dim)), "index_head_dim", cfg});
      att_d.notes.push_back("the indexer's wq_b (from the query latent), wk, k_norm (LayerNorm) and weights_proj "
                            "(DeepSeek-V3.2-Exp inference/model.py Indexer)");
    }
    d.children.push_back(att_d);
    if (a.mamba && c.ssm > 0) {
      const auto& m = *a.mamba;
      d.children.push_back(
          {"params.ssm", "Mamba-2 mixers",
           std::string("L_M·[h·(2·n_h·P + 2·n_g·N + n_h) + d_conv·(n_h·P + 2·n_g·N)") + (m.conv_bias ? " + (n_h·P + 2·n_g·N)" : "") +
               " + 3·n_h + n_h·P + n_h·P·h" + (m.proj_bias ? " + biases" : "") + "]",
           {{"L_M", format_count(double(a.mamba_layer_count())), "Mamba-2 layers", cfg},
            {"n_h", format_count(double(m.heads)), "mamba_num_heads", cfg},
            {"P", format_count(double(m.head_dim)), "mamba_head_dim", cfg},
            {"N", format_count(double(m.state)), "ssm_state_size", cfg},
            {"n_g", format_count(double(m.groups)), "n_groups", cfg},
            {"d_conv", format_count(double(m.conv_kernel)), "conv_kernel", cfg}},
           {},
           {"in_proj (z, x, B, C, dt), depthwise conv1d, A_log + D + dt_bias, gated RMSNorm, out_proj "
            "(transformers' NemotronHMamba2Mixer)"},
           {}});
      d.children.back().set(double(c.ssm), Unit::count);
    }
    if (a.gdn && c.ssm > 0) {
      const auto& m = *a.gdn;
      d.children.push_back(
          {"params.ssm", "gated DeltaNet mixers",
           "L_G·[h·(2·n_k·d_k + 2·n_v·d_v) + h·2·n_v + d_conv·(2·n_k·d_k + n_v·d_v) + 2·n_v + d_v + n_v·d_v·h]",
           {{"L_G", format_count(double(a.gdn_layer_count())), "gated DeltaNet (linear_attention) layers", cfg},
            {"n_k", format_count(double(m.key_heads)), "linear_num_key_heads", cfg},
            {"n_v", format_count(double(m.value_heads)), "linear_num_value_heads", cfg},
            {"d_k", format_count(double(m.key_dim)), "linear_key_head_dim", cfg},
            {"d_v", format_count(double(m.value_dim)), "linear_value_head_dim", cfg},
            {"d_conv", format_count(double(m.conv_kernel)), "linear_conv_kernel_dim", cfg}},
           {},
           {"in_proj_qkvz, in_proj_ba, depthwise conv1d (no bias), A_log + dt_bias, gated RMSNorm over d_v, out_proj "
            "(transformers' Qwen3NextGatedDeltaNet)"},
           {}});
      d.children.back().set(double(c.ssm), Unit::count);
    }
    d.children.push_back({"params.dense_mlp", "Dense FFN",
                          fmt::format("{}·{}·h·i{}", dense_layers, a.mlp == wl::MlpKind::gated ? 3 : 2,
                                      a.mlp_bias ? " + biases" : ""),
                          {{"layers", format_count(double(dense_layers)), "dense-FFN layers", cfg}},
                          {}, {}, {}});
    d.children.back().set(double(c.dense_mlp), Unit::count);
    if (a.moe) {
      const auto& m = *a.moe;
      d.children.push_back(
          {"params.moe", "MoE experts",
           "moe_layers·(h·E + E·expert + shared); expert = " + std::string(a.mlp == wl::MlpKind::gated ? "3" : "2") + "·h·i_e",
           {{"moe_layers", format_count(double(moe_layers)), "MoE layers", cfg},
            {"E", format_count(double(m.num_experts)), "routed experts", cfg},
            {"k", format_count(double(m.experts_per_token)), "experts per token", cfg},
            {"i_e", format_count(double(m.expert_intermediate)), "expert FFN width", cfg},
            {"shared", format_count(double(m.shared_experts)), "shared experts", cfg}},
           fmt::format("{} = {} routed ({} active) + {} shared + {} router",
                       format_count(double(c.routed_experts + c.shared_experts + c.router)),
                       format_count(double(c.routed_experts)), format_count(double(c.active_routed_experts)),
                       format_count(double(c.shared_experts)), format_count(double(c.router))),
           {},
           {}});
      d.children.back().set(double(c.routed_experts + c.shared_experts + c.router), Unit::count);
    }
    d.children.push_back({"params.embedding", "Embeddings and LM head",
                          a.tied_embeddings ? "V·h (LM head tied)" : "V·h + V·h (untied LM head)",
                          {},
                          {},
                          c.position_embedding > 0 ? std::vector<std::string>{"learned positions P·h included"}
                                                   : std::vector<std::string>{},
                          {}});
    d.children.back().set(double(c.embedding + c.lm_head + c.position_embedding), Unit::count);
    d.children.push_back({"params.norms", "Norms",
                          fmt::format("({}L+1)·{} ({})", a.norms_per_layer, a.norm == wl::NormKind::layernorm ? "2h" : "h",
                                      a.norm == wl::NormKind::layernorm ? "LayerNorm weight + bias" : "RMSNorm"),
                          {}, {}, {}, {}});
    d.children.back().set(double(c.norms), Unit::count);
    if (c.vision > 0)
      d.children.push_back({"params.vision", "Vision tower (in the total, not in the active count)",
                            "Σ parameters of the tower's ops: patch embedding, positions, encoder blocks, merger, "
                            "projector",
                            {{"kind", a.vision->kind, "vision_config model_type", cfg}},
                            {},
                            {"it runs once per image, not per text token"},
                            {}});
    if (c.vision > 0) d.children.back().set(double(c.vision), Unit::count);
    if (c.mtp > 0)
      d.notes.push_back(fmt::format("{} multi-token-prediction parameters are not in the total", format_count(double(c.mtp))));
  }
  return c;
}

bool lora_targets(const wl::Lora& l, LinearKind k) {
  if (!l.on() || k == LinearKind::router || k == LinearKind::gate || k == LinearKind::lm_head ||
      k == LinearKind::mtp_proj)
    return false;
  switch (l.targets) {
    case wl::LoraTargets::qkv: return k == LinearKind::qkv;
    case wl::LoraTargets::attention: return k == LinearKind::qkv || k == LinearKind::attention_out;
    case wl::LoraTargets::mlp:
      return k == LinearKind::mlp_in || k == LinearKind::mlp_out || k == LinearKind::expert_in ||
             k == LinearKind::expert_out;
    case wl::LoraTargets::all: return true;
  }
  return false;
}

LoraLayerParams lora_layer_params(const wl::TransformerArch& a, const wl::Lora& l, bool moe_layer) {
  return lora_layer_params(a, l, LayerKind{moe_layer && a.moe.has_value(), false});
}

LoraLayerParams lora_layer_params(const wl::TransformerArch& a, const wl::Lora& l, LayerKind kind) {
  LoraLayerParams r;
  if (!l.on()) return r;
  // One adapter pair r·(d_in + d_out) per copy of each targeted linear of the layer's op graph; MLA's projection block
  // one per projection, at its own widths (mla_projections.hpp: q_a, q_b, kv_a, kv_b, each its own module to
  // Megatron-Core and PEFT), as the training pricer runs them.
  const double rank = double(l.rank);
  const detail::GraphRef g = detail::layer_graph(a, kind);
  const Op* attn = g->attention();
  for (const Op& o : g) {
    if (o.kind != OpKind::linear || !lora_targets(l, o.linear)) continue;
    double pair = rank * (double(o.in) + double(o.out));
    if (o.linear == LinearKind::qkv && o.part == Part::attention && attn != nullptr && attn->is_mla()) {
      pair = 0.0;
      for (const MlaProjection& p : mla_projections(*attn, o.in)) pair += rank * (double(p.in) + double(p.out));
    }
    if (o.part == Part::routed_experts)
      r.expert += double(o.copies) * pair;
    else
      r.dense += pair;
  }
  return r;
}

double lora_adapter_params(const wl::TransformerArch& a, const wl::Lora& l) {
  if (!l.on()) return 0.0;
  double n = 0.0;
  for_each_layer_kind(a, [&](LayerKind kind, std::int64_t count) {
    const LoraLayerParams p = lora_layer_params(a, l, kind);
    n += double(count) * (p.dense + p.expert);
  });
  return n;
}

double base_weight_bytes(const wl::TrainingPlan& plan) {
  if (!plan.lora.on()) return plan.precision.weight_bytes;
  switch (plan.lora.base) {
    case wl::LoraBase::same: return plan.precision.weight_bytes;
    case wl::LoraBase::int8:
    case wl::LoraBase::fp8: return 1.0;
    case wl::LoraBase::nf4: return 4.127 / 8.0;
  }
  return plan.precision.weight_bytes;
}

double lora_adapter_weight_bytes(const wl::TrainingPlan& plan) {
  return plan.precision.fp8_params ? std::max(2.0, plan.precision.weight_bytes) : plan.precision.weight_bytes;
}

}  // namespace gpuplan::model
