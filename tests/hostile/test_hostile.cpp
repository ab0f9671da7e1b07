// The hostile-input corpus (tests/hostile/cases/*.jsonl, described in tests/hostile/README.md): every case runs the
// built gpuplan in a fresh folder and must end with its stated exit code, its stated words on stderr (or stdout), no
// sanitizer report, no crash or hang (60 s), and no NaN or infinity in what it prints.
#include <doctest/doctest.h>

#if defined(__SANITIZE_ADDRESS__) && __has_include(<sanitizer/lsan_interface.h>)
#include <sanitizer/lsan_interface.h>
#define GPUPLAN_HOSTILE_LSAN 1
#else
#define GPUPLAN_HOSTILE_LSAN 0
#endif
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_paths.hpp"
#include "commands.hpp"
#include "fuzz_paths.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kExe = GPUPLAN_CLI_EXE;
const std::string kData = GPUPLAN_TEST_DATA_DIR;
const std::string kCases = GPUPLAN_HOSTILE_CASES;

std::string quote(const std::string& s) {
  std::string o = "'";
  for (const char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// "{dir}" is the case's folder, "{data}" the shipped data folder, "{nonutf8}" the bytes FF FE (not UTF-8).
std::string expand(std::string s, const fs::path& dir) {
  const std::pair<std::string, std::string> subs[] = {
      {"{dir}", dir.string()}, {"{data}", kData}, {"{nonutf8}", "\xff\xfe"}};
  for (const auto& [from, to] : subs)
    for (std::size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
  return s;
}

/// A case's input files: {"name", "text", "repeat", "times", "then"}: `text`, then the string `repeat` written `times`
/// times, then `then` (deep nesting and huge files are generated, not committed); {"name", "link"}: a symbolic link.
void make_files(const json& c, const fs::path& dir) {
  if (!c.contains("files")) return;
  for (const auto& f : c["files"]) {
    const fs::path path = dir / expand(f.at("name").get<std::string>(), dir);
    fs::create_directories(path.parent_path());
    if (f.contains("link")) {
      fs::create_symlink(expand(f["link"].get<std::string>(), dir), path);
      continue;
    }
    std::ofstream out(path, std::ios::binary);
    out << expand(f.value("text", std::string()), dir);
    if (f.contains("repeat")) {
      const std::string unit = f["repeat"].get<std::string>();
      const long long times = f.at("times").get<long long>();
      std::string block;
      for (int i = 0; i < 4096; ++i) block += unit;
      long long left = times;
      for (; left >= 4096; left -= 4096) out << block;
      for (; left > 0; --left) out << unit;
    }
    if (f.contains("then")) out << f["then"].get<std::string>();
  }
}

struct Outcome {
  int rc = -1;
  bool signalled = false;
  std::string out, err;
};

Outcome run_case(const json& c, const fs::path& dir) {
  // Appended piece by piece: GCC 12 at -O3 reports a false -Wrestrict on "literal" + std::string (GCC bug 105651).
  std::string cmd = "cd ";
  cmd += quote(dir.string());
  cmd += " && env -u GPUPLAN_DATA_DIR LC_ALL=C LANG=C COLUMNS=80 TERM=dumb timeout -s KILL 60 ";
  cmd += quote(kExe);
  if (c.value("data_dir", true)) {
    cmd += " --data-dir ";
    cmd += quote(kData);
  }
  for (const auto& a : c.at("args")) {
    cmd += ' ';
    cmd += quote(expand(a.get<std::string>(), dir));
  }
  cmd += " >";
  cmd += quote((dir / ".stdout").string());
  cmd += " 2>";
  cmd += quote((dir / ".stderr").string());
  cmd += " </dev/null";
  const int status = std::system(cmd.c_str());
  Outcome o;
  o.signalled = !WIFEXITED(status);
  o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = slurp(dir / ".stdout");
  o.err = slurp(dir / ".stderr");
  return o;
}

// The same command as run_case, run in a forked copy of this test process instead of a new gpuplan process: the child
// calls the CLI's own entry point (cli::run_main, which is all of gpuplan's main) with the same arguments, environment,
// folder, standard streams and 60 s limit (SIGALRM), and runs the leak check that gpuplan's exit runs under the
// sanitizers. A new process of the sanitizer build costs ~0.45 s to start; the ~2,000 flag cases spent most of the
// suite's time starting it. The file and value cases still run the built executable.
Outcome run_case_forked(const json& c, const fs::path& dir) {
  std::vector<std::string> args{"gpuplan"};
  if (c.value("data_dir", true)) {
    args.emplace_back("--data-dir");
    args.push_back(kData);
  }
  for (const auto& a : c.at("args")) args.push_back(expand(a.get<std::string>(), dir));
  const std::string out_path = (dir / ".stdout").string(), err_path = (dir / ".stderr").string();
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0 ||
        ::chdir(dir.c_str()) != 0)
      ::_exit(125);
    ::unsetenv("GPUPLAN_DATA_DIR");
    ::setenv("LC_ALL", "C", 1);
    ::setenv("LANG", "C", 1);
    ::setenv("COLUMNS", "80", 1);
    ::setenv("TERM", "dumb", 1);
    ::alarm(60);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = gpuplan::cli::run_main(static_cast<int>(args.size()), argv.data());
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);
#if GPUPLAN_HOSTILE_LSAN
    // The leak check gpuplan's own exit runs (LeakSanitizer at exit), without the exit: the destructors and the
    // sanitizers' unregistering of every global of this large binary cost more than the case itself.
    __lsan_do_leak_check();
#endif
    ::_exit(rc);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  Outcome o;
  o.signalled = !WIFEXITED(status);
  o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = slurp(dir / ".stdout");
  o.err = slurp(dir / ".stderr");
  return o;
}

// Runs the cases of FILE whose ordinal (0-based, comments and blank lines not counted) is shard modulo shards: the
// flag corpus is split so that ctest runs its parts in parallel (it was the suite's long pole: 147 s in one test).
void run_file(const fs::path& file, int shard = 0, int shards = 1, bool forked = false) {
  std::ifstream in(file);
  REQUIRE(in.good());
  static std::atomic<int> counter{0};
  int line_no = 0, cases = 0, ordinal = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    if (ordinal++ % shards != shard) continue;
    const json c = json::parse(line);
    ++cases;
    const std::string id = c.at("id").get<std::string>();
    CAPTURE(id);
    CAPTURE(line_no);
    const fs::path dir = fs::temp_directory_path() / ("gpuplan-hostile-" + std::to_string(::getpid()) + "-" +
                                                      std::to_string(counter++));
    fs::remove_all(dir);
    fs::create_directories(dir);
    make_files(c, dir);
    const Outcome o = forked ? run_case_forked(c, dir) : run_case(c, dir);
    INFO("stderr: " << o.err.substr(0, 2000));
    INFO("stdout: " << o.out.substr(0, 2000));
    CHECK_FALSE(o.signalled);
    CHECK(o.rc == c.at("exit").get<int>());
    for (const auto& w : c.value("words", json::array())) {
      const std::string want = expand(w.get<std::string>(), dir);
      CHECK_MESSAGE(o.err.find(want) != std::string::npos, "stderr lacks: " << want);
    }
    for (const auto& w : c.value("out_words", json::array())) {
      const std::string want = expand(w.get<std::string>(), dir);
      CHECK_MESSAGE(o.out.find(want) != std::string::npos, "stdout lacks: " << want);
    }
    CHECK(o.err.find("AddressSanitizer") == std::string::npos);
    CHECK(o.err.find("runtime error:") == std::string::npos);
    CHECK(o.err.find("terminate called") == std::string::npos);
    const auto non_finite = gpuplan::fuzz::non_finite_text(o.out);
    CHECK_MESSAGE(!non_finite.has_value(), "a non-finite number in stdout: " << non_finite.value_or(""));
    if (c.at("exit").get<int>() == 2) CHECK(o.out.empty() == c.value("empty_stdout", true));
    for (const auto& k : c.value("unchanged", json::array())) {  // files the command must not have touched
      const fs::path p = dir / k.at("name").get<std::string>();
      CHECK_MESSAGE(slurp(p) == k.at("text").get<std::string>(), "changed: " << p.string());
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  CHECK(cases > 0);
  MESSAGE(file.filename().string() << " part " << shard + 1 << " of " << shards << ": " << cases << " cases");
}

}  // namespace

TEST_SUITE("hostile input") {
  // Four parts, each every fourth case of flags.jsonl: together they are the whole file. They run the CLI's entry point
  // in a forked copy of this process (run_case_forked); the file and value cases run the built executable.
  TEST_CASE("flags part 1 of 4: every value option of every subcommand refuses empty, NaN, infinite, out-of-range values") {
    run_file(fs::path(kCases) / "flags.jsonl", 0, 4, /*forked=*/true);
  }
  TEST_CASE("flags part 2 of 4: every value option of every subcommand refuses empty, NaN, infinite, out-of-range values") {
    run_file(fs::path(kCases) / "flags.jsonl", 1, 4, /*forked=*/true);
  }
  TEST_CASE("flags part 3 of 4: every value option of every subcommand refuses empty, NaN, infinite, out-of-range values") {
    run_file(fs::path(kCases) / "flags.jsonl", 2, 4, /*forked=*/true);
  }
  TEST_CASE("flags part 4 of 4: every value option of every subcommand refuses empty, NaN, infinite, out-of-range values") {
    run_file(fs::path(kCases) / "flags.jsonl", 3, 4, /*forked=*/true);
  }
  TEST_CASE("files: endless, huge, deeply nested, duplicate-key and mistyped JSON inputs, and odd file names") {
    run_file(fs::path(kCases) / "files.jsonl");
  }
  TEST_CASE("values: in-range extremes, products past int64, sweeps at the edge of double range, outputs") {
    run_file(fs::path(kCases) / "values.jsonl");
  }
}
