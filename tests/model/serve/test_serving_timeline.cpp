// The serving iteration timeline (issue #27 d2, model/serving_timeline.hpp): forward_cost's pass laid out kernel by
// kernel. Checked: the layout sums to the model's iteration, each kind's spans to forward_cost's totals, the TP
// collectives sit on the compute stream (two per layer), eager mode shows the host issue and the GPU's waits, PP
// stages run in sequence with their sends.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "gpuplan/model/serving_timeline.hpp"
#include "library.hpp"

namespace {

using namespace gpuplan;
using model::SpanKind;

model::ServingPerfPlan plan_of(int tp, int pp, bool graphs) {
  model::ServingPerfPlan p;
  p.tp = tp;
  p.pp = pp;
  p.cuda_graphs = graphs;
  p.weights = model::default_weight_quant(model::StoreDtype::bf16);
  p.kv = model::default_kv_quant(model::StoreDtype::bf16);
  return p;
}

std::map<SpanKind, double> sum_by_kind(const model::StepTimeline& t) {
  std::map<SpanKind, double> m;
  for (const auto& s : t.spans) m[s.kind] += s.duration().raw();
  return m;
}

double rel(double a, double b) { return std::fabs(a - b) / std::max(1e-30, std::fabs(b)); }

}  // namespace

