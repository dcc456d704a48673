"""The graph object users hold: `A @ X`, `A.reduce(X, "max")`, constructors from PyG and torch.

`GraphMethods` is a mixin over gnnsparse.CSR (it only uses the CSR's public attributes rowptr, col,
val, shape, nnz, edge_perm, T and the public ops), so every method here is also a plain function
taking a CSR:

    A = gs.CSR.from_pyg(data)                # or from_edge_index / from_sparse_tensor / from_torch_sparse
    h = A @ x                                # sum aggregation, differentiable for torch tensors
    h = A.reduce(x, "mean")
    h, arg = A.reduce(x, "max")              # arg: CSR position of the winning edge, -1 for empty rows
    e = A.sddmm(q, k, edge_order="input")    # one value per edge, in the caller's edge order

Orientation: A has one row per target node, A[dst, src] = edge weight, so A @ x sums the messages
x[src] arriving at each dst, as PyG's `propagate` with flow="source_to_target" does. Matrices given
as matrices (scipy, torch sparse, torch_sparse.SparseTensor) are taken as they are: (A @ x)[i] =
sum_j S[i, j] x[j] (PyG's `adj_t`).

The products are the public ops (gnnsparse._ops): a torch input that requires grad gets its
backward pass there, through gnnsparse.torch. Nothing here imports torch unless a torch object is
passed in, nor gnnsparse.torch at all.
"""
from __future__ import annotations

import numpy as np

from . import _arrays

__all__ = ["GraphMethods", "as_graph", "from_pyg", "from_sparse_tensor", "from_torch_sparse", "to_dense",
           "edges_to_input_order", "edges_from_input_order"]


def _csr_class(cls=None):
    if cls is not None:
        return cls
    from ._csr import CSR

    return CSR


def _is_torch(x) -> bool:
    return _arrays.is_torch(x)


def _plain_tensor(t):
    """A torch.Tensor view of a tensor subclass (PyG EdgeIndex, Index) so that our indexing and
    sorting do not go through the subclass's dispatch."""
    import torch

    return t.as_subclass(torch.Tensor) if type(t) is not torch.Tensor else t


# ---------------------------------------------------------------- constructors
def from_pyg(data, *, cls=None, validate: bool = True):
    """A PyG `Data` (edge_index, num_nodes, and edge_weight, or a 1-D edge_attr) or an
    `EdgeIndex` -> CSR with one row per target node; edge_perm maps CSR positions to edge ids."""
    C = _csr_class(cls)
    if _is_torch(data):  # EdgeIndex, or a plain (2, E) tensor
        n = None
        if hasattr(data, "sparse_size"):
            rows, cols = data.sparse_size()
            if rows is not None and cols is not None and rows != cols:
                raise ValueError(f"EdgeIndex of sparse size {(rows, cols)}: only square (homogeneous) graphs "
                                 "are supported; pass CSR(rowptr, col, val, shape) for bipartite graphs")
            n = rows if rows is not None else cols
        return C.from_edge_index(_plain_tensor(data), n, validate=validate)
    ei = getattr(data, "edge_index", None)
    if ei is None:
        if getattr(data, "adj_t", None) is not None:
            return from_sparse_tensor(data.adj_t, cls=C, validate=validate)
        raise TypeError(f"{type(data).__name__} has no edge_index (or adj_t): not a PyG Data object")
    w = getattr(data, "edge_weight", None)
    if w is None:
        ea = getattr(data, "edge_attr", None)
        if ea is not None and (ea.dim() == 1 or (ea.dim() == 2 and ea.shape[1] == 1)):
            w = ea.reshape(-1)
    n = getattr(data, "num_nodes", None)
    return C.from_edge_index(_plain_tensor(ei), n, w, validate=validate)


def from_sparse_tensor(adj, *, cls=None, validate: bool = True):
    """torch_sparse.SparseTensor -> CSR of the same matrix (PyG's adj_t: rows are targets)."""
    C = _csr_class(cls)
    storage = getattr(adj, "storage", None)
    if storage is None or not hasattr(adj, "sparse_sizes"):
        raise TypeError(f"expected a torch_sparse.SparseTensor, got {type(adj).__name__}")
    M, K = (int(s) for s in adj.sparse_sizes())
    val = storage.value()
    return C(storage.rowptr(), storage.col(), val, (M, K), validate=validate)


