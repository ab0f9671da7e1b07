#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "../cli/cli_runner.hpp"
#include "gpuplan/model/params.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::hf;

namespace {
Diagnostics import_errors(const std::string& text) {
  Diagnostics d;
  auto j = json_io::parse(text, "config.json", d);
  if (!j) return d;
  auto r = wl_io::import_hf_config(*j, "config.json");
  return r.diagnostics();
}
}  // namespace

TEST_CASE("num_key_value_heads absent or null means MHA, and the assumption is recorded") {
  const std::string base = R"({"model_type":"llama","hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,
    "intermediate_size":11008,"vocab_size":32000,"tie_word_embeddings":false)";
  for (const std::string tail : {"}", R"(,"num_key_value_heads":null})"}) {
    const auto a = hf(base + tail);
    CHECK(a.kv_heads == 32);
    CHECK(a.head_dim == 128);
    CHECK(std::count(a.assumptions.begin(), a.assumptions.end(),
                     "num_key_value_heads absent or null: 32 KV heads (multi-head attention)") == 1);
  }
}

TEST_CASE("explicit head_dim wins over hidden / heads") {
  const auto a = hf(R"({"model_type":"qwen3","hidden_size":2560,"num_hidden_layers":36,"num_attention_heads":32,
    "num_key_value_heads":8,"head_dim":128,"intermediate_size":9728,"vocab_size":151936,"tie_word_embeddings":true})");
  CHECK(a.head_dim == 128);
  CHECK(a.qk_norm);
  CHECK(a.tied_embeddings);
}

TEST_CASE("nested text_config of a multimodal model is read") {
  const auto a = hf(R"({"model_type":"gemma3","architectures":["Gemma3ForConditionalGeneration"],
    "text_config":{"model_type":"gemma3_text","hidden_size":2560,"num_hidden_layers":34,"num_attention_heads":8,
    "num_key_value_heads":4,"head_dim":256,"intermediate_size":10240,"vocab_size":262208,"sliding_window":1024,
    "sliding_window_pattern":6}})");
  CHECK(a.hidden == 2560);
  CHECK(a.sliding_window == 1024);
  CHECK(a.sliding_layer_count() == 34 - 5);  // layers 6, 12, ..., 30 are global
  CHECK(a.tied_embeddings);
}

TEST_CASE("use_sliding_window false disables Qwen2's window") {
  const auto a = hf(R"({"model_type":"qwen2","hidden_size":3584,"num_hidden_layers":28,"num_attention_heads":28,
    "num_key_value_heads":4,"intermediate_size":18944,"vocab_size":152064,"sliding_window":131072,
    "use_sliding_window":false,"max_window_layers":28,"tie_word_embeddings":false})");
  CHECK(a.sliding_layer_count() == 0);
  CHECK(a.qkv_bias);
  CHECK_FALSE(a.o_bias);
}

TEST_CASE("MoE fields: Qwen2-MoE shared expert with gate, Mixtral local experts") {
  const auto q = hf(R"({"model_type":"qwen2_moe","hidden_size":2048,"num_hidden_layers":24,"num_attention_heads":16,
    "num_key_value_heads":16,"intermediate_size":5632,"moe_intermediate_size":1408,"shared_expert_intermediate_size":5632,
    "num_experts":60,"num_experts_per_tok":4,"decoder_sparse_step":1,"vocab_size":151936,"tie_word_embeddings":false})");
  REQUIRE(q.moe.has_value());
  CHECK(q.moe->shared_experts == 1);
  CHECK(q.moe->shared_intermediate == 5632);
  CHECK(q.moe_layer_count() == 24);
  // Qwen1.5-MoE-A2.7B: 14.3B total, 2.7B activated (Qwen blog, "Qwen1.5-MoE: Matching 7B Model Performance with 1/3
  // Activated Parameters"); the activated figure there excludes embeddings.
  const auto p = model::parameter_counts(q, Explain::off);
  CHECK(static_cast<double>(p.total) / 1e9 == gptest::approx(14.3).epsilon(0.005));
  CHECK(static_cast<double>(p.active - p.embedding - p.lm_head) / 1e9 == gptest::approx(2.0).epsilon(0.05));
}

