"""GINConv, GINEConv, GraphConv, SGConv and APPNP with PyG's signatures, parameters and semantics, on
gnnsparse ops; public as gnnsparse.torch.nn.<name>.

Given the same weights each computes what torch_geometric.nn's layer of the same name computes (same
parameter and buffer names and shapes, so a PyG state_dict loads), deterministically: every
reduction over edges is a gnnsparse SpMM (no atomics, forward or backward). `Layer.from_pyg(m)`
turns a PyG layer into ours sharing its parameters (an optimizer built before keeps working).

The graph argument is what the other layers of gnnsparse.torch.nn take (see `graph_of`): a (2, E)
edge_index or EdgeIndex (edge weights / features in its edge order), a gnnsparse.CSR or
GraphTensors (their stored values are the edge weights of GraphConv, SGConv and APPNP; per-edge
inputs in the caller's order when the CSR was built from an edge list, else in CSR order), a
torch_sparse.SparseTensor or a torch sparse matrix (rows are targets). GIN and GINE ignore stored
edge values, as PyG's do, except that GINConv given a torch sparse matrix weighs its sum by the
matrix's values (PyG's GINConv multiplies by a torch sparse adj_t as it is, and drops the values
of a SparseTensor only).

Cost notes. GINEConv's message relu(x_j + lin(e_ji)) is not linear in x_j, so one (E, C) message
tensor is unavoidable (PyG builds the same); x_j is gathered in CSR order by an SpMM over a
one-entry-per-edge matrix (its gradient: the SpMM over the graph's transpose) and the messages are
reduced by an SpMM over the (rowptr, edge id) pattern. GraphConv (sum / mean) and SGConv (not
cached) apply their linear map before the aggregation when it has fewer output than input channels:
the same function, fewer channels through the SpMMs. APPNP folds (1 - alpha) into the edge weights.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from . import functional as gf
from .graph import GraphTensors, from_edge_index

__all__ = ["GINConv", "GINEConv", "GraphConv", "SGConv", "APPNP"]

# PyG's aggregation names -> the SpMM reductions
_AGGR = {"add": "sum", "sum": "sum", "mean": "mean", "max": "max", "min": "min"}


# ---------------------------------------------------------------- shared helpers
def _reduction(layer: str, aggr, allowed=tuple(_AGGR)) -> str:
    if not isinstance(aggr, str) or aggr not in allowed:
        raise ValueError(f"{layer}: aggr must be one of {', '.join(repr(a) for a in allowed)}; got {aggr!r} "
                         "(aggregation modules and lists are not supported)")
    return _AGGR[aggr]


def _message_passing_kwargs(layer: str, kwargs: dict, default_aggr: str = "add") -> str:
    """The PyG MessagePassing keyword arguments these layers take: aggr, and flow="source_to_target"."""
    kwargs = dict(kwargs)
    aggr = kwargs.pop("aggr", default_aggr)
    flow = kwargs.pop("flow", "source_to_target")
    if flow != "source_to_target":
        raise ValueError(f"{layer}: only flow='source_to_target' is supported, got {flow!r}")
    if kwargs:
        raise TypeError(f"{layer} got keyword arguments gnnsparse does not support: {', '.join(sorted(kwargs))}")
    return aggr


def _channels(layer: str, in_channels, pair: bool = True) -> Tuple[int, int]:
    """(source, target) input sizes; PyG's lazy -1 is not supported."""
    ins = (in_channels, in_channels) if isinstance(in_channels, int) or not pair else tuple(in_channels)
    if len(ins) != 2 or not all(isinstance(c, int) and c > 0 for c in ins):
        what = "a positive int or a pair of them" if pair else "a positive int"
        raise ValueError(f"{layer}: in_channels must be {what}, got {in_channels!r} (lazy initialization, -1, "
                         "is not supported)")
    return ins


def _pair(layer: str, x) -> Tuple[Tensor, Optional[Tensor]]:
    if isinstance(x, Tensor):
        return x, x
    if (isinstance(x, (tuple, list)) and len(x) == 2 and isinstance(x[0], Tensor)
            and (x[1] is None or isinstance(x[1], Tensor))):
        return x[0], x[1]
    raise TypeError(f"{layer}: x must be a tensor or a (source, target) pair of tensors (target may be None), "
                    f"got {type(x).__name__}")


