"""Seeded generators: determinism, shapes, structure (symmetry, SBM classes, R-MAT heavy tail, grid rows)."""
import numpy as np
import pytest

from gnnsparse.bench import generators as gen


def _same(A, B):
    return (A.shape == B.shape and np.array_equal(A.rowptr, B.rowptr) and np.array_equal(A.col, B.col)
            and (A.val is None) == (B.val is None) and (A.val is None or np.array_equal(A.val, B.val)))


@pytest.mark.parametrize("make", [
    lambda s: gen.uniform_random(1000, 8000, seed=s),
    lambda s: gen.uniform_random(1000, 8000, seed=s, symmetric=True, weighted=True),
    lambda s: gen.rmat(1000, 8000, seed=s),
    lambda s: gen.sbm(1000, 5, 8.0, seed=s, feature_dim=16).A,
    lambda s: gen.grid_matrix(64, 128, 0.2, seed=s),
])
def test_seeded_determinism(make):
    a, b, c = make(7), make(7), make(8)
    assert _same(a, b)
    assert not _same(a, c)
    a.validate()


def test_seed_accepts_a_generator():
    A = gen.uniform_random(100, 500, seed=np.random.default_rng(3))
    B = gen.uniform_random(100, 500, seed=np.random.default_rng(3))
    assert _same(A, B)


def test_uniform_shapes_and_sorted_rows():
    A = gen.uniform_random(500, 6000, seed=0)
    assert A.shape == (500, 500) and A.nnz == 6000 and A.val is None
    R = gen.uniform_random(300, 2000, seed=0, m=40)
    assert R.shape == (40, 300) and R.nnz == 2000 and R.col.max() < 300
    for i in range(40):
        seg = R.col[R.rowptr[i]:R.rowptr[i + 1]]
        assert np.all(np.diff(seg) >= 0)
    W = gen.uniform_random(100, 1000, seed=0, weighted=True)
    assert W.val.dtype == np.float32 and W.val.min() >= 0.5 and W.val.max() < 1.5


def test_uniform_symmetric_is_symmetric():
    A = gen.uniform_random(400, 3001, seed=2, symmetric=True)
    assert A.nnz == 3000
    S = A.to_scipy()
    assert abs(S - S.T).max() == 0


def test_rmat_has_a_heavy_tail():
    n, e = 1 << 14, 1 << 18
    R = gen.rmat(n, e, seed=0)
    U = gen.uniform_random(n, e, seed=0)
    assert R.shape == (n, n) and R.nnz == e
    dr, du = R.degrees(), U.degrees()
    mean = e / n
    assert dr.max() > 20 * mean          # hubs
    assert du.max() < 4 * mean           # a uniform graph has none
    assert (dr == 0).sum() > 5 * (du == 0).sum() + 100   # and many more isolated nodes
    # the top 1% of nodes hold a large share of the edges
    top = np.sort(dr)[::-1][: n // 100].sum() / e
    assert top > 0.15


def test_rmat_skew_gives_hubs_and_non_power_of_two_sizes():
    R = gen.rmat(50_000, 400_000, seed=1, a=0.65, b=0.15, c=0.15)
    assert R.shape == (50_000, 50_000) and R.nnz == 400_000 and R.col.max() < 50_000
    # node 0 of the recursive matrix gets (a + b)**scale of the targets: 0.8**16 * 4e5 ~ 11k
    assert R.degrees().max() > 5_000
    S = gen.rmat(3000, 20_000, seed=1, symmetric=True)
    M = S.to_scipy()
    assert abs(M - M.T).max() == 0


def test_sbm_labels_structure_and_features():
    n, k = 3000, 6
    g = gen.sbm(n, k, 10.0, seed=0, p_intra=0.8, feature_dim=32, signal=1.0)
    A, y, X = g
    assert A.shape == (n, n) and A.nnz == n * 10
    assert y.shape == (n,) and y.dtype == np.int64 and set(np.unique(y)) == set(range(k))
    assert X.shape == (n, 32) and X.dtype == np.float32
    S = A.to_scipy()
    assert abs(S - S.T).max() == 0
    rows = np.repeat(np.arange(n), A.degrees())
    same = np.mean(y[rows] == y[A.col])
    assert abs(same - (0.8 + 0.2 / k)) < 0.03
    # features carry the labels: nearest class mean classifies far above chance (1/k)
    def accuracy(F):
        mu = np.stack([F[y == c].mean(0) for c in range(k)])
        return np.mean(np.argmin(((F[:, None, :] - mu[None]) ** 2).sum(-1), axis=1) == y)
    assert accuracy(X) > 0.9
    # and so does the graph: with weak features, one round of neighbour averaging lifts accuracy a lot
    A2, y2, X2 = gen.sbm(n, k, 10.0, seed=0, feature_dim=16, signal=0.3)
    y = y2
    H = (A2.to_scipy() @ X2) / np.maximum(A2.degrees(), 1)[:, None]
    assert accuracy(X2) < 0.6 and accuracy(H) > accuracy(X2) + 0.2


def test_grid_matrix_rows():
    A = gen.grid_matrix(100, 300, 0.1, seed=0)
    assert A.shape == (100, 300) and A.nnz == 100 * 30
    assert A.val.dtype == np.float32
    cols = A.col.reshape(100, 30)
    assert np.all(np.diff(cols, axis=1) > 0)   # distinct and sorted
    assert cols.min() >= 0 and cols.max() < 300
    # placement is uniform: every column is used about equally often
    B = gen.grid_matrix(2000, 50, 0.2, seed=0, values=False)
    counts = np.bincount(B.col, minlength=50)
    assert B.val is None and counts.min() > 0.8 * counts.mean()
    full = gen.grid_matrix(3, 5, 1.0, seed=0)
    assert np.array_equal(full.col.reshape(3, 5), np.tile(np.arange(5), (3, 1)))


def test_grid72_shapes():
    s = gen.grid72_shapes()
    assert len(s) == 72 and len(set(s)) == 72
    nnz = max(M * round(d * K) for M, K, d, _ in s)
    assert nnz == 32768 * 2458 and abs(nnz - 80.5e6) < 0.1e6
    assert {N for *_, N in s} == {32, 128}


@pytest.mark.parametrize("call, message", [
    (lambda: gen.uniform_random(0, 10), "n > 0"),
    (lambda: gen.rmat(100, 10, a=0.9, b=0.2, c=0.1), "probabilities"),
    (lambda: gen.sbm(10, 2, 3.0, p_intra=1.5), "p_intra"),
    (lambda: gen.grid_matrix(10, 10, 1.5), "density"),
    (lambda: gen.uniform_random(10, 10, m=5, symmetric=True), "square"),
])
def test_bad_parameters(call, message):
    with pytest.raises(ValueError, match=message):
        call()
