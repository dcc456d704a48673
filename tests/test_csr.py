"""gnnsparse.CSR: construction, validation errors naming the problem, conversions, transpose."""
import numpy as np
import pytest
import scipy.sparse as sp

import gnnsparse as gs


def test_from_scipy_round_trip(rng):
    S = sp.random(17, 23, density=0.3, random_state=3, format="csr", dtype=np.float32)
    A = gs.CSR.from_scipy(S)
    assert A.shape == (17, 23) and A.nnz == S.nnz and A.index_dtype == "int32"
    assert (A.to_scipy() != S).nnz == 0


def test_from_edge_index_sorts_by_destination_and_keeps_duplicates():
    ei = np.array([[0, 2, 1, 2, 2], [1, 0, 1, 0, 2]])  # (src, dst); edge (2 -> 0) twice
    w = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    A = gs.CSR.from_edge_index(ei, 3, w)
    np.testing.assert_array_equal(A.rowptr, [0, 2, 4, 5])
    np.testing.assert_array_equal(A.col, [2, 2, 0, 1, 2])
    np.testing.assert_array_equal(A.val, [2.0, 4.0, 1.0, 3.0, 5.0])
    np.testing.assert_array_equal(A.edge_perm, [1, 3, 0, 2, 4])


def test_edge_index_out_of_range():
    with pytest.raises(ValueError, match="edge 1 .* outside"):
        gs.CSR.from_edge_index(np.array([[0, 5], [1, 0]]), 3)
    with pytest.raises(ValueError, match=r"shape \(2, E\)"):
        gs.CSR.from_edge_index(np.zeros((3, 4), np.int64), 3)


@pytest.mark.parametrize(
    "rowptr, col, shape, message",
    [
        ([1, 2, 3], [0, 1, 2], (2, 3), r"rowptr\[0\] must be 0"),
        ([0, 2, 1, 3], [0, 1, 2], (3, 3), "decreases at row 1"),
        ([0, 1, 2], [0, 1, 2], (2, 3), r"rowptr\[-1\] must equal nnz"),
        ([0, 2, 3], [0, 3, 1], (2, 3), r"col\[1\] = 3 \(row 0\) is outside \[0, 3\)"),
        ([0, 2, 3], [0, 1, -1], (2, 3), r"col\[2\] = -1 \(row 1\)"),
        ([0, 1], [0], (2, 3), "rowptr has 2 entries"),
    ],
)
def test_validate_names_first_bad_entry(rowptr, col, shape, message):
    with pytest.raises(ValueError, match=message):
        gs.CSR(np.array(rowptr), np.array(col), None, shape)


def test_validation_can_be_skipped_for_trusted_input():
    A = gs.CSR(np.array([0, 2, 1, 3]), np.array([0, 1, 2]), None, (3, 3), validate=False)
    with pytest.raises(ValueError):
        A.validate()


def test_bad_index_dtype_and_val_shape():
    with pytest.raises(TypeError, match="int32 or int64"):
        gs.CSR(np.array([0, 1.0]), np.array([0]), None, (1, 1))
    with pytest.raises(ValueError, match="val must have shape"):
        gs.CSR(np.array([0, 1]), np.array([0]), np.ones(2), (1, 1))


def test_int64_chosen_when_sizes_need_it():
    A = gs.CSR(np.array([0, 1], np.int32), np.array([2**31 + 5], np.int64), None, (1, 2**31 + 10))
    assert A.index_dtype == "int64"
    A = gs.CSR(np.array([0, 0], np.int32), np.array([], np.int32), None, (1, 2**31 + 10))
    assert A.index_dtype == "int64"  # a dimension past int32 forces int64 even without entries


def test_transpose_and_perm(rng):
    S = sp.random(31, 19, density=0.25, random_state=4, format="csr")
    A = gs.CSR.from_scipy(S)
    T = A.T
    assert T.shape == (19, 31)
    assert (T.to_scipy() - S.T.tocsr()).nnz == 0 or np.allclose(T.to_scipy().toarray(), S.T.toarray())
    np.testing.assert_array_equal(T.val, A.val[T.perm])
    assert A.T is T and T.T is A  # cached both ways


def test_empty_matrix():
    A = gs.CSR(np.zeros(1, np.int32), np.zeros(0, np.int32), None, (0, 0))
    assert A.nnz == 0 and A.shape == (0, 0)


# ---------------------------------------------------------------- no stale device copies
def _graph(rng, n=30, e=120, weighted=True):
    ei = np.stack([rng.integers(0, n, e), rng.integers(0, n, e)])
    return ei, (rng.random(e).astype(np.float32) if weighted else None)


