"""The public ops: every argument is checked here, once; then the backend that owns the dense
inputs' device runs the kernel (gnnsparse._backends).

Codes come from the one table of include/gnnsparse/ops.hpp (exported by gnnsparse._core), so adding
a reduction, an edge function or a dtype there makes it valid here. Non-contiguous dense inputs are
copied to contiguous ones; outputs are new arrays of the inputs' framework and device.
"""
from __future__ import annotations

import sys

from . import _arrays, _core
from ._backends import BackendUnavailable, backend_for
from ._csr import CSR, _val_dtype_for

REDUCTIONS = tuple(_core.REDUCE)
SDDMM_OPS = tuple(_core.SDDMM_OP)
EDGE_FUNCTIONS = tuple(_core.EDGE_FN)
PRECISIONS = tuple(_core.PRECISION)
_REDUCE, _OP, _EDGE, _PREC, _DTYPE = _core.REDUCE, _core.SDDMM_OP, _core.EDGE_FN, _core.PRECISION, _core.DTYPE
_ARG_REDUCE = frozenset(("max", "min"))

# Set by gnnsparse.torch when it is imported: (spmm, sddmm, fusedmm) with autograd, used for torch
# inputs that require grad, so that a graph is never dropped silently.
AUTOGRAD = None


def _code(table, what, value) -> int:
    c = table.get(value)
    if c is None:
        raise ValueError(f"{what} must be one of {', '.join(table)}; got {value!r}")
    return c


def _check_csr(A):
    if not isinstance(A, CSR):
        raise TypeError(f"A must be a gnnsparse.CSR, got {type(A).__name__} (see CSR.from_scipy / from_edge_index)")


def _needs_grad(*xs) -> bool:
    torch = sys.modules.get("torch")
    if torch is None or not torch.is_grad_enabled():
        return False
    return any(x is not None and isinstance(x, torch.Tensor) and x.requires_grad for x in xs)


def _autograd(name):
    if AUTOGRAD is None and "torch" in sys.modules:  # the input is a torch tensor: torch is there
        import importlib

        importlib.import_module("gnnsparse.torch")  # sets AUTOGRAD
    if AUTOGRAD is None:
        raise RuntimeError(f"an input of gnnsparse.{name} requires grad: import gnnsparse.torch for the "
                           "differentiable ops, or pass tensors without requires_grad (torch.no_grad())")
    return getattr(AUTOGRAD, name)


def _backend(A, X):
    """The backend of X's device; if X's backend cannot run here but the CSR lives elsewhere, the
    error names both places (the likely mistake) rather than the missing backend."""
    try:
        return backend_for(X)
    except BackendUnavailable as e:
        k = _arrays.kind(X)
        if A.kind != k:
            raise ValueError(f"X is a {k} array but the CSR lives on {A.kind}: put them on one device "
                             f"(and note: {e})") from e
        raise


def _dense(b, name, x, expect=None):
    """(x made contiguous in its framework, its dtype name), checked against the backend and `expect`."""
    dt = _arrays.dtype_name(x)
    if dt not in b.dtypes:
        raise TypeError(f"{name} has dtype {dt}; the {b.name} backend takes {', '.join(sorted(b.dtypes))}")
    if expect is not None and dt != expect:
        raise TypeError(f"{name} has dtype {dt} but X has {expect}; pass all dense inputs in one dtype")
    return b.prepare(x), dt


def _same_place(b, place, **others):
    for name, x in others.items():
        k = _arrays.kind(x)
        p = b.place(x) if backend_for(x) is b else k
        if p != place:
            why = place.explain(p) if hasattr(place, "explain") else ""
            raise ValueError(f"X is on {place} but {name} is on {p}{why}; all dense inputs must live on one device")


def _shaped(x, shape):
    """x viewed as `shape` (reshape only when needed: dpnp's reshape costs tens of microseconds)."""
    return x if tuple(x.shape) == shape else x.reshape(shape)


def _wrap(X0, X, *outs):
    """Outputs of a torch CPU input come back as torch tensors (they ran on the SYCL CPU device as
    NumPy, zero copy both ways)."""
    if X0 is not X and _arrays.is_torch(X0) and not X0.is_cuda:
        import torch

        return tuple(None if o is None else torch.from_numpy(o) for o in outs)
    return outs


def spmm(A: CSR, X, reduce: str = "sum", return_arg: bool = False, *, precision: str = "fp32"):
    """Y = A (x) X with reduction `reduce` in {sum, mean, max, min} (semantics: include/gnnsparse/ops.hpp).

    X is (K, ...) on any backend's device; Y is (M, ...) in X's framework and dtype. With
    return_arg=True (max/min only) also returns arg (M, ...) int64: the CSR position k of the winning
    entry, -1 for empty rows. Weighted when A has values. `precision` ("fp32", "tf32", "bf16") lets
    kernels that use tensor cores trade accuracy for speed; the others compute in float32 or better.
    """
    red = _code(_REDUCE, "reduce", reduce)
    if return_arg and reduce not in _ARG_REDUCE:
        raise ValueError("return_arg is only defined for reduce='max' or 'min'")
    prec = _code(_PREC, "precision", precision)
    _check_csr(A)
    if _needs_grad(X, A.val):
        return _autograd("spmm")(A, X, reduce, return_arg)
    b = _backend(A, X)
    X0 = X
    X, dt = _dense(b, "X", X)
    M, K = A.shape
    shape = X.shape
    if len(shape) == 0 or shape[0] != K:
        raise ValueError(f"X has shape {tuple(shape)} but A is {M} x {K}: X needs {K} rows")
    tail = tuple(shape[1:])
    C = 1
    for s in tail:
        C *= s
    view = A._view(b, b.place(X), X, None if A.val is None else _val_dtype_for(dt))
    Y, arg = b.spmm(view, _shaped(X, (K, C)), M, C, _DTYPE[dt][0], red, return_arg, prec)
    if len(tail) != 1:
        Y = Y.reshape((M,) + tail)
        arg = None if arg is None else arg.reshape((M,) + tail)
    Y, arg = _wrap(X0, X, Y, arg)
    return (Y, arg) if return_arg else Y


