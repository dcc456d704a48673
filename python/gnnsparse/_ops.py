"""The public ops: check arguments, pick the backend from where the dense inputs live, reshape, call.

Non-contiguous dense inputs are copied to a contiguous array first (NumPy, torch, CuPy); strided USM
arrays are rejected. Outputs are new arrays of the inputs' framework and device.
"""
from __future__ import annotations

from . import _arrays
from ._backends import backend_for
from ._csr import CSR

REDUCTIONS = ("sum", "mean", "max", "min")
SDDMM_OPS = ("dot", "add")
EDGE_FUNCTIONS = ("none", "leaky_relu", "exp", "softmax")
FLOAT_DTYPES = ("float32", "float64", "float16", "bfloat16")


def _check_csr(A):
    if not isinstance(A, CSR):
        raise TypeError(f"A must be a gnnsparse.CSR, got {type(A).__name__} (see CSR.from_scipy / from_edge_index)")


def _check_choice(what, value, choices):
    if value not in choices:
        raise ValueError(f"{what} must be one of {', '.join(choices)}; got {value!r}")


def _dense(b, name, x, dtype=None):
    """x made contiguous; its dtype checked against the backend's (and against `dtype` if given)."""
    if b.name == "sycl" and _arrays.kind(x) == "numpy" and not hasattr(x, "dtype"):
        import numpy as np

        x = np.asarray(x)
    dt = _arrays.dtype_name(x)
    supported = getattr(b, "dtypes", FLOAT_DTYPES)
    if dt not in supported:
        raise TypeError(f"{name} has dtype {dt}; the {b.name} backend takes {', '.join(supported)}")
    if dtype is not None and dt != dtype:
        raise TypeError(f"{name} has dtype {dt} but X has {dtype}; pass all dense inputs in one dtype")
    return b.contiguous(x)


def _same_place(b, first, **others):
    k0, d0 = _arrays.kind(first), b.device_key(first)
    for name, x in others.items():
        if _arrays.kind(x) != k0 or b.device_key(x) != d0:
            raise ValueError(f"X is on {d0} ({k0}) but {name} is on "
                             f"{b.device_key(x) if _arrays.kind(x) == k0 else _arrays.kind(x)}; "
                             "all dense inputs must live on one device")


def _like_input(x, *outs):
    """Outputs of a torch CPU input come back as torch tensors (they ran on the SYCL CPU device as
    NumPy, zero copy both ways)."""
    if _arrays.is_torch(x) and x.device.type == "cpu":
        import torch

        return tuple(None if o is None else torch.from_numpy(o) for o in outs)
    return outs


def _val_dtype(A, dt):
    if A.val is None:
        return None
    return "float32" if dt in ("float16", "bfloat16") else dt


def spmm(A: CSR, X, reduce: str = "sum", return_arg: bool = False):
    """Y = A (x) X with reduction `reduce` in {sum, mean, max, min} (semantics: include/gnnsparse/ops.hpp).

    X is (K, ...) on any backend's device; Y is (M, ...) in X's framework and dtype. With
    return_arg=True (max/min only) also returns arg (M, ...) int64: the CSR position k of the winning
    entry, -1 for empty rows. Weighted when A has values.
    """
    _check_csr(A)
    _check_choice("reduce", reduce, REDUCTIONS)
    if return_arg and reduce not in ("max", "min"):
        raise ValueError("return_arg is only defined for reduce='max' or 'min'")
    b = backend_for(X)
    X0, X = X, _dense(b, "X", X)
    M, K = A.shape
    shape = _arrays.shape_of(X)
    if len(shape) == 0 or shape[0] != K:
        raise ValueError(f"X has shape {shape} but A is {M} x {K}: X needs {K} rows")
    tail = shape[1:]
    C = 1
    for s in tail:
        C *= s
    dt = _arrays.dtype_name(X)
    rowptr, col, val = A.device_arrays(b, X, _val_dtype(A, dt))
    Y, arg = b.spmm(rowptr, col, val, X.reshape(K, C), M, K, reduce, return_arg)
    Y, arg = _like_input(X0, Y.reshape((M,) + tail), None if arg is None else arg.reshape((M,) + tail))
    return (Y, arg) if return_arg else Y


def _sddmm_shapes(A, X, Y, op):
    M, K = A.shape
    sx, sy = _arrays.shape_of(X), _arrays.shape_of(Y)
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


def sddmm(A: CSR, X, Y, op: str = "dot"):
    """Per stored entry k = (i, j): 'dot' -> <X[i], Y[j]> over the feature axis (X (M, F) -> (nnz,),
    X (M, H, F) -> (nnz, H)); 'add' -> X[i] + Y[j] (X (M,) or (M, H), GAT logits). A's values are unused."""
    _check_csr(A)
    _check_choice("op", op, SDDMM_OPS)
    b = backend_for(X)
    X0, X = X, _dense(b, "X", X)
    Y = _dense(b, "Y", Y, _arrays.dtype_name(X))
    _same_place(b, X, Y=Y)
    xs, ys, H, F, squeeze = _sddmm_shapes(A, X, Y, op)
    M, K = A.shape
    rowptr, col, _ = A.device_arrays(b, X, None)
    E = b.sddmm(rowptr, col, X.reshape(xs), Y.reshape(ys), M, K, op)
    return _like_input(X0, E.reshape((A.nnz,)) if squeeze else E)[0]


def fusedmm(A: CSR, X, Y, Z, op: str = "dot", edge: str = "none", slope: float = 0.2, return_edges: bool = False):
    """Out[i] = sum_k w_k * Z[col_k], w = edge(sddmm(A, X, Y, op)) [* A.val], without storing w.

    edge in {none, leaky_relu (slope), exp, softmax (per row, per head, max-subtracted)}. Heads: X/Y
    as in sddmm, Z (K, D) for one head or (K, H, D); Out is (M, D) or (M, H, D). return_edges=True also
    returns w, shaped like sddmm's output (what a backward pass needs).
    """
    _check_csr(A)
    _check_choice("op", op, SDDMM_OPS)
    _check_choice("edge", edge, EDGE_FUNCTIONS)
    b = backend_for(X)
    X0, X = X, _dense(b, "X", X)
    dt = _arrays.dtype_name(X)
    Y = _dense(b, "Y", Y, dt)
    Z = _dense(b, "Z", Z, dt)
    _same_place(b, X, Y=Y, Z=Z)
    xs, ys, H, F, squeeze = _sddmm_shapes(A, X, Y, op)
    M, K = A.shape
    sz = _arrays.shape_of(Z)
    if len(sz) == 2 and H == 1:
        zs, D = (K, 1, sz[1]), sz[1]
    elif len(sz) == 3 and sz[1] == H:
        zs, D = sz, sz[2]
    else:
        raise ValueError(f"Z has shape {sz}; with {H} head(s) it must be (K, D) (one head) or (K, {H}, D)")
    if sz[0] != K:
        raise ValueError(f"Z has shape {sz} but A is {M} x {K}: Z needs {K} rows")
    rowptr, col, val = A.device_arrays(b, X, _val_dtype(A, dt))
    out, E = b.fusedmm(rowptr, col, val, X.reshape(xs), Y.reshape(ys), Z.reshape(zs), M, K, op, edge, float(slope),
                       return_edges)
    out = out.reshape((M, D)) if len(sz) == 2 else out
    if E is not None and squeeze:
        E = E.reshape((A.nnz,))
    out, E = _like_input(X0, out, E)
    return (out, E) if return_edges else out
