#!/usr/bin/env bash
# One batched measurement of a whole host of NGPU GPUs in one device call (issue #30): written for an 8-GPU host
# (H100 x8 / H200 x8, ~9 min), runs unchanged on 2 and 4 GPUs as a rehearsal (~8 min at 4). Parts, most important
# first, each with its own time limit inside a global budget (a part that would not fit is skipped and logged):
#   1. NCCL all_reduce / all_gather / reduce_scatter / all_to_all / send_recv, 1 KiB .. 4 GiB on all NGPU GPUs
#      (gpuplan-bench collectives, built here, NVLS off): a calibration sweep (samples-collectives-<N>gpu-node.json,
#      for `gpuplan calibrate`) and a held-out sweep between its sizes (heldout-collectives-<N>gpu-node-between.json,
#      read by `gpuplan validate` from data/validation/measured/<gpu>/);
#   2. TP-N serving of a Llama-3-70B-shaped decoder (20 layers; CUDA-graph decode, batch 1..256 at context 2048;
#      prefill 1x2048 and 1x8192) and TP(N/2) x 2 replicas at 32 and 128 sequences each (node_serve_step.py);
#   3. EP-N MoE: Qwen3-30B-A3B-shaped decode and prefill, attention TP-N, experts EP-N with a sync-free
#      fixed-capacity all-to-all dispatch and combine, CUDA graphs (node_serve_step.py --model moe); MoE training
#      step EP-N and EP-(N/2) x DP2 (moe_train_step.py);
#   4. DDP and FSDP2 training steps of the 1B-like Llama (train_step.py), s2048 b4 per GPU, on N GPUs.
# Then node_cases.py turns the result files into validation case files (node-x<N>-*-cases.json).
# Everything lands in ONE tarball, $OUT/node_x<N>.tar.gz (rewritten after every part, so a kill keeps what was
# done), plus $OUT/log_node_x<N>.txt (the device returns at most 8 files).
# Usage on the device machine, from the repo root:   bash scripts/measure/run_node.sh 8      (or 4, 2)
#   environment: TOTAL_S (global budget, default 540 at 8 GPUs, 470 below), SKIP (comma list of parts to skip:
#   coll,serve,moe_serve,moe_train,train), DRY=1 (print the plan and the commands, run nothing)
set -u
cd "$(dirname "$0")/../.."
N=${1:-${NGPU:-}}
if ! [[ "$N" =~ ^[0-9]+$ ]] || ((N < 2)); then
  echo "usage: run_node.sh NGPU   (NGPU >= 2: the number of GPUs of this host to use)" >&2; exit 2
fi
if ((N % 2)); then echo "run_node.sh: NGPU must be even (the replica and EP-(N/2) x DP2 parts halve it)" >&2; exit 2; fi
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
OUT=${OUT:-/tmp/out}; R=${R:-/tmp/node_x$N}; mkdir -p "$OUT" "$R"
LOG=$OUT/log_node_x$N.txt
DRY=${DRY:-0}
SKIP=${SKIP:-}
if ((N >= 8)); then TOTAL_S=${TOTAL_S:-540}; else TOTAL_S=${TOTAL_S:-470}; fi
START=$(date +%s)
D=scripts/measure
H=$((N / 2))

# Per-part limits (seconds of wall) at N >= 8, and smaller grids below 8 GPUs (fewer ranks start faster but the
# model shards are bigger, so the serving points take about as long: the grids shrink instead).
if ((N >= 8)); then
  COLL_CAL=70; COLL_HELD=45; T_SERVE=150; T_MOE_SERVE=80; T_MOE_TRAIN=55; T_TRAIN=55
  DENSE_BATCHES=1,2,4,8,16,32,64,128,256; MOE_BATCHES=1,4,16,64,256
else
  COLL_CAL=50; COLL_HELD=35; T_SERVE=130; T_MOE_SERVE=70; T_MOE_TRAIN=50; T_TRAIN=50
  DENSE_BATCHES=1,4,16,32,64,128,256; MOE_BATCHES=1,16,64,256
fi

say() { echo "=== $(date -u +%T) [+$(( $(date +%s) - START ))s] $*" | tee -a "$LOG"; }
left() { echo $(( TOTAL_S - ($(date +%s) - START) )); }
skipped() { [[ ",$SKIP," == *",$1,"* ]]; }
pack() {
  ((DRY)) && return 0
  tar -C "$R" -czf "$OUT/node_x$N.tar.gz.tmp" . && mv -f "$OUT/node_x$N.tar.gz.tmp" "$OUT/node_x$N.tar.gz"
}
# part NAME LIMIT CMD...: runs CMD under `timeout min(LIMIT, time left - 15 s)`; skipped when under 20 s would remain
part() {
  local name=$1 limit=$2; shift 2
  if skipped "$name"; then say "$name: skipped (SKIP)"; return 0; fi
  local l; l=$(left); l=$((l - 15))
  ((limit > l)) && limit=$l
  if ((limit < 20)); then say "$name: NOT RUN, global budget spent ($(left) s left): $*"; echo "not_run $name $*" >> "$R/parts.txt"; return 0; fi
  say "$name (limit ${limit}s): $*"
  if ((DRY)); then echo "dry $name $limit $*" >> "$R/parts.txt"; return 0; fi
  timeout --kill-after=10 "$limit" "$@" >> "$LOG" 2>&1
  local rc=$?
  say "$name rc=$rc"
  echo "rc=$rc $name $*" >> "$R/parts.txt"
  pack
  return 0
}

