#!/usr/bin/env bash
# The whole device procedure for the CUDA backend, in one call of the device tool:
#   build (sm_90, bench on) -> install into /tmp/site -> pytest tests/test_cuda.py -> bench_cuda.
# Usage: bash bench/run_h200.sh [all|test|bench|graphs|grid]   (logs and tables under $OUT)
set -uo pipefail
STAGE=${1:-all}
OUT=${OUT:-/tmp/gnnsparse_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/device.txt"
B=/tmp/gsbuild
SITE=/tmp/site
t0=$(date +%s)
cmake -S . -B $B -G Ninja -DGNNSPARSE_SYCL=OFF -DGNNSPARSE_CUDA=ON -DGNNSPARSE_BENCH=ON \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DGNNSPARSE_PTXAS_VERBOSE=ON \
  -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > "$OUT/build.log" 2>&1 &&
cmake --build $B -j16 >> "$OUT/build.log" 2>&1 &&
cmake --install $B --prefix $SITE >> "$OUT/build.log" 2>&1
rc=$?
echo "build rc=$rc in $(( $(date +%s) - t0 )) s; spills:"
grep -c "bytes spill stores" "$OUT/build.log"; grep "spill" "$OUT/build.log" | grep -v " 0 bytes spill stores" | sort | uniq -c | head
if [ $rc -ne 0 ]; then tail -60 "$OUT/build.log"; exit 1; fi
cp -r python/gnnsparse/*.py $SITE/gnnsparse/
export PYTHONPATH=$SITE
python3 -c "import gnnsparse._cuda as c; print('cuda backend available:', c.available(), c.extension().device_name(0))"

if [ "$STAGE" = all ] || [ "$STAGE" = test ]; then
  t0=$(date +%s)
  timeout 300 python3 -m pytest tests/test_cuda.py -q -rs -p no:cacheprovider -o addopts="" \
    -W "ignore::DeprecationWarning" -W "ignore::UserWarning" 2>&1 | tee "$OUT/pytest.log" | tail -40
  echo "pytest done in $(( $(date +%s) - t0 )) s"
fi
BENCH=$SITE/gnnsparse/bin/bench_cuda
if [ "$STAGE" = all ] || [ "$STAGE" = bench ] || [ "$STAGE" = graphs ]; then
  timeout 200 $BENCH --suite graphs --products --csv "$OUT/bench_graphs.csv" --json "$OUT/bench_graphs.json" 2>&1 | tee "$OUT/bench.log"
fi
if [ "$STAGE" = all ] || [ "$STAGE" = bench ] || [ "$STAGE" = grid ]; then
  # grid rows go to bench.log only; the summary (geomeans) is printed
  timeout 280 $BENCH --suite grid --csv "$OUT/bench_grid.csv" --json "$OUT/bench_grid.json" 2>&1 | tee -a "$OUT/bench.log" | grep -v "^grid"
fi
echo "done in ${SECONDS} s"
