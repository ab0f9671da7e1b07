#!/usr/bin/env python3
"""The measured all-to-all times of moe_alltoall*.json as cases that `gpuplan validate` prices.

`gpuplan validate` reads every data/validation/measured/<gpu>/heldout-collectives-*.json (calibration samples format:
op, ranks, bytes, median_s) and prices each entry with model::collective_cost. This script writes such files from the
torch all_to_all_single measurements (scripts/measure/moe_alltoall.py), GPU-side times only:
  - CUDA-graph time per call (graph_time_per_call_s: 20 calls captured, replayed, host launch removed) where the
    measurement has one (sizes up to 64 MiB in the runs that captured graphs);
  - above that, from 128 MiB per rank, the back-to-back loop time per call (loop_time_per_call_s), where the call
    (>= 278 us) outlasts the eager launch (45-115 us back to back) and the loop is GPU-bound;
  - never the eager single-call times (time_median_s: 60-150 us of host time below 32 MiB), never the uneven or
    uneven_unaligned splits.
Series: the equal-split sweep and the token-shaped dispatch (combine moves the same rows back), one file per run,
dispatch split by top-k so that every (size, file) is one case id.

The equal-split sweep of moe_alltoall.json (call 2) is the set the built-in p2p efficiency is fitted on
(scripts/measure/fit_p2p_efficiency.py), so it is NOT written here: every file this script writes is out of that fit.
No calibration fit reads data/validation/measured/ (the fitter reads data/calibration/<gpu>/samples-*.json).

Usage (repository root; rewrites the files, deterministic):
  python3 scripts/measure/moe_alltoall_heldout.py
"""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GPU = "h100-sxm5-80gb"
DIR = os.path.join(ROOT, "data", "validation", "measured", GPU)
LOOP_FROM_BYTES = 128 << 20

# (measured file, run tag, write the equal-split sweep?)
RUNS = [
    ("moe_alltoall.json", "call2", False),  # its equal sweep is the fit set
    ("moe_alltoall_try1.json", "try1", True),
    ("moe_alltoall_try3.json", "try3", True),
    ("moe_alltoall_ep4.json", "ep4", True),  # nvidia-h100-x4, 2026-11-26: EP 2 and 4 on a 4-GPU NVSwitch host
]


def entry(ep, nbytes, t, how, extra):
    e = {"op": "all_to_all", "dtype": "bf16", "ranks": ep, "bytes": nbytes, "count": nbytes // 2, "median_s": t,
         "timing": how, "algbw_gbps": nbytes / t / 1e9, "busbw_gbps": nbytes / t / 1e9 * (ep - 1) / ep}
    e.update(extra)
    return e


def pick(item, size):
    g = item.get("graph_time_per_call_s")
    if g is not None and g == g:
        return g, "cuda_graph (graph_time_per_call_s)"
    if size >= LOOP_FROM_BYTES:
        return item["loop_time_per_call_s"], "back_to_back (loop_time_per_call_s)"
    return None


def main():
    written = []
    for fname, run, with_equal in RUNS:
        m = json.load(open(os.path.join(DIR, fname)))
        date = m["timestamp_utc"][:10]
        head = {
            "schema": 1, "kind": "gpuplan-calibration-samples",
            "generator": {"program": "scripts/measure/moe_alltoall_heldout.py",
                          "source": f"data/validation/measured/{GPU}/{fname}",
                          "measured_by": "scripts/measure/moe_alltoall.py (torch.distributed.all_to_all_single, NCCL)",
                          "measured_argv": m["argv"], "started_utc": m["timestamp_utc"]},
            "device": {"name": m["device"]["name"], "sm_count": m["device"]["multi_processor_count"]},
            "software": m["software"], "complete": True,
            "definitions": "bytes: one rank's all_to_all_single buffer (EP ranks, bf16); median_s: GPU-side time per "
                           "call, max over the EP group: CUDA-graph replay / calls where captured, else (>= 128 MiB) "
                           "events around back-to-back calls / calls; eager single-call times are not used",
        }
        series = {}
        if with_equal:
            series[f"a2a-torch-equal-{run}"] = [
                entry(r["ep"], r["size_bytes"], *p, {}) for r in m["equal"]
                if r["mode"] == "equal" and (p := pick(r, r["size_bytes"]))]
        for k in sorted({r["topk"] for r in m["token_shaped"]}):
            series[f"a2a-torch-dispatch-top{k}-{run}"] = [
                entry(r["ep"], r["size_bytes"], *p,
                      {"tokens_per_rank": r["tokens_per_rank"], "hidden": r["hidden"], "topk": r["topk"],
                       "experts": r["experts"], "offrank_send_bytes": r["offrank_send_bytes"]})
                for r in m["token_shaped"] if r["topk"] == k and (p := pick(r["dispatch"], r["size_bytes"]))]
        for tag, items in series.items():
            if not items:
                continue
            doc = dict(head)
            doc["collectives"] = sorted(items, key=lambda e: (e["ranks"], e["bytes"]))
            path = os.path.join(DIR, f"heldout-collectives-{tag}-{date}.json")
            with open(path, "w") as f:
                json.dump(doc, f, indent=1)
                f.write("\n")
            written.append((os.path.relpath(path, ROOT), len(items)))
    for p, n in written:
        print(f"{p}: {n} cases")


if __name__ == "__main__":
    main()
