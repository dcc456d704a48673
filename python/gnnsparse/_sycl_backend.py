"""SYCL backend: NumPy arrays (and torch CPU tensors) on the default SYCL device — the OpenCL CPU
device unless GNNSPARSE_SYCL_DEVICE names another dpctl filter string — and dpnp (USM) arrays on
their own queue.

NumPy inputs are used in place when the device can read system memory (the CPU device can);
otherwise they are staged through shared USM. Results for NumPy inputs are NumPy arrays; results
for USM inputs are dpnp arrays on the input's queue, ordered after earlier work through dpctl's
SequentialOrderManager (events, no host waits).
"""
from __future__ import annotations

import functools
import os
import threading

import numpy as np

from . import _arrays, _core

_POISON = os.environ.get("GNNSPARSE_POISON", "") not in ("", "0")


_EXT = None


def _ext():
    global _EXT
    if _EXT is None:
        import dpctl  # noqa: F401  (its C-API, used by the module's queue and event casters)

        from . import _sycl  # loads libsycl

        _EXT = _sycl
    return _EXT


def _dpnp():
    try:
        import dpnp
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("SYCL USM arrays need dpnp: pip install dpnp (or gnnsparse[dpnp])") from e
    return dpnp


class _HostPlace:
    """The place of NumPy / torch CPU arrays: the default SYCL device."""

    __slots__ = ()

    def __repr__(self):
        return f"the host (NumPy, run on the SYCL device {backend.device_name()!r})"


class _UsmPlace(tuple):
    """(context, device) of a USM array: arrays of one context can be used together."""

    __slots__ = ()

    def __repr__(self):
        return f"SYCL device {self[1].name!r} (context {self[0].addressof_ref():#x})"

    def explain(self, other) -> str:
        if isinstance(other, _UsmPlace) and other[1] == self[1]:
            return (" (another SYCL context on the same device: USM memory belongs to the context it was "
                    "allocated in; allocate the arrays on one queue, or on queues sharing a context)")
        return ""


HOST = _HostPlace()


