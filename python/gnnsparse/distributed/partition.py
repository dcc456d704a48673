"""Row partitions of a square graph and each rank's piece of it (NumPy, built once per graph).

A partition relabels the nodes (new id = position in `perm`, so `perm[new] = original id`) and
gives rank r the contiguous range of new ids [bounds[r], bounds[r + 1]). The relabelling is the
identity ("range"), a locality order of A.reorder ("rcm": reverse Cuthill-McKee, "degree"), the
grouping of a METIS partition ("metis", needs pymetis), or any node -> part assignment the
caller gives. Ranges are balanced by rows + stored edges.

Rank r's LocalGraph holds its rows' CSR with columns renumbered into [local | halo]: column c <
n_local is local row c (new id bounds[r] + c), column n_local + h is halo node h. The halo is
sorted by new id, so it is grouped by owner rank in ascending order. The send/receive plan:
recv_counts[q] = halo nodes owned by rank q; send_counts[q] and send_idx = this rank's local rows
rank q reads, grouped by q ascending, each group in q's halo order. Within every row the edges
keep the original CSR order (only the column ids change), so a reduction over a local row visits
the same edges in the same order as over the original row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

import numpy as np

__all__ = ["Partition", "LocalGraph", "partition", "local_graphs", "local_graph", "assemble", "edge_cut",
           "local_graph_from_edges", "METHODS"]

METHODS = ("range", "rcm", "degree", "metis")


@dataclass(frozen=True)
class Partition:
    """Nodes relabelled by `perm` (new id -> original id), rank r owning new ids
    [bounds[r], bounds[r + 1])."""
    perm: np.ndarray      # (n,) int64: new id -> original id
    inv: np.ndarray       # (n,) int64: original id -> new id
    bounds: np.ndarray    # (nparts + 1,) int64, bounds[0] = 0, bounds[-1] = n, non-decreasing
    method: str

    @property
    def nparts(self) -> int:
        """Number of parts (ranks)."""
        return int(self.bounds.shape[0] - 1)

    @property
    def num_nodes(self) -> int:
        """Nodes of the whole graph."""
        return int(self.perm.shape[0])

    def owner_of_new(self, new_ids) -> np.ndarray:
        """Rank owning each new id."""
        return np.searchsorted(self.bounds, np.asarray(new_ids, dtype=np.int64), side="right") - 1

    def owner(self, ids) -> np.ndarray:
        """Rank owning each original node id."""
        return self.owner_of_new(self.inv[np.asarray(ids, dtype=np.int64)])

    def nodes(self, rank: int) -> np.ndarray:
        """Original ids of rank's rows, in local order."""
        return self.perm[self.bounds[rank]:self.bounds[rank + 1]]

    def sizes(self) -> np.ndarray:
        """Rows per rank (nparts,)."""
        return np.diff(self.bounds)


@dataclass
class LocalGraph:
    """One rank's rows of a partitioned graph and its exchange plan (NumPy, int64 indices)."""
    rank: int
    nparts: int
    lo: int                   # first new id of this rank's rows
    hi: int                   # one past the last
    nodes: np.ndarray         # (n_local,) original ids of the rows, in local order
    rowptr: np.ndarray        # (n_local + 1,)
    col: np.ndarray           # (nnz_local,) in [0, n_local + n_halo): local rows, then halo
    val: Optional[np.ndarray]  # (nnz_local,) or None
    edge_ids: np.ndarray      # (nnz_local,) position of each local edge in the original CSR
    halo: np.ndarray          # (n_halo,) new ids of the halo nodes, ascending
    halo_nodes: np.ndarray    # (n_halo,) their original ids
    recv_counts: np.ndarray   # (nparts,) halo nodes owned by each rank
    send_counts: np.ndarray   # (nparts,) rows of this rank each rank reads
    send_idx: np.ndarray      # (sum(send_counts),) local row ids, grouped by destination rank

    @property
    def n_local(self) -> int:
        """Rows this rank owns."""
        return self.hi - self.lo

    @property
    def n_halo(self) -> int:
        """Rows of other ranks this rank reads (its halo)."""
        return int(self.halo.shape[0])

    @property
    def nnz(self) -> int:
        """Edges of this rank's rows."""
        return int(self.col.shape[0])

    def describe(self) -> str:
        """One line: rows, edges, halo and rows sent."""
        return (f"rank {self.rank}/{self.nparts}: {self.n_local:,} rows, {self.nnz:,} edges, halo {self.n_halo:,}, "
                f"sends {int(self.send_counts.sum()):,} rows")


