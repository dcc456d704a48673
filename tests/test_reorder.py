"""Locality reordering (gnnsparse._reorder, CSR.reorder): B = P A P^T keeps every row's entry order,
so SpMM on the reordered graph is bitwise SpMM on the original, permuted."""
from __future__ import annotations

import builtins

import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import _reorder
from gnnsparse._reorder import inverse_permutation, permute, unpermute

from conftest import random_csr

METHODS_HERE = ["rcm", "degree"]  # metis only when pymetis imports (below)


def _have_pymetis():
    try:
        import pymetis  # noqa: F401
    except ImportError:
        return False
    return True


ALL = METHODS_HERE + (["metis"] if _have_pymetis() else [])


def _square(rng, n, **kw):
    return random_csr(rng, n, n, **kw)


def _community_graph(rng, n=600, blocks=6, p_in=0.05, p_out=0.0005):
    """A small SBM with shuffled ids: what reordering should recover."""
    b = np.repeat(np.arange(blocks), n // blocks)
    same = b[:, None] == b[None, :]
    dense = rng.random((n, n)) < np.where(same, p_in, p_out)
    shuffle = rng.permutation(n)
    dense = dense[shuffle][:, shuffle]
    import scipy.sparse as sp

    return gs.CSR.from_scipy(sp.csr_matrix(dense.astype(np.float32)))


def _spread(A):
    """Mean |i - j| over the entries: how far apart the rows an output row gathers lie."""
    rowptr = np.asarray(A.rowptr).astype(np.int64)
    rows = np.repeat(np.arange(A.shape[0]), np.diff(rowptr))
    return float(np.abs(rows - np.asarray(A.col)).mean()) if A.nnz else 0.0


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_spmm_commutes_bitwise(rng, method, reduce):
    A = _square(rng, 257, mean_deg=6.0, hub=90)
    X = rng.standard_normal((257, 33)).astype(np.float32)
    B, perm = A.reorder(method)
    want = gs.reference.spmm(A, X, reduce, return_arg=True, dtype=np.float32)
    got = gs.reference.spmm(B, permute(X, perm), reduce, return_arg=True, dtype=np.float32)
    np.testing.assert_array_equal(got[0].view(np.uint32), permute(want[0], perm).view(np.uint32))
    # args are positions in B; edge_perm_from maps them to positions in A
    src = np.append(B.edge_perm_from, -1)
    np.testing.assert_array_equal(src[got[1]], permute(want[1], perm))
    np.testing.assert_array_equal(unpermute(got[0], perm).view(np.uint32), want[0].view(np.uint32))


@pytest.mark.parametrize("method", ALL)
def test_spmm_commutes_on_the_backend(rng, sycl, method):
    A = _square(rng, 300, mean_deg=5.0, hub=120)
    X = rng.standard_normal((300, 17)).astype(np.float32)
    B, perm = A.reorder(method)
    Y = np.asarray(gs.spmm(A, X, "sum"))
    Yb = np.asarray(gs.spmm(B, permute(X, perm), "sum"))
    np.testing.assert_array_equal(Yb.view(np.uint32), permute(Y, perm).view(np.uint32))


@pytest.mark.parametrize("method", ALL)
def test_structure(rng, method):
    A = _square(rng, 150, mean_deg=4.0, index_dtype=np.int64)
    B, perm = A.reorder(method)
    assert perm.dtype == np.int64 and np.array_equal(np.sort(perm), np.arange(150))
    assert B.shape == A.shape and B.nnz == A.nnz and B.index_dtype == A.index_dtype
    assert B.val.dtype == A.val.dtype
    # B[i, j] = A[perm[i], perm[j]]
    Ad, Bd = A.to_dense(), B.to_dense()
    np.testing.assert_array_equal(Bd, Ad[np.ix_(perm, perm)])
    np.testing.assert_array_equal(B.val, A.val[B.edge_perm_from])
    # each row keeps its entries' order: the source positions increase within every row
    rp = np.asarray(B.rowptr)
    for i in range(150):
        s = B.edge_perm_from[rp[i]:rp[i + 1]]
        assert np.all(np.diff(s) == 1)
    B.validate()


def test_round_trips(rng):
    A = _square(rng, 90)
    _, perm = A.reorder("rcm")
    X = rng.standard_normal((90, 5)).astype(np.float32)
    np.testing.assert_array_equal(unpermute(permute(X, perm), perm), X)
    np.testing.assert_array_equal(permute(unpermute(X, perm), perm), X)
    inv = inverse_permutation(perm)
    np.testing.assert_array_equal(inv[perm], np.arange(90))
    np.testing.assert_array_equal(perm[inv], np.arange(90))
    # reordering B back by the inverse permutation gives A's matrix
    B, _ = A.reorder("rcm")
    n = A.shape[0]
    P = np.zeros((n, n), np.float32)
    P[np.arange(n), perm] = 1
    np.testing.assert_array_equal(B.to_dense(), P @ A.to_dense() @ P.T)


def test_torch_features_and_graph(rng):
    torch = pytest.importorskip("torch")
    A = _square(rng, 120, mean_deg=5.0)
    B, perm = A.reorder("degree")
    X = torch.randn(120, 8, requires_grad=True)
    Xp = permute(X, perm)
    assert torch.equal(Xp, X.detach()[torch.from_numpy(perm)])
    Xp.sum().backward()  # a gather: differentiable
    assert torch.equal(X.grad, torch.ones_like(X))
    assert torch.equal(unpermute(Xp.detach(), perm), X.detach())
    assert torch.equal(unpermute(Xp.detach(), torch.from_numpy(perm)), X.detach())
    # a graph built from CPU tensors is a host graph: same permutation
    At = gs.CSR(torch.from_numpy(np.array(A.rowptr)), torch.from_numpy(np.array(A.col)),
                torch.from_numpy(np.array(A.val)), A.shape)
    Bt, perm_t = At.reorder("degree")
    assert np.array_equal(perm_t, perm) and np.array_equal(np.asarray(Bt.col), np.asarray(B.col))


def test_edge_perm_follows(rng):
    src = rng.integers(0, 50, 400)
    dst = rng.integers(0, 50, 400)
    A = gs.CSR.from_edge_index(np.stack([src, dst]), 50)
    B, perm = A.reorder("rcm")
    inv = inverse_permutation(perm)
    # B's entry k is input edge B.edge_perm[k]: (dst, src) renamed
    rows = np.repeat(np.arange(50), np.diff(np.asarray(B.rowptr)))
    np.testing.assert_array_equal(rows, inv[dst[B.edge_perm]])
    np.testing.assert_array_equal(np.asarray(B.col), inv[src[B.edge_perm]])


def test_rcm_recovers_locality(rng):
    A = _community_graph(rng)
    B, _ = A.reorder("rcm")
    assert _spread(B) < 0.7 * _spread(A)


def test_degree_order(rng):
    A = _square(rng, 200, mean_deg=5.0, hub=0)
    B, perm = A.reorder("degree")
    indeg = np.bincount(np.asarray(A.col), minlength=200)
    assert np.all(np.diff(indeg[perm]) <= 0)
    ties = indeg[perm][1:] == indeg[perm][:-1]
    assert np.all(perm[1:][ties] > perm[:-1][ties])  # stable: old order among equal degrees


def test_sort_columns(rng):
    A = _square(rng, 80, mean_deg=6.0)
    B, perm = A.reorder("rcm", sort_columns=True)
    rp, col = np.asarray(B.rowptr), np.asarray(B.col)
    for i in range(80):
        assert np.all(np.diff(col[rp[i]:rp[i + 1]]) >= 0)
    np.testing.assert_array_equal(B.to_dense(), A.to_dense()[np.ix_(perm, perm)])
    np.testing.assert_array_equal(B.val, A.val[B.edge_perm_from])


def test_empty_and_tiny(rng):
    for n in (0, 1, 2):
        A = gs.CSR(np.zeros(n + 1, np.int32), np.zeros(0, np.int32), None, (n, n))
        for m in METHODS_HERE:
            B, perm = A.reorder(m)
            assert B.shape == (n, n) and B.nnz == 0 and perm.shape == (n,)


def test_bad_inputs(rng):
    A = _square(rng, 20)
    with pytest.raises(ValueError, match="one of rcm, degree, metis"):
        A.reorder("random")
    with pytest.raises(ValueError, match="one of"):
        A.reorder(None)
    with pytest.raises(ValueError, match="METIS option"):
        A.reorder("rcm", parts=4)
    R = random_csr(rng, 20, 30)
    with pytest.raises(ValueError, match="square graph; this matrix is 20 x 30"):
        R.reorder("rcm")
    _, perm = A.reorder("rcm")
    with pytest.raises(ValueError, match="features have 19 rows, the permutation has 20"):
        permute(np.zeros((19, 3), np.float32), perm)
    with pytest.raises(ValueError, match="features have 21 rows"):
        unpermute(np.zeros((21, 3), np.float32), perm)


def test_metis_without_pymetis(rng, monkeypatch):
    real_import = builtins.__import__

    def no_pymetis(name, *args, **kwargs):
        if name == "pymetis":
            raise ImportError("No module named 'pymetis'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pymetis)
    with pytest.raises(ImportError, match="needs pymetis"):
        _square(rng, 20).reorder("metis")


@pytest.mark.skipif(not _have_pymetis(), reason="pymetis not installed")
def test_metis_parts(rng):
    A = _community_graph(rng)
    B, perm = A.reorder("metis", parts=6)
    with pytest.raises(ValueError, match="parts must be >= 1"):
        A.reorder("metis", parts=0)
    assert _spread(B) <= _spread(A)
    assert _reorder.METHODS == ("rcm", "degree", "metis")


@pytest.mark.parametrize("method", ["rcm", "degree"])
@pytest.mark.parametrize("hub", [0, 700])
def test_cuda_graph_commutes(rng, monkeypatch, method, hub):
    """Bitwise on the CUDA backend for rows reduced in one pass. A hub row (longer than the hub
    threshold, max(256, 16x the mean)) is cut into segments at fixed positions of the whole edge
    array, so when the reordering moves it its sum may be grouped differently: max / min stay
    bitwise (order-free values, ties to the first edge), sums agree to rounding."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not gs.available_backends().get("cuda"):
        pytest.skip("no CUDA device / backend")
    A = _square(rng, 2000, mean_deg=8.0, hub=hub)
    dev = torch.device("cuda")
    Ad = gs.CSR(torch.from_numpy(np.array(A.rowptr)).to(dev), torch.from_numpy(np.array(A.col)).to(dev),
                torch.from_numpy(np.array(A.val)).to(dev), A.shape)
    B, perm = Ad.reorder(method)
    assert isinstance(B.col, torch.Tensor) and B.col.device.type == "cuda"
    for C, pad in ((32, "on"), (33, "on"), (33, "off")):  # 33 padded to 36, and the scalar walk
        monkeypatch.setenv("GNNSPARSE_CUDA_PAD", pad)
        X = torch.randn(2000, C, device=dev)
        for reduce in ("sum", "max"):
            Y = gs.spmm(Ad, X, reduce)
            Yb = gs.spmm(B, permute(X, perm), reduce)
            if hub and reduce == "sum":
                torch.testing.assert_close(Yb, permute(Y, perm), rtol=1e-5, atol=1e-5)
            else:
                assert torch.equal(Yb.view(torch.int32), permute(Y, perm).view(torch.int32))
