"""The int8 weight-gradient GEMM C = scale * A^T B (gnnsparse.quant._gemm.int_matmul_tn; on CUDA the
kernels of cuda/qgemm.cu, contract include/gnnsparse/qgemm.hpp).

The integer product is exact, so every check is bitwise: C must equal fl32(fl32(acc) * scale) with
acc the exact integer product (int64 NumPy for small shapes, float64 on the device -- exact while
K 128^2 < 2^53 -- for the large ones, the two cross-checked), and the path it replaces
(torch._int_mm on a transposed copy, K chunks summed in int64). Odd sizes (the byte-load path),
misaligned and strided operands, K = 0, extreme values (all -128 / +127, segments near the int32
limit), outputs and scratch poisoned (conftest: GNNSPARSE_POISON), repeated calls, the scale, int4
operands, the quantized layers' weight gradients, argument errors. CUDA tests skip without a GPU;
the CPU path and argument checks run on the CPU too (every backend: tests/test_quant_gemm.py).
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
from gnnsparse.quant import _gemm  # noqa: E402
from gnnsparse.quant import autograd as qa  # noqa: E402


def _cuda_ready():
    from gnnsparse import _cuda_backend

    return torch.cuda.is_available() and _cuda_backend.backend.available()


needs_cuda = pytest.mark.skipif(not _cuda_ready(), reason="no CUDA device or no compiled gnnsparse CUDA module")


def rand8(shape, seed, device="cuda", lo=-128, hi=127):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi + 1, shape, generator=g, dtype=torch.int8).to(device)


def want(a8, b8, scale):
    """fl32(fl32(acc) * scale[0]), acc = a8^T b8 exactly: int64 NumPy when small, else float64 on
    the device (integers below 2^53: exact in any order)."""
    K, M = a8.shape
    N = b8.shape[1]
    s = scale.reshape(-1)[:1].float()
    if K * M * N <= 20_000_000:
        acc = a8.cpu().numpy().astype(np.int64).T @ b8.cpu().numpy().astype(np.int64)
        return torch.from_numpy(acc.astype(np.float32)).to(a8.device) * s.to(a8.device)
    return (a8.t().double() @ b8.double()).float() * s


def check(got, expect):
    assert got.dtype == torch.float32 and got.shape == expect.shape
    assert not torch.isnan(got).any(), "an output element was left unwritten (NaN poison)"
    bad = (got != expect).nonzero()
    assert bad.numel() == 0, f"{bad.shape[0]} elements differ, first at {bad[0].tolist()}: " \
                             f"{got[tuple(bad[0])].item()} != {expect[tuple(bad[0])].item()}"


SCALE = 0.0371  # not a power of two: the scaling rounds


@needs_cuda
@pytest.mark.parametrize("K", [1, 7, 1000, 200_003])
@pytest.mark.parametrize("M", [1, 3, 17, 128, 130])
@pytest.mark.parametrize("N", [1, 3, 17, 128, 130])
def test_exact_odd_sizes(K, M, N):
    a8, b8 = rand8((K, M), K + 7 * M), rand8((K, N), K + 11 * N + 1)
    s = torch.tensor([SCALE], device="cuda")
    got = _gemm.int_matmul_tn(a8, b8, s)
    check(got, want(a8, b8, s))
    if K == 1000 or (K == 200_003 and M == N == 128):  # the replaced path: the same bits
        check(got, _gemm.int_matmul(a8.t().contiguous(), b8, s))


@needs_cuda
def test_references_agree():
    """The two oracles of want() agree (so the fp64 one is exact where the tests use it)."""
    a8, b8 = rand8((5000, 40), 1), rand8((5000, 24), 2)
    s = torch.tensor([1.0], device="cuda")
    acc = a8.cpu().numpy().astype(np.int64).T @ b8.cpu().numpy().astype(np.int64)
    assert np.array_equal((a8.t().double() @ b8.double()).cpu().numpy(), acc.astype(np.float64))
    check(_gemm.int_matmul_tn(a8, b8, s), want(a8, b8, s))


@needs_cuda
@pytest.mark.parametrize("M,N", [(16, 16), (32, 64), (64, 32), (64, 128), (128, 64), (256, 96), (512, 40)])
def test_tile_shapes(M, N):
    """Every tile instance (32 / 64 / 128 per side), several tiles per side, the 32-bit load path."""
    a8, b8 = rand8((70_001, M), M), rand8((70_001, N), N + 1)
    s = torch.tensor([SCALE], device="cuda")
    check(_gemm.int_matmul_tn(a8, b8, s), want(a8, b8, s))


@needs_cuda
@pytest.mark.parametrize("K,M,N,va,vb", [
    (131_071, 8, 8, -128, -128),    # one segment's worth at the largest product
    (131_072, 8, 4, -128, -128),
    (200_003, 128, 128, 127, 127),
    (200_003, 128, 128, -128, 127),
    (200_003, 17, 3, -128, -128),   # the byte-load path
])
def test_extreme_values(K, M, N, va, vb):
    a8 = torch.full((K, M), va, dtype=torch.int8, device="cuda")
    b8 = torch.full((K, N), vb, dtype=torch.int8, device="cuda")
    s = torch.tensor([1.0], device="cuda")
    acc = float(np.float32(K * va * vb))  # exact integer, rounded once to float32
    check(_gemm.int_matmul_tn(a8, b8, s), torch.full((M, N), acc, device="cuda"))


@needs_cuda
def test_segments_near_the_int32_limit():
    """K long enough that each segment holds close to 2^31 / 128^2 rows: with all -128 every
    partial sum is within 0.5 % of 2^31 (an int32 accumulator one segment too long overflows)."""
    from gnnsparse import _cuda_backend

    K, M, N = 40_000_000, 4, 4
    nseg = _cuda_backend._ext.qgemm_tn_work(0, K, M, N) // (M * N)
    assert -(-K // nseg) * 128 * 128 > 0.995 * 2**31
    a8 = torch.full((K, M), -128, dtype=torch.int8, device="cuda")
    b8 = torch.full((K, N), -128, dtype=torch.int8, device="cuda")
    s = torch.tensor([1.0], device="cuda")
    check(_gemm.int_matmul_tn(a8, b8, s), torch.full((M, N), float(np.float32(K * 16384)), device="cuda"))


@needs_cuda
@pytest.mark.parametrize("M,N", [(3, 5), (128, 128), (0, 4), (4, 0)])
def test_k_zero(M, N):
    a8 = torch.empty((0, M), dtype=torch.int8, device="cuda")
    b8 = torch.empty((0, N), dtype=torch.int8, device="cuda")
    got = _gemm.int_matmul_tn(a8, b8, torch.tensor([SCALE], device="cuda"))
    check(got, torch.zeros((M, N), device="cuda"))
    nan = _gemm.int_matmul_tn(a8, b8, torch.tensor([float("nan")], device="cuda"))
    assert nan.shape == (M, N) and torch.isnan(nan).all()  # 0 * NaN: the scale's NaN shows


@needs_cuda
def test_repeat_bitwise_and_scale():
    a8, b8 = rand8((300_001, 128), 5), rand8((300_001, 96), 6)
    one = torch.tensor([1.0], device="cuda")
    s = torch.tensor([SCALE, 123.0], device="cuda")  # a QTensor's {s, inv}: only s is used
    c1 = _gemm.int_matmul_tn(a8, b8, one)
    for _ in range(3):
        assert torch.equal(_gemm.int_matmul_tn(a8, b8, one), c1)
    check(c1, want(a8, b8, one))
    check(_gemm.int_matmul_tn(a8, b8, s), c1 * s[:1])  # fl32(fl32(acc) * s)


@needs_cuda
def test_misaligned_and_strided():
    K, M, N = 20_011, 64, 32
    buf = rand8((K * M + 1,), 9)
    a8 = buf[1:].view(K, M)  # one byte past an aligned address: the byte-load path
    assert a8.data_ptr() % 4 != 0 and a8.is_contiguous()
    wide = rand8((K, N + 8), 10)
    b8 = wide[:, 3:3 + N]  # rows 40 bytes apart: copied to contiguous rows first
    s = torch.tensor([SCALE], device="cuda")
    check(_gemm.int_matmul_tn(a8, b8, s), want(a8, b8.contiguous(), s))


@pytest.mark.parametrize("dev", ["cpu", pytest.param("cuda", marks=needs_cuda)])
@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("K", [1000, 140_000])
def test_matmul_q_weight_gradient(dev, bits, K):
    """The layers' weight gradient (_matmul_q(a, b, transpose_a=True)) on QTensors, int4 unpacked:
    the bits of the path it replaces (the transposed copy through torch._int_mm, K chunks)."""
    if dev == "cpu":
        from conftest import sycl_or_skip

        sycl_or_skip()  # gs.quantize of CPU tensors
    g = torch.Generator(device=dev).manual_seed(K + bits)
    qa_ = gs.quantize(torch.randn(K, 48, device=dev, generator=g), bits, seed=1)
    qb = gs.quantize(torch.randn(K, 24, device=dev, generator=g), bits, seed=2)
    got = qa._matmul_q(qa_, qb, transpose_a=True)
    s = qa._scale(qa_, qb)
    check(got, _gemm.int_matmul(qa_.int8().t().contiguous(), qb.int8(), s))
    check(got, want(qa_.int8(), qb.int8(), s))


@needs_cuda
def test_cuda_argument_errors():
    a8, b8 = rand8((10, 4), 1), rand8((10, 5), 2)
    s = torch.tensor([1.0], device="cuda")
    with pytest.raises(ValueError, match="different devices"):
        _gemm.int_matmul_tn(a8, b8.cpu(), s)
    with pytest.raises(ValueError, match="different devices"):
        _gemm.int_matmul_tn(a8, b8, s.cpu())
    from gnnsparse import _cuda_backend

    ext = _cuda_backend._ext
    C = torch.empty(4, 5, device="cuda")
    work = torch.empty(1, dtype=torch.int32, device="cuda")
    need = ext.qgemm_tn_work(0, 10, 4, 5)
    assert need >= 4 * 5
    with pytest.raises(ValueError, match="work holds"):
        ext.qgemm_tn(0, a8.data_ptr(), 4, b8.data_ptr(), 5, 10, 4, 5, s.data_ptr(), C.data_ptr(), work.data_ptr(), 1)
    with pytest.raises(ValueError, match="row strides"):
        ext.qgemm_tn(0, a8.data_ptr(), 3, b8.data_ptr(), 5, 10, 4, 5, s.data_ptr(), C.data_ptr(), work.data_ptr(),
                     need)
    with pytest.raises(ValueError, match="null pointer"):
        ext.qgemm_tn(0, 0, 4, b8.data_ptr(), 5, 10, 4, 5, s.data_ptr(), C.data_ptr(), work.data_ptr(), need)
    with pytest.raises(ValueError, match="negative"):
        ext.qgemm_tn_work(0, -1, 4, 5)


# ---- every device: torch CPU tensors (the SYCL kernels, or without a SYCL device torch._int_mm on a
# transposed copy; NumPy / dpnp inputs: tests/test_quant_gemm.py) and the argument checks
@pytest.mark.parametrize("K,M,N", [(0, 3, 4), (1, 1, 1), (333, 17, 5), (140_000, 6, 3)])
def test_cpu_fallback_exact(K, M, N):
    a8, b8 = rand8((K, M), K + M, "cpu"), rand8((K, N), K + N, "cpu")
    s = torch.tensor([SCALE, 9.0])
    check(_gemm.int_matmul_tn(a8, b8, s), want(a8, b8, s))


def test_argument_errors():
    a8, b8, s = rand8((10, 4), 1, "cpu"), rand8((10, 5), 2, "cpu"), torch.tensor([1.0])
    with pytest.raises(ValueError, match="2-D"):
        _gemm.int_matmul_tn(a8.reshape(-1), b8, s)
    with pytest.raises(ValueError, match="same rows"):
        _gemm.int_matmul_tn(a8[:9], b8, s)
    with pytest.raises(TypeError, match="int8"):
        _gemm.int_matmul_tn(a8.to(torch.uint8), b8, s)
    with pytest.raises(TypeError, match="int8"):
        _gemm.int_matmul_tn(a8, b8.float(), s)
    with pytest.raises(TypeError, match="float32"):
        _gemm.int_matmul_tn(a8, b8, s.double())
    with pytest.raises(TypeError, match="float32"):
        _gemm.int_matmul_tn(a8, b8, torch.empty(0))
    with pytest.raises(TypeError, match="mix torch tensors"):
        _gemm.int_matmul_tn(a8, b8.numpy(), s)
