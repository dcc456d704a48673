"""Concurrency: several Python threads calling ops on one CSR and one kernel cache at once.

Results must be bitwise identical to serial calls, nothing may crash, a kernel instance must be
built once however many threads ask for it first, and the GIL must be released while a kernel runs.
CPU (SYCL) variants run here; CUDA variants use one torch stream per thread and skip without a GPU.
"""
from __future__ import annotations

import functools
import random
import threading
import time

import numpy as np
import pytest

import gnnsparse as gs

from _reliability import host, kernel_cache_size, make_graph, require, to_backend, torch_or_none
from test_faults import last_json, run_python

THREADS, ROUNDS = 4, 3


def _graph(rng, M=300, K=200, hub=2000, itype=np.int32):
    rowptr, col = make_graph(rng, M, K, mean_deg=6, hub=hub)
    return gs.CSR(rowptr.astype(itype), col.astype(itype), rng.standard_normal(len(col)).astype(np.float32), (M, K))


def _ops(A, backend, rng):
    """Named calls covering every op, each returning a tuple of outputs."""
    M, K = A.shape
    X = to_backend(rng.standard_normal((K, 24)), backend, "float32")
    Xm = to_backend(rng.standard_normal((M, 24)), backend, "float32")
    Xh, Yh = (to_backend(rng.standard_normal((n, 2, 8)) * 0.3, backend, "float32") for n in (M, K))
    Z = to_backend(rng.standard_normal((K, 2, 5)), backend, "float32")
    return {
        "spmm_sum": lambda: (gs.spmm(A, X, "sum"),),
        "spmm_mean": lambda: (gs.spmm(A, X, "mean"),),
        "spmm_max_arg": lambda: gs.spmm(A, X, "max", return_arg=True),
        "sddmm_dot": lambda: (gs.sddmm(A, Xm, X, "dot"),),
        "fused_softmax": lambda: gs.fusedmm(A, Xh, Yh, Z, edge="softmax", return_edges=True),
    }


def _bits(outs):
    return tuple(host(o).tobytes() for o in outs)


