#!/usr/bin/env python3
"""Determinism check: every op on a backend, run N times on the same inputs, must give bitwise the
same outputs (include/gnnsparse/ops.hpp: no atomics, fixed reduction orders).

    python tests/drivers/determinism_check.py --backend sycl --repeats 100            # SYCL CPU device
    python tests/drivers/determinism_check.py --backend cuda --repeats 100 --scale 4  # H200, larger graph

Cases: SpMM sum / mean / max+arg / min+arg at narrow, odd and wide widths, SDDMM dot and add,
FusedMM with every edge function (edge values returned too), on a graph with a hub row far longer
than the others (the CUDA hub segments and their combine pass), empty rows and duplicates; both
index types; float32 and float64 (and float16 / bfloat16 on CUDA). Prints one line per case and a
summary; exit status 1 if any case ever differs. tests/test_determinism.py runs a few repeats of a
subset of the same cases in CI.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

# the odd widths here exist to run the scalar walks: no zero-padded copies (gnnsparse._ops._vector_width)
os.environ.setdefault("GNNSPARSE_CUDA_PAD", "off")


def graph(rng, M, K, mean_deg, hub):
    deg = rng.poisson(mean_deg, M).astype(np.int64)
    deg[rng.random(M) < 0.1] = 0
    if hub:
        deg[M // 3] = hub
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(deg, out=rowptr[1:])
    col = rng.integers(0, K, int(rowptr[-1]))
    if len(col) > 3:
        col[1] = col[0]
    return rowptr, col


def cases(backend: str, quick: bool):
    """(name, itype, dtype, op, kwargs) for every case of this backend."""
    dtypes = ["float32", "float64"] + (["float16", "bfloat16"] if backend == "cuda" else [])
    widths = [3, 17, 64, 130]
    if quick:  # CI: one dtype, both index types, the reductions at one odd width, every op kind
        out = [("spmm", "int32", "float32", dict(reduce=r, C=17)) for r in ("sum", "mean", "max", "min")]
        out += [("spmm", "int64", "float32", dict(reduce="sum", C=3)), ("spmm", "int32", "float64", dict(reduce="max", C=64))]
        out += [("sddmm", "int32", "float32", dict(op=o)) for o in ("dot", "add")]
        out += [("fusedmm", "int32", "float32", dict(edge=e)) for e in ("none", "leaky_relu", "exp", "softmax")]
        return out
    out = []
    for it in ("int32", "int64"):
        for dt in dtypes:
            out += [("spmm", it, dt, dict(reduce=r, C=C)) for r in ("sum", "mean", "max", "min") for C in widths]
            out += [("sddmm", it, dt, dict(op=o)) for o in ("dot", "add")]
            out += [("fusedmm", it, dt, dict(edge=e)) for e in ("none", "leaky_relu", "exp", "softmax")]
    return out


class Inputs:
    """One graph and its dense inputs for a backend, shared by every case."""

    def __init__(self, backend: str, scale: int, seed: int = 2024):
        import gnnsparse as gs

        self.gs, self.backend = gs, backend
        rng = np.random.default_rng(seed)
        M, K = 6000 * scale, 5000 * scale
        rowptr, col = graph(rng, M, K, mean_deg=8, hub=40000 * scale)
        self.M, self.K, self.nnz = M, K, len(col)
        val = rng.uniform(-1, 1, len(col))
        self.A = {it: gs.CSR(rowptr.astype(it), col.astype(it), val.astype(np.float32), (M, K)) for it in ("int32", "int64")}
        self.rng = rng
        self._dense = {}

    def dense(self, shape, dtype, scale=1.0):
        key = (shape, dtype, scale)
        if key not in self._dense:
            x = self.rng.uniform(-scale, scale, shape)
            if self.backend == "cuda":
                import torch

                self._dense[key] = torch.from_numpy(x).to(getattr(torch, dtype)).cuda()
            else:
                self._dense[key] = x.astype(dtype)
        return self._dense[key]


def call(inp: Inputs, op, it, dt, kw):
    gs, A, M, K = inp.gs, inp.A[it], inp.M, inp.K
    if op == "spmm":
        X = inp.dense((K, kw["C"]), dt)
        if kw["reduce"] in ("max", "min"):
            return gs.spmm(A, X, kw["reduce"], return_arg=True)
        return (gs.spmm(A, X, kw["reduce"]),)
    if op == "sddmm":
        if kw["op"] == "dot":
            return (gs.sddmm(A, inp.dense((M, 2, 33), dt, 0.2), inp.dense((K, 2, 33), dt, 0.2), "dot"),)
        return (gs.sddmm(A, inp.dense((M, 4), dt), inp.dense((K, 4), dt), "add"),)
    X, Y = inp.dense((M, 2, 9), dt, 0.3), inp.dense((K, 2, 9), dt, 0.3)
    return gs.fusedmm(A, X, Y, inp.dense((K, 2, 20), dt), edge=kw["edge"], slope=0.1, return_edges=True)


def fingerprint(outs):
    """Bit patterns of the outputs (NaN-safe): bytes on the host, integer views on a GPU."""
    fp = []
    for o in outs:
        mod = type(o).__module__
        if mod.startswith("torch") and o.is_cuda:
            import torch

            bits = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[o.element_size()]
            fp.append(o.contiguous().view(bits).clone())
        else:
            a = o.numpy() if mod.startswith("torch") else np.asarray(o)
            fp.append(a.tobytes())
    return fp


def same(a, b):
    if isinstance(a[0], bytes):
        return a == b
    import torch

    return all(torch.equal(x, y) for x, y in zip(a, b))


def run(backend: str, repeats: int, scale: int = 1, quick: bool = False, log=print):
    inp = Inputs(backend, scale)
    log(f"# {backend}: graph {inp.M} x {inp.K}, nnz {inp.nnz} (one hub row of {40000 * scale}), {repeats} repeats")
    results = []
    for op, it, dt, kw in cases(backend, quick):
        name = f"{op} {it} {dt} " + " ".join(f"{k}={v}" for k, v in kw.items())
        first = fingerprint(call(inp, op, it, dt, kw))
        t0 = time.perf_counter()
        differ = 0
        for _ in range(repeats - 1):
            if not same(fingerprint(call(inp, op, it, dt, kw)), first):
                differ += 1
        if backend == "cuda":
            import torch

            torch.cuda.synchronize()
        dt_s = time.perf_counter() - t0
        results.append(dict(case=name, repeats=repeats, differing_runs=differ, seconds=round(dt_s, 3)))
        log(f"{'OK  ' if differ == 0 else 'DIFF'} {name:55s} {repeats} runs, {differ} differ ({dt_s:.2f} s)")
    bad = [r for r in results if r["differing_runs"]]
    log(f"# {backend}: {len(results)} cases x {repeats} runs: {len(results) - len(bad)} bitwise identical, "
        f"{len(bad)} differ")
    return results


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=["sycl", "cuda"], required=True)
    p.add_argument("--repeats", type=int, default=100)
    p.add_argument("--scale", type=int, default=1, help="graph size multiplier (1: 6000 x 5000, ~90k edges)")
    p.add_argument("--quick", action="store_true", help="the CI subset of cases")
    p.add_argument("--json", help="write the per-case results here")
    a = p.parse_args(argv)
    import gnnsparse as gs

    if not gs.available_backends().get(a.backend):
        print(f"the {a.backend} backend is not available here", file=sys.stderr)
        return 2
    res = run(a.backend, a.repeats, a.scale, a.quick)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 1 if any(r["differing_runs"] for r in res) else 0


if __name__ == "__main__":
    sys.exit(main())
