"""TransformerConv and GATv2Conv with PyG's signatures, parameters and semantics, on gnnsparse ops.

Given the same weights they compute what torch_geometric.nn's layers of the same name compute
(same parameter names, shapes and registration order, so a PyG state_dict loads), deterministically
(no atomics: every per-edge quantity is reduced onto nodes by gnnsparse's SpMM over a CSR pattern).
`from_pyg(module)` turns a PyG layer into the equivalent one here.

What each layer materializes (nnz = edges after self loops, H heads, C channels per head):

- TransformerConv, no edge features, no attention dropout in training: nothing per edge. The
  attention is one FusedMM call (scores q_i . k_j with q pre-scaled by 1/sqrt(C), the row softmax,
  the weighted sum of the values), forward and backward in per-edge (nnz, H) work memory.
  return_attention_weights adds the (nnz, H) weights, from the same call. With dropout in
  training: scores (nnz, H) -> softmax (nnz, H) -> dropout -> spmm_heads.
- TransformerConv with edge_dim: lin_edge(edge_attr), (nnz, H, C), as PyG; it enters the scores
  as an SDDMM over the (target x edge) pattern and the values as an spmm_heads over that pattern,
  so no gathered query or value per edge is formed beside it.
- GATv2Conv without edge features: the score a . leaky_relu(W_l x_j + W_r x_i) is one
  gatv2_scores kernel (forward; backward: one kernel over the graph for the targets and att,
  one over its transpose for the sources), nothing of size (nnz, H, C) in either pass.
  Materialized: the scores and the attention weights (nnz, H) each, and in backward the per-target
  partial sums of d att (N_target, H, C), summed by torch. With edge_dim edge features the score
  also has W_e e_ij, which the kernel does not take: _GATv2Scores then runs in chunks of edges (peak
  O(chunk x H x C), see GATv2Conv.chunk_elements), saving only its inputs, the backward recomputing
  each chunk once; it also keeps the edge features in CSR order (nnz x edge_dim) and per graph the
  chunk plan (index arrays of about 3 x nnz entries). The softmax and the aggregation are
  edge_softmax + spmm_heads (the kernels' fused softmax takes its scores from an SDDMM of node
  vectors, which GATv2's score is not).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn import Parameter

from . import _library as L
from . import functional as gf
from .graph import GraphTensors, build, self_loops
from .nn import (GATConv, _derived, _from_pyg_finish, _glorot_param, _GlorotLinear, _head_width, _kept_edges, _project,
                 _pyg_in_channels, graph_of)

__all__ = ["TransformerConv", "GATv2Conv"]


# ---------------------------------------------------------------- shared helpers
class _GlorotUniformBiasLinear(torch.nn.Linear):
    """PyG's Linear(weight_initializer='glorot') with its default bias: xavier uniform weight, bias
    uniform in +-1/sqrt(in_features)."""

    def reset_parameters(self):
        torch.nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            bound = 1.0 / math.sqrt(self.in_features)
            torch.nn.init.uniform_(self.bias, -bound, bound)


def _pair(in_channels) -> Tuple[int, int]:
    ins = (in_channels, in_channels) if isinstance(in_channels, int) else tuple(in_channels)
    if len(ins) != 2 or any(not isinstance(c, int) or c <= 0 for c in ins):
        raise ValueError(f"in_channels must be a positive int or a pair of them, got {in_channels!r} "
                         "(lazy initialization with -1 is not supported: give the feature sizes)")
    return ins


def _node_inputs(x, name: str) -> Tuple[Tensor, Tensor, bool]:
    """(x_src, x_dst, bipartite) of the layers' x argument, checked."""
    if isinstance(x, Tensor):
        if x.dim() != 2:
            raise ValueError(f"{name} takes x of shape (N, F), got {tuple(x.shape)}")
        return x, x, False
    if not isinstance(x, (tuple, list)) or len(x) != 2:
        raise TypeError(f"{name} takes x as a tensor or a (source, target) pair, got {type(x).__name__}")
    xs, xd = x
    if xs is None or xd is None:
        raise ValueError(f"{name} needs both source and target features in (x_src, x_dst); got None")
    for what, t in (("source", xs), ("target", xd)):
        if not isinstance(t, Tensor) or t.dim() != 2:
            raise ValueError(f"{name}: the {what} features must be a tensor of shape (N, F)")
    return xs, xd, True


