"""Quantized tensors and ops for GNN training (after Tango, Chen et al., SC'23).

    import gnnsparse as gs
    Q = gs.quantize(X, bits=8)                 # int8 (or bits=4: packed int4) + a device scale
    Y = gs.quant.spmm(A, Q, reduce="sum")      # float32, dequantized on the fly
    E = gs.quant.sddmm(A, Q, Q, op="dot")      # exact integer dot products, times s_X * s_Y
    H = gs.quant.matmul(X, W)                  # int8 tensor cores (torch._int_mm), scale applied after
    bits, err = gs.quant.select_bits(H1)       # Tango's Error_X rule: smallest width with error < 0.3

Semantics (scale, rounding, accumulation, exactness, overflow guards): include/gnnsparse/quant.hpp;
the element arithmetic is sycl/kernels/quant_math.hpp and its NumPy model gnnsparse.quant.model.
Symmetric per-tensor scale s = max|X| / (2^(B-1) - 1), found on the device (it never visits the
host unless you ask: QTensor.scale_value(), or quantize(check=True)).
Stochastic rounding uses Philox4x32-10 keyed by (seed, element index): the same seed gives the
same bits on every run, launch geometry and backend.
"""
from __future__ import annotations

import math
import secrets

import numpy as np

from .. import _arrays, _core
from .._backends import backend_for
from .._csr import CSR
from . import model

__all__ = ["QTensor", "quantize", "dequantize", "spmm", "incidence_spmm", "sddmm", "fusedmm", "matmul", "linear",
           "error_x", "select_bits", "BITS", "model"]

BITS = (4, 8)
_ROUNDING = {"nearest": 0, "stochastic": 1}
_FLOATS = ("float32", "float64", "float16", "bfloat16")


class QTensor:
    """A quantized tensor: `data` (rows x row_bytes: int8, or uint8 holding two int4 per byte, low
    nibble first, rows padded to whole bytes), `scale` (float32 [s, 1/s] on the data's device),
    `bits`, and the logical `shape` of the float tensor it came from. The first axis is the row
    axis; the others are flattened into `C` features per row (see include/gnnsparse/quant.hpp).
    Arrays are in the framework of the quantized input (NumPy, torch, CuPy, dpnp)."""

    __slots__ = ("data", "scale", "bits", "shape", "seed", "stochastic", "__weakref__")

    def __init__(self, data, scale, bits: int, shape, seed=None, stochastic=True):
        self.data, self.scale, self.bits = data, scale, int(bits)
        self.shape = tuple(int(s) for s in shape)
        self.seed, self.stochastic = seed, stochastic

    @property
    def rows(self) -> int:
        return model.rows_cols(self.shape)[0]

    @property
    def C(self) -> int:
        return model.rows_cols(self.shape)[1]

    @property
    def row_bytes(self) -> int:
        return self.C if self.bits == 8 else (self.C + 1) // 2

    @property
    def qmax(self) -> int:
        return model.qmax_of(self.bits)

    @property
    def kind(self) -> str:
        return _arrays.kind(self.data)

    @property
    def nbytes(self) -> int:
        return self.rows * self.row_bytes

    def scale_value(self) -> float:
        """s as a Python float (reads the device scalar: a synchronization on a GPU)."""
        return float(_arrays.to_numpy(self.scale)[0])

    def dequantize(self):
        return dequantize(self)

    def int8(self):
        """The integer values as int8 of the logical shape, in the data's framework (unpacks int4)."""
        if self.bits == 8:
            return self.data.reshape(self.shape)
        return _unpack4(self.data, self.shape)

    def __repr__(self):
        return (f"QTensor(shape={self.shape}, bits={self.bits}, rounding="
                f"{'stochastic' if self.stochastic else 'nearest'}, on={self.kind})")


def _check_bits(bits):
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or bits not in BITS:
        raise ValueError(f"bits must be 4 or 8, got {bits!r}")
    return int(bits)


def _as_float32(X):
    dt = _arrays.dtype_name(X)
    if dt not in _FLOATS:
        raise TypeError(f"quantize takes a floating-point tensor (float32, float64, float16, bfloat16); got {dt}")
    if dt == "float32":
        return X
    if _arrays.is_torch(X):
        import torch

        return X.to(torch.float32)
    return X.astype(np.float32)


