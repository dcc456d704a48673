#!/usr/bin/env python3
"""gnnsparse ops in PyTorch: the graph object, aggregation, per-edge scores, fused attention, with
gradients, on the CPU (SYCL CPU device) or a CUDA GPU.

    python examples/pytorch_ops.py [--device cuda]
"""
import argparse

import torch

import gnnsparse as gs
import gnnsparse.torch as gst

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--device", default="cpu")
dev = torch.device(p.parse_args().device)
torch.manual_seed(0)

# a graph from a PyG-style edge_index: row 0 sources, row 1 targets (one CSR row per target)
num_nodes = 6
edge_index = torch.tensor([[0, 1, 2, 3, 4, 5, 0, 2], [1, 2, 0, 0, 3, 4, 4, 5]], device=dev)
edge_weight = torch.rand(edge_index.shape[1], device=dev, requires_grad=True)  # learnable, caller's order
A = gs.CSR.from_edge_index(edge_index, num_nodes)

x = torch.randn(num_nodes, 4, device=dev, requires_grad=True)
h_sum = gst.spmm(A, x, edge_weight=edge_weight)       # sum over incoming edges, weighted
h_mean = gst.spmm(A, x, "mean")
h_max, arg = gst.spmm(A, x, "max", return_arg=True)   # arg: CSR position of the winning edge, -1 if none
print("winning neighbour of node 4, channel 0:", int(A.col[int(arg[4, 0])]) if arg[4, 0] >= 0 else None)

# per-edge scores <x[dst], x[src]>, in CSR order; back in the caller's edge order via edge_perm
scores = gst.sddmm(A, x, x, "dot")
from gnnsparse._graph import edges_to_input_order  # noqa: E402  (A.edges_to_input_order on the graph object)
print("edge scores in edge_index order:", edges_to_input_order(A, scores).detach().cpu().numpy().round(3))

# GAT-style attention over 2 heads in one fused call: softmax_j(leaky_relu(a_dst[i] + a_src[j])) z[j]
a_src = torch.randn(num_nodes, 2, device=dev, requires_grad=True)
a_dst = torch.randn(num_nodes, 2, device=dev, requires_grad=True)
z = torch.randn(num_nodes, 2, 3, device=dev, requires_grad=True)
out, alpha = gst.fusedmm(A, a_dst, a_src, z, op="add", edge="leaky_relu_softmax", return_edges=True)

loss = h_sum.square().sum() + h_mean.sum() + h_max.sum() + scores.sum() + out.square().sum()
loss.backward()  # every gradient is computed by gnnsparse kernels, deterministically
print("grad norms: x %.4f, edge_weight %.4f, a_src %.4f, z %.4f" % (
    x.grad.norm(), edge_weight.grad.norm(), a_src.grad.norm(), z.grad.norm()))
print("attention weights of node 4's incoming edges sum to", alpha[A.rowptr[4]:A.rowptr[5]].sum(0).tolist()
      if isinstance(A.rowptr, torch.Tensor) else alpha[int(A.rowptr[4]):int(A.rowptr[5])].sum(0).tolist())
