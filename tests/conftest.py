"""Shared fixtures: seeded random CSR matrices of every awkward shape, backend availability."""
from __future__ import annotations

import os
import zlib

import numpy as np
import pytest

# every output array starts as NaN / a huge index, so elements a kernel leaves unwritten show up
os.environ.setdefault("GNNSPARSE_POISON", "1")

import gnnsparse as gs  # noqa: E402

_AVAILABLE = gs.available_backends()


# Backends that must be present (comma-separated, e.g. "sycl" in CI): their tests fail instead of
# skipping when the backend cannot load, so a broken build never passes as "skipped".
REQUIRED = {b for b in os.environ.get("GNNSPARSE_REQUIRE", "").split(",") if b}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test that reaches a backend this machine lacks (gnnsparse.BackendUnavailable: a CPU-only
    machine's CUDA, a GPU image's SYCL) is skipped with the reason, unless GNNSPARSE_REQUIRE names
    that backend: then it fails as it is."""
    try:
        return (yield)
    except Exception as e:
        missing = _unavailable(e)
        if missing is not None and missing.backend and missing.backend not in REQUIRED:
            pytest.skip(f"{missing} (GNNSPARSE_REQUIRE={missing.backend} makes this a failure)")
        raise


def _unavailable(e):
    """The BackendUnavailable behind `e` (itself, or what it was raised from), or None."""
    for _ in range(8):
        if e is None or isinstance(e, gs.BackendUnavailable):
            return e
        e = e.__cause__
    return None


def sycl_or_skip():
    if not _AVAILABLE.get("sycl"):
        from gnnsparse import _sycl_backend

        _sycl_backend.available()
        msg = f"SYCL backend unavailable: {_sycl_backend.unavailable_reason()}"
        if "sycl" in REQUIRED:
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture
def sycl():
    sycl_or_skip()


@pytest.fixture
def rng(request):
    # fresh inputs per test, the same in every run: seeded from the test's id (crc32 is stable across
    # processes, unlike hash() of a str)
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def random_csr(rng, M, K, *, mean_deg=4.0, empty_frac=0.2, hub=0, weighted=True, dup=True,
               index_dtype=np.int32, dtype=np.float32):
    """M x K CSR with some empty rows, optionally one hub row of `hub` entries and repeated columns."""
    deg = rng.poisson(mean_deg, M) if M else np.zeros(0, np.int64)
    if M:
        deg[rng.random(M) < empty_frac] = 0
        if hub and K:
            deg[rng.integers(M)] = hub
    if K == 0:
        deg[:] = 0
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(deg, out=rowptr[1:])
    nnz = int(rowptr[-1])
    col = rng.integers(0, max(K, 1), nnz)
    if dup and nnz > 3:
        col[1] = col[0]  # a repeated (i, j) pair when row 0 has two entries; harmless otherwise
    val = rng.standard_normal(nnz).astype(dtype) if weighted else None
    return gs.CSR(rowptr.astype(index_dtype), col.astype(index_dtype), val, (M, K))


# (M, K, mean degree, hub) -- odd sizes, rectangular, empty, one very long row
SHAPES = [
    (1, 1, 1.0, 0),
    (7, 5, 2.0, 0),
    (33, 65, 5.0, 0),
    (200, 130, 8.0, 0),
    (130, 200, 3.0, 1500),
    (0, 4, 0.0, 0),
    (9, 0, 0.0, 0),
]
WIDTHS = [1, 3, 16, 17, 64, 130]


def torch_device_params():
    """pytest params "cpu" and "cuda" for a device fixture: the cuda one marked `cuda` and skipped
    without a CUDA device or the gnnsparse CUDA backend (the cpu one skips in the fixture, through
    sycl_or_skip)."""
    import torch

    cuda_ok = torch.cuda.is_available() and gs.available_backends().get("cuda", False)
    return [pytest.param("cpu", id="cpu"),
            pytest.param("cuda", id="cuda", marks=[pytest.mark.cuda, pytest.mark.skipif(
                not cuda_ok, reason="no CUDA device / CUDA backend")])]


@pytest.fixture(params=["cpu", "cuda"])
def torch_cpu_cuda(request):
    """A torch device: the CPU (SYCL backend) and CUDA, each skipped where its backend is absent."""
    import torch

    if request.param == "cuda":
        from gnnsparse import _cuda_backend

        if not torch.cuda.is_available() or not _cuda_backend.backend.available():
            pytest.skip("no CUDA device or no compiled gnnsparse CUDA module")
    else:
        sycl_or_skip()
    return torch.device(request.param)


def rel(a, b):
    """Largest absolute difference of two tensors relative to the largest |b|."""
    return float((a.detach() - b.detach()).abs().max() / b.detach().abs().max().clamp_min(1e-30))
