#!/usr/bin/env python3
"""MoE all-to-all (token dispatch / combine) over NCCL: time vs message size and expert-parallel (EP) group size.

For issue #21 (MoE measured end to end) and gpuplan's all_to_all price (model/src/comm/collectives.cpp). One process per
GPU, started with torchrun; EP groups of every size in --ep that divides the world (EP 2 on 4 GPUs = two groups
{0,1}, {2,3} running the same sweep at once, as data parallelism beside expert parallelism would).
Three sweeps, all `dist.all_to_all_single` on bf16 buffers:
  1. equal splits: S bytes per rank (the nccl-tests all_to_all size: one rank's send buffer), S/EP to every peer
     (self included), 4 KiB .. 512 MiB; the received data is checked at every size;
  2. uneven splits, as a router makes them: the same S per rank, split by a fixed skewed matrix (the hot rank
     receives ~1.3x (EP 2) to ~1.4x (EP 4) the mean), in 256-byte multiples (`uneven`) and in single elements
     (`uneven_unaligned`, odd chunk offsets); recorded with the imbalance;
  3. token-shaped: T tokens per rank x top-k rows of `hidden` bf16 (no de-duplication: the rows a token sends to
     one rank are sent k times, as a permute-then-all-to-all dispatcher does), routed by top-k over random router
     logits to E experts placed contiguously over the EP ranks; the dispatch (splits from the routing, counts
     exchanged first, untimed) and the combine (the reverse) are timed apart.
Timing: warm-up, then CUDA events around each call (`per_call`: median over calls of the slowest rank of the
group), and events around a back-to-back loop of the same calls (`loop`: mean per call, slowest rank). Bandwidths:
algbw = S / t; busbw = algbw x (EP-1)/EP (the nccl-tests convention, which assumes equal splits).
NVLink multicast stays off (NCCL_NVLS_ENABLE=0 is checked). Writes $OUT/<name>.json from rank 0.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


DT = torch.bfloat16
ALIGN_ELEMS = 128  # uneven splits in multiples of 256 bytes (MoE splits are whole rows of hidden x 2 bytes)
EL = 2  # bytes per element of the exchanged rows (bf16), also in --cpu mode where the buffers are float32


class Clock:
    """CUDA events on a GPU, perf_counter on the CPU (the CPU path only exists to test the script's logic)."""

    def __init__(self, dev):
        self.cuda = dev.type == "cuda"

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    @staticmethod
    def between(a, b):
        if isinstance(a, float):
            return b - a
        return a.elapsed_time(b) * 1e-3


def group_max(values, dev, world, members):
    """Per-call times of every rank -> per-call maximum over the ranks of `members`."""
    t = torch.tensor(values, dtype=torch.float64, device=dev)
    allt = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(allt, t)
    m = torch.stack([allt[r] for r in members]).max(dim=0).values
    return m.tolist()


def split_elems(total, fractions, unit=1):
    """Integer split of `total` elements by `fractions` (sum 1) in multiples of `unit` elements, the remainder to the
    largest part."""
    parts = [int(total * f) // unit * unit for f in fractions]
    parts[max(range(len(parts)), key=lambda i: fractions[i])] += total - sum(parts)
    return parts


def skew_matrix(ep, seed=1234):
    """Fractions f[src][dst] (rows sum to 1): a per-destination popularity (rank 0 hot, the last cold) times
    per-source noise. Deterministic, the same on every rank."""
    g = torch.Generator().manual_seed(seed + ep)
    base = torch.linspace(0.45, -0.35, ep)
    noise = torch.randn(ep, ep, generator=g) * 0.15
    f = torch.exp(base[None, :] + noise)
    f = f / f.sum(dim=1, keepdim=True)
    return f.tolist()


def time_calls(fn, clock, warmup, iters):
    for _ in range(warmup):
        fn()
    clock.sync()
    marks = []
    for _ in range(iters):
        a = clock.mark()
        fn()
        b = clock.mark()
        marks.append((a, b))
    clock.sync()
    per_call = [Clock.between(a, b) for a, b in marks]
    a = clock.mark()
    for _ in range(iters):
        fn()
    b = clock.mark()
    clock.sync()
    return per_call, Clock.between(a, b) / iters


def graph_time(fn, dev, world, members, calls, replays=5):
    """Per-call time of `calls` back-to-back calls captured in one CUDA graph (launch overhead removed), max over the
    group; None if capture fails on any rank."""
    ok = 1.0
    t = 0.0
    try:
        cur = torch.cuda.current_stream()
        side = torch.cuda.Stream()
        side.wait_stream(cur)
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        cur.wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            for _ in range(calls):
                fn()
        g.replay()
        torch.cuda.synchronize()
        ts = []
        for _ in range(replays):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) * 1e-3 / calls)
        t = statistics.median(ts)
        del g
    except Exception as e:  # noqa: BLE001
        ok = 0.0
        print(f"graph capture failed on rank {dist.get_rank()}: {str(e)[:200]}", flush=True)
    flag = torch.tensor([ok], device=dev)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    tmax = max(group_max([t], dev, world, members))
    return tmax if flag.item() > 0 else None