def _single(layer: str, x) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (tuple, list)):
        raise ValueError(f"{layer} received a tuple of node features while this layer does not support bipartite "
                         "message passing")
    raise TypeError(f"{layer}: x must be a tensor, got {type(x).__name__}")


def _graph(layer: str, edge_index, x_src: Tensor, x_dst: Optional[Tensor], size) -> GraphTensors:
    """The graph with as many columns as x_src has rows and as many rows as x_dst (or size[1])."""
    if x_src.dim() != 2:
        raise ValueError(f"{layer}: node features must be 2-D (nodes, channels), got shape {tuple(x_src.shape)}")
    n_src = x_src.shape[0]
    want_dst = x_dst.shape[0] if x_dst is not None else None
    if size is not None:
        if len(size) != 2:
            raise ValueError(f"{layer}: size must be (num_source_nodes, num_target_nodes), got {size!r}")
        if size[0] is not None and int(size[0]) != n_src:
            raise ValueError(f"{layer}: size[0] = {size[0]} but x (source) has {n_src} rows")
        if size[1] is not None:
            if want_dst is not None and int(size[1]) != want_dst:
                raise ValueError(f"{layer}: size[1] = {size[1]} but x (target) has {want_dst} rows")
            want_dst = int(size[1])
    g = graph_of(edge_index, x_src, n_src, want_dst if want_dst is not None else n_src)
    if g.num_cols != n_src:
        raise ValueError(f"{layer}: the graph has {g.num_cols} source nodes (columns) but x (source) has {n_src} rows")
    if want_dst is not None and g.num_rows != want_dst:
        raise ValueError(f"{layer}: the graph has {g.num_rows} target nodes (rows) but x (target) has {want_dst} rows")
    return g


class _EdgeGraphs(NamedTuple):
    """Matrices over g's edges (CSR positions k) whose SpMMs move per-edge rows without atomics,
    forward and backward (each backward is the SpMM over the stored transpose):
    gather   (nnz x num_cols): row k holds the single entry col[k]; SpMM = X[col] per edge, and
             its backward sums per source over g's transpose.
    per_row  (num_rows x nnz): row i holds the ids of row i's edges; SpMM reduces per-edge rows
             per target node.
    to_csr   (nnz x nnz) or None: row k holds the single entry edge_perm[k]; SpMM puts per-edge
             rows given in the caller's edge order into CSR order."""
    gather: GraphTensors
    per_row: GraphTensors
    to_csr: Optional[GraphTensors]


def _edge_graphs(g: GraphTensors) -> _EdgeGraphs:
    """_EdgeGraphs from g's arrays (one arange; an argsort of edge_perm for to_csr)."""
    nnz, it = g.nnz, g.col.dtype
    one_each = torch.arange(nnz + 1, device=g.device, dtype=it)
    gather = GraphTensors(one_each, g.col, None, g.t_rowptr, g.t_perm, g.t_perm, g.eid, g.eid, None, nnz, g.num_cols)
    per_row = GraphTensors(g.rowptr, g.eid, None, one_each, g.rows, g.eid, g.rows, g.eid, None, g.num_rows, nnz)
    to_csr = None
    if g.edge_perm is not None:
        perm = g.edge_perm.to(it)
        inv = torch.argsort(g.edge_perm).to(it)  # the caller's edge j sits at CSR position inv[j]
        to_csr = GraphTensors(one_each, perm, None, one_each, inv, inv, g.eid, g.eid, None, nnz, nnz)
    return _EdgeGraphs(gather, per_row, to_csr)


