"""Quantized GNN layers (after Tango, SC'23): gnnsparse.torch.nn's GCNConv and GATConv with the
linear transformation, the aggregation and GAT's attention logits run by gnnsparse.quant.autograd
(int8 / int4 operands, stochastic rounding, float32 results).

Same parameters (names, shapes, initialization) as the float layers, so a state_dict moves between
them. `bits` (8 or 4; None = the float layer) can be changed between steps, which is how the
Error_X rule of `gnnsparse train --quant` sets it before training. A layer that quantizes takes
its input x as a float tensor or as a QTensor (features quantized once: taken as they are). Per
Tango, what stays in float32: the attention softmax (and its dropout), the weight update (the
optimizer's), and the layer before the output softmax (the train command keeps its second layer
in float32).

    GCNConv   q(h) = q(x) q(W)^T (int8 GEMM, its scale pass writing q(h));  out = A_norm q(h) + b
              (quantized SpMM)
    GATConv   q(h) = q(x) q(W)^T (as GCN);  a = x (W^T att) (float32, attention folded into the
              weight);  e = q(a_dst)_i + q(a_src)_j (quantized SDDMM add);  alpha =
              softmax(leaky_relu(e)) (float32);  out_i,h = sum_j alpha q(h_j,h) (all heads in one
              quantized SpMM)
Backward passes: gnnsparse.quant.autograd (gcn_layer, gat_project / gat_logits / gat_aggregate):
the SpMM over A^T writes the quantized gradient the weight's GEMM reads. Producers quantize with
delayed scales (gnnsparse.quant.DelayedScale, one per produced tensor, in `_scales`), so no
quantize pass runs between two products; what is saved for the backward is quantized (q(x), q(W),
q(h)), except GAT's attention coefficients (float32, as Tango keeps the softmax). Calls these layers do not quantize (edge weights that
need gradients, GAT edge features or residuals, bipartite inputs, return_attention_weights) run
the float layer.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import _arrays
from .._csr import CSR
from ..torch import _library as L
from ..torch import functional as gf
from ..torch import nn as tnn
from ..torch.graph import GraphTensors, self_loops
from . import autograd as qa
from ._tensor import QTensor

__all__ = ["GCNConv", "GATConv", "gcn_operators"]


def _check_bits(bits):
    if bits is not None and bits not in (4, 8):
        raise ValueError(f"bits must be 8, 4 or None (float), got {bits!r}")
    return bits


class _Operators:
    """A (gnnsparse.CSR), its transpose AT (values val[t_perm]) and t_perm (the graph's dtype) of one graph,
    built once and kept while the graph's tensors are the same objects, unchanged."""

    def __init__(self):
        self.key = None
        self.keep = None
        self.value = None

    def get(self, g: GraphTensors, values: bool):
        val = g.val if values else None
        key = (id(g.col), id(val), None if val is None else val._version)
        if self.key != key or self.keep[0] is not g.col or self.keep[1] is not val:
            perm = g.t_perm  # int32 (or int64) as the graph's: index_select takes either
            v = None if val is None else val.detach()
            A = L._csr(g.rowptr, g.col, v, g.num_cols)
            # incidence_spmm's side="src" matrix is (t_rowptr, t_perm): the graph's own arrays, not
            # a host transpose copied back to the device (quant.ops._src_incidence)
            A.derived("quant.src_incidence",
                      lambda: CSR(g.t_rowptr, g.t_perm, None, (g.num_cols, g.nnz), validate=False, copy=False))
            vT = None if v is None else v.index_select(0, perm).contiguous()
            AT = L._csr(g.t_rowptr, g.t_col, vT, g.num_rows, cache=False)
            self.key, self.keep, self.value = key, (g.col, val, vT), (A, AT, perm)
        return self.value


class GCNOperators:
    """A_norm = D^-1/2 (A + I) D^-1/2 (gnnsparse.CSR, int32 or int64 indices, float32 values) and its
    transpose AT (values A_norm.val[perm]): all a GCN layer's forward and backward read of a graph."""

    __slots__ = ("A", "AT")

    def __init__(self, A: CSR, AT: CSR):
        self.A, self.AT = A, AT

    @property
    def nbytes(self) -> int:
        """Bytes of the arrays kept (both CSRs)."""
        return sum(int(t.nbytes) for M in (self.A, self.AT) for t in (M.rowptr, M.col, M.val))


def _gcn_operators(rowptr: Tensor, col: Tensor, n: int) -> GCNOperators:
    """gnnsparse.torch.functional.gcn_norm of a square graph without edge weights (add_self_loops,
    not improved) built from its CSR arrays alone, the same arrays bit for bit: row i keeps its
    entries that are not self loops in order, then one loop (weight 1, as an existing loop's with no
    edge weights); deg_i = the row's entries (exact in float32), w_ij = deg_i^-1/2 deg_j^-1/2; A^T by
    a stable sort of the columns. Keeps only what the layer reads: no COO rows, entry ids, int64
    permutation or GraphTensors of the graph without loops (gnnsparse.torch keeps all of those, on
    the CSR, for the run: 4 + 6 arrays of nnz entries), and frees each temporary before the next big
    allocation."""
    dev = col.device
    nnz = int(col.numel())
    it = col.dtype
    lens = rowptr.diff().to(torch.int64)
    rows = torch.repeat_interleave(torch.arange(n, device=dev, dtype=it), lens, output_size=nnz)
    loops = col == rows
    nloops = int(loops.sum())
    if nloops:  # existing loops are dropped and replaced by one per row, last in the row
        kept = ~loops
        lens = lens - torch.bincount(rows[loops].to(torch.int64), minlength=n)
        shift = torch.cumsum(loops, 0)  # loops up to and including each entry
        pos = torch.arange(nnz, device=dev, dtype=torch.int64).sub_(shift).add_(rows)[kept]
        src = col[kept]
        del kept, shift
    else:
        pos = torch.arange(nnz, device=dev, dtype=torch.int64).add_(rows)
        src = col
    del rows, loops
    nnz2 = nnz - nloops + n
    it2 = it if nnz2 <= 2**31 - 1 and n <= 2**31 - 1 else torch.int64
    rowptr2 = torch.zeros(n + 1, dtype=torch.int64, device=dev)
    rowptr2[1:] = torch.cumsum(lens + 1, 0)
    col2 = torch.empty(nnz2, dtype=it2, device=dev)
    col2[pos] = src.to(it2)
    del pos, src
    col2[rowptr2[1:] - 1] = torch.arange(n, device=dev, dtype=it2)
    dinv = (lens + 1).to(torch.float32).pow_(-0.5)  # deg >= 1: no infinities to clear
    del lens
    rows2 = torch.repeat_interleave(torch.arange(n, device=dev, dtype=it2), rowptr2.diff(), output_size=nnz2)
    val = dinv.index_select(0, rows2).mul_(dinv.index_select(0, col2))
    perm = torch.argsort(col2, stable=True)
    t_col = rows2.index_select(0, perm)
    del rows2
    t_val = val.index_select(0, perm)
    del perm
    t_rowptr = torch.zeros(n + 1, dtype=torch.int64, device=dev)
    t_rowptr[1:] = torch.cumsum(torch.bincount(col2, minlength=n), 0)
    rowptr2, t_rowptr = rowptr2.to(it2), t_rowptr.to(it2)
    A = CSR(rowptr2, col2, val, (n, n), validate=False, copy=False)
    AT = CSR(t_rowptr, t_col, t_val, (n, n), validate=False, copy=False)
    return GCNOperators(A, AT)


def gcn_operators(graph: CSR, like: Tensor) -> GCNOperators:
    """The normalized operators of GCNConv (self loops added, symmetric normalization, no edge
    weights) of a gnnsparse.CSR without values, on like's device; kept on the CSR (CSR.derived: shared
    by every layer given that CSR, gone with it or after invalidate())."""
    if graph.val is not None or graph.shape[0] != graph.shape[1]:
        raise ValueError("gcn_operators takes a square CSR without values")
    dev = like.device
    cache = graph.derived("quant.gcn_operators", dict)  # device -> GCNOperators
    key = str(dev)
    ops = cache.get(key)
    if ops is None:
        ops = cache[key] = _gcn_operators(_arrays.to_torch(graph.rowptr, dev), _arrays.to_torch(graph.col, dev),
                                          graph.shape[0])
    return ops


def _float_input(x, bits):
    """x as the layer takes it: a QTensor input (quantized once, e.g. `gnnsparse train --quant 8`'s
    input features) stays quantized when the layer quantizes (bits set), and is dequantized for the
    float layer (bits None)."""
    return x.dequantize() if isinstance(x, QTensor) and bits is None else x


def _dequantized(x):
    return x.dequantize() if isinstance(x, QTensor) else x


def _like(x):
    """A tensor on x's device with x's rows (x's data for a QTensor): what graph conversions read."""
    return x.data if isinstance(x, QTensor) else x


class GCNConv(tnn.GCNConv):
    """gnnsparse.torch.nn.GCNConv with a quantized linear transformation and aggregation."""

    def __init__(self, in_channels: int, out_channels: int, *args, bits: Optional[int] = 8, **kwargs):
        super().__init__(in_channels, out_channels, *args, **kwargs)
        self.bits = _check_bits(bits)
        self._ops = _Operators()
        self._scales = qa.LayerScales()

    def forward(self, x: Tensor, edge_index, edge_weight: Optional[Tensor] = None) -> Tensor:
        """As gnnsparse.torch.nn.GCNConv.forward, with x W and the aggregation on `bits`-bit operands
        (the float path when bits is None, or for trainable edge weights)."""
        bits = self.bits
        x = _float_input(x, bits)
        if self._lean(x, edge_index, edge_weight):  # a CSR: operators without GraphTensors (gcn_operators)
            ops = edge_index if isinstance(edge_index, GCNOperators) else gcn_operators(edge_index, _like(x))
            if bits is None:  # lin(x) with zero columns at an odd width on CUDA (tnn._head_width)
                out = tnn._project_aggregate(x, self.lin, self.out_channels, lambda h: qa.spmm_float(ops.A, ops.AT, h))
            else:
                out = qa.gcn_layer(ops.A, ops.AT, x, self.lin.weight, bits, self._scales)
            return out + self.bias if self.bias is not None else out
        if (bits is None or isinstance(x, (tuple, list))
                or (edge_weight is not None and edge_weight.requires_grad and torch.is_grad_enabled())):
            return super().forward(_dequantized(x), edge_index, edge_weight)
        if self.cached and self._cached_graph is not None:
            g = self._cached_graph
        else:
            g = self._norm(tnn.graph_of(edge_index, _like(x)), edge_weight, torch.float32)
            if self.cached:
                self._cached_graph = g
        A, AT, _ = self._ops.get(g, values=True)
        out = qa.gcn_layer(A, AT, x, self.lin.weight, bits, self._scales)
        if self.bias is not None:
            out = out + self.bias
        return out

    def _lean(self, x, graph, edge_weight) -> bool:
        """True when the layer runs over gcn_operators: a square gnnsparse.CSR without values (or
        GCNOperators), no edge weights, PyG's default normalization (self loops, not improved)."""
        if isinstance(graph, GCNOperators):
            return True
        return (isinstance(graph, CSR) and graph.val is None and edge_weight is None and isinstance(x, (Tensor, QTensor))
                and self.normalize and self.add_self_loops and not self.improved
                and graph.shape[0] == graph.shape[1] == x.shape[0])

    def __repr__(self):
        return f"Quant{super().__repr__()[:-1]}, bits={self.bits})"


class GATConv(tnn.GATConv):
    """gnnsparse.torch.nn.GATConv with a quantized linear transformation, quantized attention
    logits (logit_bits; None keeps them in float32) and a quantized multi-head aggregation."""

    def __init__(self, in_channels, out_channels: int, *args, bits: Optional[int] = 8,
                 logit_bits: Optional[int] = 8, **kwargs):
        super().__init__(in_channels, out_channels, *args, **kwargs)
        self.bits = _check_bits(bits)
        self.logit_bits = _check_bits(logit_bits)
        self._ops = _Operators()
        self._scales = qa.LayerScales()

    def forward(self, x, edge_index, edge_attr: Optional[Tensor] = None, size=None,
                return_attention_weights: Optional[bool] = None):
        """As gnnsparse.torch.nn.GATConv.forward, quantized (`bits`, `logit_bits`); the float path
        for what the quantized one does not cover (bipartite x, edge features, residual, attention
        weights returned). Without attention dropout (or in eval) the attention and aggregation are
        one step keeping nothing per edge for the backward (gnnsparse.quant.autograd.gat_attend);
        with it, the weights are formed in the logits' storage, dropped out and saved."""
        bits = self.bits
        x = _float_input(x, bits)
        if (bits is None or not isinstance(x, (Tensor, QTensor)) or self.lin is None or edge_attr is not None
                or self.res is not None or return_attention_weights is not None):
            return super().forward(_dequantized(x), edge_index, edge_attr, size, return_attention_weights)
        if len(x.shape) != 2:
            raise ValueError("GATConv takes x of shape (N, F)")
        H, C = self.heads, self.out_channels
        n = x.shape[0]
        g = tnn.graph_of(edge_index, _like(x), n, n).with_val(None)
        if self.add_self_loops:
            g = tnn._derived(g, ("gat_loops",), lambda b: self_loops(b, "replace"))
        A, AT, perm = self._ops.get(g, values=False)
        token, handle = qa.gat_project(x, self.lin.weight, H, bits, self._scales)  # q(x W^T), no float32 copy
        # a_src = (x W^T) . att_src per head = x (W^T att_src): the attention vectors folded into the weight
        Wh = self.lin.weight.view(H, C, -1)
        wa = torch.cat([(Wh * self.att_src.reshape(H, C, 1)).sum(1), (Wh * self.att_dst.reshape(H, C, 1)).sum(1)])
        a = qa.gat_logits(x, wa, handle)
        a_src, a_dst = a[:, :H].contiguous(), a[:, H:].contiguous()
        if self.logit_bits is not None and not (self.dropout > 0 and self.training):
            # attention and aggregation in one step that keeps no per-edge tensor for the backward
            out = qa.gat_attend(g, A, AT, perm, a_dst, a_src, token, handle, bits, self.logit_bits,
                                self.negative_slope, self._scales)
        else:
            if self.logit_bits is None:  # one fused call (FusedMM's D = 0 edges form), no (nnz, H) temporaries
                alpha = gf.fusedmm(g, a_dst, a_src, a_src.new_empty((n, H, 0)), "add", L.GAT_EDGE,
                                   self.negative_slope, return_edges=True)[1]
            else:  # the quantized logits, turned into the weights in their own storage
                alpha = qa.leaky_edge_softmax(g, qa.sddmm_add(A, a_src, a_dst, self.logit_bits), self.negative_slope)
            alpha = F.dropout(alpha, p=self.dropout, training=self.training)
            out = qa.gat_aggregate(A, AT, perm, alpha, token, handle, bits, self._scales)
        out = out.reshape(-1, H * C) if self.concat else out.mean(1)
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self):
        return f"Quant{super().__repr__()[:-1]}, bits={self.bits})"
