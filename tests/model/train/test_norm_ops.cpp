// Every norm of a layer's graph is priced, in training and in serving, by the one norm kernel (ops.hpp norm_cost;
// issue #20, docs/design/op-graph-plan.md D14/F10): the layer's norms over h (Gemma 2/3's four), the per-head q/k
// norm over head_dim (Qwen3) and MLA's two latent norms (DeepSeek-V3). Sizes by hand from the configs.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>
#include <vector>

#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"
#include "training_core.hpp"

using namespace gpuplan;

namespace {

std::vector<const model::OpCost*> ops_named(const std::vector<model::OpCost>& ops, const std::string& name) {
  std::vector<const model::OpCost*> out;
  for (const auto& o : ops)
    if (o.name == name) out.push_back(&o);
  return out;
}

wl::TrainingPlan norm_plan(int tp, bool sp) {
  wl::TrainingPlan p;
  p.par.tp = tp;
  p.par.sequence_parallel = sp;
  p.micro_batch = 1;
  p.seq_len = 4096;
  p.global_batch = 1;
  return p;
}

model::ServingPerfPlan serve_plan() {
  model::ServingPerfPlan p;
  p.weights = model::default_weight_quant(model::StoreDtype::bf16);
  p.kv = model::default_kv_quant(model::StoreDtype::bf16);
  return p;
}

}  // namespace

TEST_CASE("training prices Qwen3's q and k norms over this GPU's heads, rows of head_dim") {
  // Qwen3-30B-A3B: 32 query heads, 4 KV heads, head_dim 128, bf16. TP 2 with sequence parallelism: the QKV output
  // holds all 4096 tokens (SP gathers before the projection), 16 query heads and 2 KV heads per GPU.
  const auto& a = test::arch("qwen3-30b-a3b");
  REQUIRE(a.qk_norm);
  const auto e = model::estimate_training(a, norm_plan(2, true), test::node_system("dgx-h100"), Explain::on);
  const auto q = ops_named(e.layer_ops, "q norm"), k = ops_named(e.layer_ops, "k norm");
  const auto qb = ops_named(e.layer_ops, "q norm bwd"), kb = ops_named(e.layer_ops, "k norm bwd");
  REQUIRE(q.size() == 1);
  REQUIRE(k.size() == 1);
  REQUIRE(qb.size() == 1);
  REQUIRE(kb.size() == 1);
  // Forward: read and write each element, 2 × 2 B; backward twice that.
  CHECK(q[0]->bytes.raw() == gptest::approx(4096.0 * 16 * 128 * 4));  // 33.6 MB
  CHECK(k[0]->bytes.raw() == gptest::approx(4096.0 * 2 * 128 * 4));   // 4.2 MB
  CHECK(qb[0]->bytes.raw() == gptest::approx(4096.0 * 16 * 128 * 8));
  CHECK(kb[0]->bytes.raw() == gptest::approx(4096.0 * 2 * 128 * 8));
  // The layer's own norms run on the sequence shard (4096 / 2 tokens × 2048 × 4 B).
  const auto in = ops_named(e.layer_ops, "input norm");
  REQUIRE(in.size() == 1);
  CHECK(in[0]->bytes.raw() == gptest::approx(2048.0 * 2048 * 4));
  // At TP 8 the 4 KV heads are replicated: one per GPU, not 0.5.
  const auto e8 = model::estimate_training(a, norm_plan(8, true), test::node_system("dgx-h100"), Explain::on);
  REQUIRE(ops_named(e8.layer_ops, "k norm").size() == 1);
  CHECK(ops_named(e8.layer_ops, "k norm")[0]->bytes.raw() == gptest::approx(4096.0 * 1 * 128 * 4));
  CHECK(ops_named(e8.layer_ops, "q norm")[0]->bytes.raw() == gptest::approx(4096.0 * 4 * 128 * 4));
  // A model without a q/k norm has none.
  const auto l = model::estimate_training(test::arch("llama-3.1-8b"), norm_plan(1, false),
                                          test::node_system("dgx-h100"), Explain::on);
  CHECK(ops_named(l.layer_ops, "q norm").empty());
}

