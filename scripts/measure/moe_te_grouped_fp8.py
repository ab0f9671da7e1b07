#!/usr/bin/env python3
"""Routed-expert GEMMs the way Transformer Engine's GroupedLinear runs them, against one grouped kernel (issue #21).

Megatron-Core's TEGroupedMLP calls TE GroupedLinear, whose `general_grouped_gemm` launches one cuBLASLt GEMM per
local expert, round-robin over TE's compute streams (NVIDIA/TransformerEngine transformer_engine/common/gemm/
cublaslt_gemm.cu, nvte_multi_stream_cublas_gemm; 4 streams by default), after quantising each expert's rows on its
own (tex.fused_multi_quantize). gpuplan prices the experts' GEMMs with one law measured on torch._grouped_mm in bf16
(1.065 x torch.bmm + 11 us; data/validation/measured/h100-sxm5-80gb/moe_grouped_gemm.json) and assumes fp8 the same.
This script measures, for each of the six GEMMs of an expert MLP's forward and backward (fc1/fc2 x fprop/dgrad/
wgrad) at Qwen3-30B-A3B and Qwen3-235B-A22B expert shapes, E local experts and m rows each:
  - bmm_bf16: torch.bmm over [E, M, K] x [E, K, N] (the law's basis);
  - grouped_bf16: torch._grouped_mm (fprop/dgrad as 2d x 3d with row offsets; wgrad as 2d x 2d with K offsets);
  - loop_bf16: one torch.mm per expert over 4 CUDA streams (TE's loop, bf16);
  - loop_fp8: one torch._scaled_mm (e4m3, tensorwise scales) per expert over 4 streams (TE's fp8 loop; the cuBLASLt
    fp8 kernels TE also calls, not TE itself: Transformer Engine is not installed on the lent machines);
  - quant_loop / quant_fused: the per-expert current-scaling cast of the GEMM's A operand emulated in PyTorch, one
    amax + scale + cast per expert (quant_loop), or one segmented amax and one broadcast cast for all experts
    (quant_fused; TE's fused_multi_quantize is at most this many passes).
Each is timed eagerly (CUDA events, median of --reps) and inside a CUDA graph (the same calls captured, replayed
--reps times). Writes $OUT/moe_te_grouped_fp8.json. `--dry-run` lists the cases without torch.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

SHAPES = [("qwen3_30b", 2048, 768), ("qwen3_235b", 4096, 1536)]  # (name, hidden h, expert width i); fc1 is gated
EXPERTS = [16, 4]
ROWS = [512, 2048, 8192]
STREAMS = 4


def gemm_kinds(h, i, m):
    """(kind, M, K, N) of the six GEMMs of one expert: y[M, N] = a[M, K] @ b[K, N]."""
    return [("fc1_fprop", m, h, 2 * i), ("fc2_fprop", m, i, h),
            ("fc1_dgrad", m, 2 * i, h), ("fc2_dgrad", m, h, i),
            ("fc1_wgrad", 2 * i, m, h), ("fc2_wgrad", h, m, i)]


def cases():
    for name, h, i in SHAPES:
        for E in EXPERTS:
            for m in ROWS:
                for kind, M, K, N in gemm_kinds(h, i, m):
                    yield name, h, i, E, m, kind, M, K, N


def timed_eager(torch, fn, warmup, reps):
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
    return statistics.median(ts), min(ts), max(ts)


def timed_graph(torch, fn, reps):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        g.replay()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e-3)
    del g
    return statistics.median(ts), min(ts), max(ts)


def multi_stream(torch, streams, calls):
    """Run the calls round-robin over the streams, forked from and joined back into the current stream."""
    cur = torch.cuda.current_stream()
    for s in streams:
        s.wait_stream(cur)
    for j, call in enumerate(calls):
        with torch.cuda.stream(streams[j % len(streams)]):
            call()
    for s in streams:
        cur.wait_stream(s)


def build(torch, method, E, M, K, N, wgrad, streams):
    dev, bf16, f8 = "cuda", torch.bfloat16, torch.float8_e4m3fn
    if method == "bmm_bf16":
        a = torch.randn(E, M, K, device=dev, dtype=bf16)
        b = torch.randn(E, K, N, device=dev, dtype=bf16)
        return lambda: torch.bmm(a, b)
    if method == "grouped_bf16":
        if not wgrad:
            a = torch.randn(E * M, K, device=dev, dtype=bf16)
            b = torch.randn(E, N, K, device=dev, dtype=bf16).transpose(-2, -1)
            offs = torch.arange(1, E + 1, device=dev, dtype=torch.int32) * M
        else:
            a = torch.randn(M, E * K, device=dev, dtype=bf16)            # [M, sum K]: the per-expert K are the rows
            b = torch.randn(N, E * K, device=dev, dtype=bf16).t()        # [sum K, N], column-major
            offs = torch.arange(1, E + 1, device=dev, dtype=torch.int32) * K
        return lambda: torch._grouped_mm(a, b, offs=offs)
    if method == "loop_bf16":
        As = [torch.randn(M, K, device=dev, dtype=bf16) for _ in range(E)]
        Bs = [torch.randn(K, N, device=dev, dtype=bf16) for _ in range(E)]
        calls = [(lambda x=x, y=y: torch.mm(x, y)) for x, y in zip(As, Bs)]
        return lambda: multi_stream(torch, streams, calls)
    if method == "loop_fp8":
        As = [torch.randn(M, K, device=dev, dtype=bf16).to(f8) for _ in range(E)]
        Bs = [torch.randn(N, K, device=dev, dtype=bf16).to(f8).t() for _ in range(E)]  # column-major [K, N]
        one = torch.ones((), device=dev, dtype=torch.float32)
        calls = [(lambda x=x, y=y: torch._scaled_mm(x, y, scale_a=one, scale_b=one, out_dtype=bf16))
                 for x, y in zip(As, Bs)]
        return lambda: multi_stream(torch, streams, calls)
    if method in ("quant_loop", "quant_fused"):
        x = torch.randn(E * M, K, device=dev, dtype=bf16)
        q = torch.empty(E * M, K, device=dev, dtype=f8)
        if method == "quant_loop":
            parts, outs = list(x.split(M)), list(q.split(M))

            def fn():
                for p, o in zip(parts, outs):
                    s = 448.0 / p.abs().amax().float().clamp_min(1e-12)
                    o.copy_((p.float() * s).to(f8))
            return fn
        xv, qv = x.view(E, M * K), q.view(E, M * K)

        def fn():
            s = 448.0 / xv.abs().amax(dim=1, keepdim=True).float().clamp_min(1e-12)
            qv.copy_((xv * s).to(f8))
        return fn
    raise ValueError(method)


METHODS = ["bmm_bf16", "grouped_bf16", "loop_bf16", "loop_fp8", "quant_loop", "quant_fused"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args()
    todo = list(cases())
    if a.dry_run:
        for c in todo:
            print(*c)
        print(f"{len(todo)} GEMM cases x {len(METHODS)} methods x eager/graph")
        return
    import torch
    torch.manual_seed(0)
    meta = common.run_metadata()
    meta["gpu"] = common.nvidia_smi_static(0)
    meta["software"] = common.software_versions()
    meta["device"] = common.device_properties()
    streams = [torch.cuda.Stream() for _ in range(STREAMS)]
    rows, failures = [], []
    for name, h, i, E, m, kind, M, K, N in todo:
        wgrad = kind.endswith("wgrad")
        for method in METHODS:
            if method.startswith("quant") and kind not in ("fc1_fprop", "fc2_fprop", "fc1_dgrad", "fc2_dgrad"):
                continue  # the casts are per A operand; the wgrad operands are the same tensors transposed
            rec = {"shape": name, "h": h, "i": i, "experts": E, "rows_per_expert": m, "gemm": kind,
                   "M": M, "K": K, "N": N, "method": method, "streams": STREAMS if "loop" in method else 1,
                   "flop": 2.0 * E * M * K * N}
            try:
                fn = build(torch, method, E, M, K, N, wgrad, streams)
                rec["eager_s"], rec["eager_min_s"], rec["eager_max_s"] = timed_eager(torch, fn, a.warmup, a.reps)
                rec["graph_s"], rec["graph_min_s"], rec["graph_max_s"] = timed_graph(torch, fn, a.reps)
                rows.append(rec)
            except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
                rec["error"] = str(e)[:300]
                failures.append(rec)
            torch.cuda.empty_cache()
        common.write_json({"what": __doc__.splitlines()[0], "meta": meta, "cases": rows, "failures": failures},
                          "moe_te_grouped_fp8", a.out_dir)
    print(f"{'shape':11} {'E':>3} {'m':>5} {'gemm':10} " + " ".join(f"{x:>13}" for x in METHODS) + "   (graph us)")
    key = {}
    for r in rows:
        key.setdefault((r["shape"], r["experts"], r["rows_per_expert"], r["gemm"]), {})[r["method"]] = r["graph_s"]
    for (s, E, m, g), v in key.items():
        print(f"{s:11} {E:3d} {m:5d} {g:10} " + " ".join(
            f"{v[x] * 1e6:13.1f}" if x in v else f"{'-':>13}" for x in METHODS))
    print(f"{len(rows)} timings, {len(failures)} failures" + (f"; first: {failures[0]}" if failures else ""))


if __name__ == "__main__":
    main()
