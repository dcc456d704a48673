"""Per-call cost of a small SpMM (Cora-sized graph: 2,708 nodes, 10,556 edges, C=16), warm, against
the libraries a user would call instead, in one process.

    python bench/percall.py [--device cpu|cuda|all] [--calls N] [--rounds R] [--json FILE]

CPU: gnnsparse from NumPy, torch CPU and dpnp (when installed) against scipy's `A @ X` and
torch.sparse.mm on a CSR tensor, the compiled SYCL binding called directly (submit + wait, no
Python frontend; also for a one-row launch), and the frontend alone (the backend's launch
stubbed: gnnsparse's Python per call). CUDA: gnnsparse from torch against torch.sparse.mm,
plus the frontend alone, the compiled binding called directly and the kernel alone (a CUDA graph of 100 launches
replayed between two events), so the frontend's share of a call can be read off. Times are per
call: the median over rounds of a timed block of back-to-back calls (GPU: synchronized once after
the block), the candidates taking turns block by block (gnnsparse.bench.timing.wall). The graph is
gnnsparse.bench.generators.uniform_random(2708, 10556, seed=0).
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings

import numpy as np

from gnnsparse.bench import generators, timing

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
warnings.filterwarnings("ignore", message="Sparse invariant checks")

N_NODES, N_EDGES, C = 2708, 10556, 16


def _inputs():
    A = generators.uniform_random(N_NODES, N_EDGES, seed=0)
    X = np.random.default_rng(0).standard_normal((N_NODES, C)).astype(np.float32)
    return A, X


def _per_call(fns, calls, rounds, sync=None):
    """{name: median µs per call} (timing.wall: blocks of `calls` calls, taking turns)."""
    ts = timing.wall({k: (lambda i, f=f: f()) for k, f in fns.items()}, rounds=rounds, calls=calls, warmup=2,
                     sync=sync)
    return {k: timing.median(v) * 1e6 for k, v in ts.items()}


def _torch_csr(torch, S, device="cpu"):
    return torch.sparse_csr_tensor(torch.from_numpy(S.indptr.astype(np.int64)), torch.from_numpy(S.indices.astype(np.int64)),
                                   torch.from_numpy(S.data.astype(np.float32)), S.shape).to(device)


def cpu(calls, rounds):
    import gnnsparse as gs

    A, X = _inputs()
    S = A.to_scipy()
    fns = {"gnnsparse numpy": lambda: gs.spmm(A, X), "scipy A @ X": lambda: S @ X}
    try:
        import torch

        torch.set_num_threads(1)
        Xt = torch.from_numpy(X)
        St = _torch_csr(torch, S)
        fns["gnnsparse torch cpu"] = lambda: gs.spmm(A, Xt)
        fns["torch.sparse.mm (1 thread)"] = lambda: torch.sparse.mm(St, Xt)
    except ImportError:
        pass
    rows = _per_call(fns, calls, rounds)
    rows.update(_frontend_only({"frontend only, numpy": lambda: gs.spmm(A, X)} |
                               ({"frontend only, torch cpu": lambda: gs.spmm(A, Xt)} if "gnnsparse torch cpu" in fns else {}),
                               X, np.empty((N_NODES, C), np.float32), calls, rounds))
    rows.update(_sycl_binding(A, X, calls, rounds))
    try:
        import dpnp

        Xd = dpnp.asarray(X)
        rows.update(_per_call({"gnnsparse dpnp": lambda: gs.spmm(A, Xd), "gnnsparse numpy (again)":
                               lambda: gs.spmm(A, X)}, calls, rounds, sync=lambda: Xd.sycl_queue.wait()))
    except ImportError:
        pass
    return rows


def _frontend_only(fns, X, Y, calls, rounds):
    """gnnsparse's Python per call without the kernel: the same calls with the backend's SpMM
    launch replaced by a stub that returns a preallocated output Y (checks, routing, the CSR's
    cached view, output wrapping)."""
    from gnnsparse._backends import backend_for

    b = backend_for(X)
    b.spmm = lambda *args: (Y, None)  # shadows the method on this instance only
    try:
        return _per_call(fns, calls, rounds)
    finally:
        del b.spmm


def _sycl_binding(A, X, calls, rounds):
    """The raw _sycl.spmm binding, submit + wait, on the default queue: the graph above and a
    one-row launch (docs/aot.md)."""
    from gnnsparse import _core, _sycl, _sycl_backend

    q = _sycl_backend.default_queue()
    f32, red = _core.DTYPE["float32"][0], _core.REDUCE["sum"]
    one = generators.uniform_random(16, 4, seed=1, m=1)
    out = {}
    for name, B in (("binding only (no frontend)", A), ("binding only, one-row launch", one)):
        rowptr, col = np.ascontiguousarray(B.rowptr), np.ascontiguousarray(B.col)
        Xb = np.ascontiguousarray(X[: B.shape[1]])
        Y = np.empty((B.shape[0], C), np.float32)
        view = _core.CsrView(_core.ITYPE[rowptr.dtype.name][0], rowptr.ctypes.data, col.ctypes.data, 0, B.shape[0],
                             B.shape[1], B.nnz)
        xp, yp = Xb.ctypes.data, Y.ctypes.data
        out.update(_per_call({name: lambda: _sycl.spmm((q, []), view, f32, red, xp, yp, 0, C).wait()}, calls, rounds))
    return out


def cuda(calls, rounds):
    import torch

    import gnnsparse as gs

    A0, X = _inputs()
    dev = torch.device("cuda")
    Xt = torch.from_numpy(X).to(dev)
    A = A0.to_like(Xt)
    St = _torch_csr(torch, A0.to_scipy(), dev)
    torch.testing.assert_close(gs.spmm(A, Xt), torch.sparse.mm(St, Xt), rtol=1e-5, atol=1e-5)
    sync = torch.cuda.synchronize
    _warm_gpu(Xt)
    rows = _per_call({"gnnsparse torch cuda": lambda: gs.spmm(A, Xt),
                      "torch.sparse.mm cuda": lambda: torch.sparse.mm(St, Xt)}, calls, rounds, sync=sync)
    rows.update(_frontend_only({"frontend only, torch cuda": lambda: gs.spmm(A, Xt)}, Xt,
                               torch.empty(N_NODES, C, device=dev), calls, rounds))
    try:  # the binding alone and the kernel alone (needs this version's internals)
        rows.update(_cuda_binding_and_kernel(A, Xt, calls, rounds, sync))
    except (ImportError, AttributeError) as e:
        print(f"(binding / kernel rows skipped: {e})")
    return rows


def _cuda_binding_and_kernel(A, Xt, calls, rounds, sync):
    import torch

    from gnnsparse import _core, _cuda
    from gnnsparse._backends import backend_for

    b = backend_for(Xt)
    view = A._view(b, b.place(Xt), Xt, None)
    Y = torch.empty(N_NODES, C, device=Xt.device)
    stream = torch.cuda.current_stream().cuda_stream
    f32, red = _core.DTYPE["float32"][0], _core.REDUCE["sum"]

    def launch():
        _cuda.spmm(stream, view, f32, red, Xt.data_ptr(), Y.data_ptr(), 0, C, 0)

    rows = _per_call({"binding only (no frontend)": launch}, calls, rounds, sync=sync)
    # the kernel alone: 100 launches captured in a CUDA graph, replayed between two events
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        launch()
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s):
            stream = torch.cuda.current_stream().cuda_stream
            for _ in range(100):
                launch()
    ts = timing.events({"graph": lambda i: g.replay()}, repeat=30, warmup=1, torch=torch)["graph"]
    rows["kernel (CUDA graph replay)"] = timing.median(ts) * 1e6 / 100
    return rows


def _warm_gpu(x, seconds=0.3):
    """Bring the GPU's clocks up before timing (a busy loop of small products)."""
    import torch

    t0 = time.perf_counter()
    a = torch.randn(2048, 2048, device=x.device)
    while time.perf_counter() - t0 < seconds:
        a = a @ a
        a = a / a.norm()
    torch.cuda.synchronize()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cpu", "cuda", "all"), default="all")
    p.add_argument("--calls", type=int, default=2000, help="calls per timed block")
    p.add_argument("--rounds", type=int, default=9, help="timed blocks per candidate (the median is reported)")
    p.add_argument("--json")
    a = p.parse_args(argv)
    out = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
           "graph": f"{N_NODES} nodes, {N_EDGES} edges, C={C}", "cpu": None, "cuda": None}
    if a.device in ("cpu", "all"):
        out["cpu"] = cpu(a.calls, a.rounds)
    if a.device in ("cuda", "all"):
        try:
            import torch

            if torch.cuda.is_available():
                out["cuda"] = cuda(a.calls, a.rounds)
        except ImportError:
            pass
    for dev in ("cpu", "cuda"):
        if out[dev]:
            print(f"{dev} ({out['graph']}, {out['date']}):")
            for k, v in out[dev].items():
                print(f"  {k:32s} {v:8.1f} µs")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
