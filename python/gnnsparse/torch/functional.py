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

from .. import _arrays, _backends, _ops
from . import _library as L
from .graph import GraphTensors, graph_tensors, self_loops

__all__ = ["spmm", "sddmm", "fusedmm", "spmm_heads", "gatv2_scores", "edge_softmax", "gcn_norm"]


def _backend_for(x: Tensor):
    """x's backend. While torch.compile traces, only one already loaded (loading a backend runs code
    dynamo cannot trace): None otherwise, and the op's kernel (gnnsparse._ops.launch_*) runs the
    same checks when the compiled graph runs."""
    if torch.compiler.is_compiling():
        return _backends._READY.get(_arrays.kind(x))
    return _ops.backend_for(x)


def _check_dense(name, x, b=None, expect=None):
    """A torch tensor whose dtype the backend (of its device, or b) runs: the frontend's check."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__} (gnnsparse.spmm takes other arrays)")
    b = b or _backend_for(x)
    return None if b is None else _ops.dense_dtype(b, name, x, expect)


def _check_inputs(same_dtype=True, **named):
    """The first tensor's dtype; the others on its device (and in its dtype): the frontend's checks."""
    (n0, x0), *rest = named.items()
    for name, t in rest:
        if not isinstance(t, Tensor):
            _check_dense(name, t)  # raises
    b = _backend_for(x0) if isinstance(x0, Tensor) else None
    dt = _check_dense(n0, x0, b)
    if b is None:  # tracing before the backend was loaded: the kernel checks
        return dt
    _ops.same_place(b, b.place(x0), first=n0, **dict(rest))
    for name, t in rest:
        _check_dense(name, t, b, dt if same_dtype else None)
    return dt


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
         val: Optional[Tensor] = None, precision: str = "fp32"):
    """Y[i] = reduce over row i of val[k] * X[col[k]] (X (K, ...) -> Y (M, ...)); with
    return_arg (max/min) also arg: the CSR position of the winning edge, -1 for empty rows.
    Differentiable in X and in the edge values (max/min route gradients to the winning edge).
    Checks: gnnsparse._ops.check_spmm, as gnnsparse.spmm."""
    _check_dense("X", X)
    g = graph_tensors(A, X)
    c = _ops.check_spmm(g.shape, X.shape, reduce, return_arg, precision)
    v = L._val_for(_values(g, edge_weight, val), X)
    Y, arg = L.spmm_op(g.rowptr, g.col, v, g.t_rowptr, g.t_col, g.t_perm, X.reshape(c.K, c.C), reduce, precision)
    Y = Y.reshape((c.M,) + c.tail)
    if return_arg:
        return Y, arg.reshape((c.M,) + c.tail)
    return Y


def _heads(X, Y, s):
    """X, Y with the head axis the ops take (check_sddmm's shapes)."""
    return X.reshape(s.x_shape).contiguous(), Y.reshape(s.y_shape).contiguous()


def sddmm(A, X: Tensor, Y: Tensor, op: str = "dot", *, precision: str = "fp32") -> Tensor:
    """Per stored entry k = (i, j): 'dot' -> <X[i], Y[j]> over the last axis ((M, F) -> (nnz,),
    (M, H, F) -> (nnz, H)); 'add' -> X[i] + Y[j] ((M,) -> (nnz,), (M, H) -> (nnz, H)). CSR order
    (A.edges_to_input_order for the caller's order). Differentiable in X and Y."""
    _check_inputs(X=X, Y=Y)
    g = graph_tensors(A, X)
    s = _ops.check_sddmm(g.shape, X.shape, Y.shape, op, precision)
    X3, Y3 = _heads(X, Y, s)
    E = L.sddmm_op(g.rowptr, g.col, g.t_rowptr, g.t_col, g.t_perm, g.eid, X3, Y3, op, precision)
    return E.reshape(-1) if s.squeeze else E


def fusedmm(A, X: Tensor, Y: Tensor, Z: Tensor, op: str = "dot", edge: str = "none", slope: float = 0.2,
            return_edges: bool = False, *, edge_weight: Optional[Tensor] = None, val: Optional[Tensor] = None,
            save_edges: Optional[bool] = None, precision: str = "fp32"):
    """Out[i] = sum_k w_k Z[col k], w = edge(sddmm(A, X, Y, op)) * val, per head, in one pass.

    edge: none, leaky_relu (slope), exp, softmax (per row and head), or leaky_relu_softmax (GAT:
    leaky_relu, then the row softmax). Z (K, D) for one head or (K, H, D); Out (M, D) / (M, H, D).
    return_edges also returns w (CSR order). save_edges: keep the edge function's values for the
    backward pass instead of recomputing them (default: set_fusedmm_backward)."""
    _check_inputs(X=X, Y=Y, Z=Z)
    g = graph_tensors(A, X)
    c = _ops.check_fusedmm(g.shape, X.shape, Y.shape, Z.shape, op, edge, precision)
    X3, Y3 = _heads(X, Y, c.scores)
    v = L._val_for(_values(g, edge_weight, val), X)
    save = bool(return_edges) or (save_edges if save_edges is not None else L.fusedmm_backward_mode() == "save")
    out, P = L.fusedmm_op(g.rowptr, g.col, v, g.t_rowptr, g.t_col, g.t_perm, g.rows, g.eid, X3, Y3,
                          Z.reshape(c.z_shape).contiguous(), op, edge, float(slope), save, precision)
    if Z.dim() == 2:
        out = out.reshape(g.num_rows, c.D)
    if not return_edges:
        return out
    w = P if v is None else P * v.to(P.dtype)[:, None]
    return out, (w.reshape(-1) if c.scores.squeeze else w)


def spmm_heads(A, W: Tensor, Z: Tensor) -> Tensor:
    """Out[i, h] = sum_k W[k, h] * Z[col k, h]: W (nnz, H) per-edge, per-head weights (CSR order),
    Z (K, H, D) -> (M, H, D). Differentiable in W and Z."""
    _check_inputs(same_dtype=False, Z=Z, W=W)
    g = graph_tensors(A, Z)
    _ops.check_spmm_heads(g.shape, g.nnz, W.shape, Z.shape)
    return L.spmm_heads_op(g.rowptr, g.col, g.t_rowptr, g.t_col, g.t_perm, W.contiguous(), Z.contiguous())


def gatv2_scores(A, XL: Tensor, XR: Tensor, att: Tensor, slope: float = 0.2) -> Tensor:
    """S[k, h] = sum_c att[h, c] * leaky_relu(XL[col k, h, c] + XR[i, h, c], slope), (nnz, H) in CSR
    order, by one kernel (no (nnz, H, C) tensor, forward or backward): XL (K, H, C) sources, XR
    (M, H, C) targets, att (H, C) or (1, H, C). Differentiable in XL, XR and att."""
    _check_inputs(XL=XL, XR=XR, att=att)
    g = graph_tensors(A, XL)
    c = _ops.check_gatv2(g.shape, XL.shape, XR.shape, att.shape)
    return L.gatv2_scores_op(g.rowptr, g.col, g.t_rowptr, g.t_col, g.t_perm, XL.contiguous(), XR.contiguous(),
                             att.reshape(c.H, c.C).contiguous(), float(slope))


def edge_softmax(A, S: Tensor) -> Tensor:
    """Softmax of per-edge scores over each row's edges (S (nnz,) or (nnz, H), CSR order), as PyG's
    torch_geometric.utils.softmax over the target index. Differentiable."""
    _check_dense("S", S)
    g = graph_tensors(A, S)
    if S.dim() not in (1, 2) or S.shape[0] != g.nnz:
        raise ValueError(f"S must have shape ({g.nnz},) or ({g.nnz}, H), got {tuple(S.shape)}")
    H = S.shape[1] if S.dim() == 2 else 1  # not reshape(nnz, -1): a graph without edges has nnz 0
    P = L.edge_softmax_op(g.rowptr, g.rows, g.eid, S.reshape(g.nnz, H).contiguous())
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