def _check_features(name: str, x_src: Tensor, x_dst: Tensor, ins: Tuple[int, int]):
    if x_src.shape[1] != ins[0] or x_dst.shape[1] != ins[1]:
        raise ValueError(f"{name} was built for {ins[0]} source / {ins[1]} target features, got "
                         f"{x_src.shape[1]} / {x_dst.shape[1]}")


def _attr_in_csr_order(g: GraphTensors, edge_attr: Tensor, edge_dim: int, name: str) -> Tensor:
    """edge_attr (E, edge_dim) in the caller's edge order -> g's CSR order."""
    if edge_attr.dim() == 1:
        edge_attr = edge_attr.reshape(-1, 1)
    if edge_attr.dim() != 2 or edge_attr.shape[0] != g.nnz or edge_attr.shape[1] != edge_dim:
        raise ValueError(f"{name}: edge_attr must have shape ({g.nnz}, {edge_dim}) (one row per edge), got "
                         f"{tuple(edge_attr.shape)}")
    if edge_attr.device != g.device:
        raise ValueError(f"{name}: edge_attr is on {edge_attr.device} but the graph on {g.device}")
    return edge_attr if g.edge_perm is None else edge_attr.index_select(0, g.edge_perm)


def _attr_with_loops(g_loops: GraphTensors, g: GraphTensors, attr_csr: Tensor, fill_value) -> Tensor:
    """The edge features of g_loops (g with its self loops replaced by one per target node, each
    row's loop last): kept edges' rows of attr_csr, and per loop the `fill_value` feature as PyG's
    add_self_loops makes it (a number or a tensor, or 'mean' / 'add' / 'sum' / 'max' / 'min' of
    the node's incoming non-loop edges)."""
    n = g_loops.num_rows
    if isinstance(fill_value, str):
        red = {"add": "sum"}.get(fill_value, fill_value)
        if red not in ("mean", "sum", "max", "min"):
            raise ValueError(f"fill_value {fill_value!r} is not supported (mean, add, sum, max, min, or a number)")
        kept = _derived(g.with_val(None), ("kept_edges",), _kept_edges)
        loop_attr = gf.spmm(kept, attr_csr, red)
    else:
        loop_attr = torch.as_tensor(fill_value, dtype=attr_csr.dtype, device=attr_csr.device).expand(
            n, attr_csr.shape[1])
    keep = g.rows != g.col
    loop_pos = g_loops.rowptr[1:].to(torch.int64) - 1
    is_loop = torch.zeros(g_loops.nnz, dtype=torch.bool, device=attr_csr.device)
    is_loop[loop_pos] = True
    out = attr_csr.new_empty((g_loops.nnz, attr_csr.shape[1]))
    out[~is_loop] = attr_csr[keep]
    out[loop_pos] = loop_attr.to(out.dtype)
    return out


def _eid_pattern(g: GraphTensors) -> GraphTensors:
    """The (targets x edges) pattern of g: row i holds the ids of its edges (CSR positions), so an
    SDDMM over it pairs a node vector with an edge vector, and an spmm_heads sums edge vectors."""
    return build(g.rowptr, g.eid, None, g.nnz, itype=g.col.dtype)


def _softmax(g: GraphTensors, s: Tensor) -> Tensor:
    """edge_softmax of (nnz, H) scores; a graph without edges has nothing to normalize."""
    return gf.edge_softmax(g, s) if g.nnz else s


def _check_pyg(module, cls_name: str):
    if type(module).__name__ != cls_name or not hasattr(module, "heads"):
        raise TypeError(f"from_pyg takes a torch_geometric.nn.{cls_name}, got {type(module).__name__}")
    aggr = getattr(module, "aggr", "add")
    if aggr not in ("add", "sum"):
        raise ValueError(f"{cls_name} with aggr={aggr!r} has no gnnsparse equivalent (only 'add')")
    if getattr(module, "flow", "source_to_target") != "source_to_target":
        raise ValueError(f"{cls_name} with flow={module.flow!r} has no gnnsparse equivalent")
    for name, p in module.named_parameters():
        if isinstance(p, torch.nn.parameter.UninitializedParameter):
            raise ValueError(f"{cls_name}.{name} is not initialized yet (in_channels=-1): run the PyG layer once "
                             "before from_pyg")


def _like_pyg(layer: torch.nn.Module, module: torch.nn.Module) -> torch.nn.Module:
    """`layer` with `module`'s weights, dtype, device, requires_grad flags and training mode."""
    return _from_pyg_finish(layer, module)


