#include "gpuplan/model/flops.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "gpuplan/core/format.hpp"
#include "gpuplan/model/params.hpp"

namespace gpuplan::model {

FlopsPerToken flops_per_token(const wl::TransformerArch& a, std::int64_t context, Explain explain) {
  FlopsPerToken f;
  const ParameterCounts p = parameter_counts(a, Explain::off);
  const std::int64_t h = a.hidden;

  // Weights in matmuls per token: attention matrices, FFN matrices (dense, active experts, shared), router, LM head.
  std::int64_t att_w = 0;
  if (a.mla) {
    const auto& m = *a.mla;
    const std::int64_t dqk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    att_w = (m.q_lora_rank > 0 ? h * m.q_lora_rank + m.q_lora_rank * a.heads * dqk : h * a.heads * dqk) +
            h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * a.heads * (m.qk_nope_head_dim + m.v_head_dim) +
            a.heads * m.v_head_dim * h;
  } else {
    att_w = h * a.heads * a.head_dim + 2 * h * a.kv_heads * a.head_dim + a.heads * a.head_dim * h;
  }
  const std::int64_t mats = a.mlp == wl::MlpKind::gated ? 3 : 2;
  const std::int64_t moe_layers = a.moe_layer_count();
  std::int64_t ffn_w = (a.layers - moe_layers) * mats * h * a.intermediate;
  if (a.moe) {
    const auto& m = *a.moe;
    ffn_w += moe_layers * (h * m.num_experts + m.experts_per_token * mats * h * m.expert_intermediate +
                           m.shared_experts * mats * h * m.shared_intermediate);
  }
  f.matmul_params = a.layers * att_w + ffn_w + a.vocab * h;  // LM head is a matmul whether tied or not
  f.matmul_forward = units::flop(2.0 * static_cast<double>(f.matmul_params));

  const std::int64_t dqk = a.mla ? a.mla->qk_nope_head_dim + a.mla->qk_rope_head_dim : a.head_dim;
  const std::int64_t dv = a.mla ? a.mla->v_head_dim : a.head_dim;
  double att = 0.0;
  for (std::int64_t l = 0; l < a.layers; ++l) {
    const std::int64_t c = a.attended_tokens(l, context);
    att += 2.0 * static_cast<double>(a.heads) * static_cast<double>(dqk + dv) * static_cast<double>(c);
  }
  f.attention_forward = units::flop(att);
  f.forward = f.matmul_forward + f.attention_forward;
  f.training = 3.0 * f.forward;

  if (explain == Explain::on) {
    using units::format;
    using units::format_count;
    const Origin cfg = Origin::model_config(a.source);
    Derivation& d = f.derivation;
    d.id = "flops_per_token";
    d.title = "FLOPs per token";
    d.formula = "forward = 2·N_matmul + Σ_layers 2·n_q·(d_qk + d_v)·c_l ; training = 3·forward";
    d.inputs = {{"N_matmul", format_count(double(f.matmul_params)), "weights in matmuls per token (LM head included)",
                 Origin::derived("params")},
                {"c", format_count(double(context)), "context attended to", Origin::user("--seq")},
                {"n_q", format_count(double(a.heads)), "query heads", cfg},
                {"d_qk", format_count(double(dqk)), "query/key head dim", cfg},
                {"d_v", format_count(double(dv)), "value head dim", cfg}};
    d.result = fmt::format("{} forward, {} training", format(f.forward), format(f.training));
    d.notes.push_back("attention counted over the full context for every token (no causal halving), as Megatron-LM "
                      "and PaLM MFU tables count it");
    if (a.sliding_layer_count() > 0)
      d.notes.push_back(fmt::format("{} sliding-window layers attend to min(c, {})", a.sliding_layer_count(),
                                    a.sliding_window));
    d.notes.push_back(fmt::format("6·N_active = {} for comparison", format(units::flop(6.0 * double(p.active)))));
    d.children.push_back({"flops_per_token.matmul", "Matmul FLOPs", "2·N_matmul", {}, format(f.matmul_forward), {}, {}});
    d.children.push_back(
        {"flops_per_token.attention", "Attention FLOPs", "Σ_layers 2·n_q·(d_qk + d_v)·c_l", {}, format(f.attention_forward), {}, {}});
  }
  return f;
}

}  // namespace gpuplan::model
