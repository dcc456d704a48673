"""GCNConv, GATConv and SAGEConv with PyG's signatures, parameters and semantics, on gnnsparse ops.

Given the same weights they compute what torch_geometric.nn's layers of the same name compute
(same parameter names and shapes, so a PyG state_dict loads), deterministically, and GATConv never
materializes a per-(edge, head, channel) tensor: its attention chain (scores -> leaky_relu -> row
softmax -> weighted sum over the heads) is one FusedMM call, forward and backward in per-edge
(nnz, H) memory.

The graph argument (`edge_index`) may be a (2, E) edge_index tensor (row 0 source, row 1 target;
converted once and cached while the tensor lives unchanged), a gnnsparse.CSR (one row per target),
a GraphTensors, a PyG EdgeIndex, a torch_sparse.SparseTensor (PyG's adj_t) or a torch sparse
matrix (rows are targets). Under torch.compile(fullgraph=True) the conversion and the self loops
are traced into the compiled graph (custom ops) and run on every call instead of being cached.

Each layer's classmethod from_pyg(module) builds it from the torch_geometric conv of the same name
(options, weights, dtype, device, mode); gnnsparse.torch.accelerate(model) does so for a model.
"""
from __future__ import annotations

import collections
import math
import weakref
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from . import _library as L
from . import functional as gf
from .graph import GraphTensors, _self_loops, as_graph_tensors, graph_tensors

__all__ = ["GCNConv", "GATConv", "SAGEConv", "TransformerConv", "GATv2Conv", "GINConv", "GINEConv", "GraphConv",
           "SGConv", "APPNP", "graph_of"]

# ---------------------------------------------------------------- graph inputs
class _ObjectCache:
    """Values kept per live object (by identity; tensors compare elementwise, so WeakKeyDictionary
    cannot hold them). An entry goes when its object dies."""

    def __init__(self):
        self._d: dict = {}

    def get(self, obj):
        e = self._d.get(id(obj))
        return e[1] if e is not None and e[0]() is obj else None

    def set(self, obj, value):
        k = id(obj)
        d = self._d
        d[k] = (weakref.ref(obj, lambda _r, k=k: d.pop(k, None)), value)
        return value


_FROM_TENSOR = _ObjectCache()
_DERIVED = _ObjectCache()


def _tracing() -> bool:
    """True while torch.compile traces: caches keyed by object identity, addresses and version
    counters cannot be traced, so the graph is prepared inside the compiled graph instead."""
    return torch.compiler.is_compiling()


def graph_of(edge_index, like: Tensor, num_src: Optional[int] = None, num_dst: Optional[int] = None) -> GraphTensors:
    """The layers' graph argument as GraphTensors on like's device. An edge_index tensor is
    converted once per (tensor, version, sizes) and kept while the tensor lives (while
    torch.compile traces: converted inside the compiled graph, on every call)."""
    if isinstance(edge_index, GraphTensors) or hasattr(edge_index, "rowptr"):
        return graph_tensors(edge_index, like)
    if isinstance(edge_index, Tensor) and edge_index.layout == torch.strided:
        from .graph import from_edge_index

        ei = edge_index.as_subclass(Tensor) if type(edge_index) is not Tensor else edge_index
        n_src = num_src if num_src is not None else like.shape[0]
        n_dst = num_dst if num_dst is not None else n_src
        if _tracing():
            return from_edge_index(ei.to(like.device), n_dst, num_src=n_src)
        n_src, n_dst = int(n_src), int(n_dst)
        try:
            key = (ei._version, ei.data_ptr(), n_src, n_dst, str(like.device))
        except RuntimeError:  # an inference tensor: no version counter, converted every call
            return from_edge_index(ei.to(like.device), n_dst, num_src=n_src)
        hit = _FROM_TENSOR.get(edge_index)
        if hit is not None and hit[0] == key:
            return hit[1]
        g = from_edge_index(ei.to(like.device), n_dst, num_src=n_src)
        _FROM_TENSOR.set(edge_index, (key, g))
        return g
    return as_graph_tensors(edge_index, like)


def _stamp(t: Optional[Tensor]):
    if t is None:
        return None
    try:
        return (t.data_ptr(), t._version, t.dtype)
    except RuntimeError:
        return False


