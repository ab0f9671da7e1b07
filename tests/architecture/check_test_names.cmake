# Fails if a doctest TEST_CASE or TEST_SUITE name holds a character that breaks ctest's per-case tests. doctest_discover
# registers each case under its name through CMake lists:
#  - a ';' splits the name into two list items whose filters match no case (the split halves then "fail" with "no test
#    case matched", or worse, a half that happens to match runs the wrong case);
#  - an unbalanced '[' or ']' stops CMake's list splitting at ';' until the bracket closes, so every later name of that
#    test binary is swallowed into one item and the whole binary drops out of ctest (session 25: "(0, 100] µs" in
#    test_hw.cpp hid all of test_hw's cases). Balanced brackets ("[p10, p90]", "${ARRAY[@]}") are harmless.
# SRC is the tree to scan (its tests/ folder); the fixture tests/architecture/test_names_fixture holds one bad name of
# each kind, and the test that runs this script on it (-DEXPECT_BAD=2) expects both to be found.
cmake_minimum_required(VERSION 3.20)
file(GLOB_RECURSE sources "${SRC}/tests/*.cpp")
if(NOT SRC MATCHES "test_names_fixture")
  list(FILTER sources EXCLUDE REGEX "/test_names_fixture/")
endif()
set(n 0)
set(failures "")
set(n_bad 0)
foreach(f IN LISTS sources)
  # The whole file as one string (not a list of lines: a list would split at the very ';' looked for), and the names
  # cut out with string(FIND) on the opening 'TEST_CASE("' / 'TEST_SUITE("' and the next '"' (CMake's regex classes do
  # not match the UTF-8 bytes many names hold).
  file(READ "${f}" text)
  foreach(opener "TEST_CASE(\"" "TEST_SUITE(\"")
    string(LENGTH "${opener}" opener_length)
    set(rest "${text}")
    while(TRUE)
      string(FIND "${rest}" "${opener}" at)
      if(at EQUAL -1)
        break()
      endif()
      math(EXPR from "${at} + ${opener_length}")
      string(SUBSTRING "${rest}" ${from} -1 rest)
      string(FIND "${rest}" "\"" end)
      string(SUBSTRING "${rest}" 0 ${end} name)
      string(FIND "${name}" ";" semicolon)
      if(NOT semicolon EQUAL -1)
        string(APPEND failures "${f}: a test name with ';' (use ',' or ':'): ${name}\n")
        math(EXPR n_bad "${n_bad} + 1")
      endif()
      string(REGEX REPLACE "[^[]" "" opens "${name}")
      string(REGEX REPLACE "[^]]" "" closes "${name}")
      string(LENGTH "${opens}" n_open)
      string(LENGTH "${closes}" n_close)
      if(NOT n_open EQUAL n_close)
        string(APPEND failures "${f}: a test name with unbalanced brackets (${n_open} '[' against ${n_close} ']'): ${name}\n")
        math(EXPR n_bad "${n_bad} + 1")
      endif()
    endwhile()
  endforeach()
  math(EXPR n "${n} + 1")
endforeach()
if(DEFINED EXPECT_BAD)
  # The fixture run: exactly the expected bad names, each reported with its rule.
  message(STATUS "${failures}")
  if(NOT n_bad EQUAL EXPECT_BAD)
    message(FATAL_ERROR "expected ${EXPECT_BAD} bad test names, found ${n_bad}")
  endif()
  message(STATUS "found the ${n_bad} bad test names of the fixture")
  return()
endif()
if(failures)
  # The failures are one string, not a list: the unbalanced bracket looked for would break a list too.
  message(FATAL_ERROR "${failures}")
endif()
message(STATUS "checked the test names of ${n} test sources")
