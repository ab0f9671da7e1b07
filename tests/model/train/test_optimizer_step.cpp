// The parameter tensors of a model as the PyTorch (Hugging Face) modules hold them, folded over the op graph
// (optimizer_step.cpp parameter_tensors; issue #20). They count the unfused optimizer's launches and DeepSpeed
// ZeRO-3's per-tensor calls. Counts by hand from each model's modules (transformers' modeling_*.py) and config.json.
#include <doctest/doctest.h>
#include "approx.hpp"

#include "library.hpp"
#include "training_core.hpp"

using namespace gpuplan;
using gptest::approx;

TEST_CASE("GPT-3 175B holds 1156 parameter tensors: 12 per layer, the embeddings and the final LayerNorm") {
  // 96 layers × (ln_1 weight and bias, c_attn weight and bias (Q, K and V fused), c_proj weight and bias, ln_2 weight
  // and bias, fc1 and fc2 weights and biases) + wte + wpe + ln_f weight and bias; the LM head is tied to wte.
  CHECK(model::detail::parameter_tensors(test::arch("gpt3-175b")) == approx(96.0 * 12 + 1 + 1 + 2));
}

TEST_CASE("Llama-3.1-8B holds 291 tensors and Qwen3-8B 399: the q/k norm's two vectors per layer") {
  // Llama: 32 × (q, k, v, o, gate, up, down, input_layernorm, post_attention_layernorm) + embed_tokens, norm, lm_head.
  CHECK(model::detail::parameter_tensors(test::arch("llama-3.1-8b")) == approx(32.0 * 9 + 3));
  // Qwen3: the same plus self_attn.q_norm and k_norm per layer, 36 layers, untied.
  CHECK(model::detail::parameter_tensors(test::arch("qwen3-8b")) == approx(36.0 * 11 + 3));
}

TEST_CASE("DeepSeek-V3 holds 45,395 tensors: MLA's seven, the gate's correction bias, 256 experts of three") {
  // Attention (DeepseekV3Attention): q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj,
  // o_proj = 7; two layer norms. The first 3 layers: a dense MLP (gate, up, down): 7 + 2 + 3 = 12. The other 58: the
  // gate (weight, e_score_correction_bias), 256 experts × 3, the shared experts as one MLP × 3: 7 + 2 + 2 + 768 + 3 =
  // 782. Then embed_tokens, norm, lm_head. The MTP module is not counted.
  CHECK(model::detail::parameter_tensors(test::arch("deepseek-v3")) == approx(3.0 * 12 + 58.0 * 782 + 3));
}

TEST_CASE("Nemotron-H 8B holds 311 tensors: a Mamba-2 block's eight, an attention block's four, an MLP's two") {
  // hybrid_override_pattern: 24 Mamba-2 (M), 24 MLP (-), 4 attention (*) blocks, each with its norm. Mamba-2
  // (NemotronHMamba2Mixer): in_proj, conv1d weight and bias (use_conv_bias), A_log, D, dt_bias, the gated norm,
  // out_proj = 8; attention: q, k, v, o; MLP (squared ReLU): up, down; + embeddings, norm_f, lm_head.
  CHECK(model::detail::parameter_tensors(test::arch("nemotron-h-8b")) == approx(24.0 * 9 + 24.0 * 3 + 4.0 * 5 + 3));
}
