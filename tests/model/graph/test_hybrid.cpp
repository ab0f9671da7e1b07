// Hybrid layer kinds (#23 deliverable 2): Mamba-2 mixers, mixer-only and FFN-only layers (Nemotron-H), their
// parameters, FLOPs, state cache and the {mixer} × {FFN} layer kinds of the op graph.
#include <doctest/doctest.h>
#include "approx.hpp"

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
using gpuplan::test::arch;
using gpuplan::test::hf;

namespace {
bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }
std::string errors(const std::string& text) {
  Diagnostics d;
  auto j = json_io::parse(text, "config.json", d);
  REQUIRE(j.has_value());
  return wl_io::import_hf_config(*j, "config.json", "").diagnostics().to_string();
}

// A small Nemotron-H: h 64, layers M * - M (Mamba-2, attention, MLP, Mamba-2); Mamba-2 with 4 heads of 16 (d_inner
// 64), state 8, 2 groups, conv 4, chunk 32; attention 4 query / 2 KV heads of 16; MLP width 96; vocabulary 100.
const std::string kTinyHead = R"({"model_type":"nemotron_h","hidden_size":64,"num_hidden_layers":4,
  "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,
  "intermediate_size":96,"vocab_size":100,"max_position_embeddings":4096,"mamba_num_heads":4,"mamba_head_dim":16,
  "ssm_state_size":8,"n_groups":2,"conv_kernel":4,"chunk_size":32,"use_conv_bias":true,"use_bias":false,
  "tie_word_embeddings":false,"attention_bias":false,"mlp_bias":false)";
std::string tiny(const std::string& pattern) { return kTinyHead + R"(,"hybrid_override_pattern":")" + pattern + "\""; }
const std::string kTiny = tiny("M*-M");
}  // namespace

TEST_CASE("Nemotron-H pattern: M Mamba-2, * attention, - MLP, each layer one block with one norm") {
  const auto a = hf(kTiny + "}");
  REQUIRE(a.mamba);
  CHECK(a.mamba_layer_count() == 2);
  CHECK(a.attention_layer_count() == 1);
  CHECK(a.mixer(0) == wl::Mixer::mamba2);
  CHECK_FALSE(a.has_ffn(0));
  CHECK(a.mixer(2) == wl::Mixer::none);
  CHECK(a.has_ffn(2));
  CHECK(a.hybrid());
  // By hand. Mamba-2 layer: in_proj 64·(2·64 + 2·2·8 + 4) = 64·164 = 10,496; conv1d over 64 + 2·2·8 = 96 channels:
  // 96·4 + 96 bias = 480; A_log, D, dt_bias 3·4 = 12; gated norm 64; out_proj 64·64 = 4,096; block norm 64:
  // 15,212. Attention layer: 64·64 + 2·64·32 + 64·64 + norm 64 = 12,352. MLP layer (squared ReLU, two matrices):
  // 2·64·96 + 64 = 12,352. Embedding and LM head 2·100·64 = 12,800, final norm 64.
  const auto p = parameter_counts(a, Explain::off);
  CHECK(p.ssm == 2 * (10'496 + 480 + 12 + 64 + 4'096));
  CHECK(p.attention == 64 * 64 + 2 * 64 * 32 + 64 * 64);
  CHECK(p.dense_mlp == 2 * 64 * 96);
  CHECK(p.norms == 4 * 64 + 64);
  CHECK(p.total == 2 * 15'212 + 12'352 + 12'352 + 12'800 + 64);
  // The layer kinds, each with its count.
  std::string kinds;
  for_each_layer_kind(a, [&](LayerKind k, std::int64_t n) {
    kinds += std::to_string(n) + " " + attention_span_name(a, k) + " + " + ffn_name(a, k) + "; ";
  });
  CHECK(kinds == "1 full attention + no FFN; 2 Mamba-2 SSM + no FFN; 1 no mixer + dense FFN; ");
}

