"""Quantized layers (gnnsparse.quant.nn) and `gnnsparse train --quant`.

The layers keep the float layers' parameters and match them within the quantization error
(forward and gradients), equal them exactly with bits=None, and are reproducible under
torch.manual_seed; they take input features quantized once (a QTensor) as they are; the train
command picks the bit width by Tango's Error_X rule on the first layer's output before training
(printed), against a NumPy Error_X of the same tensor, quantizes the input features once at that
width, and reports the accuracy against the float32 run. A few seconds on the CPU (SYCL backend);
the CUDA variants run where a GPU is.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gnnsparse.torch")

import gnnsparse as gs  # noqa: E402
from gnnsparse.quant import model as qmodel  # noqa: E402
from gnnsparse.quant import nn as qnn  # noqa: E402
from gnnsparse.torch import nn as tnn  # noqa: E402

from conftest import rel, sycl_or_skip, torch_cpu_cuda  # noqa: E402


device = torch_cpu_cuda  # the fixture of conftest, under the name these tests use


def _pair(Q, F, device, **kw):
    torch.manual_seed(1)
    q = Q(32, 16, **kw).to(device)
    f = F(32, 16, **{k: v for k, v in kw.items() if k not in ("bits", "logit_bits")}).to(device)
    f.load_state_dict(q.state_dict())  # the same parameters
    return q, f


@pytest.mark.parametrize("kind", ["gcn", "gat"])
def test_layers_match_float_layers(device, kind):
    torch.manual_seed(0)
    N = 400
    ei = torch.randint(0, N, (2, 3000), device=device)
    x = torch.randn(N, 32, device=device)
    Q, F = (qnn.GCNConv, tnn.GCNConv) if kind == "gcn" else (qnn.GATConv, tnn.GATConv)
    kw = {} if kind == "gcn" else dict(heads=4)
    for bits, bound in ((8, 0.06), (4, 0.6)):
        q, f = _pair(Q, F, device, bits=bits, **kw)
        yq, yf = q(x, ei), f(x, ei)
        assert rel(yq, yf) < bound
        yq.square().sum().backward()
        yf.square().sum().backward()
        for (n, pq), (_, pf) in zip(q.named_parameters(), f.named_parameters()):
            assert rel(pq.grad, pf.grad) < 2 * bound, n
    q, f = _pair(Q, F, device, bits=None, **kw)
    assert torch.equal(q(x, ei), f(x, ei))  # bits=None: the float layer


def test_layers_reproducible(device):
    ei = torch.randint(0, 200, (2, 1500), generator=torch.Generator().manual_seed(3)).to(device)
    x = torch.randn(200, 32, generator=torch.Generator().manual_seed(4)).to(device)

    def run():
        q, _ = _pair(qnn.GATConv, tnn.GATConv, device, heads=2, bits=8)
        torch.manual_seed(9)
        y = q(x, ei)
        y.sum().backward()
        return y.detach().cpu(), q.lin.weight.grad.cpu()

    for a, b in zip(run(), run()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("kind", ["gcn", "gcn-csr", "gat"])
def test_layers_take_quantized_input(device, kind):
    """Input features quantized once (a QTensor, as `gnnsparse train --quant 8` holds them): the
    quantized layer takes them as they are and matches the float layer on their dequantized values
    within the quantization error (output and parameter gradients; the input has no gradient); a
    layer of another width requantizes them; the float layer (bits None) computes exactly the float
    layer on the dequantized values."""
    torch.manual_seed(0)
    N = 300
    ei = torch.randint(0, N, (2, 2500), device=device)
    graph = gs.CSR.from_edge_index(ei, N) if kind == "gcn-csr" else ei
    x = torch.randn(N, 32, device=device)
    qx = gs.quantize(x, 8, True, 11)
    xd = torch.as_tensor(gs.dequantize(qx), device=device)
    Q, F = (qnn.GATConv, tnn.GATConv) if kind == "gat" else (qnn.GCNConv, tnn.GCNConv)
    kw = dict(heads=4) if kind == "gat" else {}
    q, f = _pair(Q, F, device, bits=8, **kw)
    from gnnsparse.quant import autograd as qa

    quantized = []  # the shapes the layer quantizes: its weight, never the QTensor input again
    real = qa.quantize

    def spy(t, *a, **k):
        quantized.append(tuple(t.shape))
        return real(t, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(qa, "quantize", spy)
        yq = q(qx, graph)
    assert quantized and tuple(x.shape) not in quantized, quantized
    yf = f(xd, graph)
    assert rel(yq, yf) < 0.06
    yq.square().sum().backward()
    yf.square().sum().backward()
    for (n, pq), (_, pf) in zip(q.named_parameters(), f.named_parameters()):
        assert rel(pq.grad, pf.grad) < 0.12, n
    q4, f4 = _pair(Q, F, device, bits=4, **kw)
    assert rel(q4(qx, graph), f4(xd, graph)) < 0.6
    qn, fn = _pair(Q, F, device, bits=None, **kw)
    assert torch.equal(qn(qx, graph), fn(xd, graph))


def test_train_quantizes_input_once():
    """run_once with a quantized first layer replaces t["x"] by the features quantized once at the
    chosen width (so the run holds no float32 copy); quant_input=False keeps the float32 features;
    both train, reproducibly, and differently (one rounding of x against one per step)."""
    sycl_or_skip()
    from gnnsparse.quant import QTensor
    from gnnsparse.train.data import quick
    from gnnsparse.train.loop import fresh_graph, prepare, run_once

    t0 = prepare(quick(0), torch.device("cpu"), "gat", edge_index=False)
    x = t0["x"]
    losses = {}
    for qin in (True, False, True):
        t = fresh_graph(t0)
        r = run_once(t, "gat", "gnnsparse", epochs=2, quant="8", quant_input=qin)
        assert isinstance(t["x"], QTensor) == qin and t0["x"] is x
        if qin:
            assert t["x"].bits == 8 and t["x"].shape == tuple(x.shape)
        assert np.isfinite(r.losses).all() and r.quant_bits == 8
        losses.setdefault(qin, []).append(r.loss_bits)
    assert losses[True][0] == losses[True][1] and losses[True][0] != losses[False][0]


def test_quantized_gat_keeps_attention_dropout():
    """`train --quant --attn-dropout p`: the quantized GAT's layers get the float model's attention
    dropout (both layers), not none."""
    from gnnsparse.train.models import Net

    for quant in (None, 8):
        net = Net("gat", "gnnsparse", 16, 32, 4, heads=4, quant=quant, attn_dropout=0.3)
        assert net.conv1.dropout == 0.3 and net.conv2.dropout == 0.3, quant


def test_bits_checked():
    with pytest.raises(ValueError, match="bits"):
        qnn.GCNConv(4, 4, bits=6)


def test_train_quant_cli(capsys):
    """`train --quick --quant`: Error_X printed and the choice made from it before training, the
    quantized run next to the float32 one, seeded runs bitwise equal."""
    sycl_or_skip()
    from gnnsparse import train as T

    args = T.build_parser().parse_args(["--model", "gcn", "--quick", "--quant", "--epochs", "3", "--runs", "2",
                                        "--device", "cpu"])
    res = T.train(args)
    out = capsys.readouterr().out
    assert "quantization: Error_X of the first layer's output" in out and "vs float32" in out
    q = res["quant"]
    assert q[0].loss_bits == q[1].loss_bits  # seeded quantized training is reproducible
    errs = q[0].quant_errors
    assert set(errs) == {4, 8} or set(errs) == {4}
    want = min((b for b, e in errs.items() if e < 0.3), default=None)
    assert q[0].quant_bits == want
    assert "gnnsparse quantized" in q[0].framework


def test_error_x_rule_matches_numpy():
    """The rule's Error_X is eq. 4 of Tango on the quantized-then-dequantized tensor."""
    sycl_or_skip()
    rng = np.random.default_rng(0)
    h = torch.from_numpy(np.maximum(rng.standard_normal((500, 32)), 0).astype(np.float32))  # ReLU-like output
    bits, errs = gs.quant.select_bits(h, (4, 8), seed=5)
    for b in (4, 8):
        if b not in errs:
            continue
        Q = gs.quantize(h, b, True, 5)
        want = qmodel.error_x(h.numpy(), gs.dequantize(Q).numpy())
        assert errs[b] == pytest.approx(want, rel=1e-12)
    assert bits == min((b for b, e in errs.items() if e < 0.3), default=None)


