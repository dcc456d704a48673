"""Seeded, vectorized graph and matrix generators (no downloads).

Every generator takes a `seed` (int or numpy.random.Generator) and returns a gnnsparse.CSR whose
rows are sorted by column. Graph generators follow CSR.from_edge_index's convention: an edge
(src, dst) is stored as A[dst, src], so spmm(A, X) aggregates messages from sources at targets.
Multi-edges are kept (they are separate edges for every op); self loops are allowed.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._csr import CSR

__all__ = ["uniform_edges", "uniform_random", "regular_random", "rmat", "sbm", "grid_matrix", "grid72_shapes", "csr_from_coo", "SBMGraph"]


def _rng(seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def _index_dtype(*sizes):
    return np.int64 if max(sizes) > 2**31 - 1 else np.int32


def csr_from_coo(rows, cols, shape, val=None, *, sort=True) -> CSR:
    """CSR from COO arrays (duplicates kept). Entries are ordered by (row, col) when sort=True."""
    M, K = (int(s) for s in shape)
    rows = np.asarray(rows, np.int64)
    cols = np.asarray(cols, np.int64)
    if sort:
        if val is None:
            key = rows * max(K, 1) + cols
            key.sort()
            rows, cols = np.divmod(key, max(K, 1))
        else:
            order = np.lexsort((cols, rows))
            rows, cols, val = rows[order], cols[order], np.asarray(val)[order]
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=M), out=rowptr[1:])
    it = _index_dtype(M, K, len(cols))
    return CSR(rowptr.astype(it), cols.astype(it), val, (M, K), validate=False)


def _symmetrize(src, dst):
    return np.concatenate([src, dst]), np.concatenate([dst, src])


def uniform_edges(n: int, e: int, seed=0, *, m: int | None = None) -> np.ndarray:
    """A (2, e) int64 edge_index (PyG layout: row 0 sources in [0, n), row 1 targets in [0, m),
    m = n by default), endpoints uniform and independent: the edges of uniform_random."""
    rng = _rng(seed)
    src = rng.integers(0, n, e, dtype=np.int64)
    dst = rng.integers(0, n if m is None else int(m), e, dtype=np.int64)
    return np.stack([src, dst])


def uniform_random(n: int, e: int, seed=0, *, m: int | None = None, symmetric: bool = False,
                   weighted: bool = False) -> CSR:
    """Erdos-Renyi-style multigraph: e edges with endpoints drawn uniformly from n nodes.

    m: number of target nodes (rows) when the matrix is rectangular (default n).
    symmetric: draw e // 2 undirected edges and store both directions (e stays the stored count,
    rounded down to even), as ogbn-arxiv's symmetrised graph is.
    weighted: float32 edge weights uniform in [0.5, 1.5).
    """
    if n <= 0 or e < 0:
        raise ValueError(f"uniform_random needs n > 0 and e >= 0, got n={n}, e={e}")
    rng = _rng(seed)
    m = n if m is None else int(m)
    if symmetric:
        if m != n:
            raise ValueError("a symmetric graph is square: leave m unset")
        src = rng.integers(0, n, e // 2, dtype=np.int64)
        dst = rng.integers(0, n, e // 2, dtype=np.int64)
        src, dst = _symmetrize(src, dst)
    else:
        src, dst = uniform_edges(n, e, rng, m=m)
    val = rng.uniform(0.5, 1.5, len(src)).astype(np.float32) if weighted else None
    return csr_from_coo(dst, src, (m, n), val)


def regular_random(n: int, e: int, seed=0, *, weighted: bool = False) -> CSR:
    """n x n, every row floor(e / n) or ceil(e / n) entries (the first e mod n rows one more),
    columns uniform in [0, n) and sorted within rows (duplicates kept): the same work per row, so
    row-length effects stay out of a measurement. weighted: float32 values uniform in [0.5, 1.5)."""
    if n <= 0 or e < 0:
        raise ValueError(f"regular_random needs n > 0 and e >= 0, got n={n}, e={e}")
    rng = _rng(seed)
    deg = np.full(n, e // n, np.int64)
    deg[: e - int(deg.sum())] += 1
    rows = np.repeat(np.arange(n, dtype=np.int64), deg)
    cols = rng.integers(0, n, e, dtype=np.int64)
    val = rng.uniform(0.5, 1.5, e).astype(np.float32) if weighted else None
    return csr_from_coo(rows, cols, (n, n), val)


def _rmat_edges(rng, scale, count, a, b, c):
    """count R-MAT edges on 2**scale nodes: each level picks a quadrant with probs a, b, c, d."""
    it = np.int32 if scale < 31 else np.int64
    r = np.zeros(count, it)
    k = np.zeros(count, it)
    a, ab, abc = np.float32(a), np.float32(a + b), np.float32(a + b + c)
    for level in range(scale):
        u = rng.random(count, dtype=np.float32)
        rbit = u >= ab                                  # quadrants c, d: lower half
        cbit = (u >= a) ^ rbit ^ (u >= abc)             # quadrants b, d: right half
        r |= rbit.astype(it) << it(level)
        k |= cbit.astype(it) << it(level)
    return r.astype(np.int64), k.astype(np.int64)


def rmat(n: int, e: int, seed=0, *, a: float = 0.57, b: float = 0.19, c: float = 0.19,
         symmetric: bool = False, permute: bool = True) -> CSR:
    """R-MAT power-law graph (Chakrabarti et al. 2004) with n nodes and e edges.

    Node 0 of the recursive matrix gets a share (a + b)**scale of the edges as a target, so hubs
    grow with e: (a, b, c) = (0.65, 0.15, 0.15) gives a hub of in-degree > 1e5 at n = 1M, e = 10M.
    Edges outside [0, n) (when n is not a power of two) are redrawn. permute=True relabels nodes
    with a seeded random permutation so the hubs are spread over the id range.
    """
    if n <= 0 or e < 0:
        raise ValueError(f"rmat needs n > 0 and e >= 0, got n={n}, e={e}")
    d = 1.0 - a - b - c
    if min(a, b, c, d) < 0:
        raise ValueError(f"rmat probabilities must be >= 0 and a + b + c <= 1, got a={a}, b={b}, c={c}")
    rng = _rng(seed)
    scale = max(1, math.ceil(math.log2(n)))
    want = e // 2 if symmetric else e
    rows, cols, have = [], [], 0
    while have < want:
        extra = want - have
        draw = int(extra * (2 ** scale / n) ** 2 * 1.05) + 16
        r, k = _rmat_edges(rng, scale, draw, a, b, c)
        keep = (r < n) & (k < n)
        r, k = r[keep][:extra], k[keep][:extra]
        rows.append(r)
        cols.append(k)
        have += len(r)
    dst = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    src = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    if permute:
        perm = rng.permutation(n)
        dst, src = perm[dst], perm[src]
    if symmetric:
        src, dst = _symmetrize(src, dst)
    return csr_from_coo(dst, src, (n, n))


class SBMGraph(NamedTuple):
    """A stochastic block model graph for node classification."""
    A: CSR
    labels: np.ndarray      # (n,) int64 class of every node
    features: np.ndarray    # (n, feature_dim) float32, class-correlated


def sbm(n: int, num_classes: int, avg_degree: float, seed=0, *, p_intra: float = 0.8,
        feature_dim: int = 128, signal: float = 1.0, symmetric: bool = True) -> SBMGraph:
    """Stochastic block model: n nodes in num_classes random classes, n * avg_degree stored edges.

    Each edge starts at a uniform node; with probability p_intra its other end is a uniform node of
    the same class, else a uniform node of the whole graph. Features are signal * mu[class] + noise
    with mu ~ N(0, I) per class and N(0, I) noise, so both the structure and the features carry the
    labels (a GNN can learn them; a constant predictor gets ~1/num_classes).
    """
    if n <= 0 or num_classes <= 0 or avg_degree < 0:
        raise ValueError(f"sbm needs n > 0, num_classes > 0, avg_degree >= 0; got {n}, {num_classes}, {avg_degree}")
    if not 0.0 <= p_intra <= 1.0:
        raise ValueError(f"p_intra must be in [0, 1], got {p_intra}")
    rng = _rng(seed)
    labels = rng.integers(0, num_classes, n, dtype=np.int64)
    order = np.argsort(labels, kind="stable")
    counts = np.bincount(labels, minlength=num_classes)
    start = np.zeros(num_classes, np.int64)
    np.cumsum(counts[:-1], out=start[1:])
    e = int(round(n * avg_degree))
    draws = e // 2 if symmetric else e
    src = rng.integers(0, n, draws, dtype=np.int64)
    intra = rng.random(draws) < p_intra
    cls = labels[src]
    within = order[start[cls] + (rng.random(draws) * counts[cls]).astype(np.int64)]
    anywhere = rng.integers(0, n, draws, dtype=np.int64)
    dst = np.where(intra, within, anywhere)
    if symmetric:
        src, dst = _symmetrize(src, dst)
    centers = rng.standard_normal((num_classes, feature_dim))
    features = (signal * centers[labels] + rng.standard_normal((n, feature_dim))).astype(np.float32)
    return SBMGraph(csr_from_coo(dst, src, (n, n)), labels, features)


def grid_matrix(M: int, K: int, density: float, seed=0, *, values: bool = True) -> CSR:
    """M x K matrix with round(density * K) distinct uniformly placed columns in every row (the
    the ESIMD paper grid: nnz = M * round(density * K), e.g. 80.5M for M=32768, K=8192, density 0.3).
    values: float32 N(0, 1) weights (pruned-weight matrices); else an unweighted pattern."""
    if M < 0 or K <= 0 or not 0.0 <= density <= 1.0:
        raise ValueError(f"grid_matrix needs M >= 0, K > 0, 0 <= density <= 1; got {M}, {K}, {density}")
    rng = _rng(seed)
    per = int(round(density * K))
    it = _index_dtype(M, K, M * per)
    col = np.empty((M, per), it)
    chunk = max(1, (1 << 22) // K)
    for r0 in range(0, M, chunk):
        r1 = min(M, r0 + chunk)
        keys = rng.random((r1 - r0, K), dtype=np.float32)
        if per < K:
            part = np.argpartition(keys, per - 1, axis=1)[:, :per] if per else np.zeros((r1 - r0, 0), np.int64)
        else:
            part = np.broadcast_to(np.arange(K), (r1 - r0, K))
        col[r0:r1] = np.sort(part, axis=1)
    rowptr = (np.arange(M + 1, dtype=np.int64) * per).astype(it)
    val = rng.standard_normal(M * per, dtype=np.float32) if values else None
    return CSR(rowptr, col.reshape(-1), val, (M, K), validate=False)


def grid72_shapes():
    """The 72 (M, K, density, N) cases of the Intel ESIMD SpMM/SDDMM paper grid, in the order of its figures."""
    out = []
    for K in (1024, 2048, 4096, 8192):
        for M in (K, 3 * K, 4 * K):
            for d in (0.3, 0.2, 0.1):
                for N in (32, 128):
                    out.append((M, K, d, N))
    return out