def _check_per_edge(layer: str, name: str, g: GraphTensors, t: Tensor) -> None:
    """t is a per-edge tensor (E, ...) of the graph, on its device."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{layer}: {name} must be a tensor, got {type(t).__name__}")
    if t.dim() == 0 or t.shape[0] != g.nnz:
        raise ValueError(f"{layer}: {name} must have one row per edge ({g.nnz}), got shape {tuple(t.shape)}")
    if t.device != g.device:
        raise ValueError(f"{layer}: {name} is on {t.device} but the graph on {g.device}")


def _csr_order(eg: _EdgeGraphs, t: Tensor) -> Tensor:
    """Per-edge rows (E, D) in the graph's edge order (the caller's when it has edge_perm) -> CSR order."""
    return t if eg.to_csr is None else gf.spmm(eg.to_csr, t, "sum")


def _kept(g: GraphTensors, key: tuple, make, *inputs: Optional[Tensor]):
    """make(g), kept per graph by nn._derived; built afresh while torch.compile traces (the cache is
    keyed by tensor addresses, which a traced graph cannot hold)."""
    if torch.compiler.is_compiling():
        return make(g)
    return _derived(g, key, make, *inputs)


def _with_weights(g: GraphTensors, edge_weight: Optional[Tensor]) -> GraphTensors:
    """g with edge_weight (the caller's edge order) as its values; without, the graph's own values."""
    if edge_weight is None:
        return g
    if edge_weight.requires_grad and torch.is_grad_enabled():
        return g.with_val(gf._values(g, edge_weight, None))
    return _kept(g, ("edge_weight",), lambda base: base.with_val(gf._values(base, edge_weight, None)), edge_weight)


def _gcn_graph(g: GraphTensors, edge_weight: Optional[Tensor], dtype, add_self_loops: bool) -> GraphTensors:
    """PyG's gcn_norm (improved=False), kept per graph unless edge_weight needs a gradient (the same
    cache entry GCNConv uses)."""
    def make(base, w=None):
        return gf.gcn_norm(base, w, improved=False, add_self_loops=add_self_loops, dtype=dtype, like=base.device)

    if edge_weight is not None and edge_weight.requires_grad and torch.is_grad_enabled():
        return make(g, edge_weight)
    return _kept(g, ("gcn", False, add_self_loops, dtype), lambda base: make(base, edge_weight), edge_weight)


def _reset(value):
    """PyG's torch_geometric.nn.inits.reset: reset_parameters() of a module, else of its children."""
    if hasattr(value, "reset_parameters"):
        value.reset_parameters()
    else:
        for child in value.children() if hasattr(value, "children") else []:
            _reset(child)


def _check_pyg(cls, module) -> str:
    """module is PyG's layer of cls's name (not a subclass, which may change its messages); its aggr."""
    t = type(module)
    if t.__name__ != cls.__name__ or not t.__module__.startswith("torch_geometric."):
        raise TypeError(f"{cls.__name__}.from_pyg takes a torch_geometric.nn.{cls.__name__}, got "
                        f"{t.__module__}.{t.__qualname__} (a subclass may change message passing: convert it by hand)")
    flow = getattr(module, "flow", "source_to_target")
    if flow != "source_to_target":
        raise ValueError(f"{cls.__name__}.from_pyg: only flow='source_to_target' is supported, got {flow!r}")
    return getattr(module, "aggr", "add")


def _shared_linear(lin) -> torch.nn.Linear:
    """A torch.nn.Linear holding the same Parameter objects as a PyG (or torch) Linear."""
    w = lin.weight
    if isinstance(w, torch.nn.parameter.UninitializedParameter):
        raise ValueError("the PyG layer has a lazy Linear (in_channels=-1) that is not initialized yet: run one "
                         "forward pass before converting it")
    out = torch.nn.Linear(w.shape[1], w.shape[0], bias=lin.bias is not None, device="meta")
    out.weight = w
    if lin.bias is not None:
        out.bias = lin.bias
    return out


def _same_mode(layer: torch.nn.Module, module: torch.nn.Module, shared=()) -> None:
    """layer's own modules in module's training mode; shared submodules keep theirs."""
    layer.training = module.training
    for child in layer.children():
        if not any(child is s for s in shared):
            child.train(module.training)


