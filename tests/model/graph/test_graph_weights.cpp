// Weights per GPU as a fold over the op graph (model/src/graph/graph_weights.cpp, gpuplan/model/graph_weights.hpp):
// serving memory's weights on every stage equal a sum over the ops of that stage's layers and of the ops around them
// (dense GQA, MoE, MLA + MoE, DeepSeek-V3.2's sparse attention, two hybrids with SSM / linear-attention mixers), and
// hand-worked values: Llama-3.1-8B at TP 8, DeepSeek-V3.2's indexer replicated on every TP rank, wide EP.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cmath>
#include <string>

#include "test_paths.hpp"
#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/graph_weights.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "library.hpp"

using namespace gpuplan;
using namespace gpuplan::model;

namespace {

const std::string kReal = std::string(GPUPLAN_TEST_FIXTURES) + "/hf/real/";

wl::TransformerArch real(const std::string& dir) {
  auto m = wl_io::load_model_file(kReal + dir + "/config.json");
  REQUIRE_MESSAGE(m.ok(), m.diagnostics().to_string());
  return m->arch;
}

ServingMemoryPlan plan(int tp, int pp, StoreDtype dtype = StoreDtype::bf16, int expert_dp = 1) {
  ServingMemoryPlan p;
  p.tp = tp;
  p.pp = pp;
  p.expert_dp = expert_dp;
  p.weights = default_weight_quant(dtype);
  p.context = 1024;
  return p;
}

ServingMemory serve(const wl::TransformerArch& a, const ServingMemoryPlan& p) {
  const hw::GpuSpec* g = test::hardware().find_gpu("h200");
  REQUIRE(g != nullptr);
  return serving_memory(a, parameter_counts(a, Explain::off), *g, p, Explain::off);
}

/// The oracle: one stage's weight bytes summed tensor by tensor over the ops of its layers' graphs and the head
/// graph's ops it holds. Split tensors 1/t (routed experts 1/(t·edp)), K/V projections by the rank's KV heads,
/// replicated ones whole, all of these at `bq` bytes; small ones whole and the embedding / LM head 1/t at 2 bytes; a
/// tied LM head counted only where the embedding is not.
double stage_bytes_by_ops(const wl::TransformerArch& a, const StageLayers& st, int tp, int edp, double kv_heads_gpu,
                          double bq) {
  const double t = tp;
  const double kv_share = a.mla ? 1.0 : kv_heads_gpu / double(a.kv_heads);
  double b = 0.0;
  auto tensor = [&](const Op& o, const WeightTensor& w) {
    const double n = double(w.elements);
    if (o.part == Part::embedding || o.part == Part::position_embedding || o.part == Part::lm_head) return n / t * 2.0;
    switch (w.split) {
      case TpSplit::split: return (o.part == Part::routed_experts ? n / (t * edp) : n / t) * bq;
      case TpSplit::kv_heads: return n * kv_share * bq;
      case TpSplit::replicated: return n * bq;
      case TpSplit::small: return n * 2.0;
    }
    return 0.0;
  };
  for (std::int64_t l = st.first; l < st.first + st.count; ++l)
    for (const Op& o : build_layer_graph(a, LayerKind::of(a, l)))
      for (std::uint8_t i = 0; i < o.weight_count; ++i) b += o.weights[i].tied ? 0.0 : tensor(o, o.weights[i]);
  for (const Op& o : build_head_graph(a)) {
    const bool before = o.part == Part::embedding || o.part == Part::position_embedding;
    if (before ? !st.first_stage : !st.last_stage) continue;
    for (std::uint8_t i = 0; i < o.weight_count; ++i)
      if (!o.weights[i].tied || !st.first_stage) b += tensor(o, o.weights[i]);
  }
  return b;
}

void check_every_stage(const wl::TransformerArch& a, int tp, int pp, StoreDtype dtype, double bq, int edp = 1) {
  const ServingMemory r = serve(a, plan(tp, pp, dtype, edp));
  REQUIRE(r.stages.size() == std::size_t(pp));
  double sum = 0.0;
  for (const StageMemory& s : r.stages) {
    const double want = stage_bytes_by_ops(a, s.layers, tp, edp, r.token.kv_heads_per_gpu, bq);
    CAPTURE(s.layers.stage);
    CHECK(s.weights.raw() == gptest::approx(want).epsilon(1e-12));
    sum += want;
  }
  // The whole model: every tensor once (t = 1, all KV heads, no wide EP), one stage.
  StageLayers whole = pipeline_stages(a, 1).front();
  const double total = stage_bytes_by_ops(a, whole, 1, 1, double(std::max<std::int64_t>(1, a.kv_heads)), bq);
  CHECK(r.weights_total.raw() == gptest::approx(total).epsilon(1e-12));
  CHECK(sum > 0.0);
}

}  // namespace

