"""gnnsparse.torch.nn.TransformerConv and GATv2Conv against small dense pure-torch versions (always)
and against torch_geometric's layers given the same state_dict (where PyG is installed): outputs,
attention weights and every gradient in float64, on graphs with duplicate edges, self loops and
nodes without in-edges, on CPU and CUDA."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
from conftest import torch_device_params  # noqa: E402
import gnnsparse.torch as gst  # noqa: E402
from gnnsparse.torch import nn as gnn  # noqa: E402

D = torch.float64
N, E, F_IN, F_DST, N_DST, DE = 24, 110, 6, 5, 17, 3


@pytest.fixture(params=torch_device_params())
def dev(request):
    if request.param == "cpu":
        from conftest import sycl_or_skip

        sycl_or_skip()
    return torch.device(request.param)


@pytest.fixture
def graph(dev):
    """24 nodes, a duplicate edge, a node with two self loops, a node without in-edges (23); edge
    features (E, 3)."""
    g = torch.Generator().manual_seed(5)
    src = torch.randint(0, N, (E,), generator=g)
    dst = torch.randint(0, N - 1, (E,), generator=g)
    src[:3], dst[:3] = torch.tensor([5, 5, 7]), torch.tensor([6, 6, 7])  # duplicate 5 -> 6, loop 7
    src[3], dst[3] = 7, 7  # a second loop at 7
    x = torch.randn(N, F_IN, generator=g, dtype=D)
    ea = torch.randn(E, DE, generator=g, dtype=D)
    return torch.stack([src, dst]).to(dev), x.to(dev), ea.to(dev)


@pytest.fixture
def bigraph(dev):
    """24 sources (6 features) -> 17 targets (5 features); target 16 has no in-edges; duplicates and
    edges i -> i (which GATv2 treats as loops)."""
    g = torch.Generator().manual_seed(9)
    src = torch.randint(0, N, (E,), generator=g)
    dst = torch.randint(0, N_DST - 1, (E,), generator=g)
    src[:4], dst[:4] = torch.tensor([3, 3, 4, 4]), torch.tensor([2, 2, 4, 4])
    xs = torch.randn(N, F_IN, generator=g, dtype=D)
    xd = torch.randn(N_DST, F_DST, generator=g, dtype=D)
    ea = torch.randn(E, DE, generator=g, dtype=D)
    return torch.stack([src, dst]).to(dev), (xs.to(dev), xd.to(dev)), ea.to(dev)


def _pyg():
    return pytest.importorskip("torch_geometric.nn")


# ---------------------------------------------------------------- dense references (plain torch)
def _counts(ei, n_dst, n_src, loops=None):
    """Dense multiplicities C[dst, src]; loops='replace': existing loops dropped, one per node."""
    src, dst = ei
    w = torch.ones(ei.shape[1], dtype=D, device=ei.device)
    if loops == "replace":
        w = torch.where(src == dst, torch.zeros((), dtype=D, device=ei.device), w)
    C = torch.zeros(n_dst, n_src, dtype=D, device=ei.device).index_put((dst, src), w, accumulate=True)
    if loops == "replace":
        C = C + torch.eye(n_dst, n_src, dtype=D, device=ei.device)
    return C


def _dense_softmax_sum(s, cnt, v):
    """s (H, i, j) scores, cnt (i, j) multiplicities, v (j, H, C) -> (i, H, C)."""
    s = torch.where(cnt > 0, s, torch.full((), -torch.inf, dtype=D, device=s.device))
    p = torch.exp(s - s.amax(-1, keepdim=True).clamp_min(-1e300)) * cnt
    alpha = p / p.sum(-1, keepdim=True).clamp_min(1e-300)
    return torch.einsum("hij,jhc->ihc", alpha, v)


def dense_transformer(layer, x, ei):
    H, C = layer.heads, layer.out_channels
    q, k, v = (lin(x).view(N, H, C) for lin in (layer.lin_query, layer.lin_key, layer.lin_value))
    s = torch.einsum("ihc,jhc->hij", q, k) / math.sqrt(C)
    out = _dense_softmax_sum(s, _counts(ei, N, N), v)
    out = out.reshape(N, H * C) if layer.concat else out.mean(1)
    return out + layer.lin_skip(x)


def dense_gatv2(layer, x, ei, loops=True):
    H, C = layer.heads, layer.out_channels
    xl, xr = layer.lin_l(x).view(N, H, C), layer.lin_r(x).view(N, H, C)
    z = torch.nn.functional.leaky_relu(xr[:, None] + xl[None, :], layer.negative_slope)  # i, j, H, C
    s = (z * layer.att[0]).sum(-1).permute(2, 0, 1)
    out = _dense_softmax_sum(s, _counts(ei, N, N, "replace" if loops else None), xl)
    out = out.reshape(N, H * C) if layer.concat else out.mean(1)
    return out + layer.bias


def _check(layer, ours, theirs, x):
    """Outputs and every gradient (x and parameters) of two evaluations of one layer agree."""
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    layer.zero_grad()
    ya = ours(xa)
    G = torch.randn(ya.shape, dtype=D, generator=torch.Generator().manual_seed(1)).to(x.device)
    (ya * G).sum().backward()
    grads_a = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    yb = theirs(xb)
    (yb * G).sum().backward()
    torch.testing.assert_close(ya, yb, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(xa.grad, xb.grad, rtol=1e-10, atol=1e-12)
    for ga, p in zip(grads_a, layer.parameters()):
        torch.testing.assert_close(ga, p.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kw", [dict(heads=1), dict(heads=3), dict(heads=2, concat=False)])
def test_transformer_matches_dense(graph, kw):
    ei, x, _ = graph
    torch.manual_seed(0)
    layer = gnn.TransformerConv(F_IN, 4, **kw).double().to(x.device)
    _check(layer, lambda x: layer(x, ei), lambda x: dense_transformer(layer, x, ei), x)


@pytest.mark.parametrize("kw", [dict(heads=1), dict(heads=3), dict(heads=2, concat=False),
                                dict(heads=2, add_self_loops=False), dict(heads=2, share_weights=True)])
@pytest.mark.parametrize("chunk", [None, 1, 37])
def test_gatv2_matches_dense(graph, kw, chunk):
    ei, x, _ = graph
    torch.manual_seed(0)
    layer = gnn.GATv2Conv(F_IN, 4, **kw).double().to(x.device)
    if chunk is not None:  # one edge per chunk / chunks cutting rows: every reduction crosses chunks
        layer.chunk_elements = chunk
    loops = kw.get("add_self_loops", True)
    _check(layer, lambda x: layer(x, ei), lambda x: dense_gatv2(layer, x, ei, loops), x)


# ---------------------------------------------------------------- against PyG
def _vs_pyg(ours, theirs, x, ei, edge_attr=None, chunk=None, **kw):
    """ours loads theirs' state_dict; outputs, attention weights and gradients (x, edge_attr, every
    parameter, in PyG's registration order) agree."""
    ours.load_state_dict(theirs.state_dict())
    if chunk is not None:
        ours.chunk_elements = chunk
    ours.zero_grad()
    theirs.zero_grad()

    def inputs():
        xs = tuple(t.clone().requires_grad_() for t in (x if isinstance(x, tuple) else (x,)))
        ea = None if edge_attr is None else edge_attr.clone().requires_grad_()
        return xs, ea

    (xa, eaa), (xb, eab) = inputs(), inputs()
    args_a = (xa if len(xa) == 2 else xa[0], ei) + (() if eaa is None else (eaa,))
    args_b = (xb if len(xb) == 2 else xb[0], ei) + (() if eab is None else (eab,))
    a, b = ours(*args_a, **kw), theirs(*args_b, **kw)
    assert isinstance(a, tuple) == isinstance(b, tuple)
    loss_a = loss_b = 0
    if isinstance(b, tuple):
        assert torch.equal(a[1][0], b[1][0])
        torch.testing.assert_close(a[1][1], b[1][1], rtol=1e-10, atol=1e-12)
        loss_a, loss_b = a[1][1].square().sum(), b[1][1].square().sum()  # the weights' own gradient path
        a, b = a[0], b[0]
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    (a.square().sum() + loss_a).backward()
    (b.square().sum() + loss_b).backward()
    for ta, tb in zip(xa, xb):
        torch.testing.assert_close(ta.grad, tb.grad, rtol=1e-9, atol=1e-11)
    if eaa is not None:
        torch.testing.assert_close(eaa.grad, eab.grad, rtol=1e-9, atol=1e-11)
    pa, pb = list(ours.named_parameters()), list(theirs.named_parameters())
    assert [n for n, _ in pa] == [n for n, _ in pb]
    for (name, ga), (_, gb) in zip(pa, pb):
        torch.testing.assert_close(ga.grad, gb.grad, rtol=1e-9, atol=1e-11, msg=name)


