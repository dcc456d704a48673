"""The oracle itself, checked against SciPy and hand-computed cases (a table, as pytorch_scatter does)."""
import numpy as np
import pytest
import scipy.sparse as sp

import gnnsparse as gs
from gnnsparse import reference as ref

# row 0: edges to columns 0, 2 (values 2, -1); row 1: empty; row 2: edges 1, 1 (duplicates), 0
A = gs.CSR(np.array([0, 2, 2, 5]), np.array([0, 2, 1, 1, 0]), np.array([2.0, -1.0, 1.0, 3.0, 0.5]), (3, 3))
X = np.array([[1.0, -2.0], [4.0, 0.0], [3.0, 5.0]])

CASES = {
    "sum": ([[-1.0, -9.0], [0, 0], [16.5, -1.0]], None),
    "mean": ([[-0.5, -4.5], [0, 0], [5.5, -1 / 3]], None),
    "max": ([[2.0, -4.0], [0, 0], [12.0, 0.0]], [[0, 0], [-1, -1], [3, 2]]),
    "min": ([[-3.0, -5.0], [0, 0], [0.5, -1.0]], [[1, 1], [-1, -1], [4, 4]]),
}


@pytest.mark.parametrize("reduce", list(CASES))
def test_spmm_table(reduce):
    want, want_arg = CASES[reduce]
    if want_arg is None:
        np.testing.assert_allclose(ref.spmm(A, X, reduce), want)
    else:
        y, arg = ref.spmm(A, X, reduce, return_arg=True)
        np.testing.assert_allclose(y, want)
        np.testing.assert_array_equal(arg, want_arg)


def test_spmm_sum_matches_scipy(rng):
    S = sp.random(40, 30, density=0.2, random_state=1, format="csr")
    Xr = rng.standard_normal((30, 5))
    np.testing.assert_allclose(ref.spmm(gs.CSR.from_scipy(S), Xr), S @ Xr, rtol=1e-12, atol=1e-12)


def test_max_nan_and_ties():
    B = gs.CSR(np.array([0, 3]), np.array([0, 1, 2]), None, (1, 3))
    y, arg = ref.spmm(B, np.array([[1.0], [np.nan], [1.0]]), "max", return_arg=True)
    assert np.isnan(y[0, 0]) and arg[0, 0] == 1
    y, arg = ref.spmm(B, np.array([[2.0], [2.0], [1.0]]), "max", return_arg=True)
    assert y[0, 0] == 2.0 and arg[0, 0] == 0  # tie -> smallest edge index


def test_sddmm_and_fusedmm_small():
    Xs = np.array([[1.0, 2.0], [0.0, 1.0], [1.0, 1.0]])
    E = ref.sddmm(A, Xs, Xs, "dot")
    # row 2 is (1, 1): with column 1 = (0, 1) gives 1, with column 0 = (1, 2) gives 3
    np.testing.assert_allclose(E, [1 * 1 + 2 * 2, 1 * 1 + 2 * 1, 1.0, 1.0, 3.0])
    out, w = ref.fusedmm(A, Xs, Xs, X, edge="softmax", return_edges=True)
    # row 0: softmax(5, 3) scaled by values (2, -1)
    p = np.exp([5.0, 3.0] - np.max([5.0, 3.0]))
    p /= p.sum()
    np.testing.assert_allclose(w[:2], p * [2.0, -1.0])
    np.testing.assert_allclose(out[1], 0.0)
    np.testing.assert_allclose(out[0], w[0] * X[0] + w[1] * X[2])
