"""The package's layers: the core never imports the torch layer, torch inputs take one path, and
package __init__ files only hand names on.

The rule: gnnsparse.torch (and what sits on it: quant.autograd / quant.nn, distributed, train)
registers itself with the core's frontend (gnnsparse._ops.register_torch_layer) when imported; no
core module imports it. So using gnnsparse with NumPy or with torch tensors that need no gradient
never loads it, and a tensor that requires grad before it is imported is an error naming it, never
a result without a graph.
"""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import gnnsparse as gs

PKG = Path(gs.__file__).resolve().parent
# modules above the torch layer (they may import it); everything else is the core
ABOVE_TORCH = ("torch", "distributed", "train", "quant/autograd.py", "quant/nn.py", "bench")


def _core_modules():
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).as_posix()
        if not rel.startswith(ABOVE_TORCH):
            yield rel, p


def _imports(path):
    tree = ast.parse(path.read_text())
    rel = path.relative_to(PKG)
    pkg = ["gnnsparse", *rel.parts[:-1]]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - (node.level - 1)] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            yield mod
            yield from (f"{mod}.{a.name}" for a in node.names)


def test_core_modules_never_import_the_torch_layer():
    bad = [(rel, m) for rel, p in _core_modules() for m in _imports(p)
           if m == "gnnsparse.torch" or m.startswith("gnnsparse.torch.")]
    assert not bad, f"core modules import gnnsparse.torch: {bad}"


def _run(code):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_numpy_use_loads_neither_torch_nor_the_torch_layer():
    if not gs.available_backends()["sycl"]:
        pytest.skip("needs the SYCL backend")
    out = _run("""
        import sys, numpy as np, gnnsparse as gs
        A = gs.CSR.from_edge_index(np.array([[0, 1, 2, 2], [1, 2, 0, 1]]), 3)
        X = np.ones((3, 4), np.float32)
        gs.spmm(A, X, "max", return_arg=True); A @ X; gs.sddmm(A, X, X); gs.fusedmm(A, X, X, X, edge="softmax")
        gs.quant.spmm(A, gs.quantize(X, 8, seed=1))
        print("torch" in sys.modules, "gnnsparse.torch" in sys.modules)
    """)
    assert out.split() == ["False", "False"]


def test_torch_inputs_without_grad_do_not_need_the_torch_layer():
    pytest.importorskip("torch")
    if not gs.available_backends()["sycl"]:
        pytest.skip("needs the SYCL backend")
    out = _run("""
        import sys, numpy as np, torch, gnnsparse as gs
        A = gs.CSR.from_edge_index(np.array([[0, 1, 2, 2], [1, 2, 0, 1]]), 3)
        x = torch.ones(3, 4)
        y = A @ x; A.reduce(x, "max"); A.sddmm(x, x, edge_order="input"); A.to_dense(x)
        print(type(y).__name__, "gnnsparse.torch" in sys.modules)
        try:
            A @ x.requires_grad_()
        except RuntimeError as e:
            print("error names it:", "import gnnsparse.torch" in str(e))
        import gnnsparse.torch
        y = A @ x
        y.sum().backward()
        print(y.requires_grad, x.grad is not None)
    """)
    assert out.splitlines() == ["Tensor False", "error names it: True", "True True"]


def test_torch_inputs_take_one_path():
    """A @ x, gs.spmm and gnnsparse.torch.spmm: the same checks and the same bits, with and without
    requires_grad."""
    torch = pytest.importorskip("torch")
    gst = pytest.importorskip("gnnsparse.torch")
    if not gs.available_backends()["sycl"]:
        pytest.skip("needs the SYCL backend")
    rng = np.random.default_rng(3)
    A = gs.CSR.from_edge_index(rng.integers(0, 40, (2, 300)), 40, rng.random(300).astype(np.float32))
    x = torch.from_numpy(rng.standard_normal((40, 8)).astype(np.float32))
    outs = [A @ x, gs.spmm(A, x), gst.spmm(A, x), A @ x.clone().requires_grad_(),
            gs.spmm(A, x.clone().requires_grad_()), gst.spmm(A, x.clone().requires_grad_())]
    for o in outs[1:]:
        assert torch.equal(o.detach(), outs[0])
    assert [o.requires_grad for o in outs] == [False] * 3 + [True] * 3
    half = x.half()
    for f in (lambda t: A @ t, lambda t: gs.spmm(A, t), lambda t: gst.spmm(A, t)):
        for t in (half, half.clone().requires_grad_()):
            with pytest.raises(TypeError, match="X has dtype float16; the sycl backend takes float32, float64"):
                f(t)
    with pytest.raises(ValueError, match="reduce must be one of sum, mean, max, min"):
        gst.spmm(A, x, "prod")
    for t in (x, x.clone().requires_grad_()):  # precision= reaches the kernel on both paths
        with pytest.raises(ValueError, match="precision must be one of"):
            gs.spmm(A, t, precision="fp8")
        assert torch.equal(gs.spmm(A, t, precision="tf32").detach(), outs[0])


def test_package_init_hands_names_on():
    """gnnsparse.quant's namespace is its __all__ and its submodules (no numpy, math, ... leaking)."""
    import types

    q = gs.quant
    extra = {n for n in dir(q) if not n.startswith("_") and n not in q.__all__
             and not isinstance(getattr(q, n), types.ModuleType)}
    assert not extra, extra
    assert all(hasattr(q, n) for n in q.__all__)