TEST_SUITE("serving iteration timeline") {
  TEST_CASE("CUDA-graph decode on TP 2: the layout ends at the model's iteration, kinds sum to forward_cost's terms") {
    const auto sys = test::node_system("dgx-h100");
    const auto& arch = test::arch("llama-3.1-8b");
    const auto plan = plan_of(2, 1, true);
    const model::ForwardBatch fb{64, 1, 2048, 0, 0, 0, true};
    const auto fc = model::forward_cost(arch, plan, fb, sys);
    const auto t = model::serving_timeline(arch, plan, fb, sys);
    REQUIRE(t.ok);
    CHECK(t.serving_iteration);
    CHECK(t.lanes.size() == 1);
    CHECK(rel(t.end.raw(), fc.total.raw()) < 1e-9);
    CHECK(rel(t.step_time.raw(), fc.total.raw()) < 1e-12);
    auto m = sum_by_kind(t);
    // The LM head is a GEMM of forward_cost's; the embedding gather and the sampling are its elementwise ops.
    CHECK(rel(m[SpanKind::gemm] + m[SpanKind::head_loss], fc.gemm.raw()) < 1e-9);
    CHECK(rel(m[SpanKind::attention], fc.attention.raw()) < 1e-9);
    CHECK(rel(m[SpanKind::elementwise] + m[SpanKind::embedding] + m[SpanKind::sampling], fc.elementwise.raw()) < 1e-9);
    CHECK(rel(m[SpanKind::comm_tp], fc.comm.raw()) < 1e-9);
    // Two all-reduces per layer plus the logits' all-gather.
    int tp_spans = 0;
    for (const auto& s : t.spans) tp_spans += s.kind == SpanKind::comm_tp ? 1 : 0;
    CHECK(tp_spans == 2 * arch.layers + 1);
    CHECK(m.count(SpanKind::launch_gap) == 0);
    // Spans are in order on the one lane, without overlap.
    for (std::size_t i = 1; i < t.spans.size(); ++i) CHECK(t.spans[i].start.raw() >= t.spans[i - 1].end.raw() - 1e-15);
  }

  TEST_CASE("eager decode at batch 1 is host-bound: the GPU waits for each launch and the host lane issues every kernel") {
    const auto sys = test::node_system("dgx-h100");
    const auto& arch = test::arch("gpt2");  // 124M parameters: a few µs of GPU work per kernel against 22 µs of issue
    const auto plan = plan_of(1, 1, false);
    const model::ForwardBatch fb{1, 1, 1024, 0, 0, 0, true};
    const auto fc = model::forward_cost(arch, plan, fb, sys);
    const auto t = model::serving_timeline(arch, plan, fb, sys);
    REQUIRE(t.ok);
    REQUIRE(t.lanes.size() == 2);
    CHECK_FALSE(t.lanes[1].compute);
    auto m = sum_by_kind(t);
    // The host issues fc.kernels kernels, each call at its kind's measured cost: its lane is busy for exactly fc.host.
    CHECK(rel(m[SpanKind::host], fc.host.raw()) < 1e-9);
    CHECK(m[SpanKind::launch_gap] > 0);
    // Host-bound (22 µs per kernel against a few µs of GPU work each): the model's stage is the host's issue time. The
    // layout ends no earlier, and later by at most what the kernels longer than their issue time add (the LM head and
    // sampling over GPT-2's 50,257-word vocabulary run behind the host).
    CHECK(fc.host.raw() > fc.gemm.raw() + fc.attention.raw() + fc.elementwise.raw());
    const double min_issue = model::eager_host_per_call(model::HostCall::unary).raw();  // the cheapest call's issue
    double behind = 0;
    for (const auto& s : t.spans)
      if (s.lane == 0 && s.kind != SpanKind::launch_gap) behind += std::max(0.0, s.duration().raw() - min_issue);
    CHECK(t.end.raw() >= fc.total.raw() - 1e-12);
    CHECK(t.end.raw() - fc.total.raw() <= behind + 1e-12);
    CHECK(behind < 0.1 * fc.total.raw());
  }

  TEST_CASE("PP 2 prefill: two stages in sequence joined by a send, the LM head on the last") {
    const auto sys = test::node_system("dgx-h100");
    const auto& arch = test::arch("llama-3.1-8b");
    const auto plan = plan_of(1, 2, true);
    const model::ForwardBatch fb{0, 1, 0, 1.0, 2048, 0, true};
    const auto fc = model::forward_cost(arch, plan, fb, sys);
    const auto t = model::serving_timeline(arch, plan, fb, sys);
    REQUIRE(t.ok);
    REQUIRE(t.lanes.size() == 2);
    CHECK(rel(t.end.raw(), fc.total.raw()) < 1e-9);
    int pp_spans = 0;
    for (const auto& s : t.spans) {
      if (s.kind == SpanKind::comm_pp) {
        ++pp_spans;
        CHECK(s.lane == 1);
      }
      if (s.kind == SpanKind::head_loss) CHECK(s.lane == 1);
      if (s.kind == SpanKind::embedding) CHECK(s.lane == 0);
    }
    CHECK(pp_spans == 1);
    // Stage 1 starts after stage 0 ends.
    double end0 = 0, start1 = 1e9;
    for (const auto& s : t.spans) {
      if (s.lane == 0) end0 = std::max(end0, s.end.raw());
      if (s.lane == 1) start1 = std::min(start1, s.start.raw());
    }
    CHECK(start1 >= end0 - 1e-15);
  }

  TEST_CASE("fixed-capacity EP prefill: the expert SwiGLU's passes run over every received slot, not the routed rows") {
    // node_serve_step.py's moe_static (TP 2, EP 2, one CUDA graph, eager ops): the grouped GEMM's output h1 holds
    // all t·C = T·k received slots (C = T/t·k per destination), and act = F.silu(h1[:, :f]) * h1[:, f:] runs over
    // all of them. Both run on strided halves: TensorIterator's non-vectorised kernel, issue-bound at 1.3 elements
    // per SM per cycle (moe_cost.hpp) on the H100's 132 SMs at 1830 MHz = 3.1403e11 elements/s, one element per slot
    // and expert column (768), the same for the SiLU and the product. Between a 4096- and a 2048-token prompt the
    // slots grow by (4096 − 2048)·8 = 16384: 16384·768 / 3.1403e11 = 40.07 µs
    // (the kernel's fixed cost cancels); over only the routed rows (T·k/ep, half the slots) it would be 20.03 µs.
    const auto sys = test::node_system("dgx-h100");
    model::ServingPerfPlan p = plan_of(2, 1, true);
    p.ep = 2;
    p.kernels = wl::KernelStyle::eager;
    p.max_batched_tokens = 0;
    auto times = [&](std::int64_t prompt) {
      const auto tr = model::forward_trace(test::arch("qwen3-30b-a3b"), p, model::prompt_pass(p, prompt), sys);
      std::map<std::string, double> t;
      for (const auto& kind : tr.kinds)
        for (const auto& it : kind) t[it.name] = it.time.raw();
      return t;
    };
    auto t4 = times(4096), t2 = times(2048);
    REQUIRE(t4.count("expert SiLU") == 1);
    REQUIRE(t4.count("expert gate product") == 1);
    REQUIRE(t2.count("expert SiLU") == 1);
    CHECK(t4["expert gate product"] == gptest::approx(t4["expert SiLU"]));
    CHECK(t4["expert SiLU"] - t2["expert SiLU"] == gptest::approx(16384.0 * 768.0 / (132 * 1830e6 * 1.3)));
  }
}