def _seed(seed) -> int:
    if seed is None:
        return secrets.randbits(64)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**64:
        raise ValueError(f"seed must be an integer in [0, 2**64) or None, got {seed!r}")
    return int(seed)


def _wrap_like(X0, X, *outs):
    """Outputs of a torch CPU input come back as torch tensors (they ran on the SYCL CPU device)."""
    if X0 is not X and _arrays.is_torch(X0) and not X0.is_cuda:
        import torch

        return tuple(None if o is None else torch.from_numpy(o) for o in outs)
    return outs


def quantize(X, bits: int = 8, stochastic: bool = True, seed=None, *, check: bool = True) -> QTensor:
    """Quantize X to `bits` (8 or 4) with one symmetric scale s = max|X| / (2^(bits-1) - 1).

    stochastic=True rounds up with probability equal to the fraction (unbiased: E[s q] = X);
    seed=None draws a fresh seed, an int makes the result bitwise reproducible. Float64 / float16 /
    bfloat16 inputs are converted to float32 first; other dtypes raise TypeError. An all-zero X
    gives s = 0 and q = 0. X holding NaN or +-inf: check=True (default) raises ValueError (it reads
    the scale, one synchronization on a GPU); check=False keeps everything on the device and the
    scale is NaN, so every result computed from the tensor is NaN.
    """
    bits = _check_bits(bits)
    X0 = X
    X = _as_float32(X)
    b = backend_for(X)
    X1 = X
    X = b.prepare(X)
    rows, C = model.rows_cols(_arrays.shape_of(X))
    s = _seed(seed) if stochastic else 0
    data, scale = b.quantize(X.reshape(rows, C), rows, C, bits, _ROUNDING["stochastic" if stochastic else "nearest"],
                             s)
    data, scale = _wrap_like(X1, X, data, scale)
    Q = QTensor(data, scale, bits, _arrays.shape_of(X0), s if stochastic else None, bool(stochastic))
    if check and math.isnan(Q.scale_value()):
        raise ValueError("cannot quantize: X contains NaN or infinity (its scale max|X| / qmax is not finite); "
                         "pass check=False to get a NaN scale instead")
    return Q


def _prep(b, Q: QTensor, name: str):
    if not isinstance(Q, QTensor):
        raise TypeError(f"{name} must be a gnnsparse.QTensor (gnnsparse.quantize(...)), got {type(Q).__name__}")
    return b.prepare(Q.data), b.prepare(Q.scale)


def dequantize(Q: QTensor):
    """s * q as float32 with Q's logical shape, in Q's framework and device."""
    if not isinstance(Q, QTensor):
        raise TypeError(f"dequantize takes a gnnsparse.QTensor, got {type(Q).__name__}")
    b = backend_for(Q.data)
    data, scale = _prep(b, Q, "Q")
    Y = b.dequantize(data, scale, Q.bits, Q.rows, Q.C)
    Y = _wrap_like(Q.data, data, Y)[0]
    return Y.reshape(Q.shape)


