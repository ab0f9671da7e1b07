#!/usr/bin/env bash
# Session 33 (issue #27), nvidia-h200-x2: the TP all-reduce at 64 KiB-8 MiB inside CUDA graphs and eager on two H200s,
# with NCCL's own protocol choice and each protocol forced (LL, LL128, Simple), every rank's medians and the NCCL
# kernel per size (scripts/measure/allreduce_graph.py). For an all-reduce law with NCCL's protocol switch by size,
# checked against the in-graph 36-40 us of the TP 2 decode step (data/validation/ANALYSIS.md, session 32).
# CPU check: OUT=/tmp/x bash scripts/measure/allreduce_graph_run.sh --dry
set -u
mkdir -p "$OUT"
if [ "${1:-}" = "--dry" ]; then
  python3 scripts/measure/allreduce_graph.py --dry --name allreduce_graph_2gpu_default
  for P in LL LL128 Simple; do NCCL_PROTO=$P python3 scripts/measure/allreduce_graph.py --dry --name allreduce_graph_2gpu_$P; done
  exit 0
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
Q=index,name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$Q --format=csv > $OUT/nvsmi_before.csv
for P in default LL LL128 Simple; do
  if [ $P = default ]; then unset NCCL_PROTO; else export NCCL_PROTO=$P; fi
  timeout 40 torchrun --standalone --nproc_per_node=2 scripts/measure/allreduce_graph.py \
    --name allreduce_graph_2gpu_$P --out-dir $OUT > $OUT/log_allreduce_graph_$P.txt 2>&1; echo "$P rc=$?"
done
unset NCCL_PROTO
nvidia-smi --query-gpu=$Q --format=csv > $OUT/nvsmi_after.csv
tail -n 30 $OUT/log_allreduce_graph_*.txt
