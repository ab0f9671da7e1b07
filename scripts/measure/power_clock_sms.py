#!/usr/bin/env python3
"""Clock and board power of a long bf16 GEMM on N of the GPU's SMs, under the GPU's own power limit (issue #24).

gpuplan carries a part's measured GEMM ceilings to another power limit or SM count with a sustained-clock law
(model/efficiency.hpp, sustained_clock_ratio): under the cap the board draws its limit, P = P_idle + N·k·f^g with
g = 3 (dynamic power α·C·V²·f, the voltage rising in step with the clock). Meta's Grand Teton H100s run at 500 W, and
the lent GPUs' power limit may not be changed. This script tests the law without touching any setting: a persistent
Triton GEMM launched with exactly N programs (one per SM: its shared memory admits one per SM) keeps N SMs busy.

  - small N: the clock stays at its maximum (no cap): power = a + b·N gives the idle/uncore part a and the power of
    one busy SM at the maximum clock, b;
  - large N: the cap binds; the law predicts the clock with no free parameter, f = f_max·((P_cap - a)/(b·N))^(1/g),
    and the capped points give the exponent g by least squares.

Each point holds the GEMM for --hold-s seconds (nvidia-smi sampled every 0.2 s, the first --settle-s dropped), after
an idle reading. The points run in the order given by --sms (the full GPU first and last, to see drift).

Usage (device):  python3 scripts/measure/power_clock_sms.py --out-dir $OUT
CPU check:       python3 scripts/measure/power_clock_sms.py --self-test
"""
import argparse
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def fit_law(points, cap_w, f_max, tol_mhz=15.0):
    """points: [{sms, sm_clock_MHz, power_W}] (medians). Returns the fit and each point's predicted clock.

    Uncapped points (clock within tol_mhz of f_max): least squares P = a + b·N. Capped points (clock below it):
    g from least squares through the origin of log(f/f_max) = (1/g)·log((cap - a)/(b·N)); and each capped point's
    clock predicted with g = 3 (the model's law) and with the fitted g.
    """
    free = [p for p in points if p["sm_clock_MHz"] >= f_max - tol_mhz]
    capped = [p for p in points if p["sm_clock_MHz"] < f_max - tol_mhz]
    out = {"f_max_MHz": f_max, "cap_W": cap_w, "n_free": len(free), "n_capped": len(capped)}
    if len(free) < 2:
        out["error"] = "fewer than two uncapped points: no idle/per-SM split"
        return out
    xs = [p["sms"] for p in free]
    ys = [p["power_W"] for p in free]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        out["error"] = "uncapped points all at one SM count"
        return out
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    out.update({"a_W": a, "b_W_per_SM": b})
    num = den = 0.0
    for p in capped:
        r = (cap_w - a) / (b * p["sms"])
        if r <= 0 or r >= 1:
            continue
        lx, ly = math.log(r), math.log(p["sm_clock_MHz"] / f_max)
        num += lx * ly
        den += lx * lx
    inv_g = num / den if den > 0 else None
    out["g_fitted"] = 1.0 / inv_g if inv_g else None
    for p in capped:
        r = (cap_w - a) / (b * p["sms"])
        p["predicted_MHz_g3"] = f_max * r ** (1.0 / 3.0) if r > 0 else None
        p["predicted_MHz_gfit"] = f_max * r ** inv_g if (r > 0 and inv_g) else None
    out["capped"] = capped
    return out


def self_test():
    # synthetic GPU: a = 150 W, b = 6 W per SM at 1980 MHz, cap 700 W, g = 3
    a, b, fmax, cap, g = 150.0, 6.0, 1980.0, 700.0, 3.0
    pts = []
    for n in (16, 32, 48, 64, 80, 100, 116, 132):
        p = a + b * n
        if p <= cap:
            pts.append({"sms": n, "sm_clock_MHz": fmax, "power_W": p})
        else:
            pts.append({"sms": n, "sm_clock_MHz": fmax * ((cap - a) / (b * n)) ** (1 / g), "power_W": cap})
    fit = fit_law(pts, cap, fmax)
    assert abs(fit["a_W"] - a) < 1e-6 and abs(fit["b_W_per_SM"] - b) < 1e-9, fit
    assert abs(fit["g_fitted"] - g) < 1e-6, fit
    for p in fit["capped"]:
        assert abs(p["predicted_MHz_g3"] - p["sm_clock_MHz"]) < 1e-6, p
    print("self-test ok:", {k: v for k, v in fit.items() if k != "capped"})


