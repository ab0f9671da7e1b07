#!/usr/bin/env bash
# MoE ground truth (issue #21) in one device call on a 4-GPU host (nvidia-h100-x4; runs with 2 GPUs too, EP <= 2):
#   1. moe_alltoall.py       all_to_all_single vs size, equal / uneven splits, token-shaped dispatch+combine, EP 2/4
#   2. moe_router_permute.py router GEMM, softmax/sigmoid, top-k, permute, unpermute on GPU 0 (the others idle)
#   3. moe_layer.py          one MoE layer fwd and fwd+bwd at EP 1/2/4 (Mixtral-like, Qwen3-30B-A3B-like)
# Usage on the device machine, from the repo root:  OUT=$OUT bash scripts/measure/run_moe.sh 2>&1 | tee $OUT/log_moe.txt
# Each step writes its JSON and its own log (log_moe_<step>.txt) under $OUT. NVLink multicast stays off.
# Extra arguments per step: A2A_ARGS, RP_ARGS, LAYER_ARGS; time limits T_A2A, T_RP, T_LAYER (s).
set -u
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 OMP_NUM_THREADS=4
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
D=scripts/measure
NG=$(nvidia-smi -L | wc -l)
date -u; nvidia-smi; nvidia-smi topo -m; nvidia-smi nvlink -s -i 0 | head -20
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
EPS=2,4; LEPS=1,2,4; [ "$NG" -lt 4 ] && { EPS=2; LEPS=1,2; }

echo "=== $(date -u +%T) all-to-all"
timeout -k 10 ${T_A2A:-130} torchrun --standalone --nproc_per_node=$NG $D/moe_alltoall.py --ep $EPS \
  --time-budget-s ${B_A2A:-100} --out-dir "$OUT" ${A2A_ARGS:-} 2>&1 | tee "$OUT/log_moe_alltoall.txt"; echo "=== rc=${PIPESTATUS[0]}"

echo "=== $(date -u +%T) router + permute (GPU 0)"
CUDA_VISIBLE_DEVICES=0 timeout -k 10 ${T_RP:-110} python3 $D/moe_router_permute.py --time-budget-s ${B_RP:-85} \
  --out-dir "$OUT" ${RP_ARGS:-} 2>&1 | tee "$OUT/log_moe_router_permute.txt"; echo "=== rc=${PIPESTATUS[0]}"

echo "=== $(date -u +%T) MoE layer"
timeout -k 10 ${T_LAYER:-200} torchrun --standalone --nproc_per_node=$NG $D/moe_layer.py --ep $LEPS \
  --time-budget-s ${B_LAYER:-160} --out-dir "$OUT" ${LAYER_ARGS:-} 2>&1 | tee "$OUT/log_moe_layer.txt"; echo "=== rc=${PIPESTATUS[0]}"
nvidia-smi --query-gpu=index,clocks.sm,temperature.gpu,power.draw --format=csv
ls -la "$OUT"; date -u
