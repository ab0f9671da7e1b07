#!/usr/bin/env bash
# NCCL collectives on 4 and 2 GPUs of one host (written for nvidia-h200-x4; on a 2-GPU host only the 2-GPU sweeps),
# in one device call:
#   1. the calibration sweeps: 4 sizes per octave, 1 KiB .. 1 GiB (the profile's curves are fitted from these);
#   2. the held-out sweeps, measured after them and never fitted: the same range at sizes halfway (in log size)
#      between the calibration sizes (--size-offset 0.5), then the powers of two again (a repeat of a quarter of the
#      calibration sizes).
# gpuplan validate compares the profile fitted from (1) with (2): what the calibrated model gives for collectives it
# was not fitted on, on the machine it was calibrated on.
# Usage on the device machine, from the repo root:  OUT=$OUT bash scripts/measure/run_coll_heldout.sh
# Seven files land in $OUT/coll/ (the device returns at most 8). NVLink multicast stays off.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 NCCL_DEBUG=WARN
OUT=${OUT:-/tmp/out}
W=$OUT/coll; mkdir -p "$W"
main() {
date -u; nvidia-smi; nvidia-smi topo -m
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,clocks.max.mem,power.limit --format=csv
CUDA_ARCHS=90 bash scripts/calibrate/run_all.sh --build-only --build-dir build/bench-coll; echo "=== build rc=$?"
B=build/bench-coll/gpuplan-bench
sweep() {  # name gpus limit_s extra...
  local name=$1 gpus=$2 limit=$3; shift 3
  local n; n=$(awk -F, '{print NF}' <<<"$gpus")
  echo "=== $(date -u +%T) $name on GPUs $gpus"
  CUDA_VISIBLE_DEVICES=$gpus timeout $((limit + 60)) "$B" collectives --nranks "$n" --no-overlap \
    --max-bytes 1073741824 --time-limit-s "$limit" --out "$W/$name.json" "$@"
  local rc=$?
  echo "=== $(date -u +%T) $name rc=$rc"
}
n=$(nvidia-smi -L | grep -c '^GPU')
if ((n >= 4)); then sweep samples-collectives-4gpu-dense 0,1,2,3 150 --per-octave 4; fi
sweep samples-collectives-2gpu-dense 0,1 60 --per-octave 4
if ((n >= 4)); then sweep heldout-collectives-4gpu-between 0,1,2,3 150 --per-octave 4 --size-offset 0.5; fi
sweep heldout-collectives-2gpu-between 0,1 60 --per-octave 4 --size-offset 0.5
if ((n >= 4)); then sweep heldout-collectives-4gpu-repeat 0,1,2,3 50; fi
sweep heldout-collectives-2gpu-repeat 0,1 20
nvidia-smi --query-gpu=index,clocks.sm,temperature.gpu,power.draw --format=csv
date -u
}
main 2>&1 | tee "$W/log.txt"
