// Issue #23's "done when", checked literally for every model the issue names: it imports (none is refused), its
// parameters are within 1% of the publisher's figure (or the figure's rounding, tests/fixtures/hf_corpus/README.md),
// its KV / state bytes equal a hand count, and kv, serve and train run on it with derivations that name its layer
// kinds. The configs are the verbatim public copies of tests/fixtures/hf_corpus (manifest.json gives each one's
// repository, commit and path, and the publisher's figure with its source) — Gemma-2-9B's (google/gemma-2-9b-it's
// file of June 2024) and llava-1.5-7b's among them; for Gemma 3, Aya-23 and StarCoder2 no verbatim copy was found in
// the indexed public stores (hf_corpus/README.md), so their configs are written here: every size as the Hub's file
// states it (the values test_hf_rules.cpp checks by hand), the other keys as recalled from those files — not a
// byte-for-byte copy — and the publisher's figure cited beside them.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_paths.hpp"
#include "../../../model/src/memory/memory_activations.hpp"
#include "../cli/cli_runner.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/memory.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {

const std::string kCorpus = std::string(GPUPLAN_TEST_FIXTURES) + "/hf_corpus/";

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

/// A config written here (no verbatim public copy found), as a file the CLI can read.
std::string write_config(const std::string& name, const std::string& json) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gpuplan-named-" + std::to_string(::getpid())) / name;
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << json;
  return (dir / "config.json").string();
}

struct Audit {
  std::string path;
  double total = 0.0;       ///< the publisher's total parameters
  double tolerance = 0.01;  ///< relative: 1%, or the publisher's rounding when coarser
  double active = 0.0;      ///< the publisher's active count (0: not checked), in `active_convention`
  double active_tolerance = 0.0;  ///< the active count's, where wider (a rounded figure: the corpus's rounding_rule)
  bool active_without_input_embedding = false;
  std::int64_t context = 0;          ///< tokens for the per-sequence KV / state check
  double kv_state_bytes = 0.0;       ///< KV + recurrent state of one sequence of `context` tokens (bf16 KV), by hand
  std::vector<std::string> kinds;    ///< layer-kind phrases every derivation must name
  std::vector<std::string> serve;    ///< serve arguments after the model
  std::vector<std::string> train;    ///< train arguments after the model
  std::string gpu = "h100";
};

void audit(const Audit& x) {
  CAPTURE(x.path);
  const auto m = wl_io::load_model_file(x.path);
  REQUIRE_MESSAGE(m.ok(), m.diagnostics().to_string());
  const auto p = model::parameter_counts(m->arch, Explain::off);
  CHECK(double(p.total) == gptest::approx(x.total).epsilon(x.tolerance));
  if (x.active > 0.0) {
    const double active = double(x.active_without_input_embedding ? p.active - p.embedding : p.active);
    CHECK(active == gptest::approx(x.active).epsilon(std::max(x.tolerance, x.active_tolerance)));
  }
  const auto kv = model::kv_cache_size(m->arch, x.context, 2.0, Explain::off);
  CHECK(kv.per_sequence.raw() == gptest::approx(x.kv_state_bytes).epsilon(1e-9));

  // model show names each layer kind.
  const auto show = cli_test::run({"model", "show", x.path, "--format", "json"});
  REQUIRE_MESSAGE(show.rc == 0, show.err);
  std::string kinds;
  const auto shown = nlohmann::json::parse(show.out);  // kept: a range-for over parse(...)[...] would dangle
  for (const auto& k : shown["architecture"]["layer_kinds"])
    kinds += k["attention"].get<std::string>() + " + " + k["ffn"].get<std::string>() + "; ";
  // kv, serve and train run, and their derivations name the layer kinds.
  std::vector<std::string> kvargs{"kv", "--model", x.path, "--gpu", x.gpu, "--context", std::to_string(x.context),
                                  "--explain"};
  kvargs.insert(kvargs.end(), x.serve.begin(), x.serve.end());
  const auto kvr = cli_test::run(kvargs);
  CHECK_MESSAGE(kvr.rc == 0, kvr.err);
  std::vector<std::string> serve{"serve", "-m", x.path, "--gpu", x.gpu, "--explain"};
  serve.insert(serve.end(), x.serve.begin(), x.serve.end());
  const auto sv = cli_test::run(serve);
  CHECK_MESSAGE(sv.rc == 0, sv.err);
  std::vector<std::string> train{"train", "--model", x.path, "--gpu", x.gpu, "--explain"};
  train.insert(train.end(), x.train.begin(), x.train.end());
  const auto tr = cli_test::run(train);
  CHECK_MESSAGE(tr.rc == 0, tr.err);
  for (const auto& k : x.kinds) {
    CAPTURE(k);
    CHECK(contains(kinds, k));
    CHECK(contains(kvr.out, k));
    CHECK(contains(sv.out, k));
    CHECK(contains(tr.out, k));
  }
  CHECK(contains(sv.out, "layer kinds (each priced from its own op graph)"));
  CHECK(contains(tr.out, "layer kinds (each priced from its own op graph)"));
}

}  // namespace

