// doctest main for the GUI tests: one QApplication for all cases (offscreen unless a platform is set), and, as in
// tests/doctest_main.cpp, a run in which no case matched its filter fails.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>

#include <QApplication>
#include <QElapsedTimer>
#include <QThread>

#include "test_paths.hpp"
#include "support.hpp"

namespace {
std::atomic<int> g_cases_run{0};

struct CountingListener : doctest::IReporter {
  explicit CountingListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { ++g_cases_run; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("counting", 1, CountingListener);
}  // namespace

// LeakSanitizer (the ci preset): allocations that system libraries loaded by Qt keep for the life of the process
// (fontconfig's caches, the platform plugin) are not gpuplan's leaks. Read by LSan when it is linked in; unused
// otherwise.
extern "C" __attribute__((visibility("default"), used)) const char* __lsan_default_suppressions() {
  return "leak:libfontconfig\nleak:libdbus\nleak:libglib\n";
}

namespace gpuplan::gui::test {

std::shared_ptr<const AppData> data() {
  static std::shared_ptr<const AppData> d = [] {
    Diagnostics diags;
    auto loaded = load_app_data(GPUPLAN_TEST_DATA_DIR, diags);
    if (!loaded) std::fprintf(stderr, "%s\n", diags.to_string().c_str());
    return loaded;
  }();
  return d;
}

bool wait_until(const std::function<bool()>& done, int timeout_ms) {
  QElapsedTimer t;
  t.start();
  while (!done() && t.elapsed() < timeout_ms) {
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    QThread::msleep(2);
  }
  return done();
}

}  // namespace gpuplan::gui::test

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  int rc = 0;
  {
    QApplication app(argc, argv);
    QApplication::setOrganizationName("gpuplan-tests");  // recent files of the tests stay out of the user's
    QApplication::setApplicationName("test_gui");
    rc = context.run();
  }
  if (context.shouldExit()) return rc;
  if (rc == 0 && g_cases_run.load() == 0) {
    std::fprintf(stderr, "error: no test case matched the filter\n");
    return 1;
  }
  return rc;
}
