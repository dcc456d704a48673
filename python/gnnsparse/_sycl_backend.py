"""SYCL backend: NumPy arrays on the default SYCL device (the OpenCL CPU device unless
GNNSPARSE_SYCL_DEVICE names another dpctl filter string), and USM arrays on their own queue.

NumPy inputs are used in place when the device can read system memory (the CPU device can);
otherwise they are copied into shared USM. Results for NumPy inputs are NumPy arrays. USM inputs
produce dpnp arrays when the input is a dpnp array, else gnnsparse.USMArray on the same queue.
Submissions on USM data are ordered through dpctl's SequentialOrderManager (events, no waits).
"""
from __future__ import annotations

import functools
import os

import numpy as np

from . import _arrays, _core
from ._usm import USMArray, usm_is_contiguous, usm_pointer, usm_queue

name = "sycl"
dtypes = ("float32", "float64")
_reason = None
_POISON = os.environ.get("GNNSPARSE_POISON", "") not in ("", "0")


def _ext():
    from . import _sycl  # noqa: F401  (loads libsycl; dpctl must be imported first for its C-API)

    return _sycl


@functools.lru_cache(maxsize=None)
def available() -> bool:
    global _reason
    try:
        import dpctl  # noqa: F401

        _ext()
        default_queue()
        return True
    except Exception as e:  # no dpctl, no _sycl module, no device
        _reason = f"{type(e).__name__}: {e}"
        return False


def unavailable_reason() -> str:
    return _reason or "unknown"


@functools.lru_cache(maxsize=None)
def default_queue():
    """The queue NumPy inputs run on: GNNSPARSE_SYCL_DEVICE (a dpctl filter string) or the CPU device."""
    import dpctl

    return dpctl.SyclQueue(os.environ.get("GNNSPARSE_SYCL_DEVICE", "opencl:cpu"), property="in_order")


@functools.lru_cache(maxsize=None)
def device_caps(queue=None) -> dict:
    return _ext().device_caps(queue or default_queue())


def _host_direct() -> bool:
    return bool(device_caps()["usm_system_allocations"])


# ---------------------------------------------------------------- protocol used by the frontend
def owns(x) -> bool:
    return _arrays.kind(x) in ("numpy", "usm")


def device_key(x):
    if _arrays.kind(x) == "usm":
        q = usm_queue(x)
        return ("sycl", q.sycl_context.addressof_ref(), q.sycl_device.filter_string)
    return ("sycl", "host")


def dtype_name(x) -> str:
    return _arrays.dtype_name(x)


def contiguous(x):
    if _arrays.kind(x) == "usm":
        if not usm_is_contiguous(x):
            raise ValueError("strided USM arrays are not supported: pass a C-contiguous array "
                             "(e.g. dpnp.ascontiguousarray(x))")
        return x
    return np.ascontiguousarray(_arrays.to_numpy(x))


def from_host(a, like):
    """Upload for the CSR cache: USM on the input's queue, or the array itself when the default
    device reads host memory (else shared USM on the default queue, copied once, not per call)."""
    a = np.ascontiguousarray(a)
    if _arrays.kind(like) == "usm":
        return USMArray.from_numpy(a, usm_queue(like), "device")
    if not _host_direct():
        return USMArray.from_numpy(a, default_queue(), "shared")
    return a


def to_host(x):
    return _arrays.to_numpy(x)


