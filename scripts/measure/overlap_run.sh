#!/usr/bin/env bash
# The overlap items of the collectives bench alone (one all_reduce size as the sweep, then every overlap item), on
# all 4 GPUs and on GPUs 0,1 of an nvidia-h200-x4 host. Usage on the device: OUT=$OUT bash scripts/measure/overlap_run.sh
set -u
export NCCL_NVLS_ENABLE=0
CUDA_ARCHS=90 bash scripts/calibrate/run_all.sh --build-only >/dev/null 2>&1 || echo build failed
B=build/bench/gpuplan-bench
for g in "0,1,2,3" "0,1"; do
  n=$(awk -F, '{print NF}' <<<"$g")
  echo "=== $(date -u +%T) overlap on GPUs $g"
  CUDA_VISIBLE_DEVICES=$g timeout 200 $B collectives --nranks "$n" --ops all_reduce --min-bytes 268435456 \
    --max-bytes 268435456 --out "$OUT/samples-overlap-${n}gpu.json" 2>&1; echo "=== rc=$?"
done
