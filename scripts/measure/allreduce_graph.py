#!/usr/bin/env python3
"""The TP all-reduce a decode step runs, 64 KiB-8 MiB, inside a CUDA graph and eager, per NCCL protocol (issue #27).

Session 32 profiled the TP 2 Llama-3-70B-shape decode step (data/validation/ANALYSIS.md, "Where the TP 2 70B-shape
decode step's 1.5 ms goes"): its bf16 all-reduce was flat at 36-40 us a call from 2.1 to 4.2 MiB inside the graph,
~11.5 us at 0.57 MiB, where gpuplan's built-in NVLink law rises 4 us over that range; only rank 0 was profiled, so
skew was not separated from the call. This script measures, one process per GPU (torchrun):

  per size (bf16, sum), with the protocol NCCL picks (or the one NCCL_PROTO forces; the run script loops over them):
    graph : G calls back to back captured in one CUDA graph; per call = replay time / G (CUDA events), each rank's own
    eager : G calls back to back on the stream, per call = elapsed / G
    solo  : one call in a graph between two barriers' worth of idle (per call, both ranks), the latency a decode step's
            lone call pays
    kernel: the NCCL kernel name(s) of one graph replay (torch.profiler; the name carries RING/TREE and LL/LL128/SIMPLE)
  each rank's medians are gathered, so skew between ranks shows as their difference.

Usage (device): NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc_per_node=2 scripts/measure/allreduce_graph.py \
                  --out-dir $OUT [--name allreduce_graph_default]
        (CPU logic check): python3 scripts/measure/allreduce_graph.py --dry
Writes $OUT/<name>.json (rank 0) and prints one line per size.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# KiB: fine around NCCL's protocol switches on two NVLink GPUs (the H200 calibration samples step between 1.48 and
# 1.76 MB) and over the decode step's 0.5-4.2 MiB (b = 35-257 rows of 8192 bf16).
DEFAULT_KIB = "64,128,256,384,512,640,768,1024,1280,1408,1536,1664,1792,1920,2048,2304,2560,3072,3584,4096,5120,6144,8192"


def parse_sizes(text):
    sizes = sorted({int(s) for s in text.split(",") if s.strip()})
    if not sizes or sizes[0] <= 0:
        raise SystemExit(f"--sizes-kib: positive KiB values expected, got {text!r}")
    return sizes


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes-kib", default=DEFAULT_KIB, help="comma list of message sizes, KiB (bf16 elements = KiB*512)")
    p.add_argument("--calls", type=int, default=20, help="calls per graph / eager window (G)")
    p.add_argument("--replays", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--name", default="allreduce_graph")
    p.add_argument("--dry", action="store_true", help="check the argument handling and exit (no GPU)")
    a = p.parse_args()
    sizes = parse_sizes(a.sizes_kib)
    if a.dry:
        print(json.dumps({**vars(a), "sizes_kib": sizes, "nccl_proto": os.environ.get("NCCL_PROTO", "(NCCL's choice)")}))
        return
    import torch
    import torch.distributed as dist
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("refusing to run: NCCL_NVLS_ENABLE must be 0 (NVLink multicast stays off)")
    rank, world, lr = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(lr)
    dev = torch.device("cuda", lr)
    dist.init_process_group("nccl", device_id=dev)
    rec = {"name": a.name, "kind": "allreduce_graph", "world_size": world, "dtype": "bf16", "op": "sum",
           "nccl_proto": os.environ.get("NCCL_PROTO", "(NCCL's choice)"), "calls_per_window": a.calls,
           "timing": (f"per call: CUDA events around a window of {a.calls} back-to-back calls (graph replay or eager) "
                      f"/ {a.calls}, median of {a.replays} windows after {a.warmup} warm-ups, each rank its own; "
                      "solo: one call per graph replay, median of the replays")}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    if rank == 0:
        rec["nvidia_smi_before"] = common.nvidia_smi_static()

    def timed(fn, per):
        for _ in range(a.warmup):
            fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(a.replays):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) / 1e3 / per)
        return statistics.median(ts), min(ts), max(ts)

    def capture(body):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            body()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            body()
        torch.cuda.synchronize()
        return g

    results = []
    for kib in sizes:
        n = kib * 512
        x = torch.ones(n, device=dev, dtype=torch.bfloat16)

        def window():
            for _ in range(a.calls):
                dist.all_reduce(x)

        r = {"size_KiB": kib, "bytes": n * 2}
        try:
            g = capture(window)
            gs = capture(lambda: dist.all_reduce(x))
            dist.barrier()
            r["graph_s"] = timed(g.replay, a.calls)
            dist.barrier()
            r["eager_s"] = timed(window, a.calls)
            dist.barrier()
            r["solo_s"] = timed(gs.replay, 1)
            prof = common.cuda_kernel_profile(g.replay, 1, top=8)
            r["kernels"] = [{"name": k["name"], "us_per_replay": k["us"]}
                            for k in prof.get("kernels_top_us_per_run", []) if "nccl" in k["name"].lower()][:4]
            # correctness: ones summed over the ranks, whatever number of in-place calls ran (2^calls overflows
            # bf16 to inf at large counts, so check on a fresh tensor)
            y = torch.ones(n, device=dev, dtype=torch.bfloat16)
            dist.all_reduce(y)
            r["check_ok"] = bool(torch.all(y == world).item())
            del g, gs
        except Exception as e:  # noqa: BLE001
            r["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        # every rank's medians, so rank skew shows
        mine = torch.tensor([r.get(k, (float("nan"),))[0] for k in ("graph_s", "eager_s", "solo_s")],
                            device=dev, dtype=torch.float64)
        allr = [torch.zeros_like(mine) for _ in range(world)]
        dist.all_gather(allr, mine)
        r["rank_medians_s"] = {k: [t[i].item() for t in allr] for i, k in enumerate(("graph", "eager", "solo"))}
        results.append(r)
        if rank == 0:  # written after every size, so a run cut short by its timeout keeps what it measured
            rec["results"] = results
            common.write_json(rec, a.name, a.out_dir)
        if rank == 0:
            print(f"{kib:6d} KiB  graph {r.get('graph_s', [float('nan')])[0]*1e6:7.1f} us  eager "
                  f"{r.get('eager_s', [float('nan')])[0]*1e6:7.1f}  solo {r.get('solo_s', [float('nan')])[0]*1e6:7.1f}"
                  f"  {[k['name'][:48] for k in r.get('kernels', [])] or r.get('error', '')}", flush=True)
        del x
    rec["results"] = results
    if rank == 0:
        rec["nvidia_smi_after"] = common.nvidia_smi_static()
        print(common.write_json(rec, a.name, a.out_dir))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
