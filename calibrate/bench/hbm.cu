// Memory benches: device copy, read-only (a reduction), triad over sizes from L2-resident to several GiB;
// L2 bandwidth (repeated L2-only reads of a buffer smaller than L2); pinned host<->device copies.
// "bytes" in a sample is the traffic of one operation (bytes read + bytes written); "buffer_bytes" is one array.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common.cuh"

namespace gpuplan::bench {
namespace {

constexpr int kThreads = 256;

__global__ void k_iota(std::uint32_t* p, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = static_cast<std::uint32_t>(i);
}

__global__ void k_triad_init(float* b, float* c, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    b[i] = static_cast<float>(i % 1024) * 0.5f;
    c[i] = static_cast<float>(i % 512) * 0.25f;
  }
}

// 16-byte accesses, four independent loads in flight per thread, grid-stride.
__global__ void k_copy(const uint4* __restrict__ src, uint4* __restrict__ dst, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

__device__ inline std::uint32_t sum4(uint4 v) { return v.x + v.y + v.z + v.w; }

__device__ inline void block_add(std::uint32_t acc, std::uint32_t* out) {
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
  __shared__ std::uint32_t warp_sums[kThreads / 32];
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    std::uint32_t s = 0;
    for (int w = 0; w < kThreads / 32; ++w) s += warp_sums[w];
    atomicAdd(out, s);
  }
}

// Read-only: wrapping 32-bit sum of every word (exact, so the result is checked against n(n-1)/2 mod 2^32).
__global__ void k_read(const uint4* __restrict__ src, std::size_t n, std::uint32_t* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  std::uint32_t acc = 0;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    acc += sum4(a) + sum4(b) + sum4(c) + sum4(d);
  }
  for (; i < n; i += stride) acc += sum4(src[i]);
  block_add(acc, out);
}

// L2: each thread re-reads its slice `reps` times with L2-only loads (ld.global.cg: L1 is bypassed).
__global__ void k_l2_read(const uint4* __restrict__ src, std::size_t n, int reps, std::uint32_t* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::uint32_t acc = 0;
  for (int r = 0; r < reps; ++r) {
    std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
      const uint4 a = __ldcg(src + i), b = __ldcg(src + i + stride), c = __ldcg(src + i + 2 * stride),
                  d = __ldcg(src + i + 3 * stride);
      acc += sum4(a) + sum4(b) + sum4(c) + sum4(d);
    }
    for (; i < n; i += stride) acc += sum4(__ldcg(src + i));
  }
  block_add(acc, out);
}

// a = b + s * c (float4).
__global__ void k_triad(float4* __restrict__ a, const float4* __restrict__ b, const float4* __restrict__ c, float s,
                        std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  auto f = [s](float4 x, float4 y) { return make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w); };
  for (; i + 1 * stride < n; i += 2 * stride) {
    const float4 b0 = b[i], c0 = c[i], b1 = b[i + stride], c1 = c[i + stride];
    a[i] = f(b0, c0);
    a[i + stride] = f(b1, c1);
  }
  for (; i < n; i += stride) a[i] = f(b[i], c[i]);
}

// Counts words of `p` that differ from their expected value (iota, or the triad result).
__global__ void k_check_iota(const std::uint32_t* p, std::size_t n, unsigned long long* bad) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    local += p[i] != static_cast<std::uint32_t>(i);
  if (local) atomicAdd(bad, local);
}
__global__ void k_check_triad(const float* a, std::size_t n, float s, unsigned long long* bad) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float expect = static_cast<float>(i % 1024) * 0.5f + s * (static_cast<float>(i % 512) * 0.25f);
    local += !(a[i] == expect);
  }
  if (local) atomicAdd(bad, local);
}

int grid_for(const Context& ctx, std::size_t n_vec, int per_thread) {
  const std::size_t want = (n_vec + static_cast<std::size_t>(kThreads * per_thread) - 1) / (kThreads * per_thread);
  const std::size_t cap = static_cast<std::size_t>(ctx.prop.multiProcessorCount) * 8;
  return static_cast<int>(std::max<std::size_t>(1, std::min(want, cap)));
}

