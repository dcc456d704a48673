"""Which backend runs an op: decided by where the dense inputs live.

NumPy (and torch CPU) arrays and SYCL USM arrays go to the SYCL backend; CUDA arrays (torch, CuPy)
to the CUDA backend. Backends are imported lazily: the CUDA path never loads dpctl and vice versa.
"""
from __future__ import annotations

import importlib

from . import _arrays

_MODULES = {"numpy": "gnnsparse._sycl_backend", "usm": "gnnsparse._sycl_backend", "cuda": "gnnsparse._cuda"}


class BackendUnavailable(RuntimeError):
    pass


_READY: dict = {}  # kind -> backend module that loaded and reported itself available


def backend_for(x):
    k = _arrays.kind(x)
    mod = _READY.get(k)
    if mod is not None:
        return mod
    if k not in _MODULES:
        raise TypeError(f"gnnsparse has no backend for arrays on {k!r} ({type(x).__name__})")
    try:
        mod = importlib.import_module(_MODULES[k])
    except ImportError as e:  # pragma: no cover - depends on the build
        raise BackendUnavailable(f"the {k} backend is not available in this build: {e}") from e
    if not mod.available():
        raise BackendUnavailable(f"the {mod.name} backend is not available here: {mod.unavailable_reason()}"
                                 if hasattr(mod, "unavailable_reason") else
                                 f"the {mod.name} backend is not available here (no device or module)")
    _READY[k] = mod
    return mod


def available_backends() -> dict:
    """{'sycl': bool, 'cuda': bool}: which backends this build and machine can run."""
    out = {}
    for name, modname in (("sycl", "gnnsparse._sycl_backend"), ("cuda", "gnnsparse._cuda")):
        try:
            out[name] = bool(importlib.import_module(modname).available())
        except Exception:
            out[name] = False
    return out
