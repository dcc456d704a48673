"""gnnsparse.quant.autograd: the quantized training primitives and their backward passes.

Each primitive's forward and gradients are compared with float32 autograd on the same inputs:
int8 stochastic quantization keeps the relative error near 1 % (bound 5 %), int4 near 15 %
(bound 50 %); the backward must use the forward's quantized tensors (checked exactly for linear:
dx = s_d s_w q_d q_w); seeded runs (torch.manual_seed) are bitwise reproducible. Host (SYCL CPU
device) and CUDA.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
from gnnsparse import reference as ref  # noqa: E402
from gnnsparse.quant import autograd as qa  # noqa: E402

from conftest import random_csr, rel, torch_cpu_cuda  # noqa: E402


device = torch_cpu_cuda  # the fixture of conftest, under the name these tests use


BOUND = {8: 0.05, 4: 0.5}


def graph(rng, device, M=300, K=200, deg=6.0, hub=0, weighted=True):
    """(A, A^T with values val[perm], dense A, perm, rows, col) on the device."""
    A = random_csr(rng, M, K, mean_deg=deg, hub=hub, weighted=weighted)
    T = A.T
    perm = torch.from_numpy(np.array(T.perm, np.int64)).to(device)
    dense = torch.from_numpy(A.to_scipy().toarray()).float().to(device)
    rows = torch.from_numpy(ref.edge_rows(A)).to(device)
    col = torch.from_numpy(np.array(A.col, np.int64)).to(device)
    if device.type == "cuda":
        like = torch.zeros(1, device=device)
        A, T = A.to_like(like), T.to_like(like)
    return A, T, dense, perm, rows, col


def leaf(t):
    return t.detach().clone().requires_grad_()


@pytest.mark.parametrize("bits", [8, 4])
def test_linear(device, bits):
    torch.manual_seed(1)
    x, W = torch.randn(300, 64, device=device, requires_grad=True), torch.randn(48, 64, device=device, requires_grad=True)
    y = qa.linear(x, W, bits)
    g = torch.randn_like(y)
    y.backward(g)
    x2, W2 = leaf(x), leaf(W)
    (x2 @ W2.t()).backward(g)
    assert rel(y, x2 @ W2.t()) < BOUND[bits]
    assert rel(x.grad, x2.grad) < BOUND[bits] and rel(W.grad, W2.grad) < BOUND[bits]


def test_linear_backward_reuses_forward_quantization(device):
    """dx is computed from the quantized W of the forward pass: with the gradient's quantization
    redone from the same seed, dx equals s_d s_w (q_d q_w) exactly."""
    torch.manual_seed(3)
    x = torch.randn(40, 32, device=device, requires_grad=True)
    W = torch.randn(16, 32, device=device)
    y = qa.linear(x, W, 8)
    ctx_qw = y.grad_fn.q[1]
    g = torch.randn_like(y)
    state = torch.get_rng_state()
    y.backward(g)
    torch.set_rng_state(state)
    qd = gs.quantize(g.contiguous(), 8, True, qa.next_seed(), check=False)
    acc = qd.int8().cpu().long() @ ctx_qw.int8().cpu().long()
    s = np.float32(qd.scale_value()) * np.float32(ctx_qw.scale_value())
    np.testing.assert_array_equal(x.grad.cpu().numpy(), (acc.numpy().astype(np.float32) * s).astype(np.float32))


@pytest.mark.parametrize("bits", [8, 4])
def test_spmm(device, rng, bits):
    A, T, dense, _, _, _ = graph(rng, device, hub=400)
    torch.manual_seed(2)
    h = torch.randn(200, 16, device=device, requires_grad=True)
    out = qa.spmm(A, T, h, bits)
    g = torch.randn_like(out)
    out.backward(g)
    h2 = leaf(h)
    (dense @ h2).backward(g)
    assert rel(out, dense @ h2) < BOUND[bits] and rel(h.grad, h2.grad) < BOUND[bits]


@pytest.mark.parametrize("bits", [8, 4])
def test_spmm_heads(device, rng, bits):
    A, T, _, perm, rows, col = graph(rng, device)
    H, D = 4, 8
    torch.manual_seed(4)
    a = torch.rand(A.nnz, H, device=device, requires_grad=True)
    z = torch.randn(200, H, D, device=device, requires_grad=True)
    out = qa.spmm_heads(A, T, perm, a, z, bits)
    g = torch.randn_like(out)
    out.backward(g)
    a2, z2 = leaf(a), leaf(z)
    o2 = torch.zeros(300, H, D, device=device).index_add(0, rows, a2[:, :, None] * z2[col])
    o2.backward(g)
    assert rel(out, o2) < BOUND[bits]
    assert rel(a.grad, a2.grad) < BOUND[bits] and rel(z.grad, z2.grad) < BOUND[bits]


@pytest.mark.parametrize("bits", [8, 4])
def test_sddmm_add(device, rng, bits):
    A, T, _, _, rows, col = graph(rng, device)
    torch.manual_seed(5)
    d = torch.randn(300, 4, device=device, requires_grad=True)
    s = torch.randn(200, 4, device=device, requires_grad=True)
    e = qa.sddmm_add(A, s, d, bits)
    g = torch.randn_like(e)
    e.backward(g)
    d2, s2 = leaf(d), leaf(s)
    e2 = d2[rows] + s2[col]
    e2.backward(g)
    assert rel(e, e2) < BOUND[bits]
    assert rel(d.grad, d2.grad) < BOUND[bits] and rel(s.grad, s2.grad) < BOUND[bits]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_leaky_edge_softmax_equals_the_chain(device, rng, dtype):
    """The quantized GAT's in-place leaky_relu -> edge softmax: bitwise the values and the gradient of
    gnnsparse.torch's edge_softmax(leaky_relu(e)) (empty rows, a hub row, 4 heads), e overwritten."""
    from gnnsparse.torch import functional as gf
    from gnnsparse.torch.graph import graph_tensors

    A = graph(rng, device, hub=700)[0]
    e0 = torch.randn(A.nnz, 4, generator=torch.Generator().manual_seed(3), dtype=dtype).to(device)
    g = graph_tensors(A, e0)
    e1, e2 = leaf(e0), leaf(e0)
    want = gf.edge_softmax(g, torch.nn.functional.leaky_relu(e1, 0.3))
    mine = e2 * 1  # a fresh tensor, which the function overwrites
    got = qa.leaky_edge_softmax(g, mine, 0.3)
    assert got.data_ptr() == mine.data_ptr() and torch.equal(got, want)
    w = torch.randn_like(want)
    (want * w).sum().backward()
    (got * w).sum().backward()
    assert torch.equal(e1.grad, e2.grad)


