"""What quantized training keeps in memory (issue 21: peak memory of `train --quant`).

The quantized GCN model runs both layers over gnnsparse.quant.nn.gcn_operators (A_norm and its
transpose as two CSRs, nothing else of the graph): the same arrays bit for bit as the float layer's
normalized GraphTensors, so the layers give the same results over a CSR as over an edge_index. ReLU
and dropout save one boolean mask. The train command gives every run its own graph object (no
structures left over from the previous run) and keeps no edge_index or edge_perm on the device when
PyG is not run. Memory itself is accounted for with saved_tensors_hooks (device independent); the
GPU peak is measured by `gnnsparse train --quant --compare fp32 --size products`.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gnnsparse.torch")

import gnnsparse as gs  # noqa: E402
from gnnsparse.quant import autograd as qa  # noqa: E402
from gnnsparse.quant import nn as qnn  # noqa: E402
from gnnsparse.torch import functional as gf  # noqa: E402
from gnnsparse.torch import nn as tnn  # noqa: E402
from gnnsparse.torch.graph import graph_tensors  # noqa: E402

from conftest import sycl_or_skip, torch_cpu_cuda  # noqa: E402

device = torch_cpu_cuda


def _graph(n, e, seed, device, loops=0, empty=0):
    """A random edge_index with duplicates, `loops` self loops (some repeated) and `empty` nodes
    without edges."""
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(empty, n, (2, e), generator=g)
    if loops:
        v = torch.randint(empty, n, (loops,), generator=g)
        v = torch.cat([v, v[: loops // 3]])
        ei = torch.cat([ei, torch.stack([v, v])], 1)
    return ei.to(device)


def _operators_ref(csr, like):
    ref = gf.gcn_norm(graph_tensors(csr, like), None, dtype=torch.float32, like=like.device)
    return ref.rowptr, ref.col, ref.val, ref.t_rowptr, ref.t_col, ref.val.index_select(0, ref.t_perm.long())


def _arrays(ops):
    return [torch.as_tensor(np.asarray(a)) if not isinstance(a, torch.Tensor) else a
            for a in (ops.A.rowptr, ops.A.col, ops.A.val, ops.AT.rowptr, ops.AT.col, ops.AT.val)]


@pytest.mark.parametrize("loops,empty", [(0, 0), (40, 0), (25, 7)])
def test_gcn_operators_equal_gcn_norm(device, loops, empty):
    """gcn_operators = gnnsparse.torch's gcn_norm graph (self loops, normalization, transpose) bit for
    bit: no loops, single and repeated loops, empty rows, duplicate edges."""
    n = 301
    ei = _graph(n, 2500, 1 + loops, device, loops, empty)
    x = torch.zeros(n, 1, device=device)
    A = gs.CSR.from_edge_index(ei, n)
    ops = qnn.gcn_operators(A, x)
    assert qnn.gcn_operators(A, x) is ops  # kept on the CSR
    for got, want in zip(_arrays(ops), _operators_ref(gs.CSR.from_edge_index(ei, n), x)):
        got = got.to(want.device)
        assert got.dtype == want.dtype and torch.equal(got, want)
    assert ops.nbytes == sum(int(a.nbytes) for a in _arrays(ops))


def test_gcn_operators_checks():
    A = gs.CSR(np.array([0, 1, 1]), np.array([1]), np.array([1.0], np.float32), (2, 2))
    with pytest.raises(ValueError, match="without values"):
        qnn.gcn_operators(A, torch.zeros(2, 1))


def test_gcn_layer_over_csr_equals_edge_index(device):
    """The quantized GCNConv over a CSR (gcn_operators) gives the bits it gives over the edge_index
    (GraphTensors), forward and gradients; bits=None over a CSR equals the float layer exactly."""
    n = 257
    ei = _graph(n, 2000, 5, device)
    A = gs.CSR.from_edge_index(ei, n)
    x = torch.randn(n, 24, generator=torch.Generator().manual_seed(2)).to(device)
    for bits in (8, 4, None):
        outs = []
        for graph in (ei, A):
            torch.manual_seed(3)
            layer = qnn.GCNConv(24, 16, cached=True, bits=bits).to(device)
            xx = x.clone().requires_grad_()
            torch.manual_seed(4)
            y = layer(xx, graph)
            y.square().sum().backward()
            outs.append((y.detach(), xx.grad, layer.lin.weight.grad, layer.bias.grad))
        for a, b in zip(*outs):
            assert torch.equal(a, b), bits
    torch.manual_seed(3)
    f = tnn.GCNConv(24, 16, cached=True).to(device)
    q = qnn.GCNConv(24, 16, cached=True, bits=None).to(device)
    q.load_state_dict(f.state_dict())
    assert torch.equal(q(x, A), f(x, ei))


def test_relu_dropout(device):
    """relu_dropout = dropout(relu(h)) with the mask it drew (recovered from the output's zeros),
    gradient g * mask / (1 - p), one mask saved as bits; relu outside training."""
    h = torch.randn(300, 17, generator=torch.Generator().manual_seed(0)).to(device).requires_grad_()
    torch.manual_seed(1)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = qa.relu_dropout(h, 0.5, True)
    assert len(saved) == 1 and saved[0].dtype == torch.uint8 and saved[0].shape == (((h.numel() + 31) // 32) * 4,)
    keep = y != 0
    assert torch.equal(y, torch.relu(h.detach()) * keep * 2.0)
    assert 0.3 < float(keep.float().mean() / (h > 0).float().mean()) < 0.7
    g = torch.randn_like(h)
    y.backward(g)
    assert torch.equal(h.grad, g * keep * 2.0)
    torch.manual_seed(1)
    assert torch.equal(qa.relu_dropout(h, 0.5, True), y)  # seeded
    assert torch.equal(qa.relu_dropout(h, 0.5, False), torch.relu(h))
    with pytest.raises(ValueError, match="dropout"):
        qa.relu_dropout(h, 1.0)


def _saved_bytes(net, x, graph):
    """{(dtype, shape): bytes} of what one training forward saves for the backward."""
    seen = {}

    def pack(t):
        seen[t.untyped_storage().data_ptr()] = (str(t.dtype)[6:], tuple(t.shape), t.untyped_storage().nbytes())
        return t

    net.train()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = net(x, graph)
    del out
    return list(seen.values())


def test_quant_model_saves_one_float_activation():
    """The quantized GCN of `train --quant` saves for the backward int8 q(x), one boolean mask and
    the float32 second layer's input (Tango: that layer stays float32): at most one float32 tensor
    of n x hidden, against the float model's three (GEMM output kept by the SpMM, ReLU output,
    dropout output) besides x; no graph array is saved (the operators are the layers')."""
    sycl_or_skip()
    from gnnsparse.train.models import Net

    n, hidden = 500, 32
    ei = _graph(n, 4000, 9, "cpu")
    A = gs.CSR.from_edge_index(ei, n)
    x = torch.randn(n, 20)
    torch.manual_seed(0)
    f = Net("gcn", "gnnsparse", 20, hidden, 5)
    q = Net("gcn", "gnnsparse", 20, hidden, 5, quant=8)
    q.load_state_dict(f.state_dict())
    node = n * hidden * 4
    saved_q = _saved_bytes(q, x, A)
    saved_f = _saved_bytes(f, x, A)
    big_q = [s for s in saved_q if s[0] == "float32" and s[2] >= node]
    big_f = [s for s in saved_f if s[0] == "float32" and s[2] >= node]
    assert len(big_q) == 1 and len(big_f) >= 3, (saved_q, saved_f)
    assert not any(s[0] in ("int32", "int64") and s[2] >= 4 * A.nnz for s in saved_q)
    assert sum(s[2] for s in saved_q) < 0.5 * sum(s[2] for s in saved_f)


def test_train_runs_leave_no_structures(capsys):
    """A run works on its own graph object (fresh_graph): the prepared CSR keeps nothing derived
    (GraphTensors, operators) after a run; without PyG no edge_index or edge_perm is prepared."""
    sycl_or_skip()
    from gnnsparse.train import data as tdata
    from gnnsparse.train.loop import fresh_graph, initial_state, prepare, run_once

    nd = tdata.quick(0)
    t = prepare(nd, torch.device("cpu"), "gcn", edge_index=False)
    assert t["edge_index"] is None and getattr(t["csr"], "edge_perm", None) is None
    init = initial_state("gcn", t, 16, 4, 0, 0.5, None)
    for quant in (None, "auto"):
        tr = fresh_graph(t)
        r = run_once(tr, "gcn", "gnnsparse", epochs=2, hidden=16, init=init, quant=quant)
        assert len(r.losses) == 2 and tr["csr"]._derived
        assert not t["csr"]._derived
    assert r.quant_errors and r.quant_bits in (4, 8, None)
    full = prepare(nd, torch.device("cpu"), "gcn")
    assert full["edge_index"] is not None and full["csr"].edge_perm is not None


@pytest.mark.parametrize("bits", [None, 8])
def test_gat_backward_in_edge_chunks(device, bits, monkeypatch):
    """GAT's score gradient in edge chunks (the float layer's in place, the quantized layer's
    backward without an (nnz, heads) temporary) gives the same bits whatever the chunk, and the float
    layer's the bits of the generic path (softmax gradient, then torch.where on the scores' sign, as
    the custom op runs it): duplicates, self loops, empty rows, 4 heads."""
    from gnnsparse.torch import _library as L

    n = 211
    ei = _graph(n, 3000, 11, device, loops=30, empty=5)
    x = torch.randn(n, 20, generator=torch.Generator().manual_seed(6)).to(device)

    def run(chunk, eager="function"):
        monkeypatch.setattr(L, "_EDGE_CHUNK", chunk)
        monkeypatch.setattr(qa, "_EDGE_CHUNK", chunk)
        monkeypatch.setitem(L._settings, "eager", eager)
        torch.manual_seed(3)
        layer = (tnn.GATConv(20, 8, heads=4) if bits is None else qnn.GATConv(20, 8, heads=4, bits=bits)).to(device)
        xx = x.clone().requires_grad_()
        torch.manual_seed(4)
        y = layer(xx, ei)
        y.square().sum().backward()
        return [y.detach(), xx.grad] + [p.grad for p in layer.parameters()]

    want = run(1 << 22)
    assert all(torch.isfinite(t).all() for t in want) and want[1].abs().sum() > 0
    for got in [run(7)] + ([run(1 << 22, "custom_op")] if bits is None else []):
        for a, b in zip(got, want):
            assert torch.equal(a, b)


def test_elu_dropout(device, monkeypatch):
    """elu_dropout = native_dropout(elu(h)) (F.dropout's kernel: the same draws and bits forward),
    saving its output and one mask as bits (no elu output besides); its gradient within one
    rounding of autograd's through elu and native_dropout, also in row blocks; elu outside
    training."""
    h = torch.randn(300, 17, generator=torch.Generator().manual_seed(0)).to(device).requires_grad_()
    g = torch.randn(300, 17, generator=torch.Generator().manual_seed(2)).to(device)
    torch.manual_seed(1)
    ref = torch.ops.aten.native_dropout(torch.nn.functional.elu(h), 0.4, True)[0]
    ref.backward(g)
    want, h.grad = h.grad, None
    for chunk in (1 << 16, 7):
        monkeypatch.setattr(qa, "_ACT_CHUNK", chunk)
        torch.manual_seed(1)
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
            y = qa.elu_dropout(h, 0.4, True)
        assert torch.equal(y, ref)
        assert sorted(str(t.dtype) for t in saved) == ["torch.float32", "torch.uint8"]
        assert saved[[t.dtype for t in saved].index(torch.float32)].data_ptr() == y.data_ptr()
        y.backward(g)
        torch.testing.assert_close(h.grad, want, rtol=1e-6, atol=1e-7)
        assert torch.equal(h.grad == 0, want == 0)  # dropped elements: exactly zero
        h.grad = None
    assert torch.equal(qa.elu_dropout(h, 0.4, False), torch.nn.functional.elu(h))
    with pytest.raises(ValueError, match="dropout"):
        qa.elu_dropout(h, 1.0)


def test_elu_dropout_in_place(device):
    """elu_dropout_ writes dropout(elu(h)) into h (the mask drawn by bernoulli: recovered from the
    output's zeros), saves h and the mask as bits, and its gradient is elu_dropout's with that
    mask; a leaf, a view or eval mode are handled; a backward that saved h raises."""
    h0 = torch.randn(300, 17, generator=torch.Generator().manual_seed(0)).to(device)
    g = torch.randn(300, 17, generator=torch.Generator().manual_seed(2)).to(device)
    w = torch.ones(1, device=device, requires_grad=True)
    h = h0 * w  # not a leaf; the product saves w, not h
    ptr = h.data_ptr()
    torch.manual_seed(1)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = qa.elu_dropout_(h, 0.4, True)
    assert y is h and y.data_ptr() == ptr
    keep = y != 0
    assert 0.5 < keep.float().mean().item() < 0.7
    want_y = torch.nn.functional.elu(h0) * keep / 0.6
    torch.testing.assert_close(y.detach(), want_y, rtol=1e-6, atol=1e-7)
    assert sorted(str(t.dtype) for t in saved if t.numel() > 1) == ["torch.float32", "torch.uint8"]
    y.backward(g)
    want_g = (g * keep / 0.6 * torch.where(h0 > 0, 1.0, torch.exp(h0)) * h0).sum()  # d h / d w = h0
    torch.testing.assert_close(w.grad[0], want_g, rtol=1e-5, atol=1e-5)
    torch.manual_seed(1)  # seeded: the same mask again
    assert torch.equal(qa.elu_dropout_(h0.clone(), 0.4, True) != 0, keep)
    # a leaf that requires grad and a view take the out-of-place path; eval: elu in place
    leaf = h0.clone().requires_grad_()
    assert qa.elu_dropout_(leaf, 0.4, True) is not leaf
    base = h0.clone()
    assert qa.elu_dropout_(base[:, :5], 0.4, True).data_ptr() != base.data_ptr()
    e = h0.clone()
    assert qa.elu_dropout_(e, 0.4, False) is e and torch.equal(e, torch.nn.functional.elu(h0))
    # h saved by another backward: autograd raises instead of a wrong gradient
    v = h0.clone().requires_grad_()
    s = v * 2
    t = s * s  # saves s
    qa.elu_dropout_(s, 0.4, True)
    with pytest.raises(RuntimeError, match="inplace"):
        t.sum().backward()
    with pytest.raises(ValueError, match="dropout"):
        qa.elu_dropout_(h0.clone(), 1.0)


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 63, 64, 65, 1000])
@pytest.mark.parametrize("chunk", [8, 16, 1 << 23])
def test_mask_bits_round_trip(device, monkeypatch, n, chunk):
    """_pack_mask / _unpack_mask: any length, blocks of any size, any slice from a byte boundary."""
    monkeypatch.setattr(qa, "_ACT_CHUNK", chunk)
    keep = torch.rand(n, generator=torch.Generator().manual_seed(n)).lt(0.5).to(device)
    bits = qa._pack_mask(keep)
    assert bits.dtype == torch.uint8 and bits.shape == (((n + 31) // 32) * 4,)  # whole 32-bit words
    assert np.array_equal(bits[:(n + 7) // 8].cpu().numpy(), np.packbits(keep.cpu().numpy(), bitorder="little"))
    assert not bits[(n + 7) // 8:].any()
    assert torch.equal(qa._unpack_mask(bits, 0, n), keep)
    # a mask that starts inside a word of its storage, and one of two dimensions
    big = torch.cat([keep.new_ones(3), keep, keep.new_zeros(5)])
    assert torch.equal(qa._pack_mask(big[3:3 + n]), bits)
    if n % 8 == 0 and n:
        assert torch.equal(qa._pack_mask(keep.view(-1, 4)), bits)
    for k0 in range(0, n, 8):
        k1 = min(n, k0 + 13)
        assert torch.equal(qa._unpack_mask(bits, k0, k1), keep[k0:k1])
    if n:  # element k in bit k % 8 of byte k // 8
        assert int(bits[0]) == sum(1 << k for k in range(min(8, n)) if bool(keep[k]))


def test_elu_dropout_twice_differentiable_and_any_shape(device):
    """create_graph=True keeps elu's second derivative (as native_dropout(elu(h)) does, with the same
    mask); 0-d and 3-d inputs work."""
    h = (torch.randn(40, 6, generator=torch.Generator().manual_seed(3)) * 2).to(device).requires_grad_()
    v = torch.randn(40, 6, generator=torch.Generator().manual_seed(4)).to(device)
    got = []
    for f in (lambda t: qa.elu_dropout(t, 0.3, True),
              lambda t: torch.ops.aten.native_dropout(torch.nn.functional.elu(t), 0.3, True)[0]):
        torch.manual_seed(5)
        y = f(h)
        (dh,) = torch.autograd.grad(y, h, v, create_graph=True)
        (d2,) = torch.autograd.grad((dh * v).sum(), h)
        got.append((y.detach(), dh.detach(), d2))
    assert torch.equal(got[0][0], got[1][0])
    assert got[1][2].abs().max() > 0  # elu'' is there to lose
    for a, b in zip(got[0][1:], got[1][1:]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for shape in ((), (3, 4, 5)):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(6)).to(device).requires_grad_()
        torch.manual_seed(7)
        y = qa.elu_dropout(x, 0.5, True)
        y.sum().backward()
        keep = y != 0
        want = torch.where(x.detach() > 0, 1.0, torch.exp(x.detach())) * keep * 2.0
        torch.testing.assert_close(x.grad, want, rtol=1e-6, atol=1e-7)


def test_gat_incoming_gradient_quantized_before_backward(device, monkeypatch):
    """The quantized GAT attention's incoming gradient is quantized by a pre-hook on its autograd
    node, so its backward gets a zero of one element's storage (the float32 gradient is freed
    before the edge work): the same bits as quantizing it in the backward (seeds drawn in the same order)."""
    n = 157
    ei = _graph(n, 1800, 12, device, loops=20, empty=3)
    x = torch.randn(n, 20, generator=torch.Generator().manual_seed(6)).to(device)
    seen = []
    incoming = qa._incoming

    def spy(handle, dout, bits):
        seen.append(dout.untyped_storage().nbytes())
        return incoming(handle, dout, bits)

    monkeypatch.setattr(qa, "_incoming", spy)

    def run():
        torch.manual_seed(3)
        layer = qnn.GATConv(20, 8, heads=4, bits=8).to(device)
        xx = x.clone().requires_grad_()
        torch.manual_seed(4)
        y = layer(xx, ei)
        (y.square().sum() + y.sum()).backward()
        return [y.detach(), xx.grad] + [p.grad for p in layer.parameters()]

    got = run()
    assert seen == [4]
    monkeypatch.setattr(qa, "_quantize_incoming", lambda handle, bits: (lambda grads: None))
    want = run()
    assert seen == [4, n * 4 * 8 * 4]
    assert all(torch.isfinite(t).all() for t in want) and want[1].abs().sum() > 0
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_gat_incoming_gradient_after_a_failed_backward(device, monkeypatch):
    """A backward that raises after the pre-hook quantized the incoming gradient leaves nothing
    behind: a later backward of the same graph (retain_graph) with another gradient uses its own,
    and gives what a run without the failure gives."""
    n = 97
    ei = _graph(n, 900, 14, device, loops=10)
    x = torch.randn(n, 12, generator=torch.Generator().manual_seed(6)).to(device)
    load = qa._load_q

    def run(fail):
        torch.manual_seed(3)
        layer = qnn.GATConv(12, 4, heads=2, bits=8).to(device)
        xx = x.clone().requires_grad_()
        torch.manual_seed(4)
        y = layer(xx, ei)
        torch.manual_seed(8)
        y.sum().backward(retain_graph=True)  # calibrates the delayed scales
        if fail:
            def failing(ctx):
                raise RuntimeError("injected")

            monkeypatch.setattr(qa, "_load_q", failing)
            with pytest.raises(RuntimeError, match="injected"):
                (5 * y.sum()).backward(retain_graph=True)
            monkeypatch.setattr(qa, "_load_q", load)
        xx.grad = None
        torch.manual_seed(9)
        (3 * y.sum()).backward()
        return xx.grad

    want = run(False)
    assert want.abs().sum() > 0
    assert torch.equal(run(True), want)


def test_delayed_spmm_calibrates_without_float32_output(device, monkeypatch):
    """The first output of a DelayedScale from the quantized SpMM is calibrated by a probe pass
    (no float32 Y, no quantize pass): the bits of quantize(Y) as before, and the second output uses
    Y's scale; the statistics count the caller's steps only."""
    from gnnsparse.quant import ops as qops

    n = 203
    A = gs.CSR.from_edge_index(_graph(n, 2500, 5, device, empty=4), n)
    X = torch.randn(n, 24, generator=torch.Generator().manual_seed(8)).to(device)
    QX = gs.quantize(X, 8, seed=3)
    Y = gs.quant.spmm(A, QX)  # float32, for the reference
    want = gs.quantize(Y, 8, seed=11)
    monkeypatch.setattr(qops, "quantize", lambda *a, **k: pytest.fail("quantize pass on the calibrating call"))
    st = gs.quant.DelayedScale(8)
    Q = gs.quant.spmm(A, QX, out=st, seed=11)
    assert torch.equal(Q.data, want.data) and torch.equal(Q.scale, want.scale)
    assert st.steps == 1 and st.statistics()["saturated_steps"] == 0
    Q2 = gs.quant.spmm(A, QX, out=st, seed=11)
    assert torch.equal(Q2.data, want.data) and torch.equal(Q2.scale, want.scale)
    assert st.steps == 2 and st.statistics()["saturated_steps"] == 0


@pytest.mark.parametrize("heads", [1, 4])
def test_gat_backward_by_softmax_kernels(device, heads, monkeypatch):
    """The quantized GAT attention's backward by gnnsparse._gat_softmax (row statistics, the dz
    weights in A^T's order, the score gradient in place; on the CPU their torch form) against the
    generic path (alpha by FusedMM, torch ops in edge chunks): gradients within float32 rounding
    (alpha's exp is computed by other code), the forward untouched; duplicates, self loops, empty
    rows, a hub row."""
    n = 301
    ei = _graph(n, 2500, 13, device, loops=25, empty=4)
    hub = torch.stack([torch.randint(4, n, (1300,), generator=torch.Generator().manual_seed(1)),
                       torch.full((1300,), 7)]).to(device)
    ei = torch.cat([ei, hub], 1)
    x = torch.randn(n, 20, generator=torch.Generator().manual_seed(6)).to(device)

    def run(mode):
        monkeypatch.setattr(qa, "_SOFTMAX_KERNELS", mode)
        torch.manual_seed(3)
        layer = qnn.GATConv(20, 8, heads=heads, bits=8).to(device)
        xx = x.clone().requires_grad_()
        torch.manual_seed(4)
        y = layer(xx, ei)
        (y.square().sum() + y.sum()).backward()
        return [y.detach(), xx.grad] + [p.grad for p in layer.parameters()]

    want = run("never")
    got = run("always")
    assert torch.equal(got[0], want[0])
    for a, b in zip(got[1:], want[1:]):
        assert torch.isfinite(a).all()
        assert (a - b).abs().max() <= 1e-4 * b.abs().max()
    assert torch.equal(run("always")[1], got[1])  # deterministic
