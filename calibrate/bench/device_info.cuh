// Provenance: device properties (CUDA), software versions, and conditions (NVML, loaded with dlopen from the
// driver; every field is optional and the bench runs without NVML, saying so).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>

#include <string>

#include "common.cuh"

#ifdef GPUPLAN_BENCH_HAVE_NCCL
#include <nccl.h>
#endif

#ifndef GPUPLAN_BENCH_CUDA_ARCHS
#define GPUPLAN_BENCH_CUDA_ARCHS "unknown"
#endif
#ifndef GPUPLAN_BENCH_VERSION
#define GPUPLAN_BENCH_VERSION "0.1.0"
#endif

namespace gpuplan::bench {

class Nvml {
 public:
  using Dev = void*;
  static Nvml& get() {
    static Nvml n;
    return n;
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return err_; }

  Dev by_uuid(const std::string& uuid) const {
    Dev d = nullptr;
    if (!ok_ || !by_uuid_ || by_uuid_(uuid.c_str(), &d) != 0) return nullptr;
    return d;
  }
  std::string driver() const {
    char buf[96] = {};
    if (!ok_ || !driver_ || driver_(buf, sizeof buf) != 0) return "";
    return buf;
  }

  // Conditions now: temperature, power, clocks, clock-event reasons, performance state, energy counter.
  Json snapshot(Dev d) const {
    Json j = Json::object();
    j["utc"] = utc_now();
    if (!ok_ || !d) {
      j["nvml"] = ok_ ? "device not found in NVML" : ("NVML unavailable: " + err_);
      return j;
    }
    unsigned v = 0;
    if (temp_ && temp_(d, 0, &v) == 0) j["temperature_c"] = v;
    if (power_ && power_(d, &v) == 0) j["power_w"] = v / 1000.0;
    if (plimit_ && plimit_(d, &v) == 0) j["power_limit_w"] = v / 1000.0;
    if (clock_ && clock_(d, 1, &v) == 0) j["sm_clock_mhz"] = v;
    if (clock_ && clock_(d, 2, &v) == 0) j["mem_clock_mhz"] = v;
    if (clock_ && clock_(d, 0, &v) == 0) j["graphics_clock_mhz"] = v;
    int ps = -1;
    if (pstate_ && pstate_(d, &ps) == 0) j["pstate"] = "P" + std::to_string(ps);
    unsigned long long r = 0;
    if (reasons_ && reasons_(d, &r) == 0) {
      j["clocks_event_reasons"] = strprintf("0x%llx", r);
      std::string names;
      const struct {
        unsigned long long bit;
        const char* name;
      } bits[] = {{0x1, "gpu_idle"},         {0x2, "applications_clocks"}, {0x4, "sw_power_cap"},
                  {0x8, "hw_slowdown"},      {0x10, "sync_boost"},          {0x20, "sw_thermal_slowdown"},
                  {0x40, "hw_thermal_slowdown"}, {0x80, "hw_power_brake"},  {0x100, "display_clocks"}};
      for (const auto& b : bits)
        if (r & b.bit) names += (names.empty() ? "" : ",") + std::string(b.name);
      j["clocks_event_reasons_names"] = names;
    }
    unsigned long long mj = 0;
    if (energy_ && energy_(d, &mj) == 0) j["energy_j"] = static_cast<double>(mj) / 1000.0;
    return j;
  }

  // Max clocks (MHz) from NVML.
  void max_clocks(Dev d, Json& out) const {
    if (!ok_ || !d || !maxclock_) return;
    unsigned v = 0;
    if (maxclock_(d, 1, &v) == 0) out["sm_clock_max_mhz"] = v;
    if (maxclock_(d, 2, &v) == 0) out["mem_clock_max_mhz"] = v;
    if (plimit_ && plimit_(d, &v) == 0) out["power_limit_w"] = v / 1000.0;
  }

