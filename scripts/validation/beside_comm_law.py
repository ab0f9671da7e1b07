#!/usr/bin/env python3
"""Compute beside an NCCL collective: every measured point of ours against candidate laws (issue #24).

Usage: python3 scripts/validation/beside_comm_law.py          (from the repo root; reads only repo files, no GPU)

The points (GEMMs only for the laws; the other kernel classes are listed at the end):
  A. data/validation/measured/h200-sxm-141gb/beside_comm_2gpu_{dsv3,llama8b}.json and
     beside_comm_ctas_2gpu_{dsv3,mid,llama8b}.json (scripts/measure/beside_comm.py, session 31, 2 H200s): a window of
     40 back-to-back kernels (torch.matmul for the GEMM) beside back-to-back NCCL calls; rank 0, as the README tables.
  B. data/calibration/{h100-sxm5-80gb,h200-sxm-141gb}/samples-overlap-{2,4}gpu-*.json (gpuplan-bench collectives,
     the overlap items that kCommWaitKernels is the median of): an 8192x8192x4096 bf16 cuBLASLt GEMM loop beside
     back-to-back 32 or 256 MiB calls on 2 and 4 GPUs of one host.

Per point: T the GEMM alone, Tb beside, C one call alone, delay = Tb - T per GEMM, and n the calls per GEMM in the
window (A: from the comm stream's span, the calls outside the window at C each; B: Tb / coll_overlap_s).

Candidate laws (loss = Tb / T - 1 predicted):
  W   the wait: each GEMM launched beside a running call waits f x C (f = the median of delay / C over set A's GEMMs,
      the points that suggested it);
  Wc  the same per call: f_c x C for each call in the window (f_c the median of delay / (n C) over set A);
  S   the model today (compose_step.cpp beside_compute + comm_compute_share): the SM share 16/132 of the time the
      collective's kernels run beside the GEMM (A: n C / Tb, at most 1; B: C / coll_overlap_s), capped by the pinned
      CTAs / 132 (dp_comm_compute_share) where NCCL was pinned.
  S0  S without the CTA cap.
  L   the law the step composition uses (parallel_dims.hpp dp_beside_compute_share): per call the larger of S's share
      over the call and min(f x C, T), T the kernel beside it; f is W's.

  C. The law out of sample on our 4-GPU H200 training steps (data/validation/measured/h200-sxm-141gb/
     profile_h200_llama1b_s2048_b4_{single,ddp4,fsdp4}.json): the GEMM + attention time a step loses against the
     one-GPU step, against L summed over the step's NCCL calls (their count from the profile; each call's alone time
     from its bytes at the busbw of our held-out 4-GPU collectives of that size, heldout-collectives-4gpu-*.json;
     T the one-GPU step's mean GEMM/attention kernel).
  D. The sweep (data/validation/measured/h200-sxm-141gb/beside_comm_sweep_2gpu.json, scripts/measure/
     beside_comm_sweep.py, session 32): six torch.matmul GEMMs (0.1-1.3 ms) x reduce-scatter and all-reduce calls of
     8-512 MiB (0.05-1.7 ms) on two H200s, with every GEMM's and call's end time: n = the calls that end inside the
     GEMM window per GEMM; L per GEMM = n x L per call.
"""
import glob
import json
import os
import statistics
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MEAS = os.path.join(ROOT, "data", "validation", "measured", "h200-sxm-141gb")
SMS = 132
SHARE = 16.0 / SMS  # comm_compute_share's built-in assumption (step_terms.cpp)


