// libFuzzer entry point, compiled once per target with GPUPLAN_FUZZ_TARGET_{HW,MODEL,SCENARIO,CLI,CALIB,SERVING_SCENARIO,PLAN} defined.
// The shipped data come from $GPUPLAN_FUZZ_DATA_DIR, else from this source tree's data/ (GPUPLAN_FUZZ_DATA_DIR).
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include <unistd.h>

#include "fuzz_paths.hpp"

namespace {
std::string data_dir() {
  const char* env = std::getenv("GPUPLAN_FUZZ_DATA_DIR");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(GPUPLAN_FUZZ_DATA_DIR);
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  gpuplan::fuzz::set_report_fd(::dup(2));  // before -close_fd_mask closes fd 2 (fuzz_paths.hpp)
  // An exception escaping an input (or a noexcept violation) ends in std::terminate: name it in the log, where the
  // runtime's own "terminate called after ..." line would go to the closed fd 2.
  std::set_terminate([] {
    std::string what = "no active exception";
    if (const std::exception_ptr e = std::current_exception()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        what = std::string("std::exception: ") + x.what();
      } catch (...) {
        what = "an exception not derived from std::exception";
      }
    }
    gpuplan::fuzz::report_line("std::terminate: " + what);
    std::abort();
  });
  const std::string dir = data_dir();
  (void)gpuplan::fuzz::shipped(dir);
#if defined(GPUPLAN_FUZZ_TARGET_CLI) || defined(GPUPLAN_FUZZ_TARGET_SERVING_SCENARIO) || defined(GPUPLAN_FUZZ_TARGET_PLAN)
  setenv("GPUPLAN_DATA_DIR", dir.c_str(), /*overwrite=*/1);  // the CLI's own data-directory lookup
#endif
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
#if defined(GPUPLAN_FUZZ_TARGET_HW)
  gpuplan::fuzz::run_hw(bytes, gpuplan::fuzz::shipped(""));
#elif defined(GPUPLAN_FUZZ_TARGET_MODEL)
  gpuplan::fuzz::run_model(bytes, gpuplan::fuzz::shipped(""));
#elif defined(GPUPLAN_FUZZ_TARGET_SCENARIO)
  gpuplan::fuzz::run_scenario(bytes, gpuplan::fuzz::shipped(""));
#elif defined(GPUPLAN_FUZZ_TARGET_CLI)
  gpuplan::fuzz::run_cli(bytes);
#elif defined(GPUPLAN_FUZZ_TARGET_CALIB)
  gpuplan::fuzz::run_calib(bytes, gpuplan::fuzz::shipped(""));
#elif defined(GPUPLAN_FUZZ_TARGET_SERVING_SCENARIO)
  gpuplan::fuzz::run_serving_scenario(bytes, gpuplan::fuzz::shipped(""));
#elif defined(GPUPLAN_FUZZ_TARGET_PLAN)
  gpuplan::fuzz::run_plan(bytes, gpuplan::fuzz::shipped(""));
#else
#error "define one GPUPLAN_FUZZ_TARGET_*"
#endif
  return 0;
}
