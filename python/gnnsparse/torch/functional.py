"""Differentiable gnnsparse ops on torch tensors (CPU tensors: the SYCL CPU device; CUDA tensors:
the CUDA kernels). Shapes and semantics are those of gnnsparse.spmm / sddmm / fusedmm; the graph
`A` is a gnnsparse.CSR (converted once per device and cached on it) or a GraphTensors.

Learnable edge weights: pass `edge_weight` (caller's edge order, needs A.edge_perm) or `val` (CSR
order) to the call; the values stored in the CSR are data and get no gradient.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from . import _library as L
from .graph import GraphTensors, graph_tensors, self_loops

__all__ = ["spmm", "sddmm", "fusedmm", "spmm_heads", "edge_softmax", "gcn_norm"]

_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _check_choice(what, value, choices):
    if value not in choices:
        raise ValueError(f"{what} must be one of {', '.join(choices)}; got {value!r}")


def _check_dense(name, x, dtype=None):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__} (gnnsparse.spmm takes other arrays)")
    if x.dtype not in _FLOATS:
        raise TypeError(f"{name} has dtype {x.dtype}; gnnsparse takes float32 / float64 (and float16 / bfloat16 "
                        "on CUDA)")
    if dtype is not None and x.dtype != dtype:
        raise TypeError(f"{name} has dtype {x.dtype} but X has {dtype}; pass all dense inputs in one dtype")


def _same_device(x, **others):
    for name, t in others.items():
        if t.device != x.device:
            raise ValueError(f"X is on {x.device} but {name} is on {t.device}; all dense inputs must live on one "
                             "device")


def _values(g: GraphTensors, edge_weight: Optional[Tensor], val: Optional[Tensor]) -> Optional[Tensor]:
    if edge_weight is not None and val is not None:
        raise ValueError("pass edge_weight (caller's edge order) or val (CSR order), not both")
    if edge_weight is not None:
        if g.edge_perm is None:
            raise ValueError("edge_weight is in the caller's edge order, but this graph was not built from an edge "
                             "list (no edge_perm): pass val in CSR order instead")
        if tuple(edge_weight.shape) != (g.nnz,):
            raise ValueError(f"edge_weight must have shape ({g.nnz},) (one per edge), got {tuple(edge_weight.shape)}")
        if edge_weight.device != g.device:
            raise ValueError(f"edge_weight is on {edge_weight.device} but the graph on {g.device}")
        return edge_weight[g.edge_perm]
    if val is not None:
        if tuple(val.shape) != (g.nnz,):
            raise ValueError(f"val must have shape ({g.nnz},) (one per edge, CSR order), got {tuple(val.shape)}")
        if val.device != g.device:
            raise ValueError(f"val is on {val.device} but the graph on {g.device}")
        return val
    return g.val


def spmm(A, X: Tensor, reduce: str = "sum", return_arg: bool = False, *, edge_weight: Optional[Tensor] = None,
         val: Optional[Tensor] = None):
    """Y[i] = reduce over row i of val[k] * X[col[k]] (X (K, ...) -> Y (M, ...)); with
    return_arg (max/min) also arg: the CSR position of the winning edge, -1 for empty rows.
    Differentiable in X and in the edge values (max/min route gradients to the winning edge)."""
    _check_choice("reduce", reduce, L.REDUCTIONS)
    if return_arg and reduce not in ("max", "min"):
        raise ValueError("return_arg is only defined for reduce='max' or 'min'")
    _check_dense("X", X)
    g = graph_tensors(A, X)
    M, K = g.shape
    if X.dim() == 0 or X.shape[0] != K:
        raise ValueError(f"X has shape {tuple(X.shape)} but A is {M} x {K}: X needs {K} rows")
    v = L._val_for(_values(g, edge_weight, val), X)
    tail = X.shape[1:]
    C = 1
    for s in tail:
        C *= s
    Y, arg = L.spmm_op(g.rowptr, g.col, v, g.t_rowptr, g.t_col, g.t_perm, X.reshape(K, C), reduce)
    Y = Y.reshape((M,) + tuple(tail))
    if return_arg:
        return Y, arg.reshape((M,) + tuple(tail))
    return Y


def _score_shapes(g, X, Y, op):
    M, K = g.shape
    if X.dim() == 0 or X.shape[0] != M:
        raise ValueError(f"X has shape {tuple(X.shape)} but A is {M} x {K}: X needs {M} rows")
    if Y.dim() == 0 or Y.shape[0] != K:
        raise ValueError(f"Y has shape {tuple(Y.shape)} but A is {M} x {K}: Y needs {K} rows")
    if X.shape[1:] != Y.shape[1:]:
        raise ValueError(f"X {tuple(X.shape)} and Y {tuple(Y.shape)} must agree beyond their first axis")
    if op == "dot":
        if X.dim() not in (2, 3):
            raise ValueError(f"'dot' takes X of shape (M, F) or (M, H, F), got {tuple(X.shape)}")
        if X.dim() == 2:
            return X.unsqueeze(1), Y.unsqueeze(1), True
        return X, Y, False
    if X.dim() not in (1, 2):
        raise ValueError(f"'add' takes X of shape (M,) or (M, H), got {tuple(X.shape)}")
    if X.dim() == 1:
        return X.unsqueeze(1), Y.unsqueeze(1), True
    return X, Y, False


def sddmm(A, X: Tensor, Y: Tensor, op: str = "dot") -> Tensor:
    """Per stored entry k = (i, j): 'dot' -> <X[i], Y[j]> over the last axis ((M, F) -> (nnz,),
    (M, H, F) -> (nnz, H)); 'add' -> X[i] + Y[j] ((M,) -> (nnz,), (M, H) -> (nnz, H)). CSR order
    (A.edges_to_input_order for the caller's order). Differentiable in X and Y."""
    _check_choice("op", op, L.SDDMM_OPS)
    _check_dense("X", X)
    _check_dense("Y", Y, X.dtype)
    _same_device(X, Y=Y)
    g = graph_tensors(A, X)
    X3, Y3, squeeze = _score_shapes(g, X, Y, op)
    E = L.sddmm_op(g.rowptr, g.col, g.t_rowptr, g.t_col, g.t_perm, g.eid, X3.contiguous(), Y3.contiguous(), op)
    return E.reshape(-1) if squeeze else E


def fusedmm(A, X: Tensor, Y: Tensor, Z: Tensor, op: str = "dot", edge: str = "none", slope: float = 0.2,
            return_edges: bool = False, *, edge_weight: Optional[Tensor] = None, val: Optional[Tensor] = None,
            save_edges: Optional[bool] = None):
    """Out[i] = sum_k w_k Z[col k], w = edge(sddmm(A, X, Y, op)) * val, per head, in one pass.

    edge: none, leaky_relu (slope), exp, softmax (per row and head), or leaky_relu_softmax (GAT:
    leaky_relu, then the row softmax). Z (K, D) for one head or (K, H, D); Out (M, D) / (M, H, D).
    return_edges also returns w (CSR order). save_edges: keep the edge function's values for the
    backward pass instead of recomputing them (default: set_fusedmm_backward)."""
    _check_choice("op", op, L.SDDMM_OPS)
    _check_choice("edge", edge, L.EDGE_FUNCTIONS)
    _check_dense("X", X)
    _check_dense("Y", Y, X.dtype)
    _check_dense("Z", Z, X.dtype)
    _same_device(X, Y=Y, Z=Z)
    g = graph_tensors(A, X)
    M, K = g.shape
    X3, Y3, squeeze = _score_shapes(g, X, Y, op)
    H = X3.shape[1]
    if Z.dim() == 2 and H == 1:
        Z3 = Z.unsqueeze(1)
    elif Z.dim() == 3 and Z.shape[1] == H:
        Z3 = Z
    else:
        raise ValueError(f"Z has shape {tuple(Z.shape)}; with {H} head(s) it must be (K, D) (one head) or (K, {H}, D)")
    if Z.shape[0] != K:
        raise ValueError(f"Z has shape {tuple(Z.shape)} but A is {M} x {K}: Z needs {K} rows")
    v = L._val_for(_values(g, edge_weight, val), X)
    save = bool(return_edges) or (save_edges if save_edges is not None else L.fusedmm_backward_mode() == "save")
    out, P = L.fusedmm_op(g.rowptr, g.col, v, g.t_rowptr, g.t_col, g.t_perm, g.rows, g.eid, X3.contiguous(),
                          Y3.contiguous(), Z3.contiguous(), op, edge, float(slope), save)
    if Z.dim() == 2:
        out = out.reshape(M, Z.shape[1])
    if not return_edges:
        return out
    w = P if v is None else P * v.to(P.dtype)[:, None]
    return out, (w.reshape(-1) if squeeze else w)


def spmm_heads(A, W: Tensor, Z: Tensor) -> Tensor:
    """Out[i, h] = sum_k W[k, h] * Z[col k, h]: W (nnz, H) per-edge, per-head weights (CSR order),
    Z (K, H, D) -> (M, H, D). Differentiable in W and Z."""
    _check_dense("Z", Z)
    _check_dense("W", W)
    _same_device(Z, W=W)
    g = graph_tensors(A, Z)
    M, K = g.shape
    if Z.dim() != 3 or Z.shape[0] != K:
        raise ValueError(f"Z must have shape ({K}, H, D), got {tuple(Z.shape)}")
    if W.dim() != 2 or W.shape[0] != g.nnz or W.shape[1] != Z.shape[1]:
        raise ValueError(f"W must have shape ({g.nnz}, {Z.shape[1]}), got {tuple(W.shape)}")
    return L.spmm_heads_op(g.rowptr, g.col, g.t_rowptr, g.t_col, g.t_perm, W.contiguous(), Z.contiguous())


def edge_softmax(A, S: Tensor) -> Tensor:
    """Softmax of per-edge scores over each row's edges (S (nnz,) or (nnz, H), CSR order), as PyG's
    torch_geometric.utils.softmax over the target index. Differentiable."""
    _check_dense("S", S)
    g = graph_tensors(A, S)
    if S.dim() not in (1, 2) or S.shape[0] != g.nnz:
        raise ValueError(f"S must have shape ({g.nnz},) or ({g.nnz}, H), got {tuple(S.shape)}")
    P = L.edge_softmax_op(g.rowptr, g.rows, g.eid, S.reshape(g.nnz, -1).contiguous())
    return P.reshape(S.shape)


def gcn_norm(A, edge_weight: Optional[Tensor] = None, *, improved: bool = False, add_self_loops: bool = True,
             dtype: torch.dtype = torch.float32, like=None) -> GraphTensors:
    """PyG's gcn_norm: add the remaining self loops (weight 2 with `improved` when edge weights are
    given), then w_ij = w_ij / sqrt(deg_i deg_j), deg the weighted in-degree. Returns the graph
    with those values; differentiable in edge_weight (caller's edge order)."""
    g = graph_tensors(A, like if like is not None else (A.device if isinstance(A, GraphTensors) else "cpu"))
    w = _values(g, edge_weight, None)
    g = g.with_val(w)
    if add_self_loops:
        g = self_loops(g, "remaining", 2.0 if improved else 1.0)
    w = g.val if g.val is not None else torch.ones(g.nnz, dtype=dtype, device=g.device)
    if w.dtype != dtype:
        w = w.to(dtype)
    ones = torch.ones(g.num_cols, 1, dtype=w.dtype, device=g.device)
    deg = L.spmm_op(g.rowptr, g.col, w, g.t_rowptr, g.t_col, g.t_perm, ones, "sum")[0].reshape(-1)
    dinv = deg.pow(-0.5)
    dinv = torch.where(torch.isinf(dinv), torch.zeros((), dtype=dinv.dtype, device=dinv.device), dinv)
    w = dinv.index_select(0, g.rows) * w * dinv.index_select(0, g.col)
    return g.with_val(w)
