"""The 2-layer GCN / GAT / GraphSAGE / GATv2 / graph transformer / GIN / GraphConv node classifiers
`gnnsparse train` trains, built from
gnnsparse.torch.nn or from torch_geometric.nn with the same architecture and parameter names
(so one state_dict initializes both)."""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

from .._cli import UsageError
from .cli import MODELS, QUANT_MODELS  # declared with the command line, which needs no torch

__all__ = ["MODELS", "QUANT_MODELS", "Net", "layer_module", "with_self_loops"]


def layer_module(framework: str):
    if framework == "gnnsparse":
        from ..torch import nn

        return nn
    if framework == "pyg":
        try:
            import torch_geometric.nn as pnn
        except ImportError as e:
            raise UsageError(f"--compare pyg needs torch_geometric, which is not installed ({e}): "
                             "pip install torch_geometric") from None
        return pnn
    raise ValueError(f"framework must be 'gnnsparse' or 'pyg', got {framework!r}")


class Net(torch.nn.Module):
    """conv1 -> activation -> dropout -> conv2. GAT, GATv2 and the transformer: `heads` heads of
    hidden // heads channels, concatenated, then one head, attention dropout `attn_dropout`; GAT and
    GATv2 take self loops added once to the graph, not per call. GIN: each conv's MLP is
    Linear -> ReLU -> Linear. `aggr` (sum, mean, max): GraphSAGE's (default mean) and GraphConv's
    (default sum)."""

    def __init__(self, kind: str, framework: str, in_channels: int, hidden: int, out_channels: int, *,
                 heads: int = 4, dropout: float = 0.5, aggr: Optional[str] = None, quant: Optional[int] = None,
                 attn_dropout: float = 0.0):
        super().__init__()
        self.quant = quant is not None
        if kind not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}; got {kind!r}")
        L = layer_module(framework)
        self.kind, self.dropout = kind, dropout
        if quant is not None:
            # Tango's quantized training: the first layer quantized (bits `quant`, changeable later
            # through conv1.bits), the layer before the output softmax in float32
            if framework != "gnnsparse" or kind not in QUANT_MODELS:
                raise ValueError(f"quantized training covers {', '.join(QUANT_MODELS)} on gnnsparse; got {kind} "
                                 f"on {framework}")
            from ..quant import nn as Q

            if kind == "gcn":
                # both layers over the same normalized operators of a CSR (Q.gcn_operators: no
                # GraphTensors), the second in float32 (bits None)
                self.conv1 = Q.GCNConv(in_channels, hidden, cached=True, bits=quant)
                self.conv2 = Q.GCNConv(hidden, out_channels, cached=True, bits=None)
            else:
                if hidden % heads:
                    raise ValueError(f"GAT: hidden ({hidden}) must be a multiple of heads ({heads})")
                self.conv1 = Q.GATConv(in_channels, hidden // heads, heads=heads, add_self_loops=False, bits=quant,
                                       dropout=attn_dropout)
                self.conv2 = L.GATConv(hidden, out_channels, heads=1, add_self_loops=False, dropout=attn_dropout)
        elif kind == "gcn":
            self.conv1 = L.GCNConv(in_channels, hidden, cached=True)
            self.conv2 = L.GCNConv(hidden, out_channels, cached=True)
        elif kind in ("gat", "gatv2"):
            if hidden % heads:
                raise ValueError(f"{kind.upper()}: hidden ({hidden}) must be a multiple of heads ({heads})")
            conv = L.GATConv if kind == "gat" else L.GATv2Conv
            self.conv1 = conv(in_channels, hidden // heads, heads=heads, add_self_loops=False, dropout=attn_dropout)
            self.conv2 = conv(hidden, out_channels, heads=1, add_self_loops=False, dropout=attn_dropout)
        elif kind == "transformer":
            if hidden % heads:
                raise ValueError(f"transformer: hidden ({hidden}) must be a multiple of heads ({heads})")
            self.conv1 = L.TransformerConv(in_channels, hidden // heads, heads=heads, dropout=attn_dropout)
            self.conv2 = L.TransformerConv(hidden, out_channels, heads=1, dropout=attn_dropout)
        elif kind == "gin":
            lin, relu = torch.nn.Linear, torch.nn.ReLU
            self.conv1 = L.GINConv(torch.nn.Sequential(lin(in_channels, hidden), relu(), lin(hidden, hidden)))
            self.conv2 = L.GINConv(torch.nn.Sequential(lin(hidden, hidden), relu(), lin(hidden, out_channels)))
        elif kind == "graphconv":
            aggr = {"sum": "add", None: "add"}.get(aggr, aggr)
            self.conv1 = L.GraphConv(in_channels, hidden, aggr=aggr)
            self.conv2 = L.GraphConv(hidden, out_channels, aggr=aggr)
        else:
            aggr = aggr or "mean"
            self.conv1 = L.SAGEConv(in_channels, hidden, aggr=aggr)
            self.conv2 = L.SAGEConv(hidden, out_channels, aggr=aggr)

    def forward(self, x, graph):
        h = self.conv1(x, graph)
        if self.quant and self.kind == "gcn":  # relu and dropout saving one boolean mask for the backward
            from ..quant.autograd import relu_dropout

            h = relu_dropout(h, self.dropout, self.training)
        elif self.quant and self.kind == "gat":  # elu and dropout saving their output and one mask
            from ..quant.autograd import elu_dropout_

            h = elu_dropout_(h, self.dropout, self.training)  # in place: conv1's output is used only here
        else:
            h = F.elu(h) if self.kind in ("gat", "gatv2") else F.relu(h)
            h = F.dropout(h, p=self.dropout, training=self.training)
        return self.conv2(h, graph)


def with_self_loops(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """edge_index without its self loops, plus one loop per node (what GATConv adds per call)."""
    keep = edge_index[0] != edge_index[1]
    loops = torch.arange(num_nodes, device=edge_index.device).repeat(2, 1)
    return torch.cat([edge_index[:, keep], loops], 1)
