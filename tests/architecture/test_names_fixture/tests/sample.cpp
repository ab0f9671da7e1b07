// Fixture for check_test_names.cmake: two names it must refuse and two it must pass. Not compiled.
TEST_CASE("a bound in (0, 100] µs is an unbalanced bracket") {}
TEST_CASE("µs one half; the other half") {}
TEST_CASE("bands are [p10, p90]: balanced, harmless") {}
TEST_CASE("a plain name") {}
