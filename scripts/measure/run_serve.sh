#!/usr/bin/env bash
# Serving-latency ground truth (Llama-3-8B-shaped decoder, one GPU): prefill and CUDA-graph decode steps.
# Usage on the device machine, from the repo root (extra arguments go to serve_step.py):
#   bash scripts/measure/run_serve.sh 2>&1 | tee $OUT/serve_log.txt                         # H100, 70 GB budget
#   bash scripts/measure/run_serve.sh --mem-budget-gb 125 2>&1 | tee $OUT/serve_log.txt     # H200
#   bash scripts/measure/run_serve.sh --smoke --time-budget-s 120 2>&1 | tee $OUT/serve_log.txt
# Writes $OUT/serve_llama3_8b.json (rewritten after every point, so a time-out still leaves the points done).
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
D=scripts/measure
date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
echo "=== $(date -u +%T) serve_step.py $*"
timeout "${T:-470}" python3 $D/serve_step.py --out-dir "$OUT" "$@"
echo "=== rc=$?"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"; date -u
