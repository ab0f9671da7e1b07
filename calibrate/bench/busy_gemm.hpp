// A linear-layer GEMM (Y[m, n] = X[m, k] . W[n, k]^T through cuBLASLt, as gemm.cu runs it) in bf16 or fp8 (e4m3
// operands, bf16 output), set up once and launched many times: the compute load of the collectives bench's overlap
// items (collectives.cu), which measure how much GEMM throughput a concurrent NCCL collective takes away, and the
// sustained bench (gemm.cu), which keeps one running for tens of seconds to see the clock the power limit allows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>

namespace gpuplan::bench {

class BusyGemm {
 public:
  /// Allocates and fills the operands on `s`, plans the product, runs it once and checks a sample of the result
  /// against a float64 reference; throws when cuBLASLt has no algorithm or the check fails. `dtype` is "bf16" or
  /// "fp8" (the first fp8 configuration cuBLASLt runs, as the GEMM sweep picks it); anything else throws.
  BusyGemm(std::int64_t m, std::int64_t n, std::int64_t k, cudaStream_t s, const std::string& dtype = "bf16");
  ~BusyGemm();
  BusyGemm(const BusyGemm&) = delete;
  BusyGemm& operator=(const BusyGemm&) = delete;

  void launch(cudaStream_t s) const;  ///< enqueue one product on `s`
  double flops() const;               ///< 2mnk
  const std::string& algo() const;    ///< the cuBLASLt algorithm (id, tile, stages, split-k)
  double check_max_err() const;       ///< of the check run by the constructor
  const std::string& dtype() const;   ///< "bf16" or "fp8"

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuplan::bench