# ---------------------------------------------------------------- GIN
class GINConv(torch.nn.Module):
    """The graph isomorphism operator (Xu et al.), as torch_geometric.nn.GINConv:
    out_i = nn((1 + eps) x_i + sum_{j -> i} x_j), eps a Parameter with train_eps, else a buffer;
    x may be a (source, target) pair. aggr (keyword, default "add") may also be mean / max / min."""

    def __init__(self, nn: Callable, eps: float = 0.0, train_eps: bool = False, **kwargs):
        super().__init__()
        self.aggr = _message_passing_kwargs(type(self).__name__, kwargs)
        self._reduce = _reduction(type(self).__name__, self.aggr)
        self.nn = nn
        self.initial_eps = eps
        if train_eps:
            self.eps = Parameter(torch.empty(1))
        else:
            self.register_buffer("eps", torch.empty(1))
        self.reset_parameters()

    def reset_parameters(self):
        """Resets nn (PyG's reset) and eps to its initial value."""
        _reset(self.nn)
        self.eps.data.fill_(self.initial_eps)

    def _aggregate(self, g: GraphTensors, x_src: Tensor, edge_attr: Optional[Tensor]) -> Tensor:
        return gf.spmm(g, x_src, self._reduce)

    def _forward(self, x, edge_index, edge_attr, size) -> Tensor:
        name = type(self).__name__
        x_src, x_dst = _pair(name, x)
        g = _graph(name, edge_index, x_src, x_dst, size)
        torch_sparse_adj = isinstance(edge_index, Tensor) and edge_index.layout != torch.strided
        if not (type(self) is GINConv and torch_sparse_adj):  # see the module docstring
            g = g.with_val(None)
        out = self._aggregate(g, x_src, edge_attr)
        if x_dst is not None:
            out = torch.addcmul(out, x_dst, 1 + self.eps)  # out + (1 + eps) x_i in one pass
        return self.nn(out)

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index, size=None) -> Tensor:
        """x (N, F) or a (source, target) pair -> nn((1 + eps) x_target + aggr over in-neighbours)."""
        return self._forward(x, edge_index, None, size)

    @classmethod
    def _from_pyg_common(cls, module):
        aggr = _check_pyg(cls, module)
        layer = cls(torch.nn.Identity(), eps=module.initial_eps, train_eps=isinstance(module.eps, Parameter),
                    aggr=aggr)
        layer.nn = module.nn  # shared, never reset
        layer.eps = module.eps  # the same Parameter (train_eps) or buffer tensor
        return layer

    @classmethod
    def from_pyg(cls, module) -> "GINConv":
        """The same layer on gnnsparse ops: shares module's nn and eps (Parameter or buffer) and
        takes its training mode; module is a torch_geometric.nn.GINConv."""
        layer = cls._from_pyg_common(module)
        _same_mode(layer, module, shared=(module.nn,))
        return layer

    def __repr__(self):
        return f"{self.__class__.__name__}(nn={self.nn})"


