"""Locality reordering on a CUDA device: SpMM on a graph with community structure and shuffled ids,
before and after each reordering method, in one process on the same features.

    python -m gnnsparse.bench.reorder [--n 1000000] [--degree 20] [--classes 1000] [--widths 32,128]
                                      [--methods rcm,degree,metis] [--reps 20] [--csv out.csv]

The graph is a stochastic block model (gnnsparse.bench.generators.sbm: classes drawn at random, so
node ids carry no locality; p_intra of the edges stay inside a class). For each method the
reordering time (host: permutation + building the permuted CSR) is reported separately; SpMM times
exclude it. Each timed launch is preceded by a 256 MB memset (L2 flushed) and a short spin kernel
(so the launch is queued before the GPU reaches it: the events time the kernel, not the Python
call); median of --reps. Every reordered result is checked bitwise against the original result,
permuted. torch.sparse.mm (cuSPARSE) on the same CSR is timed alongside as a reference.
"""
from __future__ import annotations

import argparse
import csv
import sys
import time


def _timer(torch, reps):
    """median_us(fn): CUDA events around each call (gnnsparse.bench.timing), L2 flushed and the GPU
    kept busy (a 200k-cycle sleep) before each, so the launch is not what gets timed."""
    from .timing import median_us as _median_us

    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

    def before():
        flush.fill_(1)
        torch.cuda._sleep(200_000)

    def median_us(fn):
        return _median_us(fn, reps=reps, warmup=3, torch=torch, before=before)

    return median_us


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m gnnsparse.bench.reorder", description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--degree", type=float, default=20.0, help="stored entries per row (average)")
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--p-intra", type=float, default=0.9)
    p.add_argument("--widths", default="32,128")
    p.add_argument("--methods", default="rcm,degree,metis")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--csv", default="")
    args = p.parse_args(argv)

    import numpy as np
    import torch

    import gnnsparse as gs
    from gnnsparse._reorder import permute
    from gnnsparse.bench.generators import sbm

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    widths = [int(w) for w in args.widths.split(",") if w]
    methods = [m for m in args.methods.split(",") if m]
    t0 = time.perf_counter()
    A = sbm(args.n, args.classes, args.degree, args.seed, p_intra=args.p_intra, feature_dim=1).A
    print(f"graph: SBM n={A.shape[0]} nnz={A.nnz} classes={args.classes} p_intra={args.p_intra} "
          f"(ids random), built in {time.perf_counter() - t0:.1f} s; {torch.cuda.get_device_name()}", flush=True)
    like = torch.empty(0, device="cuda")
    median_us = _timer(torch, args.reps)

    def on_gpu(G):
        Gd = G.to_like(like)
        with torch.sparse.check_sparse_tensor_invariants(enable=False):  # validated CSR; torch's checks declined
            St = torch.sparse_csr_tensor(Gd.rowptr.long(), Gd.col.long(), torch.ones(G.nnz, device="cuda"),
                                         size=G.shape, check_invariants=False)
        return Gd, St

    graphs = {"original": (A, None, 0.0)}
    for m in methods:
        t1 = time.perf_counter()
        try:
            B, perm = A.reorder(m)
        except ImportError as e:
            print(f"{m}: skipped ({e})", flush=True)
            continue
        graphs[m] = (B, perm, time.perf_counter() - t1)
        print(f"{m}: reordering took {graphs[m][2]:.2f} s (host)", flush=True)

    rows = []
    for C in widths:
        X = torch.randn(A.shape[1], C, device="cuda")
        base = {}
        for name, (G, perm, t_re) in graphs.items():
            Gd, St = on_gpu(G)
            Xg = X if perm is None else permute(X, perm)
            Y = gs.spmm(Gd, Xg, "sum")
            Y2 = gs.spmm(Gd, Xg, "sum")
            det = bool(torch.equal(Y.view(torch.int32), Y2.view(torch.int32)))
            if perm is None:
                base["Y"] = Y
                exact = True
            else:
                exact = bool(torch.equal(Y.view(torch.int32), permute(base["Y"], perm).view(torch.int32)))
            ours = median_us(lambda: gs.spmm(Gd, Xg, "sum"))
            ref = median_us(lambda: torch.sparse.mm(St, Xg))
            if perm is None:
                base["ours"], base["ref"] = ours, ref
            # bytes model: CSR (rowptr + col) + one X row per entry + Y once; X once would be the floor
            gather = A.nnz * C * 4.0
            row = dict(method=name, C=C, n=A.shape[0], nnz=A.nnz, ours_us=round(ours, 1),
                       speedup=round(base["ours"] / ours, 3), cusparse_us=round(ref, 1),
                       cusparse_speedup=round(base["ref"] / ref, 3), vs_cusparse=round(ref / ours, 3),
                       reorder_s=round(t_re, 2), bitwise_vs_original=exact, deterministic=det,
                       eff_GBs=round(((A.shape[0] + 1 + A.nnz) * 4 + gather + A.shape[0] * C * 4) / (ours * 1e3), 0))
            rows.append(row)
            print(f"C={C:4d} {name:9s} ours {ours:9.1f} us ({row['speedup']:.2f}x original)  "
                  f"cuSPARSE {ref:9.1f} us ({row['cusparse_speedup']:.2f}x)  ours/cuSPARSE {row['vs_cusparse']:.2f}x  "
                  f"reorder {t_re:6.2f} s  bitwise={exact} det={det}", flush=True)
            del Gd, St
        del X
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
