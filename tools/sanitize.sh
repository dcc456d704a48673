#!/usr/bin/env bash
# compute-sanitizer over every gnnsparse CUDA kernel: memcheck, racecheck, initcheck, synccheck, each
# running tools/sanitize_driver.py (every kernel and launch path through the public API, results
# checked against the reference). Prints one summary line per tool; exit status 0 only when every
# tool finished with 0 errors and the driver's results were right.
#
#   bash tools/sanitize.sh [full|quick]        (default full; logs in $SANITIZE_OUT or sanitize_out/)
#
# Needs a GPU machine where compute-sanitizer works (on a gVisor sandbox it refuses the device: the
# probe below then exits 3). Only kernels whose mangled names contain "gnnsparse" are instrumented
# (racecheck: only the combine kernels, the ones with shared memory), so torch's own kernels run at
# full speed; the driver builds its inputs on the host and copies them, so initcheck sees them as
# initialized. PYTORCH_NO_CUDA_MEMORY_CACHING=1 gives every tensor its own cudaMalloc, so memcheck
# catches an access just past any array instead of landing inside torch's cached blocks.
set -u
cd "$(dirname "$0")/.."
LEVEL=${1:-full}
OUT=${SANITIZE_OUT:-sanitize_out}
TOOL_TIMEOUT=${SANITIZE_TIMEOUT:-170}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONUNBUFFERED=1

if ! command -v compute-sanitizer >/dev/null; then
  echo "sanitize: compute-sanitizer not found on PATH" >&2
  exit 2
fi
compute-sanitizer --version | tail -1
if ! timeout 120 compute-sanitizer --tool memcheck --error-exitcode 86 "$PY" -c \
    "import torch; x = torch.ones(4, device='cuda'); assert float(x.sum()) == 4" >"$OUT/probe.log" 2>&1; then
  echo "sanitize: compute-sanitizer cannot run a CUDA program here (see $OUT/probe.log):" >&2
  tail -5 "$OUT/probe.log" >&2
  exit 3
fi
FILTER_OPT=--kernel-name
compute-sanitizer --help 2>/dev/null | grep -q -- "--kernel-name" || FILTER_OPT=--filter

fail=0
printf '%-10s %-6s %-8s %-55s %s\n' tool rc seconds "sanitizer summary" driver
for tool in memcheck racecheck initcheck synccheck; do
  case $tool in
    racecheck) filt="kns=combine" ;;
    *) filt="kns=gnnsparse" ;;
  esac
  t0=$(date +%s)
  timeout "$TOOL_TIMEOUT" compute-sanitizer --tool "$tool" --error-exitcode 86 --print-limit 30 \
    "$FILTER_OPT" "$filt" "$PY" tools/sanitize_driver.py --level "$LEVEL" ${SANITIZE_DRIVER_ARGS:-} >"$OUT/$tool.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - t0 ))
  summ=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$OUT/$tool.log" | tail -1 | sed 's/^========= //')
  drv=$(grep -E "^sanitize_driver:" "$OUT/$tool.log" | tail -1 | sed 's/^sanitize_driver: //')
  [ $rc -eq 124 ] && summ="TIMED OUT after ${TOOL_TIMEOUT}s (try: bash tools/sanitize.sh quick)"
  printf '%-10s %-6s %-8s %-55s %s\n' "$tool" "$rc" "$secs" "${summ:-no summary (see $OUT/$tool.log)}" "${drv:-driver did not finish}"
  # memcheck / initcheck / synccheck: "ERROR SUMMARY: 0 errors"; racecheck: "... (0 errors, N warnings)"
  if [ $rc -ne 0 ] || ! echo "$summ" | grep -qE "ERROR SUMMARY: 0 errors|\(0 errors"; then
    fail=1
    grep -E "^=========  *(Invalid|Uninitialized|Race|Barrier|Error|.*hazard)" "$OUT/$tool.log" | head -5
  fi
  case "$drv" in *", 0 wrong results"*) ;; *) fail=1 ;; esac
done
echo "sanitize: logs in $OUT/; overall $([ $fail -eq 0 ] && echo CLEAN || echo 'ERRORS FOUND')"
exit $fail
