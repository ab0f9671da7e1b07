// The Hugging Face importer's rules (issue #23): every key of a config is read, on a reviewed list
// (data/hf/config_keys.json: ignored, not counted, refused) or an error; transformers' per-model-type defaults
// (data/hf/model_type_defaults.json) fill absent keys and are listed; sliding/global layer patterns; Infinity.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "test_paths.hpp"
#include "../../workloads/io/src/hf_rules.hpp"
#include "../cli/cli_runner.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/vision_tower.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::hf;

namespace {

struct Imported {
  Result<wl::TransformerArch> arch;
  std::vector<wl_io::HfKeyNote> ignored;
};
Imported import_text(const std::string& text) {
  Diagnostics d;
  auto j = json_io::parse(text, "config.json", d);
  REQUIRE_MESSAGE(j.has_value(), d.to_string());
  std::vector<wl_io::HfKeyNote> ignored;
  auto r = wl_io::import_hf_config(*j, "config.json", "", &ignored);
  return {std::move(r), std::move(ignored)};
}
std::string errors(const std::string& text) { return import_text(text).arch.diagnostics().to_string(); }
bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }
bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }
const wl_io::HfKeyNote* note_with(const std::vector<wl_io::HfKeyNote>& notes, const std::string& key) {
  for (const auto& n : notes)
    if (has(n.keys, key)) return &n;
  return nullptr;
}
double kv_sequence_bytes(const wl::TransformerArch& a, std::int64_t tokens) {
  return model::kv_cache_size(a, tokens, 2.0, Explain::off).per_sequence.raw();
}

// A small Llama config every size of which is given.
const std::string kLlama = R"({"model_type":"llama","hidden_size":256,"num_hidden_layers":2,"num_attention_heads":4,
  "num_key_value_heads":4,"intermediate_size":512,"vocab_size":1000,"max_position_embeddings":2048,
  "tie_word_embeddings":false,"attention_bias":false,"mlp_bias":false)";

}  // namespace

TEST_CASE("the compiled-in data/hf rule files decode without diagnostics") {
  CHECK(wl_io::hf_rules_diagnostics().to_string() == "");
  const auto& rules = wl_io::hf_rules();
  for (const char* t : {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
                        "gemma3_text", "gemma3", "cohere", "starcoder2", "phi3", "deepseek_v3", "gpt_oss", "olmo2",
                        "nemotron", "granite", "llava", "llama4_text", "llama4"})
    CHECK_MESSAGE(rules.type(t) != nullptr, t);
}

TEST_CASE("a broken rule file is diagnosed: a default for a key the importer does not read, a key on two lists") {
  const std::string defaults = R"({"schema":1,"kind":"hf_model_type_defaults","transformers":"x","sources":[],
    "model_types":{"llama":{"file":"f","commit":"c","defaults":{"rms_norm_eps":1e-5}}}})";
  const std::string keys = R"({"schema":1,"kind":"hf_config_keys","sources":[],"not_counted":[],
    "refused_model_types":[],"ignored":[{"keys":["bos_token_id","hidden_size"],"why":"w"}],
    "refused":[{"keys":["bos_token_id"],"why":"r","feature":"f"}]})";
  const auto r = wl_io::decode_hf_rules(defaults, keys);
  CHECK(r.diags.to_string() ==
        "data/hf/model_type_defaults.json: /model_types/llama/defaults/rms_norm_eps: error: 'rms_norm_eps' is not a "
        "key the importer reads: a default for it would change nothing\n"
        "data/hf/config_keys.json: /ignored/0: error: key 'hidden_size' is both read by the importer and on "
        "'ignored'\n"
        "data/hf/config_keys.json: /refused/0: error: key 'bos_token_id' is both on 'ignored' and on 'refused'\n");
}

TEST_CASE("an unknown key is an error naming its pointer and value, not silently ignored") {
  CHECK(errors(kLlama + R"(,"text_config":{},"shared_expert_count":2})").find(
            "config.json: /shared_expert_count: error: unknown key 'shared_expert_count' = 2: gpuplan cannot tell "
            "whether it changes the model's size or cost, so it stops rather than guess (#23)") != std::string::npos);
  // Inside a multimodal config the pointer names the nested key.
  CHECK(contains(errors(R"({"model_type":"gemma3","text_config":{"model_type":"gemma3_text","hidden_size":64,
    "num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":32,"intermediate_size":128,
    "vocab_size":100,"mystery":[1,2]}})"),
                 "config.json: /text_config/mystery: error: unknown key 'mystery' = [1,2]"));
}

