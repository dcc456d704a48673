#!/usr/bin/env bash
# The wheel of tools/gpu_wheel.sh as an xz tarball of its unpacked tree, in .xfer-wheel/, for a GPU
# machine reached through a transfer that the wheel (~62 MB with bench_cuda) and the checkout
# together exceed (64 MiB): name `.xfer-wheel` in the device call's carry; tools/gpu_run.sh
# unpacks it into its install folder (~56 MB packed).
#   bash tools/gpu_wheel.sh <python3.12> && bash tools/gpu_pack.sh
#   NO_BENCH=1 bash tools/gpu_pack.sh   # without the bench executables (gnnsparse/bin): when the
#                                       # packed tree would pass the limit and no bench_cuda runs
# Also fetches pytest-xdist and execnet (pure-Python wheels, ~0.1 MB) into .xfer-wheel/xdist/ for
# `JOBS=8 bash tools/gpu_run.sh test` on a machine without them (best effort: skipped offline).
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
python3 -m pip download -q --no-deps -d "$ROOT/.xfer-wheel/xdist" pytest-xdist execnet 2>/dev/null \
  || echo "(pytest-xdist not fetched: JOBS > 1 needs it on the GPU machine)"
