#pragma once
// The paths the tests read: the shipped data folder, the test fixtures and the built CLI. They are compiled into one
// object (test_paths.cpp, the only test object whose command line names an absolute path), so that every other test
// object is the same for any checkout path and ccache shares it between clones (CI's clean clone, a worktree): with the
// paths as compile definitions on every test object, each clone recompiled all of them.
namespace gpuplan::test_paths {
const char* data_dir();  ///< <source>/data
const char* fixtures();  ///< <source>/tests/fixtures
const char* cli_exe();   ///< the built gpuplan
}  // namespace gpuplan::test_paths

#define GPUPLAN_TEST_DATA_DIR (::gpuplan::test_paths::data_dir())
#define GPUPLAN_TEST_FIXTURES (::gpuplan::test_paths::fixtures())
#define GPUPLAN_CLI_EXE (::gpuplan::test_paths::cli_exe())
