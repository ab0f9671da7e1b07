#!/usr/bin/env bash
# Session 15's batched device call (lead): the helpers' requests (/work/notes/s15-device-requests). 2 GPUs of one
# host (4-GPU hosts were not lent that day). The single-GPU probes run two at a time on GPUs 0 and 1 (independent
# processes, one GPU each), then the FSDP steps on both GPUs. Usage (repo root): OUT=$OUT bash scripts/measure/run_s15.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
D=scripts/measure
nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,memory.total --format=csv > "$OUT/host.txt" 2>&1
nvidia-smi topo -m >> "$OUT/host.txt" 2>&1
python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())" >> "$OUT/host.txt" 2>&1
mkdir -p "$OUT/archs" "$OUT/moe" "$OUT/vision" "$OUT/whatif" "$OUT/fidelity"
start=$(date +%s)
( CUDA_VISIBLE_DEVICES=0 timeout 150 python3 $D/dsa_indexer_bench.py --reps 20 --out-dir "$OUT/archs" > "$OUT/archs/log_dsa_indexer.txt" 2>&1; echo "rc=$?" >> "$OUT/archs/log_dsa_indexer.txt"
  CUDA_VISIBLE_DEVICES=0 timeout 150 python3 $D/host_ops.py --out-dir "$OUT/vision" > "$OUT/vision/log_host_ops.txt" 2>&1; echo "rc=$?" >> "$OUT/vision/log_host_ops.txt" ) &
( CUDA_VISIBLE_DEVICES=1 OUT="$OUT/moe" timeout 150 python3 $D/fp8_blockwise_gemm.py --reps 20 > "$OUT/moe/log_fp8_blockwise.txt" 2>&1; echo "rc=$?" >> "$OUT/moe/log_fp8_blockwise.txt"
  CUDA_VISIBLE_DEVICES=1 timeout 150 python3 $D/optstack_probe.py --out-dir "$OUT/whatif" > "$OUT/whatif/log_optstack_probe.txt" 2>&1; echo "rc=$?" >> "$OUT/whatif/log_optstack_probe.txt" ) &
wait
echo "single-GPU probes: $(( $(date +%s) - start )) s" >> "$OUT/host.txt"
start=$(date +%s)
OUT="$OUT/fidelity" timeout 240 bash $D/run_mpt_fsdp.sh 2 > "$OUT/fidelity/runner.txt" 2>&1
echo "fsdp: $(( $(date +%s) - start )) s" >> "$OUT/host.txt"
cd "$OUT" && tar czf s15_results.tgz archs moe vision whatif fidelity && rm -rf archs moe vision whatif fidelity
