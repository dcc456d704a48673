"""gnnsparse.spmm_heads: SpMM with per-(edge, head) weights, every head in one kernel.

Out[i, h, :] = sum_k W[k, h] Z[col k, h, :] against gnnsparse.reference (fp64) on random graphs with
empty rows, duplicate edges and a hub row, over heads H in {1, 3, 4, 8} and widths D in {1, 7, 32,
64} (the SYCL narrow kernel, one tile, several tiles; on CUDA the vector and scalar paths, the warp
rows, the edge split and the hub pass), float32 / float64 (CUDA: also float16 / bfloat16), int32 /
int64 indices; outputs start poisoned (conftest: GNNSPARSE_POISON); repeated calls give the same
bits; bad arguments raise errors naming them; the torch layer's gradients (fp64 gradcheck) and a
GAT layer trained with attention dropout against the per-head loop the kernel replaces.
"""
from __future__ import annotations

import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import reference as ref

from conftest import random_csr, sycl_or_skip

HEADS = [1, 3, 4, 8]
WIDTHS = [1, 7, 32, 64]
TOL = {"float64": 1e-12, "float32": 3e-5, "float16": 1e-2, "bfloat16": 6e-2}


def _graph(rng, itype, M=300, K=250, hub=1500):
    """Empty rows, a duplicate edge, a hub row (its length above the hub threshold of the CUDA
    plan: 16x the average row, at least 256) and, in the CUDA plan, rows long enough for a warp."""
    return random_csr(rng, M, K, mean_deg=6.0, empty_frac=0.25, hub=hub, weighted=True, index_dtype=itype)


def _close(got, want, dt):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.isfinite(got).all(), "an output element was left unwritten (poisoned NaN) or overflowed"
    scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
    np.testing.assert_allclose(got, want, rtol=TOL[dt], atol=TOL[dt] * scale)


# ---------------------------------------------------------------- NumPy inputs (the SYCL CPU device)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("H", HEADS)
@pytest.mark.parametrize("D", WIDTHS)
def test_matches_reference(sycl, rng, itype, dt, H, D):
    A = _graph(rng, itype)
    W = rng.standard_normal((A.nnz, H)).astype(dt)
    Z = rng.standard_normal((A.shape[1], H, D)).astype(dt)
    out = gs.spmm_heads(A, W, Z)
    assert isinstance(out, np.ndarray) and out.dtype == np.dtype(dt) and out.shape == (A.shape[0], H, D)
    want = ref.spmm_heads(A, W, Z)
    _close(out, want, dt)
    empty = np.diff(np.asarray(A.rowptr)) == 0
    assert empty.any() and (out[empty] == 0).all()
    again = gs.spmm_heads(A, W, Z)
    assert out.tobytes() == again.tobytes()  # bitwise reproducible


def test_values_of_a_are_not_used(sycl, rng):
    A = _graph(rng, np.int32, M=40, K=30, hub=0)
    W = rng.standard_normal((A.nnz, 2))
    Z = rng.standard_normal((30, 2, 5))
    unweighted = gs.CSR(A.rowptr, A.col, None, A.shape)
    assert gs.spmm_heads(A, W, Z).tobytes() == gs.spmm_heads(unweighted, W, Z).tobytes()


def test_one_head_is_a_weighted_spmm(sycl, rng):
    A = _graph(rng, np.int64, M=60, K=70, hub=300)
    w = rng.standard_normal(A.nnz)
    Z = rng.standard_normal((70, 1, 9))
    np.testing.assert_allclose(gs.spmm_heads(A, w[:, None], Z)[:, 0], gs.spmm(A.with_values(w), Z[:, 0]),
                               rtol=1e-13, atol=1e-13)


def test_weights_are_cast_to_the_value_dtype(sycl, rng):
    A = _graph(rng, np.int32, M=50, K=40, hub=0)
    W = rng.standard_normal((A.nnz, 3))  # float64
    Z = rng.standard_normal((40, 3, 8)).astype(np.float32)
    out = gs.spmm_heads(A, W, Z)
    assert out.dtype == np.float32
    assert out.tobytes() == gs.spmm_heads(A, W.astype(np.float32), Z).tobytes()


@pytest.mark.parametrize("M,K,mean_deg,H,D", [(0, 5, 0.0, 2, 3), (6, 0, 0.0, 2, 3), (6, 5, 0.0, 2, 3),
                                              (6, 5, 2.0, 0, 3), (6, 5, 2.0, 2, 0), (1, 1, 1.0, 1, 1)])