# ---------------------------------------------------------------- inputs
def _csr_arrays(A):
    """(rowptr, col, val, n) as host NumPy arrays from a gnnsparse.CSR, a scipy sparse matrix or a
    (rowptr, col[, val]) tuple; the graph must be square (rows and columns are the same nodes)."""
    from .. import _arrays

    def host(a):
        if a is None:
            return None
        if hasattr(a, "detach"):
            return a.detach().cpu().numpy()
        return np.asarray(_arrays.to_numpy(a) if _arrays.kind(a) != "numpy" else a)

    if isinstance(A, tuple):
        if len(A) not in (2, 3):
            raise ValueError("a CSR tuple must be (rowptr, col) or (rowptr, col, val)")
        rowptr, col = host(A[0]), host(A[1])
        val = host(A[2]) if len(A) == 3 else None
        n = rowptr.shape[0] - 1
        shape = (n, n)
    elif hasattr(A, "rowptr") and hasattr(A, "shape"):
        rowptr, col, val, shape = host(A.rowptr), host(A.col), host(A.val), tuple(A.shape)
    elif hasattr(A, "tocsr"):
        S = A.tocsr()
        rowptr, col, val, shape = S.indptr, S.indices, S.data, S.shape
    else:
        raise TypeError(f"partition takes a gnnsparse.CSR, a scipy sparse matrix or a (rowptr, col[, val]) tuple; "
                        f"got {type(A).__name__}")
    if shape[0] != shape[1]:
        raise ValueError(f"a row partition needs a square graph (rows and columns are the same nodes); got "
                         f"{shape[0]} x {shape[1]}")
    rowptr = np.asarray(rowptr)
    col = np.asarray(col)
    if rowptr.ndim != 1 or col.ndim != 1 or not np.issubdtype(rowptr.dtype, np.integer) \
            or not np.issubdtype(col.dtype, np.integer):
        raise TypeError("rowptr and col must be 1-D integer arrays")
    n = int(shape[0])
    if rowptr.shape[0] != n + 1 or rowptr[0] != 0 or rowptr[-1] != col.shape[0] or np.any(np.diff(rowptr) < 0):
        raise ValueError(f"not a valid CSR: rowptr must have {n + 1} non-decreasing entries from 0 to nnz = "
                         f"{col.shape[0]}")
    if col.size and (col.min() < 0 or col.max() >= n):
        raise ValueError(f"column ids must lie in [0, {n})")
    if val is not None and val.shape != col.shape:
        raise ValueError(f"val must have one entry per stored edge ({col.shape[0]}), got {val.shape}")
    return rowptr.astype(np.int64, copy=False), col.astype(np.int64, copy=False), val, n