def from_torch_sparse(S, *, cls=None, validate: bool = True):
    """A torch sparse CSR or COO tensor (2-D, values scalar) -> CSR of the same matrix."""
    import torch

    C = _csr_class(cls)
    if not _is_torch(S) or S.layout not in (torch.sparse_csr, torch.sparse_coo):
        raise TypeError(f"expected a torch sparse CSR or COO tensor, got {getattr(S, 'layout', type(S).__name__)}")
    if S.layout == torch.sparse_coo:
        S = S.coalesce()  # duplicate entries are summed, as torch defines them
    if S.dim() != 2 or S.values().dim() != 1:
        raise ValueError(f"expected a 2-D sparse matrix with scalar values, got shape {tuple(S.shape)} "
                         f"with values of shape {tuple(S.values().shape)}")
    if S.layout == torch.sparse_coo:  # coalesced: sorted by row, then column
        rows, cols = S.indices()
        rowptr = torch.zeros(S.shape[0] + 1, dtype=torch.int64, device=rows.device)
        rowptr[1:] = torch.cumsum(torch.bincount(rows, minlength=S.shape[0]), 0)
        return C(rowptr, cols, S.values(), tuple(S.shape), validate=validate)
    return C(S.crow_indices(), S.col_indices(), S.values(), tuple(S.shape), validate=validate)


def as_graph(obj, num_nodes=None, *, cls=None):
    """Any graph description -> CSR: a CSR (returned as is), a PyG Data or EdgeIndex, a (2, E)
    edge_index (torch or NumPy), a torch sparse tensor, a torch_sparse.SparseTensor, a scipy matrix."""
    C = _csr_class(cls)
    from ._csr import CSR

    if isinstance(obj, CSR):
        return obj
    if _is_torch(obj):
        import torch

        if obj.layout in (torch.sparse_csr, torch.sparse_coo):
            return from_torch_sparse(obj, cls=C)
        if hasattr(obj, "sparse_size") and num_nodes is None:
            return from_pyg(obj, cls=C)
        return C.from_edge_index(_plain_tensor(obj), num_nodes)
    if hasattr(obj, "storage") and hasattr(obj, "sparse_sizes"):
        return from_sparse_tensor(obj, cls=C)
    if hasattr(obj, "edge_index") or hasattr(obj, "adj_t"):
        return from_pyg(obj, cls=C)
    try:
        import scipy.sparse as sp

        if sp.issparse(obj):
            return C.from_scipy(obj)
    except ImportError:  # pragma: no cover
        pass
    if isinstance(obj, np.ndarray):
        return C.from_edge_index(obj, num_nodes)
    raise TypeError(f"cannot make a graph from {type(obj).__name__}: pass a gnnsparse.CSR, a PyG Data / EdgeIndex, "
                    "a (2, E) edge_index, a torch sparse tensor, a torch_sparse.SparseTensor or a scipy matrix")


# ---------------------------------------------------------------- edge order
def _perm_of(A):
    perm = getattr(A, "edge_perm", None)
    if perm is None:
        raise ValueError("this graph has no edge_perm (it was not built from an edge list), so there is no "
                         "input edge order: its edges are in CSR order")
    return perm


def edges_to_input_order(A, E):
    """Per-edge values in CSR order (as sddmm/fusedmm return them) -> the caller's edge order:
    out[edge_perm[k]] = E[k]."""
    perm = _perm_of(A)
    if _is_torch(E):
        import torch

        p = _arrays.to_torch(perm, E.device)
        inv = torch.empty_like(p)
        inv[p] = torch.arange(p.numel(), device=p.device, dtype=p.dtype)
        return E[inv]  # a gather (its backward scatters into distinct slots: deterministic)
    out = np.empty_like(np.asarray(E))
    out[np.asarray(_arrays.to_numpy(perm))] = E
    return out


