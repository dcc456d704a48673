"""help() says something for every public name: the CSR (and its graph methods), the layers, the
`train` package and the distributed package each carry a docstring on every public function,
class, method and property."""
from __future__ import annotations

import importlib
import inspect

import pytest

import gnnsparse as gs


def _undocumented(cls):
    """Public methods and properties defined by gnnsparse on `cls` (or its gnnsparse bases) without
    a docstring of their own."""
    out = []
    for name in dir(cls):
        if name.startswith("_") and name != "__matmul__":
            continue
        owner = next((k for k in cls.__mro__ if name in k.__dict__), None)
        if owner is None or not owner.__module__.startswith("gnnsparse"):
            continue
        raw = owner.__dict__[name]
        fn = raw.fget if isinstance(raw, property) else getattr(raw, "__func__", raw)
        if (isinstance(raw, property) or callable(fn)) and not (getattr(fn, "__doc__", None) or "").strip():
            out.append(f"{cls.__name__}.{name}")
    return out


def test_csr_methods_have_docstrings():
    missing = _undocumented(gs.CSR)
    assert not missing, missing
    for name in ("from_scipy", "from_pyg", "from_sparse_tensor", "from_torch_sparse", "reduce", "sddmm", "fusedmm",
                 "to_scipy", "degrees", "T", "to_dense"):
        attr = inspect.getattr_static(gs.CSR, name)
        fn = attr.fget if isinstance(attr, property) else getattr(attr, "__func__", attr)
        assert len((fn.__doc__ or "").split()) >= 5, name


@pytest.mark.parametrize("module", ["gnnsparse", "gnnsparse.torch.nn", "gnnsparse.quant.nn", "gnnsparse.train",
                                    "gnnsparse.distributed"])
def test_public_names_have_docstrings(module):
    if module != "gnnsparse":
        pytest.importorskip("torch")
    mod = importlib.import_module(module)
    missing = []
    for name in mod.__all__:
        obj = getattr(mod, name)
        if inspect.ismodule(obj) or not callable(obj):
            continue
        if getattr(obj, "__module__", "").startswith("gnnsparse.quant") and module == "gnnsparse":
            continue  # gnnsparse.quant's own names are its module's to document
        doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__
        if not (doc or "").strip():
            missing.append(f"{module}.{name}")
        if inspect.isclass(obj):
            missing += [f"{module}.{m}" for m in _undocumented(obj)]
    assert not missing, missing
