// GEMM and attention-GEMM benches through cuBLASLt.
//
// Convention of the emitted samples (row-major, as a linear layer sees it): Y[m, n] = X[m, k] . W[n, k]^T with
// m = tokens, k = input features, n = output features. cuBLASLt is column-major, so this runs as the "TN" product
// D(n x m) = op(A)(n x k) . B(k x m) with A = W (transposed), B = X, D = Y — the layout PyTorch's nn.Linear uses,
// and the only one cuBLASLt supports for fp8 on Hopper.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "busy_gemm.hpp"
#include "common.cuh"
#include "device_info.cuh"

namespace gpuplan::bench {

#define GB_CUBLAS(call)                                                                                     \
  do {                                                                                                      \
    cublasStatus_t st_ = (call);                                                                            \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                       \
      ::gpuplan::bench::fail(__FILE__, __LINE__, std::string(#call) + ": cublas status " + std::to_string(st_)); \
  } while (0)

namespace {

enum class DType { BF16, FP16, TF32, FP32, FP8 };

struct DTypeInfo {
  DType t;
  const char* name;
  cudaDataType_t ab;
  cudaDataType_t cd;
  cublasComputeType_t compute;
  std::size_t ab_bytes;
  std::size_t cd_bytes;
  int min_cc;  // compute capability x10
};

const std::vector<DTypeInfo>& dtypes() {
  static const std::vector<DTypeInfo> v = {
      {DType::BF16, "bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2, 80},
      {DType::FP16, "fp16", CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2, 70},
      {DType::TF32, "tf32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4, 80},
      {DType::FP32, "fp32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, 4, 0},
      {DType::FP8, "fp8", CUDA_R_8F_E4M3, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 1, 2, 89},
  };
  return v;
}

// ---- device helpers: fill, poison-aware reference check ------------------------------------------------------
template <class T>
__device__ inline T from_float(float x);
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <>
__device__ inline __half from_float<__half>(float x) { return __float2half(x); }
template <>
__device__ inline float from_float<float>(float x) { return x; }
template <>
__device__ inline __nv_fp8_e4m3 from_float<__nv_fp8_e4m3>(float x) { return __nv_fp8_e4m3(x); }

__device__ inline double to_double(__nv_bfloat16 x) { return static_cast<double>(__bfloat162float(x)); }
__device__ inline double to_double(__half x) { return static_cast<double>(__half2float(x)); }
__device__ inline double to_double(float x) { return static_cast<double>(x); }
__device__ inline double to_double(__nv_fp8_e4m3 x) { return static_cast<double>(static_cast<float>(x)); }

template <class T>
__global__ void k_fill(T* p, std::size_t n, unsigned long long seed) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    p[i] = from_float<T>(uniform_pm1(seed, i));
}

template <class T>
void fill(T* p, std::size_t n, unsigned long long seed, cudaStream_t s) {
  k_fill<T><<<1024, 256, 0, s>>>(p, n, seed);
  GB_LAUNCH_CHECK();
}

struct Problem {  // one cuBLASLt problem, column-major terms
  bool transa = true;
  std::int64_t M = 0, N = 0, K = 0;  // D is M x N, op(A) is M x K, B is K x N
  std::int64_t lda = 0, ldb = 0, ldd = 0;
  std::int64_t batch = 1, sA = 0, sB = 0, sD = 0;  // strides in elements (batched)
};

// One thread per sampled output element: the reference in float64 from the same inputs, and the norm of the
// products (the scale of the rounding error). err[i] = |got - ref| / max(norm, tiny); NaN when got is NaN.
template <class TA, class TD>
__global__ void k_check(const TA* A, const TA* B, const TD* D, Problem p, int nsamples, unsigned long long seed,
                        double* err) {
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= nsamples) return;
  std::int64_t b, i, j;
  if (s < 4) {  // the corners of the first and the last batch
    b = (s & 2) ? p.batch - 1 : 0;
    i = (s & 1) ? p.M - 1 : 0;
    j = (s & 1) ? p.N - 1 : 0;
  } else {
    const unsigned long long h = hash64(seed ^ (0x51ed270b27ULL * static_cast<unsigned long long>(s)));
    b = static_cast<std::int64_t>(h % static_cast<unsigned long long>(p.batch));
    i = static_cast<std::int64_t>((h >> 20) % static_cast<unsigned long long>(p.M));
    j = static_cast<std::int64_t>((h >> 42) % static_cast<unsigned long long>(p.N));
  }
  const TA* a = A + b * p.sA;
  const TA* bb = B + b * p.sB;
  double ref = 0, norm2 = 0;
  for (std::int64_t k = 0; k < p.K; ++k) {
    const double av = to_double(p.transa ? a[k + i * p.lda] : a[i + k * p.lda]);
    const double bv = to_double(bb[k + j * p.ldb]);
    ref += av * bv;
    norm2 += (av * bv) * (av * bv);
  }
  const double got = to_double(D[b * p.sD + i + j * p.ldd]);
  const double norm = sqrt(norm2) > 1e-30 ? sqrt(norm2) : 1e-30;
  err[s] = fabs(got - ref) / norm;  // NaN propagates
}

struct DevBuf {
  void* p = nullptr;
  DevBuf() = default;
  explicit DevBuf(std::size_t bytes) { GB_CUDA(cudaMalloc(&p, bytes)); }
  ~DevBuf() {
    if (p) cudaFree(p);
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p(o.p) { o.p = nullptr; }
  DevBuf& operator=(DevBuf&& o) noexcept {
    std::swap(p, o.p);
    return *this;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

std::size_t round_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

// ---- cuBLASLt plumbing ---------------------------------------------------------------------------------------
struct Lt {
  cublasLtHandle_t h = nullptr;
  DevBuf workspace;
  std::size_t workspace_bytes = 32u << 20;  // 32 MiB, what cuBLAS recommends on Hopper
  DevBuf scales;                            // two floats = 1.0 (fp8 A/B scale pointers)
  Lt() {
    GB_CUBLAS(cublasLtCreate(&h));
    workspace = DevBuf(workspace_bytes);
    scales = DevBuf(2 * sizeof(float));
    const float one[2] = {1.0f, 1.0f};
    GB_CUDA(cudaMemcpy(scales.p, one, sizeof one, cudaMemcpyHostToDevice));
  }
  ~Lt() {
    if (h) cublasLtDestroy(h);
  }
};

Lt& lt() {
  static Lt instance;
  return instance;
}

struct LtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::string algo_desc;
  bool ok = false;
  std::string why;
  int variant = 0;
  ~LtPlan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

void set_batch(cublasLtMatrixLayout_t l, std::int64_t batch, std::int64_t stride) {
  if (batch <= 1) return;
  const int bc = static_cast<int>(batch);
  GB_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
  GB_CUBLAS(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
}

// fp8 variants, tried in order until cuBLASLt runs one: bit 0 = fast accumulation off, bit 1 = C in its own buffer
// (not aliased with D), bit 2 = no scale pointers (scales default to 1).
void make_plan(LtPlan& pl, const DTypeInfo& dt, const Problem& p, int variant = 0) {
  Lt& L = lt();
  GB_CUBLAS(cublasLtMatmulDescCreate(&pl.op, dt.compute, CUDA_R_32F));
  const cublasOperation_t ta = p.transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  GB_CUBLAS(cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  GB_CUBLAS(cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (dt.t == DType::FP8) {
    if (!(variant & 4)) {
      const float* sa = L.scales.as<float>();
      const float* sb = sa + 1;
      GB_CUBLAS(cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
      GB_CUBLAS(cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
    }
    const std::int8_t fast = (variant & 1) ? 0 : 1;
    GB_CUBLAS(cublasLtMatmulDescSetAttribute(pl.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
    pl.variant = variant;
  }
  const auto rowsA = static_cast<std::uint64_t>(p.transa ? p.K : p.M);
  const auto colsA = static_cast<std::uint64_t>(p.transa ? p.M : p.K);
  GB_CUBLAS(cublasLtMatrixLayoutCreate(&pl.a, dt.ab, rowsA, colsA, p.lda));
  GB_CUBLAS(cublasLtMatrixLayoutCreate(&pl.b, dt.ab, static_cast<std::uint64_t>(p.K), static_cast<std::uint64_t>(p.N), p.ldb));
  GB_CUBLAS(cublasLtMatrixLayoutCreate(&pl.d, dt.cd, static_cast<std::uint64_t>(p.M), static_cast<std::uint64_t>(p.N), p.ldd));
  set_batch(pl.a, p.batch, p.sA);
  set_batch(pl.b, p.batch, p.sB);
  set_batch(pl.d, p.batch, p.sD);

  cublasLtMatmulPreference_t pref = nullptr;
  GB_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  GB_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &L.workspace_bytes,
                                                 sizeof L.workspace_bytes));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(L.h, pl.op, pl.a, pl.b, pl.d, pl.d, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    pl.ok = false;
    pl.why = "cuBLASLt heuristic found no algorithm (status " + std::to_string(st) + ")";
    return;
  }
  pl.algo = res.algo;
  int id = -1, splitk = -1;
  std::uint32_t tile = 0, stages = 0;
  std::size_t w = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&pl.algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&pl.algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&pl.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
  cublasLtMatmulAlgoConfigGetAttribute(&pl.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w);
  pl.algo_desc = strprintf("cublasLt heuristic#1 algo=%d tile=%u stages=%u splitk=%d ws=%zu", id, tile, stages, splitk,
                           res.workspaceSize);
  pl.ok = true;
}

cublasStatus_t matmul_status(const LtPlan& pl, const void* A, const void* B, const void* C, void* D, cudaStream_t s,
                             float beta = 0.0f) {
  Lt& L = lt();
  const float alpha = 1.0f;
  return cublasLtMatmul(L.h, pl.op, &alpha, A, pl.a, B, pl.b, &beta, C ? C : D, pl.d, D, pl.d, &pl.algo,
                        L.workspace.p, L.workspace_bytes, s);
}
void matmul(const LtPlan& pl, const void* A, const void* B, const void* C, void* D, cudaStream_t s) {
  GB_CUBLAS(matmul_status(pl, A, B, C, D, s));
}

// The plan of the first configuration cuBLASLt runs for this product, D poisoned and computed once (its result is what
// the caller checks); fp8 tries the variants of make_plan in order, allocating C (zeroed) when a variant needs it
// apart from D, only those with fast accumulation off when `split_accumulation`. Null with what each variant said in
// `tried` when none runs.
std::unique_ptr<LtPlan> first_runnable_plan(const DTypeInfo& dt, const Problem& p, const void* A, const void* B,
                                            DevBuf& Cbuf, void* D, std::size_t d_bytes, cudaStream_t s,
                                            std::string& tried, bool split_accumulation = false) {
  const std::vector<int> fp8_variants =
      split_accumulation ? std::vector<int>{1, 3, 5, 7} : std::vector<int>{0, 2, 1, 3, 4, 6, 5, 7};
  for (int variant : dt.t == DType::FP8 ? fp8_variants : std::vector<int>{0}) {
    auto cand = std::make_unique<LtPlan>();
    make_plan(*cand, dt, p, variant);
    if (!cand->ok) {
      tried += strprintf(" [variant %d: %s]", variant, cand->why.c_str());
      continue;
    }
    if ((variant & 2) && !Cbuf.p) {
      Cbuf = DevBuf(d_bytes);
      GB_CUDA(cudaMemsetAsync(Cbuf.p, 0, d_bytes, s));
    }
    GB_CUDA(cudaMemsetAsync(D, 0xff, d_bytes, s));
    const cublasStatus_t st = matmul_status(*cand, A, B, (variant & 2) ? Cbuf.p : nullptr, D, s);
    if (st == CUBLAS_STATUS_SUCCESS) return cand;
    tried += strprintf(" [variant %d: cublasLtMatmul status %d]", variant, static_cast<int>(st));
  }
  return nullptr;
}


template <class TA, class TD>
double check_max_err(const DevBuf& A, const DevBuf& B, const DevBuf& D, const Problem& p, cudaStream_t s,
                     unsigned long long seed) {
  const int ns = 512;
  DevBuf err(ns * sizeof(double));
  k_check<TA, TD><<<(ns + 127) / 128, 128, 0, s>>>(A.as<TA>(), B.as<TA>(), D.as<TD>(), p, ns, seed, err.as<double>());
  GB_LAUNCH_CHECK();
  std::vector<double> h(ns);
  GB_CUDA(cudaMemcpyAsync(h.data(), err.p, ns * sizeof(double), cudaMemcpyDeviceToHost, s));
  GB_CUDA(cudaStreamSynchronize(s));
  double worst = 0;
  for (double e : h) {
    if (std::isnan(e)) return std::nan("");
    worst = std::max(worst, e);
  }
  return worst;
}

struct Item {
  std::string bench;    // "gemm" or "attention"
  std::string label;    // for messages
  const DTypeInfo* dt = nullptr;
  Problem p;
};

// Runs one problem: allocate rotating input sets (> 3x L2 together), fill, plan, check against the float64
// reference on 512 sampled outputs (output poisoned with NaN first), then time. Returns the sample, or null
// (with an entry in "rejected").
Json run_problem(Context& ctx, const Item& it) {
  const DTypeInfo& dt = *it.dt;
  const Problem& p = it.p;
  const std::size_t a_elems = static_cast<std::size_t>(p.batch > 1 ? p.sA * p.batch : (p.transa ? p.lda * p.M : p.lda * p.K));
  const std::size_t b_elems = static_cast<std::size_t>(p.batch > 1 ? p.sB * p.batch : p.ldb * p.N);
  const std::size_t d_elems = static_cast<std::size_t>(p.batch > 1 ? p.sD * p.batch : p.ldd * p.N);
  const std::size_t a_bytes = round_up(a_elems * dt.ab_bytes, 256), b_bytes = round_up(b_elems * dt.ab_bytes, 256);
  const std::size_t d_bytes = round_up(d_elems * dt.cd_bytes, 256);
  const int sets = rotation_sets(a_bytes + b_bytes, static_cast<std::uint64_t>(ctx.prop.l2CacheSize), 3.0);
  std::size_t free_b = 0, total_b = 0;
  GB_CUDA(cudaMemGetInfo(&free_b, &total_b));
  const std::size_t need = static_cast<std::size_t>(sets) * (a_bytes + b_bytes) + d_bytes;
  if (need + (512u << 20) > free_b) {
    ctx.reject(it.bench, it.label, strprintf("needs %s of device memory, %s free", human_bytes(need).c_str(),
                                             human_bytes(free_b).c_str()));
    return Json();
  }
  DevBuf A(a_bytes * sets), B(b_bytes * sets), D(d_bytes);
  const unsigned long long seed = hash64(static_cast<unsigned long long>(p.M * 1000003 + p.N * 10007 + p.K) ^
                                         static_cast<unsigned long long>(dt.t));
  auto fill_ab = [&](auto tag) {
    using T = decltype(tag);
    fill<T>(A.as<T>(), a_bytes * sets / sizeof(T), seed, ctx.stream);
    fill<T>(B.as<T>(), b_bytes * sets / sizeof(T), seed + 1, ctx.stream);
  };
  switch (dt.t) {
    case DType::BF16: fill_ab(__nv_bfloat16{}); break;
    case DType::FP16: fill_ab(__half{}); break;
    case DType::TF32:
    case DType::FP32: fill_ab(float{}); break;
    case DType::FP8: fill_ab(__nv_fp8_e4m3{}); break;
  }
  // Correctness first: poison D (all-ones bytes are NaN in every output type), one product on set 0, compare.
  DevBuf Cbuf;
  std::string tried;
  std::unique_ptr<LtPlan> plp =
      first_runnable_plan(dt, p, A.p, B.p, Cbuf, D.p, d_bytes, ctx.stream, tried, ctx.fp8_split_accumulation);
  if (!plp) {
    ctx.reject(it.bench, it.label, "no cuBLASLt configuration ran:" + tried);
    return Json();
  }
  LtPlan& pl = *plp;
  const void* Cp = (pl.variant & 2) ? Cbuf.p : nullptr;
  GB_LAUNCH_CHECK();
  double err = 0;
  switch (dt.t) {
    case DType::BF16: err = check_max_err<__nv_bfloat16, __nv_bfloat16>(A, B, D, p, ctx.stream, seed); break;
    case DType::FP16: err = check_max_err<__half, __half>(A, B, D, p, ctx.stream, seed); break;
    case DType::TF32:
    case DType::FP32: err = check_max_err<float, float>(A, B, D, p, ctx.stream, seed); break;
    case DType::FP8: err = check_max_err<__nv_fp8_e4m3, __nv_bfloat16>(A, B, D, p, ctx.stream, seed); break;
  }
  const double tol = gemm_tolerance(dt.name);
  if (!(err <= tol)) {
    ctx.reject(it.bench, it.label,
               strprintf("result check failed: max |D - ref| / ||a.b|| = %.3g over 512 sampled outputs (tolerance %.3g)",
                         err, tol));
    return Json();
  }
  const char* base_a = static_cast<const char*>(A.p);
  const char* base_b = static_cast<const char*>(B.p);
  Measured m = measure(ctx, [&](long i) {
    const long s = i % sets;
    matmul(pl, base_a + static_cast<std::size_t>(s) * a_bytes, base_b + static_cast<std::size_t>(s) * b_bytes, Cp,
           D.p, ctx.stream);
  });
  Json j = Json::object();
  j["dtype"] = dt.name;
  j["check_max_err"] = err;
  j["check_tol"] = tol;
  j["rotating_sets"] = sets;
  j["algo"] = pl.algo_desc;
  if (dt.t == DType::FP8)
    j["fp8_config"] = strprintf("fast_accum=%d scale_pointers=%d c_aliases_d=%d", (pl.variant & 1) ? 0 : 1,
                                (pl.variant & 4) ? 0 : 1, (pl.variant & 2) ? 0 : 1);
  if (!m.verdict.ok) {
    ctx.reject(it.bench, it.label, m.verdict.reason, samples_json(m.per_op_s));
    return Json();
  }
  put_timing(j, m);
  j["tflops"] = gemm_flops(p.M, p.N, p.K, p.batch) / m.stats.median / 1e12;
  return j;
}

bool dtype_selected(const Context& ctx, const DTypeInfo& dt) {
  const int cc = ctx.prop.major * 10 + ctx.prop.minor;
  if (cc < dt.min_cc) return false;
  if (ctx.gemm_dtypes.empty()) return true;
  return std::find(ctx.gemm_dtypes.begin(), ctx.gemm_dtypes.end(), dt.name) != ctx.gemm_dtypes.end();
}

// Linear layer Y[m=tokens, n] = X[m, k] . W[n, k]^T.
Problem linear(std::int64_t tokens, std::int64_t k, std::int64_t n) {
  Problem p;
  p.transa = true;
  p.M = n;
  p.N = tokens;
  p.K = k;
  p.lda = k;
  p.ldb = k;
  p.ldd = n;
  return p;
}

}  // namespace

struct BusyGemm::Impl {
  Problem p;
  std::string dtype;
  DevBuf A, B, C, D;
  std::unique_ptr<LtPlan> plan;
  double err = 0;
};

BusyGemm::BusyGemm(std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t s, const std::string& dtype)
    : impl_(std::make_unique<Impl>()) {
  if (dtype != "bf16" && dtype != "fp8") throw std::invalid_argument("busy GEMM: dtype must be bf16 or fp8, not " + dtype);
  const DTypeInfo& dt = *std::find_if(dtypes().begin(), dtypes().end(), [&](const DTypeInfo& d) { return d.name == dtype; });
  Impl& I = *impl_;
  I.dtype = dtype;
  I.p = linear(m, k, n);
  const std::size_t a_bytes = round_up(static_cast<std::size_t>(I.p.lda * I.p.M) * dt.ab_bytes, 256);
  const std::size_t b_bytes = round_up(static_cast<std::size_t>(I.p.ldb * I.p.N) * dt.ab_bytes, 256);
  const std::size_t d_bytes = round_up(static_cast<std::size_t>(I.p.ldd * I.p.N) * dt.cd_bytes, 256);
  I.A = DevBuf(a_bytes);
  I.B = DevBuf(b_bytes);
  I.D = DevBuf(d_bytes);
  const unsigned long long seed = hash64(static_cast<unsigned long long>(m * 1000003 + n * 10007 + k) ^ 0xb0a7ULL);
  if (dt.t == DType::FP8) {
    fill<__nv_fp8_e4m3>(I.A.as<__nv_fp8_e4m3>(), a_bytes, seed, s);
    fill<__nv_fp8_e4m3>(I.B.as<__nv_fp8_e4m3>(), b_bytes, seed + 1, s);
  } else {
    fill<__nv_bfloat16>(I.A.as<__nv_bfloat16>(), a_bytes / 2, seed, s);
    fill<__nv_bfloat16>(I.B.as<__nv_bfloat16>(), b_bytes / 2, seed + 1, s);
  }
  std::string tried;
  I.plan = first_runnable_plan(dt, I.p, I.A.p, I.B.p, I.C, I.D.p, d_bytes, s, tried);
  if (!I.plan) throw std::runtime_error("busy GEMM (" + dtype + "): no cuBLASLt configuration ran:" + tried);
  GB_LAUNCH_CHECK();
  I.err = dt.t == DType::FP8 ? ::gpuplan::bench::check_max_err<__nv_fp8_e4m3, __nv_bfloat16>(I.A, I.B, I.D, I.p, s, seed)
                             : ::gpuplan::bench::check_max_err<__nv_bfloat16, __nv_bfloat16>(I.A, I.B, I.D, I.p, s, seed);
  if (!(I.err <= gemm_tolerance(dt.name)))
    throw std::runtime_error(strprintf("busy GEMM (%s): result check failed (max rel error %.3g)", dtype.c_str(), I.err));
}
BusyGemm::~BusyGemm() = default;
void BusyGemm::launch(cudaStream_t s) const {
  matmul(*impl_->plan, impl_->A.p, impl_->B.p, (impl_->plan->variant & 2) ? impl_->C.p : nullptr, impl_->D.p, s);
}
double BusyGemm::flops() const { return gemm_flops(impl_->p.M, impl_->p.N, impl_->p.K, 1); }
const std::string& BusyGemm::algo() const { return impl_->plan->algo_desc; }
double BusyGemm::check_max_err() const { return impl_->err; }
const std::string& BusyGemm::dtype() const { return impl_->dtype; }

// Sustained GEMM: one large GEMM (8192^3) launched back to back for ctx.sustained_s seconds, timed in windows of about
// 0.25 s, with the SM clock and the power NVML reports after each window; bf16, then fp8 where the GPU has fp8 tensor
// cores (both unless --gemm-dtypes names one). The GEMM sweep times each shape for ~40 ms, at the clock a GPU holds
// for short bursts; a training step keeps the tensor cores busy for minutes, and a GPU at its power limit lowers its
// clock (NVML clock-event reason sw_power_cap). fp8 moves twice the operands per joule of bf16 work, so its clock
// may settle lower. The ratio of the sustained throughput (median of the last third of the windows) to the swept
// throughput of the same GEMM is what the model applies to the fitted GEMM ceilings of long-running work (training).
namespace {
Json sustained_one(Context& ctx, const DTypeInfo& dt) {
  Nvml& nvml = Nvml::get();
  const auto dev = nvml.by_uuid(format_uuid(reinterpret_cast<const unsigned char*>(ctx.prop.uuid.bytes)));
  const std::int64_t n = 8192;
  const std::string label = strprintf("%s 8192^3", dt.name);
  BusyGemm g(n, n, n, ctx.stream, dt.name);
  GB_CUDA(cudaStreamSynchronize(ctx.stream));
  cudaEvent_t e0, e1;
  GB_CUDA(cudaEventCreate(&e0));
  GB_CUDA(cudaEventCreate(&e1));
  auto window = [&](int k) {
    GB_CUDA(cudaEventRecord(e0, ctx.stream));
    for (int i = 0; i < k; ++i) g.launch(ctx.stream);
    GB_CUDA(cudaEventRecord(e1, ctx.stream));
    GB_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    GB_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    return static_cast<double>(ms) * 1e-3;
  };
  const double t1 = window(3) / 3;
  const int per_window = std::max(4, static_cast<int>(0.25 / t1));
  Json windows = Json::array();
  std::vector<double> tflops;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < ctx.sustained_s) {
    const double t = window(per_window);
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Json snap = nvml.snapshot(dev);
    Json w = Json::object();
    w["t_s"] = elapsed;
    w["tflops"] = g.flops() * per_window / t / 1e12;
    for (const char* key : {"sm_clock_mhz", "power_w", "temperature_c", "clocks_event_reasons"})
      if (const Json* v = snap.find(key)) w[key] = *v;
    tflops.push_back(g.flops() * per_window / t / 1e12);
    windows.push_back(std::move(w));
  }
  GB_CUDA(cudaEventDestroy(e0));
  GB_CUDA(cudaEventDestroy(e1));
  if (tflops.size() < 6) {
    ctx.reject("sustained", label, "fewer than 6 windows (raise --sustained-s)");
    return Json();
  }
  std::vector<double> tail(tflops.end() - static_cast<long>(tflops.size() / 3), tflops.end());
  const Stats st = compute_stats(tail);
  Json j = Json::object();
  j["dtype"] = dt.name;
  j["m"] = static_cast<long long>(n);
  j["n"] = static_cast<long long>(n);
  j["k"] = static_cast<long long>(n);
  j["algo"] = g.algo();
  j["check_max_err"] = g.check_max_err();
  j["gemms_per_window"] = per_window;
  j["seconds"] = elapsed;
  j["burst_tflops"] = tflops.front();
  j["sustained_tflops"] = st.median;
  j["sustained_spread"] = st.median > 0 ? (st.max - st.min) / st.median : 0.0;
  j["ratio"] = st.median / tflops.front();
  j["windows"] = std::move(windows);
  std::fprintf(stderr, "[sustained] %s for %.1f s: first window %.1f TFLOP/s, last third %.1f TFLOP/s (x%.3f)\n",
               label.c_str(), elapsed, tflops.front(), st.median, st.median / tflops.front());
  return j;
}
}  // namespace

void run_sustained(Context& ctx) {
  Json runs = Json::array();
  for (const auto& dt : dtypes()) {
    if ((dt.t != DType::BF16 && dt.t != DType::FP8) || !dtype_selected(ctx, dt)) continue;
    Json j = sustained_one(ctx, dt);
    if (!j.is_null()) runs.push_back(std::move(j));
  }
  if (runs.size() > 0) (*ctx.doc)["sustained"] = std::move(runs);
}

// Weight-gradient GEMMs with fp32 accumulation: dW[n_out, n_in] (+)= dY[tokens, n_out]^T . X[tokens, n_in], K = the
// micro-batch's tokens. Megatron-LM and NeMo (gradient_accumulation_fusion, Transformer Engine's
// fuse_wgrad_accumulation) accumulate each micro-batch's weight gradient into the fp32 main_grad inside the GEMM's
// epilogue (beta = 1): 8 bytes per weight element move besides the mainloop, against 2·K flops per element. The
// bench times three versions of the same product: 16-bit output (beta = 0), fp32 output (beta = 0) and fp32
// accumulated into (beta = 1, C = D), for bf16 and fp8 operands, so that the model can tell whether that traffic
// hides under the mainloop (a roofline max) or adds to it.
void run_accumulate(Context& ctx) {
  Json out = Json::array();
  struct Shape {
    std::int64_t n_out, n_in;
    const char* what;
  };
  const std::vector<Shape> shapes = {{12288, 4096, "qkv h4096"}, {4096, 4096, "proj h4096"},
                                     {22016, 4096, "mlp up/gate h4096"}, {4096, 11008, "mlp down h4096"},
                                     {6144, 2048, "qkv h2048"}};
  const std::vector<std::int64_t> tokens = ctx.quick ? std::vector<std::int64_t>{4096}
                                                     : std::vector<std::int64_t>{1024, 2048, 4096, 8192};
  for (const auto& dt : dtypes()) {
    if ((dt.t != DType::BF16 && dt.t != DType::FP8) || !dtype_selected(ctx, dt)) continue;
    DTypeInfo dt32 = dt;
    dt32.cd = CUDA_R_32F;
    dt32.cd_bytes = 4;
    for (const auto& sh : shapes)
      for (std::int64_t k : tokens) {
        Problem p;
        p.transa = true;
        p.M = sh.n_out;
        p.N = sh.n_in;
        p.K = k;
        p.lda = k;
        p.ldb = k;
        p.ldd = sh.n_out;
        const std::string label = strprintf("%s %s tokens=%lld", dt.name, sh.what, static_cast<long long>(k));
        const std::size_t a_bytes = round_up(static_cast<std::size_t>(p.M * p.K) * dt.ab_bytes, 256);
        const std::size_t b_bytes = round_up(static_cast<std::size_t>(p.N * p.K) * dt.ab_bytes, 256);
        const std::size_t d16_bytes = round_up(static_cast<std::size_t>(p.M * p.N) * dt.cd_bytes, 256);
        const std::size_t d32_bytes = round_up(static_cast<std::size_t>(p.M * p.N) * 4, 256);
        DevBuf A(a_bytes), B(b_bytes), D16(d16_bytes), D32(d32_bytes), C16, C32;
        const unsigned long long seed = hash64(static_cast<unsigned long long>(p.M * 1000003 + p.N * 10007 + p.K) ^ 0xacc0ULL);
        if (dt.t == DType::FP8) {
          fill<__nv_fp8_e4m3>(A.as<__nv_fp8_e4m3>(), a_bytes, seed, ctx.stream);
          fill<__nv_fp8_e4m3>(B.as<__nv_fp8_e4m3>(), b_bytes, seed + 1, ctx.stream);
        } else {
          fill<__nv_bfloat16>(A.as<__nv_bfloat16>(), a_bytes / 2, seed, ctx.stream);
          fill<__nv_bfloat16>(B.as<__nv_bfloat16>(), b_bytes / 2, seed + 1, ctx.stream);
        }
        std::string tried;
        auto p16 = first_runnable_plan(dt, p, A.p, B.p, C16, D16.p, d16_bytes, ctx.stream, tried);
        auto p32 = first_runnable_plan(dt32, p, A.p, B.p, C32, D32.p, d32_bytes, ctx.stream, tried);
        if (!p16 || !p32) {
          ctx.reject("accumulate", label, "no cuBLASLt configuration ran:" + tried);
          continue;
        }
        GB_LAUNCH_CHECK();
        // Checks: both outputs against the float64 reference; then one accumulating product must double D32.
        const double e16 = dt.t == DType::FP8 ? check_max_err<__nv_fp8_e4m3, __nv_bfloat16>(A, B, D16, p, ctx.stream, seed)
                                              : check_max_err<__nv_bfloat16, __nv_bfloat16>(A, B, D16, p, ctx.stream, seed);
        const double e32 = dt.t == DType::FP8 ? check_max_err<__nv_fp8_e4m3, float>(A, B, D32, p, ctx.stream, seed)
                                              : check_max_err<__nv_bfloat16, float>(A, B, D32, p, ctx.stream, seed);
        const double tol = gemm_tolerance(dt.name);
        if (!(e16 <= tol) || !(e32 <= tol)) {
          ctx.reject("accumulate", label, strprintf("result check failed (16-bit %.3g, fp32 %.3g; tolerance %.3g)", e16, e32, tol));
          continue;
        }
        const std::size_t nchk = 4096;
        std::vector<float> before(nchk), after(nchk);
        GB_CUDA(cudaMemcpyAsync(before.data(), D32.p, nchk * 4, cudaMemcpyDeviceToHost, ctx.stream));
        const cublasStatus_t acc_st = matmul_status(*p32, A.p, B.p, D32.p, D32.p, ctx.stream, 1.0f);  // C = D
        if (acc_st != CUBLAS_STATUS_SUCCESS) {
          ctx.reject("accumulate", label, strprintf("cublasLtMatmul with beta = 1, C = D: status %d", static_cast<int>(acc_st)));
          continue;
        }
        GB_CUDA(cudaMemcpyAsync(after.data(), D32.p, nchk * 4, cudaMemcpyDeviceToHost, ctx.stream));
        GB_CUDA(cudaStreamSynchronize(ctx.stream));
        double worst = 0;
        for (std::size_t i = 0; i < nchk; ++i) {
          const double want = 2.0 * before[i], got = after[i];
          if (!std::isfinite(got)) {
            worst = INFINITY;
            break;
          }
          worst = std::max(worst, std::fabs(got - want) / std::max(1.0, std::fabs(want)));
        }
        if (!(worst <= 1e-3)) {
          ctx.reject("accumulate", label, strprintf("beta = 1 did not accumulate (max deviation %.3g from 2x)", worst));
          continue;
        }
        const void* C16p = (p16->variant & 2) ? C16.p : nullptr;
        Measured m16 = measure(ctx, [&](long) { matmul(*p16, A.p, B.p, C16p, D16.p, ctx.stream); });
        Measured m32 = measure(ctx, [&](long) { GB_CUBLAS(matmul_status(*p32, A.p, B.p, nullptr, D32.p, ctx.stream, 0.0f)); });
        Measured macc = measure(ctx, [&](long) { GB_CUBLAS(matmul_status(*p32, A.p, B.p, D32.p, D32.p, ctx.stream, 1.0f)); });
        bool refused = false;
        for (const Measured* mm : {&m16, &m32, &macc})
          if (!mm->verdict.ok) {
            ctx.reject("accumulate", label, mm->verdict.reason, samples_json(mm->per_op_s));
            refused = true;
            break;
          }
        if (refused) continue;
        const double flops = gemm_flops(p.M, p.N, p.K, 1);
        Json j = Json::object();
        j["dtype"] = dt.name;
        j["shape"] = sh.what;
        j["n_out"] = static_cast<long long>(p.M);
        j["n_in"] = static_cast<long long>(p.N);
        j["tokens"] = static_cast<long long>(p.K);
        j["algo_16"] = p16->algo_desc;
        j["algo_fp32"] = p32->algo_desc;
        j["out16_s"] = m16.stats.median;
        j["out32_s"] = m32.stats.median;
        j["accumulate_s"] = macc.stats.median;
        j["out16_tflops"] = flops / m16.stats.median / 1e12;
        j["accumulate_tflops"] = flops / macc.stats.median / 1e12;
        j["accumulate_over_out16"] = macc.stats.median / m16.stats.median;
        j["check_max_err_16"] = e16;
        j["check_max_err_fp32"] = e32;
        std::fprintf(stderr, "[accumulate] %-34s out16 %8.1f us  out32 %8.1f us  acc %8.1f us  (x%.3f)\n", label.c_str(),
                     m16.stats.median * 1e6, m32.stats.median * 1e6, macc.stats.median * 1e6,
                     macc.stats.median / m16.stats.median);
        out.push_back(std::move(j));
      }
  }
  (*ctx.doc)["accumulate"] = std::move(out);
}

namespace {
struct GemmEntry {
  const DTypeInfo* dt;
  std::string shape, model;
  std::int64_t m, n, k;
};

// Times each entry as one "gemm" sample row (the same row format for the sweep and the depth bench).
void run_gemm_entries(Context& ctx, const std::vector<GemmEntry>& todo) {
  Json& out = (*ctx.doc)["gemm"];
  if (out.is_null()) out = Json::array();
  std::size_t done = 0;
  for (const auto& e : todo) {
    ++done;
    Item it;
    it.bench = "gemm";
    it.dt = e.dt;
    it.p = linear(e.m, e.k, e.n);
    it.label = strprintf("%s %s m=%lld n=%lld k=%lld", e.dt->name, e.shape.c_str(), static_cast<long long>(e.m),
                         static_cast<long long>(e.n), static_cast<long long>(e.k));
    Json j;
    try {
      j = run_problem(ctx, it);
    } catch (const std::exception& ex) {
      cudaGetLastError();
      ctx.reject("gemm", it.label, std::string("error: ") + ex.what());
    }
    if (j.is_null()) continue;
    Json row = Json::object();
    row["dtype"] = e.dt->name;
    row["m"] = static_cast<long long>(e.m);
    row["n"] = static_cast<long long>(e.n);
    row["k"] = static_cast<long long>(e.k);
    row["shape"] = e.shape;
    if (!e.model.empty()) row["model"] = e.model;
    for (const char* key : {"median_s", "min_s", "max_s", "spread", "tflops", "algo", "p10_s", "p90_s", "spread_kind",
                            "samples", "batch", "timing", "graph_ops", "attempts", "rotating_sets", "check_max_err", "fp8_config"})
      if (const Json* v = j.find(key)) row[key] = *v;
    std::fprintf(stderr, "[gemm %zu/%zu] %-40s %9.2f us %8.1f TFLOP/s  spread %.1f%%\n", done, todo.size(),
                 it.label.c_str(), (*row.find("median_s")).as_double() * 1e6, (*row.find("tflops")).as_double(),
                 100.0 * (*row.find("spread")).as_double());
    out.push_back(std::move(row));
  }
}
}  // namespace

// GEMM depth: the reduction length K swept at output shapes that fill every SM many times over (8192 x 8192: 4096
// tiles of 128 x 128 on 132 SMs; 16384 x 2048, the narrow output of a small model's projections), so that tile and
// wave quantisation stay out of it and what changes with K is the cost per output tile that does not scale with K:
// filling the software pipeline before the first MMA and writing the tile out after the last. The model prices it as
// c k-iterations per tile, eta ~ k/(k + c) (efficiency.hpp); these rows are what the calibration fits c to.
void run_gemm_depth(Context& ctx) {
  std::vector<std::int64_t> ks = {256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 32768};
  if (ctx.quick) ks = {512, 2048, 8192};
  const std::vector<std::pair<std::int64_t, std::int64_t>> outs = {{8192, 8192}, {16384, 2048}};
  std::vector<GemmEntry> todo;
  for (const auto& dt : dtypes()) {
    if ((dt.t != DType::BF16 && dt.t != DType::FP8) || !dtype_selected(ctx, dt)) continue;
    for (const auto& [m, n] : outs)
      for (auto k : ks) todo.push_back({&dt, "depth", "", m, n, k});
  }
  run_gemm_entries(ctx, todo);
}

void run_gemm(Context& ctx) {
  std::vector<GemmEntry> todo;
  std::vector<std::int64_t> squares = square_sizes();
  std::vector<std::int64_t> tokens = llm_tokens();
  std::vector<LlmShape> shapes = llm_shapes();
  if (ctx.quick) {
    squares = {1024, 8192};
    tokens = {1, 64, 4096};
    shapes = {shapes[0], shapes[2]};
  }
  for (const auto& dt : dtypes()) {
    if (!dtype_selected(ctx, dt)) continue;
    for (auto s : squares) todo.push_back({&dt, "square", "", s, s, s});
    for (const auto& sh : shapes)
      for (auto t : tokens) todo.push_back({&dt, sh.name, sh.model, t, sh.n, sh.k});
  }
  run_gemm_entries(ctx, todo);
}

// Attention as the model prices it: the two batched GEMMs of one layer's attention, per (batch x heads) slice
// S = Q.K^T (seq x seq x head_dim) and O = P.V (seq x head_dim x seq), in bf16 through cuBLASLt strided-batched.
// No softmax, no masking (full, non-causal), no flash kernel.
void run_attention(Context& ctx) {
  Json& out = (*ctx.doc)["attention"];
  if (out.is_null()) out = Json::array();
  const DTypeInfo* bf16 = &dtypes()[0];
  const std::int64_t bh = 32;  // batch x heads (one Llama-3-8B layer at batch 1)
  std::vector<std::int64_t> seqs = {512, 1024, 2048, 4096, 8192};
  std::vector<std::int64_t> dims = {64, 128};
  if (ctx.quick) seqs = {1024, 4096};
  std::size_t total = seqs.size() * dims.size() * 2, done = 0;
  for (auto d : dims)
    for (auto s : seqs)
      for (const char* op : {"qk", "pv"}) {
        ++done;
        Item it;
        it.bench = "attention";
        it.dt = bf16;
        Problem& p = it.p;
        p.batch = bh;
        std::int64_t m, n, k;  // row-major convention of the output: [m, n] = [m, k] x [k, n]
        if (std::string(op) == "qk") {
          // S[s, s] = Q[s, d] . K[s, d]^T: TN, A = K (lda d), B = Q (ldb d), D = S^T col-major (ldd s).
          m = s, n = s, k = d;
          p.transa = true;
          p.M = s, p.N = s, p.K = d, p.lda = d, p.ldb = d, p.ldd = s;
          p.sA = s * d, p.sB = s * d, p.sD = s * s;
        } else {
          // O[s, d] = P[s, s] . V[s, d]: NN, A = V (d x s col-major, lda d), B = P (s x s, ldb s), D = O (ldd d).
          m = s, n = d, k = s;
          p.transa = false;
          p.M = d, p.N = s, p.K = s, p.lda = d, p.ldb = s, p.ldd = d;
          p.sA = s * d, p.sB = s * s, p.sD = s * d;
        }
        it.label = strprintf("%s bf16 seq=%lld head_dim=%lld batch_heads=%lld", op, static_cast<long long>(s),
                             static_cast<long long>(d), static_cast<long long>(bh));
        Json j;
        try {
          j = run_problem(ctx, it);
        } catch (const std::exception& ex) {
          cudaGetLastError();
          ctx.reject("attention", it.label, std::string("error: ") + ex.what());
        }
        if (j.is_null()) continue;
        Json row = Json::object();
        row["op"] = op;
        row["impl"] = "cublaslt_strided_batched_gemm";
        row["dtype"] = "bf16";
        row["batch_heads"] = static_cast<long long>(bh);
        row["seq"] = static_cast<long long>(s);
        row["head_dim"] = static_cast<long long>(d);
        row["m"] = static_cast<long long>(m);
        row["n"] = static_cast<long long>(n);
        row["k"] = static_cast<long long>(k);
        for (const char* key : {"median_s", "min_s", "max_s", "spread", "tflops", "algo", "p10_s", "p90_s",
                                "spread_kind", "samples", "batch", "timing", "graph_ops", "attempts", "rotating_sets", "check_max_err", "fp8_config"})
          if (const Json* v = j.find(key)) row[key] = *v;
        std::fprintf(stderr, "[attention %zu/%zu] %-44s %9.2f us %8.1f TFLOP/s\n", done, total, it.label.c_str(),
                     (*row.find("median_s")).as_double() * 1e6, (*row.find("tflops")).as_double());
        out.push_back(std::move(row));
      }
}

}  // namespace gpuplan::bench