def _order(method, rowptr, col, n, nparts):
    """new id -> original id, and (for a partition by assignment) the part of every new id."""
    if isinstance(method, np.ndarray) or isinstance(method, (list, tuple)):
        parts = np.asarray(method)
        if parts.shape != (n,) or not np.issubdtype(parts.dtype, np.integer):
            raise ValueError(f"a part assignment must be ({n},) integers, got {parts.shape} {parts.dtype}")
        if parts.size and (parts.min() < 0 or parts.max() >= nparts):
            raise ValueError(f"part ids must lie in [0, {nparts})")
        perm = np.argsort(parts, kind="stable").astype(np.int64)
        return perm, "assigned", parts[perm]
    if method == "range":
        return np.arange(n, dtype=np.int64), method, None
    if method in ("rcm", "degree"):  # the locality reorderings of A.reorder (gnnsparse._reorder)
        from .. import _reorder

        f = _reorder._perm_rcm if method == "rcm" else _reorder._perm_degree
        return f(rowptr, col, n), method, None
    if method == "metis":
        try:
            import pymetis
        except ImportError as e:
            raise ImportError("method='metis' needs pymetis (pip install pymetis, or the 'metis' extra); 'range', "
                              "'rcm' and 'degree' need only scipy") from e
        from .. import _reorder

        if nparts == 1:
            return np.arange(n, dtype=np.int64), method, None
        S = _reorder._symmetric_pattern(rowptr, col, n)
        xadj, adjncy = S.indptr.astype(np.int64), S.indices.astype(np.int64)
        if hasattr(pymetis, "CSRAdjacency"):  # pymetis >= 2025.2
            _, parts = pymetis.part_graph(nparts, adjacency=pymetis.CSRAdjacency(xadj, adjncy))
        else:
            _, parts = pymetis.part_graph(nparts, xadj=xadj, adjncy=adjncy)
        parts = np.asarray(parts, dtype=np.int64)
        perm = np.argsort(parts, kind="stable").astype(np.int64)
        return perm, method, parts[perm]
    raise ValueError(f"method must be one of {', '.join(METHODS)} or an (n,) array of part ids; got {method!r}")


def partition(A, nparts: int, method: Union[str, Sequence[int], np.ndarray] = "range") -> Partition:
    """Split the nodes of the square graph A into `nparts` contiguous ranges of a relabelling.

    method: "range" (ids as they are), "rcm" / "degree" (the locality orders of A.reorder:
    reverse Cuthill-McKee of the symmetrized pattern, so neighbours get nearby ids and fewer
    edges cross ranges; or nodes by descending in-degree), "metis" (a pymetis k-way partition into
    nparts parts, each part one range), or an (n,) array giving each node's part. For "range" /
    "rcm" / "degree" the cut points balance rows + stored edges (every rank gets at least one row);
    parts keep their sizes.
    """
    if isinstance(nparts, bool) or not isinstance(nparts, (int, np.integer)) or nparts < 1:
        raise ValueError(f"nparts must be a positive integer, got {nparts!r}")
    nparts = int(nparts)
    rowptr, col, _, n = _csr_arrays(A)
    if nparts > n:
        raise ValueError(f"cannot split {n} nodes into {nparts} parts (every rank needs at least one row)")
    perm, name, parts = _order(method, rowptr, col, n, nparts)
    if perm.shape != (n,) or not np.array_equal(np.sort(perm), np.arange(n)):
        raise RuntimeError("partition: the ordering is not a permutation of the nodes")  # pragma: no cover
    inv = np.empty(n, dtype=np.int64)
    inv[perm] = np.arange(n, dtype=np.int64)
    if parts is not None:
        bounds = np.searchsorted(parts, np.arange(nparts + 1), side="left").astype(np.int64)
        if np.any(np.diff(bounds) == 0):
            empty = int(np.flatnonzero(np.diff(bounds) == 0)[0])
            raise ValueError(f"part {empty} has no nodes (every rank needs at least one row)")
    else:
        w = np.diff(rowptr)[perm] + 1  # rows + edges
        cum = np.concatenate([[0], np.cumsum(w)])
        targets = cum[-1] * np.arange(1, nparts) / nparts
        cuts = np.searchsorted(cum, targets, side="left")
        bounds = np.concatenate([[0], cuts, [n]]).astype(np.int64)
        for r in range(1, nparts):  # at least one row each, in order
            bounds[r] = min(max(bounds[r], bounds[r - 1] + 1), n - (nparts - r))
    return Partition(perm, inv, bounds, name)


# ---------------------------------------------------------------- local pieces and the plan
def _cut(part: Partition, rowptr, col):
    """Unique (reader rank, new id of a remote column) pairs, sorted by reader then new id."""
    n = part.num_nodes
    P = part.nparts
    row_new = np.repeat(part.inv, np.diff(rowptr))  # new id of each edge's row (CSR order)
    col_new = part.inv[col]
    reader = part.owner_of_new(row_new)
    remote = part.owner_of_new(col_new) != reader
    key = np.unique(reader[remote] * n + col_new[remote])
    reader_of = key // n
    node = key % n
    starts = np.searchsorted(reader_of, np.arange(P + 1))
    return reader_of, node, starts


