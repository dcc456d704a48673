"""Normal use prints no warning: a NumPy-built CSR used with torch tensors (its read-only arrays
uploaded or wrapped), on the CPU and on a GPU."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import gnnsparse as gs

torch = pytest.importorskip("torch")


def _csr(rng, n=40, e=200):
    ei = rng.integers(0, n, (2, e))
    return gs.CSR.from_edge_index(ei, n, rng.random(e).astype(np.float32)), n


def _no_warnings(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    assert not caught, [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]
    return out


def test_cuda_upload_of_read_only_arrays_copies_without_a_warning(rng):
    """The CUDA backend's upload, exercised with a CPU tensor as the target (the same torch call
    as for a GPU): a CSR's host arrays are read-only, which torch.from_numpy warns about."""
    from gnnsparse import _cuda_backend

    A, _ = _csr(rng)
    assert not A.val.flags.writeable
    t = _no_warnings(lambda: _cuda_backend.backend.upload(A.val, ("cuda", 0), torch.empty(0)))
    np.testing.assert_array_equal(t.numpy(), A.val)
    assert t.data_ptr() != A.val.ctypes.data  # a copy: the CSR's array is never written through it


def test_numpy_csr_with_torch_cpu_tensors(rng, sycl):
    import gnnsparse.torch as gst

    A, n = _csr(rng)
    X = torch.randn(n, 8, requires_grad=True)

    def run():
        Y = A @ X
        Y.sum().backward()
        return gst.spmm(A, X.detach(), "max", return_arg=True)
    _no_warnings(run)


@pytest.mark.cuda
def test_first_cuda_call_on_a_numpy_csr(rng):
    from _reliability import require

    require("cuda")
    A, n = _csr(rng)
    X = torch.randn(n, 8, device="cuda", requires_grad=True)

    def run():
        gs.spmm(A, X.detach())  # the first CUDA use of this CSR: its host arrays are uploaded here
        gs.sddmm(A, X.detach(), X.detach())
        Y = A @ X  # the autograd path (gnnsparse.torch) takes the CSR's arrays as tensors
        Y.sum().backward()
        torch.cuda.synchronize()
    _no_warnings(run)


@pytest.mark.cuda
def test_torch_sparse_cuda_input_warns_nothing_in_a_fresh_process():
    """CSR.from_torch_sparse and a layer on a CUDA sparse tensor whose checks were declined in its
    constructor (which leaves torch's process-wide choice implicit): no warning from gnnsparse's
    own calls (torch warns once per process, so a fresh one)."""
    import subprocess
    import sys

    from _reliability import require

    require("cuda")
    code = """if True:
        import torch, gnnsparse as gs
        from gnnsparse.torch.nn import GCNConv
        ei = torch.randint(0, 50, (2, 300), device="cuda")
        with torch.sparse.check_sparse_tensor_invariants(False):  # torch 2.11 warns on check_invariants=False alone
            S = torch.sparse_coo_tensor(ei.flip(0), torch.ones(300, device="cuda"), (50, 50), check_invariants=False)
        A = gs.CSR.from_torch_sparse(S)
        y = GCNConv(4, 3).cuda()(torch.randn(50, 4, device="cuda"), S)
        torch.cuda.synchronize()
        print("ok")
    """
    r = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
