// The test paths (test_paths.hpp), from the compile definitions tests/CMakeLists.txt gives this file alone.
#include "test_paths.hpp"

namespace gpuplan::test_paths {
const char* data_dir() { return GPUPLAN_TEST_PATHS_DATA; }
const char* fixtures() { return GPUPLAN_TEST_PATHS_FIXTURES; }
const char* cli_exe() { return GPUPLAN_TEST_PATHS_CLI; }
}  // namespace gpuplan::test_paths
