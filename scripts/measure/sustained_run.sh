#!/usr/bin/env bash
# The sustained-GEMM bench plus the bf16 square GEMMs it is compared with, on GPU 0.
# Usage on the device: OUT=$OUT bash scripts/measure/sustained_run.sh
set -u
CUDA_ARCHS=90 bash scripts/calibrate/run_all.sh --build-only >/dev/null 2>&1 || echo build failed
B=build/bench/gpuplan-bench
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv
name=$(nvidia-smi -i 0 --query-gpu=name --format=csv,noheader | tr ' A-Z' '-a-z' | tr -cd 'a-z0-9-')
echo "=== $(date -u +%T) sustained on $name"
$B sustained --device 0 --sustained-s 30 --out "$OUT/samples-sustained-$name.json" 2>&1; echo "=== rc=$?"
echo "=== $(date -u +%T) bf16 GEMM sweep on $name"
$B gemm --device 0 --gemm-dtypes bf16 --out "$OUT/samples-gemm-bf16-$name.json" 2>&1 | grep -E "square|REJECT|error"; echo "=== rc=$?"
