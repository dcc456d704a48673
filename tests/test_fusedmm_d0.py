"""FusedMM with a Z of no columns (D = 0, return_edges=True): only the edge values (scores, edge
function, row softmax, value scaling), as FusedMM's recompute pass in the backward needs them
(without return_edges, D = 0 is an empty result).

The edge values must be bitwise those of a call with columns on the same walk: on the SYCL CPU
device every D (the score and the softmax do not depend on D); on CUDA the call the D = 0 plan
shares its walk with (dot: D = F, Y != Z, the forward of TransformerConv; F not a multiple of the
vector width and op add: D = 1 as well). Then the recomputing backward (D = 0) and the saving one
give the same gradient bits -- except, on CUDA, for a row softmax over a hub row (the hub pass) with
several heads, where the two agree to rounding only (H200, 2026-12-02). CPU tensors run on the SYCL
CPU device; CUDA cases where a GPU is."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
import gnnsparse.torch as gst  # noqa: E402
from conftest import torch_device_params  # noqa: E402
from gnnsparse import reference as ref  # noqa: E402

EDGES = ["none", "leaky_relu", "exp", "softmax", "leaky_relu_softmax"]


@pytest.fixture(params=torch_device_params())
def dev(request):
    if request.param == "cpu":
        from conftest import sycl_or_skip

        sycl_or_skip()
    return torch.device(request.param)


def make_graph(seed, M, K, deg, hub, itype, weighted, dev, fixed=()):
    """(gs.CSR on dev, its host arrays for the oracle): empty rows (the last one too), a repeated
    column, rows longer than a warp, optionally one hub row of `hub` entries; `fixed`: (row,
    length) pairs."""
    rng = np.random.default_rng(seed)
    d = rng.poisson(deg, M)
    d[rng.random(M) < 0.2] = 0
    d[M - 1] = 0
    d[1] = 70  # longer than a warp: the multi-group walk
    if hub:
        d[M // 2] = hub
    for r, n in fixed:
        d[r] = n
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(d, out=rowptr[1:])
    col = rng.integers(0, K, int(rowptr[-1]))
    col[rowptr[1] + 1] = col[rowptr[1]]  # a repeated (i, j) pair
    val = rng.standard_normal(col.size).astype(np.float32) + 0.1 if weighted else None
    it = torch.int32 if itype == "int32" else torch.int64
    A = gs.CSR(torch.from_numpy(rowptr).to(dev, it), torch.from_numpy(col).to(dev, it),
               None if val is None else torch.from_numpy(val).to(dev), shape=(M, K))
    return A, gs.CSR(rowptr, col, val, (M, K))


def inputs(seed, M, K, H, F, D, op, dt, dev):
    g = torch.Generator().manual_seed(seed)
    xs, ys = ((M, H, F), (K, H, F)) if op == "dot" else ((M, H), (K, H))
    X, Y = (torch.randn(s, generator=g, dtype=torch.float64) * 0.5 for s in (xs, ys))
    Z = torch.randn((K, H, D), generator=g, dtype=torch.float64)
    return tuple(t.to(dev, dt) for t in (X, Y, Z))


def twins(dev, op, F, elem_bytes):
    """The widths D whose calls give the D = 0 call's edge values bitwise (see the module doc)."""
    if dev.type == "cpu":
        return (1, 11, F if op == "dot" else 16)
    if op == "add":
        return (1,)
    return (F, 1) if F % (16 // elem_bytes) else (F,)


@pytest.mark.parametrize("edge", EDGES)
@pytest.mark.parametrize("op,H,F,dt", [("dot", 4, 32, torch.float32), ("dot", 1, 32, torch.float32),
                                       ("dot", 4, 6, torch.float32), ("dot", 1, 64, torch.float32),
                                       ("dot", 2, 16, torch.float64), ("add", 4, 1, torch.float32)])
@pytest.mark.parametrize("itype,weighted", [("int32", True), ("int64", False)])
@pytest.mark.parametrize("hub", [0, 3000])
def test_edges_only_bitwise(dev, edge, op, H, F, dt, itype, weighted, hub):
    M, K = 300, 200
    A, Ah = make_graph(F + H + hub, M, K, 9, hub, itype, weighted, dev)
    X, Y, Z = inputs(H * F, M, K, H, F, max(F, 16), op, dt, dev)
    Z0 = Z.new_empty((K, H, 0))
    out, E = gs.fusedmm(A, X, Y, Z0, op=op, edge=edge, slope=0.1, return_edges=True)
    assert out.shape == (M, H, 0) and E.shape == (Ah.nnz, H)
    assert not torch.isnan(E).any()  # outputs start as NaN (conftest): every edge value was written
    want = ref.fusedmm(Ah, X.cpu().numpy(), Y.cpu().numpy(), Z.cpu().numpy(), op, edge, 0.1, return_edges=True)[1]
    tol = 1e-10 if dt == torch.float64 else 1e-4
    np.testing.assert_allclose(E.cpu().numpy(), want, rtol=tol, atol=tol)
    # CUDA, a hub row and a row softmax, with several heads and dot on the one-vector walk, or op
    # add (D = 0 takes EdgesAdd, whose hub segments are longer): the hub pass's softmax states of
    # D = 0 and D = F differ in rounding (measured on the H200, 2026-12-02: the values agree with
    # the fp64 reference above and with each other to rounding, not bitwise)
    rounding = (dev.type == "cuda" and hub > 0 and edge.endswith("softmax")
                and ((H > 1 and op == "dot") or op == "add"))
    for D in twins(dev, op, F, X.element_size()):
        Zd = Z[:, :, :D].contiguous()
        Ed = gs.fusedmm(A, X, Y, Zd, op=op, edge=edge, slope=0.1, return_edges=True)[1]
        if rounding:
            torch.testing.assert_close(E, Ed, rtol=2e-6, atol=1e-7)
        else:
            assert torch.equal(E, Ed), f"D = 0 and D = {D} edge values differ"
    assert torch.equal(E, gs.fusedmm(A, X, Y, Z0, op=op, edge=edge, slope=0.1, return_edges=True)[1])


@pytest.mark.parametrize("edge", EDGES)
@pytest.mark.parametrize("dt,H", [(torch.float32, 1), (torch.float32, 4), (torch.float32, 3), (torch.bfloat16, 4),
                                  (torch.float64, 8), (torch.float16, 5), (torch.float32, 9)])
@pytest.mark.parametrize("hub", [0, 3000])
def test_edges_add_all_heads(monkeypatch, edge, dt, H, hub):
    # CUDA, op add, D = 0 (GAT's attention weights): up to 8 heads take EdgesAdd (all heads of a
    # row together); its edge values are bitwise those of the generic walk it replaced
    # (GNNSPARSE_CUDA_FUSEDMM=generic) -- except a row softmax's hub row, whose segments differ
    # (equal to rounding) -- and match the oracle. Rows of 32 and 33 entries sit on either side of
    # the short / long boundary; 9 heads fall back to the generic walk.
    if not torch.cuda.is_available():
        pytest.skip("CUDA only: the CPU device has no EdgesAdd")
    dev = torch.device("cuda")
    M, K = 300, 200
    A, Ah = make_graph(H + hub, M, K, 12, hub, "int32", True, dev, fixed=((2, 32), (3, 33)))
    X, Y, _ = inputs(H, M, K, H, 1, 0, "add", dt, dev)
    Z0 = X.new_empty((K, H, 0))
    want = ref.fusedmm(Ah, X.cpu().double().numpy(), Y.cpu().double().numpy(), np.zeros((K, H, 1)), "add", edge,
                       0.2, return_edges=True)[1]
    hub_edges = torch.zeros(Ah.nnz, dtype=torch.bool, device=dev)
    if hub and edge.endswith("softmax"):
        hub_edges[int(Ah.rowptr[M // 2]):int(Ah.rowptr[M // 2 + 1])] = True

    def same(a, b):
        assert torch.equal(a[~hub_edges], b[~hub_edges])
        r = {torch.float64: 1e-12, torch.float32: 2e-6, torch.bfloat16: 1e-2, torch.float16: 2e-3}[dt]
        torch.testing.assert_close(a[hub_edges], b[hub_edges], rtol=r, atol=r)

    res = {}
    for path in ("auto", "generic"):
        monkeypatch.setenv("GNNSPARSE_CUDA_FUSEDMM", path)
        res[path] = gs.fusedmm(A, X, Y, Z0, op="add", edge=edge, slope=0.2, return_edges=True)[1]
        assert not torch.isnan(res[path]).any()
    same(res["auto"], res["generic"])
    tol = {torch.float64: 1e-10, torch.float32: 1e-4, torch.bfloat16: 3e-2, torch.float16: 5e-3}[dt]
    np.testing.assert_allclose(res["auto"].double().cpu().numpy(), want, rtol=tol, atol=tol)
    # repeatable
    monkeypatch.setenv("GNNSPARSE_CUDA_FUSEDMM", "auto")
    assert torch.equal(res["auto"], gs.fusedmm(A, X, Y, Z0, op="add", edge=edge, slope=0.2, return_edges=True)[1])
    # unweighted, 64-bit indices
    A64 = gs.CSR(A.rowptr.long(), A.col.long(), None, shape=(M, K))
    for path in ("auto", "generic"):
        monkeypatch.setenv("GNNSPARSE_CUDA_FUSEDMM", path)
        res[path] = gs.fusedmm(A64, X, Y, Z0, op="add", edge=edge, slope=0.2, return_edges=True)[1]
    same(res["auto"], res["generic"])


@pytest.mark.parametrize("edge", ["softmax", "leaky_relu_softmax", "exp"])
def test_edges_only_close_to_d1(dev, edge):
    # dot, F = 32 on CUDA: D = 1 takes the scalar walk (32 lanes per row), D = 0 the one-vector
    # walk; the values agree to rounding
    M, K = 257, 190
    A, Ah = make_graph(3, M, K, 9, 0, "int32", True, dev)
    X, Y, Z = inputs(4, M, K, 4, 32, 1, "dot", torch.float32, dev)
    E0 = gs.fusedmm(A, X, Y, Z[:, :, :0], op="dot", edge=edge, return_edges=True)[1]
    E1 = gs.fusedmm(A, X, Y, Z, op="dot", edge=edge, return_edges=True)[1]
    torch.testing.assert_close(E0, E1, rtol=1e-5, atol=1e-6)


def test_edges_only_one_head_2d(dev):
    M, K = 40, 30
    A, Ah = make_graph(8, M, K, 4, 0, "int64", True, dev)
    X, Y, Z = inputs(9, M, K, 1, 5, 3, "dot", torch.float64, dev)
    out, E = gs.fusedmm(A, X[:, 0], Y[:, 0], Z[:, 0, :0], edge="softmax", return_edges=True)
    assert out.shape == (M, 0) and E.shape == (Ah.nnz,)
    want = ref.fusedmm(Ah, X[:, 0].cpu().numpy(), Y[:, 0].cpu().numpy(), Z[:, 0].cpu().numpy(), edge="softmax",
                       return_edges=True)[1]
    np.testing.assert_allclose(E.cpu().numpy(), want, rtol=1e-12, atol=1e-12)


def test_edges_only_empty_graph_parts(dev):
    # no edges at all, and no rows
    for M, K in ((6, 5), (0, 5)):
        rowptr = torch.zeros(M + 1, dtype=torch.int32, device=dev)
        A = gs.CSR(rowptr, torch.zeros(0, dtype=torch.int32, device=dev), None, shape=(M, K))
        X, Y, Z = inputs(1, M, K, 2, 8, 0, "dot", torch.float32, dev)
        out, E = gs.fusedmm(A, X, Y, Z, edge="softmax", return_edges=True)
        assert out.shape == (M, 2, 0) and E.shape == (0, 2)


def test_no_columns_without_edges(dev):
    # D = 0 without return_edges is an empty result (nothing runs), as any empty dimension
    A, _ = make_graph(2, 20, 10, 3, 0, "int32", False, dev)
    X, Y, Z = inputs(2, 20, 10, 2, 4, 0, "dot", torch.float32, dev)
    assert gs.fusedmm(A, X, Y, Z, edge="softmax").shape == (20, 2, 0)
    assert gs.fusedmm(A, X[:, 0], Y[:, 0], Z[:, 0], edge="softmax").shape == (20, 0)


def test_no_columns_autograd(dev):
    # the autograd layer with D = 0: the returned edge values are differentiable, and equal (value
    # and gradient bits) to those of the call with columns on the same walk
    A, _ = make_graph(3, 40, 30, 5, 0, "int32", False, dev)
    X, Y, Z = inputs(3, 40, 30, 2, 4, 4, "dot", torch.float32, dev)
    res = []
    for Zd in (Z[:, :, :0], Z):
        Xg, Yg = X.detach().clone().requires_grad_(), Y.detach().clone().requires_grad_()
        out, w = gst.fusedmm(A, Xg, Yg, Zd.contiguous(), "dot", "softmax", return_edges=True)
        assert out.shape == (40, 2, Zd.shape[2])
        (w * w).sum().backward()
        res.append((w.detach(), Xg.grad, Yg.grad))
    for a, b in zip(*res):
        assert torch.equal(a, b)


@pytest.mark.parametrize("edge", EDGES)
@pytest.mark.parametrize("op", ["dot", "add"])
@pytest.mark.parametrize("weighted", [False, True])
def test_recompute_backward_equals_saved(dev, edge, op, weighted):
    # the backward's recompute pass (D = 0) gives the forward's edge values: the same gradient bits
    # as keeping them (TransformerConv's shape on CUDA: dot, 4 heads of 32, D = F, Y != Z). Without
    # values the saving forward keeps its own pass's edge values; with values both take them from
    # a D = 0 pass.
    M = K = 300
    A, _ = make_graph(11, M, K, 9, 0, "int32", False, dev)
    F, D = (32, 32) if op == "dot" else (1, 1 if dev.type == "cuda" else 24)
    X, Y, Z = inputs(12, M, K, 4, F, D, op, torch.float32, dev)
    v = (torch.rand(A.nnz, generator=torch.Generator().manual_seed(13)) + 0.5).to(dev)
    g = torch.randn((M, 4, D), generator=torch.Generator().manual_seed(14)).to(dev)
    grads = []
    for save in (True, False):
        ts = [t.detach().clone().requires_grad_() for t in (X, Y, Z, v)]
        out = gst.fusedmm(A, ts[0], ts[1], ts[2], op, edge, 0.2, val=ts[3] if weighted else None,
                          save_edges=save)
        out.backward(g)
        grads.append([t.grad for t in ts[:4 if weighted else 3]])
    for a, b, name in zip(*grads, "XYZv"):
        assert torch.equal(a, b), f"d{name} differs between the saving and the recomputing backward"