def _unpack4(data, shape):
    """Packed int4 bytes -> int8 values of `shape`, in data's framework (torch or NumPy)."""
    R, C = model.rows_cols(shape)
    if _arrays.is_torch(data):
        import torch

        b = data.reshape(R, (C + 1) // 2).to(torch.int16)
        lo = ((b & 0xF) ^ 8) - 8
        hi = ((b >> 4) ^ 8) - 8
        out = torch.stack([lo, hi], dim=-1).reshape(R, 2 * ((C + 1) // 2))[:, :C]
        return out.to(torch.int8).reshape(shape)
    return model.unpack4(_arrays.to_numpy(data), shape)


# ---------------------------------------------------------------------------------------------
# quantized ops
# ---------------------------------------------------------------------------------------------
def _backend_for_q(A, Q, name="X"):
    if not isinstance(A, CSR):
        raise TypeError(f"A must be a gnnsparse.CSR, got {type(A).__name__}")
    if not isinstance(Q, QTensor):
        raise TypeError(f"{name} must be a gnnsparse.QTensor (gnnsparse.quantize(...)), got {type(Q).__name__}")
    try:
        return backend_for(Q.data)
    except Exception as e:
        if A.kind != Q.kind:
            raise ValueError(f"the quantized {name} lives on {Q.kind} but the CSR on {A.kind}: put them on one "
                             f"device (and note: {e})") from e
        raise


def spmm(A: CSR, X: QTensor, reduce: str = "sum", return_arg: bool = False, *, weights=None):
    """Y = A (x) dequantize(X) with reduction `reduce`, float32 (semantics: gnnsparse.spmm; exact
    integer sums / max / min without edge weights, see include/gnnsparse/quant.hpp).

    X has K rows. weights=None: A's values (if any) weight the messages. weights (nnz, H) float32:
    multi-head aggregation in one launch, Y[i, h, :] = reduce_k weights[k, h] * X[col_k, h, :]
    (X's features split into H heads of C / H; Y is (M, H, C / H)); A's values are then unused.
    """
    red = _core.REDUCE.get(reduce)
    if red is None:
        raise ValueError(f"reduce must be one of {', '.join(_core.REDUCE)}; got {reduce!r}")
    if return_arg and reduce not in ("max", "min"):
        raise ValueError("return_arg is only defined for reduce='max' or 'min'")
    b = _backend_for_q(A, X)
    M, K = A.shape
    if X.rows != K or len(X.shape) == 0:
        raise ValueError(f"X has shape {X.shape} but A is {M} x {K}: X needs {K} rows")
    return _qspmm(b, A, X, red, return_arg, weights, identity=False, out_rows=M)


def _qspmm(b, A, X, red, return_arg, weights, identity, out_rows, view_csr=None, use_values=True):
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
    Y, arg = b.qspmm(view, data, xs, X.bits, C, out_rows, red, W, H, identity, return_arg)
    Y, arg = _wrap_like(X.data, data, Y, arg)
    shape = (out_rows,) + tail
    Y = Y.reshape(shape)
    arg = None if arg is None else arg.reshape(shape)
    return (Y, arg) if return_arg else Y


_INCIDENCE_SIDES = ("dst", "src")


def incidence_spmm(A: CSR, E: QTensor, reduce: str = "sum", side: str = "dst", return_arg: bool = False):
    """Edge -> node aggregation with the incidence matrix (Tango's gradient of node features from
    edge features): E has one row per stored entry of A, in A's CSR order.

    side="dst": Y[i] = reduce over the entries k of row i of E[k] (M rows; no index array is read).
    side="src": Y[j] = reduce over the entries k with col[k] == j of E[k] (K rows), in ascending k.
    No all-ones matrix is built; the integers are summed exactly (as spmm without weights).
    """
    red = _core.REDUCE.get(reduce)
    if red is None:
        raise ValueError(f"reduce must be one of {', '.join(_core.REDUCE)}; got {reduce!r}")
    if side not in _INCIDENCE_SIDES:
        raise ValueError(f"side must be 'dst' or 'src', got {side!r}")
    if return_arg and reduce not in ("max", "min"):
        raise ValueError("return_arg is only defined for reduce='max' or 'min'")
    b = _backend_for_q(A, E, "E")
    if E.rows != A.nnz or len(E.shape) == 0:
        raise ValueError(f"E has shape {E.shape} but A has {A.nnz} stored entries: E needs one row per entry")
    M, K = A.shape
    if side == "dst":
        return _qspmm(b, A, E, red, return_arg, None, identity=True, out_rows=M, use_values=False)
    return _qspmm(b, A, E, red, return_arg, None, identity=False, out_rows=K, view_csr=_src_incidence(A))


def _src_incidence(A: CSR) -> CSR:
    """The K x nnz incidence matrix of A's columns: row j lists the entry ids k with col[k] == j
    (A.T's structure with its perm as column indices), cached with A.T."""
    T = A.T
    inc = getattr(T, "_quant_src_incidence", None)
    if inc is None:
        perm = np.asarray(T.perm, dtype=np.dtype(A.index_dtype))
        rowptr = _arrays.to_numpy(T.rowptr)
        inc = CSR(rowptr, perm, None, (A.shape[1], A.nnz), validate=False)
        if A.kind != "numpy":
            inc = inc.to_like(A.rowptr)
        T._quant_src_incidence = inc
    return inc


def _sddmm_shapes(A, X: QTensor, Y: QTensor, op):
    from .._ops import _sddmm_shapes as shapes

    class _S:  # shape carriers for the frontend's checker
        def __init__(self, s):
            self.shape = s

    return shapes(A, _S(X.shape), _S(Y.shape), op)


def sddmm(A: CSR, X: QTensor, Y: QTensor, op: str = "dot"):
    """Per stored entry k = (i, j): 'dot' -> fl32(s_X s_Y) * <qx[i], qy[j]> (exact integer dot
    product; X (M, F) -> (nnz,), (M, H, F) -> (nnz, H)); 'add' -> s_X qx[i] + s_Y qy[j] (X (M,) or
    (M, H)). X and Y may have different bits. float32 output."""
    opc = _core.SDDMM_OP.get(op)
    if opc is None:
        raise ValueError(f"op must be one of {', '.join(_core.SDDMM_OP)}; got {op!r}")
    b = _backend_for_q(A, X)
    xd, xs = _prep(b, X, "X")
    yd, ys = _prep(b, Y, "Y")
    place = b.place(xd)
    _check_place(b, place, Y=yd)
    _, _, H, F, squeeze = _sddmm_shapes(A, X, Y, op)
    view = A._view(b, place, xd, None)
    E = b.qsddmm(view, xd, xs, X.bits, yd, ys, Y.bits, A.nnz, H, F, opc)
    E = _wrap_like(X.data, xd, E)[0]
    return E.reshape((A.nnz,)) if squeeze else E


def _check_place(b, place, **arrays):
    for name, a in arrays.items():
        k = _arrays.kind(a)
        p = b.place(a) if backend_for(a) is b else k
        if p != place:
            raise ValueError(f"X is on {place} but {name} is on {p}; all quantized inputs must live on one device")


def fusedmm(A: CSR, X: QTensor, Y: QTensor, Z: QTensor, op: str = "dot", edge: str = "none", slope: float = 0.2,
            return_edges: bool = False):
    """Out[i] = sum_k w_k * dequantize(Z)[col_k], w = edge(quant.sddmm(A, X, Y, op)) [* A.val]
    (semantics: gnnsparse.fusedmm; X and Y need the same bits, Z any). float32 outputs."""
    opc = _core.SDDMM_OP.get(op)
    if opc is None:
        raise ValueError(f"op must be one of {', '.join(_core.SDDMM_OP)}; got {op!r}")
    edc = _core.EDGE_FN.get(edge)
    if edc is None:
        raise ValueError(f"edge must be one of {', '.join(_core.EDGE_FN)}; got {edge!r}")
    b = _backend_for_q(A, X)
    if not isinstance(Y, QTensor) or not isinstance(Z, QTensor):
        raise TypeError("fusedmm takes QTensors X, Y and Z")
    if X.bits != Y.bits:
        raise ValueError(f"fusedmm needs X and Y of the same bits (got {X.bits} and {Y.bits})")
    xd, xs = _prep(b, X, "X")
    yd, ys = _prep(b, Y, "Y")
    zd, zs = _prep(b, Z, "Z")
    place = b.place(xd)
    _check_place(b, place, Y=yd, Z=zd)
    _, _, H, F, squeeze = _sddmm_shapes(A, X, Y, op)
    M, K = A.shape
    sz = Z.shape
    if len(sz) == 2 and H == 1:
        D = sz[1]
    elif len(sz) == 3 and sz[1] == H:
        D = sz[2]
    else:
        raise ValueError(f"Z has shape {sz}; with {H} head(s) it must be (K, D) (one head) or (K, {H}, D)")
    if sz[0] != K:
        raise ValueError(f"Z has shape {sz} but A is {M} x {K}: Z needs {K} rows")
    view = A._view(b, place, xd, None if A.val is None else "float32")
    out, E = b.qfusedmm(view, xd, xs, X.bits, yd, ys, Y.bits, zd, zs, Z.bits, M, H, F, D, opc, edc, float(slope),
                        return_edges)
    out, E = _wrap_like(X.data, xd, out, E)
    out = out.reshape((M, D)) if len(sz) == 2 else out
    if E is not None and squeeze:
        E = E.reshape((A.nnz,))
    return (out, E) if return_edges else out


# ---------------------------------------------------------------------------------------------
# GEMM, Error_X, bit-width rule
# ---------------------------------------------------------------------------------------------
from ._gemm import linear, matmul  # noqa: E402
from ._select import error_x, select_bits  # noqa: E402