def _derived(g: GraphTensors, key: tuple, make, *inputs: Optional[Tensor]):
    """make(g), kept per graph (anchored on its col tensor) for inputs that carry no gradient.

    Keyed by the addresses and version counters of g.val and `inputs`; the entry holds those
    tensors, so their addresses cannot be reused while it is kept. At most 8 entries per graph.
    While torch.compile traces, nothing is kept: make(g) becomes part of the compiled graph."""
    if _tracing():
        return make(g)
    store = _DERIVED.get(g.col)
    if store is None:
        store = _DERIVED.set(g.col, collections.OrderedDict())
    stamps = tuple(_stamp(t) for t in (g.val, g.rowptr) + inputs)
    if False in stamps:  # inference tensors: no version counter, nothing kept
        return make(g)
    full = key + stamps
    hit = store.get(full)
    if hit is None:
        hit = store[full] = ((g.val, g.rowptr) + inputs, make(g))
        if len(store) > 8:
            store.popitem(last=False)
    else:
        store.move_to_end(full)
    return hit[1]


def _kept_edges(g: GraphTensors) -> GraphTensors:
    """(n x nnz) pattern: row i holds the ids of node i's edges that are not self loops."""
    from .graph import _index_dtype, build

    dropped, ids = _self_loops(g.with_val(None), "drop")
    return build(dropped.rowptr, ids, None, g.nnz, itype=_index_dtype(g.num_rows, g.nnz))


def _glorot_param(t: Tensor):
    # PyG's glorot on an (1, H, C) attention vector: bound sqrt(6 / (H + C))
    a = math.sqrt(6.0 / (t.size(-2) + t.size(-1)))
    with torch.no_grad():
        t.uniform_(-a, a)


class _GlorotLinear(torch.nn.Linear):
    """PyG's Linear(weight_initializer='glorot'): xavier uniform weight, zero bias."""

    def reset_parameters(self):
        torch.nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)


# ---------------------------------------------------------------- projected widths
def _head_width(x: Tensor, lin, C: int) -> int:
    """The per-head width at which a layer forms its projected features lin(x): C, or, where the
    CUDA kernels would run a call at C on zero-padded copies (float32 on CUDA, C not a multiple of
    4, C >= 16, GNNSPARSE_CUDA_PAD on: gnnsparse._ops.vector_width), C rounded up to the 4-float
    vector. The projection then writes the zero columns itself (_project), so no sparse call of the
    layer, forward or backward, copies an (N, H, C) array to pad it or cuts its output back; the
    layer returns the first C columns of each head. Only for a plain Linear (whose forward is
    F.linear of its weight and bias)."""
    if type(lin) not in (torch.nn.Linear, _GlorotLinear):
        return C
    return _vector_width(x.device.type, "float32" if x.dtype == torch.float32 else str(x.dtype), C)


def _vector_width(device_type: str, dt: str, C: int) -> int:
    from .._ops import vector_width

    return vector_width(device_type, dt, C, layer=True)


def _project(x: Tensor, lin, H: int, C: int, Cp: int) -> Tensor:
    """lin(x) as (N, H, Cp): each head's C columns, followed by Cp - C zero columns when Cp > C (the
    weight's (H * C, in) rows and the bias are padded per head: small copies per call, and the
    zeros get no gradient back into the parameters)."""
    if Cp == C:
        return lin(x).view(-1, H, C)
    w, b = lin.weight, lin.bias
    w = F.pad(w.view(H, C, w.shape[-1]), (0, 0, 0, Cp - C)).view(H * Cp, w.shape[-1])
    if b is not None:
        b = F.pad(b.view(H, C), (0, Cp - C)).view(H * Cp)
    return F.linear(x, w, b).view(-1, H, Cp)


def _project_aggregate(x: Tensor, lin, C: int, aggregate) -> Tensor:
    """aggregate(lin(x)) (N, C): the projection formed at the head width (_head_width, _project; one
    head), aggregated by `aggregate` ((N, Cp) -> (M, Cp)), then its first C columns (a view: the zero
    columns _project added; no padded copy in the sparse call's forward or backward)."""
    Cp = _head_width(x, lin, C)
    out = aggregate(_project(x, lin, 1, C, Cp).view(-1, Cp))
    return out[:, :C] if Cp != C else out


