"""CUDA backend: torch CUDA tensors and CuPy (``__cuda_array_interface__``) arrays.

Outputs are allocated in the caller's framework on the inputs' device, and kernels are launched on
the caller's *current* stream of that device, zero copy. torch and CuPy are imported lazily, only
when an array is one of theirs, so this module imports cleanly without torch, CuPy, a GPU, or the
compiled extension gnnsparse._cuda.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from . import _arrays, _core

_ext = None
_ext_error = None
_POISON = os.environ.get("GNNSPARSE_POISON", "") not in ("", "0")  # tests: outputs start as NaN / huge


def _load():
    global _ext, _ext_error
    if _ext is None and _ext_error is None:
        try:
            from . import _cuda as ext  # the compiled module
            _ext = ext
        except ImportError as e:  # no CUDA build in this install
            _ext_error = e
    return _ext


def _is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _cupy():
    import cupy
    return cupy


class _Place(tuple):
    """("cuda", device index)."""

    __slots__ = ()

    def __repr__(self):
        return f"cuda:{self[1]}"


class _TorchRun:
    """Allocation, addresses and the current stream for torch tensors on one device."""

    def __init__(self, like):
        import torch

        self.torch = torch
        self.device = like.device
        idx = self.device.index
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self.stream = raw(idx) if raw is not None else torch.cuda.current_stream(self.device).cuda_stream
        self.guard = torch.cuda.device(idx) if idx != torch.cuda.current_device() else None

    def empty(self, shape, like, int64=False):
        out = self.torch.empty(shape, dtype=self.torch.int64 if int64 else like.dtype, device=self.device)
        if _POISON:
            out.fill_(2**62 if int64 else float("nan"))
        return out

    @staticmethod
    def addr(x) -> int:
        return 0 if x is None else x.data_ptr()


class _CupyRun:
    def __init__(self, like):
        cp = _cupy()
        self.cp = cp
        self.guard = like.device
        with self.guard:
            self.stream = cp.cuda.get_current_stream().ptr

    def empty(self, shape, like, int64=False):
        with self.guard:
            out = self.cp.empty(shape, dtype=np.int64 if int64 else like.dtype)
            if _POISON:
                out.fill(2**62 if int64 else float("nan"))
            return out

    @staticmethod
    def addr(x) -> int:
        return 0 if x is None else x.data.ptr


def _run(like):
    return _TorchRun(like) if _is_torch(like) else _CupyRun(like)


def _launch(run, fn, *args):
    if run.guard is None:
        return fn(run.stream, *args)
    with run.guard:
        return fn(run.stream, *args)


class CudaBackend:
    name = "cuda"
    dtypes = frozenset({"float32", "float64", "float16", "bfloat16"})

    def available(self) -> bool:
        ext = _load()
        if ext is None:
            return False
        try:
            return ext.device_count() > 0
        except Exception:
            return False

    def unavailable_reason(self) -> str:
        ext = _load()
        if ext is None:
            return f"the compiled module gnnsparse._cuda is missing ({_ext_error})"
        return "no CUDA device (device_count() == 0)"

    def device_count(self) -> int:
        ext = _load()
        return 0 if ext is None else int(ext.device_count())

    # ------------------------------------------------------------ places and arrays
    def place(self, x):
        if _is_torch(x):
            idx = x.device.index
            return _Place(("cuda", idx if idx is not None else 0))
        if not hasattr(x, "device"):
            x = _cupy().asarray(x)
        return _Place(("cuda", x.device.id))

    def prepare(self, x):
        if _is_torch(x):
            return x if x.is_contiguous() else x.contiguous()
        cp = _cupy()
        x = x if isinstance(x, cp.ndarray) else cp.asarray(x)  # zero copy for __cuda_array_interface__
        if x.flags.c_contiguous:
            return x
        with x.device:
            return cp.ascontiguousarray(x)

    @staticmethod
    def pad_last(x, width):
        """x with its last axis zero-padded to `width` (a new contiguous array in x's framework)."""
        extra = width - x.shape[-1]
        if _is_torch(x):
            import torch.nn.functional as F

            return F.pad(x, (0, extra))
        cp = _cupy()
        with x.device:
            return cp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, extra)])

    @staticmethod
    def narrow_last(x, width):
        """The first `width` entries of x's last axis, contiguous."""
        if _is_torch(x):
            return x[..., :width].contiguous()
        cp = _cupy()
        with x.device:
            return cp.ascontiguousarray(x[..., :width])

    def upload(self, a, place, like):
        a = np.ascontiguousarray(a)
        if _is_torch(like):
            import torch

            # torch.tensor copies straight from the (read-only) host array to the device: one copy,
            # and no "not writable" warning (torch.from_numpy would warn on a CSR's read-only arrays)
            return torch.tensor(a, device=like.device)
        cp = _cupy()
        with cp.cuda.Device(place[1]):
            return cp.asarray(a)

    def view(self, rowptr, col, val, M, K, nnz, max_degree):
        addr = _TorchRun.addr if _is_torch(rowptr) else _CupyRun.addr
        return _core.CsrView(_core.ITYPE[_arrays.dtype_name(rowptr)][0], addr(rowptr), addr(col), addr(val),
                             M, K, nnz, max_degree)

    # ------------------------------------------------------------ ops
    def spmm(self, A, X, M, C, dtype, reduce, want_arg, precision, out=None, skip=None):
        """out: Y's storage (M x C, X's dtype, contiguous) instead of a new array; skip: a device
        flag (a 0-d bool array on X's device) that, holding True, makes the call write nothing
        (SpmmArgs::skip: stream-ordered, no read-back)."""
        run = _run(X)
        Y = run.empty((M, C), X) if out is None else out
        arg = run.empty((M, C), X, int64=True) if want_arg else None
        _launch(run, _ext.spmm, A, dtype, reduce, run.addr(X), run.addr(Y), run.addr(arg), C, precision,
                run.addr(skip))
        return Y, arg

    def spmm_heads(self, A, W, Z, M, H, D, dtype):
        run = _run(Z)
        out = run.empty((M, H, D), Z)
        _launch(run, _ext.spmm_heads, A, dtype, run.addr(W), run.addr(Z), run.addr(out), H, D, 0)
        return out

    def gatv2_scores(self, A, X, Y, att, nnz, H, C, dtype, slope):
        run = _run(X)
        S = _empty_as(run, (nnz, H), _edge_dtype(X))
        _launch(run, _ext.gatv2_scores, A, dtype, run.addr(X), run.addr(Y), run.addr(att), run.addr(S), H, C, slope)
        return S

    def gatv2_grad(self, A, X, Y, att, dS, M, H, C, dtype, slope, want_att):
        run = _run(X)
        dX = run.empty((M, H, C), X)
        dAtt = _empty_as(run, (M, H, C), _edge_dtype(X)) if want_att else None
        _launch(run, _ext.gatv2_grad, A, dtype, run.addr(X), run.addr(Y), run.addr(att), run.addr(dS), run.addr(dX),
                run.addr(dAtt), H, C, slope)
        return dX, dAtt

    def sddmm(self, A, X, Y, nnz, H, F, dtype, op, precision):
        run = _run(X)
        E = run.empty((nnz, H), X)
        _launch(run, _ext.sddmm, A, dtype, op, run.addr(X), run.addr(Y), run.addr(E), H, F, precision)
        return E

    def fusedmm(self, A, X, Y, Z, M, H, F, D, dtype, op, edge, slope, want_edges, precision):
        run = _run(X)
        out = run.empty((M, H, D), X)
        E = run.empty((A.nnz, H), X) if want_edges else None
        _launch(run, _ext.fusedmm, A, dtype, op, edge, slope, run.addr(X), run.addr(Y), run.addr(Z),
                run.addr(out), run.addr(E), H, F, D, precision)
        return out, E

    # ------------------------------------------------------------ quantized ops (gnnsparse.quant)
    def quantize(self, X, rows, C, bits, rounding, seed):
        run = _run(X)
        rb = C if bits == 8 else (C + 1) // 2
        Q = _empty_as(run, (rows, rb), "int8" if bits == 8 else "uint8")
        scale = _empty_as(run, (2,), "float32")
        work = _empty_as(run, (_ext.QUANTIZE_WORK,), "float32")
        _launch(run, _ext.quantize, run.addr(X), rows, C, bits, rounding, seed, run.addr(Q), run.addr(scale),
                run.addr(work))
        return Q, scale

    def dequantize(self, Q, scale, bits, rows, C):
        run = _run(Q)
        Y = _empty_as(run, (rows, C), "float32")
        _launch(run, _ext.dequantize, run.addr(Q), run.addr(scale), bits, rows, C, run.addr(Y))
        return Y

    def qspmm(self, A, X, xs, bits, C, M, reduce, W, H, identity_col, want_arg, out=None):
        run = _run(X)
        if out is not None:  # quantized output, delayed scale: (Q, scale[4])
            Q = _empty_as(run, (M, C if out.bits == 8 else (C + 1) // 2), "int8" if out.bits == 8 else "uint8")
            scale = _empty_as(run, (4,), "float32")
            n = _launch(run, _ext.qspmm_out_work, A, run.addr(X), run.addr(xs), bits, C, reduce, run.addr(W), H,
                        identity_col, out.bits)
            work = _empty_as(run, (max(n, 1),), "float32")
            _launch(run, _ext.qspmm, A, run.addr(X), run.addr(xs), bits, C, reduce, run.addr(W), H, identity_col, 0, 0,
                    run.addr(Q), out.bits, out.rounding, out.seed, run.addr(out.scale_in), run.addr(scale),
                    run.addr(out.stats), out.decay, run.addr(work), n)
            return Q, scale
        Y = _empty_as(run, (M, C), "float32")
        arg = _empty_as(run, (M, C), "int64") if want_arg else None
        _launch(run, _ext.qspmm, A, run.addr(X), run.addr(xs), bits, C, reduce, run.addr(W), H, identity_col,
                run.addr(Y), run.addr(arg))
        return Y, arg

    def requantize(self, acc, rows, C, ld, sa, sb, out):
        run = _run(acc)
        Q = _empty_as(run, (rows, C if out.bits == 8 else (C + 1) // 2), "int8" if out.bits == 8 else "uint8")
        scale = _empty_as(run, (4,), "float32")
        work = _empty_as(run, (_ext.QUANTIZE_WORK,), "float32")
        _launch(run, _ext.requantize, run.addr(acc), rows, C, ld, run.addr(sa), run.addr(sb), run.addr(Q), out.bits,
                out.rounding, out.seed, run.addr(out.scale_in), run.addr(scale), run.addr(out.stats), out.decay,
                run.addr(work))
        return Q, scale

    def qsddmm(self, A, X, xs, xbits, Y, ys, ybits, nnz, H, F, op):
        run = _run(X)
        E = _empty_as(run, (nnz, H), "float32")
        _launch(run, _ext.qsddmm, A, op, run.addr(X), run.addr(xs), xbits, run.addr(Y), run.addr(ys), ybits, H, F,
                run.addr(E))
        return E

    def qfusedmm(self, A, X, xs, xbits, Y, ys, ybits, Z, zs, zbits, M, H, F, D, op, edge, slope, want_edges):
        run = _run(X)
        out = _empty_as(run, (M, H, D), "float32")
        E = _empty_as(run, (A.nnz, H), "float32") if want_edges else None
        _launch(run, _ext.qfusedmm, A, op, edge, slope, run.addr(X), run.addr(xs), xbits, run.addr(Y), run.addr(ys),
                ybits, run.addr(Z), run.addr(zs), zbits, H, F, D, run.addr(out), run.addr(E))
        return out, E

    def qgemm_tn(self, A, B, K, M, N, scale):
        """C = scale * A^T B, float32 (M, N), for row-major int8 A (K x M), B (K x N) and a float32
        scale on the device (cuda/qgemm.cu; int32 scratch allocated here)."""
        run = _run(A)
        C = _empty_as(run, (M, N), "float32")
        n = _launch(run, _ext.qgemm_tn_work, K, M, N)
        work = _empty_as(run, (max(n, 1),), "int32")
        _launch(run, _ext.qgemm_tn, run.addr(A), M, run.addr(B), N, K, M, N, run.addr(scale), run.addr(C),
                run.addr(work), n)
        return C

    # ------------------------------------------------------------ GAT's edge softmax in pieces
    # (gnnsparse._gat_softmax, contract include/gnnsparse/gat_softmax.hpp): torch tensors, checked
    # there; A / AT are CsrViews of A and of its transpose; long_rows: A's rows of at least
    # GAT_LONG_ROW entries in A's index dtype (None: none); m and inv may be row-strided.
    @staticmethod
    def gat_long_row() -> int:
        return int(_ext.GAT_LONG_ROW)

    def gat_softmax_stats(self, A, long_rows, fd, fs, H, slope):
        """(m, inv), each (A.M, H) float32: the two halves of one (A.M, 2, H) buffer (row stride 2H),
        so that a row's m and inv are one gathered segment for gat_softmax_weights_t."""
        run = _run(fd)
        buf = _empty_as(run, (A.M, 2, H), "float32")
        m, inv = buf[:, 0], buf[:, 1]
        n_long = 0 if long_rows is None else int(long_rows.shape[0])
        _launch(run, _ext.gat_softmax_stats, A, run.addr(long_rows), n_long, run.addr(fd), run.addr(fs), H, slope,
                run.addr(m), run.addr(inv), 2 * H, 2 * H)
        return m, inv

    def gat_softmax_weights_t(self, AT, fd, fs, m, inv, H, slope):
        """aT (AT.nnz, H) float32: alpha in transpose order, by the kernel's LSE form: each row's fd
        and log-sum-exp (m - log inv) packed side by side, (M, 2, H), so that an entry gathers one
        segment of its row instead of two (fd; m and inv)."""
        import torch

        run = _run(fd)
        rec = _empty_as(run, (fd.shape[0], 2, H), "float32")
        rec[:, 0].copy_(fd)
        torch.sub(m, torch.log(inv), out=rec[:, 1])  # empty rows: +inf, never gathered (no entries)
        aT = _empty_as(run, (AT.nnz, H), "float32")
        _launch(run, _ext.gat_softmax_weights_t, AT, run.addr(rec[:, 0]), run.addr(fs), run.addr(rec[:, 1]), 0,
                2 * H, 2 * H, H, slope, run.addr(aT), 2 * H)
        return aT

    def gat_softmax_grad_(self, A, long_rows, fd, fs, m, inv, t, H, slope):
        """t (A.nnz, H) float32, overwritten in place with dS; returns t."""
        run = _run(fd)
        n_long = 0 if long_rows is None else int(long_rows.shape[0])
        _launch(run, _ext.gat_softmax_grad, A, run.addr(long_rows), n_long, run.addr(fd), run.addr(fs), run.addr(m),
                run.addr(inv), _row_stride(m, H), _row_stride(inv, H), H, slope, run.addr(t))
        return t

    # ------------------------------------------------------------ ReLU / ELU + dropout, mask as bits
    # (contract include/gnnsparse/act_dropout.hpp; caller gnnsparse.quant.autograd): contiguous
    # float32 torch tensors, checked there; bits: uint8, ceil(n / 32) * 4 bytes (whole 32-bit words).
    ACTS = {"relu": 0, "elu": 1}

    def _act(self, act) -> int:
        if act not in self.ACTS:
            raise ValueError(f"act_dropout: act must be relu or elu, got {act!r}")
        return self.ACTS[act]

    def act_dropout(self, act, h, out, p, seed):
        """out <- act + dropout of h (out may be h); returns the mask's bits (uint8, whole words)."""
        run = _run(h)
        n = h.numel()
        bits = _empty_as(run, (((n + 31) // 32) * 4,), "uint8")
        _launch(run, _ext.act_dropout, self._act(act), n, run.addr(h), run.addr(out), run.addr(bits), p, seed)
        return bits

    def act_dropout_backward(self, act, g, y, bits, p, dh):
        """dh <- the gradient through act + dropout (y: the forward's output, for elu); returns dh."""
        run = _run(g)
        _launch(run, _ext.act_dropout_backward, self._act(act), g.numel(), run.addr(g), run.addr(y), run.addr(bits), p,
                run.addr(dh))
        return dh


def _row_stride(x, H) -> int:
    """The row stride of an (rows, H) torch view (H for a single row, whose stride torch may set to anything)."""
    return x.stride(0) if x.shape[0] > 1 else H


def _edge_dtype(X) -> str:
    """The edge-value dtype for features X: theirs, float32 for 16-bit ones (ops.hpp)."""
    name = str(X.dtype).replace("torch.", "")
    return "float32" if name in ("float16", "bfloat16") else name


def _empty_as(run, shape, dtype: str):
    """An output of `dtype` on the run's device (poisoned under GNNSPARSE_POISON: NaN, or 0x55 bytes)."""
    if isinstance(run, _TorchRun):
        torch = run.torch
        out = torch.empty(shape, dtype=getattr(torch, dtype), device=run.device)
        if _POISON:
            out.fill_(float("nan") if out.is_floating_point() else (2**62 if dtype == "int64" else 0x55))
        return out
    with run.guard:
        out = run.cp.empty(shape, dtype=dtype)
        if _POISON:
            out.fill(np.nan if out.dtype.kind == "f" else (2**62 if dtype == "int64" else 0x55))
        return out


backend = CudaBackend()


def available() -> bool:
    return backend.available()


def device_count() -> int:
    return backend.device_count()
