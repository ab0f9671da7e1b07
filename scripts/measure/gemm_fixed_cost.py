#!/usr/bin/env python3
"""The fixed cost of a GEMM (and of a streaming kernel) inside a CUDA graph against eager launches, and split-K by hand
on a deep-K shape (issue #27: the kernel cost inside CUDA graphs; 4096x11008 without split-K).

The graph sweeps (gemm_graph_sweep.py) show memory-bound GEMMs inside a graph at t = a + bytes / BW with a ~3 us
intercept, while the calibration's empty-kernel replay gap is 0.79 us. This script measures the intercept directly,
per execution mode, on shapes the sweeps did not use:

1. fixed: F.linear(X[M,K], W[N,K]) bf16 at M = 1 and 8 over weights of 2 MB ... 268 MB (memory-bound; operand sets
   rotated so that >= 256 MB separate two uses of one set, as in the graph sweep), each timed
   - "graph": G products captured in one CUDA graph, replay time / G (CUDA events around each replay);
   - "eager": the same G products launched back to back from Python between two CUDA events (the host may be the
     limit: host time per call is recorded too).
   The same for a streaming elementwise kernel (torch.mul(x, 2.0, out=y), 2 ... 268 MB read + written) and for an empty
   chain (torch.add on one element: the replay gap / eager launch interval).
2. depth: F.linear at M = N = 2048 (128 output tiles of 128x256: one wave on 132 SMs), K = 256 ... 8192, graph and
   eager: the intercept of t(K) is the compute-bound kernel's fixed cost (prologue, epilogue, gap).
3. splitk: 4096x11008 (the Llama-2-7B down projection) at M in {64, 128, 136, 192, 256, 384, 512}: F.linear as
   cuBLAS runs it, and by hand split into s = 2, 4 K-slices (torch.bmm of the slices into fp32 partials, then their
   sum and the cast: the partial-sum traffic and the extra kernels of a split-K).

4. heuristic: F.linear bf16 over N in {1024, 2048, 4096, 8192}, K in {4096, 11008, 14336, 28672}, M in {16, 64, 128,
   136, 256, 512}: the graph time and the kernels cuBLAS ran (torch.profiler, one eager call): where its heuristic
   splits K.

Writes gemm_fixed_cost.json under --out-dir (default $OUT). Runs in about 1-2 minutes on one H100.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from gemm_graph_sweep import graph_time  # noqa: E402 - G calls captured in one graph, replayed; per-call times

DEV = torch.device("cuda")
L2_FLUSH_BYTES = 256e6
WEIGHTS = ((1024, 1024), (2048, 2048), (4096, 2048), (4096, 4096), (8192, 4096), (8192, 8192), (16384, 8192))


def nsets_for(bytes_per_set):
    return int(max(2, min(128, -(-L2_FLUSH_BYTES // max(bytes_per_set, 1)))))


def eager_time(fns, g, replays):
    """Per-call device time of g back-to-back eager calls, and the host's time per call."""
    n = len(fns)
    for i in range(3 * n):
        fns[i % n]()
    torch.cuda.synchronize()
    dev, host = [], []
    for _ in range(replays):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        h0 = time.perf_counter()
        s.record()
        for i in range(g):
            fns[i % n]()
        e.record()
        h1 = time.perf_counter()
        torch.cuda.synchronize()
        dev.append(s.elapsed_time(e) / 1e3 / g)
        host.append((h1 - h0) / g)
    return dev, host


def summary(ts):
    med = statistics.median(ts)
    return {"time_median_s": med, "time_min_s": min(ts), "time_max_s": max(ts), "spread": (max(ts) - min(ts)) / med}


def timed(fns, g, replays):
    r = {"products_per_graph": g, "replays": replays}
    r["graph"] = summary(graph_time(fns, g, replays))
    dev, host = eager_time(fns, g, replays)
    r["eager"] = summary(dev)
    r["eager"]["host_per_call_median_s"] = statistics.median(host)
    return r