# ---------------------------------------------------------------- from PyG
# Each layer's classmethod from_pyg(module) returns the layer equivalent to a torch_geometric conv
# (gnnsparse.torch.accelerate calls it); these helpers are shared by every from_pyg.
def _pyg_options(module, aggr=("add",), node_dims=(-2, 0)) -> None:
    """Raise ValueError naming the first MessagePassing option of `module` the gnnsparse layers do
    not implement (aggr None: the layer checks it), or lazy parameters not yet initialized."""
    a = getattr(module, "aggr", None)
    if aggr is not None and a not in aggr:
        raise ValueError(f"aggr={a!r} (gnnsparse's {type(module).__name__} aggregates with {', '.join(aggr)})")
    flow = getattr(module, "flow", "source_to_target")
    if flow != "source_to_target":
        raise ValueError(f"flow={flow!r} (gnnsparse's layers take source_to_target)")
    nd = getattr(module, "node_dim", node_dims[0])
    if nd not in node_dims:
        raise ValueError(f"node_dim={nd} (gnnsparse's layers take nodes along dimension {node_dims[0]})")
    dl = getattr(module, "decomposed_layers", 1)
    if dl != 1:
        raise ValueError(f"decomposed_layers={dl} (gnnsparse's layers run undecomposed)")
    for name, p in module.named_parameters():
        if isinstance(p, torch.nn.parameter.UninitializedParameter):
            raise ValueError(f"its lazy parameter {name} is not initialized yet (in_channels=-1): run the model "
                             "once before converting it")


def _pyg_in_channels(declared, src: int, dst: int):
    """in_channels as the layer's constructor takes them: PyG's value, or, for a lazily initialized
    layer (declared -1), the sizes its weights took."""
    if isinstance(declared, int) and declared > 0:
        return declared
    if not isinstance(declared, int) and all(c > 0 for c in declared):
        return tuple(declared)
    return src if src == dst and isinstance(declared, int) else (src, dst)


def _from_pyg_finish(layer: torch.nn.Module, module: torch.nn.Module) -> torch.nn.Module:
    """`layer` with `module`'s weights (load_state_dict, strict), parameter dtype and device,
    requires_grad flags and training mode."""
    p = next(module.parameters(), None)
    if p is not None:
        layer = layer.to(device=p.device, dtype=p.dtype)
    layer.load_state_dict(module.state_dict())
    theirs = dict(module.named_parameters())
    for name, q in layer.named_parameters():
        if name in theirs:
            q.requires_grad_(theirs[name].requires_grad)
    return layer.train(module.training)


def _pyg_gcn_cache(module) -> Optional[GraphTensors]:
    """A PyG GCNConv's cached normalized graph as GraphTensors (None when nothing is cached)."""
    ei_cache, adj_cache = getattr(module, "_cached_edge_index", None), getattr(module, "_cached_adj_t", None)
    if ei_cache is not None:
        ei, w = ei_cache
        if isinstance(ei, Tensor) and ei.layout == torch.strided:
            if not module.add_self_loops:
                raise ValueError("it holds a cached graph without self loops, whose node count is unknown "
                                 "(convert it before its first call)")
            from .graph import from_edge_index

            ei = ei.as_subclass(Tensor)
            return from_edge_index(ei, int(ei.max()) + 1 if ei.numel() else 0, edge_weight=w)
        return as_graph_tensors(ei, ei.device)
    if adj_cache is not None:
        return as_graph_tensors(adj_cache, adj_cache.device())
    return None


