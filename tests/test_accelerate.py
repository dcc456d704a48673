"""gnnsparse.torch.accelerate on models written as PyG's examples write them (the five models of
examples/accelerate.py): the convs gnnsparse implements are replaced in place, the model computes
what the untouched PyG copy computes (outputs and gradients, fp64 and fp32), keeps its weights,
parameters and training mode, takes the same graph arguments, and the report says what was replaced
and why the rest was not."""
from __future__ import annotations

import copy
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pyg_nn = pytest.importorskip("torch_geometric.nn")

import gnnsparse.torch as gst  # noqa: E402
from gnnsparse.torch import nn as gnn  # noqa: E402
from torch_geometric.nn.conv import MessagePassing  # noqa: E402


def _example():
    path = Path(__file__).resolve().parents[1] / "examples" / "accelerate.py"
    spec = importlib.util.spec_from_file_location("accelerate_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


EX = _example()
N, E, F_IN, C = 23, 90, 7, 4
TOL = {torch.float64: dict(rtol=1e-9, atol=1e-11), torch.float32: dict(rtol=2e-4, atol=2e-5)}


@pytest.fixture
def graph(sycl):
    """23 nodes: a duplicate edge, a node with two self loops, a node without in-edges."""
    g = torch.Generator().manual_seed(7)
    src = torch.randint(0, N, (E,), generator=g)
    dst = torch.randint(0, N - 1, (E,), generator=g)
    src[:4], dst[:4] = torch.tensor([3, 3, 9, 9]), torch.tensor([4, 4, 9, 9])
    return torch.stack([src, dst]), torch.randn(N, F_IN, generator=g, dtype=torch.float64), g


MODELS = {
    "GCN": (lambda: EX.GCN(F_IN, 6, C), "nodes"),
    "GAT": (lambda: EX.GAT(F_IN, 3, C, heads=2), "nodes"),
    "GraphSAGE": (lambda: EX.SAGE(F_IN, 5, C, num_layers=3), "nodes"),
    "GIN": (lambda: EX.GIN(F_IN, 6, C, num_layers=2), "graphs"),
    "GraphTransformer": (lambda: EX.GraphTransformer(F_IN, 6, C, num_layers=2, heads=2), "nodes"),
}
# models whose convs draw no random numbers (attention dropout): comparable in training mode too
NO_CONV_DROPOUT = {"GCN", "GraphSAGE", "GIN"}


def _inputs(kind, graph, dtype):
    ei, x, g = graph
    if kind == "nodes":
        return [x.to(dtype), ei]
    batch = torch.repeat_interleave(torch.arange(3), torch.tensor([8, 8, N - 16]))
    return [x.to(dtype), ei, batch, 3]


def _expected(model):
    """(replaced, skipped names): the PyG convs whose class name gnnsparse.torch.nn exports."""
    convs = [(n, type(m).__name__) for n, m in model.named_modules() if isinstance(m, MessagePassing)]
    ours = {n for n in gnn.__all__ if hasattr(getattr(gnn, n), "from_pyg")}
    return [c for c in convs if c[1] in ours], [c for c in convs if c[1] not in ours]


def _forward_backward(model, inputs, seed):
    x = inputs[0].clone().requires_grad_()
    torch.manual_seed(seed)
    out = model(x, *inputs[1:])
    (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape)).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    return out.detach(), x.grad, grads


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["fp64", "fp32"])
@pytest.mark.parametrize("name", list(MODELS))
def test_accelerated_model_matches_pyg(graph, name, dtype):
    make, kind = MODELS[name]
    torch.manual_seed(0)
    pyg = make().to(dtype)
    model = copy.deepcopy(pyg)
    report = gst.accelerate(model)
    want_replaced, want_skipped = _expected(pyg)
    assert report.replaced == want_replaced
    assert [(n, c) for n, c, _ in report.skipped] == want_skipped
    assert all(why == "no gnnsparse counterpart" for _, _, why in report.skipped)
    for n, _ in report.replaced:
        assert type(model.get_submodule(n)).__module__.startswith("gnnsparse.torch")
    inputs = _inputs(kind, graph, dtype)
    modes = ["eval", "train"] if name in NO_CONV_DROPOUT else ["eval"]
    for mode in modes:
        for seed in (0, 1):  # a second call: the layers' caches (GCN's cached graph) in use
            getattr(pyg, mode)(), getattr(model, mode)()
            a, b = _forward_backward(pyg, inputs, seed), _forward_backward(model, inputs, seed)
            torch.testing.assert_close(b[0], a[0], **TOL[dtype])
            torch.testing.assert_close(b[1], a[1], **TOL[dtype])
            assert b[2].keys() == a[2].keys()
            for k in a[2]:
                torch.testing.assert_close(b[2][k], a[2][k], **TOL[dtype], msg=lambda m, k=k: f"{k}: {m}")


