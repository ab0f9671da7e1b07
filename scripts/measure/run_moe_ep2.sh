#!/usr/bin/env bash
# Issue #21 (done-when: our own MoE cases at EP 1/2/4): the MoE serving points at EP 2 that the 4-GPU batch
# (run_node.sh 4) could not give, on 2 GPUs of one host, ~3 min:
#   1. a Qwen3-30B-A3B-shaped decoder, attention TP2 and experts EP2 (node_serve_step.py --model moe: sync-free
#      fixed-capacity all-to-all dispatch and combine, torch._grouped_mm experts, each step one CUDA graph): decode at
#      context 2048 for batch 1, 4, 16, 64, 256 and prefill 1x1024, 1x2048, 1x4096;
#   2. the MoE training step (moe_train_step.py, 4 Qwen3-30B-A3B-shaped layers, s4096 b1) at EP2 (w2) and EP1 x DP2
#      (w2), beside the 1- and 4-GPU steps already kept;
#   3. node_cases.py turns them into node-x2-moe-serving-cases.json / node-x2-moe-training-cases.json.
# Usage on the device, from the repo root:  bash scripts/measure/run_moe_ep2.sh      (2 GPUs; writes under $OUT)
# Output: $OUT/moe_ep2.tar.gz (all result JSONs, host.txt, the case files; rewritten after every part) and
# $OUT/log_moe_ep2.txt.
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
OUT=${OUT:-/tmp/out}; R=${R:-/tmp/moe_ep2}; mkdir -p "$OUT" "$R"
LOG=$OUT/log_moe_ep2.txt
D=scripts/measure
START=$(date +%s)
say() { echo "=== $(date -u +%T) [+$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }
pack() { tar -C "$R" -czf "$OUT/moe_ep2.tar.gz.tmp" . && mv -f "$OUT/moe_ep2.tar.gz.tmp" "$OUT/moe_ep2.tar.gz"; }
part() {
  local limit=$1; shift
  say "(limit ${limit}s) $*"
  timeout --kill-after=10 "$limit" "$@" >> "$LOG" 2>&1
  say "rc=$?"
  pack
}
{
  date -u; hostname; nvidia-smi; nvidia-smi topo -m
  nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
} > "$R/host.txt" 2>&1
NG=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if ((NG < 2)); then say "only $NG GPUs visible, 2 needed: stopping"; pack; exit 1; fi
export CUDA_VISIBLE_DEVICES=0,1
part 90 torchrun --standalone --nproc_per_node=2 $D/node_serve_step.py --model moe --phases tp --context 2048 \
  --decode-batches 1,4,16,64,256 --prefill 1x1024,1x2048,1x4096 --replays 20 --warmup 5 --time-budget-s 55 --out-dir "$R"
part 50 torchrun --standalone --nproc_per_node=2 $D/moe_train_step.py --ep 2 --name node_moe_train_L4_s4096_b1_ep2_w2 --out-dir "$R"
part 50 torchrun --standalone --nproc_per_node=2 $D/moe_train_step.py --ep 1 --name node_moe_train_L4_s4096_b1_ep1_w2 --out-dir "$R"
nvidia-smi --query-gpu=index,clocks.sm,temperature.gpu,power.draw --format=csv >> "$R/host.txt" 2>&1
python3 $D/node_cases.py "$R" --out-dir "$R" >> "$LOG" 2>&1; say "node_cases rc=$?"
ls -la "$R" | tee -a "$LOG"
pack
