"""int32 indices where an index times a width passes 2^31: the kernels must form such offsets in 64
bits (or refuse clearly). CPU (SYCL) tests; the GPU side and nnz > 2^31 are tests/gpu/scale_check.py.

The large feature arrays are np.zeros: the OS maps their pages lazily, so an 8 GiB X costs only the
rows the graph touches. Checks where the *output* passes 2^31 elements write all of it (8.6 GB) and
run only with GNNSPARSE_BIG_MEMORY=1.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import reference as ref

from _reliability import ref_csr, require

pytestmark = [pytest.mark.sycl]
BIG_MEMORY = os.environ.get("GNNSPARSE_BIG_MEMORY", "") not in ("", "0")
LIMIT = 2**31


def _sparse_rows(rng, n, width, rows, scale=1.0):
    """np.zeros((n, width)) with random values in `rows` only (the rest stays unmapped: never do
    arithmetic on the whole array)."""
    X = np.zeros((n, width), np.float32)
    X[rows] = (scale * rng.standard_normal((len(rows), width))).astype(np.float32)
    return X


def _csr(rowptr, col, K, M=None):
    M = len(rowptr) - 1 if M is None else M
    A = gs.CSR(np.asarray(rowptr, np.int32), np.asarray(col, np.int32), None, (M, K))
    assert A.index_dtype == "int32"
    return A


def _compact(col, X):
    """(col remapped to 0.., X's touched rows): the same problem with a small X, for the reference."""
    u = np.unique(col)
    return np.searchsorted(u, col), X[u].astype(np.float64)


@pytest.mark.parametrize("C", [2, 64])
def test_spmm_column_offset_past_int32(C):
    require("sycl")
    rng = np.random.default_rng(C)
    K = LIMIT // C + 5  # X[K - 1] starts past element 2^31
    col = np.array([K - 1, 7, K - 3, K - 1, LIMIT // C, 0], np.int64)
    rowptr = np.array([0, 3, 3, 5, 6])
    X = _sparse_rows(rng, K, C, np.unique(col))
    A = _csr(rowptr, col, K)
    c2, X2 = _compact(col, X)
    R = ref_csr(rowptr, c2, None, (4, len(X2)))
    np.testing.assert_allclose(gs.spmm(A, X, "sum"), ref.spmm(R, X2), rtol=1e-6, atol=1e-6)
    Y, arg = gs.spmm(A, X, "max", return_arg=True)
    Yr, argr = ref.spmm(R, X2, "max", return_arg=True, dtype=np.float32)
    np.testing.assert_array_equal(Y, Yr)
    np.testing.assert_array_equal(arg, argr)


def test_sddmm_column_offset_past_int32():
    require("sycl")
    rng = np.random.default_rng(1)
    F = 64
    K = LIMIT // F + 5
    col = np.array([K - 1, 3, K - 2, K - 1], np.int64)
    rowptr = np.array([0, 2, 2, 4])
    Y = _sparse_rows(rng, K, F, np.unique(col))
    A = _csr(rowptr, col, K)
    c2, Y2 = _compact(col, Y)
    R = ref_csr(rowptr, c2, None, (3, len(Y2)))
    for f in (F, 5):  # the sub-group kernel (F >= half a sub-group) and the per-edge kernel
        X = rng.standard_normal((3, f)).astype(np.float32)
        Yv = Y if f == F else _sparse_rows(rng, K, f, np.unique(col))
        _, Y2v = _compact(col, Yv)
        np.testing.assert_allclose(gs.sddmm(A, X, Yv, "dot"), ref.sddmm(R, X, Y2v, "dot"), rtol=1e-5, atol=1e-5)
    Ya = np.zeros((K, 8), np.float32)  # add: Y (K, H) with K x H > 2^31 needs H > 64; H = 8 is K x 8
    Ya[np.unique(col)] = 1.0
    assert gs.sddmm(A, np.ones((3, 8), np.float32), Ya, "add").shape == (4, 8)


@pytest.mark.parametrize("edge", ["none", "softmax"])
def test_fusedmm_column_offset_past_int32(edge):
    require("sycl")
    rng = np.random.default_rng(2)
    D, F = 64, 64
    K = LIMIT // D + 5
    col = np.array([K - 1, 2, K - 4, K - 1, K - 2], np.int64)
    rowptr = np.array([0, 3, 3, 5])
    rows = np.unique(col)
    Y = _sparse_rows(rng, K, F, rows, 0.1).reshape(K, 1, F)
    Z = _sparse_rows(rng, K, D, rows).reshape(K, 1, D)
    X = (rng.standard_normal((3, 1, F)) * 0.1).astype(np.float32)
    A = _csr(rowptr, col, K)
    c2 = np.searchsorted(rows, col)
    R = ref_csr(rowptr, c2, None, (3, len(rows)))
    want = ref.fusedmm(R, X, Y[rows], Z[rows], edge=edge)
    np.testing.assert_allclose(gs.fusedmm(A, X, Y, Z, edge=edge), want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not BIG_MEMORY, reason="writes an 8.6 GB output; set GNNSPARSE_BIG_MEMORY=1")
def test_spmm_output_offset_past_int32():
    require("sycl")
    rng = np.random.default_rng(3)
    C = 64
    M = LIMIT // C + 5  # Y[M - 1] starts past element 2^31
    deg = np.zeros(M, np.int64)
    deg[[M - 1, M - 3, 5]] = [3, 2, 1]
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(deg, out=rowptr[1:])
    col = rng.integers(0, 10, int(rowptr[-1]))
    X = rng.standard_normal((10, C)).astype(np.float32)
    A = _csr(rowptr, col, 10)
    Y = gs.spmm(A, X, "sum")
    for r in (M - 1, M - 3, 5):
        k0, k1 = rowptr[r], rowptr[r + 1]
        np.testing.assert_allclose(Y[r], X[col[k0:k1]].sum(0), rtol=1e-5, atol=1e-5)
    assert not Y[M - 2].any() and not Y[6].any()
