// gpuplan-bench host logic: statistics, the refusal rule, sample planning, sweeps, NCCL bus-bandwidth factors and
// expected values, JSON output and atomic writes. No GPU needed.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "bench_host.hpp"

using namespace gpuplan::bench;

TEST_CASE("stats: median, percentiles, min, max") {
  const Stats s = compute_stats({5, 1, 4, 2, 3});
  CHECK(s.n == 5);
  CHECK(s.median == 3);
  CHECK(s.min == 1);
  CHECK(s.max == 5);
  CHECK(s.mean == 3);
  CHECK(s.p10 == doctest::Approx(1.4));
  CHECK(s.p90 == doctest::Approx(4.6));
  const Stats e = compute_stats({2, 4});
  CHECK(e.median == 3);
  CHECK(compute_stats({}).n == 0);
}

TEST_CASE("refusal rule: (max-min)/median over the threshold is refused with a clear message") {
  SpreadRule rule;  // 10 %, latency-bound under 20 us
  const Stats steady = compute_stats({1.00e-3, 1.01e-3, 1.02e-3, 0.99e-3, 1.00e-3});
  const Verdict ok = judge(steady, rule, steady.median);
  CHECK(ok.ok);
  CHECK(ok.kind == SpreadKind::MaxMin);
  CHECK(ok.spread == doctest::Approx(0.03));

  const Stats throttled = compute_stats({1.0e-3, 1.0e-3, 1.0e-3, 1.2e-3, 1.0e-3});
  const Verdict bad = judge(throttled, rule, throttled.median);
  CHECK_FALSE(bad.ok);
  CHECK(bad.spread == doctest::Approx(0.2));
  CHECK(bad.reason.find("20.0% > 10.0%") != std::string::npos);
  CHECK(bad.reason.find("refused") != std::string::npos);

  rule.threshold = 0.25;
  CHECK(judge(throttled, rule, throttled.median).ok);
}

TEST_CASE("refusal rule: latency-bound items use the robust (p90-p10)/median") {
  SpreadRule rule;
  // 20 samples of ~2 us with one late outlier: max-min would refuse, p90-p10 does not.
  std::vector<double> xs(19, 2.0e-6);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] += 1e-9 * static_cast<double>(i % 3);
  xs.push_back(5.0e-6);
  const Stats s = compute_stats(xs);
  const Verdict v = judge(s, rule, s.median);
  CHECK(v.kind == SpreadKind::P90P10);
  CHECK(v.ok);
  // The same samples, judged as a long (bandwidth-bound) item, are refused.
  CHECK_FALSE(judge(s, rule, 1.0).ok);
  // Too few samples are refused whatever their spread.
  CHECK_FALSE(judge(compute_stats({1, 1}), rule, 1.0).ok);
}

TEST_CASE("sample planning: batches reach the minimum sample time and sample counts stay in bounds") {
  const Plan tiny = plan_samples(2e-6, 2e-4, 0.03, 5, 25, 4096);
  CHECK(tiny.batch >= 100);
  CHECK(tiny.batch <= 101);  // ceil(2e-4 / 2e-6) in floating point
  CHECK(tiny.samples == 25);
  const Plan big = plan_samples(0.3, 2e-4, 0.03, 5, 25, 4096);
  CHECK(big.batch == 1);
  CHECK(big.samples == 5);
  const Plan mid = plan_samples(2e-3, 2e-4, 0.03, 5, 25, 4096);
  CHECK(mid.batch == 1);
  CHECK(mid.samples == 15);
  CHECK(plan_samples(0, 2e-4, 0.03, 5, 25, 64).batch == 64);
}

TEST_CASE("sweeps: the LLM shapes and token counts of the brief") {
  CHECK(llm_shapes().size() == 9);
  CHECK(llm_tokens().front() == 1);
  CHECK(llm_tokens().back() == 16384);
  CHECK(llm_tokens().size() == 14);
  bool lm_head = false;
  for (const auto& s : llm_shapes())
    if (std::string(s.name) == "lm_head") lm_head = s.k == 4096 && s.n == 128256;
  CHECK(lm_head);
  CHECK(square_sizes().front() == 256);
  CHECK(square_sizes().back() == 16384);
  const auto sizes = pow2_range(1024, 4ULL << 30);
  CHECK(sizes.size() == 23);
  CHECK(sizes.back() == (4ULL << 30));
  CHECK(gemm_flops(8192, 8192, 8192) == doctest::Approx(2.0 * 8192.0 * 8192.0 * 8192.0));
}

