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
    return torch.int64 if any(s > INT32_MAX for s in sizes) else torch.int32


def _size(n):
    """An int, or a SymInt left symbolic while torch.compile traces (int() would guard on it)."""
    return n if isinstance(n, torch.SymInt) else int(n)


def _row_starts(ids: Tensor, n, order: Tensor) -> Tensor:
    """(n + 1,) int64 row pointers of entries whose row is ids[k] (order: a stable argsort of ids):
    bincount and cumsum; while torch.compile traces, the rows' positions in the sorted ids
    (bincount's output size depends on the values, searchsorted's does not; same result)."""
    if torch.compiler.is_compiling():
        return torch.searchsorted(ids[order], torch.arange(n + 1, device=ids.device, dtype=ids.dtype))
    out = torch.zeros(n + 1, dtype=torch.int64, device=ids.device)
    if ids.numel():
        out[1:] = torch.cumsum(torch.bincount(ids, minlength=n), 0)
    return out


def build(rowptr: Tensor, col: Tensor, val: Optional[Tensor], num_cols: int,
          edge_perm: Optional[Tensor] = None, itype: Optional[torch.dtype] = None) -> GraphTensors:
    """GraphTensors from a valid CSR given as torch tensors on one device (not checked: build the
    CSR with gnnsparse.CSR or from_edge_index when the input is untrusted). Plain torch ops with
    sizes known from the inputs, so torch.compile traces it (pass itype when nnz is symbolic)."""
    M = rowptr.shape[0] - 1
    K = _size(num_cols)
    nnz = col.shape[0]
    it = itype or (torch.int64 if (rowptr.dtype == torch.int64 and col.dtype == torch.int64
                                   and max(M, K, nnz) > INT32_MAX) else _index_dtype(M, K, nnz))
    dev = rowptr.device
    # the keys in the output's index type: an int32 graph sorts int32 columns (the argsort's key and
    # radix buffers half the size; its int64 order is the only int64 array of nnz entries here)
    col = col.to(it)
    rows = torch.repeat_interleave(rowptr.to(it).diff(), output_size=nnz)  # row i repeated deg(i) times
    t_perm = torch.argsort(col, stable=True)
    t_rowptr = _row_starts(col, K, t_perm)
    t_col = rows[t_perm]
    return GraphTensors(rowptr.to(it), col, val, t_rowptr.to(it), t_col, t_perm.to(it), rows,
                        torch.arange(nnz, device=dev, dtype=it),
                        None if edge_perm is None else edge_perm.to(dev, torch.int64), M, K)


# ---------------------------------------------------------------- structure ops
# Turning an edge list into GraphTensors and adding self loops are custom ops (torch.library), so
# that torch.compile(fullgraph=True) traces a layer given edge_index: the range check raises from
# the real kernel (a data-dependent branch cannot be traced), and the self-loop op's edge count,
# which depends on the data, is a dynamic size of its fake kernel. Both return index tensors only;
# edge values follow through a gather outside the op, so gradients reach them.


def _fields(g: GraphTensors) -> list:
    return [g.rowptr, g.col, g.t_rowptr, g.t_col, g.t_perm, g.rows, g.eid, g.edge_perm]


def _graph_from(parts, val, num_rows, num_cols, has_perm=True) -> GraphTensors:
    rowptr, col, t_rowptr, t_col, t_perm, rows, eid, edge_perm = parts[:8]
    return GraphTensors(rowptr, col, val, t_rowptr, t_col, t_perm, rows, eid, edge_perm if has_perm else None,
                        num_rows, num_cols)


def _fake_structure(like: Tensor, n_rows, n_cols, nnz, itype, extra=0) -> list:
    def idx(n, dt=itype):
        return like.new_empty((n,), dtype=dt)

    return ([idx(n_rows + 1), idx(nnz), idx(n_cols + 1), idx(nnz), idx(nnz), idx(nnz), idx(nnz),
             idx(nnz, torch.int64)] + [idx(nnz, torch.int64) for _ in range(extra)])


