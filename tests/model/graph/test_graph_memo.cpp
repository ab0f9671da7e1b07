// The graph memo of one estimate (model/src/graph/graph_memo.hpp): inside a scope of an architecture its layer and
// head graphs are built once and handed out again; elsewhere every call builds, so a changed or another architecture
// never sees a stale graph.
#include <doctest/doctest.h>

#include "gpuplan/model/graph.hpp"
#include "gpuplan/model/serving.hpp"
#include "graph_memo.hpp"
#include "library.hpp"

using namespace gpuplan;
using namespace gpuplan::model;
using gpuplan::test::arch;

namespace {
// Llama-3.1-8B (config.json: h 4096, 32 query heads and 8 KV heads of 128, FFN 14336): Q and O 4096², K and V
// 4096·1024 each; the gated MLP 3 · 4096 · 14336.
constexpr std::int64_t kLlamaAttention = 2 * 4096LL * 4096 + 2 * 4096LL * 1024;  // 41,943,040
constexpr std::int64_t kLlamaMlp = 3 * 4096LL * 14336;                           // 176,160,768
}  // namespace

TEST_SUITE("op graph memo") {
  TEST_CASE("outside a scope every call builds its own graph") {
    const auto& a = arch("llama-3.1-8b");
    const detail::GraphRef g1 = detail::layer_graph(a, LayerKind{}), g2 = detail::layer_graph(a, LayerKind{});
    CHECK(&*g1 != &*g2);
    CHECK(g1->parameters(Part::attention) == kLlamaAttention);
    CHECK(g2->parameters(Part::dense_mlp) == kLlamaMlp);
  }

  TEST_CASE("inside a scope a kind's graph is built once and is the builder's graph") {
    const auto& a = arch("llama-3.1-8b");
    const detail::GraphMemoScope scope(a);
    const detail::GraphRef g1 = detail::layer_graph(a, LayerKind{}), g2 = detail::layer_graph(a, LayerKind{});
    CHECK(&*g1 == &*g2);
    CHECK(g1->size() == build_layer_graph(a, LayerKind{}).size());
    CHECK(g1->parameters(Part::attention) == kLlamaAttention);
    CHECK(g1->parameters(Part::dense_mlp) == kLlamaMlp);
    CHECK(&*detail::head_graph(a) == &*detail::head_graph(a));
    CHECK(detail::head_graph(a)->parameters(Part::lm_head) == 128256LL * 4096);  // untied, vocabulary 128256
    // Another kind is another graph.
    CHECK(&*detail::layer_graph(a, LayerKind{false, true}) != &*g1);
  }

  TEST_CASE("another architecture inside the scope is built on each call, the scope's own keeps its memo") {
    const auto& a = arch("llama-3.1-8b");
    wl::TransformerArch b = a;
    b.intermediate = 8192;
    const detail::GraphMemoScope scope(a);
    const detail::GraphRef ga = detail::layer_graph(a, LayerKind{});
    {
      const detail::GraphMemoScope inner(b);  // nested, another architecture: memoises nothing
      const detail::GraphRef b1 = detail::layer_graph(b, LayerKind{}), b2 = detail::layer_graph(b, LayerKind{});
      CHECK(&*b1 != &*b2);
      CHECK(b1->parameters(Part::dense_mlp) == 3 * 4096LL * 8192);
      CHECK(&*detail::layer_graph(a, LayerKind{}) == &*ga);
    }
    CHECK(&*detail::layer_graph(a, LayerKind{}) == &*ga);
  }

  TEST_CASE("a scope's memo ends with it: the same object changed between scopes gets its new graph") {
    wl::TransformerArch x = arch("llama-3.1-8b");
    {
      const detail::GraphMemoScope scope(x);
      CHECK(detail::layer_graph(x, LayerKind{})->parameters(Part::dense_mlp) == kLlamaMlp);
    }
    x.intermediate = 8192;
    const detail::GraphMemoScope scope(x);
    CHECK(detail::layer_graph(x, LayerKind{})->parameters(Part::dense_mlp) == 3 * 4096LL * 8192);
  }
  TEST_CASE("a serving forward priced inside a scope of its model is the forward priced without one") {
    // The serving pricers read the memo's graphs (forward_cost opens a scope; the planner, the simulator, serving
    // memory and the steady state open one around all their passes): a decode batch and a prompt chunk on DeepSeek-V3
    // (MLA, MoE and dense kinds) and Nemotron-H 8B (Mamba-2, attention and FFN-only kinds), TP 2, equal to the bit.
    for (const char* id : {"deepseek-v3", "nemotron-h-8b"}) {
      const auto& a = arch(id);
      const ServingSystem sys = test::node_system("dgx-h100");
      ServingPerfPlan p;
      p.weights = default_weight_quant(StoreDtype::bf16);
      p.kv = default_kv_quant(StoreDtype::bf16);
      p.tp = 2;
      const ForwardBatch fb{8, 1, 2048, 1, 512, 1024, true};
      const ForwardCost free = forward_cost(a, p, fb, sys, Explain::on);
      {
        const detail::GraphMemoScope scope(a);
        const ForwardCost memo1 = forward_cost(a, p, fb, sys, Explain::on);
        const ForwardCost memo2 = forward_cost(a, p, fb, sys, Explain::on);
        CHECK(memo1.total.raw() == free.total.raw());
        CHECK(memo2.total.raw() == free.total.raw());
        CHECK(memo2.ops.size() == free.ops.size());
      }
      // The scope forward_cost opened ended with it: outside, every call builds its own graph again.
      CHECK(&*detail::layer_graph(a, LayerKind{}) != &*detail::layer_graph(a, LayerKind{}));
    }
  }
}
