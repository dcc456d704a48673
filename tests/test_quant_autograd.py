"""gnnsparse.quant.autograd: the quantized training primitives and their backward passes.

Each primitive's forward and gradients are compared with float32 autograd on the same inputs:
int8 stochastic quantization keeps the relative error near 1 % (bound 5 %), int4 near 15 %
(bound 50 %); the backward must use the forward's quantized tensors (checked exactly for linear:
dx = s_d s_w q_d q_w); seeded runs (torch.manual_seed) are bitwise reproducible. Host (SYCL CPU
device) and CUDA.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
from gnnsparse import reference as ref  # noqa: E402
from gnnsparse.quant import autograd as qa  # noqa: E402

from conftest import random_csr, rel, torch_cpu_cuda  # noqa: E402


device = torch_cpu_cuda  # the fixture of conftest, under the name these tests use


BOUND = {8: 0.05, 4: 0.5}


def graph(rng, device, M=300, K=200, deg=6.0, hub=0):
    """(A, A^T with values val[perm], dense A, perm, rows, col) on the device."""
    A = random_csr(rng, M, K, mean_deg=deg, hub=hub, weighted=True)
    T = A.T
    perm = torch.from_numpy(np.array(T.perm, np.int64)).to(device)
    dense = torch.from_numpy(A.to_scipy().toarray()).float().to(device)
    rows = torch.from_numpy(ref.edge_rows(A)).to(device)
    col = torch.from_numpy(np.array(A.col, np.int64)).to(device)
    if device.type == "cuda":
        like = torch.zeros(1, device=device)
        A, T = A.to_like(like), T.to_like(like)
    return A, T, dense, perm, rows, col


def leaf(t):
    return t.detach().clone().requires_grad_()


@pytest.mark.parametrize("bits", [8, 4])
def test_linear(device, bits):
    torch.manual_seed(1)
    x, W = torch.randn(300, 64, device=device, requires_grad=True), torch.randn(48, 64, device=device, requires_grad=True)
    y = qa.linear(x, W, bits)
    g = torch.randn_like(y)
    y.backward(g)
    x2, W2 = leaf(x), leaf(W)
    (x2 @ W2.t()).backward(g)
    assert rel(y, x2 @ W2.t()) < BOUND[bits]
    assert rel(x.grad, x2.grad) < BOUND[bits] and rel(W.grad, W2.grad) < BOUND[bits]


def test_linear_backward_reuses_forward_quantization(device):
    """dx is computed from the quantized W of the forward pass: with the gradient's quantization
    redone from the same seed, dx equals s_d s_w (q_d q_w) exactly."""
    torch.manual_seed(3)
    x = torch.randn(40, 32, device=device, requires_grad=True)
    W = torch.randn(16, 32, device=device)
    y = qa.linear(x, W, 8)
    ctx_qw = y.grad_fn.q[1]
    g = torch.randn_like(y)
    state = torch.get_rng_state()
    y.backward(g)
    torch.set_rng_state(state)
    qd = gs.quantize(g.contiguous(), 8, True, qa.next_seed(), check=False)
    acc = qd.int8().cpu().long() @ ctx_qw.int8().cpu().long()
    s = np.float32(qd.scale_value()) * np.float32(ctx_qw.scale_value())
    np.testing.assert_array_equal(x.grad.cpu().numpy(), (acc.numpy().astype(np.float32) * s).astype(np.float32))


@pytest.mark.parametrize("bits", [8, 4])
def test_spmm(device, rng, bits):
    A, T, dense, _, _, _ = graph(rng, device, hub=400)
    torch.manual_seed(2)
    h = torch.randn(200, 16, device=device, requires_grad=True)
    out = qa.spmm(A, T, h, bits)
    g = torch.randn_like(out)
    out.backward(g)
    h2 = leaf(h)
    (dense @ h2).backward(g)
    assert rel(out, dense @ h2) < BOUND[bits] and rel(h.grad, h2.grad) < BOUND[bits]


@pytest.mark.parametrize("bits", [8, 4])
def test_spmm_heads(device, rng, bits):
    A, T, _, perm, rows, col = graph(rng, device)
    H, D = 4, 8
    torch.manual_seed(4)
    a = torch.rand(A.nnz, H, device=device, requires_grad=True)
    z = torch.randn(200, H, D, device=device, requires_grad=True)
    out = qa.spmm_heads(A, T, perm, a, z, bits)
    g = torch.randn_like(out)
    out.backward(g)
    a2, z2 = leaf(a), leaf(z)
    o2 = torch.zeros(300, H, D, device=device).index_add(0, rows, a2[:, :, None] * z2[col])
    o2.backward(g)
    assert rel(out, o2) < BOUND[bits]
    assert rel(a.grad, a2.grad) < BOUND[bits] and rel(z.grad, z2.grad) < BOUND[bits]


@pytest.mark.parametrize("bits", [8, 4])
def test_sddmm_add(device, rng, bits):
    A, T, _, _, rows, col = graph(rng, device)
    torch.manual_seed(5)
    d = torch.randn(300, 4, device=device, requires_grad=True)
    s = torch.randn(200, 4, device=device, requires_grad=True)
    e = qa.sddmm_add(A, s, d, bits)
    g = torch.randn_like(e)
    e.backward(g)
    d2, s2 = leaf(d), leaf(s)
    e2 = d2[rows] + s2[col]
    e2.backward(g)
    assert rel(e, e2) < BOUND[bits]
    assert rel(d.grad, d2.grad) < BOUND[bits] and rel(s.grad, s2.grad) < BOUND[bits]


def test_seeded_runs_are_identical(device, rng):
    A, T, _, _, _, _ = graph(rng, device)

    def run():
        torch.manual_seed(11)
        x = torch.randn(200, 32, device=device, requires_grad=True)
        W = torch.randn(16, 32, device=device, requires_grad=True)
        out = qa.spmm(A, T, qa.linear(x, W))
        out.square().sum().backward()
        return out.detach().cpu(), x.grad.cpu(), W.grad.cpu()

    for a, b in zip(run(), run()):
        assert torch.equal(a, b)
