"""gnnsparse.torch.nn's GINConv, GINEConv, GraphConv, SGConv and APPNP against torch_geometric's
layers given the same weights (fp64; outputs, input and edge gradients, parameter gradients), on
graphs with duplicate edges, self loops and empty rows; the graph arguments; from_pyg; bad inputs."""
from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
from conftest import torch_device_params  # noqa: E402
import gnnsparse.torch as gst  # noqa: E402
from gnnsparse.torch import nn as gnn  # noqa: E402

D = torch.float64
N, E, F_IN = 24, 110, 6
NB, EB = 13, 70  # bipartite: N sources -> NB targets
LAYERS = ["GINConv", "GINEConv", "GraphConv", "SGConv", "APPNP"]


@pytest.fixture(params=torch_device_params())
def graph(request):
    """N nodes with a duplicate edge (5 -> 6 twice), a node with two self loops (7), a node without
    in-edges (N - 1); a bipartite graph whose last target has no in-edges; random float features,
    edge weights and edge features (no ties for max / min)."""
    if request.param == "cpu":
        from conftest import sycl_or_skip

        sycl_or_skip()
    dev = request.param
    g = torch.Generator().manual_seed(5)
    src = torch.randint(0, N, (E,), generator=g)
    dst = torch.randint(0, N - 1, (E,), generator=g)
    src[:4], dst[:4] = torch.tensor([5, 5, 7, 7]), torch.tensor([6, 6, 7, 7])
    w = torch.rand(E, generator=g, dtype=D) + 0.1
    if dev == "cuda":
        # PyG's add_remaining_self_loops keeps the last loop's weight on the CPU but an arbitrary one on
        # CUDA (index_put with repeated indices): give node 7's two loops one weight there
        w[3] = w[2]
    bsrc, bdst = torch.randint(0, N, (EB,), generator=g), torch.randint(0, NB - 1, (EB,), generator=g)
    bsrc[:2], bdst[:2] = 3, 4  # a duplicate
    t = dict(ei=torch.stack([src, dst]), x=torch.randn(N, F_IN, generator=g, dtype=D), w=w,
             ea=torch.randn(E, F_IN, generator=g, dtype=D), ea3=torch.randn(E, 3, generator=g, dtype=D),
             ea9=torch.randn(E, 9, generator=g, dtype=D), bei=torch.stack([bsrc, bdst]),
             bx=torch.randn(NB, F_IN, generator=g, dtype=D), bea=torch.randn(EB, F_IN, generator=g, dtype=D),
             bw=torch.rand(EB, generator=g, dtype=D) + 0.1)
    return SimpleNamespace(dev=dev, **{k: v.to(dev) for k, v in t.items()})


def _pyg():
    return pytest.importorskip("torch_geometric.nn")


def _mlp(f_in=F_IN, f_out=5):
    return torch.nn.Sequential(torch.nn.Linear(f_in, 8), torch.nn.ReLU(), torch.nn.Linear(8, f_out)).double()


def _pair(ours_cls, theirs_cls, dev, *args, nn=None, **kw):
    """(ours, theirs) built with the same arguments; GIN-like layers get copies of one MLP."""
    if nn is not None:
        return (ours_cls(copy.deepcopy(nn), *args, **kw).double().to(dev),
                theirs_cls(copy.deepcopy(nn), *args, **kw).double().to(dev))
    return ours_cls(*args, **kw).double().to(dev), theirs_cls(*args, **kw).double().to(dev)


def _grads_close(a, b, what):
    if a is None or b is None:  # an input one side never reads: the other must send it nothing
        other = b if a is None else a
        assert other is None or not bool(other.any()), what
        return
    torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11, msg=lambda m: f"{what}: {m}")


# Node 7's first self loop (edge 2): gcn_norm keeps only the last loop's weight (edge 3), so the
# output does not depend on w[2]. PyG's add_remaining_self_loops writes both loops' weights into one
# slot with index_put, whose backward still hands the overwritten w[2] a gradient; ours is 0.
OVERWRITTEN_LOOP = 2


