"""The quantized ops: SpMM (and the incidence SpMM of Tango's backward pass), SDDMM and FusedMM on
QTensors, float32 out (semantics: include/gnnsparse/quant.hpp).

Arguments are checked by the frontend's functions (gnnsparse._ops: check_spmm, check_sddmm,
check_fusedmm, backend_of, same_place), the same that check the float ops; only what is particular
to quantized operands (QTensor types, bits, per-head weights) is checked here.
"""
from __future__ import annotations

import numpy as np

from .. import _arrays, _ops
from .._csr import CSR
from . import _delayed
from ._delayed import DelayedScale
from ._tensor import QTensor, _prep, _seed, quantize

__all__ = ["spmm", "incidence_spmm", "sddmm", "fusedmm", "DelayedScale"]


def _qtensor(Q, name):
    if not isinstance(Q, QTensor):
        raise TypeError(f"{name} must be a gnnsparse.QTensor (gnnsparse.quantize(...)), got {type(Q).__name__}")


def _backend_for_q(A, Q, name="X"):
    _ops.check_csr(A)
    _qtensor(Q, name)
    return _ops.backend_of(A, Q.data, f"the quantized {name}")


def spmm(A: CSR, X: QTensor, reduce: str = "sum", return_arg: bool = False, *, weights=None,
         out: DelayedScale = None, seed=None):
    """Y = A (x) dequantize(X) with reduction `reduce`, float32 (semantics: gnnsparse.spmm; exact
    integer sums / max / min without edge weights, see include/gnnsparse/quant.hpp).

    X has K rows. weights=None: A's values (if any) weight the messages. weights (nnz, H) float32:
    multi-head aggregation in one launch, Y[i, h, :] = reduce_k weights[k, h] * X[col_k, h, :]
    (X's features split into H heads of C / H; Y is (M, H, C / H)); A's values are then unused.

    out (a DelayedScale): Y is returned quantized instead (a QTensor of out.bits), written by the
    SpMM's epilogue with the scale of out's previous output (delayed scaling; no float32 Y, no
    quantize pass; the first call calibrates by a probe pass that finds Y's absmax, still without a
    float32 Y). seed: the stochastic
    rounding's (None: a fresh one); the bits equal quantize(Y, seed=seed) with that scale.
    """
    _ops.check_csr(A)
    _qtensor(X, "X")
    c = _ops.check_spmm(A.shape, X.shape, reduce, return_arg)
    b = _backend_for_q(A, X)
    return _qspmm(b, A, X, c.reduce, return_arg, weights, identity=False, out_rows=c.M, out=out, seed=seed)