# ---------------------------------------------------------------- GCN
class GCNConv(torch.nn.Module):
    """Kipf & Welling's graph convolution, as torch_geometric.nn.GCNConv:
    out = D^-1/2 (A + I) D^-1/2 x W + b, weighted by edge_weight when given."""

    def __init__(self, in_channels: int, out_channels: int, improved: bool = False, cached: bool = False,
                 add_self_loops: Optional[bool] = None, normalize: bool = True, bias: bool = True):
        super().__init__()
        if add_self_loops is None:
            add_self_loops = normalize
        if add_self_loops and not normalize:
            raise ValueError("GCNConv does not support adding self-loops to the graph when no on-the-fly "
                             "normalization is applied")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.improved, self.cached, self.add_self_loops, self.normalize = improved, cached, add_self_loops, normalize
        self._cached_graph: Optional[GraphTensors] = None
        self.lin = _GlorotLinear(in_channels, out_channels, bias=False)
        self.bias = Parameter(torch.empty(out_channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """Glorot weights and a zero bias (as PyG's); forgets a cached graph."""
        self.lin.reset_parameters()
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)
        self._cached_graph = None

    @classmethod
    def from_pyg(cls, module) -> "GCNConv":
        """The layer equivalent to a torch_geometric.nn.GCNConv: its options, weights (copied),
        dtype, device, training mode and cached graph. ValueError naming an option this layer
        lacks (another aggr, flow, node_dim or decomposed_layers)."""
        _pyg_options(module)
        w = module.lin.weight
        layer = cls(_pyg_in_channels(module.in_channels, w.shape[1], w.shape[1]), module.out_channels,
                    improved=module.improved, cached=module.cached, add_self_loops=module.add_self_loops,
                    normalize=module.normalize, bias=module.bias is not None)
        cached = _pyg_gcn_cache(module) if module.cached else None
        layer = _from_pyg_finish(layer, module)
        layer._cached_graph = cached
        return layer

    def _norm(self, g: GraphTensors, edge_weight: Optional[Tensor], dtype) -> GraphTensors:
        if not self.normalize:
            return g if edge_weight is None else g.with_val(gf._values(g, edge_weight, None))

        def make(base, w=None):
            return gf.gcn_norm(base, w, improved=self.improved, add_self_loops=self.add_self_loops, dtype=dtype,
                               like=base.device)

        if edge_weight is not None and (edge_weight.requires_grad and torch.is_grad_enabled()):
            return make(g, edge_weight)
        return _derived(g, ("gcn", self.improved, self.add_self_loops, dtype),
                        lambda base: make(base, edge_weight), edge_weight)

    def forward(self, x: Tensor, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        """x (N, in_channels) -> (N, out_channels): D^-1/2 (A + I) D^-1/2 x W + b. edge_index: a
        (2, E) tensor, a gnnsparse.CSR, GraphTensors, a torch sparse tensor or a SparseTensor;
        edge_weight: (E,) weights of edge_index's edges."""
        if isinstance(x, (tuple, list)):
            raise ValueError("GCNConv received a tuple of node features while this layer does not support "
                             "bipartite message passing; use SAGEConv or GATConv")
        if self.cached and self._cached_graph is not None:
            g = self._cached_graph
            if not isinstance(g, GraphTensors):
                g = GraphTensors(*g)
        else:
            g = self._norm(graph_of(edge_index, x), edge_weight, x.dtype)
            if self.cached:
                # torch.compile can keep a plain tuple as the module's state (not a NamedTuple)
                self._cached_graph = tuple(g) if _tracing() else g
        out = _project_aggregate(x, self.lin, self.out_channels, lambda h: gf.spmm(g, h, "sum"))
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self):
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels})"


