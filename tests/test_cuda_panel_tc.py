"""The dense-ish CUDA SpMM on tensor cores (cuda/panel_tc.cu): row panels densified by scatter,
3xTF32 products (fp32 accuracy) or TF32 ones (precision="tf32").

GPU tests force the kernels with GNNSPARSE_CUDA_SPMM=tc (and the column block / K split with
GNNSPARSE_CUDA_TC_BN / _SPLIT) on random dense-ish CSRs with sorted columns, repeated columns,
empty rows and odd sizes, and check against gnnsparse.reference (fp64) with outputs poisoned
(conftest: GNNSPARSE_POISON) and every result repeated bitwise. Which path ran is seen through an
invalid GNNSPARSE_CUDA_TC_BN: it is read only once the tensor-core path is taken.
"""
import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import reference as ref

from test_cuda_panel import _needs_cuda, dense_ish, dev_csr, feats, run

torch = pytest.importorskip("torch")

FP32_BOUND = 1e-5  # max error / max |fp64 reference| (cuSPARSE fp32 on the grid: 2.3e-6)
TF32_BOUND = 5e-3  # TF32 operands: 10-bit significands, fp32 accumulation


def check(A, X, reduce, Y, bound=FP32_BOUND):
    """Y against the fp64 reference: every element written, max error <= bound x max |reference|."""
    want = ref.spmm(A, X.cpu().numpy(), reduce)
    got = Y.cpu().numpy().astype(np.float64)
    assert np.isfinite(got).all(), "an output element was left unwritten (NaN poison) or overflowed"
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    err = float(np.abs(got - want).max()) / scale if want.size else 0.0
    assert err <= bound, f"max error {err:.3g} x max |reference| > {bound}"
    return err


def takes_tc(A, X, reduce="sum", precision="fp32"):
    """Whether the call reaches the tensor-core path (an invalid column-block knob is read only there)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNNSPARSE_CUDA_TC_BN", "7")
        try:
            gs.spmm(A, X, reduce=reduce, precision=precision)
        except ValueError as e:
            assert "GNNSPARSE_CUDA_TC_BN" in str(e)
            return True
        return False


@pytest.mark.cuda
@pytest.mark.parametrize("N", [4, 12, 32, 36, 128])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_tc_matches_reference(monkeypatch, N, reduce):
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "tc")
    M, K = 173, 301  # odd: partial panels, a partial last chunk of K
    rowptr, col, val = dense_ish(M, K, 0.2, 100 + N)
    A = dev_csr(rowptr, col, val, M, K)
    X = feats(K, N, 7 + N)
    assert takes_tc(A, X, reduce)
    check(A, X, reduce, run(A, X, reduce))


@pytest.mark.cuda
@pytest.mark.parametrize("bn", ["32", "64", "128"])
@pytest.mark.parametrize("split", ["1", "3", "8"])
@pytest.mark.parametrize("itype", ["int32", "int64"])
def test_tc_shapes_and_splits(monkeypatch, bn, split, itype):
    _needs_cuda()
    M, K, N = 300, 700, 132  # N: more than one column block at every BN, a partial last one
    rowptr, col, val = dense_ish(M, K, 0.15, 11, long_rows=3)  # long rows: > 32 entries a chunk
    A = dev_csr(rowptr, col, val, M, K, itype)
    X = feats(K, N, 12)
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "tc")
    monkeypatch.setenv("GNNSPARSE_CUDA_TC_BN", bn)
    monkeypatch.setenv("GNNSPARSE_CUDA_TC_SPLIT", split)
    for reduce in ("sum", "mean"):
        check(A, X, reduce, run(A, X, reduce))


@pytest.mark.cuda
@pytest.mark.parametrize("split", ["1", "4"])
def test_tc_repeated_columns_sum_in_order(monkeypatch, split):
    """Runs of one column longer than a round of 32 entries (more rounds inside the chunk, the
    run's parts added in order); runs across round and batch borders; unweighted."""
    _needs_cuda()
    M, K, N = 40, 200, 32
    rng = np.random.default_rng(61)
    rows = []
    for i in range(M):
        if i % 7 == 3:
            rows.append(np.zeros(0, np.int64))
            continue
        base = np.flatnonzero(rng.random(K) < 0.3)
        reps = rng.integers(1, 4, base.size)
        if i % 5 == 0 and base.size:
            reps[rng.integers(0, base.size)] = 100  # one column 100 times
        rows.append(np.repeat(base, reps))
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum([r.size for r in rows], out=rowptr[1:])
    col = np.concatenate(rows)
    val = rng.uniform(-1, 1, col.size).astype(np.float32)
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "tc")
    monkeypatch.setenv("GNNSPARSE_CUDA_TC_SPLIT", split)
    X = feats(K, N, 62)
    for v in (val, None):
        A = dev_csr(rowptr, col, v, M, K)
        assert takes_tc(A, X)
        for reduce in ("sum", "mean"):
            check(A, X, reduce, run(A, X, reduce))


