"""gnnsparse.torch.nn layers against small dense pure-torch implementations (always) and against
torch_geometric's layers with the same weights (where PyG is installed)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
from conftest import torch_device_params  # noqa: E402
import gnnsparse.torch as gst  # noqa: E402
from gnnsparse.torch import nn as gnn  # noqa: E402

D = torch.float64
N, E, F_IN = 24, 110, 6


@pytest.fixture(params=torch_device_params())
def graph(request):
    """24 nodes, duplicate edges, a node with two self loops, a node without in-edges."""
    if request.param == "cpu":
        from conftest import sycl_or_skip

        sycl_or_skip()
    dev = request.param
    g = torch.Generator().manual_seed(5)
    src = torch.randint(0, N, (E,), generator=g)
    dst = torch.randint(0, N - 1, (E,), generator=g)
    src[:3], dst[:3] = torch.tensor([5, 5, 7]), torch.tensor([6, 6, 7])  # duplicate 5 -> 6, loop 7
    src[3], dst[3] = 7, 7  # a second loop at 7
    x = torch.randn(N, F_IN, generator=g, dtype=D)
    w = torch.rand(E, generator=g, dtype=D) + 0.1
    return torch.stack([src, dst]).to(dev), x.to(dev), w.to(dev)


# ---------------------------------------------------------------- dense references (plain torch)
def _adj(ei, w=None, drop_loops=False):
    """Dense A[dst, src] summing duplicate edges; optionally without self loops."""
    src, dst = ei
    w = torch.ones(ei.shape[1], dtype=D, device=ei.device) if w is None else w
    if drop_loops:
        w = torch.where(src == dst, torch.zeros((), dtype=D, device=ei.device), w)
    return torch.zeros(N, N, dtype=D, device=ei.device).index_put((dst, src), w, accumulate=True)


def dense_gcn(layer, x, ei, w=None, improved=False):
    A = _adj(ei, w, drop_loops=True)
    loop = torch.full((N,), 2.0 if (improved and w is not None) else 1.0, dtype=D, device=x.device)
    if w is not None:  # an existing loop keeps its weight (the last one in edge order)
        for k in range(ei.shape[1]):
            if ei[0, k] == ei[1, k]:
                loop = loop.clone()
                loop[ei[0, k]] = w[k]
    A = A + torch.diag(loop)
    dinv = A.sum(1).pow(-0.5)
    dinv = torch.where(torch.isinf(dinv), torch.zeros((), dtype=D, device=x.device), dinv)
    return (dinv[:, None] * A * dinv[None, :]) @ layer.lin(x) + layer.bias


def dense_gat(layer, x, ei, self_loops=True):
    H, C = layer.heads, layer.out_channels
    cnt = _adj(ei, drop_loops=self_loops) + (torch.eye(N, dtype=D, device=x.device) if self_loops else 0)
    h = layer.lin(x).view(N, H, C)
    a_src, a_dst = (h * layer.att_src).sum(-1), (h * layer.att_dst).sum(-1)
    s = torch.nn.functional.leaky_relu(a_dst.T[:, :, None] + a_src.T[:, None, :], layer.negative_slope)  # H, i, j
    s = torch.where(cnt > 0, s, torch.full((), -torch.inf, dtype=D, device=x.device))
    p = torch.exp(s - s.amax(-1, keepdim=True).clamp_min(-1e300)) * cnt  # duplicates count twice
    alpha = p / p.sum(-1, keepdim=True).clamp_min(1e-300)
    out = torch.einsum("hij,jhc->ihc", alpha, h)
    out = out.reshape(N, H * C) if layer.concat else out.mean(1)
    return out + layer.bias


def dense_sage(layer, x, ei, aggr):
    cnt = _adj(ei)
    if aggr in ("mean", "sum"):
        agg = cnt @ x
        if aggr == "mean":
            agg = agg / cnt.sum(1, keepdim=True).clamp_min(1)
    else:
        fill = torch.full((), -torch.inf if aggr == "max" else torch.inf, dtype=D, device=x.device)
        masked = torch.where(cnt[:, :, None] > 0, x[None], fill)
        agg = masked.amax(1) if aggr == "max" else masked.amin(1)
        agg = torch.where(torch.isinf(agg), torch.zeros((), dtype=D, device=x.device), agg)
    return layer.lin_l(agg) + layer.lin_r(x)


def _check(layer, ours, theirs, x):
    """Outputs and every gradient (x and parameters) of two evaluations of one layer agree."""
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    G = torch.randn(N, ours(xa).shape[1], dtype=D, generator=torch.Generator().manual_seed(1)).to(x.device)
    layer.zero_grad()
    ya = ours(xa)
    (ya * G).sum().backward()
    grads_a = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    yb = theirs(xb)
    (yb * G).sum().backward()
    torch.testing.assert_close(ya, yb, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(xa.grad, xb.grad, rtol=1e-10, atol=1e-12)
    for ga, p in zip(grads_a, layer.parameters()):
        torch.testing.assert_close(ga, p.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("weighted, improved", [(False, False), (True, False), (True, True)])
def test_gcn_matches_dense(graph, weighted, improved):
    ei, x, w = graph
    torch.manual_seed(0)
    layer = gnn.GCNConv(F_IN, 5, improved=improved).double().to(x.device)
    ww = w if weighted else None
    _check(layer, lambda x: layer(x, ei, ww), lambda x: dense_gcn(layer, x, ei, ww, improved), x)


@pytest.mark.parametrize("kw", [dict(heads=3), dict(heads=2, concat=False), dict(heads=1, add_self_loops=False)])
def test_gat_matches_dense(graph, kw):
    ei, x, _ = graph
    torch.manual_seed(0)
    layer = gnn.GATConv(F_IN, 4, **kw).double().to(x.device)
    _check(layer, lambda x: layer(x, ei), lambda x: dense_gat(layer, x, ei, kw.get("add_self_loops", True)), x)


@pytest.mark.parametrize("aggr", ["mean", "max", "sum", "min"])
def test_sage_matches_dense(graph, aggr):
    ei, x, _ = graph
    torch.manual_seed(0)
    layer = gnn.SAGEConv(F_IN, 5, aggr=aggr).double().to(x.device)
    _check(layer, lambda x: layer(x, ei), lambda x: dense_sage(layer, x, ei, aggr), x)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_graph_arguments_agree(graph):
    """edge_index tensor, gnnsparse.CSR, GraphTensors and a torch sparse adjacency (rows are
    targets) give the same output (on a graph without duplicate edges, which a sparse tensor sums)."""
    ei, x, _ = graph
    ei = torch.unique(ei, dim=1)
    torch.manual_seed(0)
    layer = gnn.GCNConv(F_IN, 5).double().to(x.device)
    A = gs.CSR.from_edge_index(ei, N)
    # torch's sparse invariant checks on for the whole test (torch warns when the choice is left
    # implicit, e.g. by its CUDA conversions)
    with torch.sparse.check_sparse_tensor_invariants():
        S = torch.sparse_coo_tensor(torch.stack([ei[1], ei[0]]), torch.ones(ei.shape[1], dtype=D, device=x.device),
                                    (N, N))
        outs = [layer(x, g) for g in (ei, A, gst.graph_tensors(A, x), S, S.coalesce().to_sparse_csr())]
    for o in outs[1:]:
        torch.testing.assert_close(o, outs[0], rtol=1e-12, atol=1e-12)


def test_gat_fused_and_unfused_paths_agree(graph):
    ei, x, _ = graph
    torch.manual_seed(0)
    layer = gnn.GATConv(F_IN, 4, heads=2).double().to(x.device)
    fused = layer(x, ei)
    unfused, (ei_out, alpha) = layer(x, ei, return_attention_weights=True)
    torch.testing.assert_close(fused, unfused, rtol=1e-12, atol=1e-12)
    assert ei_out.shape[1] == alpha.shape[0] == int((ei[0] != ei[1]).sum()) + N  # loops replaced, one per node
    sums = torch.zeros(N, 2, dtype=D, device=x.device).index_add(0, ei_out[1], alpha)
    torch.testing.assert_close(sums, torch.ones(N, 2, dtype=D, device=x.device))


def test_gat_attention_dropout_is_seeded_and_reproducible(graph):
    ei, x, _ = graph
    torch.manual_seed(0)
    layer = gnn.GATConv(F_IN, 4, heads=2, dropout=0.5).double().to(x.device).train()
    torch.manual_seed(3)
    a = layer(x, ei)
    torch.manual_seed(3)
    b = layer(x, ei)
    assert torch.equal(a, b)
    layer.eval()
    torch.testing.assert_close(layer(x, ei), dense_gat(layer, x, ei), rtol=1e-10, atol=1e-12)


def test_gcn_cached_keeps_the_first_normalization(graph):
    ei, x, _ = graph
    layer = gnn.GCNConv(F_IN, 3, cached=True).double().to(x.device)
    a = layer(x, ei)
    b = layer(x, ei[:, :10])  # PyG semantics: cached=True reuses the first graph
    torch.testing.assert_close(a, b)


# torch's compiler imports inductor and friends on first use, some of which announce deprecations of
# their own dependencies (seen on the GPU image, torch 2.11): not gnnsparse's to fix
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_layers_compile_fullgraph(graph):
    ei, x, _ = graph
    A = gs.CSR.from_edge_index(ei, N)
    g = gst.graph_tensors(A, x)
    g_norm = gst.gcn_norm(g, like=x.device, dtype=D)
    g_loops = gst.self_loops(g, "replace")
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gcn = gnn.GCNConv(F_IN, 8, normalize=False)
            self.gat = gnn.GATConv(8, 4, heads=2, add_self_loops=False)
            self.sage = gnn.SAGEConv(8, 3, aggr="max")

        def forward(self, x, gn, gl, g):
            return self.sage(self.gat(self.gcn(x, gn).relu(), gl), g)

    net = Net().double().to(x.device)
    torch._dynamo.reset()
    comp = torch.compile(net, fullgraph=True, backend="aot_eager")
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = net(xa, g_norm, g_loops, g), comp(xb, g_norm, g_loops, g)
    torch.testing.assert_close(ya, yb, rtol=0, atol=0)
    ya.sum().backward()
    yb.sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad, rtol=0, atol=0)


# ---------------------------------------------------------------- against PyG
def _pyg():
    return pytest.importorskip("torch_geometric.nn")


def _vs_pyg(ours, theirs, x, *args, **kw):
    ours.load_state_dict(theirs.state_dict())
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    a, b = ours(xa, *args, **kw), theirs(xb, *args, **kw)
    if isinstance(a, tuple):
        assert torch.equal(a[1][0], b[1][0])
        torch.testing.assert_close(a[1][1], b[1][1], rtol=1e-10, atol=1e-12)
        a, b = a[0], b[0]
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    a.square().sum().backward()
    b.square().sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad, rtol=1e-9, atol=1e-11)
    for (na, pa), (nb, pb) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert na == nb
        torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("kw, weighted", [({}, False), ({}, True), (dict(improved=True), True)])
def test_gcn_matches_pyg(graph, kw, weighted):
    pnn = _pyg()
    ei, x, w = graph
    if x.is_cuda:
        # node 7 has two self loops; PyG's add_remaining_self_loops keeps the last one's weight on the
        # CPU but an arbitrary one on CUDA (index_put with repeated indices): give both one weight there
        w = w.clone()
        w[3] = w[2]
    args = (ei, w) if weighted else (ei,)
    _vs_pyg(gnn.GCNConv(F_IN, 5, **kw).double().to(x.device), pnn.GCNConv(F_IN, 5, **kw).double().to(x.device), x,
            *args)


@pytest.mark.parametrize("kw", [dict(heads=3), dict(heads=2, concat=False, residual=True),
                                dict(heads=2, edge_dim=3), dict(heads=2, edge_dim=3, fill_value="max")])
def test_gat_matches_pyg(graph, kw):
    pnn = _pyg()
    ei, x, _ = graph
    extra = (torch.randn(E, 3, dtype=D, device=x.device),) if "edge_dim" in kw else ()
    dev = x.device
    _vs_pyg(gnn.GATConv(F_IN, 4, **kw).double().to(dev), pnn.GATConv(F_IN, 4, **kw).double().to(dev), x, ei, *extra)
    if "edge_dim" not in kw:
        _vs_pyg(gnn.GATConv(F_IN, 4, **kw).double().to(dev), pnn.GATConv(F_IN, 4, **kw).double().to(dev), x, ei,
                return_attention_weights=True)


@pytest.mark.parametrize("kw", [dict(aggr="mean"), dict(aggr="max"), dict(aggr="mean", normalize=True, project=True)])
def test_sage_matches_pyg(graph, kw):
    pnn = _pyg()
    ei, x, _ = graph
    _vs_pyg(gnn.SAGEConv(F_IN, 5, **kw).double().to(x.device), pnn.SAGEConv(F_IN, 5, **kw).double().to(x.device), x,
            ei)


def test_pyg_edge_index_and_data_inputs(graph):
    pytest.importorskip("torch_geometric")
    from torch_geometric import EdgeIndex
    from torch_geometric.data import Data

    ei, x, _ = graph
    torch.manual_seed(0)
    layer = gnn.GCNConv(F_IN, 3).double().to(x.device)
    want = layer(x, ei)
    torch.testing.assert_close(layer(x, EdgeIndex(ei, sparse_size=(N, N))), want, rtol=1e-12, atol=1e-12)
    from gnnsparse._graph import from_pyg

    A = from_pyg(Data(edge_index=ei, num_nodes=N))
    torch.testing.assert_close(layer(x, A), want, rtol=1e-12, atol=1e-12)