TEST_CASE("reviewed keys are ignored and listed with their reason, grouped") {
  const auto r = import_text(kLlama + R"(,"bos_token_id":1,"eos_token_id":[2,3],"rms_norm_eps":1e-5,
    "torch_dtype":"bfloat16","quantization_config":{"quant_method":"fp8"},"transformers_version":"4.44.0"})");
  REQUIRE(r.arch.ok());
  const auto* tokens = note_with(r.ignored, "bos_token_id");
  REQUIRE(tokens != nullptr);
  CHECK(tokens->keys == std::vector<std::string>{"bos_token_id", "eos_token_id"});
  CHECK(tokens->why == "token ids");
  CHECK(tokens->counted);
  const auto* precision = note_with(r.ignored, "quantization_config");
  REQUIRE(precision != nullptr);
  CHECK(has(precision->keys, "torch_dtype"));
  CHECK(contains(precision->why, "gpuplan takes weight and KV precision from the plan"));
  CHECK(note_with(r.ignored, "hidden_size") == nullptr);  // read, not ignored
}

TEST_CASE("refused keys: the layer kind that is not modelled, with the value, and harmless values are accepted") {
  SUBCASE("Llama-4 keys on a model type that is not Llama 4: a step other than 1, the dense width") {
    CHECK(errors(kLlama + R"(,"interleave_moe_layer_step":2})") ==
          "config.json: /interleave_moe_layer_step: error: 2: gpuplan reads it as Llama 4's (model_type llama4_text) "
          "and does not know what it means for model_type 'llama'; gpuplan refuses the config rather than import a "
          "wrong model\n");
    CHECK(contains(errors(kLlama + R"(,"intermediate_size_mlp":16384})"), "/intermediate_size_mlp: error: 16384: "));
    CHECK(import_text(kLlama + R"(,"interleave_moe_layer_step":1})").arch.ok());
  }
  SUBCASE("Mamba-2 keys on a model type that is not Nemotron-H: each named, and the MTP pattern refused") {
    const std::string e = errors(kLlama + R"(,"hybrid_override_pattern":"M-M*","mamba_num_heads":64,"ssm_state_size":128})");
    CHECK(contains(e, "config.json: /hybrid_override_pattern: error: \"M-M*\": gpuplan reads it as Nemotron-H's "
                      "(model_type nemotron_h) and does not know what it means for model_type 'llama'"));
    CHECK(contains(e, "/mamba_num_heads: error: 64: "));
    CHECK(contains(e, "/ssm_state_size: error: 128: "));
    CHECK(contains(errors(kLlama + R"(,"mtp_hybrid_override_pattern":"*E"})"),
                   "'mtp_hybrid_override_pattern' = \"*E\": Mamba keys are read for model_type nemotron_h only"));
  }
  SUBCASE("DeepSeek sparse attention keys on a model type that does not read them: each named") {
    const std::string e = errors(kLlama + R"(,"index_topk":2048,"index_n_heads":64})");
    CHECK(contains(e, "config.json: /index_topk: error: 2048: gpuplan reads it as DeepSeek sparse attention's "
                      "(model_type deepseek_v32 or glm_moe_dsa) and does not know what it means for model_type "
                      "'llama'; gpuplan refuses the config rather than import a wrong model"));
    CHECK(contains(e, "/index_n_heads: error: 64: "));
    // GLM-5.x's shared-indexer schedule is read for glm_moe_dsa only.
    CHECK(contains(errors(kLlama + R"(,"index_topk_freq":4})"),
                   "/index_topk_freq: error: 4: gpuplan reads it as GLM-5.x's shared-indexer or MLP layer schedule "
                   "(model_type glm_moe_dsa) and does not know what it means for model_type 'llama'"));
  }
  SUBCASE("gated DeltaNet: linear_attention or linear_* keys outside Qwen3-Next") {
    CHECK(contains(errors(kLlama + R"(,"sliding_window":8,"layer_types":["linear_attention","full_attention"]})"),
                   "config.json: /layer_types/0: error: 'linear_attention': gated DeltaNet linear-attention layers "
                   "are read for model_type qwen3_next only (Qwen3.5's are not modelled yet, #23), not 'llama'"));
    CHECK(contains(errors(kLlama + R"(,"linear_num_value_heads":32})"),
                   "/linear_num_value_heads: error: 32: gpuplan reads it as Qwen3-Next's gated DeltaNet "
                   "(model_type qwen3_next)"));
  }
  SUBCASE("null is absent") {
    CHECK(import_text(kLlama + R"(,"attention_chunk_size":null,"hybrid_override_pattern":null})").arch.ok());
  }
  SUBCASE("a refused model type is named before its keys") {
    CHECK(errors(R"({"model_type":"jamba","hidden_size":2048,"mamba_d_state":16})") ==
          "config.json: /model_type: error: model_type 'jamba': Mamba / state-space hybrid layers are not modelled "
          "yet (#23); gpuplan refuses the config rather than import a wrong model\n");
  }
  SUBCASE("a value that only matters when set: use_sliding_window false, use_bidirectional_attention false") {
    const auto a = hf(kLlama + R"(,"use_bidirectional_attention":false,"use_sliding_window":false,
      "sliding_window":4})");
    CHECK(a.sliding_layer_count() == 0);
    CHECK(contains(errors(kLlama + R"(,"use_bidirectional_attention":true})"),
                   "'use_bidirectional_attention' = true: bidirectional (non-causal) attention is not modelled"));
  }
}

