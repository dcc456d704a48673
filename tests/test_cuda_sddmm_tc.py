"""The dense-ish CUDA SDDMM dot on tensor cores (cuda/sddmm_tc.cu): score tiles per row panel and
column chunk (3xTF32 mma.sync for fp32), sampled at the CSR's entries.

GPU tests force the method with GNNSPARSE_CUDA_SDDMM=tc (and the K split with
GNNSPARSE_CUDA_SDDMM_TC_SPLIT) on random dense-ish CSRs with sorted columns, repeated columns,
empty rows, long rows and odd sizes, and check against gnnsparse.reference (fp64) with outputs
poisoned (conftest: GNNSPARSE_POISON) and every result repeated bitwise. The error bound is per
entry, relative to the sum of |x_f y_f| of its dot product (what an fp32-accurate dot can promise
whatever the cancellation). Which path ran is seen through an invalid GNNSPARSE_CUDA_SDDMM_TC_SPLIT:
it is read only once the tensor-core path is taken, so a call that raises took it and a call that
does not stayed on sddmm.cu's kernels.
"""
import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import reference as ref

torch = pytest.importorskip("torch")

from test_cuda_panel import _needs_cuda, feats  # noqa: E402
from test_cuda_panel import dense_ish as _dense_ish  # noqa: E402
from test_cuda_panel import dev_csr as _dev_csr  # noqa: E402


def dense_ish(M, K, density, seed, **kw):
    """rowptr, col of test_cuda_panel's matrices, without values (SDDMM samples the pattern); the
    first long row holds every column twice (more entries than a chunk's column window)."""
    rowptr, col, _ = _dense_ish(M, K, density, seed, values=False, repeat_first=True, **kw)
    return rowptr, col


def dev_csr(rowptr, col, M, K, itype="int32"):
    return _dev_csr(rowptr, col, None, M, K, itype)


def check(A, X, Y, E, rtol=1e-5):
    """|E - fp64| <= rtol * sum_f |X[i, f] Y[j, f]| for every entry (i, j)."""
    want = ref.sddmm(A, X.cpu().numpy(), Y.cpu().numpy(), "dot")
    mag = ref.sddmm(A, np.abs(X.cpu().numpy()), np.abs(Y.cpu().numpy()), "dot")
    got = E.cpu().numpy().astype(np.float64)
    assert got.shape == want.shape
    assert np.isfinite(got).all(), "an entry was left unwritten (NaN poison) or overflowed"
    bad = np.abs(got - want) > rtol * mag + 1e-30
    assert not bad.any(), f"{bad.sum()} entries off; worst {np.max(np.abs(got - want) / (mag + 1e-30)):.2e} of |x||y|"


def run(A, X, Y, precision="fp32"):
    """E twice, the second compared bitwise with the first."""
    E = gs.sddmm(A, X, Y, "dot", precision=precision)
    E2 = gs.sddmm(A, X, Y, "dot", precision=precision)
    assert torch.equal(E.view(torch.int32), E2.view(torch.int32)), "not bitwise reproducible"
    return E


