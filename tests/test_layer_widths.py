"""GCNConv, GATConv and TransformerConv at an odd output width on CUDA float32 form their projected features with
zero columns up to the kernels' 4-float vector (gnnsparse.torch.nn._head_width / _project), so that
no sparse call pads a copy. The layer's output, its gradients and its state_dict are those of the
plain layer.

Everywhere: the rule (which layers, widths and dtypes pad). On the CPU (SYCL) and CUDA devices: the
padded forms forced (the width rule patched to pad) against the plain ones, float64, forward and
gradients of every parameter and of x, fused and dropout paths, heads concatenated and averaged. On
CUDA: the default rule pads float32 at 47 columns, against the same layer with GNNSPARSE_CUDA_PAD=off
(no padding anywhere).
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
from conftest import torch_device_params  # noqa: E402
from gnnsparse.torch import nn as gnn  # noqa: E402


@pytest.fixture(params=torch_device_params())
def dev(request):
    if request.param == "cpu":
        from conftest import sycl_or_skip

        sycl_or_skip()
    return torch.device(request.param)


def _edge_index(n, e, seed, dev):
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, (2, e))
    ei[:, :30] = [rng.integers(0, n, 30), [5] * 30]  # a longer row (target 5)
    keep = ei[1] != 7  # node 7: an empty row
    return torch.from_numpy(ei[:, keep]).to(dev)


def _force_pad(monkeypatch):
    """Every width the layers ask about rounds up to a multiple of 4 (on any device and dtype)."""
    monkeypatch.setattr(gnn, "_vector_width", lambda device_type, dt, w: w + (-w) % 4)


def test_head_width_rule(monkeypatch):
    monkeypatch.delenv("GNNSPARSE_CUDA_PAD", raising=False)
    lin = gnn._GlorotLinear(8, 47, bias=False)
    cpu32 = torch.empty(2, 8)
    assert gnn._head_width(cpu32, lin, 47) == 47  # not CUDA
    # the CUDA rule, asked with a stand-in tensor of device type cuda
    fake = type("T", (), {"device": torch.device("cuda"), "dtype": torch.float32})()
    assert gnn._head_width(fake, lin, 47) == 48
    assert gnn._head_width(fake, lin, 17) == 20
    assert gnn._head_width(fake, lin, 48) == 48
    assert gnn._head_width(fake, lin, 7) == 7  # narrow: the scalar walks, no padding
    fake64 = type("T", (), {"device": torch.device("cuda"), "dtype": torch.float64})()
    assert gnn._head_width(fake64, lin, 47) == 47
    assert gnn._head_width(fake, gnn._GlorotLinear(8, 47, bias=True), 47) == 48  # the bias is padded too
    assert gnn._head_width(fake, torch.nn.Sequential(lin), 47) == 47  # not a plain Linear
    monkeypatch.setenv("GNNSPARSE_CUDA_PAD", "ops")  # the calls pad copies, the layers do not
    assert gnn._head_width(fake, lin, 47) == 47
    monkeypatch.setenv("GNNSPARSE_CUDA_PAD", "off")
    assert gnn._head_width(fake, lin, 47) == 47


def _run(layer, x, ei, seed=0, call=None):
    torch.manual_seed(seed)
    xx = x.detach().clone().requires_grad_(True)
    out = (call or layer)(xx, ei)
    g = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(1)).to(out.device)
    (out * g).sum().backward()
    grads = {n: p.grad.detach().clone() for n, p in layer.named_parameters()}
    layer.zero_grad(set_to_none=True)
    return out.detach(), xx.grad.detach(), grads


def _same(a, b, rtol):
    out_a, dx_a, g_a = a
    out_b, dx_b, g_b = b
    assert out_a.shape == out_b.shape
    torch.testing.assert_close(out_a, out_b, rtol=rtol, atol=rtol)
    torch.testing.assert_close(dx_a, dx_b, rtol=rtol, atol=rtol)
    assert g_a.keys() == g_b.keys()
    for k in g_a:
        assert g_a[k].shape == g_b[k].shape, k
        torch.testing.assert_close(g_a[k], g_b[k], rtol=rtol, atol=rtol, msg=k)


@pytest.mark.parametrize("kind", ["gcn", "gat_fused", "gat_dropout", "gat_mean", "gat_weights", "transformer",
                                  "transformer_dropout", "transformer_mean"])
@pytest.mark.parametrize("C", [5, 18])
def test_padded_projection_equals_plain(dev, monkeypatch, kind, C):
    n, fin = 41, 9
    ei = _edge_index(n, 260, 3, dev)
    x = torch.randn(n, fin, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).to(dev)
    if kind == "gcn":
        layer = gnn.GCNConv(fin, C)
    elif kind.startswith("transformer"):
        layer = gnn.TransformerConv(fin, C, heads=3, concat=kind != "transformer_mean",
                                    dropout=0.4 if kind == "transformer_dropout" else 0.0)
    else:
        layer = gnn.GATConv(fin, C, heads=3, concat=kind != "gat_mean",
                            dropout=0.4 if kind == "gat_dropout" else 0.0)
    layer = layer.to(dev, torch.float64)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if "bias" in name:
                p.uniform_(-1, 1)
    def call(xx, e):
        if kind == "gat_weights":  # the unfused path, and alpha's gradient through the output's
            out, (_, alpha) = layer(xx, e, return_attention_weights=True)
            return out + (alpha * alpha).sum()
        return layer(xx, e)

    plain = _run(layer, x, ei, call=call)
    _force_pad(monkeypatch)
    lin = layer.lin_value if kind.startswith("transformer") else layer.lin
    assert gnn._head_width(x, lin, C) == C + (-C) % 4
    padded = _run(layer, x, ei, call=call)
    _same(padded, plain, 1e-12)
    assert lin.weight.shape == ((1 if kind == "gcn" else 3) * C, fin)  # the parameters as they were


def test_quant_gcn_float_layer_padded(dev, monkeypatch):
    """The quantized GCN's float32 output layer over gcn_operators (the lean path) pads the same way."""
    from gnnsparse.quant import nn as qnn

    n, fin, C = 53, 12, 7
    rng = np.random.default_rng(4)
    ei = rng.integers(0, n, (2, 400))
    A = gs.CSR.from_edge_index(ei, n)
    x = torch.from_numpy(rng.standard_normal((n, fin))).float().to(dev)
    layer = qnn.GCNConv(fin, C, cached=True, bits=None).to(dev)
    Ad = A if dev.type == "cpu" else A.to_like(torch.empty(1, device=dev))
    plain = _run(layer, x, Ad)
    _force_pad(monkeypatch)
    padded = _run(layer, x, Ad)
    _same(padded, plain, 2e-6)