# ---------------------------------------------------------------- TransformerConv
class TransformerConv(torch.nn.Module):
    """Graph transformer (Shi et al., "Masked Label Prediction"), as torch_geometric.nn.TransformerConv:
    alpha_ij = softmax_j(q_i . (k_j [+ e_ij]) / sqrt(C)), out_i = sum_j alpha_ij (v_j [+ e_ij]) per
    head, heads concatenated or averaged; with root_weight + lin_skip(x_i) (beta: a learned
    sigmoid gate between the two), where q = lin_query(x_i), k = lin_key(x_j), v = lin_value(x_j),
    e = lin_edge(edge_attr).

    Without edge features and without attention dropout in training, the attention is one FusedMM
    call (op="dot", edge="softmax"): no per-edge tensor at all, backward included. The module
    docstring lists what the other paths materialize.
    """

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int, heads: int = 1,
                 concat: bool = True, beta: bool = False, dropout: float = 0.0, edge_dim: Optional[int] = None,
                 bias: bool = True, root_weight: bool = True):
        super().__init__()
        ins = _pair(in_channels)
        self.in_channels, self.out_channels, self.heads = in_channels, out_channels, heads
        self.beta = beta and root_weight
        self.root_weight, self.concat, self.dropout, self.edge_dim = root_weight, concat, dropout, edge_dim
        HC = heads * out_channels
        self.lin_key = torch.nn.Linear(ins[0], HC, bias=bias)
        self.lin_query = torch.nn.Linear(ins[1], HC, bias=bias)
        self.lin_value = torch.nn.Linear(ins[0], HC, bias=bias)
        if edge_dim is not None:
            self.lin_edge = torch.nn.Linear(edge_dim, HC, bias=False)
        else:
            self.register_parameter("lin_edge", None)
        total = HC if concat else out_channels
        self.lin_skip = torch.nn.Linear(ins[1], total, bias=bias)  # PyG builds it even without root_weight
        if self.beta:
            self.lin_beta = torch.nn.Linear(3 * total, 1, bias=False)
        else:
            self.register_parameter("lin_beta", None)
        self.reset_parameters()

    def reset_parameters(self):
        """torch.nn.Linear's initialisation for every linear map (as PyG's default Linear)."""
        for m in (self.lin_key, self.lin_query, self.lin_value, self.lin_edge, self.lin_skip, self.lin_beta):
            if m is not None:
                m.reset_parameters()

    @classmethod
    def from_pyg(cls, module) -> "TransformerConv":
        """The gnnsparse layer equivalent to a torch_geometric.nn.TransformerConv: its
        hyperparameters and weights, on its device and dtype, in its training mode."""
        _check_pyg(module, "TransformerConv")
        in_channels = _pyg_in_channels(module.in_channels, module.lin_key.weight.shape[1],
                                       module.lin_query.weight.shape[1])  # a lazy layer that has run
        layer = cls(in_channels, module.out_channels, heads=module.heads, concat=module.concat,
                    beta=module.beta, dropout=module.dropout, edge_dim=module.edge_dim,
                    bias=module.lin_key.bias is not None, root_weight=module.root_weight)
        return _like_pyg(layer, module)

    def forward(self, x: Union[Tensor, Tuple[Tensor, Tensor]], edge_index, edge_attr: Optional[Tensor] = None,
                return_attention_weights: Optional[bool] = None):
        """x (N, F) or a (source, target) pair -> (N_target, heads * out_channels) (concat) or
        (N_target, out_channels). With return_attention_weights True or False (as PyG: any bool)
        also (edge_index, alpha (E, heads)), alpha before dropout, in the caller's edge order.
        edge_attr (E, edge_dim): the edge features, required when the layer has edge_dim."""
        H, C = self.heads, self.out_channels
        x_src, x_dst, _ = _node_inputs(x, "TransformerConv")
        _check_features("TransformerConv", x_src, x_dst, _pair(self.in_channels))
        if edge_attr is not None and self.lin_edge is None:
            raise ValueError("TransformerConv got edge_attr but was built without edge_dim")
        if edge_attr is None and self.lin_edge is not None:
            raise ValueError(f"TransformerConv was built with edge_dim={self.edge_dim}: pass edge_attr")
        Cp = C  # at an odd C on CUDA: q, k, v with zero columns (nn._head_width), no padded copies
        if edge_attr is None:
            Cp = min(_head_width(x, lin, C) for x, lin in ((x_dst, self.lin_query), (x_src, self.lin_key),
                                                          (x_src, self.lin_value)))
        q = _project(x_dst, self.lin_query, H, C, Cp) * (1.0 / math.sqrt(C))
        k = _project(x_src, self.lin_key, H, C, Cp)
        v = _project(x_src, self.lin_value, H, C, Cp)
        g = graph_of(edge_index, x_src, x_src.shape[0], x_dst.shape[0]).with_val(None)
        want_alpha = isinstance(return_attention_weights, bool)
        drop = self.dropout > 0 and self.training
        alpha = None
        if edge_attr is not None:
            ge = _derived(g, ("eid_pattern",), _eid_pattern)
            e = self.lin_edge(_attr_in_csr_order(g, edge_attr, self.edge_dim, "TransformerConv")).view(-1, H, C)
            alpha = _softmax(g, gf.sddmm(g, q, k, "dot") + gf.sddmm(ge, q, e, "dot"))
            a = F.dropout(alpha, p=self.dropout, training=self.training)
            out = gf.spmm_heads(g, a, v) + gf.spmm_heads(ge, a, e)
        elif drop:
            alpha = _softmax(g, gf.sddmm(g, q, k, "dot"))
            out = gf.spmm_heads(g, F.dropout(alpha, p=self.dropout, training=True), v)
        elif want_alpha:
            out, alpha = gf.fusedmm(g, q, k, v, "dot", "softmax", return_edges=True)
        else:
            out = gf.fusedmm(g, q, k, v, "dot", "softmax")
        if Cp != C:
            out = out[..., :C]
        out = out.reshape(-1, H * C) if self.concat else out.mean(1)
        if self.root_weight:
            x_r = self.lin_skip(x_dst)
            if self.lin_beta is not None:
                b = self.lin_beta(torch.cat([out, x_r, out - x_r], dim=-1)).sigmoid()
                out = b * x_r + (1 - b) * out
            else:
                out = out + x_r
        if want_alpha:
            if isinstance(edge_index, Tensor) and edge_index.layout == torch.strided and g.edge_perm is not None:
                return out, (edge_index, GATConv._attention_in_caller_order(g, alpha)[1])
            return out, GATConv._attention_in_caller_order(g, alpha)
        return out

    def __repr__(self):
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"