def set_a():
    pts, others = [], []
    files = ["beside_comm_2gpu_dsv3.json", "beside_comm_2gpu_llama8b.json", "beside_comm_ctas_2gpu_dsv3.json",
             "beside_comm_ctas_2gpu_mid.json", "beside_comm_ctas_2gpu_llama8b.json"]
    for f in files:
        d = json.load(open(os.path.join(MEAS, f)))
        a = d["args"]
        shape = f"{a['tokens']}x{a['ffn']}x{a['hidden']}"
        for r in d["per_rank"][0]:
            T, Tb, C = r["t_alone_ms"], r["t_beside_ms"], r["collective_ms_per_call"]
            reps = a.get("reps", 40)
            window = reps * Tb
            outside = max(0.0, r["comm_span_last_trial_ms"] - window) / C
            n = max(0.0, r["comm_calls_last_trial"] - outside) / reps
            p = {"set": "A", "file": f, "shape": shape, "kernel": r["kernel"], "coll": r["collective"],
                 "pin": r.get("pin_ctas", "free"), "MiB": r.get("collective_MiB", a.get("comm_mib")), "ranks": d["world"],
                 "T": T, "Tb": Tb, "C": C, "n": n, "loss": r["loss"]}
            (pts if r["kernel"] == "gemm_bf16" else others).append(p)
    return pts, others


def set_b():
    pts = []
    for f in sorted(glob.glob(os.path.join(ROOT, "data", "calibration", "*", "samples-overlap-*gpu-*.json"))):
        d = json.load(open(f))
        gpu = os.path.basename(os.path.dirname(f))
        for x in d["overlap"]:
            g = x["gemm"]
            T, Tb = x["gemm_alone_s"] * 1e3, x["gemm_overlap_s"] * 1e3
            C, Cb = x["coll_alone_s"] * 1e3, x["coll_overlap_s"] * 1e3
            pts.append({"set": "B", "file": f"{gpu}/{os.path.basename(f)}", "shape": f"{g['m']}x{g['n']}x{g['k']}",
                        "kernel": "gemm_bf16", "coll": x["op"], "pin": "free", "MiB": x["bytes"] >> 20,
                        "ranks": x["ranks"], "T": T, "Tb": Tb, "C": C, "Cb": Cb, "n": Tb / Cb, "loss": Tb / T - 1})
    return pts


def running_fraction(p):
    if p["set"] == "B":
        return min(1.0, p["C"] / p["Cb"])
    return min(1.0, p["n"] * p["C"] / p["Tb"])


def law_per_call(share, f, call, kernel):
    """parallel_dims.cpp dp_beside_compute_share x the call: the compute time one call costs."""
    return max(share * call, min(f * call, kernel))


def laws(p, f, fc):
    share_cap = SHARE if p["pin"] == "free" else min(SHARE, float(p["pin"]) / SMS)
    run = running_fraction(p)
    return {"W": f * p["C"] / p["T"], "Wc": fc * p["n"] * p["C"] / p["T"],
            "S": share_cap * run, "S0": SHARE * run,
            "L": p["n"] * law_per_call(share_cap, f, p["C"], p["T"]) / p["T"]}


def busbw_at(op, nbytes):
    """Held-out 4-GPU fp32 busbw (GB/s) of op at nbytes: log-linear between the measured sizes, clamped at the ends."""
    import math
    pts = []
    for f in glob.glob(os.path.join(MEAS, "heldout-collectives-4gpu-*.json")):
        for c in json.load(open(f)).get("collectives", []):
            if c["op"] == op and c["ranks"] == 4 and c["dtype"] == "fp32":
                pts.append((c["bytes"], c["busbw_gbps"]))
    pts.sort()
    if nbytes <= pts[0][0]:
        return pts[0][1]
    if nbytes >= pts[-1][0]:
        return pts[-1][1]
    for (b0, w0), (b1, w1) in zip(pts, pts[1:]):
        if b0 <= nbytes <= b1:
            x = (math.log(nbytes) - math.log(b0)) / (math.log(b1) - math.log(b0))
            return w0 + x * (w1 - w0)


def call_ms(op, nbytes, n=4):
    """nccl-tests convention: time = bytes x factor / busbw (all-reduce 2(n-1)/n; the others (n-1)/n)."""
    factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
    return nbytes * factor / (busbw_at(op, nbytes) * 1e9) * 1e3


