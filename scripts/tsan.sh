#!/usr/bin/env bash
# scripts/tsan.sh [BUILD_DIR]
#
# ThreadSanitizer run of the multithreaded code (docs/reliability.md "Sanitizers"): builds the model library, the
# model tests (test_search's thread-count checks among them), the CLI and its tests with -fsanitize=thread in
# BUILD_DIR (default /tmp/build-tsan; RelWithDebInfo, GUI and benches off), then runs
#   - test_model's search suite (search_training over 1, 2 and 8 threads, cancellation, progress),
#   - test_cli's search and determinism suites (gpuplan train --search with --threads 1/2/3/8, Ctrl-C),
#   - gpuplan train --search on 4 threads directly,
#   - the GUI controller tests, when the GUI is built with its tests (GPUPLAN_TSAN_GUI=1; needs Qt; with a Qt that is
#     not itself built with -fsanitize=thread, e.g. Debian's, expect reports at the Qt hand-offs (QThreadPool::start,
#     queued connections) that TSan cannot see through: docs/reliability.md "Sanitizers"),
# with TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:exitcode=66; logs in BUILD_DIR/tsan-logs/. Exit status:
# 0 every run clean, 1 a data race was reported, 2 no race but a step failed for another reason.
# Environment: CXX (default g++), TSAN_JOBS (build parallelism, default 2).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-/tmp/build-tsan}"
gui=OFF
[[ "${GPUPLAN_TSAN_GUI:-0}" == 1 ]] && gui=ON

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  nice -n 10 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS=-fsanitize=thread -fno-omit-frame-pointer" -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread \
    -DGPUPLAN_BUILD_GUI="$gui" -DGPUPLAN_BUILD_BENCHES=OFF \
    $(command -v ccache > /dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
elif ! grep -q "^GPUPLAN_BUILD_GUI:BOOL=$gui\$" "$build/CMakeCache.txt"; then
  # A build directory configured without (or with) the GUI earlier: switch it rather than fail on a missing target.
  nice -n 10 cmake "$build" -DGPUPLAN_BUILD_GUI="$gui"
fi
targets=(gpuplan test_model test_cli)
[[ $gui == ON ]] && targets+=(test_gui)
nice -n 10 cmake --build "$build" -j "${TSAN_JOBS:-2}" --target "${targets[@]}"

export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:exitcode=66}"
status=0
log="$build/tsan-logs"
mkdir -p "$log"
n=0
# A step fails on a ThreadSanitizer report (exit 66, "WARNING: ThreadSanitizer" in its output); a test that fails for
# another reason is reported as such, apart, so that a race is never hidden behind an unrelated failure.
step() {
  n=$((n + 1))
  echo "== $*"
  set +e
  "$@" > "$log/step$n.log" 2>&1
  local rc=$?
  set -e
  if grep -q "WARNING: ThreadSanitizer" "$log/step$n.log" || [[ $rc -eq 66 ]]; then
    echo "-- DATA RACE (see $log/step$n.log)"; grep -A20 "WARNING: ThreadSanitizer" "$log/step$n.log" | head -40
    status=1
  elif [[ $rc -ne 0 ]]; then
    echo "-- no race reported, but the step exited $rc (test failures? see $log/step$n.log)"; tail -3 "$log/step$n.log"
    [[ $status -eq 0 ]] && status=2
  else
    echo "-- clean: $(tail -1 "$log/step$n.log")"
  fi
}
step "$build/tests/model/test_model" -ts="*search*"
step "$build/tests/cli/test_cli" -ts="cli search,cli determinism"
step "$build/cli/gpuplan" --data-dir "$root/data" train --model llama-3.1-70b --gpu h100 --gpus 64..256:64 \
  --seq 4096 --global-batch 512 --tokens 1e12 --search --threads 4 --no-calibration --format csv
if [[ $gui == ON ]]; then
  QT_QPA_PLATFORM=offscreen step "$build/tests/gui/test_gui"
fi
case $status in
  0) echo "scripts/tsan.sh: no data race reported" ;;
  1) echo "scripts/tsan.sh: DATA RACE reported" ;;
  *) echo "scripts/tsan.sh: no data race reported; some step failed for another reason" ;;
esac
exit $status
