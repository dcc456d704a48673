"""The one frontend: the public ops, and the argument checks every path shares.

Every op has one checking function (`check_spmm`, `check_spmm_heads`, `check_gatv2`, `check_sddmm`,
`check_fusedmm`) that the float
ops below, the quantized ops (gnnsparse.quant) and the torch layer (gnnsparse.torch.functional)
all call; the dtype and same-device checks (`dense_dtype`, `same_place`) and the backend lookup
(`backend_of`) are shared the same way. Codes come from the one table of include/gnnsparse/ops.hpp,
exported by gnnsparse._core, so a row added there is valid here. Non-contiguous dense inputs are
copied to contiguous ones; outputs are new arrays of the inputs' framework and device.

Torch tensors: every call takes the path below (the checks, the CSR's cached view, the backend),
`A @ x`, `A.reduce(x)` and `gs.spmm(A, x)` alike. When a backward node is needed (grad mode on and
an input requires grad), the call is handed to the torch layer, which
checks it with the same function and whose torch.library op records the node and runs its forward
through the same `launch_*` below. (The checks run after the inputs are made contiguous: their
shapes are then the cheap ones of NumPy arrays; on the per-call path.)
gnnsparse.torch registers itself here when imported (`register_torch_layer`); nothing in the
core imports it, so a torch input that requires grad before it is imported raises an error
naming it rather than dropping the graph.
"""
from __future__ import annotations

import os
import sys
from typing import NamedTuple, Optional, Protocol

from . import _arrays, _core
from . import _dense as _dense_route
from ._backends import BackendUnavailable, backend_for
from ._csr import CSR, _astype, _val_dtype_for

REDUCTIONS = tuple(_core.REDUCE)
SDDMM_OPS = tuple(_core.SDDMM_OP)
EDGE_FUNCTIONS = tuple(_core.EDGE_FN)
PRECISIONS = tuple(_core.PRECISION)
_REDUCE, _OP, _EDGE, _PREC, _DTYPE = _core.REDUCE, _core.SDDMM_OP, _core.EDGE_FN, _core.PRECISION, _core.DTYPE
ARG_REDUCTIONS = frozenset(("max", "min"))  # the reductions with a winning entry (ops.hpp)


# ---------------------------------------------------------------- the torch layer
class TorchLayer(Protocol):
    """What gnnsparse.torch registers: differentiable (and traceable) forms of the ops, and the
    graph as tensors. They take the public ops' arguments."""

    def spmm(self, A, X, reduce: str, return_arg: bool, *, precision: str): ...

    def spmm_heads(self, A, W, Z): ...

    def gatv2_scores(self, A, XL, XR, att, slope: float): ...

    def sddmm(self, A, X, Y, op: str, *, precision: str): ...

    def fusedmm(self, A, X, Y, Z, op: str, edge: str, slope: float, return_edges: bool, *, precision: str): ...

    def graph_tensors(self, A, like): ...


_torch_layer: Optional[TorchLayer] = None
_torch_api = None  # (torch.Tensor, torch.is_grad_enabled) once torch is seen


def register_torch_layer(layer: TorchLayer) -> None:
    """Called by gnnsparse.torch when it is imported."""
    global _torch_layer
    _torch_layer = layer


def torch_layer(what: str) -> TorchLayer:
    if _torch_layer is None:
        raise RuntimeError(f"{what} needs gnnsparse.torch (autograd, the graph as tensors): import gnnsparse.torch "
                           "first, or pass tensors without requires_grad (torch.no_grad())")
    return _torch_layer


def _torch_route(X, others) -> bool:
    """Whether this call must go through the torch layer: X is a torch tensor, grad mode is on and X
    or one of `others` requires grad. On every call's path: torch's functions are looked up once.
    (Under torch.compile a CSR cannot be traced either way: gnnsparse.torch's ops on GraphTensors
    can, and are what layers use.)"""
    global _torch_api
    api = _torch_api
    if api is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        api = _torch_api = (torch.Tensor, torch.is_grad_enabled)
    T, grad_enabled = api
    if not isinstance(X, T) or not grad_enabled():
        return False
    if X.requires_grad:
        return True
    for x in others:
        if x is not None and isinstance(x, T) and x.requires_grad:
            return True
    return False