@pytest.mark.cuda
@pytest.mark.parametrize("density", [0.55, 0.95])
@pytest.mark.parametrize("split", ["1", "3"])
def test_tc_rows_denser_than_a_round(monkeypatch, density, split):
    """More than 32 entries of a row in one 64-column chunk without repeats (the second pass: more
    rounds), mixed with sparse and empty rows in one batch; N = 32 (16-row batches) and 128 (8)."""
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "tc")
    monkeypatch.setenv("GNNSPARSE_CUDA_TC_SPLIT", split)
    M, K = 150, 333
    rowptr, col, val = dense_ish(M, K, density, 140, empty_frac=0.15, dup=False)
    r2, c2, v2 = dense_ish(M, K, 0.05, 141, dup=True)
    # every third row from the sparse matrix: dense, sparse and empty rows side by side
    rows = [(col[rowptr[i]:rowptr[i + 1]], val[rowptr[i]:rowptr[i + 1]]) if i % 3 else
            (c2[r2[i]:r2[i + 1]], v2[r2[i]:r2[i + 1]]) for i in range(M)]
    rp = np.zeros(M + 1, np.int64)
    np.cumsum([c.size for c, _ in rows], out=rp[1:])
    A = dev_csr(rp, np.concatenate([c for c, _ in rows]), np.concatenate([v for _, v in rows]), M, K)
    for N in (32, 128):
        X = feats(K, N, 142 + N)
        assert takes_tc(A, X)
        for reduce in ("sum", "mean"):
            check(A, X, reduce, run(A, X, reduce))


@pytest.mark.cuda
def test_tc_empty_rows_and_tiny(monkeypatch):
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "tc")
    # all rows empty but one (which holds every column: density 1.5 %, over the CSR's 1 % check)
    M, K, N = 66, 50, 36
    rowptr = np.zeros(M + 1, np.int64)
    rowptr[65:] = K
    col = np.arange(K, dtype=np.int64)
    val = np.random.default_rng(70).uniform(-1, 1, K).astype(np.float32)
    A = dev_csr(rowptr, col, val, M, K)
    X = feats(K, N, 71)
    assert takes_tc(A, X)
    for reduce in ("sum", "mean"):
        Y = run(A, X, reduce)
        check(A, X, reduce, Y)
        assert not Y[:64].any() and not Y[65:].any()
    # one row or one column, N = 4
    for M, K in ((1, 1), (3, 1), (1, 40)):
        A = dev_csr(np.arange(0, M * K + 1, K, dtype=np.int64), np.tile(np.arange(K), M), None, M, K)
        X = feats(K, 4, 72)
        assert takes_tc(A, X)
        check(A, X, "sum", run(A, X))


@pytest.mark.cuda
def test_tc_error_bound_fp32_and_tf32(monkeypatch):
    """A grid-like case (rows of ~1,200 entries): fp32 within 1e-5 of fp64 relative to max
    |reference|; precision tf32 within the TF32 bound and measurably less accurate."""
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "tc")
    M, K, N = 512, 4096, 128
    rowptr, col, val = dense_ish(M, K, 0.3, 81, empty_frac=0.02, dup=False)
    A = dev_csr(rowptr, col, val, M, K)
    X = feats(K, N, 82)
    e32 = check(A, X, "sum", run(A, X))
    Yt = gs.spmm(A, X, precision="tf32")
    Yt2 = gs.spmm(A, X, precision="tf32")
    assert torch.equal(Yt.view(torch.int32), Yt2.view(torch.int32))
    et = check(A, X, "sum", Yt, TF32_BOUND)
    assert et > 4 * e32, (et, e32)  # the tf32 kernel really ran with TF32 operands
    check(A, X, "mean", gs.spmm(A, X, reduce="mean", precision="tf32"), TF32_BOUND)
    # bf16 requests run the fp32 kernel
    check(A, X, "sum", gs.spmm(A, X, precision="bf16"))


