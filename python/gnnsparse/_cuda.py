"""CUDA backend of the gnnsparse frontend.

Thin array layer over the pointer-based extension ``gnnsparse._native._cuda``: it recognizes
torch CUDA tensors and ``__cuda_array_interface__`` objects (CuPy), allocates outputs in the
caller's framework on the caller's device, and launches on the caller's *current* stream, zero
copy. torch and cupy are imported lazily, only when the array is one of theirs, so this module
imports cleanly on machines without torch, CuPy, a GPU, or the compiled extension.
"""
from __future__ import annotations

import sys

name = "cuda"

_DTYPES = {"float32": 0, "float64": 1, "float16": 2, "bfloat16": 3}
_ITYPES = {"int32": 0, "int64": 1}
_REDUCES = {"sum": 0, "mean": 1, "max": 2, "min": 3}
_OPS = {"dot": 0, "add": 1}
_EDGES = {"none": 0, "leaky_relu": 1, "exp": 2, "softmax": 3}

_ext = None
_ext_error = None


def _load():
    global _ext, _ext_error
    if _ext is None and _ext_error is None:
        try:
            from gnnsparse._native import _cuda as ext  # compiled module, named _cuda
            _ext = ext
        except ImportError as e:  # no CUDA build in this install
            _ext_error = e
    return _ext


def extension():
    """The compiled module; raises ImportError when the CUDA backend was not built."""
    ext = _load()
    if ext is None:
        raise ImportError(f"gnnsparse CUDA extension not available: {_ext_error}")
    return ext


def available() -> bool:
    ext = _load()
    if ext is None:
        return False
    try:
        return ext.device_count() > 0
    except Exception:
        return False


def device_count() -> int:
    ext = _load()
    return 0 if ext is None else int(ext.device_count())


# ---- framework detection -------------------------------------------------------------------

def _is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _is_cupy(x) -> bool:
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(x, cupy.ndarray)


def owns(x) -> bool:
    if _is_torch(x):
        return x.is_cuda
    return hasattr(x, "__cuda_array_interface__")


def device_key(x) -> tuple:
    if _is_torch(x):
        return ("cuda", x.device.index if x.device.index is not None else 0)
    if _is_cupy(x):
        return ("cuda", x.device.id)
    return ("cuda", _cupy().asarray(x).device.id)


def dtype_name(x) -> str:
    if _is_torch(x):
        return str(x.dtype).replace("torch.", "")
    return str(getattr(x.dtype, "name", x.dtype))


def _cupy():
    import cupy
    return cupy


def _as_cupy(x):
    """A CuPy view of a foreign __cuda_array_interface__ object (zero copy)."""
    return x if _is_cupy(x) else _cupy().asarray(x)


def contiguous(x):
    if _is_torch(x):
        return x.contiguous()
    cp = _cupy()
    x = _as_cupy(x)
    with x.device:
        return cp.ascontiguousarray(x)


def from_host(np_array, like):
    import numpy as np
    a = np.ascontiguousarray(np_array)
    if _is_torch(like):
        import torch
        return torch.from_numpy(a).to(like.device)
    cp = _cupy()
    like = _as_cupy(like)
    with like.device:
        return cp.asarray(a)


def to_host(x):
    if _is_torch(x):
        import torch
        t = x.detach()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.cpu().numpy()
    return _cupy().asnumpy(_as_cupy(x))


# ---- allocation, pointers, streams ---------------------------------------------------------

class _Ctx:
    """Device guard, allocator, pointer and current-stream access for one framework."""

    def __init__(self, like):
        self.torch = _is_torch(like)
        if self.torch:
            import torch
            self.mod = torch
            self.device = like.device
        else:
            self.mod = _cupy()
            self.like = _as_cupy(like)
            self.device = self.like.device

    def __enter__(self):
        if self.torch:
            self.guard = self.mod.cuda.device(self.device)
        else:
            self.guard = self.device
        self.guard.__enter__()
        return self

    def __exit__(self, *exc):
        return self.guard.__exit__(*exc)

    def stream(self) -> int:
        if self.torch:
            return int(self.mod.cuda.current_stream(self.device).cuda_stream)
        return int(self.mod.cuda.get_current_stream().ptr)

    def empty(self, shape, dtype_like=None, int64=False):
        if self.torch:
            dt = self.mod.int64 if int64 else dtype_like.dtype
            return self.mod.empty(shape, dtype=dt, device=self.device)
        dt = "int64" if int64 else dtype_like.dtype
        return self.mod.empty(shape, dtype=dt)

    def ptr(self, x) -> int:
        if x is None:
            return 0
        if self.torch:
            return int(x.data_ptr())
        return int(x.__cuda_array_interface__["data"][0])


