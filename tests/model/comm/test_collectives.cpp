#include <doctest/doctest.h>
#include "approx.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "test_paths.hpp"
#include "gpuplan/core/format.hpp"
#include "gpuplan/hw_io/hardware_io.hpp"
#include "gpuplan/model/collectives.hpp"
#include "gpuplan/model/topology.hpp"
#include "library.hpp"

using namespace gpuplan;
using namespace gpuplan::units::literals;
using model::Collective;
using model::CollectiveAlgorithm;
using model::CommGroup;
using model::LinkTier;

namespace {

const hw::HardwareDb& db() { return test::hardware(); }

const hw::NodeSpec& node(const std::string& id) {
  const auto* n = db().find_node(id);
  REQUIRE_MESSAGE(n != nullptr, "node not in data: " << id);
  return *n;
}

CommGroup resolved(const std::string& node_id, int size, int stride = 1) {
  return model::resolve_group(size, stride, node(node_id), db());
}

LinkTier tier(double bw_GBps, double eta, units::Seconds alpha = units::Seconds(0)) {
  LinkTier t;
  t.name = "test tier";
  t.uni_per_gpu = units::gb_per_s(bw_GBps);
  t.bus_efficiency = eta;
  t.latency = alpha;
  t.origin = "test";
  return t;
}

CommGroup one_tier(int n, double bw_GBps, double eta = 1.0, units::Seconds alpha = units::Seconds(0)) {
  CommGroup g;
  g.size = n;
  g.scale_up_size = n;
  g.scale_up = tier(bw_GBps, eta, alpha);
  return g;
}

double seconds(Collective op, units::Bytes b, const CommGroup& g, CollectiveAlgorithm a = CollectiveAlgorithm::automatic) {
  return model::collective_cost(op, b, g, a, Explain::off).time.raw();
}

double busbw_GBps(Collective op, units::Bytes b, const CommGroup& g,
                  CollectiveAlgorithm a = CollectiveAlgorithm::automatic) {
  return units::to_GBps(model::collective_cost(op, b, g, a, Explain::off).busbw);
}

/// One measured point of a sweep: message bytes and the measured time in µs.
struct Point {
  double bytes;
  double time_us;
};

/// Points from a busbw column: t = S·bus_factor / busbw.
std::vector<Point> from_busbw(Collective op, int n, const std::vector<double>& bytes, const std::vector<double>& busbw) {
  REQUIRE(bytes.size() == busbw.size());
  std::vector<Point> p;
  for (std::size_t i = 0; i < bytes.size(); ++i)
    p.push_back({bytes[i], bytes[i] * model::bus_factor(op, n) / (busbw[i] * 1e9) * 1e6});
  return p;
}

/// Size bands of a sweep and what the model is expected to do in each (see the comment on the reference cases).
struct Bands {
  double large_tol = 0.15;    ///< |error| at S ≥ 256 MiB (bandwidth-bound: the model should be right)
  double mid_under = 0.55;    ///< model may be this much faster at 2-128 MiB (pipeline ramp, protocol switch)
  double mid_over = 0.35;     ///< and this much slower
  double small_factor = 2.0;  ///< at S ≤ 1 MiB (latency-bound) within this factor either way
};

void check_sweep(const std::string& name, Collective op, const CommGroup& g, const std::vector<Point>& pts,
                 const Bands& b) {
  std::string table = name + "\n      bytes   measured      model   error\n";
  for (const auto& p : pts) {
    const double t = seconds(op, units::bytes(p.bytes), g) * 1e6;
    const double err = t / p.time_us - 1.0;
    table += fmt::format("{:>11.0f} {:>8.1f}us {:>8.1f}us {:>+6.0f}%\n", p.bytes, p.time_us, t, err * 100);
    CAPTURE(name);
    CAPTURE(p.bytes);
    CAPTURE(p.time_us);
    CAPTURE(t);
    if (p.bytes >= 256.0 * 1024 * 1024) {
      CHECK(std::fabs(err) <= b.large_tol);
    } else if (p.bytes > 1024.0 * 1024) {
      CHECK(err >= -b.mid_under);
      CHECK(err <= b.mid_over);
    } else {
      CHECK(t <= p.time_us * b.small_factor);
      CHECK(t >= p.time_us / b.small_factor);
    }
  }
  MESSAGE(table);
}

const std::vector<double> kSweep32K16G = {32768,     65536,     131072,     262144,     524288,     1048576,   2097152,
                                          4194304,   8388608,   16777216,   33554432,   67108864,   134217728, 268435456,
                                          536870912, 1073741824, 2147483648, 4294967296, 8589934592, 17179869184};
const std::vector<double> kSweep1K8G = {1024,     2048,     4096,      8192,      16384,     32768,      65536,
                                        131072,   262144,   524288,    1048576,   2097152,   4194304,    8388608,
                                        16777216, 33554432, 67108864,  134217728, 268435456, 536870912,  1073741824,
                                        2147483648, 4294967296, 8589934592};

}  // namespace

// ================================ exact formula checks ================================

TEST_CASE("ring all-reduce moves 2(n-1)/n of the buffer") {
  // α = 0, η = 1: t = S·2(n−1)/n / BW exactly.
  for (int n : {2, 3, 4, 8, 16}) {
    const CommGroup g = one_tier(n, 100.0);
    const double t = seconds(Collective::all_reduce, 14_GB, g, CollectiveAlgorithm::ring);
    CHECK(t == gptest::approx(14e9 * 2.0 * (n - 1) / n / 100e9).epsilon(1e-12));
  }
}

TEST_CASE("ring all-gather and reduce-scatter move (n-1)/n of the buffer in n-1 steps of alpha") {
  CommGroup g = one_tier(8, 200.0, 0.5, 2_us);
  g.call_latency = 8.4_us;
  const double bw = 200e9 * 0.5, t0 = 8.4e-6;
  for (auto op : {Collective::all_gather, Collective::reduce_scatter}) {
    const double t = seconds(op, 1_GB, g, CollectiveAlgorithm::ring);
    CHECK(t == gptest::approx(t0 + 7 * 2e-6 + 1e9 * 7.0 / 8.0 / bw).epsilon(1e-12));
  }
  const double ar = seconds(Collective::all_reduce, 1_GB, g, CollectiveAlgorithm::ring);
  CHECK(ar == gptest::approx(t0 + 14 * 2e-6 + 1e9 * 14.0 / 8.0 / bw).epsilon(1e-12));
}

TEST_CASE("all-reduce on one GPU costs 0") {
  const CommGroup g = one_tier(1, 450.0, 0.81, 3_us);
  for (auto op : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter, Collective::all_to_all,
                  Collective::send_recv, Collective::broadcast}) {
    const auto c = model::collective_cost(op, 1_GB, g);
    CHECK(c.time.raw() == 0.0);
    CHECK(c.busbw.raw() == 0.0);
    CHECK(c.derivation.result == "0 s (single rank)");
    CHECK(c.derivation.inputs.empty());
    CHECK(c.derivation.children.empty());
  }
}