 private:
  Nvml() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) lib_ = dlopen("libnvidia-ml.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      const char* e = dlerror();
      err_ = e ? e : "dlopen(libnvidia-ml.so.1) failed";
      return;
    }
    auto sym = [&](const char* n) { return dlsym(lib_, n); };
    auto init = reinterpret_cast<int (*)()>(sym("nvmlInit_v2"));
    if (!init || init() != 0) {
      err_ = "nvmlInit_v2 failed";
      return;
    }
    by_uuid_ = reinterpret_cast<int (*)(const char*, Dev*)>(sym("nvmlDeviceGetHandleByUUID"));
    driver_ = reinterpret_cast<int (*)(char*, unsigned)>(sym("nvmlSystemGetDriverVersion"));
    temp_ = reinterpret_cast<int (*)(Dev, int, unsigned*)>(sym("nvmlDeviceGetTemperature"));
    power_ = reinterpret_cast<int (*)(Dev, unsigned*)>(sym("nvmlDeviceGetPowerUsage"));
    plimit_ = reinterpret_cast<int (*)(Dev, unsigned*)>(sym("nvmlDeviceGetEnforcedPowerLimit"));
    clock_ = reinterpret_cast<int (*)(Dev, int, unsigned*)>(sym("nvmlDeviceGetClockInfo"));
    maxclock_ = reinterpret_cast<int (*)(Dev, int, unsigned*)>(sym("nvmlDeviceGetMaxClockInfo"));
    pstate_ = reinterpret_cast<int (*)(Dev, int*)>(sym("nvmlDeviceGetPerformanceState"));
    reasons_ = reinterpret_cast<int (*)(Dev, unsigned long long*)>(sym("nvmlDeviceGetCurrentClocksEventReasons"));
    if (!reasons_)
      reasons_ = reinterpret_cast<int (*)(Dev, unsigned long long*)>(sym("nvmlDeviceGetCurrentClocksThrottleReasons"));
    energy_ = reinterpret_cast<int (*)(Dev, unsigned long long*)>(sym("nvmlDeviceGetTotalEnergyConsumption"));
    ok_ = true;
  }
  ~Nvml() {
    if (ok_) {
      if (auto shut = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlShutdown"))) shut();
    }
  }
  void* lib_ = nullptr;
  bool ok_ = false;
  std::string err_;
  int (*by_uuid_)(const char*, Dev*) = nullptr;
  int (*driver_)(char*, unsigned) = nullptr;
  int (*temp_)(Dev, int, unsigned*) = nullptr;
  int (*power_)(Dev, unsigned*) = nullptr;
  int (*plimit_)(Dev, unsigned*) = nullptr;
  int (*clock_)(Dev, int, unsigned*) = nullptr;
  int (*maxclock_)(Dev, int, unsigned*) = nullptr;
  int (*pstate_)(Dev, int*) = nullptr;
  int (*reasons_)(Dev, unsigned long long*) = nullptr;
  int (*energy_)(Dev, unsigned long long*) = nullptr;
};

inline std::string device_uuid(int dev) {
  cudaDeviceProp p{};
  GB_CUDA(cudaGetDeviceProperties(&p, dev));
  return format_uuid(reinterpret_cast<const unsigned char*>(p.uuid.bytes));
}

inline Json device_json(int dev, const cudaDeviceProp& p) {
  Json d = Json::object();
  d["name"] = p.name;
  d["uuid"] = format_uuid(reinterpret_cast<const unsigned char*>(p.uuid.bytes));
  char bus[32] = {};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, dev) == cudaSuccess) d["pci_bus_id"] = bus;
  d["cuda_device_index"] = dev;
  if (const char* vis = std::getenv("CUDA_VISIBLE_DEVICES")) d["cuda_visible_devices"] = vis;
  d["compute_capability"] = strprintf("%d.%d", p.major, p.minor);
  d["sm_count"] = p.multiProcessorCount;
  d["l2_bytes"] = p.l2CacheSize;
  d["memory_bytes"] = static_cast<unsigned long long>(p.totalGlobalMem);
  d["shared_memory_per_sm_bytes"] = static_cast<unsigned long long>(p.sharedMemPerMultiprocessor);
  int v = 0;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrGlobalMemoryBusWidth, dev) == cudaSuccess) d["memory_bus_width_bits"] = v;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, dev) == cudaSuccess) d["sm_clock_peak_khz_cuda"] = v;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMemoryClockRate, dev) == cudaSuccess) d["mem_clock_peak_khz_cuda"] = v;
  Nvml& n = Nvml::get();
  n.max_clocks(n.by_uuid(d.find("uuid")->as_string()), d);
  return d;
}

inline Json software_json() {
  Json s = Json::object();
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  s["cuda_runtime"] = strprintf("%d.%d", rt / 1000, (rt % 1000) / 10);
  s["cuda_driver_api"] = strprintf("%d.%d", drv / 1000, (drv % 1000) / 10);
  const std::string driver = Nvml::get().driver();
  if (!driver.empty()) s["driver"] = driver;
  const std::size_t lt = cublasLtGetVersion();
  s["cublaslt"] = strprintf("%zu.%zu.%zu", lt / 10000, (lt / 100) % 100, lt % 100);
#ifdef GPUPLAN_BENCH_HAVE_NCCL
  int nv = 0;
  if (ncclGetVersion(&nv) == ncclSuccess) s["nccl"] = strprintf("%d.%d.%d", nv / 10000, (nv / 100) % 100, nv % 100);
#else
  s["nccl"] = "not built";
#endif
  s["nvcc"] = strprintf("%d.%d.%d", __CUDACC_VER_MAJOR__, __CUDACC_VER_MINOR__, __CUDACC_VER_BUILD__);
#if defined(__clang__)
  s["host_compiler"] = strprintf("clang %d.%d.%d", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  s["host_compiler"] = strprintf("gcc %d.%d.%d", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#endif
  s["cuda_architectures"] = GPUPLAN_BENCH_CUDA_ARCHS;
  s["bench_version"] = GPUPLAN_BENCH_VERSION;
  s["nvml"] = Nvml::get().ok() ? "loaded (libnvidia-ml.so.1, dlopen)" : ("unavailable: " + Nvml::get().error());
  return s;
}

inline std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

}  // namespace gpuplan::bench
