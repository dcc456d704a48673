"""Distributed forward passes of gnnsparse.torch.nn's GCNConv and GATConv (the layers' own
parameters, so one state_dict initializes the single-process and the distributed model).

    out = gcn(conv, x, dgn)      # dgn = gcn_norm(dg), computed once per graph (dg.overlap: overlapped)
    out = gat(conv, x, dg)       # dg with one self loop per node (conv.add_self_loops False)

x holds this rank's rows; the output too. GCN exchanges conv.lin(x) (the hidden width, not the
input width); GAT exchanges the projected features and the source attention logits in one message.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from ..torch import _library as L
from ..torch import nn as tnn
from . import ops

__all__ = ["gcn", "gat", "DistNet"]


def gcn(conv: tnn.GCNConv, x: Tensor, dgn: "ops.DistGraph") -> Tensor:
    out = ops.spmm(dgn, conv.lin(x), "sum", overlap=dgn.overlap)
    return out + conv.bias if conv.bias is not None else out


def gat(conv: tnn.GATConv, x: Tensor, dg: "ops.DistGraph") -> Tensor:
    if conv.lin is None or conv.add_self_loops or conv.lin_edge is not None or conv.res is not None:
        raise ValueError("the distributed GAT layer covers GATConv(in, out, heads, add_self_loops=False) without "
                         "edge features or residual; add the self loops to the graph before partitioning")
    H, C = conv.heads, conv.out_channels
    xs = conv.lin(x).view(-1, H, C)
    a_src = (xs * conv.att_src).sum(-1)
    a_dst = (xs * conv.att_dst).sum(-1)
    if conv.dropout > 0 and conv.training:
        raise ValueError("attention dropout is not supported by the distributed GAT layer")
    out = ops.fusedmm(dg, a_dst, a_src, xs, "add", L.GAT_EDGE, conv.negative_slope)
    out = out.reshape(-1, H * C) if conv.concat else out.mean(1)
    return out + conv.bias if conv.bias is not None else out


class DistNet(torch.nn.Module):
    """gnnsparse.train.models.Net (gcn or gat) run on a distributed graph: forward(x, dg) with x
    and the output this rank's rows. For GCN, dg is the gcn_norm'ed graph."""

    def __init__(self, net):
        super().__init__()
        if net.kind not in ("gcn", "gat"):
            raise ValueError(f"distributed training covers gcn and gat, not {net.kind}")
        if not isinstance(net.conv1, (tnn.GCNConv, tnn.GATConv)) or type(net.conv1).__module__ != tnn.__name__:
            raise ValueError("distributed training runs float32 gnnsparse layers (the quantized option is the "
                             "int8 halo exchange, wire='int8')")
        self.net = net

    def forward(self, x: Tensor, dg) -> Tensor:
        layer = gcn if self.net.kind == "gcn" else gat
        h = layer(self.net.conv1, x, dg)
        h = F.elu(h) if self.net.kind == "gat" else F.relu(h)
        h = F.dropout(h, p=self.net.dropout, training=self.training)
        return layer(self.net.conv2, h, dg)
