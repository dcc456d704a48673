"""Quantized GEMM for the linear layers, through a maintained integer GEMM: torch._int_mm (int8
tensor cores via cuBLASLt on CUDA; oneDNN on the CPU), int32 accumulation, the product of the
two per-tensor scales applied to the int32 result in one elementwise pass.

torch._int_mm on CUDA needs M > 16 rows and K, N multiples of 8, and is fast only with the second
operand column-major: the weight is kept as W^T (N x K, row-major, as torch.nn.Linear stores it)
and passed as its transposed view. Shapes that miss the constraints are zero-padded (zeros add
nothing to the integer products). int32 overflow guard: K * qmax_A * qmax_B <= 2^31 - 1
(K <= 133,143 for int8); longer K is split into chunks whose int32 products are summed in int64.

The weight gradient A^T B (A: K x M, B: K x N, K a graph's nodes) takes int_matmul_tn: the
backend's qgemm_tn kernels (cuda/qgemm.cu; sycl/kernels/qgemm.hpp for NumPy arrays, torch CPU
tensors and dpnp arrays) read both operands row-major as they are, without the transposed copies
and K chunks torch._int_mm needs; torch CPU tensors without a SYCL device take int_matmul on A's
transposed copy.
"""
from __future__ import annotations

import numpy as np

from .. import _arrays
from .._backends import BackendUnavailable, backend_for
from .._ops import wrap_like
from ._delayed import DelayedScale
from ._tensor import QTensor, quantize, _seed

_MIX = 0x9E3779B97F4A7C15  # a second seed for the second operand (independent rounding)


def matmul(A, B, bits: int = 8, *, stochastic: bool = True, seed=None):
    """A @ B (A: M x K, B: K x N, float) in integer arithmetic: A and B^T quantized per tensor
    (bits 8 or 4; 4-bit values run in int8 containers: no int4 tensor cores on Hopper), then
    linear(). Returns float32 (M, N) in A's framework. A or B may already be QTensors (B then
    must be the quantized B^T, N x K)."""
    if stochastic:
        seed = _seed(seed)
    QA = A if isinstance(A, QTensor) else quantize(A, bits, stochastic, seed, check=False)
    if isinstance(B, QTensor):
        QBt = B
    else:
        if len(_arrays.shape_of(B)) != 2:
            raise ValueError(f"matmul takes 2-D operands, B has shape {_arrays.shape_of(B)}")
        QBt = quantize(B.T, bits, stochastic, None if seed is None else (int(seed) ^ _MIX), check=False)
    return linear(QA, QBt)


def _check_linear(QX, QW):
    if not isinstance(QX, QTensor) or not isinstance(QW, QTensor):
        raise TypeError("linear takes two QTensors")
    if len(QX.shape) != 2 or len(QW.shape) != 2:
        raise ValueError(f"linear takes 2-D operands, got {QX.shape} and {QW.shape}")
    M, K = QX.shape
    N, K2 = QW.shape
    if K != K2:
        raise ValueError(f"inner dimensions differ: X is {QX.shape}, W is {QW.shape} (W must be N x K)")
    if QX.kind != QW.kind:
        raise ValueError(f"X lives on {QX.kind} but W on {QW.kind}; put them on one device")
    return M, K, N, (2**31 - 1) // (QX.qmax * QW.qmax)


def linear_q(QX, QW, out: DelayedScale, seed=None):
    """linear(QX, QW) returned quantized, a QTensor of out.bits, with out's delayed scale: the
    int32 products of torch._int_mm are scaled and quantized by one kernel (the GEMM's scale pass
    as the producer: no float32 Y, no quantize pass). y is linear()'s float32 output bit for bit,
    so the bits equal quantize(linear(QX, QW), seed=seed) with that scale. The first call
    calibrates (float32 Y, then quantize); so does every call whose integer product is not one
    int32 _int_mm (K beyond the int32 guard, or no torch)."""
    if not isinstance(out, DelayedScale):
        raise TypeError(f"out must be a gnnsparse.quant.DelayedScale, got {type(out).__name__}")
    M, K, N, kmax = _check_linear(QX, QW)
    out._check_place(QX.data, "quant.linear_q")
    sd = _seed(seed) if out.stochastic else 0
    a8, w8 = QX.int8(), QW.int8()
    if out.scale is None or not _arrays.is_torch(a8) or K > kmax:
        Q = quantize(linear(QX, QW), out.bits, out.stochastic, sd, check=False)
        out._calibrate(Q)
        return Q
    acc = _int_acc(a8, w8.t(), kmax)  # int32, (M, N) or zero-padded on CUDA
    b = backend_for(acc)
    accp = b.prepare(acc)
    Qd, sc = b.requantize(accp, M, N, int(acc.shape[1]), b.prepare(QX.scale), b.prepare(QW.scale),
                          out._args(b, sd))
    Qd, sc = wrap_like(acc, accp, Qd, sc)
    out._advance(sc)
    return QTensor(Qd, sc[:2], out.bits, (M, N), sd if out.stochastic else None, out.stochastic)