TEST_CASE("DeepSeek layer pattern: first_k_dense_replace dense layers, then every moe_layer_freq-th") {
  const auto& a = gpuplan::test::arch("deepseek-v3");
  CHECK(a.moe_layer_count() == 58);
  CHECK_FALSE(a.is_moe_layer(2));
  CHECK(a.is_moe_layer(3));
  CHECK(a.mla.has_value());
  CHECK(a.mtp_layers == 1);
}

TEST_CASE("GPT-2 style config: learned positions, LayerNorm, biases, plain MLP, 4h default") {
  const auto a = hf(R"({"model_type":"gpt2","n_embd":768,"n_layer":12,"n_head":12,"n_positions":1024,
    "vocab_size":50257,"n_inner":null})");
  CHECK(a.intermediate == 3072);
  CHECK(a.position == wl::PositionKind::learned);
  CHECK(a.tied_embeddings);
  // GPT-2 small is 124M (124,439,808 with tied embeddings: HF model card / nanoGPT).
  CHECK(model::parameter_counts(a, Explain::off).total == 124439808);
}

TEST_CASE("bad configs are diagnosed with file and pointer") {
  // A model type without transformers defaults in data/hf/model_type_defaults.json: every size must be given.
  CHECK(import_errors(R"({"model_type":"exaone","num_hidden_layers":32})").to_string() ==
        "config.json: /: error: missing 'hidden_size' or 'n_embd' (model width)\n"
        "config.json: /: error: missing 'num_attention_heads' or 'n_head' (number of attention heads)\n"
        "config.json: /: error: missing 'vocab_size' (vocabulary size)\n"
        "config.json: /: error: missing 'intermediate_size' (dense FFN width)\n");
  CHECK(import_errors(R"({"model_type":"llama","hidden_size":"4096","num_hidden_layers":32,"num_attention_heads":32,
    "intermediate_size":11008,"vocab_size":32000})").to_string().find(
        "config.json: /hidden_size: error: expected an integer, found a string \"4096\"") != std::string::npos);
  CHECK(import_errors(R"({"model_type":"llama","hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,
    "num_key_value_heads":5,"intermediate_size":11008,"vocab_size":32000})").to_string().find(
        "config.json: /num_key_value_heads: error: 32 query heads are not divisible into 5 KV-head groups") !=
        std::string::npos);
  CHECK(import_errors(R"({"model_type":"llama","hidden_size":-1})").to_string().find(
        "config.json: /hidden_size: error: value -1 is out of range") != std::string::npos);
  // The outer model_type of a multimodal config that is not a string (an uncaught nlohmann type_error before; found
  // while fixing fuzz_calib's finding of the same kind, docs/reliability.md).
  CHECK(import_errors(R"({"model_type":5,"text_config":{"hidden_size":64,"num_hidden_layers":2,
    "num_attention_heads":4,"intermediate_size":128,"vocab_size":100}})").to_string() ==
        "config.json: /model_type: error: expected a string, found an integer\n");
}

