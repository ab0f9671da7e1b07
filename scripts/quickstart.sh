#!/usr/bin/env bash
# README command 1: install what is missing, build (release), and run the main job on the bundled data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
# GPUPLAN_CMAKE_ARGS: extra configure options (CI adds -DGPUPLAN_WERROR=ON: the release build must be warning-free).
# shellcheck disable=SC2086
cmake --preset release -DGPUPLAN_BUILD_TESTS=OFF ${GPUPLAN_CMAKE_ARGS:-} >/dev/null
cmake --build --preset release
exe=build/release/cli/gpuplan
echo
"$exe" hw validate
echo
echo "== The main job: gpuplan report data/scenarios/llama-3.1-70b-budget.json =="
echo "   (Llama-3.1-70B pre-training + chat serving on A100, H100, H200 and B200: the cheapest way to do each)"
echo
"$exe" report data/scenarios/llama-3.1-70b-budget.json
"$exe" report data/scenarios/llama-3.1-70b-budget.json --format html --output build/llama-3.1-70b-budget.html
echo
echo "The same report as one HTML page with charts: build/llama-3.1-70b-budget.html"
echo "Rerun any row with --explain (the commands are in the report); your own plan: docs/report.md"
