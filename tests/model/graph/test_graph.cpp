// The op graph (gpuplan/model/graph.hpp): what a layer contains, and that the per-model quantities are folds over it.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/kv_cache.hpp"
#include "gpuplan/model/params.hpp"
#include "library.hpp"

using namespace gpuplan;
using namespace gpuplan::model;
using gpuplan::test::arch;
using gpuplan::test::library;

namespace {

std::vector<std::string> names(const OpGraph& g) {
  std::vector<std::string> out;
  for (const Op& o : g) out.emplace_back(o.name);
  return out;
}

const Op& op(const OpGraph& g, const std::string& name) {
  for (const Op& o : g)
    if (name == o.name) return o;
  FAIL("no op named " << name);
  return *g.begin();
}

}  // namespace

TEST_SUITE("op graph") {
  TEST_CASE("a Llama layer is norm, QKV, attention, output projection, norm, gated MLP, with Llama-3.1-8B's shapes") {
    const auto& a = arch("llama-3.1-8b");
    const OpGraph g = build_layer_graph(a, LayerKind{});
    CHECK(names(g) == std::vector<std::string>{"input norm", "QKV projection", "attention", "output projection",
                                               "post-attention norm", "MLP up/gate", "MLP down"});
    const Op& qkv = op(g, "QKV projection");
    CHECK(qkv.in == 4096);
    CHECK(qkv.out == (32 + 2 * 8) * 128);
    REQUIRE(qkv.weight_count == 2);
    CHECK(qkv.weights[0].elements == 4096LL * 4096);  // q: split over TP
    CHECK(qkv.weights[0].split == TpSplit::split);
    CHECK(qkv.weights[1].elements == 2LL * 4096 * 8 * 128);  // k and v: by KV head
    CHECK(qkv.weights[1].split == TpSplit::kv_heads);
    const Op& attn = *g.attention();
    CHECK(attn.heads == 32);
    CHECK(attn.kv_heads == 8);
    CHECK(attn.cache_elements == 2 * 8 * 128);
    CHECK(op(g, "MLP up/gate").out == 2 * 14336);
    CHECK(op(g, "MLP down").in == 14336);
    CHECK(g.parameters(Part::norms) == 2 * 4096);
    CHECK(g.weights(TpSplit::small) == 2 * 4096);  // the norms are the small, unsplit weights
  }

  TEST_CASE("a DeepSeek-V3 MoE layer: MLA's down-projections replicated, 256 experts of which 8 per token, a shared expert") {
    const auto& a = arch("deepseek-v3");
    const OpGraph g = build_layer_graph(a, LayerKind{true, false});
    CHECK(names(g) == std::vector<std::string>{"input norm", "QKV projection", "attention", "output projection",
                                               "post-attention norm", "router", "expert up/gate", "expert down",
                                               "shared expert up/gate", "shared expert down"});
    // q_a (h·r_q) + q_a_layernorm (r_q) + kv_a_proj_with_mqa (h·(r_kv + d_rope)) + kv_a_layernorm (r_kv).
    CHECK(g.weights(TpSplit::replicated) == 7168LL * 1536 + 1536 + 7168LL * (512 + 64) + 512);
    CHECK(g.weights(TpSplit::kv_heads) == 0);
    CHECK(g.attention()->cache_elements == 512 + 64);
    CHECK(g.attention()->d_qk == 128 + 64);
    CHECK(g.attention()->d_v == 128);
    const Op& up = op(g, "expert up/gate");
    CHECK(up.copies == 256);
    CHECK(up.active == 8);
    CHECK(up.parameters() == 256LL * 2 * 7168 * 2048);
    CHECK(up.matmul_per_token() == 8LL * 2 * 7168 * 2048);  // top-8 of 256
    CHECK(op(g, "router").weights[0].split == TpSplit::small);
    CHECK(op(g, "shared expert down").in == 2048);
  }

  TEST_CASE("Gemma's four norms per layer sit around the attention and the MLP") {
    wl::TransformerArch a = arch("llama-3.1-8b");
    a.norms_per_layer = 4;
    const OpGraph g = build_layer_graph(a, LayerKind{});
    CHECK(names(g) == std::vector<std::string>{"input norm", "QKV projection", "attention", "output projection",
                                               "post-attention norm", "pre-MLP norm", "MLP up/gate", "MLP down",
                                               "post-MLP norm"});
    CHECK(g.parameters(Part::norms) == 4 * 4096);
  }

  TEST_CASE("a tied LM head is a matmul but not a parameter of its own") {
    wl::TransformerArch a = arch("llama-3.1-8b");
    a.tied_embeddings = true;
    const OpGraph head = build_head_graph(a);
    CHECK(head.parameters(Part::lm_head) == 0);
    CHECK(head.matmul_per_token() == 128256LL * 4096);
    a.tied_embeddings = false;
    CHECK(build_head_graph(a).parameters(Part::lm_head) == 128256LL * 4096);
  }

  TEST_CASE("every shipped model: the layers and the head sum to the parameter count, KV and FLOPs come from the graph") {
    for (const auto& m : library().models) {
      const auto& a = m.arch;
      CAPTURE(a.id);
      std::int64_t total = build_head_graph(a).parameters(), layers = 0;
      for_each_layer_kind(a, [&](LayerKind kind, std::int64_t count) {
        const OpGraph g = build_layer_graph(a, kind);
        CHECK(g.size() <= OpGraph::kCapacity);
        // Attention on attention layers only (a hybrid's Mamba-2 and FFN-only layers have none).
        REQUIRE((g.attention() != nullptr) == (kind.mixer == wl::Mixer::attention));
        if (g.attention() != nullptr) {
          CHECK((g.attention()->window > 0) == kind.local);
          CHECK(g.attention()->window == (kind.local ? a.local_span() : 0));
        }
        total += count * g.parameters();
        layers += count;
      });
      CHECK(layers == a.layers);
      const ParameterCounts p = parameter_counts(a, Explain::off);
      // A multimodal model's vision tower is its own op list (wl::VisionTower::graph()), outside the decoder's.
      CHECK(p.vision == (a.vision ? a.vision->graph().parameters() : 0));
      CHECK(total + p.vision == p.total);
      // The matmul weights a token passes through are the active parameters less what is not a matmul input
      // (norms, biases, embeddings, sinks), plus the LM head when it is tied.
      const FlopsPerToken f = flops_per_token(a, 1, Explain::off);
      CHECK(f.matmul_params <= p.active + (a.tied_embeddings ? p.embedding : 0));
      CHECK(f.matmul_params > p.active / 2);
      CHECK(kv_cache_size(a, 1, 1.0, Explain::off).elements_per_token_layer ==
            build_layer_graph(a, LayerKind{}).attention()->cache_elements);
    }
  }

  TEST_CASE("LoRA adapters are r·(d_in + d_out) per targeted linear of the graph: the MLA block, the routed experts") {
    const auto& a = arch("deepseek-v3");
    wl::Lora l;
    l.rank = 16;
    l.targets = wl::LoraTargets::all;
    const LoraLayerParams moe = lora_layer_params(a, l, true);
    // MLA's block: a pair per projection (q_a 7168 → 1536, q_b 1536 → n_q·d_qk, kv_a 7168 → r_kv + d_rope, kv_b
    // r_kv → n_q·(d_nope + d_v)); output projection n_q·d_v in, h out; shared expert 2·i_s / i_s.
    const double qkv = 16.0 * ((7168 + 1536) + (1536 + 128 * 192) + (7168 + 512 + 64) + (512 + 128 * 256));
    const double o = 16.0 * (128 * 128 + 7168);
    const double shared = 16.0 * (7168 + 2 * 2048) + 16.0 * (2048 + 7168);
    CHECK(moe.dense == qkv + o + shared);
    CHECK(moe.expert == 256.0 * (16.0 * (7168 + 2 * 2048) + 16.0 * (2048 + 7168)));
    l.targets = wl::LoraTargets::qkv;
    CHECK(lora_layer_params(a, l, true).dense == qkv);
    CHECK(lora_layer_params(a, l, true).expert == 0.0);
  }

  TEST_CASE("every layer graph reads and writes the residual stream's width, the TP/EP/PP messages' width") {
    for (const auto& m : library().models) {
      const auto& a = m.arch;
      CAPTURE(a.id);
      CHECK(layer_boundary_width(a) == a.hidden);
      for_each_layer_kind(a, [&](LayerKind kind, std::int64_t) {
        const OpGraph g = build_layer_graph(a, kind);
        REQUIRE(g.size() > 0);
        CHECK(g[0].in == layer_boundary_width(a));
        // The last op onto the residual stream; the shared experts' h→1 gate scales their output beside it.
        const Op* last = nullptr;
        for (const Op& o : g)
          if (!(o.kind == OpKind::linear && o.linear == LinearKind::gate)) last = &o;
        REQUIRE(last != nullptr);
        CHECK(last->out == layer_boundary_width(a));
      });
    }
  }

  TEST_CASE("DeepSeek-V3's MTP module: hnorm, enorm, the 2h → h projection, the norm before the shared head") {
    // config.json: hidden_size 7168, RMSNorm (one weight of h); the checkpoint's layer 61 holds enorm, hnorm
    // (7168 each), eh_proj (7168 × 14336) and shared_head.norm (7168).
    const auto& a = arch("deepseek-v3");
    const OpGraph g = build_mtp_graph(a);
    CHECK(names(g) == std::vector<std::string>{"MTP hidden norm", "MTP embedding norm", "MTP projection",
                                               "MTP final norm"});
    const Op& proj = op(g, "MTP projection");
    CHECK(proj.in == 14336);
    CHECK(proj.out == 7168);
    CHECK(proj.matmul_elements() == 14336LL * 7168);
    CHECK(g.parameters() == 3LL * 7168 + 2LL * 7168 * 7168);
    CHECK(g.parameters(Part::mtp) == g.parameters());
    // The module's count: these ops and one MoE layer (attention, its two norms, router, 256 experts, shared expert).
    const ParameterCounts p = parameter_counts(a, Explain::off);
    const OpGraph layer = build_layer_graph(a, LayerKind{true, false});
    CHECK(p.mtp == g.parameters() + layer.parameters());
  }

  TEST_CASE("attention sinks: one learned logit per query head of every attention layer (GPT-OSS), none elsewhere") {
    // gpt-oss-120b config.json: 64 attention heads, 36 layers; gpt-oss-20b: 64 heads, 24 layers.
    CHECK(parameter_counts(arch("gpt-oss-120b"), Explain::off).attention_sinks == 64 * 36);
    CHECK(parameter_counts(arch("gpt-oss-20b"), Explain::off).attention_sinks == 64 * 24);
    CHECK(parameter_counts(arch("llama-3.1-8b"), Explain::off).attention_sinks == 0);
    CHECK(parameter_counts(arch("deepseek-v3"), Explain::off).attention_sinks == 0);
  }
}
