// Attention-DP with wide EP in serving and disaggregated pools on different GPU types (model/src/serve/wide_ep.cpp,
// disagg_pools.cpp; issue #21 deliverable 2): the token and byte arithmetic by hand, the per-rank memory, the planner
// sizing whole groups, and the pools each at its own GPU's price.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <cmath>
#include <cstdint>
#include <string>

#include "gpuplan/model/disagg_pools.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/serving.hpp"
#include "gpuplan/model/serving_memory.hpp"
#include "gpuplan/model/topology.hpp"
#include "gpuplan/model/wide_ep.hpp"
#include "library.hpp"

using namespace gpuplan;

namespace {

model::ServingSystem sys_of(const std::string& node) { return test::node_system(node); }

model::CommGroup ep_group(const model::ServingSystem& s, int n) {
  return model::resolve_group(n, 1, *s.node, *s.db);
}

/// DeepSeek-V3 with fp8 weights (its checkpoint), bf16 KV, attention-DP `dp` × TP `tp`.
model::ServingPerfPlan dsv3_plan(int tp, int dp) {
  model::ServingPerfPlan p;
  p.tp = tp;
  p.attention_dp = dp;
  p.weights = model::default_weight_quant(model::StoreDtype::fp8);
  p.compute = hw::Precision::fp8;
  return p;
}

/// DeepSeek-V3's serving memory at `context` tokens under TP `tp` with its fp8 checkpoint (dsv3_plan's weights).
model::ServingMemoryPlan dsv3_memory(int tp, std::int64_t context) {
  model::ServingMemoryPlan mp;
  mp.tp = tp;
  mp.context = context;
  mp.weights = model::default_weight_quant(model::StoreDtype::fp8);
  return mp;
}

/// A serving planner's question: `rate` requests/s of `in` prompt and `out` generated tokens under an ITL target of
/// `itl_ms`, the options storing the plan's weights.
struct PlannerCase {
  model::Traffic tr;
  model::Sla sla;
  model::ServingPlanOptions opt;
};
PlannerCase planner_case(double rate, std::int64_t in, std::int64_t out, double itl_ms,
                         const model::ServingPerfPlan& p) {
  PlannerCase c;
  c.tr.requests_per_s = rate;
  c.tr.input_tokens = in;
  c.tr.output_tokens = out;
  c.sla.itl = units::milliseconds(itl_ms);
  c.opt.memory.weights = p.weights;
  return c;
}

const DerivationInput* input(const Derivation& d, const std::string& symbol) {
  for (const auto& i : d.inputs)
    if (i.symbol == symbol) return &i;
  return nullptr;
}

}  // namespace

TEST_CASE("wide EP all-to-all: T·k/tp rows per GPU, (s-1)/n over NVLink and (n-s)/n over the NIC") {
  // DeepSeek-V3 (h 7168, top-8) on two DGX H100 (8 GPUs per NVLink domain, one 400 Gb/s NIC per GPU), EP 16.
  const auto s = sys_of("dgx-h100");
  const auto g = ep_group(s, 16);
  REQUIRE(g.size == 16);
  REQUIRE(g.scale_up_size == 8);
  // SGLang DP attention (TP 1 per rank), 128 decode tokens per rank: 128 × 8 = 1024 rows, × 7168 × 2 B (bf16).
  const auto x = model::wide_ep_all_to_all(128, 8, 7168, 1, 2.0, 2.0, g);
  CHECK(x.rows == gptest::approx(1024));
  CHECK(x.dispatch.raw() == gptest::approx(1024.0 * 7168 * 2));  // 14,680,064 B
  CHECK(x.combine.raw() == gptest::approx(x.dispatch.raw()));
  CHECK(x.nvlink_share == gptest::approx(7.0 / 16));
  CHECK(x.nic_share == gptest::approx(8.0 / 16));
  // Half of the 14.68 MB leaves through the GPU's own 400 Gb/s = 50 GB/s NIC: at least 146.8 µs, and NCCL's p2p
  // efficiency over IB is not below 0.4 of it.
  CHECK(x.dispatch_time.raw() >= 14680064.0 * 0.5 / 50e9);
  CHECK(x.dispatch_time.raw() < 14680064.0 * 0.5 / 50e9 / 0.4);
  // DeepSeek's decode ranks (TP 4 + SP, [DSV3] §3.4): each GPU sends its quarter of the rank's tokens.
  const auto y = model::wide_ep_all_to_all(128, 8, 7168, 4, 1.0, 2.0, g);
  CHECK(y.rows == gptest::approx(128.0 * 8 / 4));
  CHECK(y.dispatch.raw() == gptest::approx(256.0 * 7168));     // fp8 dispatch
  CHECK(y.combine.raw() == gptest::approx(256.0 * 7168 * 2));  // bf16 combine
  // Inside one node: all of it over NVLink.
  const auto z = model::wide_ep_all_to_all(128, 8, 7168, 1, 2.0, 2.0, ep_group(s, 8));
  CHECK(z.nic_share == gptest::approx(0.0));
  CHECK(z.nvlink_share == gptest::approx(7.0 / 8));
  CHECK(z.dispatch_time < x.dispatch_time);
}