_TRANSFORMER = [dict(heads=1), dict(heads=3), dict(heads=3, concat=False), dict(heads=2, beta=True),
                dict(heads=2, concat=False, beta=True), dict(heads=2, root_weight=False), dict(heads=2, bias=False),
                dict(heads=2, edge_dim=DE), dict(heads=1, edge_dim=DE, concat=False, beta=True)]


@pytest.mark.parametrize("kw", _TRANSFORMER)
@pytest.mark.parametrize("attention", [None, True])
def test_transformer_matches_pyg(graph, kw, attention):
    pnn = _pyg()
    ei, x, ea = graph
    torch.manual_seed(0)
    theirs = pnn.TransformerConv(F_IN, 4, **kw).double().to(x.device)
    ours = gnn.TransformerConv(F_IN, 4, **kw).double().to(x.device)
    extra = {} if attention is None else dict(return_attention_weights=attention)
    _vs_pyg(ours, theirs, x, ei, ea if "edge_dim" in kw else None, **extra)


@pytest.mark.parametrize("kw", [dict(heads=2), dict(heads=2, edge_dim=DE, beta=True), dict(heads=1, concat=False)])
def test_transformer_bipartite_matches_pyg(bigraph, kw):
    pnn = _pyg()
    ei, x, ea = bigraph
    torch.manual_seed(0)
    ins = (F_IN, F_DST)
    theirs = pnn.TransformerConv(ins, 4, **kw).double().to(ei.device)
    _vs_pyg(gnn.TransformerConv(ins, 4, **kw).double().to(ei.device), theirs, x, ei,
            ea if "edge_dim" in kw else None, return_attention_weights=True)