def _codes(rowptr, X):
    dt = dtype_name(X)
    it = dtype_name(rowptr)
    if dt not in _DTYPES:
        raise TypeError(f"gnnsparse cuda: unsupported feature dtype {dt}")
    if it not in _ITYPES:
        raise TypeError(f"gnnsparse cuda: unsupported index dtype {it}")
    return _DTYPES[dt], _ITYPES[it]


def _nnz(col) -> int:
    return int(col.shape[0])


# ---- ops -----------------------------------------------------------------------------------

def spmm(rowptr, col, val, X, M, K, reduce, want_arg):
    """Y (M, C) in X's dtype, and arg (M, C) int64 for max/min when want_arg (else None)."""
    ext = extension()
    dt, it = _codes(rowptr, X)
    if reduce not in _REDUCES:
        raise ValueError(f"gnnsparse cuda: unknown reduce {reduce!r}")
    M, K, C, nnz = int(M), int(K), int(X.shape[1]), _nnz(col)
    with _Ctx(X) as ctx:
        Y = ctx.empty((M, C), X)
        arg = ctx.empty((M, C), int64=True) if want_arg and reduce in ("max", "min") else None
        ext.spmm(dt, it, _REDUCES[reduce], ctx.ptr(rowptr), ctx.ptr(col), ctx.ptr(val),
                 ctx.ptr(X), ctx.ptr(Y), ctx.ptr(arg), M, K, C, nnz, ctx.stream(), -1)
    return Y, arg


def sddmm(rowptr, col, X, Y, M, K, op):
    """dot: X (M, H, F), Y (K, H, F) -> E (nnz, H); add: X (M, H), Y (K, H) -> E (nnz, H).
    A 2-D X for dot is read as H = 1 and gives E of shape (nnz,)."""
    ext = extension()
    dt, it = _codes(rowptr, X)
    if op not in _OPS:
        raise ValueError(f"gnnsparse cuda: unknown sddmm op {op!r}")
    nnz = _nnz(col)
    if op == "dot":
        if X.ndim == 2:
            H, F, shape = 1, int(X.shape[1]), (nnz,)
        else:
            H, F = int(X.shape[1]), int(X.shape[2])
            shape = (nnz, H)
    else:
        H = 1 if X.ndim == 1 else int(X.shape[1])
        F = 1
        shape = (nnz,) if X.ndim == 1 else (nnz, H)
    with _Ctx(X) as ctx:
        E = ctx.empty(shape, X)
        ext.sddmm(dt, it, _OPS[op], ctx.ptr(rowptr), ctx.ptr(col), ctx.ptr(X), ctx.ptr(Y),
                  ctx.ptr(E), int(M), int(K), nnz, H, F, ctx.stream())
    return E


def fusedmm(rowptr, col, val, X, Y, Z, M, K, op, edge, slope, want_edges):
    """Out (M, H, D) in X's dtype, and E (nnz, H) when want_edges (else None)."""
    ext = extension()
    dt, it = _codes(rowptr, X)
    if op not in _OPS:
        raise ValueError(f"gnnsparse cuda: unknown fusedmm op {op!r}")
    if edge not in _EDGES:
        raise ValueError(f"gnnsparse cuda: unknown edge function {edge!r}")
    nnz = _nnz(col)
    H = int(Z.shape[1])
    D = int(Z.shape[2])
    F = int(X.shape[2]) if op == "dot" else 1
    with _Ctx(X) as ctx:
        Out = ctx.empty((int(M), H, D), X)
        E = ctx.empty((nnz, H), X) if want_edges else None
        ext.fusedmm(dt, it, _OPS[op], _EDGES[edge], float(slope), ctx.ptr(rowptr), ctx.ptr(col),
                    ctx.ptr(val), ctx.ptr(X), ctx.ptr(Y), ctx.ptr(Z), ctx.ptr(Out), ctx.ptr(E),
                    int(M), int(K), nnz, H, F, D, ctx.stream(), -1)
    return Out, E


def unavailable_reason() -> str:
    ext = _load()
    if ext is None:
        return f"the compiled module gnnsparse._native._cuda is missing ({_ext_error})"
    return "no CUDA device (device_count() == 0)"