# ---------------------------------------------------------------- checks shared by every path
def code(table, what, value) -> int:
    c = table.get(value)
    if c is None:
        raise ValueError(f"{what} must be one of {', '.join(table)}; got {value!r}")
    return c


def check_csr(A, name="A"):
    if not isinstance(A, CSR):
        raise TypeError(f"{name} must be a gnnsparse.CSR, got {type(A).__name__} (see CSR.from_scipy / from_edge_index)")


def check_reduce(reduce, return_arg) -> int:
    red = code(_REDUCE, "reduce", reduce)
    if return_arg and reduce not in ARG_REDUCTIONS:
        raise ValueError("return_arg is only defined for reduce='max' or 'min'")
    return red


class SpmmCall(NamedTuple):
    reduce: int
    precision: int
    M: int
    K: int
    C: int  # features per row: the product of X's axes after the first
    tail: tuple  # X's axes after the first (Y has the same)


def check_spmm(shape, x_shape, reduce, return_arg, precision="fp32") -> SpmmCall:
    """SpMM of an M x K matrix and X of x_shape: codes and shapes, or the error naming the problem.
    (On every call's path: the common case takes dictionary lookups only.)"""
    red = _REDUCE.get(reduce)
    if red is None or (return_arg and reduce not in ARG_REDUCTIONS):
        check_reduce(reduce, return_arg)  # raises
    prec = _PREC.get(precision)
    if prec is None:
        code(_PREC, "precision", precision)  # raises
    M, K = shape
    if not x_shape or x_shape[0] != K:
        raise ValueError(f"X has shape {tuple(x_shape)} but A is {M} x {K}: X needs {K} rows")
    tail = tuple(x_shape[1:])
    if len(tail) == 1:
        C = tail[0]
    else:
        C = 1
        for s in tail:
            C *= s
    return tuple.__new__(SpmmCall, (red, prec, M, K, C, tail))


class HeadsCall(NamedTuple):
    M: int
    K: int
    H: int
    D: int


def check_spmm_heads(shape, nnz, w_shape, z_shape) -> HeadsCall:
    """spmm_heads of an M x K matrix with nnz entries: W (nnz, H), Z (K, H, D)."""
    M, K = shape
    sw, sz = tuple(w_shape), tuple(z_shape)
    if len(sz) != 3:
        raise ValueError(f"spmm_heads takes Z of shape (K, H, D), got {sz}")
    if sz[0] != K:
        raise ValueError(f"Z has shape {sz} but A is {M} x {K}: Z needs {K} rows")
    if sw != (nnz, sz[1]):
        raise ValueError(f"W has shape {sw} but must be ({nnz}, {sz[1]}): one weight per stored entry of A "
                         f"(CSR order) and head of Z")
    return HeadsCall(M, K, sz[1], sz[2])


class Gatv2Call(NamedTuple):
    M: int
    K: int
    H: int
    C: int


def check_gatv2(shape, xl_shape, xr_shape, att_shape) -> Gatv2Call:
    """gatv2_scores of an M x K matrix (targets x sources): XL (K, H, C), XR (M, H, C), att (H, C)
    or PyG's (1, H, C)."""
    M, K = shape
    sl, sr, sa = tuple(xl_shape), tuple(xr_shape), tuple(att_shape)
    if len(sl) != 3 or len(sr) != 3:
        raise ValueError(f"gatv2_scores takes XL of shape (K, H, C) and XR of shape (M, H, C), got {sl} and {sr}")
    if sl[0] != K:
        raise ValueError(f"XL has shape {sl} but A is {M} x {K}: XL needs {K} rows (one per source)")
    if sr[0] != M:
        raise ValueError(f"XR has shape {sr} but A is {M} x {K}: XR needs {M} rows (one per target)")
    if sl[1:] != sr[1:]:
        raise ValueError(f"XL has shape {sl} and XR {sr}: they need the same heads and channels")
    H, C = sl[1], sl[2]
    if sa not in ((H, C), (1, H, C)):
        raise ValueError(f"att has shape {sa} but must be ({H}, {C}) (or (1, {H}, {C})): one weight per head and channel")
    return Gatv2Call(M, K, H, C)


