#!/usr/bin/env bash
# README command 1: install what is missing, build (release), and run the main job on the bundled data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake --preset release -DGPUPLAN_BUILD_TESTS=OFF >/dev/null
cmake --build --preset release
exe=build/release/cli/gpuplan
echo
echo "== Hardware database (dense peaks; no 2:4 sparsity) =="
"$exe" hw validate
"$exe" hw list
echo
echo "== Model library =="
"$exe" model list
echo
echo "== Example: gpuplan model show llama-3.1-70b =="
"$exe" model show llama-3.1-70b
echo
echo "== Example: training Llama-3.1-70B on 1,024 H100s (15T tokens) =="
"$exe" train --model llama-3.1-70b --gpu h100 --gpus 1024 --tp 8 --pp 4 --global-batch 1024 --seq 8192 --tokens 15e12
