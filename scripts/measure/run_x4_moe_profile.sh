#!/usr/bin/env bash
# One device call on nvidia-h100-x4 (2026-11-27, issue #21): the MoE training step at EP 4 and EP 1 x DP 4 with two
# profiled steps (GPU busy vs idle, kernel time by name, host-sync time), and the grouped-GEMM backward / fused-AdamW
# micro-benchmarks on one GPU. One tarball back ($OUT/x4_profile.tar.gz).
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/out}; R=/tmp/x4p; mkdir -p "$OUT" "$R"
M=scripts/measure/moe_train_step.py
run() { local t=$1; shift; timeout "$t" "$@" >> "$R/log_x4_profile.txt" 2>&1; echo "rc=$? $*" >> "$R/log_x4_profile.txt"; }
run 120 torchrun --standalone --nproc_per_node=4 $M --ep 4 --profile-steps 2 --name moe_train_L4_s4096_b1_ep4_w4_profile --out-dir "$R"
run 120 torchrun --standalone --nproc_per_node=4 $M --ep 1 --profile-steps 2 --name moe_train_L4_s4096_b1_ep1_w4_profile --out-dir "$R"
run 200 python3 scripts/measure/moe_kernels_bwd.py --out-dir "$R"
tar -C "$R" -czf "$OUT/x4_profile.tar.gz" .
grep -E "^\[moe_train|^gmm|^adamw|^rc=|Error" "$R/log_x4_profile.txt" | head -60
python3 - "$R" <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/moe_train_*profile.json")):
    r = json.load(open(f)); p = r.get("profile") or {}
    print(f.split("/")[-1], r.get("status"), "step %.1f ms" % (1e3 * r.get("step_s", 0)),
          "busy %.1f ms idle %.1f ms over %d steps" % (p.get("gpu_busy_us", 0) / 1e3, p.get("gpu_idle_us", 0) / 1e3, p.get("steps", 0)),
          "host:", {k: round(v / 1e3, 2) for k, v in list((p.get("host_runtime_us") or {}).items())[:6]})
PY