def _hammer(calls, serial, sync=None, stream_per_thread=None):
    errors, mismatches = [], []
    barrier = threading.Barrier(THREADS)

    def worker(tid):
        order = list(calls) * ROUNDS
        random.Random(tid).shuffle(order)
        ctx = stream_per_thread(tid) if stream_per_thread else None
        try:
            barrier.wait()
            for name in order:
                if ctx is not None:
                    with ctx:
                        outs = calls[name]()
                    sync(ctx)
                else:
                    outs = calls[name]()
                if _bits(outs) != serial[name]:
                    mismatches.append((tid, name))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(f"thread {tid}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors
    assert not mismatches, f"results differ from the serial ones: {mismatches[:5]}"


@pytest.mark.sycl
def test_sycl_threads_share_a_csr_and_the_kernel_cache():
    require("sycl")
    rng = np.random.default_rng(11)
    A = _graph(rng)
    calls = _ops(A, "sycl", rng)
    serial = {name: _bits(fn()) for name, fn in calls.items()}  # also builds every instance
    n = kernel_cache_size()
    _hammer(calls, serial)
    assert kernel_cache_size() == n  # nothing rebuilt


@pytest.mark.sycl
def test_sycl_threads_with_a_queue_each():
    """USM inputs on one queue per thread (same device): each thread's results equal the serial ones.
    The USM arrays are made and read back on the main thread: dpnp 0.20 itself can deadlock when
    several threads create or copy arrays at once (docs/reliability.md), which is not what this tests."""
    require("sycl")
    import dpctl

    from test_faults import usm

    rng = np.random.default_rng(12)
    A = _graph(rng, M=120, K=90, hub=600)
    X = rng.standard_normal((90, 20)).astype(np.float32)
    want = gs.spmm(A, X, "max", return_arg=True)
    queues = [dpctl.SyclQueue("opencl:cpu", property="in_order") for _ in range(THREADS)]
    inputs = [usm(X, q) for q in queues]
    results = [[] for _ in range(THREADS)]
    errors = []
    barrier = threading.Barrier(THREADS)

    def worker(tid):
        try:
            barrier.wait()
            for _ in range(ROUNDS):
                results[tid].append(gs.spmm(A, inputs[tid], "max", return_arg=True))
        except Exception as e:
            errors.append(f"thread {tid}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    for tid, outs in enumerate(results):
        assert len(outs) == ROUNDS
        for Y, arg in outs:
            got = [o.asnumpy() if hasattr(o, "asnumpy") else np.asarray(o) for o in (Y, arg)]
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), f"thread {tid}"


_COLD = """
    import collections, json, resource, threading, numpy as np, gnnsparse as gs
    from gnnsparse import _sycl
    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    A = gs.CSR(np.array([0, 2, 3], np.int32), np.array([0, 1, 1], np.int32), None, (2, 2))
    X = np.arange(6, dtype=np.float32).reshape(2, 3)
    c0 = cpu(); first = gs.spmm(A, X, "max"); serial = cpu() - c0   # one instance, built alone
    n0 = _sycl.kernel_cache_size()
    barrier, outs = threading.Barrier(4), []
    def work():
        barrier.wait()
        outs.append(gs.spmm(A, X, "min"))   # a comparable instance, asked for by 4 threads at once
    ts = [threading.Thread(target=work) for _ in range(4)]
    c0 = cpu()
    [t.start() for t in ts]; [t.join() for t in ts]
    together = cpu() - c0
    loads = [r[0] for r in _sycl.kernel_loads()]
    print(json.dumps({"serial_cpu": serial, "threads_cpu": together, "new_entries": _sycl.kernel_cache_size() - n0,
                      "most_loads_of_one_instance": max(collections.Counter(loads).values(), default=0),
                      "same": all(np.array_equal(o, outs[0]) for o in outs),
                      "right": bool(np.array_equal(outs[0], gs.reference.spmm(A, X, "min")))}))
"""


@functools.lru_cache(maxsize=None)
def _cold_cache_run():
    """One fresh interpreter for both cold-cache tests (its start and builds cost ~10 s)."""
    rc, out, err = run_python(_COLD)
    assert rc == 0, err
    return last_json(out)


@pytest.mark.sycl
def test_sycl_cold_cache_first_calls_from_many_threads():
    """Four threads ask for a kernel nobody built yet: one cache entry, identical right answers."""
    require("sycl")
    res = _cold_cache_run()
    assert res["new_entries"] == 1 and res["same"] and res["right"], res


@pytest.mark.sycl
def test_sycl_cold_cache_compiles_each_instance_once():
    """Threads that miss the cache for one instance at once wait for a single build (every load is
    recorded by name: no name twice)."""
    require("sycl")
    res = _cold_cache_run()
    assert res["most_loads_of_one_instance"] == 1, res


@pytest.mark.sycl
def test_sycl_gil_is_released_while_a_kernel_runs():
    """While one thread waits for a long SpMM, another keeps running Python: the longest pause of
    the main thread's loop must be well under the kernel's duration (holding the GIL through the
    kernel would pause it for all of it)."""
    require("sycl")
    rng = np.random.default_rng(13)
    n = 20000
    rowptr, col = make_graph(rng, n, n, mean_deg=40, empty_frac=0.0)
    A = gs.CSR(rowptr.astype(np.int32), col.astype(np.int32), None, (n, n))
    C = 128
    X = rng.standard_normal((n, C)).astype(np.float32)
    gs.spmm(A, X)  # builds the instance (the wide kernel: every C >= 128 here uses the same one)
    while True:  # one call must last >= 0.2 s, so that scheduling pauses are small beside it
        t = time.perf_counter()
        gs.spmm(A, X)
        if time.perf_counter() - t >= 0.2 or C >= 2048:
            break
        C *= 2
        X = rng.standard_normal((n, C)).astype(np.float32)
    stamps, window = [], {}
    stop = threading.Event()

    def call():
        window["t0"] = time.perf_counter()
        gs.spmm(A, X)
        window["t1"] = time.perf_counter()
        stop.set()

    th = threading.Thread(target=call)
    th.start()
    while not stop.is_set():
        stamps.append(time.perf_counter())
    th.join()
    t0, t1 = window["t0"], window["t1"]
    inside = np.array([t0] + [s for s in stamps if t0 < s < t1] + [t1])
    gap = float(np.diff(inside).max())
    assert gap < 0.5 * (t1 - t0), f"the main thread paused {gap:.3f} s during a {t1 - t0:.3f} s kernel"


@pytest.mark.cuda
def test_cuda_threads_with_a_stream_each():
    require("cuda")
    torch = torch_or_none()
    rng = np.random.default_rng(14)
    A = _graph(rng, M=2000, K=1500, hub=20000)
    calls = _ops(A, "cuda", rng)
    serial = {name: _bits(fn()) for name, fn in calls.items()}
    streams = {}

    def stream_ctx(tid):
        streams[tid] = torch.cuda.Stream()
        return torch.cuda.stream(streams[tid])

    def sync(ctx):
        ctx.stream.synchronize()

    _hammer(calls, serial, sync=sync, stream_per_thread=stream_ctx)


@pytest.mark.cuda
def test_cuda_threads_on_the_default_stream():
    require("cuda")
    rng = np.random.default_rng(15)
    A = _graph(rng, M=500, K=400, hub=5000, itype=np.int64)
    calls = _ops(A, "cuda", rng)
    serial = {name: _bits(fn()) for name, fn in calls.items()}
    _hammer(calls, serial)