# ---------------------------------------------------------------- GAT
class GATConv(torch.nn.Module):
    """Graph attention (Velickovic et al.), as torch_geometric.nn.GATConv:
    alpha_ij = softmax_j(leaky_relu(a_src . W x_j + a_dst . W x_i)), out_i = sum_j alpha_ij W x_j per
    head, heads concatenated or averaged, + bias.

    Without attention dropout (or in eval mode) the chain is one fused call (see
    gnnsparse.torch.fusedmm, edge="leaky_relu_softmax"); with dropout, edge features or
    return_attention_weights the attention weights are formed as an (nnz, H) tensor, dropped out,
    and aggregated by spmm_heads, still without any (nnz, H, C) tensor.
    """

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 edge_dim: Optional[int] = None, fill_value: Union[float, Tensor, str] = "mean", bias: bool = True,
                 residual: bool = False):
        super().__init__()
        self.in_channels, self.out_channels, self.heads, self.concat = in_channels, out_channels, heads, concat
        self.negative_slope, self.dropout, self.add_self_loops = negative_slope, dropout, add_self_loops
        self.edge_dim, self.fill_value, self.residual = edge_dim, fill_value, residual
        self.lin = self.lin_src = self.lin_dst = None
        if isinstance(in_channels, int):
            self.lin = _GlorotLinear(in_channels, heads * out_channels, bias=False)
        else:
            self.lin_src = _GlorotLinear(in_channels[0], heads * out_channels, bias=False)
            self.lin_dst = _GlorotLinear(in_channels[1], heads * out_channels, bias=False)
        self.att_src = Parameter(torch.empty(1, heads, out_channels))
        self.att_dst = Parameter(torch.empty(1, heads, out_channels))
        if edge_dim is not None:
            self.lin_edge = _GlorotLinear(edge_dim, heads * out_channels, bias=False)
            self.att_edge = Parameter(torch.empty(1, heads, out_channels))
        else:
            self.lin_edge = None
            self.register_parameter("att_edge", None)
        total = out_channels * (heads if concat else 1)
        if residual:
            self.res = _GlorotLinear(in_channels if isinstance(in_channels, int) else in_channels[1], total,
                                     bias=False)
        else:
            self.register_parameter("res", None)
        self.bias = Parameter(torch.empty(total)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """Glorot weights and attention vectors, zero bias (as PyG's)."""
        for m in (self.lin, self.lin_src, self.lin_dst, self.lin_edge, self.res):
            if m is not None:
                m.reset_parameters()
        _glorot_param(self.att_src)
        _glorot_param(self.att_dst)
        if self.att_edge is not None:
            _glorot_param(self.att_edge)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    @classmethod
    def from_pyg(cls, module) -> "GATConv":
        """The layer equivalent to a torch_geometric.nn.GATConv: its options (heads, concat,
        negative_slope, dropout, add_self_loops, edge_dim, fill_value, bias, residual), weights
        (copied), dtype, device and training mode. ValueError naming an option this layer lacks."""
        _pyg_options(module, node_dims=(0,))
        if module.lin is not None:
            ins = _pyg_in_channels(module.in_channels, module.lin.weight.shape[1], module.lin.weight.shape[1])
        else:
            ins = _pyg_in_channels(module.in_channels, module.lin_src.weight.shape[1], module.lin_dst.weight.shape[1])
        layer = cls(ins, module.out_channels, heads=module.heads, concat=module.concat,
                    negative_slope=module.negative_slope, dropout=module.dropout,
                    add_self_loops=module.add_self_loops, edge_dim=module.edge_dim, fill_value=module.fill_value,
                    bias=module.bias is not None, residual=module.residual)
        return _from_pyg_finish(layer, module)

    def _edge_scores(self, take: Optional[Tensor], g: GraphTensors, edge_attr: Tensor) -> Tensor:
        """(nnz, H) attention term of the edge features, in the CSR order of the graph after self
        loops were replaced (entry k from g's entry take[k], or node i's loop when take[k] = nnz + i;
        loops get the `fill_value` feature as PyG's add_self_loops does). take None: g itself."""
        if edge_attr.dim() == 1:
            edge_attr = edge_attr.reshape(-1, 1)
        if edge_attr.shape[0] != g.nnz:
            raise ValueError(f"edge_attr has {edge_attr.shape[0]} rows but the graph has {g.nnz} edges")
        attr_csr = edge_attr if g.edge_perm is None else edge_attr.index_select(0, g.edge_perm)
        if take is not None:
            n = g.num_rows
            fv = self.fill_value
            if isinstance(fv, str):
                red = {"add": "sum"}.get(fv, fv)
                if red not in ("mean", "sum", "max", "min"):
                    raise ValueError(f"fill_value {fv!r} is not supported (mean, add, sum, max, min, or a number)")
                kept = _derived(g.with_val(None), ("kept_edges",), _kept_edges)
                loop_attr = gf.spmm(kept, attr_csr, red)  # per target node over its non-loop edges
            else:
                loop_attr = torch.as_tensor(fv, dtype=attr_csr.dtype, device=attr_csr.device).expand(
                    n, attr_csr.shape[1])
            attr_csr = torch.cat([attr_csr, loop_attr.to(attr_csr.dtype)]).index_select(0, take)
        e = self.lin_edge(attr_csr).view(-1, self.heads, self.out_channels)
        return (e * self.att_edge).sum(-1)

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index, edge_attr: Optional[Tensor] = None,
                size=None, return_attention_weights: Optional[bool] = None):
        """x (N, F) or a (source, target) pair -> (N, heads * out_channels) (concat) or (N,
        out_channels); with return_attention_weights=True also (edge_index with self loops, alpha
        (E', heads)), as PyG. Without the attention weights the whole chain runs as one fused call."""
        H, C = self.heads, self.out_channels
        Cp, res = C, None
        if isinstance(x, Tensor):
            if x.dim() != 2:
                raise ValueError("GATConv takes x of shape (N, F)")
            if self.res is not None:
                res = self.res(x)
            if self.lin is not None:
                # at an odd C the features get zero columns up to the kernels' vector (_head_width)
                Cp = _head_width(x, self.lin, C)
                x_src = x_dst = _project(x, self.lin, H, C, Cp)
            else:
                x_src, x_dst = self.lin_src(x).view(-1, H, C), self.lin_dst(x).view(-1, H, C)
        else:
            x_src, x_dst = x
            if x_dst is not None and self.res is not None:
                res = self.res(x_dst)
            lin_s = self.lin if self.lin is not None else self.lin_src
            lin_d = self.lin if self.lin is not None else self.lin_dst
            x_src = lin_s(x_src).view(-1, H, C)
            x_dst = None if x_dst is None else lin_d(x_dst).view(-1, H, C)
        n_src = x_src.shape[0]
        n_dst = x_dst.shape[0] if x_dst is not None else (size[1] if size is not None else n_src)
        g0 = graph_of(edge_index, x_src, n_src, n_dst)
        g, take = g0.with_val(None), None
        if self.add_self_loops:
            if g.num_rows != g.num_cols:
                n = min(g.num_rows, g.num_cols)
                raise ValueError(f"GATConv with add_self_loops needs as many source as target nodes, got "
                                 f"{g.num_cols} x {g.num_rows} (n = {n}); pass add_self_loops=False")
            g, take = _derived(g, ("gat_loops", "take"), lambda b: _self_loops(b, "replace"))
        att_src, att_dst = self.att_src, self.att_dst
        if Cp != C:
            att_src, att_dst = F.pad(att_src, (0, Cp - C)), F.pad(att_dst, (0, Cp - C))
        a_src = (x_src * att_src).sum(-1)
        a_dst = (x_dst * att_dst).sum(-1) if x_dst is not None else a_src.new_zeros(g.num_rows, H)
        edge_term = None
        if edge_attr is not None and self.lin_edge is not None:
            edge_term = self._edge_scores(take, g0, edge_attr)
        unfused = ((self.dropout > 0 and self.training) or edge_term is not None
                   or return_attention_weights is not None)
        if unfused:
            if edge_term is None:  # the weights by one fused call (FusedMM's D = 0 edges form): no
                # (nnz, H) logits, leaky_relu or softmax temporaries, its backward recomputes them
                alpha = gf.fusedmm(g, a_dst, a_src, a_src.new_empty((g.num_cols, H, 0)), "add", L.GAT_EDGE,
                                   self.negative_slope, return_edges=True)[1]
            else:
                e = gf.sddmm(g, a_dst, a_src, "add") + edge_term
                alpha = gf.edge_softmax(g, F.leaky_relu(e, self.negative_slope))
            alpha_d = F.dropout(alpha, p=self.dropout, training=self.training)
            out = gf.spmm_heads(g, alpha_d, x_src)
        else:
            out = gf.fusedmm(g, a_dst, a_src, x_src, "add", L.GAT_EDGE, self.negative_slope)
        if Cp != C:
            out = out[..., :C]
        out = out.reshape(-1, H * C) if self.concat else out.mean(1)
        if res is not None:
            out = out + res
        if self.bias is not None:
            out = out + self.bias
        if return_attention_weights is not None:
            return out, self._attention_in_caller_order(g, alpha)
        return out

    @staticmethod
    def _attention_in_caller_order(g: GraphTensors, alpha: Tensor):
        """(edge_index, alpha) as PyG returns them: the edges after self loops, in the caller's order
        (kept edges, then loops) when known, else in CSR order."""
        src, dst = g.col.to(torch.int64), g.rows.to(torch.int64)
        if g.edge_perm is None:
            return torch.stack([src, dst]), alpha
        inv = torch.empty_like(g.edge_perm)
        inv[g.edge_perm] = torch.arange(g.nnz, device=g.device)
        return torch.stack([src[inv], dst[inv]]), L._take_rows(alpha, inv)

    def __repr__(self):
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"