@torch.library.custom_op("gnnsparse::graph_from_edge_index", mutates_args=())
def _from_edge_index_op(edge_index: Tensor, num_src: int, num_dst: int) -> list[Tensor]:
    src, dst = edge_index[0].to(torch.int64), edge_index[1].to(torch.int64)
    if src.numel():
        bad = (src < 0) | (src >= num_src) | (dst < 0) | (dst >= num_dst)
        if bool(bad.any()):
            e = int(torch.nonzero(bad)[0, 0])
            raise ValueError(f"edge {e} = ({int(src[e])}, {int(dst[e])}) is outside the graph's "
                             f"{num_src} source / {num_dst} target nodes")
    perm = torch.argsort(dst, stable=True)
    return _fields(build(_row_starts(dst, num_dst, perm), src[perm], None, num_src, edge_perm=perm))


@_from_edge_index_op.register_fake
def _(edge_index, num_src, num_dst):
    E = edge_index.shape[1]
    return _fake_structure(edge_index, num_dst, num_src, E, _index_dtype(num_dst, num_src, E))


def from_edge_index(edge_index: Tensor, num_nodes: int, edge_weight: Optional[Tensor] = None,
                    num_src: Optional[int] = None) -> GraphTensors:
    """(2, E) edge_index (row 0 source, row 1 target) -> GraphTensors with one row per target,
    edges stably sorted by target (edge_perm keeps the input order). Checks the range of the ids
    (ValueError naming the first edge outside the graph, also under torch.compile)."""
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"edge_index must have shape (2, E), got {tuple(edge_index.shape)}")
    if edge_index.dtype.is_floating_point or edge_index.dtype == torch.bool:
        raise TypeError(f"edge_index must hold integers, got {edge_index.dtype}")
    n_dst = _size(num_nodes)
    n_src = n_dst if num_src is None else _size(num_src)
    g = _graph_from(_from_edge_index_op(edge_index, n_src, n_dst), None, n_dst, n_src)
    if edge_weight is not None:
        if tuple(edge_weight.shape) != (edge_index.shape[1],):
            raise ValueError(f"edge_weight must have shape ({edge_index.shape[1]},), got {tuple(edge_weight.shape)}")
        g = g._replace(val=edge_weight[g.edge_perm])
    return g


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
    if torch.compiler.is_compiling():
        # caches cannot be traced: the CSR's arrays are inputs of the compiled graph, which builds
        # the GraphTensors on every call (pass GraphTensors to a compiled model to build them once)
        perm = getattr(A, "edge_perm", None)
        rowptr = torch.as_tensor(A.rowptr).to(dev)
        g = build(rowptr, torch.as_tensor(A.col).to(dev), None, A.shape[1],
                  None if perm is None else torch.as_tensor(perm).to(dev), itype=rowptr.dtype)
        return g if A.val is None else g._replace(val=torch.as_tensor(A.val).to(dev))
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
_LOOP_MODES = ("replace", "remaining", "drop")


@torch.library.custom_op("gnnsparse::graph_self_loops", mutates_args=())
def _self_loops_op(rowptr: Tensor, col: Tensor, rows: Tensor, edge_perm: Optional[Tensor], num_cols: int,
                   mode: str) -> list[Tensor]:
    """The structure of self_loops(mode) and `take`: entry k of the result comes from entry take[k]
    of the input (CSR order), or is node i's new loop when take[k] = nnz + i."""
    n, dev, E = rowptr.shape[0] - 1, rowptr.device, col.shape[0]
    rows, col = rows.to(torch.int64), col.to(torch.int64)
    keep = rows != col
    take_loop = E + torch.arange(n, device=dev)
    if mode == "remaining":
        loops = torch.nonzero(~keep).reshape(-1)
        if loops.numel():
            # the last loop of a node in the caller's order keeps its weight, like PyG
            order = loops if edge_perm is None else loops[torch.argsort(edge_perm[loops], stable=True)]
            last = torch.full((n,), -1, dtype=torch.int64, device=dev).scatter_reduce_(
                0, rows[order], torch.arange(order.numel(), device=dev), "amax")
            has = torch.nonzero(last >= 0).reshape(-1)
            take_loop[has] = order[last[has]]
    kept = torch.nonzero(keep).reshape(-1)
    kept_rows = rows[kept]
    add = 0 if mode == "drop" else 1
    rowptr_new = torch.zeros(n + 1, dtype=torch.int64, device=dev)
    rowptr_new[1:] = torch.cumsum(torch.bincount(kept_rows, minlength=n) + add, 0)
    nnz = kept.numel() + add * n
    kept_pos = torch.arange(kept.numel(), device=dev) + add * kept_rows  # each earlier row gained a loop
    new_col = torch.empty(nnz, dtype=torch.int64, device=dev)
    take = torch.empty(nnz, dtype=torch.int64, device=dev)
    perm = torch.empty(nnz, dtype=torch.int64, device=dev)
    new_col[kept_pos] = col[kept]
    take[kept_pos] = kept
    # caller's order of the kept edges, then the loops (PyG's order after add_self_loops)
    ep = kept if edge_perm is None else edge_perm[kept]
    rank = torch.empty_like(ep)
    rank[torch.argsort(ep)] = torch.arange(ep.numel(), device=dev)
    perm[kept_pos] = rank
    if add:
        loop_pos = rowptr_new[1:] - 1
        new_col[loop_pos] = torch.arange(n, device=dev)
        take[loop_pos] = take_loop
        perm[loop_pos] = kept.numel() + torch.arange(n, device=dev)
    itype = _loops_itype(col.shape[0], n, rowptr.dtype)
    return _fields(build(rowptr_new, new_col, None, num_cols, edge_perm=perm, itype=itype)) + [take]