TEST_CASE("absent keys take transformers' default for the model type, and the assumption says so") {
  // Mistral's configuration class: 4096 wide, 32 layers of 32 heads, 8 KV heads, a 4096-token window.
  const auto a = hf(R"({"model_type":"mistral","num_hidden_layers":2})");
  CHECK(a.hidden == 4096);
  CHECK(a.heads == 32);
  CHECK(a.kv_heads == 8);
  CHECK(a.intermediate == 14336);
  CHECK(a.vocab == 32000);
  CHECK(a.sliding_window == 4096);
  CHECK(a.sliding_layer_count() == 2);
  CHECK(has(a.assumptions, "num_key_value_heads absent: 8 (transformers default for model_type 'mistral', "
                           "src/transformers/models/mistral/configuration_mistral.py @ 001f85b3)"));
  // An explicit null stays null: Mistral-7B-v0.3 writes "sliding_window": null and has no window.
  CHECK(hf(R"({"model_type":"mistral","num_hidden_layers":2,"sliding_window":null})").sliding_layer_count() == 0);
  // Qwen2 slides only with use_sliding_window (default false), from max_window_layers on.
  const std::string qwen2 = R"({"model_type":"qwen2","hidden_size":256,"num_hidden_layers":6,"num_attention_heads":4,
    "num_key_value_heads":4,"intermediate_size":512,"vocab_size":1000,"sliding_window":64)";
  CHECK(hf(qwen2 + "}").sliding_layer_count() == 0);
  CHECK(hf(qwen2 + R"(,"use_sliding_window":true,"max_window_layers":4})").sliding_layer_count() == 2);
}

TEST_CASE("tie_word_embeddings absent: cohere and starcoder2 tie (their transformers default), llama does not") {
  // Aya-23-8B / Command-R style: the sizes of CohereForAI/aya-23-8B's config.json, which has no tie_word_embeddings.
  const auto aya = hf(R"({"model_type":"cohere","hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,
    "num_key_value_heads":8,"intermediate_size":14336,"vocab_size":256000,"logit_scale":0.0625,"use_qk_norm":false,
    "layer_norm_eps":1e-05,"bos_token_id":5,"eos_token_id":255001,"pad_token_id":0})");
  CHECK(aya.tied_embeddings);
  CHECK(has(aya.assumptions, "tie_word_embeddings absent: true (transformers default for model_type 'cohere', "
                             "src/transformers/models/cohere/configuration_cohere.py @ 008e5743)"));
  // By hand: 256,000 x 4,096 embedding (no separate LM head) + 32 layers x (q, o 4096^2; k, v 4096 x 1024; gated
  // MLP 3 x 4096 x 14336; two 4096 norms) + the final norm = 8,028,164,096 (untied: 9,076,740,096, +13%).
  CHECK(model::parameter_counts(aya, Explain::off).total == 8'028'164'096);
  // StarCoder2-7B's sizes (bigcode/starcoder2-7b config.json): tied, biases on every linear layer (use_bias
  // defaults to true), a plain 2-matrix MLP, LayerNorm.
  const auto sc = hf(R"({"model_type":"starcoder2","hidden_size":4608,"num_hidden_layers":32,"num_attention_heads":36,
    "num_key_value_heads":4,"intermediate_size":18432,"vocab_size":49152,"max_position_embeddings":16384,
    "sliding_window":4096,"norm_epsilon":1e-05})");
  CHECK(sc.tied_embeddings);
  CHECK(sc.qkv_bias);
  CHECK(sc.mlp_bias);
  // By hand: 49,152 x 4,608 embedding + 32 x [attention 2 x 4608^2 + 2 x 4608 x 512 + biases 4608 + 2 x 512 + 4608;
  // MLP 2 x 4608 x 18432 + biases 18432 + 4608; two LayerNorms 4 x 4608] + final LayerNorm 2 x 4608
  // = 226,492,416 + 32 x 217,106,944 + 9,216 = 7,173,923,840 (untied: 7,400,416,256, +3%).
  CHECK(model::parameter_counts(sc, Explain::off).total == 7'173'923'840);
  CHECK_FALSE(hf(R"({"model_type":"llama","num_hidden_layers":2})").tied_embeddings);
}