# ---------------------------------------------------------------- GATv2 scores, chunked
class _ChunkPlan:
    """How _GATv2Scores cuts a graph's edges (CSR order) into chunks [a, b) of `step` edges, and the
    two reductions of a chunk's per-edge rows onto nodes, each an SpMM over a piece of a pattern:

    rows[c]  (r0, local rowptr): the targets r0.. the chunk touches, their edges' chunk positions
             (contiguous: CSR order groups edges by target; a row cut by a chunk boundary gets a
             part from each chunk, added in chunk order)
    cols[c]  (source ids, local rowptr, local col): the distinct sources of the chunk's edges and,
             per source, the chunk positions of its edges in CSR order (one stable sort of
             (chunk, source) keys for the whole graph)

    Built once per (graph, step) and kept with the graph; every sum is in a fixed order, so the
    gradients are deterministic."""

    def __init__(self, g: GraphTensors, step: int):
        nnz, K, dev, it = g.nnz, g.num_cols, g.device, g.col.dtype
        self.step = step
        self.bounds = [(a, min(a + step, nnz)) for a in range(0, nnz, step)]
        if not self.bounds:
            self.rows, self.cols = [], []
            return
        pos = torch.arange(nnz, device=dev)
        chunk = torch.div(pos, step, rounding_mode="floor")
        order = torch.argsort(chunk * K + g.col.to(torch.int64), stable=True)  # by (chunk, source, position)
        col_sorted = g.col.to(torch.int64).index_select(0, order)
        first = torch.ones(nnz, dtype=torch.bool, device=dev)
        first[1:] = (col_sorted[1:] != col_sorted[:-1]) | (chunk[1:] != chunk[:-1])
        seg = torch.nonzero(first).reshape(-1)  # where each (chunk, source) run starts in `order`
        starts = torch.tensor([a for a, _ in self.bounds], dtype=torch.int64, device=dev)
        lasts = torch.tensor([b - 1 for _, b in self.bounds], dtype=torch.int64, device=dev)
        rowptr = g.rowptr.to(torch.int64)
        host = torch.cat([torch.searchsorted(seg, starts), torch.searchsorted(rowptr, starts, right=True) - 1,
                          torch.searchsorted(rowptr, lasts, right=True) - 1]).tolist()  # one sync
        n = len(self.bounds)
        s_first, r_first, r_last = host[:n], host[n:2 * n], host[2 * n:]
        seg_end = torch.cat([seg, seg.new_full((1,), nnz)])
        self.rows, self.cols = [], []
        for c, (a, b) in enumerate(self.bounds):
            r0, r1 = r_first[c], r_last[c]
            self.rows.append((r0, (rowptr[r0:r1 + 2] - a).clamp_(0, b - a).to(it)))
            s0, s1 = s_first[c], (s_first[c + 1] if c + 1 < n else seg.numel())
            self.cols.append((col_sorted.index_select(0, seg[s0:s1]), (seg_end[s0:s1 + 1] - a).to(it),
                              (order[a:b] - a).to(it)))
        self.arange = torch.arange(max(b - a for a, b in self.bounds), dtype=it, device=dev)


