"""gnnsparse.torch ops: forward against gnnsparse.reference, gradients against finite differences
(fp64 gradcheck) and against autograd through plain torch, opcheck, torch.compile, determinism,
errors. CPU tensors run on the SYCL CPU device; the CUDA cases run where a GPU is present."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
from conftest import torch_device_params  # noqa: E402
import gnnsparse.torch as gst  # noqa: E402
from gnnsparse import reference as ref  # noqa: E402
from gnnsparse.torch import _library as L  # noqa: E402

from conftest import sycl_or_skip  # noqa: E402


@pytest.fixture(params=torch_device_params())
def device(request):
    if request.param == "cpu":
        sycl_or_skip()
    return request.param


def small_graph(seed=0, n=9, e=28, device="cpu", hub=True):
    """n nodes with an empty row, a duplicate edge, a self loop and (optionally) a hub row."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=g)
    dst = torch.randint(0, n - 1, (e,), generator=g)  # node n-1 receives nothing: an empty row
    src[0], dst[0], src[1], dst[1] = 3, 2, 3, 2  # duplicate edge 3 -> 2
    src[2], dst[2] = 4, 4  # a self loop
    if hub:
        src[3:12] = torch.arange(9) % n
        dst[3:12] = 1
    ei = torch.stack([src, dst]).to(device)
    return gs.CSR.from_edge_index(ei, n), ei


D = torch.float64  # the kernel instances the gradchecks build


def _np(t):
    return t.detach().cpu().numpy()


# ---------------------------------------------------------------- forward = reference
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_spmm_forward_matches_reference(device, reduce):
    A, ei = small_graph(1, device=device)
    X = torch.randn(9, 2, 3, dtype=torch.float64, device=device)
    w = torch.rand(A.nnz, dtype=torch.float64, device=device)
    Y, arg = gst.spmm(A, X, reduce, return_arg=True) if reduce in ("max", "min") else (gst.spmm(A, X, reduce), None)
    Aw = gs.CSR(_np(gst.graph_tensors(A, device).rowptr), _np(gst.graph_tensors(A, device).col), _np(w), A.shape)
    want = ref.spmm(A, _np(X), reduce, return_arg=arg is not None)
    if arg is not None:
        want, want_arg = want
        np.testing.assert_array_equal(_np(arg), want_arg)
    np.testing.assert_allclose(_np(Y), want, rtol=1e-12, atol=1e-12)
    Yw = gst.spmm(A, X, reduce, val=w)
    np.testing.assert_allclose(_np(Yw), ref.spmm(Aw, _np(X), reduce), rtol=1e-12, atol=1e-12)


