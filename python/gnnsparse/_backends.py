"""The backend protocol and the one registry that says which backend runs an op.

A backend runs ops on the arrays of one or more array kinds (gnnsparse._arrays.kind): the SYCL
backend takes NumPy / torch CPU arrays (on its default device) and USM arrays (dpnp, on their own
queue); the CUDA backend takes torch and CuPy CUDA arrays. The frontend (gnnsparse._ops) validates
every argument once, then talks to the backend only through `Backend` below. Backends are imported
lazily, so the CUDA path never loads dpctl and the SYCL path never loads torch.

Adding a backend: write a module with a `backend` object that satisfies `Backend` (and a compiled
module whose op functions have the shape of python/bindings/bind_ops.hpp), then add it to
`_MODULES` and its array kinds to `_KINDS` below.
"""
from __future__ import annotations

import importlib
from typing import Any, Hashable, Protocol

from . import _arrays


class BackendUnavailable(RuntimeError):
    """The backend that owns the inputs' device is not built or has no device here; `backend`
    names it ("sycl", "cuda")."""

    def __init__(self, message: str, backend: str = ""):
        super().__init__(message)
        self.backend = backend


class Backend(Protocol):
    """What the frontend needs from a backend. Arrays are the caller's (NumPy, torch, CuPy, dpnp).

    Op methods take a CsrView (gnnsparse._core) built by `view` for the place of the dense inputs,
    inputs already made contiguous by `prepare`, and the codes of include/gnnsparse/ops.hpp. They
    allocate outputs in the framework and on the device of X (the first dense input), launch on
    the caller's stream / queue, and return outputs in that framework.
    """

    name: str
    dtypes: frozenset  # feature dtype names this backend runs ("float32", ...)

    def available(self) -> bool: ...

    def unavailable_reason(self) -> str: ...

    def place(self, x) -> Hashable:
        """Where x lives: equal places can be used together in one call. Printable."""

    def prepare(self, x) -> Any:
        """x as a C-contiguous array this backend can address (a copy only when needed)."""

    def upload(self, a, place, like) -> Any:
        """A host NumPy array copied to `place` (next to `like`), for the CSR caches."""

    def view(self, rowptr, col, val, M: int, K: int, nnz: int, max_degree: int) -> Any:
        """The _core.CsrView of three arrays already at one place."""

    def max_degree(self, rowptr) -> int:
        """The longest row of a CSR whose rowptr lives at this backend's place (one reduction)."""

    def spmm(self, A, X, M: int, C: int, dtype: int, reduce: int, want_arg: bool, precision: int): ...

    def spmm_heads(self, A, W, Z, M: int, H: int, D: int, dtype: int):
        """Out (M, H, D): W (nnz, H) in the edge-value dtype, Z (K, H, D); A's values unused."""

    def gatv2_scores(self, A, X, Y, att, nnz: int, H: int, C: int, dtype: int, slope: float):
        """S (nnz, H) in the edge-value dtype: X (M, H, C) by row, Y (K, H, C) by column, att (H, C)."""

    def gatv2_grad(self, A, X, Y, att, dS, M: int, H: int, C: int, dtype: int, slope: float, want_att: bool):
        """(dX (M, H, C), dAtt's per-row partials (M, H, C) in the edge-value dtype, or None)."""

    def sddmm(self, A, X, Y, nnz: int, H: int, F: int, dtype: int, op: int, precision: int): ...

    def fusedmm(self, A, X, Y, Z, M: int, H: int, F: int, D: int, dtype: int, op: int, edge: int,
                slope: float, want_edges: bool, precision: int): ...

    # Quantized ops (gnnsparse.quant; contract: include/gnnsparse/quant.hpp). A quantized operand
    # arrives as (data, scale, bits): data rows x row_bytes (int8, or uint8 packed int4), scale a
    # 2-element float32 array on the same device. Outputs are float32.
    def quantize(self, X, rows: int, C: int, bits: int, rounding: int, seed: int):
        """(data, scale) of X (rows x C float32, prepared)."""

    def dequantize(self, Q, scale, bits: int, rows: int, C: int): ...

    def qspmm(self, A, X, xs, bits: int, C: int, M: int, reduce: int, W, H: int, identity_col: bool,
              want_arg: bool, out=None):
        """(Y, arg); with `out` (bits, rounding, seed, scale_in, stats: a delayed-scale quantized
        output, gnnsparse/quant.hpp) (Q, scale[4]) instead."""

    def requantize(self, acc, rows: int, C: int, ld: int, sa, sb, out):
        """(Q, scale[4]): the int8 GEMM's int32 output acc (rows x ld) times sa[0] sb[0], quantized
        with a delayed scale (out as for qspmm)."""

    def qsddmm(self, A, X, xs, xbits: int, Y, ys, ybits: int, nnz: int, H: int, F: int, op: int): ...

    def qfusedmm(self, A, X, xs, xbits: int, Y, ys, ybits: int, Z, zs, zbits: int, M: int, H: int, F: int,
                 D: int, op: int, edge: int, slope: float, want_edges: bool): ...


# backend name -> module holding `backend`; array kind -> backend name
_MODULES = {"sycl": "gnnsparse._sycl_backend", "cuda": "gnnsparse._cuda_backend"}
_KINDS = {"numpy": "sycl", "usm": "sycl", "cuda": "cuda"}
_READY: dict = {}  # kind -> backend that loaded and reported itself available


def backend_for_kind(k: str) -> Backend:
    b = _READY.get(k)
    if b is not None:
        return b
    name = _KINDS.get(k)
    if name is None:
        raise TypeError(f"gnnsparse has no backend for arrays on {k!r}; it takes NumPy arrays, torch CPU/CUDA "
                        "tensors, CuPy arrays and dpnp (SYCL USM) arrays")
    try:
        b = importlib.import_module(_MODULES[name]).backend
    except ImportError as e:  # pragma: no cover - depends on the build
        raise BackendUnavailable(f"the {name} backend (for {k} arrays) is not available in this build: {e}",
                                 name) from e
    if not b.available():
        raise BackendUnavailable(f"the {b.name} backend is not available here: {b.unavailable_reason()}", b.name)
    _READY[k] = b
    return b


def backend_for(x) -> Backend:
    return backend_for_kind(_arrays.kind(x))


def available_backends() -> dict:
    """{'sycl': bool, 'cuda': bool}: which backends this build and machine can run."""
    out = {}
    for name, modname in _MODULES.items():
        try:
            out[name] = bool(importlib.import_module(modname).backend.available())
        except Exception:
            out[name] = False
    return out
