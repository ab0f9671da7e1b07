// Shared CUDA-side helpers of gpuplan-bench: error checks, the timing loop with the refusal rule, the context
// that every bench writes its samples into.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_host.hpp"

namespace gpuplan::bench {

[[noreturn]] inline void fail(const char* file, int line, const std::string& what) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what);
}

#define GB_CUDA(call)                                                                                 \
  do {                                                                                                \
    cudaError_t err_ = (call);                                                                        \
    if (err_ != cudaSuccess)                                                                          \
      ::gpuplan::bench::fail(__FILE__, __LINE__, std::string(#call) + ": " + cudaGetErrorString(err_)); \
  } while (0)

#define GB_LAUNCH_CHECK() GB_CUDA(cudaGetLastError())

inline std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string strprintf(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

inline std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// What every bench gets: the device, the refusal rule, the time budget, and the output document.
struct Context {
  int device = 0;
  cudaDeviceProp prop{};
  SpreadRule rule{};
  double item_budget_s = 0.04;   // timed samples of one item take about this long (at least rule.min_samples)
  double min_sample_s = 1e-3;    // one timed sample (a batch of operations) lasts at least this long
  double graph_below_s = 50e-6;  // operations faster than this are timed inside a CUDA graph
  int max_samples = 25;
  int retries = 1;               // a refused item is measured again this many times before it is recorded as rejected
  bool quick = false;
  double sustained_s = 20;       // the sustained bench: how long it keeps one GEMM running
  std::vector<std::string> gemm_dtypes;  // empty: all
  bool fp8_split_accumulation = false;   // fp8 GEMMs with cuBLASLt's fast accumulation off (Transformer Engine's
                                         // dgrad/wgrad setting), not the default fast accumulation
  Json* doc = nullptr;
  cudaStream_t stream = nullptr;

  void reject(const std::string& bench, const std::string& item, const std::string& reason, Json extra = Json()) {
    Json r = Json::object();
    r["bench"] = bench;
    r["item"] = item;
    r["reason"] = reason;
    if (!extra.is_null()) r["samples_s"] = std::move(extra);
    (*doc)["rejected"].push_back(std::move(r));
    std::fprintf(stderr, "  REJECTED %s %s: %s\n", bench.c_str(), item.c_str(), reason.c_str());
  }
};

// The result of timing one item.
struct Measured {
  Stats stats;          // per operation, seconds
  Verdict verdict;
  Plan plan;
  int attempts = 0;
  int graph_ops = 0;             // >0: timed as replays of a CUDA graph of this many operations
  std::vector<double> per_op_s;  // the samples of the last attempt (per operation)
};

// Times `op` (which enqueues one operation on ctx.stream; `i` is the operation's index, for buffer rotation):
// warm-up, an estimate, a plan (batch x samples), then samples timed with CUDA events; the rule judges the spread;
// a refused attempt is repeated up to ctx.retries times. Operations faster than ctx.graph_below_s are captured into a
// CUDA graph of up to 256 operations and timed by replaying it: back-to-back stream launches of a few-microsecond
// kernel measure the host's launch rate, not the kernel (launch costs are measured separately, by `launch`).
template <class Op>
Measured measure(Context& ctx, Op&& op, int warmup = 2) {
  Measured m;
  cudaEvent_t e0, e1;
  GB_CUDA(cudaEventCreate(&e0));
  GB_CUDA(cudaEventCreate(&e1));
  long idx = 0;
  cudaGraphExec_t ge = nullptr;
  int graph_ops = 0;
  // One sample: n operations (stream mode) or n replays of the graph (graph mode); returns seconds per operation.
  auto timed = [&](int n) {
    GB_CUDA(cudaEventRecord(e0, ctx.stream));
    if (ge) {
      for (int j = 0; j < n; ++j) GB_CUDA(cudaGraphLaunch(ge, ctx.stream));
    } else {
      for (int j = 0; j < n; ++j) op(idx++);
    }
    GB_CUDA(cudaEventRecord(e1, ctx.stream));
    GB_CUDA(cudaEventSynchronize(e1));
    GB_LAUNCH_CHECK();
    float ms = 0;
    GB_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    return static_cast<double>(ms) * 1e-3 / (static_cast<double>(n) * (ge ? graph_ops : 1));
  };
  // Warm-up (module load, heuristics, clocks up): at least `warmup` ops and about 20 ms.
  double est = timed(1);
  for (int w = 1; w < warmup || (w < 64 && est * w < 0.02); ++w) est = std::min(est, timed(1));
  // Estimate on a short batch (launch gaps included, as in the timed samples).
  const int est_batch = est < 1e-4 ? 16 : (est < 2e-3 ? 4 : 1);
  est = timed(est_batch);
  m.plan = plan_samples(est, ctx.min_sample_s, ctx.item_budget_s, static_cast<int>(ctx.rule.min_samples),
                        ctx.max_samples, 4096);
  if (est < ctx.graph_below_s) {
    graph_ops = std::clamp(m.plan.batch, 16, 256);
    cudaGraph_t g = nullptr;
    GB_CUDA(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeThreadLocal));
    try {
      for (int j = 0; j < graph_ops; ++j) op(idx++);
    } catch (...) {
      cudaStreamEndCapture(ctx.stream, &g);
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();
      throw;
    }
    GB_CUDA(cudaStreamEndCapture(ctx.stream, &g));
    GB_CUDA(cudaGraphInstantiate(&ge, g, 0));
    GB_CUDA(cudaGraphDestroy(g));
    GB_CUDA(cudaGraphUpload(ge, ctx.stream));
    for (int w = 0; w < 3; ++w) est = timed(1);
    m.plan = plan_samples(est * graph_ops, ctx.min_sample_s, ctx.item_budget_s, static_cast<int>(ctx.rule.min_samples),
                          ctx.max_samples, 4096);  // batch = graph replays per sample
    m.graph_ops = graph_ops;
  }
  for (m.attempts = 1; m.attempts <= 1 + ctx.retries; ++m.attempts) {
    m.per_op_s.clear();
    for (int s = 0; s < m.plan.samples; ++s) m.per_op_s.push_back(timed(m.plan.batch));
    m.stats = compute_stats(m.per_op_s);
    m.verdict = judge(m.stats, ctx.rule, m.stats.median);
    if (m.verdict.ok) break;
  }
  if (m.attempts > 1 + ctx.retries) m.attempts = 1 + ctx.retries;
  if (ge) GB_CUDA(cudaGraphExecDestroy(ge));
  GB_CUDA(cudaEventDestroy(e0));
  GB_CUDA(cudaEventDestroy(e1));
  return m;
}

inline Json samples_json(const std::vector<double>& xs) {
  Json a = Json::array();
  for (double x : xs) a.push_back(x);
  return a;
}

// Fills the common timing keys of one emitted sample.
inline void put_timing(Json& j, const Measured& m) {
  j["median_s"] = m.stats.median;
  j["min_s"] = m.stats.min;
  j["max_s"] = m.stats.max;
  j["p10_s"] = m.stats.p10;
  j["p90_s"] = m.stats.p90;
  j["spread"] = m.verdict.spread;
  j["spread_kind"] = spread_kind_name(m.verdict.kind);
  j["samples"] = static_cast<long>(m.stats.n);
  j["batch"] = m.plan.batch;
  j["timing"] = m.graph_ops > 0 ? "cuda_graph" : "stream";
  if (m.graph_ops > 0) j["graph_ops"] = m.graph_ops;
  j["attempts"] = m.attempts;
}

// Benches (each appends to ctx.doc).
void run_gemm(Context& ctx);
void run_attention(Context& ctx);
void run_hbm(Context& ctx);
void run_launch(Context& ctx);
void run_sustained(Context& ctx);
void run_accumulate(Context& ctx);
void run_gemm_depth(Context& ctx);

// Deterministic pseudo-random numbers for fills (splitmix64-style hash of the index).
__host__ __device__ inline unsigned long long hash64(unsigned long long x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
// Uniform in [-1, 1).
__host__ __device__ inline float uniform_pm1(unsigned long long seed, unsigned long long i) {
  const unsigned long long h = hash64(seed * 0x100000001b3ULL + i);
  return static_cast<float>(static_cast<double>(h >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

}  // namespace gpuplan::bench
