#!/usr/bin/env bash
# gnnsparse on an NVIDIA GPU machine, in one call: install the CUDA build, then run each argument
# as a command (from a scratch directory, with the installed package first on sys.path). Without
# arguments it runs the GPU suite: the whole test suite (its CUDA tests run there; SYCL ones skip).
#
#   OUT=/some/dir bash tools/gpu_run.sh                      # the GPU suite (also: `test`), CUDA required
#   OUT=/some/dir bash tools/gpu_run.sh "python $PWD/bench/percall.py --device cuda" "bench_cuda --suite graphs"
#   OUT=/some/dir bash tools/gpu_run.sh "bash $PWD/tests/gpu/reliability.sh"   # sanitizers, determinism, scale
#   REUSE=1 OUT=... bash tools/gpu_run.sh "..."   # a warm machine: keep the last call's compiled install
#   JOBS=8 OUT=... bash tools/gpu_run.sh test      # the suite in 8 processes (pytest-xdist; its wheels
#                                                  # and execnet's from .xfer-wheel/xdist/ when the
#                                                  # machine lacks it), then the failures once more alone
#   (a wheel packed by tools/gpu_pack.sh into .xfer-wheel/, carried with the checkout, is unpacked
#   and used first, unless REUSE=1 finds an install)
#
# Install: a wheel for this Python in .whl/ (made by tools/gpu_wheel.sh on another machine: saves
# the GPU machine the CUDA compile) is installed with pip --no-deps --target; without one the
# package is built here (CUDA only, sm_90, bench executables on). bench_cuda lands on PATH.
# Each command's output goes to the terminal and to $OUT/log.txt; the script's exit status is the
# number of commands that failed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/gnnsparse-out}
SITE=${SITE:-/tmp/gnnsparse-site}
PY=${PYTHON:-python3}
mkdir -p "$OUT" "$SITE"
export PYTHONUNBUFFERED=1 GNNSPARSE_ROOT=$ROOT
exec > >(tee -a "$OUT/log.txt") 2>&1
echo "== $(date -u +%FT%TZ) $(hostname): $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
t0=$SECONDS
tag=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
wheel=$(ls "$ROOT"/.whl/gnnsparse-*-"$tag"-*.whl 2>/dev/null | head -1)
packed=$ROOT/.xfer-wheel/wheel.tar.xz
# the Python layer comes from the working tree: a Python-only change needs no new wheel
python_from_tree() { cp "$ROOT"/python/gnnsparse/*.py "$SITE/gnnsparse/" && cp -r "$ROOT"/python/gnnsparse/*/ "$SITE/gnnsparse/"; }
if [ -f "$packed" ] && ! { [ "${REUSE:-0}" = 1 ] && [ -d "$SITE/gnnsparse" ]; }; then
  # the wheel as an xz tarball of its tree (tools/gpu_pack.sh, carried with the checkout)
  rm -rf "$SITE" && mkdir -p "$SITE" && tar -xJf "$packed" -C "$SITE" || exit 100
  chmod +x "$SITE"/gnnsparse/bin/* 2>/dev/null
  python_from_tree
  echo "== unpacked $(basename "$packed") (Python files from the working tree) in $((SECONDS - t0)) s"
elif [ "${REUSE:-0}" = 1 ] && [ -d "$SITE/gnnsparse" ]; then
  # REUSE=1: a warm machine keeps the previous call's install; only the Python files are refreshed
  python_from_tree
  echo "== reused the install in $SITE (Python files from the working tree)"
elif [ -n "$wheel" ]; then
  "$PY" -m pip install -q --no-deps --no-index --target "$SITE" "$wheel" || exit 100
  python_from_tree
  echo "== installed $(basename "$wheel") (Python files from the working tree) in $((SECONDS - t0)) s"
else
  GNNSPARSE_SYCL=OFF GNNSPARSE_CUDA_ARCHS=90 GNNSPARSE_BENCH=ON "$PY" -m pip install -q --no-deps \
    --no-build-isolation --target "$SITE" "$ROOT" > "$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; exit 100; }
  echo "== built and installed in $((SECONDS - t0)) s"
fi
export PYTHONPATH=$SITE PATH=$SITE/gnnsparse/bin:$PATH
# cuBLAS / cuSPARSE for the bench executables: the toolkit's, else the pip wheels' (nvidia-*)
libdirs=$( { ls -d /usr/local/cuda*/lib64 2>/dev/null; "$PY" -c 'import nvidia, os; print(*nvidia.__path__)' 2>/dev/null \
  | xargs -r -I{} find {} -maxdepth 3 -name "libcu*.so*" -printf "%h\n" 2>/dev/null; } | sort -u | paste -sd: -)
export LD_LIBRARY_PATH=${libdirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cd "$OUT"
"$PY" -c 'import gnnsparse, torch; print("gnnsparse", gnnsparse.__version__, gnnsparse.available_backends(), "torch", torch.__version__)' || exit 100
# no arguments (or `test`): the whole suite from the checkout, its CUDA tests failing (not skipping)
# if CUDA cannot run
# (--durations: the slowest tests, since each whole-suite run costs ~4.5 of a session's 30 minutes)
SUITE="GNNSPARSE_REQUIRE=cuda $PY -m pytest -q -ra -p no:cacheprovider --durations=20 $ROOT/tests"
if [ "${JOBS:-1}" -gt 1 ]; then
  # one GPU shared by JOBS pytest processes: ~6.5 minutes of serial tests (H200, 2026-12-06) are
  # mostly small; a failure is run again by itself (--lf) to tell a clash of processes from a bug
  # (-p no:benchmark: the GPU image's pytest-benchmark warns under xdist, and the suite makes warnings errors)
  "$PY" -c 'import xdist' 2>/dev/null || "$PY" -m pip install -q --no-deps --no-index --target "$SITE" \
    "$ROOT"/.xfer-wheel/xdist/*.whl || exit 100
  # tests marked gpu_exclusive (one fills the GPU's memory to test running out of it) run alone afterwards
  SUITE="( GNNSPARSE_REQUIRE=cuda $PY -m pytest -q -ra -p no:benchmark -n $JOBS --durations=10 -m 'not gpu_exclusive' \
    $ROOT/tests || GNNSPARSE_REQUIRE=cuda $PY -m pytest -q -ra --lf --lfnf=none $ROOT/tests ) \
    && GNNSPARSE_REQUIRE=cuda $PY -m pytest -q -ra -m gpu_exclusive $ROOT/tests"
fi
if [ $# -eq 0 ] || [ "$*" = test ]; then
  set -- "$SUITE"
fi
failed=0
for cmd in "$@"; do
  # `test` among other commands: the suite there too (bash's own `test` would just fail)
  [ "$cmd" = test ] && cmd="$SUITE"
  echo "== $cmd"
  t1=$SECONDS
  bash -c "$cmd"
  rc=$?
  echo "== rc=$rc in $((SECONDS - t1)) s: $cmd"
  [ $rc -eq 0 ] || failed=$((failed + 1))
done
# hypothesis keeps its example database in the working directory: not an output
rm -rf "$OUT/.hypothesis"
echo "== done in $((SECONDS - t0)) s, $failed command(s) failed"
exit $failed