def edges_from_input_order(A, w):
    """Per-edge values in the caller's edge order -> CSR order (w[edge_perm])."""
    perm = _perm_of(A)
    if _is_torch(w):
        import torch

        return w[_arrays.to_torch(perm, w.device)]
    return np.asarray(w)[np.asarray(_arrays.to_numpy(perm))]


# ---------------------------------------------------------------- dense
def to_dense(A, like=None):
    """The dense M x K matrix (duplicates summed): a torch tensor when A's arrays or `like` are
    torch tensors, else NumPy. Values default to 1."""
    M, K = A.shape
    want_torch = _is_torch(like) or _is_torch(A.rowptr) or _is_torch(A.val)
    if want_torch:
        import torch

        dev = like.device if _is_torch(like) else (A.rowptr.device if _is_torch(A.rowptr) else "cpu")
        rowptr, col = _arrays.to_torch(A.rowptr, dev).long(), _arrays.to_torch(A.col, dev).long()
        val = torch.ones(A.nnz, device=dev) if A.val is None else _arrays.to_torch(A.val, dev)
        rows = torch.repeat_interleave(torch.arange(M, device=dev), rowptr.diff(), output_size=A.nnz)
        out = torch.zeros(M * K, dtype=val.dtype, device=dev)
        return out.index_put_((rows * K + col,), val, accumulate=True).reshape(M, K)
    rowptr = np.asarray(_arrays.to_numpy(A.rowptr)).astype(np.int64)
    col = np.asarray(_arrays.to_numpy(A.col)).astype(np.int64)
    val = np.ones(A.nnz, np.float32) if A.val is None else np.asarray(_arrays.to_numpy(A.val))
    out = np.zeros((M, K), val.dtype)
    np.add.at(out, (np.repeat(np.arange(M), np.diff(rowptr)), col), val)
    return out


# ---------------------------------------------------------------- ops as methods
def matmul(A, X):
    """A @ X with sum aggregation (differentiable for torch tensors that require grad)."""
    from ._ops import spmm

    return spmm(A, X, "sum")


def reduce(A, X, reduce: str = "sum"):
    """Aggregate X over each row's neighbours: sum / mean -> out; max / min -> (out, arg), arg the
    CSR position of the winning edge (-1 for empty rows; A.col[arg] is the neighbour,
    A.edge_perm[arg] the input edge id)."""
    from ._ops import ARG_REDUCTIONS, spmm

    return spmm(A, X, reduce, return_arg=reduce in ARG_REDUCTIONS)


def _edge_order(edge_order):
    if edge_order not in ("csr", "input"):
        raise ValueError(f"edge_order must be 'csr' or 'input', got {edge_order!r}")


def sddmm(A, X, Y, op: str = "dot", edge_order: str = "csr"):
    from ._ops import sddmm as _sd

    _edge_order(edge_order)
    E = _sd(A, X, Y, op)
    return edges_to_input_order(A, E) if edge_order == "input" else E


def fusedmm(A, X, Y, Z, op: str = "dot", edge: str = "none", slope: float = 0.2, return_edges: bool = False,
            edge_order: str = "csr"):
    from ._ops import fusedmm as _fm

    _edge_order(edge_order)
    r = _fm(A, X, Y, Z, op, edge, slope, return_edges)
    if return_edges and edge_order == "input":
        return r[0], edges_to_input_order(A, r[1])
    return r


