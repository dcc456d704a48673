"""The int8 weight-gradient GEMM C = scale * A^T B (gnnsparse.quant._gemm.int_matmul_tn) on every
available backend: the SYCL kernels (sycl/kernels/qgemm.hpp) for NumPy arrays, torch CPU tensors
and dpnp arrays, the CUDA kernels (cuda/qgemm.cu) for torch CUDA tensors (the CUDA-only cases:
tests/test_quant_gemm_cuda.py). Contract: include/gnnsparse/qgemm.hpp.

The integer product is exact, so every check is bitwise: C must equal fl32(fl32(acc) * scale[0])
with acc the exact integer product (int64 NumPy when small, float64 -- exact while K 128^2 < 2^53
-- when large). Odd sizes, K = 0, one element, extreme values (-128 / +127: every 1024-row float
block of the SYCL kernel at exactly 2^24, segments near the int32 limit), outputs and scratch
poisoned (conftest: GNNSPARSE_POISON), repeated calls, misaligned and strided operands, other
tiles of the SYCL kernel (GNNSPARSE_SYCL_QGEMM_TILE), argument errors.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gnnsparse as gs  # noqa: E402
from gnnsparse.quant import _gemm  # noqa: E402

SCALE = 0.0371  # not a power of two: the scaling rounds


def _cuda_ready():
    try:
        from gnnsparse import _cuda_backend
    except ImportError:
        return False
    return torch.cuda.is_available() and _cuda_backend.backend.available()


def _sycl():
    from conftest import sycl_or_skip

    sycl_or_skip()


def _dpnp():
    _sycl()
    return pytest.importorskip("dpnp")


# ---- the frameworks: (name, to_device(np int8/float32 array), to_numpy(result), result check)
def _np_in(x):
    return x


def _torch_in(x):
    return torch.from_numpy(np.ascontiguousarray(x))


def _cuda_in(x):
    return torch.from_numpy(np.ascontiguousarray(x)).cuda()


def _dpnp_in(x):
    return _dpnp().asarray(np.ascontiguousarray(x))


FRAMEWORKS = {
    "numpy": (_sycl, _np_in, lambda C: (C, np.ndarray)),
    "torch-cpu": (_sycl, _torch_in, lambda C: (C.numpy(), torch.Tensor)),
    "dpnp": (_dpnp, _dpnp_in, lambda C: (C.asnumpy(), type(_dpnp().empty(1)))),
    "torch-cuda": (lambda: None if _cuda_ready() else pytest.skip("no CUDA device or no gnnsparse CUDA module"),
                   _cuda_in, lambda C: (C.cpu().numpy(), torch.Tensor)),
}
ALL = list(FRAMEWORKS)
SYCL = ["numpy", "torch-cpu"]


def rand8(shape, seed, lo=-128, hi=127):
    return np.random.default_rng(seed).integers(lo, hi + 1, shape, dtype=np.int8)


def want(a8, b8, scale):
    """fl32(fl32(acc) * scale[0]) with acc = a8^T b8 exactly (NumPy arrays)."""
    K, M = a8.shape
    N = b8.shape[1]
    if K * M * N <= 20_000_000:
        acc = a8.astype(np.int64).T @ b8.astype(np.int64)
    else:  # float64: integers below 2^53 are exact in any order
        acc = (torch.from_numpy(a8).double().t() @ torch.from_numpy(b8).double()).numpy()
    return acc.astype(np.float32) * np.float32(scale[0])


def run(fw, a8, b8, scale):
    """int_matmul_tn in framework fw; the result as NumPy (checked to be in fw's framework)."""
    ready, to_dev, back = FRAMEWORKS[fw]
    ready()
    C = _gemm.int_matmul_tn(to_dev(a8), to_dev(b8), to_dev(np.asarray(scale, np.float32)))
    out, cls = back(C)
    assert isinstance(C, cls), f"{fw}: got a {type(C).__name__}"
    return np.asarray(out)


def check(got, expect):
    assert got.dtype == np.float32 and got.shape == expect.shape, (got.dtype, got.shape, expect.shape)
    assert not np.isnan(got).any(), "an output element was left unwritten (NaN poison)"
    bad = np.argwhere(got != expect)
    assert bad.size == 0, f"{len(bad)} elements differ, first at {bad[0].tolist()}: " \
                          f"{got[tuple(bad[0])]} != {expect[tuple(bad[0])]}"


SIZES = [1, 3, 17, 128, 130]


@pytest.mark.parametrize("fw", SYCL + ["torch-cuda"])
@pytest.mark.parametrize("K", [0, 1, 7, 1000])
@pytest.mark.parametrize("M", SIZES)
@pytest.mark.parametrize("N", SIZES)
def test_exact_odd_sizes(fw, K, M, N):
    a8, b8 = rand8((K, M), K + 7 * M), rand8((K, N), K + 11 * N + 1)
    s = [SCALE]
    check(run(fw, a8, b8, s), want(a8, b8, s))


@pytest.mark.parametrize("fw", ALL)
@pytest.mark.parametrize("M,N", [(1, 1), (3, 17), (17, 130), (128, 128), (130, 3)])
def test_exact_long_k(fw, M, N):
    """K = 140,003: more than one int32 segment's worth (131,071 rows) on every plan, and many
    1024-row float blocks, the last one partial."""
    K = 140_003
    a8, b8 = rand8((K, M), M), rand8((K, N), N + 1)
    s = [SCALE]
    got = run(fw, a8, b8, s)
    check(got, want(a8, b8, s))
    if fw == "torch-cpu" and M == N == 128:  # the path it replaces: the same bits
        ref = _gemm.int_matmul(torch.from_numpy(a8).t().contiguous(), torch.from_numpy(b8), torch.tensor(s))
        check(got, ref.numpy())


@pytest.mark.parametrize("fw", SYCL + ["torch-cuda"])
@pytest.mark.parametrize("K,M,N,va,vb", [
    (1024, 4, 3, -128, -128),        # one float block at exactly 2^24
    (1025, 4, 3, -128, -128),
    (131_071, 8, 8, -128, -128),     # one int32 segment's worth at the largest product
    (131_072, 8, 4, -128, -128),
    (140_003, 17, 3, -128, -128),
    (140_003, 128, 128, 127, 127),
    (140_003, 128, 130, -128, 127),
])
def test_extreme_values(fw, K, M, N, va, vb):
    a8 = np.full((K, M), va, np.int8)
    b8 = np.full((K, N), vb, np.int8)
    exact = np.float32(K * va * vb)  # rounded once to float32
    check(run(fw, a8, b8, [1.0]), np.full((M, N), exact, np.float32))


@pytest.mark.parametrize("fw", SYCL)
def test_alternating_extremes(fw):
    """-128 and +127 rows alternating with signs that make partial sums swing: exact throughout."""
    K, M, N = 5_000, 17, 33
    a8 = np.where(np.arange(K)[:, None] % 3 == 0, -128, 127).astype(np.int8).repeat(M, 1)
    b8 = np.where(np.arange(K)[:, None] % 2 == 0, -128, 127).astype(np.int8).repeat(N, 1)
    check(run(fw, a8, b8, [SCALE]), want(a8, b8, [SCALE]))


@pytest.mark.parametrize("fw", ALL)
@pytest.mark.parametrize("M,N", [(3, 5), (128, 128), (0, 4), (4, 0)])
def test_k_zero(fw, M, N):
    a8, b8 = np.empty((0, M), np.int8), np.empty((0, N), np.int8)
    check(run(fw, a8, b8, [SCALE]), np.zeros((M, N), np.float32))
    nan = run(fw, a8, b8, [np.nan])
    assert nan.shape == (M, N) and np.isnan(nan).all()  # 0 * NaN: the scale's NaN shows


@pytest.mark.parametrize("fw", ALL)
def test_repeat_bitwise_and_scale(fw):
    a8, b8 = rand8((30_001, 128), 5), rand8((30_001, 96), 6)
    c1 = run(fw, a8, b8, [1.0])
    for _ in range(3):
        assert np.array_equal(run(fw, a8, b8, [1.0]), c1)
    check(c1, want(a8, b8, [1.0]))
    check(run(fw, a8, b8, [SCALE, 123.0]), c1 * np.float32(SCALE))  # a QTensor's {s, inv}: only s is used


def test_misaligned_and_strided_numpy():
    _sycl()
    K, M, N = 20_011, 64, 32
    buf = rand8((K * M + 1,), 9)
    a8 = buf[1:].reshape(K, M)  # one byte past the buffer's start
    wide = rand8((K, N + 8), 10)
    b8 = wide[:, 3:3 + N]  # rows 40 bytes apart: copied to contiguous rows first
    s = np.array([SCALE], np.float32)
    check(_gemm.int_matmul_tn(a8, b8, s), want(a8, np.ascontiguousarray(b8), s))
    tb = torch.from_numpy(wide)[:, 3:3 + N]
    got = _gemm.int_matmul_tn(torch.from_numpy(a8), tb, torch.from_numpy(s))
    check(got.numpy(), want(a8, np.ascontiguousarray(b8), s))


@pytest.mark.parametrize("tile", ["16x1", "1x1", "5x3", "8x2"])
def test_other_tiles_same_bits(tile, monkeypatch):
    """The SYCL kernel's other tiles (TM rows x VN column vectors; those outside the shipped list
    compile from source at first use) give the same bits: the sums are exact."""
    _sycl()
    from gnnsparse import _sycl_backend

    if _sycl_backend.backend.device_caps()["preferred_sub_group_size"] < 16 and tile != "1x1":
        pytest.skip("sub-group size below 16")
    K, M, N = 3_001, 19, 37
    a8, b8 = rand8((K, M), 1), rand8((K, N), 2)
    monkeypatch.setenv("GNNSPARSE_SYCL_QGEMM_TILE", tile)
    check(run("numpy", a8, b8, [SCALE]), want(a8, b8, [SCALE]))


def test_tile_override_is_checked(monkeypatch):
    _sycl()
    monkeypatch.setenv("GNNSPARSE_SYCL_QGEMM_TILE", "0x2")
    with pytest.raises(ValueError, match="GNNSPARSE_SYCL_QGEMM_TILE"):
        run("numpy", rand8((5, 3), 1), rand8((5, 4), 2), [1.0])


def test_sycl_segments():
    """The plan's segments: at most 131,071 rows each (int32-exact), whole 1024-row float blocks."""
    _sycl()
    from gnnsparse import _sycl_backend

    ext, ex = _sycl_backend._ext(), _sycl_backend.backend._host_exec
    for K, M, N in [(1, 1, 1), (1000, 3, 4), (140_003, 128, 128), (169_343, 128, 128), (10_000_000, 4, 4)]:
        nseg = ext.qgemm_tn_work(ex, K, M, N) // (M * N)
        assert nseg >= -(-K // 131_071)
        seg = -(-K // nseg)
        assert seg <= 131_071
    assert ext.qgemm_tn_work(ex, 0, 5, 6) == 0
    assert ext.qgemm_tn_work(ex, 169_343, 1024, 1024) <= 1 << 24  # bounded scratch (64 MiB)


def test_sycl_argument_errors():
    _sycl()
    from gnnsparse import _sycl_backend

    ext, ex = _sycl_backend._ext(), _sycl_backend.backend._host_exec
    a8, b8 = rand8((10, 4), 1), rand8((10, 5), 2)
    s = np.array([1.0], np.float32)
    C = np.empty((4, 5), np.float32)
    work = np.empty(1, np.int32)
    ad = [x.__array_interface__["data"][0] for x in (a8, b8, s, C, work)]
    need = ext.qgemm_tn_work(ex, 10, 4, 5)
    assert need >= 4 * 5
    with pytest.raises(ValueError, match="work holds"):
        ext.qgemm_tn(ex, ad[0], 4, ad[1], 5, 10, 4, 5, ad[2], ad[3], ad[4], 1)
    with pytest.raises(ValueError, match="row strides"):
        ext.qgemm_tn(ex, ad[0], 3, ad[1], 5, 10, 4, 5, ad[2], ad[3], ad[4], need)
    with pytest.raises(ValueError, match="null pointer"):
        ext.qgemm_tn(ex, 0, 4, ad[1], 5, 10, 4, 5, ad[2], ad[3], ad[4], need)
    with pytest.raises(ValueError, match="negative"):
        ext.qgemm_tn_work(ex, -1, 4, 5)


def test_argument_errors():
    a8, b8, s = torch.from_numpy(rand8((10, 4), 1)), torch.from_numpy(rand8((10, 5), 2)), torch.tensor([1.0])
    with pytest.raises(ValueError, match="2-D"):
        _gemm.int_matmul_tn(a8.reshape(-1), b8, s)
    with pytest.raises(ValueError, match="same rows"):
        _gemm.int_matmul_tn(a8[:9], b8, s)
    with pytest.raises(TypeError, match="int8"):
        _gemm.int_matmul_tn(a8.numpy().view(np.uint8), b8.numpy(), s.numpy())
    with pytest.raises(TypeError, match="float32"):
        _gemm.int_matmul_tn(a8.numpy(), b8.numpy(), s.double().numpy())
    with pytest.raises(TypeError, match="mix torch tensors"):
        _gemm.int_matmul_tn(a8, b8.numpy(), s)


def test_dpnp_and_numpy_do_not_mix():
    dpnp = _dpnp()
    a8, b8 = rand8((10, 4), 1), rand8((10, 5), 2)
    with pytest.raises(ValueError, match="different devices"):
        _gemm.int_matmul_tn(dpnp.asarray(a8), b8, np.array([1.0], np.float32))


def test_quantized_layer_weight_gradient_cpu():
    """The layers' weight gradient (_matmul_q(a, b, transpose_a=True)) on CPU QTensors, int8 and
    int4: the bits of the path it replaces (torch._int_mm on the transposed copy)."""
    _sycl()
    from gnnsparse.quant import autograd as qa

    for bits in (8, 4):
        g = torch.Generator().manual_seed(bits)
        qa_ = gs.quantize(torch.randn(2_000, 48, generator=g), bits, seed=1)
        qb = gs.quantize(torch.randn(2_000, 24, generator=g), bits, seed=2)
        got = qa._matmul_q(qa_, qb, transpose_a=True)
        s = qa._scale(qa_, qb)
        ref = _gemm.int_matmul(qa_.int8().t().contiguous(), qb.int8(), s)
        assert isinstance(got, torch.Tensor)
        check(got.numpy(), ref.numpy())