TEST_CASE("DP-rank imbalance: 1 + c·z/sqrt(B), z the expected largest of dp standard normals") {
  // Expected maximum of n standard normals (Harter 1961, "Expected values of normal order statistics", Biometrika
  // 48: n = 10: 1.53875, n = 100: 2.50759); Blom's approximation within 1%.
  CHECK(model::dp_rank_imbalance(10, 1, 1.0) - 1.0 == gptest::approx(1.53875).epsilon(0.01));
  CHECK(model::dp_rank_imbalance(100, 1, 1.0) - 1.0 == gptest::approx(2.50759).epsilon(0.01));
  // B sequences per rank: the spread of a rank's sum shrinks as 1/sqrt(B).
  CHECK(model::dp_rank_imbalance(100, 64, 0.5) - 1.0 ==
        gptest::approx((model::dp_rank_imbalance(100, 1, 1.0) - 1.0) * 0.5 / 8.0));
  CHECK(model::dp_rank_imbalance(1, 16, 1.0) == 1.0);
  CHECK(model::dp_rank_imbalance(80, 128, 0.0) == 1.0);
}

TEST_CASE("a DP16 / EP16 decode step of DeepSeek-V3 on two DGX H100 routes the group's tokens") {
  const auto& a = test::arch("deepseek-v3");
  const auto s = sys_of("dgx-h100");
  const auto p = dsv3_plan(1, 16);
  CHECK(model::serving_ep(p) == 16);
  // 64 sequences per rank at 2000 tokens of context.
  const auto fc = model::forward_cost(a, p, {64, 1, 2000, 0, 0, 0, true}, s, Explain::on);
  const Derivation* moe = fc.derivation.find("serving.moe");
  REQUIRE(moe != nullptr);
  // The EP group routes every rank's tokens: 64 × 16 = 1024.
  REQUIRE(input(*moe, "tokens routed") != nullptr);
  CHECK(input(*moe, "tokens routed")->value == "1024");
  // 256 routed experts over 16 GPUs: 16 each.
  REQUIRE(input(*moe, "experts per GPU") != nullptr);
  CHECK(input(*moe, "experts per GPU")->value == "16");
  const Derivation* w = fc.derivation.find("serving.wide_ep");
  REQUIRE(w != nullptr);
  CHECK(input(*w, "rows")->value == "512");  // 64 × 8 / 1
  // TP 1: all the step's communication is the EP all-to-all, dispatch + combine on each of the 58 MoE layers.
  const auto x = model::wide_ep_all_to_all(64, 8, 7168, 1, p.activation_bytes, p.activation_bytes, ep_group(s, 16));
  CHECK(a.moe_layer_count() == 58);
  CHECK(fc.comm.raw() == gptest::approx((x.dispatch_time + x.combine_time).raw() * 58).epsilon(1e-9));
}

TEST_CASE("wide EP holds 1/EP of the routed experts per GPU: DeepSeek-V3 fits one rank per H100") {
  const auto& a = test::arch("deepseek-v3");
  const auto pc = model::parameter_counts(a, Explain::off);
  const auto& gpu = *sys_of("dgx-h100").gpu;
  model::ServingMemoryPlan mp = dsv3_memory(1, 4096);
  const auto one = model::serving_memory(a, pc, gpu, mp, Explain::off);
  mp.expert_dp = 16;
  const auto wide = model::serving_memory(a, pc, gpu, mp, Explain::off);
  // The difference is 15/16 of the routed experts at the quantized bytes per weight (fp8 + its scales).
  const double b = model::weight_bytes_per_param(mp.weights, a.hidden);
  CHECK((one.stages[0].weights - wide.stages[0].weights).raw() ==
        gptest::approx(double(pc.routed_experts) * 15.0 / 16.0 * b).epsilon(1e-6));
  // 671B fp8 weights do not fit one 80 GB GPU; with the experts over 16 they do, with room for sequences.
  CHECK(one.max_concurrency == 0);
  CHECK(wide.max_concurrency >= 1);
}

