#!/usr/bin/env python3
"""FP8 GEMMs with DeepSeek-V3's fine-grained scaling vs per-tensor FP8 and BF16, at DeepSeek-V3's shapes (issue #21).

DeepSeek-V3 (arXiv:2412.19437 §3.3.2) runs every GEMM in FP8 with 1x128 activation tiles and 128x128 weight blocks,
each with its own fp32 scale, the partial sums promoted to fp32 every 128 elements of K. gpuplan prices FP8 GEMMs from
per-tensor (Transformer-Engine-style) sweeps; this measures how much the fine-grained recipe costs on an H100:
  - bf16: torch.mm;
  - fp8 tensorwise: torch._scaled_mm with one scale per operand (fast accumulation off and on);
  - fp8 rowwise: torch._scaled_mm with a scale per row of A and per column of B;
  - fp8 blockwise: torch._scaled_mm with 1x128 scales on A and 128x128 on B (cuBLASLt's block-scaled path, PyTorch
    >= 2.9 on sm90), where this PyTorch/cuBLAS has it (else recorded as a failure).
Shapes (M x N x K, y = x W^T): the forward GEMMs of one DeepSeek-V3 layer for one 4096-token micro-batch (MLA down,
q up, kv up, o proj; shared expert up/down; a routed expert's up/down at 8192 rows, what EP 64 gives each of a GPU's
4 experts), their dgrad (M x K x N) and wgrad (N x K x M, K = tokens) shapes, and DeepGEMM's published H800 shapes.
Random normal inputs, CUDA events, median of --reps after warm-up; each product checked against float32.
Writes $OUT/fp8_blockwise_gemm.json and prints a table.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402

FWD = [  # (name, M, N, K)
    ("mla_down_qkv", 4096, 2112, 7168), ("q_up", 4096, 24576, 1536), ("kv_up", 4096, 32768, 512),
    ("o_proj", 4096, 7168, 16384), ("shared_up", 4096, 4096, 7168), ("shared_down", 4096, 7168, 2048),
    ("expert_up_8192", 8192, 4096, 7168), ("expert_down_8192", 8192, 7168, 2048),
]


def shapes():
    out = []
    for name, M, N, K in FWD:
        out.append((name + ":fprop", M, N, K))
        out.append((name + ":dgrad", M, K, N))
        out.append((name + ":wgrad", N, K, M))
    return out


def timed(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(ts)


def q_tensor(x):
    s = x.abs().amax().clamp_min(1e-12).float() / 448.0
    return (x / s).to(torch.float8_e4m3fn), s


def q_rows(x):  # one scale per row of x [R, C]
    s = x.abs().amax(dim=1, keepdim=True).clamp_min(1e-12).float() / 448.0
    return (x / s).to(torch.float8_e4m3fn), s


def q_tiles_1x128(x):  # [R, C] -> scales [R, C/128]
    R, C = x.shape
    t = x.view(R, C // 128, 128)
    s = t.abs().amax(dim=2).clamp_min(1e-12).float() / 448.0
    return (t / s[:, :, None]).view(R, C).to(torch.float8_e4m3fn), s


def q_blocks_128(w):  # [N, K] -> scales [N/128, K/128]
    N, K = w.shape
    t = w.view(N // 128, 128, K // 128, 128)
    s = t.abs().amax(dim=(1, 3)).clamp_min(1e-12).float() / 448.0
    return (t / s[:, None, :, None]).view(N, K).to(torch.float8_e4m3fn), s


def case(name, M, N, K, method, warmup, reps):
    layout = None
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / K ** 0.5
    ref = x[:256].float() @ w.float().t()
    if method == "bf16":
        fn = lambda: torch.mm(x, w.t())  # noqa: E731
    elif method.startswith("fp8_tensorwise"):
        xq, sx = q_tensor(x)
        wq, sw = q_tensor(w)
        fast = method.endswith("fast")
        fn = lambda: torch._scaled_mm(xq, wq.t(), sx, sw, out_dtype=torch.bfloat16, use_fast_accum=fast)  # noqa: E731
    elif method == "fp8_rowwise":
        xq, sx = q_rows(x)
        wq, sw = q_rows(w)
        swt = sw.t().contiguous()
        fn = lambda: torch._scaled_mm(xq, wq.t(), sx, swt, out_dtype=torch.bfloat16)  # noqa: E731
    elif method == "fp8_blockwise":
        xq, sx = q_tiles_1x128(x)
        wq, sw = q_blocks_128(w)
        # cuBLASLt's 1x128 scales are outer-dim major (M contiguous): pass them transposed-contiguous.
        # Layouts differ between PyTorch releases; the first that runs is kept (recorded in the case's "layout").
        variants = [("sa outer-major, sb (K/128,N/128) strided", sx.t().contiguous().t(), sw.t()),
                    ("sa outer-major, sb contiguous", sx.t().contiguous().t(), sw.t().contiguous()),
                    ("sa row-major, sb contiguous", sx.contiguous(), sw.t().contiguous())]
        last = None
        for layout, sa, sb in variants:
            try:
                torch._scaled_mm(xq, wq.t(), sa, sb, out_dtype=torch.bfloat16)
                fn = lambda sa=sa, sb=sb: torch._scaled_mm(xq, wq.t(), sa, sb, out_dtype=torch.bfloat16)  # noqa: E731
                break
            except Exception as e:  # noqa: BLE001
                last, fn = e, None
        if fn is None:
            raise RuntimeError(f"no blockwise layout ran: {last}")
    else:
        raise ValueError(method)
    y = fn()
    err = float((y[:256].float() - ref).norm() / ref.norm())
    tol = 8e-2 if method.startswith("fp8") else 2e-2
    if not err < tol:
        raise RuntimeError(f"relative error {err:.3g} over {tol}")
    med = timed(fn, warmup, reps)
    flop = 2.0 * M * N * K
    r = {"shape": name, "M": M, "N": N, "K": K, "method": method, "median_s": med, "tflops": flop / med / 1e12,
         "rel_err": err}
    if method == "fp8_blockwise":
        r["layout"] = layout
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    torch.manual_seed(0)
    rec = {"what": "fp8 GEMMs: tensorwise / rowwise / blockwise (1x128 x 128x128) scaling vs bf16, DeepSeek-V3 shapes",
           "meta": common.run_metadata(), "gpu": common.nvidia_smi_static(0), "software": common.software_versions(),
           "device": common.device_properties(), "cases": [], "failures": []}
    methods = ["bf16", "fp8_tensorwise", "fp8_tensorwise_fast", "fp8_rowwise", "fp8_blockwise"]
    for name, M, N, K in shapes():
        for m in methods:
            try:
                r = case(name, M, N, K, m, a.warmup, a.reps)
                rec["cases"].append(r)
                print(f"{name:24s} {M:6d} {N:6d} {K:6d} {m:20s} {r['median_s']*1e6:9.1f} us {r['tflops']:7.1f} TFLOP/s")
            except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
                rec["failures"].append({"shape": name, "method": m, "error": str(e)[:400]})
                print(f"{name:24s} {m:20s} FAILED {str(e)[:160]}")
            torch.cuda.empty_cache()
    rec["smi_after"] = common.nvidia_smi_static(0)
    print(common.write_json(rec, "fp8_blockwise_gemm", a.out_dir))


if __name__ == "__main__":
    main()
