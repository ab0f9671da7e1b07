#!/usr/bin/env bash
# Installs the Debian 12 packages gpuplan needs, skipping those already present. Run as root (or with sudo).
# `deps.sh fuzz` also installs clang and its libFuzzer / sanitizer runtimes (scripts/fuzz, CI's fuzz stage).
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config
          libfmt-dev nlohmann-json3-dev libcli11-dev doctest-dev libeigen3-dev
          qt6-base-dev qt6-charts-dev qt6-svg-dev libgl-dev)
# libclang_rt.fuzzer*.a is in libclang-rt-14-dev, which clang only recommends (not installed with --no-install-recommends).
[[ "${1:-}" == fuzz ]] && packages+=(clang libclang-rt-14-dev)
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
