"""The NumPy/SciPy oracle of every gnnsparse op (semantics: include/gnnsparse/ops.hpp).

Plain, vectorized NumPy in float64 (or the input's precision when asked), written for clarity,
not speed. Every test compares a backend against these functions.
"""
from __future__ import annotations

import numpy as np

__all__ = ["spmm", "spmm_heads", "gatv2_scores", "sddmm", "fusedmm", "edge_rows"]


def _host(a):
    """A NumPy view/copy of any array the package accepts (NumPy, torch, CuPy, USM)."""
    from ._arrays import to_numpy

    return to_numpy(a)


def edge_rows(A) -> np.ndarray:
    """Row index of every stored entry (COO rows), int64."""
    rowptr = _host(A.rowptr).astype(np.int64)
    return np.repeat(np.arange(A.shape[0], dtype=np.int64), np.diff(rowptr))


def _parts(A, dtype):
    rowptr = _host(A.rowptr).astype(np.int64)
    col = _host(A.col).astype(np.int64)
    val = None if A.val is None else _host(A.val).astype(dtype)
    return rowptr, col, val


def spmm(A, X, reduce: str = "sum", return_arg: bool = False, dtype=np.float64):
    """Y[i] = reduce over row i of val[k] * X[col[k]]; empty rows give 0 (and arg -1).

    max/min: NaN wins, ties go to the smallest edge index; arg holds that edge index.
    X may have trailing dimensions; they are flattened into features and restored.
    """
    X = np.asarray(_host(X), dtype=dtype)
    M, K = A.shape
    if X.shape[0] != K:
        raise ValueError(f"X has {X.shape[0]} rows, A has {K} columns")
    tail = X.shape[1:]
    Xf = X.reshape(K, int(np.prod(tail, dtype=np.int64)))
    C = Xf.shape[1]
    rowptr, col, val = _parts(A, dtype)
    rows = np.repeat(np.arange(M), np.diff(rowptr))
    msg = Xf[col] if val is None else val[:, None] * Xf[col]
    deg = np.diff(rowptr)
    Y = np.zeros((M, C), dtype)
    arg = np.full((M, C), -1, np.int64)
    if reduce in ("sum", "mean"):
        np.add.at(Y, rows, msg) if msg.size else None
        if reduce == "mean":
            nz = deg > 0
            Y[nz] /= deg[nz, None].astype(dtype)
    elif reduce in ("max", "min"):
        for i in np.nonzero(deg)[0]:  # per row: argmax/argmin take the first NaN, then the first extreme
            seg = msg[rowptr[i]: rowptr[i + 1]]
            idx = np.argmax(seg, axis=0) if reduce == "max" else np.argmin(seg, axis=0)
            Y[i] = seg[idx, np.arange(C)]
            arg[i] = rowptr[i] + idx
    else:
        raise ValueError(f"reduce must be one of sum, mean, max, min; got {reduce!r}")
    Y = Y.reshape((M,) + tail)
    arg = arg.reshape((M,) + tail)
    return (Y, arg) if return_arg else Y


def spmm_heads(A, W, Z, dtype=np.float64):
    """Out[i, h, :] = sum over row i of W[k, h] * Z[col[k], h, :]: W (nnz, H) in CSR order, Z (K, H, D)
    -> (M, H, D); empty rows give 0; A's values are not used."""
    W = np.asarray(_host(W), dtype=dtype)
    Z = np.asarray(_host(Z), dtype=dtype)
    M, K = A.shape
    col = _host(A.col).astype(np.int64)
    if Z.ndim != 3 or Z.shape[0] != K or W.shape != (col.shape[0], Z.shape[1]):
        raise ValueError(f"W {W.shape} and Z {Z.shape} do not fit A ({M} x {K}, {col.shape[0]} entries)")
    out = np.zeros((M,) + Z.shape[1:], dtype)
    if W.size:
        np.add.at(out, edge_rows(A), W[:, :, None] * Z[col])
    return out


