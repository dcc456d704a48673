"""gnnsparse.gatv2_scores: GATv2's attention scores, forward and backward, in one kernel each.

S[k, h] = sum_c att[h, c] leaky_relu(XL[col k, h, c] + XR[i, h, c]) against gnnsparse.reference
(fp64) on random graphs with empty rows, duplicate edges, self loops and a hub row, over heads H in
{1, 3, 4} and channels C in {1, 7, 32} (and a width that needs several tiles / the column loop);
the backward pass (dXR and dAtt's row partials over A, dXL over A^T) against a NumPy reference;
float32 / float64 (CUDA: also float16 / bfloat16), int32 / int64 indices; outputs start poisoned
(conftest: GNNSPARSE_POISON); repeated calls give the same bits; bad arguments raise errors naming
them; fp64 gradcheck through the torch layer; GATv2Conv runs the kernel and agrees with the chunked
torch-op path it replaces.
"""
from __future__ import annotations

import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import _ops
from gnnsparse import reference as ref

from conftest import random_csr

HEADS = [1, 3, 4]
CHANNELS = [1, 7, 32]
TOL = {"float64": 1e-12, "float32": 3e-5, "float16": 1e-2, "bfloat16": 6e-2}
SLOPE = 0.2


def _graph(rng, itype, M=300, K=250, hub=1500):
    """Empty rows, duplicate edges, self loops (some i == col k, as M and K overlap) and a hub row
    (long enough for the CUDA kernel's whole-warp rows)."""
    return random_csr(rng, M, K, mean_deg=6.0, empty_frac=0.25, hub=hub, weighted=True, index_dtype=itype)


def _close(got, want, dt):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.isfinite(got).all(), "an output element was left unwritten (poisoned NaN) or overflowed"
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    np.testing.assert_allclose(got, want, rtol=TOL[dt], atol=TOL[dt] * scale)


def _host(a):
    return np.asarray(a.detach().cpu().numpy() if hasattr(a, "detach") else a)


def _transpose(A):
    """(A^T as a CSR with A's index dtype, perm): A^T's entry t is A's entry perm[t]."""
    rowptr, col = _host(A.rowptr).astype(np.int64), _host(A.col).astype(np.int64)
    M, K = A.shape
    rows = np.repeat(np.arange(M), np.diff(rowptr))
    perm = np.argsort(col, kind="stable")
    t_rowptr = np.zeros(K + 1, np.int64)
    np.cumsum(np.bincount(col, minlength=K), out=t_rowptr[1:])
    it = _host(A.col).dtype
    return gs.CSR(t_rowptr.astype(it), rows[perm].astype(it), None, (K, M)), perm


def _ref_grad(A, XL, XR, att, dS, slope=SLOPE):
    """(dXL, dXR, dAtt) of sum(S * dS) in fp64."""
    XL, XR, dS = (np.asarray(_host(a), np.float64) for a in (XL, XR, dS))
    att = np.asarray(_host(att), np.float64).reshape(XL.shape[1:])
    col, rows = _host(A.col).astype(np.int64), ref.edge_rows(A)
    z = XL[col] + XR[rows]
    g = np.where(z > 0, dS[:, :, None], dS[:, :, None] * slope)
    gz = g * att
    dXR = np.zeros(XR.shape)
    np.add.at(dXR, rows, gz)
    dXL = np.zeros(XL.shape)
    np.add.at(dXL, col, gz)
    return dXL, dXR, (g * z).sum(0)


def _inputs(rng, A, H, C, dt):
    M, K = A.shape
    XL = rng.standard_normal((K, H, C)).astype(dt)
    XR = rng.standard_normal((M, H, C)).astype(dt)
    att = rng.standard_normal((H, C)).astype(dt)
    return XL, XR, att


