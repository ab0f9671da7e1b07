#!/usr/bin/env python3
"""GEMM shape effects timed without the host in the loop (issue #27 d6): CUDA graphs of many GEMMs, replayed.

The first staircase sweep (gemm_shapes.py, gemm_staircase.json) timed each F.linear between two CUDA events queued
from Python; below ~40 us of kernel the GPU waited for the host between products, so its small-M points measured the
host's loop (~33 us floor; our H200 profile: 12 us of kernel at 1 x 4096 x 4096). Here every point is one
torch.cuda.CUDAGraph that captures G products (input sets rotated so that no product finds its operands in L2), and
the time per product is (replay time) / G: what the GPU spends per GEMM inside a graph -- the kernel(s), and the gap
between consecutive graph kernels -- as a serving engine's CUDA-graph decode step sees it.

1. staircase: F.linear(X[M,K], W[N,K]) (the nn.Linear layout) in bf16 and fp16 on the Llama-2-7B-shaped layers
   (N,K) = (22016, 4096) fused gate+up, (4096, 11008) down, (12288, 4096) fused QKV, (4096, 4096) output projection.
   gate_up: every M from 1 to 512, then 520..1024 step 8; the other layers: every M from 1 to 16 and from 120 to 160
   (the A100 serving cliff of batch 128 -> 142), the rest of 8..1024 step 8.
2. alignment: 4096^3 with one of M, K, N at each of 4088..4104 (the other two 4096): bf16 and fp16 in layouts "nn"
   (torch.matmul(A[M,K], B[K,N])) and "nt" (F.linear(A[M,K], W[N,K])), fp8 e4m3 "nt" (torch._scaled_mm, per-tensor
   scales, bf16 out) and int8 "nn" (torch._int_mm). A shape the library refuses is recorded with its error text.
3. shapes: the single shapes our tests price by hand or that the calibration sweep's model comparison missed
   (136x4096x4096, 384x22016x4096, 16896x256x8192, 256^3, 2048^3, 128x4096x14336, 512x128256x4096, ...), bf16 and fp16.

Every point: one eager product checked against a float32 reference on its first rows (max |error| / max |ref|
recorded; a point over 2% is marked "wrong" and not timed), capture, 1 warm-up replay, then
--replays timed replays (3 eager warm-ups per input set before the capture; CUDA events around each replay, device synchronised once at the end); median, min, max of
the per-product time. With --trace (a last part), one eager bf16 product per staircase point is run under torch.profiler inside a
record_function range named "pt|<dtype>|<layer>|<M>", and the Chrome trace is written (gzip) so the kernels cuBLAS
chose (names, split-K reductions) can be read per point afterwards.

--layer-set llama3-70b-tp2 (session 32, issue #27) swaps the staircase's layers for Llama-3-70B's per-GPU shapes under
Megatron-style TP 2 (what node_serve_step.py's TP 2 decode runs): (N,K) = (28672, 8192) fused gate+up, (8192, 14336)
down, (5120, 8192) fused QKV (64 + 2 x 8 heads of 128, halved), (8192, 4096) output projection, at M = 1, 8, 31-35,
64, every M from 112 to 300 (the one-row batch steps of measured_batch_steps.json's TP 2 source), 304..400 step 4,
416..1024 step 32. --dry prints the layers and the M list, touches no GPU and writes nothing (runs without torch).

Writes gemm_graph_staircase.json, gemm_graph_shapes.json, gemm_graph_alignment.json (with --trace also
gemm_graph_trace.json and the profile gemm_graph_kernels.trace.json.gz)
under --out-dir (default $OUT).
"""
import argparse
import gzip
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

try:  # --dry runs without torch (a CPU with no PyTorch)
    import torch  # noqa: E402
    import torch.nn.functional as F  # noqa: E402
    DEV = torch.device("cuda")
    DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
except ImportError:  # pragma: no cover - the dry run
    torch = F = DEV = None
    DTYPES = {"bf16": None, "fp16": None}

