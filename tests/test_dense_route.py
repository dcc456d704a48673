"""The dense-ish route (gnnsparse._dense): SpMM and SDDMM dot through cuBLAS GEMMs on dense copies.

CPU tests cover the policy, the knobs, the computation itself on CPU torch tensors (dense copy,
mean, the SDDMM's row blocks and gather) against gnnsparse.reference, the copy's caching and
invalidation, and the matmul-precision switch. GPU tests take the route through the public ops
(auto and forced), check it against fp64 with poisoned outputs and repeats, the calls it must
decline (repeated entries, unsorted rows, narrow X, max / min, a forced kernel, the size limit, a
graph), tf32 / bf16 accuracy, and gradients through the torch layer. Whether the route ran is seen
through what it leaves on the CSR: the dense copy (CSR.dense_nbytes) or, for the SDDMM, the
entries' flat positions.
"""
import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import _dense
from gnnsparse import reference as ref
from gnnsparse._backends import backend_for

torch = pytest.importorskip("torch")


def unique_dense_ish(M, K, density, seed, empty_frac=0.1):
    """rowptr, col (strictly increasing per row), val: a random dense-ish CSR with empty rows."""
    rng = np.random.default_rng(seed)
    mask = rng.random((M, K)) < density
    mask[rng.random(M) < empty_frac] = False
    mask[-1] = False
    rows, cols = np.nonzero(mask)
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(mask.sum(1), out=rowptr[1:])
    val = rng.uniform(-1, 1, cols.size).astype(np.float32)
    return rowptr, cols.astype(np.int64), val


class _View:
    """What the route reads from a device view: the arrays (torch) and the sortedness flag."""

    def __init__(self, rowptr, col, val):
        self.keep = (rowptr, col, val)
        self.sorted_cols = 1


def _cpu_case(M=70, K=90, density=0.3, seed=0, values=True):
    """A (a host CSR) and a view of it as CPU torch tensors."""
    rowptr, col, val = unique_dense_ish(M, K, density, seed)
    A = gs.CSR(rowptr, col, val if values else None, shape=(M, K))
    return A, _torch_view(A)


def _torch_view(A):
    return _View(torch.tensor(A.rowptr), torch.tensor(A.col), None if A.val is None else torch.tensor(A.val))


# ---------------------------------------------------------------- CPU: policy and knobs
def test_policy_crossovers():
    # fp32: 0.18 at N <= 32, 0.12 at N >= 128, between in log2 N
    assert _dense.crossover(_dense.SPMM_CROSSOVER, "fp32", 16) == 0.18
    assert _dense.crossover(_dense.SPMM_CROSSOVER, "fp32", 32) == 0.18
    assert abs(_dense.crossover(_dense.SPMM_CROSSOVER, "fp32", 64) - 0.15) < 1e-12
    assert _dense.crossover(_dense.SPMM_CROSSOVER, "fp32", 512) == 0.12
    M, K = 32768, 16384  # large enough for the work rule (nnz x N >= 1e9) at N = 32 from d = 0.06
    assert _dense.prefer(_dense.SPMM_CROSSOVER, "fp32", M, K, int(0.2 * M * K), 32)
    assert not _dense.prefer(_dense.SPMM_CROSSOVER, "fp32", M, K, int(0.15 * M * K), 32)
    assert _dense.prefer(_dense.SPMM_CROSSOVER, "fp32", M, K, int(0.13 * M * K), 128)
    assert not _dense.prefer(_dense.SPMM_CROSSOVER, "fp32", M, K, int(0.0996 * M * K), 128)
    assert _dense.prefer(_dense.SPMM_CROSSOVER, "tf32", M, K, int(0.0996 * M * K), 32)
    assert not _dense.prefer(_dense.SPMM_CROSSOVER, "tf32", M, K, int(0.05 * M * K), 32)
    assert _dense.prefer(_dense.SPMM_CROSSOVER, "bf16", M, K, int(0.03 * M * K), 128)
    # SpMM's work rule, nnz x N >= 1e9: dense enough but too little work (a routed call's host cost)
    assert not _dense.prefer(_dense.SPMM_CROSSOVER, "bf16", 8192, 8192, int(0.2 * 8192 * 8192), 32)
    assert _dense.prefer(_dense.SPMM_CROSSOVER, "bf16", 8192, 8192, int(0.2 * 8192 * 8192), 128)
    assert not _dense.prefer(_dense.SPMM_CROSSOVER, "tf32", 8192, 8192, 7_812_499, 128)
    assert _dense.prefer(_dense.SPMM_CROSSOVER, "tf32", 8192, 8192, 7_812_500, 128)
    # SDDMM: TF32 / bf16 only, and larger products (the gather)
    assert _dense.prefer(_dense.SDDMM_CROSSOVER, "tf32", M, K, int(0.0996 * M * K), 128)
    assert not _dense.prefer(_dense.SDDMM_CROSSOVER, "tf32", 4096, 2048, int(0.3 * 4096 * 2048), 128)
    assert not _dense.prefer(_dense.SDDMM_CROSSOVER, "bf16", 4096, 4096, int(0.3 * 4096 * 4096), 128)
    assert _dense.prefer(_dense.SDDMM_CROSSOVER, "bf16", 8192, 8192, int(0.1 * 8192 * 8192), 128)
    # too small to matter, and a graph's density never qualifies
    assert not _dense.prefer(_dense.SPMM_CROSSOVER, "fp32", 1024, 1024, 300_000, 128)
    assert not _dense.prefer(_dense.SPMM_CROSSOVER, "tf32", 2048, 1024, 600_000, 128)
    assert not _dense.prefer(_dense.SPMM_CROSSOVER, "bf16", 10**6, 10**6, 10**7, 128)


