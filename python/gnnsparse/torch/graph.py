"""GraphTensors: a graph as torch tensors on one device, with everything a backward pass needs.

The custom ops take tensors only (so torch.compile can trace them); this tuple carries the CSR of
A (one row per target node), its transpose and the index arrays the backward passes use:

    rowptr, col, val    A (M x K); val None = every edge weighs 1
    t_rowptr, t_col     A^T (K x M), the same edges grouped by source
    t_perm              A^T's entry t is A's entry t_perm[t] (so A^T.val = val[t_perm])
    rows                the row (target) of every entry of A (COO rows)
    eid                 arange(nnz): A's pattern with entry ids as columns, so that SpMM over
                        (rowptr, eid) sums per-edge values per row, deterministically
    edge_perm           CSR position -> the caller's edge id (None when built from a matrix)

Index arrays share one dtype (int32, or int64 when a size needs it). Built once per graph and
device (graph_tensors caches it on the CSR) in torch on the device itself: the transpose is a
stable argsort of col, so t_perm is the same permutation as gnnsparse.CSR.T.perm.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch
from torch import Tensor

from .. import _arrays

INT32_MAX = 2**31 - 1


class GraphTensors(NamedTuple):
    rowptr: Tensor
    col: Tensor
    val: Optional[Tensor]
    t_rowptr: Tensor
    t_col: Tensor
    t_perm: Tensor
    rows: Tensor
    eid: Tensor
    edge_perm: Optional[Tensor]
    num_rows: int
    num_cols: int

    @property
    def nnz(self) -> int:
        """Stored entries (edges)."""
        return self.col.shape[0]

    @property
    def shape(self):
        """(num_rows, num_cols): targets x sources."""
        return (self.num_rows, self.num_cols)

    @property
    def device(self) -> torch.device:
        """The device of the tensors."""
        return self.rowptr.device

    def with_val(self, val: Optional[Tensor]) -> "GraphTensors":
        """The same graph with other edge values (nnz,), in CSR order."""
        if val is not None and tuple(val.shape) != (self.nnz,):
            raise ValueError(f"edge values must have shape ({self.nnz},) (one per edge), got {tuple(val.shape)}")
        return self._replace(val=val)

    def __repr__(self):
        return (f"GraphTensors(shape={self.shape}, nnz={self.nnz}, index={str(self.col.dtype)[6:]}, "
                f"values={'none' if self.val is None else str(self.val.dtype)[6:]}, device={self.device})")


def _index_dtype(*sizes) -> torch.dtype:
    return torch.int64 if max((int(s) for s in sizes), default=0) > INT32_MAX else torch.int32


def build(rowptr: Tensor, col: Tensor, val: Optional[Tensor], num_cols: int,
          edge_perm: Optional[Tensor] = None, itype: Optional[torch.dtype] = None) -> GraphTensors:
    """GraphTensors from a valid CSR given as torch tensors on one device (not checked: build the
    CSR with gnnsparse.CSR or from_edge_index when the input is untrusted)."""
    M = rowptr.shape[0] - 1
    K = int(num_cols)
    nnz = col.shape[0]
    it = itype or (torch.int64 if (rowptr.dtype == torch.int64 and col.dtype == torch.int64
                                   and max(M, K, nnz) > INT32_MAX) else _index_dtype(M, K, nnz))
    dev = rowptr.device
    rowptr64 = rowptr.to(torch.int64)
    col64 = col.to(torch.int64)
    rows = torch.repeat_interleave(torch.arange(M, device=dev, dtype=torch.int64), rowptr64.diff(),
                                   output_size=nnz)
    t_perm = torch.argsort(col64, stable=True)
    t_rowptr = torch.zeros(K + 1, dtype=torch.int64, device=dev)
    if nnz:
        t_rowptr[1:] = torch.cumsum(torch.bincount(col64, minlength=K), 0)
    return GraphTensors(rowptr.to(it), col.to(it), val, t_rowptr.to(it), rows[t_perm].to(it), t_perm.to(it),
                        rows.to(it), torch.arange(nnz, device=dev, dtype=it),
                        None if edge_perm is None else edge_perm.to(dev, torch.int64), M, K)


def from_edge_index(edge_index: Tensor, num_nodes: int, edge_weight: Optional[Tensor] = None,
                    num_src: Optional[int] = None) -> GraphTensors:
    """(2, E) edge_index (row 0 source, row 1 target) -> GraphTensors with one row per target,
    edges stably sorted by target (edge_perm keeps the input order). Checks the range of the ids."""
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {tuple(edge_index.shape)}")
    if edge_index.dtype.is_floating_point or edge_index.dtype == torch.bool:
        raise TypeError(f"edge_index must hold integers, got {edge_index.dtype}")
    n_dst = int(num_nodes)
    n_src = n_dst if num_src is None else int(num_src)
    src, dst = edge_index[0].to(torch.int64), edge_index[1].to(torch.int64)
    if src.numel():
        bad = (src < 0) | (src >= n_src) | (dst < 0) | (dst >= n_dst)
        if bool(bad.any()):
            e = int(torch.nonzero(bad)[0, 0])
            raise ValueError(f"edge {e} = ({int(src[e])}, {int(dst[e])}) is outside the graph's "
                             f"{n_src} source / {n_dst} target nodes")
    perm = torch.argsort(dst, stable=True)
    rowptr = torch.zeros(n_dst + 1, dtype=torch.int64, device=edge_index.device)
    if dst.numel():
        rowptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n_dst), 0)
    if edge_weight is not None:
        if tuple(edge_weight.shape) != (src.numel(),):
            raise ValueError(f"edge_weight must have shape ({src.numel()},), got {tuple(edge_weight.shape)}")
        edge_weight = edge_weight[perm]
    return build(rowptr, src[perm], edge_weight, n_src, edge_perm=perm)


# ---------------------------------------------------------------- from a gnnsparse.CSR
def _device_of(like) -> torch.device:
    if isinstance(like, Tensor):
        return like.device
    if isinstance(like, GraphTensors):
        return like.device
    dev = torch.device(like)
    if dev.type == "cuda" and dev.index is None:  # "cuda" means the current device, as tensors see it
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def _where(A) -> str:
    r = A.rowptr
    if isinstance(r, Tensor):
        return str(r.device)
    k = _arrays.kind(r)
    return "host memory (NumPy)" if k == "numpy" else ("a CUDA device" if k == "cuda" else "a SYCL USM device")


def graph_tensors(A, like="cpu") -> GraphTensors:
    """The CSR `A` as GraphTensors on the device of `like` (a tensor, a device or a device string).

    A CSR in host memory (NumPy, or built from CPU tensors) goes to any device, copied once and
    cached; a CSR whose arrays live on a device is only used on that device (ValueError naming
    both devices otherwise). GraphTensors passed in are checked and returned as they are.
    """
    dev = _device_of(like)
    if isinstance(A, GraphTensors):
        if A.device != dev:
            raise ValueError(f"the graph is on {A.device} but the features are on {dev}; move one of them "
                             "(graph: gnnsparse.torch.graph_tensors(A, device); features: x.to(device))")
        return A
    if not hasattr(A, "rowptr") or not hasattr(A, "shape"):
        raise TypeError(f"expected a gnnsparse.CSR or GraphTensors, got {type(A).__name__} "
                        "(gnnsparse.as_graph makes one from edge_index, PyG Data, SparseTensor, ...)")
    kind = _arrays.kind(A.rowptr)
    if kind != "numpy":
        here = A.rowptr.device if isinstance(A.rowptr, Tensor) else None
        if kind == "usm" or (here is not None and here != dev) or (here is None and dev.type != "cuda"):
            raise ValueError(f"the graph lives on {_where(A)} but the features are on {dev}; move one of them "
                             "(A.to_like(x), or build the graph on the features' device)")
    cache = A.derived("torch.graph_tensors", dict)  # per device, and the values' device copies
    key = str(dev)
    g = cache.get(key)
    if g is None:
        rowptr, col = _arrays.to_torch(A.rowptr, dev), _arrays.to_torch(A.col, dev)
        perm = getattr(A, "edge_perm", None)
        g = build(rowptr, col, None, A.shape[1], None if perm is None else _arrays.to_torch(perm, dev),
                  itype=torch.int64 if str(A.rowptr.dtype).endswith("int64") else torch.int32)
        cache[key] = g
    val = A.val
    if val is None:
        return g
    if isinstance(val, Tensor) and val.device == dev:
        return g._replace(val=val)
    # host values: wrapped (CPU) or uploaded (devices) once per value array; a CSR's host values are
    # read-only, so new values are a new array (A.val = ...) and never a stale copy
    vkey = (key, "val", id(val))
    hit = cache.get(vkey)
    if hit is None or hit[0] is not val:
        for k in [k for k in cache if isinstance(k, tuple) and k[:2] == (key, "val")]:
            del cache[k]
        hit = cache[vkey] = (val, _arrays.to_torch(val, dev))
    return g._replace(val=hit[1])


def as_graph_tensors(graph, like, num_nodes: Optional[int] = None) -> GraphTensors:
    """Anything that describes a graph -> GraphTensors on like's device. A (2, E) edge_index tensor
    is converted on every call (layers cache it); CSRs and GraphTensors are cached/returned."""
    if isinstance(graph, GraphTensors) or hasattr(graph, "rowptr"):
        return graph_tensors(graph, like)
    if isinstance(graph, Tensor) and graph.layout == torch.strided and not hasattr(graph, "sparse_size"):
        n = num_nodes if num_nodes is not None else (int(graph.max()) + 1 if graph.numel() else 0)
        return from_edge_index(graph.to(_device_of(like)), n)
    from .._graph import as_graph

    return graph_tensors(as_graph(graph, num_nodes), like)


# ---------------------------------------------------------------- self loops
def self_loops(g: GraphTensors, mode: str, fill: float = 1.0, *, leading_columns: bool = False) -> GraphTensors:
    """A square graph with exactly one self loop per node, as PyG builds it.

    mode="replace": drop existing loops, add one loop per node weighing `fill` (GATConv:
    remove_self_loops + add_self_loops); mode="remaining": keep the weight of an existing loop
    (the last one when a node has several) and give the others `fill` (GCNConv:
    add_remaining_self_loops). edge_perm of the result follows PyG's edge order: the kept edges in
    the caller's order, then the loops of nodes 0..n-1. Each row's loop is its last entry.
    leading_columns: the graph may have more columns than rows, its first num_rows columns being
    the rows' own nodes (a distributed piece: [local | halo] columns); row i's loop is column i.
    """
    if g.num_rows > g.num_cols if leading_columns else g.num_rows != g.num_cols:
        raise ValueError(f"self loops need a square graph, got {g.num_rows} x {g.num_cols}")
    n, dev = g.num_rows, g.device
    rows, col = g.rows.to(torch.int64), g.col.to(torch.int64)
    keep = rows != col
    val = g.val
    loop_val = None  # without edge values every edge, loops included, weighs 1 (as in PyG)
    if val is not None:
        loop_val = torch.full((n,), float(fill), dtype=val.dtype, device=dev)
        loops = torch.nonzero(~keep).reshape(-1)
        if mode == "remaining" and loops.numel():
            # the last loop of a node in the caller's order keeps its weight, like PyG
            order = loops if g.edge_perm is None else loops[torch.argsort(g.edge_perm[loops], stable=True)]
            node = rows[order]
            last = torch.full((n,), -1, dtype=torch.int64, device=dev).scatter_reduce_(
                0, node, torch.arange(order.numel(), device=dev), "amax")
            has = torch.nonzero(last >= 0).reshape(-1)
            loop_val = loop_val.index_put((has,), val[order[last[has]]])
    kept = torch.nonzero(keep).reshape(-1)
    kept_rows = rows[kept]
    counts = torch.bincount(kept_rows, minlength=n) + 1
    rowptr = torch.zeros(n + 1, dtype=torch.int64, device=dev)
    rowptr[1:] = torch.cumsum(counts, 0)
    nnz = kept.numel() + n
    new_col = torch.empty(nnz, dtype=torch.int64, device=dev)
    kept_pos = torch.arange(kept.numel(), device=dev) + kept_rows  # each earlier row gained one loop
    loop_pos = rowptr[1:] - 1
    new_col[kept_pos] = col[kept]
    new_col[loop_pos] = torch.arange(n, device=dev)
    new_val = None
    if val is not None:
        new_val = torch.empty(nnz, dtype=val.dtype, device=dev)
        new_val[kept_pos] = val[kept]
        new_val[loop_pos] = loop_val
    perm = None
    if g.edge_perm is not None:
        # caller's order of the kept edges, then the loops (PyG's order after add_self_loops)
        ep = g.edge_perm[kept]
        rank = torch.empty_like(ep)
        rank[torch.argsort(ep)] = torch.arange(ep.numel(), device=dev)
        perm = torch.empty(nnz, dtype=torch.int64, device=dev)
        perm[kept_pos] = rank
        perm[loop_pos] = kept.numel() + torch.arange(n, device=dev)
    return build(rowptr, new_col, new_val, g.num_cols, edge_perm=perm,
                 itype=g.col.dtype if nnz <= INT32_MAX else None)
