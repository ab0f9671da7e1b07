#!/usr/bin/env python3
"""#27: a data-parallel model of cuBLAS 13's nvjet kernels as a candidate beside the stream-K decomposition.

Replicates gemm_cost (model/src/ops/ops.cpp) with EfficiencyProfile::stream_k on the built-in H100 row (checked: it
reproduces the 917 bf16 + 933 fp16 points within 10% that tests/model/ops/test_gemm_shape.cpp asserts) and prices the
CUDA-graph staircase (data/validation/measured/h100-sxm5-80gb/gemm_graph_staircase.json) with the candidate:
whole tiles of a (along N: 64, 96, 128, 192, 256) x b (along M, steps of 8 up to 256) on 132 SMs in waves, split-K
in two where cuBLAS splits (M*N/K < 64), each tile's time the larger of its MMAs at the per-SM rate and its operand
feed (a + b) * K * 2 B at B_sm per SM ("feed only below 128x128": the floor on smaller tiles only). The tile is the
fastest under that pricing (the heuristic's choice, optimistic) or, as a check of the pricing alone, the tile cuBLAS
ran (gemm_graph_kernels.json, bf16 only). Prints the counts within 10% per variant. Usage: gemm_nvjet_candidate.py
"""
import collections, json, math, os, re

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "data", "validation", "measured", "h100-sxm5-80gb")
P, BW, ETA, HBM, T0, SMS, C = 989.4e12, 3.35e12, 0.757, 0.887, 5e-6, 132, 1.8  # built-in H100 row (measured.json)
SK_TILES = [(128, 256), (256, 128), (128, 128), (64, 256), (64, 128), (32, 256), (32, 128), (16, 256), (16, 128)]


def depth(k_seg):
    k, kr = max(1.0, k_seg / 64), 8192 / 64
    return (k / (k + C)) / (kr / (kr + C))


def t_stream_k(m, n, k, fp16):
    best = None
    for tm, tn in SK_TILES:
        tiles = math.ceil(m / tm) * math.ceil(n / tn)
        it = max(1, math.ceil(k / 64))
        per = math.ceil(tiles * it / SMS)
        v = min(1, m * n * it / (SMS * per * tm * tn)) * depth(min(k, max(min(k, 256), per * 64)))
        if best is None or v > best * 1.01:
            best = v
    eta = ETA * (0.961 if fp16 else 1)
    return max(2 * m * n * k / (P * eta * best), (m * k + k * n + m * n) * 2 / (BW * HBM)) + T0


def tile_time(a, b, m, n, k, fp16, b_sm, small_only, s):
    rsm = P * ETA * (0.961 if fp16 else 1) / SMS
    waves = math.ceil(math.ceil(n / a) * math.ceil(m / b) * s / SMS)
    kk = k / s
    feed = (a + b) * kk * 2 / b_sm if b_sm and (not small_only or a * b < 128 * 128) else 0
    return waves * max(2 * a * b * kk / (rsm * depth(kk)), feed) + (1.2e-6 if s > 1 else 0)


def t_nvjet(m, n, k, fp16, b_sm, small_only=False, oracle=None):
    s = 2 if n >= 1024 and k >= n and m * n / k < 64 else 1
    if oracle:
        best = tile_time(*oracle, m, n, k, fp16, b_sm, small_only, s)
    else:
        best = min(tile_time(a, b, m, n, k, fp16, b_sm, small_only, s)
                   for a in (64, 96, 128, 192, 256) for b in range(8, 257, 8))
    return max(best, (m * k + k * n + m * n) * 2 / (BW * HBM)) + T0


def main():
    pts = [(r["dtype"], r["layer"], r["M"], r["N"], r["K"], r["time_median_s"])
           for r in json.load(open(os.path.join(ROOT, "gemm_graph_staircase.json")))["results"]]
    kernels = json.load(open(os.path.join(ROOT, "gemm_graph_kernels.json")))["kernels"]
    within = lambda f: sum(abs(f(dt, l, m, n, k) / t - 1) <= 0.10 for dt, l, m, n, k, t in pts)
    print("stream-K (the model):", within(lambda dt, l, m, n, k: t_stream_k(m, n, k, dt == "fp16")))
    for b_sm in (None, 80e9, 90e9, 100e9, 110e9, 120e9):
        for small in (False, True):
            if small and not b_sm:
                continue
            nv = lambda dt, l, m, n, k: t_nvjet(m, n, k, dt == "fp16", b_sm, small)
            mx = lambda dt, l, m, n, k: max(nv(dt, l, m, n, k), t_stream_k(m, n, k, dt == "fp16"))
            print(f"nvjet B_sm {b_sm and b_sm / 1e9} GB/s{' (tiles < 128x128 only)' if small else ''}: "
                  f"alone {within(nv)}, max with stream-K {within(mx)}")
    per = collections.Counter()
    for dt, l, m, n, k, t in pts:
        names = [x[0] for x in kernels.get(f"{l}|{m}") or [] if x[0].startswith("nvjet")]
        if dt != "bf16" or not names:
            continue
        a, b = map(int, re.match(r"nvjet_sm90_tst_(\d+)x(\d+)_", names[0]).groups())
        per[(l, "cuBLAS's tile")] += abs(t_nvjet(m, n, k, False, 80e9, oracle=(a, b)) / t - 1) <= 0.10
        per[(l, "stream-K")] += abs(t_stream_k(m, n, k, False) / t - 1) <= 0.10
    print("bf16, cuBLAS's own tile priced with B_sm 80 GB/s, against stream-K:", sorted(per.items()))


if __name__ == "__main__":
    main()
