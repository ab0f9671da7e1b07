// A bf16 linear-layer GEMM (Y[m, n] = X[m, k] . W[n, k]^T through cuBLASLt, as gemm.cu runs it), set up once and
// launched many times: the compute load of the collectives bench's overlap items (collectives.cu), which measure how
// much GEMM throughput a concurrent NCCL collective takes away, and how much a concurrent GEMM slows the collective.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

namespace gpuplan::bench {

class Bf16Gemm {
 public:
  /// Allocates and fills the operands on `s`, plans the product, runs it once and checks a sample of the result
  /// against a float64 reference; throws when cuBLASLt has no algorithm or the check fails.
  Bf16Gemm(std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t s);
  ~Bf16Gemm();
  Bf16Gemm(const Bf16Gemm&) = delete;
  Bf16Gemm& operator=(const Bf16Gemm&) = delete;

  void launch(cudaStream_t s) const;  ///< enqueue one product on `s`
  double flops() const;               ///< 2mnk
  const std::string& algo() const;    ///< the cuBLASLt algorithm (id, tile, stages, split-k)
  double check_max_err() const;       ///< of the check run by the constructor

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuplan::bench
