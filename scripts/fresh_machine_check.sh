#!/usr/bin/env bash
# fresh_machine_check.sh [DIR]: the README's quick start on a fresh Debian 12 (bookworm), made here with debootstrap.
#
# Builds a minimal Debian 12 root (debootstrap --variant=minbase: what a bare container image holds) in DIR (default
# /var/tmp/gpuplan-fresh), copies the committed tree (git archive HEAD) into it, and runs exactly the README's two
# commands inside it as root, in order: `bash scripts/quickstart.sh`, then `bash scripts/test.sh`. Each must exit 0.
# Needs root, debootstrap and the network to deb.debian.org; takes about an hour on 2 cores (the test command builds
# with ASan and fuzzes). Not part of CI (which runs on a machine with the packages already installed and proves the
# package list with scripts/deps_guard.sh instead); docs/fresh-machine.md records the last run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-/var/tmp/gpuplan-fresh}"
[[ "$(id -u)" -eq 0 ]] || { echo "fresh_machine_check: run as root (debootstrap and chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || bash "$root/scripts/deps.sh" tools
if [[ ! -x "$dir/bin/bash" ]]; then
  debootstrap --variant=minbase bookworm "$dir" http://deb.debian.org/debian
fi
cp /etc/resolv.conf "$dir/etc/resolv.conf"
mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"
mountpoint -q "$dir/dev" || mount --rbind /dev "$dir/dev"
mountpoint -q "$dir/sys" || mount --rbind /sys "$dir/sys"
cleanup() { umount -R "$dir/dev" 2>/dev/null || true; umount -R "$dir/sys" 2>/dev/null || true; umount "$dir/proc" 2>/dev/null || true; }
trap cleanup EXIT
rm -rf "$dir/root/gpuplan"
mkdir -p "$dir/root/gpuplan"
git -C "$root" archive HEAD | tar -x -C "$dir/root/gpuplan"
in_chroot() {
  chroot "$dir" /usr/bin/env -i HOME=/root TERM=dumb PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    bash -c "cd /root/gpuplan && $1"
}
echo "== fresh Debian $(cat "$dir/etc/debian_version"), commit $(git -C "$root" rev-parse --short HEAD)"
echo "== README command 1: bash scripts/quickstart.sh"
time in_chroot "bash scripts/quickstart.sh"
echo "== README command 2: bash scripts/test.sh"
time in_chroot "bash scripts/test.sh"
echo "fresh_machine_check: both README commands passed on a fresh Debian 12"