def fixed(a, out):
    res = []
    for m in (1, 8):
        for n, k in WEIGHTS:
            wb = 2 * n * k
            ns = nsets_for(wb)
            ws = [torch.randn(n, k, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
            xs = [torch.randn(m, k, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
            fns = [lambda x=x, w=w: F.linear(x, w) for x, w in zip(xs, ws)]
            r = {"part": "fixed", "op": "F.linear bf16", "M": m, "N": n, "K": k, "bytes": 2 * (m * k + n * k + m * n),
                 "input_sets": ns}
            r.update(timed(fns, max(32, ns), a.replays))
            res.append(r)
            print(f"gemm M={m} {n}x{k}: graph {r['graph']['time_median_s']*1e6:8.2f} us  eager "
                  f"{r['eager']['time_median_s']*1e6:8.2f} us (host {r['eager']['host_per_call_median_s']*1e6:.1f})",
                  flush=True)
            del ws, xs, fns
            torch.cuda.empty_cache()
    for n, k in WEIGHTS:
        elems = n * k
        ns = nsets_for(4 * elems)
        xs = [torch.randn(elems, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
        ys = [torch.empty_like(xs[0]) for _ in range(ns)]
        fns = [lambda x=x, y=y: torch.mul(x, 2.0, out=y) for x, y in zip(xs, ys)]
        r = {"part": "fixed", "op": "torch.mul bf16 (read + write)", "elements": elems, "bytes": 4 * elems,
             "input_sets": ns}
        r.update(timed(fns, max(32, ns), a.replays))
        res.append(r)
        print(f"mul {4*elems/1e6:7.1f} MB: graph {r['graph']['time_median_s']*1e6:8.2f} us  eager "
              f"{r['eager']['time_median_s']*1e6:8.2f} us", flush=True)
        del xs, ys, fns
        torch.cuda.empty_cache()
    one = torch.zeros(1, device=DEV)
    r = {"part": "fixed", "op": "torch.add one element (empty chain)", "bytes": 8}
    r.update(timed([lambda: one.add_(1.0)], 256, a.replays))
    res.append(r)
    print(f"empty: graph {r['graph']['time_median_s']*1e6:.2f} us eager {r['eager']['time_median_s']*1e6:.2f} us",
          flush=True)
    out.extend(res)


def depth(a, out):
    m = n = 2048
    for k in (256, 512, 1024, 2048, 4096, 8192):
        ns = nsets_for(2 * (m * k + n * k))
        xs = [torch.randn(m, k, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
        ws = [torch.randn(n, k, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
        fns = [lambda x=x, w=w: F.linear(x, w) for x, w in zip(xs, ws)]
        r = {"part": "depth", "op": "F.linear bf16", "M": m, "N": n, "K": k, "flops": 2 * m * n * k, "input_sets": ns}
        r.update(timed(fns, max(32, ns), a.replays))
        out.append(r)
        print(f"depth K={k}: graph {r['graph']['time_median_s']*1e6:8.2f} us eager {r['eager']['time_median_s']*1e6:8.2f}",
              flush=True)
        del xs, ws, fns
        torch.cuda.empty_cache()


def splitk(a, out):
    n, k = 4096, 11008
    ns = nsets_for(2 * n * k)
    ws = [torch.randn(n, k, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
    xs = [torch.randn(512, k, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
    try:
        torch.bmm(xs[0][:8].view(8, 2, k // 2).transpose(0, 1), ws[0].view(n, 2, k // 2).permute(1, 2, 0),
                  out_dtype=torch.float32)
        fp32_partials = True
    except Exception:  # noqa: BLE001 - older torch: bf16 partials
        fp32_partials = False
    for m in (64, 128, 136, 192, 256, 384, 512):
        ref = xs[0][:m].float() @ ws[0].float().t()
        for s in (1, 2, 4):
            r = {"part": "splitk", "op": "F.linear bf16" if s == 1 else f"by hand: {s} K-slices, bmm to fp32, sum, cast",
                 "M": m, "N": n, "K": k, "slices": s, "flops": 2 * m * n * k, "input_sets": ns}
            if s == 1:
                fns = [lambda x=x, w=w, m=m: F.linear(x[:m], w) for x, w in zip(xs, ws)]
            else:
                def mk(x, w, m=m, s=s):
                    xv = x[:m].view(m, s, k // s).transpose(0, 1)  # (s, m, k/s)
                    wv = w.view(n, s, k // s).permute(1, 2, 0)  # (s, k/s, n)
                    if fp32_partials:
                        return lambda: torch.bmm(xv, wv, out_dtype=torch.float32).sum(0).to(torch.bfloat16)
                    return lambda: torch.bmm(xv, wv).sum(0, dtype=torch.float32).to(torch.bfloat16)
                fns = [mk(x, w) for x, w in zip(xs, ws)]
                r["partials"] = "fp32" if fp32_partials else "bf16 (torch.bmm has no out_dtype here)"
            try:
                got = fns[0]().float()
                torch.cuda.synchronize()
                r["check_max_rel_err"] = ((got - ref).abs().max() / ref.abs().max()).item()
                r.update(timed(fns, 16, a.replays))
                r["status"] = "ok"
                print(f"splitk M={m} s={s}: graph {r['graph']['time_median_s']*1e6:8.2f} us", flush=True)
            except Exception as e:  # noqa: BLE001 - recorded (e.g. bmm without out_dtype), the sweep goes on
                torch.cuda.synchronize()
                r["status"] = "error"
                r["error"] = str(e).splitlines()[0][:300]
                print(f"splitk M={m} s={s}: {r['error']}", flush=True)
            out.append(r)
    del ws, xs
    torch.cuda.empty_cache()


def kernels_of(fn):
    """The device kernels one eager call runs (names and grids where the profiler gives them)."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    ks = []
    for e in prof.events():
        if str(getattr(e, "device_type", "")).endswith("CUDA"):
            ks.append(e.name[:160])
    return ks


def heuristic(a, out):
    """Which kernels (split-K or not, tile) cuBLAS picks over N x K x M, with each point's graph time."""
    for n in (1024, 2048, 4096, 8192):
        for k in (4096, 11008, 14336, 28672):
            ns = nsets_for(2 * n * k)
            ws = [torch.randn(n, k, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
            xs = [torch.randn(512, k, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
            for m in (16, 64, 128, 136, 256, 512):
                fns = [lambda x=x, w=w, m=m: F.linear(x[:m], w) for x, w in zip(xs, ws)]
                r = {"part": "heuristic", "op": "F.linear bf16", "M": m, "N": n, "K": k, "flops": 2 * m * n * k,
                     "bytes": 2 * (m * k + n * k + m * n), "input_sets": ns}
                try:
                    r["graph"] = summary(graph_time(fns, max(16, ns), a.replays))
                    r["kernels"] = kernels_of(fns[0])
                    r["status"] = "ok"
                except Exception as e:  # noqa: BLE001
                    torch.cuda.synchronize()
                    r["status"] = "error"
                    r["error"] = str(e).splitlines()[0][:300]
                out.append(r)
                if r["status"] == "ok":
                    print(f"heur {n}x{k} M={m}: {r['graph']['time_median_s']*1e6:8.2f} us "
                          + " + ".join(x[:48] for x in r["kernels"]), flush=True)
            del ws, xs
            torch.cuda.empty_cache()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--replays", type=int, default=7)
    p.add_argument("--only", nargs="+", default=["fixed", "depth", "splitk", "heuristic"], choices=["fixed", "depth", "splitk", "heuristic"])
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    rec = {"name": "gemm_fixed_cost", "kind": "gemm_fixed_cost",
           "timing": "graph: G calls captured in one CUDA graph, 1 warm-up replay, timed replays with CUDA events, "
                     "time per call = replay / G; eager: G calls launched back to back from Python between two CUDA "
                     "events, per call = elapsed / G (host time per call recorded); operand sets rotated (>= 256 MB "
                     "between two uses of a set)"}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rec["nvidia_smi_before"] = common.nvidia_smi_static(0)
    results = []
    t0 = time.perf_counter()
    parts = {"fixed": fixed, "depth": depth, "splitk": splitk, "heuristic": heuristic}
    with common.SmiSampler(0) as sampler:
        for part in a.only:
            try:
                parts[part](a, results)
            except Exception as e:  # noqa: BLE001 - a failed part is recorded; the next one runs
                torch.cuda.synchronize()
                results.append({"part": part, "status": "part_error", "error": str(e)[:500]})
                print(f"part {part} failed: {e}", flush=True)
    rec["results"] = results
    rec["wall_s"] = time.perf_counter() - t0
    rec["nvidia_smi_during"] = sampler.summary()
    rec["nvidia_smi_after"] = common.nvidia_smi_static(0)
    print("wrote", common.write_json(rec, "gemm_fixed_cost", a.out_dir), f"({rec['wall_s']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
