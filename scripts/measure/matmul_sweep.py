#!/usr/bin/env python3
"""bf16 torch.matmul throughput sweep (cuBLAS through PyTorch), to compare with gpuplan's roofline.

Shapes: square n x n x n for n in 1024..16384, and LLM GEMMs with M = 4096 tokens: X[M,h] @ W[h,3h] (hidden -> 3h)
and X[M,4h] @ W[4h,h] (4h -> hidden) for several h, plus the Llama-2-7B MLP shapes (4096 <-> 11008).
Random normal inputs (never zeros), several input sets rotated so that small problems do not sit in L2,
CUDA events around each product after warm-up, median of --reps. TFLOP/s = 2*M*N*K / time.
Writes one JSON (default $OUT/matmul_sweep.json).
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402


def shapes():
    out = [(f"square_{n}", n, n, n) for n in (1024, 2048, 4096, 8192, 16384)]
    for h in (2048, 4096, 8192):
        out.append((f"M4096_h{h}_to_3h", 4096, h, 3 * h))
        out.append((f"M4096_4h{4 * h}_to_h", 4096, 4 * h, h))
    out.append(("M4096_4096_to_11008", 4096, 4096, 11008))
    out.append(("M4096_11008_to_4096", 4096, 11008, 4096))
    out.append(("M8192_2048_to_128256_lmhead", 8192, 2048, 128256))
    return out  # (name, M, K, N)


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--peak-tflops", type=float, default=989.4)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--append-jsonl", default=None)
    p.add_argument("--name", default="matmul_sweep")
    a = p.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    rec = {"name": a.name, "kind": "matmul_sweep", "dtype": "bf16", "op": "torch.matmul(A[M,K], B[K,N]), row-major",
           "timing": f"CUDA events per product, median of {a.reps} after {a.warmup} warm-ups, rotating input sets",
           "flops_formula": "2*M*N*K", "peak_tflops_ref": a.peak_tflops}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rec["nvidia_smi_before"] = common.nvidia_smi_static(0)
    results = []
    with common.SmiSampler(0) as sampler:
        for name, m, k, n in shapes():
            nsets = max(1, min(8, int(256e6 // (2 * (m * k + k * n + m * n)))))
            As = [torch.randn(m, k, device=dev, dtype=torch.bfloat16) for _ in range(nsets)]
            Bs = [torch.randn(k, n, device=dev, dtype=torch.bfloat16) for _ in range(nsets)]
            Cs = [torch.empty(m, n, device=dev, dtype=torch.bfloat16) for _ in range(nsets)]
            for i in range(a.warmup):
                torch.matmul(As[i % nsets], Bs[i % nsets], out=Cs[i % nsets])
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(a.reps)]
            for i, (s, e) in enumerate(ev):
                j = i % nsets
                s.record()
                torch.matmul(As[j], Bs[j], out=Cs[j])
                e.record()
            torch.cuda.synchronize()
            ts = [s.elapsed_time(e) / 1e3 for s, e in ev]
            med = statistics.median(ts)
            tf = 2 * m * n * k / med / 1e12
            assert torch.isfinite(Cs[0]).all()
            results.append({"shape": name, "M": m, "K": k, "N": n, "time_median_s": med,
                            "time_min_s": min(ts), "time_max_s": max(ts), "tflops": tf,
                            "frac_of_peak": tf / a.peak_tflops, "input_sets": nsets})
            print(f"{name:32s} M={m:6d} K={k:6d} N={n:6d}  {med*1e3:8.3f} ms  {tf:6.1f} TFLOP/s", flush=True)
            del As, Bs, Cs
            torch.cuda.empty_cache()
    rec["results"] = results
    rec["nvidia_smi_during"] = sampler.summary()
    rec["nvidia_smi_after"] = common.nvidia_smi_static(0)
    print("wrote", common.write_json(rec, a.name, a.out_dir, a.append_jsonl), flush=True)


if __name__ == "__main__":
    main()