class SddmmCall(NamedTuple):
    op: int
    precision: int
    x_shape: tuple  # X as the kernels take it: (M, H, F) for dot, (M, H) for add
    y_shape: tuple
    H: int
    F: int
    squeeze: bool  # the caller gave one head without a head axis: E is (nnz,)


def check_sddmm(shape, x_shape, y_shape, op, precision="fp32") -> SddmmCall:
    opc = code(_OP, "op", op)
    prec = code(_PREC, "precision", precision)
    M, K = shape
    sx, sy = tuple(x_shape), tuple(y_shape)
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
        return SddmmCall(opc, prec, (M, H, F), (K, H, F), H, F, len(sx) == 2)
    if len(sx) not in (1, 2):
        raise ValueError(f"sddmm 'add' takes X of shape (M,) or (M, H), got {sx}")
    H = 1 if len(sx) == 1 else sx[1]
    return SddmmCall(opc, prec, (M, H), (K, H), H, 1, len(sx) == 1)


class FusedCall(NamedTuple):
    scores: SddmmCall
    edge: int
    z_shape: tuple  # (K, H, D)
    D: int


def check_fusedmm(shape, x_shape, y_shape, z_shape, op, edge, precision="fp32") -> FusedCall:
    s = check_sddmm(shape, x_shape, y_shape, op, precision)
    edc = code(_EDGE, "edge", edge)
    M, K = shape
    H = s.H
    sz = tuple(z_shape)
    if len(sz) == 2 and H == 1:
        zs, D = (sz[0], 1, sz[1]), sz[1]
    elif len(sz) == 3 and sz[1] == H:
        zs, D = sz, sz[2]
    else:
        raise ValueError(f"Z has shape {sz}; with {H} head(s) it must be (K, D) (one head) or (K, {H}, D)")
    if sz[0] != K:
        raise ValueError(f"Z has shape {sz} but A is {M} x {K}: Z needs {K} rows")
    return FusedCall(s, edc, zs, D)


def backend_of(A, X, name="X"):
    """The backend of X's device; if X's backend cannot run here but the CSR lives elsewhere, the
    error names both places (the likely mistake) rather than the missing backend."""
    try:
        return backend_for(X)
    except BackendUnavailable as e:
        k = _arrays.kind(X)
        if A.kind != k:
            raise ValueError(f"{name} is a {k} array but the CSR lives on {A.kind}: put them on one device "
                             f"(and note: {e})") from e
        raise


def dense_dtype(b, name, x, expect=None) -> str:
    """x's dtype name, checked against the backend's dtypes and `expect` (X's)."""
    dt = _arrays.dtype_name(x)
    if dt not in b.dtypes:
        raise TypeError(f"{name} has dtype {dt}; the {b.name} backend takes {', '.join(sorted(b.dtypes))}")
    if expect is not None and dt != expect:
        raise TypeError(f"{name} has dtype {dt} but X has {expect}; pass all dense inputs in one dtype")
    return dt


def _dense(b, name, x, expect=None):
    """(x made contiguous in its framework, its dtype name), checked."""
    dt = dense_dtype(b, name, x, expect)
    return b.prepare(x), dt


def _elsewhere(x) -> str:
    """Where an array of another backend lives, printable: a torch tensor's device, else its kind."""
    return str(x.device) if _arrays.is_torch(x) else _arrays.kind(x)


def same_place(b, place, what="dense inputs", *, first="X", **others):
    """Every array of `others` lives where the input named `first` does (`place`, its place under
    backend b)."""
    for name, x in others.items():
        try:
            p = b.place(x) if backend_for(x) is b else _elsewhere(x)
        except BackendUnavailable:
            p = _elsewhere(x)
        if p != place:
            why = place.explain(p) if hasattr(place, "explain") else ""
            raise ValueError(f"{first} is on {place} but {name} is on {p}{why}; all {what} must live on one device")


def shaped(x, shape):
    """x viewed as `shape` (reshape only when needed: dpnp's reshape costs tens of microseconds)."""
    return x if tuple(x.shape) == shape else x.reshape(shape)


def wrap_like(X0, X, *outs):
    """Outputs of a torch CPU input come back as torch tensors (they ran on the SYCL CPU device as
    NumPy, zero copy both ways)."""
    if X0 is not X and _arrays.is_torch(X0) and not X0.is_cuda:
        import torch

        return tuple(None if o is None else torch.from_numpy(o) for o in outs)
    return outs


