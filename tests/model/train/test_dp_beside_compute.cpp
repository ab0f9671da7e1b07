// The compute's loss beside a hidden data-parallel collective (model/src/train/parallel_dims.hpp
// dp_beside_compute_share): per call the larger of the call's SM share over the call and the compute kernels' wait for
// the call's kernel, kKernelWaitPerCall (0.548, the median over 35 GEMMs beside NCCL calls on two H200s:
// data/validation/measured/h200-sxm-141gb/beside_comm*_2gpu_*.json, scripts/validation/beside_comm_law.py) of the
// call, at most the kernel in flight. Values below by hand.
#include <doctest/doctest.h>
#include "approx.hpp"

#include "parallel_dims.hpp"

using namespace gpuplan;
using gpuplan::model::detail::dp_beside_compute_share;
using gpuplan::model::detail::kKernelWaitPerCall;

TEST_CASE("a DP call shorter than the kernel in flight costs the compute 0.548 of the call") {
  CHECK(kKernelWaitPerCall == gptest::approx(0.548));
  // 0.108 ms calls (PyTorch DDP's 25 MiB buckets on 4 H200s) beside 0.421 ms kernels: min(0.548, 0.421/0.108 = 3.9)
  // = 0.548, above the SM share 16/132 = 0.121.
  CHECK(dp_beside_compute_share(16.0 / 132.0, units::milliseconds(0.108), units::milliseconds(0.421)) ==
        gptest::approx(0.548));
}

TEST_CASE("a DP call longer than the kernel in flight costs at most one kernel per call") {
  // 0.772 ms calls (FSDP2 per layer) beside 0.421 ms kernels: 0.421 / 0.772 = 0.5453 of the hidden time.
  CHECK(dp_beside_compute_share(16.0 / 132.0, units::milliseconds(0.772), units::milliseconds(0.421)) ==
        gptest::approx(0.421 / 0.772));
  // 6.954 ms calls beside 0.063 ms kernels: the wait (0.063 / 6.954 = 0.0091) is below the SM share: 16/132.
  CHECK(dp_beside_compute_share(16.0 / 132.0, units::milliseconds(6.954), units::milliseconds(0.063)) ==
        gptest::approx(16.0 / 132.0));
}

TEST_CASE("NCCL's CTA count changes the SM share, not the wait") {
  // Pinned to 4 CTAs (share 4/132 = 0.0303) or free (16/132): the wait of a short call is the same, min(0.548,
  // 0.15/0.17 = 0.88) = 0.548 beside 0.15 ms kernels and 0.05/0.17 = 0.294 beside 0.05 ms ones; a long call's loss
  // (0.15/5 = 0.03 of it waited) follows the share.
  const auto c_short = units::milliseconds(0.17), c_long = units::milliseconds(5.0), tk = units::milliseconds(0.15);
  CHECK(dp_beside_compute_share(4.0 / 132.0, c_short, tk) == gptest::approx(0.548));
  CHECK(dp_beside_compute_share(16.0 / 132.0, c_short, tk) == gptest::approx(0.548));
  CHECK(dp_beside_compute_share(4.0 / 132.0, c_short, units::milliseconds(0.05)) == gptest::approx(0.05 / 0.17));
  CHECK(dp_beside_compute_share(16.0 / 132.0, c_short, units::milliseconds(0.05)) == gptest::approx(0.05 / 0.17));
  CHECK(dp_beside_compute_share(4.0 / 132.0, c_long, tk) == gptest::approx(4.0 / 132.0));
  CHECK(dp_beside_compute_share(16.0 / 132.0, c_long, tk) == gptest::approx(16.0 / 132.0));
}

TEST_CASE("an unknown call or kernel length leaves the SM share") {
  CHECK(dp_beside_compute_share(0.105, units::Seconds(0), units::milliseconds(0.4)) == gptest::approx(0.105));
  CHECK(dp_beside_compute_share(0.105, units::milliseconds(0.4), units::Seconds(0)) == gptest::approx(0.105));
}