class GINEConv(GINConv):
    """GIN with edge features (Hu et al.), as torch_geometric.nn.GINEConv:
    out_i = nn((1 + eps) x_i + sum_{j -> i} relu(x_j + e_ji)), e = lin(edge_attr) with edge_dim
    (lin maps edge_dim to nn's input size), else edge_attr itself (its width must be x's).

    The messages form one (E, C) tensor (unavoidable: relu is applied per edge), reduced by an SpMM
    over the edges of each target node."""

    def __init__(self, nn: torch.nn.Module, eps: float = 0.0, train_eps: bool = False, edge_dim: Optional[int] = None,
                 **kwargs):
        lin = None
        if edge_dim is not None:
            first = nn[0] if isinstance(nn, torch.nn.Sequential) else nn
            if hasattr(first, "in_features"):
                in_channels = first.in_features
            elif hasattr(first, "in_channels"):
                in_channels = first.in_channels
            else:
                raise ValueError("Could not infer input channels from `nn`.")
            lin = torch.nn.Linear(edge_dim, in_channels)
        super().__init__(nn, eps, train_eps, **kwargs)
        self.lin = lin
        if lin is not None:
            lin.reset_parameters()

    def reset_parameters(self):
        """Resets nn (PyG's reset), eps to its initial value and lin."""
        super().reset_parameters()
        if getattr(self, "lin", None) is not None:
            self.lin.reset_parameters()

    def _edge_term(self, g: GraphTensors, eg: _EdgeGraphs, edge_attr: Optional[Tensor], channels: int) -> Tensor:
        """lin(edge_attr) (or edge_attr) in CSR order, (nnz, channels)."""
        name = type(self).__name__
        if edge_attr is None:
            raise ValueError(f"{name} needs edge_attr: one row of edge features per edge")
        _check_per_edge(name, "edge_attr", g, edge_attr)
        if edge_attr.dim() != 2:
            raise ValueError(f"{name}: edge_attr must be 2-D (edges, features), got shape {tuple(edge_attr.shape)}")
        if self.lin is None:
            if edge_attr.shape[1] != channels:
                raise ValueError("Node and edge feature dimensionalities do not match. Consider setting the "
                                 f"'edge_dim' attribute of '{name}' (x has {channels} channels, edge_attr "
                                 f"{edge_attr.shape[1]})")
            return _csr_order(eg, edge_attr)
        if self.lin.out_features != channels:
            raise ValueError(f"{name}: lin maps edge features to {self.lin.out_features} channels but x has {channels}")
        if edge_attr.shape[1] <= self.lin.out_features:  # reorder the narrower side
            return self.lin(_csr_order(eg, edge_attr))
        return _csr_order(eg, self.lin(edge_attr))

    def _aggregate(self, g: GraphTensors, x_src: Tensor, edge_attr: Optional[Tensor]) -> Tensor:
        eg = _kept(g, ("edge_graphs",), _edge_graphs)
        e = self._edge_term(g, eg, edge_attr, x_src.shape[1])
        x_j = gf.spmm(eg.gather, x_src, "sum")  # x_j per edge, CSR order
        msg = torch.relu_(x_j + e)  # the one (E, C) message tensor (relu in place on the fresh sum)
        return gf.spmm(eg.per_row, msg, self._reduce)

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index, edge_attr: Optional[Tensor] = None,
                size=None) -> Tensor:
        """x (N, F) or a (source, target) pair, edge_attr (E, F or edge_dim) in the graph's edge
        order -> nn((1 + eps) x_target + aggr over in-edges of relu(x_source + e))."""
        return self._forward(x, edge_index, edge_attr, size)

    @classmethod
    def from_pyg(cls, module) -> "GINEConv":
        """The same layer on gnnsparse ops: shares module's nn, eps and lin parameters and takes
        its training mode; module is a torch_geometric.nn.GINEConv."""
        layer = cls._from_pyg_common(module)
        if module.lin is not None:
            layer.lin = _shared_linear(module.lin)
        _same_mode(layer, module, shared=(module.nn,))
        return layer


# ---------------------------------------------------------------- GraphConv
class GraphConv(torch.nn.Module):
    """Morris et al.'s graph operator, as torch_geometric.nn.GraphConv:
    out_i = lin_rel(aggr_{j -> i} w_ji x_j) + lin_root(x_i), aggr add / sum / mean / max / min,
    w the edge weights (1 without); x may be a (source, target) pair."""

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int, aggr: str = "add",
                 bias: bool = True, **kwargs):
        super().__init__()
        name = type(self).__name__
        self.aggr = _message_passing_kwargs(name, kwargs, aggr)
        self._reduce = _reduction(name, self.aggr)
        self.in_channels, self.out_channels = in_channels, out_channels
        ins = _channels(name, in_channels)
        self.lin_rel = torch.nn.Linear(ins[0], out_channels, bias=bias)
        self.lin_root = torch.nn.Linear(ins[1], out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self):
        """The linear layers' default initialisation (as PyG's Linear)."""
        self.lin_rel.reset_parameters()
        self.lin_root.reset_parameters()

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index,
                edge_weight: Optional[Tensor] = None, size=None) -> Tensor:
        """x (N, F) or a (source, target) pair, edge_weight (E,) in the graph's edge order ->
        lin_rel(aggr over in-neighbours of w x_source) + lin_root(x_target)."""
        name = type(self).__name__
        x_src, x_dst = _pair(name, x)
        g = _with_weights(_graph(name, edge_index, x_src, x_dst, size), edge_weight)
        W, b = self.lin_rel.weight, self.lin_rel.bias
        if self._reduce in ("sum", "mean") and W.shape[0] < W.shape[1]:
            # linear aggregation: lin_rel(A x) = A (x W^T) + b, with fewer channels through the SpMM
            out = gf.spmm(g, F.linear(x_src, W), self._reduce)
            if b is not None:
                out = out + b
        else:
            out = F.linear(gf.spmm(g, x_src, self._reduce), W, b)
        if x_dst is not None:
            out = torch.addmm(out, x_dst, self.lin_root.weight.t())  # out + lin_root(x_target)
        return out

    @classmethod
    def from_pyg(cls, module) -> "GraphConv":
        """The same layer on gnnsparse ops, sharing module's parameters, in its training mode;
        module is a torch_geometric.nn.GraphConv."""
        aggr = _check_pyg(cls, module)
        rel, root = _shared_linear(module.lin_rel), _shared_linear(module.lin_root)
        layer = cls((rel.in_features, root.in_features), module.out_channels, aggr=aggr, bias=rel.bias is not None)
        layer.in_channels = module.in_channels
        layer.lin_rel, layer.lin_root = rel, root
        _same_mode(layer, module)
        return layer

    def __repr__(self):
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