# ---------------------------------------------------------------- spmm
def spmm(A: CSR, X, reduce: str = "sum", return_arg: bool = False, *, precision: str = "fp32"):
    """Y = A (x) X with reduction `reduce` in {sum, mean, max, min} (semantics: include/gnnsparse/ops.hpp).

    X is (K, ...) on any backend's device; Y is (M, ...) in X's framework and dtype. With
    return_arg=True (max/min only) also returns arg (M, ...) int64: the CSR position k of the winning
    entry, -1 for empty rows. Weighted when A has values. `precision` ("fp32", "tf32", "bf16") lets
    kernels that use tensor cores trade accuracy for speed; the others compute in float32 or better.
    Torch inputs that require grad get a backward pass (gnnsparse.torch must be imported).
    """
    if not isinstance(A, CSR):
        check_csr(A)  # raises
    if _torch_route(X, (A.val,)):
        return torch_layer("gnnsparse.spmm on a tensor that requires grad").spmm(A, X, reduce, return_arg,
                                                                                 precision=precision)
    return launch_spmm(A, X, reduce, return_arg, precision)


def launch_spmm(A: CSR, X, reduce, return_arg, precision):
    """The call on X's backend: dtype and device, check_spmm, the CSR's view, the kernel. The torch
    layer's op runs its forward pass through here too."""
    b = backend_of(A, X)
    X0 = X
    X, dt = _dense(b, "X", X)
    red, prec, M, K, C, tail = check_spmm(A.shape, X.shape, reduce, return_arg, precision)
    view = A._view(b, b.place(X), X, None if A.val is None else _val_dtype_for(dt))
    X2 = shaped(X, (K, C))
    routed = None
    if b.name == "cuda" and not return_arg:
        routed = _dense_route.spmm(A, view, X2, reduce, precision, dt, C)
    if routed is not None:  # dense-ish: cuBLAS on the CSR's dense copy (gnnsparse._dense) into Y, then
        # the kernels into the same Y gated by X's finiteness on the device: they write only for an X
        # holding inf or NaN (the kernels' semantics), and return at once otherwise
        Y, finite = routed
        b.spmm(view, X2, M, C, _DTYPE[dt][0], red, False, prec, out=Y, skip=finite)
        arg = None
    else:
        Cp, (Xp,) = _pad_to_vector(b, dt, C, X2)
        Y, arg = b.spmm(view, Xp, M, Cp, _DTYPE[dt][0], red, return_arg, prec)
        del Xp  # a padded copy is freed before the cut-back copies (stream-ordered: after the kernel)
        if Cp != C:
            Y = b.narrow_last(Y, C)
            arg = None if arg is None else b.narrow_last(arg, C)
    if len(tail) != 1:
        Y = Y.reshape((M,) + tail)
        arg = None if arg is None else arg.reshape((M,) + tail)
    Y, arg = wrap_like(X0, X, Y, arg)
    return (Y, arg) if return_arg else Y


# ---------------------------------------------------------------- widths the vector kernels take
PAD_MIN_WIDTH = 16


def _vector_width(b, dt: str, w: int) -> int:
    """The width a CUDA float32 call runs at: w rounded up to a multiple of 4 floats when it is not
    one. The CUDA kernels walk rows of 16-byte vectors only when every row starts 16-byte aligned;
    at 47 columns (a class count) they fall back to 4-byte scalar walks, which measured 1.4-2.1x
    slower than 48 columns on the products-sized graph (H100, 2026-12-06: FusedMM 25.8 / 18.1 ms,
    the multi-head SpMM 23.2 / 11.0, SDDMM dot 20.9 / 13.9; SpMM, whose scalar walk keeps more
    loads in flight, 8.7 / 6.4 ms on the H200, 2026-12-02). So Z (for SDDMM X and Y, for SpMM X)
    are copied with zero columns added, and the output (and SpMM's arg) is cut back: two extra
    passes over an (n, w) array against a walk of all edges. Zeros add +0 to every sum and dot, and
    the padded columns of a max / min are cut away, so the values are the padded walk's. On by
    default (GNNSPARSE_CUDA_PAD=off keeps the scalar walks; =ops pads here but not in the torch
    layers' projections, see vector_width): on the H200
    (2026-12-06, bench/gat_widths.py --widths 47,48) the padded calls at 47 columns took 18.7 /
    11.4 / 14.6 ms against 25.6 / 23.1 / 20.7 (48 columns: 17.9 / 10.6 / 13.6), and the products
    GAT epoch 215 ms against 240 (float32) and 156 against 180 (int8), the same accuracy."""
    return vector_width(b.name, dt, w)


