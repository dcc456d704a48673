#!/usr/bin/env bash
# Ahead-of-time check of the ESIMD kernels for the Intel Data Center GPU Max 1550 (pvc) without one:
#   1. the SYCL kernel_compiler (the run-time path, libsycl-jit) compiles every instance of an entry
#      file (sycl/kernels/esimd/<op>.hpp) to SPIR-V; SYCL_DUMP_IMAGES=1 makes the runtime write it;
#   2. `ocloc compile -spirv_input -device pvc -options -vc-codegen` (the ESIMD / vector-compute
#      backend of IGC) turns that SPIR-V into pvc machine code.
# Nothing runs: this proves the SPIR-V is accepted and code-generated for pvc by this ocloc.
#
# usage: tests/drivers/esimd_aot.sh [--all | --smoke] [--per-instance] [--out DIR] [--python PY]
#   --all           every instance the launchers can pick (default; SDDMM and SpMM take ~1 min as one
#                   module each; FusedMM falls back to one module per instance, ~15 min on 2 cores)
#   --smoke         all SDDMM, SpMM, XMX tiles and panel instances plus a few FusedMM ones (what the test runs; a
#                   FusedMM abort is reported as WARN and does not fail --smoke, see docs/esimd.md)
#   --per-instance  one SPIR-V module and one ocloc run per instance (names each failure)
#   --only OP       one of sddmm, spmm, fusedmm, tiles (the XMX / DPAS tiled SpMM), panel (the row-panel SpMM)
# Needs: g++, a Python environment with intel-sycl-rt + intel-opencl-rt (the SYCL headers, libsycl,
# the OpenCL CPU device), and ocloc (Debian/Ubuntu: apt-get install intel-opencl-icd).
# When a whole-entry module fails, the entry is retried one instance at a time and each failing
# instance is printed as "FAIL <name>". Exit status: 0 when every instance compiled, 1 otherwise.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
MODE=all PER=0 OUT="" PY=${PYTHON:-} ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --all) MODE=all ;;
    --smoke) MODE=smoke ;;
    --per-instance) PER=1 ;;
    --only) ONLY=$2; shift ;;
    --out) OUT=$2; shift ;;
    --python) PY=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PY=$ROOT/.venv/bin/python; else PY=python3; fi
fi
command -v ocloc >/dev/null || { echo "ocloc not found (apt-get install intel-opencl-icd)" >&2; exit 2; }
PREFIX=$("$PY" -c 'import sys; print(sys.prefix)')
[ -f "$PREFIX/include/sycl/sycl.hpp" ] || { echo "no SYCL headers under $PREFIX" >&2; exit 2; }
export OCL_ICD_FILENAMES=${OCL_ICD_FILENAMES:-$PREFIX/lib/libintelocl.so}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "ocloc: $(command -v ocloc) ($(dpkg-query -W -f='${Package} ${Version}' intel-opencl-icd 2>/dev/null || echo 'version unknown'))"
echo "output: $OUT"

# the two helpers
g++ -std=c++17 -O1 -I"$ROOT/sycl" -I"$ROOT/include" "$HERE/esimd_instances.cpp" -o "$OUT/esimd_instances" || exit 2
g++ -std=c++17 -O1 -DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING -isystem "$PREFIX/include" "$HERE/rtc_check.cpp" \
  -o "$OUT/rtc_check" -L"$PREFIX/lib" -lsycl -Wl,-rpath,"$PREFIX/lib" || exit 2

# ocloc 22.43 (IGC 1.0.12504, Debian bookworm) aborts (SIGABRT, no message) on some of these modules
# depending on the address-space layout: the same SPIR-V file passes and fails on consecutive runs.
# With ASLR off (setarch -R) the outcome is repeatable (but some modules then always fail), so the
# first attempt runs with ASLR off and an abort is retried up to TRIES times with ASLR on.
TRIES=${ESIMD_AOT_TRIES:-8}
NOASLR=""
if setarch "$(uname -m)" -R true 2>/dev/null; then NOASLR="setarch $(uname -m) -R"; fi