def _loops_itype(nnz, n, itype):
    return torch.int64 if nnz + n > INT32_MAX else itype


@_self_loops_op.register_fake
def _(rowptr, col, rows, edge_perm, num_cols, mode):
    nnz = torch.library.get_ctx().new_dynamic_size()
    n = rowptr.shape[0] - 1
    return _fake_structure(rowptr, n, num_cols, nnz, _loops_itype(col.shape[0], n, rowptr.dtype), extra=1)


def _self_loops(g: GraphTensors, mode: str, fill: float = 1.0, leading_columns: bool = False):
    """self_loops, and the source of each entry (see _self_loops_op): (graph, take)."""
    if mode not in _LOOP_MODES:
        raise ValueError(f"mode must be one of {', '.join(_LOOP_MODES)}; got {mode!r}")
    # adding loops needs node i among both rows and columns; dropping them takes any shape
    if mode != "drop" and (g.num_rows > g.num_cols if leading_columns else g.num_rows != g.num_cols):
        raise ValueError(f"self loops need a square graph, got {g.num_rows} x {g.num_cols}")
    parts = _self_loops_op(g.rowptr, g.col, g.rows, g.edge_perm, g.num_cols, mode)
    take = parts[8]
    # the new edge count, known to the compiler only as a dynamic size: its bounds (one loop per
    # node) let the kernels' shape checks and backward rules be decided while tracing
    nnz = take.shape[0]
    torch._check(nnz <= g.nnz + (0 if mode == "drop" else g.num_rows))
    if mode != "drop":
        torch._check(nnz >= g.num_rows)
    val = g.val
    if val is not None:
        if mode != "drop":
            val = torch.cat([val, torch.full((g.num_rows,), float(fill), dtype=val.dtype, device=val.device)])
        val = val.index_select(0, take)  # each source entry at most once: its gradient is a plain copy
    return _graph_from(parts, val, g.num_rows, g.num_cols, g.edge_perm is not None), take


def self_loops(g: GraphTensors, mode: str, fill: float = 1.0, *, leading_columns: bool = False) -> GraphTensors:
    """A square graph with exactly one self loop per node, as PyG builds it.

    mode="replace": drop existing loops, add one loop per node weighing `fill` (GATConv:
    remove_self_loops + add_self_loops); mode="remaining": keep the weight of an existing loop
    (the last one when a node has several) and give the others `fill` (GCNConv:
    add_remaining_self_loops); mode="drop": only drop the loops. edge_perm of the result follows
    PyG's edge order: the kept edges in the caller's order, then the loops of nodes 0..n-1. Each
    row's loop is its last entry. leading_columns: the graph may have more columns than rows, its
    first num_rows columns being the rows' own nodes (a distributed piece: [local | halo] columns);
    row i's loop is column i. Traced by torch.compile (the new edge count is a dynamic size).
    """
    return _self_loops(g, mode, fill, leading_columns)[0]