_GATV2 = [dict(heads=1), dict(heads=3), dict(heads=2, concat=False, residual=True), dict(heads=2, add_self_loops=False),
          dict(heads=2, share_weights=True), dict(heads=2, bias=False, negative_slope=0.5),
          dict(heads=2, edge_dim=DE), dict(heads=2, edge_dim=DE, fill_value="max"),
          dict(heads=2, edge_dim=DE, fill_value="add"), dict(heads=2, edge_dim=DE, fill_value=0.5),
          dict(heads=2, edge_dim=DE, add_self_loops=False)]


@pytest.mark.parametrize("kw", _GATV2)
@pytest.mark.parametrize("chunk", [None, 1, 37])
def test_gatv2_matches_pyg(graph, kw, chunk):
    pnn = _pyg()
    ei, x, ea = graph
    torch.manual_seed(0)
    theirs = pnn.GATv2Conv(F_IN, 4, **kw).double().to(x.device)
    ours = gnn.GATv2Conv(F_IN, 4, **kw).double().to(x.device)
    _vs_pyg(ours, theirs, x, ei, ea if "edge_dim" in kw else None, chunk=chunk)
    _vs_pyg(ours, theirs, x, ei, ea if "edge_dim" in kw else None, chunk=chunk, return_attention_weights=True)


