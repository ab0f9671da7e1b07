#!/usr/bin/env bash
# regen.sh [BUILD_DIR]: rewrites every committed file that gpuplan generates, after a deliberate change to the model,
# the data or the CLI (list each change with before/after in the commit). Each file has a test that fails while it is
# stale; this script is what those tests' messages ask for, in one place:
#   data/accuracy/bands.json        gpuplan validate --write-bands   (test: data: ... bands.json is what validate computes)
#   docs/accuracy.md                gpuplan validate --format md     (test: docs: docs/accuracy.md is generated ...)
#   docs/field-reference.md         gpuplan schema                   (test: docs: docs/field-reference.md ...)
#   docs/scenario.md (key tables)   gpuplan schema --scenario-doc    (tests/cli/test_scenario_fields.cpp)
#   docs/formulas.md                gpuplan schema --formulas        (test: docs: docs/formulas.md ...)
#   tests/fixtures/report/small.*   gpuplan report small-plan.json   (tests/cli/test_cli_report.cpp)
#   tests/hostile/cases/flags.jsonl scripts/hostile_flags.py         (tests/hostile)
#   tests/golden/out/               scripts/golden.sh --update       (golden shards)
# BUILD_DIR defaults to build/release; it must hold a built cli/gpuplan of this tree. Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build="${1:-build/release}"
exe="$(realpath "$build/cli/gpuplan")"
[[ -x "$exe" ]] || { echo "regen.sh: no gpuplan at $build/cli/gpuplan (build it first)" >&2; exit 2; }
g() { "$exe" --data-dir "$root/data" "$@"; }

g validate --write-bands data/accuracy/bands.json >/dev/null
g validate --format md > docs/accuracy.md
g schema > docs/field-reference.md
g schema --formulas > docs/formulas.md
# The page is read whole before it is written: through a temporary file, never `> docs/scenario.md` directly.
g schema --scenario-doc docs/scenario.md > docs/scenario.md.tmp
mv docs/scenario.md.tmp docs/scenario.md
(
  cd tests/fixtures/report
  g report small-plan.json --format md > small.md
  g report small-plan.json --format text > small.txt
  g report small-plan.json --format html > small.html
  g report small-plan.json --format json > small.json
  g report small-plan.json --format csv > small.csv
)
python3 scripts/hostile_flags.py "$exe" > tests/hostile/cases/flags.jsonl
bash scripts/golden.sh "$exe" --update
git status --short -- data/accuracy docs tests/fixtures/report tests/hostile/cases tests/golden