TEST_CASE("issue 23 done-when: Llama-4-Maverick and Scout (chunked / global attention, interleaved MoE)") {
  // Meta's model cards: Maverick 400B total (with the vision encoder) / 17B active, Scout 109B / 17B; the Hub counts
  // Scout's safetensors as 108,641,793,536. The corpus manifest states the sources; "17B" is held by its rounding
  // (listed under rounding_rule there: 17.18B / 17.17B, nothing finer is published), the totals to 1%. KV by hand: 48 layers, 8 KV heads of 128 (4 KiB per token and layer in bf16);
  // every 4th layer is NoPE and global (12), the others chunked at 8,192 tokens: at 32K 12·32768·4096 +
  // 36·8192·4096 = 2,818,572,288 B per sequence.
  for (const char* dir : {"meta-llama--Llama-4-Maverick-17B-128E-Instruct", "meta-llama--Llama-4-Scout-17B-16E-Instruct"}) {
    const bool maverick = std::string(dir).find("Maverick") != std::string::npos;
    Audit x;
    x.path = kCorpus + dir + "/config.json";
    x.total = maverick ? 400e9 : 108'641'793'536.0;
    x.active = 17e9;
    x.active_tolerance = 0.5 / 17.0;  // "17B": the card gives it to the billion
    x.context = 32768;
    x.kv_state_bytes = 2'818'572'288.0;
    x.kinds = {"chunked attention", "full attention"};
    x.serve = {"--tp", "8", "--weight-dtype", "fp8"};
    x.train = {"--gpus", "256", "--tp", "8", "--ep", "8", "--zero", "1"};
    audit(x);
  }
}

TEST_CASE("issue 23 done-when: Nemotron-H-56B and Nemotron-3-Nano-30B-A3B (Mamba-2 hybrids)") {
  // Nemotron-H-56B (arXiv:2504.03624: 56B): 10 attention layers (64 query / 8 KV heads of 128) and 54 Mamba-2 layers
  // (256 heads of 64, state 256, 8 groups, conv 4) of 118; at 8K: 10·8192·4096 B of KV + 54 × [(4 − 1)·(16384 +
  // 2·8·256)·2 B conv + 256·64·256·4 B SSM (float32: transformers' and vLLM's NemotronH default)] = 335,544,320 +
  // 912,605,184.
  Audit h;
  h.path = kCorpus + "nvidia--Nemotron-H-56B-Base-8K/config.json";
  h.total = 56e9;
  h.tolerance = 0.5 / 56.0;
  h.context = 8192;
  h.kv_state_bytes = 335'544'320.0 + 912'605'184.0;
  h.kinds = {"Mamba-2 SSM + no FFN", "full attention + no FFN", "no mixer + dense FFN"};
  h.serve = {"--tp", "4"};
  h.train = {"--gpus", "64", "--tp", "4", "--zero", "1"};
  audit(h);
  // Nemotron-3-Nano-30B-A3B (model card: 31.6B total, 3.2B active, 3.6B with embeddings; the corpus checks 3.6B): 6
  // attention layers (2 KV heads of 128), 23 Mamba-2 layers (64 heads of 64, state 128, 8 groups), 23 MoE layers; at
  // 32K: 6·32768·1024 B of KV + 23 × [3·(4096 + 2048)·2 + 64·64·128·4] B of state.
  Audit n;
  n.path = kCorpus + "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16/config.json";
  n.total = 31.6e9;
  n.active = 3.2e9;
  n.active_without_input_embedding = true;
  n.tolerance = 0.05 / 3.2;  // "3.2B" is 3.15B to 3.25B; "31.6B" held to that or 1%, whichever is wider
  n.context = 32768;
  n.kv_state_bytes = 201'326'592.0 + 49'082'368.0;
  n.kinds = {"Mamba-2 SSM + no FFN", "no mixer + MoE with shared experts", "full attention + no FFN"};
  n.serve = {"--tp", "2"};
  n.train = {"--gpus", "16", "--ep", "8", "--zero", "1"};
  audit(n);
}