def _qspmm(b, A, X, red, return_arg, weights, identity, out_rows, view_csr=None, use_values=True, out=None,
           seed=None):
    if out is not None:
        if not isinstance(out, DelayedScale):
            raise TypeError(f"out must be a gnnsparse.quant.DelayedScale, got {type(out).__name__}")
        if return_arg:
            raise ValueError("return_arg is not available with a quantized output (out=...)")
        out._check_place(X.data, "quant.spmm")
        sd = _seed(seed) if out.stochastic else 0
        if out.scale is None:  # the first output: calibrated by two quantized passes, no float32 Y
            _calibrate_spmm(b, A, X, red, weights, identity, out_rows, view_csr, use_values, out)
    data, xs = _prep(b, X, "X")
    place = b.place(data)
    C = X.C
    W, H = None, 1
    tail = tuple(X.shape[1:])
    if weights is not None:
        if _arrays.kind(weights) != X.kind:
            raise ValueError(f"weights live on {_arrays.kind(weights)} but X on {X.kind}; put them on one device")
        if _arrays.dtype_name(weights) != "float32":
            raise TypeError(f"weights must be float32, got {_arrays.dtype_name(weights)}")
        W = b.prepare(weights)
        ws = tuple(_arrays.shape_of(W))
        if len(ws) not in (1, 2) or ws[0] != A.nnz:
            raise ValueError(f"weights must have shape (nnz,) or (nnz, H) with nnz = {A.nnz}, got {ws}")
        if len(ws) == 2:
            H = ws[1]
            if H < 1 or C % H:
                raise ValueError(f"X has {C} features per row, not divisible into {H} heads")
            tail = (H, C // H)
        W = W.reshape((A.nnz, H))
    csr = view_csr if view_csr is not None else A
    val_dt = "float32" if (use_values and csr.val is not None and W is None) else None
    view = csr._view(b, place, data, val_dt)
    if out is not None:
        Qd, sc = b.qspmm(view, data, xs, X.bits, C, out_rows, red, W, H, identity, False, out=out._args(b, sd))
        Qd, sc = _ops.wrap_like(X.data, data, Qd, sc)
        out._advance(sc)
        return QTensor(Qd, sc[:2], out.bits, (out_rows,) + tail, sd if out.stochastic else None, out.stochastic)
    Y, arg = b.qspmm(view, data, xs, X.bits, C, out_rows, red, W, H, identity, return_arg)
    Y, arg = _ops.wrap_like(X.data, data, Y, arg)
    shape = (out_rows,) + tail
    Y = Y.reshape(shape)
    arg = None if arg is None else arg.reshape(shape)
    return (Y, arg) if return_arg else Y


def _calibrate_spmm(b, A, X, red, weights, identity, out_rows, view_csr, use_values, out: DelayedScale):
    """out's first scale without a float32 Y (out_rows x C x 4 bytes, the largest transient of a
    quantized training's first backward): a probe pass writes Y quantized with a placeholder scale
    (saturated, thrown away) and finds Y's absmax, whose scale ({s, inv} of absmax, decay 0) is
    then out's: the caller's pass with it gives the bits of quantize(Y) (the DELAYED SCALING
    contract: scale_in equal to Y's own scale), as the float32 calibration did, at the cost of one
    more SpMM on the first call only. out.steps counts that caller's pass alone."""
    probe = DelayedScale(out.bits, stochastic=False)
    probe.scale = _delayed._zeros_like(X.data, 2) + 1.0  # {s, inv} = {1, 1}: any finite scale serves
    _qspmm(b, A, X, red, False, weights, identity, out_rows, view_csr, use_values, out=probe, seed=0)
    out.scale = probe.scale
    if out.stats is None:
        out.stats = _delayed._zeros_like(X.data, 2)


_INCIDENCE_SIDES = ("dst", "src")


def incidence_spmm(A: CSR, E: QTensor, reduce: str = "sum", side: str = "dst", return_arg: bool = False, *,
                   out: DelayedScale = None, seed=None):
    """Edge -> node aggregation with the incidence matrix (Tango's gradient of node features from
    edge features): E has one row per stored entry of A, in A's CSR order.

    side="dst": Y[i] = reduce over the entries k of row i of E[k] (M rows; no index array is read).
    side="src": Y[j] = reduce over the entries k with col[k] == j of E[k] (K rows), in ascending k.
    No all-ones matrix is built; the integers are summed exactly (as spmm without weights).
    out, seed: a quantized output with a delayed scale, as spmm's.
    """
    red = _ops.check_reduce(reduce, return_arg)
    if side not in _INCIDENCE_SIDES:
        raise ValueError(f"side must be 'dst' or 'src', got {side!r}")
    b = _backend_for_q(A, E, "E")
    if E.rows != A.nnz or len(E.shape) == 0:
        raise ValueError(f"E has shape {E.shape} but A has {A.nnz} stored entries: E needs one row per entry")
    M, K = A.shape
    if side == "dst":
        return _qspmm(b, A, E, red, return_arg, None, identity=True, out_rows=M, use_values=False, out=out, seed=seed)
    return _qspmm(b, A, E, red, return_arg, None, identity=False, out_rows=K, view_csr=_src_incidence(A), out=out,
                  seed=seed)


def _src_incidence(A: CSR) -> CSR:
    """The K x nnz incidence matrix of A's columns: row j lists the entry ids k with col[k] == j
    (A.T's structure with its perm as column indices), kept with A's structure."""

    def build():
        T = A.T
        perm = np.asarray(T.perm, dtype=np.dtype(A.index_dtype))
        inc = CSR(_arrays.to_numpy(T.rowptr), perm, None, (A.shape[1], A.nnz), validate=False)
        return inc.to_like(A.rowptr) if A.kind != "numpy" else inc

    return A.derived("quant.src_incidence", build)


def sddmm(A: CSR, X: QTensor, Y: QTensor, op: str = "dot"):
    """Per stored entry k = (i, j): 'dot' -> fl32(s_X s_Y) * <qx[i], qy[j]> (exact integer dot
    product; X (M, F) -> (nnz,), (M, H, F) -> (nnz, H)); 'add' -> s_X qx[i] + s_Y qy[j] (X (M,) or
    (M, H)). X and Y may have different bits. float32 output."""
    _ops.check_csr(A)
    _qtensor(X, "X")
    _qtensor(Y, "Y")
    s = _ops.check_sddmm(A.shape, X.shape, Y.shape, op)
    b = _backend_for_q(A, X)
    xd, xs = _prep(b, X, "X")
    yd, ys = _prep(b, Y, "Y")
    place = b.place(xd)
    _ops.same_place(b, place, "quantized inputs", Y=yd)
    view = A._view(b, place, xd, None)
    E = b.qsddmm(view, xd, xs, X.bits, yd, ys, Y.bits, A.nnz, s.H, s.F, s.op)
    E = _ops.wrap_like(X.data, xd, E)[0]
    return E.reshape((A.nnz,)) if s.squeeze else E


def fusedmm(A: CSR, X: QTensor, Y: QTensor, Z: QTensor, op: str = "dot", edge: str = "none", slope: float = 0.2,
            return_edges: bool = False):
    """Out[i] = sum_k w_k * dequantize(Z)[col_k], w = edge(quant.sddmm(A, X, Y, op)) [* A.val]
    (semantics: gnnsparse.fusedmm; X and Y need the same bits, Z any). float32 outputs."""
    _ops.check_csr(A)
    for name, Q in (("X", X), ("Y", Y), ("Z", Z)):
        _qtensor(Q, name)
    c = _ops.check_fusedmm(A.shape, X.shape, Y.shape, Z.shape, op, edge)
    if X.bits != Y.bits:
        raise ValueError(f"fusedmm needs X and Y of the same bits (got {X.bits} and {Y.bits})")
    b = _backend_for_q(A, X)
    xd, xs = _prep(b, X, "X")
    yd, ys = _prep(b, Y, "Y")
    zd, zs = _prep(b, Z, "Z")
    place = b.place(xd)
    _ops.same_place(b, place, "quantized inputs", Y=yd, Z=zd)
    s = c.scores
    M = A.shape[0]
    view = A._view(b, place, xd, None if A.val is None else "float32")
    out, E = b.qfusedmm(view, xd, xs, X.bits, yd, ys, Y.bits, zd, zs, Z.bits, M, s.H, s.F, c.D, s.op, c.edge,
                        float(slope), return_edges)
    out, E = _ops.wrap_like(X.data, xd, out, E)
    out = out.reshape((M, c.D)) if len(Z.shape) == 2 else out
    if E is not None and s.squeeze:
        E = E.reshape((A.nnz,))
    return (out, E) if return_edges else out
