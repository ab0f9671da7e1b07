// Compiled by CTest with -fsyntax-only: with GPUPLAN_CONTROL it adds bytes to bytes and must compile; without, it
// adds seconds to bytes and must be rejected by the compiler.
#include "gpuplan/core/units.hpp"

using namespace gpuplan::units::literals;

int main() {
#ifdef GPUPLAN_CONTROL
  auto x = 80_GiB + 1_GB;
#else
  auto x = 80_GiB + 1_s;
#endif
  return x.raw() > 0 ? 0 : 1;
}
