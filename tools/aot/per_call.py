"""Per-call cost of the raw _sycl.spmm binding: submit + wait, NumPy data on the default SYCL
device (docs/aot.md). Median of 3,000 calls after 300 warm-up calls; a 1-row launch and a
Cora-sized graph (2,708 rows, C = 16), beside scipy's A @ X on the same graph.

    python tools/aot/per_call.py
"""
import statistics
import time

import numpy as np
import scipy.sparse as sp

from gnnsparse import _core, _sycl, _sycl_backend


def median_us(f, n=3000):
    for _ in range(300):
        f()
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e6


def main():
    q = _sycl_backend.default_queue()
    rng = np.random.default_rng(0)
    for name, M, K, deg in [("1 row", 1, 16, 4), ("Cora-sized", 2708, 2708, 3.9)]:
        rowptr = np.concatenate([[0], np.cumsum(rng.poisson(deg, M))]).astype(np.int32)
        col = rng.integers(0, K, rowptr[-1]).astype(np.int32)
        X = rng.standard_normal((K, 16)).astype(np.float32)
        Y = np.empty((M, 16), np.float32)
        A = _core.CsrView(_core.ITYPE["int32"][0], rowptr.ctypes.data, col.ctypes.data, 0, M, K, int(rowptr[-1]))
        dt, red, xp, yp = _core.DTYPE["float32"][0], _core.REDUCE["sum"], X.ctypes.data, Y.ctypes.data
        us = median_us(lambda: _sycl.spmm((q, []), A, dt, red, xp, yp, 0, 16).wait())
        S = sp.csr_matrix((np.ones(rowptr[-1], np.float32), col, rowptr), shape=(M, K))
        print(f"{name} (nnz {rowptr[-1]}): _sycl.spmm {us:.1f} us, scipy A @ X {median_us(lambda: S @ X):.1f} us")


if __name__ == "__main__":
    main()
