"""GAT's edge softmax in pieces (gnnsparse._gat_softmax: gat_softmax_stats, gat_softmax_weights_t,
gat_softmax_grad_; CUDA kernels cuda/gat_softmax.cu, contract include/gnnsparse/gat_softmax.hpp),
the quantized GAT backward's alpha without a whole (nnz, H) tensor.

Against a float64 NumPy reference of the two-pass formulas, on random graphs with empty rows,
duplicate edges and a hub row, H in {1, 3, 4} (the kernels also 16 and 40: the chunks of 32 heads),
slope 0.2, built by gnnsparse.torch.graph.build (the GraphTensors the caller passes), int32 and
int64 indices. The CPU (plain torch) version runs everywhere; the CUDA tests (skipped without a GPU
and the compiled module, failing instead under GNNSPARSE_REQUIRE=cuda) check the kernels against
the reference and the CPU version, bitwise determinism over two runs, outputs poisoned (conftest:
GNNSPARSE_POISON) and written in full, the in-place update of t, the long-row path (rows of >= 1024
and > 100k entries, with an exact, a padded and no long-row list), and argument errors.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gnnsparse import _gat_softmax as gsm  # noqa: E402
from gnnsparse.torch.graph import build  # noqa: E402

from conftest import REQUIRED  # noqa: E402

SLOPE = 0.2
HEADS = [1, 3, 4]
ITYPES = [torch.int32, torch.int64]
TOL = 1e-5


# ---------------------------------------------------------------- graphs and the reference
def _graph(seed, M=300, K=250, mean_deg=6.0, hubs=(3000,), itype=torch.int64, device="cpu", empty_frac=0.25):
    """GraphTensors of a random M x K graph: empty rows (the last one too), a duplicate edge, rows
    of `hubs` entries (at rows 1, 1 + M // 7, ...)."""
    rng = np.random.default_rng(seed)
    deg = rng.poisson(mean_deg, M).astype(np.int64)
    deg[rng.random(M) < empty_frac] = 0
    deg[M - 1] = 0
    for n, h in enumerate(hubs):
        deg[(1 + n * (M // 7)) % M] = h
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(deg, out=rowptr[1:])
    col = rng.integers(0, K, int(rowptr[-1]))
    if deg[0] >= 2:
        col[1] = col[0]  # a repeated (i, j) pair
    g = build(torch.from_numpy(rowptr).to(device), torch.from_numpy(col).to(device), None, K, itype=itype)
    assert g.rowptr.dtype == itype and g.t_col.dtype == itype
    return g


def _inputs(seed, M, K, H, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    fd = torch.randn(M, H, generator=gen).mul_(2.0)
    fs = torch.randn(K, H, generator=gen).mul_(2.0)
    return fd.to(device), fs.to(device)


def _np(x):
    return x.detach().cpu().numpy()


def _ref(g, fd, fs, t=None, slope=SLOPE):
    """float64 (m, inv, alpha in CSR order, dS or None) by the two-pass formulas, row by row."""
    rowptr, col = _np(g.rowptr).astype(np.int64), _np(g.col).astype(np.int64)
    fd64, fs64 = _np(fd).astype(np.float64), _np(fs).astype(np.float64)
    M, H = fd64.shape
    m, inv = np.zeros((M, H)), np.zeros((M, H))
    alpha = np.zeros((col.shape[0], H))
    dS = None if t is None else np.zeros((col.shape[0], H))
    t64 = None if t is None else _np(t).astype(np.float64)
    for i in range(M):
        a, b = rowptr[i], rowptr[i + 1]
        if a == b:
            continue
        e = fd64[i] + fs64[col[a:b]]
        lg = np.where(e > 0, e, slope * e)
        m[i] = lg.max(0)
        ex = np.exp(lg - m[i])
        inv[i] = 1.0 / ex.sum(0)
        alpha[a:b] = ex * inv[i]
        if t is not None:
            p = alpha[a:b] * t64[a:b]
            dS[a:b] = (p - alpha[a:b] * p.sum(0)) * np.where(e > 0, 1.0, slope)
    return m, inv, alpha, dS


def _close(got, want, tol=TOL, scale=None):
    """|got - want| <= tol (|want| + scale) elementwise (scale: the size of the terms that cancel)."""
    got = _np(got).astype(np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.isfinite(got).all(), "an output element was left unwritten (poisoned NaN) or is not finite"
    bound = tol * (np.abs(want) + (0.0 if scale is None else scale)) + 1e-30
    bad = np.abs(got - want) > bound
    assert not bad.any(), f"{int(bad.sum())} elements off, worst {np.abs(got - want)[bad].max():.3g}"


def _grad_scale(g, alpha, t):
    """Per-entry size of dS's terms: alpha (|t| + |r|) with r the row's sum of alpha t."""
    rowptr = _np(g.rowptr).astype(np.int64)
    t64 = _np(t).astype(np.float64)
    p = np.abs(alpha * t64)
    r = np.add.reduceat(np.concatenate([p, np.zeros((1, p.shape[1]))]), np.minimum(rowptr[:-1], p.shape[0]), axis=0)
    r[rowptr[:-1] == rowptr[1:]] = 0
    rows = np.repeat(np.arange(len(rowptr) - 1), np.diff(rowptr))
    return alpha * (np.abs(t64) + r[rows])


def _check_all(g, fd, fs, t0, slope=SLOPE, long_rows=None, tol=TOL):
    """Run the three ops on g's device and check them against the reference; returns the outputs."""
    m, inv = gsm.gat_softmax_stats(g.rowptr, g.col, fd, fs, slope, long_rows=long_rows)
    rm, rinv, ralpha, rdS = _ref(g, fd, fs, t0, slope)
    _close(m, rm, tol)
    _close(inv, rinv, tol)
    aT = gsm.gat_softmax_weights_t(g.t_rowptr, g.t_col, fd, fs, m, inv, slope)
    _close(aT, ralpha[_np(g.t_perm).astype(np.int64)], tol)
    t = t0.clone()
    out = gsm.gat_softmax_grad_(g.rowptr, g.col, fd, fs, m, inv, slope, t, long_rows=long_rows)
    assert out is t
    _close(t, rdS, tol, scale=_grad_scale(g, ralpha, t0))
    return m, inv, aT, t


# ---------------------------------------------------------------- CPU (plain torch)
@pytest.mark.parametrize("itype", ITYPES, ids=["i32", "i64"])
@pytest.mark.parametrize("H", HEADS)
def test_cpu_matches_float64(H, itype):
    g = _graph(10 + H, itype=itype)
    fd, fs = _inputs(H, g.num_rows, g.num_cols, H)
    t0 = torch.randn(g.nnz, H, generator=torch.Generator().manual_seed(7))
    m, inv, aT, t = _check_all(g, fd, fs, t0)
    assert m.stride() == inv.stride() == (2 * H, 1) and inv.data_ptr() == m.data_ptr() + 4 * H  # one (M, 2, H)
    empty = (g.rowptr[1:] == g.rowptr[:-1])
    assert empty.any() and bool((m[empty] == 0).all()) and bool((inv[empty] == 0).all())
    # alpha sums to 1 over each non-empty row (transpose order scattered back)
    alpha = torch.empty_like(aT)
    alpha[g.t_perm.long()] = aT
    rs = torch.segment_reduce(alpha.double(), "sum", offsets=g.rowptr.long(), axis=0)
    assert torch.allclose(rs[~empty], torch.ones_like(rs[~empty]), atol=1e-5)


def test_cpu_deterministic_and_slope():
    g = _graph(3, hubs=(3000, 1500))
    fd, fs = _inputs(3, g.num_rows, g.num_cols, 4)
    t0 = torch.randn(g.nnz, 4, generator=torch.Generator().manual_seed(1))
    for slope in (0.2, 0.0, 1.0):
        a = _check_all(g, fd, fs, t0, slope)
        b = _check_all(g, fd, fs, t0, slope)
        for x, y in zip(a, b):
            assert torch.equal(x, y)


def test_cpu_edge_cases():
    """No rows, no entries, all rows empty: empty outputs or m = inv = 0."""
    for M, K, deg in ((0, 5, 0.0), (6, 0, 0.0), (6, 4, 0.0)):
        g = _graph(1, M=M, K=K, mean_deg=deg, hubs=(), empty_frac=0.0) if M else None
        if g is None:
            rowptr, col = torch.zeros(1, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)
        else:
            rowptr, col = g.rowptr, g.col
        fd, fs = _inputs(0, M, K, 3)
        m, inv = gsm.gat_softmax_stats(rowptr, col, fd, fs, SLOPE)
        assert m.shape == inv.shape == (M, 3)
        assert bool((m == 0).all()) and bool((inv == 0).all())
        t = torch.zeros(0, 3)
        assert gsm.gat_softmax_grad_(rowptr, col, fd, fs, m, inv, SLOPE, t) is t
        t_rowptr = torch.zeros(K + 1, dtype=torch.int64)
        assert gsm.gat_softmax_weights_t(t_rowptr, col, fd, fs, m, inv, SLOPE).shape == (0, 3)


def test_long_rows_helper():
    g = _graph(5, M=40, K=30, hubs=(1024, 1023, 5000), itype=torch.int32)
    deg = (g.rowptr[1:] - g.rowptr[:-1]).long()
    want = torch.nonzero(deg >= gsm.LONG_ROW).reshape(-1)
    exact = gsm.gat_long_rows(g.rowptr)
    assert exact.dtype == torch.int32 and torch.equal(exact.long(), want) and want.numel() == 2
    padded = gsm.gat_long_rows(g.rowptr, g.nnz)
    assert padded.dtype == torch.int32 and padded.shape[0] == min(40, g.nnz // gsm.LONG_ROW)
    assert torch.equal(padded[: want.numel()].long(), want) and bool((padded[want.numel():] == -1).all())
    assert gsm.gat_long_rows(torch.zeros(1, dtype=torch.int64)).shape == (0,)


def test_argument_errors():
    g = _graph(2, M=20, K=15, hubs=())
    fd, fs = _inputs(2, 20, 15, 4)
    m, inv = gsm.gat_softmax_stats(g.rowptr, g.col, fd, fs, SLOPE)
    t = torch.zeros(g.nnz, 4)
    with pytest.raises(ValueError, match="fd must be float32"):
        gsm.gat_softmax_stats(g.rowptr, g.col, fd.double(), fs, SLOPE)
    with pytest.raises(ValueError, match="rowptr must have 21 entries"):
        gsm.gat_softmax_stats(g.rowptr[:-1], g.col, fd, fs, SLOPE)
    with pytest.raises(ValueError, match="col must have the index dtype"):
        gsm.gat_softmax_stats(g.rowptr, g.col.int(), fd, fs, SLOPE)
    with pytest.raises(ValueError, match="rowptr must be int32 or int64"):
        gsm.gat_softmax_stats(g.rowptr.float(), g.col, fd, fs, SLOPE)
    with pytest.raises(ValueError, match=r"fs must have shape \(15, 4\)"):
        gsm.gat_softmax_stats(g.rowptr, g.col, fd, fs[:, :3].contiguous(), SLOPE)
    with pytest.raises(ValueError, match="fs must be contiguous"):
        gsm.gat_softmax_stats(g.rowptr, g.col, fd, torch.randn(4, 15).t(), SLOPE)
    with pytest.raises(ValueError, match="long_rows must have the index dtype"):
        gsm.gat_softmax_stats(g.rowptr, g.col, fd, fs, SLOPE, long_rows=torch.zeros(0, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"t must have shape"):
        gsm.gat_softmax_grad_(g.rowptr, g.col, fd, fs, m, inv, SLOPE, t[1:])
    with pytest.raises(ValueError, match="t must be contiguous"):
        gsm.gat_softmax_grad_(g.rowptr, g.col, fd, fs, m, inv, SLOPE, torch.zeros(4, g.nnz).t())
    with pytest.raises(ValueError, match=r"inv must have shape"):
        gsm.gat_softmax_grad_(g.rowptr, g.col, fd, fs, m, inv[1:], SLOPE, t)
    with pytest.raises(ValueError, match="m must have unit stride along the heads"):
        gsm.gat_softmax_grad_(g.rowptr, g.col, fd, fs, torch.zeros(4, 20).t(), inv, SLOPE, t)
    with pytest.raises(ValueError, match="t_rowptr must have 16 entries"):
        gsm.gat_softmax_weights_t(g.rowptr, g.t_col, fd, fs, m, inv, SLOPE)
    with pytest.raises(ValueError, match="must be a torch.Tensor"):
        gsm.gat_softmax_stats(_np(g.rowptr), g.col, fd, fs, SLOPE)


# ---------------------------------------------------------------- CUDA kernels
def _cuda_or_skip():
    from gnnsparse import _cuda_backend

    if torch.cuda.is_available() and _cuda_backend.backend.available():
        return
    msg = "no CUDA device or no compiled gnnsparse CUDA module"
    if "cuda" in REQUIRED:
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture
def cuda():
    _cuda_or_skip()
    return torch.device("cuda")


def _poisoned():
    from gnnsparse import _cuda_backend

    return _cuda_backend._POISON


def _on(g, device):
    return g._replace(**{k: getattr(g, k).to(device) for k in ("rowptr", "col", "t_rowptr", "t_col", "t_perm",
                                                                 "rows", "eid")})


@pytest.mark.cuda
@pytest.mark.parametrize("itype", ITYPES, ids=["i32", "i64"])
@pytest.mark.parametrize("H", HEADS + [16, 40])
def test_cuda_matches_float64_and_cpu(cuda, H, itype):
    g = _graph(20 + H, itype=itype, hubs=(3000, 1100, 900))
    fd, fs = _inputs(H, g.num_rows, g.num_cols, H)
    t0 = torch.randn(g.nnz, H, generator=torch.Generator().manual_seed(9))
    gc = _on(g, cuda)
    got = _check_all(gc, fd.to(cuda), fs.to(cuda), t0.to(cuda))
    cpu = _check_all(g, fd, fs, t0)
    for x, y in zip(got, cpu):  # the two versions agree closely (not bitwise: exp differs)
        assert torch.allclose(x.cpu(), y, rtol=1e-5, atol=1e-6)
    m, inv = got[0], got[1]
    empty = (gc.rowptr[1:] == gc.rowptr[:-1])
    assert bool((m[empty] == 0).all()) and bool((inv[empty] == 0).all())


@pytest.mark.cuda
@pytest.mark.parametrize("itype", ITYPES, ids=["i32", "i64"])
def test_cuda_deterministic_poisoned_in_place(cuda, itype):
    assert _poisoned(), "conftest sets GNNSPARSE_POISON: outputs start as NaN"
    H = 4
    g = _on(_graph(31, M=2000, K=1500, mean_deg=12.0, hubs=(3000, 2048), itype=itype), cuda)
    fd, fs = (x.to(cuda) for x in _inputs(31, g.num_rows, g.num_cols, H))
    t0 = torch.randn(g.nnz, H, device=cuda)
    runs = []
    for _ in range(2):
        m, inv = gsm.gat_softmax_stats(g.rowptr, g.col, fd, fs, SLOPE)
        aT = gsm.gat_softmax_weights_t(g.t_rowptr, g.t_col, fd, fs, m, inv, SLOPE)
        t = t0.clone()
        ptr = t.data_ptr()
        out = gsm.gat_softmax_grad_(g.rowptr, g.col, fd, fs, m, inv, SLOPE, t)
        assert out is t and t.data_ptr() == ptr
        assert not t.equal(t0)
        runs.append((m, inv, aT, t))
        for x in (m, inv, aT, t):
            assert bool(torch.isfinite(x).all())
    for x, y in zip(*runs):
        assert torch.equal(x.view(torch.int32), y.view(torch.int32))  # the same bits
    # m and inv as (M, 2, H) halves or as separate contiguous tensors: the same bits
    m, inv = runs[0][0], runs[0][1]
    assert m.stride() == (2 * H, 1) and inv.data_ptr() == m.data_ptr() + 4 * H
    mc, ic = m.contiguous(), inv.contiguous()
    assert torch.equal(gsm.gat_softmax_weights_t(g.t_rowptr, g.t_col, fd, fs, mc, ic, SLOPE), runs[0][2])
    t1 = t0.clone()
    gsm.gat_softmax_grad_(g.rowptr, g.col, fd, fs, mc, ic, SLOPE, t1)
    assert torch.equal(t1, runs[0][3])


@pytest.mark.cuda
@pytest.mark.parametrize("itype", ITYPES, ids=["i32", "i64"])
def test_cuda_long_rows(cuda, itype):
    """Rows of 1024 (exactly long), 1023 (a warp), 4096 / 4097 / 8192 (segment boundaries), 5000
    and 150,000 entries (37 segments) on the segment path; the long-row list exact, padded
    (nonzero_static), with -1 and short rows mixed in, or absent: the same bits."""
    H = 3
    g = _graph(41, M=600, K=4000, mean_deg=8.0, hubs=(150_000, 1024, 1023, 5000, 4096, 4097, 8192), itype=itype)
    fd, fs = _inputs(41, g.num_rows, g.num_cols, H)
    t0 = torch.randn(g.nnz, H, generator=torch.Generator().manual_seed(3))
    gc = _on(g, cuda)
    exact = gsm.gat_long_rows(gc.rowptr)
    assert exact.numel() == 6
    ref = _check_all(gc, fd.to(cuda), fs.to(cuda), t0.to(cuda), long_rows=exact, tol=2e-5)
    short = torch.tensor([-1, 0, 2], dtype=itype, device=cuda)  # padding and rows a warp takes
    for lr in (None, gsm.gat_long_rows(gc.rowptr, gc.nnz), torch.cat([short, exact.flip(0)])):
        m, inv = gsm.gat_softmax_stats(gc.rowptr, gc.col, fd.to(cuda), fs.to(cuda), SLOPE, long_rows=lr)
        t = t0.to(cuda)
        gsm.gat_softmax_grad_(gc.rowptr, gc.col, fd.to(cuda), fs.to(cuda), m, inv, SLOPE, t, long_rows=lr)
        assert torch.equal(m, ref[0]) and torch.equal(inv, ref[1]) and torch.equal(t, ref[3])


@pytest.mark.cuda
def test_cuda_edge_cases(cuda):
    for M, K in ((0, 5), (6, 0), (6, 4)):
        rowptr = torch.zeros(M + 1, dtype=torch.int32, device=cuda)
        col = torch.zeros(0, dtype=torch.int32, device=cuda)
        fd, fs = (x.to(cuda) for x in _inputs(0, M, K, 3))
        m, inv = gsm.gat_softmax_stats(rowptr, col, fd, fs, SLOPE)
        assert m.shape == (M, 3) and bool((m == 0).all()) and bool((inv == 0).all())
        t = torch.zeros(0, 3, device=cuda)
        assert gsm.gat_softmax_grad_(rowptr, col, fd, fs, m, inv, SLOPE, t) is t
        t_rowptr = torch.zeros(K + 1, dtype=torch.int32, device=cuda)
        assert gsm.gat_softmax_weights_t(t_rowptr, col, fd, fs, m, inv, SLOPE).shape == (0, 3)


@pytest.mark.cuda
def test_cuda_no_host_sync(cuda):
    """With a cached long-row list the three launches never synchronize the host; nor does building
    the padded list (nnz given: torch.nonzero_static)."""
    g = _on(_graph(8, hubs=(3000,)), cuda)
    fd, fs = (x.to(cuda) for x in _inputs(8, g.num_rows, g.num_cols, 4))
    t = torch.randn(g.nnz, 4, device=cuda)
    lr = gsm.gat_long_rows(g.rowptr)
    gsm.gat_softmax_stats(g.rowptr, g.col, fd, fs, SLOPE, long_rows=lr)  # loads the backend
    torch.cuda.synchronize()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "a prototype feature"
            torch.cuda.set_sync_debug_mode("error")
        m, inv = gsm.gat_softmax_stats(g.rowptr, g.col, fd, fs, SLOPE, long_rows=lr)
        gsm.gat_softmax_weights_t(g.t_rowptr, g.t_col, fd, fs, m, inv, SLOPE)
        gsm.gat_softmax_grad_(g.rowptr, g.col, fd, fs, m, inv, SLOPE, t, long_rows=lr)
        padded = gsm.gat_long_rows(g.rowptr, g.nnz)
        gsm.gat_softmax_stats(g.rowptr, g.col, fd, fs, SLOPE, long_rows=padded)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            torch.cuda.set_sync_debug_mode(0)


@pytest.mark.cuda
def test_cuda_argument_errors(cuda):
    g = _graph(2, M=20, K=15, hubs=())
    gc = _on(g, cuda)
    fd, fs = _inputs(2, 20, 15, 4)
    with pytest.raises(ValueError, match="one device"):
        gsm.gat_softmax_stats(gc.rowptr, gc.col, fd, fs.to(cuda), SLOPE)
    with pytest.raises(ValueError, match="one device"):
        gsm.gat_softmax_stats(gc.rowptr, gc.col, fd.to(cuda), fs.to(cuda), SLOPE, long_rows=g.rowptr[:0])
    with pytest.raises(ValueError, match="fd must be contiguous"):
        gsm.gat_softmax_stats(gc.rowptr, gc.col, torch.randn(4, 20, device=cuda).t(), fs.to(cuda), SLOPE)
