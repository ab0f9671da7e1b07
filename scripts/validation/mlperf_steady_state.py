#!/usr/bin/env python3
"""Steady-state training throughput of an MLPerf Training submission, from its MLLOG result files.

Usage: mlperf_steady_state.py GIT_DIR REF RESULTS_DIR [--skip-steps N] [--block-unit samples|tokens] [--seq N]
  GIT_DIR      a clone of mlcommons/training_results_vX.Y (read with `git show`, no work tree needed)
  REF          the commit to read
  RESULTS_DIR  e.g. NVIDIA/results/eos-dfw_n64_ngc25.01_nemo/llama31_405b

Per run (result_*.txt) it reads global_batch_size and max_sequence_length and computes
  - step: the median of the logged `tracked_stats.train_step_time` (s per optimizer step), skipping the first
    --skip-steps steps (warm-up, default 1); tokens/s = global_batch_size * max_sequence_length / step
  - block: tokens per block / block wall time from block_start/block_stop (epoch_count of the block's metadata, in
    samples x seq, or in tokens with --block-unit tokens as GPT-3 logs it), the first block excluded (warm-up);
    median over blocks
  - throughput: the median of the logged `tracked_stats.throughput` (samples/s, one per block in the Llama 2 70B
    LoRA logs), the first --skip-steps values excluded, times the sequence length
and run_start..run_stop in minutes. --seq N gives the sequence length where the log has no max_sequence_length. Prints one JSON object: per-run values and the medians over the runs.
"""
import json
import re
import statistics
import subprocess
import sys


def mllog(git_dir, ref, path):
    text = subprocess.run(["git", "-C", git_dir, "show", f"{ref}:{path}"], check=True, capture_output=True,
                          text=True).stdout
    for line in text.splitlines():
        i = line.find(":::MLLOG ")
        if i >= 0:
            try:
                yield json.loads(line[i + 9:])
            except json.JSONDecodeError:
                continue


def one_run(git_dir, ref, path, skip, block_unit, seq_override):
    gbs = seq = None
    steps, thru, blocks, open_block, mem = [], [], [], None, None
    run_start = run_stop = None
    for e in mllog(git_dir, ref, path):
        k, v, md = e["key"], e.get("value"), e.get("metadata", {})
        if k == "global_batch_size":
            gbs = v
        elif k == "max_sequence_length":
            seq = v
        elif k == "run_start":
            run_start = e["time_ms"]
        elif k == "run_stop":
            run_stop = e["time_ms"]
        elif k == "tracked_stats" and isinstance(v, dict) and ("train_step_time" in v or "throughput" in v):
            if "train_step_time" in v:
                steps.append(v["train_step_time"])
            if "throughput" in v:
                thru.append(v["throughput"])
            if "max_memory_usage" in v:
                mem = max(mem or 0, v["max_memory_usage"])
        elif k == "block_start":
            open_block = (e["time_ms"], md.get("samples_count", md.get("epoch_count")), md.get("epoch_count"))
        elif k == "block_stop" and open_block is not None:
            start_ms, start_count, epoch_count = open_block
            stop_count = md.get("samples_count", md.get("epoch_count"))
            blocks.append((e["time_ms"] - start_ms, start_count, stop_count, epoch_count))
            open_block = None
    if seq is None:
        seq = seq_override
    out = {"file": path, "global_batch_size": gbs, "seq": seq, "steps_logged": len(steps)}
    if mem is not None:
        out["max_memory_usage"] = mem
    if thru[skip:]:
        out["throughput_samples_per_s"] = statistics.median(thru[skip:])
        if seq:
            out["throughput_tokens_per_s"] = out["throughput_samples_per_s"] * seq
    if steps[skip:]:
        step = statistics.median(steps[skip:])
        out["median_step_time_s"] = step
        if gbs and seq:
            out["step_tokens_per_s"] = gbs * seq / step
    rates = []
    for ms, a, b, ec in blocks[1:]:
        # GPT-3 (NeMo) logs the block size as epoch_count in tokens; other benchmarks count samples.
        n = ec if ec else (b - a if (a is not None and b is not None) else None)
        if n and ms > 0:
            rates.append(n * (1 if block_unit == "tokens" else seq) / (ms / 1000.0))
    if rates:
        out["block_tokens_per_s"] = statistics.median(rates)
    if run_start and run_stop:
        out["run_minutes"] = (run_stop - run_start) / 60000.0
    return out


def main():
    args = sys.argv[1:]
    skip, block_unit, seq_override = 1, "samples", None
    if "--seq" in args:
        i = args.index("--seq")
        seq_override = int(args[i + 1])
        del args[i:i + 2]
    if "--block-unit" in args:
        i = args.index("--block-unit")
        block_unit = args[i + 1]
        del args[i:i + 2]
    if "--skip-steps" in args:
        i = args.index("--skip-steps")
        skip = int(args[i + 1])
        del args[i:i + 2]
    git_dir, ref, results = args
    names = subprocess.run(["git", "-C", git_dir, "ls-tree", "--name-only", f"{ref}:{results}"], check=True,
                           capture_output=True, text=True).stdout.split()
    runs = [one_run(git_dir, ref, f"{results}/{n}", skip, block_unit, seq_override) for n in sorted(names) if re.match(r"result_\d+\.txt$", n)]
    summary = {"results": results, "ref": ref, "runs": runs}
    for key in ("median_step_time_s", "step_tokens_per_s", "throughput_samples_per_s", "throughput_tokens_per_s",
                "block_tokens_per_s", "run_minutes"):
        vals = [r[key] for r in runs if key in r]
        if vals:
            summary[key] = statistics.median(vals)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
