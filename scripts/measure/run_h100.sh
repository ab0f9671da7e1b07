#!/usr/bin/env bash
# Single-GPU ground-truth runs (written for nvidia-h100-x1, 80 GB). Usage on the device machine, from the repo root:
#   bash scripts/measure/run_h100.sh 2>&1 | tee $OUT/log.txt
# Per-run JSON goes to $RES (default /tmp/res) and, one line each, to $OUT/results.jsonl; $OUT/runs.tgz at the end.
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; RES=${RES:-/tmp/res}; mkdir -p "$OUT" "$RES"
D=scripts/measure
COMMON="--out-dir $RES --append-jsonl $OUT/results.jsonl"
date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'

L1B="--hidden 2048 --layers 16 --heads 32 --kv-heads 8 --intermediate 8192 --vocab 128256"
W7="--hidden 4096 --heads 32 --kv-heads 32 --intermediate 11008 --vocab 32000"
run() { echo "=== $(date -u +%T) $*"; timeout "${T:-150}" python3 $D/train_step.py $COMMON "$@"; echo "=== rc=$?"; }

T=60 run --sanity --name sanity_single
echo "=== $(date -u +%T) matmul sweep"; timeout 120 python3 $D/matmul_sweep.py $COMMON; echo "=== rc=$?"
run --name llama1b_s2048_b1 $L1B --seq 2048 --micro-batch 1
run --name llama1b_s2048_b4 $L1B --seq 2048 --micro-batch 4
run --name llama1b_s4096_b2 $L1B --seq 4096 --micro-batch 2
run --name llama1b_s4096_b4 $L1B --seq 4096 --micro-batch 4
run --name w7b_L8_s2048_b2 $W7 --layers 8 --seq 2048 --micro-batch 2
run --name w7b_L8_s4096_b1 $W7 --layers 8 --seq 4096 --micro-batch 1
run --name w7b_L8_s4096_b4 $W7 --layers 8 --seq 4096 --micro-batch 4
run --name w7b_L8_s4096_b4_ckpt $W7 --layers 8 --seq 4096 --micro-batch 4 --ckpt full
run --name w7b_L16_s4096_b2_ckpt $W7 --layers 16 --seq 4096 --micro-batch 2 --ckpt full
run --name w7b_L16_s4096_b2 $W7 --layers 16 --seq 4096 --micro-batch 2
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv
tar czf "$OUT/runs.tgz" -C "$(dirname "$RES")" "$(basename "$RES")"; ls -la "$OUT"; date -u