def _compare(ours, theirs, call, tensors, seed=None, load=True, zero_grad_rows=None):
    """call(layer, t) on both layers (theirs' state_dict loaded into ours), t fresh leaf copies of
    `tensors`: outputs, the gradients of every tensor in t and of every parameter agree.
    zero_grad_rows {name: row}: that row of our gradient is 0 and not compared with PyG's."""
    if load:
        ours.load_state_dict(theirs.state_dict())
    res = []
    for layer in (ours, theirs):
        t = {k: v.detach().clone().requires_grad_() for k, v in tensors.items()}
        if seed is not None:
            torch.manual_seed(seed)
        y = call(layer, t)
        G = torch.randn(y.shape, generator=torch.Generator().manual_seed(1), dtype=y.dtype).to(y.device)
        layer.zero_grad()
        (y * G).sum().backward()
        res.append((y.detach(), {k: v.grad for k, v in t.items()},
                    [(n, p.grad) for n, p in layer.named_parameters()]))
    (ya, ga, pa), (yb, gb, pb) = res
    torch.testing.assert_close(ya, yb, rtol=1e-10, atol=1e-12)
    for k in tensors:
        a, b = ga[k], gb[k]
        if zero_grad_rows and k in zero_grad_rows:
            r = zero_grad_rows[k]
            assert float(a[r]) == 0.0
            keep = torch.arange(a.shape[0], device=a.device) != r
            a, b = a[keep], b[keep]
        _grads_close(a, b, f"d{k}")
    assert [n for n, _ in pa] == [n for n, _ in pb]
    for (n, a), (_, b) in zip(pa, pb):
        _grads_close(a, b, f"d{n}")
    return ya


# ---------------------------------------------------------------- GIN / GINE
@pytest.mark.parametrize("kw", [{}, dict(eps=0.3, train_eps=True), dict(aggr="mean"), dict(aggr="max", train_eps=True),
                                dict(aggr="min", eps=-0.5)])
def test_gin_matches_pyg(graph, kw):
    pnn = _pyg()
    torch.manual_seed(0)
    ours, theirs = _pair(gnn.GINConv, pnn.GINConv, graph.dev, nn=_mlp(), **kw)
    _compare(ours, theirs, lambda m, t: m(t["x"], graph.ei), dict(x=graph.x))


@pytest.mark.parametrize("kw", [{}, dict(edge_dim=3), dict(edge_dim=9), dict(eps=0.1, train_eps=True, aggr="mean"),
                                dict(edge_dim=3, aggr="max")])
def test_gine_matches_pyg(graph, kw):
    pnn = _pyg()
    torch.manual_seed(0)
    ours, theirs = _pair(gnn.GINEConv, pnn.GINEConv, graph.dev, nn=_mlp(), **kw)
    ea = {None: graph.ea, 3: graph.ea3, 9: graph.ea9}[kw.get("edge_dim")]
    _compare(ours, theirs, lambda m, t: m(t["x"], graph.ei, t["ea"]), dict(x=graph.x, ea=ea))


@pytest.mark.parametrize("cls", ["GINConv", "GINEConv"])
@pytest.mark.parametrize("target", ["given", "none"])
def test_gin_bipartite_matches_pyg(graph, cls, target):
    pnn = _pyg()
    torch.manual_seed(0)
    ours, theirs = _pair(getattr(gnn, cls), getattr(pnn, cls), graph.dev, nn=_mlp(), train_eps=True, eps=0.2)
    edge = (lambda t: (t["ea"],)) if cls == "GINEConv" else (lambda t: ())
    tensors = dict(xs=graph.x, xd=graph.bx) if target == "given" else dict(xs=graph.x)
    if cls == "GINEConv":
        tensors["ea"] = graph.bea

    def call(m, t):
        if target == "given":
            return m((t["xs"], t["xd"]), graph.bei, *edge(t))
        return m((t["xs"], None), graph.bei, *edge(t), size=(N, NB))

    out = _compare(ours, theirs, call, tensors)
    assert out.shape == (NB, 5)


