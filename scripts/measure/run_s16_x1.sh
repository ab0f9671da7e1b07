#!/usr/bin/env bash
# Session 16, one H100 (nvidia-h100-x1): the helpers' single-GPU probes, one after the other.
#  whatif:   scripts/measure/gemm_graph_sweep.py --trace (GEMM staircase / shapes / alignment inside CUDA graphs)
#  fidelity: scripts/measure/run_mpt_nongemm.sh (eager MPT step kernels by name and class, non-GEMM ops alone)
set -u
mkdir -p "$OUT/whatif" "$OUT/fidelity" /tmp/s16
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > /tmp/s16/host.txt 2>&1
python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())' >> /tmp/s16/host.txt 2>&1
t0=$(date +%s)
OUT=/tmp/s16/whatif timeout 330 bash -c 'mkdir -p $OUT; python3 scripts/measure/gemm_graph_sweep.py --trace' > /tmp/s16/log_gemm_graph.txt 2>&1
echo "whatif rc=$? $(( $(date +%s) - t0 )) s" | tee -a /tmp/s16/host.txt
mkdir -p /tmp/s16/whatif; cp /tmp/s16/log_gemm_graph.txt /tmp/s16/host.txt /tmp/s16/whatif/
t1=$(date +%s)
OUT=/tmp/s16/fidelity timeout 230 bash -c 'mkdir -p $OUT; bash scripts/measure/run_mpt_nongemm.sh' > /tmp/s16/log_fidelity.txt 2>&1
echo "fidelity rc=$? $(( $(date +%s) - t1 )) s" | tee -a /tmp/s16/host.txt
mkdir -p /tmp/s16/fidelity; cp /tmp/s16/log_fidelity.txt /tmp/s16/host.txt /tmp/s16/fidelity/
tar -C /tmp/s16 -czf "$OUT/whatif.tar.gz" whatif
tar -C /tmp/s16 -czf "$OUT/fidelity.tar.gz" fidelity
ls -la "$OUT"