struct Mem {
  void* p = nullptr;
  explicit Mem(std::size_t b) { GB_CUDA(cudaMalloc(&p, b)); }
  ~Mem() { cudaFree(p); }
  Mem(const Mem&) = delete;
  Mem& operator=(const Mem&) = delete;
};
struct Pinned {
  void* p = nullptr;
  explicit Pinned(std::size_t b) { GB_CUDA(cudaMallocHost(&p, b)); }
  ~Pinned() { cudaFreeHost(p); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
};

std::uint32_t iota_sum(std::size_t words) {
  // sum_{i<n} (uint32)i mod 2^32: the words wrap at 2^32 too.
  std::uint64_t s = 0;
  const std::uint64_t full = words >> 32;  // complete wraps contribute 2^31 * (2^32 - 1) each, = 2^63 - 2^31
  const std::uint64_t rest = words & 0xffffffffULL;
  s += full * ((1ULL << 63) - (1ULL << 31));
  s += rest * (rest - 1) / 2;  // fits: rest < 2^32
  return static_cast<std::uint32_t>(s);
}

void emit(Context& ctx, const std::string& op, std::uint64_t bytes, std::uint64_t buffer_bytes, const Measured& m,
          const std::string& label, Json extra = Json()) {
  if (!m.verdict.ok) {
    ctx.reject("hbm", label, m.verdict.reason, samples_json(m.per_op_s));
    return;
  }
  Json j = Json::object();
  j["op"] = op;
  j["bytes"] = static_cast<unsigned long long>(bytes);
  j["buffer_bytes"] = static_cast<unsigned long long>(buffer_bytes);
  put_timing(j, m);
  j["gbps"] = static_cast<double>(bytes) / m.stats.median / 1e9;
  if (extra.is_object()) {
    for (const char* key : {"reps", "check"})
      if (const Json* v = extra.find(key)) j[key] = *v;
  }
  std::fprintf(stderr, "[hbm] %-28s %10.2f us %9.1f GB/s  spread %.1f%%\n", label.c_str(), m.stats.median * 1e6,
               static_cast<double>(bytes) / m.stats.median / 1e9, 100.0 * m.verdict.spread);
  (*ctx.doc)["hbm"].push_back(std::move(j));
}

}  // namespace