TEST_CASE("bus factors follow nccl-tests PERFORMANCE.md") {
  CHECK(model::bus_factor(Collective::all_reduce, 8) == gptest::approx(1.75));
  CHECK(model::bus_factor(Collective::all_gather, 8) == gptest::approx(0.875));
  CHECK(model::bus_factor(Collective::reduce_scatter, 8) == gptest::approx(0.875));
  CHECK(model::bus_factor(Collective::all_to_all, 8) == gptest::approx(0.875));
  CHECK(model::bus_factor(Collective::send_recv, 2) == 1.0);
  CHECK(model::bus_factor(Collective::broadcast, 8) == 1.0);
  CHECK(model::bus_factor(Collective::all_reduce, 1) == 0.0);
}

TEST_CASE("busbw is algbw times the bus factor and algbw is bytes over time") {
  const CommGroup g = resolved("dgx-h100", 8);
  for (auto op : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter, Collective::all_to_all}) {
    const auto c = model::collective_cost(op, 256_MB, g);
    CHECK(c.algbw.raw() == gptest::approx(256e6 / c.time.raw()).epsilon(1e-12));
    CHECK(c.busbw.raw() == gptest::approx(c.algbw.raw() * model::bus_factor(op, 8)).epsilon(1e-12));
  }
}

TEST_CASE("the derivation names the formula with substituted values and the algorithm and busbw") {
  const auto c = model::collective_cost(Collective::all_reduce, 1_GB, resolved("dgx-h100", 8));
  CHECK(c.algorithm == CollectiveAlgorithm::nvls);
  const auto& d = c.derivation;
  CHECK(d.id == "collective.all_reduce");
  CHECK(d.formula == "t = t_nvls + S·2(n−1)/n / (BW·η·g)");
  std::string symbols;
  for (const auto& in : d.inputs) symbols += in.symbol + "=" + in.value + " ";
  CHECK(symbols == "S=1 GB n=8 t_nvls=23 µs α=3.4 µs BW=450 GB/s η=0.81 g=1.29 ");
  // The ring on the same group substitutes t₀ and the per-step α.
  const auto r = model::collective_cost(Collective::all_reduce, 1_GB, resolved("dgx-h100", 8), CollectiveAlgorithm::ring);
  CHECK(r.derivation.formula == "t = t₀ + 2(n−1)·α + S·2(n−1)/n / (BW·η)");
  CHECK(r.derivation.inputs[2].symbol == "t₀");
  CHECK(r.derivation.inputs[2].value == "8.4 µs");
  CHECK(r.derivation.inputs[2].origin.ref.find("tuning.cc") != std::string::npos);
  REQUIRE(!d.notes.empty());
  CHECK(d.notes[0].find("automatic picks the fastest valid: ring") != std::string::npos);
  CHECK(d.notes[0].find("hierarchical n/a (the group lies inside one scale-up domain)") != std::string::npos);
  CHECK(d.result == fmt::format("{} (algbw {}, busbw {})", units::format(c.time), units::format(c.algbw),
                                 units::format(c.busbw)));
  CHECK(d.notes[2] == fmt::format("algbw = S / t; busbw = algbw × 2(n−1)/n = {} (nccl-tests PERFORMANCE.md)",
                                  units::format(c.busbw)));
}

// ================================ textbook T12-T14 (shared/reference/textbook.md) ================================

TEST_CASE("textbook T12 - ring all-reduce of 7B bf16 gradients on 8 GPUs sends 24.5 GB per GPU") {
  // 2(N−1)/N · 14 GB = 24.5 GB.
  CHECK(model::bus_factor(Collective::all_reduce, 8) * 14e9 == gptest::approx(24.5e9));
}

TEST_CASE("textbook T13 - that all-reduce takes about 0.1 s on A100 NVLink3 at 230 GB/s busbw") {
  // Stated assumptions: 300 GB/s per direction per GPU, bus bandwidth ≈ 230 GB/s measured, no latency.
  const CommGroup g = one_tier(8, 300.0, 230.0 / 300.0);
  const double t = seconds(Collective::all_reduce, 14_GB, g, CollectiveAlgorithm::ring);
  CHECK(t == gptest::approx(24.5 / 230.0).epsilon(1e-12));
  CHECK(t == gptest::approx(0.1).epsilon(0.1));  // "≈0.1 s": one significant digit
}

TEST_CASE("textbook T14 - across nodes with one HDR 200 Gb/s NIC per GPU it takes about 1.0 s") {
  // Stated assumptions: every ring hop goes over the GPU's own 25 GB/s NIC (one GPU per node), no latency, η = 1.
  CommGroup g;
  g.size = 8;
  g.scale_up_size = 1;
  g.scale_up = tier(300.0, 1.0);
  g.scale_out = tier(units::to_GBps(200_Gbps), 1.0);
  const auto c = model::collective_cost(Collective::all_reduce, 14_GB, g);
  CHECK(c.algorithm == CollectiveAlgorithm::ring);
  CHECK(c.time.raw() == gptest::approx(24.5 / 25.0).epsilon(1e-12));
  CHECK(c.time.raw() == gptest::approx(1.0).epsilon(0.05));
}

// ================================ properties ================================

TEST_CASE("collective time does not rise as bandwidth rises") {
  for (auto op : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter, Collective::all_to_all,
                  Collective::send_recv, Collective::broadcast}) {
    for (auto algo : {CollectiveAlgorithm::automatic, CollectiveAlgorithm::ring, CollectiveAlgorithm::tree,
                      CollectiveAlgorithm::hierarchical}) {
      double prev = 1e300;
      for (double bw : {10.0, 25.0, 50.0, 100.0, 400.0, 900.0}) {
        CommGroup g;
        g.size = 32;
        g.scale_up_size = 8;
        g.scale_up = tier(bw * 9.0, 0.8, 3.4_us);
        g.scale_out = tier(bw, 0.96, 14_us);
        const double t = seconds(op, 64_MB, g, algo);
        CHECK(t <= prev);
        prev = t;
      }
    }
  }
}

TEST_CASE("collective time does not fall as the message grows") {
  const CommGroup inside = resolved("dgx-h100", 8);
  const CommGroup across = resolved("dgx-h100", 32);
  for (const CommGroup* g : {&inside, &across}) {
    for (auto op : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter, Collective::all_to_all,
                    Collective::send_recv, Collective::broadcast}) {
      double prev = 0.0;
      for (double b = 1024; b <= 64e9; b *= 4) {
        const double t = seconds(op, units::bytes(b), *g);
        CHECK(t >= prev);
        prev = t;
      }
    }
  }
}

