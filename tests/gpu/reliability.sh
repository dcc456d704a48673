#!/usr/bin/env bash
# Every GPU-side reliability check in one command (~6-7 minutes on an H200, at most 9.5 by the time
# limits below), with a compact summary at the end. Build the CUDA backend first, e.g.
#   GNNSPARSE_SYCL=OFF GNNSPARSE_CUDA_ARCHS=90 python3 -m pip install --no-build-isolation --no-deps -q .
#   bash tests/gpu/reliability.sh                  # logs and JSON figures in $RELIABILITY_OUT or reliability_out/
#
# Steps (each time-limited; a step that fails or times out is reported and the next one still runs):
#   1. pytest, CUDA parts of the reliability tests: property tests (hypothesis "gpu" profile: 300
#      random examples per op, fixed seed), faults (OOM, streams, bad columns), concurrency (a stream
#      per thread), determinism (quick)
#   2. compute-sanitizer memcheck / racecheck / initcheck / synccheck (tests/gpu/sanitize.sh)
#   3. determinism: every op, dtype and index type, 100 repeats (tests/drivers/determinism_check.py)
#   4. scale: nnz > 2^31 with int64 indices, int32 index x width > 2^31 (tests/gpu/scale_check.py)
set -u
cd "$(dirname "$0")/../.."
OUT=${RELIABILITY_OUT:-reliability_out}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
declare -a SUMMARY

if ! "$PY" -c "import gnnsparse as gs, sys; sys.exit(0 if gs.available_backends().get('cuda') else 1)"; then
  echo "reliability: the gnnsparse CUDA backend is not available (build it first, see the header)" >&2
  exit 2
fi
"$PY" -c "import torch, gnnsparse; print('torch', torch.__version__, '|', torch.cuda.get_device_name(0), '|', \
torch.cuda.device_count(), 'GPU(s) | gnnsparse', gnnsparse.__version__)" | tee "$OUT/env.txt"
"$PY" -c "import hypothesis" 2>/dev/null || echo "reliability: hypothesis missing: the property tests will skip"

step() {  # name timeout command... ; records "name: rc, seconds, last summary line"
  local name=$1 lim=$2; shift 2
  local t0=$(date +%s)
  echo "=== $name (limit ${lim}s)"
  timeout -k 10 "$lim" "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  local secs=$(( $(date +%s) - t0 ))
  local last
  last=$(grep -E "passed|failed|error|CLEAN|ERRORS FOUND|bitwise identical|scale_check:" "$OUT/$name.log" | tail -1)
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && last="TIMED OUT ($last)"
  SUMMARY+=("$(printf '%-12s rc=%-4s %4ss  %s' "$name" "$rc" "$secs" "$last")")
}

step pytest 150 env GNNSPARSE_HYPOTHESIS_PROFILE=gpu "$PY" -m pytest -q -p no:cacheprovider -m cuda -rfEX \
  --hypothesis-seed=20261130 --hypothesis-show-statistics \
  tests/test_properties.py tests/test_faults.py tests/test_concurrency.py tests/test_determinism.py
step sanitize 230 env SANITIZE_OUT="$OUT/sanitize" SANITIZE_BUDGET=215 bash tests/gpu/sanitize.sh full
step determinism 50 "$PY" tests/drivers/determinism_check.py --backend cuda --repeats 100 --scale 4 \
  --json "$OUT/determinism_cuda.json"
step scale 140 "$PY" tests/gpu/scale_check.py --json "$OUT/scale.json"

echo
echo "=== reliability summary ($(( $(date +%s) - T0 )) s; logs in $OUT/)"
cat "$OUT/env.txt"
for line in "${SUMMARY[@]}"; do echo "$line"; done
grep -E "^(memcheck|racecheck|initcheck|synccheck) " "$OUT/sanitize.log" || true
grep -E "^(PASS|FAIL) " "$OUT/scale.log" || true
grep -E "^DIFF " "$OUT/determinism.log" | head -5 || true
