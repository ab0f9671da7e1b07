#!/usr/bin/env bash
# Session 32 (issues #24, #21), nvidia-h200-x2: NCCL all-to-all between 2 H200s at 16-512 MiB per rank with NCCL's p2p
# channel count pinned to 8, 16, 32 (the default) and 64 (scripts/measure/moe_alltoall.py, EP 2, equal splits plus
# one token-shaped dispatch). Question: is the per-rank all-to-all rate set by the p2p channels (a copy rate per CTA)
# rather than by NVLink? Published B300 sweeps (data/validation/published_alltoall.json) move (S + 16 MiB) at ~700 GB/s
# per rank whatever the rank count; our H100 EP 2 reaches ~560 GB/s the same way. If the H200 rate scales with the
# channels, the all-to-all law needs a per-rank ceiling = p2p channels x per-channel rate (ANALYSIS.md, session 32).
# Usage: OUT=dir bash scripts/measure/a2a_p2p_channels_run.sh        (GPU, 2 processes per run, ~2 min in all)
#        OUT=dir bash scripts/measure/a2a_p2p_channels_run.sh --dry  (CPU: gloo, tiny sizes; checks the logic only)
set -u
OUT=${OUT:?set OUT to the output folder}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ "${1:-}" = "--dry" ]; then
  for c in 8 64; do
    NCCL_MIN_P2P_NCHANNELS=$c NCCL_MAX_P2P_NCHANNELS=$c timeout 120 torchrun --nproc_per_node=2 \
      scripts/measure/moe_alltoall.py --cpu --ep 2 --min-bytes 65536 --max-bytes 262144 --tokens 64 --hidden 256 \
      --topk-experts 2:8 --iters 3 --out-dir "$OUT" --name a2a_p2pch${c}_dry || echo "rc=$? (c=$c)"
  done
  exit 0
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > "$OUT/nvsmi_before.csv"
for c in 8 16 32 64; do
  NCCL_MIN_P2P_NCHANNELS=$c NCCL_MAX_P2P_NCHANNELS=$c NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT \
    timeout 40 torchrun --nproc_per_node=2 scripts/measure/moe_alltoall.py --ep 2 \
    --min-bytes 16777216 --max-bytes 536870912 --tokens 4096 --hidden 4096 --topk-experts 8:64 --iters 20 \
    --time-budget-s 25 --out-dir "$OUT" --name a2a_p2pch$c > "$OUT/log_a2a_p2pch$c.txt" 2>&1
  echo "c=$c rc=$?"
  grep -h "p2p channels" "$OUT/log_a2a_p2pch$c.txt" | head -2
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > "$OUT/nvsmi_after.csv"
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
for c in (8, 16, 32, 64):
    f = os.path.join(out, f"a2a_p2pch{c}.json")
    if not os.path.exists(f):
        print(c, "missing"); continue
    d = json.load(open(f))
    print(c, " ".join(f"{r['size_bytes'] >> 20}MiB:{r['algbw_GBps']:.0f}" for r in d["equal"]))
PY