# ---------------------------------------------------------------- NumPy inputs (the SYCL CPU device)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("H", HEADS)
@pytest.mark.parametrize("C", CHANNELS + [300])
def test_scores_match_reference(sycl, rng, itype, dt, H, C):
    A = _graph(rng, itype, M=120, K=100, hub=400) if C == 300 else _graph(rng, itype)
    XL, XR, att = _inputs(rng, A, H, C, dt)
    S = gs.gatv2_scores(A, XL, XR, att, SLOPE)
    assert isinstance(S, np.ndarray) and S.dtype == np.dtype(dt) and S.shape == (A.nnz, H)
    _close(S, ref.gatv2_scores(A, XL, XR, att, SLOPE), dt)
    assert S.tobytes() == gs.gatv2_scores(A, XL, XR, att, SLOPE).tobytes()  # bitwise reproducible


@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("H", HEADS)
@pytest.mark.parametrize("C", CHANNELS + [300])
def test_grad_matches_reference(sycl, rng, itype, dt, H, C):
    """dXR and dAtt's row partials over A, dXL over A^T with X and Y swapped and dS permuted;
    empty rows (and sources without edges) get exact zeros."""
    A = _graph(rng, itype, M=120, K=100, hub=400) if C == 300 else _graph(rng, itype)
    XL, XR, att = _inputs(rng, A, H, C, dt)
    dS = rng.standard_normal((A.nnz, H)).astype(dt)
    want_l, want_r, want_att = _ref_grad(A, XL, XR, att, dS)
    dXR, dA = _ops.launch_gatv2_grad(A, XR, XL, att, dS, SLOPE, True)
    assert dXR.dtype == np.dtype(dt) and dA.shape == XR.shape
    _close(dXR, want_r, dt)
    _close(dA.sum(0), want_att, dt)
    empty = np.diff(_host(A.rowptr)) == 0
    assert empty.any() and (dXR[empty] == 0).all() and (dA[empty] == 0).all()
    At, perm = _transpose(A)
    dXL, none = _ops.launch_gatv2_grad(At, XL, XR, att, np.ascontiguousarray(dS[perm]), SLOPE, False)
    assert none is None
    _close(dXL, want_l, dt)
    again, _ = _ops.launch_gatv2_grad(A, XR, XL, att, dS, SLOPE, True)
    assert again.tobytes() == dXR.tobytes()


@pytest.mark.parametrize("slope", [0.0, 0.2, 1.5])
def test_slope_and_att_shapes(sycl, rng, slope):
    A = _graph(rng, np.int32, M=60, K=50, hub=0)
    XL, XR, att = _inputs(rng, A, 2, 5, "float64")
    S = gs.gatv2_scores(A, XL, XR, att[None], slope)  # PyG's (1, H, C)
    _close(S, ref.gatv2_scores(A, XL, XR, att, slope), "float64")


def test_values_of_a_are_not_used(sycl, rng):
    A = _graph(rng, np.int32, M=40, K=30, hub=0)
    XL, XR, att = _inputs(rng, A, 2, 6, "float32")
    plain = gs.CSR(A.rowptr, A.col, None, A.shape)
    assert gs.gatv2_scores(A, XL, XR, att).tobytes() == gs.gatv2_scores(plain, XL, XR, att).tobytes()


@pytest.mark.parametrize("M,K,mean_deg,H,C", [(0, 5, 0.0, 2, 3), (6, 0, 0.0, 2, 3), (6, 5, 0.0, 2, 3),
                                              (6, 5, 2.0, 0, 3), (6, 5, 2.0, 2, 0), (1, 1, 1.0, 1, 1)])
def test_degenerate_shapes(sycl, rng, M, K, mean_deg, H, C):
    A = random_csr(rng, M, K, mean_deg=mean_deg)
    XL, XR, att = _inputs(rng, A, H, C, "float64")
    S = gs.gatv2_scores(A, XL, XR, att)
    assert S.shape == (A.nnz, H)
    _close(S, ref.gatv2_scores(A, XL, XR, att), "float64")
    dS = rng.standard_normal((A.nnz, H))
    dXR, dA = _ops.launch_gatv2_grad(A, XR, XL, att, dS, SLOPE, True)
    _, want_r, want_att = _ref_grad(A, XL, XR, att, dS)
    _close(dXR, want_r, "float64")
    _close(dA.sum(0), want_att, "float64")


