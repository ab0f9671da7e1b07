#!/usr/bin/env python3
"""Per-kernel-class fixed costs inside CUDA graphs (issue #27 follow-up, session 22: kernelcost).

gemm_fixed_cost.py measured, on an H200, the in-graph fixed cost of a memory-bound dense GEMM (4.41 us), of a
streaming elementwise kernel (2.03 us) and of an empty kernel (1.07 us). This script measures the classes it left out
and the kernel mix of real decode steps, so that the model can price each kernel by its class:

1. grouped: torch._grouped_mm bf16 over 128 experts of the Qwen3-30B-A3B shapes (gate|up 2048 -> 1536, down
   768 -> 2048, weights passed transposed as serve_moe_step.py does), g = 1 ... 128 non-empty groups of r = 1 and 8
   rows (the others empty), each timed in a graph (G calls captured, replay / G) and eager; operand sets rotated so
   that >= 256 MB separate two uses of a set. The intercept of t against the touched experts' weight bytes is the
   grouped call's fixed cost (its descriptor-preparation kernel included: the kernels of one call are recorded).
2. attention: F.scaled_dot_product_attention decode (one query per sequence, enable_gqa, flash backend as our serving
   measurements ran it) at b = 1 and 16 sequences, 32 query heads over 4 (Qwen3-30B-A3B) and 8 (Llama-3-8B) KV heads,
   head dim 128, context 16 ... 16384: graph and eager; intercept against the KV bytes read.
3. routing: the small kernels of an eager MoE router at decode sizes (T = 1 and 64 tokens, 128 experts, top-8):
   softmax, top-k, stable argsort, scatter_add counts, cumsum, the row gather, rms_norm of [T, 2048], a residual add:
   per call in a graph and the kernels each call runs (in-graph cost per kernel = call time / kernels).
4. norm: F.rms_norm of [T, H] and a residual add, H = 2048/4096/8192, T = 1 ... 4096, in a graph (PyTorch's norm
   kernel runs one block per row: at decode sizes its time is the row's latency, not bytes / bandwidth).
5. step: the decode step of the Qwen3-30B-A3B-shaped MoE decoder (serve_moe_step.MoEModel, 48 layers, random bf16
   weights) at b = 1, 8, 64 sequences of 1024 tokens, and of the Llama-3-8B dense decoder (serve_step.Model, 32
   layers) at b = 1 and 64: each captured in one CUDA graph, replay time (median), then 3 replays under torch.profiler:
   every kernel in order, counted by class with its duration and the idle time before it (kernel_classes.py).

Writes kernel_class_cost.json under --out-dir (default $OUT). About 1.5-2 minutes on one H200 (141 GB: the MoE
weights are 61 GB).
"""
import argparse
import os
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import kernel_classes as kc  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from gemm_fixed_cost import kernels_of, nsets_for, timed  # noqa: E402 - graph/eager timing of G rotated calls
from gemm_graph_sweep import graph_time  # noqa: E402

DEV = torch.device("cuda")


def log(t0, msg):
    print(f"[kernel_class_cost {time.perf_counter() - t0:6.1f}s] {msg}", flush=True)


def fit_line(rows, key="bytes", mode="graph"):
    pts = [(r[key], r[mode]["time_median_s"]) for r in rows if r.get("status") == "ok"]
    f = kc.intercept(pts)
    return None if f is None else {"mode": mode, "points": len(pts), "t0_s": f[0], "bandwidth_Bps": f[1]}


