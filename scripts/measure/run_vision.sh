#!/usr/bin/env bash
# Vision inference, per-kernel profiles and training steps on one GPU (#25 d2). The device tool returns at most 8
# files: every JSON and log goes into one tarball, $OUT/vision_results.tar.gz.
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; R=/tmp/vision_res; mkdir -p "$OUT" "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$R/smi.txt"
timeout 170 python3 scripts/measure/vision_bench.py --inference --profile --out-dir "$R" > "$R/log_vision_inference.txt" 2>&1; echo "inference rc=$?"
timeout 80 python3 scripts/measure/vision_bench.py --train --models resnet50 --train-batches 32 64 128 256 --name vision_train_resnet50 --out-dir "$R" > "$R/log_vision_train_resnet50.txt" 2>&1; echo "train resnet rc=$?"
timeout 80 python3 scripts/measure/vision_bench.py --train --models vit_b_16 --train-batches 32 64 128 256 --name vision_train_vit_b_16 --out-dir "$R" > "$R/log_vision_train_vit.txt" 2>&1; echo "train vit rc=$?"
timeout 200 python3 scripts/measure/vision_bench.py --train --models efficientnet_b4 --train-batches 16 32 64 --name vision_train_efficientnet_b4 --out-dir "$R" > "$R/log_vision_train_effnet.txt" 2>&1; echo "train effnet rc=$?"
tar -C "$R" -czf "$OUT/vision_results.tar.gz" .
grep -h -E "^(train|profile)" "$R"/log_*.txt
