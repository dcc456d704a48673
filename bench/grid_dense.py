"""gnnsparse on the ESIMD SpMM paper's dense-ish grid against cuSPARSE and dense cuBLAS, per precision.

The 72 cells of the ESIMD paper's grid (K 1024-8192, M = K, 3K, 4K, density 0.1 / 0.2 / 0.3 with
round(density K) distinct sorted columns per row, N = 32 / 128, N(0, 1) values), drawn on the GPU.
Per cell and precision (fp32, tf32, bf16):

  ours      gs.spmm(A, X, precision=p) / gs.sddmm(A, X, Y, "dot", precision=p): what a user gets
            (the dense-ish route through cuBLAS where its policy takes it, else our kernels)
  kernels   the same call with GNNSPARSE_DENSE=off: our sparse kernels alone
  cusparse  torch.sparse.mm / torch.sparse.sampled_addmm on the CSR (cuSPARSE, fp32)
  dense     torch.mm on a dense copy of A made before timing (SpMM) / X Y^T, the M x K scores
            without the gather (SDDMM), at precision p (cuBLAS; bf16: bf16 operands, fp32 output)

Times are medians of --reps calls (CUDA events around each call; each method in its own loop of
back-to-back calls). Cells whose GPU work is shorter than a call's host work (tens of microseconds
here) measure the host: compare methods on the larger cells. Each "ours" result is checked against float64 on 256 sampled rows (max
error relative to the largest |reference|) and repeated bitwise. Prints one line per cell and
summary geomeans; --csv writes every row.

    python bench/grid_dense.py [--ops spmm,sddmm] [--precisions fp32,tf32,bf16] [--reps 10]
                               [--max-m 8192] [--csv grid_dense.csv]
"""
from __future__ import annotations

import argparse
import csv
import math
import statistics
import warnings

import gnnsparse as gs
from gnnsparse import _dense
from gnnsparse.bench import timing
from gnnsparse.bench.generators import grid72_shapes


