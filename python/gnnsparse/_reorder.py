"""Locality reordering: renumber the nodes of a square graph so that neighbours get nearby ids.

SpMM gathers one feature row per edge; when the rows a warp (or a run of consecutive output rows)
gathers lie close together they are served from L2 instead of memory. A graph whose ids were
assigned at random (shuffled crawls, hashed ids) loses that locality; a reordering gets it back.

    B, perm = A.reorder("rcm")                 # or "degree", "metis"
    Yb = gs.spmm(B, permute(X, perm))          # == permute(gs.spmm(A, X), perm), bitwise for sum
    Y = unpermute(Yb, perm)                    # back to A's numbering

Convention: `perm` is new -> old (new node i is old node perm[i]), so B = P A P^T with
B[i, j] = A[perm[i], perm[j]], features follow as X[perm] and results go back with out[perm] = Yb.

Edge order: row i of B holds the entries of row perm[i] of A in the same order (only their column
ids are renamed), so every reduction visits the same messages in the same order and the results
are bitwise those of A, permuted (sum and mean included; max/min args are positions in B: map
them with `B.edge_perm_from` -> position in A). One exception on the CUDA backend: a hub row
(longer than max(256, 16x the mean row)) is cut into segments at fixed positions of the whole
edge array, so when the reordering moves it its sum may be grouped differently and differ in the
last bits (max/min stay bitwise). Rows of B are not column-sorted unless `sort_columns=True`
(then sums may differ from A's in the last bits).

Methods (all computed on the host, on the symmetrized pattern A + A^T; the result lives where A
lives):
  "rcm"     reverse Cuthill-McKee (scipy.sparse.csgraph): bandwidth reduction; cheap, good on
            meshes and graphs with community structure.
  "degree"  nodes by descending in-degree (how often a node's feature row is gathered, i.e. its
            count in col), ties by old id (stable): hot rows packed together.
  "metis"   METIS k-way partition (pymetis, optional), nodes grouped by part, parts in part order,
            old order inside a part; `parts` defaults to ceil(n / 4096).
"""
from __future__ import annotations

import math

import numpy as np

from . import _arrays

__all__ = ["METHODS", "reorder", "permute", "unpermute", "inverse_permutation"]

METHODS = ("rcm", "degree", "metis")


def _host_structure(A):
    rowptr = np.asarray(_arrays.to_numpy(A.rowptr)).astype(np.int64)
    col = np.asarray(_arrays.to_numpy(A.col)).astype(np.int64)
    return rowptr, col


def _symmetric_pattern(rowptr, col, n):
    """The pattern of A + A^T without self loops and duplicates, as a scipy CSR (int32 data)."""
    import scipy.sparse as sp

    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(rowptr))
    keep = rows != col
    r, c = rows[keep], col[keep]
    S = sp.csr_matrix((np.ones(2 * r.size, np.int8), (np.concatenate([r, c]), np.concatenate([c, r]))),
                      shape=(n, n))
    S.sum_duplicates()
    S.data[:] = 1
    return S


def _perm_rcm(rowptr, col, n):
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    if n == 0:
        return np.zeros(0, np.int64)
    S = _symmetric_pattern(rowptr, col, n)
    return np.asarray(reverse_cuthill_mckee(S, symmetric_mode=True), dtype=np.int64)


def _perm_degree(rowptr, col, n):
    indeg = np.bincount(col, minlength=n)
    return np.argsort(-indeg, kind="stable").astype(np.int64)


def _perm_metis(rowptr, col, n, parts):
    try:
        import pymetis
    except ImportError as e:
        raise ImportError("reorder(method='metis') needs pymetis (pip install pymetis); "
                          "'rcm' and 'degree' need only scipy") from e
    if parts is None:
        parts = max(1, math.ceil(n / 4096))
    parts = int(parts)
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    if parts == 1 or n <= 1:
        return np.arange(n, dtype=np.int64)
    S = _symmetric_pattern(rowptr, col, n)
    xadj, adjncy = S.indptr.astype(np.int64), S.indices.astype(np.int64)
    if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025.2
        _, membership = pymetis.part_graph(parts, adjacency=pymetis.CSRAdjacency(xadj, adjncy))
    else:
        _, membership = pymetis.part_graph(parts, xadj=xadj, adjncy=adjncy)
    return np.argsort(np.asarray(membership, dtype=np.int64), kind="stable").astype(np.int64)


def inverse_permutation(perm):
    """inv with inv[perm[i]] = i (old -> new for a new -> old perm); NumPy or torch like perm."""
    if _arrays.is_torch(perm):
        import torch

        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(perm.numel(), device=perm.device, dtype=perm.dtype)
        return inv
    perm = np.asarray(perm)
    inv = np.empty_like(perm)
    inv[perm] = np.arange(perm.size, dtype=perm.dtype)
    return inv


def _check_perm_for(X, perm):
    n = _arrays.shape_of(perm)[0] if _arrays.is_torch(perm) else np.asarray(perm).shape[0]
    shape = _arrays.shape_of(X)
    if len(shape) < 1 or shape[0] != n:
        raise ValueError(f"features have {shape[0] if len(shape) else 'no'} rows, the permutation has {n} entries")


