#!/usr/bin/env python3
"""torch.distributed all_reduce bus-bandwidth sweep (NCCL, bf16, sum), one process per GPU, started with torchrun.

Sizes 1 MiB .. 1 GiB (powers of two). Per size: warm-up, then CUDA events around each of --iters all_reduce calls;
median time. algbw = bytes / time; busbw = algbw * 2*(n-1)/n (the nccl-tests convention). The slowest rank's
time counts. NVLink multicast (NVLS) must stay off: NCCL_NVLS_ENABLE=0 is checked. Writes one JSON from rank 0.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--min-mib", type=int, default=1)
    p.add_argument("--max-mib", type=int, default=1024)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--append-jsonl", default=None)
    p.add_argument("--name", default="allreduce_bw")
    a = p.parse_args()
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("refusing to run: NCCL_NVLS_ENABLE must be 0 (NVLink multicast stays off)")
    rank, world, lr = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(lr)
    dev = torch.device("cuda", lr)
    dist.init_process_group("nccl", device_id=dev)
    rec = {"name": a.name, "kind": "allreduce_bw", "world_size": world, "dtype": "bf16", "op": "sum",
           "busbw_formula": "busbw = (bytes / time) * 2*(n-1)/n",
           "timing": f"CUDA events per call, median of {a.iters} after {a.warmup} warm-ups, max over ranks"}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    if rank == 0:
        rec["nvidia_smi_before"] = common.nvidia_smi_static()
    results = []
    mib = a.min_mib
    while mib <= a.max_mib:
        nbytes = mib * 2**20
        x = torch.ones(nbytes // 2, device=dev, dtype=torch.bfloat16)
        for _ in range(a.warmup):
            dist.all_reduce(x)
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(a.iters)]
        for s, e in ev:
            s.record()
            dist.all_reduce(x)
            e.record()
        torch.cuda.synchronize()
        ts = torch.tensor([s.elapsed_time(e) / 1e3 for s, e in ev], device=dev, dtype=torch.float64)
        dist.all_reduce(ts, op=dist.ReduceOp.MAX)
        ts = ts.tolist()
        # correctness: start from ones, check the sum on a fresh tensor
        y = torch.full((1024,), float(rank + 1), device=dev, dtype=torch.bfloat16)
        dist.all_reduce(y)
        ok = bool((y == world * (world + 1) / 2).all())
        med = statistics.median(ts)
        algbw = nbytes / med
        busbw = algbw * 2 * (world - 1) / world
        results.append({"size_bytes": nbytes, "time_median_s": med, "time_min_s": min(ts), "time_max_s": max(ts),
                        "algbw_GBps": algbw / 1e9, "busbw_GBps": busbw / 1e9, "sum_correct": ok})
        if rank == 0:
            print(f"{mib:6d} MiB  {med*1e6:10.1f} us  algbw {algbw/1e9:7.1f} GB/s  busbw {busbw/1e9:7.1f} GB/s  "
                  f"ok={ok}", flush=True)
        del x
        mib *= 2
    rec["results"] = results
    if rank == 0:
        rec["nvidia_smi_after"] = common.nvidia_smi_static()
        print("wrote", common.write_json(rec, a.name, a.out_dir, a.append_jsonl), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