def set_c(f):
    """Our 4-GPU training-step profiles against L (see the docstring)."""
    prof = {k: json.load(open(os.path.join(MEAS, f"profile_h200_llama1b_s2048_b4_{k}.json")))
            for k in ("single", "ddp4", "fsdp4")}
    one = prof["single"]["profile"]
    kern = one["category_kernel_count"]
    cat = one["category_ms"]
    compute = lambda c: c["gemm"] + c["flash_fwd"] + c["flash_bwd"]  # noqa: E731
    t_kernel = compute(cat) / (kern["gemm"] + kern["flash_fwd"] + kern["flash_bwd"])
    params = prof["single"]["params_total"]
    rows = []
    for name, calls in (("ddp4", [("all_reduce", "AllReduce", params * 4.0)]),
                        ("fsdp4", [("reduce_scatter", "ReduceScatter", params * 4.0),
                                   ("all_gather", "AllGather", params * 2.0 * 2)])):
        p = prof[name]["profile"]
        lost = compute(p["category_ms"]) - compute(cat)
        law = 0.0
        detail = []
        for op, kname, step_bytes in calls:
            n = sum(k["count_per_step"] for k in p["other_category_kernels"]["nccl"] if kname in k["kernel"])
            c = call_ms(op, step_bytes / n)
            law += n * law_per_call(SHARE, f, c, t_kernel)
            detail.append(f"{int(n)} {op} of {c:.3f} ms")
        sm_only = sum(SHARE * call_ms(op, b / sum(k["count_per_step"] for k in p["other_category_kernels"]["nccl"]
                                                  if kn in k["kernel"])) *
                      sum(k["count_per_step"] for k in p["other_category_kernels"]["nccl"] if kn in k["kernel"])
                      for op, kn, b in calls)
        rows.append((name, lost, law, sm_only, ", ".join(detail), t_kernel))
    return rows


def set_d(f):
    d = json.load(open(os.path.join(MEAS, "beside_comm_sweep_2gpu.json")))
    rows = []
    for r in d["per_rank"][0]:
        T, Tb, C = r["t_alone_ms"], r["t_beside_ms"], r["collective_ms_per_call"]
        tl = r["timeline_last_trial"]
        g0, g1 = tl["gemm_start_ms"], tl["gemm_end_ms"][-1]
        n = sum(1 for x in tl["call_end_ms"] if g0 <= x <= g1) / len(tl["gemm_end_ms"])
        rows.append({"shape": "x".join(map(str, r["gemm"])), "coll": r["collective"], "MiB": r["comm_MiB"], "T": T,
                     "C": C, "n": n, "delay": Tb - T, "law": n * law_per_call(SHARE, f, C, T),
                     "share": SHARE * min(1.0, n * C / Tb) * T})
    return rows