def _perm_like(perm, X):
    """perm as an index array in X's framework and device."""
    if _arrays.is_torch(X):
        import torch

        p = perm if _arrays.is_torch(perm) else torch.from_numpy(np.ascontiguousarray(np.asarray(perm, np.int64)))
        return p.to(device=X.device, dtype=torch.int64)
    if isinstance(X, np.ndarray):
        return np.asarray(_arrays.to_numpy(perm), dtype=np.int64)
    # CuPy / dpnp: their own asarray moves the index array to X's device
    xp = type(X).__module__.split(".")[0]
    mod = __import__(xp)
    return mod.asarray(np.asarray(_arrays.to_numpy(perm), dtype=np.int64))


def permute(X, perm):
    """Features (rows = nodes, old numbering) -> the reordered graph's numbering: X[perm].
    Works for NumPy, torch (differentiable: a gather), CuPy and dpnp arrays."""
    _check_perm_for(X, perm)
    p = _perm_like(perm, X)
    if _arrays.is_torch(X):
        return X.index_select(0, p)
    return X[p]


def unpermute(Y, perm):
    """Rows in the reordered numbering -> the old numbering: out[perm] = Y, i.e. Y[inverse(perm)]."""
    _check_perm_for(Y, perm)
    inv = _perm_like(inverse_permutation(np.asarray(_arrays.to_numpy(perm), dtype=np.int64))
                     if not _arrays.is_torch(perm) else inverse_permutation(perm), Y)
    if _arrays.is_torch(Y):
        return Y.index_select(0, inv)
    return Y[inv]


def reorder(A, method: str = "rcm", *, parts=None, sort_columns: bool = False):
    """(B, perm): B = P A P^T (B[i, j] = A[perm[i], perm[j]]) and perm (NumPy int64, new -> old).

    B lives where A lives, keeps A's index type and value dtype, and each of its rows keeps the
    entry order of the row of A it comes from (so SpMM on B is bitwise SpMM on A, permuted) unless
    sort_columns=True. `B.edge_perm_from[k]` is the position in A of B's entry k (B.val ==
    A.val[B.edge_perm_from]); when A has `edge_perm`, B.edge_perm = A.edge_perm[B.edge_perm_from].
    `parts`: number of METIS parts (method="metis" only)."""
    from ._csr import CSR

    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"reorder method must be one of {', '.join(METHODS)}; got {method!r}")
    if parts is not None and method != "metis":
        raise ValueError(f"parts is a METIS option; method={method!r} takes none")
    M, K = A.shape
    if M != K:
        raise ValueError(f"reorder renumbers the nodes of a square graph; this matrix is {M} x {K}")
    n = M
    rowptr, col = _host_structure(A)
    if method == "rcm":
        perm = _perm_rcm(rowptr, col, n)
    elif method == "degree":
        perm = _perm_degree(rowptr, col, n)
    else:
        perm = _perm_metis(rowptr, col, n, parts)
    if perm.shape != (n,) or (n and not np.array_equal(np.sort(perm), np.arange(n))):  # pragma: no cover
        raise RuntimeError(f"reorder({method!r}) produced an invalid permutation")
    inv = inverse_permutation(perm)
    deg = np.diff(rowptr)
    new_deg = deg[perm]
    new_rowptr = np.zeros(n + 1, np.int64)
    np.cumsum(new_deg, out=new_rowptr[1:])
    # entry k of B comes from entry src[k] of A: row perm[i]'s entries, in their order
    starts = np.repeat(rowptr[:-1][perm] - new_rowptr[:-1], new_deg)
    src = np.arange(A.nnz, dtype=np.int64) + starts
    new_col = inv[col[src]]
    if sort_columns and A.nnz:
        rows = np.repeat(np.arange(n, dtype=np.int64), new_deg)
        order = np.lexsort((new_col, rows))
        src, new_col = src[order], new_col[order]
    it = np.dtype(A.index_dtype)
    if _arrays.is_torch(A.rowptr):  # torch (any device): values gathered in place, dtype kept
        import torch

        dev = A.rowptr.device
        src_t = torch.from_numpy(src).to(dev)
        val = None if A.val is None else A.val.index_select(0, src_t)
        B = CSR(torch.from_numpy(new_rowptr.astype(it)).to(dev), torch.from_numpy(new_col.astype(it)).to(dev),
                val, (n, n), validate=False, copy=False)
    else:
        val = None if A.val is None else _arrays.to_numpy(A.val)[src]
        B = CSR(new_rowptr.astype(it), new_col.astype(it), val, (n, n), validate=False, copy=False)
        if A.kind != "numpy":
            B = B.to_like(A.rowptr)
    B.edge_perm_from = src
    if getattr(A, "edge_perm", None) is not None:
        B.edge_perm = np.asarray(_arrays.to_numpy(A.edge_perm), dtype=np.int64)[src]
        if _arrays.is_torch(A.edge_perm):
            import torch

            B.edge_perm = torch.from_numpy(B.edge_perm).to(A.edge_perm.device)
    return B, perm