def test_bad_arguments_raise_clear_errors(sycl, rng):
    A = _graph(rng, np.int32, M=20, K=15, hub=0)
    XL = np.ones((15, 2, 4), np.float32)
    XR = np.ones((20, 2, 4), np.float32)
    att = np.ones((2, 4), np.float32)
    with pytest.raises(TypeError, match="gnnsparse.CSR"):
        gs.gatv2_scores(np.eye(3), XL, XR, att)
    with pytest.raises(ValueError, match=r"XL of shape \(K, H, C\)"):
        gs.gatv2_scores(A, XL.reshape(15, 8), XR, att)
    with pytest.raises(ValueError, match="XL needs 15 rows"):
        gs.gatv2_scores(A, np.ones((14, 2, 4), np.float32), XR, att)
    with pytest.raises(ValueError, match="XR needs 20 rows"):
        gs.gatv2_scores(A, XL, np.ones((15, 2, 4), np.float32), att)
    with pytest.raises(ValueError, match="same heads and channels"):
        gs.gatv2_scores(A, XL, np.ones((20, 2, 5), np.float32), att)
    with pytest.raises(ValueError, match=r"att has shape \(4, 2\) but must be \(2, 4\)"):
        gs.gatv2_scores(A, XL, XR, att.T.copy())
    with pytest.raises(TypeError, match="XL has dtype int64"):
        gs.gatv2_scores(A, np.ones((15, 2, 4), np.int64), XR, att)
    with pytest.raises(TypeError, match="att has dtype float64"):
        gs.gatv2_scores(A, XL, XR, att.astype(np.float64))
    with pytest.raises(ValueError, match=r"dS has shape \(3, 2\)"):
        _ops.launch_gatv2_grad(A, XR, XL, att, np.ones((3, 2), np.float32), SLOPE, True)


def test_usm_arrays(sycl, rng):
    dpnp = pytest.importorskip("dpnp")
    A = _graph(rng, np.int32, M=50, K=40, hub=100)
    XL, XR, att = _inputs(rng, A, 3, 8, "float32")
    Au = A.to_like(dpnp.asarray(XL))
    S = gs.gatv2_scores(Au, dpnp.asarray(XL), dpnp.asarray(XR), dpnp.asarray(att))
    assert isinstance(S, dpnp.ndarray)
    assert dpnp.asnumpy(S).tobytes() == gs.gatv2_scores(A, XL, XR, att).tobytes()
    with pytest.raises(ValueError, match="XR is on SYCL device .* but att is on the host"):
        gs.gatv2_scores(Au, dpnp.asarray(XL), dpnp.asarray(XR), att)


# ---------------------------------------------------------------- torch (CPU: SYCL; CUDA where present)
def _torch():
    return pytest.importorskip("torch")


def _small_graph(torch, dev):
    src = torch.tensor([0, 0, 1, 2, 3, 3, 4, 5, 5, 5, 5, 6, 1, 2, 3, 4])
    dst = torch.tensor([1, 1, 0, 3, 2, 4, 4, 0, 1, 2, 3, 3, 3, 3, 3, 3])  # 5, 6 empty; 0 -> 1 twice; loops
    return gs.CSR.from_edge_index(torch.stack([src, dst]).to(dev), 7)


def test_torch_route_and_gradcheck(torch_cpu_cuda, rng):
    """gs.gatv2_scores on tensors that require grad goes through the torch layer; gradients of XL,
    XR and att (fp64 gradcheck)."""
    torch = _torch()
    import gnnsparse.torch as gst

    dev = torch_cpu_cuda
    A = _small_graph(torch, dev)
    for H, C in ((1, 1), (1, 5), (3, 2), (2, 33)):
        kw = dict(dtype=torch.float64, device=dev, requires_grad=True)
        XL, XR, att = torch.randn(7, H, C, **kw), torch.randn(7, H, C, **kw), torch.randn(H, C, **kw)
        S = gs.gatv2_scores(A, XL, XR, att, 0.3)
        assert S.grad_fn is not None
        np.testing.assert_allclose(_host(S), ref.gatv2_scores(A, XL, XR, att, 0.3), rtol=1e-12, atol=1e-12)
        assert torch.autograd.gradcheck(lambda a, b, c: gst.gatv2_scores(A, a, b, c, 0.3), (XL, XR, att),
                                        eps=1e-6, atol=1e-7)


