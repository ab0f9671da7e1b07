#!/usr/bin/env bash
# README command 2 (and CI): install what is missing, build with the given preset (default: ci = warnings as errors,
# ASan + UBSan) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-ci}"
fuzz_stage=0
[[ "$preset" == ci && "${GPUPLAN_CI_FUZZ:-1}" != 0 ]] && fuzz_stage=1
if [[ $fuzz_stage -eq 1 ]]; then bash scripts/deps.sh fuzz; else bash scripts/deps.sh; fi
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
# The ci preset also fuzzes briefly (docs/reliability.md, "Fuzzing in CI"): every libFuzzer target built with clang in
# build/fuzz-ci (the libraries and the fuzz targets only) and run on GPUPLAN_CI_FUZZ_RUNS inputs (default 10000, seed
# GPUPLAN_CI_FUZZ_SEED, at most GPUPLAN_CI_FUZZ_SECONDS = 120 s) each from the committed corpus — the CLI target, which
# loads the bundled data on every input (~65 inputs/s under ASan), on GPUPLAN_CI_FUZZ_RUNS_CLI (default 4000) so that
# it finishes well inside the cap; a crash, sanitizer report, timeout or broken invariant fails the run after the test suite.
# GPUPLAN_CI_FUZZ=0 skips it.
fuzz_rc=0
if [[ $fuzz_stage -eq 1 ]]; then
  fuzz_start=$(date +%s)
  # Deterministic: a fixed seed and a fixed number of inputs per target (-runs; --seconds only caps a slow machine),
  # so that CI's verdict on a commit does not depend on luck or machine speed; longer, random runs are scripts/fuzz's
  # job (docs/reliability.md).
  FUZZ_BUILD_DIR=build/fuzz-ci FUZZ_JOBS="$(nproc)" \
    FUZZ_ARGS="-seed=${GPUPLAN_CI_FUZZ_SEED:-20261122} -runs=${GPUPLAN_CI_FUZZ_RUNS:-10000}" \
    FUZZ_ARGS_cli="-runs=${GPUPLAN_CI_FUZZ_RUNS_CLI:-4000}" \
    bash scripts/fuzz --no-fork --seconds "${GPUPLAN_CI_FUZZ_SECONDS:-120}" 2>&1 | tee build/fuzz-stage.log || fuzz_rc=$?
  echo "fuzz stage: $(( $(date +%s) - fuzz_start )) s (build and runs), exit $fuzz_rc"
fi
ctest --preset "$preset" -j "$(nproc)"
if [[ $fuzz_rc -ne 0 ]]; then
  # Repeated after the test output so that the end of a CI log says which target found what.
  echo "== the fuzz stage's findings (build/fuzz-stage.log):" >&2
  grep -E '^-- fuzz_[a-z_]+: (FINDINGS|exit|cause:)' build/fuzz-stage.log | tail -n 40 >&2 || true
  sed -n '/^target  /,$p' build/fuzz-stage.log >&2
  echo "FAILED: the fuzz stage found something (build/fuzz-ci/logs, build/fuzz-ci/artifacts)" >&2
  exit "$fuzz_rc"
fi
