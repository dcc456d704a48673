#!/usr/bin/env bash
# Kernel performance on one NVIDIA GPU in one call (through tools/gpu_run.sh): the wheel of .whl/ (tools/gpu_wheel.sh),
# bench_cuda --suite issue for this build ("after") and, when .whl/bench_cuda_before exists (the same
# bench source linked against the previous kernels), for that one ("before"), the locality-reordering
# bench, then the max/min infinity checks (tests/gpu/inf_check.py) and the CUDA and reordering tests, and a
# before/after table.
#
#   OUT=/some/dir bash tools/gpu_perf.sh [tests|bench|all]     (default all)
#
# Optional: a pymetis wheel in .whl/ (installed next to the package) enables method="metis".
# Everything lands in $OUT: log.txt, issue_after.csv, issue_before.csv, reorder.csv, summary.txt.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/gnnsparse-perf}
SITE=${SITE:-/tmp/gnnsparse-site}
WHAT=${1:-all}
PY=${PYTHON:-python3}
mkdir -p "$OUT" "$SITE"
export PYTEST_ADDOPTS="-W ignore::UserWarning -W ignore::DeprecationWarning -p no:cacheprovider"
metis=$(ls "$ROOT"/.whl/pymetis-*.whl 2>/dev/null | head -1)
[ -n "$metis" ] && "$PY" -m pip install -q --no-deps --no-index --target "$SITE" "$metis" >/dev/null 2>&1
cmds=()
if [ "$WHAT" = bench ] || [ "$WHAT" = all ]; then
  cmds+=("timeout 150 bench_cuda --suite issue --reps 30 --repeats 10 --csv $OUT/issue_after.csv")
  [ -x "$ROOT/.whl/bench_cuda_before" ] && \
    cmds+=("timeout 120 $ROOT/.whl/bench_cuda_before --suite issue --reps 30 --repeats 10 --csv $OUT/issue_before.csv")
  cmds+=("timeout 150 $PY -m gnnsparse.bench.reorder --n 1000000 --degree 20 --classes 1000 --widths 32,128 --reps 20 --csv $OUT/reorder.csv")
fi
if [ "$WHAT" = tests ] || [ "$WHAT" = all ]; then
  cmds+=("$PY $ROOT/tests/gpu/inf_check.py > $OUT/inf_check.txt 2>&1; r=\$?; grep -c ': ok' $OUT/inf_check.txt; grep -v ': ok' $OUT/inf_check.txt | tail -5; exit \$r")
  cmds+=("timeout 200 $PY -m pytest -q -x $ROOT/tests/test_cuda.py $ROOT/tests/test_reorder.py 2>&1 | tail -15")
fi
OUT=$OUT SITE=$SITE bash "$ROOT/tools/gpu_run.sh" "${cmds[@]}"
rc=$?
"$PY" - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import csv, os, sys
out = sys.argv[1]
def rows(name):
    p = os.path.join(out, name)
    return {(r["case"], r["op"], int(r["N"])): r for r in csv.DictReader(open(p))} if os.path.exists(p) else {}
after, before = rows("issue_after.csv"), rows("issue_before.csv")
if after:
    print(f"{'case':18s} {'op':9s} {'C/K':>4s} {'before us':>10s} {'after us':>10s} {'speedup':>8s} "
          f"{'vs cuSPARSE':>11s} {'% floor':>8s} {'bitwise':>7s}")
    for key, r in after.items():
        b = before.get(key)
        bt = float(b["ours_us"]) if b else float("nan")
        at = float(r["ours_us"])
        ref = float(r["ratio"]) if float(r["ref_us"]) > 0 else float("nan")
        print(f"{key[0][:18]:18s} {key[1]:9s} {key[2]:4d} {bt:10.1f} {at:10.1f} {bt / at:8.2f} "
              f"{ref:11.2f} {float(r['pct_copy_bw']):8.0f} {r['ours_bitwise']:>7s}")
    for tag, rs in (("before", before), ("after", after)):
        if not rs:
            continue
        t = {k: float(v["ours_us"]) for k, v in rs.items()}
        u = "uniform_1M_10M"
        odd = [f"C={c}: {t[(u, 'spmm', c)] / t[(u, 'spmm', n)]:.2f}x C={n}"
               for c, n in ((33, 64), (65, 96), (129, 160)) if (u, "spmm", c) in t and (u, "spmm", n) in t]
        mx = [f"C={c}: {t[(u, 'spmm_max', c)] / t[(u, 'spmm', c)]:.2f}x"
              for c in (16, 32, 128) if (u, "spmm_max", c) in t]
        print(f"{tag}: odd widths {', '.join(odd)} (target <= 1.15x); max+arg / sum {', '.join(mx)} (target <= 1.3x)")
PY
exit $rc
