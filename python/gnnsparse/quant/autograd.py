"""Quantized training primitives with autograd (torch), after Tango (Chen et al., SC'23):

    linear(x, W)                 y = x W^T          int8 GEMM (torch._int_mm)
    spmm(A, AT, h)               out = A h          quantized SpMM (A's values weight the messages)
    spmm_heads(A, AT, perm, a, z) out[i, h] = sum_k a[k, h] z[col k, h]   (every head in one launch)
    sddmm_add(A, s, d)           e[k, h] = d[i, h] + s[j, h]              (GAT's attention logits)

Every input a primitive multiplies is quantized per tensor (stochastic rounding, `bits` 8 or 4),
the result is float32. What the backward pass needs is quantized once and kept (Tango's
inter-primitive reuse): the forward's quantized inputs are saved for the backward (x and W of a
linear, z of an aggregation), and the incoming gradient is quantized once and shared by the two
products that read it (dx and dW of a linear; dz and da of an aggregation). Backward:
    linear      dx = q(dy) q(W)            dW = q(dy)^T q(x)
    spmm        dh = A^T q(dout)           (A's values are data: no gradient)
    spmm_heads  dz = A^T (a[perm]) q(dout)  da = sddmm_dot(q(dout), q(z))  (integer dot products)
    sddmm_add   dd = incidence_spmm(q(de), dst)   ds = incidence_spmm(q(de), src)
Weights are updated in float32 by the optimizer (gradients are dequantized float32 tensors).
Seeds of the stochastic rounding come from torch's default generator, so torch.manual_seed makes a
run reproducible.
"""
from __future__ import annotations

import torch

from ..torch._library import _take_rows
from . import _gemm
from ._tensor import quantize
from .ops import incidence_spmm
from .ops import sddmm as qsddmm
from .ops import spmm as qspmm

__all__ = ["linear", "spmm", "spmm_heads", "sddmm_add", "next_seed"]


def next_seed() -> int:
    """A 63-bit seed from torch's default CPU generator."""
    return int(torch.randint(0, 2**63 - 1, (1,), dtype=torch.int64).item())


def _q(t, bits):
    return quantize(t.detach().contiguous(), bits, True, next_seed(), check=False)


def _scale(*qs):
    s = qs[0].scale[:1]
    for q in qs[1:]:
        s = s * q.scale[:1]
    return s


class _Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bits):
        qx, qw = _q(x, bits), _q(weight, bits)
        ctx.q = (qx, qw)
        ctx.bits = bits
        return _gemm.linear(qx, qw)

    @staticmethod
    def backward(ctx, dy):
        qx, qw = ctx.q
        qd = _q(dy, ctx.bits)  # shared by dx and dW
        d8 = qd.int8()
        dx = dw = None
        if ctx.needs_input_grad[0]:
            dx = _gemm.int_matmul(d8, qw.int8(), _scale(qd, qw))
        if ctx.needs_input_grad[1]:
            dw = _gemm.int_matmul(d8.t().contiguous(), qx.int8(), _scale(qd, qx))
        return dx, dw, None


def linear(x: torch.Tensor, weight: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """x (N, in) @ weight (out, in)^T in integer arithmetic, differentiable in both."""
    return _Linear.apply(x, weight, bits)


class _Spmm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, A, AT, bits):
        ctx.AT, ctx.bits = AT, bits
        return qspmm(A, _q(h, bits), "sum")

    @staticmethod
    def backward(ctx, dout):
        return qspmm(ctx.AT, _q(dout, ctx.bits), "sum"), None, None, None


def spmm(A, AT, h: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """A h (sum, weighted by A's values) with h quantized; AT is A's transpose as a gnnsparse.CSR
    with the values val[perm] (the backward's operator). Differentiable in h."""
    return _Spmm.apply(h, A, AT, bits)


class _SpmmHeads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, z, A, AT, perm, bits):
        qz = _q(z, bits)
        ctx.save_for_backward(a)
        ctx.qz, ctx.A, ctx.AT, ctx.perm, ctx.bits = qz, A, AT, perm, bits
        return qspmm(A, qz, "sum", weights=a.detach().contiguous())

    @staticmethod
    def backward(ctx, dout):
        (a,) = ctx.saved_tensors
        qd = _q(dout, ctx.bits)  # shared by da and dz
        da = dz = None
        if ctx.needs_input_grad[0]:
            da = qsddmm(ctx.A, qd, ctx.qz, "dot")
        if ctx.needs_input_grad[1]:
            aT = _take_rows(a.detach(), ctx.perm).contiguous()
            dz = qspmm(ctx.AT, qd, "sum", weights=aT)
        return da, dz, None, None, None, None


def spmm_heads(A, AT, perm, a: torch.Tensor, z: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """out[i, h] = sum_k a[k, h] z[col k, h, :] (a (nnz, H) float32 in CSR order, z (K, H, D)) with z
    quantized; perm: A^T's entry t is A's entry perm[t] (int64 tensor). Differentiable in a and z."""
    return _SpmmHeads.apply(a, z, A, AT, perm, bits)


class _SddmmAdd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, d, s, A, bits):
        ctx.A, ctx.bits = A, bits
        return qsddmm(A, _q(d, bits), _q(s, bits), "add")

    @staticmethod
    def backward(ctx, de):
        qe = _q(de, ctx.bits)  # shared by both endpoints
        dd = incidence_spmm(ctx.A, qe, "sum", "dst") if ctx.needs_input_grad[0] else None
        ds = incidence_spmm(ctx.A, qe, "sum", "src") if ctx.needs_input_grad[1] else None
        return dd, ds, None, None


def sddmm_add(A, s: torch.Tensor, d: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """e[k, h] = d[i, h] + s[col k, h] for every entry k of row i (d (M, H), s (K, H)), each side
    quantized; backward by the incidence SpMM (edge -> node sums) of the quantized gradient."""
    return _SddmmAdd.apply(d, s, A, bits)