@pytest.mark.parametrize("make", [
    lambda: pyg_nn.GCNConv(F_IN, 3, improved=True, add_self_loops=True, bias=False),
    lambda: pyg_nn.GCNConv(F_IN, 3, normalize=False, add_self_loops=False),
    lambda: pyg_nn.GATConv(F_IN, 3, heads=3, concat=False, negative_slope=0.1, edge_dim=2, fill_value=0.5,
                           residual=True),
    lambda: pyg_nn.GATConv((F_IN, F_IN), 2, heads=2, add_self_loops=False, bias=False),
    lambda: pyg_nn.SAGEConv(F_IN, 3, aggr="max", normalize=True, project=True),
    lambda: pyg_nn.SAGEConv((F_IN, F_IN), 3, aggr="add", root_weight=False, bias=False),
], ids=["gcn", "gcn-unnormalized", "gat-edge", "gat-bipartite", "sage-max", "sage-sum"])
def test_from_pyg_copies_options_and_weights(graph, make):
    ei, x, g = graph
    torch.manual_seed(1)
    pyg = make().double().eval()
    for p in pyg.parameters():  # no zero biases: every parameter must reach the output
        torch.nn.init.uniform_(p, -0.5, 0.5)
    ours = getattr(gnn, type(pyg).__name__).from_pyg(pyg)
    assert not ours.training and all(p.dtype == torch.float64 for p in ours.parameters())
    assert not any(a is b for a, b in zip(ours.parameters(), pyg.parameters()))  # copies
    attr = torch.randn(E, 2, generator=g, dtype=torch.float64)
    args = (x, ei, attr) if getattr(pyg, "edge_dim", None) else (x, ei)
    torch.testing.assert_close(ours(*args), pyg(*args), **TOL[torch.float64])


def test_weights_parameters_and_modes_kept(graph):
    torch.manual_seed(0)
    model = EX.GAT(F_IN, 3, C, heads=2).double()
    model.conv2.eval()  # modes are per module
    model.conv1.att_src.requires_grad_(False)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    params = list(model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gst.accelerate(model)
    assert isinstance(model.conv1, gnn.GATConv) and isinstance(model.conv2, gnn.GATConv)
    after = model.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)
    assert model.training and model.conv1.training and not model.conv2.training
    assert (model.conv1.heads, model.conv1.dropout, model.conv2.concat) == (2, 0.6, False)
    assert all(a is b for a, b in zip(model.parameters(), params))  # the optimizer trains the model
    assert not model.conv1.att_src.requires_grad and model.conv1.att_dst.requires_grad
    ei, x, _ = graph
    model(x, ei).sum().backward()
    w = model.conv2.lin.weight.clone()
    opt.step()
    assert not torch.equal(model.conv2.lin.weight, w)


def test_containers_and_shared_modules(graph):
    ei, x, _ = graph
    torch.manual_seed(0)
    shared = pyg_nn.SAGEConv(F_IN, F_IN, aggr="max")
    model = torch.nn.ModuleDict({
        "seq": torch.nn.Sequential(pyg_nn.GCNConv(F_IN, F_IN)),
        "list": torch.nn.ModuleList([shared, shared]),
        "pyg": pyg_nn.Sequential("x, edge_index", [(pyg_nn.GATConv(F_IN, 3, heads=2), "x, edge_index -> x"),
                                                    torch.nn.ReLU()]),
    }).double()
    ref = copy.deepcopy(model)
    report = gst.accelerate(model)
    assert sorted(n for n, _ in report.replaced) == ["list.0", "pyg.module_0", "seq.0"] and not report.skipped
    assert model["list"][0] is model["list"][1] and isinstance(model["list"][1], gnn.SAGEConv)
    assert isinstance(model["seq"][0], gnn.GCNConv) and isinstance(model["pyg"].module_0, gnn.GATConv)
    torch.testing.assert_close(model["seq"][0](x, ei), ref["seq"][0](x, ei), **TOL[torch.float64])
    torch.testing.assert_close(model["pyg"](x, ei), ref["pyg"](x, ei), **TOL[torch.float64])
    torch.testing.assert_close(model["list"][1](x, ei), ref["list"][1](x, ei), **TOL[torch.float64])


class _MyGCN(pyg_nn.GCNConv):
    """A user's GCNConv subclass (its message may differ)."""


