#include <doctest/doctest.h>
#include "approx.hpp"

#include "gpuplan/core/format.hpp"
#include "gpuplan/core/units.hpp"

using namespace gpuplan::units;
using namespace gpuplan::units::literals;

// The static checks: adding quantities of different dimension is ill-formed.
static_assert(!Addable<Bytes, Seconds>, "Bytes + Seconds must not compile");
static_assert(!Addable<FlopRate, Bandwidth>, "FLOP/s + B/s must not compile");
static_assert(!Addable<Bytes, double>, "a raw double is not a quantity");
static_assert(Addable<Bytes, Bytes>);
static_assert(std::is_same_v<decltype(1_TFLOPs / 1_TBps), Intensity>, "FLOP/s ÷ B/s is FLOP/B");
static_assert(std::is_same_v<decltype(1_GB / 1_GBps), Seconds>, "B ÷ B/s is seconds");
static_assert(std::is_same_v<decltype(1_FLOP / 1_TFLOPs), Seconds>);
static_assert(std::is_same_v<decltype(1_W * 1_s), Joules>);

TEST_CASE("decimal and binary byte prefixes are distinct") {
  CHECK((80_GB).raw() == gptest::approx(80e9));
  CHECK((80_GiB).raw() == gptest::approx(80.0 * 1024 * 1024 * 1024));
  CHECK(to_GiB(80_GB) == gptest::approx(74.505805969));
  CHECK((1_MiB).raw() == 1048576.0);
}

TEST_CASE("network line rates in Gb/s are divided by 8") {
  CHECK((400_Gbps).raw() == gptest::approx(50e9));
  CHECK((200_Gbps).raw() == gptest::approx(25e9));
}

TEST_CASE("ridge point of an A100 is 156 FLOP/B (textbook T1)") {
  const Intensity i = 312_TFLOPs / 2.0_TBps;
  CHECK(i.raw() == gptest::approx(156.0));
}

TEST_CASE("time = bytes / bandwidth keeps its unit") {
  const Seconds t = 14_GB / 3.35_TBps;  // 7B bf16 weights read once on an H100 (textbook T20)
  CHECK(t.raw() == gptest::approx(4.179e-3).epsilon(1e-3));
}

TEST_CASE("formatting scales to the largest prefix with 3 significant digits") {
  CHECK(format(80_GB) == "80 GB");
  CHECK(format(80_GB, BytePrefix::binary) == "74.5 GiB");
  CHECK(format(524288_B, BytePrefix::binary) == "512 KiB");
  CHECK(format(524288_B) == "524 kB");
  CHECK(format(3.35_TBps) == "3.35 TB/s");
  CHECK(format(989.4_TFLOPs) == "989 TFLOP/s");
  CHECK(format(989.4_TFLOPs, 4) == "989.4 TFLOP/s");
  CHECK(format(4.2_ms) == "4.2 ms");
  CHECK(format(seconds(60.9 * 86400)) == "60.9 days");
  CHECK(format(flop(1.2e21)) == "1.2 ZFLOP");
  CHECK(format(Ratio(0.4)) == "40%");
  CHECK(format(usd_per_hour(2.69)) == "$2.69/h");
  CHECK(format(Bytes(0)) == "0 B");
}

TEST_CASE("format_count groups thousands") {
  CHECK(format_count(70553706496.0) == "70,553,706,496");
  CHECK(format_count(0) == "0");
  CHECK(format_count(-1234) == "-1,234");
}

TEST_CASE("format_number switches to scientific notation for very large and very small values") {
  CHECK(format_number(989.4) == "989.4");
  CHECK(format_number(0.0125) == "0.0125");
  CHECK(format_number(1.2e21) == "1.200e+21");
}
