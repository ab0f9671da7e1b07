#!/usr/bin/env python3
"""Fits NCCL's point-to-point efficiency eta_p2p on NVLink 4 (model/src/comm/topology.cpp kP2pEfficiencyNvlink4) and
reports the all-to-all / send-recv errors by size bucket.

Model (model/src/comm/collectives.cpp, all_to_all inside one NVLink domain):
    t = t0 + alpha + [S + min(S, F)]·(n-1)/n / (BW·eta_p2p)
t0 = 8.4 us and alpha = 3.4 us (NCCL tuning.cc constants), BW = 450 GB/s per direction (H100 SXM5 NVLink 4),
F = 16 MiB = p2pnChannels 32 × NCCL_P2P_NVL_CHUNKSIZE 512 KiB (the pipeline fill, fixed from NCCL, not fitted).
Fit set: the equal-split sweep of moe_alltoall.json (call 2, EP 2), GPU-side times (CUDA graph up to 64 MiB,
back-to-back loop from 128 MiB), sizes >= 1 MiB (below, the time is t0 + alpha and carries no information on eta);
least squares of log(t_model / t_measured), golden-section search. Everything else is out of the fit: the _try1 and
_try3 repeats, the token-shaped dispatches, the native NCCL bench file and the H200 sweeps.

Usage:
  python3 scripts/measure/fit_p2p_efficiency.py                       # the fit, and F fitted too as a check
  python3 scripts/measure/fit_p2p_efficiency.py --compare BEFORE.json AFTER.json
      # BEFORE/AFTER: `gpuplan validate -f json` of two builds; prints median |error| by series and size bucket for
      # every all_to_all and send_recv case of data/validation/measured/*/heldout-collectives-*.json
"""
import argparse
import json
import math
import os
import statistics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEASURED = os.path.join(ROOT, "data/validation/measured/h100-sxm5-80gb/moe_alltoall.json")
MiB = 1 << 20
T0, ALPHA, BW = 8.4e-6, 3.4e-6, 450e9
FILL = 16 * MiB


def fit_set():
    m = json.load(open(MEASURED))
    pts = []
    for r in m["equal"]:
        g = r.get("graph_time_per_call_s")
        t = g if g is not None and g == g else (r["loop_time_per_call_s"] if r["size_bytes"] >= 128 * MiB else None)
        if t is not None and r["size_bytes"] >= MiB:
            pts.append((r["ep"], r["size_bytes"], t))
    return pts


def model(n, S, eta, F):
    return T0 + ALPHA + (S + min(S, F)) * (n - 1) / n / (BW * eta)


def golden(f, lo, hi, tol=1e-7):
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    while b - a > tol:
        c, d = b - g * (b - a), a + g * (b - a)
        if f(c) < f(d):
            b = d
        else:
            a = c
    return (a + b) / 2


def loss(pts, eta, F):
    return sum(math.log(model(n, S, eta, F) / t) ** 2 for n, S, t in pts)


def bucket(S):
    if S < MiB:
        return "< 1 MiB"
    if S < 16 * MiB:
        return "1-16 MiB"
    if S < 128 * MiB:
        return "16-128 MiB"
    return ">= 128 MiB"


