#!/usr/bin/env bash
# The wheel of tools/gpu_wheel.sh as an xz tarball of its unpacked tree, in .xfer-wheel/, for a GPU
# machine reached through a transfer that the wheel (~62 MB with bench_cuda) and the checkout
# together exceed (64 MiB): name `.xfer-wheel` in the device call's carry; tools/gpu_run.sh
# unpacks it into its install folder (~56 MB packed).
#   bash tools/gpu_wheel.sh <python3.12> && bash tools/gpu_pack.sh
#   NO_BENCH=1 bash tools/gpu_pack.sh   # without the bench executables (gnnsparse/bin): when the
#                                       # packed tree would pass the limit and no bench_cuda runs
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
wheel=$(ls "$ROOT"/.whl/gnnsparse-*.whl | head -1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && python3 -m zipfile -e "$wheel" .)
[ "${NO_BENCH:-0}" = 1 ] && rm -rf "$tmp"/gnnsparse/bin
mkdir -p "$ROOT/.xfer-wheel"
tar -cf - -C "$tmp" . | xz -T2 -6 > "$ROOT/.xfer-wheel/wheel.tar.xz"
ls -la "$ROOT/.xfer-wheel/wheel.tar.xz"
