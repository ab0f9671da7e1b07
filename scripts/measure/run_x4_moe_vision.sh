#!/usr/bin/env bash
# One device call on nvidia-h100-x4 (2026-11-27): MoE training steps at EP 1/2/4 (issue #21 d1) and vision DDP
# training on 2 and 4 GPUs (issue #25 d2). Everything into one tarball ($OUT/x4_results.tar.gz): the device tool
# returns at most 8 files.
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; R=/tmp/x4_res; mkdir -p "$OUT" "$R"
nvidia-smi > "$R/smi.txt"; nvidia-smi topo -m >> "$R/smi.txt" 2>&1
M=scripts/measure/moe_train_step.py
run() { local t=$1; shift; timeout "$t" "$@" >> "$R/log_x4.txt" 2>&1; echo "rc=$? $*" >> "$R/log_x4.txt"; }
run 50 torchrun --standalone --nproc_per_node=1 $M --ep 1 --out-dir "$R"
for ep in 4 2 1; do run 60 torchrun --standalone --nproc_per_node=4 $M --ep $ep --out-dir "$R"; done
run 60 torchrun --standalone --nproc_per_node=4 $M --ep 4 --micro-batch 2 --out-dir "$R"
run 60 torchrun --standalone --nproc_per_node=2 $M --ep 2 --out-dir "$R"
V=scripts/measure/vision_bench.py
run 60 torchrun --standalone --nproc_per_node=2 $V --train --models resnet50 --train-batches 128 256 --name vision_ddp_resnet50_x2 --out-dir "$R"
run 60 torchrun --standalone --nproc_per_node=4 $V --train --models resnet50 --train-batches 128 256 --name vision_ddp_resnet50_x4 --out-dir "$R"
run 60 torchrun --standalone --nproc_per_node=4 $V --train --models vit_b_16 --train-batches 128 --name vision_ddp_vit_b_16_x4 --out-dir "$R"
tar -C "$R" -czf "$OUT/x4_results.tar.gz" .
grep -E "^\[moe_train|^train|^rc=|Error|error" "$R/log_x4.txt" | head -60