L2_FLUSH_BYTES = 256e6  # operand sets rotated until this many bytes separate two uses of one set (H100 L2: 50 MB)
LAYER_SETS = {
    "llama2-7b": ((22016, 4096, "gate_up_7b"), (4096, 11008, "down_7b"), (12288, 4096, "qkv_7b"),
                  (4096, 4096, "out_7b")),
    # Llama-3-70B per GPU under TP 2: hidden 8192, intermediate 28672 / 2, 64 query + 8 KV heads of 128, halved.
    "llama3-70b-tp2": ((28672, 8192, "gate_up_70b_tp2"), (8192, 14336, "down_70b_tp2"), (5120, 8192, "qkv_70b_tp2"),
                       (8192, 4096, "out_70b_tp2")),
}
LAYERS = LAYER_SETS["llama2-7b"]


def staircase_ms(label):
    if label.endswith("_70b_tp2"):
        return sorted({1, 8, 64} | set(range(31, 36)) | set(range(112, 301)) | set(range(304, 401, 4))
                      | set(range(416, 1025, 32)))
    if label == "gate_up_7b":
        return list(range(1, 513)) + list(range(520, 1025, 8))
    ms = set(range(1, 17)) | set(range(120, 161)) | set(range(8, 1025, 8))
    return sorted(ms)


def graph_time(fns, graphs_per_replay, replays):
    """Capture graphs_per_replay calls of fns (rotating), replay; per-call times (s) of each timed replay."""
    n = len(fns)
    for i in range(3 * n):  # warm-up outside the capture: cuBLAS handles, workspaces, heuristics cache
        fns[i % n]()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    outs = []
    with torch.cuda.graph(g):
        for i in range(graphs_per_replay):
            outs.append(fns[i % n]())
    g.replay()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    for s, e in ev:
        s.record()
        g.replay()
        e.record()
    torch.cuda.synchronize()
    ts = [s.elapsed_time(e) / 1e3 / graphs_per_replay for s, e in ev]
    del g, outs
    return ts


def summarise(ts, flops):
    med = statistics.median(ts)
    return {"status": "ok", "time_median_s": med, "time_min_s": min(ts), "time_max_s": max(ts),
            "spread": (max(ts) - min(ts)) / med, "tflops": flops / med / 1e12}


def count_for(per_call_guess_s, floor):
    """Products per graph: at least `floor`, and enough for ~2 ms of GPU work per replay (at most 64)."""
    return int(max(floor, min(64, round(2e-3 / max(per_call_guess_s, 1e-6)))))


def check(out, ref_rows):
    r = ref_rows.shape[0]
    got = out[:r].float()
    scale = ref_rows.abs().max().item()
    err = (got - ref_rows).abs().max().item() / (scale if scale > 0 else 1.0)
    return err, bool(torch.isfinite(got).all().item())


