"""Array protocols: which framework an array belongs to, its dtype name, shape and a NumPy copy.

Kinds (where an op on the array runs):
  "numpy" - numpy.ndarray and torch CPU tensors (the SYCL backend's default device), and anything
            numpy.asarray accepts
  "usm"   - objects with __sycl_usm_array_interface__ (dpnp arrays) on their own SYCL queue
  "cuda"  - torch CUDA tensors and objects with __cuda_array_interface__ (CuPy)

Every function here is on the per-call path, so answers are cached by type / dtype object.
"""
from __future__ import annotations

import sys

import numpy as np

_KIND_BY_TYPE: dict = {np.ndarray: "numpy"}
_DTYPE_NAMES: dict = {}  # NumPy (and CuPy / dpnp) dtype objects -> "float32", ...
# torch dtypes -> "float32", ..., in a dict of their own: torch.compile (dynamo, torch 2.11) cannot
# look a torch dtype up in a dict that also holds NumPy dtypes ("cannot determine whether the
# underlying object is hashable"), and the one cache broke compiled layers once a NumPy call had
# filled it
_TORCH_DTYPE_NAMES: dict = {}


def is_torch(x) -> bool:
    t = sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def _torch_kind(x) -> str:
    if x.is_cuda:
        return "cuda"
    dev = x.device.type
    return "numpy" if dev == "cpu" else dev


def kind(x) -> str:
    k = _KIND_BY_TYPE.get(type(x))
    if k is not None:
        return _torch_kind(x) if k == "torch" else k
    if is_torch(x):
        _KIND_BY_TYPE[type(x)] = "torch"
        return _torch_kind(x)
    if hasattr(x, "__cuda_array_interface__"):
        k = "cuda"
    elif hasattr(x, "__sycl_usm_array_interface__"):
        k = "usm"
    else:
        return "numpy"  # lists, scalars, ...: not cached (their types say nothing)
    _KIND_BY_TYPE[type(x)] = k
    return k


def dtype_name(x) -> str:
    """'float32', 'int64', ... for NumPy, torch, CuPy and dpnp arrays."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        if hasattr(x, "__sycl_usm_array_interface__"):
            return np.dtype(x.__sycl_usm_array_interface__["typestr"]).name
        return np.asarray(x).dtype.name
    if is_torch(x):
        name = _TORCH_DTYPE_NAMES.get(dt)
        if name is None:
            name = _TORCH_DTYPE_NAMES[dt] = str(dt).replace("torch.", "")
        return name
    name = _DTYPE_NAMES.get(dt)
    if name is None:
        name = _DTYPE_NAMES[dt] = np.dtype(dt).name
    return name


def shape_of(x) -> tuple:
    s = getattr(x, "shape", None)
    if s is not None:
        return tuple(s)
    if hasattr(x, "__sycl_usm_array_interface__"):
        return tuple(x.__sycl_usm_array_interface__["shape"])
    return np.shape(x)


def to_numpy(x) -> np.ndarray:
    """A host NumPy array with x's contents (a copy for device arrays; bfloat16 becomes float32)."""
    if isinstance(x, np.ndarray):
        return x
    if is_torch(x):
        x = x.detach()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        return x.cpu().numpy()
    if hasattr(x, "__cuda_array_interface__"):
        return x.get() if hasattr(x, "get") else np.asarray(x)
    if hasattr(x, "asnumpy"):  # dpnp
        return x.asnumpy()
    if hasattr(x, "__sycl_usm_array_interface__"):
        import dpnp

        return dpnp.asnumpy(dpnp.asarray(x))
    return np.asarray(x)


def torch_from_numpy(a: np.ndarray):
    """A torch CPU tensor over a NumPy array without copying it, read-only arrays included (a CSR's
    host arrays are read-only; such tensors are only read)."""
    import warnings

    import torch

    a = np.ascontiguousarray(a)
    if a.flags.writeable:
        return torch.from_numpy(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "the given NumPy array is not writable"
        return torch.from_numpy(a)


def to_torch(a, device):
    """Any supported array as a torch tensor on `device` (zero copy where the memory allows it)."""
    import torch

    if isinstance(a, torch.Tensor):
        return a.to(device)
    k = kind(a)
    if k == "numpy":
        return torch_from_numpy(np.asarray(a)).to(device)
    if k == "cuda":
        return torch.as_tensor(a, device=device)
    return torch_from_numpy(to_numpy(a)).to(device)
