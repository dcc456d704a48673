"""The dense-ish CUDA SpMM path (cuda/panel.cu): row panels with X staged in shared memory.

GPU tests force the method with GNNSPARSE_CUDA_SPMM=panel (and the column block / K split with
GNNSPARSE_CUDA_PANEL_BN / _SPLIT) on random dense-ish CSRs with sorted columns, repeated columns,
empty rows, long rows and odd sizes, and check against gnnsparse.reference (fp64) with outputs
poisoned (conftest: GNNSPARSE_POISON) and every result repeated bitwise. Which path ran is seen
through an invalid GNNSPARSE_CUDA_PANEL_BN: it is read only once the panel path is taken, so a call
that raises took it and a call that does not stayed on the row kernels. The sortedness check of
gnnsparse.CSR (what lets the path be taken at all) runs on the CPU too.
"""
import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import reference as ref

torch = pytest.importorskip("torch")


def _cuda_ready():
    from gnnsparse import _cuda_backend

    return _cuda_backend.backend.available() and torch.cuda.is_available()


def _needs_cuda():
    if not _cuda_ready():
        pytest.skip("no CUDA device or no compiled gnnsparse CUDA module")


def dense_ish(M, K, density, seed, *, empty_frac=0.1, dup=True, long_rows=0, unsorted=False, values=True,
              repeat_first=False):
    """rowptr, col, val (NumPy) of a random M x K CSR: sorted columns (unless `unsorted`), a few
    repeated columns, empty rows (the last row always), `long_rows` rows holding every column (the
    first of them twice with `repeat_first`)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(M):
        if i == M - 1 or rng.random() < empty_frac:
            rows.append(np.zeros(0, np.int64))
            continue
        if i < long_rows:
            c = np.arange(K, dtype=np.int64)
            if i == 0 and repeat_first:
                c = np.repeat(c, 2)
        else:
            c = np.flatnonzero(rng.random(K) < density).astype(np.int64)
        if dup and c.size > 2:
            c = np.sort(np.concatenate([c, rng.choice(c, 2)]))  # repeated columns stay sorted
        if unsorted and c.size > 1:
            c = rng.permutation(c)
        rows.append(c)
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum([r.size for r in rows], out=rowptr[1:])
    col = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    val = rng.uniform(-1, 1, col.size).astype(np.float32) if values else None
    return rowptr, col, val


def dev_csr(rowptr, col, val, M, K, itype="int32"):
    it = torch.int32 if itype == "int32" else torch.int64
    r = torch.from_numpy(rowptr).to("cuda", it)
    c = torch.from_numpy(col).to("cuda", it)
    v = None if val is None else torch.from_numpy(val).to("cuda")
    return gs.CSR(r, c, v, shape=(M, K))


def feats(K, N, seed, misalign=False):
    x = torch.from_numpy(np.random.default_rng(seed).uniform(-1, 1, (K, N)).astype(np.float32))
    if not misalign:
        return x.to("cuda")
    buf = torch.empty(K * N + 1, device="cuda")  # 4 bytes past a 16-byte boundary: the scalar path
    buf[1:] = x.reshape(-1).to("cuda")
    out = buf[1:].view(K, N)
    assert out.data_ptr() % 16 != 0 and out.is_contiguous()
    return out


def check(A, X, reduce, Y):
    want = ref.spmm(A, X.cpu().numpy(), reduce)
    got = Y.cpu().numpy().astype(np.float64)
    assert np.isfinite(got).all(), "an output element was left unwritten (NaN poison) or overflowed"
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * scale)


def run(A, X, reduce="sum"):
    """Y twice, the second compared bitwise with the first."""
    Y = gs.spmm(A, X, reduce=reduce)
    Y2 = gs.spmm(A, X, reduce=reduce)
    assert torch.equal(Y.view(torch.int32), Y2.view(torch.int32)), "not bitwise reproducible"
    return Y


def takes_panel(A, X, reduce="sum"):
    """Whether the call reaches the panel path (an invalid column-block knob is read only there)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNNSPARSE_CUDA_PANEL_BN", "7")
        try:
            gs.spmm(A, X, reduce=reduce)
        except ValueError as e:
            assert "GNNSPARSE_CUDA_PANEL_BN" in str(e)
            return True
        return False


