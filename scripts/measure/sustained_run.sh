#!/usr/bin/env bash
# The sustained-GEMM bench (bf16, then fp8 where the GPU has it) plus the square GEMMs of the same dtypes it is
# compared with, on GPU 0.
# Usage on the device: OUT=$OUT bash scripts/measure/sustained_run.sh [SECONDS per dtype, default 30]
set -u
secs=${1:-30}
. scripts/measure/bench_prelude.sh
echo "=== $(date -u +%T) sustained (bf16, fp8) on $name"
$B sustained --device 0 --gemm-dtypes bf16,fp8 --sustained-s "$secs" --out "$OUT/samples-sustained-$name.json" 2>&1
echo "=== rc=$?"
echo "=== $(date -u +%T) bf16 and fp8 GEMM sweep on $name"
$B gemm --device 0 --gemm-dtypes bf16,fp8 --out "$OUT/samples-gemm-bf16-fp8-$name.json" 2>&1 | grep -E "square|REJECT|error"
echo "=== rc=$?"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
