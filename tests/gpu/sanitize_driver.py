#!/usr/bin/env python3
"""Driver for compute-sanitizer (tests/gpu/sanitize.sh): reaches every CUDA kernel and launch path
through the public API, with torch CUDA tensors, and checks every result against
gnnsparse.reference so a run under the sanitizer is also a correctness run.

Coverage (per dtype x index type in FULL_PAIRS; a smaller set for the other pairs):
  SpMM   sum / mean / max / min, arg written and not; hub rows (hub flag, segment, combine
         kernels), 16-byte vector loads (aligned, C % V == 0) and scalar loads (unaligned view,
         odd C), edge-split groups (long average rows), whole-warp rows (skewed degrees), several
         column blocks (wide C); empty rows, nnz = 0, M = 0.
  SpMM with per-(edge, head) weights (spmm_heads): hub rows, vector and scalar loads, whole-warp
         rows, edge-split groups, several column blocks, nnz = 0, M = 0.
  GATv2 scores and their backward pass (gatv2_scores, gatv2_grad): vector and scalar loads, one
         vector per lane and the column loop, whole-warp rows, nnz = 0, M = 0.
  SDDMM  dot (vector and scalar loads, 1 and several heads), add (1-D and heads).
  FusedMM dot / add x none / leaky_relu / exp / softmax, on the hub graph (segment + combine
         kernels) and on a plain graph, edge values returned and not, vector and scalar loads.
Inputs are made on the host and copied (cudaMemcpy), so initcheck sees them as initialized even
when only the gnnsparse kernels are instrumented. Exit status 1 if any result is wrong.

    python tests/gpu/sanitize_driver.py [--level quick|full]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

# the odd widths here exist to run the scalar walks: no zero-padded copies (gnnsparse._ops._vector_width)
os.environ.setdefault("GNNSPARSE_CUDA_PAD", "off")

DTYPES = ("float32", "float64", "float16", "bfloat16")
VEC = {"float32": 4, "float64": 2, "float16": 8, "bfloat16": 8}  # elements per 16-byte load
TOL = {"float64": 1e-10, "float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}
FULL_PAIRS = [("float32", "int32"), ("float64", "int64"), ("float16", "int64"), ("bfloat16", "int32")]
SMALL_PAIRS = [("float32", "int64"), ("float64", "int32"), ("float16", "int32"), ("bfloat16", "int64")]


class Driver:
    def __init__(self, level: str, cpu_check: bool = False):
        import torch

        import gnnsparse as gs
        from gnnsparse import reference as ref

        self.torch, self.gs, self.ref, self.level = torch, gs, ref, level
        self.cpu_check = cpu_check  # run the same plan on the SYCL CPU device (float32/64): checks this script
        self.rng = np.random.default_rng(7)
        self.calls = 0
        self.failures = []
        self.graphs = self._graphs()

    # ------------------------------------------------------------ inputs
    def _graph(self, M, K, deg):
        deg = np.asarray(deg, np.int64)
        rowptr = np.zeros(M + 1, np.int64)
        np.cumsum(deg, out=rowptr[1:])
        col = self.rng.integers(0, max(K, 1), int(rowptr[-1]))
        if len(col) > 3:
            col[1] = col[0]  # a duplicate
        val = self.rng.uniform(-1, 1, len(col))
        return rowptr, col, val, (M, K)

    def _graphs(self):
        r = self.rng
        g = {}
        deg = r.poisson(3, 300)
        deg[r.random(300) < 0.2] = 0
        deg[-1] = 0
        deg[150], deg[40] = 1500, 700  # hub rows: longer than the 256-entry segments and 16x the mean
        g["hub"] = self._graph(300, 257, deg)
        g["dense"] = self._graph(40, 50, r.poisson(80, 40))  # long average rows: edge-split groups
        deg = r.poisson(3, 200)
        deg[::17] = r.integers(40, 200, len(deg[::17]))  # rows for a whole warp, not hubs
        g["skew"] = self._graph(200, 90, deg)
        g["empty_rows"] = self._graph(7, 5, np.zeros(7, np.int64))  # nnz = 0
        g["no_rows"] = self._graph(0, 5, np.zeros(0, np.int64))  # M = 0
        return g

    def csr(self, name, itype, weighted, dtype):
        rowptr, col, val, shape = self.graphs[name]
        vd = "float32" if dtype in ("float16", "bfloat16") else dtype
        v = val.astype(vd) if weighted else None
        return self.gs.CSR(rowptr.astype(itype), col.astype(itype), v, shape), (rowptr, col, v, shape)

    def dense(self, shape, dtype, scale=1.0, aligned=True):
        """Host-made tensor copied to the GPU; unaligned = a view one element into a buffer."""
        torch = self.torch
        if self.cpu_check:
            return self.rng.uniform(-scale, scale, shape).astype(dtype)
        x = torch.from_numpy(self.rng.uniform(-scale, scale, shape)).to(getattr(torch, dtype))
        if aligned:
            return x.cuda()
        buf = torch.empty(x.numel() + 1, dtype=x.dtype)
        buf[1:] = x.reshape(-1)
        return buf.cuda()[1:].view(x.shape)

    def host(self, t):
        if isinstance(t, np.ndarray):
            return t.astype(np.float64) if t.dtype.kind == "f" else t
        t = t.detach().cpu()
        return t.to(self.torch.float64).numpy() if t.dtype.is_floating_point else t.numpy()

    # ------------------------------------------------------------ checks
    def check(self, what, got, want, dtype, exact=False):
        got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
        if got.shape != want.shape:
            self.failures.append(f"{what}: shape {got.shape} != {want.shape}")
            return
        if exact:
            ok = np.array_equal(got, want)
        else:
            err = np.linalg.norm((got - want).ravel()) / max(np.linalg.norm(want.ravel()), 1e-30)
            ok = bool(np.isfinite(got).all()) and (err <= TOL[dtype] or np.allclose(got, want, atol=1e-6))
        if not ok:
            self.failures.append(f"{what}: differs from the reference")

    # ------------------------------------------------------------ ops
    def spmm(self, g, dtype, itype, reduce, C, *, aligned=True, arg=False, weighted=True):
        A, (rowptr, col, v, shape) = self.csr(g, itype, weighted, dtype)
        X = self.dense((shape[1], C), dtype, aligned=aligned)
        self.calls += 1
        if arg:
            Y, a = self.gs.spmm(A, X, reduce, return_arg=True)
        else:
            Y, a = self.gs.spmm(A, X, reduce), None
        Rh = _ns(rowptr, col, v, shape)
        what = f"spmm {g} {dtype} {itype} {reduce} C={C} aligned={aligned} arg={arg}"
        if reduce in ("max", "min"):
            acc = np.float64 if dtype == "float64" else np.float32
            Yr, ar = self.ref.spmm(Rh, self.host(X), reduce, return_arg=True, dtype=acc)
            self.check(what, self.host(Y), Yr, dtype)
            if a is not None and dtype in ("float32", "float64"):
                self.check(what + " arg", self.host(a), ar, dtype, exact=True)
        else:
            self.check(what, self.host(Y), self.ref.spmm(Rh, self.host(X), reduce), dtype)

    def spmm_heads(self, g, dtype, itype, H, D, *, aligned=True):
        A, (rowptr, col, v, shape) = self.csr(g, itype, False, dtype)
        W = self.dense((len(col), H), "float32" if dtype in ("float16", "bfloat16") else dtype)
        Z = self.dense((shape[1], H, D), dtype, aligned=aligned)
        self.calls += 1
        out = self.gs.spmm_heads(A, W, Z)
        self.check(f"spmm_heads {g} {dtype} {itype} H={H} D={D} aligned={aligned}", self.host(out),
                   self.ref.spmm_heads(_ns(rowptr, col, None, shape), self.host(W), self.host(Z)), dtype)

    def gatv2(self, g, dtype, itype, H, C, *, aligned=True):
        from gnnsparse import _ops

        A, (rowptr, col, v, shape) = self.csr(g, itype, False, dtype)
        M, K = shape
        XL = self.dense((K, H, C), dtype, aligned=aligned)
        XR, att = self.dense((M, H, C), dtype), self.dense((H, C), dtype)
        dS = self.dense((len(col), H), "float32" if dtype in ("float16", "bfloat16") else dtype)
        R = _ns(rowptr, col, None, shape)
        self.calls += 2
        what = f"{g} {dtype} {itype} H={H} C={C} aligned={aligned}"
        S = self.gs.gatv2_scores(A, XL, XR, att)
        xl, xr, a, ds = (self.host(t) for t in (XL, XR, att, dS))
        self.check(f"gatv2_scores {what}", self.host(S), self.ref.gatv2_scores(R, xl, xr, a), dtype)
        dXR, dA = _ops.launch_gatv2_grad(A, XR, XL, att, dS, 0.2, True)
        rows = self.ref.edge_rows(R)
        z = xl[col.astype(np.int64)] + xr[rows]
        g_ = np.where(z > 0, ds[:, :, None], 0.2 * ds[:, :, None])
        want = np.zeros(xr.shape)
        np.add.at(want, rows, g_ * a)
        self.check(f"gatv2_grad dX {what}", self.host(dXR), want, dtype)
        self.check(f"gatv2_grad dAtt {what}", self.host(dA).sum(0), (g_ * z).sum(0), dtype)

    def sddmm(self, g, dtype, itype, op, shape_x, *, aligned=True):
        A, (rowptr, col, v, shape) = self.csr(g, itype, False, dtype)
        M, K = shape
        scale = 1.0 / np.sqrt(shape_x[-1]) if op == "dot" else 1.0
        X = self.dense((M,) + shape_x, dtype, scale, aligned)
        Y = self.dense((K,) + shape_x, dtype, scale, aligned)
        self.calls += 1
        E = self.gs.sddmm(A, X, Y, op)
        self.check(f"sddmm {g} {dtype} {itype} {op} {shape_x} aligned={aligned}", self.host(E),
                   self.ref.sddmm(_ns(rowptr, col, None, shape), self.host(X), self.host(Y), op), dtype)

    def fusedmm(self, g, dtype, itype, op, edge, D, *, aligned=True, edges=False, weighted=True, H=2, F=16):
        A, (rowptr, col, v, shape) = self.csr(g, itype, weighted, dtype)
        M, K = shape
        xs = (H, F) if op == "dot" else (H,)
        X = self.dense((M,) + xs, dtype, 0.5 / np.sqrt(F) if op == "dot" else 0.5, aligned)
        Y = self.dense((K,) + xs, dtype, 0.5 / np.sqrt(F) if op == "dot" else 0.5, aligned)
        Z = self.dense((K, H, D), dtype, 1.0, aligned)
        self.calls += 1
        res = self.gs.fusedmm(A, X, Y, Z, op=op, edge=edge, slope=0.1, return_edges=edges)
        out, E = res if edges else (res, None)
        Rh = _ns(rowptr, col, v, shape)
        out_r, E_r = self.ref.fusedmm(Rh, self.host(X), self.host(Y), self.host(Z), op=op, edge=edge, slope=0.1,
                                      return_edges=True)
        what = f"fusedmm {g} {dtype} {itype} {op}/{edge} D={D} aligned={aligned} edges={edges}"
        self.check(what, self.host(out), out_r, dtype)
        if E is not None:
            self.check(what + " edges", self.host(E), E_r, dtype)

    # ------------------------------------------------------------ plans
    def full(self, dtype, itype):
        V = VEC[dtype]
        for i, r in enumerate(("sum", "mean", "max", "min")):
            arg = r in ("max", "min")
            self.spmm("hub", dtype, itype, r, 4 * V, arg=arg)                     # hubs, vector loads
            self.spmm("hub", dtype, itype, r, 4 * V, aligned=False, arg=False)    # hubs, scalar loads
            self.spmm("skew", dtype, itype, r, 5, arg=arg, weighted=i % 2 == 0)  # warp rows, odd C
            self.spmm("dense", dtype, itype, r, 130, arg=arg)                    # edge split, col blocks
            self.spmm("dense", dtype, itype, r, V)                                # narrow, edge split
        for g in ("empty_rows", "no_rows"):
            self.spmm(g, dtype, itype, "max", 3, arg=True)
            self.spmm(g, dtype, itype, "sum", 8)
        self.spmm_heads("hub", dtype, itype, 4, 2 * V)                  # hubs, vector loads
        self.spmm_heads("hub", dtype, itype, 3, 2 * V, aligned=False)   # hubs, scalar loads
        self.spmm_heads("skew", dtype, itype, 3, 5)                      # warp rows, odd D
        self.spmm_heads("dense", dtype, itype, 8, 10 * V)                # several column blocks
        self.spmm_heads("dense", dtype, itype, 1, V)                     # narrow, edge split
        for g in ("empty_rows", "no_rows"):
            self.spmm_heads(g, dtype, itype, 2, 3)
        self.gatv2("hub", dtype, itype, 4, 8 * V // 4)                   # vector loads, one vector a lane
        self.gatv2("skew", dtype, itype, 3, 7, aligned=False)           # scalar loads, warp rows
        self.gatv2("dense", dtype, itype, 2, 40 * V)                    # the column loop
        for g in ("empty_rows", "no_rows"):
            self.gatv2(g, dtype, itype, 2, 3)
        self.sddmm("hub", dtype, itype, "dot", (2 * V,))
        self.sddmm("dense", dtype, itype, "dot", (2, 7), aligned=False)
        self.sddmm("hub", dtype, itype, "dot", (3, 40))
        self.sddmm("hub", dtype, itype, "add", (3,))
        self.sddmm("skew", dtype, itype, "add", ())
        self.sddmm("empty_rows", dtype, itype, "dot", (4,))
        for op in ("dot", "add"):
            for j, edge in enumerate(("none", "leaky_relu", "exp", "softmax")):
                self.fusedmm("hub", dtype, itype, op, edge, 2 * V, edges=j % 2 == 1, F=2 * V)
                self.fusedmm("skew", dtype, itype, op, edge, 5, aligned=False, edges=j % 2 == 0, weighted=j < 2, F=5)
        self.fusedmm("dense", dtype, itype, "dot", "softmax", 70, edges=True, H=1, F=V)
        self.fusedmm("empty_rows", dtype, itype, "dot", "softmax", 4, edges=True)
        self.fusedmm("no_rows", dtype, itype, "add", "exp", 4)

    def small(self, dtype, itype):
        V = VEC[dtype]
        self.spmm("hub", dtype, itype, "sum", 4 * V)
        self.spmm("hub", dtype, itype, "max", 3, arg=True)
        self.spmm_heads("hub", dtype, itype, 4, 2 * V)
        self.gatv2("hub", dtype, itype, 4, 2 * V)
        self.sddmm("hub", dtype, itype, "dot", (2 * V,))
        self.fusedmm("hub", dtype, itype, "dot", "softmax", 2 * V, edges=True, F=2 * V)

    def run(self):
        t0 = time.perf_counter()
        pairs_full = FULL_PAIRS if self.level == "full" else FULL_PAIRS[:1]
        pairs_small = SMALL_PAIRS if self.level == "full" else FULL_PAIRS[1:]
        if self.cpu_check:
            pairs_full = [p for p in pairs_full if p[0] in ("float32", "float64")]
            pairs_small = [p for p in pairs_small if p[0] in ("float32", "float64")]
        for dt, it in pairs_full:
            self.full(dt, it)
        for dt, it in pairs_small:
            self.small(dt, it)
        if not self.cpu_check:
            self.torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        print(f"sanitize_driver: {self.calls} op calls ({self.level}), {len(self.failures)} wrong results, {dt:.1f} s")
        for f in self.failures[:20]:
            print("  WRONG:", f)
        return 1 if self.failures else 0


def _ns(rowptr, col, val, shape):
    import types

    return types.SimpleNamespace(rowptr=rowptr, col=col, val=None if val is None else np.asarray(val, np.float64),
                                 shape=shape)


def main(argv=None):
    p = argparse.ArgumentParser(description="drive every gnnsparse CUDA kernel (for compute-sanitizer)")
    p.add_argument("--level", choices=["quick", "full"], default="full")
    p.add_argument("--cpu-check", action="store_true",
                   help="run the float32/float64 part of the plan on the SYCL CPU device (checks the driver itself)")
    a = p.parse_args(argv)
    import gnnsparse as gs

    if a.cpu_check:
        return Driver(a.level, cpu_check=True).run()
    if not gs.available_backends().get("cuda"):
        print("sanitize_driver: the CUDA backend is not available here", file=sys.stderr)
        return 2
    return Driver(a.level).run()


if __name__ == "__main__":
    sys.exit(main())