@pytest.mark.cuda
def test_cuda_default_pads_float32(monkeypatch):
    """On CUDA at 47 columns the layers' default (padded projection) against GNNSPARSE_CUDA_PAD=ops
    (padded copies in the calls) and =off (no padding)."""
    if not (torch.cuda.is_available() and gs.available_backends().get("cuda", False)):
        pytest.skip("no CUDA device / CUDA backend")
    dev = torch.device("cuda")
    n, fin, C = 300, 20, 47
    ei = _edge_index(n, 3000, 5, dev)
    x = torch.randn(n, fin, generator=torch.Generator().manual_seed(6)).to(dev)
    for layer in (gnn.GCNConv(fin, C).to(dev), gnn.GATConv(fin, C, heads=2).to(dev),
                  gnn.TransformerConv(fin, C, heads=2).to(dev)):
        with torch.no_grad():
            for name, p in layer.named_parameters():
                if "bias" in name:
                    p.uniform_(-1, 1)
        lin = getattr(layer, "lin", None) or layer.lin_value
        monkeypatch.delenv("GNNSPARSE_CUDA_PAD", raising=False)
        assert gnn._head_width(x, lin, C) == 48
        padded = _run(layer, x, ei)
        again = _run(layer, x, ei)
        for a, b in zip(padded[:2], again[:2]):
            assert torch.equal(a, b)  # bitwise repeats
        for mode in ("ops", "off"):
            monkeypatch.setenv("GNNSPARSE_CUDA_PAD", mode)
            assert gnn._head_width(x, lin, C) == C
            plain = _run(layer, x, ei)
            _same(padded, plain, 2e-5)