# ---------------------------------------------------------------- GraphConv
@pytest.mark.parametrize("aggr", ["add", "sum", "mean", "max", "min"])
@pytest.mark.parametrize("out", [3, 9], ids=["transform-first", "aggregate-first"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_graphconv_matches_pyg(graph, aggr, out, weighted):
    pnn = _pyg()
    torch.manual_seed(0)
    ours, theirs = _pair(gnn.GraphConv, pnn.GraphConv, graph.dev, F_IN, out, aggr=aggr)
    # the CUDA fixture gives node 7's two self loops one weight (for gcn_norm's layers), which ties
    # their messages under max / min; GraphConv adds no loops, so it takes distinct weights (on a
    # tie PyG splits the gradient, we route it to one winning edge as torch_scatter does)
    w = graph.w.clone()
    w[3] = w[2] + 0.25
    tensors = dict(x=graph.x, w=w) if weighted else dict(x=graph.x)
    _compare(ours, theirs, lambda m, t: m(t["x"], graph.ei, t.get("w")), tensors)


@pytest.mark.parametrize("aggr", ["add", "mean", "max"])
def test_graphconv_bipartite_no_bias_constant_weights(graph, aggr):
    pnn = _pyg()
    torch.manual_seed(0)
    ours, theirs = _pair(gnn.GraphConv, pnn.GraphConv, graph.dev, (F_IN, F_IN), 4, aggr=aggr, bias=False)
    # weights that need no gradient take the cached path: twice, the second a cache hit
    for _ in range(2):
        _compare(ours, theirs, lambda m, t: m((t["xs"], t["xd"]), graph.bei, graph.bw), dict(xs=graph.x, xd=graph.bx))
    _compare(ours, theirs, lambda m, t: m((t["xs"], None), graph.bei, size=(N, NB)), dict(xs=graph.x))


def _loop_row(kw, weighted):
    """zero_grad_rows for a weighted graph that gets gcn_norm's remaining self loops."""
    normalized = kw.get("normalize", True) and kw.get("add_self_loops", True)
    return {"w": OVERWRITTEN_LOOP} if (weighted and normalized) else None


# ---------------------------------------------------------------- SGConv
@pytest.mark.parametrize("K, weighted, loops, out", [(1, False, True, 3), (3, True, True, 3), (3, True, False, 9),
                                                     (2, False, True, 9), (0, False, True, 3)])
def test_sgconv_matches_pyg(graph, K, weighted, loops, out):
    pnn = _pyg()
    torch.manual_seed(0)
    ours, theirs = _pair(gnn.SGConv, pnn.SGConv, graph.dev, F_IN, out, K=K, add_self_loops=loops)
    tensors = dict(x=graph.x, w=graph.w) if weighted else dict(x=graph.x)
    _compare(ours, theirs, lambda m, t: m(t["x"], graph.ei, t.get("w")), tensors,
             zero_grad_rows=_loop_row(dict(add_self_loops=loops), weighted))


def test_sgconv_cached_keeps_the_first_features(graph):
    pnn = _pyg()
    torch.manual_seed(0)
    ours, theirs = _pair(gnn.SGConv, pnn.SGConv, graph.dev, F_IN, 3, K=2, cached=True)
    _compare(ours, theirs, lambda m, t: m(t["x"], graph.ei, graph.w), dict(x=graph.x))
    # later calls reuse the first call's propagated features: graph and x are ignored, x gets no gradient
    y = _compare(ours, theirs, lambda m, t: m(t["x"], graph.ei[:, :10]), dict(x=graph.x.flip(0)))
    ours.reset_parameters()
    assert ours._cached_x is None
    assert not torch.allclose(ours(graph.x, graph.ei[:, :10]), y)


# ---------------------------------------------------------------- APPNP
@pytest.mark.parametrize("kw, weighted", [(dict(K=1, alpha=0.1), False), (dict(K=3, alpha=0.2), True),
                                          (dict(K=3, alpha=0.1, add_self_loops=False), True),
                                          (dict(K=2, alpha=0.3, normalize=False), True),
                                          (dict(K=2, alpha=0.3, normalize=False), False),
                                          (dict(K=3, alpha=0.1, dropout=0.5), True), (dict(K=0, alpha=0.1), False)])
def test_appnp_matches_pyg_without_dropout(graph, kw, weighted):
    """dropout=0 in training, dropout=0.5 in eval mode: no edge dropped."""
    pnn = _pyg()
    ours, theirs = _pair(gnn.APPNP, pnn.APPNP, graph.dev, **kw)
    if kw.get("dropout"):
        ours.eval(), theirs.eval()
    tensors = dict(x=graph.x, w=graph.w) if weighted else dict(x=graph.x)
    _compare(ours, theirs, lambda m, t: m(t["x"], graph.ei, t.get("w")), tensors,
             zero_grad_rows=_loop_row(kw, weighted))


@pytest.mark.parametrize("kw", [dict(K=3, alpha=0.1), dict(K=2, alpha=0.2, normalize=False),
                                dict(K=3, alpha=0.1, add_self_loops=False)])
def test_appnp_edge_dropout_draws_pygs_masks(graph, kw):
    """In training PyG drops the (normalized) edge weights at each step, from the last step's; seeded
    alike, both draw the same masks (the weights are dropped in PyG's edge order)."""
    pnn = _pyg()
    ours, theirs = _pair(gnn.APPNP, pnn.APPNP, graph.dev, dropout=0.4, **kw)
    ours.train(), theirs.train()
    _compare(ours, theirs, lambda m, t: m(t["x"], graph.ei, t["w"]), dict(x=graph.x, w=graph.w), seed=7,
             zero_grad_rows=_loop_row(kw, True))
    torch.manual_seed(7)
    a = ours(graph.x, graph.ei, graph.w)
    b = ours(graph.x, graph.ei, graph.w)
    assert not torch.allclose(a, b)  # fresh masks per call


def test_appnp_cached_keeps_the_first_graph(graph):
    pnn = _pyg()
    ours, theirs = _pair(gnn.APPNP, pnn.APPNP, graph.dev, K=2, alpha=0.1, cached=True)
    _compare(ours, theirs, lambda m, t: m(t["x"], graph.ei, graph.w), dict(x=graph.x))
    _compare(ours, theirs, lambda m, t: m(t["x"], graph.ei[:, :10]), dict(x=graph.x.flip(0)))


# ---------------------------------------------------------------- dense references (no PyG needed)
def _adj(ei, n_dst, n_src, w=None):
    w = torch.ones(ei.shape[1], dtype=D, device=ei.device) if w is None else w
    return torch.zeros(n_dst, n_src, dtype=D, device=ei.device).index_put((ei[1], ei[0]), w, accumulate=True)


def test_layers_match_dense(graph):
    """GIN, GINE (sum), GraphConv (sum, weighted) and APPNP (normalize=False) against dense algebra."""
    ei, x, w = graph.ei, graph.x, graph.w
    torch.manual_seed(0)
    A = _adj(ei, N, N)
    gin = gnn.GINConv(_mlp(), eps=0.25).double().to(graph.dev)
    torch.testing.assert_close(gin(x, ei), gin.nn(A @ x + 1.25 * x), rtol=1e-10, atol=1e-12)
    gine = gnn.GINEConv(_mlp(), edge_dim=3).double().to(graph.dev)
    msg = torch.relu(x[ei[0]] + gine.lin(graph.ea3))
    agg = torch.zeros(N, F_IN, dtype=D, device=graph.dev).index_add(0, ei[1], msg)
    torch.testing.assert_close(gine(x, ei, graph.ea3), gine.nn(agg + x), rtol=1e-10, atol=1e-12)
    gc = gnn.GraphConv(F_IN, 4).double().to(graph.dev)
    torch.testing.assert_close(gc(x, ei, w), gc.lin_rel(_adj(ei, N, N, w) @ x) + gc.lin_root(x), rtol=1e-10,
                               atol=1e-12)
    ap = gnn.APPNP(3, 0.2, normalize=False)
    want = x
    for _ in range(3):
        want = 0.8 * (_adj(ei, N, N, w) @ want) + 0.2 * x
    torch.testing.assert_close(ap(x, ei, w), want, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- graph arguments
def _layer(name, dev):
    torch.manual_seed(0)
    if name in ("GINConv", "GINEConv"):
        return getattr(gnn, name)(_mlp(), train_eps=True, eps=0.1).double().to(dev)
    if name == "GraphConv":
        return gnn.GraphConv(F_IN, 4, aggr="mean").double().to(dev)
    if name == "SGConv":
        return gnn.SGConv(F_IN, 4, K=2).double().to(dev)
    return gnn.APPNP(K=2, alpha=0.1)


@pytest.mark.parametrize("name", LAYERS)
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_graph_arguments_agree(graph, name):
    """edge_index, PyG's EdgeIndex, gnnsparse.CSR (edge weights / features in the caller's order),
    GraphTensors and torch sparse matrices (stored values as edge weights, edge features in CSR
    order) give one result. Edges are unique and sorted by target, so that every order agrees."""
    pytest.importorskip("torch_geometric")
    from torch_geometric import EdgeIndex

    key = torch.unique(graph.ei[1] * N + graph.ei[0])
    ei = torch.stack([key % N, key // N])
    n = ei.shape[1]
    w, ea = graph.w[:n], graph.ea[:n]
    layer = _layer(name, graph.dev)

    def run(g, weights=True):
        if name == "GINEConv":
            return layer(graph.x, g, ea)
        if name == "GINConv":
            return layer(graph.x, g)
        return layer(graph.x, g, w if weights else None)

    want = run(ei)
    A = gs.CSR.from_edge_index(ei, N)
    Aw = gs.CSR.from_edge_index(ei, N, w)
    with torch.sparse.check_sparse_tensor_invariants():
        # GINConv weighs its sum by a torch sparse matrix's values, as PyG's does: give it ones
        S = torch.sparse_coo_tensor(torch.stack([ei[1], ei[0]]), torch.ones_like(w) if name == "GINConv" else w,
                                    (N, N))
        got = [run(EdgeIndex(ei, sparse_size=(N, N))), run(A), run(gst.graph_tensors(A, graph.x)),
               run(Aw, weights=False), run(S, weights=False), run(S.coalesce().to_sparse_csr(), weights=False)]
    for i, o in enumerate(got):
        torch.testing.assert_close(o, want, rtol=1e-12, atol=1e-12, msg=lambda m: f"graph argument {i}: {m}")


def test_bipartite_graph_tensors_argument(graph):
    """A bipartite GraphTensors (N sources x NB targets, built from an edge list: edge weights in its
    order) gives the edge_index result."""
    torch.manual_seed(0)
    layer = gnn.GraphConv((F_IN, F_IN), 4, aggr="max").double().to(graph.dev)
    g = gst.from_edge_index(graph.bei, NB, num_src=N)
    want = layer((graph.x, graph.bx), graph.bei, graph.bw)
    torch.testing.assert_close(layer((graph.x, graph.bx), g, graph.bw), want, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- from_pyg
def _pyg_layer(pnn, name, dev):
    torch.manual_seed(1)
    if name == "GINConv":
        m = pnn.GINConv(_mlp(), eps=0.3, train_eps=True)
    elif name == "GINEConv":
        m = pnn.GINEConv(_mlp(), edge_dim=3, aggr="mean")
    elif name == "GraphConv":
        m = pnn.GraphConv(F_IN, 4, aggr="max")
    elif name == "SGConv":
        m = pnn.SGConv(F_IN, 4, K=2, cached=True)
    else:
        m = pnn.APPNP(K=3, alpha=0.1, dropout=0.3, cached=True)
    return m.double().to(dev)


@pytest.mark.parametrize("name", LAYERS)
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_from_pyg_round_trip(graph, name, mode):
    pnn = _pyg()
    theirs = _pyg_layer(pnn, name, graph.dev).train(mode == "train")
    ours = getattr(gnn, name).from_pyg(theirs)
    assert type(ours) is getattr(gnn, name)
    assert ours.training == theirs.training and all(m.training == theirs.training for m in ours.modules())
    # the same Parameter objects (an optimizer made for the PyG model keeps working), same buffers
    assert [id(p) for p in ours.parameters()] == [id(p) for p in theirs.parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    if name in ("GINConv", "GINEConv"):
        assert ours.nn is theirs.nn and ours.eps is theirs.eps
    for p in ours.parameters():
        assert p.dtype == D and p.device.type == graph.dev
    if name == "GINEConv":
        call = lambda m, t: m(t["x"], graph.ei, graph.ea3)  # noqa: E731
    else:
        call = lambda m, t: m(t["x"], graph.ei, *(() if name == "GINConv" else (graph.w,)))  # noqa: E731
    _compare(ours, theirs, call, dict(x=graph.x), seed=3, load=False)
    if name in ("SGConv", "APPNP"):  # PyG's cache, filled by the call above, carries over
        again = getattr(gnn, name).from_pyg(theirs)
        _compare(again, theirs, lambda m, t: m(t["x"], graph.ei[:, :10]), dict(x=graph.x), seed=4, load=False)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_from_pyg_carries_appnps_cached_sparse_matrix(graph):
    """PyG's APPNP given a torch sparse adjacency caches the normalized matrix itself."""
    pnn = _pyg()
    key = torch.unique(graph.ei[1] * N + graph.ei[0])
    with torch.sparse.check_sparse_tensor_invariants():
        S = torch.sparse_coo_tensor(torch.stack([key // N, key % N]), graph.w[:key.numel()], (N, N)).to_sparse_csr()
        theirs = pnn.APPNP(K=2, alpha=0.1, cached=True).to(graph.dev)
        theirs(graph.x, S)
        ours = gnn.APPNP.from_pyg(theirs)
        _compare(ours, theirs, lambda m, t: m(t["x"], graph.ei[:, :10]), dict(x=graph.x), load=False)


def test_from_pyg_keeps_a_shared_nn_mode(graph):
    pnn = _pyg()
    theirs = pnn.GINConv(_mlp()).double().to(graph.dev)
    theirs.nn.eval()
    ours = gnn.GINConv.from_pyg(theirs)
    assert ours.training and not ours.nn.training


def test_from_pyg_rejects_what_it_cannot_convert():
    pnn = _pyg()
    with pytest.raises(TypeError, match="torch_geometric.nn.GraphConv"):
        gnn.GraphConv.from_pyg(pnn.GCNConv(4, 4))

    class MyGIN(pnn.GINConv):
        def message(self, x_j):
            return 2 * x_j

    with pytest.raises(TypeError, match="subclass"):
        gnn.GINConv.from_pyg(MyGIN(torch.nn.Linear(4, 4)))
    with pytest.raises(ValueError, match="lazy"):
        gnn.GraphConv.from_pyg(pnn.GraphConv(-1, 4))
    with pytest.raises(ValueError, match="aggr"):
        gnn.GraphConv.from_pyg(pnn.GraphConv(4, 4, aggr=["sum", "max"]))
    with pytest.raises(ValueError, match="flow"):
        gnn.GINConv.from_pyg(pnn.GINConv(torch.nn.Linear(4, 4), flow="target_to_source"))


# ---------------------------------------------------------------- bad inputs, determinism, reset
def test_bad_inputs_raise_clear_errors(graph):
    ei, x = graph.ei, graph.x
    torch.manual_seed(0)
    gine = gnn.GINEConv(_mlp()).double().to(graph.dev)
    with pytest.raises(ValueError, match="needs edge_attr"):
        gine(x, ei)
    with pytest.raises(ValueError, match="dimensionalities do not match.*edge_dim"):
        gine(x, ei, graph.ea3)
    with pytest.raises(ValueError, match="one row per edge"):
        gine(x, ei, graph.ea[:-1])
    with pytest.raises(ValueError, match="lin maps edge features to 8"):
        gnn.GINEConv(_mlp(8), edge_dim=3).double().to(graph.dev)(x, ei, graph.ea3)
    with pytest.raises(ValueError, match="Could not infer input channels"):
        gnn.GINEConv(torch.nn.ReLU(), edge_dim=3)
    with pytest.raises(ValueError, match="aggr must be one of"):
        gnn.GraphConv(F_IN, 4, aggr="mul")
    with pytest.raises(ValueError, match="aggr must be one of 'add', 'sum'"):
        gnn.SGConv(F_IN, 4, aggr="max")
    with pytest.raises(TypeError, match="does not support: node_dim"):
        gnn.GINConv(_mlp(), node_dim=0)
    with pytest.raises(ValueError, match="flow"):
        gnn.APPNP(2, 0.1, flow="target_to_source")
    gc = gnn.GraphConv(F_IN, 4).double().to(graph.dev)
    with pytest.raises(ValueError, match="edge_weight must have shape"):
        gc(x, ei, graph.w[:-1])
    with pytest.raises(ValueError, match="2-D"):
        gc(x[:, 0], ei)
    with pytest.raises(TypeError, match="source, target"):
        gc((x,), ei)
    A = gs.CSR.from_edge_index(ei, N)
    with pytest.raises(ValueError, match="target nodes"):
        gc((x, x[:5]), A)
    with pytest.raises(ValueError, match="size"):
        gc((x, None), ei, size=(N + 1, N))
    with pytest.raises(ValueError, match="outside the graph"):
        gc(x[:5], ei)
    for layer in (gnn.SGConv(F_IN, 4).double().to(graph.dev), gnn.APPNP(2, 0.1)):
        with pytest.raises(ValueError, match="bipartite"):
            layer((x, x), ei)
    with pytest.raises(ValueError, match="square"):
        gnn.APPNP(2, 0.1)(x, gst.from_edge_index(graph.bei, NB, num_src=N))
    with pytest.raises(ValueError, match="dropout"):
        gnn.APPNP(2, 0.1, dropout=1.5)
    with pytest.raises(ValueError, match="lazy"):
        gnn.GraphConv(-1, 4)
    with pytest.raises(ValueError, match="in_channels"):
        gnn.SGConv((3, 4), 4)


@pytest.mark.parametrize("name", ["GINEConv", "GraphConv"])
def test_forward_and_backward_are_deterministic(graph, name):
    torch.manual_seed(0)
    layer = (gnn.GINEConv(_mlp(), aggr="max") if name == "GINEConv" else gnn.GraphConv(F_IN, 4, aggr="max"))
    layer = layer.double().to(graph.dev)
    runs = []
    for _ in range(2):
        x = graph.x.clone().requires_grad_()
        w = graph.w.clone().requires_grad_()
        y = layer(x, graph.ei, graph.ea) if name == "GINEConv" else layer(x, graph.ei, w)
        layer.zero_grad()
        y.square().sum().backward()
        runs.append([y, x.grad] + [p.grad for p in layer.parameters()] + ([w.grad] if name == "GraphConv" else []))
    for a, b in zip(*runs):
        assert torch.equal(a, b)


def test_reset_parameters(graph):
    torch.manual_seed(0)
    gin = gnn.GINConv(_mlp(), eps=0.4, train_eps=True)
    with torch.no_grad():
        gin.eps.fill_(3.0)
        gin.nn[0].weight.zero_()
    gin.reset_parameters()
    assert gin.eps.detach().item() == pytest.approx(0.4) and bool(gin.nn[0].weight.any())
    gine = gnn.GINEConv(_mlp(), edge_dim=3)
    with torch.no_grad():
        gine.lin.weight.zero_()
    gine.reset_parameters()
    assert bool(gine.lin.weight.any())
    assert "eps" in dict(gin.named_parameters()) and "eps" in dict(gine.named_buffers())


# torch's compiler imports inductor and friends on first use, some of which announce deprecations of
# their own dependencies: not gnnsparse's to fix
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_layers_compile_fullgraph(graph):
    """GIN, GINE, GraphConv (edge weights) and APPNP (normalize=False) on a GraphTensors trace as one
    graph (SGConv and a normalizing APPNP build self loops, whose sizes depend on the data)."""
    A = gs.CSR.from_edge_index(graph.ei, N)
    g = gst.graph_tensors(A, graph.x)
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gin = gnn.GINConv(_mlp(F_IN, 8), train_eps=True)
            self.gine = gnn.GINEConv(_mlp(8, 8), edge_dim=3, aggr="max")
            self.gc = gnn.GraphConv(8, 6, aggr="mean")
            self.ap = gnn.APPNP(K=2, alpha=0.1, normalize=False)

        def forward(self, x, g, ea, w):
            h = self.gine(self.gin(x, g).relu(), g, ea)
            return self.ap(self.gc(h, g, w).relu(), g)

    net = Net().double().to(graph.dev)
    torch._dynamo.reset()
    comp = torch.compile(net, fullgraph=True, backend="aot_eager")
    xa, xb = graph.x.clone().requires_grad_(), graph.x.clone().requires_grad_()
    ya, yb = net(xa, g, graph.ea3, graph.w), comp(xb, g, graph.ea3, graph.w)
    torch.testing.assert_close(ya, yb, rtol=0, atol=0)
    ya.sum().backward()
    yb.sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad, rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta state:UserWarning")
def test_gin_takes_a_torch_sparse_adjacencys_values(graph):
    """PyG's GINConv multiplies by a torch sparse adj_t as it is (values included)."""
    pnn = _pyg()
    ident = torch.nn.Identity()
    theirs = pnn.GINConv(ident).double().to(graph.dev)
    ours = gnn.GINConv.from_pyg(theirs)
    with torch.sparse.check_sparse_tensor_invariants(enable=True):
        adj = torch.sparse_coo_tensor(torch.stack([graph.ei[1], graph.ei[0]]), graph.w, (N, N)).coalesce()
        adj = adj.to_sparse_csr()  # PyG warns for COO
    torch.testing.assert_close(ours(graph.x, adj), theirs(graph.x, adj), rtol=1e-10, atol=1e-12)
