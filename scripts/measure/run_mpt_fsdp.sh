#!/usr/bin/env bash
# llm-foundry-MPT-shaped training steps under FSDP1 / FSDP2 / one GPU at the published per-GPU recipes (issue #24):
# mpt_fsdp_step.py. 4 GPUs of one host, ~2 min. Usage (repo root): OUT=$OUT bash scripts/measure/run_mpt_fsdp.sh [NGPU]
set -u
cd "$(dirname "$0")/../.."
N=${1:-4}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-WARN}
LOG=$OUT/log_mpt_fsdp.txt
D=scripts/measure
run() { echo "== $(date -u +%T) $*" | tee -a "$LOG"; timeout 60 "$@" --out-dir "$OUT" 2>&1 | grep -v -i 'warn' | tail -n 8 | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv | tee -a "$LOG"
# MPT-1b, 8-GPU H100 row: micro-batch 14, no activation checkpointing (one micro-batch per step)
run torchrun --standalone --nproc_per_node="$N" $D/mpt_fsdp_step.py --shape mpt-1b --micro-batch 14 --ckpt none --mode fsdp1
run torchrun --standalone --nproc_per_node="$N" $D/mpt_fsdp_step.py --shape mpt-1b --micro-batch 14 --ckpt none --mode fsdp2
run python3 $D/mpt_fsdp_step.py --shape mpt-1b --micro-batch 10 --ckpt none --mode single
# MPT-760m row: micro-batch 24, no checkpointing
run torchrun --standalone --nproc_per_node="$N" $D/mpt_fsdp_step.py --shape mpt-760m --micro-batch 24 --ckpt none --mode fsdp1
echo "== done $(date -u +%T)" | tee -a "$LOG"
