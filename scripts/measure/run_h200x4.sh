#!/usr/bin/env bash
# Four-GPU runs (written for nvidia-h200-x4), in one device call, most important first:
#   1. the NCCL collectives calibration on all 4 GPUs, then on GPUs 0,1 (sweeps + the overlap items: each collective
#      beside a bf16 GEMM loop), through scripts/calibrate/run_all.sh;
#   2. ground-truth training steps with DDP and FSDP on 4 GPUs (scripts/measure/train_step.py).
# Usage on the device machine, from the repo root:  OUT=$OUT bash scripts/measure/run_h200x4.sh 2>&1 | tee $OUT/log.txt
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends).
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; RES=${RES:-$OUT/runs}; mkdir -p "$OUT" "$RES"
D=scripts/measure
COMMON="--out-dir $RES --append-jsonl $OUT/results.jsonl"
date -u; nvidia-smi; nvidia-smi topo -m
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'

echo "=== $(date -u +%T) collectives, 4 GPUs"
CUDA_ARCHS=90 COLL_TIME_LIMIT_S=150 timeout 240 bash scripts/calibrate/run_all.sh --no-single --out-dir "$OUT" \
  -- --max-bytes 1073741824; echo "=== rc=$?"
echo "=== $(date -u +%T) collectives, 2 GPUs (0,1)"
CUDA_VISIBLE_DEVICES=0,1 COLL_TIME_LIMIT_S=90 timeout 150 bash scripts/calibrate/run_all.sh --no-single \
  --out-dir "$OUT" -- --max-bytes 1073741824; echo "=== rc=$?"

L1B="--hidden 2048 --layers 16 --heads 32 --kv-heads 8 --intermediate 8192 --vocab 128256"
W7="--hidden 4096 --heads 32 --kv-heads 32 --intermediate 11008 --vocab 32000"
run4() { echo "=== $(date -u +%T) 4gpu $*"; timeout "${T:-150}" torchrun --standalone --nproc_per_node=4 $D/train_step.py $COMMON "$@"; rc=$?; echo "=== rc=$rc"; return $rc; }
run4 --name h200_llama1b_s2048_b4_ddp4 --ddp $L1B --seq 2048 --micro-batch 4
run4 --name h200_llama1b_s2048_b4_fsdp4 --fsdp $L1B --seq 2048 --micro-batch 4
run4 --name h200_w7b_L8_s4096_b2_ddp4 --ddp $W7 --layers 8 --seq 4096 --micro-batch 2
run4 --name h200_w7b_L8_s4096_b2_fsdp4 --fsdp $W7 --layers 8 --seq 4096 --micro-batch 2
nvidia-smi --query-gpu=index,clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT" "$RES"; date -u
