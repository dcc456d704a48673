"""SpMM on a power-law graph (hub rows) against cuSPARSE and against its bytes floor, in one run.

The graph is `bench_cuda`'s power-law case drawn in Python: n rows, Zipf(1) degrees by rank (at
least 1, scaled to e entries, the remainder on the largest), ranks shuffled over the rows, uniformly
random columns sorted within each row, random float32 values. With the defaults (1M rows, 10M
entries) the largest row holds ~1.8M entries and ~64 % of the entries are in rows longer than
256 -- the hub pass's rows.

    python bench/hubs.py [--widths 16,32,128] [--reduce sum,max] [--reps 20] [--nodes N --edges E]
                         [--knob GNNSPARSE_CUDA_HUB_COMBINE=rows,segments]

Prints per (reduce, width): our median microseconds (CUDA events, calls interleaved, a 256 MB
write between calls so that no call finds the previous one's data in L2), torch.sparse.mm's
(cuSPARSE; sum only), the ratio, and ours as % of the bytes floor: CSR once (rowptr, col, val) +
every gathered row (nnz x C x 4 bytes) + the output once (+ the int64 arg: max / min run with
return_arg=True), at the device copy bandwidth measured at start (torch copy_ of 1 GiB). Every
result is checked against a float64 product before timing, and repeated calls are compared
bitwise. `--knob NAME=a,b` times our call once per value of the environment variable NAME (calls
interleaved, one row each).
Under Nsight Compute (`ncu --kernel-name regex:'spmm|hub|segment' --launch-skip N ...`) it is
the profiled workload of the hub pass: `--reps 1 --no-ref` runs each call only a few times.
"""
from __future__ import annotations

import argparse

import numpy as np

import gnnsparse as gs
from gnnsparse.bench import timing


def powerlaw_degrees(n: int, e: int, seed: int = 2) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64)
    d = np.maximum(1, np.floor((e - n) * w / w.sum())).astype(np.int64)
    d[0] += e - int(d.sum())
    np.random.default_rng(seed).shuffle(d)
    return d


