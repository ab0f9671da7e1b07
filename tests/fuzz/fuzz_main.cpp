// libFuzzer entry point, compiled once per target with GPUPLAN_FUZZ_TARGET_{HW,MODEL,SCENARIO,CLI,CALIB,SERVING_SCENARIO,PLAN} defined.
// The shipped data come from $GPUPLAN_FUZZ_DATA_DIR, else from this source tree's data/ (GPUPLAN_FUZZ_DATA_DIR).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_paths.hpp"

namespace {
std::string data_dir() {
  const char* env = std::getenv("GPUPLAN_FUZZ_DATA_DIR");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(GPUPLAN_FUZZ_DATA_DIR);
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
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
