#!/usr/bin/env python3
"""Scale check: more than 2^31 nonzeros (int64 indices), and int32 indices at the index x width
boundary, on one GPU, each checked against gnnsparse.reference on sampled rows / edges computed on
the host independently of the kernels.

    python tests/gpu/scale_check.py                      # H200: ~2.25e9 edges (defaults below)
    python tests/gpu/scale_check.py --device cpu --small # a small dry run of the same checks (SYCL CPU)

Part 1, int64, nnz > 2^31: M = K = 2^24 nodes, random degrees (mean ~134, 5% empty rows), one hub
row of 20 M edges placed so that its edges straddle entry 2^31 (the hub segments and their combine
pass run across the int32 boundary), unweighted. Ops: SpMM sum (C = 4), SpMM max with arg (arg
values beyond 2^31 checked exactly), SDDMM dot (F = 4), FusedMM dot + softmax (F = D = 4).
Memory plan (141 GB card; sizes for the defaults):
    col int64 nnz x 8 B .................. 18.0 GB   (filled in place by random_)
    rowptr int64 ........................... 0.13 GB
    X, Y, Z (2^24 x 4 float32) ............. 0.27 GB each
    SpMM Y + arg (2^24 x 4, f32 + int64) ... 0.8 GB
    SDDMM E (nnz float32) .................. 9.0 GB   (freed after its check)
    CSR validation on the device ........... ~7 GB transient (boolean masks of nnz)
    peak ~ 35 GB; host side: rowptr and X copies (0.4 GB) and the sampled rows' edges (~0.2 GB).
Sampled reference: 2,000 random rows, the hub row, the rows holding entries 2^31 - 1, 2^31 and
nnz - 1, the first and last 50 rows (SpMM, FusedMM); 200,000 random edges plus the 2,000 edges
around entry 2^31 and the last 1,000 (SDDMM). Their CSR slices are copied to the host and
gnnsparse.reference computes them in float64 (max/min in float32 messages, exact).

Part 2, int32 indices where an index times a width passes 2^31 (every kernel must form such
offsets in 64 bits): width 64 and 2^31 / 64 + 4096 rows, so X, Y, Z or the output hold more than
2^31 elements (8.6 GB each), with edges only where the offsets exceed 2^31:
    SpMM X side (K x C > 2^31), SpMM output side (M x C > 2^31), SDDMM (X and Y > 2^31 elements),
    FusedMM (Z and Out > 2^31 elements). Each either works (checked) or must refuse with an error.
Prints one line per check and a summary; exit status 1 if any check fails. --json writes the
figures (timings, effective GB/s of the index + gather traffic) for docs/reliability.md.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import types

import numpy as np

INT32_LIMIT = 2**31
U32 = 2.0**-24


class Check:
    def __init__(self, args):
        import torch

        import gnnsparse as gs
        from gnnsparse import reference as ref

        self.torch, self.gs, self.ref, self.a = torch, gs, ref, args
        self.dev = torch.device(args.device)
        self.rng = np.random.default_rng(args.seed)
        self.gen = torch.Generator(device=self.dev).manual_seed(args.seed)
        self.results = []

    # ------------------------------------------------------------ helpers
    def report(self, name, ok, detail="", **fig):
        self.results.append(dict(check=name, ok=bool(ok), detail=detail, **fig))
        print(f"{'PASS' if ok else 'FAIL'} {name:48s} {detail}", flush=True)

    def timed(self, fn):
        torch = self.torch
        if self.dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        if self.dev.type == "cuda":
            torch.cuda.synchronize()
        return out, time.perf_counter() - t0

    def host(self, t):
        t = t.detach().cpu()
        return t.to(self.torch.float64).numpy() if t.dtype.is_floating_point else t.numpy()

    def rand(self, shape, scale=1.0):
        x = self.torch.empty(shape, dtype=self.torch.float32, device=self.dev)
        return x.uniform_(-scale, scale, generator=self.gen)

    @staticmethod
    def ns(rowptr, col, shape):
        return types.SimpleNamespace(rowptr=rowptr, col=col, val=None, shape=shape)

    def rows_slice(self, rowptr_h, col, rows):
        """Sub-CSR (host) of `rows` and the global position of each row's first entry."""
        torch = self.torch
        starts, ends = rowptr_h[rows], rowptr_h[rows + 1]
        deg = ends - starts
        sub_rowptr = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(deg, out=sub_rowptr[1:])
        idx = np.repeat(starts - sub_rowptr[:-1], deg) + np.arange(int(sub_rowptr[-1]))
        col_s = col[torch.from_numpy(idx).to(self.dev)].cpu().numpy() if len(idx) else np.zeros(0, np.int64)
        return sub_rowptr, col_s.astype(np.int64), starts

    # ------------------------------------------------------------ part 1: nnz > 2^31, int64
    def big(self):
        torch, gs, ref, a = self.torch, self.gs, self.ref, self.a
        M = K = a.nodes
        nnz_target = a.nnz
        avg = nnz_target / M
        deg = torch.randint(0, int(2 * avg) + 1, (M,), device=self.dev, generator=self.gen, dtype=torch.int64)
        deg[torch.rand(M, device=self.dev, generator=self.gen) < 0.05] = 0
        rowptr = torch.zeros(M + 1, dtype=torch.int64, device=self.dev)
        torch.cumsum(deg, 0, out=rowptr[1:])
        boundary = min(INT32_LIMIT, int(rowptr[-1]) - 1) if not a.small else int(rowptr[-1]) // 2
        hub = int(torch.searchsorted(rowptr, torch.tensor([boundary], device=self.dev), right=True)[0]) - 1
        deg[hub] = a.hub
        torch.cumsum(deg, 0, out=rowptr[1:])
        short = nnz_target - int(rowptr[-1])
        if short > 0:  # top up the last row so nnz reaches the target
            deg[M - 1] += short
            torch.cumsum(deg, 0, out=rowptr[1:])
        nnz = int(rowptr[-1])
        del deg
        if not a.small and nnz <= INT32_LIMIT:
            raise SystemExit(f"nnz {nnz} does not pass 2^31; raise --nnz")
        col = torch.empty(nnz, dtype=torch.int64, device=self.dev)
        col.random_(0, K, generator=self.gen)
        print(f"# part 1: M = K = {M}, nnz = {nnz} ({nnz / INT32_LIMIT:.3f} x 2^31), hub row {hub} with {a.hub} "
              f"edges spanning [{int(rowptr[hub])}, {int(rowptr[hub + 1])})", flush=True)
        A, t = self.timed(lambda: gs.CSR(rowptr, col, None, (M, K)))
        assert A.index_dtype == "int64"
        self.report("CSR construction + validation (device)", True, f"{t:.2f} s")
        rowptr_h = rowptr.cpu().numpy()
        C = 4
        X = self.rand((K, C))
        X_h = self.host(X)

        # sampled rows
        rows = set(self.rng.choice(M, min(M, 2000), replace=False).tolist())
        rows |= {hub, 0, M - 1} | set(range(50)) | set(range(max(0, M - 50), M))
        for p in (boundary - 1, boundary, nnz - 1):
            rows.add(int(np.searchsorted(rowptr_h, p, side="right")) - 1)
        rows = np.array(sorted(r for r in rows if 0 <= r < M), np.int64)
        sub_rowptr, col_s, starts = self.rows_slice(rowptr_h, col, rows)
        sub = self.ns(sub_rowptr, col_s, (len(rows), K))
        sub_deg = np.diff(sub_rowptr)
        rows_t = torch.from_numpy(rows).to(self.dev)
        gb = (nnz * 8 + nnz * C * 4) / 1e9  # indices + gathered feature rows

        # SpMM sum
        Y, t = self.timed(lambda: gs.spmm(A, X, "sum"))
        got = self.host(Y[rows_t])
        want = ref.spmm(sub, X_h)
        S = ref.spmm(sub, np.abs(X_h))
        bound = 4 * (sub_deg[:, None] + 2) * U32 * S
        err = np.abs(got - want)
        self.report("int64 nnz>2^31 spmm sum C=4", bool(np.all(err <= bound)),
                    f"{t:.3f} s, {gb / t:.0f} GB/s; max err/bound {np.max(err / np.maximum(bound, 1e-30)):.2e}",
                    seconds=t, nnz=nnz)
        del Y

        # SpMM max + arg
        (Ym, arg), t = self.timed(lambda: gs.spmm(A, X, "max", return_arg=True))
        want_y, want_arg = ref.spmm(sub, X_h, "max", return_arg=True, dtype=np.float32)
        glob = np.where(want_arg >= 0, want_arg - sub_rowptr[:-1, None] + starts[:, None], -1)
        got_y, got_arg = self.host(Ym[rows_t]), self.host(arg[rows_t])
        ok = np.array_equal(got_y, want_y) and np.array_equal(got_arg, glob)
        self.report("int64 nnz>2^31 spmm max + arg C=4", ok,
                    f"{t:.3f} s; largest arg checked {int(got_arg.max())} ({int(got_arg.max()) >= INT32_LIMIT and 'beyond' or 'below'} 2^31)",
                    seconds=t)
        del Ym, arg

        # SDDMM dot
        F = 4
        Xs, Ys = self.rand((M, F), 0.5), self.rand((K, F), 0.5)
        Xs_h, Ys_h = self.host(Xs), self.host(Ys)
        E, t = self.timed(lambda: gs.sddmm(A, Xs, Ys, "dot"))
        ks = np.unique(np.concatenate([
            self.rng.integers(0, nnz, 200_000),
            np.arange(max(0, boundary - 1000), min(nnz, boundary + 1000)),
            np.arange(max(0, nnz - 1000), nnz)]))
        ks_t = torch.from_numpy(ks).to(self.dev)
        rk = np.searchsorted(rowptr_h, ks, side="right") - 1
        ck = col[ks_t].cpu().numpy()
        want = np.einsum("ij,ij->i", Xs_h[rk], Ys_h[ck])
        bound = 2 * (F + 2) * U32 * np.einsum("ij,ij->i", np.abs(Xs_h[rk]), np.abs(Ys_h[ck])) + 1e-30
        got = self.host(E[ks_t])
        self.report("int64 nnz>2^31 sddmm dot F=4", bool(np.all(np.abs(got - want) <= bound)),
                    f"{t:.3f} s; {len(ks)} edges checked, last {int(ks[-1])}", seconds=t)
        del E

        # FusedMM softmax
        Z = self.rand((K, C))
        Z_h = self.host(Z)
        out, t = self.timed(lambda: gs.fusedmm(A, Xs, Ys, Z, edge="softmax"))
        want = ref.fusedmm(sub, Xs_h[rows], Ys_h, Z_h, edge="softmax")
        got = self.host(out[rows_t])
        # softmax weights sum to 1 and |Z| <= 1; float32 accumulation over rows of up to 2e7 entries
        # (in fixed segments): a practical 1e-4 (the worst-case bound is vacuous for the hub row)
        err = float(np.max(np.abs(got - want))) if got.size else 0.0
        self.report("int64 nnz>2^31 fusedmm dot+softmax D=4", err <= 1e-4, f"{t:.3f} s; max abs err {err:.2e}",
                    seconds=t)
        del out, A, col, rowptr
        if self.dev.type == "cuda":
            torch.cuda.empty_cache()

    # ------------------------------------------------------------ part 2: int32 at the boundary
    def boundary(self):
        torch, gs, ref, a = self.torch, self.gs, self.ref, self.a
        W = a.width
        big = (INT32_LIMIT // W + 4096) if not a.small else 3000
        small = 1024 if not a.small else 200
        print(f"# part 2: int32 indices, width {W}, {big} rows on the large side ({big * W / INT32_LIMIT:.3f} x 2^31 "
              "elements)", flush=True)

        def csr(M, K, rows, cols_per_row, high):
            """int32 CSR whose nonzeros sit in `rows`, columns near K (the largest offsets)."""
            deg = np.zeros(M, np.int64)
            deg[rows] = cols_per_row
            rowptr = np.zeros(M + 1, np.int64)
            np.cumsum(deg, out=rowptr[1:])
            col = (K - 1 - self.rng.integers(0, min(high, K), int(rowptr[-1]))) if high else self.rng.integers(0, K, int(rowptr[-1]))
            col[::5] = self.rng.integers(0, K, len(col[::5]))  # and some anywhere
            A = gs.CSR(rowptr.astype(np.int32), col.astype(np.int32), None, (M, K))
            assert A.index_dtype == "int32"
            return A, rowptr, col

        def attempt(name, fn, check):
            try:
                res, t = self.timed(fn)
            except Exception as e:  # refusing clearly is allowed
                self.report(name, isinstance(e, (ValueError, RuntimeError)) and "illegal" not in str(e).lower(),
                            f"refused: {type(e).__name__}: {str(e)[:80]}")
                return
            ok, detail = check(res)
            self.report(name, ok, f"{t:.3f} s; {detail}", seconds=t)

        # SpMM, X side: K x W > 2^31
        rows = np.arange(0, small, 3)
        A, rowptr, col = csr(small, big, rows, 6, 4096)
        X = self.rand((big, W))
        sub = self.ns(rowptr, col, (small, big))

        def chk_x(res):
            Y, arg = res
            Xs = self.host(X[torch.from_numpy(np.unique(col)).to(self.dev)])
            remap = np.searchsorted(np.unique(col), col)
            s2 = self.ns(rowptr, remap, (small, Xs.shape[0]))
            wy, wa = ref.spmm(s2, Xs, "max", return_arg=True, dtype=np.float32)
            return (np.array_equal(self.host(Y), wy) and np.array_equal(self.host(arg), wa),
                    f"largest column offset {int(col.max()) * W} elements")
        attempt(f"int32 spmm max, X {big}x{W} (> 2^31 elements)", lambda: gs.spmm(A, X, "max", return_arg=True), chk_x)
        del X, sub

        # SpMM, output side: M x W > 2^31
        rows = np.arange(big - 3 * small, big, 3)
        A, rowptr, col = csr(big, small, rows, 5, 0)
        X = self.rand((small, W))

        def chk_y(res):
            r_t = torch.from_numpy(rows).to(self.dev)
            got = self.host(res[r_t])
            sub_rowptr = np.zeros(len(rows) + 1, np.int64)
            np.cumsum(np.diff(rowptr)[rows], out=sub_rowptr[1:])  # the nonzeros are exactly these rows'
            want = ref.spmm(self.ns(sub_rowptr, col, (len(rows), small)), self.host(X))
            zero_rows = torch.from_numpy(self.rng.integers(0, big - 3 * small, 2000)).to(self.dev)
            zeros = bool((res[zero_rows] == 0).all())
            return (np.allclose(got, want, rtol=1e-5, atol=1e-5) and zeros,
                    f"rows up to {int(rows.max())} ({int(rows.max()) * W} elements in)")
        attempt(f"int32 spmm sum, Y {big}x{W} (> 2^31 elements)", lambda: gs.spmm(A, X, "sum"), chk_y)
        del X

        # SDDMM: X (big x W) and Y (big x W), edges in the last rows, columns near the end
        rows = np.arange(big - 2 * small, big, 7)
        A, rowptr, col = csr(big, big, rows, 4, 4096)
        Xd, Yd = self.rand((big, W), 1 / np.sqrt(W)), self.rand((big, W), 1 / np.sqrt(W))

        def chk_e(res):
            rk = np.repeat(np.arange(big), np.diff(rowptr))
            ri = torch.from_numpy(rk).to(self.dev)
            ci = torch.from_numpy(col).to(self.dev)
            want = np.einsum("ij,ij->i", self.host(Xd[ri]), self.host(Yd[ci]))
            return np.allclose(self.host(res), want, rtol=1e-5, atol=1e-5), f"{len(col)} edges"
        attempt(f"int32 sddmm dot, X and Y {big}x{W}", lambda: gs.sddmm(A, Xd, Yd, "dot"), chk_e)
        del Xd, Yd

        # FusedMM: Z (big x 1 x W) and Out (big x 1 x W)
        Xf, Yf = self.rand((big, 1, 4), 0.5), self.rand((big, 1, 4), 0.5)
        Z = self.rand((big, 1, W))

        def chk_f(res):
            r_t = torch.from_numpy(rows).to(self.dev)
            ucol = np.unique(col)
            remap = np.searchsorted(ucol, col)
            u_t = torch.from_numpy(ucol).to(self.dev)
            sub_rowptr = np.zeros(len(rows) + 1, np.int64)
            np.cumsum(np.diff(rowptr)[rows], out=sub_rowptr[1:])
            s2 = self.ns(sub_rowptr, remap, (len(rows), len(ucol)))
            want = ref.fusedmm(s2, self.host(Xf[r_t]), self.host(Yf[u_t]), self.host(Z[u_t]), edge="softmax")
            got = self.host(res[r_t])
            untouched = bool((res[torch.from_numpy(self.rng.integers(0, rows.min(), 2000)).to(self.dev)] == 0).all())
            return (np.allclose(got, want, rtol=1e-5, atol=1e-5) and untouched, f"{len(rows)} rows checked")
        attempt(f"int32 fusedmm softmax, Z and Out {big}x1x{W}", lambda: gs.fusedmm(A, Xf, Yf, Z, edge="softmax"),
                chk_f)
        del Xf, Yf, Z
        if self.dev.type == "cuda":
            torch.cuda.empty_cache()


def main(argv=None):
    p = argparse.ArgumentParser(description="gnnsparse at scale: nnz > 2^31 and int32 offset overflow checks")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (the SYCL backend, for a dry run)")
    p.add_argument("--nnz", type=float, default=2.25e9)
    p.add_argument("--nodes", type=int, default=1 << 24)
    p.add_argument("--hub", type=int, default=20_000_000)
    p.add_argument("--width", type=int, default=64, help="width for the int32 boundary checks")
    p.add_argument("--small", action="store_true", help="tiny sizes (checks the script, not the limits)")
    p.add_argument("--skip-big", action="store_true")
    p.add_argument("--skip-boundary", action="store_true")
    p.add_argument("--seed", type=int, default=31)
    p.add_argument("--json")
    a = p.parse_args(argv)
    if a.small:
        a.nnz, a.nodes, a.hub = min(a.nnz, 400_000), min(a.nodes, 5000), min(a.hub, 20_000)
    a.nnz = int(a.nnz)
    import torch

    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("scale_check: no CUDA device", file=sys.stderr)
        return 2
    c = Check(a)
    t0 = time.perf_counter()
    if not a.skip_big:
        c.big()
    if not a.skip_boundary:
        c.boundary()
    bad = [r for r in c.results if not r["ok"]]
    print(f"# scale_check: {len(c.results)} checks, {len(bad)} failed, {time.perf_counter() - t0:.0f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(args=vars(a), results=c.results), f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