def staircase(a, rec):
    results = []
    for dname in a.dtypes:
        dt = DTYPES[dname]
        for n, k, label in LAYERS:
            wbytes = 2 * n * k
            nsets = int(max(2, min(8, -(-L2_FLUSH_BYTES // wbytes))))
            mmax = 1024
            ws = [torch.randn(n, k, device=DEV, dtype=dt) for _ in range(nsets)]
            xs = [torch.randn(mmax, k, device=DEV, dtype=dt) for _ in range(nsets)]
            ref = (xs[0][:4].float() @ ws[0].float().t())  # rows 0..3 do not depend on M
            guess = 2 * n * k / 2.5e12  # the weight read at ~2.5 TB/s: a lower bound on the product's time
            t0 = time.perf_counter()
            for m in staircase_ms(label):
                r = {"dtype": dname, "layout": "nt", "layer": label, "M": m, "N": n, "K": k, "input_sets": nsets}
                fns = [lambda x=x, w=w, m=m: F.linear(x[:m], w) for x, w in zip(xs, ws)]
                try:
                    out = fns[0]()
                    torch.cuda.synchronize()
                    err, finite = check(out, ref[: min(m, 4)])
                    r["check_max_rel_err"] = err
                    if not finite or err > 0.02:
                        r["status"] = "wrong"
                    else:
                        g = count_for(max(guess, 2 * m * n * k / 700e12), 8)
                        r.update(summarise(graph_time(fns, g, a.replays), 2 * m * n * k))
                        r["products_per_graph"] = g
                        r["replays"] = a.replays
                except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
                    torch.cuda.synchronize()
                    r["status"] = "error"
                    r["error"] = str(e).splitlines()[0][:300]
                results.append(r)
                if m in (1, 8, 64, 128, 142, 256, 384, 512, 1024):
                    t = r.get("time_median_s")
                    print(f"stair {dname} {label:10s} M={m:5d} "
                          + (f"{t*1e6:9.2f} us {r['tflops']:7.1f} TF/s spread {r['spread']:.3f}" if t else r["status"]),
                          flush=True)
            print(f"  {dname} {label}: {time.perf_counter() - t0:.1f} s", flush=True)
            del ws, xs
            torch.cuda.empty_cache()
    rec["results"] = results


def trace(a, rec):
    """One eager bf16 product per staircase point under torch.profiler, each in its own record_function range."""
    from torch.profiler import ProfilerActivity, profile
    points = []
    for n, k, label in LAYERS:
        points.append((label, torch.randn(n, k, device=DEV, dtype=torch.bfloat16),
                       torch.randn(1024, k, device=DEV, dtype=torch.bfloat16)))
    for label, w, x in points:  # warm-up outside the profile
        for m in (1, 64, 512):
            F.linear(x[:m], w)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for label, w, x in points:
            for m in staircase_ms(label):
                with torch.profiler.record_function(f"pt|bf16|{label}|{m}"):
                    F.linear(x[:m], w)
                torch.cuda.synchronize()
    out_dir = a.out_dir or os.environ.get("OUT") or "."
    os.makedirs(out_dir, exist_ok=True)
    raw = os.path.join(out_dir, "gemm_graph_kernels.trace.json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as fi, gzip.open(raw + ".gz", "wb") as fo:
        shutil.copyfileobj(fi, fo)
    os.remove(raw)
    rec["results"] = []
    rec["trace"] = "gemm_graph_kernels.trace.json.gz: one eager bf16 product per staircase point, record_function pt|dtype|layer|M"
    print("wrote", raw + ".gz", flush=True)


def alignment_fns(path, layout, m, k, n):
    bpe = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}[path]
    nsets = int(max(2, min(8, -(-L2_FLUSH_BYTES // (bpe * (m * k + k * n))))))
    one = torch.ones((), device=DEV, dtype=torch.float32)
    fns, refs = [], None
    for i in range(nsets):
        if path in DTYPES:
            dt = DTYPES[path]
            x = torch.randn(m, k, device=DEV, dtype=dt)
            if layout == "nn":
                b = torch.randn(k, n, device=DEV, dtype=dt)
                fns.append(lambda x=x, b=b: torch.matmul(x, b))
                if i == 0:
                    refs = x[:4].float() @ b.float()
            else:
                w = torch.randn(n, k, device=DEV, dtype=dt)
                fns.append(lambda x=x, w=w: F.linear(x, w))
                if i == 0:
                    refs = x[:4].float() @ w.float().t()
        elif path == "fp8":
            x = torch.randn(m, k, device=DEV).to(torch.float8_e4m3fn)
            w = torch.randn(n, k, device=DEV).to(torch.float8_e4m3fn)
            fns.append(lambda x=x, w=w: torch._scaled_mm(x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
            if i == 0:
                refs = x[:4].float() @ w.float().t()
        else:
            x = torch.randint(-64, 64, (m, k), device=DEV, dtype=torch.int8)
            b = torch.randint(-64, 64, (k, n), device=DEV, dtype=torch.int8)
            fns.append(lambda x=x, b=b: torch._int_mm(x, b))
            if i == 0:
                refs = x[:4].float() @ b.float()
    return fns, refs, nsets


def alignment(a, rec):
    results = []
    for path, layouts in (("bf16", ("nn", "nt")), ("fp16", ("nn", "nt")), ("fp8", ("nt",)), ("int8", ("nn",))):
        for layout in layouts:
            t0 = time.perf_counter()
            for dim in ("M", "K", "N"):
                for v in range(4088, 4105):
                    m, k, n = (v if dim == "M" else 4096), (v if dim == "K" else 4096), (v if dim == "N" else 4096)
                    r = {"dtype": path, "layout": layout, "varied": dim, "M": m, "K": k, "N": n}
                    try:
                        fns, ref, nsets = alignment_fns(path, layout, m, k, n)
                        r["input_sets"] = nsets
                        out = fns[0]()
                        torch.cuda.synchronize()
                        err, finite = check(out, ref)
                        r["check_max_rel_err"] = err
                        if not finite or err > 0.02:
                            r["status"] = "wrong"
                        else:
                            g = 8
                            r.update(summarise(graph_time(fns, g, a.replays), 2 * m * n * k))
                            r["products_per_graph"] = g
                            r["replays"] = a.replays
                        del fns, ref, out
                    except Exception as e:  # noqa: BLE001 - the refusal is the result
                        torch.cuda.synchronize()
                        r["status"] = "refused"
                        r["error"] = str(e).splitlines()[0][:300]
                    results.append(r)
                    t = r.get("time_median_s")
                    print(f"align {path:4s} {layout} {dim}={v:5d} "
                          + (f"{t*1e3:8.4f} ms {r['tflops']:7.1f} TF/s" if t else r["status"] + " " + r.get("error", "")[:60]),
                          flush=True)
            torch.cuda.empty_cache()
            print(f"  {path} {layout}: {time.perf_counter() - t0:.1f} s", flush=True)
    rec["results"] = results


SHAPES = (  # (M, N, K, why)
    (136, 4096, 4096, "test: a smaller tile wins where it saves padding"),
    (384, 22016, 4096, "test: stream-K by hand keeps 128x256"),
    (16896, 256, 8192, "test: tile-exact 128*132 x 256 x 8192"),
    (4096, 4096, 4096, "alignment reference"),
    (256, 256, 256, "calibration-sweep miss: launch-bound"),
    (2048, 2048, 2048, "calibration-sweep miss: +15%"),
    (128, 4096, 14336, "calibration-sweep miss: split-K 3"),
    (512, 128256, 4096, "calibration-sweep miss: -13%"),
    (256, 4096, 4096, "calibration-sweep miss: memory/compute ridge"),
    (256, 14336, 4096, "calibration-sweep miss: memory/compute ridge"),
    (256, 4096, 14336, "calibration-sweep miss: memory/compute ridge"),
    (256, 28672, 4096, "memory/compute ridge"),
    (1, 128256, 4096, "decode LM head"),
    (128, 128256, 4096, "decode LM head"),
    (8192, 8192, 8192, "large square"),
)


def shapes(a, rec):
    results = []
    for dname in a.dtypes:
        for m, n, k, why in SHAPES:
            r = {"dtype": dname, "layout": "nt", "M": m, "N": n, "K": k, "why": why}
            try:
                fns, ref, nsets = alignment_fns(dname, "nt", m, k, n)
                r["input_sets"] = nsets
                out = fns[0]()
                torch.cuda.synchronize()
                err, finite = check(out, ref[: min(m, 4)])
                r["check_max_rel_err"] = err
                if not finite or err > 0.02:
                    r["status"] = "wrong"
                else:
                    g = count_for(max(2 * n * k / 2.5e12, 2 * m * n * k / 700e12), 4)
                    r.update(summarise(graph_time(fns, g, a.replays), 2 * m * n * k))
                    r["products_per_graph"] = g
                    r["replays"] = a.replays
                del fns, ref, out
            except Exception as e:  # noqa: BLE001
                torch.cuda.synchronize()
                r["status"] = "error"
                r["error"] = str(e).splitlines()[0][:300]
            results.append(r)
            t = r.get("time_median_s")
            print(f"shape {dname} {m}x{n}x{k} " + (f"{t*1e6:10.2f} us {r['tflops']:7.1f} TF/s" if t else r["status"]),
                  flush=True)
            torch.cuda.empty_cache()
    rec["results"] = results


def header(name, a, op):
    rec = {"name": name, "kind": name,
           "timing": (f"CUDA graph of G products (input sets rotated, >= {L2_FLUSH_BYTES/1e6:.0f} MB between two uses "
                      f"of a set), 1 warm-up replay, {a.replays} timed replays with CUDA events around each; time per "
                      "product = replay time / G (kernels and the gaps between graph kernels; no host in the loop)"),
           "flops_formula": "2*M*N*K", "op": op}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rec["nvidia_smi_before"] = common.nvidia_smi_static(0)
    return rec


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--replays", type=int, default=7)
    p.add_argument("--dtypes", nargs="+", default=["bf16", "fp16"], choices=list(DTYPES))
    p.add_argument("--only", nargs="+", default=["staircase", "shapes", "alignment"],
                   choices=["staircase", "shapes", "alignment", "trace"])
    p.add_argument("--trace", action="store_true", help="also run the 'trace' part after the others")
    p.add_argument("--layer-set", default="llama2-7b", choices=list(LAYER_SETS),
                   help="the staircase's (and trace's) layer shapes")
    p.add_argument("--dry", action="store_true", help="print the layers and M lists, touch no GPU, write nothing")
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    global LAYERS
    LAYERS = LAYER_SETS[a.layer_set]
    if a.dry:
        for n, k, label in LAYERS:
            ms = staircase_ms(label)
            print(f"{label}: N={n} K={k} weights {2 * n * k / 1e6:.1f} MB, {len(ms)} M values {ms[0]}..{ms[-1]}")
        print("parts:", list(a.only) + (["trace"] if a.trace and "trace" not in a.only else []), "dtypes:", a.dtypes)
        return
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    parts = {
        "staircase": (staircase, f"F.linear(X[M,K], W[N,K]) (cuBLAS through PyTorch), layer set {a.layer_set}"),
        "alignment": (alignment, "bf16/fp16: torch.matmul(A[M,K], B[K,N]) ('nn') and F.linear(A[M,K], W[N,K]) ('nt'); "
                      "fp8: torch._scaled_mm(A e4m3, W[N,K].t() e4m3, scales 1, bf16 out); int8: torch._int_mm ('nn')"),
        "shapes": (shapes, "F.linear(X[M,K], W[N,K])"),
        "trace": (trace, "F.linear(X[M,K], W[N,K]) bf16, eager, one per staircase point, under torch.profiler"),
    }
    todo = list(a.only) + (["trace"] if a.trace and "trace" not in a.only else [])
    for part in todo:
        fn, op = parts[part]
        rec = header("gemm_graph_" + part, a, op)
        t0 = time.perf_counter()
        try:
            with common.SmiSampler(0) as sampler:
                fn(a, rec)
        except Exception as e:  # noqa: BLE001 - a part that fails is recorded; the next part runs
            torch.cuda.synchronize()
            rec["part_error"] = str(e)[:500]
            print(f"part {part} failed: {e}", flush=True)
        rec["wall_s"] = time.perf_counter() - t0
        rec["nvidia_smi_during"] = sampler.summary()
        rec["nvidia_smi_after"] = common.nvidia_smi_static(0)
        print("wrote", common.write_json(rec, "gemm_graph_" + part, a.out_dir), f"({rec['wall_s']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
