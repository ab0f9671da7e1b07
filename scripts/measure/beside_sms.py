#!/usr/bin/env python3
"""Compute kernels beside a kernel that holds 20 SMs, by kernel class, on one GPU (issues #21, #24).

DeepSeek-V3's dispatch/combine kernels hold 20 of the H800's 132 SMs while its DualPipe pairs overlap them with
compute (arXiv:2412.19437 §3.2.2). gpuplan charges compute beside them the SM share, 20/132 of the hidden time
(model/src/ops/moe_a2a.cpp a2a_sm_share / overlap_exposed). That assumes every kernel class loses exactly the SMs.
This script tests it on one GPU with two stand-ins for the communication kernel, each 20 CTAs of 1024 threads with
enough dynamic shared memory that nothing else fits on their SMs:

  spin  : the CTAs poll a flag (what a dispatch kernel does while it waits for remote tokens): SMs only
  copy  : the CTAs copy HBM to HBM at a throttled rate near --copy-GBps (the bytes a dispatch kernel reads and writes
          locally): SMs plus HBM traffic; the achieved rate is recorded

attention_bwd (session 27) times FlashAttention's backward alone (a kept forward's graph, re-run by autograd.grad).
For each kernel class at DeepSeek-V3-like shapes (4096 tokens, hidden 7168, expert width 2048; bf16 unless named):
  loss = t_beside / t_alone - 1     (median over trials of a window of --reps launches)
and the SM-share prediction 20 / SMs for comparison.

Usage (device): python3 scripts/measure/beside_sms.py --out-dir $OUT     (CPU check: --dry)
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

CARVE = [20]  # SMs the *_carveout GEMMs leave free (set from --ctas)

CUDA_SRC = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <c10/cuda/CUDAStream.h>

__global__ void spin_kernel(const int* stop, long long max_cycles) {
  extern __shared__ char smem[];
  long long t0 = clock64();
  while (clock64() - t0 < max_cycles) {
    if (*(volatile const int*)stop) break;
    __nanosleep(200);
  }
  if (threadIdx.x == 0 && blockIdx.x == 0 && max_cycles < 0) smem[0] = 1;
}

__global__ void copy_kernel(const float4* __restrict__ src, float4* __restrict__ dst, long long n, const int* stop,
                            long long max_cycles, int sleep_ns) {
  extern __shared__ char smem[];
  long long t0 = clock64();
  long long stride = (long long)gridDim.x * blockDim.x;
  do {  // at least one whole pass: max_cycles = 1 times one pass
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
      dst[i] = src[i];
      if (sleep_ns > 0) __nanosleep(sleep_ns);
    }
    if (*(volatile const int*)stop) break;
  } while (clock64() - t0 < max_cycles);
  if (threadIdx.x == 0 && blockIdx.x == 0 && max_cycles < 0) smem[0] = 1;
}

void launch_spin(torch::Tensor stop, int64_t ctas, int64_t smem, int64_t max_cycles) {
  cudaFuncSetAttribute(spin_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  auto s = c10::cuda::getCurrentCUDAStream();
  spin_kernel<<<(int)ctas, 1024, (size_t)smem, s>>>(stop.data_ptr<int>(), max_cycles);
  TORCH_CHECK(cudaGetLastError() == cudaSuccess, "spin launch failed");
}

void launch_copy(torch::Tensor src, torch::Tensor dst, torch::Tensor stop, int64_t ctas, int64_t smem,
                 int64_t max_cycles, int64_t sleep_ns) {
  cudaFuncSetAttribute(copy_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  auto s = c10::cuda::getCurrentCUDAStream();
  long long n = src.numel() * src.element_size() / 16;
  copy_kernel<<<(int)ctas, 1024, (size_t)smem, s>>>((const float4*)src.data_ptr(), (float4*)dst.data_ptr(), n,
                                                     stop.data_ptr<int>(), max_cycles, (int)sleep_ns);
  TORCH_CHECK(cudaGetLastError() == cudaSuccess, "copy launch failed");
}
"""
CPP_SRC = r"""
void launch_spin(torch::Tensor stop, int64_t ctas, int64_t smem, int64_t max_cycles);
void launch_copy(torch::Tensor src, torch::Tensor dst, torch::Tensor stop, int64_t ctas, int64_t smem,
                 int64_t max_cycles, int64_t sleep_ns);
"""


def build_ext():
    from torch.utils.cpp_extension import load_inline
    return load_inline(name="beside_sms_ext", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                       functions=["launch_spin", "launch_copy"], extra_cuda_cflags=["-O3", "-arch=sm_90"],
                       verbose=False)