TEST_CASE("issue 23 done-when: Qwen3-Next-80B-A3B (gated DeltaNet and gated attention)") {
  // Qwen's card: 80B total, 3B activated (given to the billion). 12 gated attention layers (2 KV heads of 256: 2 KiB
  // per token and layer) and 36 gated DeltaNet layers, each a state of 3·(2·16·128 + 32·128)·2 B conv +
  // 32·128·128·2 B recurrent = 1,097,728 B whatever the length; at 32K: 12·32768·2048 + 36·1,097,728.
  Audit x;
  x.path = kCorpus + "Qwen--Qwen3-Next-80B-A3B-Thinking/config.json";
  x.total = 80e9;
  x.tolerance = 0.5 / 80.0;
  x.context = 32768;
  x.kv_state_bytes = 12.0 * 32768 * 2048 + 36.0 * 1'097'728;
  x.kinds = {"gated DeltaNet (linear attention) + MoE with shared experts", "gated full attention + MoE with shared"};
  x.serve = {"--tp", "4"};
  x.train = {"--gpus", "64", "--zero", "3"};
  audit(x);
}

TEST_CASE("issue 23 done-when: DeepSeek-V3.2 and GLM-5 / GLM-5.2 (DeepSeek sparse attention, shared indexers)") {
  // DeepSeek-V3.2: V3's 671B main model (+61 indexers, inside 1%), 37B active without the input embedding (the
  // corpus's note). KV per token: 61 × (576 latent + rotary elements × 2 B + 132 B of indexer key) = 78,324 B.
  Audit d;
  d.path = kCorpus + "deepseek-ai--DeepSeek-V3.2/config.json";
  d.total = 671e9;
  d.active = 37e9;
  d.active_without_input_embedding = true;
  d.tolerance = 0.5 / 37.0;
  d.context = 4096;
  d.kv_state_bytes = 4096.0 * 61 * (576 * 2 + 132);
  d.kinds = {"MLA + DeepSeek sparse attention (indexer, top-k keys) + dense FFN",
             "MLA + DeepSeek sparse attention (indexer, top-k keys) + MoE with shared experts"};
  d.gpu = "h200";  // 671B in FP8 does not fit 8 × 80 GB
  d.serve = {"--tp", "8", "--weight-dtype", "fp8"};
  d.train = {"--gpus", "512", "--tp", "8", "--ep", "8", "--pp", "8", "--zero", "1"};
  audit(d);
  // GLM-5 (Z.ai's card: 744B; 743.91B by the op graph): 78 layers of MLA + an indexer each, 3 dense and 75 MoE.
  Audit g;
  g.path = kCorpus + "zai-org--GLM-5/config.json";
  g.total = 744e9;
  g.context = 4096;
  g.kv_state_bytes = 4096.0 * 78 * (576 * 2 + 132);
  g.kinds = {"MLA + DeepSeek sparse attention (indexer, top-k keys) + MoE with shared experts"};
  g.gpu = "h200";
  g.serve = {"--tp", "8", "--weight-dtype", "fp8"};
  g.train = {"--gpus", "512", "--tp", "8", "--ep", "8", "--pp", "8", "--zero", "1"};
  audit(g);
  // GLM-5.2: 21 indexer layers, 57 that read the last indexer's top-k (no indexer weights, no indexer key cache).
  Audit s = g;
  s.path = kCorpus + "zai-org--GLM-5.2/config.json";
  s.kv_state_bytes = 4096.0 * (78 * 576 * 2 + 21 * 132);
  s.kinds = {"MLA + DeepSeek sparse attention (indexer, top-k keys) + MoE with shared experts",
             "MLA + DeepSeek sparse attention (top-k of the previous indexer) + MoE with shared experts"};
  audit(s);
}

