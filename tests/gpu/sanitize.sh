#!/usr/bin/env bash
# compute-sanitizer over every gnnsparse CUDA kernel: memcheck, racecheck, initcheck, synccheck, each
# running tests/gpu/sanitize_driver.py (every kernel and launch path through the public API, results
# checked against the reference). Prints one summary line per tool; exit status 0 only when every
# tool finished with 0 errors and the driver's results were right.
#
#   bash tests/gpu/sanitize.sh [full|quick]        (default full; logs in $SANITIZE_OUT or sanitize_out/)
#
# Time: SANITIZE_BUDGET seconds in all (default 330, probe included); each tool gets the budget left
# divided by the tools left, and once a tool runs out of time at the full level the remaining tools
# run the quick plan (one dtype x index type through every path, the others through the main ones).
#
# Needs a GPU machine where compute-sanitizer works (on a gVisor sandbox it refuses the device: the
# probe below then exits 3). Only kernels whose mangled names contain "gnnsparse" are instrumented
# (racecheck: only the combine kernels, the ones with shared memory), so torch's own kernels run at
# full speed; the driver builds its inputs on the host and copies them, so initcheck sees them as
# initialized. PYTORCH_NO_CUDA_MEMORY_CACHING=1 gives every tensor its own cudaMalloc, so memcheck
# catches an access just past any array instead of landing inside torch's cached blocks.
set -u
cd "$(dirname "$0")/../.."
LEVEL=${1:-full}
OUT=${SANITIZE_OUT:-sanitize_out}
BUDGET=${SANITIZE_BUDGET:-330}
START=$(date +%s)
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONUNBUFFERED=1

if ! command -v compute-sanitizer >/dev/null; then
  echo "sanitize: compute-sanitizer not found on PATH" >&2
  exit 2
fi
compute-sanitizer --version | tail -1
if ! timeout 60 compute-sanitizer --tool memcheck --error-exitcode 86 "$PY" -c \
    "import torch; x = torch.ones(4, device='cuda'); assert float(x.sum()) == 4" >"$OUT/probe.log" 2>&1; then
  echo "sanitize: compute-sanitizer cannot run a CUDA program here (see $OUT/probe.log):" >&2
  tail -5 "$OUT/probe.log" >&2
  exit 3
fi
FILTER_OPT=--kernel-name
compute-sanitizer --help 2>/dev/null | grep -q -- "--kernel-name" || FILTER_OPT=--filter

fail=0
left=4
printf '%-10s %-6s %-6s %-8s %-55s %s\n' tool level rc seconds "sanitizer summary" driver
run_tool() {  # tool level timeout -> sets rc secs summ drv
  local filt="kns=gnnsparse"
  [ "$1" = racecheck ] && filt="kns=combine"
  local t0=$(date +%s)
  timeout -k 10 "$3" compute-sanitizer --tool "$1" --error-exitcode 86 --print-limit 30 \
    "$FILTER_OPT" "$filt" "$PY" tests/gpu/sanitize_driver.py --level "$2" ${SANITIZE_DRIVER_ARGS:-} >"$OUT/$1.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  summ=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$OUT/$1.log" | tail -1 | sed 's/^========= //')
  drv=$(grep -E "^sanitize_driver:" "$OUT/$1.log" | tail -1 | sed 's/^sanitize_driver: //')
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && summ="TIMED OUT after ${3}s"
}
for tool in memcheck racecheck initcheck synccheck; do
  remaining=$(( BUDGET - ($(date +%s) - START) ))
  TOOL_TIMEOUT=$(( remaining / left ))
  [ $TOOL_TIMEOUT -lt 45 ] && TOOL_TIMEOUT=45
  run_tool "$tool" "$LEVEL" "$TOOL_TIMEOUT"
  if { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && [ "$LEVEL" = full ]; then
    # out of time at the full plan: this tool and the rest run the quick plan
    printf '%-10s %-6s %-6s %-8s %s\n' "$tool" full "$rc" "$secs" "$summ: retrying with the quick plan"
    LEVEL=quick
    remaining=$(( BUDGET - ($(date +%s) - START) ))
    TOOL_TIMEOUT=$(( remaining / left ))
    [ $TOOL_TIMEOUT -lt 45 ] && TOOL_TIMEOUT=45
    run_tool "$tool" "$LEVEL" "$TOOL_TIMEOUT"
  fi
  left=$(( left - 1 ))
  printf '%-10s %-6s %-6s %-8s %-55s %s\n' "$tool" "$LEVEL" "$rc" "$secs" "${summ:-no summary (see $OUT/$tool.log)}" "${drv:-driver did not finish}"
  # memcheck / initcheck / synccheck: "ERROR SUMMARY: 0 errors"; racecheck: "... (0 errors, N warnings)"
  if [ $rc -ne 0 ] || ! echo "$summ" | grep -qE "ERROR SUMMARY: 0 errors|\(0 errors"; then
    fail=1
    grep -E "^=========  *(Invalid|Uninitialized|Race|Barrier|Error|.*hazard)" "$OUT/$tool.log" | head -5
  fi
  case "$drv" in *", 0 wrong results"*) ;; *) fail=1 ;; esac
done
echo "sanitize: logs in $OUT/; overall $([ $fail -eq 0 ] && echo CLEAN || echo 'ERRORS FOUND')"
exit $fail