TEST_CASE("serving weights per GPU are the sum over the graph's ops, on every stage, for every kind of model") {
  SUBCASE("dense GQA: Llama-3.1-8B") {
    for (int tp : {1, 2, 8, 16})  // 16 > 8 KV heads: the K/V projections replicated
      for (int pp : {1, 2, 3}) check_every_stage(test::arch("llama-3.1-8b"), tp, pp, StoreDtype::bf16, 2.0);
  }
  SUBCASE("MoE: Mixtral 8x7B, fp8 weights with their per-channel scales") {
    const double bq = weight_bytes_per_param(default_weight_quant(StoreDtype::fp8), 4096);
    for (int tp : {1, 4}) check_every_stage(test::arch("mixtral-8x7b"), tp, 2, StoreDtype::fp8, bq);
  }
  SUBCASE("MLA + MoE: DeepSeek-V3, plain and with wide EP") {
    for (int edp : {1, 4}) check_every_stage(test::arch("deepseek-v3"), 8, 2, StoreDtype::bf16, 2.0, edp);
  }
  SUBCASE("MLA + DeepSeek sparse attention: DeepSeek-V3.2") {
    check_every_stage(real("deepseek-v3.2"), 8, 1, StoreDtype::bf16, 2.0);
    check_every_stage(real("deepseek-v3.2"), 4, 4, StoreDtype::bf16, 2.0);
  }
  SUBCASE("hybrids: Nemotron-H (Mamba-2) and Qwen3-Next (gated DeltaNet)") {
    check_every_stage(test::arch("nemotron-h-8b"), 2, 2, StoreDtype::bf16, 2.0);
    check_every_stage(real("qwen3-next-80b-a3b-thinking"), 4, 2, StoreDtype::bf16, 2.0);
  }
}

TEST_CASE("Llama-3.1-8B at TP 8 in bf16 holds 2,008,031,232 weight bytes per GPU") {
  // Per layer on one rank: (q + o 2·4,096² + MLP 3·4,096·14,336)/8 = 26,214,400 and K/V 2·4,096·1,024 · 1/8 (one of
  // the 8 KV heads) = 1,048,576 elements, ×2 B; the two norms 2·4,096 whole, ×2 B: 54,542,336 B; ×32 layers. The
  // untied embedding and LM head 128,256·4,096/8 each, ×2 B: 262,668,288 B; the final norm 8,192 B.
  const ServingMemory r = serve(test::arch("llama-3.1-8b"), plan(8, 1));
  CHECK(r.stages.front().weights.raw() == 32.0 * 54'542'336 + 262'668'288 + 8'192);
  // The fold itself on the head graph: both 16-bit vocabulary tensors are split, the final norm is not.
  const GraphWeights head = stage_head_weights(build_head_graph(test::arch("llama-3.1-8b")), true, true);
  CHECK(head.vocab == 2.0 * 128'256 * 4'096);
  CHECK(head.small == 4'096);
}

TEST_CASE("DeepSeek-V3.2 serving: every TP rank holds the whole lightning indexer (61 x 13,959,424 weights)") {
  // vLLM (vllm-project/vllm 002d6073aa03, vllm/model_executor/models/deepseek_v2.py, class Indexer: "no tensor
  // parallel, just replicated": wq_b ReplicatedLinear, wk + weights_proj fused with disable_tp=True) and SGLang
  // (sgl-project/sglang 005e8bf8abf4, python/sglang/srt/layers/attention/nsa/nsa_indexer.py: wq_b, wk and
  // weights_proj ReplicatedLinear) both hold the indexer whole on every rank. Against the same config without the
  // indexer, a GPU at TP 8 in bf16 holds 61·13,959,424·2 B = 1,703,049,728 B more (split over TP it was 1/8 of that).
  const wl::TransformerArch a = real("deepseek-v3.2");
  wl::TransformerArch v3 = a;
  v3.dsa.reset();
  const double with = serve(a, plan(8, 1)).stages.front().weights.raw();
  const double without = serve(v3, plan(8, 1)).stages.front().weights.raw();
  CHECK(with - without == 61.0 * 13'959'424 * 2);
  // weights_proj (7,168·64 = 458,752) is kept in bf16 by both engines (SGLang: a bf16 ReplicatedLinear without a
  // quant config; vLLM: quant_config=None) and in the checkpoint: with FP8 weights (1 B + one fp32 scale per output
  // channel of 7,168 inputs) a GPU holds 61·(13,500,672·(1 + 4/7,168) + 458,752·2) B more.
  const GraphWeights g = graph_weights(build_layer_graph(a, LayerKind{}));
  const GraphWeights g3 = graph_weights(build_layer_graph(v3, LayerKind{}));
  CHECK(g.replicated - g3.replicated == 13'500'672);
  CHECK(g.small - g3.small == 458'752);
  const double fp8_with = serve(a, plan(8, 1, StoreDtype::fp8)).stages.front().weights.raw();
  const double fp8_without = serve(v3, plan(8, 1, StoreDtype::fp8)).stages.front().weights.raw();
  CHECK(fp8_with - fp8_without == gptest::approx(61.0 * (13'500'672 * (1.0 + 4.0 / 7168) + 458'752 * 2.0)).epsilon(1e-9));
}

TEST_CASE("wide EP divides only the routed experts: DeepSeek-V3 at TP 8 with 2 attention-DP ranks") {
  // 58 MoE layers of 256 experts of 3·7,168·2,048 weights: 653,908,770,816; at TP 8 a GPU holds 1/8 of them, with
  // expert_dp 2 half of that: 653,908,770,816/16 · 2 B = 81,738,596,352 B less; nothing else moves.
  const wl::TransformerArch& a = test::arch("deepseek-v3");
  const double one = serve(a, plan(8, 1)).stages.front().weights.raw();
  const double two = serve(a, plan(8, 1, StoreDtype::bf16, 2)).stages.front().weights.raw();
  CHECK(one - two == 81'738'596'352.0);
}
