# Session 31 (2026-11-29), nvidia-h200-x2: compute beside NCCL reduce-scatter and all-gather with NCCL's CTA count
# pinned to 4, 8, 16 and 32, at three GEMM wave counts (DeepSeek-V3's 2-wave GEMM, a 4-wave 4096^3-class GEMM and
# Llama-3-8B's ~27-wave GEMM): does a GEMM beside a collective run as its waves on the SMs the collective leaves?
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
for cfg in "dsv3 4096 7168 2048 64" "mid 4096 4096 4096 64" "llama8b 8192 4096 14336 128"; do
  set -- $cfg
  BESIDE_COMM_NAME=beside_comm_ctas_2gpu_$1 timeout 150 torchrun --nproc_per_node=2 scripts/measure/beside_comm.py \
    --tokens $2 --hidden $3 --ffn $4 --comm-mib $5 --collectives reduce_scatter,all_gather --pins 4,8,16,32 \
    --trials 5 --out-dir $OUT > $OUT/log_beside_comm_ctas_$1.txt 2>&1; echo "$1 rc=$?"
done
grep -h "gemm_bf16\|rmsnorm" $OUT/log_beside_comm_ctas_*.txt