def _chunk_plan(g: GraphTensors, step: int) -> _ChunkPlan:
    return _derived(g, ("gatv2_chunks", step), lambda b: _ChunkPlan(b, step))


def _sum_into(out: Tensor, ids, rowptr: Tensor, col: Tensor, src: Tensor):
    """out[ids] += (SpMM of the pattern (rowptr, col) with src): ids a slice start (contiguous rows)
    or a tensor of distinct row ids."""
    part = L._spmm(L._csr(rowptr, col, None, src.shape[0], cache=False), src)
    if isinstance(ids, int):
        out[ids:ids + part.shape[0]] += part
    else:
        out.index_put_((ids,), out.index_select(0, ids) + part)  # distinct ids: one write each


class _GATv2Scores(torch.autograd.Function):
    """s[k, h] = sum_c att[h, c] * leaky_relu(xl[j, h, c] + xr[i, h, c] (+ (attr[k] W^T)[h, c])) for
    every edge k = (i <- j) in CSR order, computed chunk by chunk (see _ChunkPlan). Saves its
    inputs only; the backward recomputes each chunk once and reduces its per-edge gradient onto
    the targets (xr) and the sources (xl) with SpMMs, and onto att, W and attr by dense products."""

    @staticmethod
    def forward(ctx, xl, xr, att, attr, w, col, rows, plan, slope):
        K, H, C = xl.shape
        ctx.dims, ctx.slope, ctx.plan = (K, xr.shape[0], H, C), slope, plan
        ctx.save_for_backward(xl, xr, att, attr, w, col, rows)
        s = xl.new_empty((col.shape[0], H))
        xl2, xr2, att3 = xl.reshape(K, H * C), xr.reshape(-1, H * C), att.reshape(H, C, 1)
        wt = None if w is None else w.t()
        for a, b in plan.bounds:
            z = _GATv2Scores._z(xl2, xr2, attr, wt, col[a:b], rows[a:b], a, b)
            # (H, chunk, C) @ (H, C, 1): the channel sum per head as one batched product
            s[a:b] = torch.bmm(F.leaky_relu_(z, slope).view(b - a, H, C).transpose(0, 1), att3)[:, :, 0].t()
        return s

    @staticmethod
    def _z(xl2, xr2, attr, wt, j, i, a, b):
        """xl[j] + xr[i] (+ attr[a:b] W^T), (chunk, H * C), summed in PyG's order."""
        z = L._take_rows(xl2, j)
        z.add_(L._take_rows(xr2, i))
        if attr is not None:
            z.addmm_(attr[a:b], wt)
        return z

    @staticmethod
    @torch.autograd.function.once_differentiable  # like the custom ops: no double backward
    def backward(ctx, ds):
        xl, xr, att, attr, w, col, rows = ctx.saved_tensors
        K, M, H, C = ctx.dims
        slope, plan = ctx.slope, ctx.plan
        n = ctx.needs_input_grad
        want_l, want_r, want_att = n[0], n[1], n[2]
        want_attr, want_w = attr is not None and n[3], w is not None and n[4]
        HC = H * C
        ds = ds.contiguous()
        xl2, xr2, att2 = xl.reshape(K, HC), xr.reshape(M, HC), att.reshape(1, H, C)
        wt = None if w is None else w.t()
        dxl = xl2.new_zeros((K, HC)) if want_l else None
        dxr = xr2.new_zeros((M, HC)) if want_r else None
        datt = att2.new_zeros((H, C)) if want_att else None
        dattr = attr.new_empty(attr.shape) if want_attr else None
        dw = w.new_zeros(w.shape) if want_w else None
        if any((want_l, want_r, want_att, want_attr, want_w)):
            for (a, b), (r0, r_ptr), (c_ids, c_ptr, c_col) in zip(plan.bounds, plan.rows, plan.cols):
                z = _GATv2Scores._z(xl2, xr2, attr, wt, col[a:b], rows[a:b], a, b).view(b - a, H, C)
                d = ds[a:b, :, None]
                u = torch.where(z > 0, d, d * slope)  # ds * leaky_relu'(z)
                if want_att:
                    datt += z.mul_(u).sum(0)  # ds * leaky_relu(z), summed over the chunk's edges
                del z
                gz = u.mul_(att2).view(b - a, HC)  # d s / d z
                if want_r:
                    _sum_into(dxr, r0, r_ptr, plan.arange[:b - a], gz)
                if want_l:
                    _sum_into(dxl, c_ids, c_ptr, c_col, gz)
                if want_attr:
                    dattr[a:b] = gz @ w
                if want_w:
                    dw += gz.t() @ attr[a:b]
        return (None if dxl is None else dxl.view(K, H, C), None if dxr is None else dxr.view(M, H, C),
                None if datt is None else datt.view(att.shape), dattr, dw, None, None, None, None)