TEST_CASE("issue 23 done-when: Gemma-2-9B and Gemma-3-27B-it / 4B-it (sliding and global layers, SigLIP tower)") {
  // google/gemma-2-9b: the Gemma 2 report (arXiv:2408.00118) Table 2, 917,504,000 embedding + 8,324,201,984
  // non-embedding = 9,241,705,984; KV at 8K: 21 global layers hold 8,192 tokens and 21 sliding ones 4,096, 8 KiB
  // per token and layer (issue: ~2.11 GB).
  Audit g2;
  g2.path = kCorpus + "google--gemma-2-9b-it/config.json";  // verbatim (manifest.json); -it has 9B's shapes
  g2.total = 9'241'705'984.0;
  g2.tolerance = 1e-9;
  g2.context = 8192;
  g2.kv_state_bytes = 2'113'929'216.0;
  g2.kinds = {"sliding-window attention", "full attention + dense FFN"};
  g2.serve = {"--tp", "1"};
  g2.train = {"--gpus", "8", "--zero", "1"};
  audit(g2);
  {
    // That file restates the window as sliding_window_size (transformers never read it); the two must agree.
    std::string other = cli_test::slurp(g2.path);
    const auto at = other.find("\"sliding_window_size\": 4096");
    REQUIRE(at != std::string::npos);
    other.replace(at, 27, "\"sliding_window_size\": 2048");
    const auto r = cli_test::run({"model", "show", write_config("gemma-2-9b-window", other)});
    CHECK(r.rc == cli_test::kInvalid);
    CHECK_MESSAGE(contains(r.err, "/sliding_window_size: error: 2048 differs from sliding_window = 4096"), r.err);
  }
  // google/gemma-3-27b-it: the Gemma 3 report (arXiv:2503.19786) Table 1, 417M vision encoder + 1,416M embedding +
  // 25,600M non-embedding = 27.43B; KV at 32K: 10 global layers of 62, 52 sliding at 1,024 (issue: ~3.1 GB).
  const std::string siglip = R"("vision_config":{"hidden_size":1152,"image_size":896,"intermediate_size":4304,
    "model_type":"siglip_vision_model","num_attention_heads":16,"num_hidden_layers":27,"patch_size":14,
    "vision_use_head":false})";
  Audit g3;
  g3.path = write_config("gemma-3-27b-it", R"({"architectures":["Gemma3ForConditionalGeneration"],
    "boi_token_index":255999,"eoi_token_index":256000,"eos_token_id":[1,106],"image_token_index":262144,
    "initializer_range":0.02,"mm_tokens_per_image":256,"model_type":"gemma3","text_config":{"head_dim":128,
    "hidden_size":5376,"intermediate_size":21504,"model_type":"gemma3_text","num_attention_heads":32,
    "num_hidden_layers":62,"num_key_value_heads":16,"query_pre_attn_scalar":168,"rope_scaling":{"factor":8.0,
    "rope_type":"linear"},"sliding_window":1024},"torch_dtype":"bfloat16","transformers_version":"4.50.0.dev0",)" +
                                              siglip + "}");
  g3.total = 27.433e9;
  g3.context = 32768;
  g3.kv_state_bytes = 3'120'562'176.0;
  g3.kinds = {"sliding-window attention", "full attention + dense FFN"};
  g3.serve = {"--tp", "2"};
  g3.train = {"--gpus", "16", "--tp", "2", "--zero", "3"};
  audit(g3);
  // google/gemma-3-4b-it: 417M + 675M + 3,209M = 4.30B (the same table); the Hub's parameter count of the
  // repository's safetensors is 4,300,079,472 (https://huggingface.co/google/gemma-3-4b-it), which gpuplan's count of
  // these shapes equals exactly. 5 global layers of 34 (4 KiB per token and layer): 5·32768·4096 + 29·1024·4096 at 32K.
  Audit g4 = g3;
  g4.path = write_config("gemma-3-4b-it", R"({"architectures":["Gemma3ForConditionalGeneration"],
    "boi_token_index":255999,"eoi_token_index":256000,"eos_token_id":[1,106],"image_token_index":262144,
    "initializer_range":0.02,"mm_tokens_per_image":256,"model_type":"gemma3","text_config":{"hidden_size":2560,
    "intermediate_size":10240,"model_type":"gemma3_text","num_hidden_layers":34,"rope_scaling":{"factor":8.0,
    "rope_type":"linear"},"sliding_window":1024},"torch_dtype":"bfloat16","transformers_version":"4.50.0.dev0",)" +
                                              siglip + "}");
  g4.total = 4'300'079'472.0;
  g4.tolerance = 1e-9;
  g4.kv_state_bytes = 5.0 * 32768 * 4096 + 29.0 * 1024 * 4096;
  g4.serve = {"--tp", "1"};
  g4.train = {"--gpus", "8", "--zero", "1"};
  audit(g4);
}

