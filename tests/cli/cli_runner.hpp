#pragma once
// Runs the built gpuplan binary for the end-to-end CLI tests (test_cli.cpp, test_cli_train.cpp) with a fixed
// environment (LC_ALL=C, COLUMNS=80, no GPUPLAN_DATA_DIR), stdout and stderr captured, and small text helpers.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "test_paths.hpp"

namespace gpuplan::cli_test {

inline const std::string kExe = GPUPLAN_CLI_EXE;
inline const std::string kData = GPUPLAN_TEST_DATA_DIR;

/// Exit code of invalid input (diagnostics on stderr); 3 is a valid plan that cannot work.
inline constexpr int kInvalid = 2;
inline constexpr int kInfeasible = 3;

inline std::string quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Run {
  int rc = -1;
  std::string out, err;
};

/// Runs gpuplan with `args` (each quoted for the shell), stdout and stderr captured to temporary files.
/// `env` adds or overrides environment variables ("LC_ALL=de_DE.UTF-8").
inline Run run_raw(const std::vector<std::string>& args, const std::string& env = "") {
  namespace fs = std::filesystem;
  static std::atomic<int> counter{0};
  const fs::path dir = fs::temp_directory_path() /
                       ("gpuplan-test-cli-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  fs::create_directories(dir);
  const fs::path out = dir / "stdout", err = dir / "stderr";
  // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict on "literal" + std::string (GCC bug 105651).
  std::string cmd = "cd ";
  cmd += quote(dir.string());
  cmd += " && env -u GPUPLAN_DATA_DIR LC_ALL=C LANG=C COLUMNS=80 TERM=dumb ";
  cmd += env;
  cmd += " ";
  cmd += quote(kExe);
  for (const auto& a : args) {
    cmd += " ";
    cmd += quote(a);
  }
  cmd += " >";
  cmd += quote(out.string());
  cmd += " 2>";
  cmd += quote(err.string());
  cmd += " </dev/null";
  const int status = std::system(cmd.c_str());
  Run r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return r;
}

/// Same, with `--data-dir <repo>/data` in front.
inline Run run(std::vector<std::string> args, const std::string& env = "") {
  args.insert(args.begin(), {"--data-dir", kData});
  return run_raw(args, env);
}

inline bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }
inline bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

inline std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

inline nlohmann::json parse_json(const Run& r) {
  INFO("stdout: " << r.out);
  INFO("stderr: " << r.err);
  REQUIRE(nlohmann::json::accept(r.out));
  return nlohmann::json::parse(r.out);
}

}  // namespace gpuplan::cli_test
