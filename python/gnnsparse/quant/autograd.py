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

The layers (gnnsparse.quant.nn) use fused versions, in which producers write the next product's
quantized input themselves with a delayed scale (gnnsparse.quant.DelayedScale; no quantize pass
between them) and only QTensors are saved for the backward (ctx.save_for_backward of their int8
data and scales: no float32 copy of an activation is kept):
    gcn_layer      out = A q(h),  q(h) = linear_q(q(x), q(W))     (the GEMM's scale pass writes q(h))
                   backward: q(dh) = A^T q(dout) written by the SpMM's epilogue, then
                   dW = q(dh)^T q(x), dx = q(dh) q(W)
    gat_project    q(z) = linear_q(q(x), q(W)) (a handle, not a tensor) and its backward, which
                   takes q(dz) from gat_aggregate's backward through the handle
    gat_logits     a = x w_a^T (float32; the attention vectors folded into the weight: no float32
                   z is needed), backward dw_a = da^T q(x) from the saved q(x)
    gat_aggregate  out[i, h] = sum_k alpha[k, h] q(z)[col k, h]; backward da = sddmm_dot(q(dout),
                   q(z)), q(dz) = A^T (alpha) q(dout) written by the SpMM's epilogue
    gat_attend     the two above and the attention between them without attention dropout:
                   alpha = softmax(leaky_relu(q(a_dst)[i] + q(a_src)[j])) by one FusedMM pass,
                   out = A (alpha) q(z); only q(a_dst), q(a_src) and q(z) are saved, the backward
                   forms alpha again (the same bits), then as gat_aggregate's and sddmm_add's
                   backward with the softmax and leaky_relu gradients in place
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F

from .. import _ops
from ..torch._library import _take_rows
from . import _gemm
from ._delayed import DelayedScale
from ._tensor import QTensor, quantize
from .ops import incidence_spmm
from .ops import sddmm as qsddmm
from .ops import spmm as qspmm

__all__ = ["linear", "spmm", "spmm_heads", "sddmm_add", "next_seed", "LayerScales", "gcn_layer", "gat_project",
           "gat_logits", "gat_aggregate", "gat_attend", "leaky_relu", "leaky_edge_softmax", "spmm_float",
           "relu_dropout", "elu_dropout", "elu_dropout_"]


def next_seed() -> int:
    """A 63-bit seed from torch's default CPU generator."""
    return int(torch.randint(0, 2**63 - 1, (1,), dtype=torch.int64).item())


def _q(t, bits):
    """q(t) at `bits`, stochastic rounding with a fresh seed. A QTensor (a layer input quantized once,
    e.g. the input features of `gnnsparse train --quant 8`) is taken as it is at its own width, and
    requantized from its values at another width."""
    if isinstance(t, QTensor):
        if t.bits == bits:
            return t
        t = t.dequantize()
    return quantize(t.detach().contiguous(), bits, True, next_seed(), check=False)


def _device_of(x):
    return x.data.device if isinstance(x, QTensor) else x.device


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
            dw = _gemm.int_matmul_tn(d8, qx.int8(), _scale(qd, qx))  # dy^T x: no transposed copy on CUDA / SYCL
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


# ---------------------------------------------------------------- fused layers (gnnsparse.quant.nn)
class LayerScales:
    """The delayed scales of one quantized layer's produced tensors (by name), one DelayedScale per
    (name, bits): a change of the bit width starts a new one. decay: their peak hold (0.99: a
    gradient whose absmax jumps from step to step, with dropout, is clamped on fewer steps; on the
    quick GCN of docs/quantization.md, saturated steps of dh 98 -> 46 of 200, largest growth 1.55x
    -> 1.18x)."""

    def __init__(self, decay: float = 0.99):
        self._d = {}
        self.decay = decay

    def get(self, name: str, bits: int) -> DelayedScale:
        st = self._d.get(name)
        if st is None or st.bits != bits:
            st = self._d[name] = DelayedScale(bits, decay=self.decay)
        return st

    def statistics(self) -> dict:
        """{name: DelayedScale.statistics()} (reads the device)."""
        return {k: v.statistics() for k, v in self._d.items()}


def _save_q(ctx, *qs, extra=()):
    """Save QTensors (and the tensors `extra`) for the backward through ctx.save_for_backward (their
    data and scales: what saved_tensors_hooks see), with their metadata on ctx."""
    ctx.qmeta = [(q.bits, q.shape, q.seed, q.stochastic) for q in qs]
    ctx.save_for_backward(*[t for q in qs for t in (q.data, q.scale)], *extra)


def _load_q(ctx):
    """(QTensors, extra tensors) saved by _save_q."""
    t = ctx.saved_tensors
    n = len(ctx.qmeta)
    qs = [QTensor(t[2 * i], t[2 * i + 1], b, shp, sd, st) for i, (b, shp, sd, st) in enumerate(ctx.qmeta)]
    return qs, t[2 * n:]


def _matmul_q(a: QTensor, b: QTensor, transpose_a: bool = False):
    """dequantize(a) @ dequantize(b) (a^T with transpose_a) in integer arithmetic, float32. a^T b
    (the weight gradients) reads both row-major as they are (int_matmul_tn: on CUDA / SYCL no transposed
    copy, no K chunks)."""
    a8, b8 = a.int8().reshape(a.rows, a.C), b.int8().reshape(b.rows, b.C)
    if transpose_a:
        return _gemm.int_matmul_tn(a8, b8, _scale(a, b))
    return _gemm.int_matmul(a8, b8, _scale(a, b))


class _GCNLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, A, AT, bits, scales):
        qx, qw = _q(x, bits), _q(weight, bits)
        qh = _gemm.linear_q(qx, qw, scales.get("h", bits), next_seed())  # the GEMM writes q(h)
        _save_q(ctx, qx, qw)
        ctx.AT, ctx.bits, ctx.scales = AT, bits, scales
        return qspmm(A, qh, "sum")

    @staticmethod
    def backward(ctx, dout):
        (qx, qw), _ = _load_q(ctx)
        qd = _q(dout, ctx.bits)
        qdh = qspmm(ctx.AT, qd, "sum", out=ctx.scales.get("dh", ctx.bits), seed=next_seed())  # the SpMM writes q(dh)
        dx = _matmul_q(qdh, qw) if ctx.needs_input_grad[0] else None
        dw = _matmul_q(qdh, qx, transpose_a=True) if ctx.needs_input_grad[1] else None
        return dx, dw, None, None, None, None