def summarise(per_call_max, loop_max, nbytes, ep):
    med = statistics.median(per_call_max)
    s = sorted(per_call_max)
    r = {"time_median_s": med, "time_min_s": s[0], "time_max_s": s[-1],
         "time_p10_s": s[len(s) // 10], "time_p90_s": s[(9 * len(s)) // 10],
         "loop_time_per_call_s": loop_max, "iters": len(per_call_max)}
    r["algbw_GBps"] = nbytes / med / 1e9
    r["busbw_GBps"] = r["algbw_GBps"] * (ep - 1) / ep
    r["loop_busbw_GBps"] = nbytes / loop_max / 1e9 * (ep - 1) / ep
    return r


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ep", default="2,4", help="EP group sizes (each must divide the world size)")
    p.add_argument("--min-bytes", type=int, default=4096)
    p.add_argument("--max-bytes", type=int, default=512 * 2**20)
    p.add_argument("--tokens", default="128,512,2048,8192,16384")
    p.add_argument("--hidden", default="4096,7168")
    p.add_argument("--topk-experts", default="2:8,8:64", help="top-k:experts pairs for the token-shaped sweep")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=30, help="timed calls per size (half above 64 MiB)")
    p.add_argument("--graph-max-bytes", type=int, default=64 * 2**20,
                   help="also time a CUDA graph of --graph-calls calls up to this size (launch overhead removed)")
    p.add_argument("--graph-calls", type=int, default=20)
    p.add_argument("--time-budget-s", type=float, default=1e9, help="stop starting new items after this")
    p.add_argument("--out-dir", default=None)
    p.add_argument("--name", default="moe_alltoall")
    p.add_argument("--cpu", action="store_true", help="gloo on the CPU: checks the script's logic only")
    a = p.parse_args()
    t_start = time.perf_counter()
    if not a.cpu and os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("refusing to run: NCCL_NVLS_ENABLE must be 0 (NVLink multicast stays off)")
    rank, world, lr = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    if a.cpu:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    else:
        torch.cuda.set_device(lr)
        dev = torch.device("cuda", lr)
        dist.init_process_group("nccl", device_id=dev)
    clock = Clock(dev)
    global DT
    if a.cpu:
        DT = torch.float32  # gloo has no bf16; only the logic is tested there
    eps = [int(x) for x in a.ep.split(",") if int(x) > 1 and world % int(x) == 0]
    groups = {}
    for ep in eps:  # every rank creates every group (new_group is collective)
        for g0 in range(0, world, ep):
            members = list(range(g0, g0 + ep))
            pg = dist.new_group(members)
            if rank in members:
                groups[ep] = (pg, members)

    rec = {"name": a.name, "kind": "moe_alltoall", "world_size": world, "ep_sizes": eps, "dtype": str(DT),
           "units": {"size_bytes": "bytes, one rank's send buffer (nccl-tests all_to_all size)",
                     "*_s": "seconds", "*_GBps": "1e9 bytes per second"},
           "definitions": {
               "per_call": "CUDA events around each call; per call the maximum over the EP group's ranks; "
                           "median/min/max/p10/p90 over the calls",
               "loop_time_per_call_s": "events around `iters` back-to-back calls / iters, max over the group",
               "algbw_GBps": "size_bytes / time_median_s", "busbw_GBps": "algbw x (EP-1)/EP",
               "concurrent_groups": "world/EP groups run the same item at once (EP 2 on 4 GPUs: {0,1} and {2,3})",
               "uneven": "fractions f[src][dst] of each rank's buffer, splits rounded to 256-byte multiples; "
                         "recv_imbalance = max recv / mean recv",
               "uneven_unaligned": "the same fractions with splits rounded to single bf16 elements (chunk offsets "
                                   "2-byte aligned only; MoE never does this, recorded because NCCL slows down)",
               "graph_time_per_call_s": "a CUDA graph of graph_calls back-to-back calls, replayed; median replay / "
                                        "graph_calls, max over the group (host launch overhead removed)",
               "token_shaped": "T*k rows of hidden bf16 per rank (no de-duplication), experts contiguous over "
                               "ranks; dispatch sends by routed expert, combine returns the same rows"},
           "timing": f"{a.warmup} warm-up calls, then {a.iters} timed calls (half above 64 MiB), CUDA events; "
                     f"CUDA graph of {a.graph_calls} calls up to {a.graph_max_bytes} bytes, 5 replays"}
    rec.update(common.run_metadata())
    if not a.cpu:
        rec["software"] = common.software_versions()
        rec["device"] = common.device_properties()
        if rank == 0:
            rec["gpus"] = common.nvidia_smi_static()
    equal, uneven, tokens, failures = [], [], [], []

    def over_budget():
        flag = torch.tensor([1.0 if time.perf_counter() - t_start > a.time_budget_s else 0.0], device=dev)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return flag.item() > 0

    def save():
        if rank == 0:
            rec.update({"equal": equal, "uneven": uneven, "token_shaped": tokens, "failures": failures,
                        "elapsed_s": time.perf_counter() - t_start})
            common.write_json(rec, a.name, a.out_dir)

    sizes = []
    s = a.min_bytes
    while s <= a.max_bytes:
        sizes.append(s)
        s *= 2
    stopped = False
    # ---- 1 and 2: equal and uneven splits vs size ----
    for ep in eps:
        pg, members = groups[ep]
        me = members.index(rank)
        fr = skew_matrix(ep)
        buf_in = torch.empty(a.max_bytes // 2, dtype=DT, device=dev)
        buf_out = torch.empty(a.max_bytes // 2 * 2, dtype=DT, device=dev)  # uneven may receive more
        buf_in.normal_()
        for nbytes in sizes:
            if over_budget():
                stopped = True
                break
            n = nbytes // 2
            iters = a.iters if nbytes <= 64 * 2**20 else max(5, a.iters // 2)
            for mode in ("equal", "uneven", "uneven_unaligned"):
                try:
                    x = buf_in[:n]
                    if mode == "equal":  # sizes are powers of two >= 4 KiB: n divides by EP
                        in_splits = [n // ep] * ep
                        out_splits = [n // ep] * ep
                    else:
                        unit = ALIGN_ELEMS if mode == "uneven" else 1
                        allsplits = [split_elems(n, fr[src], unit) for src in range(ep)]
                        in_splits = allsplits[me]
                        out_splits = [allsplits[src][me] for src in range(ep)]
                    y = buf_out[:sum(out_splits)]
                    # correctness: chunk j of rank r holds the value 16*r + j (exact in bf16); random data for timing
                    chk_in = torch.cat([torch.full((in_splits[j],), float(16 * me + j), dtype=DT,
                                                   device=dev) for j in range(ep)])
                    x.copy_(chk_in)
                    dist.all_to_all_single(y, x, out_splits, in_splits, group=pg)
                    ok = True
                    off = 0
                    for src in range(ep):
                        seg = y[off:off + out_splits[src]]
                        ok &= bool((seg == float(16 * src + me)).all())
                        off += out_splits[src]
                    okt = torch.tensor([1.0 if ok else 0.0], device=dev)
                    dist.all_reduce(okt, op=dist.ReduceOp.MIN)
                    x.normal_()

                    def fn():
                        dist.all_to_all_single(y, x, out_splits, in_splits, group=pg)
                    per_call, loop = time_calls(fn, clock, a.warmup, iters)
                    pmax = group_max(per_call, dev, world, members)
                    lmax = max(group_max([loop], dev, world, members))
                    r = {"ep": ep, "mode": mode, "size_bytes": nbytes, "correct": okt.item() > 0}
                    r.update(summarise(pmax, lmax, nbytes, ep))
                    if nbytes <= a.graph_max_bytes and not a.cpu:
                        r["graph_time_per_call_s"] = graph_time(fn, dev, world, members, a.graph_calls)
                        if r["graph_time_per_call_s"]:
                            r["graph_busbw_GBps"] = nbytes / r["graph_time_per_call_s"] / 1e9 * (ep - 1) / ep
                    if mode != "equal":
                        unit = ALIGN_ELEMS if mode == "uneven" else 1
                        recv = [sum(split_elems(n, fr[src], unit)[dst] for src in range(ep)) * 2 for dst in range(ep)]
                        r["fractions"] = [[round(v, 4) for v in row] for row in fr]
                        r["recv_bytes_per_rank"] = recv
                        r["recv_imbalance"] = max(recv) / (sum(recv) / ep)
                        # the most bytes any rank moves off-rank in one direction
                        offsend = [nbytes - split_elems(n, fr[src], unit)[src] * 2 for src in range(ep)]
                        offrecv = [recv[d] - split_elems(n, fr[d], unit)[d] * 2 for d in range(ep)]
                        r["max_offrank_bytes"] = max(offsend + offrecv)
                        r["max_offrank_GBps"] = r["max_offrank_bytes"] / r["time_median_s"] / 1e9
                    (equal if mode == "equal" else uneven).append(r)
                    if rank == 0:
                        gt = r.get("graph_time_per_call_s")
                        print(f"EP{ep} {mode:16s} {nbytes:>10d} B  {r['time_median_s'] * 1e6:9.1f} us  "
                              f"loop {loop * 1e6:9.1f} us  graph {gt * 1e6 if gt else float('nan'):8.1f} us  "
                              f"busbw {r['busbw_GBps']:7.1f} GB/s  ok={r['correct']}", flush=True)
                except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
                    failures.append({"ep": ep, "mode": mode, "size_bytes": nbytes, "error": str(e)[:400]})
                    if rank == 0:
                        print("FAILED", failures[-1], flush=True)
        del buf_in, buf_out
        if not a.cpu:
            torch.cuda.empty_cache()
        save()
        if stopped:
            break

    # ---- 3: token-shaped dispatch / combine ----
    tok_list = [int(x) for x in a.tokens.split(",")]
    hid_list = [int(x) for x in a.hidden.split(",")]
    ke = [tuple(int(v) for v in x.split(":")) for x in a.topk_experts.split(",")]
    for ep in ([] if stopped else eps):
        pg, members = groups[ep]
        me = members.index(rank)
        for k, E in ke:
            if E % ep:
                continue
            for h in hid_list:
                for T in tok_list:
                    if over_budget():
                        stopped = True
                        break
                    try:
                        g = torch.Generator(device=dev).manual_seed(1000 * rank + T + h + k)
                        logits = torch.randn(T, E, generator=g, device=dev)
                        idx = torch.topk(logits, k, dim=-1).indices.reshape(-1)
                        dst = idx // (E // ep)
                        send_rows = torch.bincount(dst, minlength=ep)
                        recv_rows = torch.empty_like(send_rows)
                        dist.all_to_all_single(recv_rows, send_rows, group=pg)
                        sr, rr = send_rows.tolist(), recv_rows.tolist()
                        in_splits = [c * h for c in sr]
                        out_splits = [c * h for c in rr]
                        x = torch.randn(T * k * h, dtype=DT, device=dev)
                        y = torch.empty(sum(out_splits), dtype=DT, device=dev)
                        back = torch.empty_like(x)

                        def dispatch():
                            dist.all_to_all_single(y, x, out_splits, in_splits, group=pg)

                        def combine():
                            dist.all_to_all_single(back, y, in_splits, out_splits, group=pg)
                        dispatch()
                        combine()
                        same = torch.tensor([1.0 if bool(torch.equal(back, x)) else 0.0], device=dev)
                        dist.all_reduce(same, op=dist.ReduceOp.MIN)
                        iters = a.iters if T * k * h * 2 <= 64 * 2**20 else max(5, a.iters // 2)
                        nbytes = T * k * h * 2
                        r = {"ep": ep, "tokens_per_rank": T, "hidden": h, "topk": k, "experts": E,
                             "size_bytes": nbytes, "send_rows": sr, "recv_rows": rr,
                             "offrank_send_bytes": (sum(sr) - sr[me]) * h * 2,
                             "roundtrip_correct": same.item() > 0}
                        allrecv = group_max([float(sum(rr))], dev, world, members)[0]
                        r["max_recv_rows_in_group"] = int(allrecv)
                        for nm, fn in (("dispatch", dispatch), ("combine", combine)):
                            per_call, loop = time_calls(fn, clock, a.warmup, iters)
                            pmax = group_max(per_call, dev, world, members)
                            lmax = max(group_max([loop], dev, world, members))
                            r[nm] = summarise(pmax, lmax, nbytes, ep)
                            if nbytes <= a.graph_max_bytes and not a.cpu:
                                r[nm]["graph_time_per_call_s"] = graph_time(fn, dev, world, members, a.graph_calls)
                        tokens.append(r)
                        if rank == 0:
                            print(f"EP{ep} tokens T={T:6d} h={h} k={k} E={E}  {nbytes:>11d} B  dispatch "
                                  f"{r['dispatch']['time_median_s'] * 1e6:9.1f} us  combine "
                                  f"{r['combine']['time_median_s'] * 1e6:9.1f} us  ok={r['roundtrip_correct']}",
                                  flush=True)
                        del x, y, back
                    except Exception as e:  # noqa: BLE001
                        failures.append({"ep": ep, "mode": "token_shaped", "tokens": T, "hidden": h, "topk": k,
                                         "error": str(e)[:400]})
                        if rank == 0:
                            print("FAILED", failures[-1], flush=True)
                if stopped:
                    break
            if stopped:
                break
        save()
        if stopped:
            break
    rec["stopped_by_time_budget"] = stopped
    if rank == 0 and not a.cpu:
        rec["gpus_after"] = common.nvidia_smi_static()
    save()
    if rank == 0:
        print(f"done: {len(equal)} equal, {len(uneven)} uneven, {len(tokens)} token-shaped, {len(failures)} failures,"
              f" {time.perf_counter() - t_start:.1f} s", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