TEST_CASE("the planner sizes whole attention-DP groups: GPUs = groups × dp × tp, rate = dp × a rank's") {
  const auto& a = test::arch("deepseek-v3");
  const auto pc = model::parameter_counts(a, Explain::off);
  const auto s = sys_of("dgx-h100");
  const auto p = dsv3_plan(1, 16);
  auto c = planner_case(20, 2000, 500, 100, p);
  c.opt.tp_options = {1};
  c.opt.pp_options = {1};
  const auto r = model::plan_serving(a, pc, p, c.tr, c.sla, s, c.opt, Explain::off);
  REQUIRE(r.best.has_value());
  const auto& b = *r.best;
  CHECK(b.dp == 16);
  CHECK(b.gpus == b.replicas * 16);
  CHECK(b.replica_requests_per_s == gptest::approx(16.0 * b.state.requests_per_s));
  CHECK(b.replicas == std::int64_t(std::ceil(20.0 / b.replica_requests_per_s - 1e-9)));
  CHECK(model::group_layout(b.replicas, 16, 1, 1).find("DP 16 × TP 1") != std::string::npos);
}

TEST_CASE("disaggregated pools on different GPU types: each pool at its own GPU's price, KV over the slower NIC") {
  const auto& a = test::arch("llama-3.1-70b");
  const auto pc = model::parameter_counts(a, Explain::off);
  const auto pre = sys_of("dgx-h100");
  const auto dec = sys_of("dgx-h200");
  model::ServingPerfPlan p;
  p.weights = model::default_weight_quant(model::StoreDtype::fp8);
  p.compute = hw::Precision::fp8;
  auto c = planner_case(10, 2000, 500, 50, p);
  c.sla.ttft = units::milliseconds(2000);
  c.opt.disaggregated = true;
  c.opt.decode_system = &dec;
  const auto r = model::plan_serving(a, pc, p, c.tr, c.sla, pre, c.opt, Explain::on);
  REQUIRE(r.disaggregated.has_value());
  const auto& d = *r.disaggregated;
  CHECK(d.prefill_gpu == "h100-sxm5-80gb");
  CHECK(d.decode_gpu == "h200-sxm-141gb");
  // Each pool at its GPU file's indicative price ($2.69/h H100, $3.59/h H200).
  REQUIRE(pre.gpu->price.has_value());
  REQUIRE(dec.gpu->price.has_value());
  CHECK(units::to_usd_per_hour(d.prefill_cost_rate) == gptest::approx(2.69 * double(d.prefill_gpus)));
  CHECK(units::to_usd_per_hour(d.decode_cost_rate) == gptest::approx(3.59 * double(d.decode_gpus)));
  CHECK(d.cost_per_mtok_usd ==
        gptest::approx((2.69 * double(d.prefill_gpus) + 3.59 * double(d.decode_gpus)) / 3600.0 / (10.0 * 500) * 1e6));
  // Llama 3.1 70B's KV: 80 layers × 8 KV heads × 128 × 2 (K, V) × 2 B = 327,680 B per token; 2000 tokens over the
  // prefill TP ranks, block-rounded; it leaves through one 400 Gb/s (50 GB/s) NIC: at least bytes / 50 GB/s.
  CHECK(d.kv_per_sequence.raw() >= 327680.0 * 2000 / d.prefill_tp);
  CHECK(d.kv_transfer.raw() >= d.kv_per_sequence.raw() / 50e9);
  CHECK(d.gpus == d.prefill_gpus + d.decode_gpus);
  CHECK(d.prefill_gpus % d.prefill_tp == 0);
  CHECK(d.decode_gpus % d.decode_tp == 0);
  CHECK(d.derivation.id == "serving.disaggregated_pools");
  CHECK(model::pools_layout(d).find("on h200-sxm-141gb") != std::string::npos);
  // The decode pool on H200 holds more sequences per GPU at the same TP than on H100: the same ITL target needs no
  // more decode GPUs there than an all-H100 pair.
  model::ServingPlanOptions same = c.opt;
  same.decode_system = &pre;
  same.prefill_system = &pre;
  const auto r2 = model::plan_serving(a, pc, p, c.tr, c.sla, pre, same, Explain::off);
  REQUIRE(r2.disaggregated.has_value());
  CHECK(r2.disaggregated->decode_gpu == "h100-sxm5-80gb");
  CHECK(d.decode_gpus <= r2.disaggregated->decode_gpus);
}