def test_degenerate_shapes(sycl, rng, M, K, mean_deg, H, D):
    A = random_csr(rng, M, K, mean_deg=mean_deg)
    W = rng.standard_normal((A.nnz, H)).astype(np.float32)
    Z = rng.standard_normal((K, H, D)).astype(np.float32)
    out = gs.spmm_heads(A, W, Z)
    assert out.shape == (M, H, D)
    _close(out, ref.spmm_heads(A, W, Z), "float32")


def test_bad_arguments_raise_clear_errors(sycl, rng):
    A = _graph(rng, np.int32, M=20, K=15, hub=0)
    nnz = A.nnz
    W = np.ones((nnz, 2), np.float32)
    Z = np.ones((15, 2, 4), np.float32)
    with pytest.raises(TypeError, match="gnnsparse.CSR"):
        gs.spmm_heads(np.eye(3), W, Z)
    with pytest.raises(ValueError, match=r"Z of shape \(K, H, D\)"):
        gs.spmm_heads(A, W, Z.reshape(15, 8))
    with pytest.raises(ValueError, match="Z needs 15 rows"):
        gs.spmm_heads(A, W, np.ones((14, 2, 4), np.float32))
    with pytest.raises(ValueError, match=rf"W has shape \({nnz + 1}, 2\) but must be \({nnz}, 2\)"):
        gs.spmm_heads(A, np.ones((nnz + 1, 2), np.float32), Z)
    with pytest.raises(ValueError, match=rf"must be \({nnz}, 2\)"):
        gs.spmm_heads(A, np.ones((nnz, 3), np.float32), Z)
    with pytest.raises(ValueError, match=rf"must be \({nnz}, 2\)"):
        gs.spmm_heads(A, np.ones(nnz, np.float32), Z)
    with pytest.raises(TypeError, match="W has dtype int32"):
        gs.spmm_heads(A, np.ones((nnz, 2), np.int32), Z)
    with pytest.raises(TypeError, match="Z has dtype int64"):
        gs.spmm_heads(A, W, np.ones((15, 2, 4), np.int64))


def test_concurrent_calls_agree(sycl, rng):
    from concurrent.futures import ThreadPoolExecutor

    A = _graph(rng, np.int32, M=400, K=300)
    W = rng.standard_normal((A.nnz, 4)).astype(np.float32)
    Z = rng.standard_normal((300, 4, 16)).astype(np.float32)
    want = gs.spmm_heads(A, W, Z).tobytes()
    with ThreadPoolExecutor(4) as ex:
        assert all(r.tobytes() == want for r in ex.map(lambda _: gs.spmm_heads(A, W, Z), range(8)))


def test_usm_arrays(sycl, rng):
    dpnp = pytest.importorskip("dpnp")
    A = _graph(rng, np.int32, M=50, K=40, hub=100)
    W = rng.standard_normal((A.nnz, 3)).astype(np.float32)
    Z = rng.standard_normal((40, 3, 8)).astype(np.float32)
    Au = A.to_like(dpnp.asarray(Z))
    out = gs.spmm_heads(Au, dpnp.asarray(W), dpnp.asarray(Z))
    assert isinstance(out, dpnp.ndarray)
    assert dpnp.asnumpy(out).tobytes() == gs.spmm_heads(A, W, Z).tobytes()
    with pytest.raises(ValueError, match="Z is on SYCL device .* but W is on the host"):
        gs.spmm_heads(Au, W, dpnp.asarray(Z))


# ---------------------------------------------------------------- torch (CPU: SYCL; CUDA where present)
def _torch():
    return pytest.importorskip("torch")


def test_torch_cpu_tensors_come_back_as_tensors(sycl, rng):
    torch = _torch()
    A = _graph(rng, np.int32, M=30, K=20, hub=0)
    W = torch.from_numpy(rng.standard_normal((A.nnz, 3)))
    Z = torch.from_numpy(rng.standard_normal((20, 3, 7)))
    out = gs.spmm_heads(A, W, Z)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), ref.spmm_heads(A, W.numpy(), Z.numpy()), rtol=1e-12, atol=1e-12)