def test_torch_grads_match_reference_and_repeat(torch_cpu_cuda, rng):
    torch = _torch()
    import gnnsparse.torch as gst

    dev = torch_cpu_cuda
    A0 = _graph(rng, np.int64, M=200, K=200, hub=700)
    A = A0.to_like(torch.empty(0, device=dev)) if dev.type == "cuda" else A0
    XL, XR, att = (torch.from_numpy(a).to(dev).requires_grad_() for a in _inputs(rng, A0, 4, 32, "float64"))
    dS = torch.from_numpy(rng.standard_normal((A0.nnz, 4))).to(dev)
    runs = []
    for _ in range(2):
        grads = torch.autograd.grad(gst.gatv2_scores(A, XL, XR, att), (XL, XR, att), dS)
        runs.append(grads)
    want = _ref_grad(A0, XL, XR, att, dS)
    for got, w in zip(runs[0], want):
        _close(_host(got), w, "float64")
    for a, b in zip(*runs):
        assert torch.equal(a, b)  # bitwise


def _chunked(torch, g, xl, xr, att, slope):
    from gnnsparse.torch import _conv_attention as CA

    return CA._GATv2Scores.apply(xl, xr, att, None, None, g.col, g.rows, CA._chunk_plan(g, 37), slope)


def test_layer_runs_the_kernel_and_matches_the_chunked_path(torch_cpu_cuda, monkeypatch):
    """GATv2Conv without edge features calls gatv2_scores (not the chunked Function); its scores
    and gradients agree with the chunked torch-op path (fp64)."""
    torch = _torch()
    import gnnsparse.torch as gst
    from gnnsparse.torch.nn import GATv2Conv  # before _conv_attention, which nn.py imports at its end
    from gnnsparse.torch import _conv_attention as CA

    dev = torch_cpu_cuda
    gen = torch.Generator().manual_seed(5)
    n = 90
    ei = torch.stack([torch.randint(0, n, (700,), generator=gen), torch.randint(0, n - 4, (700,), generator=gen)])
    ei[1, 50:200] = 3  # a hub
    ei = ei.to(dev)
    x = torch.randn(n, 12, generator=gen, dtype=torch.float64).to(dev)

    def boom(*a):
        raise AssertionError("the chunked path ran")

    monkeypatch.setattr(CA._GATv2Scores, "apply", boom)
    layer = GATv2Conv(12, 8, heads=3).double().to(dev)
    layer(x, ei).square().sum().backward()
    monkeypatch.undo()

    g = gst.graph_tensors(gs.CSR.from_edge_index(ei, n), x)
    kw = dict(dtype=torch.float64, device=dev, requires_grad=True)
    xl, xr, att = torch.randn(n, 3, 8, **kw), torch.randn(n, 3, 8, **kw), torch.randn(1, 3, 8, **kw)
    dS = torch.randn(g.nnz, 3, dtype=torch.float64, device=dev)
    s1 = gst.gatv2_scores(g, xl, xr, att, 0.2)
    s2 = _chunked(torch, g, xl, xr, att, 0.2)
    torch.testing.assert_close(s1, s2, rtol=1e-12, atol=1e-12)
    for a, b in zip(torch.autograd.grad(s1, (xl, xr, att), dS), torch.autograd.grad(s2, (xl, xr, att), dS)):
        torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-11)


# ---------------------------------------------------------------- CUDA (skipped without a GPU)
def _cuda_or_skip():
    torch = _torch()
    from gnnsparse import _cuda_backend

    if not torch.cuda.is_available() or not _cuda_backend.backend.available():
        pytest.skip("no CUDA device or no compiled gnnsparse CUDA module")
    return torch


CUDA_DTYPES = ["float32", "float64", "float16", "bfloat16"]