TEST_CASE("Mamba-2: FLOPs of one layer by hand, the state per sequence, no KV on Mamba and MLP layers") {
  const auto a = hf(kTiny + "}");
  // Matmul weights per token: Mamba-2 in_proj + out_proj 10,496 + 4,096 = 14,592 (×2 layers), attention 12,288,
  // MLP 12,288, LM head 6,400.
  const auto f = flops_per_token(a, 100, Explain::off);
  CHECK(f.matmul_params == 2 * 14'592 + 12'288 + 12'288 + 6'400);
  // SSD scan per token and layer at context 100 (chunk Q = 32, P = 16, N = 8, 4 heads, 2 groups):
  // 4·(2·32·16 + 4·8·16) + 2·2·32·8 = 4·(1,024 + 512) + 1,024 = 7,168.
  CHECK(ssd_scan_flops_per_token(4, 16, 8, 2, 32, 100) == gptest::approx(7'168.0));
  CHECK(f.ssm_forward.raw() == gptest::approx(2 * 7'168.0));
  // Attention on the one attention layer only: 2·4·(16 + 16)·100.
  CHECK(f.attention_forward.raw() == gptest::approx(2.0 * 4 * 32 * 100));
  // A chunk longer than the sequence is cut to it: Q = 10.
  CHECK(ssd_scan_flops_per_token(4, 16, 8, 2, 32, 10) == gptest::approx(4 * (2 * 10 * 16 + 4 * 8 * 16) + 2 * 2 * 10 * 8));
  // Cache of a sequence of 1,000 tokens in bf16: KV on the attention layer 2·2·16·2 B·1,000 = 128,000 B; each Mamba-2
  // layer holds (4 − 1)·96 conv elements in bf16 (576 B) and 4·16·8 = 512 SSM elements in float32 (the transformers
  // default of mamba_ssm_cache_dtype, which vLLM takes: 2,048 B), whatever the length.
  const auto kv = kv_cache_size(a, 1000, 2.0, Explain::off);
  CHECK(kv.per_token_full.raw() == gptest::approx(128.0));
  CHECK(kv.state_per_sequence.raw() == gptest::approx(2 * (576.0 + 2'048.0)));
  CHECK(kv.per_sequence.raw() == gptest::approx(128'000.0 + 2 * 2'624.0));
  CHECK(kv_cache_size(a, 10, 2.0, Explain::off).state_per_sequence.raw() == gptest::approx(2 * 2'624.0));
  // bfloat16 SSM state when the config says so; under TP 2 each rank holds half the heads and channels.
  const auto b = hf(kTiny + R"(,"mamba_ssm_cache_dtype":"bfloat16"})");
  CHECK(mamba2_state_bytes(b, 1).total().raw() == gptest::approx(576.0 + 1'024.0));
  CHECK(mamba2_state_bytes(b, 2).total().raw() == gptest::approx(288.0 + 512.0));
  // TP 4 over 2 groups: vLLM replicates the groups up to 4 (extra_groups_for_head_shards): (64 + 2·4·8)/4 channels.
  CHECK(mamba2_state_bytes(b, 4).conv_elements == gptest::approx(3.0 * (64 + 2 * 4 * 8) / 4.0));
}

TEST_CASE("Nemotron-H import: malformed patterns and Mamba keys elsewhere are refused") {
  CHECK(contains(errors(tiny("M*-") + "}"),
                 "/hybrid_override_pattern: error: has 3 layers but num_hidden_layers is 4"));
  CHECK(contains(errors(tiny("M*-X") + "}"),
                 "character 3 is 'X': expected M (Mamba-2), * (attention), - (MLP) or E (MoE)"));
  CHECK(contains(errors(tiny("M*-E") + "}"),
                 "has 1 MoE layers (E) but the config gives no routed experts"));
  CHECK(contains(errors(R"({"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,
    "intermediate_size":96,"vocab_size":100,"ssm_state_size":8})"),
                 "/ssm_state_size: error: 8: gpuplan reads it as Nemotron-H's (model_type nemotron_h)"));
  // layers_block_type, transformers' list form, says the same as the pattern.
  const auto a = hf(R"({"model_type":"nemotron_h","hidden_size":64,"num_hidden_layers":4,"num_attention_heads":4,
    "num_key_value_heads":2,"head_dim":16,"intermediate_size":96,"vocab_size":100,"mamba_num_heads":4,
    "mamba_head_dim":16,"ssm_state_size":8,"n_groups":2,
    "layers_block_type":["linear_attention","full_attention","mlp","mamba"]})");
  CHECK(parameter_counts(a, Explain::off).total == parameter_counts(hf(kTiny + "}"), Explain::off).total);
}

TEST_CASE("Nemotron-H-8B: published 8B, Mamba-2 state instead of KV on 24 of 52 layers") {
  const auto& a = arch("nemotron-h-8b");
  CHECK(a.mamba_layer_count() == 24);
  CHECK(a.attention_layer_count() == 4);
  // By hand (data/models/nemotron-h-8b.json notes): 24·109,640,064 + 4·41,947,136 + 24·176,164,864 + 2·131,072·4,096
  // + 4,096 = 8,100,852,736; the paper's 8B within its rounding (+1.3%).
  const auto p = parameter_counts(a, Explain::off);
  CHECK(p.total == 8'100'852'736);
  CHECK(double(p.total) / 1e9 == gptest::approx(8.0).epsilon(0.02));
  // KV on the 4 attention layers: 4·2·8·128·2 B = 16,384 B per token; state 24·(3·10,240·2 B + 128·64·128·4 B).
  const auto kv = kv_cache_size(a, 8192, 2.0, Explain::off);
  CHECK(kv.per_token_full.raw() == gptest::approx(16'384.0));
  CHECK(kv.state_per_sequence.raw() == gptest::approx(24.0 * (3 * 10'240 * 2 + 128 * 64 * 128 * 4)));
  CHECK(kv.per_sequence.raw() == gptest::approx(16'384.0 * 8192 + 102'137'856.0));
}

TEST_CASE("real Nemotron-H configs: 56B and Nemotron-3 Nano 30B-A3B within 1% of the published counts") {
  const std::string dir = std::string(GPUPLAN_TEST_FIXTURES) + "/hf/real/";
  auto load = [&](const std::string& name) { return wl_io::load_model_file(dir + name + "/config.json"); };
  {
    auto m = load("nemotron-h-56b-base-8k");
    REQUIRE_MESSAGE(m.ok(), m.diagnostics().to_string());
    // arXiv:2504.03624: 56B. By hand 54 Mamba-2 + 10 attention + 54 MLP layers: 56,324,350,464.
    const auto p = parameter_counts(m->arch, Explain::off);
    CHECK(p.total == 56'324'350'464);
    CHECK(double(p.total) / 1e9 == gptest::approx(56.0).epsilon(0.01));
  }
  {
    auto m = load("nemotron-3-nano-30b-a3b-bf16");
    REQUIRE_MESSAGE(m.ok(), m.diagnostics().to_string());
    const auto& a = m->arch;
    CHECK(a.mamba_layer_count() == 23);
    CHECK(a.attention_layer_count() == 6);
    CHECK(a.moe_layer_count() == 23);
    // 31.6B total, 3.2B active (3.6B with the embedding), as NVIDIA's card and its copies give them: by hand
    // 31,577,940,288 and 3,580,076,352 (3,227,754,816 without the input embedding).
    const auto p = parameter_counts(a, Explain::off);
    CHECK(p.total == 31'577'940'288);
    CHECK(p.active == 3'580'076'352);
    CHECK(double(p.total) / 1e9 == gptest::approx(31.6).epsilon(0.01));
    CHECK(double(p.active - p.embedding) / 1e9 == gptest::approx(3.2).epsilon(0.01));
    CHECK(double(p.active) / 1e9 == gptest::approx(3.6).epsilon(0.01));
  }
}

TEST_CASE("kv, serve and train run on a hybrid and say what they hold") {
  const auto kv = cli_test::run({"kv", "--model", "nemotron-h-8b", "--gpu", "h100", "--context", "8192", "--explain"});
  CHECK(kv.rc == 0);
  CHECK(contains(kv.out, "Mamba-2"));
  const auto serve = cli_test::run({"serve", "-m", "nemotron-h-8b", "--gpu", "h100", "--format", "json"});
  CHECK(serve.rc == 0);
  const auto train = cli_test::run({"train", "--model", "nemotron-h-8b", "--gpu", "h100", "--gpus", "8", "--zero", "1"});
  CHECK(train.rc == 0);
  const auto show = cli_test::run({"model", "show", "nemotron-h-8b"});
  CHECK(show.rc == 0);
  CHECK(contains(show.out, "24 × Mamba-2 SSM + no FFN"));
}
