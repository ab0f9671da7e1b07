#!/usr/bin/env bash
# Weight-gradient GEMMs with fp32 accumulation (gpuplan-bench accumulate), bf16 and fp8, on GPU 0.
# Usage on the device: OUT=$OUT bash scripts/measure/accumulate_run.sh
set -u
CUDA_ARCHS=90 bash scripts/calibrate/run_all.sh --build-only >/dev/null 2>&1 || echo build failed
B=build/bench/gpuplan-bench
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv
name=$(nvidia-smi -i 0 --query-gpu=name --format=csv,noheader | tr ' A-Z' '-a-z' | tr -cd 'a-z0-9-')
echo "=== $(date -u +%T) accumulate on $name"
$B accumulate --device 0 --gemm-dtypes bf16,fp8 --out "$OUT/accumulate-$name.json" 2>&1 | grep -E "accumulate|REJECT|error|wrote"
echo "=== rc=$?"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
