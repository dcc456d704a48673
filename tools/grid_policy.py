"""Replay the dense-ish route's SpMM policy on measured grid runs, for several work thresholds.

Reads CSVs written by `GNNSPARSE_DENSE=on python bench/grid_dense.py --ops spmm --csv F` (every
cell routed, so each row has the routed time `ours_us` and the kernels' time `kernels_us` of the
same run) and applies `gnnsparse._dense.SPMM_CROSSOVER` with its `min_work` (nnz x N) set to each
threshold: a cell the policy routes takes `ours_us`, the others `kernels_us`. Per run and
threshold: the routed cells (N = 32 / 128), how many of them were slower than the kernels, and the
geomean speedup of the policy's choice over torch.sparse.mm (`cusparse_us`) and over dense cuBLAS
(`dense_us`, with the worst cell).

    python tools/grid_policy.py RUN.csv [RUN2.csv ...] [--thresholds 1e9,6e8,4e8,0] [--precision fp32]
"""
from __future__ import annotations

import argparse
import copy
import csv
import math
import statistics

from gnnsparse import _dense


def _geo(xs):
    return statistics.geometric_mean(xs) if xs else float("nan")


def replay(rows, precision, threshold):
    pol = copy.copy(_dense.SPMM_CROSSOVER)
    pol.min_work = threshold
    out = {"routed": {32: 0, 128: 0}, "slower": 0, "vs_sparse": {}, "vs_dense": {}}
    for r in rows:
        M, K, nnz, N = (int(r[k]) for k in ("M", "K", "nnz", "N"))
        routed = _dense.prefer(pol, precision, M, K, nnz, N)
        t = float(r["ours_us"]) if routed else float(r["kernels_us"])
        if routed:
            out["routed"][N] = out["routed"].get(N, 0) + 1
            out["slower"] += float(r["ours_us"]) > float(r["kernels_us"])
        out["vs_sparse"].setdefault(N, []).append(float(r["cusparse_us"]) / t)
        out["vs_dense"].setdefault(N, []).append(float(r["dense_us"]) / t)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--thresholds", default="1e9,6e8,4e8,0")
    ap.add_argument("--precision", default="fp32")
    a = ap.parse_args(argv)
    ts = [float(t) for t in a.thresholds.split(",")]
    print(f"policy {dict(_dense.SPMM_CROSSOVER)}, from {_dense.SPMM_CROSSOVER.min_for(a.precision)} elements; "
          f"rule now nnz x N >= {_dense.SPMM_CROSSOVER.min_work:g}")
    print(f"{'run':28s} {'T':>6s} {'routed 32/128':>13s} {'slower':>6s} {'vs sparse 32/128':>17s} "
          f"{'vs dense 32/128 (worst)':>30s}")
    for path in a.csv:
        with open(path, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["op"] == "spmm" and r["precision"] == a.precision]
        if not rows:
            raise SystemExit(f"{path}: no spmm rows at {a.precision}")
        if any(r["route"] != "dense" for r in rows):
            print(f"  ({path}: some cells did not take the route; run the bench with GNNSPARSE_DENSE=on)")
        name = path.rsplit("/", 1)[-1][:28]
        for t in ts:
            o = replay(rows, a.precision, t)
            vs = o["vs_sparse"]
            vd = o["vs_dense"]
            print(f"{name:28s} {t:6.0e} {o['routed'].get(32, 0):6d}/{o['routed'].get(128, 0):<6d} {o['slower']:6d} "
                  f"{_geo(vs.get(32, [])):7.2f}x/{_geo(vs.get(128, [])):.2f}x "
                  f"{_geo(vd.get(32, [])):8.2f}x ({min(vd.get(32, [math.nan])):.2f}) / "
                  f"{_geo(vd.get(128, [])):.2f}x ({min(vd.get(128, [math.nan])):.2f})")


if __name__ == "__main__":
    main()