TEST_CASE("issue 23 done-when: llava-1.5-7b, Aya-23-8B and StarCoder2-7B (defaults, tied embeddings, a CLIP tower)") {
  // llava-hf/llava-1.5-7b-hf: "7B" (Liu et al. 2023, LLaVA-1.5); by hand Llama-2-7B + 64 vocabulary rows ×2 + CLIP
  // ViT-L/14-336 303,507,456 + projector 1024·4096 + 4096 + 4096² + 4096 = 20,979,712 (test_hf_rules.cpp): the Hub's
  // 7,063,427,072. One global attention kind only.
  Audit l;
  l.path = kCorpus + "llava-hf--llava-1.5-7b-hf/config.json";  // verbatim (manifest.json)
  l.total = 7e9;
  l.tolerance = 0.5 / 7.0;
  l.context = 4096;
  l.kv_state_bytes = 4096.0 * 32 * 2 * 4096 * 2;  // MHA: 32 heads of 128
  l.serve = {"--tp", "1"};
  l.train = {"--gpus", "8", "--zero", "1"};
  // A single layer kind: model show names it; the derivations need not.
  {
    const auto show = cli_test::run({"model", "show", l.path, "--format", "json"});
    REQUIRE_MESSAGE(show.rc == 0, show.err);
    const auto j = nlohmann::json::parse(show.out);
    CHECK(j["architecture"]["layer_kinds"].size() == 1);
    CHECK(j["params"]["total"].get<double>() == gptest::approx(7.0e9).epsilon(0.5 / 7.0));
    CHECK(j["params"]["vision"].get<double>() == 303'507'456.0 + 20'979'712.0);
    CHECK(j["params"]["total"] == 7'063'427'072);
    const auto sv = cli_test::run({"serve", "-m", l.path, "--gpu", "h100", "--images-per-request", "1"});
    CHECK_MESSAGE(sv.rc == 0, sv.err);
  }
  // CohereForAI/aya-23-8B: "8B"; tied (cohere's transformers default), 8,028,164,096 by hand.
  const auto aya = cli_test::run({"model", "show", write_config("aya-23-8b", R"({"architectures":["CohereForCausalLM"],
    "attention_bias":false,"attention_dropout":0.0,"bos_token_id":5,"eos_token_id":255001,"hidden_act":"silu",
    "hidden_size":4096,"initializer_range":0.02,"intermediate_size":14336,"layer_norm_eps":1e-05,"logit_scale":0.0625,
    "max_position_embeddings":8192,"model_type":"cohere","num_attention_heads":32,"num_hidden_layers":32,
    "num_key_value_heads":8,"pad_token_id":0,"rope_theta":10000,"torch_dtype":"float16",
    "transformers_version":"4.40.0.dev0","use_cache":true,"use_qk_norm":false,"vocab_size":256000})"),
                                  "--format", "json"});
  REQUIRE_MESSAGE(aya.rc == 0, aya.err);
  CHECK(nlohmann::json::parse(aya.out)["params"]["total"] == 8'028'164'096);
  // bigcode/starcoder2-7b: "7B" (StarCoder2 paper, arXiv:2402.19173); tied, biased, 7,173,923,840 by hand; its
  // sliding window of 4,096 on every layer. bigcode's configs carry mlp_type "default" and norm_type "layer_norm"
  // (public copies of starcoder2-15b's config.json show both), which transformers does not read: the reviewed
  // harmless values pass, another value is refused.
  const std::string sc = write_config("starcoder2-7b", R"({"architectures":["Starcoder2ForCausalLM"],
    "attention_dropout":0.1,"residual_dropout":0.1,"embedding_dropout":0.1,"bos_token_id":0,"eos_token_id":0,
    "hidden_act":"gelu_pytorch_tanh","hidden_size":4608,"initializer_range":0.018042,"intermediate_size":18432,
    "max_position_embeddings":16384,"mlp_type":"default","model_type":"starcoder2","norm_epsilon":1e-05,
    "norm_type":"layer_norm","num_attention_heads":36,"num_hidden_layers":32,"num_key_value_heads":4,
    "rope_theta":1000000,"sliding_window":4096,"torch_dtype":"bfloat16","transformers_version":"4.37.0.dev0",
    "use_bias":true,"use_cache":true,"vocab_size":49152})");
  const auto sc_show = cli_test::run({"model", "show", sc, "--format", "json"});
  REQUIRE_MESSAGE(sc_show.rc == 0, sc_show.err);
  CHECK(nlohmann::json::parse(sc_show.out)["params"]["total"] == 7'173'923'840);
  const auto sc_kv = cli_test::run({"kv", "--model", sc, "--gpu", "h100", "--context", "16384"});
  CHECK_MESSAGE(sc_kv.rc == 0, sc_kv.err);
  std::string rms = cli_test::slurp(sc);
  rms.replace(rms.find("\"layer_norm\""), 12, "\"rms_norm\"");
  const auto refused = cli_test::run({"model", "show", write_config("starcoder2-rms", rms)});
  CHECK(refused.rc == cli_test::kInvalid);
  CHECK(contains(refused.err, "'norm_type' = \"rms_norm\""));
}

TEST_CASE("issue 23 audit: GPT-OSS attention sinks named in kv, serve and train, both active conventions shown") {
  // OpenAI's gpt-oss-120b card: 116.83B total, 5.13B active per token without the input embedding (the corpus
  // checks both); model show gives the active count in both conventions, naming the one without the embedding.
  const std::string oss = kCorpus + "openai--gpt-oss-120b/config.json";
  const auto show = cli_test::run({"model", "show", oss});
  REQUIRE_MESSAGE(show.rc == 0, show.err);
  CHECK(contains(show.out, "active per token  5.712 (5.133 without the input embedding)"));
  CHECK(contains(show.out, "attention sinks  one learned logit per query head per layer (2304 parameters in all"));
  // Every derivation that names the layer kinds names the sinks too (36 layers × 64 query heads).
  const std::string sinks = "every attention layer with attention sinks (one learned logit per query head)";
  const auto kv =
      cli_test::run({"kv", "--model", oss, "--gpu", "h100", "--context", "32768", "--tp", "4", "--explain"});
  CHECK_MESSAGE(kv.rc == 0, kv.err);
  CHECK(contains(kv.out, "18 × full attention + MoE, 18 × sliding-window attention + MoE; " + sinks));
  const auto sv = cli_test::run({"serve", "-m", oss, "--gpu", "h100", "--tp", "4", "--explain"});
  CHECK_MESSAGE(sv.rc == 0, sv.err);
  CHECK(contains(sv.out, sinks));
  const auto tr = cli_test::run({"train", "--model", oss, "--gpu", "h100", "--gpus", "64", "--ep", "8", "--zero",
                                 "1", "--explain"});
  CHECK(contains(tr.out, sinks));
}

TEST_CASE("issue 23 audit: a VLM serve derivation prices its vision tower, a repeated ignored key is listed once") {
  // Llama 4 Maverick's verbatim config (manifest.json) states torch_dtype at its top level and in text_config: the
  // ignored-key list names it once.
  const auto mav = cli_test::run(
      {"model", "show", kCorpus + "meta-llama--Llama-4-Maverick-17B-128E-Instruct/config.json"});
  REQUIRE_MESSAGE(mav.rc == 0, mav.err);
  CHECK(contains(mav.out, "Config keys ignored (reviewed: no size or cost; data/hf/config_keys.json)"));
  const auto first = mav.out.find("torch_dtype");
  REQUIRE(first != std::string::npos);
  CHECK(mav.out.find("torch_dtype", first + 1) == std::string::npos);
  // Qwen2.5-VL-7B with two images: the steady state's derivation has the tower's pass as a child, with the time the
  // summary reports as the tower's share of the TTFT (test_hf_corpus.cpp checks its tokens and FLOPs by hand).
  const std::string vl = kCorpus + "Qwen--Qwen2.5-VL-7B-Instruct/config.json";
  const auto sv = cli_test::run({"serve", "-m", vl, "--gpu", "h100", "--input-tokens", "100", "--output-tokens", "10",
                                 "--batch", "1", "--images-per-request", "2", "--explain"});
  REQUIRE_MESSAGE(sv.rc == 0, sv.err);
  CHECK(contains(sv.out, "Vision tower (qwen2_5_vl): 2 images per request, 256 tokens each, before the prefill = "));
  CHECK(contains(sv.out, "the prefill of one prompt alone includes the vision tower's "));
  const auto js = cli_test::run({"serve", "-m", vl, "--gpu", "h100", "--input-tokens", "100", "--output-tokens", "10",
                                 "--batch", "1", "--images-per-request", "2", "--format", "json"});
  REQUIRE_MESSAGE(js.rc == 0, js.err);
  const double vision_s = nlohmann::json::parse(js.out)["vision_encoder_s"].get<double>();
  CHECK(vision_s > 0.0);
  CHECK(contains(sv.out, "before the prefill = " + units::format(units::seconds(vision_s))));
}

TEST_CASE("issue 23 audit: a hybrid's decode reads its Mamba-2 state and the attention layers' KV, nothing more") {
  // Nemotron-H-56B (verbatim config): 10 attention layers of 8 KV heads × 128 (4,096 B per token and layer in bf16)
  // and 54 Mamba-2 layers, each a state of (4 − 1)·(16384 + 2·8·256)·2 B conv + 256·64·256·4 B SSM = 16,900,096 B
  // whatever the context. 4 sequences decoding at 8K (+ the new token, as test_serving.cpp's Llama case) on one H100
  // read 4·(10·8193·4096 + 54·16,900,096) B; at 16K the state stays, only the attention layers' KV grows.
  const auto m = wl_io::load_model_file(kCorpus + "nvidia--Nemotron-H-56B-Base-8K/config.json");
  REQUIRE_MESSAGE(m.ok(), m.diagnostics().to_string());
  model::ServingPerfPlan plan;
  plan.weights = model::default_weight_quant(model::StoreDtype::bf16);
  plan.kv = model::default_kv_quant(model::StoreDtype::bf16);
  const auto sys = test::node_system("dgx-h100");
  auto kv_read = [&](std::int64_t context) {
    return model::forward_cost(m->arch, plan, model::ForwardBatch{4, 1, context, 0, 0, 0, true}, sys, Explain::off)
        .kv_bytes.raw();
  };
  constexpr double state = 3.0 * (16'384 + 2 * 8 * 256) * 2 + 256.0 * 64 * 256 * 4;
  CHECK(state == 16'900'096.0);
  CHECK(kv_read(8192) == gptest::approx(4.0 * (10.0 * 8193 * 4096 + 54.0 * state)));
  CHECK(kv_read(16384) - kv_read(8192) == gptest::approx(4.0 * 10.0 * 8192 * 4096));
}

TEST_CASE("training activations per layer kind: a gated DeltaNet, a Mamba-2 and an indexer layer's saved tensors") {
  // Megatron-Core + TE layout, bf16, t = 1, no SP, no dropout, s = 4096, no recomputation: bytes per token of each
  // layer kind's sequence-mixer block (its input norm included), by hand from the terms' documentation
  // (model/src/memory/memory_activations.cpp).
  auto bytes = [](const wl::TransformerArch& a, model::LayerKind k, model::detail::ActPart part) {
    wl::TrainingPlan plan;
    plan.seq_len = 4096;
    const auto c = model::detail::make_ctx(a, plan, model::ActivationLayout::megatron);
    double b = 0.0;
    for (const auto& t : model::detail::layer_terms(c, k))
      if (t.part == part) b += c.bytes_per_token(t);
    return b;
  };
  using model::detail::ActPart;
  // Qwen3-Next's gated DeltaNet (h 2048, n_k 16, n_v 32, d_k = d_v = 128, chunk 64): norm input 2048·2, in_proj
  // input 2048·2, conv1d input (2·16·128 + 32·128)·2, q and k repeated 2·32·128·2, v 32·128·2, g 32·4, β 32·2,
  // A 32·64·2, z and core output 2·32·128·2, out_proj input 32·128·2 = 78,016 B.
  const auto next = wl_io::load_model_file(kCorpus + "Qwen--Qwen3-Next-80B-A3B-Thinking/config.json");
  REQUIRE(next.ok());
  model::LayerKind gdn;
  gdn.mixer = wl::Mixer::gated_deltanet;
  gdn.moe = true;
  CHECK(bytes(next->arch, gdn, ActPart::mixer) == gptest::approx(78'016.0));
  CHECK(bytes(next->arch, gdn, ActPart::attention) == 0.0);
  // Nemotron-H-56B's Mamba-2 (h 8192, 256 heads of 64, N 256, 8 groups): norm input 8192·2, in_proj input 8192·2,
  // z·x·B·C·dt (2·16384 + 2·8·256 + 256)·2, scan output 16384·2, dt and dA_cumsum 2·256·4, out_proj input 16384·2 =
  // 174,592 B; its mixer-only layer keeps nothing of an FFN.
  const auto nh = wl_io::load_model_file(kCorpus + "nvidia--Nemotron-H-56B-Base-8K/config.json");
  REQUIRE(nh.ok());
  model::LayerKind mamba;
  mamba.mixer = wl::Mixer::mamba2;
  mamba.ffn = false;
  CHECK(bytes(nh->arch, mamba, ActPart::mixer) == gptest::approx(174'592.0));
  CHECK(bytes(nh->arch, mamba, ActPart::mlp) == 0.0);
  // GLM-5.2's indexer layer keeps the indexer's q 32·128·2, k 128·2, weights 32·4, the fp32 scores and int32
  // indices of min(2048, s) keys: 24,960 B more than a layer that shares its top-k; on every TP rank whole.
  const auto glm = wl_io::load_model_file(kCorpus + "zai-org--GLM-5.2/config.json");
  REQUIRE(glm.ok());
  model::LayerKind full, shared;
  full.moe = shared.moe = true;
  shared.shared_index = true;
  CHECK(bytes(glm->arch, full, ActPart::attention) - bytes(glm->arch, shared, ActPart::attention) ==
        gptest::approx(24'960.0));
  // The stage's activations follow the kinds: GLM-5.2's mean layer keeps 57/78 of the indexer's terms less than
  // GLM-5's (same shapes otherwise).
  const auto glm5 = wl_io::load_model_file(kCorpus + "zai-org--GLM-5/config.json");
  REQUIRE(glm5.ok());
  wl::TrainingPlan plan;
  plan.seq_len = 4096;
  const double mean5 = model::activation_bytes_per_layer(glm5->arch, plan, model::ActivationLayout::megatron).raw();
  const double mean52 = model::activation_bytes_per_layer(glm->arch, plan, model::ActivationLayout::megatron).raw();
  CHECK(mean5 - mean52 == gptest::approx(57.0 / 78.0 * 24'960.0 * 4096.0));
}