TEST_CASE("hierarchical all-reduce beats a flat ring over the scale-out tier when scale-up is faster") {
  // Flat ring: every hop of a 32-GPU ring runs at the per-GPU NIC rate (one GPU per domain).
  const CommGroup h = resolved("dgx-h100", 32);
  REQUIRE(h.scale_up_size == 8);
  REQUIRE(h.scale_out.has_value());
  CommGroup flat = h;
  flat.scale_up_size = 1;
  for (double b : {1e6, 64e6, 1e9, 16e9}) {
    CAPTURE(b);
    const double th = seconds(Collective::all_reduce, units::bytes(b), h, CollectiveAlgorithm::hierarchical);
    const double tf = seconds(Collective::all_reduce, units::bytes(b), flat, CollectiveAlgorithm::ring);
    CHECK(th <= tf);
    for (auto op : {Collective::all_gather, Collective::reduce_scatter}) {
      CHECK(seconds(op, units::bytes(b), h, CollectiveAlgorithm::hierarchical) <=
            seconds(op, units::bytes(b), flat, CollectiveAlgorithm::ring));
    }
  }
}

TEST_CASE("automatic picks the fastest valid algorithm and an invalid request falls back") {
  const CommGroup g = resolved("dgx-a100", 8);  // NVSwitch gen2: no NVLS
  const auto c = model::collective_cost(Collective::all_reduce, 1_GB, g, CollectiveAlgorithm::nvls);
  CHECK(c.algorithm == CollectiveAlgorithm::ring);
  CHECK(c.derivation.notes[0].find("nvls requested but the scale-up fabric has no in-network reduction") == 0);
  const CommGroup big = resolved("dgx-h100", 64);
  for (double b : {4e3, 1e6, 1e9}) {
    const double t = seconds(Collective::all_reduce, units::bytes(b), big);
    for (auto a : {CollectiveAlgorithm::ring, CollectiveAlgorithm::tree, CollectiveAlgorithm::hierarchical})
      CHECK(t <= seconds(Collective::all_reduce, units::bytes(b), big, a));
  }
  // Latency-bound across 8 nodes: the tree's log2(d) network steps beat the ring's 2(d−1).
  CHECK(model::collective_cost(Collective::all_reduce, 4_KB, big).algorithm == CollectiveAlgorithm::tree);
}

TEST_CASE("a group that spans domains on a node without scale-out is infeasible and not a crash") {
  const CommGroup g = resolved("mi300x-8", 16);
  CHECK(!g.scale_out.has_value());
  const auto c = model::collective_cost(Collective::all_reduce, 1_GB, g);
  CHECK(std::isinf(c.time.raw()));
  CHECK(c.derivation.notes[0].find("no scale-out link") != std::string::npos);
}

TEST_CASE("hierarchical all-reduce is reduce-scatter inside then all-reduce of 1/s across then all-gather inside") {
  CommGroup g;
  g.size = 32;
  g.scale_up_size = 8;
  g.scale_up = tier(400.0, 1.0);
  g.scale_out = tier(50.0, 1.0);
  const double S = 8e9;
  const double expected = 2 * (S * 7.0 / 8.0 / 400e9) + (S / 8.0) * 2.0 * 3.0 / 4.0 / 50e9;
  const auto c = model::collective_cost(Collective::all_reduce, units::bytes(S), g, CollectiveAlgorithm::hierarchical);
  CHECK(c.time.raw() == gptest::approx(expected).epsilon(1e-12));
  REQUIRE(c.derivation.children.size() == 3);
  CHECK(c.derivation.children[1].id == "collective.hier.all_reduce_out");
  // All-gather: across domains on S/s first, then inside on S.
  const double ag = seconds(Collective::all_gather, units::bytes(S), g, CollectiveAlgorithm::hierarchical);
  CHECK(ag == gptest::approx((S / 8.0) * 3.0 / 4.0 / 50e9 + S * 7.0 / 8.0 / 400e9).epsilon(1e-12));
}

TEST_CASE("automatic runs all-gather and reduce-scatter across domains as NCCL does: a ring, never the two-level form") {
  // NCCL's tuner offers all-gather and reduce-scatter the ring only (src/graph/tuning.cc @v2.9.9-1: `if (coll !=
  // ncclFuncAllReduce && a != NCCL_ALGO_RING) continue;`; today's PAT needs one GPU per node, NVLS / CollNet Direct
  // a SHARP plugin across nodes). 64 GPUs in 8 domains of 8, 1 MB: latency-bound, where the two-level form would win.
  CommGroup g;
  g.size = 64;
  g.scale_up_size = 8;
  g.scale_up = tier(400.0, 1.0, 3.0_us);
  g.scale_out = tier(50.0, 1.0, 10.0_us);
  const double S = 1e6;
  // Ring: (n − d)·α_up + (d − 1)·α_out = 56·3 + 7·10 = 238 µs; S·63/64 over min(400, 8 × 50) GB/s = 2.4609 µs.
  const double ring_s = 238e-6 + S * 63.0 / 64.0 / 400e9;
  // Two-level: 7·10 µs + (S/8)·7/8 / 50 GB/s across, then 7·3 µs + S·7/8 / 400 GB/s inside = 95.375 µs.
  const double hier_s = 70e-6 + (S / 8.0) * 7.0 / 8.0 / 50e9 + 21e-6 + S * 7.0 / 8.0 / 400e9;
  CHECK(hier_s == gptest::approx(95.375e-6).epsilon(1e-12));
  for (auto op : {Collective::all_gather, Collective::reduce_scatter}) {
    CAPTURE(static_cast<int>(op));
    const auto c = model::collective_cost(op, units::bytes(S), g);
    CHECK(c.algorithm == CollectiveAlgorithm::ring);
    CHECK(c.time.raw() == gptest::approx(ring_s).epsilon(1e-12));
    CHECK(c.derivation.notes[0].find("hierarchical 95.4 µs, on request only") != std::string::npos);
    // Asked for by name it is still priced (a framework-level two-step scheme).
    const auto h = model::collective_cost(op, units::bytes(S), g, CollectiveAlgorithm::hierarchical);
    CHECK(h.algorithm == CollectiveAlgorithm::hierarchical);
    CHECK(h.time.raw() == gptest::approx(hier_s).epsilon(1e-12));
  }
  // All-reduce keeps its two-level form in the competition.
  CHECK(seconds(Collective::all_reduce, units::bytes(S), g) <=
        seconds(Collective::all_reduce, units::bytes(S), g, CollectiveAlgorithm::hierarchical));
}