def gatv2_scores(A, XL, XR, att, slope: float = 0.2, dtype=np.float64):
    """S[k, h] = sum_c att[h, c] * leaky_relu(XL[col k, h, c] + XR[i, h, c], slope) for each stored
    entry k = (i, col k) in CSR order: XL (K, H, C), XR (M, H, C), att (H, C) or (1, H, C) -> (nnz, H)."""
    XL = np.asarray(_host(XL), dtype=dtype)
    XR = np.asarray(_host(XR), dtype=dtype)
    M, K = A.shape
    col = _host(A.col).astype(np.int64)
    if XL.ndim != 3 or XR.ndim != 3 or XL.shape[0] != K or XR.shape[0] != M or XL.shape[1:] != XR.shape[1:]:
        raise ValueError(f"XL {XL.shape} and XR {XR.shape} do not fit A ({M} x {K})")
    att = np.asarray(_host(att), dtype=dtype).reshape(XL.shape[1:])
    z = XL[col] + XR[edge_rows(A)]
    return (np.where(z > 0, z, z * slope) * att).sum(-1)


def sddmm(A, X, Y, op: str = "dot", dtype=np.float64):
    """Per stored entry k = (i, j): dot: <X[i], Y[j]> over the last axis (heads kept);
    add: X[i, h] + Y[j, h]. Returns shape (nnz,) for 2-D dot inputs / 1-D add inputs, else (nnz, H)."""
    X = np.asarray(_host(X), dtype=dtype)
    Y = np.asarray(_host(Y), dtype=dtype)
    rows = edge_rows(A)
    col = _host(A.col).astype(np.int64)
    if op == "dot":
        return np.einsum("...f,...f->...", X[rows], Y[col])
    if op == "add":
        return X[rows] + Y[col]
    raise ValueError(f"op must be 'dot' or 'add'; got {op!r}")


def _edge_function(A, e, edge, slope):
    if edge == "none":
        return e
    if edge == "leaky_relu":
        return np.where(e > 0, e, slope * e)
    if edge == "exp":
        return np.exp(e)
    if edge in ("softmax", "leaky_relu_softmax"):
        if edge == "leaky_relu_softmax":
            e = np.where(e > 0, e, slope * e)
        rowptr = _host(A.rowptr).astype(np.int64)
        w = np.empty_like(e)
        for i in np.nonzero(np.diff(rowptr))[0]:
            s = e[rowptr[i]: rowptr[i + 1]]
            ex = np.exp(s - s.max(axis=0))
            w[rowptr[i]: rowptr[i + 1]] = ex / ex.sum(axis=0)
        return w
    raise ValueError(f"edge must be one of none, leaky_relu, exp, softmax, leaky_relu_softmax; got {edge!r}")


def fusedmm(A, X, Y, Z, op: str = "dot", edge: str = "none", slope: float = 0.2, return_edges: bool = False,
            dtype=np.float64):
    """Out[i, h] = sum_k w[k, h] * Z[j, h], w = edge_fn(sddmm(A, X, Y, op)) * val[k].

    Heads: X/Y (M, H, F)/(K, H, F) for dot or (M, H)/(K, H) for add, Z (K, H, D); 2-D dot
    inputs and a 2-D Z mean one head, and then Out is (M, D) and the edges (nnz,).
    """
    e = sddmm(A, X, Y, op, dtype=dtype)
    Z = np.asarray(_host(Z), dtype=dtype)
    one_head = e.ndim == 1
    e2 = e[:, None] if one_head else e
    w = _edge_function(A, e2, edge, slope)
    if A.val is not None:
        w = w * _host(A.val).astype(dtype)[:, None]
    Z3 = Z[:, None, :] if Z.ndim == 2 else Z
    if Z3.shape[1] != w.shape[1]:
        raise ValueError(f"Z has {Z3.shape[1]} heads, the edge scores have {w.shape[1]}")
    M = A.shape[0]
    rows = edge_rows(A)
    col = _host(A.col).astype(np.int64)
    out = np.zeros((M,) + Z3.shape[1:], dtype)
    if w.size:
        np.add.at(out, rows, w[:, :, None] * Z3[col])
    if one_head and Z.ndim == 2:
        out, w = out[:, 0], w[:, 0]
    return (out, w) if return_edges else out