TEST_CASE("Gemma 2: without layer_types, layers alternate sliding and global (transformers' default)") {
  // google/gemma-2-9b's sizes. Gemma 2 report (arXiv:2408.00118), Table 2: 917,504,000 embedding and 8,324,201,984
  // non-embedding parameters = 9,241,705,984.
  const auto a = hf(R"({"model_type":"gemma2","hidden_size":3584,"num_hidden_layers":42,"num_attention_heads":16,
    "num_key_value_heads":8,"head_dim":256,"intermediate_size":14336,"vocab_size":256000,"sliding_window":4096,
    "query_pre_attn_scalar":256,"final_logit_softcapping":30.0,"attn_logit_softcapping":50.0,
    "cache_implementation":"hybrid","hidden_activation":"gelu_pytorch_tanh","max_position_embeddings":8192})");
  CHECK(a.sliding_layer_count() == 21);
  CHECK(a.is_sliding_layer(0));
  CHECK_FALSE(a.is_sliding_layer(1));
  CHECK(model::parameter_counts(a, Explain::off).total == 9'241'705'984);
  // KV at 8K in bf16: per layer and token 2 x 8 heads x 256 x 2 B = 8 KiB; 21 global layers hold 8,192 tokens,
  // 21 sliding layers 4,096: 21 x 8192 x 8192 + 21 x 4096 x 8192 = 2,113,929,216 B (all-sliding gave 1.41 GB).
  CHECK(kv_sequence_bytes(a, 8192) == gptest::approx(2'113'929'216.0));
  // layer_types, when present, wins.
  std::string types = R"(,"layer_types":[)";
  for (int i = 0; i < 42; ++i) types += std::string(i ? "," : "") + (i < 40 ? "\"full_attention\"" : "\"sliding_attention\"");
  const auto b = hf(std::string(R"({"model_type":"gemma2","num_hidden_layers":42,"sliding_window":4096)") + types + "]}");
  CHECK(b.sliding_layer_count() == 2);
}

TEST_CASE("Gemma 3 multimodal: text_config defaults, every 6th layer global, the SigLIP vision tower counted") {
  // google/gemma-3-27b-it's text_config sizes, without vocab_size and sliding_window_pattern (transformers: 262,208
  // and 6).
  const auto r = import_text(R"({"architectures":["Gemma3ForConditionalGeneration"],"model_type":"gemma3",
    "boi_token_index":255999,"eoi_token_index":256000,"image_token_index":262144,"mm_tokens_per_image":256,
    "initializer_range":0.02,"text_config":{"head_dim":128,"hidden_size":5376,"intermediate_size":21504,
    "model_type":"gemma3_text","num_attention_heads":32,"num_hidden_layers":62,"num_key_value_heads":16,
    "query_pre_attn_scalar":168,"rope_scaling":{"factor":8.0,"rope_type":"linear"},"sliding_window":1024},
    "torch_dtype":"bfloat16","vision_config":{"hidden_size":1152,"image_size":896,"intermediate_size":4304,
    "model_type":"siglip_vision_model","num_attention_heads":16,"num_hidden_layers":27,"patch_size":14,
    "vision_use_head":false}})");
  REQUIRE_MESSAGE(r.arch.ok(), r.arch.diagnostics().to_string());
  const auto& a = r.arch.value();
  CHECK(a.vocab == 262208);
  CHECK(a.sliding_layer_count() == 52);  // layers 5, 11, ..., 59 are global: 10 of 62
  // KV at 32K in bf16: 2 x 16 x 128 x 2 B = 8 KiB per layer and token; 10 x 32768 x 8192 + 52 x 1024 x 8192.
  CHECK(kv_sequence_bytes(a, 32768) == gptest::approx(3'120'562'176.0));
  // The SigLIP encoder by hand (896 px, 14 px patches: 4,096 patches): patch conv 1152·3·14·14 + 1152 = 678,528,
  // positions 4,096·1152 = 4,718,592, 27 blocks of 2 LayerNorms 4,608 + qkv 3·(1152² + 1152) + out 1152² + 1152 +
  // fc1 1152·4304 + 4304 + fc2 4304·1152 + 1152 = 15,239,504, post LayerNorm 2,304: 416,866,032 — the Gemma 3
  // Technical Report's 417M vision encoder (arXiv:2503.19786, Table 1). The projector: its RMSNorm 1,152 and
  // 1152·5376 without bias; the 64×64 patches average-pooled 4×4 to 256 tokens.
  REQUIRE(a.vision);
  const auto vt = model::vision_tower_counts(*a.vision, Explain::off);
  CHECK(vt.parameters == 416'866'032 + 1'152 + 1'152 * 5'376);
  CHECK(vt.parameters - vt.projector_parameters == 416'866'032);
  CHECK(vt.patches == 4'096);
  CHECK(vt.tokens_per_image == 256);
  // MACs per image: patch conv 4,096·677,376; per block 4,096·(3·1152² + 1152² + 2·1152·4304) + 2·4,096²·1152;
  // projector 256·1152·5376. FLOPs = 2·MACs.
  const double macs = 4096.0 * 677'376 + 27.0 * (4096.0 * (4.0 * 1152 * 1152 + 2.0 * 1152 * 4304) +
                                                 2.0 * 4096 * 4096 * 1152) +
                      256.0 * 1152 * 5376;
  CHECK(vt.flops_per_image.raw() == gptest::approx(2.0 * macs));
  CHECK(model::parameter_counts(a, Explain::off).vision == vt.parameters);
  CHECK(has(a.assumptions, "layer_types absent: 52 layers of 62 use the 1024-token sliding window (transformers' rule "
                           "for model_type 'gemma3_text': every 6th layer is full attention, the others slide)"));
  // google/gemma-3-4b-it's text_config omits num_attention_heads and vocab_size too: 8 heads, 262,208.
  const auto small = hf(R"({"model_type":"gemma3","text_config":{"hidden_size":2560,"intermediate_size":10240,
    "model_type":"gemma3_text","num_hidden_layers":34,"num_key_value_heads":4,"sliding_window":1024},
    "vision_config":{}})");
  CHECK(small.heads == 8);
  CHECK(small.head_dim == 256);
  CHECK(small.vocab == 262208);
  CHECK(small.tied_embeddings);
}

TEST_CASE("llava: a text_config without model_type is a llama, sized by LlamaConfig's defaults") {
  // llava-hf/llava-1.5-7b-hf: its text_config gives only vocab_size and max_position_embeddings.
  const auto a = hf(R"({"architectures":["LlavaForConditionalGeneration"],"model_type":"llava","ignore_index":-100,
    "image_token_index":32000,"pad_token_id":32001,"projector_hidden_act":"gelu","tie_word_embeddings":false,
    "text_config":{"_name_or_path":"lmsys/vicuna-7b-v1.5","architectures":["LlamaForCausalLM"],
    "max_position_embeddings":4096,"rms_norm_eps":1e-05,"torch_dtype":"float16","vocab_size":32064},
    "vision_config":{"hidden_size":1024,"image_size":336,"intermediate_size":4096,"model_type":"clip_vision_model",
    "num_attention_heads":16,"num_hidden_layers":24,"patch_size":14,"projection_dim":768,"vocab_size":32000},
    "vision_feature_layer":-2,"vision_feature_select_strategy":"default","vocab_size":32064})");
  CHECK(a.model_type == "llama");
  CHECK(a.hidden == 4096);
  CHECK(a.layers == 32);
  CHECK(a.intermediate == 11008);
  // Llama-2-7B's 6,738,415,616 with 64 more vocabulary rows in the embedding and the LM head, and the CLIP
  // ViT-L/14-336 tower by hand: patch conv 1024·3·14·14 = 602,112 (no bias), class token and 577 positions 591,872,
  // pre and post LayerNorms 4,096, 24 blocks of 2 LayerNorms 4,096 + qkv 3·(1024² + 1024) + out 1024² + 1024 +
  // fc1 1024·4096 + 4096 + fc2 4096·1024 + 1024 = 12,596,224; the projector 1024·4096 + 4096 + 4096·4096 + 4096.
  const std::int64_t clip = 602'112 + 591'872 + 4'096 + 24 * 12'596'224;
  CHECK(clip == 303'507'456);
  const std::int64_t projector = 1024 * 4096 + 4096 + 4096 * 4096 + 4096;
  CHECK(model::parameter_counts(a, Explain::off).total == 6'738'415'616 + 2 * 64 * 4096 + clip + projector);
  REQUIRE(a.vision);
  // 24×24 patches, the class token dropped ("default"): 576 image tokens.
  CHECK(a.vision->tokens_per_image() == 576);
  // An outer size that contradicts the text_config is an error.
  CHECK(contains(errors(R"({"model_type":"llava","vocab_size":32000,"text_config":{"vocab_size":32064}})"),
                 "config.json: /vocab_size: error: 32000 differs from text_config's 32064"));
}

TEST_CASE("Infinity and NaN: read in a Hugging Face config.json, refused in gpuplan's own files") {
  Diagnostics d;
  std::vector<json_io::NonFiniteLiteral> found;
  auto j = json_io::parse_allowing_non_finite("{\"a\": [0.0, Infinity],\n \"b\":-Infinity, \"c\": \"NaN Infinity\","
                                              " \"d\":NaN}",
                                              "x.json", d, &found);
  REQUIRE(j.has_value());
  CHECK((*j)["a"][1] == "Infinity");
  CHECK((*j)["b"] == "-Infinity");
  CHECK((*j)["c"] == "NaN Infinity");  // inside a string: untouched
  CHECK((*j)["d"] == "NaN");
  REQUIRE(found.size() == 3);
  CHECK(found[0].line == 1);
  CHECK(found[0].column == 13);
  CHECK(found[1].line == 2);
  CHECK(found[1].text == "-Infinity");

  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gpuplan-test-inf-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // A clamp holding Infinity is harmless: the config is read, and a note says where the literal was.
  std::ofstream(dir / "config.json") << R"({"model_type":"llama","num_hidden_layers":2,
"swiglu_limit": Infinity, "bos_token_id": 1})";
  auto ok = wl_io::load_model_file((dir / "config.json").string());
  CHECK(ok.ok());
  CHECK(contains(ok.diagnostics().to_string(), "config.json:2:17: note: non-standard JSON literal Infinity (Python's "
                                               "json writes it) read as the string \"Infinity\""));
  // Nemotron-H's clamp (a reviewed key: the dt clamp changes no size or cost): read and ignored, the literal noted.
  std::ofstream(dir / "mamba.json") << R"({"model_type":"llama","num_hidden_layers":2,"time_step_limit":[0.0,Infinity]})";
  const auto clamp = wl_io::load_model_file((dir / "mamba.json").string());
  CHECK(clamp.ok());
  CHECK(contains(clamp.diagnostics().to_string(), "note: non-standard JSON literal Infinity"));
  // Infinity as a size is an error of its key.
  std::ofstream(dir / "size.json") << R"({"model_type":"llama","hidden_size":Infinity,"num_hidden_layers":2})";
  CHECK(contains(wl_io::load_model_file((dir / "size.json").string()).diagnostics().to_string(),
                 "size.json: /hidden_size: error: expected an integer, found a string \"Infinity\""));
  // gpuplan's own model file stays strict JSON.
  std::ofstream(dir / "ours.json") << R"({"schema":1,"kind":"model","id":"ours","x":Infinity})";
  const auto ours = wl_io::load_model_file((dir / "ours.json").string()).diagnostics().to_string();
  CHECK(contains(ours, "malformed JSON"));
  fs::remove_all(dir);
}

