// Sequence mixers beyond dense attention (#23 deliverable 2): gated DeltaNet linear attention and gated attention
// (Qwen3-Next), DeepSeek sparse attention (the lightning indexer and top-k keys), attention sinks (GPT-OSS). Every
// expected value is worked out by hand from the formulas in the comments.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cmath>
#include <string>

#include "test_paths.hpp"
#include "../cli/cli_runner.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/params.hpp"
#include "library.hpp"

using namespace gpuplan;
using namespace gpuplan::model;
using gpuplan::test::hf;

namespace {
bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }
bool near(double got, double want, double rel = 1e-9) { return std::abs(got - want) <= rel * std::abs(want); }
std::string errors(const std::string& text) {
  Diagnostics d;
  auto j = json_io::parse(text, "config.json", d);
  REQUIRE(j.has_value());
  return wl_io::import_hf_config(*j, "config.json", "").diagnostics().to_string();
}
const std::string kReal = std::string(GPUPLAN_TEST_FIXTURES) + "/hf/real/";

// A small Qwen3-Next: h 64, 4 layers with full_attention_interval 2 (layers 0 and 2 gated DeltaNet, 1 and 3 gated
// attention); gated DeltaNet 2 key heads of 8, 4 value heads of 16, conv 4; attention 4 query / 2 KV heads of 16;
// MoE 4 experts top-2 of width 8 with a shared expert of 8 and its gate; vocabulary 100.
const std::string kTinyNext = R"({"model_type":"qwen3_next","hidden_size":64,"num_hidden_layers":4,
  "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"intermediate_size":96,"vocab_size":100,
  "full_attention_interval":2,"linear_num_key_heads":2,"linear_num_value_heads":4,"linear_key_head_dim":8,
  "linear_value_head_dim":16,"linear_conv_kernel_dim":4,"num_experts":4,"num_experts_per_tok":2,
  "moe_intermediate_size":8,"shared_expert_intermediate_size":8,"tie_word_embeddings":false)";

// A small DeepSeek-V3.2 (dense FFN): h 64, 2 layers, 4 heads, MLA q rank 32, kv rank 16, nope 8, rope 4, v 8;
// indexer 2 heads of 32, top-50; FFN 96; vocabulary 100.
const std::string kTinyDsa = R"({"model_type":"deepseek_v32","hidden_size":64,"num_hidden_layers":2,
  "num_attention_heads":4,"num_key_value_heads":4,"intermediate_size":96,"vocab_size":100,"q_lora_rank":32,
  "kv_lora_rank":16,"qk_nope_head_dim":8,"qk_rope_head_dim":4,"v_head_dim":8,"index_n_heads":2,
  "index_head_dim":32,"index_topk":50,"tie_word_embeddings":false)";
}  // namespace

