#!/usr/bin/env python3
"""What per-kernel-class fixed costs would do to our own measured decode steps (issue #27, session 22).

The serving model prices every kernel of a graphed decode step as max(compute, memory) + one fixed cost
(`kernel_overhead_graph`, 2.5 us built in; the calibration's memory-bound GEMM t0 when calibrated). Because that
fixed cost is additive, the step can be re-priced by class without rebuilding the model: lay out the step with
`gpuplan serve --timeline json --kernel-overhead-us 0` (every kernel's work alone), count its kernels by class, and
add each class's fixed cost. This script does that for every runnable single-GPU decode case of our own serving
measurements (data/validation/measured_inference_cases.json, measured_moe_inference_cases.json) and prints
before / after median |error| per family, built-in and calibrated.

Classes: gemm (dense GEMMs), grouped (the MoE expert GEMMs: the model's grouped law a*t_batched + 11 us keeps its
11 us, the batched GEMM's fixed cost is the GEMM class's times a = 1.065), attention, elementwise (everything else).

The "flat" columns lay the step out as the model prices it today; they must reproduce `gpuplan validate`'s
predictions (the layout sums to forward_cost: serving_timeline.hpp), which checks that the flags here map each case
as validate does.

  python3 scripts/validation/kernel_class_whatif.py --gpuplan build/rel/cli/gpuplan \
      --h100 gemm=4.6,attention=11,elementwise=2.5 --h200 gemm=3.3,attention=11,elementwise=2.0
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CASES = ("data/validation/measured_inference_cases.json", "data/validation/measured_moe_inference_cases.json")
GROUPED_A = 1.065  # model/src/ops/moe_cost.hpp kGroupedGemmTimeFactor


def parse_costs(s):
    out = {}
    for kv in s.split(","):
        k, v = kv.split("=")
        out[k.strip()] = float(v) * 1e-6
    return out


def layout(gp, case, overhead_us, calibrated):
    b, ctx = case["inputs"]["batch"], case["inputs"]["context_tokens"]
    cmd = [gp, "serve", "-m", case["model"], "--gpu", case["gpu"], "--tp", str(case.get("tp", 1)), "--batch", str(b),
           "--input-tokens", str(ctx), "--output-tokens", "1", "--kernels", case.get("kernels", "fused"),
           "--attention-kernel", case.get("attention_kernel", "fa3"), "--weight-dtype", case.get("weights", "bf16"),
           "--kv-dtype", case.get("kv", "bf16"), "--timeline", "json"]
    if overhead_us is not None:
        cmd += ["--kernel-overhead-us", str(overhead_us)]
    if not case.get("cuda_graphs", True):
        cmd.append("--enforce-eager")
    if not calibrated:
        cmd.append("--no-calibration")
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()[:400]}")
    return json.loads(r.stdout)


def classify(span):
    k = span["kind"]
    if k == "gemm":
        return "grouped" if "expert" in span["label"].lower() else "gemm"
    if k == "attention":
        return "attention"
    if k in ("comm_tp", "comm_ep", "launch_gap", "host"):
        return None
    return "elementwise"  # elementwise, embedding gather, LM head's neighbours, sampling


def split(t):
    """Work time (at overhead 0) and kernel counts by class of one laid-out decode step."""
    work, count = 0.0, {}
    for s in t["spans"]:
        c = classify(s)
        if s["kind"] == "head_loss":
            c = "gemm"  # the LM head GEMM
        if c is None:
            work += s["end_s"] - s["start_s"]
            continue
        work += s["end_s"] - s["start_s"]
        count[c] = count.get(c, 0) + 1
    return work, count


def priced(work, count, costs, default):
    t = work
    for c, n in count.items():
        if c == "grouped":
            t += n * GROUPED_A * costs.get("gemm", default)
        else:
            t += n * costs.get(c, default)
    return t


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpuplan", default=os.path.join(ROOT, "build/rel/cli/gpuplan"))
    p.add_argument("--h100", default="gemm=4.6,attention=11,elementwise=2.5", help="class=us,... for h100-sxm5-80gb")
    p.add_argument("--h200", default="gemm=3.3,attention=11,elementwise=2.0", help="class=us,... for h200-sxm-141gb")
    p.add_argument("--h100-cal", default=None, help="costs with the calibration profile (default: --h100)")
    p.add_argument("--h200-cal", default=None, help="costs with the calibration profile (default: --h200)")
    p.add_argument("--json", default=None, help="write every case's numbers here")
    a = p.parse_args()
    costs = {("h100-sxm5-80gb", False): parse_costs(a.h100), ("h200-sxm-141gb", False): parse_costs(a.h200),
             ("h100-sxm5-80gb", True): parse_costs(a.h100_cal or a.h100),
             ("h200-sxm-141gb", True): parse_costs(a.h200_cal or a.h200)}
    rows = []
    for f in CASES:
        for c in json.load(open(os.path.join(ROOT, f)))["cases"]:
            if (not c.get("runnable") or c.get("metric") != "decode_step_time_s" or c.get("tp", 1) != 1
                    or c.get("ep", 1) != 1 or c["gpu"] not in ("h100-sxm5-80gb", "h200-sxm-141gb")):
                continue
            meas = c["measured"]["value"]
            fam = ("moe" if "moe" in f else "dense") + " " + c["gpu"].split("-")[0]
            row = {"id": c["id"], "family": fam, "measured_s": meas}
            for cal in (False, True):
                tag = "cal" if cal else "builtin"
                t0 = layout(a.gpuplan, c, 0, cal)
                work, count = split(t0)
                # the model as it is: 2.5 us per kernel built in; calibrated, the calibration's GEMM t0 per kernel
                row[f"{tag}_flat_s"] = layout(a.gpuplan, c, None, cal)["end_s"]
                row[f"{tag}_counts"] = count
                row[f"{tag}_work_s"] = work
                row[f"{tag}_class_s"] = priced(work, count, costs[(c["gpu"], cal)], 2.5e-6)
            rows.append(row)
            print(f"{c['id']}: measured {meas * 1e3:.3f} ms, built-in flat {row['builtin_flat_s'] * 1e3:.3f} -> "
                  f"by class {row['builtin_class_s'] * 1e3:.3f}; calibrated {row['cal_flat_s'] * 1e3:.3f} -> "
                  f"{row['cal_class_s'] * 1e3:.3f}; "
                  f"kernels {row['builtin_counts']}", flush=True)
    fams = sorted({r["family"] for r in rows})
    print("\nfamily: median |error| built-in flat -> by class; calibrated by class (cases)")
    for fam in fams:
        sel = [r for r in rows if r["family"] == fam]

        def med(key):
            return statistics.median(abs(r[key] / r["measured_s"] - 1) for r in sel) * 100

        def sgn(key):
            return statistics.median(r[key] / r["measured_s"] - 1 for r in sel) * 100
        print(f"  {fam}: {med('builtin_flat_s'):.1f}% ({sgn('builtin_flat_s'):+.1f}) -> {med('builtin_class_s'):.1f}% "
              f"({sgn('builtin_class_s'):+.1f}); calibrated {med('cal_flat_s'):.1f}% ({sgn('cal_flat_s'):+.1f}) -> "
              f"{med('cal_class_s'):.1f}% ({sgn('cal_class_s'):+.1f}) "
              f"[{len(sel)}]")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
