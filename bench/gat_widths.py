"""The sparse calls of a GAT layer at an output width that is not a multiple of 4 floats (a class
count such as 47) against the next multiple of 4, and GAT's edge-values pass, in one run.

On the products-sized graph of `gnnsparse train --size products` (drawn on the GPU, self loops
added as GATConv does), float32, one head unless --heads says otherwise:

  fused    gs.fusedmm(A, a_dst, a_src, Z, "add", "leaky_relu_softmax"): the layer's forward call
  heads    gs.spmm_heads-style aggregation with per-edge weights (the backward's dZ = A^T (w) dOut)
  dot      gs.sddmm(A, dOut, Z, "dot"): the backward's d(weights)
  edges    gs.fusedmm(..., Z of no columns, return_edges=True): the edge values alone (the
           recomputation of the backward; --heads sets its head count); "edges ... generic" is
           the same call on the walk that EdgesAdd replaced (GNNSPARSE_CUDA_FUSEDMM=generic)
  ... pad  at a width that is not a multiple of 4: the same call on zero-padded copies
           (GNNSPARSE_CUDA_PAD=on, the default); the rows without "pad" run the scalar walks
           (GNNSPARSE_CUDA_PAD=off)
  add      gs.sddmm(A, a_dst, a_src, "add"): the logits alone (the same heads)

    python bench/gat_widths.py [--widths 47,48] [--heads 4] [--reps 10] [--nodes N --edges E]

Prints the median ms of each call per width (CUDA events, calls interleaved) and, per call, the
time of each width relative to the first. Timed on a CUDA device (`--device cpu --nodes N`: a dry
run of the same calls on the CPU device, wall clock).
"""
from __future__ import annotations

import argparse

import gnnsparse as gs
from gnnsparse.bench import timing


def _graph(nodes, edges, torch, dev):
    """A CSR (self loops replaced, as GATConv's) of the products-sized generated graph, or of a
    uniform random one of the given size."""
    from gnnsparse.torch.graph import self_loops
    from gnnsparse.torch.nn import graph_of

    if nodes is None:
        from gnnsparse.train.data import products_like

        d = products_like(0, dev)
        ei, n = torch.as_tensor(d.edge_index, device=dev), d.num_nodes
    else:
        g = torch.Generator(device=dev).manual_seed(0)
        ei, n = torch.randint(0, nodes, (2, edges), generator=g, device=dev), nodes
    like = torch.zeros(1, device=dev)
    g = self_loops(graph_of(ei, like, n, n), "replace")
    return gs.CSR(g.rowptr, g.col, None, shape=(n, n)), n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="47,48", help="output widths D to compare (default 47,48)")
    ap.add_argument("--heads", type=int, default=4, help="heads of the edges / add rows (default 4)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--nodes", type=int, help="a uniform random graph of this many nodes instead")
    ap.add_argument("--edges", type=int, default=10_000_000)
    ap.add_argument("--device", default="cuda", help="cuda (default), or cpu for a dry run (wall clock, with --nodes)")
    a = ap.parse_args(argv)
    import torch

    dev = torch.device(a.device)
    A, n = _graph(a.nodes, a.edges, torch, dev)
    g = torch.Generator(device=dev).manual_seed(1)
    rnd = lambda *s: torch.randn(s, generator=g, device=dev)  # noqa: E731
    ad, as_ = rnd(n, 1), rnd(n, 1)
    w = rnd(A.nnz, 1).abs()
    fns = {}
    for D in (int(s) for s in a.widths.split(",")):
        Z, dO = rnd(n, 1, D), rnd(n, 1, D)
        off = lambda fn: _env("GNNSPARSE_CUDA_PAD", "off", fn)  # noqa: E731  (no padding)
        fns[f"fused D={D}"] = lambda i, Z=Z: off(lambda: gs.fusedmm(A, ad, as_, Z, "add", "leaky_relu_softmax", 0.2))
        fns[f"heads D={D}"] = lambda i, Z=Z: off(lambda: _heads(A, w, Z))
        fns[f"dot D={D}"] = lambda i, Z=Z, dO=dO: off(lambda: gs.sddmm(A, dO, Z, "dot"))
        if D % 4 and D >= 16:  # the same calls on zero-padded copies (GNNSPARSE_CUDA_PAD=on)
            fns[f"fused D={D} pad"] = lambda i, Z=Z: _env("GNNSPARSE_CUDA_PAD", "on", lambda: gs.fusedmm(
                A, ad, as_, Z, "add", "leaky_relu_softmax", 0.2))
            fns[f"heads D={D} pad"] = lambda i, Z=Z: _env("GNNSPARSE_CUDA_PAD", "on", lambda: _heads(A, w, Z))
            fns[f"dot D={D} pad"] = lambda i, Z=Z, dO=dO: _env("GNNSPARSE_CUDA_PAD", "on",
                                                              lambda: gs.sddmm(A, dO, Z, "dot"))
    H = a.heads
    hd, hs = rnd(n, H), rnd(n, H)
    fns[f"edges H={H}"] = lambda i: gs.fusedmm(A, hd, hs, hs.new_empty((n, H, 0)), "add", "leaky_relu_softmax", 0.2,
                                              return_edges=True)
    fns[f"edges H={H} generic"] = lambda i: _env("GNNSPARSE_CUDA_FUSEDMM", "generic", lambda: gs.fusedmm(
        A, hd, hs, hs.new_empty((n, H, 0)), "add", "leaky_relu_softmax", 0.2, return_edges=True))
    fns[f"add H={H}"] = lambda i: gs.sddmm(A, hd, hs, "add")
    if dev.type == "cuda":
        ts = timing.events(fns, repeat=a.reps, warmup=2, torch=torch)
    else:
        ts = timing.wall(fns, rounds=1, per_round=a.reps, warmup=1)
    print(f"GAT's sparse calls, {n} nodes, {A.nnz} stored edges (self loops included), float32, "
          f"median ms of {a.reps}")
    base = {}
    for k, v in ts.items():
        kind = k.split()[0]
        ms = timing.median(v) * 1e3
        base.setdefault(kind, ms)
        print(f"  {k:22s} {ms:9.3f}   {ms / base[kind]:.2f}x the first {kind}")


def _env(var, value, fn):
    """fn() with the knob `var` (read at every call) set to `value`, the setting restored."""
    with timing.environ({var: value}):
        return fn()


def _heads(A, w, Z):
    """out[i] = sum_k w[k] Z[col k] for one head: the multi-head SpMM with per-edge weights."""
    from gnnsparse.torch import functional as gf

    return gf.spmm_heads(A, w, Z)


if __name__ == "__main__":
    main()