def test_torch_route_and_gradcheck(torch_cpu_cuda, rng):
    """gs.spmm_heads on tensors that require grad goes through the torch layer; gradients of W and Z
    (fp64 gradcheck: dW = sddmm dot, dZ = spmm_heads over the transpose) with empty rows, a
    duplicate edge and a hub-like row."""
    torch = _torch()
    import gnnsparse.torch as gst

    dev = torch_cpu_cuda
    src = torch.tensor([0, 0, 1, 2, 3, 3, 4, 5, 5, 5, 5, 6, 1, 2])
    dst = torch.tensor([1, 1, 0, 3, 2, 4, 4, 0, 1, 2, 3, 3, 3, 3])  # rows 5 and 6 empty; 1 -> 0 twice
    A = gs.CSR.from_edge_index(torch.stack([src, dst]).to(dev), 7)
    for H, D in ((1, 3), (3, 2)):
        W = torch.randn(A.nnz, H, dtype=torch.float64, device=dev, requires_grad=True)
        Z = torch.randn(7, H, D, dtype=torch.float64, device=dev, requires_grad=True)
        out = gs.spmm_heads(A, W, Z)
        assert out.grad_fn is not None
        np.testing.assert_allclose(out.detach().cpu().numpy(),
                                   ref.spmm_heads(A, W.detach().cpu().numpy(), Z.detach().cpu().numpy()),
                                   rtol=1e-12, atol=1e-12)
        assert torch.autograd.gradcheck(lambda w, z: gst.spmm_heads(A, w, z), (W, Z), eps=1e-6, atol=1e-7)


