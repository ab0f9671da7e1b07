# The beside_comm runs of session 31 (2026-11-29) on nvidia-h200-x4: kernel classes beside NCCL collectives on 4 and 2 GPUs.
set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $OUT/nvsmi_before.csv
BESIDE_COMM_NAME=beside_comm_4gpu_dsv3 timeout 170 torchrun --nproc_per_node=4 scripts/measure/beside_comm.py --collectives alltoall,allreduce,reduce_scatter,all_gather --pins free,20 --out-dir $OUT > $OUT/log_4gpu_dsv3.txt 2>&1; echo rc=$?
BESIDE_COMM_NAME=beside_comm_4gpu_llama8b timeout 120 torchrun --nproc_per_node=4 scripts/measure/beside_comm.py --tokens 8192 --hidden 4096 --ffn 14336 --comm-mib 128 --collectives allreduce,reduce_scatter,all_gather --pins free --out-dir $OUT > $OUT/log_4gpu_llama8b.txt 2>&1; echo rc=$?
CUDA_VISIBLE_DEVICES=0,1 BESIDE_COMM_NAME=beside_comm_2gpu_dsv3 timeout 100 torchrun --nproc_per_node=2 scripts/measure/beside_comm.py --collectives alltoall,allreduce,reduce_scatter --pins free --out-dir $OUT > $OUT/log_2gpu_dsv3.txt 2>&1; echo rc=$?
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $OUT/nvsmi_after.csv
tail -5 $OUT/log_*.txt
