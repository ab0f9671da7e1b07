#!/usr/bin/env python3
"""gpuplan's all-to-all price against moe_alltoall.json (measured all_to_all_single), through the CLI.

`gpuplan validate` prices every entry of data/validation/measured/<gpu>/heldout-collectives-*.json with
model::collective_cost (automatic algorithm; all_to_all = n-1 grouped send/recv on NCCL's p2p path:
t = t0 + alpha + [S + min(S, F)](n-1)/n / (BW eta_p2p), docs/collectives.md).
This script copies data/ to a scratch folder, writes the measured all-to-all times there as such a file (one per
timing: eager per-call events, back-to-back loop, CUDA-graph replay; and the token-shaped dispatches), removes the
other held-out files, runs `gpuplan --data-dir <scratch> validate -f json` and prints the errors by size bucket.
Nothing in the repository is written. Usage:
  python3 scripts/measure/moe_alltoall_vs_model.py [--gpuplan build/release/cli/gpuplan]
      [--measured data/validation/measured/h100-sxm5-80gb/moe_alltoall.json] [--gpu h100-sxm5-80gb]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def entry(ep, nbytes, t):
    return {"op": "all_to_all", "dtype": "bf16", "ranks": ep, "bytes": nbytes, "count": nbytes // 2, "median_s": t,
            "min_s": t, "max_s": t, "p10_s": t, "p90_s": t, "spread": 0.0, "spread_kind": "p90-p10", "samples": 1,
            "batch": 1, "attempts": 1, "algbw_gbps": nbytes / t / 1e9,
            "busbw_gbps": nbytes / t / 1e9 * (ep - 1) / ep, "check": "ok"}


def bucket(nbytes):
    if nbytes < 1 << 20:
        return "< 1 MiB"
    if nbytes < 16 << 20:
        return "1-16 MiB"
    if nbytes < 128 << 20:
        return "16-128 MiB"
    return ">= 128 MiB"


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--gpuplan", default=os.path.join(ROOT, "build/release/cli/gpuplan"))
    p.add_argument("--measured", default=os.path.join(ROOT, "data/validation/measured/h100-sxm5-80gb/moe_alltoall.json"))
    p.add_argument("--gpu", default="h100-sxm5-80gb")
    p.add_argument("--json-out", default=None, help="also write the per-case comparison here")
    a = p.parse_args()
    m = json.load(open(a.measured))
    series = {
        "per_call": [(r["ep"], r["size_bytes"], r["time_median_s"]) for r in m["equal"]],
        "loop": [(r["ep"], r["size_bytes"], r["loop_time_per_call_s"]) for r in m["equal"]],
        "graph": [(r["ep"], r["size_bytes"], r["graph_time_per_call_s"]) for r in m["equal"]
                  if r.get("graph_time_per_call_s")],
        "uneven_per_call": [(r["ep"], r["size_bytes"], r["time_median_s"]) for r in m["uneven"]
                            if r.get("mode", "uneven") == "uneven"],
        "token_dispatch_per_call": [(r["ep"], r["size_bytes"], r["dispatch"]["time_median_s"])
                                    for r in m["token_shaped"]],
    }
    # the large sizes' graph timing is absent (not captured above 64 MiB): there the loop time stands in
    graph_sizes = {(e, s) for e, s, _ in series["graph"]}
    series["graph_or_loop"] = series["graph"] + [x for x in series["loop"] if (x[0], x[1]) not in graph_sizes]
    with tempfile.TemporaryDirectory(prefix="gpuplan-a2a-") as tmp:
        data = os.path.join(tmp, "data")
        shutil.copytree(os.path.join(ROOT, "data"), data)
        for dp, _, files in os.walk(os.path.join(data, "validation", "measured")):
            for f in files:
                if f.startswith("heldout-collectives"):
                    os.remove(os.path.join(dp, f))
        tmpl = {"schema": 1, "kind": "gpuplan-calibration-samples",
                "generator": {"program": "moe_alltoall_vs_model.py", "command": "collectives"},
                "device": {"name": m.get("device", {}).get("name", a.gpu)}, "software": m.get("software", {}),
                "conditions": {}, "ranks": [], "complete": True, "settings": {}, "gemm": [], "hbm": [],
                "launch": {}, "attention": [], "overlap": [], "rejected": [],
                "definitions": "bytes: one rank's all_to_all buffer"}
        tags = list(series)
        for tag in tags:
            t = dict(tmpl)
            t["collectives"] = [entry(*x) for x in series[tag]]
            with open(os.path.join(data, "validation", "measured", a.gpu, f"heldout-collectives-{tag}.json"), "w") as f:
                json.dump(t, f)
        out = subprocess.run([a.gpuplan, "--data-dir", data, "validate", "-f", "json"], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"gpuplan validate failed ({out.returncode}): {out.stderr[:2000]}")
        v = json.loads(out.stdout)
    cases = []

    def walk(o):
        if isinstance(o, dict):
            for k, x in o.items():
                if k == "cases" and isinstance(x, list):
                    cases.extend(c for c in x if "all_to_all" in str(c.get("id", "")))
                else:
                    walk(x)
        elif isinstance(o, list):
            for x in o:
                walk(x)
    walk(v)
    seen, rows = set(), []
    for c in cases:
        if c["id"] in seen:
            continue
        seen.add(c["id"])
        tag = c["source"].rsplit("heldout-collectives-", 1)[1][:-5]
        ep = int(c["id"].split("-all_to_all-")[1].split("gpu")[0])
        rows.append({"series": tag, "ep": ep, "measured_s": c["measured"], "predicted_s": c["predicted"],
                     "error": c["error"], "id": c["id"]})
    # sizes back from the measured series (the id carries a formatted size)
    for tag in tags:
        rs = [r for r in rows if r["series"] == tag]
        meas = {(e, t): s for e, s, t in series[tag]}
        for r in rs:
            r["size_bytes"] = meas.get((r["ep"], r["measured_s"]))
    print(f"{'series':24s} {'EP':>3s} {'bucket':>11s} {'n':>3s} {'median |err|':>13s} {'median err':>11s}")
    for tag in tags:
        for ep in sorted({r["ep"] for r in rows if r["series"] == tag}):
            for b in ("< 1 MiB", "1-16 MiB", "16-128 MiB", ">= 128 MiB"):
                es = [r["error"] for r in rows if r["series"] == tag and r["ep"] == ep and r["size_bytes"]
                      and bucket(r["size_bytes"]) == b]
                if es:
                    print(f"{tag:24s} {ep:3d} {b:>11s} {len(es):3d} {statistics.median(abs(e) for e in es) * 100:12.1f}%"
                          f" {statistics.median(es) * 100:+10.1f}%")
    print("\nper size (EP, bytes, measured us, predicted us, error):")
    for tag in ("per_call", "graph_or_loop", "token_dispatch_per_call"):
        for r in sorted((r for r in rows if r["series"] == tag), key=lambda r: (r["ep"], r["size_bytes"] or 0)):
            print(f"  {tag:24s} EP{r['ep']} {r['size_bytes']!s:>11s} {r['measured_s'] * 1e6:9.1f} "
                  f"{r['predicted_s'] * 1e6:9.1f} {r['error'] * 100:+7.1f}%")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