@pytest.mark.parametrize("mode", ["recompute", "save"])
def test_gat_attend_equals_the_chain(device, rng, monkeypatch, mode):
    """gat_attend (alpha from one FusedMM pass, formed again in the backward; nothing per edge saved)
    against the chain the quantized GAT runs with attention dropout: sddmm_add -> leaky_edge_softmax
    -> gat_aggregate, with the same seeds (the same quantized logits, inputs and gradients). alpha
    differs only by float32 rounding (one fused pass instead of the in-place chain), so the output
    agrees to rounding; the gradients pass through stochastically rounded int8 tensors (q(dz),
    q(d logits)), where a rounding difference can flip an element by one step (3e-3 of W's
    gradient, seen on 1 of 40 seeds), so they are held to an int8-level bound. A hub row, an empty
    row, 3 heads. In "save" mode (gnnsparse.torch.set_fusedmm_backward) alpha is kept instead: the
    same bits as recomputing it."""
    from gnnsparse.torch import _library as L
    from gnnsparse.torch.graph import graph_tensors

    monkeypatch.setitem(L._settings, "fusedmm_backward", mode)

    A, T, _, perm, _, _ = graph(rng, device, M=200, K=200, hub=500, weighted=False)
    H, C, F = 3, 8, 24
    g = graph_tensors(A, torch.zeros(1, device=device))
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(200, F, generator=gen).to(device)
    W0, ad0, as0 = (torch.randn(*s, generator=gen).to(device) for s in ((H * C, F), (200, H), (200, H)))
    gout = torch.randn(200, H, C, generator=gen).to(device)

    def run(new):
        W, ad, as_ = leaf(W0), leaf(ad0), leaf(as0)
        torch.manual_seed(5)
        scales = qa.LayerScales()
        saved = []

        def pack(t):
            saved.append(tuple(t.shape))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            token, handle = qa.gat_project(x, W, H, 8, scales)
            if new:
                out = qa.gat_attend(g, A, T, perm, ad, as_, token, handle, 8, 8, 0.2, scales)
            else:
                alpha = qa.leaky_edge_softmax(g, qa.sddmm_add(A, as_, ad, 8), 0.2)
                out = qa.gat_aggregate(A, T, perm, alpha, token, handle, 8, scales)
        out.backward(gout)
        return out.detach(), W.grad, ad.grad, as_.grad, saved

    *new, saved_new = run(True)
    *old, saved_old = run(False)
    assert any(s[:1] == (A.nnz,) for s in saved_old)  # the chain keeps alpha and the logits' sign
    assert any(s[:1] == (A.nnz,) for s in saved_new) == (mode == "save"), saved_new
    assert rel(new[0], old[0]) < 1e-5
    for a, b in zip(new[1:], old[1:]):
        assert rel(a, b) < 2e-2
    if mode == "save":  # the kept alpha is the recomputed one, bit for bit: the same gradients
        monkeypatch.setitem(L._settings, "fusedmm_backward", "recompute")
        for a, b in zip(new[1:], run(True)[1:4]):
            assert torch.equal(a, b)


