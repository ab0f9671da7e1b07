#!/usr/bin/env bash
# Where the memory and the FSDP2 time go (written for nvidia-h200-x4; any host with >= 2 GPUs), one device call:
#   1. memory timelines (scripts/measure/mem_timeline.py) of the measured configs whose peak the model misses most:
#      the 1B-like model (128k vocabulary) single-GPU at s2048 b4 and s4096 b4, the 7B-width L8 s4096 b4, and the
#      1B-like model under FSDP2 on 2 and 4 GPUs and the 7B-width under FSDP2 on 4;
#   2. torch.profiler breakdowns (scripts/measure/profile_step.py) of the 1B-like step single-GPU, under FSDP2 on 4
#      GPUs and under DDP on 4 GPUs (the measured cases' configs), Chrome traces kept gzipped.
# Usage on the device machine, from the repo root:  OUT=$OUT bash scripts/measure/run_mem_fsdp.sh 2>&1 | tee $OUT/log.txt
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; RES=${RES:-$OUT/runs}; mkdir -p "$OUT" "$RES"
D=scripts/measure
date -u; nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'
NG=$(nvidia-smi -L | wc -l)
L1B="--hidden 2048 --layers 16 --heads 32 --kv-heads 8 --intermediate 8192 --vocab 128256"
W7="--hidden 4096 --heads 32 --kv-heads 32 --intermediate 11008 --vocab 32000"
one() { echo "=== $(date -u +%T) $*"; timeout "${T:-90}" "$@"; echo "=== rc=$?"; }
tr() { local n=$1; shift; one torchrun --standalone --nproc_per_node=$n "$@"; }

one python3 $D/mem_timeline.py --out-dir $RES --name llama1b_s2048_b4 $L1B --seq 2048 --micro-batch 4
one python3 $D/mem_timeline.py --out-dir $RES --name llama1b_s4096_b4 $L1B --seq 4096 --micro-batch 4
one python3 $D/mem_timeline.py --out-dir $RES --name w7b_L8_s4096_b4 $W7 --layers 8 --seq 4096 --micro-batch 4
tr 2 $D/mem_timeline.py --out-dir $RES --fsdp --name llama1b_s2048_b4_fsdp2 $L1B --seq 2048 --micro-batch 4
if [ "$NG" -ge 4 ]; then
  tr 4 $D/mem_timeline.py --out-dir $RES --fsdp --name llama1b_s2048_b4_fsdp4 $L1B --seq 2048 --micro-batch 4
  tr 4 $D/mem_timeline.py --out-dir $RES --fsdp --name w7b_L8_s4096_b2_fsdp4 $W7 --layers 8 --seq 4096 --micro-batch 2
fi
P="--trace-dir $RES --out-dir $RES"
T=150 one python3 $D/profile_step.py $P --name h200_llama1b_s2048_b4_single $L1B --seq 2048 --micro-batch 4
if [ "$NG" -ge 4 ]; then
  T=150 tr 4 $D/profile_step.py $P --fsdp --name h200_llama1b_s2048_b4_fsdp4 $L1B --seq 2048 --micro-batch 4
  T=150 tr 4 $D/profile_step.py $P --ddp --name h200_llama1b_s2048_b4_ddp4 $L1B --seq 2048 --micro-batch 4
else
  T=150 tr 2 $D/profile_step.py $P --fsdp --name h200_llama1b_s2048_b4_fsdp2 $L1B --seq 2048 --micro-batch 4
fi
ls -la "$OUT" "$RES"; date -u
