#!/usr/bin/env bash
# One device call (1 GPU): ONNX graphs of torchvision models without weights (#25 d1) and image-loading throughput
# (#25 d3). Everything goes back as one tarball ($OUT/onnx_dataload.tar.gz) plus the log.
set -u
OUT=${OUT:-/tmp/out}
W=$OUT/work; mkdir -p "$W/onnx" "$W/dataload"
{
  date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; lscpu | head -20
  python3 -c "import torch, torchvision, onnx; print(torch.__version__, torchvision.__version__, onnx.__version__)"
  timeout 300 python3 scripts/measure/export_onnx.py --out-dir "$W/onnx"
  timeout 200 python3 scripts/measure/dataload_bench.py --out-dir "$W/dataload"
} > "$W/log.txt" 2>&1
tar -C "$W" -czf "$OUT/onnx_dataload.tar.gz" .
cp "$W/log.txt" "$OUT/log.txt"
tail -40 "$W/log.txt"