def test_gatv2_tensor_fill_value_matches_pyg(graph):
    pnn = _pyg()
    ei, x, ea = graph
    fill = torch.tensor([0.5, -1.0, 2.0], dtype=D, device=x.device)
    kw = dict(heads=2, edge_dim=DE, fill_value=fill)
    torch.manual_seed(0)
    _vs_pyg(gnn.GATv2Conv(F_IN, 4, **kw).double().to(x.device), pnn.GATv2Conv(F_IN, 4, **kw).double().to(x.device),
            x, ei, ea)


@pytest.mark.parametrize("kw", [dict(heads=2, add_self_loops=False), dict(heads=2, add_self_loops=False, share_weights=True),
                                dict(heads=2, edge_dim=DE, residual=True), dict(heads=1, concat=False)])
def test_gatv2_bipartite_matches_pyg(bigraph, kw):
    """(x_src, x_dst) input; with self loops (17 targets <= 24 sources) PyG adds loops i -> i for the
    17 targets."""
    pnn = _pyg()
    ei, x, ea = bigraph
    torch.manual_seed(0)
    ins = (F_IN, F_DST) if not kw.get("share_weights") else F_IN
    if kw.get("share_weights"):
        x = (x[0], torch.randn(N_DST, F_IN, dtype=D, generator=torch.Generator().manual_seed(2)).to(ei.device))
    theirs = pnn.GATv2Conv(ins, 4, **kw).double().to(ei.device)
    ours = gnn.GATv2Conv(ins, 4, **kw).double().to(ei.device)
    _vs_pyg(ours, theirs, x, ei, ea if "edge_dim" in kw else None, chunk=29, return_attention_weights=True)


# ---------------------------------------------------------------- paths, dropout, graph forms
def test_transformer_paths_agree(graph):
    """The fused call and the call that also returns the weights agree; the weights are a softmax
    over each target's edges (the node without in-edges gets none)."""
    ei, x, _ = graph
    torch.manual_seed(0)
    layer = gnn.TransformerConv(F_IN, 4, heads=2).double().to(x.device)
    fused = layer(x, ei)
    out, (ei_out, alpha) = layer(x, ei, return_attention_weights=False)  # any bool returns them, as PyG
    torch.testing.assert_close(out, fused, rtol=1e-12, atol=1e-12)
    assert ei_out is ei
    sums = torch.zeros(N, 2, dtype=D, device=x.device).index_add(0, ei[1], alpha)
    has_in = torch.zeros(N, dtype=torch.bool, device=x.device)
    has_in[ei[1]] = True
    torch.testing.assert_close(sums[has_in], torch.ones_like(sums[has_in]))
    assert bool((sums[~has_in] == 0).all()) and int((~has_in).sum()) == 1


def test_dropout_eval_is_a_no_op_and_training_is_seeded(graph):
    ei, x, ea = graph
    for cls, kw in ((gnn.TransformerConv, dict(heads=2)), (gnn.TransformerConv, dict(heads=2, edge_dim=DE)),
                    (gnn.GATv2Conv, dict(heads=2))):
        args = (ea,) if "edge_dim" in kw else ()
        torch.manual_seed(0)
        plain = cls(F_IN, 4, **kw).double().to(x.device)
        torch.manual_seed(0)
        drop = cls(F_IN, 4, dropout=0.5, **kw).double().to(x.device)
        drop.eval()
        torch.testing.assert_close(drop(x, ei, *args), plain(x, ei, *args), rtol=0, atol=0)
        drop.train()
        torch.manual_seed(3)
        a = drop(x, ei, *args)
        torch.manual_seed(3)
        b = drop(x, ei, *args)
        assert torch.equal(a, b)
        assert not torch.allclose(a, plain(x, ei, *args))


