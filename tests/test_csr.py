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
