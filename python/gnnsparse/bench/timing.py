"""The one timer of the benchmarks: `gnnsparse bench` (measure.CPUDevice / CUDADevice) and the
scripts under bench/ (per-call cost, quantized ops, training, tiles) all time through it.

Two clocks, one shape: `fns` maps a name to a function of the call index (so a caller can rotate
inputs: `lambda i: f(inputs[i % n])`); the result maps each name to a list of seconds per call.

  wall(fns, ...)    perf_counter around a block of `calls` back-to-back calls (then `sync()`),
                    divided by `calls`; the functions take turns block by block over `rounds`
                    rounds, each block after `warmup` untimed calls, so all see the same machine
                    state (clocks, other processes' load). calls=1: every call timed alone.
  events(fns, ...)  a torch.cuda.Event pair around each call, the functions interleaved call by
                    call after `warmup` untimed rounds; one synchronize at the end. `before()`
                    runs outside the timed region before each call (e.g. an L2 flush).
  environ(env)      a context with the environment variables of `env` set (None: unset) and
                    restored afterwards: the knobs that force a method, around a timed call.
"""
from __future__ import annotations

import contextlib
import os
import statistics
import time
from typing import Callable, Dict, List, Optional


def wall(fns: Dict[str, Callable[[int], object]], *, rounds: int, per_round=1, calls: int = 1, warmup: int = 1,
         sync: Optional[Callable[[], object]] = None, before: Optional[Callable[[], object]] = None,
         hooks: Optional[dict] = None) -> Dict[str, List[float]]:
    """{name: [seconds per call]}: per round, each function runs `warmup` untimed calls, then
    per_round samples (an int, or a list with one count per round) of `calls` back-to-back calls.
    hooks: {name: (enter, exit)} around each of that function's blocks (e.g. a thread setting)."""
    counts = per_round if isinstance(per_round, (list, tuple)) else [per_round] * rounds
    out: Dict[str, List[float]] = {k: [] for k in fns}
    clock = time.perf_counter
    i = 0
    for n in counts:
        for k, fn in fns.items():
            h = (hooks or {}).get(k)
            if h:
                h[0]()
            try:
                for _ in range(warmup):
                    fn(i)
                    i += 1
                if sync:
                    sync()
                for _ in range(n):
                    if before:
                        before()
                    t0 = clock()
                    for _ in range(calls):
                        fn(i)
                        i += 1
                    if sync:
                        sync()
                    out[k].append((clock() - t0) / calls)
            finally:
                if h:
                    h[1]()
    return out


def events(fns: Dict[str, Callable[[int], object]], *, repeat: int, warmup: int, torch,
           before: Optional[Callable[[], object]] = None) -> Dict[str, List[float]]:
    """{name: [seconds per call]} from CUDA events around each call, interleaved one call of each
    per round, after `warmup` untimed rounds; one synchronize at the end."""
    for i in range(warmup):
        for fn in fns.values():
            fn(i)
    torch.cuda.synchronize()
    ev: Dict[str, list] = {k: [] for k in fns}
    for i in range(repeat):
        for k, fn in fns.items():
            if before:
                before()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn(i)
            e.record()
            ev[k].append((s, e))
    torch.cuda.synchronize()
    return {k: [s.elapsed_time(e) * 1e-3 for s, e in v] for k, v in ev.items()}


def median(ts) -> float:
    return float(statistics.median(ts)) if ts else float("nan")


def median_us(fn: Callable[[], object], *, reps: int, warmup: int = 1, sync=None, torch=None, before=None) -> float:
    """Median microseconds of one function: CUDA events when `torch` is given, else wall clock."""
    if torch is not None:
        ts = events({"f": lambda i: fn()}, repeat=reps, warmup=warmup, torch=torch, before=before)["f"]
    else:
        ts = wall({"f": lambda i: fn()}, rounds=1, per_round=reps, warmup=warmup, sync=sync, before=before)["f"]
    return median(ts) * 1e6


@contextlib.contextmanager
def environ(env: Dict[str, Optional[str]]):
    """The variables of `env` set (a value of None: unset) inside the block, restored after it."""
    old = {k: os.environ.get(k) for k in env}

    def put(values):
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    put(env)
    try:
        yield
    finally:
        put(old)