def _cuda_case(torch, rng, A0, H, C, dt, misalign=False):
    """(A on the GPU, XL, XR, att in dt, dS in the edge-value dtype); with misalign, XL starts one
    element past a 16-byte boundary (the scalar path)."""
    A = A0.to_like(torch.empty(0, device="cuda"))
    tdt = getattr(torch, dt)
    vdt = torch.float32 if dt in ("float16", "bfloat16") else tdt
    M, K = A0.shape
    xh = rng.uniform(-1, 1, (K, H, C))
    buf = torch.empty(xh.size + 1, device="cuda", dtype=tdt)
    XL = (buf[1:] if misalign else buf[:xh.size]).view(K, H, C)
    XL.copy_(torch.from_numpy(xh))
    XR = torch.from_numpy(rng.uniform(-1, 1, (M, H, C))).to("cuda", tdt)
    att = torch.from_numpy(rng.uniform(-1, 1, (H, C))).to("cuda", tdt)
    dS = torch.from_numpy(rng.uniform(-1, 1, (A0.nnz, H))).to("cuda", vdt)
    return A, XL, XR, att, dS


def _same_bits(torch, a, b):
    it = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    assert torch.equal(a.view(it), b.view(it))


def _check_cuda(torch, A0, A, XL, XR, att, dS, dt):
    S = gs.gatv2_scores(A, XL, XR, att, SLOPE)
    torch.cuda.synchronize()
    vdt = torch.float32 if dt in ("float16", "bfloat16") else getattr(torch, dt)
    assert S.dtype == vdt and S.shape == (A0.nnz, XL.shape[1])
    _close(_host(S.double()), ref.gatv2_scores(A0, XL.double().cpu(), XR.double().cpu(), att.double().cpu(), SLOPE),
           dt)
    _same_bits(torch, S, gs.gatv2_scores(A, XL, XR, att, SLOPE))
    want_l, want_r, want_att = _ref_grad(A0, XL.double().cpu(), XR.double().cpu(), att.double().cpu(), dS.cpu())
    dXR, dA = _ops.launch_gatv2_grad(A, XR, XL, att, dS, SLOPE, True)
    assert dXR.dtype == XR.dtype and dA.dtype == vdt
    _close(_host(dXR.double()), want_r, dt)
    _close(_host(dA.double().sum(0)), want_att, dt)
    _same_bits(torch, dXR, _ops.launch_gatv2_grad(A, XR, XL, att, dS, SLOPE, True)[0])
    At0, perm = _transpose(A0)
    At = At0.to_like(torch.empty(0, device="cuda"))
    dXL, _ = _ops.launch_gatv2_grad(At, XL, XR, att, dS[torch.from_numpy(perm).cuda()].contiguous(), SLOPE, False)
    _close(_host(dXL.double()), want_l, dt)


@pytest.mark.cuda
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("dt", CUDA_DTYPES)
@pytest.mark.parametrize("H", HEADS)
@pytest.mark.parametrize("C", CHANNELS + [200])
def test_cuda_matches_reference(rng, itype, dt, H, C):
    """Forward and backward, the vector path (C a multiple of the 16-byte vector) and the scalar
    one, one vector per lane and the column loop (C = 200), short rows, whole-warp rows, a hub."""
    torch = _cuda_or_skip()
    A0 = _graph(rng, itype, M=700, K=500, hub=5000)
    _check_cuda(torch, A0, *_cuda_case(torch, rng, A0, H, C, dt), dt)


@pytest.mark.cuda
@pytest.mark.parametrize("dt", CUDA_DTYPES)
@pytest.mark.parametrize("H,C", [(4, 32), (8, 8), (2, 4), (3, 7)])
@pytest.mark.parametrize("shape", ["misaligned", "dense_rows"])
def test_cuda_paths(rng, dt, H, C, shape):
    """The scalar path (XL not 16-byte aligned) and rows long on average (every row a whole-warp row:
    the slices' sums merged by the shuffle tree)."""
    torch = _cuda_or_skip()
    if shape == "dense_rows":
        A0 = random_csr(rng, 64, 300, mean_deg=150.0, empty_frac=0.1, hub=0, index_dtype=np.int32)
    else:
        A0 = _graph(rng, np.int64, M=500, K=400, hub=4000)
    _check_cuda(torch, A0, *_cuda_case(torch, rng, A0, H, C, dt, misalign=shape == "misaligned"), dt)


