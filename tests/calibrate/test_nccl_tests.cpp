// The nccl-tests log parser (calibrate/fit nccl_tests.hpp): both table layouts (13 columns with root, 12 without),
// the collective named by the log or the file, NCCL_DEBUG lines skipped, every rule of a row with its file:line.
#include <doctest/doctest.h>
#include "approx.hpp"

#include <string>

#include "gpuplan/calibrate/nccl_tests.hpp"

using namespace gpuplan;

namespace {
const calib::NcclTestsTopology kTwo{"dgx-h100", 2, 1};

std::string all_messages(const Diagnostics& d) {
  std::string s;
  for (const auto& x : d.items()) s += x.to_string() + "\n";
  return s;
}
}  // namespace

TEST_SUITE("nccl-tests import") {
  TEST_CASE("a 12-column alltoall table without root imports, the op from the 'Collective test starting' line") {
    // n = 2: busbw = algbw · (n−1)/n = algbw / 2; algbw = size / time / 1e3 (GB/s with µs).
    const std::string log =
        "# Collective test starting: alltoall_perf\n"
        "# nThread 1 nGpus 2 minBytes 1048576 maxBytes 4194304 step: 4(factor) warmup iters: 5 iters: 20\n"
        "#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "node1:123:123 [0] NCCL INFO Channel 00/32 : 0 1\n"
        "     1048576        131072     float    none    20.00   52.43   26.21  0e+00    20.10   52.17   26.08    N/A\n"
        "     4194304        524288     float    none    50.00   83.89   41.94  0e+00    50.00   83.89   41.94    N/A\n";
    Diagnostics d;
    const auto r = calib::parse_nccl_tests_log(log, "logs/run7.txt", kTwo, "", d);
    INFO(all_messages(d));
    REQUIRE(r);
    CHECK(r->op == "all_to_all");
    CHECK(r->skipped_nccl_lines == 1);
    REQUIRE(r->rows.size() == 2);
    CHECK(r->rows[0].bytes == 1048576);
    CHECK(r->rows[0].time_s == gptest::approx(20e-6));
    CHECK(r->rows[0].in_place_time_s.value_or(0) == gptest::approx(20.1e-6));
    CHECK(r->rows[1].ranks == 2);
    CHECK(r->rows[1].where == "logs/run7.txt:6");
  }

  TEST_CASE("the op falls back to the file name, and a log naming none is refused") {
    const std::string row = "        4096          1024     float     sum      -1    10.00    0.41    0.41      0    10.00    0.41    0.41      0\n";
    Diagnostics d;
    const auto r = calib::parse_nccl_tests_log(row, "out/sendrecv_perf.log", kTwo, "", d);
    REQUIRE(r);
    CHECK(r->op == "send_recv");
    Diagnostics e;
    CHECK_FALSE(calib::parse_nccl_tests_log(row, "out/run.log", kTwo, "", e));
    CHECK(e.has_errors());
    CHECK(all_messages(e).find("give --op") != std::string::npos);
  }

  TEST_CASE("a row with wrong elements, an unknown type or a non-numeric time is an error at its line") {
    const std::string log =
        "        4096          1024     float     sum      -1    10.00    0.41    0.41      2    10.00    0.41    0.41      0\n"
        "        4096          1024     quad      sum      -1    10.00    0.41    0.41      0    10.00    0.41    0.41      0\n"
        "        4096          1024     float     sum      -1     fast    0.41    0.41      0    10.00    0.41    0.41      0\n";
    Diagnostics d;
    CHECK_FALSE(calib::parse_nccl_tests_log(log, "ar.log", kTwo, "all_reduce", d));
    const std::string m = all_messages(d);
    INFO(m);
    CHECK(m.find("ar.log:1") != std::string::npos);
    CHECK(m.find("#wrong '2'") != std::string::npos);
    CHECK(m.find("ar.log:2") != std::string::npos);
    CHECK(m.find("type 'quad'") != std::string::npos);
    CHECK(m.find("ar.log:3") != std::string::npos);
    CHECK(m.find("out-of-place time (us) 'fast'") != std::string::npos);
  }

  TEST_CASE("samples JSON: one collective per row, the GPU id as the device name, the topology recorded") {
    const std::string row = "        4096          1024     float     sum      -1    10.00    0.41    0.41      0    10.00    0.41    0.41      0\n";
    Diagnostics d;
    const auto r = calib::parse_nccl_tests_log(row, "all_reduce_perf.log", kTwo, "", d);
    REQUIRE(r);
    const std::string text = calib::nccl_tests_samples_json({*r}, kTwo, "h100-sxm5-80gb");
    CHECK(text.find("\"kind\": \"gpuplan-calibration-samples\"") != std::string::npos);
    CHECK(text.find("\"name\": \"h100-sxm5-80gb\"") != std::string::npos);
    CHECK(text.find("\"gpus_per_node\": 2") != std::string::npos);
    CHECK(text.find("\"source\": \"all_reduce_perf.log:1\"") != std::string::npos);
  }
}