TEST_CASE("Gemma 2/3's four norms a layer: all priced in training, the post-norms as plain norms in serving") {
  wl::TransformerArch g = test::arch("llama-3.1-8b");
  g.norms_per_layer = 4;
  const auto sys = test::node_system("dgx-h100");
  const auto e2 = model::estimate_training(test::arch("llama-3.1-8b"), norm_plan(1, false), sys, Explain::on);
  const auto e4 = model::estimate_training(g, norm_plan(1, false), sys, Explain::on);
  int norms = 0;
  for (const char* n : {"input norm", "post-attention norm", "pre-MLP norm", "post-MLP norm"}) {
    CAPTURE(n);
    const auto f = ops_named(e4.layer_ops, n);
    REQUIRE(f.size() == 1);
    CHECK(f[0]->bytes.raw() == gptest::approx(4096.0 * 4096 * 4));
    ++norms;
  }
  CHECK(norms == 4);
  // Two more norms, forward and backward, than the two-norm layer: 2 × (4 + 8) × T·h bytes more.
  double b2 = 0, b4 = 0;
  for (const auto& o : e2.layer_ops) b2 += o.bytes.raw();
  for (const auto& o : e4.layer_ops) b4 += o.bytes.raw();
  CHECK(b4 - b2 == gptest::approx(2.0 * 12.0 * 4096 * 4096));

  // Serving, fused kernels: the first norm takes the residual add before it (4 B each way per element, read x and
  // the residual, write both), the pre-MLP norm the attention block's add; the post-norms read and write (2 × 2 B).
  model::ServingSystem s = test::node_system("dgx-h100");
  const model::ForwardBatch prefill{0, 1, 0, 1, 1024, 0, true};  // one 1024-token prompt
  const auto f2 = model::forward_cost(test::arch("llama-3.1-8b"), serve_plan(), prefill, s);
  const auto f4 = model::forward_cost(g, serve_plan(), prefill, s);
  CHECK(f4.kernels - f2.kernels == 2 * g.layers);
  const auto post = ops_named(f4.ops, "post-attention norm");
  REQUIRE(post.size() == 1);
  CHECK(post[0]->bytes.raw() == gptest::approx(1024.0 * 4096 * 4));
  REQUIRE(ops_named(f4.ops, "post-MLP norm").size() == 1);
  CHECK(ops_named(f4.ops, "add + norm").size() == 2);
}

TEST_CASE("MLA's query and key-value latent norms: two norm kernels in training and in serving") {
  // DeepSeek-V3: q_lora_rank 1536, kv_lora_rank 512, bf16.
  const auto& a = test::arch("deepseek-v3");
  REQUIRE(a.mla);
  wl::TrainingPlan p = norm_plan(1, false);
  p.par.ep = 1;
  const auto e = model::estimate_training(a, p, test::node_system("dgx-h100"), Explain::on);
  const auto q = ops_named(e.layer_ops, "MLA query latent norm"), kv = ops_named(e.layer_ops, "MLA key-value latent norm");
  REQUIRE(q.size() == 1);
  REQUIRE(kv.size() == 1);
  CHECK(q[0]->bytes.raw() == gptest::approx(4096.0 * 1536 * 4));
  CHECK(kv[0]->bytes.raw() == gptest::approx(4096.0 * 512 * 4));
  REQUIRE(ops_named(e.layer_ops, "MLA key-value latent norm bwd").size() == 1);
  CHECK(ops_named(e.layer_ops, "MLA key-value latent norm bwd")[0]->bytes.raw() == gptest::approx(4096.0 * 512 * 8));
  // Serving prices the same two kernels on the pass's tokens.
  model::ServingSystem s = test::node_system("dgx-h100");
  model::ServingPerfPlan sp = serve_plan();
  sp.tp = 8;
  const auto f = model::forward_cost(a, sp, {0, 1, 0, 1, 512, 0, true}, s);
  const auto sq = ops_named(f.ops, "MLA query latent norm"), skv = ops_named(f.ops, "MLA key-value latent norm");
  REQUIRE(sq.size() >= 1);
  REQUIRE(skv.size() >= 1);
  CHECK(sq[0]->bytes.raw() == gptest::approx(512.0 * 1536 * 4));
  CHECK(skv[0]->bytes.raw() == gptest::approx(512.0 * 512 * 4));
}

