"""Tiled vs sparse SYCL SpMM on the OpenCL CPU device, against NumPy's dense product and scipy.

    python bench/tiles_cpu.py [--grid] [--sweep] [--reps 5] [--json out.json]

--grid: M, K in 1024..4096 (the smaller cases of the dense-ish grid), density 0.3 / 0.2 / 0.1,
width N = 32 / 128, round(density * K) uniformly placed entries per row with N(0, 1) values
(gnnsparse.bench.generators.grid_matrix), features uniform in [-1, 1]. Per case,
in one process: gs.spmm with GNNSPARSE_SYCL_TILES=on (tiled kernel) and =off (sparse kernel),
NumPy A_dense @ X (the densify, A.toarray(), timed separately and not included), scipy A @ X.
Median of --reps rounds (the methods alternate within a round) after one warm-up round. Results are checked first (tiled == sparse
kernel == float32 edge-order reference on a few rows, bitwise).
--sweep: density 0.002 .. 0.3 at three shapes, tiled vs sparse: the crossover density per shape.
--sddmm: the same grid and sweep for SDDMM (dot, F = N, one head): gs.sddmm tiled vs sparse vs
NumPy's dense X @ Y.T (the whole M x K product; picking the sampled entries not included).
--panel: the row-panel SpMM (sycl/kernels/panel.hpp) on the same grid: gs.spmm with
GNNSPARSE_SYCL_PANEL=on (the panel kernel, the policy's chunk), =off (the sparse kernel), unset (the
method choice: "auto"), the tiles (GNNSPARSE_SYCL_TILES=on), NumPy's dense product and scipy. Every
call is timed by the wall clock and by the process's CPU time (all threads: robust to other processes
taking the cores of a shared machine); medians of --reps alternating rounds. Results are checked
first (panel == sparse == auto, bitwise). --panel-sweep: chunk heights (GNNSPARSE_SYCL_PANEL_BK) and
densities on shapes around the rule.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

import gnnsparse as gs
from gnnsparse.bench import generators, timing


def case(M, K, d, seed=0):
    """(A, the same matrix in scipy): the dense-ish grid's generator (gnnsparse.bench.generators)."""
    A = generators.grid_matrix(M, K, d, seed)
    return A, A.to_scipy()


def _alternating(fns, reps):
    """{name: median seconds}: one warm-up call each, then the methods alternate one call per round,
    so a change in the machine's load hits them alike (gnnsparse.bench.timing.wall)."""
    for f in fns.values():
        f()
    ts = timing.wall({k: (lambda i, f=f: f()) for k, f in fns.items()}, rounds=reps, warmup=0)
    return {k: timing.median(v) for k, v in ts.items()}


def spmm_mode(A, X, mode):
    os.environ["GNNSPARSE_SYCL_TILES"] = mode
    return gs.spmm(A, X, "sum")


def run_case(M, K, d, N, reps, dense=True):
    A, S = case(M, K, d)
    X = np.random.default_rng(1).uniform(-1, 1, (K, N)).astype(np.float32)
    yt, ys = spmm_mode(A, X, "on"), spmm_mode(A, X, "off")
    ok = bool(np.array_equal(yt, ys))
    row = {"M": M, "K": K, "density": d, "N": N, "nnz": int(S.nnz), "tiles_eq_sparse": ok}
    fns = {"tiles_s": lambda: spmm_mode(A, X, "on"), "sparse_s": lambda: spmm_mode(A, X, "off")}
    if dense:
        t0 = time.perf_counter()
        D = S.toarray()
        row["densify_s"] = time.perf_counter() - t0
        fns["numpy_s"] = lambda: D @ X
        fns["scipy_s"] = lambda: S @ X
    row.update(_alternating(fns, reps))
    os.environ.pop("GNNSPARSE_SYCL_TILES", None)
    return row


def run_sddmm_case(M, K, d, F, reps, dense=True):
    A, S = case(M, K, d)
    rng = np.random.default_rng(2)
    X = rng.uniform(-1, 1, (M, F)).astype(np.float32)
    Y = rng.uniform(-1, 1, (K, F)).astype(np.float32)

    def sd(mode):
        os.environ["GNNSPARSE_SYCL_TILES"] = mode
        return gs.sddmm(A, X, Y)

    et, es = sd("on"), sd("off")
    R = np.einsum("kf,kf->k", X[np.repeat(np.arange(M), np.diff(S.indptr))].astype(np.float64),
                  Y[S.indices].astype(np.float64))
    err = lambda E: float(np.abs(E.reshape(-1) - R).max() / np.abs(R).max())
    row = {"M": M, "K": K, "density": d, "N": F, "nnz": int(S.nnz), "tiles_err": err(et), "sparse_err": err(es)}
    fns = {"tiles_s": lambda: sd("on"), "sparse_s": lambda: sd("off")}
    if dense:
        fns["numpy_s"] = lambda: X @ Y.T
    row.update(_alternating(fns, reps))
    os.environ.pop("GNNSPARSE_SYCL_TILES", None)
    return row