def quantiser(torch):
    import triton
    import triton.language as tl

    @triton.jit
    def _q(x_ptr, q_ptr, s_ptr, n_groups, GROUP: tl.constexpr, ROWS: tl.constexpr):
        pid = tl.program_id(0)
        g = pid * ROWS + tl.arange(0, ROWS)
        mask_g = g < n_groups
        offs = g[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
        v = tl.load(x_ptr + offs, mask=mask_g[:, None], other=0.0).to(tl.float32)
        amax = tl.maximum(tl.max(tl.abs(v), axis=1), 1e-4)
        scale = amax / 448.0
        tl.store(q_ptr + offs, (v / scale[:, None]).to(tl.float8e4nv), mask=mask_g[:, None])
        tl.store(s_ptr + g, scale, mask=mask_g)

    def run(x, qo, qs):
        n_groups = x.numel() // 128
        _q[(triton.cdiv(n_groups, 16),)](x, qo, qs, n_groups, GROUP=128, ROWS=16)

    return run


def kernels(torch, dev, tokens, hidden, ffn):
    import torch.nn.functional as F
    bf = torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(1234)
    x = torch.randn(tokens, hidden, device=dev, dtype=bf, generator=g)
    y = torch.randn(tokens, hidden, device=dev, dtype=bf, generator=g)
    out = torch.empty_like(x)
    w = torch.randn(ffn, hidden, device=dev, dtype=bf, generator=g) * 0.02
    nw = torch.ones(hidden, device=dev, dtype=bf)
    gu = torch.randn(tokens * 2, 2 * ffn, device=dev, dtype=bf, generator=g)
    e = 2
    x8 = x.to(torch.float8_e4m3fn)
    w8 = w.to(torch.float8_e4m3fn)
    one = torch.ones((), device=dev, dtype=torch.float32)
    q = torch.randn(1, 128, tokens, 128, device=dev, dtype=bf, generator=g)
    k = torch.randn(1, 128, tokens, 128, device=dev, dtype=bf, generator=g)
    v = torch.randn(1, 128, tokens, 128, device=dev, dtype=bf, generator=g)
    quant = quantiser(torch)
    # The attention backward alone: one forward kept (autograd graph retained), its backward re-run per call
    # (FlashAttention's dQ/dK/dV kernels with their pre- and post-processing; torch.autograd.grad returns fresh
    # gradients, so no accumulation kernel joins them).
    qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
    og = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
    dout = torch.randn_like(og)

    def attn_bwd():
        return torch.autograd.grad(og, (qg, kg, vg), dout, retain_graph=True)

    def carved(fn):
        """fn with cuBLASLt told to leave --ctas SMs free (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET via PyTorch's carveout)."""
        def run():
            torch._C._set_sm_carveout_experimental(CARVE[0])
            try:
                return fn()
            finally:
                torch._C._set_sm_carveout_experimental(None)
        return run
    qo = torch.empty(tokens, hidden, device=dev, dtype=torch.float8_e4m3fn)
    qs = torch.empty(tokens, hidden // 128, device=dev, dtype=torch.float32)
    tk = tokens * 2
    return {
        "gemm_bf16": (lambda: torch.matmul(x, w.t()), "compute", 2.0 * tokens * hidden * ffn,
                      (tokens * hidden + ffn * hidden + tokens * ffn) * e),
        "gemm_fp8": (lambda: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=bf), "compute",
                     2.0 * tokens * hidden * ffn, tokens * hidden + ffn * hidden + tokens * ffn * e),
        "gemm_bf16_carveout": (carved(lambda: torch.matmul(x, w.t())), "compute", 2.0 * tokens * hidden * ffn,
                               (tokens * hidden + ffn * hidden + tokens * ffn) * e),
        "gemm_fp8_carveout": (carved(lambda: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one, out_dtype=bf)),
                              "compute", 2.0 * tokens * hidden * ffn, tokens * hidden + ffn * hidden + tokens * ffn * e),
        "attention_fwd": (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), "attention",
                          2 * 2.0 * 128 * tokens * tokens * 128 / 2, 4 * 128 * tokens * 128 * e),
        "attention_bwd": (attn_bwd, "attention", 2.5 * 2 * 2.0 * 128 * tokens * tokens * 128 / 2,
                          8 * 128 * tokens * 128 * e),
        "add": (lambda: torch.add(x, y, out=out), "memory", tokens * hidden, 3 * tokens * hidden * e),
        "rmsnorm": (lambda: F.rms_norm(x, (hidden,), nw, 1e-6), "memory", 4.0 * tokens * hidden,
                    2 * tokens * hidden * e),
        "swiglu": (lambda: F.silu(gu[:, :ffn]) * gu[:, ffn:], "memory", 6.0 * tk * ffn, 5 * tk * ffn * e),
        "fp8_quant_1x128": (lambda: quant(x, qo, qs), "memory", 3.0 * tokens * hidden,
                            tokens * hidden * (e + 1) + qs.numel() * 4),
        "transpose": (lambda: x.t().contiguous(), "memory", 0.0, 2 * tokens * hidden * e),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--ffn", type=int, default=2048)
    p.add_argument("--ctas", type=int, default=20)
    p.add_argument("--smem-kib", type=int, default=200)
    p.add_argument("--copy-mib", type=int, default=512)
    p.add_argument("--sleep-ns", default="0,1000,4000", help="copy throttles to try (ns per element step)")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--trials", type=int, default=7)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--only", default="", help="comma-separated kernel names (default: all)")
    p.add_argument("--name", default="beside_sms")
    p.add_argument("--dry", action="store_true")
    a = p.parse_args()
    if a.dry:
        print(json.dumps(vars(a)))
        return
    import torch
    dev = torch.device("cuda", 0)
    ext = build_ext()
    props = torch.cuda.get_device_properties(dev)
    sms = props.multi_processor_count
    rec = {"meta": common.run_metadata(), "args": vars(a), "sms": sms, "sm_share": a.ctas / sms, "rows": []}
    CARVE[0] = a.ctas
    ks = kernels(torch, dev, a.tokens, a.hidden, a.ffn)
    if a.only:
        ks = {k: v for k, v in ks.items() if k in a.only.split(",")}
    side = torch.cuda.Stream(device=dev)
    main_s = torch.cuda.Stream(device=dev)
    stop = torch.zeros(1, device=dev, dtype=torch.int32)
    src = torch.randn(a.copy_mib * 2**20 // 4, device=dev)
    dst = torch.empty_like(src)
    smem = a.smem_kib * 1024
    clock_hz = 1.98e9

    def window(fn, reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(main_s):
            s.record(main_s)
            for _ in range(reps):
                fn()
            e.record(main_s)
        return s, e

    for fn, *_ in ks.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    # The side kernels alone: the copy's achieved rate per throttle.
    side_kinds = [("spin", None)] + [("copy", int(x)) for x in a.sleep_ns.split(",")]
    side_rate = {}
    for kind, sl in side_kinds:
        if kind != "copy":
            continue
        stop.zero_()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(side)
            ext.launch_copy(src, dst, stop, a.ctas, smem, int(0.05 * clock_hz), sl)
            e.record(side)
        torch.cuda.synchronize()
        ms = s.elapsed_time(e)
        # bytes: whole passes done in the window are not counted exactly; time one full pass instead
        stop.zero_()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            s2, e2 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s2.record(side)
            ext.launch_copy(src, dst, stop, a.ctas, smem, 1, sl)  # one pass (the loop checks after a pass)
            e2.record(side)
        torch.cuda.synchronize()
        one_pass = s2.elapsed_time(e2)
        side_rate[sl] = 2 * src.numel() * 4 / (one_pass / 1e3) / 1e9
        rec.setdefault("side_alone", []).append({"sleep_ns": sl, "one_pass_ms": one_pass,
                                                 "GBps": side_rate[sl], "window_ms": ms})
        print(f"copy sleep {sl:5d} ns: {side_rate[sl]:7.1f} GB/s on {a.ctas} CTAs", flush=True)
    for name, (fn, cls, flops, nbytes) in ks.items():
        alone = []
        for _ in range(a.trials):
            torch.cuda.synchronize()
            s, e = window(fn, a.reps)
            torch.cuda.synchronize()
            alone.append(s.elapsed_time(e) / a.reps)
        ta = statistics.median(alone)
        for kind, sl in side_kinds:
            beside = []
            for _ in range(a.trials):
                torch.cuda.synchronize()
                stop.zero_()
                budget = int(max(4 * ta * a.reps / 1e3, 0.01) * clock_hz) + int(0.01 * clock_hz)
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    if kind == "spin":
                        ext.launch_spin(stop, a.ctas, smem, budget)
                    else:
                        ext.launch_copy(src, dst, stop, a.ctas, smem, budget, sl)
                main_s.wait_stream(torch.cuda.current_stream())  # stop is zero before the window too
                # give the side kernel time to become resident before the window opens
                with torch.cuda.stream(main_s):
                    torch.cuda._sleep(int(0.002 * clock_hz))
                s, e = window(fn, a.reps)
                with torch.cuda.stream(main_s):
                    stop.fill_(1)
                torch.cuda.synchronize()
                beside.append(s.elapsed_time(e) / a.reps)
            tb = statistics.median(beside)
            row = {"kernel": name, "class": cls, "side": kind, "sleep_ns": sl,
                   "side_GBps": side_rate.get(sl) if kind == "copy" else 0.0,
                   "t_alone_ms": ta, "t_beside_ms": tb, "loss": tb / ta - 1, "alone_ms": alone, "beside_ms": beside,
                   "flops": flops, "bytes": nbytes, "alone_TFLOPs": flops / ta / 1e9, "alone_GBps": nbytes / ta / 1e6}
            rec["rows"].append(row)
            print(f"{name:16} {cls:9} beside {kind:4} {str(sl):>5}  alone {ta*1e3:8.1f} us  beside {tb*1e3:8.1f} us"
                  f"  loss {tb/ta-1:+.3f}  (SM share {a.ctas/sms:.3f})", flush=True)
    common.write_json(rec, a.name, a.out_dir)


if __name__ == "__main__":
    main()
