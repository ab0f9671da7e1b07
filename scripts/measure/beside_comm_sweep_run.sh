# Session 32 (issue #24), nvidia-h200-x2: a bf16 GEMM beside NCCL reduce-scatter and all-reduce, GEMM length (0.1 to
# 1.3 ms) x call size (8, 32, 128, 512 MiB), with each GEMM's and each call's end time in the last trial
# (scripts/measure/beside_comm_sweep.py). Which quantity does the GEMM's delay follow: the call's length, the GEMM's,
# or neither? (scripts/validation/beside_comm_law.py: session 31's points and the calibration's overlap items disagree.)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
N=${NGPU:-2}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $OUT/nvsmi_before.csv
BESIDE_COMM_NAME=beside_comm_sweep_${N}gpu timeout 170 torchrun --nproc_per_node=$N scripts/measure/beside_comm_sweep.py \
  --out-dir $OUT > $OUT/log_beside_comm_sweep_${N}gpu.txt 2>&1; echo "rc=$?"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $OUT/nvsmi_after.csv
cat $OUT/nvsmi_before.csv $OUT/nvsmi_after.csv
grep -h "loss" $OUT/log_beside_comm_sweep_${N}gpu.txt
