#!/usr/bin/env bash
# One device call on nvidia-h100-x4 (session 14, issues #21 and #27): h8's requests with CUDA-only profiling (no nsys
# on these machines: KINDS.md) — R1 the MoE training step at EP 4 and EP 1 x DP 4, GPU busy/idle and the largest gaps
# per step; R2 grouped-GEMM forward/dgrad/wgrad at 32/64/128 experts x 64..4096 rows; R3 the TP4/EP4 MoE decode step
# (CUDA graph and eager) with kernel time by name — and 2:4 sparsity through cuSPARSELt directly (one GPU).
# One tarball back ($OUT/s14_x4.tar.gz) plus the log.
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; R=/tmp/s14x4; mkdir -p "$OUT" "$R"
D=scripts/measure
run() { local t=$1; shift; echo "=== $(date -u +%T) $*" >> "$R/log.txt"; timeout "$t" "$@" >> "$R/log.txt" 2>&1; echo "rc=$? $*" >> "$R/log.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm --format=csv >> "$R/log.txt"
run 120 torchrun --standalone --nproc_per_node=4 $D/moe_train_step.py --ep 4 --profile-steps 3 --profile-cuda-only --name moe_train_L4_s4096_b1_ep4_w4_cudaprof --out-dir "$R"
run 120 torchrun --standalone --nproc_per_node=4 $D/moe_train_step.py --ep 1 --profile-steps 3 --profile-cuda-only --name moe_train_L4_s4096_b1_ep1_w4_cudaprof --out-dir "$R"
run 150 torchrun --standalone --nproc_per_node=4 $D/node_serve_step.py --model moe --phases tp --context 2048 --decode-batches 1,64 --prefill 1x2048 --replays 10 --warmup 3 --profile-replays 5 --name serve_moe_tp4_ep4_profile_graph --out-dir "$R"
run 150 torchrun --standalone --nproc_per_node=4 $D/node_serve_step.py --model moe --phases tp --context 2048 --decode-batches 1,64 --prefill '' --replays 10 --warmup 3 --profile-replays 5 --no-graphs --name serve_moe_tp4_ep4_profile_eager --out-dir "$R"
run 200 python3 $D/moe_kernels_bwd.py --experts 32,64,128 --rows 64,128,256,512,1024,2048,4096 --skip-adamw --name moe_kernels_bwd_grid --out-dir "$R"
run 150 python3 $D/sparse24_cslt.py --out-dir "$R"
tar -C "$R" -czf "$OUT/s14_x4.tar.gz" .
cp "$R/log.txt" "$OUT/log.txt"
grep -E "^===|^rc=|^\[moe_train|Error|error" "$R/log.txt" | head -40
tail -50 "$R/log.txt"
