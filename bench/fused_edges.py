"""FusedMM's recompute pass (the edge values of TransformerConv's backward) on CUDA, three ways in one
run, on an arxiv-sized uniform graph (169,343 nodes, 1,166,243 edges), 4 heads x 32, float32:

  d0     gs.fusedmm(..., Z of no columns, return_edges=True): the edges walk (what the backward runs now)
  d1     Z[:, :, :1] copied, then the D = 1 call (what the backward ran before: the scalar walk)
  fwd    the forward's call with D = 32 and return_edges=True (the reference: the one-vector walk)

    python bench/fused_edges.py [--heads 4] [--feats 32] [--reps 50]

Prints the median ms of each (CUDA events, calls interleaved) and whether d0's edge values are
bitwise the forward's (they must be: same walk, same arithmetic).
"""
from __future__ import annotations

import argparse

import numpy as np

import gnnsparse as gs
from gnnsparse.bench import generators, timing


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=169_343)
    ap.add_argument("--edges", type=int, default=1_166_243)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--feats", type=int, default=32)
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args(argv)
    import torch

    H, F, n = a.heads, a.feats, a.nodes
    A0 = generators.uniform_random(n, a.edges, seed=0)
    dev = torch.device("cuda")
    A = gs.CSR(torch.tensor(np.asarray(A0.rowptr), device=dev), torch.tensor(np.asarray(A0.col), device=dev), None,
               shape=A0.shape)
    g = torch.Generator(device=dev).manual_seed(0)
    X, Y, Z = (torch.randn((n, H, F), generator=g, device=dev) * F ** -0.5 for _ in range(3))
    Z0 = Z.new_empty((n, H, 0))
    fns = {
        "d0": lambda i: gs.fusedmm(A, X, Y, Z0, "dot", "softmax", return_edges=True),
        "d1": lambda i: gs.fusedmm(A, X, Y, Z[:, :, :1].contiguous(), "dot", "softmax", return_edges=True),
        "fwd": lambda i: gs.fusedmm(A, X, Y, Z, "dot", "softmax", return_edges=True),
    }
    ts = timing.events(fns, repeat=a.reps, warmup=3, torch=torch)
    E0, Ef = fns["d0"](0)[1], fns["fwd"](0)[1]
    print(f"fusedmm edge values, {n} nodes, {A0.nnz} edges, {H} heads x {F}, float32 (median ms)")
    for k, v in ts.items():
        print(f"  {k:4s} {timing.median(v) * 1e3:8.3f}")
    print(f"  d0 / d1: {timing.median(ts['d0']) / timing.median(ts['d1']):.3f}x the time; "
          f"d0 edges bitwise the forward's: {bool(torch.equal(E0, Ef))}")


if __name__ == "__main__":
    main()
