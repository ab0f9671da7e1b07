#!/usr/bin/env bash
# Two-GPU ground-truth runs (written for nvidia-h200-x2). Usage on the device machine, from the repo root:
#   bash scripts/measure/run_h200x2.sh 2>&1 | tee $OUT/log.txt
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends are exported here and checked by allreduce_bw.py).
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; RES=${RES:-/tmp/res}; mkdir -p "$OUT" "$RES"
D=scripts/measure
COMMON="--out-dir $RES --append-jsonl $OUT/results.jsonl"
date -u; nvidia-smi; nvidia-smi topo -m; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'

L1B="--hidden 2048 --layers 16 --heads 32 --kv-heads 8 --intermediate 8192 --vocab 128256"
W7="--hidden 4096 --heads 32 --kv-heads 32 --intermediate 11008 --vocab 32000"
run1() { echo "=== $(date -u +%T) 1gpu $*"; CUDA_VISIBLE_DEVICES=0 timeout "${T:-150}" python3 $D/train_step.py $COMMON "$@"; echo "=== rc=$?"; }
run2() { echo "=== $(date -u +%T) 2gpu $*"; timeout "${T:-180}" torchrun --standalone --nproc_per_node=2 $D/train_step.py $COMMON "$@"; rc=$?; echo "=== rc=$rc"; return $rc; }

run1 --name h200_llama1b_s2048_b4_single $L1B --seq 2048 --micro-batch 4
run2 --name h200_llama1b_s2048_b4_ddp2 --ddp $L1B --seq 2048 --micro-batch 4
run2 --name h200_llama1b_s2048_b4_fsdp2 --fsdp $L1B --seq 2048 --micro-batch 4 || \
  run2 --name h200_llama1b_s2048_b4_fsdp2_foreach --fsdp --optim-impl foreach $L1B --seq 2048 --micro-batch 4
echo "=== $(date -u +%T) all_reduce sweep"; timeout 150 torchrun --standalone --nproc_per_node=2 $D/allreduce_bw.py $COMMON; echo "=== rc=$?"
T=90 run2 --sanity --ddp --name sanity_ddp2
T=90 run2 --sanity --fsdp --name sanity_fsdp2
run1 --name h200_llama1b_s4096_b4_single $L1B --seq 4096 --micro-batch 4
run1 --name h200_w7b_L16_s4096_b2_single $W7 --layers 16 --seq 4096 --micro-batch 2
nvidia-smi --query-gpu=index,clocks.sm,temperature.gpu,power.draw --format=csv
tar czf "$OUT/runs.tgz" -C "$(dirname "$RES")" "$(basename "$RES")"; ls -la "$OUT"; date -u