def test_sddmm_and_fusedmm_forward_match_reference(device):
    A, _ = small_graph(2, device=device)
    n = 9
    X = torch.randn(n, 2, 4, dtype=torch.float64, device=device)
    Y = torch.randn(n, 2, 4, dtype=torch.float64, device=device)
    a, b = torch.randn(n, 2, dtype=torch.float64, device=device), torch.randn(n, 2, dtype=torch.float64, device=device)
    Z = torch.randn(n, 2, 5, dtype=torch.float64, device=device)
    np.testing.assert_allclose(_np(gst.sddmm(A, X, Y, "dot")), ref.sddmm(A, _np(X), _np(Y), "dot"), rtol=1e-12)
    np.testing.assert_allclose(_np(gst.sddmm(A, a, b, "add")), ref.sddmm(A, _np(a), _np(b), "add"), rtol=1e-12)
    np.testing.assert_allclose(_np(gst.sddmm(A, X[:, 0], Y[:, 0])), ref.sddmm(A, _np(X[:, 0]), _np(Y[:, 0])),
                               rtol=1e-12)
    for edge in ("none", "leaky_relu", "exp", "softmax"):
        out, w = gst.fusedmm(A, a, b, Z, "add", edge, 0.1, return_edges=True)
        want, want_w = ref.fusedmm(A, _np(a), _np(b), _np(Z), "add", edge, 0.1, return_edges=True)
        np.testing.assert_allclose(_np(out), want, rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(_np(w), want_w, rtol=1e-11, atol=1e-12)
    # the GAT chain: leaky_relu, then the row softmax (reference: sddmm, numpy softmax, aggregation)
    out, w = gst.fusedmm(A, a, b, Z, "add", "leaky_relu_softmax", 0.2, return_edges=True)
    e = ref.sddmm(A, _np(a), _np(b), "add")
    e = np.where(e > 0, e, 0.2 * e)
    p = ref._edge_function(A, e, "softmax", 0.2)
    rows = ref.edge_rows(A)
    want = np.zeros((n, 2, 5))
    np.add.at(want, rows, p[:, :, None] * _np(Z)[_np(gst.graph_tensors(A, device).col).astype(np.int64)])
    np.testing.assert_allclose(_np(w), p, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(_np(out), want, rtol=1e-11, atol=1e-12)


# ---------------------------------------------------------------- gradients: finite differences
def _gc(f, inputs, fast=True):
    assert torch.autograd.gradcheck(f, inputs, fast_mode=fast, atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_spmm_gradcheck(device, reduce):
    A, ei = small_graph(3, device=device)
    X = torch.randn(9, 3, dtype=torch.float64, device=device, requires_grad=True)
    w = torch.rand(A.nnz, dtype=torch.float64, device=device, requires_grad=True)
    _gc(lambda X, w: gst.spmm(A, X, reduce, edge_weight=w), (X, w), fast=False)
    _gc(lambda X: gst.spmm(A, X, reduce), (X,))


@pytest.mark.parametrize("op, shape", [("dot", (2, 3)), ("dot", (3,)), ("add", (2,)), ("add", ())])
def test_sddmm_gradcheck(device, op, shape):
    A, _ = small_graph(4, device=device)
    X = torch.randn((9,) + shape, dtype=torch.float64, device=device, requires_grad=True)
    Y = torch.randn((9,) + shape, dtype=torch.float64, device=device, requires_grad=True)
    _gc(lambda X, Y: gst.sddmm(A, X, Y, op), (X, Y), fast=op == "dot")


@pytest.mark.parametrize("op, edge", [("add", e) for e in L.EDGE_FUNCTIONS]
                         + [("dot", "none"), ("dot", "softmax"), ("dot", L.GAT_EDGE)])
def test_fusedmm_gradcheck(device, edge, op):
    A, _ = small_graph(5, n=7, e=20, device=device, hub=False)
    shape = (7, 2, 2) if op == "dot" else (7, 2)
    X = torch.randn(shape, dtype=torch.float64, device=device, requires_grad=True)
    Y = torch.randn(shape, dtype=torch.float64, device=device, requires_grad=True)
    Z = torch.randn(7, 2, 3, dtype=torch.float64, device=device, requires_grad=True)
    w = (torch.rand(A.nnz, dtype=torch.float64, device=device) + 0.5).requires_grad_()
    for save in (False, True):
        _gc(lambda X, Y, Z, w: gst.fusedmm(A, X, Y, Z, op, edge, 0.3, edge_weight=w, save_edges=save), (X, Y, Z, w))
    # the edges returned to the caller are differentiable too
    _gc(lambda X, Y, Z: gst.fusedmm(A, X, Y, Z, op, edge, 0.3, return_edges=True)[1], (X, Y, Z))


def test_spmm_heads_and_edge_softmax_gradcheck(device):
    A, _ = small_graph(6, device=device)
    W = torch.randn(A.nnz, 2, dtype=torch.float64, device=device, requires_grad=True)
    Z = torch.randn(9, 2, 3, dtype=torch.float64, device=device, requires_grad=True)
    _gc(lambda W, Z: gst.spmm_heads(A, W, Z), (W, Z), fast=False)
    S = torch.randn(A.nnz, 2, dtype=torch.float64, device=device, requires_grad=True)
    _gc(lambda S: gst.edge_softmax(A, S), (S,), fast=False)
    _gc(lambda S: gst.edge_softmax(A, S[:, 0]), (S,))


def test_edge_softmax_of_a_graph_without_edges(device):
    import gnnsparse as gs

    A = gs.CSR.from_edge_index(torch.zeros(2, 0, dtype=torch.int64), 4)
    for shape in ((0,), (0, 3)):
        S = torch.zeros(shape, dtype=torch.float64, device=device, requires_grad=True)
        P = gst.edge_softmax(A, S)
        assert P.shape == S.shape
        P.sum().backward()
        assert S.grad.shape == S.shape


# ---------------------------------------------------------------- gradients: plain torch autograd
def _torch_spmm(rows, col, val, X, M, reduce):
    msg = X[col] * val[:, None]
    idx = rows[:, None].expand_as(msg)
    if reduce in ("sum", "mean"):
        Y = torch.zeros(M, X.shape[1], dtype=X.dtype).index_add(0, rows, msg)
        if reduce == "mean":
            Y = Y / torch.bincount(rows, minlength=M).clamp_min(1)[:, None]
        return Y
    Y = torch.zeros(M, X.shape[1], dtype=X.dtype)
    return Y.scatter_reduce(0, idx, msg, "amax" if reduce == "max" else "amin", include_self=False)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_spmm_gradients_match_torch_autograd(sycl, reduce):
    rng = np.random.default_rng(7)
    n, e = 40, 200
    ei = torch.from_numpy(rng.integers(0, n, (2, e)))
    A = gs.CSR.from_edge_index(ei, n)
    g = gst.graph_tensors(A)
    X1 = torch.randn(n, 5, dtype=torch.float64, requires_grad=True)
    X2 = X1.detach().clone().requires_grad_()
    v1 = torch.rand(e, dtype=torch.float64, requires_grad=True)
    v2 = v1.detach().clone().requires_grad_()
    G = torch.randn(n, 5, dtype=torch.float64)
    (gst.spmm(g, X1, reduce, val=v1) * G).sum().backward()
    (_torch_spmm(g.rows.long(), g.col.long(), v2, X2, n, reduce) * G).sum().backward()
    torch.testing.assert_close(X1.grad, X2.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(v1.grad, v2.grad, rtol=1e-12, atol=1e-12)


def test_max_routes_a_tie_to_the_smallest_edge_only(sycl):
    # edges 0 -> 1 twice (a tie between CSR positions 0 and 1) and 2 -> 1 smaller
    A = gs.CSR(np.array([0, 0, 3]), np.array([0, 0, 2]), None, (2, 3))
    X = torch.tensor([[2.0], [0.0], [1.0]], dtype=torch.float64, requires_grad=True)
    v = torch.ones(3, dtype=torch.float64, requires_grad=True)
    Y, arg = gst.spmm(A, X, "max", return_arg=True, val=v)
    assert arg.tolist() == [[-1], [0]]
    Y.sum().backward()
    assert X.grad.tolist() == [[1.0], [0.0], [0.0]]
    assert v.grad.tolist() == [2.0, 0.0, 0.0]  # dval[k] = dY * X[col k] for the winner only


# ---------------------------------------------------------------- opcheck, compile, determinism
def test_opcheck_every_op(sycl):
    A, _ = small_graph(8, n=7, e=18, hub=False)
    g = gst.graph_tensors(A)
    n = 7
    X = torch.randn(n, 3, dtype=D, requires_grad=True)
    w = torch.rand(g.nnz, dtype=D, requires_grad=True)
    a, b = torch.randn(n, 2, dtype=D, requires_grad=True), torch.randn(n, 2, dtype=D, requires_grad=True)
    Z = torch.randn(n, 2, 3, dtype=D, requires_grad=True)
    T = (g.t_rowptr, g.t_col, g.t_perm)
    cases = [
        (L.spmm_op, (g.rowptr, g.col, w, *T, X, "mean")),
        (L.spmm_op, (g.rowptr, g.col, None, *T, X, "max")),
        (L.sddmm_op, (g.rowptr, g.col, *T, g.eid, a, b, "add")),
        (L.sddmm_op, (g.rowptr, g.col, *T, g.eid, Z, Z, "dot")),
        (L.spmm_heads_op, (g.rowptr, g.col, *T, torch.randn(g.nnz, 2, dtype=D, requires_grad=True), Z)),
        (L.edge_softmax_op, (g.rowptr, g.rows, g.eid, torch.randn(g.nnz, 2, dtype=D, requires_grad=True))),
        (L.fusedmm_op, (g.rowptr, g.col, None, *T, g.rows, g.eid, a, b, Z, "add", L.GAT_EDGE, 0.2, False)),
        (L.fusedmm_op, (g.rowptr, g.col, w, *T, g.rows, g.eid, a, b, Z, "add", "softmax", 0.2, True)),
    ]
    for op, args in cases:
        torch.library.opcheck(op.op, args)  # the custom op itself (eager calls take op.fwd)


def test_compile_fullgraph_no_graph_breaks(sycl):
    A, _ = small_graph(9, n=8, e=24, hub=False)
    g = gst.graph_tensors(A)
    n = 8

    def f(g, X, a, b, Z, w):
        h = gst.spmm(g, X, "mean") + gst.spmm(g, X, "max") + gst.spmm(g, X, val=w)
        e = gst.sddmm(g, X, X, "dot")
        o = gst.fusedmm(g, a, b, Z, "add", "leaky_relu_softmax")
        p = gst.spmm_heads(g, gst.edge_softmax(g, gst.sddmm(g, a, b, "add")), Z)
        return h.square().sum() + e.sum() + o.square().sum() + p.sum()

    torch.manual_seed(0)
    ins = [torch.randn(n, 4, dtype=D), torch.randn(n, 2, dtype=D), torch.randn(n, 2, dtype=D),
           torch.randn(n, 2, 3, dtype=D), torch.rand(g.nnz, dtype=D)]
    eager = [t.clone().requires_grad_() for t in ins]
    comp = [t.clone().requires_grad_() for t in ins]
    torch._dynamo.reset()
    cf = torch.compile(f, fullgraph=True, backend="aot_eager")
    f(g, *eager).backward()
    cf(g, *comp).backward()
    for a, b in zip(eager, comp):
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)


def test_forward_and_backward_are_bitwise_reproducible(sycl):
    rng = np.random.default_rng(11)
    n, e = 300, 3000
    ei = torch.from_numpy(rng.integers(0, n, (2, e)))
    A = gs.CSR.from_edge_index(ei, n)
    base = [torch.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in ((n, 16), (n, 4), (n, 4), (n, 4, 8))]

    def run():
        X, a, b, Z = (t.clone().requires_grad_() for t in base)
        loss = (gst.spmm(A, X, "max").sum() + gst.spmm(A, X, "mean").square().sum()
                + gst.fusedmm(A, a, b, Z, "add", "leaky_relu_softmax").square().sum())
        loss.backward()
        return [loss.detach()] + [t.grad for t in (X, a, b, Z)]

    r1, r2 = run(), run()
    for x, y in zip(r1, r2):
        assert torch.equal(x, y)


# ---------------------------------------------------------------- errors
def test_graph_and_features_on_different_devices_names_both(sycl):
    A, _ = small_graph(10)
    g_meta = gst.graph_tensors(A, "cpu")._replace(rowptr=torch.empty(10, dtype=torch.int32, device="meta"))
    with pytest.raises(ValueError, match=r"graph is on meta.*features are on cpu"):
        gst.spmm(g_meta, torch.randn(9, 2))


def test_bad_dtypes_and_arguments_raise_clear_errors(sycl):
    A, _ = small_graph(12)
    with pytest.raises(TypeError, match="float16"):
        gst.spmm(A, torch.randn(9, 2, dtype=torch.float16, requires_grad=True))
    with pytest.raises(TypeError, match="int64"):
        gst.spmm(A, torch.ones(9, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="reduce must be one of"):
        gst.spmm(A, torch.randn(9, 2), "prod")
    with pytest.raises(ValueError, match="X needs 9 rows"):
        gst.spmm(A, torch.randn(8, 2))
    with pytest.raises(ValueError, match="edge must be one of"):
        gst.fusedmm(A, torch.randn(9, 2), torch.randn(9, 2), torch.randn(9, 2, 3), "add", "relu")
    B = gs.CSR(np.array([0, 1]), np.array([0]), None, (1, 1))
    with pytest.raises(ValueError, match="no edge_perm"):
        gst.spmm(B, torch.randn(1, 2), edge_weight=torch.ones(1))
    a = torch.randn(9, 2, dtype=torch.float64, requires_grad=True)
    out = gst.fusedmm(A, a, a.detach(), torch.randn(9, 2, 3, dtype=torch.float64), "add", "softmax")
    (ga,) = torch.autograd.grad(out.square().sum(), a, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward"):
        ga.sum().backward()


@pytest.mark.cuda
@pytest.mark.skipif(not (torch.cuda.is_available() and gs.available_backends().get("cuda", False)),
                    reason="no CUDA device / CUDA backend")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_features_on_cuda(dtype):
    dt = getattr(torch, dtype)
    A, _ = small_graph(13, n=200, e=3000, device="cuda")
    torch.manual_seed(14)  # the same inputs whatever ran before (the suite in parallel reorders tests)
    X = torch.randn(200, 32, device="cuda")
    a, b = torch.randn(200, 4, device="cuda"), torch.randn(200, 4, device="cuda")
    Z = torch.randn(200, 4, 16, device="cuda")
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == "float16" else dict(rtol=8e-2, atol=8e-2)
    for f in (lambda X, a, b, Z: gst.spmm(A, X, "mean"), lambda X, a, b, Z: gst.spmm(A, X, "max"),
              lambda X, a, b, Z: gst.fusedmm(A, a, b, Z, "add", "leaky_relu_softmax")):
        # the float32 reference runs on the half-rounded inputs: max then picks the same winning
        # edges (rounding can reorder near-equal messages), so gradients go to the same places
        full = [t.to(dt).float().requires_grad_() for t in (X, a, b, Z)]
        half = [t.to(dt).requires_grad_() for t in (X, a, b, Z)]
        y32, y16 = f(*full), f(*half)
        assert y16.dtype == dt
        torch.testing.assert_close(y16.float(), y32, **tol)
        G = torch.randn_like(y32)
        y32.backward(G)
        y16.backward(G.to(dt))
        for p, q in zip(full, half):
            if p.grad is not None:  # the logits' gradients are differences of near-equal sums:
                # their error scales with the largest gradient, not with each element
                scaled = dict(tol, atol=tol["atol"] * max(1.0, float(p.grad.abs().max())))
                torch.testing.assert_close(q.grad.float(), p.grad, **scaled)


def test_plain_ops_keep_the_graph_for_autograd(sycl):
    """gnnsparse.spmm / sddmm / fusedmm on tensors that require grad return differentiable results
    (through gnnsparse.torch), never a silently detached tensor."""
    from gnnsparse import _ops

    assert _ops._torch_layer is not None  # registered when gnnsparse.torch is imported
    A, _ = small_graph(14)
    X = torch.randn(9, 2, dtype=D, requires_grad=True)
    a, Z = torch.randn(9, 2, dtype=D, requires_grad=True), torch.randn(9, 2, 3, dtype=D, requires_grad=True)
    outs = [gs.spmm(A, X, "mean"), gs.spmm(A, X, "max", return_arg=True)[0], gs.sddmm(A, X, X, "dot"),
            gs.fusedmm(A, a, a, Z, "add", "softmax")]
    for o in outs:
        assert o.requires_grad
    sum(o.sum() for o in outs).backward()
    assert X.grad is not None and a.grad is not None and Z.grad is not None
    with torch.no_grad():
        assert not gs.spmm(A, X).requires_grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("width", [1, 2, 3, 4, 8, 12])
def test_take_rows_is_index_select_bit_for_bit(device, dtype, width):
    """The row gather the backward passes use (which avoids a slow torch kernel for 16-byte rows on
    CUDA) returns exactly index_select's bits: NaN payloads, -0.0, repeated and empty indices."""
    from gnnsparse.torch._library import _take_rows

    g = torch.Generator().manual_seed(width)
    src = torch.randn(37, width, generator=g).to(dtype)
    src[3, 0], src[5, -1] = float("nan"), -0.0
    src = src.to(device)
    for itype in (torch.int32, torch.int64):
        for idx in (torch.randint(0, 37, (101,), generator=g), torch.arange(37).flip(0), torch.empty(0, dtype=torch.int64)):
            idx = idx.to(itype).to(device)
            want, got = src.index_select(0, idx), _take_rows(src, idx)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert torch.equal(got.view(torch.uint8) if dtype != torch.float64 else got.view(torch.int64),
                               want.view(torch.uint8) if dtype != torch.float64 else want.view(torch.int64))
    assert torch.equal(_take_rows(src[:, :0], idx), src[:, :0].index_select(0, idx))


@pytest.mark.parametrize("width", [1, 2, 4])
def test_take_rows_keeps_the_autograd_graph(device, width):
    """With grad enabled, the gather stays differentiable (its 16-byte view on CUDA is not, and once
    dropped the graph of GAT / Transformer attention weights returned to the caller silently)."""
    from gnnsparse.torch._library import _take_rows

    src = torch.randn(9, width, dtype=torch.float64, device=device, requires_grad=True)
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(width)).to(device)
    got = _take_rows(src, perm)
    assert got.requires_grad
    got.backward(torch.arange(9 * width, dtype=torch.float64, device=device).reshape(9, width))
    want = torch.empty(9, width, dtype=torch.float64, device=device)
    want[perm] = torch.arange(9 * width, dtype=torch.float64, device=device).reshape(9, width)
    assert torch.equal(src.grad, want)