class SyclBackend:
    name = "sycl"
    dtypes = frozenset({"float32", "float64"})

    def __init__(self):
        self._reason = None

    # ------------------------------------------------------------ availability
    @functools.lru_cache(maxsize=None)
    def available(self) -> bool:
        try:
            import dpctl  # noqa: F401

            _ext()
            self.default_queue()
            return True
        except Exception as e:  # no dpctl, no _sycl module, no device
            self._reason = f"{type(e).__name__}: {e}"
            return False

    def unavailable_reason(self) -> str:
        return self._reason or "unknown"

    @functools.lru_cache(maxsize=None)
    def default_queue(self):
        """The queue NumPy inputs run on: GNNSPARSE_SYCL_DEVICE (a dpctl filter string) or the CPU."""
        import dpctl

        return dpctl.SyclQueue(os.environ.get("GNNSPARSE_SYCL_DEVICE", "opencl:cpu"), property="in_order")

    @functools.lru_cache(maxsize=None)
    def device_name(self) -> str:
        return self.default_queue().sycl_device.name

    def device_caps(self, queue=None) -> dict:
        return _ext().device_caps(queue or self.default_queue())

    @functools.cached_property
    def _host_exec(self):
        """The exec handle of NumPy calls: the default queue, nothing to wait for."""
        return (self.default_queue(), ())

    @functools.cached_property
    def host_direct(self) -> bool:
        """Whether the default device reads host (malloc'ed) memory, so NumPy arrays need no copy."""
        return bool(self.device_caps()["usm_system_allocations"])

    # ------------------------------------------------------------ places and arrays
    def place(self, x):
        if isinstance(x, np.ndarray) or _arrays.kind(x) == "numpy":
            return HOST
        q = _usm_queue(x)
        return _UsmPlace((q.sycl_context, q.sycl_device))

    def prepare(self, x):
        if isinstance(x, np.ndarray):
            return x if x.flags.c_contiguous else np.ascontiguousarray(x)
        if _arrays.is_torch(x):  # torch CPU tensor: a NumPy view of it (zero copy)
            return x.detach().contiguous().numpy()
        if _arrays.kind(x) == "usm":
            dpnp = _dpnp()
            if not isinstance(x, dpnp.ndarray):
                x = dpnp.asarray(x)  # zero copy for any __sycl_usm_array_interface__ object
            return x if x.flags.c_contiguous else dpnp.ascontiguousarray(x)
        a = np.asarray(_arrays.to_numpy(x))  # keeps 0-d arrays 0-d (ascontiguousarray would not)
        return a if a.flags.c_contiguous else np.ascontiguousarray(a)

    def upload(self, a, place, like):
        a = np.ascontiguousarray(a)
        if place is HOST:
            if self.host_direct:
                return a
            return _dpnp().asarray(a, usm_type="shared", sycl_queue=self.default_queue())
        return _dpnp().asarray(a, usm_type="device", sycl_queue=_usm_queue(like))

    def view(self, rowptr, col, val, M, K, nnz, max_degree):
        return _core.CsrView(_core.ITYPE[_arrays.dtype_name(rowptr)][0], _addr(rowptr), _addr(col),
                             0 if val is None else _addr(val), M, K, nnz, max_degree)

    # ------------------------------------------------------------ ops
    def spmm(self, A, X, M, C, dtype, reduce, want_arg, precision):
        if type(X) is np.ndarray and self.host_direct and not _POISON:  # the per-call fast path
            Y = np.empty((M, C), X.dtype)
            arg = np.empty((M, C), np.int64) if want_arg else None
            _EXT.spmm(self._host_exec, A, dtype, reduce, _address(X), _address(Y),
                      0 if arg is None else _address(arg), C, precision).wait()
            return Y, arg
        c = _Call(self, X)
        Y = c.empty((M, C), X.dtype)
        arg = c.empty((M, C), np.int64) if want_arg else None
        ev = _ext().spmm(c.exec(), A, dtype, reduce, c.addr(X), _addr(Y), 0 if arg is None else _addr(arg), C,
                         precision)
        return c.finish(ev, A, Y, arg)

    def spmm_heads(self, A, W, Z, M, H, D, dtype):
        c = _Call(self, Z)
        out = c.empty((M, H, D), Z.dtype)
        ev = _ext().spmm_heads(c.exec(), A, dtype, c.addr(W), c.addr(Z), _addr(out), H, D, 0)
        return c.finish(ev, A, out)[0]

    def gatv2_scores(self, A, X, Y, att, nnz, H, C, dtype, slope):
        c = _Call(self, X)
        S = c.empty((nnz, H), X.dtype)
        ev = _ext().gatv2_scores(c.exec(), A, dtype, c.addr(X), c.addr(Y), c.addr(att), _addr(S), H, C, slope)
        return c.finish(ev, A, S)[0]

    def gatv2_grad(self, A, X, Y, att, dS, M, H, C, dtype, slope, want_att):
        c = _Call(self, X)
        dX = c.empty((M, H, C), X.dtype)
        dAtt = c.empty((M, H, C), X.dtype) if want_att else None
        ev = _ext().gatv2_grad(c.exec(), A, dtype, c.addr(X), c.addr(Y), c.addr(att), c.addr(dS), _addr(dX),
                               0 if dAtt is None else _addr(dAtt), H, C, slope)
        return c.finish(ev, A, dX, dAtt)

    def sddmm(self, A, X, Y, nnz, H, F, dtype, op, precision):
        c = _Call(self, X)
        E = c.empty((nnz, H), X.dtype)
        ev = _ext().sddmm(c.exec(), A, dtype, op, c.addr(X), c.addr(Y), _addr(E), H, F, precision)
        return c.finish(ev, A, E)[0]

    def fusedmm(self, A, X, Y, Z, M, H, F, D, dtype, op, edge, slope, want_edges, precision):
        c = _Call(self, X)
        out = c.empty((M, H, D), X.dtype)
        E = c.empty((A.nnz, H), X.dtype) if want_edges else None
        ev = _ext().fusedmm(c.exec(), A, dtype, op, edge, slope, c.addr(X), c.addr(Y), c.addr(Z), _addr(out),
                            0 if E is None else _addr(E), H, F, D, precision)
        return c.finish(ev, A, out, E)

    # ------------------------------------------------------------ quantized ops (gnnsparse.quant)
    def quantize(self, X, rows, C, bits, rounding, seed):
        c = _Call(self, X)
        rb = C if bits == 8 else (C + 1) // 2
        Q = c.empty((rows, rb), np.int8 if bits == 8 else np.uint8)
        scale = c.empty((2,), np.float32)
        work = c.empty((_ext().QUANTIZE_WORK,), np.float32)
        ev = _ext().quantize(c.exec(), c.addr(X), rows, C, bits, rounding, seed, _addr(Q), _addr(scale), _addr(work))
        Q, scale, _ = c.finish(ev, None, Q, scale, work)
        return Q, scale

    def dequantize(self, Q, scale, bits, rows, C):
        c = _Call(self, Q)
        Y = c.empty((rows, C), np.float32)
        ev = _ext().dequantize(c.exec(), c.addr(Q), c.addr(scale), bits, rows, C, _addr(Y))
        return c.finish(ev, None, Y)[0]

    def qspmm(self, A, X, xs, bits, C, M, reduce, W, H, identity_col, want_arg, out=None):
        c = _Call(self, X)
        if out is not None:  # quantized output, delayed scale: (Q, scale[4])
            Q = c.empty((M, C if out.bits == 8 else (C + 1) // 2), np.int8 if out.bits == 8 else np.uint8)
            scale = c.empty((4,), np.float32)
            wa = 0 if W is None else c.addr(W)
            n = _ext().qspmm_out_work(c.exec(), A, c.addr(X), c.addr(xs), bits, C, reduce, wa, H, identity_col,
                                      out.bits)
            work = c.empty((max(n, 1),), np.float32)
            stats, back = _inout(c, out.stats)
            ev = _ext().qspmm(c.exec(), A, c.addr(X), c.addr(xs), bits, C, reduce, wa, H, identity_col, 0, 0,
                              _addr(Q), out.bits, out.rounding, out.seed, c.addr(out.scale_in), _addr(scale), stats,
                              out.decay, _addr(work), n)
            Q, scale, _ = c.finish(ev, A, Q, scale, work)
            back()
            return Q, scale
        Y = c.empty((M, C), np.float32)
        arg = c.empty((M, C), np.int64) if want_arg else None
        ev = _ext().qspmm(c.exec(), A, c.addr(X), c.addr(xs), bits, C, reduce, 0 if W is None else c.addr(W), H,
                          identity_col, _addr(Y), 0 if arg is None else _addr(arg))
        return c.finish(ev, A, Y, arg)

    def requantize(self, acc, rows, C, ld, sa, sb, out):
        c = _Call(self, acc)
        Q = c.empty((rows, C if out.bits == 8 else (C + 1) // 2), np.int8 if out.bits == 8 else np.uint8)
        scale = c.empty((4,), np.float32)
        work = c.empty((_ext().QUANTIZE_WORK,), np.float32)
        stats, back = _inout(c, out.stats)
        ev = _ext().requantize(c.exec(), c.addr(acc), rows, C, ld, c.addr(sa), c.addr(sb), _addr(Q), out.bits,
                               out.rounding, out.seed, c.addr(out.scale_in), _addr(scale), stats, out.decay,
                               _addr(work))
        Q, scale, _ = c.finish(ev, None, Q, scale, work)
        back()
        return Q, scale

    def qsddmm(self, A, X, xs, xbits, Y, ys, ybits, nnz, H, F, op):
        c = _Call(self, X)
        E = c.empty((nnz, H), np.float32)
        ev = _ext().qsddmm(c.exec(), A, op, c.addr(X), c.addr(xs), xbits, c.addr(Y), c.addr(ys), ybits, H, F,
                           _addr(E))
        return c.finish(ev, A, E)[0]

    def qfusedmm(self, A, X, xs, xbits, Y, ys, ybits, Z, zs, zbits, M, H, F, D, op, edge, slope, want_edges):
        c = _Call(self, X)
        out = c.empty((M, H, D), np.float32)
        E = c.empty((A.nnz, H), np.float32) if want_edges else None
        ev = _ext().qfusedmm(c.exec(), A, op, edge, slope, c.addr(X), c.addr(xs), xbits, c.addr(Y), c.addr(ys), ybits,
                             c.addr(Z), c.addr(zs), zbits, H, F, D, _addr(out), 0 if E is None else _addr(E))
        return c.finish(ev, A, out, E)

    def qgemm_tn(self, A, B, K, M, N, scale):
        """C = scale * A^T B, float32 (M, N), for row-major int8 A (K x M), B (K x N) and a float32
        scale on the device (sycl/kernels/qgemm.hpp; int32 scratch allocated here)."""
        c = _Call(self, A)
        C = c.empty((M, N), np.float32)
        n = _ext().qgemm_tn_work(c.exec(), K, M, N)
        work = c.empty((max(n, 1),), np.int32)
        ev = _ext().qgemm_tn(c.exec(), c.addr(A), M, c.addr(B), N, K, M, N, c.addr(scale), _addr(C), _addr(work), n)
        return c.finish(ev, None, C, work)[0]


_address = _core.address


def _inout(c, a):
    """(address, copy_back) of an array a kernel updates in place (a delayed scale's statistics):
    NumPy staged through shared USM on a device that cannot read host memory is copied back once
    the call has finished."""
    if a is None:
        return 0, lambda: None
    if c.usm is None and isinstance(a, np.ndarray):
        staged = _dpnp().asarray(a, usm_type="shared", sycl_queue=c.queue)

        def back():
            a[...] = staged.asnumpy()

        return _addr(staged), back
    return c.addr(a), lambda: None


def _addr(a) -> int:
    if isinstance(a, np.ndarray):
        return _address(a)
    return a.get_array()._pointer if hasattr(a, "get_array") else int(a.__sycl_usm_array_interface__["data"][0])


def _usm_queue(x):
    """The dpctl.SyclQueue a USM object lives on."""
    q = getattr(x, "sycl_queue", None)
    if q is not None:
        return q
    import dpctl

    obj = x.__sycl_usm_array_interface__["syclobj"]
    if isinstance(obj, dpctl.SyclQueue):
        return obj
    if isinstance(obj, dpctl.SyclContext):
        return dpctl.SyclQueue(obj, obj.get_devices()[0])
    return dpctl.SyclQueue(obj)


_IN_ORDER: dict = {}  # queue -> is_in_order
# dpctl 0.22's order manager deadlocks when threads enter it for the first time together: a
# function-local static of dpctl.utils._seq_order_keeper is initialized by one thread while another,
# holding the GIL, waits on its guard (seen: a 4-thread test stuck in __cxa_guard_acquire). gnnsparse
# takes this lock around every call into the order manager, so its own threads never race there.
_ORDER_LOCK = threading.Lock()


class _Call:
    """Queue, output allocation, addresses and ordering of one op call."""

    __slots__ = ("usm", "queue", "order", "keep")

    def __init__(self, b: SyclBackend, like):
        self.usm = not isinstance(like, np.ndarray)
        self.keep = None
        if self.usm:
            from dpctl.utils import SequentialOrderManager

            self.queue = like.sycl_queue
            with _ORDER_LOCK:
                self.order = SequentialOrderManager[self.queue]
        else:
            self.queue = b.default_queue()
            if not b.host_direct:  # stage NumPy through shared USM (outputs too, see empty)
                self.usm = None

    def exec(self):
        """(queue, events to wait on): after the outputs exist, so their fills are waited for. An
        in-order queue orders submissions itself: no events to convert and wait on."""
        if not self.usm:
            return _BACKEND._host_exec
        in_order = _IN_ORDER.get(self.queue)
        if in_order is None:
            in_order = _IN_ORDER[self.queue] = bool(self.queue.is_in_order)
        if in_order:
            return (self.queue, ())
        with _ORDER_LOCK:
            return (self.queue, self.order.submitted_events)

    def addr(self, a) -> int:
        if self.usm is None and isinstance(a, np.ndarray):  # a device that cannot read host memory
            staged = _dpnp().asarray(a, usm_type="shared", sycl_queue=self.queue)
            self.keep = (self.keep or ()) + (staged,)
            return _addr(staged)
        return _addr(a)

    def empty(self, shape, dtype):
        fill = None
        if _POISON:
            fill = np.nan if np.dtype(dtype).kind == "f" else np.iinfo(dtype).max // 3
        if self.usm is False:
            out = np.empty(shape, dtype)
            if fill is not None:
                out.fill(fill)
            return out
        return _POOL.empty(self.queue, shape, dtype, "device" if self.usm else "shared", fill)

    def finish(self, ev, A, *outs):
        if self.usm:
            with _ORDER_LOCK:
                self.order.add_event_pair(ev, ev)
            if getattr(A, "transient", False):  # per-call arrays (see CSR._view) must outlive the kernel
                ev.wait()
            return outs
        ev.wait()
        if self.usm is None:  # staged: copy results to the host
            return tuple(None if o is None else o.asnumpy() for o in outs)
        return outs


class _UsmPool:
    """Output allocations for USM calls, reused once every array viewing them is gone.

    A USM allocation costs tens of microseconds on the OpenCL CPU runtime (dpnp.empty: ~35 µs),
    more than a small kernel. Outputs are therefore usm_ndarrays over pooled dpctl.memory blocks: a
    block is free again when the pool holds the only reference to it (every dpnp array or view over
    it has been dropped). Reuse is ordered like any other write: the next kernel on the queue waits
    for every event submitted before it (SequentialOrderManager), readers of the old array included.
    At most `per_size` blocks are kept per (queue, kind, size) and `max_bytes` in all; beyond that,
    blocks are simply allocated and freed as dpnp would.
    """

    def __init__(self, per_size=4, max_bytes=256 << 20):
        self.blocks: dict = {}
        self.per_size, self.max_bytes, self.held = per_size, max_bytes, 0

    def empty(self, queue, shape, dtype, usm_type, fill=None):
        """A dpnp array over a free (or new) block; `fill` (tests' poisoning) is copied in from the
        host synchronously, outside any queue's ordering."""
        import sys

        from dpnp.tensor import usm_ndarray

        dtype = np.dtype(dtype)
        nbytes = max(1, dtype.itemsize * int(np.prod(shape, dtype=np.int64)))
        key = (queue, usm_type, nbytes)
        blocks = self.blocks.setdefault(key, [])
        mem = None
        for b in blocks:
            if sys.getrefcount(b) == 3:  # the list, the loop variable, getrefcount's argument
                mem = b
                break
        if mem is None:
            import dpctl.memory as dpm

            mem = (dpm.MemoryUSMDevice if usm_type == "device" else dpm.MemoryUSMShared)(nbytes, queue=queue)
            if len(blocks) < self.per_size and self.held + nbytes <= self.max_bytes:
                blocks.append(mem)
                self.held += nbytes
        if fill is not None and nbytes >= dtype.itemsize:  # (an empty array has nothing to poison)
            queue.wait()  # a reused block may still be read by earlier work
            mem.copy_from_host(np.full(nbytes // dtype.itemsize, fill, dtype).view(np.uint8))
        return _dpnp().ndarray._create_from_usm_ndarray(usm_ndarray(shape, dtype=dtype, buffer=mem))


_POOL = _UsmPool()
backend = _BACKEND = SyclBackend()


# kept for callers of the module-level API (bench, tests)
def default_queue():
    return backend.default_queue()


def available() -> bool:
    return backend.available()


def unavailable_reason() -> str:
    return backend.unavailable_reason()