TEST_CASE("real config.json files: publishers' totals within 1%, unsupported architectures refused (exit 2)") {
  const std::string dir = std::string(GPUPLAN_TEST_FIXTURES) + "/hf/real/";
  auto load = [&](const std::string& name) { return wl_io::load_model_file(dir + name + "/config.json"); };
  struct Case {
    const char* name;
    double total_B;
    double active_B;  // 0: dense
    bool active_without_embedding;
  };
  // Published counts as data/models cites them (tests/fixtures/hf/real/README.md).
  for (const Case c : {Case{"gpt-oss-20b", 20.91, 3.61, true}, Case{"mixtral-8x7b-v0.1", 46.7, 12.9, false},
                       Case{"llama-3.1-8b", 8.03, 0, false}, Case{"qwen3-235b-a22b", 235.0, 22.0, false}}) {
    CAPTURE(c.name);
    auto m = load(c.name);
    REQUIRE_MESSAGE(m.ok(), m.diagnostics().to_string());
    const auto p = model::parameter_counts(m->arch, Explain::off);
    CHECK(static_cast<double>(p.total) / 1e9 == gptest::approx(c.total_B).epsilon(0.01));
    if (c.active_B > 0) {
      const double active = static_cast<double>(c.active_without_embedding ? p.active - p.embedding : p.active) / 1e9;
      CHECK(active == gptest::approx(c.active_B).epsilon(0.01));
    }
    CHECK_FALSE(m->ignored_keys.empty());  // every real config carries metadata that is listed as ignored
  }
  // gpt-oss alternates sliding (128 tokens) and full layers by its layer_types.
  CHECK(load("gpt-oss-20b")->arch.sliding_layer_count() == 12);
  // (Nemotron-H's real configs are read since #23 deliverable 2: tests/model/test_hybrid.cpp; DeepSeek-V3.2 and
  // Qwen3-Next since then: tests/model/test_sequence_mixers.cpp.)
}