TEST_CASE("a training norm under a CUDA graph pays serving's in-graph norm cost, which grows with its row") {
  // Llama-3.1-8B, TP 1, 4096 tokens: the input norm's forward kernel in a graph (scope layer) against eager. Both
  // price the same bytes; the fixed cost is norm_fixed (the H100's in-graph law per row, serving's) or the eager
  // launch.
  const auto sys = test::node_system("dgx-h100");
  wl::TrainingPlan eager = norm_plan(1, false), graphed = norm_plan(1, false);
  graphed.cuda_graphs = wl::CudaGraphScope::layer;
  const auto& a = test::arch("llama-3.1-8b");
  const auto ee = model::estimate_training(a, eager, sys, Explain::on);
  const auto eg = model::estimate_training(a, graphed, sys, Explain::on);
  REQUIRE(ops_named(ee.layer_ops, "input norm").size() == 1);
  REQUIRE(ops_named(eg.layer_ops, "input norm").size() == 1);
  const model::OpCost* fe = ops_named(ee.layer_ops, "input norm")[0];
  const model::OpCost* fg = ops_named(eg.layer_ops, "input norm")[0];
  CHECK(fe->bytes.raw() == gptest::approx(fg->bytes.raw()));
  // The H100 row's measured in-graph norm law (data/hardware/efficiency/measured.json graph_norm_us and
  // graph_norm_ns_per_element) at a row of 4096, against the eager launch: the bytes are memory-bound at one rate.
  const model::Device d = model::sustained_device(*sys.gpu, sys.efficiency, wl::AttentionKernel::fa3);
  REQUIRE(d.eff.graph_class.norm.raw() > 0);
  const double in_graph = (d.eff.graph_class.norm + d.eff.graph_class.norm_per_element * 4096.0).raw();
  CHECK((fg->time - fe->time).raw() == gptest::approx(in_graph - d.eff.kernel_launch.raw()).epsilon(1e-6));
  // A norm's in-graph latency (one row: 1.93 µs + 1.06 ns × 4096 = 6.272 µs) is above the eager launch floor (5 µs):
  // the graph takes the host out, not the kernel's own latency.
  CHECK(in_graph == gptest::approx(6.27176e-6));
}

TEST_CASE("the head graph priced in training: the final norm on the sequence shard, the LM head on the vocabulary shard") {
  // Llama-3.1-8B (h 4096, vocab 128,256) at TP 2 with sequence parallelism, 4096 tokens: the final norm reads and
  // writes 2048 × 4096 elements (4 B each way forward, 8 backward); the LM head is T × h × V/2.
  const auto& a = test::arch("llama-3.1-8b");
  const auto plan = norm_plan(2, true);
  const auto sys = test::node_system("dgx-h100");
  const model::Device d = model::detail::training_device(plan, sys);
  model::detail::LayerCost first;
  const auto c = model::detail::compute_terms(a, plan, d, &first);
  const auto fn = ops_named(c.head_ops, "final norm"), fnb = ops_named(c.head_ops, "final norm bwd");
  const auto head = ops_named(c.head_ops, "LM head");
  REQUIRE(fn.size() == 1);
  REQUIRE(fnb.size() == 1);
  REQUIRE(head.size() == 1);
  CHECK(fn[0]->bytes.raw() == gptest::approx(2048.0 * 4096 * 4));
  CHECK(fnb[0]->bytes.raw() == gptest::approx(2048.0 * 4096 * 8));
  CHECK(head[0]->flops.raw() == gptest::approx(2.0 * 4096 * 4096 * 64128));
  double sum = 0;
  for (const auto& o : c.head_ops) sum += o.time.raw();
  CHECK(c.head_time.raw() == gptest::approx(sum));
  // A learned position embedding is a second lookup beside the token embedding: twice the bytes, ×3 with the
  // gradient's scatter-add, each a kernel.
  wl::TransformerArch learned = a;
  learned.position = wl::PositionKind::learned;
  learned.max_position = 4096;
  const auto cl = model::detail::compute_terms(learned, plan, d, nullptr);
  const double k3 = 3.0 * model::kernel_fixed(d, model::OpClass::elementwise).raw();
  CHECK(cl.embed_time.raw() - k3 == gptest::approx(2.0 * (c.embed_time.raw() - k3)));
}

