// Training step model: exact formula checks of its building blocks (pipeline bubble, GEMM roofline), the layout
// feasibility messages, properties that any plausible step-time model must have (faster hardware is never slower,
// memory per GPU never rises with more sharding, MFU is a fraction, throughput and FLOPs are what they say) over
// several models and layouts, and the textbook's time-to-train template (T15).
#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_paths.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/collective_time.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/efficiency.hpp"
#include "gpuplan/model/flops.hpp"
#include "gpuplan/model/ops.hpp"
#include "gpuplan/model/params.hpp"
#include "gpuplan/model/training.hpp"
#include "library.hpp"

using namespace gpuplan;
using namespace gpuplan::units::literals;
using gpuplan::test::arch;

namespace {

const hw::HardwareDb& db() { return test::hardware(); }

const hw::GpuSpec& gpu(const std::string& id) {
  const hw::GpuSpec* g = db().find_gpu(id);
  REQUIRE_MESSAGE(g != nullptr, "GPU not in the database: " << id);
  return *g;
}

using test::node_system;

struct Layout {
  int tp = 1, pp = 1, dp = 1, cp = 1, ep = 1, v = 1;
  std::int64_t micro = 1, global = 0, seq = 4096;  // global 0: micro · dp
  wl::ZeroStage zero = wl::ZeroStage::none;
  wl::Recompute recompute = wl::Recompute::none;
};

wl::TrainingPlan plan_of(const Layout& l) {
  wl::TrainingPlan p;
  p.par.tp = l.tp;
  p.par.pp = l.pp;
  p.par.dp = l.dp;
  p.par.cp = l.cp;
  p.par.ep = l.ep;
  p.par.sequence_parallel = l.tp > 1;
  p.par.virtual_stages = l.v;
  if (l.v > 1) p.schedule = wl::PipelineSchedule::interleaved;
  p.micro_batch = l.micro;
  p.global_batch = l.global > 0 ? l.global : l.micro * l.dp;
  p.seq_len = l.seq;
  p.zero = l.zero;
  p.recompute = l.recompute;
  return p;
}

/// One model on one node type under one layout: the cases the properties run over.
struct Case {
  std::string name, model, node;
  Layout layout;
  bool crosses_nodes = false;  ///< some parallel group uses the scale-out fabric
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = [] {
    std::vector<Case> v;
    {
      Layout l;
      l.dp = 8;
      l.global = 64;
      l.zero = wl::ZeroStage::optimizer;
      v.push_back({"llama-3.1-8b DP 8 ZeRO-1 on DGX H100", "llama-3.1-8b", "dgx-h100", l, false});
    }
    {
      Layout l;
      l.tp = 2;
      l.dp = 8;
      l.global = 64;
      l.zero = wl::ZeroStage::optimizer;
      v.push_back({"llama-3.1-8b TP 2 DP 8 over two DGX H100", "llama-3.1-8b", "dgx-h100", l, true});
    }
    {
      Layout l;
      l.tp = 2;
      l.cp = 2;
      l.dp = 4;
      l.seq = 8192;
      l.global = 32;
      l.zero = wl::ZeroStage::gradients;
      v.push_back({"llama-3.1-8b TP 2 CP 2 DP 4 seq 8192", "llama-3.1-8b", "dgx-h100", l, true});
    }
    {
      Layout l;
      l.tp = 8;
      l.pp = 4;
      l.v = 2;
      l.dp = 2;
      l.global = 64;
      l.recompute = wl::Recompute::selective;
      v.push_back({"llama-3.1-70b TP 8 PP 4 interleaved v 2 DP 2", "llama-3.1-70b", "dgx-h100", l, true});
    }
    {
      Layout l;
      l.tp = 2;
      l.dp = 8;
      l.ep = 8;
      l.global = 64;
      l.zero = wl::ZeroStage::optimizer;
      v.push_back({"mixtral-8x7b TP 2 DP 8 EP 8", "mixtral-8x7b", "dgx-h100", l, true});
    }
    {
      Layout l;
      l.tp = 8;
      l.dp = 8;
      l.ep = 8;
      l.global = 64;
      l.zero = wl::ZeroStage::parameters;
      l.recompute = wl::Recompute::full;
      v.push_back({"deepseek-v3 TP 8 DP 8 EP 8 ZeRO-3 (MLA + MoE)", "deepseek-v3", "dgx-h200", l, true});
    }
    {
      Layout l;
      l.tp = 8;
      l.pp = 8;
      l.dp = 2;
      l.seq = 2048;
      l.global = 128;
      l.recompute = wl::Recompute::full;
      v.push_back({"gpt3-175b TP 8 PP 8 DP 2 on DGX A100", "gpt3-175b", "dgx-a100", l, true});
    }
    {
      Layout l;
      l.dp = 8;
      l.micro = 2;
      l.global = 64;
      l.seq = 8192;
      l.zero = wl::ZeroStage::parameters;
      v.push_back({"mistral-7b-v0.1 FSDP 8 (sliding window) on DGX H200", "mistral-7b-v0.1", "dgx-h200", l, false});
    }
    return v;
  }();
  return c;
}

model::TrainingEstimate estimate(const Case& c, const model::TrainingSystem& sys,
                                 const std::function<void(wl::TrainingPlan&)>& tweak = {}) {
  wl::TrainingPlan p = plan_of(c.layout);
  if (tweak) tweak(p);
  return model::estimate_training(arch(c.model), p, sys, Explain::off);
}

/// Every number of an estimate is finite.
void check_finite(const model::TrainingEstimate& e) {
  auto fin = [](double v, const std::string& what) {
    CAPTURE(what);
    CHECK(std::isfinite(v));
  };
  const auto& s = e.step;
  for (auto [v, w] : std::vector<std::pair<units::Seconds, const char*>>{
           {s.gemm, "gemm"}, {s.attention, "attention"}, {s.elementwise, "elementwise"},
           {s.embedding_loss, "embedding_loss"}, {s.recompute, "recompute"}, {s.comm_exposed, "comm_exposed"},
           {s.bubble, "bubble"}, {s.optimizer, "optimizer"}, {s.total, "total"}, {e.step_time, "step_time"}})
    fin(v.raw(), w);
  fin(e.tokens_per_s, "tokens_per_s");
  fin(e.mfu, "mfu");
  fin(e.hfu, "hfu");
  fin(e.model_flops_per_step.raw(), "model_flops_per_step");
  fin(e.hardware_flops_per_step.raw(), "hardware_flops_per_step");
  fin(e.bubble_fraction, "bubble_fraction");
  for (const auto& c : e.comm) {
    CAPTURE(c.kind);
    fin(c.bytes_per_step.raw(), "comm bytes");
    fin(c.time.raw(), "comm time");
    fin(c.exposed.raw(), "comm exposed");
    CHECK(c.exposed.raw() >= 0);
    CHECK(c.exposed.raw() <= c.time.raw() * (1 + 1e-9) + 1e-3);  // exposed ≤ total, plus at most a bucket copy
  }
  const auto& m = e.memory;
  for (auto [v, w] : std::vector<std::pair<units::Bytes, const char*>>{
           {m.weights, "weights"}, {m.gradients, "gradients"}, {m.master_weights, "master_weights"},
           {m.optimizer_states, "optimizer_states"}, {m.activations, "activations"}, {m.logits, "logits"},
           {m.cuda_context, "cuda_context"}, {m.nccl_buffers, "nccl_buffers"}, {m.fragmentation, "fragmentation"},
           {m.total, "memory total"}}) {
    fin(v.raw(), w);
    CHECK(v.raw() >= 0);
  }
  if (e.time_to_train) fin(e.time_to_train->raw(), "time_to_train");
  if (e.gpu_hours) fin(*e.gpu_hours, "gpu_hours");
  if (e.cost) fin(e.cost->raw(), "cost");
  if (e.energy) fin(e.energy->raw(), "energy");
  for (const auto& op : e.layer_ops) {
    CAPTURE(op.name);
    fin(op.flops.raw(), "op flops");
    fin(op.bytes.raw(), "op bytes");
    fin(op.time.raw(), "op time");
    fin(op.efficiency, "op efficiency");
    CHECK(op.time.raw() > 0);
  }
}

/// A copy of `g` with every dense peak scaled by `peak_k` and the HBM bandwidth by `bw_k`.
hw::GpuSpec scaled_gpu(const hw::GpuSpec& g, double peak_k, double bw_k) {
  hw::GpuSpec s = g;
  for (auto& p : s.dense_peak)
    if (p) *p = *p * peak_k;
  s.memory.bandwidth = s.memory.bandwidth * bw_k;
  return s;
}

/// A copy of the database in which `node_id`'s scale-out NICs run `k` times faster.
hw::HardwareDb with_nic_scaled(const std::string& node_id, double k) {
  hw::HardwareDb copy = db();
  bool found = false;
  for (auto& n : copy.nodes)
    if (n.info.id == node_id) {
      REQUIRE(n.scale_out.has_value());
      n.scale_out->nic = n.scale_out->nic * k;
      found = true;
    }
  REQUIRE(found);
  return copy;
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

const model::Device& h100() {
  static const model::Device d = model::make_device(gpu("h100-sxm5-80gb"));
  return d;
}

}  // namespace

// ================================================================================================ exact formulas

TEST_SUITE("pipeline bubble") {
  TEST_CASE("1F1B bubble is (p - 1)/m: PP 4 with 32 micro-batches is 3/32") {
    CHECK(model::pipeline_bubble_fraction(4, 1, 32) == gptest::approx(3.0 / 32.0).epsilon(1e-15));
  }
  TEST_CASE("interleaved bubble is (p - 1)/(v·m): PP 4, v 2, 32 micro-batches is 3/64") {
    CHECK(model::pipeline_bubble_fraction(4, 2, 32) == gptest::approx(3.0 / 64.0).epsilon(1e-15));
  }
  TEST_CASE("no pipeline means no bubble: PP 1 gives 0 for any v and m") {
    CHECK(model::pipeline_bubble_fraction(1, 1, 32) == 0.0);
    CHECK(model::pipeline_bubble_fraction(1, 4, 1) == 0.0);
    CHECK(model::pipeline_bubble_fraction(1, 1, 1) == 0.0);
  }
  TEST_CASE("the bubble fraction falls as micro-batches are added") {
    double prev = 1e9;
    for (std::int64_t m : {1, 2, 4, 8, 16, 64, 256}) {
      const double f = model::pipeline_bubble_fraction(8, 1, m);
      CHECK(f < prev);
      CHECK(f == gptest::approx(7.0 / double(m)));
      prev = f;
    }
  }
}

TEST_SUITE("GEMM roofline") {
  TEST_CASE("a GEMM does 2·m·n·k FLOPs and moves (m·k + k·n + m·n)·2 bytes in bf16") {
    for (auto s : std::vector<model::GemmShape>{{8192, 8192, 8192, 1}, {1, 4096, 4096, 1}, {4096, 14336, 4096, 1},
                                                {4096, 128256, 4096, 1}, {333, 777, 555, 1}, {2048, 128, 2048, 16}}) {
      CAPTURE(s.m);
      CAPTURE(s.n);
      CAPTURE(s.k);
      CAPTURE(s.batch);
      const auto c = model::gemm_cost("g", s, hw::Precision::bf16, h100());
      const double m = double(s.m), n = double(s.n), k = double(s.k), b = double(s.batch);
      CHECK(c.flops.raw() == 2.0 * m * n * k * b);
      CHECK(c.bytes.raw() == (m * k + k * n + m * n) * 2.0 * b);
      CHECK(c.intensity().raw() == gptest::approx(c.flops.raw() / c.bytes.raw()).epsilon(1e-15));
      CHECK(c.cls == model::OpClass::gemm);
    }
  }

  TEST_CASE("fp32 GEMM bytes are 4 per element, fp8 1 per element") {
    const model::GemmShape s{1024, 2048, 512, 1};
    const double elems = 1024.0 * 512 + 512.0 * 2048 + 1024.0 * 2048;
    CHECK(model::gemm_cost("g", s, hw::Precision::fp32, h100()).bytes.raw() == elems * 4.0);
    CHECK(model::gemm_cost("g", s, hw::Precision::fp8, h100()).bytes.raw() == elems * 1.0);
  }

  TEST_CASE("a weight-gradient GEMM accumulating into fp32 gradients adds 6 B per weight element at the streaming rate") {
    const auto& d = h100();
    // QKV wgrad of a 4096-wide layer, 4096 tokens: dW[4096 x 12288] = X^T . dY.
    const auto plain = model::gemm_cost("wgrad", {4096, 12288, 4096, 1}, hw::Precision::bf16, d);
    const double w = 4096.0 * 12288.0;
    const double bw = d.gpu->memory.bandwidth.raw() * d.eff.hbm;
    const auto fp32 = model::accumulating_wgrad(plain, w, 4.0, d);
    CHECK(fp32.bytes.raw() == gptest::approx(plain.bytes.raw() + 6.0 * w).epsilon(1e-12));
    CHECK(fp32.time.raw() == gptest::approx(plain.time.raw() + 6.0 * w / bw).epsilon(1e-12));
    CHECK(fp32.flops.raw() == plain.flops.raw());
    // A 16-bit gradient buffer: read 2 + write 2 against the plain output's write 2.
    const auto b16 = model::accumulating_wgrad(plain, w, 2.0, d);
    CHECK(b16.time.raw() == gptest::approx(plain.time.raw() + 2.0 * w / bw).epsilon(1e-12));
    // Which plans accumulate in the epilogue: Megatron-style (fused kernels, its mixed precision), not PyTorch AMP.
    wl::TrainingPlan meg;
    CHECK(model::wgrad_accumulates(meg));
    wl::TrainingPlan amp;
    amp.mixed_precision = wl::MixedPrecision::amp;
    CHECK_FALSE(model::wgrad_accumulates(amp));
    wl::TrainingPlan eager;
    eager.kernels = wl::KernelStyle::eager;
    CHECK_FALSE(model::wgrad_accumulates(eager));
  }

  TEST_CASE("a weight gradient added into the buffer by a separate kernel moves 2 + 2·b_g B per element and one launch") {
    const auto& d = h100();
    REQUIRE(d.eff.launch_class.elementwise.raw() == 0.0);  // the built-in rows price every kernel at kernel_launch
    const auto plain = model::gemm_cost("wgrad", {4096, 12288, 4096, 1}, hw::Precision::bf16, d);
    const double w = 4096.0 * 12288.0;
    const double bw = d.gpu->memory.bandwidth.raw() * d.eff.hbm;
    // Megatron-LM 2021, fp16 grads: the fresh 2 B gradient read, the 2 B buffer read and written (AccumulateGrad).
    const auto b16 = model::accumulating_wgrad(plain, w, 2.0, d, true);
    CHECK(b16.bytes.raw() == gptest::approx(plain.bytes.raw() + 6.0 * w).epsilon(1e-12));
    CHECK(b16.time.raw() ==
          gptest::approx(plain.time.raw() + 6.0 * w / bw + d.eff.kernel_launch.raw()).epsilon(1e-12));
    // An fp32 main_grad buffer (Megatron's local DDP hook main_grad.add_): 2 + 4 + 4 B.
    const auto fp32 = model::accumulating_wgrad(plain, w, 4.0, d, true);
    CHECK(fp32.time.raw() ==
          gptest::approx(plain.time.raw() + 10.0 * w / bw + d.eff.kernel_launch.raw()).epsilon(1e-12));
    CHECK(fp32.flops.raw() == plain.flops.raw());
  }

  TEST_CASE("an fp8 GEMM with split accumulation runs at the measured 0.947 of the fast-accumulation rate") {
    const auto& d = h100();
    const model::GemmShape fast{8192, 8192, 8192, 1};
    model::GemmShape split = fast;
    split.split_accumulation = true;
    const auto f = model::gemm_cost("fast", fast, hw::Precision::fp8, d);
    const auto s = model::gemm_cost("split", split, hw::Precision::fp8, d);
    CHECK(d.eff.fp8_split_accumulation == gptest::approx(0.947).epsilon(1e-12));
    CHECK(s.efficiency == gptest::approx(f.efficiency * 0.947).epsilon(1e-12));
    CHECK(s.time > f.time);
    // bf16 GEMMs have no fast-accumulation mode: the flag changes nothing.
    CHECK(model::gemm_cost("b", split, hw::Precision::bf16, d).time.raw() ==
          model::gemm_cost("b", fast, hw::Precision::bf16, d).time.raw());
  }

  TEST_CASE("the H100 bf16 ridge point is 989.4 TFLOP/s / 3.35 TB/s = 295.3 FLOP/B") {
    const auto& d = h100();
    const double ridge = (d.peak(hw::Precision::bf16) / d.gpu->memory.bandwidth).raw();
    CHECK(ridge == gptest::approx(989.4e12 / 3.35e12).epsilon(1e-12));
    CHECK(ridge == gptest::approx(295.34).epsilon(1e-4));
  }

  TEST_CASE("an 8192³ bf16 GEMM on H100 is compute-bound: intensity 8192/3 = 2731 FLOP/B, far above the ridge") {
    const auto& d = h100();
    const auto c = model::gemm_cost("8192³", {8192, 8192, 8192, 1}, hw::Precision::bf16, d);
    CHECK(c.intensity().raw() == gptest::approx(8192.0 / 3.0).epsilon(1e-12));
    CHECK(c.bound == model::Bound::compute);
    // time = FLOPs / (peak · η · u) + t_launch; achieved rate below the peak.
    const double expected = c.flops.raw() / (d.peak(hw::Precision::bf16).raw() * c.efficiency) + d.eff.kernel_launch.raw();
    CHECK(c.time.raw() == gptest::approx(expected).epsilon(1e-12));
    CHECK(c.efficiency > 0.5);
    CHECK(c.efficiency <= 1.0);
    CHECK(c.achieved().raw() < d.peak(hw::Precision::bf16).raw());
  }

  TEST_CASE("the 8192³ GEMM's efficiency is the GEMM ceiling times its tile/wave utilisation") {
    const auto& d = h100();
    const double sms = d.gpu->compute_units;
    const double tiles = std::ceil(8192.0 / d.eff.tile_m) * std::ceil(8192.0 / d.eff.tile_n);
    const double waves = std::ceil(tiles / sms);
    const double u = 8192.0 * 8192.0 / (waves * sms * d.eff.tile_m * d.eff.tile_n);
    const auto c = model::gemm_cost("8192³", {8192, 8192, 8192, 1}, hw::Precision::bf16, d);
    CHECK(c.efficiency == gptest::approx(model::gemm_ceiling(d.eff, hw::Precision::bf16) * u).epsilon(1e-12));
  }

  TEST_CASE("tile/wave utilisation is 1 for a shape of exactly one full wave of whole tiles") {
    const auto& d = h100();
    const int sms = d.gpu->compute_units;
    REQUIRE(sms > 0);
    const double ceiling = model::gemm_ceiling(d.eff, hw::Precision::bf16);
    // One tile row per SM: m = tile_m · SMs, n = tile_n -> SMs tiles in one wave.
    const auto one_wave = model::gemm_cost("full wave", {std::int64_t(d.eff.tile_m) * sms, d.eff.tile_n, 8192, 1},
                                           hw::Precision::bf16, d);
    CHECK(one_wave.efficiency == gptest::approx(ceiling).epsilon(1e-12));
    // Two full waves, tiles spread over both dimensions.
    const auto two_waves = model::gemm_cost("two waves", {std::int64_t(d.eff.tile_m) * 2, std::int64_t(d.eff.tile_n) * sms, 8192, 1},
                                            hw::Precision::bf16, d);
    CHECK(two_waves.efficiency == gptest::approx(ceiling).epsilon(1e-12));
    // One tile more than a wave needs a second, nearly empty wave: utilisation (SMs + 1) / (2 · SMs).
    const auto spill = model::gemm_cost("spill", {std::int64_t(d.eff.tile_m) * (sms + 1), d.eff.tile_n, 8192, 1},
                                        hw::Precision::bf16, d);
    CHECK(spill.efficiency == gptest::approx(ceiling * double(sms + 1) / double(2 * sms)).epsilon(1e-12));
    // A partial tile wastes the rest of it.
    const auto partial = model::gemm_cost("partial", {std::int64_t(d.eff.tile_m) * sms - d.eff.tile_m / 2, d.eff.tile_n, 8192, 1},
                                          hw::Precision::bf16, d);
    CHECK(partial.efficiency < ceiling);
  }

  TEST_CASE("a 1×4096×4096 bf16 GEMM (decode GEMV) has intensity ≈ 1 FLOP/B, 295× below the H100 ridge") {
    const auto c = model::gemm_cost("decode", {1, 4096, 4096, 1}, hw::Precision::bf16, h100());
    // 2·4096² FLOPs over (4096 + 4096² + 4096)·2 B.
    CHECK(c.intensity().raw() == gptest::approx(2.0 * 4096 * 4096 / ((2.0 * 4096 + 4096.0 * 4096) * 2.0)).epsilon(1e-12));
    CHECK(c.intensity().raw() < 1.0);
  }

  TEST_CASE("a 1×4096×4096 bf16 GEMM (decode GEMV) on H100 is memory-bound and takes about bytes / bandwidth") {
    // 33.6 MB of weights at 3.35 TB/s: about 10 µs of HBM time (textbook T20's argument for one matrix). A GEMV
    // kernel (or split-K) streams the matrix at the HBM rate; the tensor-core tile of 128 rows for one row of
    // activations is not what a library runs for m = 1.
    const auto& d = h100();
    const auto c = model::gemm_cost("decode", {1, 4096, 4096, 1}, hw::Precision::bf16, d);
    CHECK(c.bound == model::Bound::memory);
    const double hbm_time = c.bytes.raw() / (d.gpu->memory.bandwidth.raw() * d.eff.hbm) + d.eff.kernel_launch.raw();
    CHECK(c.time.raw() == gptest::approx(hbm_time).epsilon(0.05));
  }

  TEST_CASE("bound and time agree with the effective ridge for every shape: compute-bound iff FLOP time ≥ byte time") {
    const auto& d = h100();
    for (auto s : std::vector<model::GemmShape>{{8192, 8192, 8192, 1}, {4096, 4096, 4096, 1}, {4096, 14336, 4096, 1},
                                                {64, 4096, 4096, 1},    {16, 8192, 8192, 1},   {1024, 1024, 1024, 1},
                                                {2048, 128, 2048, 32},  {512, 512, 64, 1}}) {
      CAPTURE(s.m);
      CAPTURE(s.n);
      CAPTURE(s.k);
      const auto c = model::gemm_cost("g", s, hw::Precision::bf16, d);
      const double t_flop = c.flops.raw() / (d.peak(hw::Precision::bf16).raw() * c.efficiency);
      const double t_byte = c.bytes.raw() / (d.gpu->memory.bandwidth.raw() * d.eff.hbm);
      CHECK(c.time.raw() == gptest::approx(std::max(t_flop, t_byte) + d.eff.kernel_launch.raw()).epsilon(1e-12));
      if (c.bound == model::Bound::compute) CHECK(t_flop >= t_byte);
      if (c.bound == model::Bound::memory) CHECK(t_byte > t_flop);
      if (c.bound == model::Bound::launch) CHECK(d.eff.kernel_launch.raw() > std::max(t_flop, t_byte));
    }
  }

  TEST_CASE("a GEMM 3× above the ridge is never memory-bound and one 3× below it never compute-bound") {
    // The measured GEMM and HBM ceilings are within 3× of each other, so a factor of 3 from the datasheet ridge
    // decides the bound whatever the efficiencies. Small-m GEMMs (decode, small MoE experts) are the ones below.
    const auto& d = h100();
    const double ridge = (d.peak(hw::Precision::bf16) / d.gpu->memory.bandwidth).raw();
    for (auto s : std::vector<model::GemmShape>{{8192, 8192, 8192, 1}, {4096, 4096, 4096, 1}, {4096, 14336, 4096, 1},
                                                {1, 4096, 4096, 1},     {8, 4096, 4096, 1},    {16, 8192, 8192, 1},
                                                {64, 4096, 4096, 1},    {1, 128256, 4096, 1}}) {
      CAPTURE(s.m);
      CAPTURE(s.n);
      CAPTURE(s.k);
      const auto c = model::gemm_cost("g", s, hw::Precision::bf16, d);
      CAPTURE(c.intensity().raw());
      CAPTURE(c.time.raw());
      if (c.intensity().raw() > 3.0 * ridge) CHECK(c.bound != model::Bound::memory);
      if (c.intensity().raw() < ridge / 3.0) CHECK(c.bound != model::Bound::compute);
    }
  }

  TEST_CASE("a streaming op takes bytes / (bandwidth · η_hbm) + launch") {
    const auto& d = h100();
    const auto c = model::streaming_cost("norm", model::OpClass::elementwise, 1_GB, units::flop(1e9), d);
    CHECK(c.bound == model::Bound::memory);
    CHECK(c.time.raw() ==
          gptest::approx(1e9 / (d.gpu->memory.bandwidth.raw() * d.eff.hbm) + d.eff.kernel_launch.raw()).epsilon(1e-12));
  }

  TEST_CASE("flash attention forward does 2·b·h·s²·(d_qk + d_v) FLOPs, halved when causal, and backward is 2.5×") {
    const auto& d = h100();
    const auto full = model::attention_cost("a", 32, 4096, 4096, 128, 128, false, true, false, hw::Precision::bf16, d);
    const auto causal = model::attention_cost("a", 32, 4096, 4096, 128, 128, true, true, false, hw::Precision::bf16, d);
    const auto bwd = model::attention_cost("a", 32, 4096, 4096, 128, 128, true, true, true, hw::Precision::bf16, d);
    REQUIRE(full.size() == 1);
    REQUIRE(causal.size() == 1);
    REQUIRE(bwd.size() == 1);
    CHECK(full[0].flops.raw() == 2.0 * 32 * 4096.0 * 4096.0 * 256);
    CHECK(causal[0].flops.raw() == full[0].flops.raw() / 2);
    CHECK(bwd[0].flops.raw() == 2.5 * causal[0].flops.raw());
    CHECK(bwd[0].time > causal[0].time);
  }

  TEST_CASE("unfused attention with dropout runs the dropout as a kernel of its own: 2·e + 1 B per score each way") {
    const auto& d = h100();
    // 12 heads of one micro-batch (GPT-3 175B at TP 8), s = 2048, fp16: 12·2048² scores.
    const double scores = 12.0 * 2048.0 * 2048.0;
    const double bw = d.gpu->memory.bandwidth.raw() * d.eff.hbm;
    for (const bool backward : {false, true}) {
      const auto without = model::attention_cost("a", 12, 2048, 2048, 128, 128, true, false, backward,
                                                 hw::Precision::fp16, d, false);
      const auto with = model::attention_cost("a", 12, 2048, 2048, 128, 128, true, false, backward,
                                              hw::Precision::fp16, d, true);
      REQUIRE(without.size() == 3);  // QKᵀ, P·V, softmax
      REQUIRE(with.size() == 4);
      // Forward: read the probabilities, write them and a 1-byte mask; backward: read the gradient and the mask,
      // write the gradient.
      CHECK(with[3].bytes.raw() == gptest::approx(scores * 5.0).epsilon(1e-12));
      CHECK(with[3].time.raw() == gptest::approx(scores * 5.0 / bw + d.eff.kernel_launch.raw()).epsilon(1e-12));
      CHECK(with[2].time.raw() == without[2].time.raw());  // the fused scale-mask-softmax is unchanged
    }
  }
}

TEST_SUITE("fp8 training") {
  TEST_CASE("the LM head stays bf16 under fp8 training: the head and loss take the same time as in a bf16 plan") {
    Layout l;
    l.dp = 8;
    l.micro = 1;
    l.global = 64;
    l.seq = 4096;
    l.zero = wl::ZeroStage::parameters;
    const auto sys = node_system("dgx-h100");
    wl::TrainingPlan bf = plan_of(l), f8 = plan_of(l);
    f8.precision.compute = hw::Precision::fp8;
    const auto eb = model::estimate_training(arch("llama-3.1-8b"), bf, sys, Explain::off);
    const auto e8 = model::estimate_training(arch("llama-3.1-8b"), f8, sys, Explain::off);
    REQUIRE(eb.feasibility.ok);
    REQUIRE(e8.feasibility.ok);
    CHECK(e8.step.embedding_loss.raw() == gptest::approx(eb.step.embedding_loss.raw()).epsilon(1e-12));
    CHECK(e8.step.gemm < eb.step.gemm);  // the transformer's GEMMs do run in fp8
    CHECK(model::sixteen_bit_of(hw::Precision::fp8) == hw::Precision::bf16);
    CHECK(model::sixteen_bit_of(hw::Precision::fp4) == hw::Precision::bf16);
    CHECK(model::sixteen_bit_of(hw::Precision::bf16) == hw::Precision::bf16);
  }
}

TEST_SUITE("LM loss kernels") {
  // Megatron-Core's cross entropy (megatron/core/tensor_parallel/cross_entropy.py), counted pass by pass over the
  // T × V/tp logits: unfused 38 B forward (upcast 2 + 4, max 4, subtract 8, exp 8, sum 4, divide 8) and 14 B backward
  // (scale 8, cast back 4 + 2); a one-pass fused kernel 6 + 6. The difference, 40 B per logit at the streaming rate,
  // is all that changes in the step (PP 1: every micro-batch runs the loss).
  TEST_CASE("Megatron's unfused cross entropy adds 40 B per logit at the streaming rate over the one-pass kernel") {
    Layout l;
    l.dp = 8;
    l.micro = 1;
    l.global = 64;
    l.seq = 4096;
    l.zero = wl::ZeroStage::optimizer;
    const auto sys = node_system("dgx-h100");
    wl::TrainingPlan te = plan_of(l), unf = plan_of(l), nat = plan_of(l);
    unf.cross_entropy = wl::CrossEntropyKernel::unfused;
    nat.cross_entropy = wl::CrossEntropyKernel::native;
    const auto& a = arch("llama-3.1-8b");
    const auto et = model::estimate_training(a, te, sys, Explain::off);
    const auto eu = model::estimate_training(a, unf, sys, Explain::off);
    const auto en = model::estimate_training(a, nat, sys, Explain::off);
    REQUIRE(et.feasibility.ok);
    const double logits = 4096.0 * double(a.vocab);  // per micro-batch, tp 1
    const double bw = model::sustained_device(*sys.gpu, std::nullopt, te.attention_kernel).stream_bandwidth().raw();
    const double m = 8;
    CHECK(eu.step.embedding_loss.raw() - et.step.embedding_loss.raw() ==
          gptest::approx(m * logits * 40.0 / bw).epsilon(1e-9));
    // jit-fused: the forward's six passes become three kernels (22 B), the backward keeps its two (14 B).
    CHECK(en.step.embedding_loss.raw() - et.step.embedding_loss.raw() ==
          gptest::approx(m * logits * 24.0 / bw).epsilon(1e-9));
    CHECK(eu.step.gemm.raw() == gptest::approx(et.step.gemm.raw()).epsilon(1e-12));
  }
}

TEST_CASE("fa1: FlashAttention-1 kernels at half of FlashAttention-2's rate, forward and backward") {
  // llm-foundry's attn_impl triton (a copy of flash-attn's Triton port of FlashAttention-1) on A100: Dao 2023
  // (arXiv:2307.08691) puts FlashAttention-2 at about 2x FlashAttention-1 on A100 (kFa1RateOfFa2 = 0.5).
  const auto sys = node_system("dgx-a100");
  const auto fa2 = model::sustained_device(*sys.gpu, sys.efficiency, wl::AttentionKernel::fa2);
  const auto fa1 = model::sustained_device(*sys.gpu, sys.efficiency, wl::AttentionKernel::fa1);
  CHECK(fa1.eff.attention_fwd == gptest::approx(0.5 * fa2.eff.attention_fwd).epsilon(1e-12));
  CHECK(fa1.eff.attention_bwd == gptest::approx(0.5 * fa2.eff.attention_bwd).epsilon(1e-12));
  CHECK(fa2.eff.attention_fwd == gptest::approx(0.669).epsilon(1e-9));  // measured.json, a100-sxm4-80gb fa2_fwd
  // MPT-125M's attention (b 40, 12 heads of 64, s 2048, causal): compute-bound, so the time doubles up to the
  // fixed per-tile part, which the kernel generation does not change.
  for (const bool bwd : {false, true}) {
    const double t1 = model::attention_cost("a", 40 * 12, 2048, 2048, 64, 64, true, true, bwd, hw::Precision::bf16,
                                            fa1, false)[0].time.raw();
    const double t2 = model::attention_cost("a", 40 * 12, 2048, 2048, 64, 64, true, true, bwd, hw::Precision::bf16,
                                            fa2, false)[0].time.raw();
    CHECK(t1 / t2 > 1.8);
    CHECK(t1 / t2 <= 2.0 + 1e-9);
  }
}

TEST_SUITE("attention dropout") {
  // Our H100 sweep of torch SDPA with dropout_p 0.1 against 0 (scripts/measure/attention_sdpa.py --dropouts 0,0.1;
  // data/validation/measured/h100-sxm5-80gb/attention_sdpa_dropout.json): the model with the built-in H100 row
  // (efficiencies from the separate no-dropout sweep) and the dropout cost per score element (the medians of this
  // sweep, so the added time is in-sample; the total is not) must follow it.
  TEST_CASE("fused attention with dropout on H100: the measured cuDNN and FA2 times, forward and backward") {
    std::ifstream in(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/measured/h100-sxm5-80gb/attention_sdpa_dropout.json");
    REQUIRE(in.good());
    const nlohmann::json j = nlohmann::json::parse(in);
    std::vector<double> err_total, err_extra, err_flat;
    for (const auto& r : j.at("results")) {
      if (r.at("dropout_p").get<double>() == 0.0) continue;
      const std::string be = r.at("backend");
      const auto dev = model::sustained_device(*h100().gpu, h100().eff,
                                               be == "flash" ? wl::AttentionKernel::fa2 : wl::AttentionKernel::fa3);
      const std::int64_t bh = r.at("b").get<std::int64_t>() * r.at("h").get<std::int64_t>();
      const std::int64_t s = r.at("s"), dh = r.at("d");
      const bool causal = r.at("causal");
      const nlohmann::json* base = nullptr;
      for (const auto& q : j.at("results"))
        if (q.at("backend") == be && q.at("d") == dh && q.at("s") == s && q.at("causal") == causal &&
            q.at("dropout_p").get<double>() == 0.0)
          base = &q;
      REQUIRE(base != nullptr);
      for (const bool bwd : {false, true}) {
        const char* key = bwd ? "bwd_s" : "fwd_s";
        const double with = model::attention_cost("a", bh, s, s, dh, dh, causal, true, bwd, hw::Precision::bf16, dev,
                                                  true)[0].time.raw();
        const double without = model::attention_cost("a", bh, s, s, dh, dh, causal, true, bwd, hw::Precision::bf16,
                                                     dev, false)[0].time.raw();
        const double meas = r.at(key).get<double>(), meas0 = base->at(key).get<double>();
        err_total.push_back(std::fabs(with / meas - 1.0));
        err_flat.push_back(std::fabs(without / meas - 1.0));
        err_extra.push_back(std::fabs((with - without) / (meas - meas0) - 1.0));
      }
    }
    REQUIRE(err_total.size() == 48);
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    MESSAGE("with dropout: median ", median(err_total), ", max ", *std::max_element(err_total.begin(), err_total.end()),
            "; the added time alone: median ", median(err_extra), "; without the dropout term: median ", median(err_flat));
    CHECK(median(err_extra) <= 0.15);
    CHECK(median(err_total) <= 0.15);
    CHECK(*std::max_element(err_total.begin(), err_total.end()) <= 0.40);
    // What the term is for: without it the cuDNN forward, which takes twice as long with dropout, is off by half.
    CHECK(*std::max_element(err_flat.begin(), err_flat.end()) > 0.40);
    CHECK(median(err_total) < median(err_flat));
  }
}

TEST_SUITE("dropout") {
  TEST_CASE("the plan's dropout overrides the model's config: GPT3-5B (dropout 0.1) trained without is faster") {
    Layout l;
    l.dp = 8;
    l.seq = 2048;
    l.micro = 4;
    l.zero = wl::ZeroStage::optimizer;
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("gpt3-5b");
    REQUIRE(a.attention_dropout_on());
    wl::TrainingPlan with = plan_of(l), without = plan_of(l);
    without.dropout = false;
    const auto ew = model::estimate_training(a, with, sys, Explain::on);
    const auto eo = model::estimate_training(a, without, sys, Explain::on);
    REQUIRE(ew.feasibility.ok);
    REQUIRE(eo.feasibility.ok);
    CHECK(eo.step.attention < ew.step.attention);      // no random numbers in the fused kernel
    CHECK(eo.step.elementwise < ew.step.elementwise);  // no masks in the residual adds
    CHECK(eo.memory.activations < ew.memory.activations);  // no masks kept
    auto any_dropout = [](const model::TrainingEstimate& e) {
      return std::any_of(e.layer_ops.begin(), e.layer_ops.end(),
                         [](const model::OpCost& o) { return o.name.find("dropout") != std::string::npos; });
    };
    CHECK(any_dropout(ew));
    CHECK_FALSE(any_dropout(eo));
    // And the other way: a Llama (no dropout in its config) trained with it.
    wl::TrainingPlan on = plan_of(l);
    on.dropout = true;
    CHECK(model::estimate_training(arch("llama-3.1-8b"), on, sys, Explain::off).step.attention >
          model::estimate_training(arch("llama-3.1-8b"), plan_of(l), sys, Explain::off).step.attention);
  }
}

TEST_SUITE("context parallelism") {
  TEST_CASE("CP attention runs as Transformer Engine's ring: cp calls, the FLOPs of one causal call, and the merges") {
    // Llama 3 8B, s = 8192 over CP 4 (s/cp = 2048 tokens a rank): step 0 causal 2048 × 2048, steps 1-3 non-causal
    // 2048 queries × 1024 keys; forward FLOPs 4·b·n_q·(s/cp)·s·d/2 in all, as the single causal call counts them.
    Layout l;
    l.cp = 4;
    l.dp = 2;
    l.seq = 8192;
    l.zero = wl::ZeroStage::optimizer;
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-3-8b");
    const auto e = model::estimate_training(a, plan_of(l), sys, Explain::on);
    for (const auto& r : e.feasibility.reasons) MESSAGE(r);
    REQUIRE(e.feasibility.ok);  // with ZeRO-1: 55.7 GiB
    double fwd_flops = 0;
    int steps = 0;
    const model::OpCost* merge = nullptr;
    for (const auto& op : e.layer_ops) {
      if (op.cls == model::OpClass::attention && op.name.find("flash fwd") != std::string::npos) {
        fwd_flops += op.flops.raw();
        ++steps;
      }
      if (op.name == "CP output merge") merge = &op;
    }
    CHECK(steps == 4);
    const double bh = 32, sl = 2048, s = 8192, d = 128;
    CHECK(fwd_flops == gptest::approx(2.0 * bh * sl * s * (d + d) * 0.5).epsilon(1e-12));
    // The later steps run all queries against half the received K/V: k = 1024/128 = 8 key tiles, below step 0's 8.5.
    const auto single = model::attention_cost("a", 32, 2048, 8192, 128, 128, true, true, false, hw::Precision::bf16,
                                              model::make_device(*sys.gpu))[0];
    REQUIRE(merge != nullptr);
    // Merges: (3·cp + 1)·a_b bytes per output element forward (b·n_q·(s/cp)·d elements).
    CHECK(merge->bytes.raw() == gptest::approx((3.0 * 4 + 1) * 2.0 * bh * sl * d).epsilon(1e-12));
    double t_steps = 0;
    for (const auto& op : e.layer_ops)
      if (op.cls == model::OpClass::attention && op.name.find("flash fwd") != std::string::npos) t_steps += op.time.raw();
    CHECK(t_steps > single.time.raw());  // four shorter calls, each at a lower efficiency than one long one
  }
}

TEST_SUITE("attention sequence-length law") {
  TEST_CASE("fused attention runs at the row's efficiency at s = 4096 causal, d = 128, and k/(k+c) of it elsewhere") {
    const auto& d = h100();
    auto eff = [&](std::int64_t s, bool causal, bool bwd, const model::Device& dev) {
      return model::attention_cost("a", 32, s, s, 128, 128, causal, true, bwd, hw::Precision::bf16, dev)[0].efficiency;
    };
    CHECK(eff(4096, true, false, d) == gptest::approx(d.eff.attention_fwd).epsilon(1e-12));
    CHECK(eff(4096, true, true, d) == gptest::approx(d.eff.attention_bwd).epsilon(1e-12));
    // s = 1024 causal: k = 1024/256 + 0.5 = 4.5 key tiles per query tile against the reference 16.5.
    const auto law = [](double k, double c) { return (k / (k + c)) / (16.5 / (16.5 + c)); };
    CHECK(eff(1024, true, false, d) == gptest::approx(d.eff.attention_fwd * law(4.5, 1.5)).epsilon(1e-12));
    CHECK(eff(1024, true, true, d) == gptest::approx(d.eff.attention_bwd * law(4.5, 3.3)).epsilon(1e-12));
    // Non-causal s = 4096: every query sees 32 key tiles.
    CHECK(eff(4096, false, false, d) == gptest::approx(d.eff.attention_fwd * law(32.0, 1.5)).epsilon(1e-12));
    // Our H100 sweep at s = 1024 causal, d = 128 (attention_sdpa.json): cuDNN fwd 0.487, bwd 0.310 of peak; the
    // law from the s = 4096 values (0.621, 0.445) gives 0.508 and 0.312.
    CHECK(0.621 * law(4.5, 1.5) == gptest::approx(0.487).epsilon(0.05));
    CHECK(0.445 * law(4.5, 3.3) == gptest::approx(0.310).epsilon(0.05));
    // FlashAttention-2 has its own law (sustained_device with the fa2 kernel).
    const auto fa2 = model::sustained_device(*d.gpu, d.eff, wl::AttentionKernel::fa2);
    CHECK(eff(1024, true, true, fa2) == gptest::approx(fa2.eff.attention_bwd * law(4.5, 4.3)).epsilon(1e-12));
  }
}

// ================================================================================================== feasibility

TEST_SUITE("training layout feasibility") {
  // Each invalid layout alone, on llama-3.1-8b (32 layers, 32 heads, 8 KV heads, FFN 14336) on DGX H100.
  model::Feasibility check(const std::string& model_id, const Layout& l,
                           const std::function<void(wl::TrainingPlan&)>& tweak = {}) {
    wl::TrainingPlan p = plan_of(l);
    if (tweak) tweak(p);
    return model::check_training_layout(arch(model_id), p, node_system("dgx-h100"));
  }

  TEST_CASE("a valid layout has no reasons") {
    Layout l;
    l.tp = 8;
    l.pp = 4;
    l.dp = 2;
    l.global = 64;
    const auto f = check("llama-3.1-8b", l);
    CHECK(f.ok);
    CHECK(f.reasons.empty());
  }

  TEST_CASE("TP that does not divide the heads is infeasible with its reasons") {
    Layout l;
    l.tp = 3;
    const auto f = check("llama-3.1-8b", l);
    CHECK_FALSE(f.ok);
    REQUIRE(f.reasons.size() == 3);
    CHECK(f.reasons[0] == "TP 3 does not divide the 32 attention heads (TP sizes that work: 1, 2, 4, 8, 16, 32)");
    CHECK(f.reasons[1] == "TP 3 neither divides nor is a multiple of the 8 KV heads");
    CHECK(f.reasons[2] == "TP 3 does not divide the FFN width 14336");
  }

  TEST_CASE("TP larger than the KV heads and a multiple of them is fine (KV heads replicated)") {
    Layout l;
    l.tp = 16;  // 32 query heads, 8 KV heads: each KV head on 2 GPUs
    const auto f = check("llama-3.1-8b", l);
    CHECK(f.ok);
  }

  TEST_CASE("PP larger than the layers is infeasible: 'PP 64 exceeds the 32 layers'") {
    Layout l;
    l.pp = 64;
    const auto f = check("llama-3.1-8b", l);
    CHECK_FALSE(f.ok);
    REQUIRE(f.reasons.size() == 1);
    CHECK(f.reasons[0] == "PP 64 exceeds the 32 layers");
  }

  TEST_CASE("uneven pipeline stages: 1F1B runs at the pace of the heaviest stage, interleaving needs equal chunks") {
    // 32 layers on PP 3 (1F1B): stages of 11, 11 and 10 layers — feasible; the pipeline runs at 11 layers per stage.
    Layout l;
    l.pp = 3;
    l.global = 24;
    auto f = check("llama-3.1-8b", l);
    CHECK(f.ok);
    CHECK(f.reasons.empty());
    const wl::TransformerArch& a = arch("llama-3.1-8b");
    const auto sys = node_system("dgx-h100");
    const auto e3 = model::estimate_training(a, plan_of(l), sys, Explain::off);
    REQUIRE(e3.feasibility.ok);
    // Against PP 4 (8 layers per stage, the same micro-batches): per micro-batch, the stage's layer compute scales
    // as 11/8 (head and embedding ride on the end stages in both).
    Layout l4 = l;
    l4.pp = 4;
    l4.global = 24;
    const auto e4 = model::estimate_training(a, plan_of(l4), sys, Explain::off);
    REQUIRE(e4.feasibility.ok);
    // The LM head (128K vocabulary: ~2.4 layers of weights) rides on the last stage only: on PP 3 the last stage's 10
    // layers + head outweigh stage 0's 11 layers + embedding, and on PP 4 the last stage is the slowest too, so the
    // step's GEMM time is the last stage's layers: 10/8.
    CHECK(e3.bottleneck_stage == 2);
    CHECK(e4.bottleneck_stage == 3);
    const auto gemm3 = e3.step.gemm, gemm4 = e4.step.gemm;
    CHECK(gemm3.raw() / gemm4.raw() == gptest::approx(10.0 / 8.0).epsilon(1e-9));

    Layout iv;
    iv.pp = 4;
    iv.v = 3;  // 12 chunks for 32 layers
    iv.global = 4;
    f = check("llama-3.1-8b", iv);
    CHECK_FALSE(f.ok);
    REQUIRE(f.reasons.size() == 1);
    CHECK(f.reasons[0] == "32 layers do not split evenly into PP 4 × 3 chunks (the interleaved schedule needs equal "
                          "chunks: give an uneven split with the embedding/loss accounting, first/last stage layer "
                          "counts or a pipeline layout)");
  }

  TEST_CASE("a global batch not divisible by micro-batch × DP is infeasible") {
    Layout l;
    l.dp = 4;
    l.micro = 2;
    l.global = 10;
    const auto f = check("llama-3.1-8b", l);
    CHECK_FALSE(f.ok);
    REQUIRE(f.reasons.size() == 1);
    CHECK(f.reasons[0] == "global batch 10 is not divisible by micro-batch 2 × DP 4 = 8");
  }

  TEST_CASE("EP on a dense model is infeasible: 'EP > 1 needs a mixture-of-experts model'") {
    Layout l;
    l.dp = 2;
    l.ep = 2;
    const auto f = check("llama-3.1-8b", l);
    CHECK_FALSE(f.ok);
    REQUIRE(f.reasons.size() == 1);
    CHECK(f.reasons[0] == "EP > 1 needs a mixture-of-experts model");
  }

  TEST_CASE("EP on a MoE model must divide the experts and DP × CP") {
    Layout l;
    l.dp = 4;
    l.ep = 16;  // mixtral-8x7b has 8 experts
    const auto f = check("mixtral-8x7b", l);
    CHECK_FALSE(f.ok);
    REQUIRE(f.reasons.size() == 2);
    CHECK(f.reasons[0] == "EP 16 does not divide the 8 experts");
    CHECK(f.reasons[1] == "EP 16 must divide DP × CP = 4");
    Layout ok;
    ok.dp = 8;
    ok.ep = 8;
    CHECK(check("mixtral-8x7b", ok).ok);
  }

  TEST_CASE("the interleaved schedule with fewer than 2 virtual stages is infeasible") {
    Layout l;
    l.pp = 4;
    const auto f = check("llama-3.1-8b", l, [](wl::TrainingPlan& p) {
      p.schedule = wl::PipelineSchedule::interleaved;
      p.par.virtual_stages = 1;
    });
    CHECK_FALSE(f.ok);
    REQUIRE(f.reasons.size() == 1);
    CHECK(f.reasons[0] == "the interleaved schedule needs PP ≥ 2 and virtual stages ≥ 2");
  }

  TEST_CASE("a sequence not divisible by 2·CP is infeasible") {
    Layout l;
    l.cp = 4;
    l.seq = 4100;
    const auto f = check("llama-3.1-8b", l);
    CHECK_FALSE(f.ok);
    REQUIRE(f.reasons.size() == 1);
    CHECK(f.reasons[0] == "sequence 4100 is not divisible by 2·CP = 8 (load-balanced causal context parallelism)");
  }

  TEST_CASE("several problems give several reasons, all of them") {
    Layout l;
    l.tp = 3;
    l.pp = 64;
    l.dp = 2;
    l.ep = 2;
    l.global = 3;
    const auto f = check("llama-3.1-8b", l);
    CHECK_FALSE(f.ok);
    CHECK(f.reasons.size() == 6);  // 3 TP, PP, global batch, EP
  }

  TEST_CASE("an invalid layout yields an estimate with only the reasons, no numbers") {
    Layout l;
    l.tp = 3;
    const auto e = model::estimate_training(arch("llama-3.1-8b"), plan_of(l), node_system("dgx-h100"), Explain::off);
    CHECK_FALSE(e.feasibility.ok);
    CHECK(e.feasibility.reasons.size() == 3);
    CHECK(e.step_time.raw() == 0);
    CHECK(e.mfu == 0);
  }

  TEST_CASE("a plan that does not fit says so and by how much: llama-3.1-70b on one H100") {
    Layout l;
    const auto sys = node_system("dgx-h100");
    const auto e = model::estimate_training(arch("llama-3.1-70b"), plan_of(l), sys, Explain::off);
    CHECK_FALSE(e.feasibility.ok);
    CHECK_FALSE(e.memory.fits);
    REQUIRE(e.feasibility.reasons.size() == 1);
    const std::string& r = e.feasibility.reasons[0];
    CHECK(starts_with(r, "does not fit: needs"));
    using units::BytePrefix;
    const std::string expected = "does not fit: needs " + units::format(e.memory.total, BytePrefix::binary) + " per GPU, " +
                                 units::format(e.memory.capacity, BytePrefix::binary) + " available (" +
                                 units::format(e.memory.total - e.memory.capacity, BytePrefix::binary) + " over).";
    CHECK(starts_with(r, expected));
    // 70.6e9 parameters at 16 B each alone are 1.13 TB.
    CHECK(e.memory.total.raw() > 70e9 * 16);
    CHECK(e.memory.capacity == gpu("h100-sxm5-80gb").memory_capacity());
    // One GPU: no ZeRO, TP or PP change exists, and full recompute alone does not bring 1.1 TiB under 80 GB.
    CHECK(r == expected + " No single change of recompute, ZeRO stage, micro-batch, TP or PP makes it fit: use more "
                          "GPUs or a GPU with more memory");
    // The model is still evaluated: the step time says what it would cost with enough memory.
    CHECK(e.step_time.raw() > 0);
  }

  TEST_CASE("every change that the does-not-fit reason suggests does make the plan fit") {
    // llama-3.1-8b on 8 H100 without ZeRO needs 16 B per parameter on every GPU: about 148 GiB.
    Layout l;
    l.dp = 8;
    l.global = 64;
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-3.1-8b");
    const auto e = model::estimate_training(a, plan_of(l), sys, Explain::off);
    REQUIRE_FALSE(e.memory.fits);
    REQUIRE(e.feasibility.reasons.size() == 1);
    const std::string& r = e.feasibility.reasons[0];
    const std::string marker = "It would fit with: ";
    const auto at = r.find(marker);
    REQUIRE(at != std::string::npos);
    std::vector<std::string> fixes;
    for (std::size_t pos = at + marker.size(); pos < r.size();) {
      const auto next = r.find("; ", pos);
      fixes.push_back(r.substr(pos, next == std::string::npos ? std::string::npos : next - pos));
      if (next == std::string::npos) break;
      pos = next + 2;
    }
    CHECK(fixes.size() >= 2);
    bool zero1 = false;
    for (const auto& fix : fixes) {
      CAPTURE(fix);
      wl::TrainingPlan p = plan_of(l);
      int a1 = 0, a2 = 0;
      if (starts_with(fix, "--recompute full")) p.recompute = wl::Recompute::full;
      else if (std::sscanf(fix.c_str(), "--zero %d", &a1) == 1) p.zero = static_cast<wl::ZeroStage>(a1);
      else if (starts_with(fix, "--micro-batch 1")) p.micro_batch = 1;
      else if (starts_with(fix, "--offload optimizer")) {
        p.offload = wl::Offload::optimizer;
        if (fix.find("--zero 1") != std::string::npos) p.zero = wl::ZeroStage::optimizer;
      } else if (std::sscanf(fix.c_str(), "--pp %d with DP %d", &a1, &a2) == 2) {
        p.par.pp = a1;
        p.par.dp = a2;
      } else if (std::sscanf(fix.c_str(), "--tp %d with DP %d", &a1, &a2) == 2) {
        p.par.tp = a1;
        p.par.dp = a2;
        p.par.sequence_parallel = true;
      } else {
        FAIL("unrecognised suggestion");
      }
      zero1 = zero1 || starts_with(fix, "--zero 1");
      const auto fixed = model::estimate_training(a, p, sys, Explain::off);
      CHECK(fixed.memory.fits);
      CHECK(fixed.feasibility.ok);
      // The size it quotes is the size the fixed plan needs.
      // Appended, not "(" + std::string: GCC 12 at -O3 reports a false -Wrestrict on that (GCC bug 105651).
      std::string quoted = "(";
      quoted += units::format(fixed.memory.total, units::BytePrefix::binary);
      quoted += ")";
      CHECK(fix.find(quoted) != std::string::npos);
    }
    CHECK(zero1);  // ZeRO-1 over 8 GPUs: 4 + 12/8 B per parameter of states
    CHECK(r.find("--ep") == std::string::npos);  // a dense model has no experts to shard
  }

  TEST_CASE("an MoE plan that does not fit: the reason suggests expert parallelism, and that EP does fit") {
    // Qwen3-30B-A3B (30.5B parameters, ~29B of them in routed experts) on 64 H100 with ZeRO-1: the 2 + 2 B of bf16
    // weights and gradients of every parameter on every GPU alone are ~122 GB. Sharding the experts over EP ranks
    // divides the expert part by EP: the hint must say so (issue 29: hints never suggested EP for an MoE model).
    Layout l;
    l.dp = 64;
    l.global = 64;
    l.zero = wl::ZeroStage::optimizer;
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("qwen3-30b-a3b");
    REQUIRE(a.moe.has_value());
    const auto e = model::estimate_training(a, plan_of(l), sys, Explain::off);
    REQUIRE_FALSE(e.memory.fits);
    REQUIRE(e.feasibility.reasons.size() == 1);
    const std::string& r = e.feasibility.reasons[0];
    CAPTURE(r);
    const auto at = r.find("--ep ");
    REQUIRE(at != std::string::npos);
    int ep = 0;
    REQUIRE(std::sscanf(r.c_str() + at, "--ep %d", &ep) == 1);
    CHECK(ep > 1);
    CHECK(a.moe->num_experts % ep == 0);
    CHECK(l.dp % ep == 0);
    Layout fixed = l;
    fixed.ep = ep;
    const auto f = model::estimate_training(a, plan_of(fixed), sys, Explain::off);
    CHECK(f.memory.fits);
    CHECK(f.feasibility.ok);
    std::string quoted = "--ep " + std::to_string(ep) + " (";
    quoted += units::format(f.memory.total, units::BytePrefix::binary);
    quoted += ")";
    CHECK(r.find(quoted) != std::string::npos);
    // The smallest such EP: half of it does not fit.
    if (ep > 2) {
      Layout half = l;
      half.ep = ep / 2;
      CHECK_FALSE(model::estimate_training(a, plan_of(half), sys, Explain::off).memory.fits);
    }
  }

  TEST_CASE("a plan that fits has no memory reason") {
    Layout l;
    l.dp = 8;
    l.global = 64;
    l.zero = wl::ZeroStage::optimizer;
    const auto e = model::estimate_training(arch("llama-3.1-8b"), plan_of(l), node_system("dgx-h100"), Explain::off);
    CHECK(e.memory.fits);
    CHECK(e.feasibility.ok);
    CHECK(e.feasibility.reasons.empty());
    CHECK(e.memory.total < e.memory.capacity);
  }
}

// ==================================================================================================== properties

TEST_SUITE("training step properties") {
  TEST_CASE("every case evaluates to finite, positive numbers") {
    for (const auto& c : cases()) {
      CAPTURE(c.name);
      const auto e = estimate(c, node_system(c.node), [](wl::TrainingPlan& p) { p.tokens_to_train = 1e12; });
      // Only memory may make these infeasible; the layouts are valid.
      for (const auto& r : e.feasibility.reasons) CHECK(starts_with(r, "does not fit"));
      CHECK(e.step_time.raw() > 0);
      CHECK(e.step_time == e.step.total);
      check_finite(e);
      REQUIRE(e.time_to_train.has_value());
      REQUIRE(e.gpu_hours.has_value());
    }
  }

  TEST_CASE("the step is the sum of its parts and none is negative") {
    for (const auto& c : cases()) {
      CAPTURE(c.name);
      const auto e = estimate(c, node_system(c.node));
      const auto& s = e.step;
      for (double v : {s.gemm.raw(), s.attention.raw(), s.elementwise.raw(), s.embedding_loss.raw(), s.recompute.raw(),
                       s.moe_host.raw(), s.comm_exposed.raw(), s.bubble.raw(), s.optimizer.raw()})
        CHECK(v >= 0);
      // The parts (compute, the MoE dispatcher's host syncs, comm, bubble, optimizer) cover the step; the recompute is
      // inside the compute terms.
      const double parts = (s.gemm + s.attention + s.elementwise + s.embedding_loss + s.moe_host + s.comm_exposed +
                            s.bubble + s.optimizer).raw();
      CHECK(parts == gptest::approx(s.total.raw()).epsilon(1e-9));
      CHECK(s.recompute.raw() <= (s.gemm + s.attention + s.elementwise).raw());
    }
  }

  TEST_CASE("MFU is a fraction in (0, 1) and HFU ≥ MFU") {
    for (const auto& c : cases()) {
      CAPTURE(c.name);
      const auto e = estimate(c, node_system(c.node));
      CHECK(e.mfu > 0);
      CHECK(e.mfu < 1);
      CHECK(e.hfu >= e.mfu);
      CHECK(e.hfu < 1);
    }
  }

  TEST_CASE("tokens_per_s = global batch · seq / step time, exactly") {
    for (const auto& c : cases()) {
      CAPTURE(c.name);
      const auto p = plan_of(c.layout);
      const auto e = estimate(c, node_system(c.node));
      CHECK(e.tokens_per_s == double(p.global_batch) * double(p.seq_len) / e.step_time.raw());
    }
  }

  TEST_CASE("model FLOPs per step = training FLOPs per token × tokens per step, and MFU is their rate over the peak") {
    for (const auto& c : cases()) {
      CAPTURE(c.name);
      const auto p = plan_of(c.layout);
      const auto sys = node_system(c.node);
      const auto e = estimate(c, sys);
      const double tokens = double(p.global_batch) * double(p.seq_len);
      // The model as built: the vocabulary padded to a multiple of 128 × TP (Megatron counts padded_vocab_size).
      const auto fpt = model::flops_per_token(wl::with_padded_vocab(arch(c.model), p), p.seq_len, Explain::off);
      CHECK(e.model_flops_per_step.raw() == gptest::approx(fpt.training.raw() * tokens).epsilon(1e-12));
      const double peak = model::make_device(*sys.gpu).peak(p.precision.compute).raw();
      CHECK(e.mfu == gptest::approx(e.model_flops_per_step.raw() / (e.step_time.raw() * double(p.par.gpus()) * peak))
                         .epsilon(1e-12));
    }
  }

  TEST_CASE("full recompute makes the step slower, and then HFU > MFU, while without recompute HFU = MFU") {
    for (const auto& c : cases()) {
      CAPTURE(c.name);
      const auto sys = node_system(c.node);
      const auto none = estimate(c, sys, [](wl::TrainingPlan& p) { p.recompute = wl::Recompute::none; });
      const auto full = estimate(c, sys, [](wl::TrainingPlan& p) { p.recompute = wl::Recompute::full; });
      CHECK(full.step_time > none.step_time);
      CHECK(full.hfu > full.mfu);
      CHECK(full.mfu < none.mfu);
      CHECK(none.hfu == gptest::approx(none.mfu).epsilon(1e-12));
      CHECK(full.step.recompute.raw() > 0);
      CHECK(none.step.recompute.raw() == 0);
      CHECK(full.hardware_flops_per_step > full.model_flops_per_step);
      CHECK(full.model_flops_per_step == none.model_flops_per_step);
      // Full recompute repeats every layer's forward, not the LM head's (Megatron's 96·B·s·l·h² counts it so): the
      // extra FLOPs are (forward − 2·V_padded·h) per token, the head's matmul weights V_padded·h from the model's
      // published shape (the step takes them from the op graph of the head, build_head_graph).
      auto p = plan_of(c.layout);
      p.recompute = wl::Recompute::full;
      const auto padded = wl::with_padded_vocab(arch(c.model), p);
      const double tokens = double(p.global_batch) * double(p.seq_len);
      const double head = 2.0 * double(padded.vocab) * double(padded.hidden);
      const double forward = model::flops_per_token(padded, p.seq_len, Explain::off).forward.raw();
      CHECK((full.hardware_flops_per_step - full.model_flops_per_step).raw() ==
            gptest::approx((forward - head) * tokens).epsilon(1e-12));
    }
  }

  TEST_CASE("bubble is 0 without a pipeline and positive with one") {
    for (const auto& c : cases()) {
      CAPTURE(c.name);
      const auto e = estimate(c, node_system(c.node));
      if (c.layout.pp == 1) {
        CHECK(e.step.bubble.raw() == 0);
        CHECK(e.bubble_fraction == 0);
      } else {
        CHECK(e.step.bubble.raw() > 0);
        // T = m·max t_i + (Σ t_i − max t_i)/v over the stages' times (tests/model/test_pipeline_split.cpp works it out
        // by hand); the stages differ by their embedding / LM head only, so the fraction stays near (p − 1)/(v·m).
        double sum = 0, max = 0;
        for (const auto& t : e.stage_time) {
          sum += t.raw();
          max = std::max(max, t.raw());
        }
        CHECK(e.step.bubble.raw() == gptest::approx((sum - max) / double(c.layout.v)).epsilon(1e-12));
        CHECK(e.bubble_fraction == gptest::approx(model::pipeline_bubble_fraction(c.layout.pp, c.layout.v, e.micro_batches)).epsilon(0.1));
      }
    }
  }

  TEST_CASE("more micro-batches per step lower the bubble fraction and its share of the step") {
    const auto sys = node_system("dgx-h100");
    Layout l;
    l.tp = 8;
    l.pp = 4;
    l.dp = 2;
    double prev_fraction = 1e9, prev_share = 1e9;
    for (std::int64_t global : {8, 16, 32, 64, 128}) {
      CAPTURE(global);
      l.global = global;
      const auto e = model::estimate_training(arch("llama-3.1-70b"), plan_of(l), sys, Explain::off);
      CHECK(e.micro_batches == global / 2);
      // (Σ t_i − max t_i)/(m·max t_i): the first three stages (the first with the embedding) against the last (with
      // the LM head), a little under Narayanan's (p − 1)/m = 3/m.
      CHECK(e.bubble_fraction < 3.0 / double(global / 2));
      CHECK(e.bubble_fraction == gptest::approx(3.0 / double(global / 2)).epsilon(0.1));
      CHECK(e.bubble_fraction < prev_fraction);
      const double share = e.step.bubble.raw() / e.step_time.raw();
      CHECK(share < prev_share);
      prev_fraction = e.bubble_fraction;
      prev_share = share;
    }
  }

  TEST_CASE("the interleaved schedule has a smaller bubble than 1F1B at the same PP and micro-batches") {
    const auto sys = node_system("dgx-h100");
    Layout l;
    l.tp = 8;
    l.pp = 4;
    l.dp = 2;
    l.global = 32;
    const auto plain = model::estimate_training(arch("llama-3.1-70b"), plan_of(l), sys, Explain::off);
    l.v = 2;
    const auto inter = model::estimate_training(arch("llama-3.1-70b"), plan_of(l), sys, Explain::off);
    // (Σ t_i − max t_i) / v over m·max t_i: half of 1F1B's for the same stage times. The stage times t_i themselves
    // move slightly with v (each holds its own pipeline sends, which the interleaved schedule makes v times per
    // micro-batch): the fraction is half within 0.013%, the bubble in seconds within 0.3%.
    CHECK(inter.bubble_fraction == gptest::approx(plain.bubble_fraction / 2).epsilon(1e-3));
    CHECK(inter.step.bubble < plain.step.bubble);
  }

  TEST_CASE("step time does not rise as the GPU's dense peak rises") {
    for (const auto& c : cases()) {
      CAPTURE(c.name);
      const auto base = node_system(c.node);
      double prev = 1e300;
      for (double k : {0.5, 1.0, 2.0, 4.0, 16.0}) {
        CAPTURE(k);
        const hw::GpuSpec g = scaled_gpu(*base.gpu, k, 1.0);
        auto sys = base;
        sys.gpu = &g;
        const double t = estimate(c, sys).step_time.raw();
        CHECK(t <= prev * (1 + 1e-12));
        prev = t;
      }
    }
  }

  TEST_CASE("step time does not rise as the GPU's HBM bandwidth rises") {
    for (const auto& c : cases()) {
      CAPTURE(c.name);
      const auto base = node_system(c.node);
      double prev = 1e300;
      for (double k : {0.5, 1.0, 2.0, 4.0, 16.0}) {
        CAPTURE(k);
        const hw::GpuSpec g = scaled_gpu(*base.gpu, 1.0, k);
        auto sys = base;
        sys.gpu = &g;
        const double t = estimate(c, sys).step_time.raw();
        CHECK(t <= prev * (1 + 1e-12));
        prev = t;
      }
    }
  }

  TEST_CASE("a faster GPU in both peak and bandwidth gives a strictly shorter step") {
    for (const auto& c : cases()) {
      CAPTURE(c.name);
      const auto base = node_system(c.node);
      const hw::GpuSpec g = scaled_gpu(*base.gpu, 2.0, 2.0);
      auto sys = base;
      sys.gpu = &g;
      CHECK(estimate(c, sys).step_time < estimate(c, base).step_time);
    }
  }

  TEST_CASE("step time does not rise as the scale-out NIC bandwidth rises") {
    for (const auto& c : cases()) {
      CAPTURE(c.name);
      double prev = 1e300;
      for (double k : {0.25, 0.5, 1.0, 2.0, 8.0}) {
        CAPTURE(k);
        const hw::HardwareDb copy = with_nic_scaled(c.node, k);
        const double t = estimate(c, node_system(copy, c.node)).step_time.raw();
        CHECK(t <= prev * (1 + 1e-12));
        prev = t;
      }
    }
  }

  TEST_CASE("when a pipeline crosses nodes, faster NICs strictly shorten the step") {
    // llama-3.1-70b TP 8 PP 4: every stage boundary is between two DGX H100s.
    const Case& c = cases()[3];
    REQUIRE(c.layout.pp == 4);
    const hw::HardwareDb slow = with_nic_scaled(c.node, 0.25), fast = with_nic_scaled(c.node, 4.0);
    const auto es = estimate(c, node_system(slow, c.node)), ef = estimate(c, node_system(fast, c.node));
    CHECK(ef.step_time < es.step_time);
    CHECK(ef.comm[3].kind == "pp");
    CHECK(ef.comm[3].time < es.comm[3].time);
  }

  TEST_CASE("a node's NIC speed does not matter when every group stays inside the node") {
    for (const auto& c : cases()) {
      if (c.crosses_nodes) continue;
      CAPTURE(c.name);
      const hw::HardwareDb fast = with_nic_scaled(c.node, 8.0);
      CHECK(estimate(c, node_system(fast, c.node)).step_time.raw() ==
            gptest::approx(estimate(c, node_system(c.node)).step_time.raw()).epsilon(1e-12));
    }
  }

  TEST_CASE("an overlapped DP gradient reduction inside one node costs well under its own time, on every shipped node") {
    // Bucketed all-reduce overlaps the backward pass: what stays exposed is the last bucket plus what the compute
    // loses beside the hidden calls: per call the SMs NCCL takes (16 channels of the GPU's SMs) or, when larger, the
    // kernels' wait for the call's kernel, at most 0.548 of the call (parallel_dims.hpp dp_beside_compute_share):
    // up to 0.63 of the reduction's time here. That holds whatever the GPU; a GPU file that does not state its SM
    // count must not be modelled as a one-SM GPU whose every hidden byte costs in full.
    // Nodes whose GPUs talk over PCIe only are left out: there the reduction itself outlasts the backward (8B's
    // 16 GB of gradients over a PCIe Gen4 x16 ring), so it is exposed by bandwidth, not by the SM accounting tested.
    for (const auto& n : db().nodes) {
      if (n.scale_up.topology == hw::ScaleUpTopology::pcie) continue;
      CAPTURE(n.info.id);
      Layout l;
      l.dp = n.gpus;
      l.global = 8 * n.gpus;
      l.zero = wl::ZeroStage::optimizer;
      const auto e = model::estimate_training(arch("llama-3.1-8b"), plan_of(l), node_system(n.info.id), Explain::off);
      REQUIRE(e.step_time.raw() > 0);
      const auto& dp = e.comm[4];
      REQUIRE(dp.kind == "dp");
      REQUIRE(dp.time.raw() > 0);
      CHECK(dp.exposed.raw() < 0.75 * dp.time.raw());
    }
  }

  TEST_CASE("a plan that spans nodes without a scale-out network is infeasible, never a NaN step") {
    // The MI300X 8-GPU platform file states no scale-out NICs: 16 GPUs in DP cannot be evaluated over a fabric the
    // data does not describe. The estimate must say so instead of dividing by a zero bandwidth.
    const auto sys = node_system("mi300x-8");
    REQUIRE_FALSE(sys.node->scale_out.has_value());
    Layout l;
    l.dp = 16;
    l.global = 64;
    l.zero = wl::ZeroStage::optimizer;
    const auto e = model::estimate_training(arch("llama-3.1-8b"), plan_of(l), sys, Explain::off);
    CHECK_FALSE(e.feasibility.ok);
    if (e.feasibility.ok) {
      CHECK(std::isfinite(e.step_time.raw()));
      check_finite(e);
    }
    // Inside one node the same platform is fine.
    l.dp = 8;
    const auto one = model::estimate_training(arch("llama-3.1-8b"), plan_of(l), sys, Explain::off);
    CHECK(one.feasibility.ok);
    check_finite(one);
  }

  TEST_CASE("one GPU communicates nothing") {
    Layout l;
    const auto e = model::estimate_training(arch("bench-llama-1b-like"), plan_of(l), node_system("dgx-h100"), Explain::off);
    for (const auto& c : e.comm) {
      CAPTURE(c.kind);
      CHECK(c.time.raw() == 0);
      CHECK(c.exposed.raw() == 0);
      CHECK(c.bytes_per_step.raw() == 0);
    }
    CHECK(e.step.comm_exposed.raw() == 0);
  }
}

TEST_SUITE("training memory properties") {
  // Per-GPU peak memory for one model under variations of one knob, the others fixed.
  double peak(const std::string& model_id, const Layout& l, const std::string& node = "dgx-h100") {
    const auto e = model::estimate_training(arch(model_id), plan_of(l), node_system(node), Explain::off);
    REQUIRE(e.step_time.raw() > 0);
    return e.memory.total.raw();
  }

  TEST_CASE("per-GPU memory does not rise with TP (DP fixed)") {
    for (const std::string m : {"llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "gpt3-175b"}) {
      CAPTURE(m);
      double prev = 1e300;
      for (int tp : {1, 2, 4, 8}) {
        CAPTURE(tp);
        Layout l;
        l.tp = tp;
        l.dp = 2;
        l.seq = 2048;
        const double b = peak(m, l);
        CHECK(b <= prev);
        prev = b;
      }
    }
  }

  TEST_CASE("per-GPU memory does not rise with PP (DP fixed)") {
    for (const std::string m : {"llama-3.1-8b", "llama-3.1-70b", "gpt3-175b"}) {
      CAPTURE(m);
      double prev = 1e300;
      for (int pp : {1, 2, 4, 8}) {
        CAPTURE(pp);
        Layout l;
        l.pp = pp;
        l.dp = 2;
        l.seq = 2048;
        l.global = 64;  // 32 micro-batches: every stage has its full set in flight
        const double b = peak(m, l);
        CHECK(b <= prev);
        prev = b;
      }
    }
  }

  TEST_CASE("per-GPU memory does not rise with the ZeRO stage, and falls at each stage with DP 8") {
    for (const std::string m : {"llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b"}) {
      CAPTURE(m);
      double prev = 1e300;
      for (auto z : {wl::ZeroStage::none, wl::ZeroStage::optimizer, wl::ZeroStage::gradients, wl::ZeroStage::parameters}) {
        CAPTURE(static_cast<int>(z));
        Layout l;
        l.dp = 8;
        l.zero = z;
        const double b = peak(m, l);
        CHECK(b < prev);
        prev = b;
      }
    }
  }

  TEST_CASE("per-GPU memory does not rise with recomputation: none ≥ selective ≥ full") {
    for (const std::string m : {"llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "gpt3-175b"}) {
      CAPTURE(m);
      double prev = 1e300;
      for (auto r : {wl::Recompute::none, wl::Recompute::selective, wl::Recompute::full}) {
        CAPTURE(static_cast<int>(r));
        Layout l;
        l.tp = 8;
        l.micro = 2;
        l.seq = 4096;
        const double b = peak(m, l);
        CHECK(b <= prev);
        prev = b;
      }
      Layout none, full;
      none.tp = full.tp = 8;
      full.recompute = wl::Recompute::full;
      CHECK(peak(m, full) < peak(m, none));
    }
  }

  TEST_CASE("the memory total is the sum of its terms") {
    for (const auto& c : cases()) {
      CAPTURE(c.name);
      const auto& m = estimate(c, node_system(c.node)).memory;
      const double sum = (m.weights + m.gradients + m.master_weights + m.optimizer_states + m.activations + m.logits +
                          m.cuda_context + m.nccl_buffers + m.fragmentation)
                             .raw();
      CHECK(m.total.raw() == gptest::approx(sum).epsilon(1e-9));
      CHECK(m.fits == (m.total <= m.capacity));
    }
  }
}

// ========================================================================================= time to train and cost

TEST_SUITE("time to train (textbook T15)") {
  TEST_CASE("T15: 6·P·tokens for 7B and 1T tokens on 64 A100 at 40% MFU is 60.9 days") {
    // textbook.md T15: FLOPs = 6·P·tokens; 7e9 parameters, 1e12 tokens, 64 A100 (312 TFLOP/s dense bf16) at 40% MFU.
    const units::Flops work = units::flop(6.0 * 7e9 * 1e12);
    const hw::GpuSpec& a100 = gpu("a100-sxm4-80gb");
    REQUIRE(a100.peak(hw::Precision::bf16).has_value());
    CHECK(a100.peak(hw::Precision::bf16)->raw() == gptest::approx(312e12));
    const units::FlopRate rate = *a100.peak(hw::Precision::bf16) * (64.0 * 0.40);
    const units::Seconds t = work / rate;
    CHECK(t.raw() == gptest::approx(4.2e22 / (64 * 312e12 * 0.4)).epsilon(1e-12));
    CHECK(t.raw() / 86400.0 == gptest::approx(60.86).epsilon(1e-3));
    CHECK(units::format(t) == "60.9 days");
    // GPU-hours and cost at $2/GPU-hour with the unit helpers: 93,470 GPU-hours, $187k.
    const double gpu_hours = units::to_hours(t) * 64;
    CHECK(gpu_hours == gptest::approx(93470).epsilon(1e-3));
    const units::Usd cost = units::usd(units::to_usd_per_hour(units::usd_per_hour(2.0)) * gpu_hours);
    CHECK(cost.raw() == gptest::approx(186940).epsilon(1e-3));
  }

  TEST_CASE("T15 with the model's own FLOPs per token: 6 FLOPs per matmul weight plus attention") {
    // Llama-2-7B has 6.74e9 parameters, 6.61e9 of them in matrix multiplies (the embedding lookup is not one);
    // flops_per_token at a context of 1 is almost exactly 6 per matmul weight.
    const auto& a = arch("llama-2-7b");
    const auto fpt = model::flops_per_token(a, 1, Explain::off);
    const auto p = model::parameter_counts(a, Explain::off);
    CHECK(fpt.matmul_params == p.total - p.embedding - p.norms);
    CHECK(fpt.training.raw() == gptest::approx(6.0 * double(fpt.matmul_params)).epsilon(1e-3));
    // The same template with this count: 57.5 days.
    const units::Seconds t = fpt.training * 1e12 / (*gpu("a100-sxm4-80gb").peak(hw::Precision::bf16) * (64.0 * 0.40));
    CHECK(t.raw() / 86400.0 == gptest::approx(60.86 * double(fpt.matmul_params) / 7e9).epsilon(2e-3));
  }

  TEST_CASE("time to train, GPU-hours, cost and energy follow from the step time") {
    // Llama-2-7B, 64 A100 80GB in DGX A100s, DP 64 with ZeRO-1, 1T tokens, $2/GPU-hour.
    const auto& a = arch("llama-2-7b");
    auto sys = node_system("dgx-a100");
    sys.price = units::usd_per_hour(2.0);
    Layout l;
    l.dp = 64;
    l.global = 512;
    l.zero = wl::ZeroStage::optimizer;
    wl::TrainingPlan p = plan_of(l);
    p.tokens_to_train = 1e12;
    const auto e = model::estimate_training(a, p, sys, Explain::off);
    REQUIRE(e.step_time.raw() > 0);
    REQUIRE(e.time_to_train.has_value());
    REQUIRE(e.gpu_hours.has_value());
    REQUIRE(e.cost.has_value());
    const double tokens_per_step = 512.0 * 4096.0;
    CHECK(e.time_to_train->raw() == gptest::approx(e.step_time.raw() * 1e12 / tokens_per_step).epsilon(1e-12));
    CHECK(*e.gpu_hours == gptest::approx(e.time_to_train->raw() / 3600.0 * 64).epsilon(1e-12));
    CHECK(e.cost->raw() == gptest::approx(*e.gpu_hours * 2.0).epsilon(1e-12));
    // The textbook template with our modelled MFU gives back our time to train: t = F_token · tokens / (N · P · MFU).
    const auto fpt = model::flops_per_token(a, 4096, Explain::off);
    const double peak = sys.gpu->peak(hw::Precision::bf16)->raw();
    const double template_t = fpt.training.raw() * 1e12 / (64 * peak * e.mfu);
    CHECK(e.time_to_train->raw() == gptest::approx(template_t).epsilon(1e-9));
    // Energy: TDP while busy, never more than TDP for the whole run.
    REQUIRE(e.energy.has_value());
    REQUIRE(sys.gpu->tdp.has_value());
    CHECK(e.energy->raw() > 0);
    CHECK(e.energy->raw() <= sys.gpu->tdp->raw() * 64 * e.time_to_train->raw() * (1 + 1e-12));
    // Days, not seconds, in the report's formatting.
    CHECK(units::format(*e.time_to_train).find("days") != std::string::npos);
  }

  TEST_CASE("no token budget means no time to train, GPU-hours, cost or energy") {
    Layout l;
    l.dp = 8;
    l.zero = wl::ZeroStage::optimizer;
    const auto e = model::estimate_training(arch("llama-3.1-8b"), plan_of(l), node_system("dgx-h100"), Explain::off);
    CHECK_FALSE(e.time_to_train.has_value());
    CHECK_FALSE(e.gpu_hours.has_value());
    CHECK_FALSE(e.cost.has_value());
    CHECK_FALSE(e.energy.has_value());
  }

  TEST_CASE("the price override replaces the GPU's indicative price and cost scales with it") {
    Layout l;
    l.dp = 8;
    l.zero = wl::ZeroStage::optimizer;
    wl::TrainingPlan p = plan_of(l);
    p.tokens_to_train = 1e11;
    auto sys = node_system("dgx-h100");
    sys.price = units::usd_per_hour(1.0);
    const auto one = model::estimate_training(arch("llama-3.1-8b"), p, sys, Explain::off);
    sys.price = units::usd_per_hour(3.0);
    const auto three = model::estimate_training(arch("llama-3.1-8b"), p, sys, Explain::off);
    REQUIRE(one.cost.has_value());
    REQUIRE(three.cost.has_value());
    CHECK(one.cost->raw() == gptest::approx(*one.gpu_hours));
    CHECK(three.cost->raw() == gptest::approx(3.0 * one.cost->raw()));
  }
}

TEST_SUITE("CPU offload of the optimizer (ZeRO-Offload)") {
  // llama-3.1-8b, DP 8 with ZeRO 1 on a DGX H100: each GPU owns 1/8 of the optimizer states.
  Layout zero1() {
    Layout l;
    l.dp = 8;
    l.global = 64;
    l.zero = wl::ZeroStage::optimizer;
    return l;
  }

  TEST_CASE("offload moves the master weights and optimizer states to the host and nothing else") {
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-3.1-8b");
    wl::TrainingPlan p = plan_of(zero1());
    const auto on_gpu = model::estimate_training(a, p, sys, Explain::off);
    p.offload = wl::Offload::optimizer;
    const auto off = model::estimate_training(a, p, sys, Explain::off);
    REQUIRE(on_gpu.feasibility.ok);
    REQUIRE(off.feasibility.ok);
    CHECK(off.memory.master_weights.raw() == 0.0);
    CHECK(off.memory.optimizer_states.raw() == 0.0);
    CHECK(off.memory.host_offloaded.raw() ==
          gptest::approx((on_gpu.memory.master_weights + on_gpu.memory.optimizer_states).raw()));
    CHECK(on_gpu.memory.host_offloaded.raw() == 0.0);
    CHECK(off.memory.weights.raw() == on_gpu.memory.weights.raw());
    CHECK(off.memory.gradients.raw() == on_gpu.memory.gradients.raw());
    CHECK(off.memory.activations.raw() == on_gpu.memory.activations.raw());
    // Fragmentation is a fraction of what the allocator holds, so it falls with it.
    CHECK(off.memory.total < on_gpu.memory.total);
    // The compute and the communication of the step do not change.
    CHECK(off.step.gemm.raw() == on_gpu.step.gemm.raw());
    CHECK(off.step.comm_exposed.raw() == on_gpu.step.comm_exposed.raw());
  }

  TEST_CASE("the CPU step streams 28 B per parameter at the GPU's share of the node's DRAM - transfers over PCIe") {
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-3.1-8b");
    wl::TrainingPlan p = plan_of(zero1());
    p.offload = wl::Offload::optimizer;
    const auto e = model::estimate_training(a, p, sys, Explain::off);
    REQUIRE(e.feasibility.ok);
    const double shard = double(model::parameter_counts(a, Explain::off).total) / 8.0;
    // AdamW: master, m, v read + written (2·12 B) + bf16 gradient read (2 B) + bf16 weight written (2 B) = 28 B.
    // DGX H100: 2 × 8 DDR5-4800 channels = 614.4 GB/s peak, 70% sustained, shared by 8 GPUs.
    const double dram = 614.4e9 * 0.70 / 8.0;
    CHECK(e.step.optimizer.raw() == gptest::approx(shard * 28.0 / dram).epsilon(1e-9));
    // PCIe Gen5 x16: 63 GB/s per direction at 86% DMA efficiency (measured); bf16 gradients down, bf16 weights up.
    const double link = 63e9 * 0.86;
    const double d2h = shard * 2.0 / link, h2d = shard * 2.0 / link;
    CHECK(e.step.offload.raw() >= gptest::approx(h2d).epsilon(1e-9));
    CHECK(e.step.offload.raw() <= gptest::approx(d2h + h2d).epsilon(1e-9));
    CHECK(e.step_time.raw() ==
          gptest::approx((e.step.gemm + e.step.attention + e.step.elementwise + e.step.embedding_loss +
                           e.step.comm_exposed + e.step.bubble + e.step.optimizer + e.step.offload)
                              .raw())
              .epsilon(1e-9));
  }

  TEST_CASE("offload needs ZeRO, fp32 optimizer states, a host link and the node's DRAM bandwidth") {
    const auto& a = arch("llama-3.1-8b");
    Layout l = zero1();
    l.zero = wl::ZeroStage::none;
    wl::TrainingPlan p = plan_of(l);
    p.offload = wl::Offload::optimizer;
    auto f = model::check_training_layout(a, p, node_system("dgx-h100"));
    REQUIRE_FALSE(f.ok);
    CHECK(f.reasons[0] ==
          "CPU offload of the optimizer needs ZeRO ≥ 1 (ZeRO-Offload moves each GPU's shard of the optimizer states): "
          "add --zero 1 or higher");
    p.zero = wl::ZeroStage::optimizer;
    p.optimizer = wl::OptimizerKind::adamw_8bit;
    f = model::check_training_layout(a, p, node_system("dgx-h100"));
    REQUIRE_FALSE(f.ok);
    CHECK(f.reasons[0].find("8-bit AdamW cannot be offloaded") != std::string::npos);
    p.optimizer = wl::OptimizerKind::adamw;
    f = model::check_training_layout(a, p, node_system("hgx-h200"));  // no host data in the node file
    REQUIRE_FALSE(f.ok);
    CHECK(f.reasons[0] ==
          "CPU offload needs the node's host DRAM bandwidth (host.memory_bandwidth_GBps): node hgx-h200 does not give "
          "it");
  }

  TEST_CASE("states that do not fit in the node's host memory make the plan infeasible, with the numbers") {
    // 405B with ZeRO-3 over 8 GPUs: 12 B of fp32 master + Adam states per parameter = 4.9 TB on a 2 TB host.
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-3.1-405b");
    Layout l;
    l.dp = 8;
    l.global = 8;
    l.zero = wl::ZeroStage::parameters;
    l.recompute = wl::Recompute::full;
    wl::TrainingPlan p = plan_of(l);
    p.offload = wl::Offload::optimizer;
    const auto e = model::estimate_training(a, p, sys, Explain::off);
    CHECK_FALSE(e.feasibility.ok);
    CHECK_FALSE(e.memory.fits);
    bool host = false;
    for (const auto& r : e.feasibility.reasons) host = host || r.find("does not fit in host memory") != std::string::npos;
    CHECK(host);
    CHECK(e.memory.host_offloaded.raw() * 8.0 > 2e12);
  }

  TEST_CASE("the derivation names the DRAM bandwidth's source and the assumed efficiencies") {
    const auto sys = node_system("dgx-h100");
    wl::TrainingPlan p = plan_of(zero1());
    p.offload = wl::Offload::optimizer;
    const auto e = model::estimate_training(arch("llama-3.1-8b"), p, sys, Explain::on);
    const Derivation* opt = nullptr;
    const Derivation* off = nullptr;
    for (const auto& c : e.derivation.children) {
      if (c.id == "train.optimizer") opt = &c;
      if (c.id == "train.offload") off = &c;
    }
    REQUIRE(opt != nullptr);
    REQUIRE(off != nullptr);
    bool dram_cited = false, eta_assumed = false;
    for (const auto& in : opt->inputs) {
      dram_cited = dram_cited || (in.symbol == "BW_dram" && in.origin.kind == OriginKind::datasheet &&
                                  in.origin.ref.find("dgx-h100") != std::string::npos);
      eta_assumed = eta_assumed || (in.symbol == "η_dram" && in.origin.kind == OriginKind::assumption);
    }
    CHECK(dram_cited);
    CHECK(eta_assumed);
  }
}

TEST_SUITE("TP communication overlap") {
  /// Llama 3.1 70B at TP 8 alone on one DGX H100: micro-batch 1, 4 micro-batches of `seq` tokens.
  Layout tp8_only(std::int64_t seq) {
    Layout l;
    l.tp = 8;
    l.pp = 1;
    l.dp = 1;
    l.global = 4;
    l.seq = seq;
    return l;
  }

  TEST_CASE("TP communication: Megatron's 4 collectives per layer and SP's 2 re-gathers, what hides and what stays exposed") {
    // Llama 3.1 70B (80 layers, h 8192), TP 8 + SP on a DGX H100, micro-batch 1 of 8192 tokens, 4 micro-batches,
    // full recompute. Per layer and micro-batch (Narayanan et al. 2021 §3.2; Megatron-Core layers.py): 2 all-gather +
    // reduce-scatter pairs forward, run again by the recompute, 2 backward, and 2 all-gathers that re-gather the
    // column-parallel linears' inputs for their weight gradients: time = (6·(AG + RS) + 2·AG)·80·4.
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-3.1-70b");
    Layout l = tp8_only(8192);
    l.recompute = wl::Recompute::full;
    wl::TrainingPlan p = plan_of(l);
    REQUIRE(p.par.sequence_parallel);
    p.overlap_tp_comm = true;
    const auto on = model::estimate_training(a, p, sys, Explain::off);
    p.overlap_tp_comm = false;
    const auto off = model::estimate_training(a, p, sys, Explain::off);
    REQUIRE(on.step_time.raw() > 0);
    const auto& tp_on = on.comm[0];
    const auto& tp_off = off.comm[0];
    REQUIRE(tp_on.kind == "tp");
    const auto g8 = model::training_comm_group(8, 1, sys);
    const units::Bytes act = units::bytes(8192.0 * 8192.0 * 2.0);
    const double ag = model::collective_time(model::Collective::all_gather, act, g8).raw();
    const double rs = model::collective_time(model::Collective::reduce_scatter, act, g8).raw();
    const double per_mb = 80.0 * 4.0;
    const double t = (6.0 * (ag + rs) + 2.0 * ag) * per_mb;
    CHECK(tp_on.time.raw() == gptest::approx(t).epsilon(1e-12));
    CHECK(tp_off.time.raw() == gptest::approx(t).epsilon(1e-12));
    CHECK(tp_on.bytes_per_step.raw() == gptest::approx((6.0 * 2.0 + 2.0) * act.raw() * per_mb).epsilon(1e-12));
    // Overlapped (userbuffers): 1/tp of the pairs' reduce-scatter half stays exposed, the rest pays 16/132.
    const double tail = 6.0 * (ag + rs) * per_mb / 16.0;
    CHECK(tp_on.exposed.raw() == gptest::approx(tail + (t - tail) * 16.0 / 132.0).epsilon(1e-9));
    // Not overlapped: the column-parallel backward's reduce-scatters and re-gathers (2·(AG + RS) per layer) run
    // beside the backward GEMMs, far longer here, at 16/132; everything else is on the critical path.
    const double beside = 2.0 * (ag + rs) * per_mb;
    CHECK(tp_off.exposed.raw() == gptest::approx(t - beside + beside * 16.0 / 132.0).epsilon(1e-9));
    CHECK(on.step_time < off.step_time);
  }

  TEST_CASE("TP without sequence parallelism: 2 all-reduces forward, 2 backward beside the GEMMs, no re-gather") {
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-3.1-70b");
    wl::TrainingPlan p = plan_of(tp8_only(4096));
    p.par.sequence_parallel = false;
    p.overlap_tp_comm = false;
    const auto e = model::estimate_training(a, p, sys, Explain::off);
    REQUIRE(e.comm[0].kind == "tp");
    const auto g8 = model::training_comm_group(8, 1, sys);
    const double ar =
        model::collective_time(model::Collective::all_reduce, units::bytes(4096.0 * 8192.0 * 2.0), g8).raw();
    const double per_mb = 80.0 * 4.0;
    CHECK(e.comm[0].time.raw() == gptest::approx(4.0 * ar * per_mb).epsilon(1e-12));
    CHECK(e.comm[0].exposed.raw() == gptest::approx((2.0 * ar + 2.0 * ar * 16.0 / 132.0) * per_mb).epsilon(1e-9));
    // Megatron-LM before its async all-reduce (2021): the backward's 2 all-reduces block after the linear's
    // backward, so all 4 are exposed and the step grows by the 2 that hid, less their SM share.
    p.tp_async_backward = false;
    const auto blocking = model::estimate_training(a, p, sys, Explain::off);
    CHECK(blocking.comm[0].time.raw() == gptest::approx(4.0 * ar * per_mb).epsilon(1e-12));
    CHECK(blocking.comm[0].exposed.raw() == gptest::approx(4.0 * ar * per_mb).epsilon(1e-9));
    CHECK(blocking.step_time > e.step_time);
  }
}

/// Llama 3.1 70B at TP 8 on one node over `dp` replicas, 4 micro-batches of 1 × 4096 tokens per replica (ZeRO-1 when
/// replicated).
Layout tp8_dp(int dp) {
  Layout l;
  l.tp = 8;
  l.pp = 1;
  l.dp = dp;
  l.global = 4 * dp;
  l.seq = 4096;
  l.zero = dp > 1 ? wl::ZeroStage::optimizer : wl::ZeroStage::none;
  return l;
}

TEST_SUITE("TP communication of quantised operands") {
  /// Llama 3.1 70B (80 layers, h 8192) at TP 8 + SP alone on one node, FP8 GEMMs under `recipe`, TP overlap off.
  wl::TrainingPlan fp8_tp8(wl::QuantRecipe recipe) {
    wl::TrainingPlan p = plan_of(tp8_dp(1));
    p.precision.compute = hw::Precision::fp8;
    p.precision.recipe = recipe;
    p.overlap_tp_comm = false;
    return p;
  }

  TEST_CASE("delayed scaling under SP: the 6 all-gathers per layer move 1 B per element, the 4 reduce-scatters 2 B") {
    // Transformer Engine quantises the shard and gathers its FP8 data (distributed.py _all_gather_fp8): the QKV and
    // fc1 inputs forward, the output projection's and fc2's output gradients backward, the two re-gathers for the
    // weight gradients. Per layer and micro-batch: 2·(AG₁ + RS₂) + 2·(AG₁ + RS₂) + 2·AG₁.
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-3.1-70b");
    wl::TrainingPlan p = fp8_tp8(wl::QuantRecipe::delayed);
    REQUIRE(p.par.sequence_parallel);
    const auto e = model::estimate_training(a, p, sys, Explain::off);
    REQUIRE(e.comm[0].kind == "tp");
    const auto g8 = model::training_comm_group(8, 1, sys);
    const double elems = 4096.0 * 8192.0;
    const double ag1 = model::collective_time(model::Collective::all_gather, units::bytes(elems), g8).raw();
    const double rs2 = model::collective_time(model::Collective::reduce_scatter, units::bytes(2.0 * elems), g8).raw();
    const double per_mb = 80.0 * 4.0;
    const double t = (4.0 * (ag1 + rs2) + 2.0 * ag1) * per_mb;
    CHECK(e.comm[0].time.raw() == gptest::approx(t).epsilon(1e-12));
    CHECK(e.comm[0].bytes_per_step.raw() == gptest::approx((4.0 * (1.0 + 2.0) + 2.0) * elems * per_mb).epsilon(1e-12));
    // The column-parallel backward's reduce-scatters and FP8 re-gathers run beside the backward GEMMs at 16/132.
    const double beside = 2.0 * (rs2 + ag1) * per_mb;
    CHECK(e.comm[0].exposed.raw() == gptest::approx(t - beside + beside * 16.0 / 132.0).epsilon(1e-9));
    // Less than the 16-bit gathers of the same layout.
    wl::TrainingPlan b = p;
    b.precision.compute = hw::Precision::bf16;
    CHECK(e.comm[0].time < model::estimate_training(a, b, sys, Explain::off).comm[0].time);
  }

  TEST_CASE("current scaling adds one amax all-reduce of 4 B over TP before each forward input's and output gradient's gather") {
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-3.1-70b");
    const auto d = model::estimate_training(a, fp8_tp8(wl::QuantRecipe::delayed), sys, Explain::off);
    const auto c = model::estimate_training(a, fp8_tp8(wl::QuantRecipe::tensorwise), sys, Explain::off);
    const auto g8 = model::training_comm_group(8, 1, sys);
    const double amax = model::collective_time(model::Collective::all_reduce, units::bytes(4.0), g8).raw();
    REQUIRE(amax > 0.0);
    // QKV and fc1 inputs forward, the output projection's and fc2's gradients backward: 4 per layer, exposed.
    const double n = 4.0 * 80.0 * 4.0;
    CHECK(c.comm[0].time.raw() - d.comm[0].time.raw() == gptest::approx(n * amax).epsilon(1e-9));
    CHECK(c.comm[0].exposed.raw() - d.comm[0].exposed.raw() == gptest::approx(n * amax).epsilon(1e-9));
    CHECK(c.comm[0].bytes_per_step.raw() - d.comm[0].bytes_per_step.raw() == gptest::approx(n * 4.0).epsilon(1e-9));
  }

  TEST_CASE("MXFP8 gathers 1 + 1/32 B per element forward and for the re-gather, both copies of the output gradient") {
    const auto sys = node_system("dgx-b200");
    const auto& a = arch("llama-3.1-70b");
    const auto e = model::estimate_training(a, fp8_tp8(wl::QuantRecipe::mxfp8), sys, Explain::off);
    const double elems = 4096.0 * 8192.0, per_mb = 80.0 * 4.0, mx = 1.0 + 1.0 / 32.0;
    // Per layer: 2 forward (input mx + output 2 B), 2 backward (gradient 2·mx + 2 B), 2 re-gathers (mx).
    const double per_layer = 2.0 * (mx + 2.0) + 2.0 * (2.0 * mx + 2.0) + 2.0 * mx;
    CHECK(e.comm[0].bytes_per_step.raw() == gptest::approx(per_layer * elems * per_mb).epsilon(1e-12));
  }

  TEST_CASE("without sequence parallelism nothing is gathered: the all-reduces stay 16-bit under FP8") {
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-3.1-70b");
    wl::TrainingPlan p = fp8_tp8(wl::QuantRecipe::tensorwise);
    p.par.sequence_parallel = false;
    const auto e = model::estimate_training(a, p, sys, Explain::off);
    const auto g8 = model::training_comm_group(8, 1, sys);
    const double ar =
        model::collective_time(model::Collective::all_reduce, units::bytes(4096.0 * 8192.0 * 2.0), g8).raw();
    CHECK(e.comm[0].time.raw() == gptest::approx(4.0 * ar * 80.0 * 4.0).epsilon(1e-12));
  }
}

TEST_SUITE("FP8 weights quantised once per step") {
  /// One pass of the cast pricer by hand: a streaming kernel of elems·bytes at `rate` of the streaming rate, its
  /// fixed cost kept.
  double cast_pass(const model::Device& d, double elems, double bytes, double rate) {
    const double fixed = model::kernel_fixed(d, model::OpClass::elementwise).raw();
    const double t =
        model::streaming_cost("", model::OpClass::elementwise, units::bytes(elems * bytes), units::flop(elems), d)
            .time.raw();
    return (t - fixed) / rate + fixed;
  }
  /// The GEMM weights of one GPU at TP 8: attention and MLP over 8.
  double gemm_weights_tp8(const wl::TransformerArch& a) {
    const auto pc = model::parameter_counts(a, Explain::off);
    return double(pc.attention + pc.dense_mlp) / 8.0;
  }

  TEST_CASE("16-bit weights: delayed scaling cast-transposes every GEMM weight once per step, 2 + 1 + 1 B at 0.861") {
    // W quantised in the first micro-batch (Transformer Engine's is_first_microbatch); the optimizer step carries it.
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-3.1-70b");
    wl::TrainingPlan p = plan_of(tp8_dp(1));
    const auto bf16 = model::estimate_training(a, p, sys, Explain::off);
    p.precision.compute = hw::Precision::fp8;
    p.precision.recipe = wl::QuantRecipe::delayed;
    const auto fp8 = model::estimate_training(a, p, sys, Explain::off);
    const double cast = cast_pass(model::make_device(*sys.gpu), gemm_weights_tp8(a), 4.0, 0.861);
    CHECK(fp8.step.optimizer.raw() - bf16.step.optimizer.raw() == gptest::approx(cast).epsilon(1e-9));
    // Copies made in every micro-batch instead (priced in the layers): nothing once per step.
    p.fp8_weight_copies = wl::Fp8WeightCopies::per_microbatch;
    CHECK(model::estimate_training(a, p, sys, Explain::off).step.optimizer.raw() ==
          gptest::approx(bf16.step.optimizer.raw()).epsilon(1e-12));
  }

  TEST_CASE("FP8 parameters: the optimizer's shard cast from the fp32 master, then the gathered weight transposed on Hopper") {
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-3.1-70b");
    wl::TrainingPlan p = plan_of(tp8_dp(2));
    p.precision.weight_bytes = 1.0;  // the optimizer step writes 1 B working weights in both
    const auto bf16 = model::estimate_training(a, p, sys, Explain::off);
    p.precision.compute = hw::Precision::fp8;
    p.precision.recipe = wl::QuantRecipe::tensorwise;
    p.precision.fp8_params = true;
    const auto fp8 = model::estimate_training(a, p, sys, Explain::off);
    const double w = gemm_weights_tp8(a), shard = w / 2.0;
    const auto d = model::make_device(*sys.gpu);
    // Current scaling: the shard's amax (4 B at 0.916), the cast (4 + 1 B), the transpose of the gathered weight
    // (1 + 1 B at 0.800).
    const double t = cast_pass(d, shard, 4.0, 0.916) + cast_pass(d, shard, 5.0, 1.0) + cast_pass(d, w, 2.0, 0.800);
    CHECK(fp8.step.optimizer.raw() - bf16.step.optimizer.raw() == gptest::approx(t).epsilon(1e-9));
  }
}

TEST_SUITE("LoRA and QLoRA fine-tuning") {
  // Llama-2-7B (h 4096, 32 heads of 128, MHA, i 11008, 32 layers) on a DGX H100, one GPU's view of DP 8.
  Layout dp8() {
    Layout l;
    l.dp = 8;
    l.global = 32;
    return l;
  }

  TEST_CASE("adapters: r·(d_in + d_out) per targeted linear layer, NeMo's fused QKV and up/gate") {
    const auto& a = arch("llama-2-7b");
    wl::Lora l;
    l.rank = 32;
    l.targets = wl::LoraTargets::qkv;
    CHECK(model::lora_layer_params(a, l, false).dense == gptest::approx(32.0 * (4096 + 3 * 4096)));
    CHECK(model::lora_adapter_params(a, l) == gptest::approx(32.0 * 32 * (4096 + 3 * 4096)));
    l.targets = wl::LoraTargets::all;
    const double per_layer = 32.0 * ((4096 + 3 * 4096) + (4096 + 4096) + (4096 + 2 * 11008) + (11008 + 4096));
    CHECK(model::lora_layer_params(a, l, false).dense == gptest::approx(per_layer));
    l.rank = 0;
    CHECK(model::lora_adapter_params(a, l) == 0.0);
    CHECK_FALSE(model::lora_targets(l, model::LinearKind::qkv));
  }

  TEST_CASE("LoRA keeps gradients, master weights and optimizer states for the adapters only") {
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-2-7b");
    wl::TrainingPlan p = plan_of(dp8());
    p.lora.rank = 32;
    p.lora.targets = wl::LoraTargets::qkv;
    const auto e = model::estimate_training(a, p, sys, Explain::on);
    REQUIRE(e.feasibility.ok);
    const double P = double(model::parameter_counts(a, Explain::off).total), A = 32.0 * 32 * 16384;
    const auto& pr = p.precision;
    CHECK(e.memory.weights.raw() == gptest::approx((P + A) * pr.weight_bytes));
    CHECK(e.memory.gradients.raw() == gptest::approx(A * pr.gradient_bytes));
    CHECK(e.memory.master_weights.raw() == gptest::approx(A * pr.master_bytes));
    CHECK(e.memory.optimizer_states.raw() == gptest::approx(A * 8.0));
    // QLoRA: the frozen base in NF4 with double quantisation, 4.127 bits per weight.
    p.lora.base = wl::LoraBase::nf4;
    const auto q = model::estimate_training(a, p, sys, Explain::off);
    CHECK(q.memory.weights.raw() == gptest::approx(P * 4.127 / 8 + A * pr.weight_bytes));
  }

  TEST_CASE("the frozen base skips its weight-gradient GEMMs: a third of the GEMM work, and a DP reduction of adapters") {
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-2-7b");
    wl::TrainingPlan p = plan_of(dp8());
    p.zero = wl::ZeroStage::optimizer;  // full fine-tuning of 7B needs its optimizer states sharded to fit
    const auto full = model::estimate_training(a, p, sys, Explain::off);
    p.lora.rank = 8;
    p.lora.targets = wl::LoraTargets::qkv;
    const auto lora = model::estimate_training(a, p, sys, Explain::off);
    REQUIRE(full.feasibility.ok);
    REQUIRE(lora.feasibility.ok);
    // Layer GEMMs: forward + dgrad + wgrad of equal FLOPs → forward + dgrad, plus rank-8 adapters (< 1%).
    CHECK(lora.step.gemm.raw() / full.step.gemm.raw() == gptest::approx(2.0 / 3.0).epsilon(0.03));
    CHECK(lora.step.attention.raw() == gptest::approx(full.step.attention.raw()));
    CHECK(lora.comm[4].bytes_per_step.raw() < 1e-3 * full.comm[4].bytes_per_step.raw());
    // Model FLOPs: 2 + 2 per frozen weight and token, attention 3× forward, adapters 6 per weight.
    const auto fpt = model::flops_per_token(a, p.seq_len, Explain::off);
    const double tokens = double(p.global_batch) * double(p.seq_len);
    const double adapters = 32.0 * 8 * 16384;
    CHECK(lora.model_flops_per_step.raw() ==
          gptest::approx((2 * fpt.matmul_forward.raw() + 3 * fpt.attention_forward.raw() + 6 * adapters) * tokens));
    // The adapters' GEMMs and the dequantisation appear in the layer's op list.
    p.lora.base = wl::LoraBase::nf4;
    const auto q = model::estimate_training(a, p, sys, Explain::on);
    bool adapter = false, dequant = false, wgrad = false;
    for (const auto& op : q.layer_ops) {
      adapter = adapter || op.name == "QKV projection LoRA A";
      dequant = dequant || op.name == "MLP down dequantise";
      wgrad = wgrad || op.name == "MLP down wgrad";
    }
    CHECK(adapter);
    CHECK(dequant);
    CHECK_FALSE(wgrad);
    CHECK(q.step_time > lora.step_time);  // dequantising every weight twice per micro-batch costs time
  }
}

TEST_CASE("PyTorch FSDP2 copies: shard casts, gathered-buffer splits and gradient copy-ins, in bytes per step") {
  // The 1B-like bench model on 4 GPUs, FSDP2 with bf16 compute and fp32 parameters and gradients (AMP), as in
  // profile_h200_llama1b_s2048_b4_fsdp4.json (which ran one micro-batch per step; here 4).
  const auto& a = arch("bench-llama-1b-like");
  const auto params = model::parameter_counts(a, Explain::off);
  wl::TrainingPlan plan;
  plan.seq_len = 2048;
  plan.micro_batch = 4;
  plan.par.dp = 4;
  plan.global_batch = 4 * 4 * 4;
  plan.zero = wl::ZeroStage::parameters;
  plan.kernels = wl::KernelStyle::eager;
  plan.mixed_precision = wl::MixedPrecision::amp;
  plan.precision.weight_bytes = 4;
  plan.precision.gradient_bytes = 4;
  plan.precision.master_bytes = 0;
  const double P = double(params.total);
  const double root = double(params.embedding + params.lm_head);
  // per micro-batch: layers gathered twice, the root once; copy-out 2·2 B, copy-in (4 + 2)/4 B per gathered
  // parameter; gradients 2 + 4 B into the reduce-scatter input.
  const double per_mb = (2.0 * (P - root) + root) * (4.0 + 6.0 / 4.0) + P * 6.0;
  CHECK(model::dp_copy_bytes(a, params, plan) == gptest::approx(4.0 * per_mb));
  // The fused frameworks and ZeRO-1/2 copy nothing; PyTorch DDP copies each fp32 gradient once, read + write.
  plan.kernels = wl::KernelStyle::fused;
  CHECK(model::dp_copy_bytes(a, params, plan) == 0.0);
  plan.kernels = wl::KernelStyle::eager;
  plan.zero = wl::ZeroStage::gradients;
  CHECK(model::dp_copy_bytes(a, params, plan) == 0.0);
  plan.zero = wl::ZeroStage::none;
  CHECK(model::dp_copy_bytes(a, params, plan) == gptest::approx(2.0 * 4.0 * P));
  plan.par.dp = 1;
  plan.global_batch = 16;
  CHECK(model::dp_copy_bytes(a, params, plan) == 0.0);
}

TEST_CASE("MoE with EP: routed experts reduce over the expert-data-parallel group, the rest over dp·cp") {
  // Megatron-Core's grids (parallel_state.py): dense tp-cp-dp-pp, experts tp-ep-edp-pp on the same GPUs. Mixtral-8x7B
  // on one DGX H100, TP 1, DP 8, no ZeRO (all-reduce): each GPU holds the dense parameters whole and 1/EP of the
  // routed experts; the dense gradients are all-reduced over the 8 GPUs, the experts' over the dp/ep GPUs that hold the
  // same experts (stride EP).
  const auto sys = node_system("dgx-h100");
  const auto& a = arch("mixtral-8x7b");
  const auto params = model::parameter_counts(a, Explain::off);
  const double P = double(params.total), R = double(params.routed_experts);
  REQUIRE(R > 0.9 * P);
  auto dp_row = [&](int ep) {
    Layout l;
    l.dp = 8;
    l.ep = ep;
    l.seq = 2048;
    const wl::TrainingPlan p = plan_of(l);
    const auto e = model::estimate_training(a, p, sys, Explain::off);
    REQUIRE(e.comm.size() == 5);
    REQUIRE(e.comm[4].kind == "dp");
    return std::make_pair(p, e.comm[4]);
  };
  const auto g8 = model::training_comm_group(8, 1, sys);
  for (int ep : {1, 2, 8}) {
    CAPTURE(ep);
    const auto [p, dp] = dp_row(ep);
    const double b = p.precision.gradient_bytes;
    CHECK(dp.group_size == 8);
    // EP 8 = DP 8: no GPU shares this GPU's experts, so their gradients are not communicated (nor counted).
    CHECK(dp.bytes_per_step.raw() == gptest::approx((P - R + (ep < 8 ? R / ep : 0.0)) * b));
    const auto dense = model::collective_cost(model::Collective::all_reduce, units::bytes((P - R) * b), g8).time;
    const auto experts = ep == 8 ? units::Seconds(0)
                                 : model::collective_cost(model::Collective::all_reduce, units::bytes(R / ep * b),
                                                          model::training_comm_group(8 / ep, ep, sys))
                                       .time;
    CHECK(dp.time.raw() == gptest::approx((dense + experts).raw()));
  }
  // Context parallelism joins the gradient group: DP 4 × CP 2 reduces over 8 GPUs, as DP 8 does.
  Layout l;
  l.dp = 4;
  l.cp = 2;
  l.ep = 2;
  l.seq = 2048;
  const auto e = model::estimate_training(a, plan_of(l), sys, Explain::off);
  CHECK(e.comm[4].group_size == 8);
  CHECK(e.comm[4].collective.find("routed experts over 4 GPUs") != std::string::npos);
}

TEST_CASE("the optimizer step updates dense / (dp·cp) + routed experts / (dp·cp/ep) parameters per GPU") {
  const auto sys = node_system("dgx-h100");
  const auto& a = arch("mixtral-8x7b");
  const auto params = model::parameter_counts(a, Explain::off);
  const double P = double(params.total), R = double(params.routed_experts);
  Layout l;
  l.dp = 8;
  l.ep = 4;
  l.seq = 2048;
  l.zero = wl::ZeroStage::optimizer;
  // (It does not fit in 80 GB: the derivation is built all the same.)
  const auto e = model::estimate_training(a, plan_of(l), sys, Explain::on);
  REQUIRE(e.step_time.raw() > 0);
  // dense over the 8 DP ranks, each expert over the 8/4 = 2 ranks that hold it
  const std::string expected = units::format_count((P - R) / 8 + (R / 4) / 2);
  bool seen = false;
  for (const auto& c : e.derivation.children) {
    if (c.id != "train.optimizer") continue;
    REQUIRE(!c.inputs.empty());
    CHECK(c.inputs[0].value == expected);
    CHECK(c.inputs[0].meaning.find("routed-expert / 2") != std::string::npos);
    seen = true;
  }
  CHECK(seen);
}

TEST_SUITE("chunked attention") {
  TEST_CASE("Llama 4 Scout: a chunked layer at 16K tokens is two causal 8K chunks, twice the 8K layer's attention") {
    // Layer 0 is a chunked layer (RoPE; 8192-token chunks). At seq 8192 it is one causal 8192 x 8192 problem, at
    // 16384 two of them: the chunked mask kv // C == q // C keeps the second chunk from seeing the first.
    Layout l;
    l.dp = 8;
    l.ep = 8;
    l.micro = 1;
    l.global = 8;
    const auto sys = node_system("dgx-h100");
    const auto& a = arch("llama-4-scout-17b-16e");
    REQUIRE(a.is_chunked_layer(0));
    auto fwd_flops = [&](std::int64_t seq, const std::string& name) {
      l.seq = seq;
      const auto e = model::estimate_training(a, plan_of(l), sys, Explain::on);
      double f = 0;
      for (const auto& o : e.layer_ops)
        if (o.name == name) f += o.flops.raw();
      return f;
    };
    const double one = fwd_flops(8192, "attention (flash fwd)");
    const double two = fwd_flops(16384, "attention (chunked) (flash fwd)");
    REQUIRE(one > 0);
    CHECK(two == gptest::approx(2.0 * one));
    CHECK(fwd_flops(16384, "attention (flash fwd)") == 0.0);  // no global pass on a chunked layer
  }
}

TEST_SUITE("packed documents") {
  // Sequence packing with per-document attention (wl::DocumentPacking; layer_cost.cpp price_packed_attention).
  // Llama 3.1 8B: 32 query heads of d = 128, one micro-batch of one sequence on one GPU (TP 1).
  struct Attn {
    double fwd_flops = 0, bwd_flops = 0, fwd_s = 0, bwd_s = 0;
  };
  Attn attention_of(const wl::TrainingPlan& p) {
    const auto e = model::estimate_training(arch("llama-3.1-8b"), p, node_system("dgx-h100"), Explain::on);
    Attn r;
    for (const auto& o : e.layer_ops) {
      if (o.cls != model::OpClass::attention) continue;
      const bool bwd = o.name.find("bwd") != std::string::npos;
      (bwd ? r.bwd_flops : r.fwd_flops) += o.flops.raw();
      (bwd ? r.bwd_s : r.fwd_s) += o.time.raw();
    }
    return r;
  }
  wl::TrainingPlan packed(std::int64_t seq, std::int64_t micro, std::vector<std::pair<std::int64_t, double>> lengths) {
    Layout l;
    l.seq = seq;
    l.micro = micro;
    wl::TrainingPlan p = plan_of(l);
    p.packing.lengths = std::move(lengths);
    p.packing.spec = "test";
    return p;
  }

  TEST_CASE("4096 tokens as 8 documents of 512: the causal attention FLOPs of 8 x 512²/2 pairs, 1/8 of one 4096") {
    // Forward FLOPs per head 2·(d_qk + d_v)·pairs, pairs = Σ d_i²/2: 2 · 32 heads · 256 · 8 · 512²/2 = 1.718e10;
    // one 4096-token document: 2 · 32 · 256 · 4096²/2 = 1.374e11. Backward 2.5 × forward (FlashAttention-2 §3.1).
    const Attn p = attention_of(packed(4096, 1, {{512, 1.0}}));
    const Attn full = attention_of(packed(4096, 1, {}));
    CHECK(p.fwd_flops == gptest::approx(17179869184.0));
    CHECK(full.fwd_flops == gptest::approx(137438953472.0));
    CHECK(p.bwd_flops == gptest::approx(2.5 * 17179869184.0));
    CHECK(p.fwd_flops / full.fwd_flops == gptest::approx(1.0 / 8.0));
  }

  TEST_CASE("the varlen kernel over 8 documents of 512 takes what one kernel over 8 sequences of 512 takes") {
    // Each document is tiled as its own 512-token problem at the sequence law's 512-token rate, in one kernel per
    // direction: the same work, rate and fixed cost as a micro-batch of 8 unpacked 512-token sequences.
    const Attn p = attention_of(packed(4096, 1, {{512, 1.0}}));
    const Attn batch = attention_of(packed(512, 8, {}));
    CHECK(p.fwd_flops == gptest::approx(batch.fwd_flops));
    CHECK(p.fwd_s == gptest::approx(batch.fwd_s));
    CHECK(p.bwd_s == gptest::approx(batch.bwd_s));
    // Short documents run below the 4096-token rate: more than 1/8 of the unpacked time.
    const Attn full = attention_of(packed(4096, 1, {}));
    CHECK(p.fwd_s > full.fwd_s / 8.0);
    CHECK(p.fwd_s < full.fwd_s);
  }

  TEST_CASE("a length distribution: documents of 256 and 768 in equal number average 512 and do 5/32 of the work") {
    // s/E[d] = 8 documents per sequence, 4 of each: (4·256² + 4·768²) / 4096² = 2621440 / 16777216 = 5/32.
    const Attn mix = attention_of(packed(4096, 1, {{256, 0.5}, {768, 0.5}}));
    const Attn full = attention_of(packed(4096, 1, {}));
    CHECK(mix.fwd_flops / full.fwd_flops == gptest::approx(5.0 / 32.0));
  }

  TEST_CASE("a document as long as the sequence, or longer (cut at s), prices exactly as no packing") {
    const Attn full = attention_of(packed(4096, 1, {}));
    for (const std::int64_t d : {4096, 10000}) {
      const Attn one = attention_of(packed(4096, 1, {{d, 1.0}}));
      CHECK(one.fwd_flops == gptest::approx(full.fwd_flops));
      CHECK(one.fwd_s == gptest::approx(full.fwd_s));
      CHECK(one.bwd_s == gptest::approx(full.bwd_s));
    }
  }

  TEST_CASE("packing leaves the GEMMs alone: the step falls by the attention it saves, no more") {
    const auto& a = arch("llama-3.1-8b");
    const auto sys = node_system("dgx-h100");
    const wl::TrainingPlan pp = packed(4096, 1, {{512, 1.0}}), pf = packed(4096, 1, {});
    const auto ep = model::estimate_training(a, pp, sys, Explain::on);
    const auto ef = model::estimate_training(a, pf, sys, Explain::on);
    double gemm_p = 0, gemm_f = 0;
    for (const auto& o : ep.layer_ops) if (o.cls == model::OpClass::gemm) gemm_p += o.time.raw();
    for (const auto& o : ef.layer_ops) if (o.cls == model::OpClass::gemm) gemm_f += o.time.raw();
    CHECK(gemm_p == gptest::approx(gemm_f));
    CHECK(ep.step_time.raw() < ef.step_time.raw());
  }
}