TEST_CASE("model show lists the ignored keys and the defaults it assumed") {
  const std::string dir = std::string(GPUPLAN_TEST_FIXTURES) + "/hf/real/";
  const auto r = cli_test::run({"model", "show", dir + "gpt-oss-20b/config.json"});
  REQUIRE(r.rc == 0);
  CHECK(contains(r.out, "Config keys ignored (reviewed: no size or cost; data/hf/config_keys.json)"));
  CHECK(contains(r.out, "eos_token_id, pad_token_id"));
  const auto j = cli_test::run({"model", "show", dir + "gpt-oss-20b/config.json", "--format", "json"});
  REQUIRE(j.rc == 0);
  const auto doc = nlohmann::json::parse(j.out);
  bool found = false;
  for (const auto& g : doc["ignored_config_keys"])
    for (const auto& k : g["keys"]) found = found || k == "quantization_config";
  CHECK(found);
}

namespace {
// A small Llama 4 text config: h 64, 8 layers, 4 query / 2 KV heads of 16, 4 experts of width 32 (top-1) on every
// 2nd layer with a shared expert, dense layers of width 96, 128-token chunks.
const std::string kLlama4 = R"({"model_type":"llama4_text","hidden_size":64,"num_hidden_layers":8,
  "num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"intermediate_size":32,"intermediate_size_mlp":96,
  "num_local_experts":4,"num_experts_per_tok":1,"interleave_moe_layer_step":2,"vocab_size":100,
  "max_position_embeddings":4096,"tie_word_embeddings":false,"use_qk_norm":true,"attention_chunk_size":128,
  "no_rope_layer_interval":4,"attention_bias":false)";
}  // namespace