TEST_CASE("all-to-all across domains is set by the slower tier") {
  const CommGroup g = resolved("dgx-h100", 16);  // 8 per node, 2 nodes
  const double S = 1e9;
  const double t = seconds(Collective::all_to_all, units::bytes(S), g);
  const double up = S * 7.0 / 16.0 / (450e9 * 0.81), out = S * 8.0 / 16.0 / (50e9 * 0.96);
  CHECK(t == gptest::approx(8.4e-6 + 14e-6 + std::max(up, out)).epsilon(1e-9));
}

TEST_CASE("all-to-all and send/recv run at NCCL's p2p efficiency with the p2p pipeline fill") {
  // NCCL's all-to-all is grouped send/recv: its own channels and chunks, not the ring's (topology.cpp). On NVLink 4:
  // η_p2p 0.659 (measured) and a fill of 16 MiB per rank (32 p2p channels × 512 KiB); (n−1)/n of both cross the link.
  const CommGroup g = resolved("dgx-h100", 2);
  CHECK(g.scale_up.p2p_efficiency == gptest::approx(0.659));
  CHECK(g.scale_up.p2p_fill.raw() == gptest::approx(16.0 * 1048576.0));
  CHECK(g.scale_up.bus_efficiency == gptest::approx(0.81));  // the ring's η is untouched
  const double bw = 450e9 * 0.659, F = 16.0 * 1048576.0;
  for (const double S : {1048576.0, 8388608.0, 67108864.0, 1073741824.0})
    CHECK(seconds(Collective::all_to_all, units::bytes(S), g) ==
          gptest::approx(8.4e-6 + 3.4e-6 + (S + std::min(S, F)) * 0.5 / bw).epsilon(1e-12));
  // send/recv in a 2-rank communicator: the peer has half the p2p channels, so its fill is min(S, F/2).
  for (const double S : {1048576.0, 67108864.0})
    CHECK(seconds(Collective::send_recv, units::bytes(S), g) ==
          gptest::approx(8.4e-6 + 3.4e-6 + (S + std::min(S, F / 2)) / bw).epsilon(1e-12));
  // A tier built by hand has no p2p figures: the ring's η stands in and no fill is added (the old α–β form).
  const CommGroup plain = one_tier(4, 400.0, 0.80);
  CHECK(seconds(Collective::all_to_all, units::bytes(1e9), plain) == gptest::approx(1e9 * 0.75 / (0.80 * 400e9)));
  const auto d = model::collective_cost(Collective::all_to_all, 64_MiB, g, CollectiveAlgorithm::automatic, Explain::on);
  CHECK(d.derivation.formula == "t = t₀ + α + [S + min(S, F)]·(n−1)/n / (BW·η_p2p)");
  bool eta = false, fill = false;
  for (const auto& in : d.derivation.inputs) {
    if (in.symbol == "η_p2p") eta = in.value == "0.659" && in.origin.ref.find("moe_alltoall.json") != std::string::npos;
    if (in.symbol == "F") fill = in.origin.ref.find("512 KiB") != std::string::npos;
  }
  CHECK(eta);
  CHECK(fill);
}

TEST_CASE("p2p efficiency: measured on NVLink 4, NVLink 4's p2p/ring ratio elsewhere, the NIC's on the network") {
  const double ratio = 0.659 / 0.81;
  CHECK(resolved("dgx-a100", 8).scale_up.p2p_efficiency == gptest::approx(0.78 * ratio));
  CHECK(resolved("gb200-nvl72", 8).scale_up.p2p_efficiency == gptest::approx(0.76 * ratio));
  CHECK(resolved("mi300x-8", 8).scale_up.p2p_efficiency == gptest::approx(0.70 * ratio));
  CHECK(resolved("mi300x-8", 8).scale_up.p2p_fill.raw() == 0.0);  // xGMI: no fill modelled
  CHECK(resolved("dgx-a100", 8).scale_up.p2p_origin.find("assumption") != std::string::npos);
  const CommGroup dp = resolved("dgx-h100", 16, 8);
  REQUIRE(dp.scale_out.has_value());
  CHECK(dp.scale_out->p2p_efficiency == gptest::approx(dp.scale_out->bus_efficiency));
  CHECK(dp.scale_out->p2p_fill.raw() == 0.0);
  // Across domains a send/recv is priced as before: the NIC's η, no fill.
  const double S = 1e8;
  CHECK(seconds(Collective::send_recv, units::bytes(S), resolved("dgx-h100", 2, 8)) ==
        gptest::approx(8.4e-6 + 14e-6 + S / (50e9 * 0.96)).epsilon(1e-12));
}

TEST_CASE("C-a2a-H100-EP2 - NCCL all-to-all between two H100s, measured, out of the eta_p2p fit") {
  // data/validation/measured/h100-sxm5-80gb/moe_alltoall_try3.json (torch all_to_all_single, NCCL 2.28.9, a repeat
  // run after the fit set): GPU-side µs per call, CUDA graph up to 64 MiB, back-to-back above; and the token-shaped
  // dispatch of 16384 tokens × 7168 × top-8 (1.75 GiB per rank) of the same run. η_p2p was fitted on moe_alltoall.json.
  const CommGroup g = resolved("dgx-h100", 2);
  const struct {
    double bytes, us;
  } pts[] = {{4194304.0, 24.5}, {16777216.0, 60.9}, {67108864.0, 147.8}, {268435456.0, 509.8}, {536870912.0, 983.7},
             {1879048192.0, 2986.2}};
  for (const auto& p : pts) {
    const double t = seconds(Collective::all_to_all, units::bytes(p.bytes), g) * 1e6;
    MESSAGE(fmt::format("all-to-all {:.0f} MiB: model {:.1f} µs, measured {:.1f} µs", p.bytes / 1048576.0, t, p.us));
    CHECK(t == gptest::approx(p.us).epsilon(0.15));
  }
}

