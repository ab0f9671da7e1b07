#!/usr/bin/env bash
# fp8 GEMM sweep twice on GPU 0: cuBLASLt's default fast accumulation (Transformer Engine's forward GEMMs) and fast
# accumulation off, "split accumulator" (its dgrad and wgrad GEMMs: _2X_ACC_DGRAD/_2X_ACC_WGRAD = True).
# Usage on the device: OUT=$OUT bash scripts/measure/fp8_accum_run.sh
set -u
. scripts/measure/bench_prelude.sh
for round in 1 2; do
  echo "=== $(date -u +%T) fp8 fast accumulation, round $round, on $name"
  $B gemm --device 0 --gemm-dtypes fp8 --out "$OUT/fp8-fast-$round-$name.json" 2>&1 | grep -E "REJECT|error|wrote"
  echo "=== $(date -u +%T) fp8 split accumulation, round $round, on $name"
  $B gemm --device 0 --gemm-dtypes fp8 --fp8-split-accumulation --out "$OUT/fp8-split-$round-$name.json" 2>&1 | grep -E "REJECT|error|wrote"
done
echo "=== rc=$?"
