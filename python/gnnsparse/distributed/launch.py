"""Start N processes with torch.distributed initialized (torch.multiprocessing spawn).

    results = spawn(fn, 2, args=(...))       # fn(rank, world_size, *args) in every process

Rendezvous through a fresh file (init_method file://...), so concurrent runs (parallel tests, two
trainings on one host) never collide on a port. Backend: gloo for CPU, nccl when device is
"cuda" (rank r uses cuda:r). Each process's return value comes back in rank order (pickled
through a temporary directory); an exception in any rank is raised here.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable, List, Optional

__all__ = ["spawn", "default_backend"]


def default_backend(device: str) -> str:
    """The torch.distributed backend for a device: "nccl" for CUDA, "gloo" otherwise."""
    return "nccl" if str(device).startswith("cuda") else "gloo"


def _worker(rank: int, fn, world: int, init: str, backend: str, outdir: str, threads: Optional[int], timeout, args):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    if threads:
        torch.set_num_threads(threads)
    kw = {}
    if backend == "nccl":
        torch.cuda.set_device(rank)
        kw["device_id"] = torch.device("cuda", rank)
    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                            timeout=timedelta(seconds=timeout), **kw)
    # an exception leaves at once (no barrier): spawn then ends the other ranks, which may be
    # waiting in a collective
    out = fn(rank, world, *args)
    torch.save(out, os.path.join(outdir, f"rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


def spawn(fn: Callable[..., Any], nproc: int, args: tuple = (), *, device: str = "cpu",
          backend: Optional[str] = None, threads: Optional[int] = None, timeout: float = 600.0) -> List[Any]:
    """Run fn(rank, nproc, *args) in nproc fresh processes with torch.distributed initialized;
    returns their results in rank order. fn must be importable (a module-level function).
    threads: torch.set_num_threads in each process (on a CPU host, cores / nproc avoids
    oversubscription). timeout: seconds a collective may wait before it fails (torch.distributed's
    process-group timeout)."""
    import torch
    import torch.multiprocessing as mp

    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"nproc must be a positive integer, got {nproc!r}")
    backend = backend or default_backend(device)
    if backend == "nccl" and torch.cuda.device_count() < nproc:
        raise RuntimeError(f"{nproc} processes on NCCL need {nproc} CUDA devices; torch sees "
                           f"{torch.cuda.device_count()}")
    outdir = tempfile.mkdtemp(prefix="gnnsparse-dist-")
    try:
        init = "file://" + os.path.join(outdir, "rendezvous")
        mp.spawn(_worker, args=(fn, nproc, init, backend, outdir, threads, float(timeout), args), nprocs=nproc,
                 join=True)
        return [torch.load(os.path.join(outdir, f"rank{r}.pt"), weights_only=False) for r in range(nproc)]
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