TEST_CASE("DeepSeek-V3's own deployment: prefill DP8 x TP4 (EP32), decode DP80 x TP4 (EP320) on H800 nodes") {
  // DeepSeek-V3 Technical Report (arXiv 2412.19437) §3.4.1-3.4.2: prefill 4 nodes, attention TP4 + SP with DP8, MoE
  // EP32; decode 40 nodes, attention TP4 + SP with DP80, MoE EP320.
  const auto& a = test::arch("deepseek-v3");
  const auto h800 = sys_of("hgx-h800");
  // One decode rank of 4 GPUs holding 128 sequences: the group routes 128 × 80 tokens; each GPU sends its quarter
  // of the rank's tokens × 8 experts; 7 of the 320 peers share its NVLink domain, 312 are behind its NIC.
  const auto p = dsv3_plan(4, 80);
  CHECK(model::serving_ep(p) == 320);
  const auto fc = model::forward_cost(a, p, {128, 1, 4096, 0, 0, 0, true}, h800, Explain::on);
  const Derivation* moe = fc.derivation.find("serving.moe");
  REQUIRE(moe != nullptr);
  CHECK(input(*moe, "tokens routed")->value == "10240");
  CHECK(input(*moe, "experts per GPU")->value == "0.8");  // 256 over 320: redundant slots taken as the mean
  const Derivation* w = fc.derivation.find("serving.wide_ep");
  REQUIRE(w != nullptr);
  CHECK(input(*w, "rows")->value == "256");
  const auto x = model::wide_ep_all_to_all(128, 8, 7168, 4, 2.0, 2.0, ep_group(h800, 320));
  CHECK(x.nvlink_share == gptest::approx(7.0 / 320));
  CHECK(x.nic_share == gptest::approx(312.0 / 320));
  // The pools sized in whole groups of each.
  const auto pc = model::parameter_counts(a, Explain::off);
  auto c = planner_case(50, 4096, 1024, 50, p);
  c.opt.disaggregated = true;
  c.opt.tp_options = {4};
  c.opt.pp_options = {1};
  c.opt.prefill_attention_dp = 8;
  c.opt.decode_attention_dp = 80;
  auto colocated = dsv3_plan(4, 8);
  const auto r = model::plan_serving(a, pc, colocated, c.tr, c.sla, h800, c.opt, Explain::off);
  REQUIRE(r.disaggregated.has_value());
  const auto& d = *r.disaggregated;
  CHECK(d.prefill_dp == 8);
  CHECK(d.decode_dp == 80);
  CHECK(d.prefill_gpus % 32 == 0);
  CHECK(d.decode_gpus % 320 == 0);
  CHECK(model::pools_layout(d).find("DP 80 × TP 4") != std::string::npos);
}

TEST_CASE("two DGX H200 nodes: DeepSeek-V3 decode under DP16/EP16 against two TP8 replicas") {
  // 256 sequences at 4096 tokens on 16 H200s: two TP8 replicas of 128 (EP 8 inside each), or 16 attention ranks of
  // 16 with the experts over all 16 GPUs.
  const auto& a = test::arch("deepseek-v3");
  const auto s = sys_of("dgx-h200");
  auto tp8 = dsv3_plan(8, 1);
  tp8.ep = 8;
  const auto dp16 = dsv3_plan(1, 16);
  const auto r = model::forward_cost(a, tp8, {128, 1, 4096, 0, 0, 0, true}, s, Explain::off);
  const auto w = model::forward_cost(a, dp16, {16, 1, 4096, 0, 0, 0, true}, s, Explain::off);
  // MLA's latent cache is not split by TP (every TP rank reads all 128 sequences' cache); a DP rank reads only its
  // own 16: 8x less KV read per GPU, by hand.
  CHECK(r.kv_bytes.raw() == gptest::approx(8.0 * w.kv_bytes.raw()).epsilon(1e-9));
  // Per sequence: 128 × 4096 tokens × 61 layers × (512 + 64) × 2 B on each TP8 GPU.
  CHECK(r.kv_bytes.raw() == gptest::approx(128.0 * 4096 * 61 * 576 * 2).epsilon(0.01));
  // Expert weights read per GPU halve (256/16 experts, all touched, against 256/8); the attention and shared weights
  // are whole on a DP rank (8x the TP8 share): the totals are both finite and positive, the step times too.
  CHECK(r.total.raw() > 0);
  CHECK(w.total.raw() > 0);
  // KV capacity per GPU at 4096 + 1024 tokens: a DP rank's cache is its own (no TP copy of the latent), so 16
  // ranks hold more sequences than two TP8 replicas.
  const auto pc = model::parameter_counts(a, Explain::off);
  model::ServingMemoryPlan mp = dsv3_memory(8, 5120);
  const auto m8 = model::serving_memory(a, pc, *s.gpu, mp, Explain::off);
  mp.tp = 1;
  mp.expert_dp = 16;
  const auto m16 = model::serving_memory(a, pc, *s.gpu, mp, Explain::off);
  CHECK(16 * m16.max_concurrency > 2 * m8.max_concurrency);
}
