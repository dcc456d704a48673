"""ReLU / ELU + dropout with the mask as bits in one CUDA kernel each way (cuda/act_dropout.cu,
contract include/gnnsparse/act_dropout.hpp), as the quantized layers' relu_dropout and elu_dropout_
use them.

Against the NumPy model (gnnsparse.quant.model.dropout_keep: the quantizer's Philox words against
round(p 2^32)): the bits exactly, the ReLU outputs and gradients bit for bit (float32 products), the
ELU ones within a rounding of expm1; odd sizes (0 .. 4099 elements), p 0 / 0.3 / 0.5, 16-byte
aligned and unaligned tensors, outputs poisoned before the run (NaN; the bits 0x55 bytes under
conftest's GNNSPARSE_POISON), in place and out
of place, bitwise determinism over two runs. Then relu_dropout / elu_dropout_ on CUDA against the
torch path (GNNSPARSE_ACT_KERNEL=off) with the same mask. CUDA only (skipped without a GPU and the
compiled module, failing instead under GNNSPARSE_REQUIRE=cuda).
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gnnsparse.quant import autograd as qa  # noqa: E402
from gnnsparse.quant import model  # noqa: E402

from conftest import REQUIRED  # noqa: E402

SIZES = [0, 1, 5, 31, 32, 33, 127, 128, 129, 1000, 4099]


@pytest.fixture
def backend():
    from gnnsparse import _cuda_backend

    if torch.cuda.is_available() and _cuda_backend.backend.available():
        return _cuda_backend.backend
    msg = "no CUDA device or no compiled gnnsparse CUDA module"
    if "cuda" in REQUIRED:
        pytest.fail(msg)
    pytest.skip(msg)


def _want(act, h, g, seed, p, y=None):
    """(out, bits as bytes, dh) of the model, float32 NumPy; ELU's dh from y, the kernel's own output
    (NumPy's expm1 and the device's may differ in the last bit; the backward's arithmetic from y on
    is exact float32 and is compared bit for bit)."""
    n = h.size
    scale = np.float32(1.0 / (1.0 - p))
    keep = model.dropout_keep(seed, n, p)
    if act == "relu":
        bit = keep & (h > 0)
        out = h * bit.astype(np.float32) * scale
        dh = g * bit.astype(np.float32) * scale
    else:
        bit = keep
        v = np.where(h > 0, h * scale, np.expm1(h) * scale).astype(np.float32)
        out = v * bit.astype(np.float32)
        r = (out if y is None else y) / scale
        dh = (g * bit.astype(np.float32) * scale) * np.where(r <= 0, r + np.float32(1), np.float32(1))
    words = (n + 31) // 32
    packed = np.zeros(words * 4, np.uint8)
    packed[:(n + 7) // 8] = np.packbits(bit, bitorder="little")
    return out.astype(np.float32), packed, dh.astype(np.float32)


def _on(x, offset, dev="cuda"):
    """x (NumPy float32) on the device, starting `offset` floats into its storage (offset 1: not
    16-byte aligned)."""
    buf = torch.full((x.size + offset,), float("nan"), device=dev)
    buf[offset:] = torch.from_numpy(x)
    return buf[offset:]


@pytest.mark.parametrize("act", ["relu", "elu"])
@pytest.mark.parametrize("p", [0.0, 0.3, 0.5])
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("offset", [0, 1])
def test_kernels_against_the_model(backend, act, p, n, offset):
    rng = np.random.default_rng(n * 7 + offset + int(p * 10) + (act == "elu") * 1000)
    h = (rng.standard_normal(n) * 2).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    if n > 3:
        h[:3] = [0.0, -0.0, 1e-30]  # zeros: dropped by relu; a tiny positive kept
    seed = int(rng.integers(0, 2**63 - 1))
    out_w, bits_w, dh_w = _want(act, h, g, seed, p)
    hd = _on(h, offset)
    out = _on(np.full(n, np.nan, np.float32), offset)
    bits = backend.act_dropout(act, hd, out, p, seed)
    assert bits.dtype == torch.uint8 and bits.shape == (((n + 31) // 32) * 4,)
    assert np.array_equal(bits.cpu().numpy(), bits_w)
    y = _on(out.cpu().numpy() if act == "elu" else np.zeros(n, np.float32), offset)  # the saved output
    dh = _on(np.full(n, np.nan, np.float32), offset)
    backend.act_dropout_backward(act, _on(g, offset), y if act == "elu" else None, bits, p, dh)
    if act == "relu":
        assert np.array_equal(out.cpu().numpy(), out_w)
        assert np.array_equal(dh.cpu().numpy(), dh_w)
    else:  # expm1: NumPy's float32 one is up to 2 ulp off
        np.testing.assert_allclose(out.cpu().numpy(), out_w, rtol=5e-7, atol=1e-30)
        np.testing.assert_array_equal(out.cpu().numpy() == 0, out_w == 0)
        dh_y = _want(act, h, g, seed, p, y=out.cpu().numpy())[2]
        assert np.array_equal(dh.cpu().numpy(), dh_y)
    # in place (out = h, at the same alignment) gives the same bits and values; a second run the same
    again = _on(h, offset)
    bits2 = backend.act_dropout(act, again, again, p, seed)
    assert torch.equal(bits2, bits) and torch.equal(again, out)


def test_bits_padding_is_zero_and_rate(backend):
    """The bits past n are zero in the last word; the kept share is 1 - p."""
    n = 1 << 20
    h = torch.ones(n + 5, device="cuda")
    bits = backend.act_dropout("relu", h, torch.empty_like(h), 0.3, 123)
    last = bits.view(torch.int32)[-1].item() & 0xFFFFFFFF
    assert last >> ((n + 5) % 32) == 0
    keep = qa._unpack_mask(bits, 0, n + 5)
    assert abs(keep.float().mean().item() - 0.7) < 0.005


def test_relu_dropout_uses_the_kernel(backend, monkeypatch):
    """relu_dropout on CUDA: the kernel's bits saved (whole words), output and gradient as the torch
    path's formulas with that mask; GNNSPARSE_ACT_KERNEL=off takes torch's path (bernoulli)."""
    h = torch.randn(301, 17, generator=torch.Generator().manual_seed(0)).cuda().requires_grad_()
    g = torch.randn(301, 17, generator=torch.Generator().manual_seed(1)).cuda()
    for mode in ("", "off"):
        monkeypatch.setenv("GNNSPARSE_ACT_KERNEL", mode)
        torch.manual_seed(3)
        saved = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
            y = qa.relu_dropout(h, 0.5, True)
        assert len(saved) == 1 and saved[0].shape == (((h.numel() + 31) // 32) * 4,)
        keep = qa._unpack_mask(saved[0], 0, h.numel()).view(h.shape)
        assert torch.equal(keep, y != 0)
        assert torch.equal(y, torch.relu(h.detach()) * keep * 2.0)
        y.backward(g)
        assert torch.equal(h.grad, g * keep * 2.0)
        h.grad = None
        torch.manual_seed(3)
        assert torch.equal(qa.relu_dropout(h, 0.5, True), y)  # seeded by torch's generator
        if mode == "":
            seed_gen = torch.Generator().manual_seed(3)
            seed = int(torch.randint(0, 2**63 - 1, (1,), dtype=torch.int64, generator=seed_gen).item())
            want = model.dropout_keep(seed, h.numel(), 0.5) & (h.detach().cpu().numpy().reshape(-1) > 0)
            assert np.array_equal(keep.cpu().numpy().reshape(-1), want)


def test_elu_dropout_in_place_uses_the_kernel(backend, monkeypatch):
    """elu_dropout_ on CUDA: the kernel in place (bits of the model's mask), its gradient as the torch
    path's (elu_dropout's backward through the kernel and through torch's blocks agree)."""
    h0 = torch.randn(257, 9, generator=torch.Generator().manual_seed(0)).cuda()
    g = torch.randn(257, 9, generator=torch.Generator().manual_seed(2)).cuda()
    masks = []
    for mode in ("", "off"):
        monkeypatch.setenv("GNNSPARSE_ACT_KERNEL", mode)
        w = torch.ones(1, device="cuda", requires_grad=True)
        h = h0 * w
        torch.manual_seed(5)
        y = qa.elu_dropout_(h, 0.4, True)
        keep = y != 0
        torch.testing.assert_close(y.detach(), torch.nn.functional.elu(h0) * keep / 0.6, rtol=1e-6, atol=1e-7)
        y.backward(g)
        want = (g * keep / 0.6 * torch.where(h0 > 0, 1.0, torch.exp(h0)) * h0).sum()
        torch.testing.assert_close(w.grad[0], want, rtol=1e-5, atol=1e-5)
        masks.append(keep)
    # the kernel's mask is the model's (the seed: torch's first draw after manual_seed(5))
    seed = int(torch.randint(0, 2**63 - 1, (1,), dtype=torch.int64, generator=torch.Generator().manual_seed(5)).item())
    want = model.dropout_keep(seed, h0.numel(), 0.4)
    assert np.array_equal(masks[0].cpu().numpy().reshape(-1), want)
    # the out-of-place elu_dropout (F.dropout's draws) with the kernel's backward
    monkeypatch.setenv("GNNSPARSE_ACT_KERNEL", "")
    x = h0.clone().requires_grad_()
    torch.manual_seed(6)
    y = qa.elu_dropout(x, 0.4, True)
    y.backward(g)
    keep = y != 0
    want = g * keep / 0.6 * torch.where(h0 > 0, 1.0, torch.exp(h0))
    torch.testing.assert_close(x.grad, want, rtol=1e-5, atol=1e-6)


def test_bad_arguments(backend):
    h = torch.zeros(8, device="cuda")
    with pytest.raises(ValueError, match="p must be"):
        backend.act_dropout("relu", h, h, 1.0, 0)
    with pytest.raises(ValueError, match="relu or elu"):
        backend.act_dropout("gelu", h, h, 0.5, 0)
