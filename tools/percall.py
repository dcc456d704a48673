"""Per-call cost of a small SpMM (Cora-sized graph: 2,708 nodes, 10,556 edges, C=16), warm, against
the libraries a user would call instead, in one process.

    python tools/percall.py [--device cpu|cuda|all] [--calls N] [--json FILE]

CPU: gnnsparse from NumPy, torch CPU and dpnp (when installed) against scipy's `A @ X` and
torch.sparse.mm on a CSR tensor. CUDA: gnnsparse from torch against torch.sparse.mm, plus the
compiled binding called directly (no Python frontend) and the kernel alone (CUDA events), so the
frontend's share of a call can be read off. Times are per call: the median over rounds of a timed
loop of back-to-back calls (GPU: synchronized once after the loop).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
import warnings

import numpy as np

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
warnings.filterwarnings("ignore", message="Sparse invariant checks")

N_NODES, N_EDGES, C = 2708, 10556, 16


def _graph(seed=0):
    rng = np.random.default_rng(seed)
    ei = np.stack([rng.integers(0, N_NODES, N_EDGES), rng.integers(0, N_NODES, N_EDGES)])
    X = rng.standard_normal((N_NODES, C)).astype(np.float32)
    return ei, X


def _per_call(fn, calls, rounds=7, sync=None):
    return _interleaved({"x": fn}, calls, rounds, sync)["x"]


def _interleaved(fns, calls, rounds=9, sync=None):
    """{name: median µs per call}: the candidates take turns round by round, so they see the same
    machine state (clocks, other load); each round times `calls` back-to-back calls."""
    for fn in fns.values():
        fn()
        fn()
    if sync:
        sync()
    times = {k: [] for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            if sync:
                sync()
            times[k].append((time.perf_counter() - t0) / calls * 1e6)
    return {k: statistics.median(v) for k, v in times.items()}


def cpu(calls):
    import gnnsparse as gs

    ei, X = _graph()
    A = gs.CSR.from_edge_index(ei, N_NODES)
    S = A.to_scipy()
    fns = {"gnnsparse numpy": lambda: gs.spmm(A, X), "scipy A @ X": lambda: S @ X}
    try:
        import torch

        torch.set_num_threads(1)
        Xt = torch.from_numpy(X)
        St = torch.sparse_csr_tensor(torch.from_numpy(S.indptr.astype(np.int64)),
                                     torch.from_numpy(S.indices.astype(np.int64)),
                                     torch.from_numpy(S.data.astype(np.float32)), S.shape)
        fns["gnnsparse torch cpu"] = lambda: gs.spmm(A, Xt)
        fns["torch.sparse.mm (1 thread)"] = lambda: torch.sparse.mm(St, Xt)
    except ImportError:
        pass
    rows = _interleaved(fns, calls)
    try:
        import dpnp

        Xd = dpnp.asarray(X)
        rows.update(_interleaved({"gnnsparse dpnp": lambda: gs.spmm(A, Xd), "gnnsparse numpy (again)":
                                  lambda: gs.spmm(A, X)}, calls, sync=lambda: Xd.sycl_queue.wait()))
    except ImportError:
        pass
    return rows


def cuda(calls):
    import torch

    import gnnsparse as gs

    ei, X = _graph()
    dev = torch.device("cuda")
    A = gs.CSR.from_edge_index(torch.from_numpy(ei).to(dev), N_NODES)
    Xt = torch.from_numpy(X).to(dev)
    S = A.to_scipy()
    St = torch.sparse_csr_tensor(torch.from_numpy(S.indptr.astype(np.int64)), torch.from_numpy(S.indices.astype(np.int64)),
                                 torch.from_numpy(S.data.astype(np.float32)), S.shape).to(dev)
    torch.testing.assert_close(gs.spmm(A, Xt), torch.sparse.mm(St, Xt), rtol=1e-5, atol=1e-5)
    sync = torch.cuda.synchronize
    _warm_gpu(Xt)
    rows = _interleaved({"gnnsparse torch cuda": lambda: gs.spmm(A, Xt),
                         "torch.sparse.mm cuda": lambda: torch.sparse.mm(St, Xt)}, calls, sync=sync)
    try:  # the binding alone and the kernel alone (needs this version's internals)
        rows.update(_cuda_binding_and_kernel(A, Xt, calls, sync))
    except (ImportError, AttributeError) as e:
        print(f"(binding / kernel rows skipped: {e})")
    return rows


def _cuda_binding_and_kernel(A, Xt, calls, sync):
    import torch

    from gnnsparse import _core, _cuda
    from gnnsparse._backends import backend_for

    b = backend_for(Xt)
    view = A._view(b, b.place(Xt), Xt, None)
    Y = torch.empty(N_NODES, C, device=Xt.device)
    stream = torch.cuda.current_stream().cuda_stream
    f32 = _core.DTYPE["float32"][0]

    def launch():
        _cuda.spmm(stream, view, f32, 0, Xt.data_ptr(), Y.data_ptr(), 0, C, 0)

    rows = {"binding only (no frontend)": _per_call(launch, calls, sync=sync)}
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
    stream = torch.cuda.current_stream().cuda_stream
    times = []
    for _ in range(30):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1e3 / 100)
    rows["kernel (CUDA graph replay)"] = statistics.median(times)
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
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--json")
    a = p.parse_args(argv)
    out = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
           "graph": f"{N_NODES} nodes, {N_EDGES} edges, C={C}", "cpu": None, "cuda": None}
    if a.device in ("cpu", "all"):
        out["cpu"] = cpu(a.calls)
    if a.device in ("cuda", "all"):
        try:
            import torch

            if torch.cuda.is_available():
                out["cuda"] = cuda(a.calls)
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
