// Saved activations as a fold over the layer's op graph (model/src/memory/memory_activations.cpp): each op of
// build_layer_graph contributes the tensors it keeps for the backward, so an op the graph holds (DeepSeek-V3.2's
// lightning indexer) adds exactly its own tensors in every recompute mode, and the norms the graph holds beside the
// blocks (Gemma's) are counted from it. Every expected value is worked out by hand in the comments.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>

#include "test_paths.hpp"
#include "gpuplan/model/memory.hpp"
#include "gpuplan/wl_io/model_io.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {

wl::TransformerArch fixture(const std::string& dir) {
  auto m = wl_io::load_model_file(std::string(GPUPLAN_TEST_FIXTURES) + "/hf/" + dir + "/config.json");
  REQUIRE_MESSAGE(m.ok(), m.diagnostics().to_string());
  return m->arch;
}

wl::TrainingPlan plan(std::int64_t seq, wl::Recompute rc, int tp = 1) {
  wl::TrainingPlan p;
  p.seq_len = seq;
  p.micro_batch = 1;
  p.global_batch = 1;
  p.recompute = rc;
  p.par.tp = tp;
  p.flash_attention = true;
  p.dropout = false;
  return p;
}

double per_layer(const wl::TransformerArch& a, const wl::TrainingPlan& p) {
  return model::activation_bytes_per_layer(a, p, model::ActivationLayout::megatron).raw();
}

}  // namespace

TEST_CASE("DeepSeek-V3.2: the indexer op keeps its query, key, head weights, top-k scores and indices per token") {
  // Against the same config without the indexer: n_i·d_i·2 B (query) + d_i·2 B (key) + n_i·4 B (fp32 head weights)
  // + min(k, s)·4 B (fp32 scores of the selected keys) + min(k, s)·4 B (int32 indices) = 64·128·2 + 128·2 + 64·4 +
  // 2,048·4 + 2,048·4 = 33,280 B per token at s = 4,096 (k = 2,048), in every layer; every TP rank keeps them whole.
  const wl::TransformerArch a = fixture("real/deepseek-v3.2");
  wl::TransformerArch v3 = a;
  v3.dsa.reset();
  const double s = 4096;
  for (int tp : {1, 8}) {
    CAPTURE(tp);
    CHECK(per_layer(a, plan(4096, wl::Recompute::none, tp)) - per_layer(v3, plan(4096, wl::Recompute::none, tp)) ==
          gptest::approx(s * 33'280).epsilon(1e-12));
    // Selective recomputation drops the attention core, the indexer's scores with it (2,048·4 B).
    CHECK(per_layer(a, plan(4096, wl::Recompute::selective, tp)) -
              per_layer(v3, plan(4096, wl::Recompute::selective, tp)) ==
          gptest::approx(s * (33'280 - 8'192)).epsilon(1e-12));
    // Full recomputation keeps only the layer input: the indexer adds nothing.
    CHECK(per_layer(a, plan(4096, wl::Recompute::full, tp)) == per_layer(v3, plan(4096, wl::Recompute::full, tp)));
  }
  // At s = 1,024 < k the indexer selects every key: min(k, s) = 1,024.
  CHECK(per_layer(a, plan(1024, wl::Recompute::none)) - per_layer(v3, plan(1024, wl::Recompute::none)) ==
        gptest::approx(1024.0 * (16'384 + 256 + 256 + 1'024 * 8)).epsilon(1e-12));
}

TEST_CASE("Gemma's four norms per layer: the two beside the blocks are counted from the graph's norm ops") {
  // A Gemma-3-like config (tests/fixtures/hf/gemma-3-like): the graph holds the input, post-attention, pre-MLP and
  // post-MLP norms. With two norms per layer the layer keeps two fewer norm inputs of h·2 B per token.
  const wl::TransformerArch a = fixture("gemma-3-like");
  const double h = double(a.hidden);
  REQUIRE(a.norms_per_layer == 4);
  wl::TransformerArch two = a;
  two.norms_per_layer = 2;
  const double s = 2048;
  CHECK(per_layer(a, plan(2048, wl::Recompute::none)) - per_layer(two, plan(2048, wl::Recompute::none)) ==
        gptest::approx(s * 2 * h * 2).epsilon(1e-12));
}
