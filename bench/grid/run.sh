#!/usr/bin/env bash
# Builds bench/grid/grid_bench with nvcc and runs it (one GPU call, ~5 minutes on an H200).
#   bash bench/grid/run.sh [all|quick|grid|sweep|build]     (default: all)
#     build : compile only (ARCHS="80 90" to check both targets)
#     quick : mma ceiling + 8 grid cases, with the softmax and unsplit-path checks
#     grid  : the 72-case grid (SpMM, SDDMM, FusedMM)
#     sweep : density sweep 0.002 .. 0.3, crossover densities for bench/grid/tiles/tiled_policy.cpp
#     all   : quick, grid, sweep
# Outputs: stdout tables; CSV and logs under $OUT (default /tmp/grid_out).
set -uo pipefail
MODE=${1:-all}
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/grid_out}
B=${BUILD:-/tmp/grid_build}
ARCHS=${ARCHS:-90}
mkdir -p "$OUT" "$B"

NVCC=${NVCC:-nvcc}
CUDA_ROOT=$(dirname "$(dirname "$(readlink -f "$(command -v $NVCC)")")")
INC=(); LIB=()
# cuBLAS / cuSPARSE headers and libraries: the toolkit's, else the pip wheels (nvidia-cublas ...)
for d in "$CUDA_ROOT/include" /usr/local/cuda/include; do [ -f "$d/cublas_v2.h" ] && INC+=(-I"$d") && break; done
if [ ${#INC[@]} -eq 0 ]; then
  PYNV=$(python3 -c "import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0] + '/x'))" 2>/dev/null)
  for d in "$PYNV"/cu13 "$PYNV"/cublas "$PYNV"/cu12; do
    [ -f "$d/include/cublas_v2.h" ] && INC+=(-I"$d/include") && LIB+=(-L"$d/lib" -Xlinker -rpath="$d/lib")
  done
  for d in "$PYNV"/cusparse "$PYNV"/cu13; do [ -d "$d/lib" ] && LIB+=(-L"$d/lib" -Xlinker -rpath="$d/lib"); done
fi
for d in "$CUDA_ROOT/lib64" /usr/local/cuda/lib64; do [ -d "$d" ] && LIB+=(-L"$d"); done
GENCODE=()
for a in $ARCHS; do GENCODE+=(-gencode "arch=compute_$a,code=sm_$a"); done
FLAGS=(-std=c++17 -O3 --expt-relaxed-constexpr -lineinfo "${GENCODE[@]}" -Iinclude -Icuda -Ibench/grid/tiles -Ibench "${INC[@]}")

t0=$(date +%s)
SRCS=(bench/grid/tiles/tile_cache.cu bench/grid/tiles/tiled_spmm.cu bench/grid/tiles/tiled_sddmm.cu bench/grid/tiles/tiled_fusedmm.cu
      bench/grid/tiles/tiled_policy.cpp cuda/spmm.cu cuda/panel.cu cuda/sddmm.cu cuda/fusedmm.cu cuda/device.cu bench/grid/grid_bench.cu)
pids=(); objs=()
for s in "${SRCS[@]}"; do
  o="$B/$(echo "$s" | tr '/' '_').o"; objs+=("$o")
  if [[ "$s" == *.cpp ]]; then x=(-x cu); else x=(); fi
  ( $NVCC "${FLAGS[@]}" "${x[@]}" -Xptxas -v -c "$s" -o "$o" > "$o.log" 2>&1 || { echo "compile failed: $s"; tail -30 "$o.log"; exit 1; } ) &
  pids+=($!)
done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done
if [ $rc -ne 0 ]; then echo "build failed"; exit 1; fi
# link cublas / cusparse: libX.so from the toolkit, else the versioned file of a wheel
LINK=()
for l in cublas cusparse; do
  f=""
  for a in "${LIB[@]}"; do
    d=${a#-L}; [ "$d" = "$a" ] && continue
    if [ -e "$d/lib$l.so" ]; then f="$d/lib$l.so"; break; fi
    g=$(ls "$d"/lib$l.so.* 2>/dev/null | head -1); [ -n "$g" ] && f="$g" && break
  done
  if [ -n "$f" ]; then LINK+=(-Xlinker "$f" -Xlinker -rpath="$(dirname "$f")"); else LINK+=(-l$l); fi
done
$NVCC "${GENCODE[@]}" "${objs[@]}" "${LIB[@]}" "${LINK[@]}" -o "$B/grid_bench" > "$B/link.log" 2>&1 || { cat "$B/link.log"; exit 1; }
cat "$B"/*tiles*.o.log > "$OUT/ptxas_tiles.log" 2>/dev/null
echo "built in $(( $(date +%s) - t0 )) s; tile kernels with spills: $(grep -c ' [1-9][0-9]* bytes spill' "$OUT/ptxas_tiles.log")"
[ "$MODE" = build ] && exit 0

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv,noheader 2>/dev/null
BIN="$B/grid_bench"
rc=0
if [ "$MODE" = all ] || [ "$MODE" = quick ]; then
  timeout 90 "$BIN" --quick --ceiling --csv "$OUT/quick.csv" 2>&1 | tee "$OUT/quick.log" || rc=1
fi
if [ "$MODE" = all ] || [ "$MODE" = grid ]; then
  timeout 200 "$BIN" --csv "$OUT/grid72.csv" 2>&1 | tee "$OUT/grid72.log" || rc=1
fi
if [ "$MODE" = all ] || [ "$MODE" = sweep ]; then
  timeout 120 "$BIN" --no-grid --sweep --csv "$OUT/sweep.csv" 2>&1 | tee "$OUT/sweep.log" || rc=1
fi
echo; echo "==== summaries (full tables in $OUT/*.log, CSV in $OUT/*.csv) ===="
for f in quick grid72 sweep; do
  [ -f "$OUT/$f.log" ] || continue
  echo "---- $f"; grep -E "^(mma.sync ceiling|cache build cost|policy:)" "$OUT/$f.log"
  sed -n '/^geomean ratios/,$p' "$OUT/$f.log"; sed -n '/^measured crossover/,/fusedmm:/p' "$OUT/$f.log"
  grep "CHECK FAILED" "$OUT/$f.log" | head -5
done
echo "done in ${SECONDS} s (rc=$rc)"
exit $rc
