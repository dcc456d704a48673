"""A training step of a gnnsparse layer never waits for the GPU (CUDA only).

A host-device synchronization per op (a `.item()`, a `.max()` read back, a boolean mask) makes the
host wait for the queue to drain, so a model whose kernels take microseconds runs at the speed of
its Python. After a warm-up step (graph conversion, caches, first-call work), forward and backward
of each layer run under torch.cuda.set_sync_debug_mode("warn"), which warns at every synchronizing
CUDA call.
"""
from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
from gnnsparse.torch import nn as gnn  # noqa: E402

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(
    not (torch.cuda.is_available() and gs.available_backends().get("cuda", False)),
    reason="no CUDA device / CUDA backend")]

N, E, F = 300, 2400, 16

LAYERS = {
    "gcn": lambda: gnn.GCNConv(F, 8),
    "gcn-cached": lambda: gnn.GCNConv(F, 8, cached=True),
    "sage-mean": lambda: gnn.SAGEConv(F, 8),
    "sage-max": lambda: gnn.SAGEConv(F, 8, aggr="max"),
    "gat": lambda: gnn.GATConv(F, 4, heads=2),
    "gat-dropout": lambda: gnn.GATConv(F, 4, heads=2, dropout=0.5),
    "gatv2": lambda: gnn.GATv2Conv(F, 4, heads=2),
    "transformer": lambda: gnn.TransformerConv(F, 4, heads=2),
    "transformer-dropout": lambda: gnn.TransformerConv(F, 4, heads=2, dropout=0.5),
    "gin": lambda: gnn.GINConv(torch.nn.Linear(F, 8)),
    "graphconv": lambda: gnn.GraphConv(F, 8),
    "graphconv-max": lambda: gnn.GraphConv(F, 8, aggr="max"),
    "sgconv": lambda: gnn.SGConv(F, 8, K=2),
    "appnp": lambda: gnn.APPNP(K=2, alpha=0.1),
}


@pytest.mark.parametrize("name", list(LAYERS))
def test_training_step_does_not_synchronize(name):
    g = torch.Generator().manual_seed(1)
    ei = torch.randint(0, N, (2, E), generator=g).cuda()
    x = torch.randn(N, F, generator=g).cuda().requires_grad_()
    layer = LAYERS[name]().cuda().train()

    def step():
        out = layer(x, ei)
        out.square().sum().backward()
        return out

    ref = step()  # warm-up: the graph is converted and cached, kernels loaded
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # switching the mode on warns by itself ("a prototype feature"): recorded, not counted
        torch.cuda.set_sync_debug_mode("warn")
        try:
            out = step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = [f"{w.filename}:{w.lineno}" for w in caught
             if "synchroniz" in str(w.message) and "debug mode" not in str(w.message)]
    assert not syncs, f"{name}: {len(syncs)} host-device synchronization(s) in a training step, at {syncs}"
    assert out.shape == ref.shape and bool(torch.isfinite(out).all())
