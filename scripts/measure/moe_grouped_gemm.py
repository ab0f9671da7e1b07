#!/usr/bin/env python3
"""Grouped expert GEMMs (MoE) on one GPU: time vs tokens per expert, expert count and expert shape, bf16 and fp8.

For issue #21 (MoE measured end to end) and the serving/training pricing of routed experts as one grouped GEMM.
Each case is E experts, each multiplying m token rows of width k by its own k x n weight:
  - torch.bmm over [E, m, k] x [E, k, n] (uniform m, one cuBLAS batched call);
  - torch._grouped_mm over a [E*m, k] x [E, k, n] with int32 offsets (the grouped kernel MoE layers use);
  - fp8 (e4m3, rowwise scales) through torch._scaled_grouped_mm where this PyTorch has it.
Shapes are the up/gate (n = 2*i_e, k = h) and down (n = h, k = i_e) GEMMs of DeepSeek-V3 (h 7168, i_e 2048, and
its TP-8 shard 256), Qwen3-235B-A22B (4096, 1536), Qwen3-30B-A3B (2048, 768) and Mixtral 8x7B (4096, 14336).
Random normal inputs (never zeros), input sets rotated when the weights would fit in L2 (50 MB), CUDA events
around each call after warm-up, median of --reps. Each case is checked against a float32 product of one expert.
Writes $OUT/moe_grouped_gemm.json (one record per case) and prints a table.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402

SHAPES = [  # (name, n, k): one expert's GEMM y[m, n] = x[m, k] @ W[k, n]
    ("dsv3_up", 4096, 7168), ("dsv3_down", 7168, 2048),
    ("dsv3_tp8_up", 512, 7168), ("dsv3_tp8_down", 7168, 256),
    ("qwen3_235b_up", 3072, 4096), ("qwen3_235b_down", 4096, 1536),
    ("qwen3_30b_up", 1536, 2048), ("qwen3_30b_down", 2048, 768),
    ("mixtral_up", 28672, 4096), ("mixtral_down", 4096, 14336),
]
EXPERTS = [8, 32, 128]
TOKENS = [1, 4, 16, 64, 256, 1024, 4096]
MAX_FLOP = 4e13        # skip cases above this (a few tens of ms each)
MAX_WEIGHT_BYTES = 12e9


def timed(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
    times.sort()
    return statistics.median(times), times[max(0, len(times) // 10)], times[min(len(times) - 1, (9 * len(times)) // 10)]


def rel_err(y, ref):
    return float((y.float() - ref).norm() / ref.norm().clamp_min(1e-30))


def case(name, n, k, E, m, dtype, method, warmup, reps):
    dev = "cuda"
    wbytes = E * k * n * (1 if dtype == "fp8" else 2)
    sets = max(1, min(4, int(200e6 // max(1, wbytes)) + 1)) if wbytes < 200e6 else 1
    xs, ws, extra = [], [], []
    for _ in range(sets):
        x = torch.randn(E * m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(E, k, n, device=dev, dtype=torch.bfloat16) / k ** 0.5
        xs.append(x)
        ws.append(w)
    offs = torch.arange(1, E + 1, device=dev, dtype=torch.int32) * m
    idx = [0]
    if dtype == "bf16" and method == "bmm":
        xb = [x.view(E, m, k) for x in xs]
        def fn():
            i = idx[0] = (idx[0] + 1) % sets
            return torch.bmm(xb[i], ws[i])
        out = lambda: torch.bmm(xb[0], ws[0])[0]  # noqa: E731
    elif dtype == "bf16" and method == "grouped_mm":
        def fn():
            i = idx[0] = (idx[0] + 1) % sets
            return torch._grouped_mm(xs[i], ws[i], offs=offs)
        out = lambda: torch._grouped_mm(xs[0], ws[0], offs=offs)[:m]  # noqa: E731
    elif dtype == "fp8" and method == "scaled_grouped_mm":
        # Rowwise scales: x per token row, W per expert and output column; W column-major as the kernel wants it.
        xq, wq, sx, sw = [], [], [], []
        for x, w in zip(xs, ws):
            ax = x.abs().amax(dim=1).clamp_min(1e-12) / 448.0
            xq.append((x / ax[:, None]).to(torch.float8_e4m3fn))
            sx.append(ax.float())
            aw = w.abs().amax(dim=1).clamp_min(1e-12) / 448.0  # [E, n]
            wq.append((w / aw[:, None, :]).to(torch.float8_e4m3fn).transpose(-2, -1).contiguous().transpose(-2, -1))
            sw.append(aw.float())
        def fn():
            i = idx[0] = (idx[0] + 1) % sets
            return torch._scaled_grouped_mm(xq[i], wq[i], sx[i], sw[i], offs=offs, out_dtype=torch.bfloat16)
        out = lambda: torch._scaled_grouped_mm(xq[0], wq[0], sx[0], sw[0], offs=offs, out_dtype=torch.bfloat16)[:m]  # noqa: E731
    else:
        raise ValueError(method)
    ref = xs[0][:m].float() @ ws[0][0].float()
    err = rel_err(out(), ref)
    tol = 8e-2 if dtype == "fp8" else 2e-2
    if not err < tol:
        raise RuntimeError(f"{name} E={E} m={m} {method}: relative error {err:.3g} over {tol}")
    med, p10, p90 = timed(fn, warmup, reps)
    flop = 2.0 * E * m * k * n
    bytes_min = wbytes + E * m * (k + n) * 2
    return {"shape": name, "n": n, "k": k, "experts": E, "tokens_per_expert": m, "dtype": dtype, "method": method,
            "median_s": med, "p10_s": p10, "p90_s": p90, "flop": flop, "min_bytes": bytes_min,
            "tflops": flop / med / 1e12, "gbps_min_bytes": bytes_min / med / 1e9, "rel_err": err,
            "input_sets": sets}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--quick", action="store_true", help="a few cases only (a smoke test)")
    a = p.parse_args()
    torch.manual_seed(0)
    meta = common.run_metadata()
    meta["gpu"] = common.nvidia_smi_static(0)
    meta["software"] = common.software_versions()
    meta["device"] = common.device_properties()
    have_scaled = hasattr(torch, "_scaled_grouped_mm")
    rows, failures = [], []
    shapes = SHAPES[:2] if a.quick else SHAPES
    for name, n, k in shapes:
        for E in EXPERTS:
            for m in (TOKENS[:3] if a.quick else TOKENS):
                if 2.0 * E * m * k * n > MAX_FLOP or E * k * n * 2 > MAX_WEIGHT_BYTES:
                    continue
                methods = [("bf16", "bmm"), ("bf16", "grouped_mm")] + ([("fp8", "scaled_grouped_mm")] if have_scaled else [])
                for dtype, method in methods:
                    try:
                        rows.append(case(name, n, k, E, m, dtype, method, a.warmup, a.reps))
                    except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
                        failures.append({"shape": name, "experts": E, "tokens_per_expert": m, "method": method,
                                         "error": str(e)[:300]})
                    torch.cuda.empty_cache()
    record = {"what": "grouped expert GEMMs: bmm, _grouped_mm (bf16), _scaled_grouped_mm (fp8 rowwise)",
              "meta": meta, "have_scaled_grouped_mm": have_scaled, "cases": rows, "failures": failures}
    common.write_json(record, "moe_grouped_gemm", a.out_dir)
    print(f"{'shape':16} {'E':>4} {'m':>5} {'method':18} {'us':>9} {'TFLOP/s':>8} {'GB/s':>7}")
    for r in rows:
        if r["tokens_per_expert"] in (1, 16, 256, 4096):
            print(f"{r['shape']:16} {r['experts']:4d} {r['tokens_per_expert']:5d} {r['method']:18} "
                  f"{r['median_s'] * 1e6:9.1f} {r['tflops']:8.1f} {r['gbps_min_bytes']:7.0f}")
    print(f"{len(rows)} cases, {len(failures)} failures" + (f"; first: {failures[0]}" if failures else ""))


if __name__ == "__main__":
    main()