# ------------------------------------------------------------------- the CSR's sortedness (CPU)
def test_sorted_cols_check():
    rowptr, col, val = dense_ish(40, 30, 0.3, 1)
    A = gs.CSR(rowptr, col, val, shape=(40, 30))
    assert A.sorted_cols()
    # a decrease across a row boundary is allowed; inside a row it is not
    assert gs.CSR(np.array([0, 2, 4]), np.array([3, 5, 0, 1]), shape=(2, 6)).sorted_cols()
    assert not gs.CSR(np.array([0, 2, 4]), np.array([3, 5, 1, 0]), shape=(2, 6)).sorted_cols()
    assert gs.CSR(np.array([0, 0, 3, 3]), np.array([1, 1, 2]), shape=(3, 4)).sorted_cols()  # repeats, empty rows
    assert gs.CSR(np.array([0, 0]), np.zeros(0, np.int64), shape=(1, 4)).sorted_cols()
    r2, c2, v2 = dense_ish(40, 30, 0.3, 2, unsorted=True)
    U = gs.CSR(r2, c2, v2, shape=(40, 30))
    assert not U.sorted_cols()
    assert U.with_values(None).sorted_cols() is False


def test_sorted_cols_torch_matches_numpy():
    for seed, unsorted in ((3, False), (4, True)):
        rowptr, col, val = dense_ish(50, 40, 0.2, seed, unsorted=unsorted)
        A = gs.CSR(torch.from_numpy(rowptr), torch.from_numpy(col), torch.from_numpy(val), shape=(50, 40))
        assert A.sorted_cols() == (not unsorted)


# ------------------------------------------------------------------- the panel kernels (GPU)
@pytest.mark.cuda
@pytest.mark.parametrize("N", [32, 128, 64, 96, 4, 12, 1, 7, 33])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_panel_matches_reference(monkeypatch, N, reduce):
    """Vector shapes (N % 4 == 0, column tails at 4 / 12 / 96) and the scalar one (1, 7, 33; 33 is
    not padded to 36 here, GNNSPARSE_CUDA_PAD=off)."""
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "panel")
    monkeypatch.setenv("GNNSPARSE_CUDA_PAD", "off")
    M, K = 301, 777  # odd sizes: partial panels and chunks
    rowptr, col, val = dense_ish(M, K, 0.2, N, long_rows=3)
    A = dev_csr(rowptr, col, val, M, K)
    X = feats(K, N, N + 1)
    assert takes_panel(A, X, reduce)
    check(A, X, reduce, run(A, X, reduce))


@pytest.mark.cuda
@pytest.mark.parametrize("bn", ["32", "64", "128"])
@pytest.mark.parametrize("split", ["1", "3", "8"])
@pytest.mark.parametrize("itype", ["int32", "int64"])
def test_panel_shapes_and_splits(monkeypatch, bn, split, itype):
    """Every column block and K split, against the reference; long rows span many batches and
    chunks, and a split starts its rows in the middle (the group's search)."""
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "panel")
    monkeypatch.setenv("GNNSPARSE_CUDA_PANEL_BN", bn)
    monkeypatch.setenv("GNNSPARSE_CUDA_PANEL_SPLIT", split)
    M, K, N = 200, 2500, 128
    rowptr, col, val = dense_ish(M, K, 0.15, int(bn) + int(split), long_rows=5)
    A = dev_csr(rowptr, col, val, M, K, itype)
    X = feats(K, N, 9)
    check(A, X, "sum", run(A, X, "sum"))
    check(A, X, "mean", run(A, X, "mean"))


@pytest.mark.cuda
def test_panel_unweighted_misaligned_and_tiny(monkeypatch):
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "panel")
    M, K = 129, 65
    rowptr, col, _ = dense_ish(M, K, 0.4, 11, values=False)
    A = dev_csr(rowptr, col, None, M, K)
    for N, mis in ((32, True), (8, True), (16, False)):
        X = feats(K, N, N, misalign=mis)
        assert takes_panel(A, X)
        check(A, X, "sum", run(A, X))
        check(A, X, "mean", run(A, X, "mean"))
    # one row, one column
    A1 = dev_csr(np.array([0, 3]), np.array([0, 0, 0]), np.array([1.0, 2.0, -0.5], np.float32), 1, 1)
    X1 = feats(1, 1, 3)
    check(A1, X1, "sum", run(A1, X1))


@pytest.mark.cuda
def test_panel_all_rows_empty_but_one(monkeypatch):
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "panel")
    M, K = 60, 300  # density 1 / 60: above the CSR's sortedness check (1 %)
    rowptr = np.zeros(M + 1, np.int64)
    rowptr[31:] = K  # row 30 holds every column, the others nothing
    col = np.arange(K, dtype=np.int64)
    A = dev_csr(rowptr, col, np.ones(K, np.float32), M, K)
    X = feats(K, 32, 5)
    assert takes_panel(A, X)
    for reduce in ("sum", "mean"):
        check(A, X, reduce, run(A, X, reduce))


