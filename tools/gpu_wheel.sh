#!/usr/bin/env bash
# Build the CUDA-only wheel (sm_90, bench executables) for the GPU machine's Python on this machine,
# into .whl/, so that tools/gpu_run.sh installs it there instead of compiling (needs nvcc here).
#   bash tools/gpu_wheel.sh [path of the GPU machine's Python version here, default python3.12]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${1:-python3.12}
VENV=$ROOT/build/gpu-venv-$("$PY" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
[ -x "$VENV/bin/python" ] || { "$PY" -m venv "$VENV" && "$VENV/bin/pip" install -q scikit-build-core pybind11 numpy; }
rm -f "$ROOT"/.whl/gnnsparse-*.whl
GNNSPARSE_SYCL=OFF GNNSPARSE_CUDA=ON GNNSPARSE_CUDA_ARCHS=90 GNNSPARSE_BENCH=ON \
  "$VENV/bin/pip" wheel -q --no-deps --no-build-isolation -Cbuild-dir="$ROOT/build/gpu-wheel" -w "$ROOT/.whl" "$ROOT"
ls -la "$ROOT"/.whl/gnnsparse-*.whl