@pytest.mark.cuda
def test_tc_dispatch(monkeypatch):
    """auto never takes the tensor cores (measured slower than the row kernels in every grid cell,
    2026-12-02: policy.cuh), whatever the density, width or precision; GNNSPARSE_CUDA_SPMM=tc
    forces them for eligible calls only: never for max / min, fp64, C % 4 != 0, a misaligned X or
    unsorted rows, which then run the other kernels correctly."""
    _needs_cuda()
    monkeypatch.delenv("GNNSPARSE_CUDA_SPMM", raising=False)
    M, K = 2048, 512
    rowptr, col, val = dense_ish(M, K, 0.3, 91, empty_frac=0.0)
    A = dev_csr(rowptr, col, val, M, K)
    X128, X32 = feats(K, 128, 92), feats(K, 32, 93)
    for X in (X128, X32):
        for precision in ("fp32", "tf32", "bf16"):
            assert not takes_tc(A, X, precision=precision)
    assert not takes_tc(A, X128, "mean")
    check(A, X128, "sum", run(A, X128))
    # forced: eligible calls take it, ineligible ones do not
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "tc")
    assert takes_tc(A, X128) and takes_tc(A, X128, "mean") and takes_tc(A, X32)
    assert takes_tc(A, X32, precision="tf32")
    assert not takes_tc(A, X128, "max")
    assert not takes_tc(A, X128.double())
    assert not takes_tc(A, feats(K, 128, 95, misalign=True))
    r4, c4, v4 = dense_ish(M, K, 0.3, 97, unsorted=True)
    U = dev_csr(r4, c4, v4, M, K)
    assert not takes_tc(U, X128)
    check(U, X128, "sum", run(U, X128))
    X30 = feats(K, 30, 98)
    assert takes_tc(A, X30)  # run on a zero-padded copy of 32 columns (gnnsparse._ops._vector_width)
    check(A, X30, "mean", run(A, X30, "mean"))
    monkeypatch.setenv("GNNSPARSE_CUDA_PAD", "off")  # at 30 columns itself: never
    assert not takes_tc(A, X30)
    check(A, X30, "mean", run(A, X30, "mean"))
    monkeypatch.delenv("GNNSPARSE_CUDA_PAD")
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "row")
    assert not takes_tc(A, X128)


@pytest.mark.cuda
def test_tc_bad_knobs_name_themselves(monkeypatch):
    _needs_cuda()
    M, K = 64, 64
    rowptr, col, val = dense_ish(M, K, 0.3, 41)
    A = dev_csr(rowptr, col, val, M, K)
    X = feats(K, 32, 3)
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "tensor")
    with pytest.raises(ValueError, match="GNNSPARSE_CUDA_SPMM"):
        gs.spmm(A, X)
    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "tc")
    monkeypatch.setenv("GNNSPARSE_CUDA_TC_SPLIT", "9")
    with pytest.raises(ValueError, match="GNNSPARSE_CUDA_TC_SPLIT"):
        gs.spmm(A, X)
    monkeypatch.delenv("GNNSPARSE_CUDA_TC_SPLIT")
    monkeypatch.setenv("GNNSPARSE_CUDA_TC_BN", "48")
    with pytest.raises(ValueError, match="GNNSPARSE_CUDA_TC_BN"):
        gs.spmm(A, X)


@pytest.mark.cuda
def test_torch_layer_gradients_through_tc(monkeypatch):
    """The torch route (grad mode) reaches the same kernels: forward and the gradient of X."""
    _needs_cuda()
    import gnnsparse.torch  # noqa: F401  (registers the torch layer)

    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "tc")
    M, K, N = 200, 300, 32
    rowptr, col, val = dense_ish(M, K, 0.25, 51)
    A = dev_csr(rowptr, col, val, M, K)
    X = feats(K, N, 52).requires_grad_(True)
    assert takes_tc(A, X.detach())
    Y = gs.spmm(A, X)
    G = torch.from_numpy(np.random.default_rng(53).uniform(-1, 1, (M, N)).astype(np.float32)).cuda()
    (Y * G).sum().backward()
    D = torch.zeros(M, K, dtype=torch.float64)
    rows = np.repeat(np.arange(M), np.diff(rowptr))
    D.index_put_((torch.from_numpy(rows), torch.from_numpy(col)), torch.from_numpy(val).double(), accumulate=True)
    Xd = X.detach().cpu().double()
    np.testing.assert_allclose(Y.detach().cpu().numpy(), (D @ Xd).numpy(), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(X.grad.cpu().numpy(), (D.T @ G.cpu().double()).numpy(), rtol=2e-5, atol=2e-5)
