"""Quantized GNN layers (after Tango, SC'23): gnnsparse.torch.nn's GCNConv and GATConv with the
linear transformation, the aggregation and GAT's attention logits run by gnnsparse.quant.autograd
(int8 / int4 operands, stochastic rounding, float32 results).

Same parameters (names, shapes, initialization) as the float layers, so a state_dict moves between
them. `bits` (8 or 4; None = the float layer) can be changed between steps, which is how the
Error_X rule of `gnnsparse train --quant` sets it after the first epoch. Per Tango, what stays in
float32: the attention softmax (and its dropout), the weight update (the optimizer's), and the
layer before the output softmax (the train command keeps its second layer in float32).

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

from ..torch import _library as L
from ..torch import functional as gf
from ..torch import nn as tnn
from ..torch.graph import GraphTensors, self_loops
from . import autograd as qa

__all__ = ["GCNConv", "GATConv"]


def _check_bits(bits):
    if bits is not None and bits not in (4, 8):
        raise ValueError(f"bits must be 8, 4 or None (float), got {bits!r}")
    return bits


class _Operators:
    """A (gnnsparse.CSR), its transpose AT (values val[t_perm]) and t_perm (int64) of one graph,
    built once and kept while the graph's tensors are the same objects, unchanged."""

    def __init__(self):
        self.key = None
        self.keep = None
        self.value = None

    def get(self, g: GraphTensors, values: bool):
        val = g.val if values else None
        key = (id(g.col), id(val), None if val is None else val._version)
        if self.key != key or self.keep[0] is not g.col or self.keep[1] is not val:
            perm = g.t_perm.to(torch.int64)
            v = None if val is None else val.detach()
            A = L._csr(g.rowptr, g.col, v, g.num_cols)
            vT = None if v is None else v.index_select(0, perm).contiguous()
            AT = L._csr(g.t_rowptr, g.t_col, vT, g.num_rows, cache=False)
            self.key, self.keep, self.value = key, (g.col, val, vT), (A, AT, perm)
        return self.value


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
        if (bits is None or isinstance(x, (tuple, list))
                or (edge_weight is not None and edge_weight.requires_grad and torch.is_grad_enabled())):
            return super().forward(x, edge_index, edge_weight)
        if self.cached and self._cached_graph is not None:
            g = self._cached_graph
        else:
            g = self._norm(tnn.graph_of(edge_index, x), edge_weight, x.dtype)
            if self.cached:
                self._cached_graph = g
        A, AT, _ = self._ops.get(g, values=True)
        out = qa.gcn_layer(A, AT, x, self.lin.weight, bits, self._scales)
        if self.bias is not None:
            out = out + self.bias
        return out

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
        weights returned)."""
        bits = self.bits
        if (bits is None or not isinstance(x, Tensor) or self.lin is None or edge_attr is not None
                or self.res is not None or return_attention_weights is not None):
            return super().forward(x, edge_index, edge_attr, size, return_attention_weights)
        if x.dim() != 2:
            raise ValueError("GATConv takes x of shape (N, F)")
        H, C = self.heads, self.out_channels
        n = x.shape[0]
        g = tnn.graph_of(edge_index, x, n, n).with_val(None)
        if self.add_self_loops:
            g = tnn._derived(g, ("gat_loops",), lambda b: self_loops(b, "replace"))
        A, AT, perm = self._ops.get(g, values=False)
        token, handle = qa.gat_project(x, self.lin.weight, H, bits, self._scales)  # q(x W^T), no float32 copy
        # a_src = (x W^T) . att_src per head = x (W^T att_src): the attention vectors folded into the weight
        Wh = self.lin.weight.view(H, C, -1)
        wa = torch.cat([(Wh * self.att_src.reshape(H, C, 1)).sum(1), (Wh * self.att_dst.reshape(H, C, 1)).sum(1)])
        a = qa.gat_logits(x, wa, handle)
        a_src, a_dst = a[:, :H].contiguous(), a[:, H:].contiguous()
        if self.logit_bits is None:
            e = gf.sddmm(g, a_dst, a_src, "add")
        else:
            e = qa.sddmm_add(A, a_src, a_dst, self.logit_bits)
        alpha = gf.edge_softmax(g, qa.leaky_relu(e, self.negative_slope))
        alpha = F.dropout(alpha, p=self.dropout, training=self.training)
        out = qa.gat_aggregate(A, AT, perm, alpha, token, handle, bits, self._scales)
        out = out.reshape(-1, H * C) if self.concat else out.mean(1)
        if self.bias is not None:
            out = out + self.bias
        return out

    def __repr__(self):
        return f"Quant{super().__repr__()[:-1]}, bits={self.bits})"