# ---------------------------------------------------------------- SGC
class SGConv(torch.nn.Module):
    """Simple graph convolution (Wu et al.), as torch_geometric.nn.SGConv:
    out = lin((D^-1/2 (A + I) D^-1/2)^K x), weighted by edge_weight when given. With cached=True the
    propagated features of the first call are kept and reused (graph and x of later calls are
    ignored, gradients no longer reach x), as PyG does."""

    def __init__(self, in_channels: int, out_channels: int, K: int = 1, cached: bool = False,
                 add_self_loops: bool = True, bias: bool = True, **kwargs):
        super().__init__()
        name = type(self).__name__
        self.aggr = _message_passing_kwargs(name, kwargs)
        _reduction(name, self.aggr, ("add", "sum"))
        _channels(name, in_channels, pair=False)
        self.in_channels, self.out_channels, self.K = in_channels, out_channels, K
        self.cached, self.add_self_loops = cached, add_self_loops
        self._cached_x: Optional[Tensor] = None
        self.lin = torch.nn.Linear(in_channels, out_channels, bias=bias)
        self.reset_parameters()

    def reset_parameters(self):
        """lin's default initialisation (as PyG's Linear); forgets cached features."""
        self.lin.reset_parameters()
        self._cached_x = None

    def forward(self, x: Tensor, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        """x (N, in_channels) -> lin(S^K x), S the GCN-normalized adjacency with self loops."""
        name = type(self).__name__
        if self._cached_x is not None:
            return self.lin(self._cached_x)
        x = _single(name, x)
        g = _gcn_graph(_graph(name, edge_index, x, None, None), edge_weight, x.dtype, self.add_self_loops)
        W, b = self.lin.weight, self.lin.bias
        if not self.cached and self.K > 0 and W.shape[0] < W.shape[1]:
            h = F.linear(x, W)  # S^K (x W^T) + b: the same map, fewer channels through the SpMMs
            for _ in range(self.K):
                h = gf.spmm(g, h, "sum")
            return h if b is None else h + b
        for _ in range(self.K):
            x = gf.spmm(g, x, "sum")
        if self.cached:
            self._cached_x = x.detach()
        return self.lin(x)

    @classmethod
    def from_pyg(cls, module) -> "SGConv":
        """The same layer on gnnsparse ops, sharing module's parameters (and its cached features),
        in its training mode; module is a torch_geometric.nn.SGConv."""
        aggr = _check_pyg(cls, module)
        lin = _shared_linear(module.lin)
        layer = cls(lin.in_features, module.out_channels, K=module.K, cached=module.cached,
                    add_self_loops=module.add_self_loops, bias=lin.bias is not None, aggr=aggr)
        layer.in_channels = module.in_channels
        layer.lin = lin
        if module._cached_x is not None:
            layer._cached_x = module._cached_x.detach()
        _same_mode(layer, module)
        return layer

    def __repr__(self):
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, K={self.K})"


