#!/usr/bin/env python3
"""Which kernels cuBLAS runs where the GEMM model misses (issue #27 d6), and why fp16 runs slower than bf16.

gemm_graph_sweep.py timed the staircase and alignment sweeps in CUDA graphs and traced the kernels of the bf16
staircase only. The model's remaining misses (tests/model/ops/test_gemm_shape.cpp) are (a) the element-aligned class
of the alignment sweep, where F.linear with an odd N runs at 0.13 of its aligned neighbour against 0.18-0.19 for the
other odd series, (b) fp16 staircase points that bf16 gets right, and (c) fp16 running ~4% slower than bf16 on every
compute-bound shape. This probe records, without timing anything in graphs:

1. align_kernels: one eager product per alignment point (bf16 and fp16; "nn" torch.matmul(A[M,K], B[K,N]) and "nt"
   F.linear(A[M,K], W[N,K]); K or N at 4088..4104, the others 4096) under torch.profiler, each inside
   record_function "al|<dtype>|<layout>|<dim>|<value>": the kernels of each point (name, grid, block, duration in
   us; these GEMMs take 0.17-1.4 ms, so eager durations are the kernels' own). 3 products per point, the kernels
   of the last one kept.
2. staircase_kernels: the same for fp16 F.linear on the Llama-2-7B layer shapes at the staircase sweep's M values
   (the bf16 ones are in gemm_graph_kernels.json), range "pt|fp16|<layer>|<M>"; durations kept but the 4096-wide
   layers' operands come from L2 in this eager pass (one weight set), so only names and grids are evidence.
3. power: 8192^3 and 4096x22016x4096 (M x N x K) bf16 and fp16 (random normal operands, and zeros), each looped for
   3 s with nvidia-smi sampled every 0.2 s: TFLOP/s, median SM clock, power and the clock-event reasons -- whether
   fp16's lower rate is the clock falling under the power cap (more mantissa bits toggling per multiply).

Writes gemm_kernel_probe.json under $OUT (or --out-dir). About 60-90 s on one H100.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

DEV = torch.device("cuda")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
LAYERS = ((22016, 4096, "gate_up_7b"), (4096, 11008, "down_7b"), (12288, 4096, "qkv_7b"), (4096, 4096, "out_7b"))


def staircase_ms(label):
    if label == "gate_up_7b":
        return list(range(1, 513)) + list(range(520, 1025, 8))
    return sorted(set(range(1, 17)) | set(range(120, 161)) | set(range(8, 1025, 8)))


def kernels_by_range(prof, prefix):
    """{range name: [[kernel, grid, block, dur_us], ...]} from the profile's Chrome trace (kernels and memsets inside
    each gpu_user_annotation span whose name starts with prefix)."""
    fd, raw = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(raw)
    with open(raw) as f:
        ev = json.load(f)["traceEvents"]
    os.remove(raw)
    spans = sorted((e["ts"], e["ts"] + e.get("dur", 0), e["name"]) for e in ev
                   if e.get("cat") == "gpu_user_annotation" and str(e.get("name", "")).startswith(prefix))
    kern = sorted(((e["ts"], e) for e in ev if e.get("cat") in ("kernel", "gpu_memset")), key=lambda x: x[0])
    out, j = {}, 0
    for s, t, name in spans:
        rows = []
        while j < len(kern) and kern[j][0] < s:
            j += 1
        i = j
        while i < len(kern) and kern[i][0] <= t:
            e = kern[i][1]
            a = e.get("args", {})
            rows.append([e["name"][:160], a.get("grid"), a.get("block"), round(e.get("dur", 0.0), 2)])
            i += 1
        out.setdefault(name, rows)  # several products per range: kernels of all of them, in order
    return out


def align_kernels(rec):
    from torch.profiler import ProfilerActivity, profile
    pts = []
    for dname, dt in DTYPES.items():
        for layout in ("nn", "nt"):
            for dim in ("K", "N"):
                for v in range(4088, 4105):
                    m, k, n = 4096, (v if dim == "K" else 4096), (v if dim == "N" else 4096)
                    x = torch.randn(m, k, device=DEV, dtype=dt)
                    b = torch.randn(k, n, device=DEV, dtype=dt) if layout == "nn" else torch.randn(n, k, device=DEV, dtype=dt)
                    fn = (lambda x=x, b=b: torch.matmul(x, b)) if layout == "nn" else (lambda x=x, b=b: F.linear(x, b))
                    fn()
                    pts.append((f"al|{dname}|{layout}|{dim}|{v}", fn, x, b))
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for name, fn, _, _ in pts:
            for _ in range(2):
                fn()
            torch.cuda.synchronize()
            with torch.profiler.record_function(name):
                fn()
            torch.cuda.synchronize()
    rec["align_kernels"] = kernels_by_range(prof, "al|")


def staircase_kernels(rec):
    from torch.profiler import ProfilerActivity, profile
    pts = [(label, torch.randn(n, k, device=DEV, dtype=torch.float16), torch.randn(1024, k, device=DEV, dtype=torch.float16))
           for n, k, label in LAYERS]
    for label, w, x in pts:
        for m in (1, 64, 512):
            F.linear(x[:m], w)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for label, w, x in pts:
            for m in staircase_ms(label):
                with torch.profiler.record_function(f"pt|fp16|{label}|{m}"):
                    F.linear(x[:m], w)
                torch.cuda.synchronize()
    rec["staircase_kernels_fp16"] = kernels_by_range(prof, "pt|")


def power(rec, seconds):
    rows = []
    for m, n, k in ((8192, 8192, 8192), (4096, 22016, 4096)):
        for dname, dt in DTYPES.items():
            for data in ("randn", "zeros"):
                mk = torch.randn if data == "randn" else torch.zeros
                x, w = mk(m, k, device=DEV, dtype=dt), mk(n, k, device=DEV, dtype=dt)
                for _ in range(5):
                    F.linear(x, w)
                torch.cuda.synchronize()
                calls = 0
                with common.SmiSampler(0, period_s=0.2) as s:
                    t0 = time.perf_counter()
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record()
                    while time.perf_counter() - t0 < seconds:
                        for _ in range(20):
                            F.linear(x, w)
                        calls += 20
                        torch.cuda.synchronize()
                    end.record()
                    torch.cuda.synchronize()
                el = start.elapsed_time(end) / 1e3
                rows.append({"M": m, "N": n, "K": k, "dtype": dname, "data": data, "calls": calls,
                             "tflops": round(2.0 * m * n * k * calls / el / 1e12, 2), "smi": s.summary()})
                print(rows[-1], flush=True)
                del x, w
                time.sleep(1.0)  # let the clock recover between items
    rec["power"] = rows


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=3.0, help="loop length of each power item")
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    rec = {"name": "gemm_kernel_probe", "kind": "gemm_kernel_probe"}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rec["nvidia_smi_before"] = common.nvidia_smi_static(0)
    for part, fn in (("align", lambda: align_kernels(rec)), ("staircase", lambda: staircase_kernels(rec)),
                     ("power", lambda: power(rec, a.seconds))):
        t0 = time.perf_counter()
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - a part that fails is recorded; the next one runs
            torch.cuda.synchronize()
            rec[part + "_error"] = str(e)[:500]
            print(f"part {part} failed: {e}", flush=True)
        print(f"{part}: {time.perf_counter() - t0:.0f} s", flush=True)
        torch.cuda.empty_cache()
    rec["nvidia_smi_after"] = common.nvidia_smi_static(0)
    print("wrote", common.write_json(rec, "gemm_kernel_probe", a.out_dir), flush=True)


if __name__ == "__main__":
    main()