def test_seeded_runs_are_identical(device, rng):
    A, T, _, _, _, _ = graph(rng, device)

    def run():
        torch.manual_seed(11)
        x = torch.randn(200, 32, device=device, requires_grad=True)
        W = torch.randn(16, 32, device=device, requires_grad=True)
        out = qa.spmm(A, T, qa.linear(x, W))
        out.square().sum().backward()
        return out.detach().cpu(), x.grad.cpu(), W.grad.cpu()

    for a, b in zip(run(), run()):
        assert torch.equal(a, b)


# ---------------------------------------------------------------- the fused layers' primitives
def _dense_gcn(dense, x, W):
    return dense @ (x @ W.t())


def test_gcn_layer_over_steps(device, rng):
    """gcn_layer against float32 autograd over several steps: from the second step on, q(h) is
    written by the GEMM's scale pass and q(dh) by the SpMM's epilogue with delayed scales; inputs
    and gradients grow by 2 % a step (the largest elements saturate, by about that much: the
    statistics count it) and the error stays at the int8 level."""
    A, T, dense, _, _, _ = graph(rng, device, M=200, K=200, hub=300)
    torch.manual_seed(7)
    scales = qa.LayerScales(decay=0.0)
    x0 = torch.randn(200, 24, device=device)
    g0 = torch.randn(200, 16, device=device)
    W = torch.randn(16, 24, device=device, requires_grad=True)
    for step in range(4):
        x = (x0 * 1.02 ** step).requires_grad_()
        out = qa.gcn_layer(A, T, x, W, 8, scales)
        g = g0 * 1.02 ** step + 0.01 * torch.randn_like(out)
        W.grad = None
        out.backward(g)
        x2, W2 = leaf(x), leaf(W)
        ref = _dense_gcn(dense, x2, W2)
        ref.backward(g)
        assert rel(out, ref) < BOUND[8], step
        assert rel(x.grad, x2.grad) < BOUND[8] and rel(W.grad, W2.grad) < BOUND[8], step
    st = scales.statistics()
    assert st["h"]["steps"] == 4 and st["dh"]["steps"] == 4
    # h grows by 1.02 a step, times the noise of its largest element: q(x) and q(W) are rounded
    # stochastically with a fresh seed every step (about 1 % either way; 1.0307 with the CUDA RNG's
    # inputs on the H200, 2026-12-02)
    assert st["h"]["saturated_steps"] == 3 and 1.0 < st["h"]["max_growth"] < 1.05
    assert st["dh"]["saturated_steps"] >= 1 and st["dh"]["max_growth"] < 1.06


def _count_quantize(monkeypatch, like):
    """Counts the standalone quantize launches of like's backend."""
    from gnnsparse._backends import backend_for

    b = backend_for(like if device_kind(like) == "cuda" else like.numpy())
    calls = []
    orig = b.quantize

    def counted(X, rows, C, *a, **k):
        calls.append((rows, C))
        return orig(X, rows, C, *a, **k)

    monkeypatch.setattr(b, "quantize", counted)
    return calls


def device_kind(t):
    return "cuda" if t.is_cuda else "cpu"


@pytest.mark.parametrize("kind", ["gcn", "gat"])
def test_no_quantize_pass_between_products(device, rng, monkeypatch, kind):
    """From the second step on, the only standalone quantize launches of a quantized layer are
    those of values no gnnsparse producer makes: the input x and the weight (forward), the
    incoming gradient (backward), and GAT's per-node attention logits (N x heads, from a float32
    GEMV) and their gradient. The projection q(x W^T) comes from the GEMM's scale pass and the
    gradient the weight's GEMM reads from the SpMM's epilogue."""
    from gnnsparse.quant import nn as qnn

    torch.manual_seed(3)
    N, F, H = 300, 32, 4
    ei = torch.randint(0, N, (2, 2000), device=device)
    x = torch.randn(N, F, device=device)
    layer = (qnn.GCNConv(F, 16, bits=8) if kind == "gcn" else qnn.GATConv(F, 4, heads=H, bits=8)).to(device)
    for _ in range(2):  # the first step calibrates the delayed scales
        layer(x, ei).square().sum().backward()
    calls = _count_quantize(monkeypatch, x)
    y = layer(x, ei)
    fwd = list(calls)
    y.square().sum().backward()
    bwd = calls[len(fwd):]
    HC = 16
    if kind == "gcn":
        assert sorted(fwd) == sorted([(N, F), (16, F)]), fwd  # x, W
        assert bwd == [(N, HC)], bwd                             # dout
    else:
        assert sorted(fwd) == sorted([(N, F), (HC, F), (N, H), (N, H)]), fwd  # x, W, a_src, a_dst
        E = int((ei[0] != ei[1]).sum()) + N  # the edges with one self loop per node
        assert sorted(bwd) == sorted([(N, HC), (E, H)]), bwd  # dout, d(logits) per edge
    st = layer._scales.statistics()
    assert all(v["steps"] == 3 for v in st.values()) and len(st) == 2


