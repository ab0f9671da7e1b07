#!/usr/bin/env bash
# Weight-gradient GEMMs with fp32 accumulation (gpuplan-bench accumulate), bf16 and fp8, on GPU 0.
# Usage on the device: OUT=$OUT bash scripts/measure/accumulate_run.sh
set -u
. scripts/measure/bench_prelude.sh
echo "=== $(date -u +%T) accumulate on $name"
$B accumulate --device 0 --gemm-dtypes bf16,fp8 --out "$OUT/accumulate-$name.json" 2>&1 | grep -E "accumulate|REJECT|error|wrote"
echo "=== rc=$?"
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