def vector_width(backend: str, dt: str, w: int, layer: bool = False) -> int:
    """_vector_width by backend name and dtype name. layer=True: what the torch layers ask before
    they form their projected features (at this width, with zero columns, so that none of their
    calls pads a copy); GNNSPARSE_CUDA_PAD=ops leaves the layers at w (the calls pad copies)."""
    if backend != "cuda" or dt != "float32" or w % 4 == 0 or w < PAD_MIN_WIDTH:
        return w
    mode = os.environ.get("GNNSPARSE_CUDA_PAD", "on").strip().lower() or "on"
    if mode not in ("on", "ops", "off"):
        raise ValueError(f"GNNSPARSE_CUDA_PAD={mode!r}: choose on, ops or off")
    return w + (-w) % 4 if mode == "on" or (mode == "ops" and not layer) else w


def _pad_to_vector(b, dt: str, w: int, *xs):
    """(the width the call runs at, xs zero-padded to it along their last axis; as they are when
    _vector_width keeps w)."""
    wp = _vector_width(b, dt, w)
    return wp, (xs if wp == w else tuple(b.pad_last(x, wp) for x in xs))


# ---------------------------------------------------------------- spmm with per-(edge, head) weights
def spmm_heads(A: CSR, W, Z):
    """Out[i, h, :] = sum over the entries k of row i of W[k, h] * Z[col k, h, :], every head in one
    kernel (attention weights after dropout; semantics: include/gnnsparse/ops.hpp).

    W (nnz, H) holds one weight per stored entry of A, in CSR order, and head; Z is (K, H, D) on any
    backend's device; Out is (M, H, D) in Z's framework and dtype, 0 for empty rows. A's values are
    not used. W is read in the edge-value dtype (Z's, float32 for float16 / bfloat16 Z) and cast to
    it when it has another float dtype. Torch inputs that require grad get a backward pass
    (gnnsparse.torch must be imported).
    """
    if not isinstance(A, CSR):
        check_csr(A)  # raises
    if _torch_route(Z, (W,)):
        return torch_layer("gnnsparse.spmm_heads on a tensor that requires grad").spmm_heads(A, W, Z)
    return launch_spmm_heads(A, W, Z)


_FLOATS = tuple(_DTYPE)  # float dtype names (the one table)


def launch_spmm_heads(A: CSR, W, Z):
    """The call on Z's backend: dtypes and device, check_spmm_heads, the CSR's view, the kernel. The
    torch layer's op runs its forward pass through here too."""
    b = backend_of(A, Z, "Z")
    Z0 = Z
    Z, dt = _dense(b, "Z", Z)
    c = check_spmm_heads(A.shape, A.nnz, _arrays.shape_of(W), Z.shape)
    place = b.place(Z)
    same_place(b, place, first="Z", W=W)
    wdt = _arrays.dtype_name(W)
    if wdt not in _FLOATS:
        raise TypeError(f"W has dtype {wdt}; spmm_heads takes float weights ({', '.join(_FLOATS)})")
    vdt = _val_dtype_for(dt)
    W = b.prepare(W if wdt == vdt else _astype(W, vdt))
    view = A._view(b, place, Z, None)
    Dp, (Zp,) = _pad_to_vector(b, dt, c.D, Z)
    out = b.spmm_heads(view, W, Zp, c.M, c.H, Dp, _DTYPE[dt][0])
    del Zp  # a padded copy is freed before the cut-back copy: one (n, w) array less at that point
    if Dp != c.D:
        out = b.narrow_last(out, c.D)
    return wrap_like(Z0, Z, out)[0]


