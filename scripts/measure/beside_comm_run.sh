# The beside_comm runs of session 31 (2026-11-29) on nvidia-h200-x2 (the 4-GPU kind was not lent): kernel classes
# beside NCCL collectives on 2 GPUs of one host, at DeepSeek-V3 and Llama-3-8B shapes.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
N=${NGPU:-2}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $OUT/nvsmi_before.csv
BESIDE_COMM_NAME=beside_comm_${N}gpu_dsv3 timeout 170 torchrun --nproc_per_node=$N scripts/measure/beside_comm.py --collectives alltoall,allreduce,reduce_scatter,all_gather --pins free,20 --trials 5 --out-dir $OUT > $OUT/log_${N}gpu_dsv3.txt 2>&1; echo rc=$?
BESIDE_COMM_NAME=beside_comm_${N}gpu_llama8b timeout 120 torchrun --nproc_per_node=$N scripts/measure/beside_comm.py --tokens 8192 --hidden 4096 --ffn 14336 --comm-mib 128 --collectives allreduce,reduce_scatter,all_gather --pins free --trials 5 --out-dir $OUT > $OUT/log_${N}gpu_llama8b.txt 2>&1; echo rc=$?
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $OUT/nvsmi_after.csv
cat $OUT/nvsmi_before.csv $OUT/nvsmi_after.csv
grep -h "loss" $OUT/log_*.txt