def _loop_spmm_heads(rowptr, col, W, Z):
    """The per-head loop that spmm_heads replaced: one weighted SpMM per head."""
    torch = _torch()
    from gnnsparse.torch import _library as L

    K = Z.shape[0]
    W = L._val_for(W, Z)
    base = L._csr(rowptr, col, None, K)
    return torch.stack([L._spmm(base.with_values(W[:, h].contiguous()), Z[:, h, :].contiguous())
                        for h in range(Z.shape[1])], 1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gat_dropout_training_matches_the_per_head_loop(torch_cpu_cuda, rng, monkeypatch, dtype):
    """A GAT layer in training mode with attention dropout 0.6 (the unfused path: edge softmax,
    dropout, spmm_heads; its backward runs spmm_heads over the transpose too): outputs and every
    parameter's gradient agree with the same step through the per-head loop."""
    torch = _torch()
    from gnnsparse.torch import _library as L
    from gnnsparse.torch.nn import GATConv

    dev = torch_cpu_cuda
    dt = getattr(torch, dtype)
    n, e = 120, 900
    g = torch.Generator().manual_seed(3)
    ei = torch.stack([torch.randint(0, n, (e,), generator=g), torch.randint(0, n - 5, (e,), generator=g)])
    ei[:, 1] = ei[:, 0]  # a duplicate edge
    ei[1, 100:300] = 7  # a hub
    ei = ei.to(dev)
    x = torch.randn(n, 24, generator=g).to(dev, dt)

    def step():
        torch.manual_seed(11)
        layer = GATConv(24, 7, heads=3, dropout=0.6).to(dev, dt).train()
        torch.manual_seed(12)  # the same dropout mask in both runs
        out = layer(x, ei)
        out.square().sum().backward()
        return out.detach(), {k: p.grad.detach().clone() for k, p in layer.named_parameters()}

    out, grads = step()
    monkeypatch.setattr(L, "_spmm_heads_impl", _loop_spmm_heads)
    out_loop, grads_loop = step()
    tol = 1e-12 if dtype == "float64" else 1e-4  # fp32: the two sum in different orders on CUDA
    torch.testing.assert_close(out, out_loop, rtol=tol, atol=tol)
    for k in grads:
        torch.testing.assert_close(grads[k], grads_loop[k], rtol=tol, atol=tol * 10, msg=k)


# ---------------------------------------------------------------- CUDA (skipped without a GPU)
def _cuda_or_skip():
    torch = _torch()
    from gnnsparse import _cuda_backend

    if not torch.cuda.is_available() or not _cuda_backend.backend.available():
        pytest.skip("no CUDA device or no compiled gnnsparse CUDA module")
    return torch


CUDA_DTYPES = ["float32", "float64", "float16", "bfloat16"]


def _cuda_case(torch, rng, A0, H, D, dt, misalign=False):
    """(A on the GPU, W, Z, the fp64 reference): W in the edge-value dtype, Z in dt; with misalign,
    Z starts one element past a 16-byte boundary (the scalar path)."""
    A = A0.to_like(torch.empty(0, device="cuda"))
    vdt = torch.float32 if dt in ("float16", "bfloat16") else getattr(torch, dt)
    W = torch.from_numpy(rng.uniform(-1, 1, (A0.nnz, H))).to("cuda", vdt)
    zh = rng.uniform(-1, 1, (A0.shape[1], H, D))
    n = zh.size
    buf = torch.empty(n + 1, device="cuda", dtype=getattr(torch, dt))
    Z = (buf[1:] if misalign else buf[:n]).view(A0.shape[1], H, D)
    Z.copy_(torch.from_numpy(zh))
    want = ref.spmm_heads(A0, W.double().cpu().numpy(), Z.double().cpu().numpy())
    return A, W, Z, want


def _same_bits(torch, a, b):
    it = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    assert torch.equal(a.view(it), b.view(it))


@pytest.mark.cuda
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("dt", CUDA_DTYPES)
@pytest.mark.parametrize("H", HEADS)
@pytest.mark.parametrize("D", WIDTHS)
def test_cuda_matches_reference(rng, itype, dt, H, D):
    torch = _cuda_or_skip()
    A0 = _graph(rng, itype, M=700, K=500, hub=5000)  # the hub row takes the hub pass
    A, W, Z, want = _cuda_case(torch, rng, A0, H, D, dt)
    out = gs.spmm_heads(A, W, Z)
    torch.cuda.synchronize()
    assert out.dtype == Z.dtype and out.shape == (700, H, D)
    _close(out.double().cpu().numpy(), want, dt)
    _same_bits(torch, out, gs.spmm_heads(A, W, Z))


@pytest.mark.cuda
@pytest.mark.parametrize("dt", CUDA_DTYPES)
@pytest.mark.parametrize("H,D", [(4, 32), (8, 8), (2, 4), (3, 7)])
@pytest.mark.parametrize("shape", ["misaligned", "dense_rows", "unknown_max_degree"])
def test_cuda_paths(rng, dt, H, D, shape):
    """The scalar path (Z not 16-byte aligned), rows long on average (lane sets split each row's
    edges, merged by the shuffle tree), and the longest row unknown to the plan (the hub pass armed,
    its flag kernel deciding), against the reference."""
    torch = _cuda_or_skip()
    from gnnsparse import _core, _cuda_backend

    if shape == "dense_rows":
        A0 = random_csr(rng, 64, 300, mean_deg=150.0, empty_frac=0.1, hub=0, index_dtype=np.int32)
    else:
        A0 = _graph(rng, np.int64 if shape == "misaligned" else np.int32, M=500, K=400, hub=4000)
    A, W, Z, want = _cuda_case(torch, rng, A0, H, D, dt, misalign=shape == "misaligned")
    if shape == "unknown_max_degree":
        b = _cuda_backend.backend
        for hub in (True, False):
            B0 = A0 if hub else _graph(rng, np.int32, M=500, K=400, hub=0)
            B, Wb, Zb, wantb = _cuda_case(torch, rng, B0, H, D, dt)
            view = b.view(B.rowptr, B.col, None, B.shape[0], B.shape[1], B.nnz, -1)
            out = b.spmm_heads(view, Wb, Zb, B.shape[0], H, D, _core.DTYPE[dt][0])
            torch.cuda.synchronize()
            _close(out.double().cpu().numpy(), wantb, dt)
        return
    out = gs.spmm_heads(A, W, Z)
    torch.cuda.synchronize()
    _close(out.double().cpu().numpy(), want, dt)
    _same_bits(torch, out, gs.spmm_heads(A, W, Z))


@pytest.mark.cuda
def test_cuda_degenerate_and_errors(rng):
    torch = _cuda_or_skip()
    A0 = random_csr(rng, 6, 5, mean_deg=0.0)  # no entries: every row empty
    A = A0.to_like(torch.empty(0, device="cuda"))
    out = gs.spmm_heads(A, torch.empty(0, 2, device="cuda"), torch.randn(5, 2, 3, device="cuda"))
    assert out.shape == (6, 2, 3) and (out == 0).all()
    A0 = random_csr(rng, 30, 20, mean_deg=3.0)
    A = A0.to_like(torch.empty(0, device="cuda"))
    Z = torch.randn(20, 2, 3, device="cuda")
    with pytest.raises(ValueError, match="Z is on cuda:0 but W is on"):
        gs.spmm_heads(A, torch.ones(A.nnz, 2), Z)
    with pytest.raises(ValueError, match=r"must be \("):
        gs.spmm_heads(A, torch.ones(A.nnz, 3, device="cuda"), Z)