def test_attention_weights_before_and_after_dropout(graph):
    """As PyG: TransformerConv returns the weights before dropout, GATv2Conv after it."""
    ei, x, _ = graph
    torch.manual_seed(0)
    t = gnn.TransformerConv(F_IN, 4, heads=2, dropout=0.5).double().to(x.device)
    _, (_, a_eval) = t.eval()(x, ei, return_attention_weights=True)
    _, (_, a_train) = t.train()(x, ei, return_attention_weights=True)
    torch.testing.assert_close(a_train, a_eval, rtol=1e-12, atol=1e-14)
    g = gnn.GATv2Conv(F_IN, 4, heads=2, dropout=0.5).double().to(x.device)
    _, (_, a_eval) = g.eval()(x, ei, return_attention_weights=True)
    _, (_, a_train) = g.train()(x, ei, return_attention_weights=True)
    kept = a_train != 0
    assert 0 < int(kept.sum()) < kept.numel()
    torch.testing.assert_close(a_train[kept], 2 * a_eval[kept], rtol=1e-12, atol=1e-14)


def test_graph_arguments_agree(graph):
    """edge_index, a gnnsparse.CSR, GraphTensors and a torch sparse adjacency (rows are targets; on
    the graph without duplicate edges, which a sparse tensor sums) give the same output."""
    ei, x, ea = graph
    A = gs.CSR.from_edge_index(ei.cpu(), N)
    ei_u = torch.unique(ei, dim=1)
    torch.manual_seed(0)
    for layer in (gnn.TransformerConv(F_IN, 3, heads=2), gnn.GATv2Conv(F_IN, 3, heads=2)):
        layer = layer.double().to(x.device)
        outs = [layer(x, g) for g in (ei, A, gst.graph_tensors(A, x))]
        for o in outs[1:]:
            torch.testing.assert_close(o, outs[0], rtol=1e-12, atol=1e-12)
        with torch.sparse.check_sparse_tensor_invariants():
            S = torch.sparse_coo_tensor(torch.stack([ei_u[1], ei_u[0]]),
                                        torch.ones(ei_u.shape[1], dtype=D, device=x.device), (N, N))
            torch.testing.assert_close(layer(x, S), layer(x, ei_u), rtol=1e-12, atol=1e-12)
    # edge features follow the caller's edge order whatever the graph's form
    layer = gnn.GATv2Conv(F_IN, 3, heads=2, edge_dim=DE).double().to(x.device)
    torch.testing.assert_close(layer(x, A, ea), layer(x, ei, ea), rtol=1e-12, atol=1e-12)


def test_gatv2_backward_is_deterministic_and_chunk_independent(graph):
    ei, x, ea = graph
    torch.manual_seed(0)
    layer = gnn.GATv2Conv(F_IN, 4, heads=2, edge_dim=DE).double().to(x.device)
    grads = []
    for chunk in (40, 40, 1 << 24):
        layer.chunk_elements = chunk
        layer.zero_grad()
        xa = x.clone().requires_grad_()
        layer(xa, ei, ea).square().sum().backward()
        grads.append([xa.grad] + [p.grad.clone() for p in layer.parameters()])
    for a, b in zip(grads[0], grads[1]):
        assert torch.equal(a, b)
    for a, b in zip(grads[0], grads[2]):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_graph_without_edges(dev):
    x = torch.randn(5, F_IN, dtype=D, device=dev)
    ei = torch.zeros(2, 0, dtype=torch.int64, device=dev)
    for layer in (gnn.TransformerConv(F_IN, 3, heads=2), gnn.GATv2Conv(F_IN, 3, heads=2, add_self_loops=False)):
        layer = layer.double().to(dev)
        xa = x.clone().requires_grad_()
        out = layer(xa, ei)
        want = layer.lin_skip(x) if isinstance(layer, gnn.TransformerConv) else layer.bias.expand(5, 6)
        torch.testing.assert_close(out, want)
        out.sum().backward()
        assert xa.grad is not None


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_transformer_compiles_fullgraph(graph):
    ei, x, _ = graph
    g = gst.graph_tensors(gs.CSR.from_edge_index(ei.cpu(), N), x)
    torch.manual_seed(0)
    layer = gnn.TransformerConv(F_IN, 4, heads=2, beta=True).double().to(x.device)
    torch._dynamo.reset()
    comp = torch.compile(layer, fullgraph=True, backend="aot_eager")
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = layer(xa, g), comp(xb, g)
    torch.testing.assert_close(ya, yb, rtol=0, atol=0)
    ya.sum().backward()
    yb.sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad, rtol=0, atol=0)


