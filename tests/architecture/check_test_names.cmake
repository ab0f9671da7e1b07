# Fails if a doctest TEST_CASE or TEST_SUITE name holds a character that breaks ctest's per-case tests: doctest_discover
# registers each case under its name, and a ';' splits it into two CMake list items whose filters match no case (the
# split halves then "fail" with "no test case matched", or worse, a half that happens to match runs the wrong case).
file(GLOB_RECURSE sources "${SRC}/tests/*.cpp")
set(n 0)
foreach(f IN LISTS sources)
  file(STRINGS "${f}" bad REGEX "TEST_(CASE|SUITE)\\(\"[^\"]*;")
  if(bad)
    message(FATAL_ERROR "${f}: a test name with ';' (use ',' or ':'): ${bad}")
  endif()
  math(EXPR n "${n} + 1")
endforeach()
message(STATUS "checked the test names of ${n} test sources")