# ---------------------------------------------------------------- GATv2
class GATv2Conv(torch.nn.Module):
    """GATv2 (Brody et al., "How Attentive are Graph Attention Networks?"), as
    torch_geometric.nn.GATv2Conv: alpha_ij = softmax_j(a . leaky_relu(W_l x_j + W_r x_i [+ W_e e_ij])),
    out_i = sum_j alpha_ij W_l x_j per head, heads concatenated or averaged, + residual, + bias.

    Without edge features the scores are one gatv2_scores kernel (gnnsparse.torch.gatv2_scores),
    forward and backward. With edge_dim they run in chunks of about `chunk_elements` /
    (heads * out_channels) edges (a class attribute; set it on an instance to trade memory for
    fewer launches), forward and backward. Either way no (edges x heads x channels) tensor is
    formed; the scores and the attention weights (edges x heads) are. Gradients are reduced onto
    nodes without atomics (the kernel's fixed edge order, or SpMM), deterministically. The chunked
    path (edge_dim) plans its chunks on the host, so it runs eagerly only: under
    torch.compile(fullgraph=True) use GATv2Conv without edge features.
    """

    chunk_elements: Optional[int] = None  # with edge_dim; None: 2**24 on GPUs, 2**20 on the CPU device

    def __init__(self, in_channels: Union[int, Tuple[int, int]], out_channels: int, heads: int = 1,
                 concat: bool = True, negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 edge_dim: Optional[int] = None, fill_value: Union[float, Tensor, str] = "mean", bias: bool = True,
                 share_weights: bool = False, residual: bool = False):
        super().__init__()
        ins = _pair(in_channels)
        self.in_channels, self.out_channels, self.heads, self.concat = in_channels, out_channels, heads, concat
        self.negative_slope, self.dropout, self.add_self_loops = negative_slope, dropout, add_self_loops
        self.edge_dim, self.fill_value, self.residual, self.share_weights = edge_dim, fill_value, residual, share_weights
        HC = heads * out_channels
        self.lin_l = _GlorotUniformBiasLinear(ins[0], HC, bias=bias)
        self.lin_r = self.lin_l if share_weights else _GlorotUniformBiasLinear(ins[1], HC, bias=bias)
        self.att = Parameter(torch.empty(1, heads, out_channels))
        self.lin_edge = _GlorotLinear(edge_dim, HC, bias=False) if edge_dim is not None else None
        total = out_channels * (heads if concat else 1)
        if residual:
            self.res = _GlorotLinear(ins[1], total, bias=False)
        else:
            self.register_parameter("res", None)
        if bias:
            self.bias = Parameter(torch.empty(total))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Glorot weights (lin_l / lin_r biases uniform in +-1/sqrt(in)), Glorot attention vector,
        zero bias (as PyG's)."""
        for m in (self.lin_l, self.lin_r, self.lin_edge, self.res):
            if m is not None:
                m.reset_parameters()
        _glorot_param(self.att)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    @classmethod
    def from_pyg(cls, module) -> "GATv2Conv":
        """The gnnsparse layer equivalent to a torch_geometric.nn.GATv2Conv: its hyperparameters
        and weights, on its device and dtype, in its training mode."""
        _check_pyg(module, "GATv2Conv")
        in_channels = _pyg_in_channels(module.in_channels, module.lin_l.weight.shape[1],
                                       module.lin_r.weight.shape[1])  # a lazy layer that has run
        layer = cls(in_channels, module.out_channels, heads=module.heads, concat=module.concat,
                    negative_slope=module.negative_slope, dropout=module.dropout,
                    add_self_loops=module.add_self_loops, edge_dim=module.edge_dim, fill_value=module.fill_value,
                    bias=module.bias is not None, share_weights=module.share_weights, residual=module.residual)
        return _like_pyg(layer, module)

    def _graph(self, edge_index, x_l: Tensor, n_dst: int):
        """(graph without / with PyG's self loops) as GraphTensors."""
        g0 = graph_of(edge_index, x_l, x_l.shape[0], n_dst)
        g = g0.with_val(None)
        if self.add_self_loops:
            if g.num_rows > g.num_cols:
                raise ValueError(f"GATv2Conv with add_self_loops on a bipartite graph with more targets "
                                 f"({g.num_rows}) than sources ({g.num_cols}) is not supported (PyG gives loops to "
                                 f"the first {g.num_cols} targets only): pass add_self_loops=False")
            g = _derived(g, ("gatv2_loops",), lambda b: self_loops(b, "replace", leading_columns=True))
        return g0, g

    def forward(self, x: Union[Tensor, Tuple[Tensor, Tensor]], edge_index, edge_attr: Optional[Tensor] = None,
                return_attention_weights: Optional[bool] = None):
        """x (N, F) or a (source, target) pair -> (N_target, heads * out_channels) (concat) or
        (N_target, out_channels). With return_attention_weights=True also (edge_index after self
        loops, alpha (E', heads)) as PyG: alpha after dropout, edges in PyG's order (the kept
        edges in the caller's order, then one loop per node)."""
        H, C = self.heads, self.out_channels
        x_src, x_dst, bipartite = _node_inputs(x, "GATv2Conv")
        _check_features("GATv2Conv", x_src, x_dst, _pair(self.in_channels))
        if edge_attr is not None and self.lin_edge is None:
            raise ValueError("GATv2Conv got edge_attr but was built without edge_dim")
        res = self.res(x_dst) if self.res is not None else None
        x_l = self.lin_l(x_src).view(-1, H, C)
        x_r = x_l if (self.share_weights and not bipartite) else self.lin_r(x_dst).view(-1, H, C)
        g0, g = self._graph(edge_index, x_l, x_r.shape[0])
        attr = w = None
        if edge_attr is not None:
            attr = _attr_in_csr_order(g0, edge_attr, self.edge_dim, "GATv2Conv")
            if self.add_self_loops:
                attr = _attr_with_loops(g, g0, attr, self.fill_value)
            attr, w = attr.to(x_l.dtype).contiguous(), self.lin_edge.weight
        att = self.att.to(x_l.dtype)  # under autocast x_l may be fp16 while att stays fp32
        if attr is None:
            s = gf.gatv2_scores(g, x_l, x_r, att, float(self.negative_slope))
        else:
            from .._ops import check_gatv2

            check_gatv2(g.shape, x_l.shape, x_r.shape, att.shape)  # raises on sizes the graph does not fit
            w = w.to(x_l.dtype)
            chunk = self.chunk_elements or (1 << 24 if g.device.type == "cuda" else 1 << 20)
            plan = _chunk_plan(g, max(1, int(chunk) // (H * C)))
            s = _GATv2Scores.apply(x_l, x_r, att, attr, w, g.col, g.rows, plan, float(self.negative_slope))
        alpha = F.dropout(_softmax(g, s), p=self.dropout, training=self.training)
        out = gf.spmm_heads(g, alpha, x_l)
        out = out.reshape(-1, H * C) if self.concat else out.mean(1)
        if res is not None:
            out = out + res
        if self.bias is not None:
            out = out + self.bias
        if return_attention_weights:
            return out, GATConv._attention_in_caller_order(g, alpha)
        return out

    def __repr__(self):
        return f"{self.__class__.__name__}({self.in_channels}, {self.out_channels}, heads={self.heads})"