def compare(before, after):
    def cases(path):
        out = {}

        def walk(o):
            if isinstance(o, dict):
                if "id" in o and "source" in o and "heldout-collectives" in str(o.get("source")):
                    out[o["id"]] = o
                for x in o.values():
                    walk(x)
            elif isinstance(o, list):
                for x in o:
                    walk(x)
        walk(json.load(open(path)))
        return out
    b, a = cases(before), cases(after)
    rows = {}
    for cid, c in a.items():
        if c.get("status") != "ok" or cid not in b:
            continue
        op = "all_to_all" if "-all_to_all-" in cid else "send_recv" if "-send_recv-" in cid else None
        if op is None:
            continue
        src = os.path.basename(c["source"])
        tag = src[len("heldout-collectives-"):-len(".json")]
        gpu = c["gpu"]
        doc = json.load(open(os.path.join(ROOT, c["source"])))
        size = next(e["bytes"] for e in doc["collectives"]
                    if e["op"] == op and abs(e["median_s"] - c["measured"]) <= 1e-12 * max(1.0, e["median_s"]))
        rows.setdefault((gpu, op, tag), []).append((size, b[cid]["error"], c["error"]))
    def group(tag):
        if tag.startswith("a2a-torch-equal"):
            return "torch all_to_all_single, equal splits (repeats)"
        if tag.startswith("a2a-torch-dispatch"):
            return "torch all_to_all_single, token-shaped dispatch"
        return "gpuplan-bench (native NCCL)"
    grouped = {}
    for (gpu, op, tag), rs in rows.items():
        grouped.setdefault((gpu, op, group(tag)), []).extend(rs)
    print("by group (median |error|, signed median in brackets; before -> after):")
    for key in sorted(grouped):
        cells = []
        for bk in ("< 1 MiB", "1-16 MiB", "16-128 MiB", ">= 128 MiB", "all"):
            sel = [r for r in grouped[key] if bk == "all" or bucket(r[0]) == bk]
            if not sel:
                cells.append(f"{bk}: -")
                continue
            eb, ea = [r[1] for r in sel], [r[2] for r in sel]
            cells.append(f"{bk} (n {len(sel)}): {statistics.median(abs(e) for e in eb) * 100:.1f}% "
                         f"({statistics.median(eb) * 100:+.0f}%) -> {statistics.median(abs(e) for e in ea) * 100:.1f}% "
                         f"({statistics.median(ea) * 100:+.0f}%)")
        print(f"  {key[0]} {key[1]} {key[2]}:\n    " + "\n    ".join(cells))
    print()
    print(f"{'gpu':15s} {'op':10s} {'series':42s} {'bucket':>11s} {'n':>3s}   before |e| (signed)   after |e| (signed)")
    for key in sorted(rows):
        for bk in ("< 1 MiB", "1-16 MiB", "16-128 MiB", ">= 128 MiB", "all"):
            sel = [r for r in rows[key] if bk == "all" or bucket(r[0]) == bk]
            if not sel:
                continue
            eb, ea = [r[1] for r in sel], [r[2] for r in sel]
            print(f"{key[0]:15s} {key[1]:10s} {key[2]:42s} {bk:>11s} {len(sel):3d}   "
                  f"{statistics.median(abs(e) for e in eb) * 100:6.1f}% ({statistics.median(eb) * 100:+6.1f}%)     "
                  f"{statistics.median(abs(e) for e in ea) * 100:6.1f}% ({statistics.median(ea) * 100:+6.1f}%)")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    a = p.parse_args()
    if a.compare:
        compare(*a.compare)
        return
    pts = fit_set()
    eta = golden(lambda e: loss(pts, e, FILL), 0.3, 1.0)
    print(f"fit set: {len(pts)} sizes, {pts[0][1] / MiB:g}-{pts[-1][1] / MiB:g} MiB per rank, EP {pts[0][0]}")
    print(f"eta_p2p = {eta:.4f} with F = {FILL / MiB:g} MiB (NCCL constants); rms log error "
          f"{math.sqrt(loss(pts, eta, FILL) / len(pts)):.3f}")
    for n, S, t in pts:
        print(f"  {S / MiB:6g} MiB  measured {t * 1e6:8.1f} us  model {model(n, S, eta, FILL) * 1e6:8.1f} us  "
              f"{model(n, S, eta, FILL) / t - 1:+.1%}")
    # Check, not used: the fill the data alone prefers (both fitted).
    best = min(((loss(pts, golden(lambda e: loss(pts, e, f * MiB), 0.3, 1.0), f * MiB), f) for f in range(0, 49)))
    eta_f = golden(lambda e: loss(pts, e, best[1] * MiB), 0.3, 1.0)
    print(f"check: F fitted as well -> F = {best[1]} MiB, eta_p2p = {eta_f:.4f}, rms log error "
          f"{math.sqrt(best[0] / len(pts)):.3f}")
    print(f"without a fill (F = 0): eta_p2p = {golden(lambda e: loss(pts, e, 0), 0.3, 1.0):.4f}, rms log error "
          f"{math.sqrt(loss(pts, golden(lambda e: loss(pts, e, 0), 0.3, 1.0), 0) / len(pts)):.3f}")


if __name__ == "__main__":
    main()
