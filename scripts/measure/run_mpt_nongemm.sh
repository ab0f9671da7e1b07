#!/usr/bin/env bash
# The non-GEMM kernels of an eager llm-foundry-MPT step, by name and class, and each non-GEMM op alone with its bytes
# (issue #24): mpt_nongemm_probe.py. One GPU, ~1-2 min. Usage (repo root): OUT=$OUT bash scripts/measure/run_mpt_nongemm.sh
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
LOG=$OUT/log_mpt_nongemm.txt
D=scripts/measure
run() { echo "== $(date -u +%T) $*" | tee -a "$LOG"; timeout 150 "$@" --out-dir "$OUT" 2>&1 | grep -v -i 'warn' | tail -n 20 | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv | tee -a "$LOG"
run python3 $D/mpt_nongemm_probe.py --shape mpt-1b --micro-batch 6 --residual bf16
run python3 $D/mpt_nongemm_probe.py --shape mpt-1b --micro-batch 6 --residual fp32 --skip-ops
run python3 $D/mpt_nongemm_probe.py --shape mpt-760m --micro-batch 12 --residual bf16 --skip-ops
echo "== done $(date -u +%T)" | tee -a "$LOG"