# ---------------------------------------------------------------- GraphSAGE
class SAGEConv(torch.nn.Module):
    """GraphSAGE (Hamilton et al.), as torch_geometric.nn.SAGEConv:
    out = lin_l(aggr_{j -> i} x_j) + lin_r(x_i), aggr in mean / max / min / sum."""

    _AGGR = {"mean": "mean", "max": "max", "min": "min", "sum": "sum", "add": "sum"}

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int, aggr: str = "mean",
                 normalize: bool = False, root_weight: bool = True, project: bool = False, bias: bool = True):
        super().__init__()
        if aggr not in self._AGGR:
            raise ValueError(f"aggr must be one of {', '.join(self._AGGR)}; got {aggr!r}")
        self.in_channels, self.out_channels, self.aggr = in_channels, out_channels, aggr
        self.normalize, self.root_weight, self.project = normalize, root_weight, project
        ins = (in_channels, in_channels) if isinstance(in_channels, int) else tuple(in_channels)
        if project:
            self.lin = torch.nn.Linear(ins[0], ins[0], bias=True)
        self.lin_l = torch.nn.Linear(ins[0], out_channels, bias=bias)
        if root_weight:
            self.lin_r = torch.nn.Linear(ins[1], out_channels, bias=False)
        self.reset_parameters()

    def reset_parameters(self):
        """The linear layers' default initialisation (as PyG's)."""
        if self.project:
            self.lin.reset_parameters()
        self.lin_l.reset_parameters()
        if self.root_weight:
            self.lin_r.reset_parameters()

    @classmethod
    def from_pyg(cls, module) -> "SAGEConv":
        """The layer equivalent to a torch_geometric.nn.SAGEConv: its options (aggr, normalize,
        root_weight, project, bias), weights (copied), dtype, device and training mode. ValueError
        naming an option this layer lacks (an aggr other than mean, max, min, sum / add, ...)."""
        if not isinstance(module.aggr, str) or module.aggr not in cls._AGGR:
            raise ValueError(f"aggr={module.aggr!r} (gnnsparse's SAGEConv aggregates with {', '.join(cls._AGGR)})")
        _pyg_options(module, aggr=None)
        src = module.lin_l.weight.shape[1]
        dst = module.lin_r.weight.shape[1] if module.root_weight else src
        layer = cls(_pyg_in_channels(module.in_channels, src, dst), module.out_channels, aggr=module.aggr,
                    normalize=module.normalize, root_weight=module.root_weight, project=module.project,
                    bias=module.lin_l.bias is not None)
        return _from_pyg_finish(layer, module)

    def forward(self, x: Union[Tensor, Tuple[Tensor, Optional[Tensor]]], edge_index, size=None) -> Tensor:
        """x (N, F) or a (source, target) pair -> lin_l(aggr over in-neighbours) + lin_r(x_target)
        (out_channels per node, optionally L2-normalized), as PyG."""
        if isinstance(x, Tensor):
            x = (x, x)
        if self.project:
            x = (F.relu(self.lin(x[0])), x[1])
        n_src = x[0].shape[0]
        n_dst = x[1].shape[0] if x[1] is not None else (size[1] if size is not None else n_src)
        g = graph_of(edge_index, x[0], n_src, n_dst).with_val(None)
        out = self.lin_l(gf.spmm(g, x[0], self._AGGR[self.aggr]))
        if self.root_weight and x[1] is not None:
            out = out + self.lin_r(x[1])
        if self.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def __repr__(self):
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, aggr={self.aggr})"


# TransformerConv and GATv2Conv, and GIN / GINE / GraphConv / SGConv / APPNP: modules of their own,
# built on the helpers above
from ._conv_attention import GATv2Conv, TransformerConv  # noqa: E402
from ._conv_basic import APPNP, GINConv, GINEConv, GraphConv, SGConv  # noqa: E402