def test_skipped_with_reasons(graph, capsys):
    torch.manual_seed(0)
    hooked = pyg_nn.GCNConv(F_IN, 3)
    hooked.register_forward_hook(lambda *a: None)
    model = torch.nn.ModuleDict({
        "cheb": pyg_nn.ChebConv(F_IN, 3, K=2),
        "lstm": pyg_nn.SAGEConv(F_IN, 3, aggr="lstm"),
        "flow": pyg_nn.GCNConv(F_IN, 3, flow="target_to_source"),
        "mean": pyg_nn.GCNConv(F_IN, 3, aggr="mean"),
        "mine": _MyGCN(F_IN, 3),
        "hooked": hooked,
        "lazy": pyg_nn.GATConv(-1, 3),
        "ok": pyg_nn.GCNConv(F_IN, 3),
    })
    ref = copy.deepcopy(model)
    with pytest.raises(ValueError, match="7 torch_geometric convs cannot be replaced"):
        gst.accelerate(model, strict=True)
    assert all(type(model[k]) is type(ref[k]) for k in model)  # strict: nothing was replaced
    report = gst.accelerate(model, verbose=True)
    assert report.replaced == [("ok", "GCNConv")]
    why = {n: r for n, _, r in report.skipped}
    assert why["cheb"] == "no gnnsparse counterpart"
    assert why["lstm"].startswith("aggr='lstm'")
    assert why["flow"].startswith("flow='target_to_source'")
    assert why["mean"].startswith("aggr='mean'")
    assert why["mine"].startswith("a subclass of torch_geometric's GCNConv")
    assert "hooks" in why["hooked"]
    assert "lazy parameter" in why["lazy"]
    printed = capsys.readouterr().out
    assert printed.strip() == str(report) == repr(report)
    assert "1 replaced, 7 skipped" in printed and "ChebConv" in printed and "no gnnsparse counterpart" in printed
    # a lazy conv that ran once has its sizes: replaced
    ei, x, _ = graph
    model["lazy"](x.float(), ei)
    assert gst.accelerate(model).replaced == [("lazy", "GATConv")]
    # the model itself
    conv = pyg_nn.GCNConv(F_IN, 3)
    assert "from_pyg(model)" in gst.accelerate(conv).skipped[0][2]
    assert str(gst.accelerate(torch.nn.Linear(2, 2))).endswith("(no torch_geometric conv in the model)")


def _variants(ei, n):
    """The graph arguments PyG's layers take: (2, E) edge_index, EdgeIndex, torch sparse adj_t and
    torch_sparse.SparseTensor adj_t (where torch_sparse is installed)."""
    from torch_geometric import EdgeIndex
    from torch_geometric.typing import WITH_TORCH_SPARSE
    from torch_geometric.utils import to_torch_csr_tensor

    ones = torch.ones(ei.shape[1], dtype=torch.float64)
    out = {"edge_index": ei, "EdgeIndex": EdgeIndex(ei, sparse_size=(n, n)),
           "torch_sparse_adj_t": to_torch_csr_tensor(ei.flip(0), ones, size=(n, n))}
    if WITH_TORCH_SPARSE:
        from torch_sparse import SparseTensor

        out["SparseTensor_adj_t"] = SparseTensor(row=ei[1], col=ei[0], sparse_sizes=(n, n))
    return out


@pytest.mark.parametrize("name", ["GCN", "GAT", "GraphSAGE"])
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state:UserWarning")
def test_forward_signature_unchanged(graph, name):
    """Every graph form on a graph without self loops and duplicate edges: PyG's GCNConv and
    SAGEConv handle an adj_t's loops (and a coalesced duplicate's weight) differently from the
    same graph's edge_index; gnnsparse's layers follow the edge_index semantics for every form."""
    ei, x, g = graph
    ei = torch.unique(ei, dim=1)
    ei = ei[:, ei[0] != ei[1]]
    torch.manual_seed(0)
    pyg = MODELS[name][0]().double().eval()
    w = torch.rand(ei.shape[1], generator=g, dtype=torch.float64) + 0.1
    # torch >= 2.11 warns about sparse tensors built without saying whether to check them (PyG builds some)
    with torch.sparse.check_sparse_tensor_invariants(enable=True):
        for kind, adj in _variants(ei, N).items():
            pyg_c = copy.deepcopy(pyg)
            model = copy.deepcopy(pyg)
            gst.accelerate(model, strict=True)
            args = (x, adj, w) if name == "GCN" and kind in ("edge_index", "EdgeIndex") else (x, adj)
            torch.testing.assert_close(model(*args), pyg_c(*args), **TOL[torch.float64],
                                       msg=lambda m, kind=kind: f"{kind}: {m}")


def test_gcn_cached_graph_carried_over(graph):
    ei, x, _ = graph
    torch.manual_seed(0)
    pyg = EX.GCN(F_IN, 6, C).double().eval()
    pyg(x, ei)  # PyG caches the normalized graph of its first call (cached=True)
    model = copy.deepcopy(pyg)
    gst.accelerate(model, strict=True)
    other = ei[:, 10:]  # a cached layer keeps using the first graph
    torch.testing.assert_close(model(x, other), pyg(x, other), **TOL[torch.float64])


def test_import_does_not_load_torch_geometric(sycl):
    code = "import sys, gnnsparse.torch; assert 'torch_geometric' not in sys.modules, 'loaded'; print('ok')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ),
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_a_layer_whose_parameters_cannot_be_shared_is_skipped(graph, monkeypatch):
    """If the gnnsparse layer's parameters do not line up with the PyG conv's, an optimizer built
    on the model would keep training the old tensors: the conv is skipped, with the reason."""
    model = torch.nn.ModuleDict({"conv": pyg_nn.GCNConv(F_IN, 3)})
    monkeypatch.setattr(gnn.GCNConv, "from_pyg", classmethod(lambda cls, m: cls(F_IN, 4)))
    report = gst.accelerate(model)
    assert report.replaced == [] and type(model["conv"]) is pyg_nn.GCNConv
    assert len(report.skipped) == 1 and "differs" in report.skipped[0][2]
