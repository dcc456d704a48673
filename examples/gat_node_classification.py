#!/usr/bin/env python3
"""Node classification with a 2-layer GAT on gnnsparse: the user-facing PyTorch path end to end.

    python examples/gat_node_classification.py                 # generated arxiv-sized graph, GPU if present
    python examples/gat_node_classification.py --quick         # small graph, CPU seconds
    python examples/gat_node_classification.py --backward save # keep the attention weights for backward

The attention of each layer (scores -> leaky_relu -> softmax over the incoming edges -> weighted sum
over 4 heads) is one gnnsparse.torch.fusedmm call; nothing of size edges x heads x channels is
formed, forward or backward, and two runs with one seed give the same bits.
"""
import argparse
import time

import torch
import torch.nn.functional as F

import gnnsparse as gs
import gnnsparse.torch as gst
from gnnsparse.torch.nn import GATConv
from gnnsparse.train.data import arxiv_like, quick


class GAT(torch.nn.Module):
    def __init__(self, in_channels, hidden, classes, heads=4):
        super().__init__()
        self.conv1 = GATConv(in_channels, hidden // heads, heads=heads)
        self.conv2 = GATConv(hidden, classes, heads=1)

    def forward(self, x, A):
        h = F.dropout(F.elu(self.conv1(x, A)), p=0.5, training=self.training)
        return self.conv2(h, A)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--backward", choices=("recompute", "save"), default="recompute",
                   help="FusedMM backward: recompute the attention weights (default) or keep them")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    gst.set_fusedmm_backward(args.backward)
    dev = torch.device(args.device)
    data = quick(0) if args.quick else arxiv_like(0)
    epochs = args.epochs or (10 if args.quick else 100)
    print(data.describe(), "on", dev, "| fused attention kernel:", gst.kernel_has_edge("leaky_relu_softmax"))

    # the graph object: one row per target node; self loops are added by GATConv (once, cached)
    A = gs.CSR.from_edge_index(torch.from_numpy(data.edge_index).to(dev), data.num_nodes)
    x, y = torch.from_numpy(data.x).to(dev), torch.from_numpy(data.y).to(dev)
    train, test = (torch.from_numpy(i).to(dev) for i in (data.train_idx, data.test_idx))

    torch.manual_seed(0)
    model = GAT(x.shape[1], 64 if args.quick else 128, data.num_classes).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(1, epochs + 1):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(x, A)[train], y[train])
        loss.backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        model.eval()
        with torch.no_grad():
            acc = (model(x, A).argmax(1)[test] == y[test]).float().mean().item()
        print(f"epoch {epoch:3d}  loss {loss.item():.4f}  test acc {100 * acc:5.2f}%  {ms:8.1f} ms")
    if dev.type == "cuda":
        print(f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")


if __name__ == "__main__":
    main()
