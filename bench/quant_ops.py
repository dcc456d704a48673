#!/usr/bin/env python3
"""Quantized ops on one CUDA GPU, against the float32 references, in one run (a few minutes at most).

    python bench/quant_ops.py            # n = 1M nodes, e = 10M edges (uniform), C = 128, hidden 256
    python bench/quant_ops.py --smoke    # small sizes, every check, seconds (run this first)
    python bench/quant_ops.py --json out.json
    python bench/quant_ops.py --cpu      # dry run of every code path on the CPU (SYCL backend), tiny

Cases (all on the same weighted CSR, gnnsparse.bench.generators.regular_random: uniform columns
sorted within rows, every row floor(e/n) or ceil(e/n) entries, float32 values):
  spmm   int8 / int4 SpMM including the quantization of X (gs.quantize + gs.quant.spmm) vs
         torch.sparse.mm(A, X) in float32 (cuSPARSE); also each part alone and our float32 SpMM
  sddmm  quantized SDDMM dot (int8 X, Y with F = C) vs our float32 SDDMM, kernel alone and with the
         quantization of both operands
  gemm   quantized GEMM (quantization of X and W + torch._int_mm + scale) vs torch.matmul in float32
         (cuBLAS, TF32 off) at hidden 256: X (n x 256) @ W (256 x 256)
Every result is checked before it is timed: each quantized op against the float32 op of the same
library run on the dequantized inputs (relative error printed; a failure stops the run), and the
quantization error against the float32 result is printed for information. Timing: median of
--reps launches, each between two CUDA events, after warm-ups; a 256 MB write flushes L2 before
every timed launch (ours and the reference alike). "floor": the bytes model of the case at the
device-to-device copy bandwidth measured at start (read + write bytes / time); "% floor" = floor /
measured time. The model counts every gathered row from DRAM; rows that hit L2 (the int8 / int4
copies of X are 128 / 64 MB against 60 MB of L2) let a kernel beat it.
Targets (same run): int8 SpMM incl. quantization >= 2.5x cuSPARSE, int4 >= 3.5x; quantized SDDMM
>= 2x our float32 SDDMM; quantized GEMM incl. quantization >= 1.5x cuBLAS float32.
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
    ap.add_argument("--C", type=int, default=128, help="feature width of SpMM / SDDMM")
    ap.add_argument("--hidden", type=int, default=256, help="GEMM: X (n x hidden) @ W (hidden x hidden)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--cpu", action="store_true",
                    help="dry run on the CPU (torch CPU tensors on the SYCL backend, wall-clock timers): checks "
                         "the script's code paths without a GPU; the figures mean nothing")
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
        dev = torch.device("cpu")
        name = "CPU dry run (SYCL backend)"
    else:
        if not torch.cuda.is_available() or not gs.available_backends().get("cuda"):
            print("needs a CUDA GPU, torch with CUDA and the gnnsparse CUDA build", file=sys.stderr)
            return 2
        dev = torch.device("cuda")
        name = torch.cuda.get_device_name(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    t_start = time.time()
    print(f"== {name}, torch {torch.__version__}, n={args.n:,} e={args.e:,} C={args.C} hidden={args.hidden}"
          f" reps={args.reps}{' (smoke)' if args.smoke else ''}")

    flush_buf = torch.empty(256 << 20 if not args.cpu else 1 << 20, dtype=torch.uint8, device=dev)

    def timeit(fn, reps=args.reps, warm=2):
        """Median µs (gnnsparse.bench.timing): CUDA events, L2 flushed before each launch; --cpu: wall clock."""
        return timing.median_us(fn, reps=reps, warmup=warm, torch=None if args.cpu else torch,
                                before=lambda: flush_buf.fill_(1))

    def sync():
        if not args.cpu:
            torch.cuda.synchronize()

    # copy bandwidth for the bytes model
    big = torch.empty(1 << 30 if not (args.smoke or args.cpu) else 1 << 24, dtype=torch.uint8, device=dev)
    big2 = torch.empty_like(big)
    t_copy = timeit(lambda: big2.copy_(big), reps=5)
    bw = 2 * big.numel() / (t_copy * 1e-6)  # bytes / s, read + write
    del big, big2
    print(f"   copy bandwidth {bw / 1e9:.0f} GB/s (device-to-device, read + write)")

    # ------------------------------------------------------------------ inputs
    g = torch.Generator(device=dev)
    g.manual_seed(1234)
    G = generators.regular_random(args.n, args.e, 1234, weighted=True)  # on the host, then moved
    n, e, C, Hd = args.n, args.e, args.C, args.hidden
    rowptr32, col32 = (torch.from_numpy(a.astype(np.int32)).to(dev) for a in (G.rowptr, G.col))
    val = torch.from_numpy(np.array(G.val)).to(dev)
    del G
    A = gs.CSR(rowptr32, col32, val, (n, n))
    A_nw = gs.CSR(rowptr32, col32, None, (n, n))
    As = torch.sparse_csr_tensor(rowptr32, col32, val, (n, n))
    X = torch.randn(n, C, generator=g, device=dev, dtype=torch.float32)
    Y = torch.randn(n, C, generator=g, device=dev, dtype=torch.float32)
    sync()

    results = []
    failures = []

    def check(label, got, want, tol):
        err = float((got - want).abs().max() / want.abs().max().clamp_min(1e-30))
        ok = math.isfinite(err) and err <= tol
        print(f"   check {label}: rel. err {err:.2e} (<= {tol:.0e}) {'ok' if ok else 'FAILED'}")
        if not ok:
            failures.append(label)
        return err

    def record(case, ours_us, ref_us, ref_name, floor_bytes, target=None, note=""):
        floor_us = floor_bytes / bw * 1e6
        ratio = ref_us / ours_us if ref_us else None
        results.append(dict(case=case, ours_us=ours_us, ref_us=ref_us, ref=ref_name, ratio=ratio, target=target,
                            met=None if (target is None or ratio is None) else ratio >= target,
                            floor_us=floor_us, pct_floor=100 * floor_us / ours_us, note=note))

    # ------------------------------------------------------------------ SpMM
    print("== SpMM (weighted)")
    Yref = torch.sparse.mm(As, X)
    csr_bytes = 4 * (n + 1) + 4 * e + 4 * e
    for bits in (8, 4):
        Q = gs.quantize(X, bits, seed=7)
        Yq = gs.quant.spmm(A, Q)
        check(f"int{bits} spmm vs cuSPARSE on dequantized X", Yq, torch.sparse.mm(As, gs.dequantize(Q)), 1e-5)
        qerr = float((Yq - Yref).abs().max() / Yref.abs().max())
        print(f"   (int{bits} quantization error of the result vs float32: {qerr:.2e})")
        Yu = gs.quant.spmm(A_nw, Q)
        check(f"int{bits} unweighted spmm vs cuSPARSE on dequantized X",
              Yu, torch.sparse.mm(torch.sparse_csr_tensor(rowptr32, col32, torch.ones_like(val), (n, n)),
                                  gs.dequantize(Q)), 1e-5)
        del Yq, Yu
    Yours = gs.spmm(A, X)
    check("our float32 spmm vs cuSPARSE", Yours, Yref, 1e-5)
    del Yours, Yref

    t_cusparse = timeit(lambda: torch.sparse.mm(As, X))
    t_fp32 = timeit(lambda: gs.spmm(A, X))
    fp32_bytes = csr_bytes + e * C * 4 + n * C * 4
    record("spmm float32 cuSPARSE (torch.sparse.mm)", t_cusparse, None, "", fp32_bytes)
    record("spmm float32 ours", t_fp32, t_cusparse, "cuSPARSE", fp32_bytes)
    for bits in (8, 4):
        qbytes = n * C * bits // 8
        t_q = timeit(lambda: gs.quantize(X, bits, seed=3, check=False))
        Q = gs.quantize(X, bits, seed=3, check=False)
        t_k = timeit(lambda: gs.quant.spmm(A, Q))
        t_all = timeit(lambda: gs.quant.spmm(A, gs.quantize(X, bits, seed=3, check=False)))
        t_knw = timeit(lambda: gs.quant.spmm(A_nw, Q))
        quant_bytes = 2 * n * C * 4 + qbytes
        kern_bytes = csr_bytes + e * C * bits // 8 + n * C * 4
        record(f"int{bits} quantize X (absmax + quantize)", t_q, None, "", quant_bytes)
        record(f"int{bits} spmm kernel (X quantized)", t_k, t_cusparse, "cuSPARSE", kern_bytes)
        record(f"int{bits} spmm kernel, no edge values", t_knw, t_cusparse, "cuSPARSE", kern_bytes - 4 * e)
        record(f"int{bits} spmm incl. quantization", t_all, t_cusparse, "cuSPARSE", quant_bytes + kern_bytes,
               target=2.5 if bits == 8 else 3.5)
        del Q

    # ------------------------------------------------------------------ SDDMM
    print("== SDDMM dot")
    QX, QY = gs.quantize(X, 8, seed=11), gs.quantize(Y, 8, seed=12)
    Eq = gs.quant.sddmm(A_nw, QX, QY)
    check("int8 sddmm vs our float32 sddmm on dequantized inputs", Eq,
          gs.sddmm(A_nw, gs.dequantize(QX), gs.dequantize(QY)), 1e-5)
    del Eq
    t_sd = timeit(lambda: gs.sddmm(A_nw, X, Y))
    t_qsd = timeit(lambda: gs.quant.sddmm(A_nw, QX, QY))
    t_qsd_all = timeit(lambda: gs.quant.sddmm(A_nw, gs.quantize(X, 8, seed=1, check=False),
                                              gs.quantize(Y, 8, seed=2, check=False)))
    sd_idx = 4 * (n + 1) + 4 * e
    record("sddmm float32 ours", t_sd, None, "", sd_idx + n * C * 4 + e * C * 4 + 4 * e)
    record("int8 sddmm kernel (X, Y quantized)", t_qsd, t_sd, "ours fp32", sd_idx + n * C + e * C + 4 * e, target=2.0)
    record("int8 sddmm incl. quantization of X and Y", t_qsd_all, t_sd, "ours fp32",
           sd_idx + n * C + e * C + 4 * e + 2 * (2 * n * C * 4 + n * C))
    del QX, QY

    # ------------------------------------------------------------------ GEMM
    print("== GEMM")
    del X, Y, A, A_nw, As, col32, val
    if not args.cpu:
        torch.cuda.empty_cache()
    Xg = torch.randn(n, Hd, generator=g, device=dev, dtype=torch.float32)
    W = torch.randn(Hd, Hd, generator=g, device=dev, dtype=torch.float32) / math.sqrt(Hd)
    QXg, QWt = gs.quantize(Xg, 8, seed=5), gs.quantize(W.t(), 8, seed=6)
    Yl = gs.quant.linear(QXg, QWt)
    check("int8 GEMM vs cuBLAS float32 on dequantized inputs", Yl, gs.dequantize(QXg) @ gs.dequantize(QWt).t(), 1e-5)
    Yf = Xg @ W
    qerr = float((gs.quant.matmul(Xg, W, 8, seed=9) - Yf).abs().max() / Yf.abs().max())
    print(f"   (int8 quantization error of the result vs float32: {qerr:.2e})")
    del Yl, Yf
    t_mm = timeit(lambda: Xg @ W)
    t_qk = timeit(lambda: gs.quant.linear(QXg, QWt))
    t_qall = timeit(lambda: gs.quant.matmul(Xg, W, 8, seed=9))
    flops = 2 * n * Hd * Hd
    print(f"   cuBLAS float32: {flops / (t_mm * 1e-6) / 1e12:.1f} TFLOP/s; int8 kernel: "
          f"{flops / (t_qk * 1e-6) / 1e12:.1f} TOP/s")
    mm_bytes = n * Hd * 4 * 2 + Hd * Hd * 4
    q_gemm_bytes = n * Hd + 3 * n * Hd * 4  # int8 X in; int32 out, int32 in, float32 out
    record("gemm float32 cuBLAS (compute-bound; floor = bytes only)", t_mm, None, "", mm_bytes)
    record("int8 gemm: _int_mm + scale (quantized inputs)", t_qk, t_mm, "cuBLAS fp32", q_gemm_bytes)
    record("int8 gemm incl. quantization of X and W", t_qall, t_mm, "cuBLAS fp32",
           q_gemm_bytes + 2 * n * Hd * 4 + n * Hd, target=1.5)

    # ------------------------------------------------------------------ table
    print(f"\n== results ({name}, {time.strftime('%Y-%m-%d')}, total {time.time() - t_start:.0f} s)")
    print(f"{'case':58s} {'ours us':>9s} {'ref us':>9s} {'ratio':>7s} {'target':>7s} {'floor us':>9s} {'% floor':>8s}")
    for r in results:
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] else "-"
        tgt = f">={r['target']:.1f}x" + ("" if r["met"] is None else (" ok" if r["met"] else " MISS")) if r["target"] else ""
        ref = f"{r['ref_us']:.1f}" if r["ref_us"] else "-"
        print(f"{r['case']:58s} {r['ours_us']:9.1f} {ref:>9s} {ratio:>7s} {tgt:>7s} {r['floor_us']:9.1f} "
              f"{r['pct_floor']:7.0f}%")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=name, torch=torch.__version__, n=n, e=e, C=C, hidden=Hd, reps=args.reps,
                           copy_bw_GBs=bw / 1e9, smoke=args.smoke, date=time.strftime("%Y-%m-%d"),
                           results=results, failed_checks=failures), f, indent=1)
    if failures:
        print(f"FAILED checks: {failures}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