def grid_csr(M, K, d, seed, torch, dev):
    """The grid matrix on the device: round(d K) distinct columns per row, sorted, N(0, 1) values."""
    per = int(round(d * K))
    g = torch.Generator(device=dev).manual_seed(seed)
    it = torch.int32 if M * per < 2**31 else torch.int64
    col = torch.empty(M, per, dtype=it, device=dev)
    chunk = max(1, (1 << 26) // K)
    for r0 in range(0, M, chunk):
        r1 = min(M, r0 + chunk)
        keys = torch.rand(r1 - r0, K, generator=g, device=dev)
        col[r0:r1] = torch.topk(keys, per, dim=1, largest=False, sorted=False).indices.sort(dim=1).values.to(it)
    rowptr = torch.arange(M + 1, device=dev, dtype=torch.int64).mul_(per).to(it)
    val = torch.randn(M * per, generator=g, device=dev)
    return gs.CSR(rowptr, col.reshape(-1), val, shape=(M, K), validate=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="spmm,sddmm")
    ap.add_argument("--precisions", default="fp32,tf32,bf16")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--max-m", type=int, default=None, help="only cells with M at most this")
    ap.add_argument("--device", default="cuda", help="cuda (default); cpu: a dry run of the script at small sizes")
    ap.add_argument("--csv", default=None)
    a = ap.parse_args(argv)
    import torch

    dev = torch.device(a.device)
    ops = a.ops.split(",")
    precs = a.precisions.split(",")
    cells = [c for c in grid72_shapes() if a.max_m is None or c[0] <= a.max_m]
    mats = sorted({(M, K, d) for M, K, d, _ in cells})
    rows = []
    out = open(a.csv, "w", newline="") if a.csv else None  # written row by row: a cut run keeps its rows
    writer = None
    print(f"{'op':5s} {'prec':4s} {'M':>5s} {'K':>5s} {'d':>3s} {'N':>3s} {'route':6s} {'ours':>8s} {'kernels':>8s} "
          f"{'cusparse':>8s} {'dense':>8s}  {'x cusp':>6s} {'x dense':>7s} {'err':>8s}")
    for mi, (M, K, d) in enumerate(mats):
        A = grid_csr(M, K, d, mi, torch, dev)
        g = torch.Generator(device=dev).manual_seed(1000 + mi)
        rp, cl, vl = (torch.as_tensor(t, device=dev) for t in (A.rowptr, A.col, A.val))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch: "Sparse CSR tensor support is in beta"
            T = torch.sparse_csr_tensor(rp.long(), cl.long(), vl, size=(M, K))
            P = torch.sparse_csr_tensor(rp.long(), cl.long(), torch.ones_like(vl), size=(M, K))
        Dd = T.to_dense()
        sample = torch.randperm(M, generator=g, device=dev)[:256]
        for N in sorted({n for m, k, dd, n in cells if (m, k, dd) == (M, K, d)}):
            X = torch.randn(K, N, generator=g, device=dev)
            XS, YS = torch.randn(M, N, generator=g, device=dev), torch.randn(K, N, generator=g, device=dev)
            for op in ops:
                for p in precs:
                    r = _cell(torch, op, p, A, (rp, cl), T, P, Dd, X, XS, YS, sample, a.reps)
                    r.update(M=M, K=K, density=d, N=N, nnz=A.nnz)
                    rows.append(r)
                    if out is not None:
                        if writer is None:
                            writer = csv.DictWriter(out, fieldnames=list(r))
                            writer.writeheader()
                        writer.writerow(r)
                        out.flush()
                    print(f"{op:5s} {p:4s} {M:5d} {K:5d} {d:3.1f} {N:3d} {r['route']:6s} {r['ours_us']:8.1f} "
                          f"{r['kernels_us']:8.1f} {r['cusparse_us']:8.1f} {r['dense_us']:8.1f}  "
                          f"{r['cusparse_us'] / r['ours_us']:6.2f} {r['dense_us'] / r['ours_us']:7.2f} "
                          f"{r['err']:8.1e}{'' if r['bitwise'] else '  NOT BITWISE'}", flush=True)
        del A, T, P, Dd, rp, cl, vl
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    if out is not None:
        out.close()
    _summary(rows, ops, precs)


def _cell(torch, op, p, A, arrays, T, P, Dd, X, XS, YS, sample, reps):
    cuda = X.is_cuda
    if op == "spmm":
        ours = lambda i: gs.spmm(A, X, precision=p)  # noqa: E731
        cusp = lambda i: torch.sparse.mm(T, X)  # noqa: E731
        Dp = Dd.to(torch.bfloat16) if p == "bf16" else Dd
        dense = lambda i: _gemm(torch, Dp, X, p)  # noqa: E731
        want = Dd[sample].double() @ X.double()
    else:
        ours = lambda i: gs.sddmm(A, XS, YS, "dot", precision=p)  # noqa: E731
        cusp = lambda i: torch.sparse.sampled_addmm(P, XS, YS.t(), beta=0.0, alpha=1.0)  # noqa: E731
        dense = lambda i: _gemm(torch, XS, YS.t(), p)  # noqa: E731
        want = None
    got = ours(0)
    bitwise = torch.equal(got, ours(1))
    route = "dense" if A.dense_nbytes or any(k[0] == "dense_flat" for k in A._derived if isinstance(k, tuple)) \
        else "sparse"
    if op == "spmm":
        err = float((got[sample].double() - want).abs().max() / want.abs().max().clamp(min=1e-30))
    else:
        rp, col = arrays[0].long(), arrays[1].long()
        lo, hi = rp[sample], rp[sample + 1]
        k = torch.cat([torch.arange(int(a_), int(b_), device=X.device) for a_, b_ in zip(lo[:16].tolist(),
                                                                                         hi[:16].tolist())])
        rows_k = torch.repeat_interleave(sample[:16], (hi - lo)[:16])
        want = (XS[rows_k].double() * YS[col[k]].double()).sum(1)
        err = float((got[k].double() - want).abs().max() / want.abs().max().clamp(min=1e-30))
    A.invalidate()  # the route's copy is rebuilt by the warm-up, not kept across precisions
    # each method in its own loop of back-to-back calls (interleaving the methods' calls made the
    # host-bound small cells' times depend on their neighbours: 2026-12-06 run, docs/grid.md)
    ts = {}
    for name, fn, env in (("ours", ours, {}), ("kernels", ours, {"GNNSPARSE_DENSE": "off"}),
                          ("cusparse", cusp, {}), ("dense", dense, {})):
        with timing.environ(env):
            if cuda:
                ts.update(timing.events({name: fn}, repeat=reps, warmup=2, torch=torch))
            else:
                ts.update(timing.wall({name: fn}, rounds=1, per_round=reps, warmup=1))
    out = {"op": op, "precision": p, "route": route, "err": err, "bitwise": bool(bitwise)}
    for k, v in ts.items():
        out[f"{k}_us"] = timing.median(v) * 1e6
    A.invalidate()
    return out


def _gemm(torch, a, b, p):
    if p == "bf16":
        return _dense._mm_bf16(torch, a.to(torch.bfloat16), b.to(torch.bfloat16))
    with _dense._fp32_matmul(torch, p == "tf32"):
        return torch.mm(a, b)


def _geo(xs):
    return statistics.geometric_mean(xs) if xs else float("nan")


def _summary(rows, ops, precs):
    print("\nGeomeans over the cells (> 1: ours faster); worst: the smallest per-cell ratio")
    for op in ops:
        for p in precs:
            rs = [r for r in rows if r["op"] == op and r["precision"] == p]
            if not rs:
                continue
            for N in sorted({r["N"] for r in rs}) + [None]:
                s = [r for r in rs if N is None or r["N"] == N]
                fp32_dense = {(r["M"], r["K"], r["density"], r["N"]): r["dense_us"] for r in rows
                              if r["op"] == op and r["precision"] == "fp32"}
                better = [min(r["cusparse_us"], fp32_dense.get((r["M"], r["K"], r["density"], r["N"]), math.inf))
                          / r["ours_us"] for r in s]
                print(f"  {op} {p} N={'all' if N is None else N}: {len(s)} cells, dense route in "
                      f"{sum(r['route'] == 'dense' for r in s)}; vs cuSPARSE {_geo([r['cusparse_us'] / r['ours_us'] for r in s]):.2f}x"
                      f", vs dense cuBLAS {p} {_geo([r['dense_us'] / r['ours_us'] for r in s]):.2f}x (worst "
                      f"{min(r['dense_us'] / r['ours_us'] for r in s):.2f}), vs our kernels "
                      f"{_geo([r['kernels_us'] / r['ours_us'] for r in s]):.2f}x, vs the better of cuSPARSE and "
                      f"dense fp32: {_geo(better):.2f}x (worst {min(better):.2f}); max err "
                      f"{max(r['err'] for r in s):.1e}; bitwise {all(r['bitwise'] for r in s)}")


if __name__ == "__main__":
    main()