TEST_CASE("dropout probabilities: GPT-2, BERT and Llama spellings, and the GPT-style assumption when the config is silent") {
  const std::string gpt2 = R"({"model_type":"gpt2","n_embd":768,"n_layer":12,"n_head":12,"vocab_size":50257)";
  const auto silent = hf(gpt2 + "}");
  CHECK_FALSE(silent.attention_dropout.has_value());
  CHECK(silent.attention_dropout_on());  // GPT-style: plain MLP with LayerNorm (transformers' GPT-2 default is 0.1)
  CHECK(silent.hidden_dropout_on());
  const auto off = hf(gpt2 + R"(,"attn_pdrop":0.0,"resid_pdrop":0.0})");
  CHECK_FALSE(off.attention_dropout_on());
  CHECK_FALSE(off.hidden_dropout_on());
  const auto split = hf(gpt2 + R"(,"attn_pdrop":0.1,"resid_pdrop":0.0})");
  CHECK(split.attention_dropout_on());
  CHECK_FALSE(split.hidden_dropout_on());
  const auto llama = hf(R"({"model_type":"llama","hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,
    "intermediate_size":11008,"vocab_size":32000,"tie_word_embeddings":false,"attention_dropout":0.1})");
  REQUIRE(llama.attention_dropout.has_value());
  CHECK(*llama.attention_dropout == gptest::approx(0.1));
  CHECK(llama.attention_dropout_on());
  CHECK_FALSE(llama.hidden_dropout_on());  // gated/RMSNorm and silent on hidden dropout: none assumed
  const auto bert = hf(R"({"model_type":"bert","hidden_size":768,"num_hidden_layers":12,"num_attention_heads":12,
    "intermediate_size":3072,"vocab_size":30522,"attention_probs_dropout_prob":0.1,"hidden_dropout_prob":0.1})");
  CHECK(bert.attention_dropout_on());
  CHECK(bert.hidden_dropout_on());
  // A probability outside [0, 1) is an error with its pointer.
  const auto bad = import_errors(gpt2 + R"(,"attn_pdrop":1.5})");
  CHECK(bad.has_errors());
  CHECK(bad.to_string().find("/attn_pdrop") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------------------------
// Silent choices of the importer turned into errors (issue #26).
namespace {
// DeepSeek-V3's sizes without its MLA and MoE keys (config.json of deepseek-ai/DeepSeek-V3).
// The model_type is deepseek_v2, which has no entry in data/hf/model_type_defaults.json: for deepseek_v3 transformers'
// defaults would fill the missing MLA sizes (test_hf_rules.cpp).
const std::string kDeepseekBase = R"({"model_type":"deepseek_v2","hidden_size":7168,"num_hidden_layers":61,
  "num_attention_heads":128,"num_key_value_heads":128,"intermediate_size":18432,"vocab_size":129280,
  "tie_word_embeddings":false)";
const std::string kMlaRule = " (MLA needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim; "
                             "q_lora_rank may be null)\n";
}  // namespace

TEST_CASE("a partial MLA config is an error naming the missing keys, not plain multi-head attention with 25x the KV") {
  SUBCASE("query compression and rope size without the latent") {
    CHECK(import_errors(kDeepseekBase + R"(,"q_lora_rank":1536,"qk_rope_head_dim":64})").to_string() ==
          std::string("config.json: /: error: incomplete multi-head latent attention (MLA) config: 'q_lora_rank', "
                      "'qk_rope_head_dim' given but 'kv_lora_rank', 'qk_nope_head_dim', 'v_head_dim' missing") +
              kMlaRule);
  }
  SUBCASE("the latent without the rope size (it was read as 0)") {
    CHECK(import_errors(kDeepseekBase + R"(,"kv_lora_rank":512,"qk_nope_head_dim":128,"v_head_dim":128})")
              .to_string() ==
          std::string("config.json: /: error: incomplete multi-head latent attention (MLA) config: 'kv_lora_rank', "
                      "'qk_nope_head_dim', 'v_head_dim' given but 'qk_rope_head_dim' missing") +
              kMlaRule);
  }
  SUBCASE("null is absent") {
    CHECK(import_errors(kDeepseekBase + R"(,"kv_lora_rank":512,"qk_nope_head_dim":128,"qk_rope_head_dim":null,
      "v_head_dim":null})").to_string() ==
          std::string("config.json: /: error: incomplete multi-head latent attention (MLA) config: 'kv_lora_rank', "
                      "'qk_nope_head_dim' given but 'qk_rope_head_dim', 'v_head_dim' missing") +
              kMlaRule);
  }
  SUBCASE("every MLA key null is a model without MLA") {
    const auto a = hf(kDeepseekBase + R"(,"q_lora_rank":null,"kv_lora_rank":null,"qk_nope_head_dim":null,
      "qk_rope_head_dim":null,"v_head_dim":null})");
    CHECK_FALSE(a.mla.has_value());
  }
  SUBCASE("through the CLI: exit 2") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path() / (std::string("gpuplan-test-mla-") + std::to_string(::getpid()));
    fs::create_directories(dir);
    const fs::path cfg = dir / "config.json";
    std::ofstream(cfg) << kDeepseekBase + R"(,"kv_lora_rank":512,"v_head_dim":128})";
    const auto r = cli_test::run({"model", "show", cfg.string()});
    CHECK(r.rc == cli_test::kInvalid);
    CHECK(cli_test::contains(r.err, cfg.string() + ": /: error: incomplete multi-head latent attention (MLA) config: "
                                                   "'kv_lora_rank', 'v_head_dim' given but 'qk_nope_head_dim', "
                                                   "'qk_rope_head_dim' missing"));
    fs::remove_all(dir);
  }
}

