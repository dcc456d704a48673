"""The torch ops' two eager routes give the same bits: the custom op (what torch.compile traces) and
the autograd.Function over the same Python functions (what eager calls take, past the dispatcher)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from conftest import torch_device_params  # noqa: E402
from gnnsparse.torch import _library as L  # noqa: E402
from gnnsparse.torch import nn as gnn  # noqa: E402

N, E, F = 40, 260, 6

LAYERS = {
    "gcn": lambda: gnn.GCNConv(F, 5),
    "sage-max": lambda: gnn.SAGEConv(F, 5, aggr="max"),
    "gat": lambda: gnn.GATConv(F, 3, heads=2),
    "gatv2": lambda: gnn.GATv2Conv(F, 3, heads=2),
    "transformer": lambda: gnn.TransformerConv(F, 3, heads=2),
    "gin": lambda: gnn.GINConv(torch.nn.Linear(F, 5)),
    "graphconv-min": lambda: gnn.GraphConv(F, 5, aggr="min"),
}


@pytest.fixture(params=torch_device_params())
def dev(request):
    if request.param == "cpu":
        from conftest import sycl_or_skip

        sycl_or_skip()
    return request.param


def _run(name, dev, route):
    g = torch.Generator().manual_seed(3)
    ei = torch.randint(0, N, (2, E), generator=g).to(dev)
    x = torch.randn(N, F, generator=g, dtype=torch.float64).to(dev).requires_grad_()
    torch.manual_seed(0)
    layer = LAYERS[name]().double().to(dev)
    saved = L._settings["eager"]
    L._settings["eager"] = route
    try:
        out = layer(x, ei)
        out.backward(torch.ones_like(out))
    finally:
        L._settings["eager"] = saved
    return [out.detach(), x.grad] + [p.grad for p in layer.parameters()]


@pytest.mark.parametrize("name", list(LAYERS))
def test_function_route_matches_custom_op_bitwise(name, dev):
    a, b = _run(name, dev, "function"), _run(name, dev, "custom_op")
    assert len(a) == len(b)
    for u, v in zip(a, b):
        assert (u is None) == (v is None)
        if u is not None:
            assert torch.equal(u, v)


def test_custom_op_route_under_a_dispatch_mode(dev):
    """Under a torch dispatch mode (here torch's FLOP counter) the calls go through the custom op,
    whose dispatcher entry the mode sees; the results are the same."""
    from torch.utils.flop_counter import FlopCounterMode

    g = torch.Generator().manual_seed(4)
    ei = torch.randint(0, N, (2, E), generator=g).to(dev)
    x = torch.randn(N, F, generator=g).to(dev)
    layer = gnn.GCNConv(F, 5).to(dev)
    ref = layer(x, ei)
    assert L._eager((x,))  # outside the mode: the function route
    with FlopCounterMode(display=False):
        assert L._eager((x,)) is False
        out = layer(x, ei)
    assert torch.equal(out, ref)