def local_graph(A, part: Partition, rank: int, *, _cut_cache=None) -> LocalGraph:
    """Rank `rank`'s LocalGraph (rows, [local | halo] columns, exchange plan) of graph A."""
    rowptr, col, val, n = _csr_arrays(A)
    if n != part.num_nodes:
        raise ValueError(f"the partition covers {part.num_nodes} nodes but the graph has {n}")
    P = part.nparts
    if not 0 <= rank < P:
        raise ValueError(f"rank must lie in [0, {P}), got {rank}")
    reader_of, node, starts = _cut_cache if _cut_cache is not None else _cut(part, rowptr, col)
    lo, hi = int(part.bounds[rank]), int(part.bounds[rank + 1])
    nodes = part.perm[lo:hi]
    deg = np.diff(rowptr)[nodes]
    lrowptr = np.zeros(hi - lo + 1, dtype=np.int64)
    np.cumsum(deg, out=lrowptr[1:])
    # original CSR positions of the local rows' edges, row by row, each row in its original order
    first = rowptr[nodes]
    edge_ids = np.repeat(first - lrowptr[:-1], deg) + np.arange(lrowptr[-1], dtype=np.int64)
    cnew = part.inv[col[edge_ids]]
    halo = node[starts[rank]:starts[rank + 1]]  # ascending new ids
    is_local = (cnew >= lo) & (cnew < hi)
    lcol = np.where(is_local, cnew - lo, 0)
    if halo.size:
        hpos = np.searchsorted(halo, cnew[~is_local])
        lcol[~is_local] = (hi - lo) + hpos
    recv_counts = np.bincount(part.owner_of_new(halo), minlength=P).astype(np.int64) if halo.size \
        else np.zeros(P, dtype=np.int64)
    # what the others read from this rank: their halo entries inside [lo, hi), per reader ascending
    owned = (node >= lo) & (node < hi)
    send_counts = np.array([int(owned[starts[q]:starts[q + 1]].sum()) for q in range(P)], dtype=np.int64)
    send_idx = node[owned] - lo  # key order: reader ascending, then new id ascending
    return LocalGraph(rank, P, lo, hi, nodes, lrowptr, lcol.astype(np.int64), None if val is None else val[edge_ids],
                      edge_ids, halo.astype(np.int64), part.perm[halo], recv_counts, send_counts,
                      send_idx.astype(np.int64))


def local_graphs(A, part: Partition) -> List[LocalGraph]:
    """Every rank's LocalGraph (the cut is computed once)."""
    rowptr, col, _, _ = _csr_arrays(A)
    cut = _cut(part, rowptr, col)
    return [local_graph(A, part, r, _cut_cache=cut) for r in range(part.nparts)]


def assemble(pieces: Sequence[LocalGraph], num_nodes: int):
    """The original CSR (rowptr, col, val) rebuilt from all ranks' pieces (the round trip of
    partition + local_graph; used by the tests and as a check of a plan)."""
    deg = np.zeros(num_nodes, dtype=np.int64)
    for p in pieces:
        deg[p.nodes] = np.diff(p.rowptr)
    rowptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(deg, out=rowptr[1:])
    nnz = int(rowptr[-1])
    col = np.empty(nnz, dtype=np.int64)
    val = None
    if pieces and pieces[0].val is not None:
        val = np.empty(nnz, dtype=pieces[0].val.dtype)
    for p in pieces:
        ids = np.concatenate([p.nodes, p.halo_nodes])  # local column -> original id
        pos = np.repeat(rowptr[p.nodes] - p.rowptr[:-1], np.diff(p.rowptr)) + np.arange(p.nnz)
        col[pos] = ids[p.col]
        if val is not None:
            val[pos] = p.val
    return rowptr, col, val