@pytest.mark.cuda
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("hub", [True, False])
def test_cuda_unknown_max_degree(rng, dt, hub):
    """The longest row unknown to the plan: the hub pass is armed and its flag kernel decides (a hub
    row: the segment kernels and the combine run; none: they return at once)."""
    torch = _cuda_or_skip()
    from gnnsparse import _core, _cuda_backend

    A0 = _graph(rng, np.int32, M=500, K=400, hub=4000 if hub else 0)
    A, XL, XR, att, dS = _cuda_case(torch, rng, A0, 4, 32, dt)
    b = _cuda_backend.backend
    view = b.view(A.rowptr, A.col, None, A.shape[0], A.shape[1], A.nnz, -1)
    code = _core.DTYPE[dt][0]
    S = b.gatv2_scores(view, XR, XL, att, A.nnz, 4, 32, code, SLOPE)
    dXR, dA = b.gatv2_grad(view, XR, XL, att, dS, A.shape[0], 4, 32, code, SLOPE, True)
    torch.cuda.synchronize()
    h = (XL.cpu(), XR.cpu(), att.cpu())
    _close(_host(S), ref.gatv2_scores(A0, *h, SLOPE), dt)
    _, want_r, want_att = _ref_grad(A0, *h, dS.cpu())
    _close(_host(dXR), want_r, dt)
    _close(_host(dA).sum(0), want_att, dt)


@pytest.mark.cuda
def test_cuda_degenerate_shapes(rng):
    torch = _cuda_or_skip()
    for M, K, deg in ((0, 5, 0.0), (6, 0, 0.0), (6, 5, 0.0), (1, 1, 1.0)):
        A0 = random_csr(rng, M, K, mean_deg=deg)
        A, XL, XR, att, dS = _cuda_case(torch, rng, A0, 2, 3, "float32")
        assert gs.gatv2_scores(A, XL, XR, att).shape == (A0.nnz, 2)
        dXR, dA = _ops.launch_gatv2_grad(A, XR, XL, att, dS, SLOPE, True)
        torch.cuda.synchronize()
        _, want_r, _ = _ref_grad(A0, XL.cpu(), XR.cpu(), att.cpu(), dS.cpu())
        _close(_host(dXR), want_r, "float32")


def test_opcheck_and_compile(sycl):
    """The custom ops pass torch.library.opcheck (fake kernels, autograd registration) and trace under
    torch.compile(fullgraph=True) with the same gradients as eager."""
    torch = _torch()
    import gnnsparse.torch as gst
    from gnnsparse.torch import _library as L

    A = _small_graph(torch, "cpu")
    g = gst.graph_tensors(A)
    D = torch.float64
    XL, XR, att = (torch.randn(*s, dtype=D, requires_grad=True) for s in ((7, 2, 3), (7, 2, 3), (2, 3)))
    torch.library.opcheck(L.gatv2_scores_op.op, (g.rowptr, g.col, g.t_rowptr, g.t_col, g.t_perm, XL, XR, att, 0.2))
    for want_att in (True, False):
        torch.library.opcheck(L.gatv2_grad_op.op, (g.rowptr, g.col, XR.detach(), XL.detach(), att.detach(),
                                                torch.randn(g.nnz, 2, dtype=D), 0.2, want_att))

    def f(g, a, b, c):
        return gst.gatv2_scores(g, a, b, c, 0.2).square().sum()

    eager = [t.detach().clone().requires_grad_() for t in (XL, XR, att)]
    comp = [t.detach().clone().requires_grad_() for t in (XL, XR, att)]
    torch._dynamo.reset()
    f(g, *eager).backward()
    torch.compile(f, fullgraph=True, backend="aot_eager")(g, *comp).backward()
    for a, b in zip(eager, comp):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)
