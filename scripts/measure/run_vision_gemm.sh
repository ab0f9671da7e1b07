#!/usr/bin/env bash
# One device call (nvidia-h100-x1, 2026-11-27): GEMM alignment + staircase (#27 d6), vision inference, per-kernel
# profiles and training steps (#25 d2). Results and logs under $OUT.
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/smi.txt"
python3 -c "import torchvision; print('torchvision', torchvision.__version__)"
timeout 150 python3 scripts/measure/gemm_shapes.py --out-dir "$OUT" > "$OUT/log_gemm.txt" 2>&1; echo "gemm rc=$?"
timeout 180 python3 scripts/measure/vision_bench.py --inference --profile --out-dir "$OUT" > "$OUT/log_vision_inference.txt" 2>&1; echo "inference rc=$?"
timeout 90 python3 scripts/measure/vision_bench.py --train --models resnet50 --train-batches 32 64 128 256 --name vision_train_resnet50 --out-dir "$OUT" > "$OUT/log_vision_train_resnet50.txt" 2>&1; echo "train resnet rc=$?"
timeout 80 python3 scripts/measure/vision_bench.py --train --models efficientnet_b4 --train-batches 16 32 64 --name vision_train_efficientnet_b4 --out-dir "$OUT" > "$OUT/log_vision_train_effnet.txt" 2>&1; echo "train effnet rc=$?"
timeout 80 python3 scripts/measure/vision_bench.py --train --models vit_b_16 --train-batches 32 64 128 --name vision_train_vit_b_16 --out-dir "$OUT" > "$OUT/log_vision_train_vit.txt" 2>&1; echo "train vit rc=$?"
grep -h -E "^(align (bf16 nn|fp8|int8) [MKN]=(4095|4096|4097|4100|4104)|stair .* M= *(64|256|320|384|512|1024) |infer|train)" "$OUT"/log_*.txt | head -150
