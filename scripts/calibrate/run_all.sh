#!/usr/bin/env bash
# Builds gpuplan-bench (CMake, calibrate/bench on its own: only nvcc, cuBLASLt and optionally NCCL are needed) if
# needed, runs the single-GPU calibration suite on every visible GPU (one after another) and the NCCL collectives on
# all GPUs of this host (one process per GPU), and writes one raw samples JSON per run.
#
# usage: scripts/calibrate/run_all.sh [--out-dir DIR] [--gpus 0,1,..] [--no-collectives] [--no-single]
#                                      [--smoke] [--build-only] [--build-dir DIR] [-- extra gpuplan-bench options]
#   --smoke       first a quick pass (short sweeps) on the first GPU, to fail fast
#   environment:  CUDA_ARCHS (default: native when a GPU is visible), GPUPLAN_BENCH_BUILD_DIR, OUT_DIR,
#                 COLL_TIME_LIMIT_S (collectives stop sweeping after this many seconds; default 600)
# Output: DIR/samples-<gpu-name>-gpu<i>-<UTC stamp>.json, DIR/samples-collectives-<n>gpu-<UTC stamp>.json.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends), here and inside the bench.
set -euo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

root=$(cd "$(dirname "$0")/../.." && pwd)
out_dir=${OUT_DIR:-$root/build/calibration}
build_dir=${GPUPLAN_BENCH_BUILD_DIR:-$root/build/bench}
gpus=""
single=1
coll=1
smoke=0
build_only=0
extra=()
while (($#)); do
  case "$1" in
    --out-dir) out_dir=$2; shift 2 ;;
    --gpus) gpus=$2; shift 2 ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --no-collectives) coll=0; shift ;;
    --no-single) single=0; shift ;;
    --smoke) smoke=1; shift ;;
    --build-only) build_only=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "run_all.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done

say() { echo "[calibrate $(date -u +%H:%M:%S)] $*"; }

# --- build (incremental; configures once) --------------------------------------------------------------------
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
command -v nvcc >/dev/null 2>&1 || { echo "run_all.sh: nvcc not found (install the CUDA toolkit)" >&2; exit 1; }
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  archs=${CUDA_ARCHS:-}
  if [ -z "$archs" ] && nvidia-smi -L >/dev/null 2>&1; then archs=native; fi
  gen=()
  command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
  say "configuring $build_dir (CUDA architectures: ${archs:-toolkit default list})"
  cmake -S "$root/calibrate/bench" -B "$build_dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
        ${archs:+-DCMAKE_CUDA_ARCHITECTURES=$archs}
fi
say "building gpuplan-bench"
cmake --build "$build_dir" -j "$(nproc)"
bench="$build_dir/gpuplan-bench"
((build_only)) && exit 0

mkdir -p "$out_dir"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
if [ -z "$gpus" ]; then
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    n=$(awk -F, '{print NF}' <<<"$CUDA_VISIBLE_DEVICES")
  else
    n=$(nvidia-smi -L | grep -c '^GPU')
  fi
  gpus=$(seq -s, 0 $((n - 1)))
fi
IFS=, read -r -a gpu_list <<<"$gpus"
ngpu=${#gpu_list[@]}
say "GPUs: ${gpus} (${ngpu}); output: $out_dir"
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm,clocks.max.mem,power.limit,temperature.gpu \
  --format=csv 2>/dev/null || true

rc=0
if ((smoke)); then
  say "smoke: quick suite on GPU ${gpu_list[0]}"
  "$bench" suite --quick --device "${gpu_list[0]}" --out "$out_dir/smoke-gpu${gpu_list[0]}-$stamp.json" "${extra[@]}" || rc=$?
  ((rc == 0)) || { say "smoke run failed (rc=$rc)"; exit $rc; }
fi
if ((single)); then
  for g in "${gpu_list[@]}"; do
    name=$(nvidia-smi -i "$g" --query-gpu=name --format=csv,noheader 2>/dev/null | tr ' A-Z' '-a-z' | tr -cd 'a-z0-9-' || true)
    f="$out_dir/samples-${name:-gpu}-gpu$g-$stamp.json"
    say "single-GPU suite on GPU $g -> $f"
    t0=$SECONDS
    "$bench" suite --device "$g" --out "$f" "${extra[@]}" || { r=$?; say "suite on GPU $g failed (rc=$r)"; rc=$r; }
    say "GPU $g done in $((SECONDS - t0)) s"
  done
fi
if ((coll)) && ((ngpu >= 2)); then
  f="$out_dir/samples-collectives-${ngpu}gpu-$stamp.json"
  say "NCCL collectives on $ngpu GPUs -> $f"
  t0=$SECONDS
  CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-$gpus} "$bench" collectives --nranks "$ngpu" --out "$f" \
    --time-limit-s "${COLL_TIME_LIMIT_S:-600}" "${extra[@]}" \
    || { r=$?; say "collectives failed (rc=$r)"; rc=$r; }
  say "collectives done in $((SECONDS - t0)) s"
elif ((coll)); then
  say "one GPU: no collectives"
fi
say "finished (rc=$rc)"
exit $rc