def gcn_layer(A, AT, x: torch.Tensor, weight: torch.Tensor, bits: int, scales: LayerScales) -> torch.Tensor:
    """A (x W^T) with every operand quantized and no quantize pass between the products: the int8
    GEMM's scale pass writes q(x W^T) for the SpMM (delayed scale "h"), and in the backward the
    SpMM over A^T writes q(dh) for both GEMMs of the weight and input gradients (delayed scale
    "dh"). Saved for the backward: q(x) and q(W) only. Differentiable in x and weight; x may be a
    QTensor (quantized once, e.g. input features: taken as it is, no gradient)."""
    return _GCNLayer.apply(x, weight, A, AT, bits, scales)


class _Handle:
    """What gat_project hands to gat_logits / gat_aggregate besides tensors: the quantized input
    q(x), the quantized projection q(z), and (in the backward) the quantized gradient q(dz) and
    gat_attend's incoming gradient q(dout) (quantized by _quantize_incoming before the backward)."""

    __slots__ = ("qx", "qz", "dz", "qd", "__weakref__")

    def __init__(self):
        self.qx = self.qz = self.dz = self.qd = None


class _GATProject(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, heads, bits, scales, handle):
        qx, qw = _q(x, bits), _q(weight, bits)
        qz = _gemm.linear_q(qx, qw, scales.get("z", bits), next_seed())
        n, HC = qz.shape
        handle.qx, handle.qz = qx, QTensor(qz.data, qz.scale, qz.bits, (n, heads, HC // heads), qz.seed, qz.stochastic)
        _save_q(ctx, qx, qw)
        ctx.handle = handle
        token = torch.empty(0, device=_device_of(x))  # carries the dependency: gat_aggregate's backward runs first
        return token

    @staticmethod
    def backward(ctx, dtoken):
        (qx, qw), _ = _load_q(ctx)
        qdz = ctx.handle.dz
        ctx.handle.dz = None
        n = qdz.shape[0]
        qdz = QTensor(qdz.data, qdz.scale, qdz.bits, (n, qdz.C), qdz.seed, qdz.stochastic)
        dx = _matmul_q(qdz, qw) if ctx.needs_input_grad[0] else None
        dw = _matmul_q(qdz, qx, transpose_a=True) if ctx.needs_input_grad[1] else None
        return dx, dw, None, None, None, None


def gat_project(x: torch.Tensor, weight: torch.Tensor, heads: int, bits: int, scales: LayerScales):
    """(token, handle): q(x W^T) written by the int8 GEMM's scale pass (delayed scale "z"), as
    handle.qz (n, heads, C), for gat_aggregate; token (an empty tensor) links the two in autograd,
    the gradient q(dz) comes back through the handle. Differentiable in x and weight; x may be a
    QTensor (quantized once: taken as it is, no gradient)."""
    handle = _Handle()
    token = _GATProject.apply(x, weight, heads, bits, scales, handle)
    return token, handle


class _GATLogits(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, wa, handle):
        _save_q(ctx, handle.qx, extra=(wa,))
        if isinstance(x, QTensor):  # x quantized once: the logits from its values, in row blocks
            return _rows_matmul(x, wa.t())
        return x @ wa.t()

    @staticmethod
    def backward(ctx, da):
        (qx,), (wa,) = _load_q(ctx)
        dwa = None
        if ctx.needs_input_grad[1]:  # da^T x with the saved q(x), in row chunks (no float32 copy of x)
            x8 = qx.int8().reshape(qx.rows, qx.C)
            rows = x8.shape[0] if x8.numel() <= _ACT_WHOLE else 65536
            dwa = torch.zeros_like(wa)
            for r0 in range(0, x8.shape[0], rows):
                dwa += da[r0:r0 + rows].t() @ x8[r0:r0 + rows].to(da.dtype)
            dwa *= qx.scale[:1]
        dx = da @ wa if ctx.needs_input_grad[0] else None
        return dx, dwa, None


def _rows_matmul(q: QTensor, b: torch.Tensor) -> torch.Tensor:
    """dequantize(q) @ b (q: (n, k), b: (k, m) float32) in blocks of rows, each block widened to
    float32 on its own: no float32 copy of the whole of q."""
    x8 = q.int8().reshape(q.rows, q.C)
    rows = x8.shape[0] if x8.numel() <= _ACT_WHOLE else max(1, _ACT_WHOLE // max(1, q.C))
    out = torch.empty(x8.shape[0], b.shape[1], dtype=b.dtype, device=b.device)
    for r0 in range(0, x8.shape[0], rows):
        torch.mm(x8[r0:r0 + rows].to(b.dtype), b, out=out[r0:r0 + rows])
    return out.mul_(q.scale[:1])


def gat_logits(x, wa: torch.Tensor, handle) -> torch.Tensor:
    """x wa^T in float32 (wa: (k, in), e.g. the attention vectors folded into the weight, so the
    logits need no float32 projection); the backward takes dwa from the saved q(x) of
    gat_project's handle. Differentiable in x and wa. x may be a QTensor (quantized once, the same
    one gat_project took): the logits then come from its values, and x has no gradient."""
    return _GATLogits.apply(x, wa, handle)


class _GATAggregate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, alpha, token, A, AT, perm, bits, scales, handle):
        qz = handle.qz
        _save_q(ctx, qz, extra=(alpha,))
        ctx.A, ctx.AT, ctx.perm, ctx.bits, ctx.scales, ctx.handle = A, AT, perm, bits, scales, handle
        return qspmm(A, qz, "sum", weights=alpha.detach().contiguous())

    @staticmethod
    def backward(ctx, dout):
        (qz,), (alpha,) = _load_q(ctx)
        qd = _q(dout, ctx.bits)  # shared by dalpha and dz
        da = qsddmm(ctx.A, qd, qz, "dot") if ctx.needs_input_grad[0] else None
        aT = _take_rows(alpha.detach(), ctx.perm).contiguous()
        ctx.handle.dz = qspmm(ctx.AT, qd, "sum", weights=aT, out=ctx.scales.get("dz", ctx.bits), seed=next_seed())
        return da, dout.new_zeros(0), None, None, None, None, None, None


def gat_aggregate(A, AT, perm, alpha: torch.Tensor, token: torch.Tensor, handle, bits: int,
                  scales: LayerScales) -> torch.Tensor:
    """out[i, h] = sum_k alpha[k, h] q(z)[col k, h, :] (q(z) from gat_project's handle, every head
    in one launch); the backward's dz = A^T (alpha) q(dout) is written quantized by the SpMM's
    epilogue (delayed scale "dz") and handed to gat_project through the handle. Differentiable in
    alpha (and, through the handle, in gat_project's inputs)."""
    return _GATAggregate.apply(alpha, token, A, AT, perm, bits, scales, handle)


def _gat_weights(g, fd: torch.Tensor, fs: torch.Tensor, slope: float) -> torch.Tensor:
    """alpha[k, h] = the softmax over row i's edges of leaky_relu(fd[i, h] + fs[col k, h]) (nnz, H),
    by one FusedMM pass that writes only the edge values (D = 0): no logits or softmax temporaries.
    Deterministic, so a recomputation gives the forward's alpha bit for bit."""
    from ..torch import functional as gf
    from ..torch._library import GAT_EDGE

    return gf.fusedmm(g, fd, fs, fs.new_empty((fs.shape[0], fs.shape[1], 0)), "add", GAT_EDGE, slope,
                      return_edges=True)[1]


_EDGE_CHUNK = 1 << 22  # edges per chunk of gat_attend's backward (4 heads: 64 MiB per temporary)


class _GATAttend(torch.autograd.Function):
    """GAT's attention and aggregation over q(z), saving no per-edge tensor: the forward quantizes the
    per-node logits (a_dst, a_src: (n, H), stochastic rounding), forms alpha from their dequantized
    values by one FusedMM pass and aggregates q(z) with it; the backward forms alpha again (the same
    bits; gnnsparse.torch.set_fusedmm_backward("save") keeps the forward's alpha instead), then
    dz = A^T (alpha) q(dout) (quantized by the SpMM's epilogue, to gat_project through the handle),
    dalpha = q(dout) . q(z) per edge, the softmax and leaky_relu gradients in place, and the
    logits' gradient from q(d logits) by the incidence SpMMs (as sddmm_add's backward)."""

    @staticmethod
    def forward(ctx, a_dst, a_src, token, g, A, AT, perm, bits, logit_bits, slope, scales, handle):
        from ..torch._library import fusedmm_backward_mode

        qd, qs = _q(a_dst, logit_bits), _q(a_src, logit_bits)
        alpha = _gat_weights(g, qd.dequantize(), qs.dequantize(), slope)
        qz = handle.qz
        # the logits stay quantized (the backward dequantizes them again); alpha only in "save" mode
        keep = fusedmm_backward_mode() == "save"
        _save_q(ctx, qz, qd, qs, extra=(alpha,) if keep else ())
        ctx.g, ctx.A, ctx.AT, ctx.perm, ctx.bits, ctx.logit_bits = g, A, AT, perm, bits, logit_bits
        ctx.slope, ctx.scales, ctx.handle = slope, scales, handle
        return qspmm(A, qz, "sum", weights=alpha)

    @staticmethod
    def backward(ctx, dout):
        qd = _incoming(ctx.handle, dout, ctx.bits)  # shared by dalpha and dz; taken first, whatever raises later
        del dout
        (qz, qa_dst, qa_src), kept = _load_q(ctx)
        fd, fs = qa_dst.dequantize(), qa_src.dequantize()
        kernels = not kept and (_SOFTMAX_KERNELS == "always" or (_SOFTMAX_KERNELS == "cuda" and fd.is_cuda))
        # dz into the handle, and dS (nnz, H), None when neither logit needs a gradient
        t = (_GATAttend._score_grad_kernels if kernels else _GATAttend._score_grad_generic)(ctx, qz, qd, fd, fs, kept)
        dd = ds = None
        if t is not None:
            qe = _q(t, ctx.logit_bits)  # shared by both endpoints
            del t
            dd = incidence_spmm(ctx.A, qe, "sum", "dst") if ctx.needs_input_grad[0] else None
            ds = incidence_spmm(ctx.A, qe, "sum", "src") if ctx.needs_input_grad[1] else None
        return (dd, ds, qz.data.new_zeros(0, dtype=torch.float32)) + (None,) * 9

    @staticmethod
    def _score_grad_generic(ctx, qz, qd, fd, fs, kept):
        """alpha recomputed by FusedMM (or the forward's, kept), dz, then dS by torch ops in edge chunks."""
        from ..torch._library import _csr, _spmm

        g, A, slope = ctx.g, ctx.A, ctx.slope
        alpha = kept[0].clone() if kept else _gat_weights(g, fd, fs, slope)  # a copy: changed in place below
        aT = _take_rows(alpha, ctx.perm).contiguous()
        ctx.handle.dz = qspmm(ctx.AT, qd, "sum", weights=aT, out=ctx.scales.get("dz", ctx.bits), seed=next_seed())
        del aT
        if not (ctx.needs_input_grad[0] or ctx.needs_input_grad[1]):
            return None
        t = qsddmm(A, qd, qz, "dot").mul_(alpha)  # P * dP
        r = _spmm(_csr(g.rowptr, g.eid, None, t.shape[0]), t, "sum")
        # dS = P * (dP - rowsum(P * dP)) = t - alpha * r[row], times leaky_relu's slope (1 or
        # `slope`, from the sign of the logit fd[row] + fs[col], the float SDDMM add's value), in
        # edge chunks: the same float32 operations per element, no (nnz, H) temporary
        nnz = t.shape[0]
        for k0 in range(0, nnz, _EDGE_CHUNK):
            k1 = min(k0 + _EDGE_CHUNK, nnz)
            rows = g.rows[k0:k1]
            tc = t[k0:k1]
            tc.sub_(alpha[k0:k1].mul_(_take_rows(r, rows)))
            e = _take_rows(fd, rows).add_(_take_rows(fs, g.col[k0:k1]))
            tc.mul_(e.gt_(0).mul_(1 - slope).add_(slope))
            del e, tc
        return t

    @staticmethod
    def _score_grad_kernels(ctx, qz, qd, fd, fs, kept=None):
        """The same without a whole alpha (gnnsparse._gat_softmax's kernels): each row's softmax
        statistics (max logit, 1 / sum exp), the dz SpMM's weights written in A^T's order from them,
        then dS in the storage of d(alpha) = q(dout) . q(z): one (nnz, H) float32 tensor alive at a
        time instead of alpha beside it (1.8 GiB each on a products-sized graph)."""
        from .. import _gat_softmax as K
        from ..torch import nn as tnn

        g, slope = ctx.g, ctx.slope
        # the rows a block walks (>= K.LONG_ROW entries), found once per graph: the exact list (one
        # host synchronization then), not the padded one (min(M, nnz / LONG_ROW) entries, mostly -1,
        # that every call's segment count and grids would walk)
        lr = tnn._derived(g, ("gat_long_rows",), lambda b: K.gat_long_rows(b.rowptr))
        m, inv = K.gat_softmax_stats(g.rowptr, g.col, fd, fs, slope, long_rows=lr)
        aT = K.gat_softmax_weights_t(g.t_rowptr, g.t_col, fd, fs, m, inv, slope)
        ctx.handle.dz = qspmm(ctx.AT, qd, "sum", weights=aT, out=ctx.scales.get("dz", ctx.bits), seed=next_seed())
        del aT
        if not (ctx.needs_input_grad[0] or ctx.needs_input_grad[1]):
            return None
        return K.gat_softmax_grad_(g.rowptr, g.col, fd, fs, m, inv, slope, qsddmm(ctx.A, qd, qz, "dot"), long_rows=lr)


# where the quantized GAT's attention backward runs gnnsparse._gat_softmax's kernels: "cuda" (on
# CUDA tensors), "always" (elsewhere too, by their torch form: the tests), "never" (the generic path:
# alpha recomputed by FusedMM, the score gradient by torch ops in edge chunks)
_SOFTMAX_KERNELS = "cuda"


def _quantize_incoming(handle, bits):
    """A pre-hook for gat_attend's autograd node: q(dout) into handle.qd, and in dout's place a zero
    expanded to its shape (one element of storage: the engine checks the size, not the storage),
    so the float32 gradient (n x H x C x 4 bytes: 1.17 GiB on a products-sized graph) is freed
    before the backward's edge work instead of after it. The same quantization (seed from the same
    generator, drawn in the same order) as in the backward itself."""

    def hook(grad_outputs):
        (d,) = grad_outputs
        if d is None:
            return None
        handle.qd = _q(d, bits)  # overwrites one left by a backward that raised before taking it
        return (d.new_zeros(()).expand_as(d),)

    return hook


def _incoming(handle, dout, bits):
    """The backward's q(dout): the pre-hook's (handle.qd, taken) or, without it, quantized here."""
    qd, handle.qd = handle.qd, None
    return qd if qd is not None else _q(dout, bits)


def gat_attend(g, A, AT, perm, a_dst: torch.Tensor, a_src: torch.Tensor, token: torch.Tensor, handle, bits: int,
               logit_bits: int, slope: float, scales: LayerScales) -> torch.Tensor:
    """out[i, h] = sum_k alpha[k, h] q(z)[col k, h, :] with alpha = edge softmax of
    leaky_relu(q(a_dst)[i, h] + q(a_src)[col k, h]) (logits quantized to logit_bits), q(z) from
    gat_project's handle; g the GraphTensors of A. Saves only node-sized tensors for the backward,
    which recomputes alpha (one FusedMM pass). Differentiable in a_dst and a_src (and, through the
    handle, in gat_project's inputs)."""
    out = _GATAttend.apply(a_dst, a_src, token, g, A, AT, perm, bits, logit_bits, float(slope), scales, handle)
    if out.grad_fn is not None:
        out.grad_fn.register_prehook(_quantize_incoming(handle, bits))
    return out


class _LeakyReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, e, slope):
        pos = e > 0
        ctx.save_for_backward(pos)
        ctx.slope = slope
        return torch.where(pos, e, e * slope)

    @staticmethod
    def backward(ctx, g):
        (pos,) = ctx.saved_tensors
        return torch.where(pos, g, g * ctx.slope), None


def leaky_relu(e: torch.Tensor, slope: float) -> torch.Tensor:
    """F.leaky_relu (the same values and gradient: slope at e <= 0) saving a boolean mask for the
    backward instead of the float32 input (GAT's per-edge logits: 1 byte per edge and head)."""
    return _LeakyReLU.apply(e, float(slope))


def _leaky_factor(pos, like, slope):
    """1 where pos, else slope, in like's dtype (e * factor: leaky_relu's value and gradient)."""
    return torch.where(pos, like.new_ones(()), like.new_full((), slope))


class _LeakyEdgeSoftmax(torch.autograd.Function):
    """alpha = edge_softmax(leaky_relu(e)) computed in e's own storage (e is a fresh tensor of the
    quantized SDDMM that nothing else reads): besides e, one sign mask and one (nnz, H) temporary
    at a time, where the leaky_relu -> edge_softmax chain held ~5 edge tensors at once."""

    @staticmethod
    def forward(ctx, e, rowptr, rows, eid, slope):
        from ..torch._library import _csr, _spmm

        nnz = e.shape[0]
        pos = e > 0
        e.mul_(_leaky_factor(pos, e, slope))  # leaky_relu in place
        A = _csr(rowptr, eid, None, nnz)  # each row's edges, as edge_softmax's reductions
        e.sub_(_take_rows(_spmm(A, e, "max"), rows)).exp_()
        e.div_(_take_rows(_spmm(A, e, "sum"), rows))
        ctx.mark_dirty(e)
        ctx.save_for_backward(pos, e, rowptr, rows, eid)
        ctx.slope = slope
        return e

    @staticmethod
    def backward(ctx, dP):
        from ..torch._library import _csr, _spmm

        pos, P, rowptr, rows, eid = ctx.saved_tensors
        t = P * dP
        r = _spmm(_csr(rowptr, eid, None, P.shape[0]), t, "sum")
        t = torch.sub(dP, _take_rows(r, rows), out=t).mul_(P)  # dS = P * (dP - rowsum(P * dP))
        return t.mul_(_leaky_factor(pos, t, ctx.slope)), None, None, None, None


def leaky_edge_softmax(g, e: torch.Tensor, slope: float) -> torch.Tensor:
    """edge_softmax(g, leaky_relu(e, slope)) for e (nnz, H) in CSR order that the caller hands over
    (it is overwritten with the result); g a GraphTensors (rowptr, rows, eid). Differentiable in e."""
    return _LeakyEdgeSoftmax.apply(e, g.rowptr, g.rows, g.eid, float(slope))


class _SpmmFloat(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, A, AT):
        ctx.AT = AT
        return _ops.launch_spmm(A, h.detach().contiguous(), "sum", False, "fp32")

    @staticmethod
    def backward(ctx, dout):
        return _ops.launch_spmm(ctx.AT, dout.contiguous(), "sum", False, "fp32"), None, None


def spmm_float(A, AT, h: torch.Tensor) -> torch.Tensor:
    """A h in float32 (sum, weighted by A's values) over prebuilt operators, AT being A's transpose
    with the values val[perm]: the float layer's SpMM and backward (the same kernels, the same
    bits), saving nothing for the backward (the custom op of gnnsparse.torch keeps h and the
    graph's index arrays). Differentiable in h."""
    return _SpmmFloat.apply(h, A, AT)


_ACT_CHUNK = 1 << 23  # elements per block of elu_dropout's backward (and of its mask's unpacking)
# up to this many elements of q(x) (an arxiv-sized input) _GATLogits' dwa product takes the whole
# tensor in one block (3 launches, not 3 per block of 65536 rows). Not elu_dropout's backward: with it
# whole too, the arxiv-sized int8 GAT's peak rose from 0.55 to 0.66 GiB (H100, 2026-12-07), about the
# ~120 MB its whole-tensor temporaries add over 2^23-element blocks
_ACT_WHOLE = 1 << 25
_BITS = None  # (device, the weights 1, 2, ..., 128 as uint8)


def _bit_weights(device):
    global _BITS
    if _BITS is None or _BITS[0] != device:
        _BITS = (device, torch.tensor([1 << b for b in range(8)], dtype=torch.uint8, device=device))
    return _BITS[1]


def _chunk() -> int:
    """_ACT_CHUNK as whole bytes of a packed mask (a multiple of 8 elements)."""
    return max(8, _ACT_CHUNK // 8 * 8)


_GATHER_BITS = 0x0002040810204081  # sum over j of 2^(7 j): see _pack_mask


def _pack_mask(keep: torch.Tensor) -> torch.Tensor:
    """A boolean mask as bits (uint8, element k in bit k % 8 of byte k // 8; zero-padded to whole
    32-bit words, the layout of the act_dropout kernels, which read it): an eighth of its bytes for
    the backward. Each 8 mask bytes (0 / 1) read as one int64 w
    (little-endian: byte i is element 8 q + i) are gathered into one byte by a multiply: w * sum_j
    2^(7 j) holds byte i's bit at 8 i + 7 (7 - i) = 49 + i, and every other product term below bit
    49 at a distinct position (no carries into bits 49-56); >> 49 and the cast to uint8 keep those
    eight bits. Three elementwise passes over an eighth of the mask's elements, not blocks (torch's
    reduction over rows of 8, the old way, took 144 us on an arxiv-sized activation on an H100,
    2026-12-07); its temporary, 8 bytes per 8 elements, is a quarter of the float32 activation."""
    flat = keep.reshape(-1).view(torch.uint8)
    if flat.numel() % 32:
        flat = F.pad(flat, (0, 32 - flat.numel() % 32))
    elif flat.storage_offset() % 8:  # an int64 view needs 8-byte aligned words
        flat = flat.clone()
    words = flat.view(torch.int64)
    return (words * _GATHER_BITS).bitwise_right_shift_(49).to(torch.uint8)


def _unpack_mask(bits: torch.Tensor, k0: int, k1: int) -> torch.Tensor:
    """Elements [k0, k1) of a mask packed by _pack_mask (k0 a multiple of 8), as booleans."""
    b = bits[k0 // 8:(k1 + 7) // 8]
    return (b[:, None] & _bit_weights(bits.device)).ne(0).reshape(-1)[:k1 - k0]


def _act_backend(t):
    """The CUDA backend when t takes the act_dropout kernels (a float32 CUDA tensor, the CUDA build,
    GNNSPARSE_ACT_KERNEL not "off", not under torch.compile), else None (torch's elementwise ops)."""
    if (not (t.is_cuda and t.dtype == torch.float32) or torch.compiler.is_compiling()
            or os.environ.get("GNNSPARSE_ACT_KERNEL", "").lower() == "off"):
        return None
    from .._backends import BackendUnavailable, backend_for_kind

    try:
        return backend_for_kind("cuda")
    except BackendUnavailable:
        return None


class _ReluDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, p):
        scale = 1.0 / (1.0 - p)
        ctx.scale, ctx.shape, ctx.p = scale, h.shape, p
        b = _act_backend(h)
        if b is not None:  # one kernel: relu, the mask from the seeded generator, its bits, the scale
            h = h.contiguous()
            out = torch.empty_like(h)
            ctx.save_for_backward(b.act_dropout("relu", h, out, p, next_seed()))
            return out
        keep = h > 0
        if p > 0:  # the dropout mask, drawn as booleans (not a float32 tensor of uniforms)
            keep &= torch.empty(h.shape, dtype=torch.bool, device=h.device).bernoulli_(1.0 - p)
        ctx.save_for_backward(_pack_mask(keep))
        return _masked_scale(h, keep, scale)

    @staticmethod
    def backward(ctx, g):
        (bits,) = ctx.saved_tensors  # the same bits from either forward path
        b = None if torch.is_grad_enabled() else _act_backend(g)
        if b is not None:  # one kernel
            g = g.contiguous()
            return b.act_dropout_backward("relu", g, None, bits, ctx.p, torch.empty_like(g)), None
        keep = _unpack_mask(bits, 0, g.numel()).reshape(ctx.shape)
        return _masked_scale(g, keep, ctx.scale), None


def _masked_scale(t, keep, scale):
    """t * keep * scale: on CUDA dropout's own masked scale (one kernel), elsewhere t * keep then
    * scale in place (the CPU's native_dropout_backward first makes a float copy of the mask); the
    same values either way."""
    if t.is_cuda:
        return torch.ops.aten.native_dropout_backward(t, keep, scale)
    out = t * keep
    return out.mul_(scale) if scale != 1.0 else out


def relu_dropout(h: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """F.dropout(F.relu(h), p, training) saving one mask for the backward (relu's sign and the
    dropout mask together, packed: 1 bit per element) instead of relu's float32 output and dropout's
    mask. On CUDA (float32) one kernel each way (cuda/act_dropout.cu: relu, the mask from the
    quantizer's counter-based generator with a seed drawn from torch's generator, the bits and the
    scale in one pass; GNNSPARSE_ACT_KERNEL=off: torch's ops); elsewhere the mask is drawn by torch's
    generator (bernoulli). Either way seeded by torch.manual_seed, but not F.dropout's draws.
    Outside training (or p = 0) it is F.relu."""
    return _act_dropout(h, p, training, torch.relu, _ReluDropout)


def _act_dropout(h, p, training, act, fused):
    """dropout(act(h)) by the Function `fused` when it trains with gradients, else by torch."""
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if not training or p == 0.0 or not (torch.is_grad_enabled() and h.requires_grad):
        out = act(h)
        return F.dropout(out, p, training) if training and p > 0 else out
    return fused.apply(h, p)


class _EluDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, p):
        out, keep = torch.ops.aten.native_dropout(F.elu(h), p, True)  # F.dropout's own kernel and draws
        ctx.save_for_backward(out, _pack_mask(keep))
        ctx.scale, ctx.p = 1.0 / (1.0 - p), p
        return out

    @staticmethod
    def backward(ctx, g):
        out, bits = ctx.saved_tensors
        # elu's derivative from its output y = out / scale (1 where y > 0, else y + 1); where dropout
        # dropped an element, the masked gradient is 0 already
        b = None if torch.is_grad_enabled() else _act_backend(g)
        if b is not None and out.is_contiguous():  # one kernel
            g = g.contiguous()
            return b.act_dropout_backward("elu", g, out, bits, ctx.p, torch.empty_like(g)), None
        if torch.is_grad_enabled():  # create_graph: differentiable ops on the whole tensor (elu'' kept)
            keep = _unpack_mask(bits, 0, out.numel()).reshape(out.shape)
            return torch.ops.aten.elu_backward(_masked_scale(g, keep, ctx.scale), 1.0, 1.0, 1.0, True,
                                               out / ctx.scale), None
        g = g.contiguous()
        dh = torch.empty_like(g)
        flat = [t.reshape(-1) for t in (g, out, dh)]  # blocks of elements: any shape, 0-d too
        n, step = g.numel(), _chunk()
        for k0 in range(0, n, step):
            gc, oc, dc = (t[k0:k0 + step] for t in flat)
            kc = _unpack_mask(bits, k0, min(n, k0 + step))
            torch.ops.aten.elu_backward.grad_input(_masked_scale(gc, kc, ctx.scale), 1.0, 1.0, 1.0, True,
                                                   oc.div(ctx.scale), grad_input=dc)
        return dh, None


def _elu_drop_(h, p):
    """h <- dropout(elu(h)) in place (scale * elu(h), times a mask drawn by bernoulli); returns the
    mask (booleans)."""
    keep = torch.empty(h.shape, dtype=torch.bool, device=h.device).bernoulli_(1.0 - p)
    torch.ops.aten.elu_(h, 1.0, 1.0 / (1.0 - p), 1.0).mul_(keep)
    return keep


def _elu_drop_bits_(h, p):
    """h <- dropout(elu(h)) in place; returns the mask as bits: on CUDA one act_dropout kernel (the
    mask from the seeded generator), elsewhere _elu_drop_ and _pack_mask."""
    b = _act_backend(h)
    if b is not None:
        return b.act_dropout("elu", h, h, p, next_seed())
    return _pack_mask(_elu_drop_(h, p))


class _EluDropoutInplace(_EluDropout):
    @staticmethod
    def forward(ctx, h, p):
        bits = _elu_drop_bits_(h, p)
        ctx.mark_dirty(h)
        ctx.save_for_backward(h, bits)
        ctx.scale, ctx.p = 1.0 / (1.0 - p), p
        return h


def elu_dropout_(h: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """elu_dropout in place: h becomes dropout(elu(h)) and is returned (torch's trailing-underscore
    convention: the caller gives h up; anything else holding h sees the new values, and a backward
    that saved h raises). Saves h and the mask as bits, as elu_dropout; at the forward it holds h
    and a boolean mask instead of h, elu(h), the output and the mask (products-sized GAT: 2.4 GB
    less at that point). The mask is drawn as relu_dropout's (on CUDA one act_dropout kernel each
    way), not F.dropout's draws; the backward is elu_dropout's. Outside training (or p = 0): elu in place.
    h must not be a leaf that requires grad, nor a view (autograd's rules for in-place ops); such
    an h, or one under torch.compile, goes through elu_dropout (out of place)."""
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    if (h._base is not None or (h.is_leaf and h.requires_grad) or not h.is_contiguous()
            or torch.compiler.is_compiling()):
        return elu_dropout(h, p, training)
    if not training or p == 0.0:
        return F.elu(h, inplace=True)
    if not (torch.is_grad_enabled() and h.requires_grad):
        _elu_drop_bits_(h, p)
        torch.autograd.graph.increment_version(h)  # the kernel writes h behind autograd's back
        return h
    return _EluDropoutInplace.apply(h, p)


def elu_dropout(h: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """F.dropout(F.elu(h), p, training) saving only its output (which the next layer keeps anyway)
    and dropout's mask (packed: 1 bit per element) for the backward, instead of elu's float32
    output besides them: one (N, C) float32 tensor less through the backward of the layers beneath. Forward: F.elu then
    dropout's own kernel (torch.ops.aten.native_dropout, the draws of F.dropout: the same bits);
    backward: elu's derivative recovered from the output (out / scale, within one rounding of
    elu's output), in blocks of elements; twice differentiable (create_graph: the whole tensor at
    once). The output must not be changed in place before the backward (autograd raises). Outside
    training (or p = 0) it is F.elu."""
    return _act_dropout(h, p, training, F.elu, _EluDropout)