def takes_tc(A, X, Y, precision="fp32"):
    """Whether the call reaches the tensor-core path (an invalid split knob is read only there)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNNSPARSE_CUDA_SDDMM_TC_SPLIT", "0")
        try:
            gs.sddmm(A, X, Y, "dot", precision=precision)
        except ValueError as e:
            assert "GNNSPARSE_CUDA_SDDMM_TC_SPLIT" in str(e)
            return True
        return False


@pytest.mark.cuda
@pytest.mark.parametrize("N", [4, 12, 32, 36, 64, 128])
@pytest.mark.parametrize("itype", ["int32", "int64"])
def test_tc_matches_reference(monkeypatch, N, itype):
    """Every staged width (32 / 64 / 128, feature tails at 4 / 12 / 36), odd M and K (partial panels
    and chunks), repeated columns, empty rows, rows with every column (twice in row 0)."""
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM", "tc")
    M, K = 301, 777
    rowptr, col = dense_ish(M, K, 0.2, N, long_rows=3)
    A = dev_csr(rowptr, col, M, K, itype)
    X, Y = feats(M, N, N + 1), feats(K, N, N + 2)
    assert takes_tc(A, X, Y)
    check(A, X, Y, run(A, X, Y))


@pytest.mark.cuda
@pytest.mark.parametrize("split", ["1", "2", "3", "8", "64"])
@pytest.mark.parametrize("itype", ["int32", "int64"])
def test_tc_k_splits(monkeypatch, split, itype):
    """One panel, K split into slices (each starts its rows with a binary search); the result does
    not depend on the split bitwise (each entry's score is computed by one block, the same way)."""
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM", "tc")
    M, K, N = 40, 3001, 64
    rowptr, col = dense_ish(M, K, 0.3, int(split) + 7, long_rows=2)
    A = dev_csr(rowptr, col, M, K, itype)
    X, Y = feats(M, N, 3), feats(K, N, 4)
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM_TC_SPLIT", split)
    E = run(A, X, Y)
    check(A, X, Y, E)
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM_TC_SPLIT", "1")
    assert torch.equal(E.view(torch.int32), run(A, X, Y).view(torch.int32))
    monkeypatch.delenv("GNNSPARSE_CUDA_SDDMM_TC_SPLIT")
    assert torch.equal(E.view(torch.int32), run(A, X, Y).view(torch.int32))  # the plan's split


@pytest.mark.cuda
def test_tc_tf32(monkeypatch):
    """precision='tf32': one tf32 product per step (operands rounded to 10 mantissa bits); bf16: one
    bf16 product per 16-wide step (operands rounded to 8 bits), coarser than tf32, finer than 1e-2;
    at fp32 the row kernels (GNNSPARSE_CUDA_SDDMM=row) stay exact."""
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM", "tc")
    M, K, N = 200, 500, 128
    rowptr, col = dense_ish(M, K, 0.25, 61)
    A = dev_csr(rowptr, col, M, K)
    X, Y = feats(M, N, 62), feats(K, N, 63)
    assert takes_tc(A, X, Y, "tf32")
    check(A, X, Y, run(A, X, Y, "tf32"), rtol=5e-3)
    assert takes_tc(A, X, Y, "bf16")
    eb = run(A, X, Y, "bf16")
    check(A, X, Y, eb, rtol=1e-2)
    et = run(A, X, Y, "tf32")
    want = torch.from_numpy(ref.sddmm(A, X.cpu().numpy(), Y.cpu().numpy(), "dot")).to(eb.device)
    assert (eb.double() - want).abs().max() > (et.double() - want).abs().max()  # bf16 is coarser
    for n in (4, 12, 36):  # feature tails inside one 16-wide bf16 step
        Xn, Yn = X[:, :n].contiguous(), Y[:, :n].contiguous()
        assert takes_tc(A, Xn, Yn, "bf16")
        check(A, Xn, Yn, run(A, Xn, Yn, "bf16"), rtol=1e-2)
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM", "row")
    check(A, X, Y, run(A, X, Y, "bf16"))


@pytest.mark.cuda
def test_tc_small_and_degenerate(monkeypatch):
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM", "tc")
    # one row, one column, the same entry three times
    A1 = dev_csr(np.array([0, 3]), np.array([0, 0, 0]), 1, 1)
    X1, Y1 = feats(1, 4, 1), feats(1, 4, 2)
    assert takes_tc(A1, X1, Y1)
    check(A1, X1, Y1, run(A1, X1, Y1))
    # every row empty but one, which holds every column
    M, K = 60, 300
    rowptr = np.zeros(M + 1, np.int64)
    rowptr[31:] = K
    A2 = dev_csr(rowptr, np.arange(K, dtype=np.int64), M, K)
    X2, Y2 = feats(M, 32, 3), feats(K, 32, 4)
    assert takes_tc(A2, X2, Y2)
    check(A2, X2, Y2, run(A2, X2, Y2))
    # more rows than a panel, fewer columns than a chunk
    rowptr, col = dense_ish(257, 9, 0.5, 5)
    A3 = dev_csr(rowptr, col, 257, 9)
    X3, Y3 = feats(257, 12, 6), feats(9, 12, 7)
    assert takes_tc(A3, X3, Y3)
    check(A3, X3, Y3, run(A3, X3, Y3))


@pytest.mark.cuda
def test_tc_ineligible_calls_stay_on_the_row_kernels(monkeypatch):
    """Forced, the tensor-core path still declines what it does not cover, and those calls stay
    correct: F % 4 != 0, F > 128, misaligned X, unsorted rows, several heads, fp64, op add."""
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM", "tc")
    M, K = 130, 200
    rowptr, col = dense_ish(M, K, 0.3, 71)
    A = dev_csr(rowptr, col, M, K)
    for F, mis in ((6, False), (132, False), (32, True)):
        X, Y = feats(M, F, F, misalign=mis), feats(K, F, F + 1)
        assert not takes_tc(A, X, Y)
        check(A, X, Y, run(A, X, Y))
    X, Y = feats(M, 32, 8), feats(K, 32, 9)
    assert not takes_tc(A, X.double(), Y.double())
    r2, c2 = dense_ish(M, K, 0.3, 72, unsorted=True)
    U = dev_csr(r2, c2, M, K)
    assert not takes_tc(U, X, Y)
    check(U, X, Y, run(U, X, Y))
    Xh, Yh = X.view(M, 2, 16), Y.view(K, 2, 16)  # two heads
    assert not takes_tc(A, Xh, Yh)
    Eh = gs.sddmm(A, Xh, Yh, "dot")
    want = ref.sddmm(A, Xh.cpu().numpy(), Yh.cpu().numpy(), "dot")
    np.testing.assert_allclose(Eh.cpu().numpy(), want, rtol=1e-5, atol=1e-5)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNNSPARSE_CUDA_SDDMM_TC_SPLIT", "0")
        gs.sddmm(A, feats(M, 1, 10)[:, 0].contiguous(), feats(K, 1, 11)[:, 0].contiguous(), "add")


@pytest.mark.cuda
def test_dispatch(monkeypatch):
    """auto takes the tensor-core path from the measured crossover density on (cuda/policy.cuh,
    SddmmTcTuning: density >= 0.1 at F <= 32, 0.15 at F >= 128, K >= 256); never below it, on a
    graph, with K < 256, or with the row kernels forced."""
    _needs_cuda()
    monkeypatch.delenv("GNNSPARSE_CUDA_SDDMM", raising=False)
    M, K, N = 300, 512, 32
    rowptr, col = dense_ish(M, K, 0.3, 81)
    A = dev_csr(rowptr, col, M, K)
    X, Y = feats(M, N, 82), feats(K, N, 83)
    assert takes_tc(A, X, Y)
    check(A, X, Y, run(A, X, Y))
    r2, c2 = dense_ish(M, K, 0.04, 84, empty_frac=0.0)  # density ~0.04: below the crossover
    assert not takes_tc(dev_csr(r2, c2, M, K), X, Y)
    # density ~0.12: above the crossover at F = 32 (0.1), below the one at F = 128 (0.15)
    r5, c5 = dense_ish(M, K, 0.12, 88, empty_frac=0.0)
    B = dev_csr(r5, c5, M, K)
    assert takes_tc(B, X, Y) and not takes_tc(B, feats(M, 128, 89), feats(K, 128, 90))
    r3, c3 = dense_ish(M, 128, 0.5, 85)  # K below kMinK
    assert not takes_tc(dev_csr(r3, c3, M, 128), X, feats(128, N, 86))
    # a graph: 10 entries per row
    g_rowptr = np.arange(0, 10 * M + 1, 10, dtype=np.int64)
    g_col = np.sort(np.random.default_rng(1).integers(0, 100000, (M, 10)), axis=1).reshape(-1)
    G = dev_csr(g_rowptr, g_col, M, 100000)
    assert not takes_tc(G, X, feats(100000, N, 87))
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM", "row")
    assert not takes_tc(A, X, Y)
    check(A, X, Y, run(A, X, Y))


@pytest.mark.cuda
def test_bad_knobs_name_themselves(monkeypatch):
    _needs_cuda()
    M, K = 64, 300
    rowptr, col = dense_ish(M, K, 0.3, 91)
    A = dev_csr(rowptr, col, M, K)
    X, Y = feats(M, 32, 1), feats(K, 32, 2)
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM", "tensor")
    with pytest.raises(ValueError, match="GNNSPARSE_CUDA_SDDMM"):
        gs.sddmm(A, X, Y, "dot")
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM", "tc")
    for bad in ("0", "65", "two"):
        monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM_TC_SPLIT", bad)
        with pytest.raises(ValueError, match="GNNSPARSE_CUDA_SDDMM_TC_SPLIT"):
            gs.sddmm(A, X, Y, "dot")


@pytest.mark.cuda
def test_torch_layer_forward_and_gradients(monkeypatch):
    """The torch route (grad mode) reaches the same kernel for the forward pass; the gradients (SpMMs
    over A and its transpose) against fp64 torch."""
    _needs_cuda()
    import gnnsparse.torch  # noqa: F401  (registers the torch layer)

    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM", "tc")
    M, K, N = 200, 300, 32
    rowptr, col = dense_ish(M, K, 0.25, 95)
    A = dev_csr(rowptr, col, M, K)
    X = feats(M, N, 96).requires_grad_(True)
    Y = feats(K, N, 97).requires_grad_(True)
    E = gs.sddmm(A, X, Y, "dot")
    G = torch.from_numpy(np.random.default_rng(98).uniform(-1, 1, E.shape[0]).astype(np.float32)).cuda()
    (E * G).sum().backward()
    rows = torch.from_numpy(np.repeat(np.arange(M), np.diff(rowptr)))
    cols = torch.from_numpy(col)
    Xd, Yd, Gd = X.detach().cpu().double(), Y.detach().cpu().double(), G.cpu().double()
    want = (Xd[rows] * Yd[cols]).sum(1)
    np.testing.assert_allclose(E.detach().cpu().numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    gX = torch.zeros(M, N, dtype=torch.float64).index_add_(0, rows, Gd[:, None] * Yd[cols])
    gY = torch.zeros(K, N, dtype=torch.float64).index_add_(0, cols, Gd[:, None] * Xd[rows])
    np.testing.assert_allclose(X.grad.cpu().numpy(), gX.numpy(), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(Y.grad.cpu().numpy(), gY.numpy(), rtol=2e-5, atol=2e-5)