# FusedMM instances in the smoke set: the tiles the launcher picks for F, D <= 32.
SMOKE_FUSED=(
  "gnnsparse::esimd::fusedmm<float, int, 16, 16, 16, false>"
  "gnnsparse::esimd::fusedmm<float, int, 16, 16, 16, true>"
  "gnnsparse::esimd::fusedmm<float, int, 8, 32, 32, false>"
  "gnnsparse::esimd::fusedmm<float, int, 8, 32, 32, true>"
  "gnnsparse::esimd::fusedmm<float, int, 16, 32, 32, true>"
)

# aot <tag> <entry> <name>...: SPIR-V of the names, then ocloc; prints OK/FAIL lines.
aot() {
  local tag=$1 entry=$2; shift 2
  local d="$OUT/$tag"
  rm -rf "$d"; mkdir -p "$d"
  local t0=$SECONDS
  if ! (cd "$d" && SYCL_DUMP_IMAGES=1 "$OUT/rtc_check" "$ROOT/sycl/kernels" "$ROOT/include" "$entry" "$@" > rtc.log 2>&1); then
    echo "FAIL $tag: kernel_compiler (see $d/rtc.log)"; return 1
  fi
  local spv; spv=$(ls "$d"/*.spv 2>/dev/null | head -1)
  [ -n "$spv" ] || { echo "FAIL $tag: no SPIR-V dumped"; return 1; }
  local rc=1 try pre
  for try in $(seq 1 "$TRIES"); do
    pre=""; [ "$try" -eq 1 ] && pre=$NOASLR
    (cd "$d" && $pre ocloc compile -file "$(basename "$spv")" -spirv_input -device pvc -options "-vc-codegen" \
       -output "$tag" > ocloc.log 2>&1) 2> /dev/null
    rc=$?
    [ $rc -eq 134 ] || break  # SIGABRT: try again with another address-space layout (see above)
  done
  [ "$try" -gt 1 ] && [ $rc -eq 0 ] && echo "note $tag: ocloc aborted $((try - 1)) time(s) before succeeding"
  local size; size=$(stat -c %s "$spv")
  if [ $rc -eq 0 ] && ls "$d"/*pvc*.bin > /dev/null 2>&1; then
    echo "OK   $tag: $# instance(s), SPIR-V $size bytes -> $(basename "$(ls "$d"/*pvc*.bin | head -1)") in $((SECONDS - t0)) s"
    return 0
  fi
  echo "FAIL $tag: ocloc rc=$rc $(grep -m1 -i error "$d/ocloc.log")"
  return 1
}

status=0
for entry in esimd/sddmm.hpp esimd/spmm.hpp esimd/fusedmm.hpp esimd/tiles.hpp esimd/panel.hpp; do
  op=$(basename "$entry" .hpp)
  [ -z "$ONLY" ] || [ "$ONLY" = "$op" ] || continue
  mapfile -t names < <("$OUT/esimd_instances" "$entry")
  per=$PER
  if [ "$MODE" = smoke ] && [ "$op" = fusedmm ]; then names=("${SMOKE_FUSED[@]}"); per=1; TRIES=${ESIMD_AOT_TRIES:-3}; fi
  if [ $per -eq 0 ] && aot "$op" "$entry" "${names[@]}"; then continue; fi
  # one instance at a time: name every failure
  ok=0 bad=0
  for i in "${!names[@]}"; do
    if aot "$op-$i" "$entry" "${names[$i]}" > "$OUT/$op-$i.txt"; then ok=$((ok + 1)); else
      bad=$((bad + 1)); echo "FAIL ${names[$i]}"; fi
  done
  echo "$op: $ok of ${#names[@]} instances compiled for pvc, $bad failed"
  if [ $bad -ne 0 ]; then
    if [ "$MODE" = smoke ] && [ "$op" = fusedmm ]; then
      echo "WARN fusedmm: ocloc 22.43 aborts on FusedMM modules nondeterministically (docs/esimd.md); not fatal in --smoke"
    else
      status=1
    fi
  fi
done
exit $status
