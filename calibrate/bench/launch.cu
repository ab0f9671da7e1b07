// Launch overheads: back-to-back empty-kernel launches on one stream (device-side time per launch and host-side
// issue time per launch), launch + synchronize round trips, and CUDA-graph replay of a chain of N dependent empty
// kernels (time per kernel inside a graph, and the fixed cost of one replay).
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "common.cuh"

namespace gpuplan::bench {
namespace {

__global__ void k_empty() {}

__global__ void k_flag(int* p) {
  if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(p, 1);
}

double host_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Json stats_json(const Stats& st, const Verdict& v) {
  Json j = Json::object();
  j["median_s"] = st.median;
  j["min_s"] = st.min;
  j["max_s"] = st.max;
  j["p10_s"] = st.p10;
  j["p90_s"] = st.p90;
  j["spread"] = v.spread;
  j["spread_kind"] = spread_kind_name(v.kind);
  j["samples"] = static_cast<long>(st.n);
  return j;
}

}  // namespace

void run_launch(Context& ctx) {
  Json& L = (*ctx.doc)["launch"];
  L = Json::object();
  // Pin the launching thread to the CPU it is on (less scheduler jitter in host-bound timings); restored at the end.
  cpu_set_t old_set;
  CPU_ZERO(&old_set);
  const bool have_old = sched_getaffinity(0, sizeof old_set, &old_set) == 0;
  const int cpu = sched_getcpu();
  if (have_old && cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) == 0) L["pinned_cpu"] = cpu;
  }
  struct Restore {
    bool on;
    cpu_set_t set;
    ~Restore() {
      if (on) sched_setaffinity(0, sizeof set, &set);
    }
  } restore{have_old, old_set};
  cudaStream_t s = ctx.stream;
  cudaEvent_t e0, e1;
  GB_CUDA(cudaEventCreate(&e0));
  GB_CUDA(cudaEventCreate(&e1));
  const int per_sample = 2000;
  const int samples = 41;  // cheap; the robust spread needs enough of them in a VM with launch jitter
  SpreadRule robust = ctx.rule;
  robust.latency_bound_s = 1.0;  // every launch item is latency-bound: (p90-p10)/median

  // Correctness: a counting kernel launched back to back is seen exactly that many times.
  {
    int* flag = nullptr;
    GB_CUDA(cudaMalloc(&flag, sizeof(int)));
    GB_CUDA(cudaMemsetAsync(flag, 0, sizeof(int), s));
    for (int i = 0; i < per_sample; ++i) k_flag<<<1, 32, 0, s>>>(flag);
    GB_LAUNCH_CHECK();
    int got = 0;
    GB_CUDA(cudaMemcpyAsync(&got, flag, sizeof(int), cudaMemcpyDeviceToHost, s));
    GB_CUDA(cudaStreamSynchronize(s));
    GB_CUDA(cudaFree(flag));
    L["check"] = got == per_sample ? "ok: every launch ran" : "FAILED";
    if (got != per_sample) {
      ctx.reject("launch", "launch check", strprintf("%d of %d launches ran", got, per_sample));
      return;
    }
  }

  // 1. Back-to-back launches: device time per launch (events) and host issue time per launch.
  for (int w = 0; w < 2000; ++w) k_empty<<<1, 1, 0, s>>>();
  GB_CUDA(cudaStreamSynchronize(s));
  std::vector<double> dev, host;
  for (int k = 0; k < samples; ++k) {
    GB_CUDA(cudaEventRecord(e0, s));
    const double t0 = host_now();
    for (int i = 0; i < per_sample; ++i) k_empty<<<1, 1, 0, s>>>();
    const double t1 = host_now();
    GB_CUDA(cudaEventRecord(e1, s));
    GB_CUDA(cudaEventSynchronize(e1));
    GB_LAUNCH_CHECK();
    float ms = 0;
    GB_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    dev.push_back(static_cast<double>(ms) * 1e-3 / per_sample);
    host.push_back((t1 - t0) / per_sample);
  }
  {
    const Stats st = compute_stats(dev);
    const Verdict v = judge(st, robust, st.median);
    const Stats sh = compute_stats(host);
    if (!v.ok) {
      ctx.reject("launch", "launch back-to-back", v.reason, samples_json(dev));
    } else {
      L["launch_s"] = st.median;
      L["launch_spread"] = v.spread;
      L["launch_host_s"] = sh.median;
      L["launch_detail"] = stats_json(st, v);
      L["launches_per_sample"] = per_sample;
    }
    std::fprintf(stderr, "[launch] back-to-back empty kernel: %.3f us per launch (device), %.3f us host issue\n",
                 st.median * 1e6, sh.median * 1e6);
  }

  // 2. Launch + synchronize round trip (host clock).
  {
    std::vector<double> rt;
    for (int i = 0; i < 200; ++i) {
      k_empty<<<1, 1, 0, s>>>();
      GB_CUDA(cudaStreamSynchronize(s));
    }
    for (int k = 0; k < samples; ++k) {
      const double t0 = host_now();
      for (int i = 0; i < 200; ++i) {
        k_empty<<<1, 1, 0, s>>>();
        GB_CUDA(cudaStreamSynchronize(s));
      }
      rt.push_back((host_now() - t0) / 200);
    }
    const Stats st = compute_stats(rt);
    const Verdict v = judge(st, robust, st.median);
    if (!v.ok)
      ctx.reject("launch", "launch+sync round trip", v.reason, samples_json(rt));
    else
      L["launch_sync_s"] = st.median;
    std::fprintf(stderr, "[launch] launch + synchronize round trip: %.3f us\n", st.median * 1e6);
  }

  // 3. CUDA graphs: a chain of N dependent empty kernels (stream capture serialises them), replayed.
  Json graphs = Json::array();
  std::vector<int> ns = {1, 10, 100, 1000};
  double per_kernel_1000 = 0, fixed = 0;
  std::vector<std::pair<double, double>> pts;  // (N, replay seconds)
  for (int n : ns) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    GB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < n; ++i) k_empty<<<1, 1, 0, s>>>();
    GB_CUDA(cudaStreamEndCapture(s, &g));
    GB_CUDA(cudaGraphInstantiate(&ge, g, 0));
    GB_CUDA(cudaGraphUpload(ge, s));
    const int replays = std::max(1, 2000 / n);
    for (int w = 0; w < replays; ++w) GB_CUDA(cudaGraphLaunch(ge, s));
    GB_CUDA(cudaStreamSynchronize(s));
    std::vector<double> per_replay;
    for (int k = 0; k < samples; ++k) {
      GB_CUDA(cudaEventRecord(e0, s));
      for (int r = 0; r < replays; ++r) GB_CUDA(cudaGraphLaunch(ge, s));
      GB_CUDA(cudaEventRecord(e1, s));
      GB_CUDA(cudaEventSynchronize(e1));
      float ms = 0;
      GB_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      per_replay.push_back(static_cast<double>(ms) * 1e-3 / replays);
    }
    GB_CUDA(cudaGraphExecDestroy(ge));
    GB_CUDA(cudaGraphDestroy(g));
    const Stats st = compute_stats(per_replay);
    const Verdict v = judge(st, robust, st.median);
    const std::string label = strprintf("graph replay, chain of %d kernels", n);
    if (!v.ok) {
      ctx.reject("launch", label, v.reason, samples_json(per_replay));
      continue;
    }
    Json j = stats_json(st, v);
    j["kernels"] = n;
    j["replays_per_sample"] = replays;
    j["per_kernel_s"] = st.median / n;
    graphs.push_back(std::move(j));
    pts.emplace_back(n, st.median);
    if (n == 1000) per_kernel_1000 = st.median / n;
    std::fprintf(stderr, "[launch] graph of %4d dependent empty kernels: %.3f us per replay, %.3f us per kernel\n", n,
                 st.median * 1e6, st.median / n * 1e6);
  }
  // Least-squares line replay(N) = fixed + N * per_kernel over the graphs measured.
  if (pts.size() >= 2) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (auto [x, y] : pts) sx += x, sy += y, sxx += x * x, sxy += x * y;
    const double n = static_cast<double>(pts.size());
    const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    fixed = (sy - slope * sx) / n;
    L["graph_kernel_slope_s"] = slope;
    L["graph_replay_fixed_s"] = fixed;
  }
  if (per_kernel_1000 > 0) {
    L["graph_kernel_s"] = per_kernel_1000;
    L["graph_kernels"] = 1000;
  }
  L["graphs"] = std::move(graphs);
  L["note"] =
      "launch_s: device time per empty kernel launched back to back on one stream (CUDA events over 2000 launches); "
      "launch_host_s: host time per cudaLaunchKernel call in that loop; launch_sync_s: launch + "
      "cudaStreamSynchronize round trip (host clock); graph_kernel_s: replay time of a captured chain of "
      "graph_kernels dependent empty kernels divided by their number; graph_kernel_slope_s and "
      "graph_replay_fixed_s: least-squares line over chains of 1, 10, 100, 1000 kernels";
  GB_CUDA(cudaEventDestroy(e0));
  GB_CUDA(cudaEventDestroy(e1));
}

}  // namespace gpuplan::bench
