"""gnnsparse.torch.accelerate on five models written the way PyG's own examples write them (a GCN,
a GAT, a GraphSAGE, a GIN, a graph transformer), on generated data: each model runs as written and
after accelerate (a copy with the same weights), outputs are compared and a training epoch timed.

    python examples/accelerate.py                        # CPU, a 3000-node graph
    python examples/accelerate.py --device cuda --nodes 100000 --edges 2000000

Convs that gnnsparse.torch.nn does not implement stay PyG's (the report says which and why).
"""
from __future__ import annotations

import argparse
import copy
import time

import torch
import torch.nn.functional as F
from torch_geometric.nn import MLP, GATConv, GCNConv, GINConv, SAGEConv, TransformerConv, global_add_pool

import gnnsparse.torch as gst


# ---------------------------------------------------------------- the models, as PyG's examples have them
class GCN(torch.nn.Module):  # examples/gcn.py
    def __init__(self, in_channels, hidden_channels, out_channels):
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden_channels, cached=True, normalize=True)
        self.conv2 = GCNConv(hidden_channels, out_channels, cached=True, normalize=True)

    def forward(self, x, edge_index, edge_weight=None):
        x = F.dropout(x, p=0.5, training=self.training)
        x = self.conv1(x, edge_index, edge_weight).relu()
        x = F.dropout(x, p=0.5, training=self.training)
        x = self.conv2(x, edge_index, edge_weight)
        return x


class GAT(torch.nn.Module):  # examples/gat.py
    def __init__(self, in_channels, hidden_channels, out_channels, heads):
        super().__init__()
        self.conv1 = GATConv(in_channels, hidden_channels, heads, dropout=0.6)
        self.conv2 = GATConv(hidden_channels * heads, out_channels, heads=1, concat=False, dropout=0.6)

    def forward(self, x, edge_index):
        x = F.dropout(x, p=0.6, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.6, training=self.training)
        x = self.conv2(x, edge_index)
        return x


class SAGE(torch.nn.Module):  # examples/reddit.py
    def __init__(self, in_channels, hidden_channels, out_channels, num_layers=2):
        super().__init__()
        self.convs = torch.nn.ModuleList()
        self.convs.append(SAGEConv(in_channels, hidden_channels))
        for _ in range(num_layers - 2):
            self.convs.append(SAGEConv(hidden_channels, hidden_channels))
        self.convs.append(SAGEConv(hidden_channels, out_channels))

    def forward(self, x, edge_index):
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index)
            if i < len(self.convs) - 1:
                x = x.relu_()
                x = F.dropout(x, p=0.5, training=self.training)
        return x


class GIN(torch.nn.Module):  # examples/mutag_gin.py
    def __init__(self, in_channels, hidden_channels, out_channels, num_layers):
        super().__init__()
        self.convs = torch.nn.ModuleList()
        for _ in range(num_layers):
            mlp = MLP([in_channels, hidden_channels, hidden_channels])
            self.convs.append(GINConv(nn=mlp, train_eps=False))
            in_channels = hidden_channels
        self.mlp = MLP([hidden_channels, hidden_channels, out_channels], norm=None, dropout=0.5)

    def forward(self, x, edge_index, batch, batch_size):
        for conv in self.convs:
            x = conv(x, edge_index).relu()
        x = global_add_pool(x, batch, batch_size)
        return self.mlp(x)


class GraphTransformer(torch.nn.Module):  # examples/unimp_arxiv.py, without the label embedding
    def __init__(self, in_channels, hidden_channels, out_channels, num_layers, heads, dropout=0.3):
        super().__init__()
        self.convs = torch.nn.ModuleList()
        self.norms = torch.nn.ModuleList()
        for i in range(1, num_layers + 1):
            if i < num_layers:
                out, concat = hidden_channels // heads, True
            else:
                out, concat = out_channels, False
            self.convs.append(TransformerConv(in_channels, out, heads, concat=concat, beta=True, dropout=dropout))
            in_channels = hidden_channels
            if i < num_layers:
                self.norms.append(torch.nn.LayerNorm(hidden_channels))

    def forward(self, x, edge_index):
        for conv, norm in zip(self.convs[:-1], self.norms):
            x = norm(conv(x, edge_index)).relu()
        return self.convs[-1](x, edge_index)


