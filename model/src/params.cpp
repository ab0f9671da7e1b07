#include "gpuplan/model/params.hpp"

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"

namespace gpuplan::model {
namespace {

using std::int64_t;

struct AttentionParts {
  int64_t weights = 0;  // matrices (used in matmuls)
  int64_t other = 0;    // biases, norms, sinks
};

AttentionParts attention_per_layer(const wl::TransformerArch& a) {
  AttentionParts p;
  const int64_t h = a.hidden, nq = a.heads;
  if (a.mla) {
    const auto& m = *a.mla;
    const int64_t dqk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    if (m.q_lora_rank > 0) {
      p.weights += h * m.q_lora_rank + m.q_lora_rank * nq * dqk;
      p.other += m.q_lora_rank;  // q_a_layernorm
    } else {
      p.weights += h * nq * dqk;
    }
    p.weights += h * (m.kv_lora_rank + m.qk_rope_head_dim);               // kv_a_proj_with_mqa
    p.other += m.kv_lora_rank;                                           // kv_a_layernorm
    p.weights += m.kv_lora_rank * nq * (m.qk_nope_head_dim + m.v_head_dim);  // kv_b_proj
    p.weights += nq * m.v_head_dim * h;                                  // o_proj
    if (a.qkv_bias) p.other += nq * dqk + (m.kv_lora_rank + m.qk_rope_head_dim);
    if (a.o_bias) p.other += h;
  } else {
    const int64_t d = a.head_dim, nkv = a.kv_heads;
    p.weights += h * nq * d + 2 * h * nkv * d + nq * d * h;
    if (a.qkv_bias) p.other += nq * d + 2 * nkv * d;
    if (a.o_bias) p.other += h;
  }
  if (a.qk_norm) p.other += 2 * a.head_dim;
  if (a.attention_sinks) p.other += nq;
  return p;
}

int64_t mlp_params(const wl::TransformerArch& a, int64_t width, bool bias, int64_t* weights_out) {
  const int64_t h = a.hidden;
  const int64_t mats = a.mlp == wl::MlpKind::gated ? 3 : 2;
  const int64_t w = mats * h * width;
  int64_t b = 0;
  if (bias) b = (a.mlp == wl::MlpKind::gated ? 2 * width : width) + h;
  if (weights_out != nullptr) *weights_out = w;
  return w + b;
}

int64_t norm_params(const wl::TransformerArch& a) { return a.norm == wl::NormKind::layernorm ? 2 * a.hidden : a.hidden; }

}  // namespace

ParameterCounts parameter_counts(const wl::TransformerArch& a, Explain explain) {
  ParameterCounts c;
  const int64_t h = a.hidden, L = a.layers;
  const AttentionParts att = attention_per_layer(a);
  c.attention_per_layer = att.weights + att.other;
  c.dense_mlp_per_layer = mlp_params(a, a.intermediate, a.mlp_bias, nullptr);

  const int64_t moe_layers = a.moe_layer_count();
  const int64_t dense_layers = L - moe_layers;
  c.embedding = a.vocab * h;
  c.position_embedding = a.position == wl::PositionKind::learned ? a.max_position * h : 0;
  c.attention = L * c.attention_per_layer;
  c.dense_mlp = dense_layers * c.dense_mlp_per_layer;
  c.norms = L * a.norms_per_layer * norm_params(a) + norm_params(a);
  c.lm_head = a.tied_embeddings ? 0 : a.vocab * h;

  int64_t router_per_layer = 0, shared_per_layer = 0;
  if (a.moe) {
    const auto& m = *a.moe;
    c.expert = mlp_params(a, m.expert_intermediate, m.expert_bias, nullptr);
    router_per_layer = h * m.num_experts + (m.router_bias ? m.num_experts : 0) + m.correction_bias;
    shared_per_layer = m.shared_experts * mlp_params(a, m.shared_intermediate, false, nullptr) +
                       (m.shared_expert_gate ? h : 0);
    c.router = moe_layers * router_per_layer;
    c.routed_experts = moe_layers * m.num_experts * c.expert;
    c.shared_experts = moe_layers * shared_per_layer;
    c.active_routed_experts = moe_layers * m.experts_per_token * c.expert;
  }
  c.total = c.embedding + c.position_embedding + c.attention + c.dense_mlp + c.router + c.routed_experts +
            c.shared_experts + c.norms + c.lm_head;
  c.active = c.total - c.routed_experts + c.active_routed_experts;

  if (a.mtp_layers > 0) {
    // DeepSeek-V3 MTP module (arXiv:2412.19437 §2.2): two RMSNorms, a 2h→h projection and one (MoE) transformer
    // layer; embedding and output head are shared with the main model.
    const int64_t layer = c.attention_per_layer + 2 * norm_params(a) +
                          (a.moe ? router_per_layer + a.moe->num_experts * c.expert + shared_per_layer
                                 : c.dense_mlp_per_layer);
    c.mtp = a.mtp_layers * (2 * norm_params(a) + 2 * h * h + layer + norm_params(a));
  }

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
    d.notes = a.assumptions;

    Derivation att_d{"params.attention", "Attention", "", {}, format_count(double(c.attention)), {}, {}};
    if (a.mla) {
      const auto& m = *a.mla;
      att_d.formula = "L·[h·r_q + r_q + r_q·n_q·(d_nope+d_rope) + h·(r_kv+d_rope) + r_kv + r_kv·n_q·(d_nope+d_v) + n_q·d_v·h]";
      att_d.inputs = {{"r_q", format_count(double(m.q_lora_rank)), "q_lora_rank", cfg},
                      {"r_kv", format_count(double(m.kv_lora_rank)), "kv_lora_rank", cfg},
                      {"d_nope", format_count(double(m.qk_nope_head_dim)), "qk_nope_head_dim", cfg},
                      {"d_rope", format_count(double(m.qk_rope_head_dim)), "qk_rope_head_dim", cfg},
                      {"d_v", format_count(double(m.v_head_dim)), "v_head_dim", cfg}};
    } else {
      att_d.formula = "L·[h·n_q·d + 2·h·n_kv·d + n_q·d·h" + std::string(a.qkv_bias ? " + n_q·d + 2·n_kv·d" : "") +
                      (a.o_bias ? " + h" : "") + (a.qk_norm ? " + 2·d" : "") + (a.attention_sinks ? " + n_q" : "") + "]";
    }
    d.children.push_back(att_d);
    d.children.push_back({"params.dense_mlp", "Dense FFN",
                          fmt::format("{}·{}·h·i{}", dense_layers, a.mlp == wl::MlpKind::gated ? 3 : 2,
                                      a.mlp_bias ? " + biases" : ""),
                          {{"layers", format_count(double(dense_layers)), "dense-FFN layers", cfg}},
                          format_count(double(c.dense_mlp)), {}, {}});
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
           fmt::format("{} routed ({} active), {} shared, {} router", format_count(double(c.routed_experts)),
                       format_count(double(c.active_routed_experts)), format_count(double(c.shared_experts)),
                       format_count(double(c.router))),
           {},
           {}});
    }
    d.children.push_back({"params.embedding", "Embeddings and LM head",
                          a.tied_embeddings ? "V·h (LM head tied)" : "V·h + V·h (untied LM head)",
                          {},
                          format_count(double(c.embedding + c.lm_head + c.position_embedding)),
                          c.position_embedding > 0 ? std::vector<std::string>{"learned positions P·h included"}
                                                   : std::vector<std::string>{},
                          {}});
    d.children.push_back({"params.norms", "Norms",
                          fmt::format("({}L+1)·{} ({})", a.norms_per_layer, a.norm == wl::NormKind::layernorm ? "2h" : "h",
                                      a.norm == wl::NormKind::layernorm ? "LayerNorm weight + bias" : "RMSNorm"),
                          {}, format_count(double(c.norms)), {}, {}});
    if (c.mtp > 0)
      d.notes.push_back(fmt::format("{} multi-token-prediction parameters are not in the total", format_count(double(c.mtp))));
  }
  return c;
}

