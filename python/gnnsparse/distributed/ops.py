"""Distributed SpMM / SDDMM / FusedMM with autograd: the halo exchange, then the local ops.

Every rank holds its rows' features x (n_local, ...). An op first extends x (or Y / Z) by the halo
rows it reads (one all_to_all_single, halo.exchange), then runs the gnnsparse.torch op on the
local graph (rows: the rank's rows; columns: [local | halo]). Autograd does the rest: the local
op's backward gives the gradient of [local | halo] rows, the exchange's backward sends the halo
part back to the owners, which add it to their own part.

Exactness (fp32 wire format):
  forward   each local row reduces over the same edges, in the same order, as the row of the
            single-process op on the whole (relabelled) graph, over bitwise the same feature
            values. The result is bitwise equal wherever the backend's summation order within a
            row depends only on that row: always for SDDMM (one value per edge) and on the CPU
            (SYCL) backend (tested). CUDA's launch plan depends on the matrix's average row
            length (rows split over lane sets once it reaches 32, 64, ... edges; rows above the
            hub threshold, 16x the average and at least 256, cut into segments aligned to global
            edge positions): rows are bitwise equal when the piece and the whole graph get the
            same plan and the row is no hub, else fp32-accurate.
  backward  the gradient of a node's features is summed over the edges of its column. One
            process sums them in one sequence (rows ascending); here each rank sums its rows'
            share, then the owner adds the shares in rank order (its own first, then the
            readers ascending): the same terms with another association, so fp32-accurate, not
            bitwise, for nodes that other ranks read (bitwise for nodes read only locally).
            Deterministic: fixed order, no atomics.
  int8 wire each exchanged row is rounded stochastically to int8 with its own scale (relative
            error up to 1/127 of the row's largest entry), forward features and backward
            gradients alike.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from ..torch import functional as gf
from ..torch import _library as L
from ..torch.graph import GraphTensors, build, self_loops
from . import halo as _halo
from .partition import LocalGraph

__all__ = ["DistGraph", "spmm", "sddmm", "fusedmm", "gcn_norm"]


def _flat(t: Tensor) -> Tensor:
    return t.reshape(t.shape[0], -1)


class DistGraph:
    """One rank's piece of a partitioned graph on a device, ready for the distributed ops.

    local: this rank's LocalGraph (partition.local_graph). group: the process group of the
    exchange (default: a new group over all ranks, so the halo traffic never interleaves with
    other collectives such as DistributedDataParallel's); its size must equal the partition's
    number of parts and its rank this piece's rank. wire: "fp32" or "int8" (see halo.py).
    seed: stochastic rounding of the int8 wire format (per rank and exchange, reproducible).
    overlap: the layers of gnnsparse.distributed.nn run their sums with spmm(..., overlap=True).
    Every rank must construct its DistGraph (a new group is a collective call)."""

    def __init__(self, local: LocalGraph, device="cpu", *, group=None, wire: str = "fp32", seed: int = 0,
                 val: Optional[Tensor] = None, overlap: bool = False):
        if not isinstance(local, LocalGraph):
            raise TypeError(f"DistGraph takes a gnnsparse.distributed.LocalGraph, got {type(local).__name__}")
        if wire not in _halo.WIRE_FORMATS:
            raise ValueError(f"wire must be one of {', '.join(_halo.WIRE_FORMATS)}; got {wire!r}")
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialized: call torch.distributed.init_process_group "
                               "(or run under gnnsparse.distributed.spawn) before building a DistGraph")
        if group is None:
            group = dist.new_group(list(range(dist.get_world_size())))
        size, rank = dist.get_world_size(group), dist.get_rank(group)
        if size != local.nparts or rank != local.rank:
            raise ValueError(f"this process is rank {rank} of {size} in the exchange group but the piece is rank "
                             f"{local.rank} of a {local.nparts}-part partition")
        dev = torch.device(device)
        if dev.type == "cuda" and dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        self.local, self.device, self.group, self.wire, self.overlap = local, dev, group, wire, bool(overlap)
        self.rank, self.nparts = rank, size
        self.n_local, self.n_halo = local.n_local, local.n_halo
        self.n_send = int(local.send_counts.sum())
        self.send_counts: List[int] = [int(c) for c in local.send_counts]
        self.recv_counts: List[int] = [int(c) for c in local.recv_counts]
        self.send_idx = torch.from_numpy(local.send_idx).to(dev)
        if val is None and local.val is not None:
            val = torch.from_numpy(np.ascontiguousarray(local.val)).to(dev)
        self.graph: GraphTensors = build(torch.from_numpy(local.rowptr).to(dev), torch.from_numpy(local.col).to(dev),
                                         val, self.n_local + self.n_halo)
        # the backward exchange's reduction: row i of this CSR lists the positions of local row i
        # among the rows sent, ascending (= reading rank ascending)
        order = np.argsort(local.send_idx, kind="stable")
        rp = np.zeros(self.n_local + 1, dtype=np.int64)
        np.cumsum(np.bincount(local.send_idx, minlength=self.n_local), out=rp[1:])
        self._gather = build(torch.from_numpy(rp).to(dev), torch.from_numpy(order.astype(np.int64)).to(dev), None,
                             self.n_send)
        self.generator = torch.Generator(device=dev)
        self.generator.manual_seed((int(seed) * 1_000_003 + rank) % (2**63))
        # bytes this rank put on the wire and exchanges run (forward and backward; shared with the
        # graphs derived by with_graph / with_wire)
        self.stats = {"bytes": 0, "exchanges": 0}

    # ------------------------------------------------------------ derived graphs
    def with_graph(self, graph: GraphTensors) -> "DistGraph":
        """The same plan and group over another local graph with the same columns (new values,
        added self loops)."""
        if graph.num_cols != self.n_local + self.n_halo or graph.num_rows != self.n_local:
            raise ValueError(f"the graph must be {self.n_local} x {self.n_local + self.n_halo}, got {graph.shape}")
        new = object.__new__(DistGraph)
        new.__dict__.update(self.__dict__)
        new.graph = graph
        return new

    def with_wire(self, wire: str) -> "DistGraph":
        """The same graph with another halo wire format ("fp32" or "int8")."""
        if wire not in _halo.WIRE_FORMATS:
            raise ValueError(f"wire must be one of {', '.join(_halo.WIRE_FORMATS)}; got {wire!r}")
        new = self.with_graph(self.graph)
        new.wire = wire
        return new

    def _split(self):
        """(local columns, halo columns) of the graph: two CSRs over the same rows, each row's
        edges in their original order, with values (ones when the graph has none); cached."""
        key = (id(self.graph.col), id(self.graph.val))
        hit = self.__dict__.get("_split_cache")
        if hit is not None and hit[0] == key:
            return hit[1]
        g = self.graph
        col = g.col.to(torch.int64)
        val = g.val if g.val is not None else torch.ones(g.nnz, dtype=torch.float32, device=g.device)
        parts = []
        for keep, shift, ncols in ((col < self.n_local, 0, self.n_local), (col >= self.n_local, self.n_local,
                                                                            self.n_halo)):
            ids = torch.nonzero(keep).reshape(-1)
            rowptr = torch.zeros(self.n_local + 1, dtype=torch.int64, device=g.device)
            rowptr[1:] = torch.cumsum(torch.bincount(g.rows[ids].to(torch.int64), minlength=self.n_local), 0)
            parts.append(build(rowptr, col[ids] - shift, val[ids], ncols))
        self.__dict__["_split_cache"] = (key, tuple(parts))
        return tuple(parts)

    # ------------------------------------------------------------ exchange
    def gather_sends(self, got: Tensor) -> Tensor:
        """(n_send, C) rows received in the backward exchange -> (n_local, C): each local row the
        sum of its copies, in ascending order of the reading rank (one deterministic SpMM)."""
        if got.shape[0] == 0:
            return got.new_zeros((self.n_local, got.shape[1]))
        return L.spmm_op(self._gather.rowptr, self._gather.col, None, None, None, None, got, "sum")[0]

    def _check(self, name: str, x: Tensor):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() == 0 or x.shape[0] != self.n_local:
            raise ValueError(f"{name} has shape {tuple(x.shape)} but this rank holds {self.n_local} rows: pass the "
                             "rank's rows only (features[partition.nodes(rank)])")
        if x.device != self.device:
            raise ValueError(f"{name} is on {x.device} but the DistGraph on {self.device}")

    def halo(self, *xs: Tensor):
        """The halo rows of one or several (n_local, ...) tensors (of one dtype), in one exchange."""
        for i, x in enumerate(xs):
            self._check(f"input {i}", x)
        if len({x.dtype for x in xs}) > 1:
            raise TypeError("tensors exchanged together must share one dtype")
        flats = [_flat(x) for x in xs]
        widths = [f.shape[1] for f in flats]
        buf = flats[0] if len(flats) == 1 else torch.cat(flats, 1)
        h = _halo.exchange(self, buf)
        outs, at = [], 0
        for x, w in zip(xs, widths):
            outs.append(h[:, at:at + w].reshape((self.n_halo,) + tuple(x.shape[1:])))
            at += w
        return outs[0] if len(outs) == 1 else tuple(outs)

    def extend(self, *xs: Tensor):
        """[x ; halo(x)] ((n_local + n_halo, ...)) for each input, the halos in one exchange."""
        hs = self.halo(*xs)
        hs = (hs,) if len(xs) == 1 else hs
        outs = tuple(torch.cat([x, h], 0) for x, h in zip(xs, hs))
        return outs[0] if len(outs) == 1 else outs

    def __repr__(self):
        return (f"DistGraph(rank {self.rank}/{self.nparts}, {self.n_local} rows, {self.graph.nnz} edges, halo "
                f"{self.n_halo}, sends {self.n_send}, wire {self.wire}, device {self.device})")


class _OverlappedSpmm(torch.autograd.Function):
    """Y = A_local x + A_halo halo(x), the exchange in flight while A_local x runs (and, backward,
    while A_local^T dY runs). Sums a row's local edges first, then its halo edges."""

    @staticmethod
    def forward(ctx, x: Tensor, dg: "DistGraph") -> Tensor:
        gi, gh = dg._split()
        ctx.dg = dg
        C = x.shape[1]
        send = x.index_select(0, dg.send_idx)
        pending = _halo.start(send, dg.n_halo, dg.recv_counts, dg.send_counts, dg.group, dg.wire, dg.generator,
                              dg.stats)
        y = L.spmm_op(gi.rowptr, gi.col, gi.val, None, None, None, x, "sum")[0]
        h = pending.wait()
        return y + L.spmm_op(gh.rowptr, gh.col, gh.val, None, None, None, h.reshape(-1, C), "sum")[0]

    @staticmethod
    def backward(ctx, dy: Tensor):
        dg = ctx.dg
        gi, gh = dg._split()
        dy = dy.contiguous()
        dh = L.spmm_op(gh.t_rowptr, gh.t_col, gh.val.index_select(0, gh.t_perm), None, None, None, dy, "sum")[0]
        pending = _halo.start(dh, dg.n_send, dg.send_counts, dg.recv_counts, dg.group, dg.wire, dg.generator,
                              dg.stats)
        dx = L.spmm_op(gi.t_rowptr, gi.t_col, gi.val.index_select(0, gi.t_perm), None, None, None, dy, "sum")[0]
        return dx + dg.gather_sends(pending.wait()), None


def _dg(dg):
    if not isinstance(dg, DistGraph):
        raise TypeError(f"expected a gnnsparse.distributed.DistGraph, got {type(dg).__name__}")
    return dg


def spmm(dg: DistGraph, x: Tensor, reduce: str = "sum", *, overlap: bool = False) -> Tensor:
    """Rows of A X this rank owns: Y[i] = reduce over row i of val * X[col] (sum, mean, max, min),
    x the rank's rows of X. Differentiable in x (see the module docstring for exactness).

    overlap (reduce "sum", x of shape (n_local, C)): the exchange runs while the product over the
    local columns does (forward and backward), then the halo columns' product is added. Each
    row then sums its local edges first and its halo edges second: fp32-accurate, deterministic,
    not bitwise equal to the single-process op."""
    _dg(dg)
    if overlap:
        if reduce != "sum":
            raise ValueError(f"overlap covers reduce='sum', not {reduce!r}")
        dg._check("X", x)
        if x.dim() != 2:
            raise ValueError(f"overlap takes x of shape (n_local, C), got {tuple(x.shape)}")
        return _OverlappedSpmm.apply(x.contiguous(), dg)
    return gf.spmm(dg.graph, dg.extend(x), reduce)


def sddmm(dg: DistGraph, x: Tensor, y: Tensor, op: str = "dot") -> Tensor:
    """Per local edge (local CSR order: LocalGraph.edge_ids maps to the original CSR) of row i,
    column j: <X[i], Y[j]> ('dot') or X[i] + Y[j] ('add'); x, y the rank's rows."""
    _dg(dg)
    dg._check("Y", y)
    return gf.sddmm(dg.graph, x, dg.extend(y), op)


def fusedmm(dg: DistGraph, x: Tensor, y: Tensor, z: Tensor, op: str = "dot", edge: str = "none",
            slope: float = 0.2) -> Tensor:
    """Out[i] = sum_k edge(sddmm(x, y))_k * val_k * Z[col k] for this rank's rows; Y and Z are read
    at the columns, so their halo rows travel in one exchange."""
    _dg(dg)
    if y.dtype != z.dtype:
        raise TypeError(f"Y ({y.dtype}) and Z ({z.dtype}) must share one dtype")
    ye, ze = dg.extend(y, z)
    return gf.fusedmm(dg.graph, x, ye, ze, op, edge, slope)


def gcn_norm(dg: DistGraph, *, add_self_loops: bool = True, dtype: torch.dtype = torch.float32) -> DistGraph:
    """PyG's / gnnsparse.torch.gcn_norm on the distributed graph: the remaining self loops (weight
    1, an existing loop keeps its weight; the loop last in its row, as gcn_norm places it), then
    w_ij = w_ij / sqrt(deg_i deg_j), deg_j of halo nodes from one fp32 exchange. The values equal
    the single-process gcn_norm's bit for bit (the same products in the same order)."""
    _dg(dg)
    g = dg.graph
    dev = g.device
    n = dg.n_local
    if add_self_loops:  # local row i is column i: [local | halo] columns
        g = self_loops(g, "remaining", 1.0, leading_columns=True)
    w = g.val if g.val is not None else torch.ones(g.nnz, dtype=dtype, device=dev)
    if w.dtype != dtype:
        w = w.to(dtype)
    ones = torch.ones(g.num_cols, 1, dtype=w.dtype, device=dev)
    deg = L.spmm_op(g.rowptr, g.col, w, g.t_rowptr, g.t_col, g.t_perm, ones, "sum")[0].reshape(-1)
    dinv = deg.pow(-0.5)
    dinv = torch.where(torch.isinf(dinv), torch.zeros((), dtype=dinv.dtype, device=dev), dinv)
    with torch.no_grad():
        exact = dg.with_wire("fp32")
        dinv_ext = torch.cat([dinv, exact.halo(dinv.reshape(n, 1)).reshape(-1)])
    w = dinv.index_select(0, g.rows) * w * dinv_ext.index_select(0, g.col)
    return dg.with_graph(g.with_val(w))