TEST_CASE("the MTP module from its graph: two input norms and the norm before the shared head, M, the output and loss") {
  // DeepSeek-V3 (h 7168, vocab 129,280) at TP 2 with sequence parallelism, 4096 tokens, one MTP module: its three
  // RMSNorms each read and write the sequence shard's 2048 × 7168 elements, as the final norm does (the same kernel
  // on the same rows: its forward and backward cost), its projection M is T × h × 2h, and the shared output head and
  // loss are the main model's (the head less its final norm).
  const auto& a = test::arch("deepseek-v3");
  auto plan = norm_plan(2, true);
  plan.mtp_layers = 1;
  const auto sys = test::node_system("dgx-h100");
  const model::Device d = model::detail::training_device(plan, sys);
  model::detail::LayerCost first;
  const auto c = model::detail::compute_terms(a, plan, d, &first);
  const auto fn = ops_named(c.head_ops, "final norm"), fnb = ops_named(c.head_ops, "final norm bwd");
  REQUIRE(fn.size() == 1);
  REQUIRE(fnb.size() == 1);
  CHECK(fn[0]->bytes.raw() == gptest::approx(2048.0 * 7168 * 4));
  const double norm = fn[0]->time.raw() + fnb[0]->time.raw();
  const hw::Precision p = plan.precision.compute;
  const double m = model::gemm_cost("", {4096, 7168, 2 * 7168, 1}, p, d).time.raw() +
                   model::gemm_cost("", {4096, 2 * 7168, 7168, 1}, p, d).time.raw() +
                   model::gemm_cost("", {2 * 7168, 7168, 4096, 1}, p, d).time.raw();
  CHECK(c.mtp_extra.raw() == gptest::approx(c.head_time.raw() - norm + 3.0 * norm + m));
  CHECK(c.mtp_extra.raw() > c.head_time.raw() + m + 1.9 * norm);
}

TEST_CASE("serving's head from the head graph: a learned position embedding is a second gather, the LM head its op") {
  // GPT-2 (h 768, vocab 50,257, learned positions), a 1024-token prefill at TP 1: the token and the position
  // embeddings are each gathered (read and write T × 768 × 2 B); Llama-3.1-8B (rotary) has the token gather only.
  model::ServingSystem s = test::node_system("dgx-h100");
  const model::ForwardBatch prefill{0, 1, 0, 1, 1024, 0, true};  // one 1024-token prompt
  const auto g = model::forward_cost(test::arch("gpt2"), serve_plan(), prefill, s);
  const auto tok = ops_named(g.ops, "embedding gather"), pos = ops_named(g.ops, "position embedding gather");
  REQUIRE(tok.size() == 1);
  REQUIRE(pos.size() == 1);
  CHECK(tok[0]->bytes.raw() == gptest::approx(1024.0 * 768 * 4));
  CHECK(pos[0]->bytes.raw() == gptest::approx(1024.0 * 768 * 4));
  const auto lm = ops_named(g.ops, "LM head");
  REQUIRE(lm.size() == 1);
  CHECK(lm[0]->flops.raw() == gptest::approx(2.0 * 1 * 768 * 50257));  // the one token the prefill emits
  const auto l = model::forward_cost(test::arch("llama-3.1-8b"), serve_plan(), prefill, s);
  CHECK(ops_named(l.ops, "position embedding gather").empty());
  CHECK(ops_named(l.ops, "embedding gather").size() == 1);
}