# ---------------------------------------------------------------- from_pyg
@pytest.mark.parametrize("cls, kw", [
    ("TransformerConv", dict(heads=3, concat=False, beta=True, dropout=0.25, edge_dim=DE, bias=False)),
    ("TransformerConv", dict(heads=2, root_weight=False)),
    ("GATv2Conv", dict(heads=3, concat=False, negative_slope=0.3, dropout=0.1, edge_dim=DE, fill_value="min",
                       bias=False, share_weights=True, residual=True)),
    ("GATv2Conv", dict(heads=2, add_self_loops=False)),
])
@pytest.mark.parametrize("training", [True, False])
def test_from_pyg_round_trip(graph, cls, kw, training):
    pnn = _pyg()
    ei, x, ea = graph
    torch.manual_seed(0)
    theirs = getattr(pnn, cls)(F_IN, 4, **kw).double().to(x.device).train(training)
    ours = getattr(gnn, cls).from_pyg(theirs)
    assert type(ours) is getattr(gnn, cls) and ours.training == training
    assert repr(ours) == repr(theirs)
    for name in ("in_channels", "out_channels", "heads", "concat", "dropout", "edge_dim") + tuple(kw):
        if hasattr(theirs, name):  # PyG's TransformerConv keeps no `bias` flag
            assert getattr(ours, name) == getattr(theirs, name), name
    assert {k: v.dtype for k, v in ours.state_dict().items()} == {k: v.dtype for k, v in theirs.state_dict().items()}
    for (na, pa), (nb, pb) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert na == nb and torch.equal(pa, pb) and pa.device == pb.device
    ours.eval()
    theirs.eval()
    args = (ea,) if "edge_dim" in kw else ()
    torch.testing.assert_close(ours(x, ei, *args), theirs(x, ei, *args), rtol=1e-10, atol=1e-12)


def test_from_pyg_rejects_what_it_cannot_copy(graph):
    pnn = _pyg()
    with pytest.raises(TypeError, match="GATv2Conv"):
        gnn.TransformerConv.from_pyg(pnn.GATv2Conv(F_IN, 4))
    with pytest.raises(ValueError, match="not initialized"):
        gnn.GATv2Conv.from_pyg(pnn.GATv2Conv(-1, 4))
    with pytest.raises(ValueError, match="aggr='mean'"):
        gnn.TransformerConv.from_pyg(pnn.TransformerConv(F_IN, 4, aggr="mean"))


@torch.no_grad()
def test_pyg_initialization():
    """reset_parameters draws from PyG's distributions: glorot bounds, GATv2's uniform lin biases, zero
    output bias."""
    torch.manual_seed(0)
    g = gnn.GATv2Conv(F_IN, 4, heads=2)
    assert float(g.bias.abs().max()) == 0.0 and float(g.lin_l.bias.abs().max()) > 0
    assert float(g.lin_l.bias.abs().max()) <= 1 / math.sqrt(F_IN)
    assert float(g.att.abs().max()) <= math.sqrt(6 / (2 + 4))
    assert float(g.lin_l.weight.abs().max()) <= math.sqrt(6 / (F_IN + 8))
    assert g.lin_r is not g.lin_l and gnn.GATv2Conv(F_IN, 4, share_weights=True).lin_r.weight is not None
    shared = gnn.GATv2Conv(F_IN, 4, share_weights=True)
    assert shared.lin_r is shared.lin_l
    t = gnn.TransformerConv(F_IN, 4, heads=2, root_weight=False, beta=True)
    assert t.lin_beta is None and t.beta is False and t.lin_skip is not None  # PyG keeps lin_skip