TEST_CASE("DeepSeek-V2-Lite: q_lora_rank null is MLA without query compression") {
  // config.json of deepseek-ai/DeepSeek-V2-Lite (its q_lora_rank is null).
  const auto a = hf(R"({"model_type":"deepseek_v2","hidden_size":2048,"num_hidden_layers":27,"num_attention_heads":16,
    "num_key_value_heads":16,"intermediate_size":10944,"moe_intermediate_size":1408,"n_routed_experts":64,
    "n_shared_experts":2,"num_experts_per_tok":6,"first_k_dense_replace":1,"moe_layer_freq":1,"kv_lora_rank":512,
    "q_lora_rank":null,"qk_nope_head_dim":128,"qk_rope_head_dim":64,"v_head_dim":128,"vocab_size":102400,
    "max_position_embeddings":163840,"tie_word_embeddings":false})");
  REQUIRE(a.mla.has_value());
  CHECK(a.mla->q_lora_rank == 0);
  CHECK(a.mla->kv_lora_rank == 512);
  CHECK(a.head_dim == 192);
  REQUIRE(a.moe.has_value());
  CHECK(a.moe->num_experts == 64);
  CHECK(a.moe->experts_per_token == 6);
  // DeepSeek-V2 paper (arXiv:2405.04434), DeepSeek-V2-Lite: 15.7B total parameters.
  const auto total = static_cast<double>(model::parameter_counts(a, Explain::off).total);
  CHECK(total / 1e9 == gptest::approx(15.7).epsilon(0.005));
}

TEST_CASE("experts per token must be <= number of experts: top-k above the count is an error, not a dense model") {
  const std::string mixtral = R"({"model_type":"mixtral","hidden_size":4096,"num_hidden_layers":32,
    "num_attention_heads":32,"num_key_value_heads":8,"intermediate_size":14336,"vocab_size":32000,
    "tie_word_embeddings":false)";
  SUBCASE("one local expert, top-2 (was read as dense, silently)") {
    CHECK(import_errors(mixtral + R"(,"num_local_experts":1,"num_experts_per_tok":2})").to_string() ==
          "config.json: /num_experts_per_tok: error: 2 experts per token but 1 expert ('num_local_experts'): experts "
          "per token must be <= number of experts\n");
  }
  SUBCASE("DeepSeek and GPT-OSS spellings") {
    CHECK(import_errors(mixtral + R"(,"n_routed_experts":4,"num_experts_per_tok":8})").to_string() ==
          "config.json: /num_experts_per_tok: error: 8 experts per token but 4 experts ('n_routed_experts'): experts "
          "per token must be <= number of experts\n");
    CHECK(import_errors(mixtral + R"(,"num_local_experts":1,"experts_per_token":4})").to_string() ==
          "config.json: /experts_per_token: error: 4 experts per token but 1 expert ('num_local_experts'): experts "
          "per token must be <= number of experts\n");
  }
  SUBCASE("one expert with top-1 is a dense FFN, and the import says so") {
    const auto a = hf(mixtral + R"(,"num_local_experts":1,"num_experts_per_tok":1})");
    CHECK_FALSE(a.moe.has_value());
    CHECK(a.intermediate == 14336);
    CHECK(std::find(a.assumptions.begin(), a.assumptions.end(),
                    "num_local_experts is 1: one expert that every token uses, read as a dense FFN of width 14336") !=
          a.assumptions.end());
  }
  SUBCASE("top-k equal to the expert count is fine") {
    const auto a = hf(mixtral + R"(,"num_local_experts":8,"num_experts_per_tok":8})");
    REQUIRE(a.moe.has_value());
    CHECK(a.moe->experts_per_token == 8);
  }
}
