#!/usr/bin/env python3
"""What gpuplan's CPU-offload model (ZeRO-Offload: optimizer on the CPU) assumes, measured on one host.

The model prices the CPU optimizer step as bytes streamed / (sustained fraction x the node's DRAM bandwidth) and the
gradient / weight transfers as bytes / (DMA fraction x the PCIe x16 rate). This script measures, on the machine it
runs on:
  1. the host: CPU model, sockets, cores, NUMA nodes, and (when dmidecode works) the DIMMs' configured speed;
  2. host DRAM bandwidth with all CPU threads: copy (a = b) and triad (a = b + s*c) over fp32 tensors far larger than
     the caches, counted as STREAM counts them (copy 8 B, triad 12 B per element; write-allocate traffic not counted);
  3. pinned and pageable host<->device copies of 1 GiB (the offload's gradient and weight transfers);
  4. the CPU optimizer step: torch.optim.AdamW on fp32 parameters with fp32 gradients, fused=True (PyTorch's
     vectorised CPU kernel) and foreach, over P parameters; its achieved streaming rate counted with gpuplan's
     byte formula (master, m, v read + written, gradient read: 28 B per parameter here, no bf16 weight write).
Medians of repeated runs; the spread is recorded. JSON on stdout and in --out.

  python3 scripts/measure/offload_bench.py --out /tmp/out/offload.json [--params 1e9]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def sh(cmd):
    try:
        r = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30)
        return r.stdout.strip() if r.returncode == 0 else ""
    except Exception:  # noqa: BLE001
        return ""


def host_info():
    info = {"lscpu": sh("lscpu"), "numa_nodes": sh("ls -d /sys/devices/system/node/node* 2>/dev/null | wc -l"),
            "nproc": os.cpu_count(), "platform": platform.platform()}
    dmi = sh("dmidecode -t memory 2>/dev/null")
    if dmi:
        speeds = [l.strip() for l in dmi.splitlines() if "Configured Memory Speed" in l or "Configured Clock Speed" in l]
        sizes = [l.strip() for l in dmi.splitlines() if l.strip().startswith("Size:") and "No Module" not in l]
        info["dimms_populated"] = len(sizes)
        info["dimm_sizes"] = sorted(set(sizes))
        info["dimm_speeds"] = sorted(set(speeds))
    else:
        info["dmidecode"] = "not available (container or no permission)"
    info["meminfo_total"] = sh("grep MemTotal /proc/meminfo")
    return info


def timed(fn, reps):
    fn()  # warm-up (first touch, page faults)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    med = statistics.median(ts)
    return med, (max(ts) - min(ts)) / med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="")
    ap.add_argument("--stream-gib", type=float, default=2.0, help="size of each stream array (GiB)")
    ap.add_argument("--params", type=float, default=1e9, help="parameters of the CPU AdamW step")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()

    import torch

    res = {"script": "scripts/measure/offload_bench.py", "run": common.run_metadata(), "software": common.software_versions(),
           "host": host_info(), "torch": torch.__version__, "threads": torch.get_num_threads(),
           "gpu": common.nvidia_smi_static()}

    # 2. DRAM streams
    n = int(a.stream_gib * 2**30 / 4)
    x = torch.empty(n, dtype=torch.float32)
    y = torch.rand(n, dtype=torch.float32)
    z = torch.rand(n, dtype=torch.float32)
    t, spread = timed(lambda: x.copy_(y), a.reps)
    res["dram_copy_GBps"] = 8.0 * n / t / 1e9
    res["dram_copy_spread"] = spread
    t, spread = timed(lambda: torch.add(y, z, alpha=3.0, out=x), a.reps)
    res["dram_triad_GBps"] = 12.0 * n / t / 1e9
    res["dram_triad_spread"] = spread
    del x, y, z

    # 3. host <-> device
    if torch.cuda.is_available():
        nb = 2**30
        dev = torch.empty(nb, dtype=torch.uint8, device="cuda")
        for pinned in (True, False):
            h = torch.empty(nb, dtype=torch.uint8, pin_memory=pinned)
            h.fill_(1)

            def h2d():
                dev.copy_(h, non_blocking=pinned)
                torch.cuda.synchronize()

            def d2h():
                h.copy_(dev, non_blocking=pinned)
                torch.cuda.synchronize()

            key = "pinned" if pinned else "pageable"
            t, s = timed(h2d, a.reps)
            res[f"h2d_{key}_GBps"], res[f"h2d_{key}_spread"] = nb / t / 1e9, s
            t, s = timed(d2h, a.reps)
            res[f"d2h_{key}_GBps"], res[f"d2h_{key}_spread"] = nb / t / 1e9, s
            del h
        del dev

    # 4. CPU AdamW
    P = int(a.params)
    bytes_per_param = 2 * (4 + 8) + 4  # master + m + v read and written, fp32 gradient read
    res["adam_params"] = P
    res["adam_bytes_per_param"] = bytes_per_param
    for mode in ("fused", "foreach"):
        p = torch.nn.Parameter(torch.rand(P, dtype=torch.float32))
        p.grad = torch.rand(P, dtype=torch.float32) * 1e-3
        kw = {"fused": True} if mode == "fused" else {"foreach": True}
        try:
            opt = torch.optim.AdamW([p], lr=1e-4, **kw)
            t, s = timed(opt.step, a.reps)
            res[f"adam_{mode}_s"] = t
            res[f"adam_{mode}_spread"] = s
            res[f"adam_{mode}_GBps"] = bytes_per_param * P / t / 1e9
        except Exception as e:  # noqa: BLE001 - recorded
            res[f"adam_{mode}_error"] = str(e)[:300]
        del p
    if "adam_fused_GBps" in res:
        res["adam_fused_over_triad"] = res["adam_fused_GBps"] / res["dram_triad_GBps"]

    out = json.dumps(res, indent=1)
    print(out)
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            f.write(out + "\n")


if __name__ == "__main__":
    main()