TEST_CASE("C-a2a-B300-nccl-tests - NCCL all-to-all on 2, 4 and 8 B300s, published, against the NVLink 5 p2p law") {
  // data/validation/published_alltoall.json sweeps: uccl-project/uccl@01aaa38e experimental/ukernel/docs/
  // b300_native_nccl_measurements.md, NCCL 2.29.7 nccl-tests alltoall_perf on B300 SXM6 (NVLink 5), 1-256 MiB per rank,
  // and our own H100 sweeps. NVLink 5's η_p2p 0.618 is carried from NVLink 4 (topology.cpp), not fitted on these.
  std::ifstream in(std::string(GPUPLAN_TEST_DATA_DIR) + "/validation/published_alltoall.json");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const auto j = nlohmann::json::parse(ss.str());
  std::string table = "all-to-all, published sweeps against the model\n  GPU   n      bytes   measured      model   error\n";
  int asserted = 0;
  for (const auto& sw : j.at("sweeps")) {
    if (sw.at("source") != "UCCL-B300-NCCL") continue;
    const int n = sw.at("ranks").get<int>();
    const CommGroup g = resolved(sw.at("node").get<std::string>(), n);
    REQUIRE(g.domains() == 1);
    for (const auto& p : sw.at("points")) {
      const double bytes = p.at("bytes").get<double>(), meas_us = bytes / (p.at("algbw_GBps").get<double>() * 1e3);
      const double t = seconds(Collective::all_to_all, units::bytes(bytes), g) * 1e6;
      table += fmt::format("  B300 {} {:>10.0f} {:>8.1f}us {:>8.1f}us {:>+6.1f}%\n", n, bytes, meas_us, t,
                           (t / meas_us - 1) * 100);
      CAPTURE(n);
      CAPTURE(bytes);
      if (n >= 4 && bytes >= 8.0 * 1048576) {
        // 4 and 8 ranks from 8 MiB: within 20% (8 ranks: the model 2-18% slow; 4 ranks -6 … +13%).
        CHECK(t == gptest::approx(meas_us).epsilon(0.20));
        ++asserted;
      } else if (n == 2 && bytes >= 64.0 * 1048576) {
        // Documented miss: at 2 ranks the measured time is the 8-rank time (a per-rank ceiling of NCCL's p2p
        // channels, ~700 GB/s of the rank's whole buffer), so the link law is 1.5x fast; not modelled.
        CHECK(t < 0.75 * meas_us);
      }
    }
  }
  MESSAGE(table);
  CHECK(asserted == 12);
  // The Blackwell MoE family's error follows the exposed all-to-all as if η_p2p were ~0.43 (ANALYSIS.md, session 31):
  // at 8 ranks and 128 MiB (Qwen3-30B-A3B's dispatch at 4096 tokens) that η would take 1.4x the measured time.
  const double meas_128 = 134217728.0 / (564.9 * 1e3);
  CommGroup slow = resolved("hgx-b300", 8);
  slow.scale_up.p2p_efficiency = 0.43;
  CHECK(seconds(Collective::all_to_all, units::bytes(134217728.0), slow) * 1e6 > 1.4 * meas_128);
  CHECK(seconds(Collective::all_to_all, units::bytes(134217728.0), resolved("hgx-b300", 8)) * 1e6 > meas_128);
}

// ================================ resolve_group on the shipped data ================================

TEST_CASE("resolve_group maps tensor- and data-parallel groups onto NVLink and the NICs") {
  const CommGroup tp = resolved("dgx-h100", 8, 1);
  CHECK(tp.scale_up_size == 8);
  CHECK(tp.domains() == 1);
  CHECK(units::to_GBps(tp.scale_up.uni_per_gpu) == gptest::approx(450));
  CHECK(tp.scale_up.bus_efficiency == gptest::approx(0.81));
  CHECK(tp.scale_up.latency.raw() == gptest::approx(3.4e-6));
  CHECK(tp.scale_up.in_network_reduction);
  CHECK(tp.scale_up.in_network_gain == gptest::approx(473.1 / 365.6));
  const CommGroup dp = resolved("dgx-h100", 16, 8);  // one GPU per node
  CHECK(dp.scale_up_size == 1);
  CHECK(dp.domains() == 16);
  REQUIRE(dp.scale_out.has_value());
  CHECK(units::to_GBps(dp.scale_out->uni_per_gpu) == gptest::approx(50));
  CHECK(dp.scale_out->bus_efficiency == gptest::approx(0.96));
  CHECK(dp.scale_out->latency.raw() == gptest::approx(14e-6));
  CHECK(dp.scale_out->origin.find("non-blocking (assumption") != std::string::npos);
  const CommGroup strided = resolved("dgx-h100", 8, 2);  // 4 per node
  CHECK(strided.scale_up_size == 4);
  CHECK(strided.domains() == 2);
  CHECK(resolved("dgx-h100", 4, 3).scale_up_size == 1);  // 3 does not divide 8
  CHECK(resolved("dgx-h100", 12, 1).scale_up_size == 6);  // 8 per domain does not divide 12: largest divisor
  CHECK(resolved("gb200-nvl72", 32, 4).scale_up_size == 16);  // 18 slots per rack at stride 4
  // GB200 NVL72: 4 GPUs per tray but one 72-GPU NVLink domain; one 400 Gb/s NIC per GPU.
  const CommGroup nvl = resolved("gb200-nvl72", 64);
  CHECK(nvl.scale_up_size == 64);
  CHECK(units::to_GBps(nvl.scale_up.uni_per_gpu) == gptest::approx(900));
  CHECK(nvl.scale_up.bus_efficiency == gptest::approx(0.76));
  REQUIRE(nvl.scale_out.has_value());
  CHECK(units::to_GBps(nvl.scale_out->uni_per_gpu) == gptest::approx(50));
  // HDR link file gives a 0.6 µs wire latency: the NCCL step (14 µs) includes it.
  CHECK(resolved("dgx-a100", 16, 8).scale_out->latency.raw() == gptest::approx(14e-6));
  CHECK(resolved("dgx-a100", 8).scale_up.bus_efficiency == gptest::approx(0.78));
  CHECK_FALSE(resolved("dgx-a100", 8).scale_up.in_network_reduction);
}

TEST_CASE("resolve_group divides the scale-out rate by the cluster's oversubscription") {
  hw::ClusterSpec cl;
  cl.info.id = "test";
  cl.node = "dgx-h100";
  cl.nodes = 4;
  cl.fabric.oversubscription = 2.0;
  const CommGroup g = model::resolve_group(32, 1, node("dgx-h100"), db(), cl);
  REQUIRE(g.scale_out.has_value());
  CHECK(units::to_GBps(g.scale_out->uni_per_gpu) == gptest::approx(25));
  CHECK(g.scale_out->origin.find("oversubscription 2") != std::string::npos);
}

TEST_CASE("xGMI is a full mesh - a pair of MI300X gets one link of the seven") {
  const CommGroup pair = resolved("mi300x-8", 2);
  CHECK(units::to_GBps(pair.scale_up.uni_per_gpu) == gptest::approx(64));
  CHECK(units::to_GBps(resolved("mi300x-8", 8).scale_up.uni_per_gpu) == gptest::approx(448));
  CHECK(pair.scale_up.bus_efficiency == gptest::approx(0.70));
}

TEST_CASE("describe gives a tier in one line") {
  CHECK(model::describe(resolved("dgx-h100", 8).scale_up) ==
        "NVLink 4 (Hopper) via NVSwitch gen3 (HGX/DGX H100/H200): 450 GB/s per GPU per direction, α 3.4 µs, η 81%, "
        "in-network reduction ×1.29");
}

