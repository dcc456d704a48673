#!/usr/bin/env bash
# Build gnnsparse with the CUDA backend only and run `gnnsparse bench` on an NVIDIA H200.
#
# Run from the repository root on the GPU machine (nvcc, torch with CUDA, pybind11,
# scikit-build-core, cmake and ninja installed; no internet needed):
#
#   OUT=/some/dir scripts/run_bench_h200.sh                    # graph suite (default)
#   OUT=/some/dir scripts/run_bench_h200.sh grid72              # the seed-000 grid
#   OUT=/some/dir scripts/run_bench_h200.sh graphs --ops spmm   # extra arguments go to `gnnsparse bench`
#
# Writes $OUT/bench-<suite>/{results.json,results.csv,table.md,speedup.png,bandwidth.png} and
# $OUT/build.log; table.md is what docs/performance.md's H200 section pastes. Without rich /
# matplotlib installed the table is plain text and the PNGs are skipped (the run says so).
# Each command of the device tool may run 10 minutes: the build and one suite fit; run grid72 and
# graphs as two calls (SKIP_BUILD=1 on the second when the machine is still warm).
set -euo pipefail

SUITE="${1:-graphs}"
shift || true
OUT="${OUT:-$PWD/bench-out}"
PY="${PYTHON:-python}"
mkdir -p "$OUT"

echo "== $(date -u +%FT%TZ) host: $(hostname) suite: $SUITE"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name(0))'

if [ "${SKIP_BUILD:-0}" != "1" ]; then
  echo "== building gnnsparse (CUDA only, sm_90)"
  t0=$(date +%s)
  if ! GNNSPARSE_SYCL=OFF GNNSPARSE_CUDA_ARCHS=90 "$PY" -m pip install --no-build-isolation --no-deps . \
        > "$OUT/build.log" 2>&1; then
    tail -n 60 "$OUT/build.log"
    echo "build failed: full log in $OUT/build.log" >&2
    exit 1
  fi
  echo "   built in $(( $(date +%s) - t0 )) s"
fi

# run from outside the source tree so `import gnnsparse` finds the installed package with its
# compiled CUDA module, not python/ in the checkout
cd "$OUT"
"$PY" -m gnnsparse info
for mod in rich matplotlib torch_geometric; do
  "$PY" -c "import $mod" 2>/dev/null && echo "   $mod: yes" || echo "   $mod: not installed"
done

echo "== gnnsparse bench --device cuda --suite $SUITE $*"
t0=$(date +%s)
set +e
"$PY" -m gnnsparse bench --device cuda --suite "$SUITE" --repeat 50 --out "$OUT/bench-$SUITE" \
    --no-progress "$@"
rc=$?
set -e
echo "== bench finished in $(( $(date +%s) - t0 )) s with exit code $rc (1: a case failed its check)"
echo "== $OUT/bench-$SUITE/table.md:"
cat "$OUT/bench-$SUITE/table.md" 2>/dev/null || true
exit $rc