def edge_cut(A, part: Partition) -> dict:
    """Exchange volume of a partition: stored edges whose column lives on another rank, and the
    halo rows every rank receives per exchange (rows x feature bytes = the bytes on the wire)."""
    rowptr, col, _, _ = _csr_arrays(A)
    reader_of, node, starts = _cut(part, rowptr, col)
    row_new = np.repeat(part.inv, np.diff(rowptr))
    cut_edges = int((part.owner_of_new(part.inv[col]) != part.owner_of_new(row_new)).sum())
    halo = np.diff(starts)
    return dict(nparts=part.nparts, method=part.method, edges=int(col.shape[0]), cut_edges=cut_edges,
                halo_rows=[int(h) for h in halo], halo_rows_total=int(halo.sum()))


def local_graph_from_edges(edge_index, num_nodes: int, bounds, rank: int, *, self_loops: bool = False) -> LocalGraph:
    """Rank `rank`'s LocalGraph of a range partition (`bounds`, identity relabelling), built with
    torch on the edge list's device: for a graph generated or loaded on a GPU that the host could
    not partition in time. The graph is the CSR `gnnsparse.CSR.from_edge_index(edge_index)` builds
    (one row per target, edges stably sorted by target); self_loops: first drop the loops, then
    append one per node (what `gnnsparse train` does for GAT). Field for field what
    local_graph(that CSR, Partition(identity, bounds), rank) gives (tested)."""
    import torch

    n = int(num_nodes)
    bounds = np.asarray(bounds, dtype=np.int64)
    P = bounds.shape[0] - 1
    if not 0 <= rank < P or bounds[0] != 0 or bounds[-1] != n or np.any(np.diff(bounds) < 1):
        raise ValueError(f"bounds must rise from 0 to {n} with at least one row per part, and rank lie in [0, {P})")
    src, dst = edge_index[0].to(torch.int64), edge_index[1].to(torch.int64)
    dev = src.device
    if self_loops:
        keep = src != dst
        loops = torch.arange(n, device=dev)
        src, dst = torch.cat([src[keep], loops]), torch.cat([dst[keep], loops])
    tb = torch.from_numpy(bounds).to(dev)
    lo, hi = int(bounds[rank]), int(bounds[rank + 1])
    # CSR order of the whole graph: stable by target; global positions give edge_ids
    order = torch.argsort(dst, stable=True)
    deg_all = torch.bincount(dst, minlength=n)
    start = torch.cumsum(deg_all, 0) - deg_all
    mine = order[start[lo]:start[lo] + int(deg_all[lo:hi].sum())] if hi > lo else order[:0]
    s_m = src.index_select(0, mine)
    edge_ids = torch.arange(int(start[lo]), int(start[lo]) + mine.numel(), device=dev)
    rowptr = torch.zeros(hi - lo + 1, dtype=torch.int64, device=dev)
    rowptr[1:] = torch.cumsum(deg_all[lo:hi], 0)
    is_local = (s_m >= lo) & (s_m < hi)
    halo = torch.unique(s_m[~is_local])  # sorted
    col = torch.where(is_local, s_m - lo, torch.zeros_like(s_m))
    if halo.numel():
        col[~is_local] = (hi - lo) + torch.searchsorted(halo, s_m[~is_local])
    recv_counts = torch.bincount(torch.searchsorted(tb, halo, right=True) - 1, minlength=P) if halo.numel() \
        else torch.zeros(P, dtype=torch.int64, device=dev)
    # what the others read from this rank: (reader, source) pairs with the source here
    owned = (src >= lo) & (src < hi)
    reader = torch.searchsorted(tb, dst[owned], right=True) - 1
    so = src[owned]
    remote = reader != rank
    key = torch.unique(reader[remote] * n + so[remote])
    send_reader, send_node = key // n, key % n
    send_counts = torch.bincount(send_reader, minlength=P)
    cpu = lambda t: t.cpu().numpy().astype(np.int64)  # noqa: E731
    halo_np = cpu(halo)
    return LocalGraph(rank, P, lo, hi, np.arange(lo, hi, dtype=np.int64), cpu(rowptr), cpu(col), None, cpu(edge_ids),
                      halo_np, halo_np, cpu(recv_counts), cpu(send_counts), cpu(send_node - lo))