// ================================ reference cases: shared/validation/dev_cases.json group "C" ================================
// Not covered: A-megatron-sc21-1T-bisection-bw (group C) reports the effective bisection bandwidth observed during a
// 3072-GPU training run, not one collective of known size and group, so it belongs to the training model's tests.
// What the model is expected to get right, by message size S (all-reduce on one 8-GPU node):
//  - S ≥ 256 MiB, bandwidth-bound: busbw = BW·η (× g with NVLS) from the measured per-generation tables, within 15%.
//  - 2-128 MiB: NCCL pipelines chunks over its channels and switches protocol (LL → LL128 → Simple, then NVLS); the
//    measured time carries a ramp of some 40-70 µs that one α per step does not capture, so the model is faster
//    there, by up to about 55%.
//  - S ≤ 1 MiB, latency-bound: the measured floor depends on the NCCL version and the timer (8×H200: 18 µs with
//    nccl-tests on NCCL 2.30, 40 µs with the torch bench; Azure 8×H100 on NCCL 2.18: 26-43 µs; 8×A100: 44 µs). The
//    model's floor is NCCL's own constants: NVLS 23 µs, or a ring t₀ + 2(n−1)·α = 8.4 + 14·3.4 = 56 µs. Within 2×.

TEST_CASE("C-allreduce-8xH200-nccltests-vs-torch - 8xH200 all-reduce sweep with nccl-tests and torch timers") {
  // stas00/ml-engineering@744d01e network/benchmarks/README.md 'How the calls are timed' (NCCL 2.30.7).
  const CommGroup g = resolved("dgx-h200", 8);
  check_sweep("8xH200 nccl-tests", Collective::all_reduce, g,
              from_busbw(Collective::all_reduce, 8, kSweep32K16G,
                         {3.2, 6.26, 12.4, 24.63, 48.3, 72.45, 91.48, 139.97, 182.03, 242.45, 298.44, 369.82, 411.21,
                          442.27, 455.82, 464.0, 468.31, 473.1, 475.16, 480.7}),
              {});
  check_sweep("8xH200 torch all_reduce_bench", Collective::all_reduce, g,
              from_busbw(Collective::all_reduce, 8, kSweep32K16G,
                         {3.15, 6.16, 12.46, 24.68, 48.15, 74.57, 96.26, 145.14, 196.56, 255.9, 301.25, 368.86,
                          414.54, 441.87, 456.23, 465.91, 471.06, 474.13, 478.24, 482.25}),
              {});
}

TEST_CASE("C-allreduce-8xH200-torch-sweep - 8xH200 all-reduce sweep with the torch benchmark") {
  // stas00/ml-engineering@744d01e network/benchmarks/results/all-reduce-8xH200.md (NCCL 2.27.7; Ring/LL ≤ 1 MiB,
  // NVLS/Simple ≥ 2 MiB). This run's torch timer adds about 20 µs per call at small sizes (40 µs vs 18 µs above).
  check_sweep("8xH200 torch (older run)", Collective::all_reduce, resolved("dgx-h200", 8),
              from_busbw(Collective::all_reduce, 8, kSweep32K16G,
                         {1.44, 2.93, 5.73, 11.74, 23.94, 39.93, 64.53, 107.16, 155.53, 219.89, 275.84, 346.51, 401.93,
                          436.15, 450.29, 463.58, 469.17, 473.1, 477.45, 482.26}),
              {});
}

TEST_CASE("C-allreduce-8xA100-nccltests-sweep - 8xA100 all-reduce times") {
  // stas00/ml-engineering@744d01e network/README.md 'Real network throughput' (nccl-tests -b 32k -e 16G -g 8).
  std::vector<Point> pts;
  const std::vector<double> t_us = {43.83, 46.8,   51.76,  61.38,  80.4,   101.9, 101.4, 101.5, 133.5, 276.6,
                                    424.0, 684.6, 1327.6, 2420.6, 4218.4, 8203.9, 16240, 32136, 64074, 127997};
  for (std::size_t i = 0; i < t_us.size(); ++i) pts.push_back({kSweep32K16G[i], t_us[i]});
  check_sweep("8xA100 nccl-tests", Collective::all_reduce, resolved("dgx-a100", 8), pts, {});
}

TEST_CASE("C-azure-allreduce-curve-A100 and H100 - Azure ND A100 v4 and ND H100 v5 all-reduce sweeps") {
  // Azure/AI-benchmarking-guide@3bb66ca Azure_Results/ND_A100_v4_results.md and the ND_H100_v5 results (NCCL 2.18.5,
  // nccl-tests, in-place). Sizes are the source's power-of-two labels 1K..8G.
  check_sweep("Azure 8xA100", Collective::all_reduce, resolved("dgx-a100", 8),
              from_busbw(Collective::all_reduce, 8, kSweep1K8G,
                         {0.04,  0.08,   0.17,   0.33,   0.67,   1.37,   2.7,    5.15,  10.11, 19.24, 36.22, 53.54,
                          71.43, 89.99, 109.22, 132.77, 166.63, 174.18, 213.87, 221.58, 228.1, 230.22, 230.48, 231.58}),
              {});
  check_sweep("Azure 8xH100", Collective::all_reduce, resolved("dgx-h100", 8),
              from_busbw(Collective::all_reduce, 8, kSweep1K8G,
                         {0.07,   0.14,   0.27,   0.53,   0.95,   1.71,   2.72,   5.4,    10.86,  21.35,  43.7,  81.93,
                          128.73, 172.13, 234.45, 295.53, 361.78, 400.61, 423.38, 438.46, 466.35, 472.36, 475.54, 478.87}),
              {});
}

TEST_CASE("C-allreduce-H200-gpucount-nvls-ramp - NVLS gain grows with the GPU count on 8xH200") {
  // stas00/ml-engineering@744d01e network/README.md SHARP section, nccl-tests, 8 GiB. The 8-GPU values define η and
  // g (in-sample); 4-7 GPUs test the f(n) = 2(n−1)/(n+1) scaling of the gain and that NCCL keeps the ring at 4.
  const double S = 8589934592.0;
  const std::vector<double> dflt = {363.3, 414.2, 435.6, 460.0, 473.1}, ring = {363.3, 364.4, 365.1, 365.7, 365.6};
  for (int n = 4; n <= 8; ++n) {
    CAPTURE(n);
    const CommGroup g = resolved("dgx-h200", n);
    const auto i = std::size_t(n - 4);
    const double auto_bw = busbw_GBps(Collective::all_reduce, units::bytes(S), g);
    const double ring_bw = busbw_GBps(Collective::all_reduce, units::bytes(S), g, CollectiveAlgorithm::ring);
    MESSAGE(fmt::format("H200 n={} default {:.1f} vs {:.1f} ({:+.1f}%), ring {:.1f} vs {:.1f} ({:+.1f}%)", n, auto_bw,
                        dflt[i], (auto_bw / dflt[i] - 1) * 100, ring_bw, ring[i], (ring_bw / ring[i] - 1) * 100));
    CHECK(auto_bw == gptest::approx(dflt[i]).epsilon(0.05));
    CHECK(ring_bw == gptest::approx(ring[i]).epsilon(0.05));
  }
  CHECK(model::collective_cost(Collective::all_reduce, units::bytes(S), resolved("dgx-h200", 4)).algorithm ==
        CollectiveAlgorithm::ring);
}

