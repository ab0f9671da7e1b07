#!/usr/bin/env bash
# Eager PyTorch's host cost per kernel on a transformer decode step (issue #27 drill IB1; the serving model's t_cpu,
# model::eager_cpu_per_kernel = 22.2 µs, the median single-kernel op of eager_host_ops.json). Two runs of
# serve_step.py (plain PyTorch ops, the same code as serve_llama3_8b.json) on the same host:
#  1. a tiny Llama-shaped model (hidden 256, 32 layers, 4/2 heads, FFN 768, vocab 2048): the GPU never bounds the eager
#     step, so eager step / kernels per step is the host's cost per kernel of exactly this op mix;
#  2. Llama-3-8B's eager and graph decode at batch 1 and 8, context 1024, with more eager repetitions than in 2026-11-22's
#     run (whose eager samples spread 10-140% on the VM).
# Writes $OUT/serve_tiny_host.json, $OUT/serve_llama3_8b_eager.json and the logs. About 3 minutes on one H100.
set -u
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$OUT/host.txt" 2>&1
lscpu | grep -E "Model name|^CPU\(s\)" >> "$OUT/host.txt" 2>&1
t0=$(date +%s)
timeout 150 python3 scripts/measure/serve_step.py --name serve_tiny_host --hidden 256 --layers 32 --heads 4 \
  --kv-heads 2 --intermediate 768 --vocab 2048 --decode-batches 1,8 --decode-contexts 128,1024 --prefill 1x128 \
  --eager-decode all --eager-reps 60 --replays 40 --max-spread 0.25 --time-budget-s 120 --no-smi --out-dir "$OUT" \
  > "$OUT/log_tiny.txt" 2>&1
echo "tiny rc=$? $(( $(date +%s) - t0 )) s" | tee -a "$OUT/host.txt"
t1=$(date +%s)
timeout 170 python3 scripts/measure/serve_step.py --name serve_llama3_8b_eager --decode-batches 1,8 \
  --decode-contexts 1024 --prefill 1x128 --eager-decode all --eager-reps 60 --replays 40 --max-spread 0.25 \
  --time-budget-s 140 --out-dir "$OUT" > "$OUT/log_8b.txt" 2>&1
echo "8b rc=$? $(( $(date +%s) - t1 )) s" | tee -a "$OUT/host.txt"