# ---------------------------------------------------------------- GATv2 scores
def gatv2_scores(A: CSR, XL, XR, att, slope: float = 0.2):
    """GATv2's attention scores (Brody et al.; semantics: include/gnnsparse/ops.hpp), for every stored
    entry k = (i, j) of A in CSR order and head h:

        S[k, h] = sum_c att[h, c] * leaky_relu(XL[j, h, c] + XR[i, h, c], slope)

    without forming the (nnz, H, C) sums. XL (K, H, C) are the sources' features (PyG's W_l x_j),
    XR (M, H, C) the targets' (W_r x_i), att (H, C) or (1, H, C), one dtype on one device. S is
    (nnz, H) in the edge-value dtype (XL's, float32 for float16 / bfloat16 inputs, which are summed
    in float32). A's values are not used. Torch inputs that require grad get a backward pass
    (gnnsparse.torch must be imported).
    """
    if not isinstance(A, CSR):
        check_csr(A)  # raises
    if _torch_route(XL, (XR, att)):
        return torch_layer("gnnsparse.gatv2_scores on a tensor that requires grad").gatv2_scores(A, XL, XR, att,
                                                                                                   slope)
    return launch_gatv2_scores(A, XL, XR, att, slope)


def _gatv2_inputs(A: CSR, X, Y, att, xname, yname):
    """(backend, place, X, Y, att, dtype name, Gatv2Call over A with rows X and columns Y), checked."""
    b = backend_of(A, X, xname)
    X, dt = _dense(b, xname, X)
    Y, _ = _dense(b, yname, Y, dt)
    att, _ = _dense(b, "att", att, dt)
    c = check_gatv2(A.shape, Y.shape, X.shape, att.shape)
    place = b.place(X)
    same_place(b, place, first=xname, **{yname: Y, "att": att})
    return b, place, X, Y, att, dt, c


def launch_gatv2_scores(A: CSR, XL, XR, att, slope):
    """The call on XL's backend: dtypes and device, check_gatv2, the CSR's view, the kernel. The torch
    layer's op runs its forward pass through here too."""
    XR0 = XR
    b, place, XR, XL, att, dt, c = _gatv2_inputs(A, XR, XL, att, "XR", "XL")
    view = A._view(b, place, XR, None)
    S = b.gatv2_scores(view, XR, XL, shaped(att, (c.H, c.C)), A.nnz, c.H, c.C, _DTYPE[dt][0], float(slope))
    return wrap_like(XR0, XR, S)[0]


def launch_gatv2_grad(A: CSR, X, Y, att, dS, slope, want_att: bool):
    """The backward pass of gatv2_scores over A (rows: X's nodes, columns: Y's): (dX, dAtt_rows),
    dX (M, H, C) = sum over row i of dS[k, h] att[h] leaky_relu'(z), dAtt_rows (M, H, C) its
    per-row sums of dS[k, h] leaky_relu(z) in the edge-value dtype (None unless want_att; sum them
    over axis 0 for dAtt). dS is (nnz, H) in A's CSR order. The gradient for the sources is the same
    call over A^T with X and Y swapped and dS in A^T's order."""
    X0 = X
    b, place, X, Y, att, dt, c = _gatv2_inputs(A, X, Y, att, "X", "Y")
    if tuple(_arrays.shape_of(dS)) != (A.nnz, c.H):
        raise ValueError(f"dS has shape {tuple(_arrays.shape_of(dS))} but must be ({A.nnz}, {c.H})")
    same_place(b, place, first="X", dS=dS)
    ddt, vdt = _arrays.dtype_name(dS), _val_dtype_for(dt)
    dS = b.prepare(dS if ddt == vdt else _astype(dS, vdt))
    view = A._view(b, place, X, None)
    dX, dA = b.gatv2_grad(view, X, Y, shaped(att, (c.H, c.C)), dS, c.M, c.H, c.C, _DTYPE[dt][0], float(slope),
                          bool(want_att))
    return wrap_like(X0, X, dX, dA)


# ---------------------------------------------------------------- sddmm
def sddmm(A: CSR, X, Y, op: str = "dot", *, precision: str = "fp32"):
    """Per stored entry k = (i, j): 'dot' -> <X[i], Y[j]> over the feature axis (X (M, F) -> (nnz,),
    X (M, H, F) -> (nnz, H)); 'add' -> X[i] + Y[j] (X (M,) or (M, H), GAT logits). A's values are unused."""
    if not isinstance(A, CSR):
        check_csr(A)  # raises
    if _torch_route(X, (Y,)):
        return torch_layer("gnnsparse.sddmm on a tensor that requires grad").sddmm(A, X, Y, op, precision=precision)
    return launch_sddmm(A, X, Y, op, precision)


