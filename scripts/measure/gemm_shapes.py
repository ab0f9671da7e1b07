#!/usr/bin/env python3
"""GEMM shape effects on one GPU (issue #27 d6): leading-dimension alignment and the wave/tile staircase.

1. Alignment: M x K x N = 4096^3 with one of M, K, N set to each value in 4088..4104 (the other two 4096), for
   bf16 and fp16 through torch.matmul in two layouts -- "nn": A[M,K] @ B[K,N] (B row-major, its leading dimension N)
   and "nt": F.linear(A[M,K], W[N,K]) (the nn.Linear layout: both operands have leading dimension K) --, for fp8
   (e4m3, torch._scaled_mm, per-tensor scales, "nt" only: cuBLASLt's fp8 path wants the second operand column-major)
   and int8 (torch._int_mm, "nn"). Shapes a path refuses are recorded with the error text (e.g. _scaled_mm's
   "divisible by 16"): that refusal is itself the fact a planner needs (frameworks pad).
2. Staircase: F.linear(X[M,K], W[N,K]) in bf16 for M = 1, 2, 4, then 8..1024 step 8, on the Llama-2-7B-shaped
   layers (N,K) = (22016, 4096) fused gate+up, (4096, 11008) down, (12288, 4096) fused QKV, (4096, 4096) output.

Random normal inputs (never zeros), input sets rotated so that repeated runs do not read from L2, CUDA events around
each product after warm-up, median of --reps. Writes gemm_alignment.json and gemm_staircase.json under --out-dir.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DEV = torch.device("cuda")


def run_one(path, layout, m, k, n, reps, warmup):
    per_set_bytes = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}[path] * (m * k + k * n) + 2 * m * n
    nsets = max(1, min(8, int(256e6 // per_set_bytes)))
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(path)
    one = torch.ones((), device=DEV, dtype=torch.float32)
    sets = []
    for _ in range(nsets):
        if path in ("bf16", "fp16"):
            a = torch.randn(m, k, device=DEV, dtype=dt)
            if layout == "nn":
                b = torch.randn(k, n, device=DEV, dtype=dt)
                c = torch.empty(m, n, device=DEV, dtype=dt)
                sets.append(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c))
            else:
                w = torch.randn(n, k, device=DEV, dtype=dt)
                sets.append(lambda a=a, w=w: F.linear(a, w))
        elif path == "fp8":
            a = torch.randn(m, k, device=DEV).to(torch.float8_e4m3fn)
            w = torch.randn(n, k, device=DEV).to(torch.float8_e4m3fn)
            sets.append(lambda a=a, w=w: torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        else:
            a = torch.randint(-64, 64, (m, k), device=DEV, dtype=torch.int8)
            b = torch.randint(-64, 64, (k, n), device=DEV, dtype=torch.int8)
            sets.append(lambda a=a, b=b: torch._int_mm(a, b))
    try:
        out = sets[0]()
        torch.cuda.synchronize()
        if not torch.isfinite(out.float()).all():
            return {"status": "nonfinite"}
    except Exception as e:  # noqa: BLE001 - the refusal is the result
        torch.cuda.synchronize()
        return {"status": "refused", "error": str(e).splitlines()[0][:300]}
    for i in range(warmup):
        sets[i % nsets]()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for i, (s, e) in enumerate(ev):
        s.record()
        sets[i % nsets]()
        e.record()
    torch.cuda.synchronize()
    ts = [s.elapsed_time(e) / 1e3 for s, e in ev]
    med = statistics.median(ts)
    return {"status": "ok", "time_median_s": med, "time_min_s": min(ts), "time_max_s": max(ts),
            "tflops": 2 * m * n * k / med / 1e12, "input_sets": nsets}


def header(name, kind, a):
    rec = {"name": name, "kind": kind, "timing": f"CUDA events per product, median of {a.reps} after {a.warmup} "
           "warm-ups, rotating input sets", "flops_formula": "2*M*N*K"}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rec["nvidia_smi_before"] = common.nvidia_smi_static(0)
    return rec


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--only", choices=["alignment", "staircase", "both"], default="both")
    a = p.parse_args()
    torch.manual_seed(0)
    if a.only in ("alignment", "both"):
        rec = header("gemm_alignment", "gemm_alignment", a)
        rec["op"] = ("bf16/fp16: torch.matmul(A[M,K], B[K,N]) ('nn') and F.linear(A[M,K], W[N,K]) ('nt'); "
                     "fp8: torch._scaled_mm(A[M,K] e4m3, W[N,K].t() e4m3, per-tensor scales 1, bf16 out) ('nt'); "
                     "int8: torch._int_mm(A[M,K], B[K,N]) int32 out ('nn')")
        results = []
        with common.SmiSampler(0) as sampler:
            for path, layouts in (("bf16", ("nn", "nt")), ("fp16", ("nn", "nt")), ("fp8", ("nt",)), ("int8", ("nn",))):
                for layout in layouts:
                    for dim in ("M", "K", "N"):
                        for v in range(4088, 4105):
                            m, k, n = (v if dim == "M" else 4096), (v if dim == "K" else 4096), (v if dim == "N" else 4096)
                            r = run_one(path, layout, m, k, n, a.reps, a.warmup)
                            r.update({"dtype": path, "layout": layout, "varied": dim, "M": m, "K": k, "N": n})
                            results.append(r)
                            t = r.get("time_median_s")
                            print(f"align {path:4s} {layout} {dim}={v:5d} "
                                  + (f"{t*1e3:8.3f} ms {r['tflops']:7.1f} TF/s" if t else r["status"] + " " + r.get("error", "")[:60]),
                                  flush=True)
                    torch.cuda.empty_cache()
        rec["results"] = results
        rec["nvidia_smi_during"] = sampler.summary()
        rec["nvidia_smi_after"] = common.nvidia_smi_static(0)
        print("wrote", common.write_json(rec, "gemm_alignment", a.out_dir), flush=True)
    if a.only in ("staircase", "both"):
        rec = header("gemm_staircase", "gemm_staircase", a)
        rec["op"] = "F.linear(X[M,K], W[N,K]) bf16 (the nn.Linear layout; cuBLAS through PyTorch)"
        results = []
        ms = [1, 2, 4] + list(range(8, 1025, 8))
        with common.SmiSampler(0) as sampler:
            for n, k, label in ((22016, 4096, "gate_up_7b"), (4096, 11008, "down_7b"), (12288, 4096, "qkv_7b"),
                                (4096, 4096, "out_7b")):
                for m in ms:
                    r = run_one("bf16", "nt", m, k, n, a.reps, a.warmup)
                    r.update({"dtype": "bf16", "layout": "nt", "layer": label, "M": m, "K": k, "N": n})
                    results.append(r)
                    if m % 64 == 0 or m < 8:
                        print(f"stair {label:10s} M={m:5d} {r['time_median_s']*1e6:9.1f} us {r['tflops']:7.1f} TF/s", flush=True)
        rec["results"] = results
        rec["nvidia_smi_during"] = sampler.summary()
        rec["nvidia_smi_after"] = common.nvidia_smi_static(0)
        print("wrote", common.write_json(rec, "gemm_staircase", a.out_dir), flush=True)


if __name__ == "__main__":
    main()
