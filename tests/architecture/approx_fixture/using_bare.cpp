#include <doctest/doctest.h>
using doctest::Approx;
TEST_CASE("bare") { CHECK(1.0 == Approx(1.0)); }