def launch_sddmm(A: CSR, X, Y, op, precision):
    b = backend_of(A, X)
    X0 = X
    X, dt = _dense(b, "X", X)
    Y, _ = _dense(b, "Y", Y, dt)
    c = check_sddmm(A.shape, X.shape, Y.shape, op, precision)
    place = b.place(X)
    same_place(b, place, Y=Y)
    view = A._view(b, place, X, None)
    E = None
    if b.name == "cuda" and op == "dot":  # dense-ish: a cuBLAS GEMM, gathered (gnnsparse._dense)
        E = _dense_route.sddmm_dot(A, view, X, Y, precision, dt, c.H, c.F)
        E = None if E is None else E.reshape((A.nnz, c.H))
    if E is None:
        F, (Xs, Ys) = c.F, (shaped(X, c.x_shape), shaped(Y, c.y_shape))
        if op == "dot":
            F, (Xs, Ys) = _pad_to_vector(b, dt, F, Xs, Ys)
        E = b.sddmm(view, Xs, Ys, A.nnz, c.H, F, _DTYPE[dt][0], c.op, c.precision)
    return wrap_like(X0, X, E.reshape((A.nnz,)) if c.squeeze else E)[0]


# ---------------------------------------------------------------- fusedmm
def fusedmm(A: CSR, X, Y, Z, op: str = "dot", edge: str = "none", slope: float = 0.2, return_edges: bool = False,
            *, precision: str = "fp32"):
    """Out[i] = sum_k w_k * Z[col_k], w = edge(sddmm(A, X, Y, op)) [* A.val], without storing w.

    edge in {none, leaky_relu (slope), exp, softmax (per row, per head, max-subtracted),
    leaky_relu_softmax (the softmax of leaky_relu: GAT attention)}. Heads: X/Y
    as in sddmm, Z (K, D) for one head or (K, H, D); Out is (M, D) or (M, H, D). return_edges=True also
    returns w, shaped like sddmm's output (what a backward pass needs). Z may have no columns (D = 0):
    Out is then empty and, with return_edges=True, the kernels compute w alone (no aggregation),
    with the arithmetic of a call with columns (what FusedMM's backward recomputes).
    """
    if not isinstance(A, CSR):
        check_csr(A)  # raises
    if _torch_route(X, (Y, Z, A.val)):
        return torch_layer("gnnsparse.fusedmm on a tensor that requires grad").fusedmm(
            A, X, Y, Z, op, edge, slope, return_edges, precision=precision)
    return launch_fusedmm(A, X, Y, Z, op, edge, slope, return_edges, precision)


def launch_fusedmm(A: CSR, X, Y, Z, op, edge, slope, return_edges, precision):
    b = backend_of(A, X)
    X0 = X
    X, dt = _dense(b, "X", X)
    Y, _ = _dense(b, "Y", Y, dt)
    Z, _ = _dense(b, "Z", Z, dt)
    c = check_fusedmm(A.shape, X.shape, Y.shape, Z.shape, op, edge, precision)
    place = b.place(X)
    same_place(b, place, Y=Y, Z=Z)
    s = c.scores
    M = A.shape[0]
    view = A._view(b, place, X, None if A.val is None else _val_dtype_for(dt))
    Zs, D = shaped(Z, c.z_shape), c.D
    # Z padded to the vector width (not when Z is Y: that walk gathers one row for both products)
    if D and Z is not Y:
        D, (Zs,) = _pad_to_vector(b, dt, D, Zs)
    out, E = b.fusedmm(view, shaped(X, s.x_shape), shaped(Y, s.y_shape), Zs, M, s.H, s.F, D,
                       _DTYPE[dt][0], s.op, c.edge, float(slope), return_edges, s.precision)
    del Zs  # a padded copy is freed before the cut-back copy
    if D != c.D:
        out = b.narrow_last(out, c.D)
    if len(Z.shape) == 2:
        out = out.reshape((M, c.D))
    if E is not None and s.squeeze:
        E = E.reshape((A.nnz,))
    out, E = wrap_like(X0, X, out, E)
    return (out, E) if return_edges else out
