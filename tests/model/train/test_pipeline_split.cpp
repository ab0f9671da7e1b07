// Uneven pipeline splits (Megatron-Core's embedding/loss accounting, first/last stage layer counts, layout strings),
// the per-stage step (embedding on the first stage, LM head + loss on the last) and the pipeline formula with unequal
// stages. Expected values are worked out by hand from Megatron-Core's rules (transformer_block.py
// get_num_layers_to_build, pipeline_parallel_layer_layout.py) and from the formula T = m·max t_i + (Σ t_i − max t_i)/v.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/training.hpp"
#include "gpuplan/wl/pipeline_layout.hpp"
#include "library.hpp"

using namespace gpuplan;
using gpuplan::test::arch;

namespace {

model::TrainingSystem dgx_h100() { return test::node_system("dgx-h100"); }

wl::TrainingPlan pipeline(int pp, int v, std::int64_t micro_batches) {
  wl::TrainingPlan p;
  p.par.pp = pp;
  p.par.virtual_stages = v;
  if (v > 1) p.schedule = wl::PipelineSchedule::interleaved;
  p.seq_len = 4096;
  p.micro_batch = 1;
  p.global_batch = micro_batches;
  return p;
}

std::vector<std::int64_t> repeat(std::int64_t value, std::size_t n) { return std::vector<std::int64_t>(n, value); }

}  // namespace