bool lora_targets(const wl::Lora& l, LinearKind k) {
  if (!l.on() || k == LinearKind::router) return false;
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
  LoraLayerParams r;
  if (!l.on()) return r;
  const double rank = double(l.rank), h = double(a.hidden);
  const double glu = a.mlp == wl::MlpKind::gated ? 2.0 : 1.0;
  auto pair = [&](double in, double out) { return rank * (in + out); };
  double qkv_out = double(a.heads + 2 * a.kv_heads) * double(a.head_dim), o_in = double(a.heads * a.head_dim);
  if (a.mla) {
    const auto& m = *a.mla;
    qkv_out = double(a.heads) * double(m.qk_nope_head_dim + m.qk_rope_head_dim) +
              double(m.kv_lora_rank + m.qk_rope_head_dim);
    o_in = double(a.heads) * double(m.v_head_dim);
  }
  if (lora_targets(l, LinearKind::qkv)) r.dense += pair(h, qkv_out);
  if (lora_targets(l, LinearKind::attention_out)) r.dense += pair(o_in, h);
  if (moe_layer && a.moe) {
    const auto& m = *a.moe;
    const double ie = double(m.expert_intermediate), is = double(m.shared_experts * m.shared_intermediate);
    if (lora_targets(l, LinearKind::expert_in)) r.expert += double(m.num_experts) * pair(h, glu * ie);
    if (lora_targets(l, LinearKind::expert_out)) r.expert += double(m.num_experts) * pair(ie, h);
    if (is > 0 && lora_targets(l, LinearKind::mlp_in)) r.dense += pair(h, glu * is);
    if (is > 0 && lora_targets(l, LinearKind::mlp_out)) r.dense += pair(is, h);
  } else {
    const double i = double(a.intermediate);
    if (lora_targets(l, LinearKind::mlp_in)) r.dense += pair(h, glu * i);
    if (lora_targets(l, LinearKind::mlp_out)) r.dense += pair(i, h);
  }
  return r;
}

double lora_adapter_params(const wl::TransformerArch& a, const wl::Lora& l) {
  if (!l.on()) return 0.0;
  const double moe = double(a.moe_layer_count()), dense = double(a.layers) - moe;
  const LoraLayerParams d = lora_layer_params(a, l, false), e = lora_layer_params(a, l, true);
  return dense * (d.dense + d.expert) + moe * (e.dense + e.expert);
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

}  // namespace gpuplan::model