def test_error_x_in_chunks(monkeypatch):
    """Error_X is summed in float64 a chunk at a time (no float64 copy of the whole tensor): the
    same value as the whole-tensor formula, for torch and NumPy inputs, chunks that do not divide
    the size."""
    sycl_or_skip()
    from gnnsparse.quant import _select

    monkeypatch.setattr(_select, "_CHUNK", 1000)
    rng = np.random.default_rng(3)
    h = np.maximum(rng.standard_normal((701, 13)), 0).astype(np.float32)
    for X in (torch.from_numpy(h), h):
        Q = gs.quantize(X, 8, True, 2)
        want = qmodel.error_x(h, np.asarray(gs.dequantize(Q)))
        assert gs.quant.error_x(X, Q) == pytest.approx(want, rel=1e-12)


def test_train_compare_over_seeds(capsys):
    """`train --quant --compare fp32 --seeds 3`: every model trained with three seeds (from the same
    graph), the table shows mean +- std (worst), the comparison the per-seed accuracy ratio (mean
    and worst seed), epoch times, and peak memory n/a on the CPU; the quantized runs report their
    delayed scales. The first seed of the run is the run of --seed 0 alone (the graph is --seed's)."""
    sycl_or_skip()
    from gnnsparse import train as T

    argv = ["--model", "gcn", "--quick", "--quant", "8", "--compare", "fp32", "--epochs", "3", "--device", "cpu",
            "--plain"]
    res = T.train(T.build_parser().parse_args(argv + ["--seeds", "3"]))
    out = capsys.readouterr().out
    assert [r.seed for r in res["gnnsparse"]] == [0, 1, 2] and [r.seed for r in res["quant"]] == [0, 1, 2]
    assert "(3 seeds)" in out and "+-" in out
    assert "over 3 seeds" in out and "worst seed" in out and "peak memory n/a (CPU)" in out
    assert out.count("delayed scales") == 3 and "dh " in out and "h " in out
    st = res["quant"][0].quant_scales
    assert set(st) == {"h", "dh"} and st["h"]["steps"] == 6 and st["dh"]["steps"] == 3  # train + eval forwards
    alone = T.train(T.build_parser().parse_args(argv))
    assert alone["quant"][0].loss_bits == res["quant"][0].loss_bits
    assert alone["gnnsparse"][0].loss_bits == res["gnnsparse"][0].loss_bits
    assert res["quant"][1].loss_bits != res["quant"][0].loss_bits


def test_train_compare_checks():
    from gnnsparse import train as T
    from gnnsparse._cli import UsageError

    p = T.build_parser()
    with pytest.raises(SystemExit):
        p.parse_args(["--compare", "fp16"])
    with pytest.raises(SystemExit):
        p.parse_args(["--seeds", "0"])
    args = p.parse_args(["--model", "gcn", "--nproc", "2", "--seeds", "2", "--quick", "--device", "cpu"])
    with pytest.raises(UsageError, match="--seeds"):
        T.train(args)
