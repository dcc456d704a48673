"""With GNNSPARSE_CUDA_PAD=on (the default), CUDA float32 calls at widths that are not a multiple of 4
floats run the vector kernels on zero-padded copies (gnnsparse._ops._vector_width): FusedMM's Z,
spmm_heads' Z, SDDMM dot's X and Y.

CPU: the width rule and its knob. GPU: results at odd widths against the reference (fp64) and
against the scalar walks (GNNSPARSE_CUDA_PAD=off), 2-D and 3-D shapes, weighted and not, every
output element written (poisoned outputs), repeats bitwise, and gradients through the torch layer.
"""
import types

import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import _ops
from gnnsparse import reference as ref

torch = pytest.importorskip("torch")

CUDA = types.SimpleNamespace(name="cuda")
SYCL = types.SimpleNamespace(name="sycl")


def test_vector_width_rule(monkeypatch):
    monkeypatch.delenv("GNNSPARSE_CUDA_PAD", raising=False)  # on by default
    assert _ops._vector_width(CUDA, "float32", 47) == 48
    monkeypatch.setenv("GNNSPARSE_CUDA_PAD", "on")
    assert _ops._vector_width(CUDA, "float32", 47) == 48
    assert _ops._vector_width(CUDA, "float32", 17) == 20
    assert _ops._vector_width(CUDA, "float32", 48) == 48
    assert _ops._vector_width(CUDA, "float32", 15) == 15  # narrow: the scalar walks
    assert _ops._vector_width(CUDA, "float64", 47) == 47
    assert _ops._vector_width(CUDA, "bfloat16", 47) == 47
    assert _ops._vector_width(SYCL, "float32", 47) == 47
    monkeypatch.setenv("GNNSPARSE_CUDA_PAD", "ops")  # copies in the calls, not in the torch layers
    assert _ops._vector_width(CUDA, "float32", 47) == 48
    assert _ops.vector_width("cuda", "float32", 47, layer=True) == 47
    monkeypatch.setenv("GNNSPARSE_CUDA_PAD", "off")
    assert _ops._vector_width(CUDA, "float32", 47) == 47
    monkeypatch.setenv("GNNSPARSE_CUDA_PAD", "yes")
    with pytest.raises(ValueError, match="GNNSPARSE_CUDA_PAD"):
        _ops._vector_width(CUDA, "float32", 47)


def _needs_cuda():
    from gnnsparse import _cuda_backend

    if not (_cuda_backend.backend.available() and torch.cuda.is_available()):
        pytest.skip("no CUDA device or no compiled gnnsparse CUDA module")


def _graph(n, e, seed, weighted):
    rng = np.random.default_rng(seed)
    ei = rng.integers(0, n, (2, e))
    ei[:, :40] = [[3] * 40, rng.integers(0, n, 40)]  # one longer row
    w = rng.uniform(0.5, 1.5, e).astype(np.float32) if weighted else None
    A = gs.CSR.from_edge_index(ei, n, w)
    return A, A.to_like(torch.empty(1, device="cuda"))


def _t(rng, *shape):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).cuda()


@pytest.mark.cuda
@pytest.mark.parametrize("D", [17, 47, 62])
@pytest.mark.parametrize("weighted", [False, True])
def test_odd_widths_match_the_reference_and_the_scalar_walks(monkeypatch, D, weighted):
    _needs_cuda()
    n = 700
    A, Ad = _graph(n, 5000, D, weighted)
    rng = np.random.default_rng(D + 1)
    H = 2
    a_dst, a_src, Z = _t(rng, n, H), _t(rng, n, H), _t(rng, n, H, D)
    X, Y = _t(rng, n, D), _t(rng, n, D)
    W = torch.from_numpy(rng.uniform(0, 1, (A.nnz, H)).astype(np.float32)).cuda()

    def run():
        out, E = gs.fusedmm(Ad, a_dst, a_src, Z, "add", "leaky_relu_softmax", 0.2, return_edges=True)
        o2 = gs.fusedmm(Ad, a_dst[:, :1].contiguous(), a_src[:, :1].contiguous(), Z[:, 0].contiguous(), "add",
                        "softmax")
        h = gs.spmm_heads(Ad, W, Z)
        e = gs.sddmm(Ad, X, Y, "dot")
        f = gs.fusedmm(Ad, X, Y, Z[:, 0].contiguous(), "dot", "exp")
        return out, E, o2, h, e, f

    monkeypatch.setenv("GNNSPARSE_CUDA_PAD", "on")
    got = run()
    again = run()
    for g, g2 in zip(got, again):
        assert torch.equal(g, g2)
    monkeypatch.setenv("GNNSPARSE_CUDA_PAD", "off")
    scalar = run()
    for g, s in zip(got, scalar):
        assert g.shape == s.shape and torch.isfinite(g).all()
        torch.testing.assert_close(g, s, rtol=2e-5, atol=2e-5)
    cpu = lambda t: t.cpu().numpy()  # noqa: E731
    np.testing.assert_allclose(cpu(got[0]), ref.fusedmm(A, cpu(a_dst), cpu(a_src), cpu(Z), "add",
                                                        "leaky_relu_softmax", 0.2), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(cpu(got[3]), ref.spmm_heads(A, cpu(W), cpu(Z)), rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(got[4].cpu().numpy(), ref.sddmm(A, X.cpu().numpy(), Y.cpu().numpy(), "dot"),
                               rtol=2e-5, atol=2e-5)


@pytest.mark.cuda
def test_gradients_at_an_odd_width(monkeypatch):
    """A GAT-style output layer at 47 columns: forward and gradients the same with and without the
    padding (within fp32 rounding)."""
    _needs_cuda()
    import gnnsparse.torch  # noqa: F401  (registers the torch layer)

    A, Ad = _graph(500, 4000, 5, False)
    rng = np.random.default_rng(6)
    base = [_t(rng, 500, 1), _t(rng, 500, 1), _t(rng, 500, 1, 47)]
    G = _t(rng, 500, 1, 47)
    res = {}
    for mode in ("on", "off"):
        monkeypatch.setenv("GNNSPARSE_CUDA_PAD", mode)
        ins = [t.clone().requires_grad_(True) for t in base]
        out = gs.fusedmm(Ad, ins[0], ins[1], ins[2], "add", "leaky_relu_softmax", 0.2)
        (out * G).sum().backward()
        res[mode] = [out.detach()] + [t.grad for t in ins]
    for a, b in zip(res["on"], res["off"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
