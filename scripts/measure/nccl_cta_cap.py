#!/usr/bin/env python3
"""Reduce-scatter and all-gather bandwidth with the communicator's CTAs capped, alone and beside a GEMM loop.

Why (issue #24): MLPerf Training v5.1's NeMo recipes (NVIDIA/benchmarks/llama31_8b/implementations/nemo/
conf/nccl/custom_communicator_cta.yaml) give the data-parallel communicators `max_ctas: 8`, NCCL's default for a
large NVLink domain is 16-32+ channels. A CTA is one channel's worker: "we need to launch 2 CTAs per NVLink in order to
saturate the BW for large messages" (NVIDIA/nccl issue #1703). This measures what one CTA moves on our H100 SXM5
(NVLink 4: 18 links x 25 GB/s per direction) so the model's per-CTA rate has a measurement beside its source.

One process per GPU, started with torchrun. For each cap in --ctas (0 = NCCL's default) a communicator is created
with ProcessGroupNCCL.Options.config.{min_ctas,max_ctas} (NCCL_MIN_CTAS/NCCL_MAX_CTAS per communicator, NCCL >= 2.17).
Per cap and size: reduce_scatter_tensor and all_gather_into_tensor (bf16), CUDA events around each of --iters calls,
median, slowest rank; busbw = bytes_total * (n-1)/n / time (nccl-tests convention for both ops). Then a bf16 GEMM
loop (8192^3) alone and with a 1 GiB reduce-scatter loop on a side stream: the GEMM's slowdown and the collective's
bandwidth beside it. Results are checked (sums) before they are kept. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
Writes $OUT/nccl_cta_cap.json (rank 0) and prints a table.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def make_group(world, ctas):
    if ctas <= 0:
        return dist.new_group(list(range(world))), "default"
    opts = dist.ProcessGroupNCCL.Options()
    try:
        opts.config.min_ctas = 1
        opts.config.max_ctas = ctas
    except AttributeError as e:  # older PyTorch without NCCL config
        sys.exit(f"ProcessGroupNCCL.Options has no config.max_ctas: {e}")
    return dist.new_group(list(range(world)), pg_options=opts), f"max_ctas={ctas}"


def timed(fn, iters, warmup, dev):
    for _ in range(warmup):
        fn()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    ts = torch.tensor([s.elapsed_time(e) / 1e3 for s, e in ev], device=dev, dtype=torch.float64)
    dist.all_reduce(ts, op=dist.ReduceOp.MAX)
    return ts.tolist()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ctas", default="0,1,2,4,8,16")
    p.add_argument("--mib", default="64,256,1024")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--out-dir", default=os.environ.get("OUT"))
    a = p.parse_args()
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("refusing to run: NCCL_NVLS_ENABLE must be 0 (NVLink multicast stays off)")
    rank, world, lr = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(lr)
    dev = torch.device("cuda", lr)
    dist.init_process_group("nccl", device_id=dev)
    rec = {"name": "nccl_cta_cap", "world_size": world, "dtype": "bf16",
           "busbw_formula": "busbw = total_bytes * (n-1)/n / time (reduce-scatter input, all-gather output)",
           "timing": f"CUDA events per call, median of {a.iters} after {a.warmup} warm-ups, max over ranks"}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rec["nccl_version"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    if rank == 0:
        rec["nvidia_smi_before"] = common.nvidia_smi_static()
    rows = []
    groups = {}
    for c in [int(x) for x in a.ctas.split(",")]:
        g, label = make_group(world, c)
        groups[c] = g
        for mib in [int(x) for x in a.mib.split(",")]:
            total = mib * 2**20 // 2  # bf16 elements of the full (unsharded) buffer
            shard = total // world
            full = torch.full((shard * world,), 1.0, device=dev, dtype=torch.bfloat16)
            part = torch.empty(shard, device=dev, dtype=torch.bfloat16)
            for op in ("reduce_scatter", "all_gather"):
                if op == "reduce_scatter":
                    fn = lambda: dist.reduce_scatter_tensor(part, full, group=g)  # noqa: E731
                else:
                    fn = lambda: dist.all_gather_into_tensor(full, part, group=g)  # noqa: E731
                ts = timed(fn, a.iters, a.warmup, dev)
                # check: reduce-scatter of ones gives world; all-gather of rank+1 gives each rank's value
                if op == "reduce_scatter":
                    full.fill_(1.0)
                    dist.reduce_scatter_tensor(part, full, group=g)
                    ok = bool((part == float(world)).all())
                else:
                    part.fill_(float(rank + 1))
                    dist.all_gather_into_tensor(full, part, group=g)
                    ok = all(bool((full[r * shard:(r + 1) * shard] == float(r + 1)).all()) for r in range(world))
                full.fill_(1.0)
                med = statistics.median(ts)
                nbytes = shard * world * 2
                busbw = nbytes * (world - 1) / world / med
                spread = (max(ts) - min(ts)) / med
                row = {"ctas": c, "label": label, "op": op, "size_bytes": nbytes, "time_median_s": med,
                       "time_min_s": min(ts), "time_max_s": max(ts), "spread": spread,
                       "busbw_GBps": busbw / 1e9, "correct": ok}
                rows.append(row)
                if rank == 0:
                    print(f"{label:12s} {op:15s} {mib:6d} MiB {med*1e3:9.3f} ms busbw {busbw/1e9:7.1f} GB/s "
                          f"spread {spread:.2f} ok={ok}", flush=True)
            del full, part
        # send/recv ring exchange (each rank sends to rank+1 and receives from rank-1, as a CP ring step does)
        for mib in (16, 64):
            n_el = mib * 2**20 // 2
            snd = torch.full((n_el,), float(rank + 1), device=dev, dtype=torch.bfloat16)
            rcv = torch.empty(n_el, device=dev, dtype=torch.bfloat16)
            nxt, prv = (rank + 1) % world, (rank - 1) % world

            def xchg():
                ops = [dist.P2POp(dist.isend, snd, nxt, group=g), dist.P2POp(dist.irecv, rcv, prv, group=g)]
                for r in dist.batch_isend_irecv(ops):
                    r.wait()
            ts = timed(xchg, a.iters, a.warmup, dev)
            ok = bool((rcv == float(prv + 1)).all())
            med = statistics.median(ts)
            row = {"ctas": c, "label": label, "op": "send_recv_ring", "size_bytes": n_el * 2, "time_median_s": med,
                   "time_min_s": min(ts), "time_max_s": max(ts), "spread": (max(ts) - min(ts)) / med,
                   "busbw_GBps": n_el * 2 / med / 1e9, "correct": ok}
            rows.append(row)
            if rank == 0:
                print(f"{label:12s} {'send_recv_ring':15s} {mib:6d} MiB {med*1e3:9.3f} ms bw {n_el*2/med/1e9:7.1f} GB/s "
                      f"ok={ok}", flush=True)
            del snd, rcv
    rec["collectives"] = rows
    # GEMM loop alone and beside a 1 GiB reduce-scatter loop on a side stream, per cap.
    n = 8192
    x = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    gemm_iters = 20

    def gemms():
        for _ in range(gemm_iters):
            torch.matmul(x, w)

    alone = statistics.median(timed(gemms, 3, 1, dev))
    over = []
    side = torch.cuda.Stream()
    total = 2**30 // 2
    shard = total // world
    full = torch.ones(shard * world, device=dev, dtype=torch.bfloat16)
    part = torch.empty(shard, device=dev, dtype=torch.bfloat16)
    for c, g in groups.items():
        rs_alone = statistics.median(timed(lambda: dist.reduce_scatter_tensor(part, full, group=g), 5, 2, dev))
        k = max(1, int(round(alone / rs_alone)))
        res = []
        for _ in range(3):
            dist.barrier()
            torch.cuda.synchronize()
            s0, s1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            c0, c1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s0.record()
            c0.record(side)
            with torch.cuda.stream(side):
                for _ in range(k):
                    dist.reduce_scatter_tensor(part, full, group=g)
            c1.record(side)
            gemms()
            s1.record()
            torch.cuda.synchronize()
            res.append((s0.elapsed_time(s1) / 1e3, c0.elapsed_time(c1) / 1e3))
        g_t = statistics.median(r[0] for r in res)
        c_t = statistics.median(r[1] for r in res)
        row = {"ctas": c, "gemm_loop_alone_s": alone, "gemm_loop_beside_s": g_t, "gemm_slowdown": g_t / alone,
               "rs_calls": k, "rs_alone_s": rs_alone, "rs_beside_per_call_s": c_t / k,
               "rs_busbw_alone_GBps": total * 2 * (world - 1) / world / rs_alone / 1e9,
               "rs_busbw_beside_GBps": total * 2 * (world - 1) / world / (c_t / k) / 1e9}
        over.append(row)
        if rank == 0:
            print(f"beside GEMMs ctas={c}: GEMM loop {alone*1e3:.2f} -> {g_t*1e3:.2f} ms (x{g_t/alone:.3f}); "
                  f"RS {rs_alone*1e3:.2f} -> {c_t/k*1e3:.2f} ms per call", flush=True)
    rec["beside_gemm"] = over
    if rank == 0:
        rec["nvidia_smi_after"] = common.nvidia_smi_static()
        print("wrote", common.write_json(rec, "nccl_cta_cap", a.out_dir, None), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