def linear(QX, QW):
    """Y = dequantize(QX) @ dequantize(QW)^T computed as s_X s_W (q_X @ q_W^T) with exact int32
    (int64 across K chunks) accumulation; QX: M x K, QW: N x K (torch.nn.Linear's weight layout).
    float32 (M, N) in QX's framework."""
    M, K, N, kmax = _check_linear(QX, QW)
    a8, w8 = QX.int8(), QW.int8()
    if _arrays.is_torch(a8):
        return _torch_linear(a8, w8, QX.scale, QW.scale, kmax)
    if _arrays.kind(a8) == "cuda":  # CuPy: exact integer matmul in int32 / int64 (no int8 GEMM exposed)
        import cupy as cp

        acc = cp.matmul(a8.astype(cp.int64), w8.astype(cp.int64).T)
        return (acc.astype(cp.float64) * (QX.scale[:1].astype(cp.float64) * QW.scale[:1])).astype(cp.float32)
    a8, w8 = _arrays.to_numpy(a8), _arrays.to_numpy(w8)
    sx, sw = _arrays.to_numpy(QX.scale)[:1], _arrays.to_numpy(QW.scale)[:1]
    try:
        import torch
    except ImportError:  # no torch: exact integer matmul in NumPy (no BLAS for integers: slow)
        acc = a8.astype(np.int64) @ w8.astype(np.int64).T
        return (acc * (sx * sw).astype(np.float32)).astype(np.float32)
    Y = _torch_linear(torch.from_numpy(np.ascontiguousarray(a8)), torch.from_numpy(np.ascontiguousarray(w8)),
                      torch.from_numpy(sx), torch.from_numpy(sw), kmax)
    return Y.numpy()


def _pad(t, rows=None, cols=None):
    import torch.nn.functional as F

    r = 0 if rows is None else rows - t.shape[0]
    c = 0 if cols is None else cols - t.shape[1]
    return F.pad(t, (0, c, 0, r)) if (r or c) else t


def _round_up(x, m):
    return (x + m - 1) // m * m


def int_matmul(a8, b8, scale, kmax: int = 133_143):
    """(a8 @ b8) * scale as float32, for torch int8 matrices a8 (M x K) and b8 (K x N) and a float32
    tensor `scale` of one element (on the same device; no host round trip). Exact int32
    accumulation through torch._int_mm; K longer than kmax (the int32 overflow guard) is split into
    chunks summed in int64. On CUDA the operands are padded with zeros to cuBLASLt's int8 shapes
    (M > 16, K and N multiples of 8) and b8 is made column-major (a transposed view of a row-major
    N x K matrix is used as is; anything else is copied once)."""
    import torch

    M, N = a8.shape[0], b8.shape[1]
    acc = _int_acc(a8, b8, kmax)
    scale = scale.reshape(1).to(torch.float32)
    if acc.is_cuda:  # one elementwise kernel: int32 (or int64) in, float32 out
        Y = torch.mul(acc, scale)
    else:  # the CPU's promoting multiply is not vectorized: convert, then scale in place
        Y = acc.to(torch.float32).mul_(scale)
    return Y[:M, :N] if Y.shape != (M, N) else Y


