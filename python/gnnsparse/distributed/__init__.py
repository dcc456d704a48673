"""Full-graph GNN training over several processes / GPUs with torch.distributed.

    import gnnsparse.distributed as gd
    part = gd.partition(A, world_size, "rcm")               # rows -> ranks (contiguous ranges)
    piece = gd.local_graph(A, part, rank)                   # rank's rows, [local | halo] columns, plan
    dg = gd.DistGraph(piece, "cuda")                        # after init_process_group (nccl / gloo)
    y = gd.spmm(dg, x[part.nodes(rank)], "sum")             # this rank's rows of A @ X, differentiable
    dgn = gd.gcn_norm(dg)                                   # GCN's normalized graph, distributed

The exchange is torch.distributed's all_to_all_single (NCCL on GPUs, gloo on the CPU), one call
per op in the forward pass and one in the backward pass; DistGraph(wire="int8") sends int8 rows
with per-row scales and stochastic rounding. Exactness against the single-process ops: see
gnnsparse.distributed.ops. `python -m gnnsparse train --nproc N` trains GCN / GAT this way;
docs/distributed.md has the design and the measurements.
"""
from .launch import default_backend, spawn
from .ops import DistGraph, fusedmm, gcn_norm, sddmm, spmm
from .partition import (METHODS, LocalGraph, Partition, assemble, edge_cut, local_graph, local_graph_from_edges,
                        local_graphs, partition)

__all__ = ["partition", "Partition", "LocalGraph", "local_graph", "local_graphs", "assemble", "edge_cut", "METHODS",
           "DistGraph", "spmm", "sddmm", "fusedmm", "gcn_norm", "spawn", "default_backend", "local_graph_from_edges"]
