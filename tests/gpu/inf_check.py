"""max / min edge cases of the branch-free update on the CUDA backend, against the oracle: rows whose
messages all equal the initial value (-inf for max, +inf for min), infinities mixed with NaN, every
C path (short rows, warp rows, hub rows). One line per case; exit status = the number of mismatches.

    python tests/gpu/inf_check.py        (tools/gpu_perf.sh runs it)
"""
import os

# the odd widths here exist to run the scalar walks: no zero-padded copies (gnnsparse._ops._vector_width)
os.environ.setdefault("GNNSPARSE_CUDA_PAD", "off")
import numpy as np, torch, gnnsparse as gs  # noqa: E402
rng = np.random.default_rng(7)
bad = 0
for C in (1, 16, 33, 128, 129):
    for case in ("short", "mixed"):
        K = 500
        if case == "short":
            deg = rng.integers(0, 12, 3000)
        else:  # empty rows, warp rows (33..256 entries) and two hubs (far beyond 16x the mean)
            deg = rng.integers(0, 8, 3000)
            deg[rng.integers(0, 3000, 60)] = rng.integers(33, 257, 60)
            deg[[17, 1800]] = [40000, 9000]
        rowptr = np.zeros(len(deg) + 1, np.int64)
        np.cumsum(deg, out=rowptr[1:])
        M = len(deg)
        col = rng.integers(0, K, int(rowptr[-1])).astype(np.int32)
        A = gs.CSR(rowptr.astype(np.int32), col, None, (M, K))
        X = rng.standard_normal((K, C)).astype(np.float32)
        X[rng.random((K, C)) < 0.5] = -np.inf
        X[rng.random((K, C)) < 0.2] = np.inf
        X[rng.random((K, C)) < 0.002] = np.nan
        X[:, 0] = -np.inf  # column 0: every message -inf (max) ...
        if C > 1:
            X[:, 1] = np.inf  # ... column 1: every message +inf (min)
        for red in ("max", "min"):
            y, a = gs.spmm(A, torch.from_numpy(X).cuda(), red, return_arg=True)
            ry, ra = gs.reference.spmm(A, X, red, return_arg=True, dtype=np.float32)
            ok = np.array_equal(y.cpu().numpy(), ry, equal_nan=True) and np.array_equal(a.cpu().numpy(), ra)
            bad += not ok
            print(f"C={C} {case} {red}: {'ok' if ok else 'MISMATCH'}")
raise SystemExit(bad)
