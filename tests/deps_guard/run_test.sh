#!/usr/bin/env bash
# The dependency guard (scripts/deps_guard.sh) replayed on a recorded machine (recorded/: README.md), so that it is
# tested anywhere: the fresh-machine failure it exists for (Qt6Charts needs Qt6OpenGL, which only a Recommends pulled
# in) must fail it, with a message naming the cache entry and the package; the real list must pass.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
guard="$here/../../scripts/deps_guard.sh"
rec="$here/recorded"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
cp "$rec/CMakeCache.txt" "$tmp/CMakeCache.txt"
failures=0
check() {  # check NAME WANT_RC PATTERN... -- ARGS...: run the guard, compare the exit code, grep its output
  local name="$1" want="$2"; shift 2
  local patterns=()
  while [[ "$1" != -- ]]; do patterns+=("$1"); shift; done
  shift
  local out rc
  out="$(bash "$guard" "$tmp" "$@" 2>&1)"; rc=$?
  local ok=1
  [[ $rc -eq $want ]] || { echo "FAIL $name: exit $rc, want $want"; ok=0; }
  for p in "${patterns[@]}"; do
    grep -qF -- "$p" <<<"$out" || { echo "FAIL $name: output lacks '$p'"; ok=0; }
  done
  if ((ok)); then echo "ok   $name"; else failures=$((failures + 1)); echo "$out" | sed 's/^/     | /'; fi
}

check "deps.sh's list covers every file CMake found" 0 "all 36 files CMake found" -- \
  --packages "$(cat "$rec/packages.txt")" --owners "$rec/owners.tsv" --closure "$rec/closure.txt"

check "a list lacking libqt6opengl6-dev fails on Qt6OpenGL" 1 \
  "FAIL Qt6OpenGL_DIR = /usr/lib/x86_64-linux-gnu/cmake/Qt6OpenGL" \
  "is from Debian package 'libqt6opengl6-dev', which scripts/deps.sh does not install" \
  "Add 'libqt6opengl6-dev' to scripts/deps.sh." "1 of 36 files CMake found are not installed" -- \
  --packages "$(cat "$rec/packages-without-libqt6opengl6-dev.txt")" --owners "$rec/owners.tsv" \
  --closure "$rec/closure-without-libqt6opengl6-dev.txt"

# A program that no Debian package owns (built by hand into /usr/bin) fails: a fresh machine will not have it.
sed 's#^/usr/bin/ninja\tninja-build$#/usr/bin/ninja\t-#' "$rec/owners.tsv" >"$tmp/owners-unowned.tsv"
check "a file owned by no package fails" 1 \
  "FAIL CMAKE_MAKE_PROGRAM = /usr/bin/ninja: /usr/bin/ninja belongs to no Debian package" -- \
  --packages "$(cat "$rec/packages.txt")" --owners "$tmp/owners-unowned.tsv" --closure "$rec/closure.txt"

# The CUDA benches' finds are optional (not Debian packages) and only counted.
check "the CUDA benches' and other optional finds are only counted" 0 "22 optional finds not checked" -- \
  --packages "$(cat "$rec/packages.txt")" --owners "$rec/owners.tsv" --closure "$rec/closure.txt"

mkdir -p "$tmp/empty"; tmp_save="$tmp"; tmp="$tmp/empty"
check "no configure step: a usage error" 2 "CMakeCache.txt not found: run the configure step" -- \
  --owners "$rec/owners.tsv" --closure "$rec/closure.txt" --packages x
tmp="$tmp_save"
if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "all checks passed"