TEST_CASE("Llama 4: interleaved MoE and dense layers, the dense width, the shared expert, weightless q/k norm") {
  const auto a = hf(kLlama4 + "}");
  // MoE layers range(step - 1, L, step) = 1, 3, 5, 7 (Llama4TextConfig.__post_init__).
  CHECK(a.moe_layer_count() == 4);
  CHECK_FALSE(a.is_moe_layer(0));
  CHECK(a.is_moe_layer(1));
  CHECK(a.intermediate == 96);
  REQUIRE(a.moe);
  CHECK(a.moe->expert_intermediate == 32);
  CHECK(a.moe->shared_experts == 1);
  CHECK(a.moe->shared_intermediate == 32);
  CHECK_FALSE(a.moe->shared_expert_gate);
  CHECK(a.qk_norm);
  CHECK_FALSE(a.qk_norm_weights);
  // By hand, per layer: attention q 64·64 + k, v 2·64·32 + o 64·64 = 12,288 (the L2 q/k norm has no weight), two
  // norms 128; MoE layer: router 64·4 = 256, experts 4·3·64·32 = 24,576, shared 3·64·32 = 6,144; dense layer
  // 3·64·96 = 18,432; embedding and LM head 100·64 each, final norm 64:
  // 8·12,416 + 4·30,976 + 4·18,432 + 12,800 + 64 = 309,824. Active: less 4·3 of the 4 routed experts = 236,096.
  const auto p = model::parameter_counts(a, Explain::off);
  CHECK(p.total == 309'824);
  CHECK(p.active == 236'096);
  CHECK(p.shared_experts == 4 * 6'144);
  CHECK(p.dense_mlp == 4 * 18'432);
  // An explicit moe_layers list wins over the step.
  CHECK(hf(kLlama4 + R"(,"moe_layers":[0]})").moe_layer_count() == 1);
  CHECK(contains(errors(kLlama4 + R"(,"moe_layers":[8]})"), "/moe_layers: error: entry 0 is not a layer index in [0, 8)"));
}

TEST_CASE("Llama 4: chunked attention on the RoPE layers, every 4th layer global, KV and FLOPs stop at the chunk") {
  const auto a = hf(kLlama4 + "}");
  // no_rope_layers default: layer i uses RoPE (and chunks) unless (i + 1) % 4 == 0: layers 3 and 7 are global.
  CHECK(a.attention_chunk == 128);
  CHECK(a.chunked_layer_count() == 6);
  CHECK(a.sliding_layer_count() == 0);
  CHECK_FALSE(a.is_chunked_layer(3));
  CHECK(a.is_chunked_layer(4));
  CHECK(a.attended_tokens(0, 300) == 128);
  CHECK(a.attended_tokens(3, 300) == 300);
  CHECK(a.attended_tokens(0, 100) == 100);
  // KV at 300 tokens in bf16: 2·2 heads·16·2 B = 128 B per layer and token; 2 global layers × 300 + 6 chunked × 128
  // = 1,368 token-layers = 175,104 B.
  CHECK(kv_sequence_bytes(a, 300) == gptest::approx(175'104.0));
  // Attention FLOPs per token at context 300: 2·n_q·(d_qk + d_v) per attended token = 256 · 1,368.
  CHECK(model::flops_per_token(a, 300, Explain::off).attention_forward.raw() == gptest::approx(350'208.0));
  // An explicit no_rope_layers list: 0 = NoPE, global.
  const auto b = hf(kLlama4 + R"(,"no_rope_layers":[1,1,0,0,1,1,1,1]})");
  CHECK(b.chunked_layer_count() == 6);
  CHECK_FALSE(b.is_chunked_layer(2));
  CHECK_FALSE(b.is_chunked_layer(3));
  CHECK(b.is_chunked_layer(7));  // global by the default interval, chunked by the list
  CHECK(contains(errors(kLlama4 + R"(,"no_rope_layers":[1,1]})"), "/no_rope_layers: error: has 2 entries for 8 layers"));
  // layer_types, when given, names the chunked layers.
  std::string types = R"(,"layer_types":[)";
  for (int i = 0; i < 8; ++i) types += std::string(i ? "," : "") + (i < 2 ? "\"chunked_attention\"" : "\"full_attention\"");
  CHECK(hf(kLlama4 + types + "]}").chunked_layer_count() == 2);
  // No chunk size: every layer is global.
  std::string no_chunk = kLlama4;
  no_chunk.replace(no_chunk.find("\"attention_chunk_size\":128"), 26, "\"attention_chunk_size\":null");
  CHECK(hf(no_chunk + "}").chunked_layer_count() == 0);
  // The page-block rule of a chunked layer: the current aligned chunk, ⌈C/B⌉ blocks (+1 when a chunk starts inside a
  // block).
  CHECK(model::kv_blocks(32768, 16, 8192, true) == 512);
  CHECK(model::kv_blocks(100, 16, 8192, true) == 7);
  CHECK(model::kv_blocks(32768, 48, 8192, true) == 172);
}

TEST_CASE("Llama 4's keys on another model type are refused (they mean what they mean only there)") {
  CHECK(contains(errors(kLlama + R"(,"intermediate_size_mlp":96})"),
                 "/intermediate_size_mlp: error: 96: gpuplan reads it as Llama 4's (model_type llama4_text) and does not "
                 "know what it means for model_type 'llama'"));
  CHECK(contains(errors(kLlama + R"(,"attention_chunk_size":8192})"), "/attention_chunk_size: error: 8192"));
  CHECK(contains(errors(kLlama + R"(,"interleave_moe_layer_step":2})"), "/interleave_moe_layer_step: error: 2"));
  CHECK(errors(kLlama + R"(,"interleave_moe_layer_step":1,"attention_chunk_size":null})") == "");
}

TEST_CASE("Llama 4 Scout and Maverick: the language models by hand, the publishers' figures") {
  const std::string dir = std::string(GPUPLAN_TEST_FIXTURES) + "/hf/real/";
  auto load = [&](const std::string& name) { return wl_io::load_model_file(dir + name + "/config.json"); };
  auto scout = load("llama-4-scout-17b-16e-instruct");
  auto maverick = load("llama-4-maverick-17b-128e-instruct");
  REQUIRE_MESSAGE(scout.ok(), scout.diagnostics().to_string());
  REQUIRE_MESSAGE(maverick.ok(), maverick.diagnostics().to_string());
  const auto ps = model::parameter_counts(scout->arch, Explain::off);
  const auto pm = model::parameter_counts(maverick->arch, Explain::off);
  // By hand (h 5120, 48 layers, 40/8 heads of 128, V 202,048, experts of width 8192): attention 62,914,560 and
  // norms 10,240 per layer; MoE layer = E·125,829,120 + shared 125,829,120 + router 5120·E; dense layer
  // 3·5120·16384 = 251,658,240; embedding and LM head 1,034,485,760 each, final norm 5,120.
  // Scout (16 experts, all 48 layers MoE): 48·(62,924,800 + 2,139,176,960) + 2,068,976,640 = 107,769,861,120;
  // active 48·(62,924,800 + 2·125,829,120 + 81,920) + 2,068,976,640 = 17,172,894,720.
  CHECK(ps.total == 107'769'861'120);
  CHECK(ps.active == 17'172'894'720);
  // Maverick (128 experts on the 24 odd layers, dense FFNs of width 16384 on the 24 even ones):
  // 48·62,924,800 + 24·16,232,611,840 + 24·251,658,240 + 2,068,976,640 = 400,711,848,960;
  // active 3,020,390,400 + 24·(251,658,240 + 655,360) + 24·251,658,240 + 2,068,976,640 = 17,184,691,200.
  // Maverick's config has its vision_config (Scout's copy here has none): the Llama 4 tower by hand — unfold patch
  // linear 3·14·14·1408 = 827,904, class token and 577 positions 813,824, layernorm_pre and _post 5,632, 34 blocks
  // of 23,807,872 (below), the adapter's fc1 5632·4096 and fc2 4096·4096 and the projector 4096·5120, no biases —
  // is 871,932,416.
  const std::int64_t llama4_vision = 827'904 + 813'824 + 5'632 + 34 * 23'807'872 + 5'632 * 4'096 + 4'096 * 4'096 +
                                     4'096 * 5'120;
  CHECK(llama4_vision == 871'932'416);
  CHECK(pm.vision == llama4_vision);
  CHECK(pm.total == 400'711'848'960 + llama4_vision);
  CHECK(pm.active == 17'184'691'200);
  // The Llama 4 model card: Maverick 400B total (+0.40% with the tower); both 17B activated, a figure given to 1B
  // (17.17 and 17.18 round to it; the tower is not in the active count). Scout's 109B counts the vision encoder,
  // which its copy here lacks: with Maverick's tower (the same vision_config; its blocks: q, k, v, o with biases
  // 4·(1408² + 1408), fc1 and fc2 with biases 2·1408·5632 + 5632 + 1408, two LayerNorms 4·1408 = 23,807,872)
  // it is 108.64B (-0.33%).
  CHECK(double(pm.total) / 1e9 == gptest::approx(400.0).epsilon(0.01));
  CHECK(double(ps.total + llama4_vision) / 1e9 == gptest::approx(109.0).epsilon(0.01));
  for (const auto active : {ps.active, pm.active}) {
    CHECK(double(active) / 1e9 >= 16.5);
    CHECK(double(active) / 1e9 < 17.5);
  }
  // 36 chunked layers of 8192 tokens, 12 global: KV at 32K in bf16 = (12·32,768 + 36·8,192)·4,096 B.
  CHECK(scout->arch.chunked_layer_count() == 36);
  CHECK(kv_sequence_bytes(scout->arch, 32768) == gptest::approx(2'818'572'288.0));
  REQUIRE(maverick->arch.vision);
  CHECK(maverick->arch.vision->kind == "llama4_vision_model");
  // 24×24 patches of 14 px at 336 px, pixel-shuffled 2×2 (ratio 0.5): 144 image tokens per tile.
  CHECK(maverick->arch.vision->tokens_per_image() == 144);
  const auto r = cli_test::run({"model", "show", dir + "llama-4-maverick-17b-128e-instruct/config.json"});
  REQUIRE(r.rc == 0);
  CHECK(contains(r.out, "layer kinds        24 × chunked attention (8192) + dense FFN, 12 × full attention + MoE with "
                        "shared experts, 12 × chunked attention (8192) + MoE with shared experts"));
}