TEST_CASE("geometric_range: sizes per octave, offset between them, aligned") {
  // One per octave without offset is the powers of two.
  CHECK(geometric_range(1024, 4ULL << 30, 1, 0.0, 64) == pow2_range(1024, 4ULL << 30));
  // Four per octave: 1 KiB, 2^(1/4) KiB, ... the powers of two stay exact.
  const auto q = geometric_range(1024, 1ULL << 20, 4, 0.0, 64);
  CHECK(q.size() == 41);
  CHECK(q[0] == 1024);
  CHECK(q[1] == 1216);  // 1024·2^0.25 = 1217.7, down to a multiple of 64
  CHECK(q[4] == 2048);
  CHECK(q.back() == (1ULL << 20));
  // Offset 0.5 lands between them, in log size: 1024·2^(1/8) = 1116.7 -> 1088; none reaches the top power of two.
  const auto h = geometric_range(1024, 1ULL << 20, 4, 0.5, 64);
  CHECK(h.size() == 40);
  CHECK(h[0] == 1088);
  for (std::size_t i = 0; i < h.size(); ++i) {
    CHECK(h[i] % 64 == 0);
    CHECK(h[i] > q[i]);
    CHECK(h[i] < q[i + 1]);
  }
  // Rounding never repeats a size, and bad arguments give nothing.
  const auto dense = geometric_range(64, 4096, 16, 0.0, 64);
  for (std::size_t i = 1; i < dense.size(); ++i) CHECK(dense[i] > dense[i - 1]);
  CHECK(geometric_range(1024, 4096, 0, 0.0, 64).empty());
  CHECK(geometric_range(1024, 4096, 2, 1.0, 64).empty());
  CHECK(geometric_range(0, 4096, 2, 0.0, 64).empty());
}

TEST_CASE("rotation: input sets together exceed L2") {
  const std::uint64_t l2 = 50ULL << 20;
  CHECK(rotation_sets(1ULL << 20, l2) == 150);
  CHECK(rotation_sets(1ULL << 30, l2) == 1);
  CHECK(rotation_sets(64ULL << 20, l2) == 3);
  CHECK(static_cast<std::uint64_t>(rotation_sets(3ULL << 20, l2)) * (3ULL << 20) >= 3 * l2);
  CHECK(rotation_sets(16, l2, 3.0, 4096) == 4096);
}

TEST_CASE("collectives: nccl-tests bus-bandwidth factors") {
  CHECK(busbw_factor("all_reduce", 2) == doctest::Approx(1.0));
  CHECK(busbw_factor("all_reduce", 8) == doctest::Approx(1.75));
  CHECK(busbw_factor("all_gather", 4) == doctest::Approx(0.75));
  CHECK(busbw_factor("reduce_scatter", 8) == doctest::Approx(0.875));
  CHECK(busbw_factor("all_to_all", 2) == doctest::Approx(0.5));
  CHECK(busbw_factor("send_recv", 2) == doctest::Approx(1.0));
  CHECK_THROWS(busbw_factor("gossip", 2));
  CHECK(coll_op_from_name("reduce_scatter") == kReduceScatter);
  CHECK(coll_op_from_name("nope") == -1);
}

TEST_CASE("collectives: counts divide among ranks and bytes are the nccl-tests size") {
  const CollCounts ag = coll_counts("all_gather", 1000, 3, 4);  // 250 floats -> 83 per rank
  CHECK(ag.call_count == 83);
  CHECK(ag.bytes == 83 * 3 * 4);
  const CollCounts ar = coll_counts("all_reduce", 1024, 3, 4);
  CHECK(ar.call_count == 256);
  CHECK(ar.bytes == 1024);
  CHECK(coll_counts("all_to_all", 1024, 2, 4).call_count == 128);
}