def test_knobs_name_themselves(monkeypatch):
    monkeypatch.setenv("GNNSPARSE_DENSE", "always")
    with pytest.raises(ValueError, match="GNNSPARSE_DENSE="):
        _dense.mode()
    for m in ("auto", "on", "OFF", ""):
        monkeypatch.setenv("GNNSPARSE_DENSE", m)
        assert _dense.mode() == (m.lower() or "auto")
    monkeypatch.delenv("GNNSPARSE_DENSE_MAX_MB", raising=False)
    assert _dense.max_bytes() == _dense.DEFAULT_MAX_MB << 20
    monkeypatch.setenv("GNNSPARSE_DENSE_MAX_MB", "16")
    assert _dense.max_bytes() == 16 << 20
    for bad in ("-1", "1.5", "lots"):
        monkeypatch.setenv("GNNSPARSE_DENSE_MAX_MB", bad)
        with pytest.raises(ValueError, match="GNNSPARSE_DENSE_MAX_MB"):
            _dense.max_bytes()


def test_fp32_matmul_switch_restores_the_setting():
    m = torch.backends.cuda.matmul
    if not hasattr(m, "fp32_precision"):
        pytest.skip("torch without the fp32_precision API")
    before = m.fp32_precision
    try:
        for start in ("none", "ieee", "tf32"):
            m.fp32_precision = start
            for tf32 in (False, True):
                with _dense._fp32_matmul(torch, tf32):
                    assert m.fp32_precision == ("tf32" if tf32 else "ieee")
                assert m.fp32_precision == start
            with pytest.raises(KeyError):  # restored on the way out of an error too
                with _dense._fp32_matmul(torch, True):
                    raise KeyError("x")
            assert m.fp32_precision == start
    finally:
        m.fp32_precision = before


