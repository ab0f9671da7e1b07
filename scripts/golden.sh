#!/usr/bin/env bash
# golden.sh GPUPLAN_EXE [--update | --check [--shard K/N]]: the golden outputs of tests/golden/commands.txt.
#   --check  (default) run every command and compare stdout, stderr and the exit code byte for byte with
#            tests/golden/out/NAME.txt; print a diff of each difference; exit 1 on any.
#            --shard K/N checks only the commands whose line index i (0-based, comments and blank lines skipped)
#            has i mod N = K, so that CTest can run the N shards in parallel (tests/CMakeLists.txt registers them).
#   --update write them (after a deliberate change: list it, with before/after, in the commit).
# Every command runs from the repository root with `--data-dir data`, LC_ALL=C and COLUMNS=80, so that the bytes
# depend on the code and the data only. JSON prints doubles to round-trip precision: an unchanged file means every
# number is bitwise unchanged (tests/golden/README.md).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
[[ $# -ge 1 ]] || { echo "usage: golden.sh GPUPLAN_EXE [--update|--check]" >&2; exit 2; }
exe="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
mode="${2:---check}"
[[ -x "$exe" ]] || { echo "golden.sh: $exe is not an executable" >&2; exit 2; }
[[ "$mode" == --update || "$mode" == --check ]] || { echo "golden.sh: unknown mode '$mode'" >&2; exit 2; }
shard_k=0 shard_n=1
if [[ $# -ge 3 ]]; then
  [[ "$mode" == --check && "$3" == --shard && $# -eq 4 && "$4" =~ ^([0-9]+)/([1-9][0-9]*)$ ]] ||
    { echo "golden.sh: expected '--check --shard K/N' (K < N), got '${*:2}'" >&2; exit 2; }
  shard_k=${BASH_REMATCH[1]} shard_n=${BASH_REMATCH[2]}
  ((shard_k < shard_n)) || { echo "golden.sh: shard $4: K must be below N" >&2; exit 2; }
fi
out_dir="$root/tests/golden/out"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out_dir"
cd "$root"
failures=0 count=0 index=-1
declare -A listed=()
while IFS=$'\t' read -r name args; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  index=$((index + 1))
  ((index % shard_n == shard_k)) || continue
  count=$((count + 1))
  listed["$name.txt"]=1
  # shellcheck disable=SC2086
  env -u GPUPLAN_DATA_DIR LC_ALL=C LANG=C COLUMNS=80 TERM=dumb "$exe" --data-dir data $args \
    >"$tmp/stdout" 2>"$tmp/stderr" </dev/null
  rc=$?
  # The one measured quantity, the search's own wall time, is masked.
  { echo "\$ gpuplan $args"; sed -E 's/"wall_s": [-+.0-9eE]+/"wall_s": "(masked)"/' "$tmp/stdout"
    echo "--- stderr ---"; cat "$tmp/stderr"; echo "--- exit $rc ---"; } >"$tmp/$name.txt"
  if [[ "$mode" == --update ]]; then
    cp "$tmp/$name.txt" "$out_dir/$name.txt"
  elif ! cmp -s "$tmp/$name.txt" "$out_dir/$name.txt"; then
    echo "golden: $name differs (gpuplan $args):"
    diff -u "$out_dir/$name.txt" "$tmp/$name.txt" 2>&1 | head -40
    failures=$((failures + 1))
  fi
done <"$root/tests/golden/commands.txt"
if [[ "$mode" == --update ]]; then
  for f in "$out_dir"/*.txt; do [[ -n "${listed[$(basename "$f")]:-}" ]] || rm -f "$f"; done
  echo "golden: wrote $count outputs to tests/golden/out"
  exit 0
fi
if ((failures)); then
  echo "golden: $failures of $count outputs differ; if the change is deliberate: scripts/golden.sh $1 --update," \
       "and list each moved number with before/after in the commit" >&2
  exit 1
fi
echo "golden: all $count outputs byte-identical"
