#!/usr/bin/env bash
# One device call (1 GPU), session 14: allocator timeline of a training step (#27 d1), the optimisation stack
# (#27 d3), compressed GEMM paths and block-scaled FP8 at DeepSeek-V3 shapes (#27 d5, #21). Results go back as one
# tarball ($OUT/s14_x1.tar.gz) plus the log.
set -u
OUT=${OUT:-/tmp/out}
W=$OUT/work; mkdir -p "$W/memseries" "$W/optstack" "$W/compress"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit --format=csv; nproc
  python3 -c "import torch; print(torch.__version__, torch.version.cuda)"
  L="--hidden 2048 --layers 16 --heads 32 --kv-heads 8 --intermediate 8192 --vocab 128256 --seq 2048 --warmup 2"
  for mb in 2 4; do for ck in none full; do
    timeout 120 python3 scripts/measure/mem_series.py $L --micro-batch $mb --ckpt $ck --name llama1b_s2048_b${mb}_${ck} --out-dir "$W/memseries"
  done; done
  timeout 120 python3 scripts/measure/mem_series.py --hidden 4096 --layers 4 --heads 32 --kv-heads 8 --intermediate 14336 --vocab 32000 --seq 4096 --micro-batch 2 --warmup 2 --ckpt none --name w7b_L4_s4096_b2_none --out-dir "$W/memseries"
  timeout 240 python3 scripts/measure/compress_gemm.py --dsv3 --out-dir "$W/compress"
  timeout 300 python3 scripts/measure/optstack.py --out-dir "$W/optstack"
} > "$W/log.txt" 2>&1
tar -C "$W" -czf "$OUT/s14_x1.tar.gz" .
cp "$W/log.txt" "$OUT/log.txt"
tail -60 "$W/log.txt"
