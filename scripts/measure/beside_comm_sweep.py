#!/usr/bin/env python3
"""A GEMM-length x call-length sweep of a bf16 GEMM beside NCCL collectives, with a per-kernel timeline (issue #24).

Session 31's beside_comm runs and the calibration's overlap items disagree on what a GEMM loses beside a collective
(scripts/validation/beside_comm_law.py): about half a call per GEMM there, 0.1-3 calls in the bench. This sweep asks
which quantity the delay follows: for each GEMM length T (tokens x hidden x ffn) and each call size (MiB), on
2+ GPUs of one host:

  t_alone / t_beside : as beside_comm.py (a window of --reps back-to-back GEMMs, an event after each in both, median
                       of --trials; the collectives outlast the window three times over), loss = ratio - 1
  timeline           : in the last beside trial (both streams released together from t0 by a gate), a CUDA event after every GEMM (compute stream) and after every call
                       (comm stream), all timed from one start event: per-GEMM durations, and the call end times, so
                       one can see whether a GEMM's delay ends when a call ends (the GEMM waiting for the call's SMs)
                       and whether every GEMM or one per call is delayed.

Usage (device): NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node=2 scripts/measure/beside_comm_sweep.py --out-dir $OUT
        (CPU logic check): python3 scripts/measure/beside_comm_sweep.py --dry
Writes $OUT/beside_comm_sweep.json (rank 0; BESIDE_COMM_NAME overrides the name) and prints a table.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

DEFAULT_GEMMS = "4096x7168x2048,4096x4096x2048,4096x4096x4096,4096x4096x8192,4096x4096x14336,8192x4096x14336"


def parse_gemms(s):
    out = []
    for g in s.split(","):
        parts = g.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            sys.exit(f"--gemms: {g!r} is not TOKENSxHIDDENxFFN (three positive integers)")
        out.append(tuple(int(p) for p in parts))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gemms", default=DEFAULT_GEMMS, help="comma list of TOKENSxHIDDENxFFN (x[T,H] @ w[F,H]^T)")
    p.add_argument("--comm-mib", default="8,32,128,512", help="comma list of bytes per collective call (MiB)")
    p.add_argument("--collectives", default="reduce_scatter,all_reduce", help="reduce_scatter, all_gather, all_reduce")
    p.add_argument("--reps", type=int, default=40, help="GEMMs per timed window")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--dry", action="store_true", help="check the argument handling and exit (no GPU)")
    a = p.parse_args()
    gemms = parse_gemms(a.gemms)
    sizes = [int(x) for x in a.comm_mib.split(",")]
    colls = a.collectives.split(",")
    for c in colls:
        if c not in ("reduce_scatter", "all_gather", "all_reduce"):
            sys.exit(f"--collectives: unknown collective {c!r}")
    if a.dry:
        print(json.dumps({"args": vars(a), "gemms": gemms, "sizes_mib": sizes, "collectives": colls,
                          "configs": len(gemms) * len(sizes) * len(colls)}))
        return
    import torch
    import torch.distributed as dist
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("refusing to run: NCCL_NVLS_ENABLE must be 0 (NVLink multicast stays off)")
    rank, world, lr = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(lr)
    dev = torch.device("cuda", lr)
    dist.init_process_group("nccl", device_id=dev)
    record = {"meta": common.run_metadata() if rank == 0 else None, "args": vars(a), "world": world}
    comp = torch.cuda.Stream(device=dev)
    comm_s = torch.cuda.Stream(device=dev)
    bf = torch.bfloat16
    results = []
    ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    for (tok, hid, ffn) in gemms:
        x = torch.randn(tok, hid, device=dev, dtype=bf)
        w = torch.randn(ffn, hid, device=dev, dtype=bf) * 0.02
        gemm = lambda: torch.matmul(x, w.t())  # noqa: E731

        def window(stream):
            """reps back-to-back GEMMs on stream, an event after each (alone and beside alike): (start, ends)."""
            start, ends = ev(), [ev() for _ in range(a.reps)]
            with torch.cuda.stream(stream):
                start.record(stream)
                for i in range(a.reps):
                    gemm()
                    ends[i].record(stream)
            return start, ends
        for size in sizes:
            n = size * 2**20 // 2
            buf = torch.randn(n, device=dev, dtype=bf)
            shard = torch.empty(n // world, device=dev, dtype=bf)

            def coll(kind):
                if kind == "reduce_scatter":
                    dist.reduce_scatter_tensor(shard, buf)
                elif kind == "all_gather":
                    dist.all_gather_into_tensor(buf, shard)
                else:
                    dist.all_reduce(buf)
            for kind in colls:
                with torch.cuda.stream(comp):
                    for _ in range(3):
                        gemm()
                with torch.cuda.stream(comm_s):
                    for _ in range(3):
                        coll(kind)
                torch.cuda.synchronize()
                s, e = ev(), ev()
                with torch.cuda.stream(comm_s):
                    s.record(comm_s)
                    for _ in range(10):
                        coll(kind)
                    e.record(comm_s)
                torch.cuda.synchronize()
                t_coll = s.elapsed_time(e) / 10
                alone, beside, timeline = [], [], None
                for trial in range(a.trials):
                    dist.barrier()
                    torch.cuda.synchronize()
                    s, ends = window(comp)
                    torch.cuda.synchronize()
                    alone.append(s.elapsed_time(ends[-1]) / a.reps)
                    calls = max(4, int(3 * alone[-1] * a.reps / max(t_coll, 1e-3)) + 2)
                    agree = torch.tensor([calls], device=dev, dtype=torch.int64)
                    dist.all_reduce(agree, op=dist.ReduceOp.MAX)
                    calls = int(agree.item())
                    dist.barrier()
                    torch.cuda.synchronize()
                    # A gate: both streams wait behind a sleep kernel long enough for the host to enqueue every
                    # call and GEMM, so the collectives run back to back from t0 whatever the host's pace.
                    gate_s = 40e-6 * (calls + a.reps) + 0.005
                    torch.cuda._sleep(int(gate_s * 2.0e9))
                    t0 = ev()
                    t0.record(torch.cuda.current_stream())
                    comm_s.wait_event(t0)
                    comp.wait_event(t0)
                    call_end = [ev() for _ in range(calls)]
                    h0 = time.perf_counter()
                    with torch.cuda.stream(comm_s):
                        for i in range(calls):
                            coll(kind)
                            call_end[i].record(comm_s)
                    g_start, g_end = window(comp)
                    host_s = time.perf_counter() - h0
                    torch.cuda.synchronize()
                    beside.append(g_start.elapsed_time(g_end[-1]) / a.reps)
                    if trial == a.trials - 1:
                        timeline = {"host_enqueue_s": host_s, "gate_s": gate_s, "gate_held": host_s < gate_s,
                                    "gemm_start_ms": t0.elapsed_time(g_start),
                                    "gemm_end_ms": [t0.elapsed_time(q) for q in g_end],
                                    "call_end_ms": [t0.elapsed_time(q) for q in call_end]}
                ta, tb = statistics.median(alone), statistics.median(beside)
                row = {"gemm": [tok, hid, ffn], "flops": 2.0 * tok * hid * ffn, "collective": kind, "comm_MiB": size,
                       "t_alone_ms": ta, "t_beside_ms": tb, "loss": tb / ta - 1, "alone_trials_ms": alone,
                       "beside_trials_ms": beside, "collective_ms_per_call": t_coll, "calls_last_trial": calls,
                       "timeline_last_trial": timeline}
                results.append(row)
                if rank == 0:
                    print(f"{tok}x{hid}x{ffn:<6} {kind:14} {size:4} MiB  alone {ta * 1e3:8.1f} us  beside "
                          f"{tb * 1e3:8.1f} us  loss {tb / ta - 1:+.3f}  coll {t_coll * 1e3:7.1f} us/call", flush=True)
            del buf, shard
    gathered = [None] * world
    dist.all_gather_object(gathered, results)
    if rank == 0:
        record["per_rank"] = gathered
        common.write_json(record, os.environ.get("BESIDE_COMM_NAME", "beside_comm_sweep"), a.out_dir)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
