#!/usr/bin/env bash
# One device call (1 GPU, ~4 min): per-kernel profiles of one training step of ResNet-50 (b 256), ViT-B/16 (b 256) and
# EfficientNet-B4 (b 64), forward / backward / optimizer apart (#25 d2: the training pricer's kernel classes), and
# ResNet-50 training fed by a JPEG DataLoader at 2-15 workers (#25 d3: step = max(GPU, loader)). Everything goes back
# as one tarball ($OUT/vision_train_profile.tar.gz) plus the log.
set -u
cd "$(dirname "$0")/../.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; R=/tmp/vision_tp; mkdir -p "$OUT" "$R"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv; nproc
  timeout 240 python3 scripts/measure/vision_bench.py --profile-train --name vision_train_profile --out-dir "$R"
  echo "profile rc=$?"
  timeout 240 python3 scripts/measure/loader_train.py --out-dir "$R"
  echo "loader rc=$?"
} > "$R/log_vision_train_profile.txt" 2>&1
tar -C "$R" -czf "$OUT/vision_train_profile.tar.gz" .
cp "$R/log_vision_train_profile.txt" "$OUT/"
grep -E "^(profile|gpu only|workers|wrote)|rc=|Error" "$R/log_vision_train_profile.txt"
