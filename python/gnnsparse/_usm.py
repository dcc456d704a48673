"""USM arrays for the SYCL backend when dpnp is not installed.

`USMArray` is the minimal n-d array gnnsparse returns for USM inputs that are not dpnp arrays: a
dpctl.memory allocation (same kind as the input's: device, shared or host) with a shape and dtype,
exposing __sycl_usm_array_interface__ so dpnp.asarray / dpctl consumers can take it without a copy.
`asnumpy()` copies it to the host. With dpnp installed and dpnp inputs, outputs are dpnp arrays.
"""
from __future__ import annotations

import numpy as np


class USMArray:
    __slots__ = ("memory", "shape", "dtype", "queue")

    def __init__(self, memory, shape, dtype, queue):
        self.memory = memory
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.queue = queue

    @classmethod
    def empty(cls, shape, dtype, queue, alloc: str = "device"):
        import dpctl.memory as dpm

        nbytes = max(1, int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize)
        mem = {"device": dpm.MemoryUSMDevice, "shared": dpm.MemoryUSMShared, "host": dpm.MemoryUSMHost}[alloc]
        return cls(mem(nbytes, queue=queue), shape, dtype, queue)

    @classmethod
    def from_numpy(cls, a, queue, alloc: str = "device"):
        a = np.ascontiguousarray(a)
        out = cls.empty(a.shape, a.dtype, queue, alloc)
        if a.nbytes:
            out.memory.copy_from_host(a.reshape(-1).view(np.uint8))
        return out

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def __sycl_usm_array_interface__(self):
        return {
            "data": (self.memory._pointer, False),
            "shape": self.shape,
            "strides": None,
            "typestr": self.dtype.str,
            "version": 1,
            "syclobj": self.queue,
        }

    def reshape(self, *shape) -> "USMArray":
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        shape = tuple(int(s) for s in shape)
        if -1 in shape:
            known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
            shape = tuple(self.size // max(known, 1) if s == -1 else s for s in shape)
        if int(np.prod(shape, dtype=np.int64)) != self.size:
            raise ValueError(f"cannot reshape {self.shape} to {shape}")
        return USMArray(self.memory, shape, self.dtype, self.queue)

    def asnumpy(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        if out.nbytes:
            _wait_for_queue(self.queue)
            host = self.memory.copy_to_host()
            out.reshape(-1).view(np.uint8)[:] = host[: out.nbytes]
        return out

    def __repr__(self):
        return f"USMArray(shape={self.shape}, dtype={self.dtype}, device={self.queue.sycl_device.name!r})"


def _wait_for_queue(queue):
    """Wait for the work gnnsparse (or dpnp) submitted to `queue`: dpctl's copy_to_host does not
    order itself after kernels on an out-of-order queue."""
    from dpctl.utils import SequentialOrderManager

    SequentialOrderManager[queue].wait()


def usm_pointer(x) -> int:
    iface = x.__sycl_usm_array_interface__
    return int(iface["data"][0])


def usm_queue(x):
    """The dpctl.SyclQueue an USM object lives on."""
    import dpctl

    obj = x.__sycl_usm_array_interface__["syclobj"]
    if isinstance(obj, dpctl.SyclQueue):
        return obj
    if isinstance(obj, dpctl.SyclContext):
        return dpctl.SyclQueue(obj, obj.get_devices()[0])
    return dpctl.SyclQueue(obj)


def usm_is_contiguous(x) -> bool:
    iface = x.__sycl_usm_array_interface__
    strides = iface.get("strides")
    if strides is None:
        return True
    itemsize = np.dtype(iface["typestr"]).itemsize
    expected, step = [], itemsize
    for s in reversed(iface["shape"]):
        expected.append(step)
        step *= s
    return tuple(strides) == tuple(reversed(expected)) or int(np.prod(iface["shape"])) <= 1


def usm_to_numpy(x) -> np.ndarray:
    if isinstance(x, USMArray):
        return x.asnumpy()
    if hasattr(x, "asnumpy"):
        return x.asnumpy()
    import dpctl.memory as dpm

    iface = x.__sycl_usm_array_interface__
    if not usm_is_contiguous(x):
        raise ValueError("cannot copy a strided USM array to the host; make it contiguous first")
    dtype = np.dtype(iface["typestr"])
    shape = tuple(iface["shape"])
    out = np.empty(shape, dtype)
    if out.nbytes:
        _wait_for_queue(usm_queue(x))
        mem = dpm.as_usm_memory(x)
        out.reshape(-1).view(np.uint8)[:] = np.asarray(mem.copy_to_host())[: out.nbytes]
    return out