# ---------------------------------------------------------------- generated data
def node_data(n, e, f, classes, device, gen):
    edge_index = torch.randint(0, n, (2, e), generator=gen)
    x = torch.randn(n, f, generator=gen)
    y = torch.randint(0, classes, (n,), generator=gen)
    return x.to(device), edge_index.to(device), y.to(device)


def graph_batch(graphs, nodes, edges, f, classes, device, gen):
    """`graphs` small graphs of `nodes` nodes each, as one disjoint union (PyG's mini-batch)."""
    ei = torch.randint(0, nodes, (2, graphs, edges), generator=gen) + torch.arange(graphs)[None, :, None] * nodes
    batch = torch.arange(graphs).repeat_interleave(nodes)
    x = torch.randn(graphs * nodes, f, generator=gen)
    y = torch.randint(0, classes, (graphs,), generator=gen)
    return x.to(device), ei.reshape(2, -1).to(device), batch.to(device), y.to(device)


def epoch_time(model, args, y, epochs):
    """Seconds per training epoch (Adam, cross-entropy), after one epoch of warm-up."""
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    sync = torch.cuda.synchronize if y.is_cuda else (lambda: None)
    for i in range(epochs + 1):
        if i == 1:
            sync()
            t0 = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(model(*args), y).backward()
        opt.step()
    sync()
    return (time.perf_counter() - t0) / epochs


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=3000)
    p.add_argument("--edges", type=int, default=30000)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    dev, gen = torch.device(a.device), torch.Generator().manual_seed(0)
    x, ei, y = node_data(a.nodes, a.edges, a.features, 7, dev, gen)
    xg, eig, batch, yg = graph_batch(64, 30, 60, a.features, 2, dev, gen)
    cases = [("GCN", lambda: GCN(a.features, 16, 7), (x, ei), y),
             ("GAT", lambda: GAT(a.features, 8, 7, heads=8), (x, ei), y),
             ("GraphSAGE", lambda: SAGE(a.features, 64, 7), (x, ei), y),
             ("GIN", lambda: GIN(a.features, 32, 2, num_layers=3), (xg, eig, batch, 64), yg),
             ("GraphTransformer", lambda: GraphTransformer(a.features, 64, 7, num_layers=3, heads=2), (x, ei), y)]
    rows = []
    for name, make, inputs, target in cases:
        torch.manual_seed(0)
        pyg = make().to(dev)
        ours = copy.deepcopy(pyg)
        report = gst.accelerate(ours)
        print(f"{name}: {report}")
        pyg.eval(), ours.eval()
        with torch.no_grad():
            diff = (pyg(*inputs) - ours(*inputs)).abs().max().item()
        t_pyg = epoch_time(pyg, inputs, target, a.epochs)
        t_ours = epoch_time(ours, inputs, target, a.epochs)
        rows.append((name, len(report.replaced), len(report.skipped), diff, t_pyg, t_ours))
    print(f"\n{a.nodes} nodes, {a.edges} edges, {a.features} features on {dev} (GIN: 64 graphs of 30 nodes); "
          f"float32, eval-mode outputs compared, {a.epochs} training epochs timed")
    print(f"{'model':<17}{'replaced':>9}{'skipped':>8}{'max |diff|':>12}{'PyG ms/epoch':>14}{'accelerated':>13}")
    for name, r, s, d, tp, to in rows:
        print(f"{name:<17}{r:>9}{s:>8}{d:>12.2e}{tp * 1e3:>14.1f}{to * 1e3:>13.1f}")


if __name__ == "__main__":
    main()