def _saved(module, x, ei):
    """{storage: (dtype, bytes, shape)} of what one forward saves for its backward."""
    recs = []

    def pack(t):
        recs.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = module(x, ei)
    y.square().sum().backward()
    out = {}
    for t in recs:
        out[t.untyped_storage().data_ptr()] = (t.dtype, t.untyped_storage().nbytes(), tuple(t.shape))
    return out


@pytest.mark.parametrize("kind", ["gcn", "gat"])
def test_saved_tensors_stay_quantized(device, kind):
    """What a quantized layer keeps for its backward (torch.autograd.graph.saved_tensors_hooks):
    node-feature tensors only as int8 (no float32 copy alongside); GAT nothing per edge (its
    backward forms the attention coefficients again from the per-node logits it keeps). Compared
    with the float32 layer of the same parameters."""
    from gnnsparse.quant import nn as qnn
    from gnnsparse.torch import nn as tnn

    torch.manual_seed(5)
    N, F, HC, H = 2000, 64, 64, 4
    ei = torch.randint(0, N, (2, 20000), device=device)
    x = torch.randn(N, F, device=device)
    if kind == "gcn":
        q, f = qnn.GCNConv(F, HC, bits=8).to(device), tnn.GCNConv(F, HC).to(device)
    else:
        q, f = qnn.GATConv(F, HC // H, heads=H, bits=8).to(device), tnn.GATConv(F, HC // H, heads=H).to(device)
    f.load_state_dict(q.state_dict())
    for m in (q, f):
        _saved(m, x, ei)  # calibrate / warm up
    sq, sf = _saved(q, x, ei), _saved(f, x, ei)
    node_float = lambda s: sum(b for dt, b, shp in s.values() if dt.is_floating_point and shp[:1] == (N,))  # noqa: E731
    assert node_float(sf) >= N * F * 4  # the float32 layer keeps float32 node features
    assert node_float(sq) == 0, sq      # the quantized one none
    q8 = sum(b for dt, b, shp in sq.values() if dt == torch.int8)
    assert q8 >= N * F  # q(x) (and GAT's q(z))
    if kind == "gat":
        E = int((ei[0] != ei[1]).sum()) + N  # with one self loop per node
        per_edge = [v for v in sq.values() if v[2][:1] == (E,)]
        assert per_edge == [], per_edge  # alpha is formed again in the backward (gat_attend)
    total = lambda s: sum(b for dt, b, shp in s.values() if dt.is_floating_point or dt in (torch.int8, torch.bool))  # noqa: E731
    assert total(sq) < (0.3 if kind == "gcn" else 0.8) * total(sf), (total(sq), total(sf))


def test_fused_layers_reproducible(device):
    """Three seeded steps of the fused GCN and GAT layers (delayed scales after the first) are
    bitwise equal run to run."""
    from gnnsparse.quant import nn as qnn

    ei = torch.randint(0, 200, (2, 1500), generator=torch.Generator().manual_seed(3)).to(device)
    x = torch.randn(200, 32, generator=torch.Generator().manual_seed(4)).to(device)

    def run(Layer, **kw):
        torch.manual_seed(9)
        layer = Layer(32, 8, bits=8, **kw).to(device)
        opt = torch.optim.SGD(layer.parameters(), lr=0.1)
        outs = []
        for _ in range(3):
            opt.zero_grad()
            y = layer(x, ei)
            y.square().mean().backward()
            opt.step()
            outs.append(y.detach().cpu())
        return outs + [p.detach().cpu() for p in layer.parameters()]

    for Layer, kw in ((qnn.GCNConv, {}), (qnn.GATConv, dict(heads=2))):
        for a, b in zip(run(Layer, **kw), run(Layer, **kw)):
            assert torch.equal(a, b)