# ---------------------------------------------------------------- CPU: the computation
@pytest.mark.parametrize("values", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_spmm_dense_matches_the_reference(values, reduce):
    A, view = _cpu_case(values=values, seed=1 + values)
    X = torch.from_numpy(np.random.default_rng(3).uniform(-1, 1, (A.shape[1], 20)).astype(np.float32))
    Y = _dense.spmm_dense(A, view, X, reduce, "fp32")
    want = ref.spmm(A, X.numpy(), reduce)
    np.testing.assert_allclose(Y.numpy(), want, rtol=1e-5, atol=1e-5)
    assert not Y[-1].any()  # the empty last row
    assert A.dense_nbytes == A.shape[0] * A.shape[1] * 4
    Yb = _dense.spmm_dense(A, view, X, reduce, "bf16")  # bfloat16 operands: ~3 significant digits
    np.testing.assert_allclose(Yb.numpy(), want, rtol=0, atol=0.05 * max(1.0, np.abs(want).max()))
    assert A.dense_nbytes == A.shape[0] * A.shape[1] * 6  # an fp32 and a bf16 copy


def test_dense_copy_follows_the_values():
    """The copy is kept while the values are unchanged, rebuilt after new values are assigned, not
    shared by with_values, and dropped by invalidate(). (An in-place change of torch values: on the
    GPU, test_values_changed_in_place_rebuild_the_copy.)"""
    A, view = _cpu_case(seed=4)
    D = _dense._dense_copy(A, view, "float32")
    assert _dense._dense_copy(A, view, "float32") is D and A.dense_nbytes == D.numel() * 4
    A.val = 2 * A.val
    assert A.dense_nbytes == 0
    D2 = _dense._dense_copy(A, _torch_view(A), "float32")
    assert D2 is not D and torch.equal(D2, 2 * D)
    B = A.with_values(np.ones(A.nnz, np.float32))
    assert B.dense_nbytes == 0
    assert float(_dense._dense_copy(B, _torch_view(B), "float32").sum()) == A.nnz
    A.invalidate()
    assert A.dense_nbytes == 0


@pytest.mark.parametrize("block_rows", [1, 7, 1000])
def test_sddmm_dense_in_row_blocks(block_rows):
    A, view = _cpu_case(M=61, K=45, density=0.4, seed=5, values=False)
    rng = np.random.default_rng(6)
    X = torch.from_numpy(rng.uniform(-1, 1, (61, 24)).astype(np.float32))
    Y = torch.from_numpy(rng.uniform(-1, 1, (45, 24)).astype(np.float32))
    E = _dense.sddmm_dense(A, view, X, Y, "fp32", block_rows * 45 * 4)
    want = ref.sddmm(A, X.numpy(), Y.numpy(), "dot")
    np.testing.assert_allclose(E.numpy(), want, rtol=1e-5, atol=1e-5)
    Eb = _dense.sddmm_dense(A, view, X, Y, "bf16", block_rows * 45 * 4)
    np.testing.assert_allclose(Eb.numpy(), want, rtol=0, atol=0.08)


def test_repeated_entries_are_found():
    rowptr = torch.tensor([0, 3, 5])
    col = torch.tensor([0, 2, 2, 1, 3])  # row 0 holds column 2 twice
    A = gs.CSR(rowptr, col, None, shape=(2, 4))
    assert not _dense._unique(A, _View(rowptr, col, None))
    col2 = torch.tensor([0, 1, 2, 2, 3])  # equal neighbours across a row boundary are fine
    B = gs.CSR(rowptr, col2, None, shape=(2, 4))
    assert _dense._unique(B, _View(rowptr, col2, None))


# ---------------------------------------------------------------- GPU: through the public ops
def _needs_cuda():
    from gnnsparse import _cuda_backend

    if not (_cuda_backend.backend.available() and torch.cuda.is_available()):
        pytest.skip("no CUDA device or no compiled gnnsparse CUDA module")


def _gpu_csr(M, K, density, seed, values=True, empty_frac=0.1, itype=torch.int32):
    rowptr, col, val = unique_dense_ish(M, K, density, seed, empty_frac)
    return gs.CSR(torch.from_numpy(rowptr).to("cuda", itype), torch.from_numpy(col).to("cuda", itype),
                  torch.from_numpy(val).cuda() if values else None, shape=(M, K))


def _feats(n, c, seed):
    return torch.from_numpy(np.random.default_rng(seed).uniform(-1, 1, (n, c)).astype(np.float32)).cuda()


def _check_spmm(A, X, reduce, Y, rtol):
    want = ref.spmm(A, X.cpu().numpy(), reduce)
    got = Y.cpu().numpy().astype(np.float64)
    assert np.isfinite(got).all(), "an output element was left unwritten (NaN poison)"
    scale = max(1.0, float(np.abs(want).max()))
    err = float(np.abs(got - want).max()) / scale
    assert err <= rtol, err
    return err


@pytest.mark.cuda
@pytest.mark.parametrize("itype", ["int32", "int64"])
def test_auto_takes_the_route_where_it_wins(monkeypatch, itype):
    _needs_cuda()
    monkeypatch.delenv("GNNSPARSE_DENSE", raising=False)
    monkeypatch.delenv("GNNSPARSE_CUDA_SPMM", raising=False)
    # matrices of a test's size: the density rule alone (the work rule, nnz x N >= 1e9, would keep
    # the kernels for all of them; its boundary: test_policy_crossovers and the last check below)
    monkeypatch.setattr(_dense.SPMM_CROSSOVER, "min_work", 0.0)
    A = _gpu_csr(2100, 2050, 0.3, 11, itype=getattr(torch, itype))
    for N, reduce in ((32, "sum"), (128, "mean"), (33, "sum")):
        X = _feats(2050, N, N)
        Y = gs.spmm(A, X, reduce=reduce)
        assert A.dense_nbytes == 2100 * 2050 * 4
        assert torch.equal(Y.view(torch.int32), gs.spmm(A, X, reduce=reduce).view(torch.int32))
        _check_spmm(A, X, reduce, Y, 1e-5)
        # the GEMM's bits: the kernels behind it (gated by X's finiteness) wrote nothing
        b = backend_for(X)
        view = A._view(b, b.place(X), X, "float32")
        assert torch.equal(Y.view(torch.int32), _dense.spmm_dense(A, view, X, reduce, "fp32").view(torch.int32))
        assert not Y[-1].any()
    # below the crossover at N = 32 (0.18) the row kernels run: no copy
    B = _gpu_csr(2100, 2050, 0.14, 12)
    gs.spmm(B, _feats(2050, 32, 1))
    assert B.dense_nbytes == 0
    gs.spmm(B, _feats(2050, 128, 2))  # above it at N = 128 (0.12)
    assert B.dense_nbytes > 0
    # the work rule (here at 4e8): B at N = 128 is 0.6e8 gathered elements: the kernels, no copy
    monkeypatch.setattr(_dense.SPMM_CROSSOVER, "min_work", 4e8)
    B.drop_dense()
    gs.spmm(B, _feats(2050, 128, 2))
    assert B.dense_nbytes == 0


def _hub_csr(M=600, K=4096, per=40, seed=41):
    """Rows of `per` sorted distinct columns and one row holding every column: a hub (longer than
    16x the average row) at a density above 1 %."""
    rng = np.random.default_rng(seed)
    rows = [np.sort(rng.choice(K, per, replace=False)) for _ in range(M)]
    rows[M // 3] = np.arange(K)
    rowptr = np.concatenate([[0], np.cumsum([r.size for r in rows])]).astype(np.int64)
    col = np.concatenate(rows).astype(np.int64)
    val = rng.uniform(-1, 1, col.size).astype(np.float32)
    return gs.CSR(torch.from_numpy(rowptr).cuda(), torch.from_numpy(col).cuda(), torch.from_numpy(val).cuda(),
                  shape=(M, K))


@pytest.mark.cuda
@pytest.mark.parametrize("kernel", ["row", "panel", "tc", "hub"])
def test_skip_flag_gates_every_kernel(monkeypatch, kernel):
    """The SpMM's skip flag (what the route gates its kernels with): a device flag holding True
    makes the call write nothing (Y keeps its poison: the row, panel, tensor-core and split
    kernels and the hub pass all return at once); False gives the ungated call's bits."""
    _needs_cuda()
    from gnnsparse import _ops

    monkeypatch.setenv("GNNSPARSE_CUDA_SPMM", "row" if kernel == "hub" else kernel)
    A = _hub_csr() if kernel == "hub" else _gpu_csr(300, 260, 0.3, 31)
    K = A.shape[1]
    for N, reduce in ((32, "sum"), (128, "mean"), (36, "sum")):
        X = _feats(K, N, 32 + N)
        want = gs.spmm(A, X, reduce=reduce)  # a forced kernel: no route
        b = backend_for(X)
        view = A._view(b, b.place(X), X, "float32")
        red, prec, M, _, C, _ = _ops.check_spmm(A.shape, X.shape, reduce, False)
        for skip in (True, False, None):
            Y = torch.full((M, C), float("nan"), device="cuda")
            flag = None if skip is None else torch.tensor(skip, device="cuda")
            b.spmm(view, X, M, C, _ops._DTYPE["float32"][0], red, False, prec, out=Y, skip=flag)
            if skip:
                assert torch.isnan(Y).all(), "a gated call wrote"
            else:
                assert torch.equal(Y.view(torch.int32), want.view(torch.int32))
        _check_spmm(A, X, reduce, want, 1e-5)


@pytest.mark.cuda
def test_declined_calls_stay_correct(monkeypatch):
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_DENSE", "on")
    monkeypatch.delenv("GNNSPARSE_CUDA_SPMM", raising=False)
    M, K = 300, 260
    A = _gpu_csr(M, K, 0.3, 21)
    X = _feats(K, 32, 22)
    for reduce in ("max", "min"):  # not sums: the kernels
        Y, arg = gs.spmm(A, X, reduce=reduce, return_arg=True)
        _check_spmm(A, X, reduce, Y, 1e-6)
    _check_spmm(A, X[:, :8].contiguous(), "sum", gs.spmm(A, X[:, :8].contiguous()), 1e-5)  # N < 16
    _check_spmm(A, X.double(), "sum", gs.spmm(A, X.double()), 1e-12)  # float64
    assert A.dense_nbytes == 0
    # inf / NaN in X: a GEMM would spread them to every row (0 * inf); the kernels give them only
    # to the rows that store their column
    Xi = X.clone()
    Xi[5, 3], Xi[7, 0] = float("inf"), float("nan")
    want = ref.spmm(A, Xi.cpu().numpy(), "sum")
    assert np.isfinite(want).any() and not np.isfinite(want).all()
    got = gs.spmm(A, Xi)
    np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-5, atol=1e-5)  # NaN == NaN
    assert A.dense_nbytes > 0  # the GEMM ran, then the kernels (their gate open) wrote over it
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNNSPARSE_DENSE", "off")
        assert torch.equal(got.view(torch.int32), gs.spmm(A, Xi).view(torch.int32))  # the kernels' bits
    A.drop_dense()
    # repeated entries; unsorted rows
    rowptr, col, val = unique_dense_ish(M, K, 0.3, 23)
    col2 = col.copy()
    col2[rowptr[0] + 1] = col2[rowptr[0]]
    R = gs.CSR(torch.from_numpy(rowptr).cuda(), torch.from_numpy(col2).cuda(), torch.from_numpy(val).cuda(),
               shape=(M, K))
    _check_spmm(R, X, "sum", gs.spmm(R, X), 1e-5)
    perm = np.concatenate([np.random.default_rng(i).permutation(np.arange(rowptr[i], rowptr[i + 1]))
                           for i in range(M)]).astype(np.int64)
    U = gs.CSR(torch.from_numpy(rowptr).cuda(), torch.from_numpy(col[perm]).cuda(),
               torch.from_numpy(val[perm]).cuda(), shape=(M, K))
    _check_spmm(U, X, "sum", gs.spmm(U, X), 1e-5)
    assert R.dense_nbytes == 0 and U.dense_nbytes == 0
    # a forced kernel, the route off, a size limit below the copy
    for var, value in (("GNNSPARSE_CUDA_SPMM", "row"), ("GNNSPARSE_DENSE", "off"), ("GNNSPARSE_DENSE_MAX_MB", "0")):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(var, value)
            _check_spmm(A, X, "sum", gs.spmm(A, X), 1e-5)
            assert A.dense_nbytes == 0
    # a graph (density 1e-4): never checked for sortedness, never a copy
    G = gs.CSR.from_edge_index(np.random.default_rng(24).integers(0, 5000, (2, 2500)), 5000)
    G = G.to_like(X)
    gs.spmm(G, _feats(5000, 32, 25))
    assert G.dense_nbytes == 0
    # forced on: the same matrix takes it
    Y = gs.spmm(A, X)
    assert A.dense_nbytes == M * K * 4
    _check_spmm(A, X, "sum", Y, 1e-5)


@pytest.mark.cuda
def test_values_changed_in_place_rebuild_the_copy(monkeypatch):
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_DENSE", "on")
    A = _gpu_csr(200, 300, 0.3, 31)
    X = _feats(300, 64, 32)
    Y1 = gs.spmm(A, X)
    A.val.mul_(-0.5)
    Y2 = gs.spmm(A, X)
    _check_spmm(A, X, "sum", Y2, 1e-5)
    assert torch.allclose(Y2, -0.5 * Y1, rtol=1e-6, atol=1e-6)


@pytest.mark.cuda
def test_tf32_and_bf16(monkeypatch):
    """precision tf32 / bf16 on the route: within their bounds and measurably coarser than fp32;
    whatever torch's global matmul setting, fp32 stays exact fp32."""
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_DENSE", "on")
    M, K, N = 512, 2048, 128
    A = _gpu_csr(M, K, 0.3, 41, empty_frac=0.02)
    X = _feats(K, N, 42)
    e32 = _check_spmm(A, X, "sum", gs.spmm(A, X), 1e-5)
    et = _check_spmm(A, X, "sum", gs.spmm(A, X, precision="tf32"), 4e-3)
    eb = _check_spmm(A, X, "sum", gs.spmm(A, X, precision="bf16"), 3e-2)
    assert et > 4 * e32 and eb > et, (e32, et, eb)
    m = torch.backends.cuda.matmul
    if hasattr(m, "fp32_precision"):
        before = m.fp32_precision
        m.fp32_precision = "tf32"
        try:
            A.invalidate()
            e32b = _check_spmm(A, X, "sum", gs.spmm(A, X), 1e-5)
            assert e32b < 2 * e32 + 1e-7
            assert m.fp32_precision == "tf32"
        finally:
            m.fp32_precision = before


@pytest.mark.cuda
def test_sddmm_route_tf32_in_blocks(monkeypatch):
    _needs_cuda()
    monkeypatch.setenv("GNNSPARSE_DENSE", "on")  # below the policy's size (2^24 dense elements)
    monkeypatch.delenv("GNNSPARSE_CUDA_SDDMM", raising=False)
    M, K, F = 1500, 1100, 64
    A = _gpu_csr(M, K, 0.2, 51, values=False)
    X, Y = _feats(M, F, 52), _feats(K, F, 53)
    want = ref.sddmm(A, X.cpu().numpy(), Y.cpu().numpy(), "dot")
    for mb in ("1", "2048"):  # 1 MiB: blocks of 238 rows; 2048: one GEMM
        monkeypatch.setenv("GNNSPARSE_DENSE_MAX_MB", mb)
        E = gs.sddmm(A, X, Y, "dot", precision="tf32")
        assert any(k[0] == "dense_flat" for k in A._derived)
        assert torch.equal(E, gs.sddmm(A, X, Y, "dot", precision="tf32"))
        np.testing.assert_allclose(E.cpu().numpy(), want, rtol=0, atol=5e-3 * np.abs(want).max())
    monkeypatch.setenv("GNNSPARSE_DENSE_MAX_MB", "0")  # off
    C = _gpu_csr(M, K, 0.2, 55, values=False)
    gs.sddmm(C, X, Y, "dot", precision="tf32")
    assert not any(k[0] == "dense_flat" for k in C._derived)
    # fp32 stays on the kernels (the GEMM's round trip does not beat them), as do narrow F
    monkeypatch.delenv("GNNSPARSE_DENSE_MAX_MB")
    B = _gpu_csr(M, K, 0.2, 54, values=False)
    gs.sddmm(B, X, Y, "dot")
    gs.sddmm(B, X[:, :32].contiguous(), Y[:, :32].contiguous(), "dot", precision="tf32")
    assert not any(k[0] == "dense_flat" for k in B._derived)
    # bf16 from F = 64 too (at F = 32 our bf16 tensor-core SDDMM beat the route on the grid)
    X32, Y32 = X[:, :32].contiguous(), Y[:, :32].contiguous()
    E = gs.sddmm(B, X32, Y32, "dot", precision="bf16")
    assert not any(k[0] == "dense_flat" for k in B._derived)
    want = ref.sddmm(B, X32.cpu().numpy(), Y32.cpu().numpy(), "dot")
    np.testing.assert_allclose(E.cpu().numpy(), want, rtol=0, atol=3e-2 * np.abs(want).max())
    E = gs.sddmm(B, X, Y, "dot", precision="bf16")
    assert any(k[0] == "dense_flat" for k in B._derived)
    want = ref.sddmm(B, X.cpu().numpy(), Y.cpu().numpy(), "dot")
    np.testing.assert_allclose(E.cpu().numpy(), want, rtol=0, atol=3e-2 * np.abs(want).max())


@pytest.mark.cuda
def test_torch_layer_gradients_through_the_route(monkeypatch):
    _needs_cuda()
    import gnnsparse.torch  # noqa: F401  (registers the torch layer)

    monkeypatch.setenv("GNNSPARSE_DENSE", "on")
    M, K, N = 300, 400, 32
    rowptr, col, val = unique_dense_ish(M, K, 0.3, 61)
    v = torch.from_numpy(val).cuda().requires_grad_(True)
    A = gs.CSR(torch.from_numpy(rowptr).cuda(), torch.from_numpy(col).cuda(), v, shape=(M, K))
    X = _feats(K, N, 62).requires_grad_(True)
    G = _feats(M, N, 63)
    for reduce in ("sum", "mean"):
        Y = gs.spmm(A, X, reduce=reduce)
        (Y * G).sum().backward()
        rows = torch.from_numpy(np.repeat(np.arange(M), np.diff(rowptr))).cuda()
        c = torch.from_numpy(col).cuda()
        Xd, vd = X.detach().double().requires_grad_(True), v.detach().double().requires_grad_(True)
        Yd = torch.zeros(M, N, dtype=torch.float64, device="cuda").index_add(0, rows, vd[:, None] * Xd[c])
        if reduce == "mean":
            deg = torch.from_numpy(np.diff(rowptr)).cuda().clamp(min=1).double()
            Yd = Yd / deg[:, None]
        (Yd * G.double()).sum().backward()
        assert torch.allclose(Y.detach().double(), Yd.detach(), rtol=1e-5, atol=1e-5)
        assert torch.allclose(X.grad.double(), Xd.grad, rtol=1e-4, atol=1e-4)
        assert torch.allclose(v.grad.double(), vd.grad, rtol=1e-4, atol=1e-4)
        X.grad = v.grad = None
    # values trained in place: a new kept CSR per step, but one dense copy per pattern
    from gnnsparse.torch.graph import graph_tensors

    for _ in range(4):
        gs.spmm(A, X).sum().backward()
        with torch.no_grad():
            v.add_(0.01)
    store = graph_tensors(A, X).col.__dict__["_gnnsparse_csr"]
    assert len(store) >= 2
    assert sum(c.dense_nbytes for c in store.values()) == M * K * 4


def test_grid_policy_replay(tmp_path, capsys):
    """tools/grid_policy.py applies the SpMM policy with each work threshold to a bench CSV: a cell
    it routes takes the routed time, the others the kernels' time. Three cells: one above every rule
    (routed, faster), one routed only at T = 0 (and slower there), one below the density crossover
    (never routed)."""
    import csv
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "grid_policy", Path(__file__).resolve().parents[1] / "tools" / "grid_policy.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    head = "op,precision,route,err,bitwise,ours_us,kernels_us,cusparse_us,dense_us,M,K,density,N,nnz"
    rows = [  # M K at 4096^2 and density 0.3 at N = 128: nnz x N = 6.4e8; 8192^2: 2.6e9
        "spmm,fp32,dense,0,True,100,400,300,120,8192,8192,0.3,128,20132659",
        "spmm,fp32,dense,0,True,90,60,120,80,4096,4096,0.3,128,5033165",
        "spmm,fp32,dense,0,True,500,50,150,90,4096,4096,0.1,32,1677722",
        "sddmm,fp32,dense,0,True,1,1,1,1,4096,4096,0.3,32,5033165",  # not an SpMM row: ignored
    ]
    f = tmp_path / "run.csv"
    f.write_text("\n".join([head] + rows) + "\n")
    with f.open(newline="") as fh:
        runs = [r for r in csv.DictReader(fh) if r["op"] == "spmm"]
    at_rule = tool.replay(runs, "fp32", 1e9)
    assert at_rule["routed"] == {32: 0, 128: 1} and at_rule["slower"] == 0
    assert at_rule["vs_sparse"][128] == pytest.approx([300 / 100, 120 / 60])
    everything = tool.replay(runs, "fp32", 0.0)
    assert everything["routed"] == {32: 0, 128: 2} and everything["slower"] == 1  # 90 us routed vs 60
    assert everything["vs_dense"][128] == pytest.approx([120 / 100, 80 / 90])
    assert everything["vs_sparse"][32] == pytest.approx([150 / 50])  # density 0.1 < 0.18: the kernels
    tool.main([str(f), "--thresholds", "1e9,0"])
    out = capsys.readouterr().out
    assert "run.csv" in out and out.count("\n") == 4