def build_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def persistent_mm(a_ptr, b_ptr, c_ptr, M, N, K, NUM_PROGS, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
        pid = tl.program_id(0)
        num_pid_n = N // BLOCK_N
        num_tiles = (M // BLOCK_M) * num_pid_n
        for tile in range(pid, num_tiles, NUM_PROGS):
            pid_m = tile // num_pid_n
            pid_n = tile % num_pid_n
            offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            offs_k = tl.arange(0, BLOCK_K)
            a_ptrs = a_ptr + offs_m[:, None] * K + offs_k[None, :]
            b_ptrs = b_ptr + offs_k[:, None] * N + offs_n[None, :]
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for _k in range(0, K, BLOCK_K):
                acc = tl.dot(tl.load(a_ptrs), tl.load(b_ptrs), acc)
                a_ptrs += BLOCK_K
                b_ptrs += BLOCK_K * N
            tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(tl.bfloat16))

    return persistent_mm


def smi_median(samples, t0, settle_s):
    rows = [s for s in samples if s["t"] - t0 >= settle_s]

    def med(key):
        vals = []
        for s in rows:
            try:
                vals.append(float(s[key]))
            except (KeyError, ValueError):
                pass
        return statistics.median(vals) if vals else None

    reasons = sorted({s.get(k) for s in rows for k in s if "reasons" in k} - {None})
    return {"n": len(rows), "sm_clock_MHz": med("clocks.sm"), "power_W": med("power.draw"),
            "temperature_C": med("temperature.gpu"), "mem_clock_MHz": med("clocks.mem"), "reasons": reasons}


class TimedSampler(common.SmiSampler):
    def _run(self):
        while not self._stop.is_set():
            try:
                for row in common._smi(self.fields, self.gpu):
                    row["t"] = time.perf_counter()
                    self.samples.append(row)
            except Exception:  # noqa: BLE001
                pass
            self._stop.wait(self.period_s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=None)
    ap.add_argument("--sms", default="0,16,32,48,64,80,96,112,124,132,8,24,40,132")
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--hold-s", type=float, default=4.0)
    ap.add_argument("--settle-s", type=float, default=1.5)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return
    import torch

    dev = torch.device("cuda")
    props = common.device_properties()
    total_sms = props["multi_processor_count"]
    static = common.nvidia_smi_static(0)
    cap = float(static[0].get("power.limit", "nan")) if static and "power.limit" in static[0] else float("nan")
    f_max = float(static[0].get("clocks.max.sm", "nan")) if static and "clocks.max.sm" in static[0] else float("nan")
    n = args.size
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    kern = build_kernel()
    cfg = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=3)

    def launch(progs):
        kern[(progs,)](a, b, c, n, n, n, progs, **cfg)

    # correctness on the full grid (one pass), against torch.matmul
    launch(total_sms)
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    rel = ((c.float() - ref).abs().max() / ref.abs().max()).item()
    del ref
    points = []
    sampler = TimedSampler(0, period_s=0.2)
    flops_per_pass = 2.0 * n * n * n
    with sampler:
        for sms in [int(x) for x in args.sms.split(",")]:
            progs = min(sms, total_sms)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            passes = 0
            if progs == 0:
                time.sleep(args.hold_s)
            else:
                # queue launches in batches of ~0.1 s of GPU work (one pass timed first), synchronising between them
                s = time.perf_counter()
                launch(progs)
                torch.cuda.synchronize()
                passes = 1
                batch = max(1, int(0.1 / max(time.perf_counter() - s, 1e-4)))
                while time.perf_counter() - t0 < args.hold_s:
                    for _ in range(batch):
                        launch(progs)
                    torch.cuda.synchronize()
                    passes += batch
            wall = time.perf_counter() - t0
            # rate over the windows after settle: time a few more passes now that the clock has settled
            rate = None
            if progs > 0:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                launch(progs)
                e1.record()
                torch.cuda.synchronize()
                rate = flops_per_pass / (e0.elapsed_time(e1) * 1e-3) / 1e12
            smi = smi_median(sampler.samples, t0, args.settle_s)
            pt = {"sms": progs, "passes": passes, "wall_s": wall, "TFLOPs_settled": rate, **smi}
            points.append(pt)
            print(pt, flush=True)
    # torch.matmul (cuBLAS) on the whole GPU, for reference
    sampler2 = TimedSampler(0, period_s=0.2)
    with sampler2:
        t0 = time.perf_counter()
        iters = 0
        while time.perf_counter() - t0 < args.hold_s:
            torch.matmul(a, b, out=c)
            iters += 1
            if iters % 20 == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    cublas = {"TFLOPs": flops_per_pass * iters / wall / 1e12, **smi_median(sampler2.samples, t0, args.settle_s)}
    busy = [{"sms": p["sms"], "sm_clock_MHz": p["sm_clock_MHz"], "power_W": p["power_W"]} for p in points
            if p["sms"] > 0 and p["sm_clock_MHz"] and p["power_W"]]
    fit = fit_law(busy, cap, f_max) if busy and not math.isnan(cap) else {"error": "no power limit or points"}
    rec = {"meta": common.run_metadata(), "software": common.software_versions(), "device": props,
           "nvidia_smi": static, "args": vars(args), "check_max_rel_error": rel, "points": points,
           "cublas_full_gpu": cublas, "fit": fit}
    print("fit:", {k: v for k, v in fit.items() if k != "capped"})
    for p in fit.get("capped", []):
        print("  capped", p)
    print("written", common.write_json(rec, "power_clock_sms", args.out_dir))


if __name__ == "__main__":
    main()