TEST_CASE("gated DeltaNet: Qwen3-Next's layers by full_attention_interval, parameters by hand") {
  const auto a = hf(kTinyNext + "}");
  REQUIRE(a.gdn);
  CHECK(a.gdn_layer_count() == 2);
  CHECK(a.attention_layer_count() == 2);
  CHECK(a.mixer(0) == wl::Mixer::gated_deltanet);
  CHECK(a.mixer(1) == wl::Mixer::attention);
  CHECK(a.attention_output_gate);
  // Gated DeltaNet layer: conv channels 2·2·8 + 4·16 = 96, value width 64. in_proj_qkvz 64·(96 + 64) = 10,240,
  // in_proj_ba 64·2·4 = 512, conv1d 96·4 = 384 (no bias), A_log + dt_bias 2·4 = 8, gated norm 16, out_proj 64·64 =
  // 4,096: 15,256. Gated attention: q_proj with the gate 64·2·4·16 = 8,192, k and v 2·64·2·16 = 4,096, o 64·64 =
  // 4,096, q/k norms 2·16: 16,416. MoE: router 4·64 = 256, experts 4·3·64·8 = 6,144, shared 3·64·8 = 1,536, its
  // gate 64: 8,000. Norms 2·64 per layer; embedding + LM head 2·100·64; final norm 64.
  const auto p = parameter_counts(a, Explain::off);
  CHECK(p.ssm == 2 * 15'256);
  CHECK(p.attention == 2 * 16'416);
  CHECK(p.total == 2 * (15'256 + 8'000 + 128) + 2 * (16'416 + 8'000 + 128) + 12'800 + 64);
  CHECK(p.active == p.total - 4 * 3'072);  // 2 of the 4 experts (3,072 each layer) are not used by a token
  std::string kinds;
  for_each_layer_kind(a, [&](LayerKind k, std::int64_t n) {
    kinds += std::to_string(n) + " " + attention_span_name(a, k) + " + " + ffn_name(a, k) + "; ";
  });
  CHECK(kinds == "2 gated full attention + MoE with shared experts; "
                 "2 gated DeltaNet (linear attention) + MoE with shared experts; ");
  // layer_types says the same as the interval.
  const auto b = hf(kTinyNext + R"(,"layer_types":["linear_attention","full_attention","linear_attention",
    "full_attention"]})");
  CHECK(parameter_counts(b, Explain::off).total == p.total);
}

TEST_CASE("gated DeltaNet: FLOPs per token, a state per sequence instead of KV, split by TP") {
  const auto a = hf(kTinyNext + "}");
  // Matmul weights per token: gated DeltaNet in + out 10,752 + 4,096 (×2), gated attention 8,192 + 4,096 + 4,096
  // (×2), MoE router 256 + 2 experts 2·1,536 + shared 1,536 (×4), LM head 6,400.
  const auto f = flops_per_token(a, 100, Explain::off);
  CHECK(f.matmul_params == 2 * 14'848 + 2 * 16'384 + 4 * 4'864 + 6'400);
  // Chunked gated delta rule per token and layer, chunk C = min(64, 100) = 64, d_k 8, d_v 16, 4 value heads:
  // 4·(2·64·(3·8 + 2·16) + 6·8·16 + 2·64²/3) = 4·(7,168 + 768 + 2,730.67) = 42,666.67.
  CHECK(near(gated_delta_flops_per_token(4, 8, 16, 64, 100), 4.0 * (7'168.0 + 768.0 + 8'192.0 / 3.0)));
  CHECK(near(f.ssm_forward.raw(), 2.0 * 4.0 * (7'168.0 + 768.0 + 8'192.0 / 3.0)));
  // A chunk longer than the sequence is cut to it: C = 10.
  CHECK(near(gated_delta_flops_per_token(4, 8, 16, 64, 10), 4.0 * (2.0 * 10 * 56 + 768.0 + 200.0 / 3.0)));
  // Attention only on the 2 gated-attention layers: 2·4·(16 + 16)·100 each.
  CHECK(near(f.attention_forward.raw(), 2.0 * 2.0 * 4 * 32 * 100));
  // KV on the attention layers: 2·2·16·2 B = 128 B per token and layer; the gated DeltaNet layers hold
  // (4 − 1)·96 conv + 4·8·16 recurrent elements in bf16 = (288 + 512)·2 = 1,600 B each, whatever the length.
  const auto kv = kv_cache_size(a, 1000, 2.0, Explain::off);
  CHECK(near(kv.per_token_full.raw(), 256.0));
  CHECK(near(kv.state_per_sequence.raw(), 2 * 1'600.0));
  CHECK(near(kv.per_sequence.raw(), 256.0 * 1000 + 3'200.0));
  CHECK(near(kv_cache_size(a, 10, 2.0, Explain::off).state_per_sequence.raw(), 3'200.0));
  // TP 2: half the conv channels and half the value heads on each rank: (144 + 256)·2 B.
  CHECK(near(gated_deltanet_state_bytes(a, 2).total().raw(), 800.0));
  CHECK(near(recurrent_state_bytes(a, 1).total().raw(), 1'600.0));
  // Pipeline stages count the gated DeltaNet layers as stateful, uncached by KV.
  const auto st = pipeline_stages(a, 1);
  REQUIRE(st.size() == 1);
  CHECK(st[0].stateful == 2);
  CHECK(st[0].full() == 2);
  // The serving cache per layer on one GPU carries the state.
  const KvTokenBytes t = kv_token_bytes(a, default_kv_quant(StoreDtype::bf16), 1, Explain::off);
  CHECK(near(t.state_per_layer.raw(), 1'600.0));
  CHECK(near(sequence_kv(a, st[0], t, 1000, 1, 0).state.raw(), 3'200.0));
}

TEST_CASE("gated DeltaNet import: bad sizes and foreign keys are refused") {
  std::string three_heads = kTinyNext + "}";
  three_heads.replace(three_heads.find("\"linear_num_value_heads\":4"), 26, "\"linear_num_value_heads\":3");
  CHECK(contains(errors(three_heads),
                 "/linear_num_value_heads: error: 3 value heads are not a multiple of 2 key heads"));
  CHECK(contains(errors(kTinyNext + R"(,"layer_types":["linear_attention","full_attention"]})"),
                 "/layer_types: error: has 2 entries for 4 layers"));
  CHECK(contains(errors(kTinyNext + R"(,"layer_types":["linear_attention","sliding_attention","linear_attention",
    "full_attention"]})"),
                 "entry 1 is \"sliding_attention\": expected 'linear_attention' or 'full_attention'"));
}

TEST_CASE("Qwen3-Next-80B-A3B: the real config within 1% of the published 80B, KV and state per sequence") {
  auto m = wl_io::load_model_file(kReal + "qwen3-next-80b-a3b-thinking/config.json");
  REQUIRE_MESSAGE(m.ok(), m.diagnostics().to_string());
  const auto& a = m->arch;
  CHECK(a.gdn_layer_count() == 36);
  CHECK(a.attention_layer_count() == 12);
  CHECK(a.moe_layer_count() == 48);
  // By hand: gated DeltaNet layer 2,048·(8,192 + 4,096) + 2,048·64 + 8,192·4 + 64 + 128 + 4,096·2,048 = 33,718,464;
  // gated attention 2,048·8,192 + 2·2,048·512 + 4,096·2,048 + 512 = 27,263,488; MoE 512·2,048 + 512·3·2,048·512 +
  // 3·2,048·512 + 2,048 = 1,614,809,088; norms 4,096; embedding and LM head 2·151,936·2,048; final norm 2,048:
  // 36·1,648,531,648 + 12·1,642,076,672 + 622,329,856 + 2,048 = 79,674,391,296.
  const auto p = parameter_counts(a, Explain::off);
  CHECK(p.total == 79'674'391'296);
  // Qwen's model card (huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct; transformers docs model_doc/qwen3_next.md):
  // "80B total parameters, only 3B active" — -0.41%.
  CHECK(double(p.total) / 80e9 == gptest::approx(1.0).epsilon(0.01));
  // Active: 10 of 512 experts + the shared expert: 3,874,929,408 with the embedding and LM head; 3,252,599,552
  // without both (the card's "3B", given to the billion: within its rounding, not within 1% of 3.0).
  CHECK(p.active == 3'874'929'408);
  CHECK(p.active - p.embedding - p.lm_head == 3'252'599'552);
  CHECK(std::abs(double(p.active - p.embedding - p.lm_head) / 1e9 - 3.0) < 0.5);
  // KV: 12 gated-attention layers × 2·2·256·2 B = 24,576 B per token; state: 36 × (3·8,192 + 32·128·128)·2 B =
  // 39,518,208 B per sequence whatever its length.
  const auto kv = kv_cache_size(a, 32768, 2.0, Explain::on);
  CHECK(near(kv.per_token_full.raw(), 24'576.0));
  CHECK(near(kv.state_per_sequence.raw(), 39'518'208.0));
  CHECK(near(kv.per_sequence.raw(), 24'576.0 * 32768 + 39'518'208.0));
  CHECK(contains(kv.derivation.formula, "gated DeltaNet state"));
}

TEST_CASE("DeepSeek sparse attention: indexer parameters, FLOPs over top-k keys, the indexer's key cache") {
  const auto a = hf(kTinyDsa + "}");
  REQUIRE(a.dsa);
  REQUIRE(a.mla);
  // MLA per layer: q_a 64·32 + its norm 32 + q_b 32·4·12 + kv_a 64·20 + its norm 16 + kv_b 16·4·16 + o 4·8·64 =
  // 7,984; indexer wq_b 32·2·32 + wk 64·32 + k_norm 2·32 + weights_proj 64·2 = 4,288; FFN 3·64·96; norms 128.
  const auto p = parameter_counts(a, Explain::off);
  CHECK(p.attention == 2 * (7'984 + 4'288));
  CHECK(p.total == 2 * (7'984 + 4'288 + 18'432 + 128) + 12'800 + 64);
  // Per token at context 100: the indexer scores all 100 tokens, 2·2·32 FLOPs each (×2 layers); the attention reads
  // min(100, 50) keys in MLA's MQA mode, 2·4·(20 + 16) FLOPs each.
  const auto f = flops_per_token(a, 100, Explain::off);
  CHECK(near(f.indexer_forward.raw(), 2.0 * 2 * 2 * 32 * 100));
  CHECK(near(f.attention_forward.raw(), 2.0 * 2 * 4 * 36 * 50));
  CHECK(near(flops_per_token(a, 40, Explain::off).attention_forward.raw(), 2.0 * 2 * 4 * 36 * 40));
  // Matmul weights per token: MLA 7,936 + indexer 4,224 + FFN 18,432 (×2) + LM head 6,400.
  CHECK(f.matmul_params == 2 * (7'936 + 4'224 + 18'432) + 6'400);
  // KV per token and layer: the latent and rotary key (16 + 4)·2 B + the indexer's 32 FP8 bytes (no scale below 128).
  const auto kv = kv_cache_size(a, 1000, 2.0, Explain::off);
  CHECK(near(kv.per_token_full.raw(), 2 * (40.0 + 32.0)));
  CHECK(near(kv.index_per_token.raw(), 64.0));
  CHECK(near(kv.per_sequence.raw(), 1000 * 144.0));  // every token is cached; only the reads are top-k
  const KvTokenBytes t = kv_token_bytes(a, default_kv_quant(StoreDtype::fp8), 2, Explain::off);
  CHECK(near(t.index_per_layer.raw(), 32.0));
  CHECK(near(t.per_layer.raw(), 20.0 + 32.0));  // fp8 latent, replicated on both ranks, + the indexer's keys
  CHECK(contains(errors(R"({"model_type":"deepseek_v32","hidden_size":64,"num_hidden_layers":2,
    "num_attention_heads":4,"intermediate_size":96,"vocab_size":100,"index_n_heads":2,"index_head_dim":32,
    "index_topk":50})"),
                 "DeepSeek sparse attention needs multi-head latent attention"));
}

TEST_CASE("DeepSeek-V3.2: the real config is read, the indexer adds 61 x 13,959,424 parameters to V3's layout") {
  auto m = wl_io::load_model_file(kReal + "deepseek-v3.2/config.json");
  REQUIRE_MESSAGE(m.ok(), m.diagnostics().to_string());
  const auto& a = m->arch;
  REQUIRE(a.dsa);
  CHECK(a.dsa->topk == 2048);
  // The same config read as DeepSeek-V3 (no indexer).
  wl::TransformerArch v3 = a;
  v3.dsa.reset();
  const auto p = parameter_counts(a, Explain::off), p3 = parameter_counts(v3, Explain::off);
  // Indexer per layer: wq_b 1,536·64·128 + wk 7,168·128 + k_norm 2·128 + weights_proj 7,168·64 = 13,959,424.
  CHECK(p.total - p3.total == 61LL * 13'959'424);
  // DeepSeek-V3's published 671B main model (arXiv:2412.19437 §1; V3.2 keeps its layout, DeepSeek-V3.2-Exp report
  // §2) + 0.85B of indexers: within 1% of 671B.
  CHECK(double(p.total) / 671e9 == gptest::approx(1.0).epsilon(0.01));
  // KV per token: 61·(576·2 B + 128 + 4 B of indexer key and scale) = 78,324 B in bf16.
  CHECK(near(kv_cache_size(a, 4096, 2.0, Explain::off).per_token_full.raw(), 61.0 * (1152 + 132)));
  // At 128K the attention reads 2,048 keys, the indexer scores all 131,072.
  const auto f = flops_per_token(a, 131072, Explain::off);
  CHECK(near(f.attention_forward.raw(), 61.0 * 2 * 128 * (576 + 512) * 2048));
  CHECK(near(f.indexer_forward.raw(), 61.0 * 2 * 64 * 128 * 131072));
}

TEST_CASE("attention sinks: GPT-OSS's one logit per head per layer, listed, and its sliding/full alternation") {
  auto m = wl_io::load_model_file(kReal + "gpt-oss-20b/config.json");
  REQUIRE_MESSAGE(m.ok(), m.diagnostics().to_string());
  const auto& a = m->arch;
  CHECK(a.attention_sinks);
  // layer_types: even layers slide over 128 tokens, odd layers are full (transformers' GptOssConfig: the same
  // alternation, sliding first, when layer_types is absent).
  CHECK(a.is_sliding_layer(0));
  CHECK_FALSE(a.is_sliding_layer(1));
  CHECK(a.sliding_layer_count() == 12);
  CHECK(a.attended_tokens(0, 4096) == 128);
  // Without layer_types, GptOssConfig's own rule gives the same alternation, sliding first.
  const auto tiny = hf(R"({"model_type":"gpt_oss","hidden_size":64,"num_hidden_layers":4,"num_attention_heads":4,
    "num_key_value_heads":2,"head_dim":16,"intermediate_size":32,"vocab_size":100,"num_local_experts":4,
    "num_experts_per_tok":2,"sliding_window":8})");
  CHECK(tiny.is_sliding_layer(0));
  CHECK_FALSE(tiny.is_sliding_layer(1));
  CHECK(tiny.is_sliding_layer(2));
  CHECK(tiny.sliding_layer_count() == 2);
  CHECK(tiny.attention_sinks);
  // The sinks are 64 parameters per layer in the attention: GPT-OSS-20B's attention with and without them.
  wl::TransformerArch no_sinks = a;
  no_sinks.attention_sinks = false;
  CHECK(parameter_counts(a, Explain::off).attention - parameter_counts(no_sinks, Explain::off).attention == 24 * 64);
  // No FLOPs of their own: the matmul weights per token are the same.
  CHECK(flops_per_token(a, 4096, Explain::off).matmul_params == flops_per_token(no_sinks, 4096, Explain::off).matmul_params);
  const auto show = cli_test::run({"model", "show", kReal + "gpt-oss-20b/config.json"});
  CHECK(show.rc == 0);
  CHECK(contains(show.out, "attention sinks"));
  CHECK(contains(show.out, "1536 parameters"));
}

TEST_CASE("model show, kv, serve and train name the new layer kinds") {
  const std::string next = kReal + "qwen3-next-80b-a3b-thinking/config.json";
  const auto show = cli_test::run({"model", "show", next});
  REQUIRE(show.rc == 0);
  CHECK(contains(show.out, "36 × gated DeltaNet (linear attention) + MoE with shared experts"));
  CHECK(contains(show.out, "12 × gated full attention + MoE with shared experts"));
  CHECK(contains(show.out, "gated DeltaNet state per sequence"));
  const auto kv =
      cli_test::run({"kv", "--model", next, "--gpu", "h100", "--context", "32768", "--tp", "4", "--explain"});
  CHECK(kv.rc == 0);
  CHECK(contains(kv.out, "36 gated DeltaNet (linear attention) layers hold a state of"));
  const auto serve = cli_test::run({"serve", "-m", next, "--gpu", "h100", "--tp", "4", "--explain"});
  CHECK(serve.rc == 0);
  CHECK(contains(serve.out, "36 × gated DeltaNet (linear attention)"));
  CHECK(contains(serve.out, "decode reads and writes their state, not a KV cache"));
  const auto train =
      cli_test::run({"train", "--model", next, "--gpu", "h100", "--gpus", "64", "--zero", "3", "--explain"});
  CHECK(train.rc == 0);
  CHECK(contains(train.out, "conv1d + gated delta rule"));
  CHECK(contains(train.out, "layer kinds (each priced from its own op graph): 12 × gated full attention"));
  // kv at TP 4: the KV per token per GPU counts the 12 attention layers only (1 KV head of 256 on each rank).
  const auto kv4 = cli_test::run({"kv", "--model", next, "--gpu", "h100", "--context", "32768", "--tp", "4"});
  CHECK(kv4.rc == 0);
  CHECK(contains(kv4.out, "per token per GPU        12.3 kB"));
  const std::string v32 = kReal + "deepseek-v3.2/config.json";
  const auto show32 = cli_test::run({"model", "show", v32});
  REQUIRE(show32.rc == 0);
  CHECK(contains(show32.out, "MLA + DeepSeek sparse attention (indexer, top-k keys)"));
  CHECK(contains(show32.out, "DSA indexer keys per token"));
  const auto serve32 =
      cli_test::run({"serve", "-m", v32, "--gpu", "h200", "--tp", "8", "--weight-dtype", "fp8", "--explain"});
  CHECK(serve32.rc == 0);
  CHECK(contains(serve32.out, "the indexer scores every held token (FP8), the attention reads its top-k"));
}