# ---------------------------------------------------------------- APPNP
class APPNP(torch.nn.Module):
    """Personalized-PageRank propagation (Gasteiger et al.), as torch_geometric.nn.APPNP:
    h = x; K times x = (1 - alpha) S x + alpha h, S the GCN-normalized adjacency (normalize=True,
    self loops with add_self_loops) or the graph's edge weights as given (normalize=False; weight 1
    without). In training with dropout > 0 the edge weights are dropped out at every step, each step
    from the previous step's dropped weights and in PyG's edge order, so a seeded run draws PyG's
    masks. cached=True keeps the first call's normalized graph (as PyG does)."""

    def __init__(self, K: int, alpha: float, dropout: float = 0.0, cached: bool = False,
                 add_self_loops: bool = True, normalize: bool = True, **kwargs):
        super().__init__()
        name = type(self).__name__
        self.aggr = _message_passing_kwargs(name, kwargs)
        _reduction(name, self.aggr, ("add", "sum"))
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"{name}: dropout must be in [0, 1], got {dropout}")
        self.K, self.alpha, self.dropout = K, alpha, dropout
        self.cached, self.add_self_loops, self.normalize = cached, add_self_loops, normalize
        self._cached_graph: Optional[GraphTensors] = None
        self._pyg_cache = None  # a converted PyG layer's cached (edge_index, edge_weight), built on first use

    def reset_parameters(self):
        """APPNP has no parameters: forgets a cached graph."""
        self._cached_graph = None
        self._pyg_cache = None

    def _propagation_graph(self, x: Tensor, edge_index, edge_weight: Optional[Tensor]) -> GraphTensors:
        name = type(self).__name__
        if not self.normalize:
            return _with_weights(_graph(name, edge_index, x, None, None), edge_weight)
        if self.cached and self._cached_graph is not None:
            return self._cached_graph
        if self._pyg_cache is not None:
            ei, w = self._pyg_cache
            if ei.layout == torch.strided:  # (edge_index, normalized weights) in PyG's edge order
                g = from_edge_index(ei.as_subclass(Tensor).to(x.device), x.shape[0], w.to(x.device))
            else:  # a torch sparse matrix holding the normalized weights
                g = graph_of(ei, x)
        else:
            g = _gcn_graph(_graph(name, edge_index, x, None, None), edge_weight, x.dtype, self.add_self_loops)
        if self.cached:
            self._cached_graph = g
        return g

    def forward(self, x: Tensor, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        """x (N, F) -> K steps of x = (1 - alpha) S x + alpha x_0 (edge_weight (E,) in the graph's
        edge order)."""
        x = _single(type(self).__name__, x)
        g = self._propagation_graph(x, edge_index, edge_weight)
        if self.K <= 0:
            return x
        w = g.val if g.val is not None else torch.ones(g.nnz, dtype=x.dtype, device=x.device)
        keep = 1.0 - self.alpha
        ah = self.alpha * x
        if not (self.dropout > 0 and self.training):
            gk = g.with_val(w * keep)
            for _ in range(self.K):
                x = gf.spmm(gk, x, "sum") + ah
            return x
        perm = g.edge_perm
        w_in = w if perm is None else w[torch.argsort(perm)]  # PyG's edge order
        for _ in range(self.K):
            w_in = F.dropout(w_in, p=self.dropout)  # each step from the last one's weights, as PyG
            wk = w_in if perm is None else w_in[perm]
            x = gf.spmm(g.with_val(wk * keep), x, "sum") + ah
        return x

    @classmethod
    def from_pyg(cls, module) -> "APPNP":
        """The same layer on gnnsparse ops (and module's cached normalized graph), in its training
        mode; module is a torch_geometric.nn.APPNP."""
        aggr = _check_pyg(cls, module)
        layer = cls(module.K, module.alpha, dropout=module.dropout, cached=module.cached,
                    add_self_loops=module.add_self_loops, normalize=module.normalize, aggr=aggr)
        if getattr(module, "_cached_edge_index", None) is not None:
            layer._pyg_cache = tuple(module._cached_edge_index)
        elif getattr(module, "_cached_adj_t", None) is not None:
            adj = module._cached_adj_t
            layer._cached_graph = graph_of(adj, adj.storage.value())
        _same_mode(layer, module)
        return layer

    def __repr__(self):
        return f"{self.__class__.__name__}(K={self.K}, alpha={self.alpha})"


# graph_of and _derived live in nn.py, which imports this module at its end: imported last, so that
# importing either module first works.
from .nn import _derived, graph_of  # noqa: E402