def int_matmul_tn(a8, b8, scale):
    """(a8^T @ b8) * scale as float32 (M, N), for int8 matrices a8 (K x M) and b8 (K x N) (torch
    tensors, NumPy, CuPy or dpnp arrays) and `scale` one float32 element on their device (no
    host round trip). The integer product is exact (int32 per K segment, int64 across segments),
    then fl32(fl32(acc) * scale): the bits of int_matmul(a8.t(), b8, scale). On CUDA and SYCL
    devices one kernel pair reads a8 and b8 in place (gnnsparse/qgemm.hpp; operands whose rows are
    not contiguous are copied first); torch CPU tensors without a SYCL device take a8^T's copy and
    int_matmul. The result is in a8's framework."""
    shp_a, shp_b = _arrays.shape_of(a8), _arrays.shape_of(b8)
    if len(shp_a) != 2 or len(shp_b) != 2:
        raise ValueError(f"int_matmul_tn takes 2-D operands, got shapes {shp_a} and {shp_b}")
    if shp_a[0] != shp_b[0]:
        raise ValueError(f"int_matmul_tn: a8 (K x M) and b8 (K x N) must have the same rows, got {shp_a} and {shp_b}")
    for name, x in (("a8", a8), ("b8", b8)):
        if _arrays.dtype_name(x) != "int8":
            raise TypeError(f"int_matmul_tn: {name} must be int8, got {_arrays.dtype_name(x)}")
    if _arrays.dtype_name(scale) != "float32" or int(np.prod(_arrays.shape_of(scale))) < 1:
        raise TypeError("int_matmul_tn: scale must be a float32 array of at least one element on the operands' device")
    kinds = {_arrays.kind(a8), _arrays.kind(b8), _arrays.kind(scale)}
    if len(kinds) != 1:
        raise ValueError(f"int_matmul_tn: operands and scale live on different devices ({sorted(kinds)})")
    if len({_arrays.is_torch(x) for x in (a8, b8, scale)}) != 1:
        raise TypeError("int_matmul_tn: operands and scale mix torch tensors with other arrays")
    if kinds == {"numpy"} and _arrays.is_torch(a8):  # torch CPU tensors: the SYCL device if there is one
        try:
            b = backend_for(a8)
        except BackendUnavailable:
            return int_matmul(a8.t().contiguous(), b8, scale.reshape(-1)[:1])
    else:
        b = backend_for(a8)
    if b.place(a8) != b.place(b8) or b.place(a8) != b.place(scale):
        raise ValueError(f"int_matmul_tn: operands and scale are on different devices ({b.place(a8)}, "
                         f"{b.place(b8)}, {b.place(scale)})")
    K, M = shp_a
    a, s = b.prepare(a8), b.prepare(scale.reshape(-1)[:1])
    C = b.qgemm_tn(a, b.prepare(b8), K, M, shp_b[1], s)
    return wrap_like(a8, a, C)[0]


def _int_acc(a8, b8, kmax: int):
    """a8 @ b8 exactly (see int_matmul): int32 (int64 beyond kmax), zero-padded on CUDA to
    cuBLASLt's int8 shapes (the caller takes the top-left M x N)."""
    import torch

    K = a8.shape[1]
    if a8.is_cuda:
        M, N = a8.shape[0], b8.shape[1]
        Mp, Kp, Np = max(M, 17), _round_up(K, 8), _round_up(N, 8)
        a8 = _pad(a8.contiguous() if a8.stride(-1) != 1 else a8, Mp, Kp)
        b8 = _pad(b8, Kp, Np)
        K = Kp
        if not (b8.stride(0) == 1 and b8.stride(1) == b8.shape[0]):
            b8 = b8.t().contiguous().t()  # column-major: cuBLASLt's fast int8 layout (TN)
    a8 = a8.contiguous()
    if K <= kmax:
        return torch._int_mm(a8, b8)
    chunk = kmax // 8 * 8
    acc = torch.zeros(a8.shape[0], b8.shape[1], dtype=torch.int64, device=a8.device)
    for k0 in range(0, K, chunk):
        acc += torch._int_mm(a8[:, k0:k0 + chunk].contiguous(), b8[k0:k0 + chunk])
    return acc


def _torch_linear(a8, w8, sx, sw, kmax):
    return int_matmul(a8, w8.t(), sx[:1] * sw[:1], kmax)
