"""torch.compile(model, fullgraph=True) on models written the ordinary way: gnnsparse.torch.nn layers
called with edge_index, a gnnsparse.CSR or GraphTensors, the graph preparation (edge list -> CSR,
self loops, GCN normalization) traced into the compiled graph. Compiled outputs and gradients equal
eager ones, also after the model ran eagerly (its caches filled); bad edge ids still raise.

Compiling takes seconds per model on a small CPU: the models are tiny and the compiles few."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
import gnnsparse.torch as gst  # noqa: E402
from gnnsparse.torch import nn as gnn  # noqa: E402
from gnnsparse.torch import graph as gg  # noqa: E402

D = torch.float64
N, E, F_IN = 13, 40, 5

# torch's compiler imports inductor and friends on first use, some of which announce deprecations of
# their own dependencies (seen on the GPU image): not gnnsparse's to fix
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def data(sycl):
    """13 nodes: a duplicate edge, a node with two self loops, a node without in-edges."""
    g = torch.Generator().manual_seed(11)
    src = torch.randint(0, N, (E,), generator=g)
    dst = torch.randint(0, N - 1, (E,), generator=g)
    src[:4], dst[:4] = torch.tensor([2, 2, 4, 4]), torch.tensor([3, 3, 4, 4])
    return (torch.stack([src, dst]), torch.randn(N, F_IN, generator=g, dtype=D),
            torch.randn(E, 3, generator=g, dtype=D), torch.rand(E, generator=g, dtype=D) + 0.1)


class Net(torch.nn.Module):
    """GCN (normalized on the fly), GAT with edge features and attention dropout (the unfused chain),
    GAT without (one fused call), GraphSAGE with max aggregation."""

    def __init__(self):
        super().__init__()
        self.gcn = gnn.GCNConv(F_IN, 8)
        self.gat1 = gnn.GATConv(8, 4, heads=2, dropout=0.5, edge_dim=3)
        self.gat2 = gnn.GATConv(8, 4)
        self.sage = gnn.SAGEConv(4, 3, aggr="max")

    def forward(self, x, graph, edge_attr):
        h = self.gcn(x, graph).relu()
        h = self.gat1(h, graph, edge_attr).relu()
        return self.sage(self.gat2(h, graph), graph)


def _graph(kind, ei):
    return {"edge_index": ei, "csr": gs.CSR.from_edge_index(ei, N), "graph_tensors": gst.from_edge_index(ei, N)}[kind]


def _run(model, x, *args, seed=0):
    x = x.clone().requires_grad_()
    torch.manual_seed(seed)
    y = model(x, *args)
    y.square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    return y.detach(), x.grad, grads


def _same(a, b):
    ya, xa, pa = a
    yb, xb, pb = b
    torch.testing.assert_close(ya, yb, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(xa, xb, rtol=1e-12, atol=1e-12)
    for ga, gb in zip(pa, pb):
        torch.testing.assert_close(ga, gb, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["edge_index", "csr", "graph_tensors"])
def test_models_compile_fullgraph(data, kind):
    ei, x, attr, _ = data
    graph = _graph(kind, ei)
    torch.manual_seed(0)
    net = Net().double().train()
    eager = _run(net, x, graph, attr)  # fills the layers' and the graph's caches first
    torch._dynamo.reset()
    comp = torch.compile(net, fullgraph=True, backend="aot_eager")
    _same(_run(comp, x, graph, attr), eager)
    _same(_run(comp, x, graph, attr, seed=1), _run(net, x, graph, attr, seed=1))
    if kind == "edge_index":  # the range check runs in the compiled graph too
        bad = ei.clone()
        bad[0, 5] = N
        with pytest.raises(ValueError, match=f"edge 5 = \\({N}, .*outside the graph"):
            comp(x, bad, attr)


@pytest.mark.parametrize("eager_first", [False, True], ids=["cold", "after-eager"])
@pytest.mark.parametrize("kind", ["edge_index", "csr", "graph_tensors"])
def test_gcn_cached_and_learnable_edge_weights_compile(data, kind, eager_first):
    ei, x, _, w = data
    graph = _graph(kind, ei)

    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = gnn.GCNConv(F_IN, 6, cached=True, improved=True)
            self.b = gnn.GCNConv(6, 3)

        def forward(self, x, graph, w):
            return self.b(self.a(x, graph).relu(), graph, w)

    torch.manual_seed(0)
    net, twin = Two().double(), Two().double()
    twin.load_state_dict(net.state_dict())
    if eager_first:  # the cache filled by an eager call
        twin(x, graph, w)
    torch._dynamo.reset()
    comp = torch.compile(twin, fullgraph=True, backend="aot_eager")
    for step in range(2):  # cold: the first call fills the cache (in the compiled graph), the second reads it
        wa, wb = w.clone().requires_grad_(), w.clone().requires_grad_()
        _same(_run(net, x, graph, wa), _run(comp, x, graph, wb))
        torch.testing.assert_close(wa.grad, wb.grad, rtol=1e-12, atol=1e-12)  # through gcn_norm's self loops
        assert twin.a._cached_graph is not None


def test_cold_process_compiles(sycl, tmp_path):
    """What a new user does: build a model, compile it, call it, in a fresh process (no gnnsparse
    call ran eagerly before, so no backend is loaded when tracing starts)."""
    script = textwrap.dedent("""
        import torch
        from gnnsparse.torch import nn as gnn
        torch.manual_seed(0)
        ei = torch.randint(0, 9, (2, 30))
        x = torch.randn(9, 4)
        conv = gnn.GCNConv(4, 3)
        comp = torch.compile(conv, fullgraph=True, backend="aot_eager")
        y = comp(x, ei)
        y.sum().backward()
        torch.testing.assert_close(y, conv(x, ei), rtol=1e-6, atol=1e-6)
        print("ok")
    """)
    env = dict(os.environ, PYTHONWARNINGS="error::UserWarning")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


# ---------------------------------------------------------------- the graph ops themselves
def test_graph_ops_opcheck(data):
    ei, _, _, _ = data
    g = gst.from_edge_index(ei, N)
    torch.library.opcheck(gg._from_edge_index_op, (ei, N, N))
    for mode in ("replace", "remaining", "drop"):
        torch.library.opcheck(gg._self_loops_op, (g.rowptr, g.col, g.rows, g.edge_perm, N, mode))
        torch.library.opcheck(gg._self_loops_op, (g.rowptr, g.col, g.rows, None, N, mode))


def test_self_loops_take_and_drop(data):
    ei, _, _, w = data
    g = gst.from_edge_index(ei, N, w)
    loops, take = gg._self_loops(g, "remaining", 2.0)
    full = torch.cat([g.val, torch.full((N,), 2.0, dtype=D)])
    assert torch.equal(loops.val, full[take])
    assert torch.equal(loops.col.long(), torch.cat([g.col.long(), torch.arange(N)])[take])
    dropped = gst.self_loops(g, "drop")
    keep = g.rows != g.col
    assert dropped.nnz == int(keep.sum()) and bool((dropped.rows != dropped.col).all())
    assert torch.equal(dropped.val, g.val[keep])
    with pytest.raises(ValueError, match="mode must be one of"):
        gst.self_loops(g, "add")


def _every_layer():
    mlp = lambda: torch.nn.Sequential(torch.nn.Linear(F_IN, 6), torch.nn.ReLU(), torch.nn.Linear(6, 4))  # noqa: E731
    return {
        "TransformerConv": (gnn.TransformerConv(F_IN, 4, heads=2), False),
        "TransformerConv-edge": (gnn.TransformerConv(F_IN, 4, heads=2, edge_dim=3), True),
        "GATv2Conv": (gnn.GATv2Conv(F_IN, 4, heads=2), False),
        "GINConv": (gnn.GINConv(mlp()), False),
        "GINEConv": (gnn.GINEConv(mlp(), edge_dim=3), True),
        "GraphConv-max": (gnn.GraphConv(F_IN, 4, aggr="max"), False),
        "SGConv": (gnn.SGConv(F_IN, 4, K=2), False),
        "APPNP": (gnn.APPNP(K=2, alpha=0.1), False),
    }


@pytest.mark.parametrize("name", list(_every_layer()))
def test_every_layer_compiles_fullgraph(data, name):
    """Each layer beyond GCN / GAT / SAGE, compiled with fullgraph=True (the aot_eager backend: the
    trace is what is tested, not inductor's code) and called with edge_index, a CSR and GraphTensors
    (edge features: edge_index only), gives its eager output and gradients. GATv2Conv with edge_dim
    plans its chunks on the host and is eager-only (documented)."""
    ei, x, ea, _ = data
    torch.manual_seed(0)
    layer, edges = _every_layer()[name]
    layer = layer.double()
    graphs = ("edge_index",) if edges else ("edge_index", "csr", "graph_tensors")
    torch._dynamo.reset()
    f = torch.compile(layer, fullgraph=True, backend="aot_eager")
    for kind in graphs:
        g = _graph(kind, ei)
        args = (ea,) if edges else ()
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        want, got = layer(xa, g, *args), f(xb, g, *args)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        want.square().sum().backward()
        got.square().sum().backward()
        torch.testing.assert_close(xb.grad, xa.grad, rtol=1e-12, atol=1e-12)