TEST_CASE("collectives: expected receive values (rank s sends (s+1)*((i%7)+1))") {
  const int n = 4;
  auto sent = [](int s, std::uint64_t i) { return static_cast<double>((s + 1) * static_cast<int>(i % 7 + 1)); };
  const std::uint64_t c = 10;
  for (int r = 0; r < n; ++r)
    for (std::uint64_t j = 0; j < c * n; ++j) {
      double sum = 0;
      for (int s = 0; s < n; ++s) sum += sent(s, j);
      CHECK(coll_expected(kAllReduce, j, r, n, c * n) == sum);
      CHECK(coll_expected(kAllGather, j, r, n, c) == sent(static_cast<int>(j / c), j % c));
      CHECK(coll_expected(kAllToAll, j, r, n, c) == sent(static_cast<int>(j / c), r * c + j % c));
      if (j < c) {
        double rs = 0;
        for (int s = 0; s < n; ++s) rs += sent(s, r * c + j);
        CHECK(coll_expected(kReduceScatter, j, r, n, c) == rs);
        CHECK(coll_expected(kSendRecv, j, r, n, c) == sent((r + n - 1) % n, j));
      }
    }
}

TEST_CASE("gemm check tolerances order the precisions") {
  CHECK(gemm_tolerance("fp32") < gemm_tolerance("tf32"));
  CHECK(gemm_tolerance("fp16") <= gemm_tolerance("bf16"));
  CHECK(gemm_tolerance("bf16") < gemm_tolerance("fp8"));
  CHECK(gemm_tolerance("fp8") < 0.5);  // a wrong layout gives an error of order 1
}

TEST_CASE("json: ordered objects, escapes, numbers, NaN as null") {
  Json j = Json::object();
  j["schema"] = 1;
  j["kind"] = "gpuplan-calibration-samples";
  j["x"] = 0.1;
  j["nan"] = std::nan("");
  j["s"] = "a\"b\\c\n\x01";
  j["list"] = Json::array();
  j["list"].push_back(1.5);
  j["list"].push_back(true);
  j["empty"] = Json::object();
  j["rows"].push_back(Json::object());
  CHECK(j.dump() ==
        "{\"schema\":1,\"kind\":\"gpuplan-calibration-samples\",\"x\":0.1,\"nan\":null,"
        "\"s\":\"a\\\"b\\\\c\\n\\u0001\",\"list\":[1.5,true],\"empty\":{},\"rows\":[{}]}");
  CHECK(j.find("x")->as_double() == 0.1);
  CHECK(j.find("missing") == nullptr);
  // Round-trip precision: shortest form that reads back exactly.
  Json d = 1.0 / 3.0;
  CHECK(std::stod(d.dump()) == 1.0 / 3.0);
  Json big = static_cast<unsigned long long>(4ULL << 30);
  CHECK(big.dump() == "4294967296");
  // Indented: samples (flat objects) stay on one line each.
  Json doc = Json::object();
  Json row = Json::object();
  row["op"] = "copy";
  row["bytes"] = 2;
  doc["hbm"].push_back(row);
  CHECK(doc.dump(1) == "{\n \"hbm\": [\n  {\"op\": \"copy\", \"bytes\": 2}\n ]\n}");
}

TEST_CASE("atomic write: the file appears whole, no temporary is left") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("gpuplan-bench-test-" + std::to_string(::getpid()));
  const fs::path f = dir / "sub" / "samples.json";
  write_file_atomic(f, "{\"a\":1}\n");
  write_file_atomic(f, "{\"a\":2}\n");
  std::ifstream in(f);
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str() == "{\"a\":2}\n");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir / "sub")) {
    (void)e;
    ++files;
  }
  CHECK(files == 1);
  fs::remove_all(dir);
}

TEST_CASE("misc: sizes and UUIDs print as tools print them") {
  CHECK(human_bytes(1024) == "1 KiB");
  CHECK(human_bytes(4ULL << 30) == "4 GiB");
  CHECK(human_bytes(1536) == "1.50 KiB");
  const unsigned char u[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                               0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  CHECK(format_uuid(u) == "GPU-12345678-9abc-def0-0123-456789abcdef");
}