def graph(n: int, e: int, torch, dev):
    d = torch.as_tensor(powerlaw_degrees(n, e), device=dev)
    rowptr = torch.zeros(n + 1, dtype=torch.int64, device=dev)
    torch.cumsum(d, 0, out=rowptr[1:])
    g = torch.Generator(device=dev).manual_seed(3)
    nnz = int(rowptr[-1])
    rows = torch.repeat_interleave(torch.arange(n, device=dev), d)
    col = torch.randint(0, n, (nnz,), generator=g, device=dev)
    col = (rows * n + col).sort().values - rows * n  # sorted within rows
    del rows
    val = torch.rand(nnz, generator=g, device=dev)
    return rowptr.int(), col.int(), val, int(d.max())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="16,32,128")
    ap.add_argument("--reduce", default="sum,max")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--edges", type=int, default=10_000_000)
    ap.add_argument("--knob", help="NAME=v1,v2: time our call under each value of this environment variable")
    ap.add_argument("--no-ref", action="store_true", help="no cuSPARSE calls and no float64 check (for ncu)")
    ap.add_argument("--timeline", action="store_true",
                    help="also print each kernel of one call (torch.profiler): stream, start and end in us from the "
                         "call's first kernel -- how the hub pass and the row kernel overlap")
    a = ap.parse_args(argv)
    import torch

    dev = torch.device("cuda")
    rowptr, col, val, maxdeg = graph(a.nodes, a.edges, torch, dev)
    n, nnz = a.nodes, col.numel()
    A = gs.CSR(rowptr, col, val, shape=(n, n))
    S = torch.sparse_csr_tensor(rowptr, col, val, size=(n, n)) if not a.no_ref else None
    scratch = torch.empty(64 << 20, dtype=torch.float32, device=dev)
    flush = lambda: scratch.fill_(1.0)  # noqa: E731  (256 MB: more than the L2)
    src, dst = torch.empty(1 << 28, dtype=torch.float32, device=dev), torch.empty(1 << 28, dtype=torch.float32,
                                                                                    device=dev)
    bw = 2 * src.numel() * 4 / timing.median(
        timing.events({"c": lambda i: dst.copy_(src)}, repeat=20, warmup=3, torch=torch)["c"])
    del src, dst
    print(f"power-law graph: {n} rows, {nnz} entries, largest row {maxdeg}; copy bandwidth {bw / 1e9:.0f} GB/s")
    print(f"{'reduce':6s} {'C':>4s} {'ours us':>9s} {'cuSPARSE':>9s} {'ratio':>6s} {'% floor':>8s}  check")
    g = torch.Generator(device=dev).manual_seed(4)
    for red in a.reduce.split(","):
        for C in (int(s) for s in a.widths.split(",")):
            X = torch.randn(n, C, generator=g, device=dev)
            arg = red in ("max", "min")
            ours = lambda i, X=X, red=red, arg=arg: gs.spmm(A, X, red, return_arg=arg)  # noqa: E731
            check = "-"
            if not a.no_ref:
                y0, y1 = ours(0), ours(1)
                y0 = y0[0] if isinstance(y0, tuple) else y0
                y1 = y1[0] if isinstance(y1, tuple) else y1
                if red == "sum":
                    ref = torch.sparse.mm(S.to(torch.float64), X.double())
                    err = float((y0.double() - ref).abs().max() / max(1.0, float(ref.abs().max())))
                    check = f"rel err {err:.1e}"
                check += ", bitwise repeat" if torch.equal(y0, y1) else ", NOT BITWISE"
            fns = {"ours": ours}
            if a.knob:
                name, values = a.knob.split("=", 1)
                fns = {f"{name}={v}": (lambda i, v=v, f=ours, name=name: _with(name, v, f, i))
                       for v in values.split(",")}
            if red == "sum" and not a.no_ref:
                fns["cusparse"] = lambda i, X=X: torch.sparse.mm(S, X)
            ts = timing.events(fns, repeat=a.reps, warmup=2, torch=torch, before=flush)
            us = {k: timing.median(v) * 1e6 for k, v in ts.items()}
            bytes_ = (n + 1) * 4 + nnz * 8 + nnz * C * 4 + n * C * 4 + (n * C * 8 if arg else 0)
            floor_us = bytes_ / bw * 1e6
            cu = us.pop("cusparse", None)
            for k, t in us.items():
                print(f"{red:6s} {C:4d} {t:9.1f} {cu if cu else float('nan'):9.1f} "
                      f"{(cu / t) if cu else float('nan'):6.2f} {100 * floor_us / t:7.0f}%  {check}"
                      + ("" if k == "ours" else f"  {k}"))
            if a.timeline:
                for k, f in fns.items():
                    if k != "cusparse":
                        timeline(torch, f, flush, k)


def timeline(torch, fn, flush, label):
    """The kernels of one call of fn (after a flush), each with its stream and its start / end in us
    from the first kernel's start (torch.profiler's CUDA activity)."""
    from torch.profiler import ProfilerActivity, profile

    fn(0)
    torch.cuda.synchronize()
    flush()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(1)
        torch.cuda.synchronize()
    ks = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and "fill" not in e.name]
    if not ks:
        print(f"  timeline {label}: no kernels recorded")
        return
    t0 = min(e.time_range.start for e in ks)
    end = max(e.time_range.end for e in ks)
    print(f"  timeline {label}: {(end - t0):.1f} us from the first kernel's start to the last one's end")
    for e in sorted(ks, key=lambda e: e.time_range.start):
        stream = getattr(e, "device_resource_id", None)
        print(f"    stream {stream!s:>4s} {e.time_range.start - t0:8.1f} .. {e.time_range.end - t0:8.1f}  "
              f"({e.time_range.end - e.time_range.start:7.1f})  {e.name[:90]}")


def _with(name, value, fn, i):
    with timing.environ({name: value}):
        return fn(i)


if __name__ == "__main__":
    main()