def grouped(a, out, t0):
    E = 128
    rows = []
    for name, n, k in (("gate_up", 1536, 2048), ("down", 2048, 768)):
        wbytes = 2 * n * k
        ns = nsets_for(E * wbytes)  # whole expert tensors rotated (>= 256 MB apart)
        ws = [torch.randn(E, n, k, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
        for r in (1, 8):
            for g in (1, 2, 4, 8, 16, 32, 64, 128):
                counts = torch.zeros(E, dtype=torch.int64)
                pick = torch.linspace(0, E - 1, g).round().long()  # spread the non-empty groups over the experts
                counts[pick] = r
                offs = torch.cumsum(counts, 0).to(torch.int32).to(DEV)
                xs = [torch.randn(g * r, k, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
                fns = [lambda x=x, w=w: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs) for x, w in zip(xs, ws)]
                row = {"part": "grouped", "op": f"torch._grouped_mm bf16 {name}", "experts": E, "N": n, "K": k,
                       "groups_nonempty": g, "rows_per_group": r, "bytes": g * wbytes + 2 * g * r * (n + k),
                       "input_sets": ns}
                try:
                    ref = (xs[0].float().view(g, r, k) @ ws[0][pick].float().transpose(-2, -1)).view(g * r, n)
                    got = fns[0]().float()
                    row["check_rel_err"] = float((got - ref).norm() / ref.norm())
                    row.update(timed(fns, max(32, ns), a.replays))
                    if r == 1 and g in (1, 8):
                        row["kernels_per_call"] = kernels_of(fns[0])
                    row["status"] = "ok"
                    log(t0, f"grouped {name} g={g} r={r}: graph {row['graph']['time_median_s'] * 1e6:7.2f} us eager "
                            f"{row['eager']['time_median_s'] * 1e6:7.2f} us")
                except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
                    torch.cuda.synchronize()
                    row["status"] = "error"
                    row["error"] = str(e).splitlines()[0][:300] if str(e) else repr(e)[:300]
                    log(t0, f"grouped {name} g={g} r={r}: {row['error']}")
                rows.append(row)
                del xs, fns
        del ws
        torch.cuda.empty_cache()
    out.extend(rows)
    fits = {}
    for name in ("gate_up", "down"):
        for r in (1, 8):
            sel = [x for x in rows if x["op"].endswith(name) and x["rows_per_group"] == r]
            fits[f"{name}_r{r}"] = {m: fit_line(sel, mode=m) for m in ("graph", "eager")}
    return fits


def attention(a, out, t0):
    torch.backends.cuda.enable_flash_sdp(True)
    torch.backends.cuda.enable_mem_efficient_sdp(False)
    torch.backends.cuda.enable_math_sdp(False)
    rows = []
    for kvh in (4, 8):
        for b in (1, 16):
            for ctx in (16, 64, 256, 1024, 4096, 16384):
                kvbytes = 2 * b * kvh * ctx * 128 * 2
                ns = nsets_for(kvbytes)
                ks = [torch.randn(b, kvh, ctx, 128, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
                vs = [torch.randn_like(ks[0]) for _ in range(ns)]
                qs = [torch.randn(b, 1, 32, 128, device=DEV, dtype=torch.bfloat16).transpose(1, 2) for _ in range(ns)]
                fns = [lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                       for q, k, v in zip(qs, ks, vs)]
                row = {"part": "attention", "op": "SDPA flash decode, enable_gqa", "batch": b, "heads": 32,
                       "kv_heads": kvh, "head_dim": 128, "context": ctx, "bytes": kvbytes + 2 * 2 * b * 32 * 128,
                       "input_sets": ns}
                try:
                    row.update(timed(fns, max(32, ns), a.replays))
                    if ctx in (64, 4096):
                        row["kernels_per_call"] = kernels_of(fns[0])
                    row["status"] = "ok"
                    log(t0, f"attention kvh={kvh} b={b} ctx={ctx}: graph {row['graph']['time_median_s'] * 1e6:7.2f} "
                            f"us eager {row['eager']['time_median_s'] * 1e6:7.2f} us")
                except Exception as e:  # noqa: BLE001
                    torch.cuda.synchronize()
                    row["status"] = "error"
                    row["error"] = str(e).splitlines()[0][:300] if str(e) else repr(e)[:300]
                    log(t0, f"attention kvh={kvh} b={b} ctx={ctx}: {row['error']}")
                rows.append(row)
                del ks, vs, qs, fns
                torch.cuda.empty_cache()
    out.extend(rows)
    fits = {}
    for kvh in (4, 8):
        for b in (1, 16):
            sel = [x for x in rows if x["kv_heads"] == kvh and x["batch"] == b]
            fits[f"kvh{kvh}_b{b}"] = {m: fit_line(sel, mode=m) for m in ("graph", "eager")}
    return fits


def routing(a, out, t0):
    E, K, H = 128, 8, 2048
    for T in (1, 64):
        x = torch.randn(T, H, device=DEV, dtype=torch.bfloat16)
        res = torch.randn_like(x)
        nw = torch.ones(H, device=DEV, dtype=torch.bfloat16)
        logits = torch.randn(T, E, device=DEV, dtype=torch.bfloat16)
        probs = torch.softmax(logits.float(), -1)
        flat = torch.topk(probs, K, -1).indices.reshape(-1)
        counts = torch.zeros(E, device=DEV, dtype=torch.int64)
        ones = torch.ones_like(flat)
        sidx = torch.argsort(flat, stable=True)
        ops = {
            "softmax fp32 [T,E] (with the cast)": lambda: torch.softmax(logits.float(), dim=-1),
            "topk 8 of E": lambda: torch.topk(probs, K, dim=-1),
            "argsort stable T*k int64": lambda: torch.argsort(flat, stable=True),
            "scatter_add counts (zeros + scatter)": lambda: torch.zeros(E, device=DEV, dtype=torch.int64).scatter_add_(
                0, flat, ones),
            "cumsum E to int32": lambda: torch.cumsum(counts, 0).to(torch.int32),
            "row gather x[tok]": lambda: x[torch.div(sidx, K, rounding_mode="floor") % T],
            "rms_norm [T,H]": lambda: F.rms_norm(x, (H,), nw, 1e-6),
            "residual add [T,H]": lambda: x + res,
            "empty (one-element add_)": lambda: counts[:1].add_(0),
        }
        for name, fn in ops.items():
            row = {"part": "routing", "op": name, "tokens": T, "experts": E, "topk": K}
            try:
                ks = kernels_of(fn)
                row["kernels_per_call"] = ks
                row["graph"] = kc_summary(graph_time([fn], 64, a.replays))
                nk = max(1, len(ks))
                row["graph_per_kernel_s"] = row["graph"]["time_median_s"] / nk
                row["status"] = "ok"
                log(t0, f"routing T={T} {name}: graph {row['graph']['time_median_s'] * 1e6:6.2f} us, {nk} kernels")
            except Exception as e:  # noqa: BLE001
                torch.cuda.synchronize()
                row["status"] = "error"
                row["error"] = str(e).splitlines()[0][:300] if str(e) else repr(e)[:300]
                log(t0, f"routing T={T} {name}: {row['error']}")
            out.append(row)


def norm(a, out, t0):
    """F.rms_norm of [T, H] (one block per row in PyTorch's kernel): in-graph time per call over T and H, and the
    residual add beside it for comparison; bytes = read + write of the rows."""
    for H in (2048, 4096, 8192):
        w = torch.ones(H, device=DEV, dtype=torch.bfloat16)
        for T in (1, 8, 64, 512, 4096):
            ns = nsets_for(4 * T * H)
            xs = [torch.randn(T, H, device=DEV, dtype=torch.bfloat16) for _ in range(ns)]
            for name, mk in (("rms_norm", lambda x: (lambda: F.rms_norm(x, (H,), w, 1e-6))),
                             ("add", lambda x: (lambda: x + x))):
                fns = [mk(x) for x in xs]
                row = {"part": "norm", "op": name, "tokens": T, "hidden": H, "bytes": 4 * T * H, "input_sets": ns}
                try:
                    row["graph"] = kc_summary(graph_time(fns, max(32, ns), a.replays))
                    row["status"] = "ok"
                    log(t0, f"norm {name} T={T} H={H}: graph {row['graph']['time_median_s'] * 1e6:6.2f} us")
                except Exception as e:  # noqa: BLE001
                    torch.cuda.synchronize()
                    row["status"] = "error"
                    row["error"] = str(e).splitlines()[0][:300] if str(e) else repr(e)[:300]
                out.append(row)
            del xs
            torch.cuda.empty_cache()


def kc_summary(ts):
    med = statistics.median(ts)
    return {"time_median_s": med, "time_min_s": min(ts), "time_max_s": max(ts), "spread": (max(ts) - min(ts)) / med}


def graph_events(g, runs):
    """Device events (start_us, end_us, name) of `runs` replays of graph g under torch.profiler."""
    from torch.profiler import ProfilerActivity, profile
    g.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            g.replay()
            torch.cuda.synchronize()
    ev = []
    for e in prof.events():
        dt = getattr(e, "device_type", None)
        if dt is None or "CUDA" not in str(dt):
            continue
        ev.append((float(e.time_range.start), float(e.time_range.end), e.name))
    return ev


def graph_events_eager(fn):
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [(float(e.time_range.start), float(e.time_range.end), e.name) for e in prof.events()
            if "CUDA" in str(getattr(e, "device_type", ""))]


def step_point(name, step, b, ctx, a, t0):
    import serve_step as ss
    pt = {"part": "step", "model": name, "batch": b, "context_tokens": ctx}
    g, _ = ss.capture(step)
    dev, _wall = ss.time_device(g.replay, a.step_replays, 5)
    med, tmin, tmax, spread = common.median_and_spread(dev)
    pt["graph_step"] = {"time_median_s": med, "time_min_s": tmin, "time_max_s": tmax, "spread": spread}
    ev = graph_events(g, 3)
    pt["graph_profile"] = kc.timeline(ev, runs=3) if ev else {"error": "no device events in the graph replays"}
    if not ev:  # counts by class from one eager step instead (durations without the graph's gaps)
        ev = graph_events_eager(step)
        pt["eager_profile"] = kc.timeline(ev, runs=1) if ev else {"error": "no device events"}
    if ev:
        cls = pt["graph_profile"]["classes"]
        log(t0, f"step {name} b={b} ctx={ctx}: graph {med * 1e3:.3f} ms, {pt['graph_profile']['events_per_run']:.0f} "
                "kernels: " + ", ".join(f"{c} {v['count_per_run']:.0f}x{v['per_kernel_us']:.2f}us"
                                        for c, v in cls.items()))
    del g
    torch.cuda.empty_cache()
    return pt


def steps(a, out, t0):
    import serve_moe_step as sm
    import serve_step as ss
    moe_args = argparse.Namespace(hidden=2048, layers=48, heads=32, kv_heads=4, head_dim=128, experts=128, topk=8,
                                  expert_intermediate=768, vocab=151936, rope_theta=1e6, eps=1e-6,
                                  max_positions=max(a.contexts) + 64)
    with torch.inference_mode():
        m = sm.MoEModel(moe_args, DEV)
        ss.configure_sdpa(("flash",))
        m.decode_attn = "sdpa_gqa"
        for ctx in a.contexts:
            for b in a.moe_batches:
                pool = torch.empty(2 * m.L * b * m.KVH * (ctx + 64) * m.D, device=DEV, dtype=torch.bfloat16)
                pool.normal_(0.0, 1.0)
                kv, _n = sm.kv_views(m, pool, b, ctx + 64)
                tok = torch.randint(0, m.V, (b, 1), device=DEV)
                try:
                    pt = step_point("qwen3-30b-a3b (serve_moe_step.MoEModel)", lambda: m.forward(tok, kv, ctx, False),
                                    b, ctx, a, t0)
                    m.collect = []
                    m.forward(tok, kv, ctx, False)
                    pt["experts_touched_per_layer_mean"] = sum(m.collect) / len(m.collect)
                    m.collect = None
                    pt["status"] = "ok"
                except Exception as e:  # noqa: BLE001
                    pt = {"part": "step", "model": "qwen3-30b-a3b", "batch": b, "context_tokens": ctx,
                          "status": "error", "error": traceback.format_exc()[-1200:]}
                    log(t0, f"step moe b={b}: {e}")
                out.append(pt)
                del pool, kv
                torch.cuda.empty_cache()
        del m
        torch.cuda.empty_cache()
        dense_args = argparse.Namespace(hidden=4096, layers=32, heads=32, kv_heads=8, intermediate=14336, vocab=128256,
                                        rope_theta=5e5, max_positions=max(a.contexts) + 64)
        m = ss.Model(dense_args, DEV)
        for ctx in a.contexts:
            for b in a.dense_batches:
                kvp = ss.KVPool(m, ss.kv_elems(m, b, ctx + 64), DEV)
                kc_, vc_ = kvp.views(b, ctx + 64)
                tok = torch.randint(0, m.V, (b, 1), device=DEV)
                try:
                    pt = step_point("llama-3-8b (serve_step.Model)", lambda: m.forward(tok, kc_, vc_, ctx, False),
                                    b, ctx, a, t0)
                    pt["status"] = "ok"
                except Exception as e:  # noqa: BLE001
                    pt = {"part": "step", "model": "llama-3-8b", "batch": b, "context_tokens": ctx,
                          "status": "error", "error": traceback.format_exc()[-1200:]}
                    log(t0, f"step dense b={b}: {e}")
                out.append(pt)
                del kvp, kc_, vc_
                torch.cuda.empty_cache()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replays", type=int, default=7)
    p.add_argument("--step-replays", type=int, default=30)
    p.add_argument("--only", nargs="+", default=["grouped", "attention", "routing", "norm", "step"],
                   choices=["grouped", "attention", "routing", "norm", "step"])
    p.add_argument("--moe-batches", default="1,8,64")
    p.add_argument("--dense-batches", default="1,64")
    p.add_argument("--contexts", default="1024")
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    a.moe_batches = [int(x) for x in a.moe_batches.split(",") if x]
    a.dense_batches = [int(x) for x in a.dense_batches.split(",") if x]
    a.contexts = [int(x) for x in a.contexts.split(",") if x]
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    t0 = time.perf_counter()
    rec = {"name": "kernel_class_cost", "kind": "kernel_class_cost",
           "timing": "graph: G calls captured in one CUDA graph, 1 warm-up replay, timed replays with CUDA events, time "
                     "per call = replay / G; eager: G calls back to back between two CUDA events (host time per call "
                     "recorded); operand sets rotated (>= 256 MB between two uses of a set); steps: one CUDA graph per "
                     "point, median of replays, then 3 replays under torch.profiler (kernel order, durations, gaps)"}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rec["nvidia_smi_before"] = common.nvidia_smi_static(0)
    results, fits = [], {}
    parts = {"grouped": grouped, "attention": attention, "routing": routing, "norm": norm, "step": steps}
    with common.SmiSampler(0) as sampler:
        for part in a.only:
            try:
                f = parts[part](a, results, t0)
                if f:
                    fits[part] = f
            except Exception as e:  # noqa: BLE001 - a failed part is recorded; the next one runs
                torch.cuda.synchronize()
                results.append({"part": part, "status": "part_error", "error": traceback.format_exc()[-1500:]})
                log(t0, f"part {part} failed: {e}")
            rec["results"], rec["fits"] = results, fits
            common.write_json(rec, "kernel_class_cost", a.out_dir)
    rec["wall_s"] = time.perf_counter() - t0
    rec["nvidia_smi_during"] = sampler.summary()
    rec["nvidia_smi_after"] = common.nvidia_smi_static(0)
    for part, f in fits.items():
        for key, v in f.items():
            for mode, line in v.items():
                if line:
                    log(t0, f"fit {part} {key} {mode}: t0 {line['t0_s'] * 1e6:.2f} us, "
                            f"{line['bandwidth_Bps'] / 1e12:.2f} TB/s ({line['points']} points)")
    log(t0, f"wrote {common.write_json(rec, 'kernel_class_cost', a.out_dir)} ({rec['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
