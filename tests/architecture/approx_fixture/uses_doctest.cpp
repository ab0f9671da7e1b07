// Fixture of check_approx.cmake: two files that construct doctest's Approx and two that do not.
#include <doctest/doctest.h>
TEST_CASE("absolute by accident") { CHECK(3.2e-6 == doctest::Approx(3.17e-6).epsilon(0.05)); }
