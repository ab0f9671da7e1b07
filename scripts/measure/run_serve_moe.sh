#!/usr/bin/env bash
# MoE serving-latency ground truth (Qwen3-30B-A3B-shaped decoder, one H100): CUDA-graph decode steps, eager prefill.
# Usage on the device machine, from the repo root (extra arguments go to serve_moe_step.py):
#   bash scripts/measure/run_serve_moe.sh 2>&1 | tee $OUT/log_serve_moe.txt
# First a 2-layer smoke run (checks capture and the grouped GEMM path in seconds), then the full model.
# Writes $OUT/serve_qwen3_30b_a3b.json (rewritten after every point, so a time-out still leaves the points done).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
D=scripts/measure
date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
echo "=== $(date -u +%T) smoke: serve_moe_step.py --layers 2 --smoke"
timeout 90 python3 $D/serve_moe_step.py --layers 2 --smoke --no-profile --name smoke_moe --out-dir /tmp/smoke
echo "=== smoke rc=$?"
echo "=== $(date -u +%T) serve_moe_step.py $*"
timeout "${T:-400}" python3 $D/serve_moe_step.py --out-dir "$OUT" "$@"
echo "=== rc=$?"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"; date -u
