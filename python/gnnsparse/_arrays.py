"""Array protocols: which framework an array belongs to, its dtype, shape and a NumPy view.

Kinds:
  "numpy" - numpy.ndarray (and anything numpy.asarray accepts: lists, torch CPU tensors via .numpy())
  "usm"   - objects with __sycl_usm_array_interface__ (dpnp arrays, dpctl.memory objects, gnnsparse.USMArray)
  "cuda"  - torch CUDA tensors and objects with __cuda_array_interface__ (CuPy)
"""
from __future__ import annotations

import sys

import numpy as np

_DTYPE_NAMES = {
    "float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "int16", "bool",
}


_NP_NAMES: dict = {}


def _np_name(dt) -> str:
    """numpy's dtype.name, cached (computing it costs several microseconds a call)."""
    name = _NP_NAMES.get(dt)
    if name is None:
        name = _NP_NAMES[dt] = dt.name
    return name


def is_torch(x) -> bool:
    t = sys.modules.get("torch")
    return t is not None and isinstance(x, t.Tensor)


def kind(x) -> str:
    if is_torch(x):
        return "cuda" if x.is_cuda else ("numpy" if x.device.type == "cpu" else x.device.type)
    if hasattr(x, "__cuda_array_interface__"):
        return "cuda"
    if hasattr(x, "__sycl_usm_array_interface__"):
        return "usm"
    return "numpy"


def dtype_name(x) -> str:
    """'float32', 'int64', ... for NumPy, torch, CuPy, dpnp and USM objects."""
    if isinstance(x, np.ndarray):
        return _np_name(x.dtype)
    if is_torch(x):
        return str(x.dtype).replace("torch.", "")
    if hasattr(x, "dtype"):
        return str(np.dtype(x.dtype)) if not isinstance(x.dtype, str) else str(np.dtype(x.dtype))
    if hasattr(x, "__sycl_usm_array_interface__"):
        return str(np.dtype(x.__sycl_usm_array_interface__["typestr"]))
    return str(np.asarray(x).dtype)


def shape_of(x) -> tuple:
    if hasattr(x, "shape"):
        return tuple(int(s) for s in x.shape)
    if hasattr(x, "__sycl_usm_array_interface__"):
        return tuple(x.__sycl_usm_array_interface__["shape"])
    return np.shape(x)


def to_numpy(x) -> np.ndarray:
    """A host NumPy array with x's contents (a copy for device arrays)."""
    if isinstance(x, np.ndarray):
        return x
    if is_torch(x):
        x = x.detach()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        return x.cpu().numpy()
    if hasattr(x, "__cuda_array_interface__"):
        return x.get() if hasattr(x, "get") else np.asarray(x)
    if hasattr(x, "__sycl_usm_array_interface__"):
        from ._usm import usm_to_numpy

        return usm_to_numpy(x)
    return np.asarray(x)