class GraphMethods:
    """Graph methods of gnnsparse.CSR (see the module docstring)."""

    # construction
    @classmethod
    def from_pyg(cls, data, *, validate: bool = True):
        """A PyG `Data` (edge_index, num_nodes, and edge_weight or a 1-D edge_attr) or `EdgeIndex`
        -> CSR with one row per target node, A[dst, src] = weight (1 without weights); the arrays
        stay where they are (CPU or CUDA tensors). `A.edge_perm` maps CSR positions to edge ids."""
        return from_pyg(data, cls=cls, validate=validate)

    @classmethod
    def from_sparse_tensor(cls, adj, *, validate: bool = True):
        """A torch_sparse `SparseTensor` (PyG's `adj_t`) -> CSR of the same matrix (rowptr, col and
        value taken from its storage, no copy): (A @ x)[i] = sum_j adj[i, j] x[j]."""
        return from_sparse_tensor(adj, cls=cls, validate=validate)

    @classmethod
    def from_torch_sparse(cls, S, *, validate: bool = True):
        """A 2-D torch sparse CSR or COO tensor with scalar values -> CSR of the same matrix
        (a COO tensor is coalesced first: duplicate entries summed, as torch defines them)."""
        return from_torch_sparse(S, cls=cls, validate=validate)

    @classmethod
    def from_any(cls, obj, num_nodes=None):
        """Any graph description -> CSR: a CSR (returned as is), PyG Data / EdgeIndex, a (2, E)
        edge_index (torch or NumPy; `num_nodes` as in from_edge_index), a torch sparse tensor, a
        torch_sparse SparseTensor or a scipy matrix. TypeError for anything else."""
        return as_graph(obj, num_nodes, cls=cls)

    # products
    def __matmul__(self, X):
        """A @ X: sum over each row's entries, A[i, j] * X[j] (1 * X[j] without values);
        differentiable for torch tensors."""
        return matmul(self, X)

    def reduce(self, X, reduce: str = "sum"):
        """Aggregate the rows of X over each row's neighbours: "sum" / "mean" -> out;
        "max" / "min" -> (out, arg), arg the CSR position of the winning entry (-1 for an empty
        row: A.col[arg] is the neighbour, A.edge_perm[arg] the input edge id). Differentiable for
        torch tensors (max/min route each gradient to the winning edge)."""
        return reduce_(self, X, reduce)

    def sddmm(self, X, Y, op: str = "dot", edge_order: str = "csr"):
        """One value per stored entry (i, j): op "dot" -> <X[i], Y[j]> (E x 1), "add" ->
        X[i, h] + Y[j, h] per head (E x H). edge_order "csr" (the CSR's entry order) or "input"
        (the order of the edge list the CSR was built from). Differentiable for torch tensors."""
        return sddmm(self, X, Y, op, edge_order)

    def fusedmm(self, X, Y, Z, op: str = "dot", edge: str = "none", slope: float = 0.2, return_edges: bool = False,
                edge_order: str = "csr"):
        """SDDMM scores (op "dot" or "add"), an edge function ("none", "leaky_relu", "exp",
        "softmax", "leaky_relu_softmax" over each row) and the SpMM of the result with Z, in one
        pass: the edge values are not stored unless return_edges=True (then (out, edges), edges in
        `edge_order`). See gnnsparse.fusedmm for shapes and heads."""
        return fusedmm(self, X, Y, Z, op, edge, slope, return_edges, edge_order)

    # locality
    def reorder(self, method: str = "rcm", *, parts=None, sort_columns: bool = False):
        """(B, perm): this graph with its nodes renumbered for locality ("rcm", "degree" or "metis";
        perm is new -> old). Features follow with gnnsparse.permute(X, perm), results go back
        with gnnsparse.unpermute(Y, perm)."""
        from ._reorder import reorder as _reorder

        return _reorder(self, method, parts=parts, sort_columns=sort_columns)

    # conversions
    def to_dense(self, like=None):
        """The dense M x K matrix (duplicate entries summed, values 1 when there are none): a torch
        tensor when the CSR's arrays or `like` are torch tensors (on their device), else NumPy."""
        return to_dense(self, like)

    def edges_to_input_order(self, E):
        """Per-entry values in CSR order (what sddmm / fusedmm return) -> the order of the edge
        list the CSR was built from: out[edge_perm[k]] = E[k]."""
        return edges_to_input_order(self, E)

    def edges_from_input_order(self, w):
        """Per-edge values in the input edge list's order -> CSR order (w[edge_perm])."""
        return edges_from_input_order(self, w)

    def tensors(self, like="cpu"):
        """The graph as torch tensors on `like`'s device (a tensor or a device), with its transpose:
        what gnnsparse.torch ops and layers take (cached per device; needs gnnsparse.torch)."""
        from ._ops import torch_layer

        return torch_layer("CSR.tensors").graph_tensors(self, like)


reduce_ = reduce