def test_numpy_arrays_are_owned_and_read_only(rng):
    ei, w = _graph(rng)
    A = gs.CSR.from_edge_index(ei, 30, w)
    X = rng.standard_normal((30, 8)).astype(np.float32)
    Y0 = gs.spmm(A, X)
    with pytest.raises(ValueError, match="read-only"):
        A.val[:] = 10
    # the constructor copies writeable caller arrays: later writes to them do not reach the matrix
    rowptr, col, val = A.rowptr.copy(), A.col.copy(), A.val.copy()
    B = gs.CSR(rowptr, col, val, A.shape)
    np.testing.assert_array_equal(gs.spmm(B, X), Y0)
    val[:] = 10
    np.testing.assert_array_equal(gs.spmm(B, X), Y0)
    # replacing the values is seen at once, for every value dtype cached so far
    gs.spmm(B, X.astype(np.float64))
    B.val = np.full(A.nnz, 10, np.float32)
    np.testing.assert_allclose(gs.spmm(B, X), gs.reference.spmm(B, X), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(gs.spmm(B, X.astype(np.float64)), 10 * gs.reference.spmm(A.with_values(None), X),
                               rtol=1e-12)
    # with_values shares the structure and leaves the original alone
    C = A.with_values(np.ones(A.nnz, np.float32))
    np.testing.assert_array_equal(gs.spmm(A, X), Y0)
    np.testing.assert_allclose(gs.spmm(C, X), gs.reference.spmm(A.with_values(None), X), rtol=1e-5, atol=1e-5)
    # copy=False shares the caller's arrays: invalidate() after changing them in place
    val2 = A.val.copy()
    D = gs.CSR(A.rowptr, A.col, val2, A.shape, copy=False)
    gs.spmm(D, X.astype(np.float64))  # caches a float64 copy of the values
    val2[:] = 1
    D.invalidate()
    np.testing.assert_allclose(gs.spmm(D, X.astype(np.float64)), gs.reference.spmm(A.with_values(None), X),
                               rtol=1e-12)


def test_transpose_follows_new_values(rng):
    ei, w = _graph(rng)
    A = gs.CSR.from_edge_index(ei, 30, w)
    T1 = A.T
    A.val = np.arange(A.nnz, dtype=np.float32)
    np.testing.assert_array_equal(A.T.val, A.val[A.T.perm])
    assert A.T is not T1


def test_torch_cpu_arrays_are_copied(rng, sycl):
    torch = pytest.importorskip("torch")
    ei, w = _graph(rng)
    A0 = gs.CSR.from_edge_index(ei, 30, w)
    val = torch.from_numpy(A0.val.copy())
    A = gs.CSR(torch.from_numpy(A0.rowptr.copy()), torch.from_numpy(A0.col.copy()), val, A0.shape)
    X = torch.from_numpy(rng.standard_normal((30, 8)).astype(np.float32))
    Y0 = gs.spmm(A, X).clone()
    val.mul_(3)
    torch.testing.assert_close(gs.spmm(A, X), Y0)


def test_dpnp_csr_values_changed_in_place_are_seen(rng):
    dpnp = pytest.importorskip("dpnp")
    ei, w = _graph(rng)
    A0 = gs.CSR.from_edge_index(ei, 30, w)
    A = gs.CSR(dpnp.asarray(A0.rowptr), dpnp.asarray(A0.col), dpnp.asarray(A0.val), A0.shape)
    X = rng.standard_normal((30, 8))
    for dt in (np.float32, np.float64):  # float64 features: the values are cast per call
        Xd = dpnp.asarray(X.astype(dt), sycl_queue=A.rowptr.sycl_queue)
        gs.spmm(A, Xd)
        A.val[:] = 2.0
        want = 2 * gs.reference.spmm(A0.with_values(None), X)
        np.testing.assert_allclose(dpnp.asnumpy(gs.spmm(A, Xd)), want, rtol=1e-5, atol=1e-5)
        A.val[:] = dpnp.asarray(A0.val)


def test_host_csr_on_a_usm_queue_is_uploaded_once_and_refreshed_on_new_values(rng):
    dpnp = pytest.importorskip("dpnp")
    ei, w = _graph(rng)
    A = gs.CSR.from_edge_index(ei, 30, w)
    X = rng.standard_normal((30, 8)).astype(np.float32)
    Xd = dpnp.asarray(X)
    np.testing.assert_allclose(dpnp.asnumpy(gs.spmm(A, Xd)), gs.reference.spmm(A, X), rtol=1e-5, atol=1e-5)
    A.val = np.full(A.nnz, 2.0, np.float32)
    np.testing.assert_allclose(dpnp.asnumpy(gs.spmm(A, Xd)), gs.reference.spmm(A, X), rtol=1e-5, atol=1e-5)
