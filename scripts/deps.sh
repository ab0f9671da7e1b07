#!/usr/bin/env bash
# Installs the Debian 12 packages gpuplan needs, skipping those already present. Run as root (or with sudo).
# `deps.sh fuzz` also installs clang and its libFuzzer / sanitizer runtimes (scripts/fuzz, CI's fuzz stage),
# chromium-headless-shell (the report_html test) and ccache: the test suite's extras, which scripts/test.sh installs.
# `deps.sh tools` installs what the maintainers' scripts need and the build does not: xvfb and xauth
# (scripts/gui-screenshots.sh runs the GUI under xvfb-run), debootstrap (scripts/fresh_machine_check.sh) and ccache
# (parallel worktree builds of the maintainers).
# `deps.sh --list [fuzz|tools]` prints the package list, one per line, and installs nothing (scripts/deps_guard.sh
# reads it).
#
# Packages are installed with --no-install-recommends, so every package the build uses must be here or in the Depends
# closure of one that is: a package that is only *recommended* is missing on a fresh machine. scripts/deps_guard.sh
# checks that against what CMake's configure step actually found (CI runs it before the build).
set -euo pipefail
list_only=0
if [[ "${1:-}" == --list ]]; then list_only=1; shift; fi
packages=(cmake ninja-build g++ pkg-config
          libfmt-dev nlohmann-json3-dev libcli11-dev doctest-dev libeigen3-dev
          # ONNX import (gpuplan model show file.onnx): onnx's ModelProto classes and shape inference; its headers
          # include protobuf's, which libonnx-dev does not depend on.
          libonnx-dev libprotobuf-dev
          qt6-base-dev qt6-charts-dev qt6-svg-dev
          # Qt6Charts' CMake config needs Qt6OpenGL, which qt6-base-dev only recommends (and qt6-charts-dev omits).
          libqt6opengl6-dev)
# libclang_rt.fuzzer*.a is in libclang-rt-14-dev, which clang only recommends (not installed with --no-install-recommends).
# chromium-headless-shell: the report_html test renders the HTML report (tests/CMakeLists.txt).
# python3-onnx: scripts/make_onnx_fixtures.py writes the graph-only ONNX test files (tests/fixtures/onnx/).
# ccache: the test and CI builds compile through it when present (CMakeLists.txt, GPUPLAN_CCACHE): CI's three builds
# (release, ci preset, fuzz) of a clean clone reuse the objects of earlier runs; no build needs it.
[[ "${1:-}" == fuzz ]] && packages+=(clang libclang-rt-14-dev chromium-headless-shell python3-onnx ccache)
[[ "${1:-}" == tools ]] && packages=(xvfb xauth debootstrap ccache)
if ((list_only)); then printf '%s\n' "${packages[@]}"; exit 0; fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "gpuplan: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
