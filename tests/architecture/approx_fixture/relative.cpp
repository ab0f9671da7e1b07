#include "approx.hpp"
// doctest::Approx( in a comment does not count, nor does gptest::approx.
TEST_CASE("relative") { CHECK(1.0 == gptest::approx(1.0).epsilon(0.01)); }