@pytest.mark.cuda
def test_panel_bits_do_not_depend_on_the_column_block(monkeypatch):
    """Unsplit, every output element is one fma chain over its row in ascending order, whatever the
    column block (and close to the row kernels, which may split a row's edges)."""
    _needs_cuda()
    M, K, N = 256, 1024, 128
    rowptr, col, val = dense_ish(M, K, 0.1, 21)
    A = dev_csr(rowptr, col, val, M, K)
    X = feats(K, N, 22)
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "panel")
    monkeypatch.setenv("GNNSPARSE_CUDA_PANEL_SPLIT", "1")
    outs = []
    for bn in ("32", "64", "128"):
        monkeypatch.setenv("GNNSPARSE_CUDA_PANEL_BN", bn)
        outs.append(run(A, X))
    for o in outs[1:]:
        assert torch.equal(o.view(torch.int32), outs[0].view(torch.int32))  # one chain per element
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "row")
    Yr = run(A, X)
    np.testing.assert_allclose(outs[0].cpu().numpy(), Yr.cpu().numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
def test_dispatch(monkeypatch):
    """auto takes the panel path only where it measured faster (cuda/policy.cuh, PanelTuning:
    C = 128, density >= 0.25, M >= 16384); never on a graph, unsorted rows, max / min, fp64, or
    with the row kernels forced."""
    _needs_cuda()
    monkeypatch.delenv("GNNSPARSE_CUDA_SPMM", raising=False)
    M, K = 16384, 64
    rowptr, col, val = dense_ish(M, K, 0.4, 31)  # density ~0.39 (10 % empty rows, repeats)
    A = dev_csr(rowptr, col, val, M, K)
    X = feats(K, 128, 32)
    assert takes_panel(A, X)
    assert takes_panel(A, X, "mean")
    assert not takes_panel(A, feats(K, 32, 33))  # C = 32: the row kernels measured faster
    assert not takes_panel(A, X, "max")
    assert not takes_panel(A, X.double())
    check(A, X, "sum", run(A, X))
    r2, c2, v2 = dense_ish(M, K, 0.15, 34)  # density below 0.25
    assert not takes_panel(dev_csr(r2, c2, v2, M, K), X)
    r3, c3, v3 = dense_ish(8192, K, 0.4, 35)  # too few rows
    assert not takes_panel(dev_csr(r3, c3, v3, 8192, K), X)
    # a graph: 10 entries per row
    g_rowptr = np.arange(0, 10 * M + 1, 10, dtype=np.int64)
    g_col = np.sort(np.random.default_rng(1).integers(0, 100000, (M, 10)), axis=1).reshape(-1)
    G = dev_csr(g_rowptr, g_col, None, M, 100000)
    assert not takes_panel(G, feats(100000, 128, 2))
    # unsorted rows, even when the panel path is forced
    r4, c4, v4 = dense_ish(M, K, 0.4, 36, unsorted=True)
    U = dev_csr(r4, c4, v4, M, K)
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "panel")
    assert not takes_panel(U, X)
    check(U, X, "sum", run(U, X))
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "row")
    assert not takes_panel(A, X)


@pytest.mark.cuda
def test_bad_knobs_name_themselves(monkeypatch):
    _needs_cuda()
    M, K = 64, 64
    rowptr, col, val = dense_ish(M, K, 0.3, 41)
    A = dev_csr(rowptr, col, val, M, K)
    X = feats(K, 32, 3)
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "fast")
    with pytest.raises(ValueError, match="GNNSPARSE_CUDA_SPMM"):
        gs.spmm(A, X)
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "panel")
    monkeypatch.setenv("GNNSPARSE_CUDA_PANEL_SPLIT", "0")
    with pytest.raises(ValueError, match="GNNSPARSE_CUDA_PANEL_SPLIT"):
        gs.spmm(A, X)


@pytest.mark.cuda
def test_torch_layer_gradients_through_panel(monkeypatch):
    """The torch route (grad mode) reaches the same kernels: forward and the gradient of X (the
    transpose's SpMM) against fp64 torch."""
    _needs_cuda()
    import gnnsparse.torch  # noqa: F401  (registers the torch layer)

    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "panel")
    M, K, N = 200, 300, 32
    rowptr, col, val = dense_ish(M, K, 0.25, 51)
    A = dev_csr(rowptr, col, val, M, K)
    X = feats(K, N, 52).requires_grad_(True)
    Y = gs.spmm(A, X)
    G = torch.from_numpy(np.random.default_rng(53).uniform(-1, 1, (M, N)).astype(np.float32)).cuda()
    (Y * G).sum().backward()
    D = torch.zeros(M, K, dtype=torch.float64)
    rows = np.repeat(np.arange(M), np.diff(rowptr))
    D.index_put_((torch.from_numpy(rows), torch.from_numpy(col)), torch.from_numpy(val).double(), accumulate=True)
    Xd = X.detach().cpu().double()
    np.testing.assert_allclose(Y.detach().cpu().numpy(), (D @ Xd).numpy(), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(X.grad.cpu().numpy(), (D.T @ G.cpu().double()).numpy(), rtol=2e-5, atol=2e-5)