TEST_SUITE("pipeline split") {
  TEST_CASE("Llama 3.1 405B: 126 layers on PP 8 × VP 8 with the embedding and the loss counted as layers") {
    // (126 + 2) / (8 · 8) = 2 layers per chunk; chunk 0 (stage 0's first) gives one to the embedding, chunk 63
    // (stage 7's last) one to the loss: stages 0 and 7 hold 15 decoder layers, stages 1-6 hold 16.
    auto plan = pipeline(8, 8, 64);
    plan.split.embedding_as_layer = plan.split.loss_as_layer = true;
    const auto r = model::pipeline_assignment(arch("llama-3.1-405b"), plan);
    REQUIRE(r.error.empty());
    std::vector<std::int64_t> chunks = repeat(2, 64);
    chunks.front() = 1;
    chunks.back() = 1;
    CHECK(r.chunk_layers == chunks);
    CHECK(r.stage_layers == std::vector<std::int64_t>{15, 16, 16, 16, 16, 16, 16, 15});
    // Without the accounting the interleaved split is refused (126 is not a multiple of 64), as Megatron-LM refuses it.
    plan.split = wl::PipelineSplit{};
    const auto plain = model::pipeline_assignment(arch("llama-3.1-405b"), plan);
    CHECK(plain.chunk_layers.empty());
    CHECK(plain.error.find("126 layers do not split evenly into PP 8 × 8 chunks") == 0);
    // Only the embedding counted: 127 layers do not split over PP 8 (Megatron-LM's assertion).
    plan.split.embedding_as_layer = true;
    const auto one = model::pipeline_assignment(arch("llama-3.1-405b"), plan);
    CHECK(one.chunk_layers.empty());
    CHECK(one.error.find("127 layers with the embedding do not split evenly over PP 8") == 0);
  }

  TEST_CASE("PP 16 × VP 4 for the 405B's 126 layers with both counted: 2 per chunk, 7 on the end stages") {
    auto plan = pipeline(16, 4, 64);
    plan.split.embedding_as_layer = plan.split.loss_as_layer = true;
    const auto r = model::pipeline_assignment(arch("llama-3.1-405b"), plan);
    REQUIRE(r.error.empty());
    std::vector<std::int64_t> stages = repeat(8, 16);
    stages.front() = 7;
    stages.back() = 7;
    CHECK(r.stage_layers == stages);
  }

  TEST_CASE("DeepSeek-V3: 61 layers on PP 8 with 5 on the first stage and 2 on the last") {
    // The 6 middle stages share 61 − 5 − 2 = 54 layers: 9 each.
    auto plan = pipeline(8, 1, 8);
    plan.split.first_stage_layers = 5;
    plan.split.last_stage_layers = 2;
    const auto& a = arch("deepseek-v3");
    const auto r = model::pipeline_assignment(a, plan);
    REQUIRE(r.error.empty());
    CHECK(r.stage_layers == std::vector<std::int64_t>{5, 9, 9, 9, 9, 9, 9, 2});
    // 6 on the first: 53 middle layers do not split over 6 stages (Megatron-Core's ValueError).
    plan.split.first_stage_layers = 6;
    const auto bad = model::pipeline_assignment(a, plan);
    CHECK(bad.stage_layers.empty());
    CHECK(bad.error == "the 53 middle layers do not split evenly over the 6 middle pipeline stages");
    // With VP 2 each stage's count must split over its 2 chunks: 5 does not.
    plan = pipeline(8, 2, 16);
    plan.split.first_stage_layers = 5;
    plan.split.last_stage_layers = 2;
    const auto odd = model::pipeline_assignment(a, plan);
    CHECK(odd.error.find("the first stage's 5 layers do not split over its 2 chunks") == 0);
    // And it is a feasibility reason of the layout (no refusal by the interleaved schedule's equal-chunk rule).
    plan.split.first_stage_layers = 4;  // 61 − 4 − 2 = 55 over 6: refused
    const auto f = model::check_training_layout(a, plan, dgx_h100());
    CHECK_FALSE(f.ok);
  }

  TEST_CASE("a layout string: Megatron's DeepSeek-V3 example without the MTP layer") {
    // "Et*3|(tt|)*29,m|L": 32 chunks: E + 3 t, 29 × (t t), m, L.
    const auto parsed = wl::parse_pipeline_layout("Et*3|(tt|)*29,m|L");
    REQUIRE(parsed.ok());
    REQUIRE(parsed.chunks.size() == 32);
    CHECK(parsed.chunks[0].embedding == 1);
    CHECK(parsed.chunks[0].decoder == 3);
    CHECK(parsed.chunks[1].decoder == 2);
    CHECK(parsed.chunks[29].decoder == 2);
    CHECK(parsed.chunks[30].mtp == 1);
    CHECK(parsed.chunks[31].loss == 1);
    std::int64_t t = 0;
    for (const auto& c : parsed.chunks) t += c.decoder;
    CHECK(t == 61);
    // Without the m, on PP 16 (so VP 2): stage i holds chunks i and i + 16. Stage 0: 3 + 2 = 5; stage 14: chunk 14
    // (2) + chunk 30 (empty); stage 15: chunk 15 (2) + chunk 31 (the loss only); the others 2 + 2.
    const auto no_mtp = wl::parse_pipeline_layout("Et*3|(tt|)*29,|L");
    REQUIRE(no_mtp.ok());
    auto plan = pipeline(16, 2, 32);
    for (const auto& c : no_mtp.chunks) plan.split.chunk_layers.push_back(c.decoder);
    const auto r = model::pipeline_assignment(arch("deepseek-v3"), plan);
    REQUIRE(r.error.empty());
    std::vector<std::int64_t> stages = repeat(4, 16);
    stages[0] = 5;
    stages[14] = 2;
    stages[15] = 2;
    CHECK(r.stage_layers == stages);
    CHECK(std::accumulate(stages.begin(), stages.end(), std::int64_t(0)) == 61);
    // On PP 8 the same 32 chunks are 4 per stage: the plan's VP 2 does not match.
    plan.par.pp = 8;
    CHECK(model::pipeline_assignment(arch("deepseek-v3"), plan).error ==
          "the pipeline layout has 32 chunks, but PP 8 × 2 chunks per stage = 16");
  }

  TEST_CASE("layout strings that Megatron refuses are refused with the reason") {
    CHECK(wl::parse_pipeline_layout("tE|L").error == "the embedding (E) must be the first layer of the first chunk");
    CHECK(wl::parse_pipeline_layout("Et|t").error == "the loss (L) must be given, as the last layer");
    CHECK(wl::parse_pipeline_layout("Et|L|").error == "the loss (L) must be in the last chunk (after the last '|')");
    CHECK(wl::parse_pipeline_layout("Emt|L").error ==
          "decoder layers (t) must come before the multi-token-prediction layers (m)");
    // Nested parentheses leave a ')' behind after Megatron's two passes.
    CHECK(wl::parse_pipeline_layout("E((t)*2|)*2L").error.find("invalid layer character") == 0);
    CHECK(wl::parse_pipeline_layout("Et*99999999999|L").error == "expands to more than 1000000 layers");
    // Cosmetic commas and c*N on '|' as Megatron: "E|*3L" is E, three empty separators, L -> 4 chunks.
    const auto sep = wl::parse_pipeline_layout("Et,|*3t,L");
    REQUIRE(sep.ok());
    CHECK(sep.chunks.size() == 4);
  }

  TEST_CASE("the LM head and loss are priced on the last stage only, the embedding on the first only") {
    // Llama 3.1 8B, PP 4 (8 layers per stage), TP 1, 8 micro-batches, 1F1B. Hand derivation of the stage times:
    //   t_1 = t_2 = 8·c + pp   (c: one layer forward + backward; pp: the exposed pipeline sends of one micro-batch)
    //   t_0 = t_1 + embed,  t_3 = t_1 + head
    // with head + embed = the PP 1 step's embedding + head + loss per micro-batch. The LM head of a 128K vocabulary
    // outweighs the embedding lookup, so stage 3 is the slowest; bubble = Σ t_i − max t_i = t_0 + t_1 + t_2.
    const auto& a = arch("llama-3.1-8b");
    const auto sys = dgx_h100();
    const auto plan = pipeline(4, 1, 8);
    const auto e = model::estimate_training(a, plan, sys, Explain::off);
    REQUIRE(e.feasibility.ok);
    REQUIRE(e.stage_time.size() == 4);
    const double m = 8;
    double c = 0;
    for (const auto& op : e.layer_ops) c += op.time.raw();
    const auto comm_pp = [&] {
      for (const auto& x : e.comm)
        if (x.kind == "pp") return x.exposed.raw();
      return 0.0;
    }();
    const double head = e.step.embedding_loss.raw() / m;  // the slowest (last) stage's extra per micro-batch
    auto one = pipeline(1, 1, 8);
    const auto e1 = model::estimate_training(a, one, sys, Explain::off);
    REQUIRE(e1.step_time.raw() > 0);  // evaluated (8B states do not fit one GPU: a reason, not an error)
    const double embed = e1.step.embedding_loss.raw() / m - head;
    CHECK(embed > 0);
    CHECK(head > embed);
    CHECK(e.bottleneck_stage == 3);
    CHECK(e.stage_time[1].raw() == gptest::approx(8 * c + comm_pp / m).epsilon(1e-9));
    CHECK(e.stage_time[2].raw() == gptest::approx(e.stage_time[1].raw()).epsilon(1e-12));
    CHECK(e.stage_time[0].raw() - e.stage_time[1].raw() == gptest::approx(embed).epsilon(1e-9));
    CHECK(e.stage_time[3].raw() - e.stage_time[0].raw() == gptest::approx(head - embed).epsilon(1e-9));
    const double bubble = e.stage_time[0].raw() + e.stage_time[1].raw() + e.stage_time[2].raw();
    CHECK(e.step.bubble.raw() == gptest::approx(bubble).epsilon(1e-12));
    CHECK(e.bubble_fraction == gptest::approx(bubble / (m * e.stage_time[3].raw())).epsilon(1e-12));
  }

  TEST_CASE("bubble of an uneven interleaved schedule: (Σ t_i − max t_i) / v") {
    // Llama 3.1 405B's 126 layers, PP 8 × VP 8 with the embedding and the loss counted (stages of 15, 16 × 6, 15
    // layers); TP 8 on one node per stage. The slowest stage is a middle one (16 layers, no embedding or head:
    // the head and loss of stage 7 weigh less than its missing layer).
    const auto& a = arch("llama-3.1-405b");
    auto plan = pipeline(8, 8, 64);
    plan.par.tp = 8;
    plan.par.sequence_parallel = true;
    plan.split.embedding_as_layer = plan.split.loss_as_layer = true;
    const auto e = model::estimate_training(a, plan, dgx_h100(), Explain::off);
    REQUIRE(e.stage_time.size() == 8);
    REQUIRE(e.step_time.raw() > 0);  // evaluated (it does not fit in memory: a reason, not an error)
    CHECK(e.bottleneck_stage >= 1);
    CHECK(e.bottleneck_stage <= 6);
    double sum = 0, max = 0;
    for (const auto& t : e.stage_time) {
      sum += t.raw();
      max = std::max(max, t.raw());
    }
    CHECK(e.stage_time[1].raw() == gptest::approx(max).epsilon(1e-12));
    CHECK(e.step.bubble.raw() == gptest::approx((sum - max) / 8.0).epsilon(1e-12));
    // Stage 7's 15 layers + head + loss against a middle stage's 16 layers: head + loss < one layer here.
    CHECK(e.stage_time[7] < e.stage_time[1]);
    CHECK(e.stage_time[0] < e.stage_time[7]);
  }

  TEST_CASE("the interleaved schedule needs the micro-batches in groups of PP (Megatron-Core)") {
    auto plan = pipeline(4, 2, 6);
    const auto f = model::check_training_layout(arch("llama-3.1-8b"), plan, dgx_h100());
    CHECK_FALSE(f.ok);
    REQUIRE(f.reasons.size() == 1);
    CHECK(f.reasons[0] ==
          "the interleaved schedule runs the micro-batches in groups of PP = 4: 6 micro-batches per step are not a "
          "multiple (Megatron-Core refuses fewer than PP, or a last group smaller than PP)");
  }

  TEST_CASE("pipeline sends: Megatron-Core sends the whole tensor without SP, the scatter/gather optimisation 1/TP") {
    const auto& a = arch("llama-3.1-70b");
    auto plan = pipeline(4, 1, 8);
    plan.par.tp = 8;
    plan.par.dp = 1;
    plan.par.sequence_parallel = false;
    auto pp_bytes = [&](const wl::TrainingPlan& p) {
      const auto e = model::estimate_training(a, p, dgx_h100(), Explain::off);
      for (const auto& x : e.comm)
        if (x.kind == "pp") return x.bytes_per_step.raw();
      return 0.0;
    };
    // 2 sends per micro-batch (activation, gradient) × 8 micro-batches × s·b·h·2 B = 16 × 4096 · 8192 · 2.
    CHECK(pp_bytes(plan) == gptest::approx(16.0 * 4096 * 8192 * 2));
    plan.pp_scatter_gather = true;
    CHECK(pp_bytes(plan) == gptest::approx(16.0 * 4096 * 8192 * 2 / 8));
  }

  TEST_CASE("overlapped pipeline sends (interleaved, Megatron's default) expose less than sequential ones") {
    const auto& a = arch("llama-3.1-70b");
    auto plan = pipeline(4, 2, 8);
    plan.par.tp = 8;
    plan.par.sequence_parallel = true;
    plan.par.dp = 2;
    plan.global_batch = 16;
    auto exposed = [&](const wl::TrainingPlan& p) {
      const auto e = model::estimate_training(a, p, dgx_h100(), Explain::off);
      for (const auto& x : e.comm)
        if (x.kind == "pp") return std::pair{x.exposed.raw(), x.time.raw()};
      return std::pair{0.0, 0.0};
    };
    const auto on = exposed(plan);
    plan.overlap_p2p_comm = false;
    const auto off = exposed(plan);
    CHECK(off.first == gptest::approx(off.second));
    CHECK(on.second == gptest::approx(off.second));
    CHECK(on.first < 0.5 * off.first);  // a send is far shorter than a chunk's compute: only the SM share is left
  }
}