def _sddmm_shapes(A, X, Y, op):
    M, K = A.shape
    sx, sy = tuple(X.shape), tuple(Y.shape)
    if len(sx) == 0 or sx[0] != M:
        raise ValueError(f"X has shape {sx} but A is {M} x {K}: X needs {M} rows")
    if len(sy) == 0 or sy[0] != K:
        raise ValueError(f"Y has shape {sy} but A is {M} x {K}: Y needs {K} rows")
    if sx[1:] != sy[1:]:
        raise ValueError(f"X {sx} and Y {sy} must agree beyond their first axis")
    if op == "dot":
        if len(sx) not in (2, 3):
            raise ValueError(f"sddmm 'dot' takes X of shape (M, F) or (M, H, F), got {sx}")
        H, F = (1, sx[1]) if len(sx) == 2 else sx[1:]
        return (M, H, F), (K, H, F), H, F, len(sx) == 2
    if len(sx) not in (1, 2):
        raise ValueError(f"sddmm 'add' takes X of shape (M,) or (M, H), got {sx}")
    H = 1 if len(sx) == 1 else sx[1]
    return (M, H), (K, H), H, 1, len(sx) == 1


def sddmm(A: CSR, X, Y, op: str = "dot", *, precision: str = "fp32"):
    """Per stored entry k = (i, j): 'dot' -> <X[i], Y[j]> over the feature axis (X (M, F) -> (nnz,),
    X (M, H, F) -> (nnz, H)); 'add' -> X[i] + Y[j] (X (M,) or (M, H), GAT logits). A's values are unused."""
    opc = _code(_OP, "op", op)
    prec = _code(_PREC, "precision", precision)
    _check_csr(A)
    if _needs_grad(X, Y):
        return _autograd("sddmm")(A, X, Y, op)
    b = _backend(A, X)
    X0 = X
    X, dt = _dense(b, "X", X)
    Y, _ = _dense(b, "Y", Y, dt)
    place = b.place(X)
    _same_place(b, place, Y=Y)
    xs, ys, H, F, squeeze = _sddmm_shapes(A, X, Y, op)
    view = A._view(b, place, X, None)
    E = b.sddmm(view, _shaped(X, xs), _shaped(Y, ys), A.nnz, H, F, _DTYPE[dt][0], opc, prec)
    return _wrap(X0, X, E.reshape((A.nnz,)) if squeeze else E)[0]


def fusedmm(A: CSR, X, Y, Z, op: str = "dot", edge: str = "none", slope: float = 0.2, return_edges: bool = False,
            *, precision: str = "fp32"):
    """Out[i] = sum_k w_k * Z[col_k], w = edge(sddmm(A, X, Y, op)) [* A.val], without storing w.

    edge in {none, leaky_relu (slope), exp, softmax (per row, per head, max-subtracted),
    leaky_relu_softmax (the softmax of leaky_relu: GAT attention)}. Heads: X/Y
    as in sddmm, Z (K, D) for one head or (K, H, D); Out is (M, D) or (M, H, D). return_edges=True also
    returns w, shaped like sddmm's output (what a backward pass needs).
    """
    opc = _code(_OP, "op", op)
    edc = _code(_EDGE, "edge", edge)
    prec = _code(_PREC, "precision", precision)
    _check_csr(A)
    if _needs_grad(X, Y, Z, A.val):
        return _autograd("fusedmm")(A, X, Y, Z, op, edge, slope, return_edges)
    b = _backend(A, X)
    X0 = X
    X, dt = _dense(b, "X", X)
    Y, _ = _dense(b, "Y", Y, dt)
    Z, _ = _dense(b, "Z", Z, dt)
    place = b.place(X)
    _same_place(b, place, Y=Y, Z=Z)
    xs, ys, H, F, squeeze = _sddmm_shapes(A, X, Y, op)
    M, K = A.shape
    sz = tuple(Z.shape)
    if len(sz) == 2 and H == 1:
        zs, D = (K, 1, sz[1]), sz[1]
    elif len(sz) == 3 and sz[1] == H:
        zs, D = sz, sz[2]
    else:
        raise ValueError(f"Z has shape {sz}; with {H} head(s) it must be (K, D) (one head) or (K, {H}, D)")
    if sz[0] != K:
        raise ValueError(f"Z has shape {sz} but A is {M} x {K}: Z needs {K} rows")
    view = A._view(b, place, X, None if A.val is None else _val_dtype_for(dt))
    out, E = b.fusedmm(view, _shaped(X, xs), _shaped(Y, ys), _shaped(Z, zs), M, H, F, D, _DTYPE[dt][0], opc, edc,
                       float(slope), return_edges, prec)
    out = out.reshape((M, D)) if len(sz) == 2 else out
    if E is not None and squeeze:
        E = E.reshape((A.nnz,))
    out, E = _wrap(X0, X, out, E)
    return (out, E) if return_edges else out