TEST_CASE("C-allreduce-B200-gpucount-nvls-ramp - NVLS gain grows with the GPU count on 8xB200") {
  // stas00/ml-engineering@744d01e network/README.md SHARP section (AWS p6-b200, NCCL 2.27.7, nccl-tests, 8 GiB).
  // NCCL switches to NVLS only above 5 GPUs here; the model already takes it at 5 (+6%).
  const double S = 8589934592.0;
  const std::vector<double> dflt = {673.2, 677.8, 778.2, 811.2, 838.0}, ring = {673.8, 677.8, 677.8, 680.5, 682.2};
  for (int n = 4; n <= 8; ++n) {
    CAPTURE(n);
    const CommGroup g = resolved("dgx-b200", n);
    const auto i = std::size_t(n - 4);
    const double auto_bw = busbw_GBps(Collective::all_reduce, units::bytes(S), g);
    const double ring_bw = busbw_GBps(Collective::all_reduce, units::bytes(S), g, CollectiveAlgorithm::ring);
    MESSAGE(fmt::format("B200 n={} default {:.1f} vs {:.1f} ({:+.1f}%), ring {:.1f} vs {:.1f} ({:+.1f}%)", n, auto_bw,
                        dflt[i], (auto_bw / dflt[i] - 1) * 100, ring_bw, ring[i], (ring_bw / ring[i] - 1) * 100));
    CHECK(auto_bw == gptest::approx(dflt[i]).epsilon(0.10));
    CHECK(ring_bw == gptest::approx(ring[i]).epsilon(0.05));
  }
}

TEST_CASE("C-H200-collectives-16GiB - all-reduce NVLS and ring with all-gather and reduce-scatter on 8xH200") {
  // stas00/ml-engineering@744d01e network/README.md SHARP section table (nccl-tests -g 8 -z 1, 16 GiB).
  const CommGroup g = resolved("dgx-h200", 8);
  const auto S = units::bytes(17179869184.0);
  const double nv = busbw_GBps(Collective::all_reduce, S, g, CollectiveAlgorithm::nvls);
  const double rg = busbw_GBps(Collective::all_reduce, S, g, CollectiveAlgorithm::ring);
  const double ag = busbw_GBps(Collective::all_gather, S, g);
  const double rs = busbw_GBps(Collective::reduce_scatter, S, g);
  MESSAGE(fmt::format("16 GiB: AR nvls {:.1f}/480 ring {:.1f}/367.2 AG {:.1f}/361.4 RS {:.1f}/362.9", nv, rg, ag, rs));
  CHECK(nv == gptest::approx(480.0).epsilon(0.05));
  CHECK(rg == gptest::approx(367.2).epsilon(0.05));
  CHECK(ag == gptest::approx(361.4).epsilon(0.05));
  CHECK(rs == gptest::approx(362.9).epsilon(0.05));
}

TEST_CASE("C-allreduce-B200-1node-vs-4node-EFA - 8 and 32 B200 all-reduce sweeps") {
  // stas00/ml-engineering@744d01e network/README.md 'Inter-node speed depends on intra-node speed' (AWS P6-B200,
  // 8 × 400 Gb/s EFA per node, NCCL 2.27.7, torch all_reduce_bench). DGX B200 (8 × 400 Gb/s NDR) stands in for the
  // P6 node: same per-GPU rate, but EFA is not InfiniBand.
  // 1 node: this run reaches the 838 GB/s NVLS plateau only at 8 GiB (1-4 GiB: 723-741 GB/s), so the model, which
  // uses the nccl-tests plateau, is up to ~20% fast from 256 MiB to 4 GiB. This torch timer synchronises every call:
  // its floor is 47-53 µs where nccl-tests on NCCL 2.27-2.30 measure 18 µs on 8×H200 (the same timer gave 40 µs
  // there, C-allreduce-8xH200-torch-sweep), i.e. ~25 µs of host launch + sync that a collective queued on a stream
  // in training does not pay. The model (NVLS 23 µs) is therefore ~2.1× fast below 1 MiB, and up to 3× at 4-8 MiB
  // where the host overhead adds to the NVLS ramp.
  Bands one_node;
  one_node.large_tol = 0.25;
  one_node.small_factor = 2.5;
  one_node.mid_under = 0.70;
  check_sweep("8xB200 torch", Collective::all_reduce, resolved("dgx-b200", 8),
              from_busbw(Collective::all_reduce, 8, kSweep32K16G,
                         {1.2, 2.17, 4.86, 9.54, 18.71, 36.06, 63.09, 76.48, 126.49, 254.96, 325.97, 400.6, 568.38,
                          646.11, 688.99, 723.34, 734.97, 740.64, 839.07, 845.67}),
              one_node);
  // 4 nodes: large messages are NIC-bound (ring over 8 NICs per node: 8 × 50 × 0.96 = 384 GB/s busbw). Small ones
  // take 360-390 µs over EFA with this timer (0.5 ms-6 ms below 256 KiB: warm-up outliers); NCCL's network
  // constants give a tree at 8.4 + 2·(7·3.4 + 2·14) = 112 µs, so below 512 MiB the model is 1.5-3.3× fast: not
  // asserted (EFA's SRD transport is not the IB the constants describe, and the timer adds ~25 µs, see above).
  const CommGroup g4 = resolved("dgx-b200", 32);
  const std::vector<double> bb4 = {0.01,  0.04,  0.45,   1.33,   2.84,   5.37,   10.38,  18.9,   35.12,  64.43,
                                   91.19, 156.74, 197.94, 229.09, 326.9, 361.99, 372.42, 377.34, 380.39, 381.8};
  const auto pts = from_busbw(Collective::all_reduce, 32, kSweep32K16G, bb4);
  std::string table = "4x8 B200 EFA torch\n      bytes   measured      model   error\n";
  for (const auto& p : pts) {
    const double t = seconds(Collective::all_reduce, units::bytes(p.bytes), g4) * 1e6;
    table += fmt::format("{:>11.0f} {:>8.1f}us {:>8.1f}us {:>+6.0f}%\n", p.bytes, p.time_us, t, (t / p.time_us - 1) * 100);
    CAPTURE(p.bytes);
    if (p.bytes >= 512.0 * 1024 * 1024) CHECK(t == gptest::approx(p.time_us).epsilon(0.15));
  }
  MESSAGE(table);
}