# ---------------------------------------------------------------- bad input
def test_bad_inputs_raise_clear_errors(graph, bigraph):
    ei, x, ea = graph
    bei, (xs, xd), _ = bigraph
    t = gnn.TransformerConv(F_IN, 4, heads=2).double().to(x.device)
    te = gnn.TransformerConv(F_IN, 4, heads=2, edge_dim=DE).double().to(x.device)
    g2 = gnn.GATv2Conv(F_IN, 4, heads=2).double().to(x.device)
    g2e = gnn.GATv2Conv(F_IN, 4, heads=2, edge_dim=DE).double().to(x.device)
    with pytest.raises(ValueError, match=r"shape \(N, F\)"):
        t(x[None], ei)
    with pytest.raises(ValueError, match="both source and target"):
        g2((x, None), ei)
    with pytest.raises(ValueError, match="pass edge_attr"):
        te(x, ei)
    with pytest.raises(ValueError, match="without edge_dim"):
        t(x, ei, ea)
    with pytest.raises(ValueError, match="without edge_dim"):
        g2(x, ei, ea)
    with pytest.raises(ValueError, match=r"edge_attr must have shape \(110, 3\)"):
        g2e(x, ei, ea[:-1])
    with pytest.raises(ValueError, match=r"edge_attr must have shape \(110, 3\)"):
        te(x, ei, ea[:, :2])
    with pytest.raises(ValueError, match="built for 6 source / 6 target features"):
        t(x[:, :5], ei)
    with pytest.raises(ValueError, match="outside the graph"):
        g2(x[:10], ei)
    gb = gnn.GATv2Conv((F_IN, F_DST), 4).double().to(x.device)
    gb((xs, xd), bei)  # 17 targets <= 24 sources: loops for the 17 targets
    with pytest.raises(ValueError, match=r"more targets \(24\) than sources \(17\).*add_self_loops=False"):
        gnn.GATv2Conv((F_DST, F_IN), 4).double().to(x.device)((xd, xs), torch.stack([bei[1], bei[0]]))
    with pytest.raises(ValueError, match="lazy initialization"):
        gnn.TransformerConv(-1, 4)
    with pytest.raises(ValueError, match="fill_value"):
        gnn.GATv2Conv(F_IN, 4, edge_dim=DE, fill_value="median").double().to(x.device)(x, ei, ea)


@pytest.mark.parametrize("cls", ["TransformerConv", "GATv2Conv"])
def test_from_pyg_of_a_lazy_layer_that_has_run(graph, cls):
    """PyG keeps in_channels = -1 after a lazy layer's first call: the sizes come from its weights;
    frozen parameters stay frozen."""
    pnn = _pyg()
    ei, x, _ = graph
    torch.manual_seed(0)
    theirs = getattr(pnn, cls)(-1, 4, heads=2).double().to(x.device)
    theirs(x, ei)
    next(theirs.parameters()).requires_grad_(False)
    ours = getattr(gnn, cls).from_pyg(theirs)
    assert ours.in_channels == F_IN
    assert [p.requires_grad for p in ours.parameters()] == [p.requires_grad for p in theirs.parameters()]
    torch.testing.assert_close(ours(x, ei), theirs(x, ei), rtol=1e-10, atol=1e-12)


def test_gatv2_edge_features_checks_sizes_and_has_no_double_backward(graph):
    ei, x, ea = graph
    conv = gnn.GATv2Conv(F_IN, 2, heads=2, edge_dim=DE, add_self_loops=False).double().to(x.device)
    import gnnsparse as gs

    A = gs.CSR.from_edge_index(ei.cpu(), N + 5)  # 29 sources, the features hold 24 rows
    with pytest.raises(ValueError):
        conv(x, A, edge_attr=ea)
    xa = x.clone().requires_grad_()
    out = conv(xa, ei, edge_attr=ea)
    (g,) = torch.autograd.grad(out.square().sum(), xa, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate|double backward|twice"):
        g.sum().backward()