# ---------------------------------------------------------------- execution context
class _Call:
    """Pointers, queue, output allocation and ordering for one op call."""

    def __init__(self, like):
        self.usm = _arrays.kind(like) == "usm"
        self.like = like
        self.keep = []  # host staging copies that must outlive the kernel
        if self.usm:
            self.queue = usm_queue(like)
            from dpctl.utils import SequentialOrderManager

            self.order = SequentialOrderManager[self.queue]
            self.deps = list(self.order.submitted_events)
        else:
            self.queue = default_queue()
            self.deps = []

    def ptr(self, a) -> int:
        if a is None:
            return 0
        if _arrays.kind(a) == "usm":
            q = usm_queue(a)
            if q.sycl_context != self.queue.sycl_context:
                raise ValueError("arrays live on different SYCL contexts; put them on one queue")
            return usm_pointer(a)
        a = np.ascontiguousarray(a)
        if not _host_direct():
            a = USMArray.from_numpy(a, self.queue, "shared")
            self.keep.append(a)
            return usm_pointer(a)
        self.keep.append(a)
        return int(a.ctypes.data)

    def empty(self, shape, dtype):
        if self.usm:
            if type(self.like).__module__.startswith("dpnp"):
                import dpnp

                out = dpnp.empty(shape, dtype=dtype, sycl_queue=self.queue)
            else:
                out = USMArray.empty(shape, dtype, self.queue, "device")
        elif _host_direct():
            out = np.empty(shape, dtype)
        else:
            out = USMArray.empty(shape, dtype, self.queue, "shared")
        if _POISON:
            self._poison(out, dtype)
        return out

    def _poison(self, out, dtype):
        """Fill a fresh output with NaN (floats) or a huge sentinel (indices), so that any element a
        kernel fails to write shows up in the tests (GNNSPARSE_POISON=1; never in normal use)."""
        fill = np.array(np.nan if np.dtype(dtype).kind == "f" else np.iinfo(dtype).max // 3, dtype)
        if isinstance(out, np.ndarray):
            out.fill(fill)
        elif out.nbytes:
            host = np.full(out.shape, fill, dtype)
            import dpctl.memory as dpm

            dpm.as_usm_memory(out).copy_from_host(host.reshape(-1).view(np.uint8))

    def out_ptr(self, a) -> int:
        if isinstance(a, np.ndarray):
            return int(a.ctypes.data)
        return usm_pointer(a)

    def finish(self, ev, *outs):
        if self.usm:
            self.order.add_event_pair(ev, ev)
            return outs
        ev.wait()
        return tuple(o if o is None or isinstance(o, np.ndarray) else o.asnumpy() for o in outs)


def _csr_view(rowptr, col, val, M, K, c: _Call):
    return _core.CsrView(_core.ITYPE[_arrays.dtype_name(rowptr)][0], c.ptr(rowptr), c.ptr(col), c.ptr(val), M, K,
                         _arrays.shape_of(col)[0])


def spmm(rowptr, col, val, X, M, K, reduce, want_arg):
    c = _Call(X)
    C = _arrays.shape_of(X)[1]
    dt = _arrays.dtype_name(X)
    Y = c.empty((M, C), dt)
    arg = c.empty((M, C), np.int64) if want_arg else None
    A = _csr_view(rowptr, col, val, M, K, c)
    ev = _ext().spmm((c.queue, c.deps), A, _core.DTYPE[dt][0], _core.REDUCE[reduce], c.ptr(X), c.out_ptr(Y),
                     0 if arg is None else c.out_ptr(arg), C)
    return c.finish(ev, Y, arg)


def sddmm(rowptr, col, X, Y, M, K, op):
    c = _Call(X)
    H = _arrays.shape_of(X)[1]
    F = _arrays.shape_of(X)[2] if op == "dot" else 1
    nnz = _arrays.shape_of(col)[0]
    dt = _arrays.dtype_name(X)
    E = c.empty((nnz, H), dt)
    A = _csr_view(rowptr, col, None, M, K, c)
    ev = _ext().sddmm((c.queue, c.deps), A, _core.DTYPE[dt][0], _core.SDDMM_OP[op], c.ptr(X), c.ptr(Y), c.out_ptr(E),
                      H, F)
    return c.finish(ev, E)[0]


def fusedmm(rowptr, col, val, X, Y, Z, M, K, op, edge, slope, want_edges):
    c = _Call(X)
    H = _arrays.shape_of(X)[1]
    F = _arrays.shape_of(X)[2] if op == "dot" else 1
    D = _arrays.shape_of(Z)[2]
    nnz = _arrays.shape_of(col)[0]
    dt = _arrays.dtype_name(X)
    out = c.empty((M, H, D), dt)
    E = c.empty((nnz, H), dt) if want_edges else None
    A = _csr_view(rowptr, col, val, M, K, c)
    ev = _ext().fusedmm((c.queue, c.deps), A, _core.DTYPE[dt][0], _core.SDDMM_OP[op], _core.EDGE_FN[edge],
                        float(slope), c.ptr(X), c.ptr(Y), c.ptr(Z), c.out_ptr(out),
                        0 if E is None else c.out_ptr(E), H, F, D)
    return c.finish(ev, out, E)