TEST_CASE("C-allreduce-4x8H200-EFA-32rank-4GiB - 32 H200 ring all-reduce is NVLink-bound") {
  // stas00/ml-engineering@744d01e network/README.md footnote (AWS p5en, 16 × 200 Gb/s EFA per node = 400 GB/s, the
  // DGX H200's 8 × 400 Gb/s NDR stands in). busbw 364.87 (ring), 364.65 (forced ring).
  const CommGroup g = resolved("dgx-h200", 32);
  const auto S = units::bytes(4294967296.0);
  const auto c = model::collective_cost(Collective::all_reduce, S, g);
  const double bw = units::to_GBps(c.busbw);
  MESSAGE(fmt::format("4x8 H200 4 GiB: {:.1f} vs 364.87 ({:+.1f}%), algorithm {}", bw, (bw / 364.87 - 1) * 100,
                      int(c.algorithm)));
  CHECK(bw == gptest::approx(364.87).epsilon(0.10));
  CHECK(busbw_GBps(Collective::all_reduce, S, g, CollectiveAlgorithm::ring) == gptest::approx(364.65).epsilon(0.10));
}

TEST_CASE("C-allreduce-MI300X-2vs8 - a pair of MI300X gets one xGMI link") {
  // stas00/ml-engineering@744d01e network/README.md (all_reduce_bench.py, 4 GiB). The 8-GPU value defines η = 0.70
  // (in-sample); the pair tests the fully-connected (m−1)/(D−1) scaling.
  const auto S = units::bytes(4294967296.0);
  const double two = busbw_GBps(Collective::all_reduce, S, resolved("mi300x-8", 2));
  const double eight = busbw_GBps(Collective::all_reduce, S, resolved("mi300x-8", 8));
  MESSAGE(fmt::format("MI300X 4 GiB: 2 GPUs {:.1f}/47.67, 8 GPUs {:.1f}/312.9", two, eight));
  CHECK(two == gptest::approx(47.671).epsilon(0.10));
  CHECK(eight == gptest::approx(312.912).epsilon(0.05));
}

TEST_CASE("C-p2p-H100-send-recv - NCCL send/recv between two H100s, measured") {
  // data/validation/measured/h100-sxm5-80gb/heldout-collectives-2gpu-p2p-native-2026-11-26.json (gpuplan-bench
  // collectives, NCCL 2.28.9; every rank sends to the next and receives from the previous at once), out of the η_p2p
  // fit. Up to 256 MiB NCCL runs a peer on 16 channels; above it doubles them (a channel's part > 32 chunks) and
  // reaches 341-362 GB/s, which η_p2p does not follow: the model is pessimistic there (documented).
  const CommGroup g = resolved("dgx-h100", 2);
  const struct {
    double bytes, us;
  } pts[] = {{33554432.0, 147.90}, {67108864.0, 253.84}, {134217728.0, 477.43}, {268435456.0, 901.62}};
  for (const auto& p : pts) {
    const double t = seconds(Collective::send_recv, units::bytes(p.bytes), g) * 1e6;
    MESSAGE(fmt::format("send/recv {:.0f} MiB: model {:.1f} µs, measured {:.1f} µs", p.bytes / 1048576.0, t, p.us));
    CHECK(t == gptest::approx(p.us).epsilon(0.10));
  }
  const double big = seconds(Collective::send_recv, units::bytes(1073741824.0), g) * 1e6;
  CHECK(big > 2996.45);            // measured 1 GiB: 2996.45 µs on 32 channels
  CHECK(big < 2996.45 * 1.25);
  // The copy engine (CUDA samples p2pBandwidthLatencyTest, unidirectional writes; stas00/ml-engineering@744d01e
  // network/README.md: H100 pairs ~376 GB/s, GB200 ~748 GB/s) outruns NCCL's SM-driven p2p: the model stays below.
  CHECK(units::to_GBps(model::collective_cost(Collective::send_recv, 1_GB, g).busbw) < 376.0);
  CHECK(units::to_GBps(model::collective_cost(Collective::send_recv, 1_GB, resolved("gb200-nvl72", 2)).busbw) < 748.0);
}

TEST_CASE("GB200 NVL72 all-reduce over the whole 72-GPU NVLink domain") {
  // Not a dev case: coreweave/nccl-tests PR #43 (2025-02-20), nccl-tests all_reduce_perf on one full NVL72 rack,
  // out-of-place: 4 GiB 10094 µs (busbw 839.16 GB/s), 8 GiB 20299 µs (834.57). It checks the rack-wide domain of
  // 4-GPU trays and that the NVLS gain measured at 8 B200 is not extrapolated to 72 ranks.
  const CommGroup g = resolved("gb200-nvl72", 72);
  REQUIRE(g.domains() == 1);
  CHECK(seconds(Collective::all_reduce, units::bytes(4294967296.0), g) * 1e6 == gptest::approx(10094).epsilon(0.10));
  CHECK(seconds(Collective::all_reduce, units::bytes(8589934592.0), g) * 1e6 == gptest::approx(20299).epsilon(0.10));
}

TEST_CASE("a measured (op, group size) fit prices exactly that collective inside one domain") {
  // Calibration profiles carry one α–β fit per op and rank count of the collectives bench (data/calibration/*/
  // profile.json "links"); an all-gather on 2 GPUs runs at its own measured η, not the all-reduce's.
  CommGroup g = one_tier(2, 400.0, 0.80, units::microseconds(1.0));
  g.call_latency = units::microseconds(10.0);
  const CommGroup plain = g;
  const auto b = units::mebibytes(256);
  const double before = seconds(Collective::all_gather, b, g);
  g.scale_up_fits.push_back({"all_gather", 2, units::microseconds(0.0), units::microseconds(5.0), 0.40, {}});
  g.scale_up_fits.push_back({"all_reduce", 4, units::microseconds(0.0), units::microseconds(5.0), 0.40, {}});
  const double after = seconds(Collective::all_gather, b, g);
  // Ring all-gather on 2 GPUs: t₀ + 1 step of α + S·(n−1)/n / (η·B).
  CHECK(before == gptest::approx(10e-6 + 1e-6 + b.raw() * 0.5 / (0.80 * 400e9)));
  CHECK(after == gptest::approx(5e-6 + b.raw() * 0.5 / (0.40 * 400e9)));
  // Another op, or the same op on another group size, keeps the tier's numbers.
  CHECK(seconds(Collective::all_reduce, b, g) == seconds(Collective::all_reduce, b, plain));
  CHECK(seconds(Collective::reduce_scatter, b, g) == seconds(Collective::reduce_scatter, b, plain));
}
