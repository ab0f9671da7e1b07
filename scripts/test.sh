#!/usr/bin/env bash
# README command 2 (and CI): install what is missing, build with the given preset (default: ci = warnings as errors,
# ASan + UBSan) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-ci}"
bash scripts/deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset" -j "$(nproc)"
