#!/usr/bin/env python3
"""MoE router, top-k and token permute / unpermute on one GPU: each part timed apart, and the whole.

For issue #21 (MoE measured end to end): the non-GEMM work around the experts that gpuplan must price.
Per case (T tokens, hidden h, E experts, top-k), bf16 activations, plain PyTorch ops as a permute-then-all-to-all
MoE layer (Megatron-style "alltoall" dispatcher without fused kernels) issues them:
  router_gemm   logits[T, E] = x[T, h] @ W_r[h, E]                       (bf16, cuBLAS)
  softmax       probs = softmax(logits.float())                          (Mixtral, Qwen)
  sigmoid       scores = sigmoid(logits.float())                         (DeepSeek-V3 style; timed apart)
  topk          topk(probs, k) and renormalise the k weights
  sort          stable sort of the T*k expert ids (argsort) + bincount (tokens per expert) + cumsum
  gather        x_perm[T*k, h] = x[sorted_idx // k]                      (expert-contiguous rows)
  permute       sort + gather
  unpermute     rows = index_copy(sorted_idx, y_perm); out = sum_k(rows.view(T, k, h) * w)   (weighted sum)
  unpermute_scatter_add  out = zeros(T, h).index_add_(0, token_of_row, y_perm * w_row)     (the atomic variant)
  whole         router_gemm -> softmax -> topk -> sort -> gather -> unpermute, with y_perm = x_perm (identity
                experts), checked: the result must equal x (the k weights sum to 1).
Random normal inputs; when x is under 128 MB, 4 input sets are rotated (so the small cases do not sit in L2).
CUDA events around each call after warm-up, median of --reps. Eager mode (launch overheads included, as an
un-fused MoE layer pays them). Writes $OUT/moe_router_permute.json and prints a table.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402


def timed(fn, warmup, reps, cuda):
    for _ in range(warmup):
        fn()
    if cuda:
        torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        if cuda:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e-3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    times.sort()
    return {"median_s": statistics.median(times), "p10_s": times[len(times) // 10],
            "p90_s": times[(9 * len(times)) // 10], "min_s": times[0]}


def stable_argsort(v):
    return torch.sort(v, stable=True)[1]


def case(T, h, E, k, warmup, reps, dev, dt):
    cuda = dev.type == "cuda"
    xbytes = T * h * 2
    nsets = 4 if xbytes < 128e6 else 1
    xs = [torch.randn(T, h, device=dev, dtype=dt) for _ in range(nsets)]
    wr = torch.randn(h, E, device=dev, dtype=dt) / h ** 0.5
    cur = [0]

    def nxt():
        cur[0] = (cur[0] + 1) % nsets
        return xs[cur[0]]

    # Intermediate state from one full pass on set 0, so each part can be timed on its own input.
    st = {}

    def router_gemm(x):
        return x @ wr

    def softmax(lg):
        return torch.softmax(lg.float(), dim=-1)

    def sigmoid(lg):
        return torch.sigmoid(lg.float())

    def topk(pr):
        v, i = torch.topk(pr, k, dim=-1)
        return v / v.sum(dim=-1, keepdim=True), i

    def sort(i):
        flat = i.reshape(-1)
        sidx = stable_argsort(flat)
        counts = torch.bincount(flat, minlength=E)
        offs = torch.cumsum(counts, 0)
        return sidx, counts, offs

    def gather(x, sidx):
        return x.index_select(0, torch.div(sidx, k, rounding_mode="floor"))

    def unpermute(yp, sidx, w):
        rows = torch.empty_like(yp)
        rows.index_copy_(0, sidx, yp)
        return (rows.view(T, k, h) * w.to(dt).unsqueeze(-1)).sum(dim=1)

    def unpermute_scatter_add(yp, sidx, w):
        tok = torch.div(sidx, k, rounding_mode="floor")
        wrow = w.reshape(-1)[sidx].to(dt)
        return torch.zeros(T, h, device=dev, dtype=dt).index_add_(0, tok, yp * wrow.unsqueeze(-1))

    def whole(x):
        lg = router_gemm(x)
        w, i = topk(softmax(lg))
        sidx, counts, offs = sort(i)
        xp = gather(x, sidx)
        return unpermute(xp, sidx, w)

    x0 = xs[0]
    st["logits"] = router_gemm(x0)
    st["probs"] = softmax(st["logits"])
    st["w"], st["i"] = topk(st["probs"])
    st["sidx"], _, _ = sort(st["i"])
    st["xp"] = gather(x0, st["sidx"])
    # checks: the permuted rows are expert-contiguous; identity experts give back x
    ids_sorted = st["i"].reshape(-1)[st["sidx"]]
    contiguous = bool((ids_sorted[1:] >= ids_sorted[:-1]).all())
    out = whole(x0)
    err = float((out.float() - x0.float()).norm() / x0.float().norm())
    out2 = unpermute_scatter_add(st["xp"], st["sidx"], st["w"])
    err2 = float((out2.float() - x0.float()).norm() / x0.float().norm())
    if not (contiguous and err < 2e-2 and err2 < 2e-2):
        raise RuntimeError(f"check failed: contiguous={contiguous} err={err:.3g} err_scatter_add={err2:.3g}")

    parts = {
        "router_gemm": lambda: router_gemm(nxt()),
        "softmax": lambda: softmax(st["logits"]),
        "sigmoid": lambda: sigmoid(st["logits"]),
        "topk": lambda: topk(st["probs"]),
        "sort": lambda: sort(st["i"]),
        "gather": lambda: gather(nxt(), st["sidx"]),
        "permute": lambda: gather(nxt(), sort(st["i"])[0]),
        "unpermute": lambda: unpermute(st["xp"], st["sidx"], st["w"]),
        "unpermute_scatter_add": lambda: unpermute_scatter_add(st["xp"], st["sidx"], st["w"]),
        "whole": lambda: whole(nxt()),
    }
    res = {}
    for name, fn in parts.items():
        res[name] = timed(fn, warmup, reps, cuda)
    rows_bytes = T * k * h * 2
    rec = {"tokens": T, "hidden": h, "experts": E, "topk": k, "input_sets": nsets,
           "rel_err_whole_vs_x": err, "rel_err_scatter_add_vs_x": err2,
           "router_gemm_flop": 2.0 * T * h * E,
           "min_bytes": {"router_gemm": T * h * 2 + h * E * 2 + T * E * 2,
                         "gather": T * h * 2 + rows_bytes + T * k * 8,
                         "unpermute": rows_bytes + T * k * 4 + T * h * 2},
           "parts": res}
    rec["whole_per_token_s"] = res["whole"]["median_s"] / T
    rec["sum_of_parts_s"] = sum(res[p]["median_s"] for p in ("router_gemm", "softmax", "topk", "sort", "gather",
                                                             "unpermute"))
    rec["gather_GBps"] = (T * h * 2 + rows_bytes) / res["gather"]["median_s"] / 1e9
    return rec


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tokens", default="256,1024,4096,16384,32768")
    p.add_argument("--experts", default="8,64,128,256")
    p.add_argument("--topk", default="2,8")
    p.add_argument("--hidden", default="4096,7168")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--time-budget-s", type=float, default=1e9)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--name", default="moe_router_permute")
    p.add_argument("--cpu", action="store_true", help="float32 on the CPU: checks the script's logic only")
    a = p.parse_args()
    t0 = time.perf_counter()
    torch.manual_seed(0)
    dev = torch.device("cpu") if a.cpu else torch.device("cuda")
    dt = torch.float32 if a.cpu else torch.bfloat16
    meta = common.run_metadata()
    if not a.cpu:
        meta["gpu"] = common.nvidia_smi_static(0)
        meta["software"] = common.software_versions()
        meta["device"] = common.device_properties()
    rows, failures = [], []
    stopped = False
    smi = common.SmiSampler(gpu=0) if not a.cpu else None
    if smi:
        smi.__enter__()
    for h in [int(v) for v in a.hidden.split(",")]:
        for E in [int(v) for v in a.experts.split(",")]:
            for k in [int(v) for v in a.topk.split(",")]:
                if k > E:
                    continue
                for T in [int(v) for v in a.tokens.split(",")]:
                    if time.perf_counter() - t0 > a.time_budget_s:
                        stopped = True
                        break
                    try:
                        rows.append(case(T, h, E, k, a.warmup, a.reps, dev, dt))
                        r = rows[-1]
                        pr = r["parts"]
                        print(f"h={h} E={E:3d} k={k} T={T:6d}  gemm {pr['router_gemm']['median_s']*1e6:7.1f}  "
                              f"softmax {pr['softmax']['median_s']*1e6:6.1f}  topk {pr['topk']['median_s']*1e6:6.1f}  "
                              f"sort {pr['sort']['median_s']*1e6:6.1f}  gather {pr['gather']['median_s']*1e6:7.1f}  "
                              f"unperm {pr['unpermute']['median_s']*1e6:7.1f}  whole {pr['whole']['median_s']*1e6:7.1f} us"
                              f"  ({r['whole_per_token_s']*1e9:6.1f} ns/token)", flush=True)
                    except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
                        failures.append({"tokens": T, "hidden": h, "experts": E, "topk": k, "error": str(e)[:400]})
                        print("FAILED", failures[-1], flush=True)
                    if not a.cpu:
                        torch.cuda.empty_cache()
    if smi:
        smi.__exit__(None, None, None)
        meta["smi_during"] = smi.summary()
        meta["gpu_after"] = common.nvidia_smi_static(0)
    record = {"what": "MoE router GEMM, softmax/sigmoid, top-k, sort-based permute (gather) and weighted unpermute, "
                      "each part and the whole, eager PyTorch, one GPU",
              "units": {"*_s": "seconds (median over reps of CUDA-event times)", "min_bytes": "bytes",
                        "router_gemm_flop": "FLOP", "gather_GBps": "1e9 bytes per second (x read + rows written)"},
              "timing": f"{a.warmup} warm-up calls, {a.reps} timed calls per part, CUDA events, median",
              "meta": meta, "cases": rows, "failures": failures, "stopped_by_time_budget": stopped,
              "elapsed_s": time.perf_counter() - t0}
    common.write_json(record, a.name, a.out_dir)
    print(f"{len(rows)} cases, {len(failures)} failures, {time.perf_counter() - t0:.1f} s" +
          (f"; first: {failures[0]}" if failures else ""), flush=True)


if __name__ == "__main__":
    main()
