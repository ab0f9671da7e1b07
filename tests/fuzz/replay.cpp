// Replays every saved fuzzer finding (tests/fuzz/regressions/<target>/*) and every seed (tests/fuzz/corpus/<target>/*)
// through the same decode paths as the libFuzzer targets (fuzz_paths.cpp), in the normal build, so that a fixed crash
// stays fixed. Under the `ci` preset (ASan + UBSan) a sanitizer report aborts the test; in every build a broken output
// invariant or an exception escaping the library fails it.
//
// A finding that is saved but not yet fixed is listed in tests/fuzz/regressions/known-open.txt ("<target>/<file>
// reason"); it is skipped with a warning until the fix lands and the line is removed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_paths.hpp"
#include "fuzz_paths.hpp"

namespace {

namespace fs = std::filesystem;
using gpuplan::fuzz::Shipped;

const fs::path kFuzzDir = GPUPLAN_FUZZ_DIR;
const std::vector<std::string> kTargets{"hw", "model", "scenario", "cli", "calib", "serving_scenario", "plan"};
const char* const kTargetList = "hw, model, scenario, cli, calib, serving_scenario, plan";

struct Violation : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void throw_violation(const std::string& what) { throw Violation(what); }

const Shipped& data() {
  static const Shipped& s = [&]() -> const Shipped& {
    gpuplan::fuzz::set_violation_handler(&throw_violation);
    setenv("GPUPLAN_DATA_DIR", GPUPLAN_TEST_DATA_DIR, 1);
    return gpuplan::fuzz::shipped(GPUPLAN_TEST_DATA_DIR);
  }();
  return s;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// "<target>/<file>" entries of known-open.txt (text after the first blank is the reason).
std::set<std::string> known_open() {
  std::set<std::string> out;
  std::ifstream in(kFuzzDir / "regressions" / "known-open.txt");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    out.insert(line.substr(0, line.find_first_of(" \t")));
  }
  return out;
}

std::vector<fs::path> files_under(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

/// Silences the CLI's stdout/stderr while it runs.
struct Quiet {
  std::ostringstream sink;
  std::streambuf* out = std::cout.rdbuf(sink.rdbuf());
  std::streambuf* err = std::cerr.rdbuf(sink.rdbuf());
  Quiet() = default;
  Quiet(const Quiet&) = delete;
  Quiet& operator=(const Quiet&) = delete;
  ~Quiet() {
    std::cout.rdbuf(out);
    std::cerr.rdbuf(err);
  }
};

void run(const std::string& target, const std::string& bytes) {
  if (target == "hw") gpuplan::fuzz::run_hw(bytes, data());
  else if (target == "model") gpuplan::fuzz::run_model(bytes, data());
  else if (target == "scenario") gpuplan::fuzz::run_scenario(bytes, data());
  else if (target == "calib") gpuplan::fuzz::run_calib(bytes, data());
  else if (target == "serving_scenario") gpuplan::fuzz::run_serving_scenario(bytes, data());
  else if (target == "plan") gpuplan::fuzz::run_plan(bytes, data());
  else if (target == "cli") {
    Quiet q;
    gpuplan::fuzz::run_cli(bytes);
  } else {
    FAIL("unknown fuzz target folder '" << target << "' (expected one of " << kTargetList << ")");
  }
}

/// Runs every file of <kind>/<target>/; returns how many ran.
int replay(const std::string& kind, const std::string& target) {
  (void)data();
  const auto open = known_open();
  int n = 0;
  for (const auto& f : files_under(kFuzzDir / kind / target)) {
    const std::string rel = target + "/" + f.filename().string();
    if (kind == "regressions" && open.count(rel) > 0) {
      WARN_MESSAGE(false, "skipped (listed in regressions/known-open.txt, not fixed yet): " << rel);
      continue;
    }
    INFO(kind << "/" << rel);
    try {
      run(target, slurp(f));
    } catch (const Violation& v) {
      FAIL_CHECK("invariant violated: " << std::string(v.what()));
    } catch (const std::exception& e) {
      FAIL_CHECK("exception escaped the library: " << std::string(e.what()));
    } catch (...) {
      FAIL_CHECK("unknown exception escaped the library");
    }
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("fuzz regressions: every saved finding of each target decodes without crash or broken invariant") {
  for (const auto& t : kTargets) {
    SUBCASE(t.c_str()) { (void)replay("regressions", t); }
  }
}

TEST_CASE("fuzz seeds: every seed of each target's corpus runs through its fuzz path cleanly") {
  for (const auto& t : kTargets) {
    SUBCASE(t.c_str()) { CHECK_MESSAGE(replay("corpus", t) > 0, "no seeds for " << t); }
  }
}

TEST_CASE("fuzz regressions: every folder under regressions/ is a fuzz target and known-open.txt names real files") {
  for (const auto& e : fs::directory_iterator(kFuzzDir / "regressions")) {
    if (!e.is_directory()) continue;
    const std::string name = e.path().filename().string();
    CHECK_MESSAGE(std::find(kTargets.begin(), kTargets.end(), name) != kTargets.end(), "unexpected folder " << name);
  }
  for (const auto& rel : known_open()) CHECK_MESSAGE(fs::is_regular_file(kFuzzDir / "regressions" / rel), rel);
}
