#!/usr/bin/env python3
"""Summarise DeepSeek's public DualPipe training profile (deepseek-ai/profile-data, train.json) by kernel category.

The trace is one overlapped pair of a forward and a backward chunk of DualPipe, 4 MoE layers per chunk, EP64, TP1,
4K tokens per micro-batch, balanced routing, no PP communication (the repository's README), on NVIDIA H800s
(deviceProperties). This script reads the PyTorch-profiler JSON and prints, as JSON: the GPUs' deviceProperties, each
CUDA stream's kernel span and busy time, and the compute stream's kernel time by category (total and per MoE layer,
forward + backward). Usage: deepseek_profile_summary.py train.json  (docs/deepseek-v3-profile.md uses its output).
"""
import collections
import json
import sys


def category(name: str) -> str:
    if "grouped_gemm" in name and "transpose" not in name and "fill_tensormaps" not in name:
        return "fp8 GEMM (grouped)"
    if "xmma_gemm" in name:
        return "bf16 GEMM (cuBLAS)"
    if "flash" in name.lower():
        return "attention (flash)"
    if "dpsk::ep::" in name:
        return "all-to-all (dispatch, combine, notify)"
    if "cast" in name or "transpose" in name or "expand_to_fused" in name:
        return "fp8 quantise / transpose"
    if "layer_norm" in name:
        return "RMSNorm"
    if "swiglu" in name:
        return "SwiGLU"
    if "reduce_fused" in name:
        return "combine reduction"
    if "rotary" in name:
        return "rotary"
    return "other (routing, copies, elementwise)"


def main(path: str, layers: int = 4) -> None:
    trace = json.load(open(path))
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X"]
    streams = collections.defaultdict(list)
    for e in kernels:
        streams[e["tid"]].append(e)
    out = {"source": path, "devices": [{k: d[k] for k in ("name", "totalGlobalMem", "numSms")}
                                       for d in trace.get("deviceProperties", [])], "streams": {}}
    for tid, ks in sorted(streams.items()):
        ks.sort(key=lambda e: e["ts"])
        span = ks[-1]["ts"] + ks[-1]["dur"] - ks[0]["ts"]
        busy = sum(e["dur"] for e in ks)
        by = collections.defaultdict(float)
        for e in ks:
            by[category(e["name"])] += e["dur"]
        out["streams"][str(tid)] = {
            "kernels": len(ks), "span_ms": span / 1e3, "busy_ms": busy / 1e3,
            "by_category_ms": {c: round(v / 1e3, 3) for c, v in sorted(by.items(), key=lambda x: -x[1])},
            "by_category_per_layer_ms": {c: round(v / 1e3 / layers, 3) for c, v in sorted(by.items(), key=lambda x: -x[1])},
        }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1])