void run_hbm(Context& ctx) {
  Json& out = (*ctx.doc)["hbm"];
  if (out.is_null()) out = Json::array();
  cudaStream_t s = ctx.stream;
  std::size_t free_b = 0, total_b = 0;
  GB_CUDA(cudaMemGetInfo(&free_b, &total_b));
  std::uint64_t max_size = 4ULL << 30;  // per array
  while (max_size * 3 + (1ULL << 30) > free_b && max_size > (1ULL << 20)) max_size /= 2;
  std::vector<std::uint64_t> sizes = pow2_range(1ULL << 20, max_size);
  if (ctx.quick) sizes = {1ULL << 20, 64ULL << 20, 1ULL << 30};
  const std::uint64_t top = sizes.back();
  Mem a(top), b(top), c(top);
  Mem counters(64);
  auto* bad = static_cast<unsigned long long*>(counters.p);
  auto* sum = reinterpret_cast<std::uint32_t*>(static_cast<char*>(counters.p) + 32);

  k_iota<<<1024, 256, 0, s>>>(static_cast<std::uint32_t*>(b.p), top / 4);
  GB_LAUNCH_CHECK();
  for (std::uint64_t size : sizes) {
    const std::size_t nvec = size / 16, words = size / 4;
    // copy b -> a
    {
      const std::string label = "copy " + human_bytes(size);
      const int grid = grid_for(ctx, nvec, 4);
      auto op = [&](long) {
        k_copy<<<grid, kThreads, 0, s>>>(static_cast<const uint4*>(b.p), static_cast<uint4*>(a.p), nvec);
      };
      GB_CUDA(cudaMemsetAsync(a.p, 0xff, size, s));
      op(0);
      GB_CUDA(cudaMemsetAsync(bad, 0, 8, s));
      k_check_iota<<<1024, 256, 0, s>>>(static_cast<const std::uint32_t*>(a.p), words, bad);
      unsigned long long nbad = 0;
      GB_CUDA(cudaMemcpyAsync(&nbad, bad, 8, cudaMemcpyDeviceToHost, s));
      GB_CUDA(cudaStreamSynchronize(s));
      if (nbad) {
        ctx.reject("hbm", label, strprintf("copy check failed: %llu of %zu words wrong", nbad, words));
      } else {
        emit(ctx, "copy", 2 * size, size, measure(ctx, op), label);
      }
    }
    // read-only reduction of b
    {
      const std::string label = "read " + human_bytes(size);
      const int grid = grid_for(ctx, nvec, 4);
      auto op = [&](long) { k_read<<<grid, kThreads, 0, s>>>(static_cast<const uint4*>(b.p), nvec, sum); };
      GB_CUDA(cudaMemsetAsync(sum, 0, 4, s));
      op(0);
      std::uint32_t got = 0;
      GB_CUDA(cudaMemcpyAsync(&got, sum, 4, cudaMemcpyDeviceToHost, s));
      GB_CUDA(cudaStreamSynchronize(s));
      if (got != iota_sum(words)) {
        ctx.reject("hbm", label, strprintf("read check failed: sum %u, expected %u", got, iota_sum(words)));
      } else {
        emit(ctx, "read", size, size, measure(ctx, op), label);
      }
    }
    // triad a = b + 3 c (on float data; b, c re-initialised, restored to iota afterwards for the next size)
    {
      const std::string label = "triad " + human_bytes(size);
      const int grid = grid_for(ctx, nvec, 2);
      k_triad_init<<<1024, 256, 0, s>>>(static_cast<float*>(b.p), static_cast<float*>(c.p), words);
      GB_LAUNCH_CHECK();
      auto op = [&](long) {
        k_triad<<<grid, kThreads, 0, s>>>(static_cast<float4*>(a.p), static_cast<const float4*>(b.p),
                                         static_cast<const float4*>(c.p), 3.0f, nvec);
      };
      GB_CUDA(cudaMemsetAsync(a.p, 0xff, size, s));
      op(0);
      GB_CUDA(cudaMemsetAsync(bad, 0, 8, s));
      k_check_triad<<<1024, 256, 0, s>>>(static_cast<const float*>(a.p), words, 3.0f, bad);
      unsigned long long nbad = 0;
      GB_CUDA(cudaMemcpyAsync(&nbad, bad, 8, cudaMemcpyDeviceToHost, s));
      GB_CUDA(cudaStreamSynchronize(s));
      if (nbad) {
        ctx.reject("hbm", label, strprintf("triad check failed: %llu of %zu words wrong", nbad, words));
      } else {
        emit(ctx, "triad", 3 * size, size, measure(ctx, op), label);
      }
      k_iota<<<1024, 256, 0, s>>>(static_cast<std::uint32_t*>(b.p), top / 4);
      GB_LAUNCH_CHECK();
    }
  }

  // L2: buffers well inside L2, re-read `reps` times inside one kernel with L2-only loads.
  const std::uint64_t l2 = static_cast<std::uint64_t>(ctx.prop.l2CacheSize);
  std::vector<std::uint64_t> l2_sizes;
  for (std::uint64_t x = 2ULL << 20; x <= l2 / 2; x *= 2) l2_sizes.push_back(x);
  if (ctx.quick && l2_sizes.size() > 1) l2_sizes = {l2_sizes.back()};
  for (std::uint64_t size : l2_sizes) {
    const std::size_t nvec = size / 16, words = size / 4;
    const int reps = static_cast<int>(std::max<std::uint64_t>(1, (512ULL << 20) / size));
    const std::string label = "l2_read " + human_bytes(size);
    const int grid = static_cast<int>(ctx.prop.multiProcessorCount) * 8;
    auto op = [&](long) { k_l2_read<<<grid, kThreads, 0, s>>>(static_cast<const uint4*>(b.p), nvec, reps, sum); };
    GB_CUDA(cudaMemsetAsync(sum, 0, 4, s));
    op(0);
    std::uint32_t got = 0;
    GB_CUDA(cudaMemcpyAsync(&got, sum, 4, cudaMemcpyDeviceToHost, s));
    GB_CUDA(cudaStreamSynchronize(s));
    const std::uint32_t expect = static_cast<std::uint32_t>(static_cast<std::uint64_t>(iota_sum(words)) * reps);
    if (got != expect) {
      ctx.reject("hbm", label, strprintf("l2_read check failed: sum %u, expected %u", got, expect));
      continue;
    }
    Json extra = Json::object();
    extra["reps"] = reps;
    emit(ctx, "l2_read", size * static_cast<std::uint64_t>(reps), size, measure(ctx, op), label, extra);
  }

  // Host <-> device over pinned memory (cudaMemcpyAsync, one direction at a time).
  std::vector<std::uint64_t> hd_sizes = {1ULL << 20, 16ULL << 20, 256ULL << 20, 1ULL << 30};
  if (ctx.quick) hd_sizes = {16ULL << 20, 256ULL << 20};
  Pinned host(hd_sizes.back());
  auto* hw = static_cast<std::uint32_t*>(host.p);
  for (std::uint64_t size : hd_sizes) {
    const std::size_t words = size / 4;
    for (std::size_t i = 0; i < words; ++i) hw[i] = static_cast<std::uint32_t>(i);
    {  // h2d into c, checked on the device
      const std::string label = "h2d " + human_bytes(size);
      auto op = [&](long) { GB_CUDA(cudaMemcpyAsync(c.p, host.p, size, cudaMemcpyHostToDevice, s)); };
      GB_CUDA(cudaMemsetAsync(c.p, 0xff, size, s));
      op(0);
      GB_CUDA(cudaMemsetAsync(bad, 0, 8, s));
      k_check_iota<<<1024, 256, 0, s>>>(static_cast<const std::uint32_t*>(c.p), words, bad);
      unsigned long long nbad = 0;
      GB_CUDA(cudaMemcpyAsync(&nbad, bad, 8, cudaMemcpyDeviceToHost, s));
      GB_CUDA(cudaStreamSynchronize(s));
      if (nbad)
        ctx.reject("hbm", label, strprintf("h2d check failed: %llu words wrong", nbad));
      else
        emit(ctx, "h2d", size, size, measure(ctx, op), label);
    }
    {  // d2h from b (iota), checked on the host
      const std::string label = "d2h " + human_bytes(size);
      auto op = [&](long) { GB_CUDA(cudaMemcpyAsync(host.p, b.p, size, cudaMemcpyDeviceToHost, s)); };
      std::fill(hw, hw + words, 0xffffffffu);
      op(0);
      GB_CUDA(cudaStreamSynchronize(s));
      std::size_t nbad = 0;
      for (std::size_t i = 0; i < words; ++i) nbad += hw[i] != static_cast<std::uint32_t>(i);
      if (nbad)
        ctx.reject("hbm", label, strprintf("d2h check failed: %zu words wrong", nbad));
      else
        emit(ctx, "d2h", size, size, measure(ctx, op), label);
    }
  }
}

}  // namespace gpuplan::bench