def _alternating_cpu(fns, reps):
    """({name: median wall seconds}, {name: median process CPU seconds}): one warm-up call each, then
    one call of each method per round."""
    for f in fns.values():
        f()
    wall, cpu = {k: [] for k in fns}, {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            c0, t0 = time.process_time(), time.perf_counter()
            f()
            wall[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
    return ({k: timing.median(v) for k, v in wall.items()}, {k: timing.median(v) for k, v in cpu.items()})


def spmm_env(A, X, panel=None, tiles="off", bk=None):
    with timing.environ({"GNNSPARSE_SYCL_PANEL": panel, "GNNSPARSE_SYCL_TILES": tiles, "GNNSPARSE_SYCL_PANEL_BK": bk}):
        return gs.spmm(A, X, "sum")


def run_panel_case(M, K, d, N, reps, tiles=True, dense=True):
    A, S = case(M, K, d)
    X = np.random.default_rng(1).uniform(-1, 1, (K, N)).astype(np.float32)
    yp, ys, ya = spmm_env(A, X, "on"), spmm_env(A, X, "off"), spmm_env(A, X)
    row = {"M": M, "K": K, "density": d, "N": N, "nnz": int(S.nnz),
           "panel_eq_sparse": bool(np.array_equal(yp, ys) and np.array_equal(ya, ys))}
    fns = {"panel": lambda: spmm_env(A, X, "on"), "sparse": lambda: spmm_env(A, X, "off"),
           "auto": lambda: spmm_env(A, X)}
    if tiles:
        fns["tiles"] = lambda: spmm_env(A, X, "off", "on")
    if dense:
        D = S.toarray()
        fns["numpy"] = lambda: D @ X
        fns["scipy"] = lambda: S @ X
    wall, cpu = _alternating_cpu(fns, reps)
    row.update({f"{k}_s": v for k, v in wall.items()})
    row.update({f"{k}_cpu_s": v for k, v in cpu.items()})
    return row


def geomean(rows, num, den):
    return float(np.exp(np.mean([np.log(r[num] / r[den]) for r in rows])))


GRID_SHAPES = [(1024, 1024), (3072, 1024), (4096, 1024), (2048, 2048), (4096, 2048), (4096, 4096)]


def panel_grid(out, reps):
    print("M K density N | panel sparse auto tiles numpy scipy (ms, wall) | sparse/panel (wall, cpu) "
          "sparse/auto numpy/auto scipy/auto tiles/auto (wall) eq")
    rows = out.setdefault("panel_grid", [])
    for M, K in GRID_SHAPES:
        for d in (0.3, 0.2, 0.1):
            for N in (32, 128):
                r = run_panel_case(M, K, d, N, reps)
                rows.append(r)
                ms = " ".join(f"{r[k + '_s'] * 1e3:.2f}" for k in ("panel", "sparse", "auto", "tiles", "numpy", "scipy"))
                print(f"{M} {K} {d} {N} | {ms} | {r['sparse_s'] / r['panel_s']:.2f} "
                      f"{r['sparse_cpu_s'] / r['panel_cpu_s']:.2f} | {r['sparse_s'] / r['auto_s']:.2f} "
                      f"{r['numpy_s'] / r['auto_s']:.2f} {r['scipy_s'] / r['auto_s']:.2f} "
                      f"{r['tiles_s'] / r['auto_s']:.2f} {r['panel_eq_sparse']}", flush=True)
    for num, den in [("sparse_s", "panel_s"), ("sparse_cpu_s", "panel_cpu_s"), ("sparse_s", "auto_s"),
                     ("numpy_s", "auto_s"), ("scipy_s", "auto_s"), ("tiles_s", "auto_s"), ("numpy_s", "sparse_s"),
                     ("scipy_s", "sparse_s")]:
        print(f"geomean {num[:-2]}/{den[:-2]} = {geomean(rows, num, den):.2f}")


PANEL_SWEEP = [(2048, 1024, 128), (2048, 2048, 128), (2048, 4096, 128), (4096, 4096, 128), (4096, 4096, 32),
               (2048, 8192, 32)]


def panel_sweep(out, reps):
    """Per shape and density: the sparse kernel vs the panel at several chunk heights (rows of X)."""
    rows = out.setdefault("panel_sweep", [])
    bks = ("policy", "32", "128", "512", "100000")
    print("M K N density | sparse_ms | sparse/panel (cpu) at BK = " + " ".join(bks))
    for M, K, N in PANEL_SWEEP:
        for d in (0.05, 0.1, 0.2, 0.3):
            A, S = case(M, K, d)
            X = np.random.default_rng(1).uniform(-1, 1, (K, N)).astype(np.float32)
            fns = {"sparse": lambda: spmm_env(A, X, "off")}
            for bk in bks:
                fns[bk] = (lambda bk=bk: spmm_env(A, X, "on", bk=None if bk == "policy" else bk))
            wall, cpu = _alternating_cpu(fns, reps)
            rows.append({"M": M, "K": K, "N": N, "density": d, "wall": wall, "cpu": cpu})
            print(f"{M} {K} {N} {d} | {wall['sparse'] * 1e3:.2f} | "
                  + " ".join(f"{cpu['sparse'] / cpu[bk]:.2f}" for bk in bks), flush=True)


SWEEP_SHAPES = [(1024, 1024), (2048, 2048), (4096, 1024)]
SWEEP_DENSITIES = (0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.2, 0.3)


def geomean_vs_tiles(rows, key):
    """Geometric mean of row[key] / row["tiles_s"] (> 1: the tiles faster)."""
    return float(np.exp(np.mean([np.log(r[key] / r["tiles_s"]) for r in rows])))


def sweep(label, width_name, run, sink, reps):
    """Density sweep of one op: tiles vs the sparse kernel per shape and width; prints the lowest
    density from which the tiles stay faster (the crossover)."""
    print(f"{label}sweep: M K {width_name} density | tiles_ms sparse_ms sparse/tiles")
    for M, K in SWEEP_SHAPES:
        for W in (32, 128):
            cross = None
            for d in SWEEP_DENSITIES:
                r = run(M, K, d, W, reps, dense=False)
                sink.append(r)
                ratio = r["sparse_s"] / r["tiles_s"]
                if ratio >= 1 and cross is None:
                    cross = d
                if ratio < 1:
                    cross = None
                print(f"{M} {K} {W} {d} | {r['tiles_s']*1e3:.3f} {r['sparse_s']*1e3:.3f} {ratio:.2f}", flush=True)
            print(f"{label}crossover {M}x{K} {width_name}={W}: tiles faster from density {cross}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", action="store_true")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--sddmm", action="store_true")
    ap.add_argument("--panel", action="store_true")
    ap.add_argument("--panel-sweep", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "grid": [], "sweep": []}
    print(f"# {out['date']}  numpy {np.__version__}  scipy {sp.__name__ and __import__('scipy').__version__}  "
          f"threads: {os.cpu_count()} cores", flush=True)
    if a.grid:
        shapes = [(1024, 1024), (3072, 1024), (4096, 1024), (2048, 2048), (4096, 2048), (4096, 4096)]
        print("M K density N | tiles_ms sparse_ms numpy_ms scipy_ms densify_ms | sparse/tiles numpy/tiles scipy/tiles eq")
        for M, K in shapes:
            for d in (0.3, 0.2, 0.1):
                for N in (32, 128):
                    r = run_case(M, K, d, N, a.reps)
                    out["grid"].append(r)
                    print(f"{M} {K} {d} {N} | {r['tiles_s']*1e3:.2f} {r['sparse_s']*1e3:.2f} {r['numpy_s']*1e3:.2f} "
                          f"{r['scipy_s']*1e3:.2f} {r['densify_s']*1e3:.2f} | {r['sparse_s']/r['tiles_s']:.2f} "
                          f"{r['numpy_s']/r['tiles_s']:.2f} {r['scipy_s']/r['tiles_s']:.2f} {r['tiles_eq_sparse']}",
                          flush=True)
        for key in ("sparse_s", "numpy_s", "scipy_s"):
            print(f"geomean {key[:-2]}/tiles = {geomean_vs_tiles(out['grid'], key):.2f}")
    if a.sweep:
        sweep("", "N", run_case, out["sweep"], a.reps)
    if a.sddmm:
        out["sddmm_grid"], out["sddmm_sweep"] = [], []
        print("SDDMM: M K density F | tiles_ms sparse_ms numpy_ms | sparse/tiles numpy/tiles | err tiles sparse")
        for M, K in [(1024, 1024), (3072, 1024), (4096, 1024), (2048, 2048), (4096, 2048), (4096, 4096)]:
            for d in (0.3, 0.2, 0.1):
                for F in (32, 128):
                    r = run_sddmm_case(M, K, d, F, a.reps)
                    out["sddmm_grid"].append(r)
                    print(f"{M} {K} {d} {F} | {r['tiles_s']*1e3:.2f} {r['sparse_s']*1e3:.2f} {r['numpy_s']*1e3:.2f} | "
                          f"{r['sparse_s']/r['tiles_s']:.2f} {r['numpy_s']/r['tiles_s']:.2f} | "
                          f"{r['tiles_err']:.1e} {r['sparse_err']:.1e}", flush=True)
        for key in ("sparse_s", "numpy_s"):
            print(f"SDDMM geomean {key[:-2]}/tiles = {geomean_vs_tiles(out['sddmm_grid'], key):.2f}")
        sweep("SDDMM ", "F", run_sddmm_case, out["sddmm_sweep"], a.reps)
    if a.panel:
        panel_grid(out, a.reps)
    if a.panel_sweep:
        panel_sweep(out, a.reps)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