say "run_node.sh N=$N budget ${TOTAL_S}s out=$OUT results=$R dry=$DRY"
{
  date -u; hostname; uname -r
  nvidia-smi; nvidia-smi topo -m; nvidia-smi nvlink --status 2>/dev/null | head -60
  nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'
  nproc; free -g
  env | grep -E '^(NCCL|TORCH|NVSHMEM|CUDA)_' | sort
} > "$R/host.txt" 2>&1
NG=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if ((NG < N)) && ((!DRY)); then say "only $NG GPUs visible, $N asked: stopping"; pack; exit 1; fi

# --- 1. collectives -----------------------------------------------------------------------------------------------
B=build/bench-node/gpuplan-bench
if ! skipped coll; then
  part coll_build 120 env CUDA_ARCHS=90 bash scripts/calibrate/run_all.sh --build-only --build-dir build/bench-node
  GL=$(seq -s, 0 $((N - 1)))
  # the bench's own --time-limit-s stops sweeping (it rewrites the file after every item); timeout is the safety net
  part coll $((COLL_CAL + 40)) env CUDA_VISIBLE_DEVICES="$GL" "$B" collectives --nranks "$N" --no-overlap --max-bytes 4294967296 \
    --per-octave 2 --time-limit-s "$COLL_CAL" --out "$R/samples-collectives-${N}gpu-node.json"
  part coll_heldout $((COLL_HELD + 40)) env CUDA_VISIBLE_DEVICES="$GL" "$B" collectives --nranks "$N" --no-overlap \
    --max-bytes 4294967296 --per-octave 2 --size-offset 0.5 --time-limit-s "$COLL_HELD" \
    --out "$R/heldout-collectives-${N}gpu-node-between.json"
fi

# --- 2. TP-N dense serving and TP(N/2) x 2 replicas -----------------------------------------------------------------
part serve "$T_SERVE" torchrun --standalone --nproc_per_node="$N" $D/node_serve_step.py --model dense --phases tp,replicas --layers 20 --context 2048 \
  --decode-batches "$DENSE_BATCHES" --prefill 1x2048,1x8192 --replicas 2 --replica-batches 32,128 \
  --time-budget-s $((T_SERVE - 45)) --out-dir "$R"

# --- 3. EP-N MoE serving, then MoE training EP-N and EP-(N/2) x DP2 ---------------------------------------------------
part moe_serve "$T_MOE_SERVE" torchrun --standalone --nproc_per_node="$N" $D/node_serve_step.py --model moe --phases tp --context 2048 \
  --decode-batches "$MOE_BATCHES" --prefill 1x2048 --replays 20 --warmup 5 --time-budget-s $((T_MOE_SERVE - 40)) \
  --out-dir "$R"
part moe_train "$T_MOE_TRAIN" torchrun --standalone --nproc_per_node="$N" $D/moe_train_step.py --ep "$N" --name "node_moe_train_L4_s4096_b1_ep${N}_w${N}" --out-dir "$R"
part moe_train "$T_MOE_TRAIN" torchrun --standalone --nproc_per_node="$N" $D/moe_train_step.py --ep "$H" --name "node_moe_train_L4_s4096_b1_ep${H}_w${N}" --out-dir "$R"

# --- 4. DDP and FSDP2 training steps ----------------------------------------------------------------------------------
L1B="--hidden 2048 --layers 16 --heads 32 --kv-heads 8 --intermediate 8192 --vocab 128256"
part train "$T_TRAIN" torchrun --standalone --nproc_per_node="$N" $D/train_step.py --name "node_llama1b_s2048_b4_ddp${N}" --ddp $L1B --seq 2048 --micro-batch 4 --out-dir "$R"
part train "$T_TRAIN" torchrun --standalone --nproc_per_node="$N" $D/train_step.py --name "node_llama1b_s2048_b4_fsdp${N}" --fsdp $L1B --seq 2048 --micro-batch 4 --out-dir "$R"

# --- 5. validation case files (stdlib Python; also runnable later on the unpacked tarball) ----------------------------
if ((!DRY)); then
  nvidia-smi --query-gpu=index,clocks.sm,temperature.gpu,power.draw --format=csv >> "$R/host.txt" 2>&1
  python3 $D/node_cases.py "$R" --out-dir "$R" >> "$LOG" 2>&1; say "node_cases rc=$?"
fi
say "done; files:"; ls -la "$R" | tee -a "$LOG"
pack
grep -E "^=== |\] .*(ok|rejected|error|ERROR|OOM)|Traceback|Error" "$LOG" | tail -80
