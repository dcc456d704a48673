"""FusedMM on the SYCL CPU device, dot (one head, or --heads), three ways in one process on a uniform random graph:

  rows     gs.fusedmm (the policy: fusedmm_dot_rows_sg, a run of rows scored into E by SDDMM's
           run schedule, then each row's edge function and aggregation)
  sg       the same call with GNNSPARSE_SYCL_FUSEDMM=sg (fusedmm_csr_sg: a sub-group per row, one
           group reduction per edge; the kernel before 2026-12-06)
  unfused  gs.sddmm then gs.spmm with the edge values (several heads: gs.spmm_heads; what FusedMM
           saves: the E round trip)
  d0       gs.fusedmm with a Z of no columns and return_edges=True: the edge values alone (the
           recomputation in a backward pass); for edge none also `sddmm`, gs.sddmm alone

    python bench/fused_cpu.py [--nodes 100000] [--edges 1000000] [--feats 32] [--heads 1] [--rounds 7] [--calls 3]

Each for edge functions none and softmax (unfused: none only). Prints the median ms per call (and
the range over rounds; the candidates take turns block by block, gnnsparse.bench.timing.wall) and
the ratios; checks first that rows and sg agree with gnnsparse.reference.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

import gnnsparse as gs
from gnnsparse import reference as ref
from gnnsparse.bench import generators, timing


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=1_000_000)
    ap.add_argument("--feats", type=int, default=32, help="F = D, per head")
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=3)
    a = ap.parse_args(argv)
    A = generators.uniform_random(a.nodes, a.edges, seed=0)
    rng = np.random.default_rng(1)
    shape = (a.nodes, a.feats) if a.heads == 1 else (a.nodes, a.heads, a.feats)
    X, Y, Z = (rng.standard_normal(shape).astype(np.float32) * a.feats ** -0.5 for _ in range(3))

    def knob(mode):  # (enter, exit) of timing.wall's hooks: the kernel choice around a block of calls
        return (lambda: os.environ.__setitem__("GNNSPARSE_SYCL_FUSEDMM", mode),
                lambda: os.environ.pop("GNNSPARSE_SYCL_FUSEDMM", None))

    def fused(edge):
        return lambda _: gs.fusedmm(A, X, Y, Z, op="dot", edge=edge)

    Z0 = np.empty(shape[:-1] + (0,), np.float32)

    def edges_only(edge):
        return lambda _: gs.fusedmm(A, X, Y, Z0, op="dot", edge=edge, return_edges=True)

    def unfused(_):
        E = np.asarray(gs.sddmm(A, X, Y, "dot"))
        if a.heads > 1:
            return gs.spmm_heads(A, E, Z)
        return gs.spmm(gs.CSR(A.rowptr, A.col, E, A.shape, validate=False), Z)

    print(f"uniform random graph: {a.nodes:,} nodes, {A.nnz:,} edges, {a.heads} head(s), F = D = {a.feats}, float32, "
          "SYCL CPU device")
    for edge in ("none", "softmax"):
        want = ref.fusedmm(A, X, Y, Z, "dot", edge)
        for mode in ("auto", "sg"):
            enter, leave = knob(mode)
            enter()
            got = np.asarray(fused(edge)(0))
            leave()
            err = np.abs(got - want).max() / max(1.0, np.abs(want).max())
            if not err < 1e-4:
                raise SystemExit(f"{edge} {mode}: max error {err:.2e} against gnnsparse.reference")
        fns = {"rows": fused(edge), "sg": fused(edge)}
        if edge == "none":
            fns["unfused"] = unfused
        fns["d0"] = edges_only(edge)
        if edge == "none":
            fns["sddmm"] = lambda _: gs.sddmm(A, X, Y, "dot")
        t = timing.wall(fns, rounds=a.rounds, calls=a.calls, hooks={"rows": knob("auto"), "sg": knob("sg")})
        med = {k: float(np.median(v)) * 1e3 for k, v in t.items()}
        rng_ = {k: (min(v) * 1e3, max(v) * 1e3) for k, v in t.items()}
        print(f"edge {edge}: " + ", ".join(f"{k} {med[k]:.2f} ms ({rng_[k][0]:.2f}-{rng_[k][1]:.2f})" for k in med)
              + f"; rows / sg {med['sg'] / med['rows']:.2f}x"
              + (f", rows / unfused {med['unfused'] / med['rows']:.2f}x" if "unfused" in med else "")
              + (f", d0 / sddmm {med['sddmm'] / med['d0']:.2f}x" if "sddmm" in med else ""))


if __name__ == "__main__":
    main()