def main():
    a, others = set_a()
    b = set_b()
    f = statistics.median((p["Tb"] - p["T"]) / p["C"] for p in a)
    fc = statistics.median((p["Tb"] - p["T"]) / (p["n"] * p["C"]) for p in a if p["n"] > 0)
    print(f"fitted on set A's {len(a)} GEMM points: f (per GEMM) = {f:.3f} of a call, f_c (per call) = {fc:.3f}\n")
    hdr = (f"{'set':3} {'GEMM':16} {'coll':14} {'MiB':>4} {'rk':>2} {'pin':>4} {'T ms':>6} {'C ms':>6} {'n':>5} "
           f"{'delay/C':>7} | {'loss':>6} {'W':>6} {'Wc':>6} {'S':>6} {'S0':>6} {'L':>6}")
    keys = ("W", "Wc", "S", "S0", "L")
    errs = {s: {k: [] for k in keys} for s in ("A", "B")}
    for pts in (a, b):
        print(hdr)
        for p in pts:
            lw = laws(p, f, fc)
            for k, v in lw.items():
                errs[p["set"]][k].append(v - p["loss"])
            print(f"{p['set']:3} {p['shape']:16} {p['coll']:14} {p['MiB']:>4} {p['ranks']:>2} {p['pin']:>4} "
                  f"{p['T']:6.3f} {p['C']:6.3f} {p['n']:5.2f} {(p['Tb'] - p['T']) / p['C']:7.2f} | {p['loss']:+6.3f} "
                  + " ".join(f"{lw[k]:+6.3f}" for k in keys))
        print()
    print("law - measured, in GEMM durations (median signed / median |.| / max |.|):")
    for s in ("A", "B"):
        for k in keys:
            e = errs[s][k]
            print(f"  set {s} ({len(e)} points) {k:3}: {statistics.median(e):+.3f} / "
                  f"{statistics.median(abs(x) for x in e):.3f} / {max(abs(x) for x in e):.3f}")
    print("\nSet C: our 4-GPU H200 steps (1B-like, DDP and FSDP2) against the one-GPU step: GEMM + attention time lost")
    for name, lost, law, sm_only, detail, tk in set_c(f):
        print(f"  {name:6} measured {lost:5.1f} ms   L {law:5.1f} ms ({law / lost - 1:+.0%})   SM share alone {sm_only:4.1f} ms"
              f"   [{detail}; kernel {tk:.3f} ms]")
    print("\nSet D: the sweep, delay per GEMM (us) against L per GEMM (n x L per call); by call length against the GEMM")
    print(f"{'GEMM':16} {'coll':14} {'MiB':>4} {'T us':>7} {'C us':>7} {'n':>5} {'delay':>7} {'L':>7} {'delay/T':>7}")
    dr = set_d(f)
    for p in dr:
        print(f"{p['shape']:16} {p['coll']:14} {p['MiB']:>4} {p['T'] * 1e3:7.1f} {p['C'] * 1e3:7.1f} {p['n']:5.2f} "
              f"{p['delay'] * 1e3:7.1f} {p['law'] * 1e3:7.1f} {p['delay'] / p['T']:+7.3f}")
    for label, sel in (("calls shorter than the GEMM", lambda p: p["C"] < p["T"]),
                       ("calls longer than the GEMM", lambda p: p["C"] >= p["T"])):
        for key in ("law", "share"):
            e = [(p[key] - p["delay"]) / p["T"] for p in dr if sel(p)]
            print(f"  {label:28} ({len(e)} points) {'L' if key == 'law' else 'S'} - measured, in GEMM durations: "
                  f"median {statistics.median(e):+.3f}, median |.| {statistics.median(abs(x) for x in e):.3f}, "
                  f"max |.| {max(abs(x) for x in e):.3f}")
    # Does the loss follow the CTAs NCCL is pinned to? (set A's second call)
    print("\nCTA dependence (set A, pinned): loss at 4 CTAs against 32 CTAs, same GEMM and collective")
    by = {}
    for p in a:
        if p["pin"] != "free":
            by.setdefault((p["shape"], p["coll"]), {})[int(p["pin"])] = p["loss"]
    for (shape, coll), v in sorted(by.items()):
        print(f"  {shape:16} {coll:14} " + "  ".join(f"{c}: {v[c]:+.3f}" for c in sorted(v))
              + f"   (S would give {4 / SMS:.3f} at 4, {min(SHARE, 32 / SMS):.3f} at 32)")
    print("\nOther kernel classes (set A), loss against the SM-share charge S0 and the collective's message rate")
    print(f"{'kernel':16} {'GEMM shape':16} {'coll':14} {'pin':>4} {'T ms':>6} {'loss':>6} {'S0':>6} {'msg GB/s':>8}")
    for p in others:
        print(f"{p['kernel']:16} {p['shape']:16} {p['coll']:14} {p['pin']:>4} {p['T']:6.3f} {p['loss']:+6.3f} "
              f"{SHARE * running_fraction(p):6.3f} {p['MiB'] * 1.048576 / p['C']:8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
