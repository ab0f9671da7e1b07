#!/usr/bin/env bash
# Does a GPU hold a lower sustained GEMM rate when every GPU of its host is busy (shared power and cooling, as in a
# training job) than when it runs alone? The sustained bench (bf16 8192^3 held for SECONDS) on GPU 0 alone, then on
# all GPUs at once (one process each), then GPU 0 alone again; each run writes its own samples file.
# Usage on the device: OUT=$OUT bash scripts/measure/concurrent_sustained.sh [SECONDS, default 30]
set -u
secs=${1:-30}
CUDA_ARCHS=90 bash scripts/calibrate/run_all.sh --build-only >/dev/null 2>&1 || echo build failed
B=build/bench/gpuplan-bench
n=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv
echo "=== $(date -u +%T) GPU 0 alone ($secs s)"
$B sustained --device 0 --gemm-dtypes bf16 --sustained-s "$secs" --out "$OUT/alone-1.json" 2>&1 | grep -E "sustained\]|error"
echo "=== $(date -u +%T) all $n GPUs at once"
for i in $(seq 0 $((n - 1))); do
  $B sustained --device "$i" --gemm-dtypes bf16 --sustained-s "$secs" --out "$OUT/concurrent-gpu$i.json" \
    > "/tmp/concurrent-gpu$i.log" 2>&1 &
done
wait
grep -h "sustained\]" /tmp/concurrent-gpu*.log
echo "=== $(date -u +%T) GPU 0 alone again"
$B sustained --device 0 --gemm-dtypes bf16 --sustained-s "$secs" --out "$OUT/alone-2.json" 2>&1 | grep -E "sustained\]|error"
nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu --format=csv
