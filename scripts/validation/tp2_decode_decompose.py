#!/usr/bin/env python3
"""Where the TP 2 Llama-3-70B-shape decode step's time goes (issue #27, session 32): measured kernels against gpuplan.

Reads the output of scripts/measure/tp2_decode_decompose_run.sh (a folder):
  serve_tp2_llama3_70b_l20_decompose_tp.json  node_serve_step.py points with profile_cuda_only (kernel time by name,
                                               rank 0, per graph replay)
  gemm_graph_staircase[_llama3_70b_tp2].json  gemm_graph_sweep.py --layer-set llama3-70b-tp2 (each GEMM alone)
and prints, per batch, the measured kernel time by class (cuBLAS GEMM, attention, NCCL, the rest) beside gpuplan's
decode-step timeline (`gpuplan serve ... --timeline json`: GEMM, attention, TP collective, the rest), and per GEMM
shape the time alone against `gpuplan roofline` (built-in defaults, no calibration).

Usage: python3 scripts/validation/tp2_decode_decompose.py DIR [--gpuplan build/rel/cli/gpuplan]
"""
import argparse
import glob
import json
import os
import subprocess

BATCHES = (35, 128, 143, 176, 177, 256, 257)
SHAPES = {"gate_up_70b_tp2": (28672, 8192), "down_70b_tp2": (8192, 14336), "qkv_70b_tp2": (5120, 8192),
          "out_70b_tp2": (8192, 4096)}


def kernel_class(name):
    n = name.lower()
    if "nccl" in n or "allreduce" in n or "all_reduce" in n or "allgather" in n:
        return "nccl"
    if "sdpa" in n or "flash" in n or "fmha" in n or "cudnn" in n:
        return "attention"
    if "nvjet" in n or "gemm" in n or "xmma" in n or "cutlass" in n or "splitk" in n:
        return "gemm"
    return "other"


def model_timeline(gp, b):
    out = subprocess.run([gp, "serve", "--model", "bench-llama3-70b-shape-l20", "--gpu", "h200-sxm-141gb", "--tp", "2",
                          "--batch", str(b), "--input-tokens", "2048", "--output-tokens", "1", "--no-calibration",
                          "--timeline", "json"], capture_output=True, text=True, check=True).stdout
    d = json.loads(out)
    agg = {}
    for s in d["spans"]:
        k = {"gemm": "gemm", "attention": "attention", "comm_tp": "nccl", "head_loss": "gemm"}.get(s["kind"], "other")
        agg[k] = agg.get(k, 0.0) + (s["end_s"] - s["start_s"]) * 1e6
    return d["step_time_s"] * 1e6, agg


def model_gemm_us(gp, m, n, k):
    out = subprocess.run([gp, "roofline", "--gpu", "h200-sxm-141gb", "--gemm", f"{m}x{n}x{k}", "--no-calibration",
                          "-f", "csv"], capture_output=True, text=True, check=True).stdout.strip().splitlines()
    return float(out[-1].split(",")[7]) * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--gpuplan", default="build/rel/cli/gpuplan")
    a = p.parse_args()
    steps = sorted(glob.glob(os.path.join(a.dir, "serve_tp2_llama3_70b_l20_decompose*.json")))
    if steps:
        d = json.load(open(steps[0]))
        print(f"# decode steps ({os.path.basename(steps[0])}): kernel time per step, us (rank 0 profile) | gpuplan")
        print("batch | step meas | gemm | attention | nccl | other | busy, span | model step | gemm | attention | tp "
              "collective | other")
        for pt in d.get("points", []):
            if pt.get("kind") != "decode":
                continue
            prof = pt.get("profile_cuda_only") or {}
            cls = {}
            for kv in prof.get("kernels_top_us_per_run", []):
                c = kernel_class(kv["name"])
                cls[c] = cls.get(c, 0.0) + kv["us"]
            step, m = model_timeline(a.gpuplan, pt["batch"])
            print(f"{pt['batch']} | {pt.get('step_time_s', 0) * 1e6:.0f} | {cls.get('gemm', 0):.0f} | "
                  f"{cls.get('attention', 0):.0f} | {cls.get('nccl', 0):.0f} | {cls.get('other', 0):.0f} | "
                  f"{prof.get('gpu_busy_us_per_run', 0):.0f}, {prof.get('gpu_span_us_per_run', 0):.0f} | {step:.0f} | "
                  f"{m.get('gemm', 0):.0f} | {m.get('attention', 0):.0f} | {m.get('nccl', 0):.0f} | {m.get('other', 0):.0f}")
            for kv in prof.get("kernels_top_us_per_run", [])[:12]:
                print(f"    {kv['us']:9.1f} us  {kv['name'][:110]}")
        for key in ("nvidia_smi_during", "nvidia_smi_after"):
            if key in d:
                print(key, json.dumps(d[key])[:400])
    stair = os.path.join(a.dir, "gemm_graph_staircase_llama3_70b_tp2.json")  # as copied into the repo
    if not os.path.exists(stair):
        stair = os.path.join(a.dir, "gemm_graph_staircase.json")  # as the run writes it
    if os.path.exists(stair):
        d = json.load(open(stair))
        print("\n# GEMMs alone in CUDA graphs (gemm_graph_staircase.json) vs gpuplan roofline, us")
        print("nvidia_smi_during", json.dumps(d.get("nvidia_smi_during"))[:400])
        by = {(r["layer"], r["M"]): r for r in d.get("results", []) if r.get("status") == "ok"}
        for label, (n, k) in SHAPES.items():
            row = []
            for m in (1, 35, 64, 112, 128, 129, 143, 144, 160, 161, 176, 177, 192, 193, 208, 209, 224, 240, 241, 256, 257,
                      288, 384):
                r = by.get((label, m))
                if r is None:
                    continue
                mod = model_gemm_us(a.gpuplan, m, n, k)
                row.append(f"{m}: {r['time_median_s'] * 1e6:.1f}/{mod:.1f} ({mod / (r['time_median_s'] * 1e6) - 1:+.0%})")
            print(f"{label} N={n} K={k}: " + ", ".join(row))
        print("(measured alone / gpuplan roofline: the roofline adds the eager 5 us per kernel, the graph 2.5 us)")


if __name__ == "__main__":
    main()
