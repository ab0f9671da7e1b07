#!/usr/bin/env bash
# Regenerates docs/screenshots/*.png from the real gpuplan-gui window under Xvfb (docs/gui.md).
# Usage: scripts/gui-screenshots.sh [BUILD_DIR] [OUT_DIR]   (defaults: build/release, docs/screenshots)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build/release}"
out="${2:-$root/docs/screenshots}"
exe="$build/gui/gpuplan-gui"
if [[ ! -x "$exe" ]]; then
  echo "no $exe: build it first (cmake --build $build --target gpuplan-gui)" >&2
  exit 2
fi
command -v xvfb-run >/dev/null || bash "$root/scripts/deps.sh" tools
mkdir -p "$out"
# A fixed screen and style so that the pictures only change when the GUI or the model does.
QT_QPA_PLATFORMTHEME= QT_STYLE_OVERRIDE=Fusion \
  xvfb-run -a -s "-screen 0 1600x1000x24" "$exe" --data-dir "$root/data" --screenshot "$out"
ls -1 "$out"/*.png
