#!/usr/bin/env python3
"""Quantized training's producers on one CUDA GPU: the SpMM and the int8 GEMM writing the next
op's quantized input themselves (delayed scaling, docs/quantization.md), against the separate
quantize pass they replace and the float32 references; one quantized GCN layer step against the
float32 layer (time, bytes saved for the backward). A few minutes at most.

    python tools/quant_bench.py             # n = 1M nodes, e = 10M edges (uniform), C = 128, hidden 256
    python tools/quant_bench.py --smoke     # small sizes, every check, seconds (run this first)
    python tools/quant_bench.py --json out.json
    python tools/quant_bench.py --cpu       # dry run of every code path on the CPU (SYCL backend), tiny

Cases (the CSR of bench/quant_ops.py: gnnsparse.bench.generators.regular_random, weighted):
  spmm    cuSPARSE float32 (torch.sparse.mm) and ours; int8 / int4: the separate-pass path
          (gs.quantize(X) + gs.quant.spmm -> float32 Y, what bench/quant_ops.py times) and the
          producer path (X arrives quantized from its producer; gs.quant.spmm(A, QX, out=st) writes
          Y quantized: no float32 Y, no quantize pass)
  gemm    cuBLAS float32 X @ W; int8 with the separate passes (quantize X and W, _int_mm, scale
          pass -> float32, quantize the output for the next op) and the producer path (X arrives
          quantized; _int_mm + gs.quant.linear_q: the scale pass writes int8)
  wgrad   the weight gradient dh^T x (n x C each): cuBLAS float32; int8 through torch._int_mm on
          transposed copies in K chunks (the path before cuda/qgemm.cu) and through qgemm_tn
          (both operands row-major, in place); both checked bit for bit against the exact product
  layer   one GCN layer, forward + backward: gnnsparse.torch.nn.GCNConv (float32) and
          gnnsparse.quant.nn.GCNConv (int8, producers), after warm-up steps; bytes the forward
          saves for the backward (torch.autograd.graph.saved_tensors_hooks, per storage)
Checks before timing: each producer's output equals gs.quantize of the float32 output bit for bit
when given that output's own scale (the contract), and the quantized SpMM matches cuSPARSE on the
dequantized input. Timing: median of --reps launches between CUDA events, L2 flushed before each
(gnnsparse.bench.timing). "floor": bytes model at the measured copy bandwidth.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true", help="small sizes, every check, few repetitions")
    ap.add_argument("--n", type=int, default=1_000_000, help="nodes")
    ap.add_argument("--e", type=int, default=10_000_000, help="edges")
    ap.add_argument("--C", type=int, default=128, help="feature width of the SpMM")
    ap.add_argument("--hidden", type=int, default=256, help="GEMM: X (n x hidden) @ W (hidden x hidden)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--cpu", action="store_true", help="dry run on the CPU (SYCL backend): the figures mean nothing")
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.e, args.reps = 20_000, 200_000, 3
    if args.cpu:
        args.n, args.e, args.reps, args.C, args.hidden = 3_000, 30_000, 2, 32, 64

    import torch

    import gnnsparse as gs
    from gnnsparse.bench import generators, timing

    if args.cpu:
        if not gs.available_backends().get("sycl"):
            print("--cpu needs the SYCL backend", file=sys.stderr)
            return 2
        dev, name = torch.device("cpu"), "CPU dry run (SYCL backend)"
    else:
        if not torch.cuda.is_available() or not gs.available_backends().get("cuda"):
            print("needs a CUDA GPU, torch with CUDA and the gnnsparse CUDA build", file=sys.stderr)
            return 2
        dev, name = torch.device("cuda"), torch.cuda.get_device_name(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    t_start = time.time()
    print(f"== {name}, torch {torch.__version__}, n={args.n:,} e={args.e:,} C={args.C} hidden={args.hidden}"
          f" reps={args.reps}{' (smoke)' if args.smoke else ''}")
    flush_buf = torch.empty(256 << 20 if not args.cpu else 1 << 20, dtype=torch.uint8, device=dev)

    def timeit(fn, reps=args.reps, warm=2):
        return timing.median_us(fn, reps=reps, warmup=warm, torch=None if args.cpu else torch,
                                before=lambda: flush_buf.fill_(1))

    big = torch.empty(1 << 30 if not (args.smoke or args.cpu) else 1 << 24, dtype=torch.uint8, device=dev)
    big2 = torch.empty_like(big)
    bw = 2 * big.numel() / (timeit(lambda: big2.copy_(big), reps=5) * 1e-6)
    del big, big2
    print(f"   copy bandwidth {bw / 1e9:.0f} GB/s (device-to-device, read + write)")

    results, failures = [], []

    def check(label, ok, detail=""):
        print(f"   check {label}: {'ok' if ok else 'FAILED'} {detail}")
        if not ok:
            failures.append(label)

    def record(case, us, ref_us, ref_name, floor_bytes, note=""):
        floor_us = floor_bytes / bw * 1e6
        results.append(dict(case=case, ours_us=us, ref_us=ref_us, ref=ref_name,
                            ratio=ref_us / us if ref_us else None, floor_us=floor_us, pct_floor=100 * floor_us / us,
                            note=note))

    def same_bits(Q, R):
        return bool(torch.equal(Q.data.reshape(-1), R.data.reshape(-1)) and torch.equal(Q.scale, R.scale))

    g = torch.Generator(device=dev)
    g.manual_seed(1234)
    G = generators.regular_random(args.n, args.e, 1234, weighted=True)
    n, e, C, Hd = args.n, args.e, args.C, args.hidden
    rowptr, col = (torch.from_numpy(a.astype(np.int32)).to(dev) for a in (G.rowptr, G.col))
    val = torch.from_numpy(np.array(G.val)).to(dev)
    del G
    A = gs.CSR(rowptr, col, val, (n, n))
    As = torch.sparse_csr_tensor(rowptr, col, val, (n, n))
    X = torch.randn(n, C, generator=g, device=dev)
    csr_bytes = 4 * (n + 1) + 8 * e

    # ------------------------------------------------------------------ SpMM
    print("== SpMM (weighted)")
    t_cus = timeit(lambda: torch.sparse.mm(As, X))
    record("spmm float32 cuSPARSE (torch.sparse.mm)", t_cus, None, "", csr_bytes + e * C * 4 + n * C * 4)
    record("spmm float32 ours", timeit(lambda: gs.spmm(A, X)), t_cus, "cuSPARSE", csr_bytes + e * C * 4 + n * C * 4)
    for bits in (8, 4):
        QX = gs.quantize(X, bits, seed=3)
        Y = gs.quant.spmm(A, QX)
        err = float((Y - torch.sparse.mm(As, gs.dequantize(QX))).abs().max() / Y.abs().max())
        check(f"int{bits} spmm vs cuSPARSE on dequantized X", err < 1e-5, f"(rel. err {err:.1e})")
        st = gs.quant.DelayedScale(bits)
        R = gs.quantize(Y, bits, seed=5, check=False)
        st.scale = R.scale
        check(f"int{bits} spmm producer = quantize(Y) with Y's own scale", same_bits(gs.quant.spmm(A, QX, out=st, seed=5), R))
        qb, xb = n * C * bits // 8, e * C * bits // 8
        t_sep = timeit(lambda: gs.quant.spmm(A, gs.quantize(X, bits, seed=3, check=False)))
        record(f"int{bits} spmm, separate quantize pass (float32 X -> float32 Y)", t_sep, t_cus, "cuSPARSE",
               2 * n * C * 4 + qb + csr_bytes + xb + n * C * 4)
        t_prod = timeit(lambda: gs.quant.spmm(A, QX, out=st, seed=5))
        record(f"int{bits} spmm producer (int{bits} X -> int{bits} Y, delayed scale)", t_prod, t_cus, "cuSPARSE",
               csr_bytes + xb + qb, note="X quantized by its own producer")
        del QX, Y, R
    del X, A, As, rowptr, col, val

    # ------------------------------------------------------------------ GEMM
    print("== GEMM")
    if not args.cpu:
        torch.cuda.empty_cache()
    Xg = torch.randn(n, Hd, generator=g, device=dev)
    W = torch.randn(Hd, Hd, generator=g, device=dev) / math.sqrt(Hd)
    QXg, QWt = gs.quantize(Xg, 8, seed=5), gs.quantize(W.t().contiguous(), 8, seed=6)
    st = gs.quant.DelayedScale(8)
    R = gs.quantize(gs.quant.linear(QXg, QWt), 8, seed=7, check=False)
    st.scale = R.scale
    check("int8 gemm producer = quantize(linear) with its own scale", same_bits(gs.quant.linear_q(QXg, QWt, st, 7), R))
    t_mm = timeit(lambda: Xg @ W)
    record("gemm float32 cuBLAS", t_mm, None, "", n * Hd * 8 + Hd * Hd * 4)

    def separate():
        Yl = gs.quant.linear(gs.quantize(Xg, 8, seed=1, check=False), gs.quantize(W.t(), 8, seed=2, check=False))
        return gs.quantize(Yl, 8, seed=3, check=False)

    record("int8 gemm, separate passes (quantize X, W; _int_mm; scale; quantize Y)", timeit(separate), t_mm,
           "cuBLAS fp32", 2 * n * Hd * 4 + n * Hd + 3 * n * Hd * 4 + 2 * n * Hd * 4 + n * Hd)
    record("int8 gemm producer (int8 X -> _int_mm -> int8 Y)", timeit(lambda: gs.quant.linear_q(QXg, QWt, st, 7)),
           t_mm, "cuBLAS fp32", n * Hd + 2 * n * Hd * 4 + n * Hd, note="X quantized by its own producer")
    del Xg, W, QXg, QWt, R

    # ------------------------------------------------------------------ weight-gradient GEMM
    print("== int8 weight-gradient GEMM (A^T B, K = n)")
    from gnnsparse.quant import _gemm

    dh, xw = torch.randn(n, C, generator=g, device=dev), torch.randn(n, C, generator=g, device=dev)
    Qd, Qx = gs.quantize(dh, 8, seed=8), gs.quantize(xw, 8, seed=9)
    a8, b8 = Qd.int8(), Qx.int8()
    sab = Qd.scale[:1] * Qx.scale[:1]
    want = (a8.t().double() @ b8.double()).float() * sab  # exact integers in fp64 (K 127^2 < 2^53)
    check("int8 wgrad (qgemm_tn) = exact integer product, scaled", bool(torch.equal(_gemm.int_matmul_tn(a8, b8, sab), want)))
    check("int8 wgrad, today's path = exact integer product, scaled",
          bool(torch.equal(_gemm.int_matmul(a8.t().contiguous(), b8, sab), want)))
    del want
    t_wf = timeit(lambda: dh.t() @ xw)
    wg_floor = n * 2 * C + C * C * 4  # A and B read once, C written
    record("wgrad float32 cuBLAS dh^T @ x", t_wf, None, "", n * 2 * C * 4 + C * C * 4)
    record("int8 wgrad, _int_mm on transposed copies + K chunks (before)",
           timeit(lambda: _gemm.int_matmul(a8.t().contiguous(), b8, sab)), t_wf, "cuBLAS fp32", wg_floor,
           note="floor: A, B read once")
    record("int8 wgrad, qgemm_tn (row-major A, B in place)", timeit(lambda: _gemm.int_matmul_tn(a8, b8, sab)), t_wf,
           "cuBLAS fp32", wg_floor, note="floor: A, B read once (the int32 partials add 2 nseg C^2 4 bytes)")
    del dh, xw, Qd, Qx, a8, b8

    # ------------------------------------------------------------------ one GCN layer
    print("== one GCN layer step (forward + backward), C -> C")
    from gnnsparse.quant import nn as qnn
    from gnnsparse.torch import nn as tnn

    G = generators.regular_random(n, e, 99, weighted=False)
    ei = torch.from_numpy(np.stack([np.repeat(np.arange(n), np.diff(G.rowptr)), np.asarray(G.col)])).to(dev)
    del G
    x = torch.randn(n, C, generator=g, device=dev)
    layers = {"float32": tnn.GCNConv(C, C, cached=True).to(dev), "int8": qnn.GCNConv(C, C, cached=True, bits=8).to(dev)}
    layers["int8"].load_state_dict(layers["float32"].state_dict())
    saved = {}
    for label, layer in layers.items():
        def step(layer=layer):
            layer.zero_grad(set_to_none=True)
            layer(x, ei).sum().backward()

        for _ in range(3):
            step()
        recs = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: (recs.append(t), t)[1], lambda t: t):
            y = layer(x, ei)
        y.sum().backward()
        stor = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in recs
                if t.dtype.is_floating_point or t.dtype == torch.int8}
        saved[label] = sum(stor.values())
        t = timeit(step, warm=1)
        record(f"gcn layer step {label} (saves {saved[label] / 2**20:.1f} MiB for the backward)", t,
               None if label == "float32" else results[-1]["ours_us"], "" if label == "float32" else "float32 layer",
               0)
    print(f"   bytes saved for the backward: float32 {saved['float32'] / 2**20:.1f} MiB, int8 "
          f"{saved['int8'] / 2**20:.1f} MiB ({saved['int8'] / max(saved['float32'], 1):.2f}x)")

    # ------------------------------------------------------------------ table
    print(f"\n== results ({name}, {time.strftime('%Y-%m-%d')}, total {time.time() - t_start:.0f} s)")
    print(f"{'case':74s} {'us':>9s} {'ref us':>9s} {'ratio':>7s} {'floor us':>9s} {'% floor':>8s}")
    for r in results:
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] else "-"
        ref = f"{r['ref_us']:.1f}" if r["ref_us"] else "-"
        fl = f"{r['floor_us']:9.1f} {r['pct_floor']:7.0f}%" if r["floor_us"] else f"{'-':>9s} {'-':>8s}"
        print(f"{r['case']:74s} {r['ours_us']:9.1f} {ref:>9s} {ratio:>7s} {fl}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=name, torch=torch.__version__, n=n, e=e, C=C, hidden=Hd, reps=args.reps,
                           copy_bw_GBs=bw / 1e9, smoke=args.smoke, date=time.strftime("%Y-%m-%d"),
                           saved_bytes=saved, results=results, failed_checks=failures), f, indent=1)
    if failures:
        print(f"FAILED checks: {failures}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
