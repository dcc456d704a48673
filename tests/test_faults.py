"""Faults: a kernel that fails to compile, a missing device, out-of-memory, a CSR on another device
than the features, another CUDA stream / SYCL context, and an unvalidated CSR with a bad column.
Each must give a clear Python exception (or a documented behaviour), the process must stay usable,
and the next call must succeed. Cases that can crash the interpreter run in a subprocess.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import reference as ref

from _reliability import (assert_usable, backend_ok, backend_params, host, kernel_cache_size, require,
                          to_backend, torch_or_none)


def run_python(code: str, env_extra: dict | None = None, timeout: int = 300):
    """Run `code` in a fresh interpreter with this one's environment; returns (rc, stdout, stderr)."""
    env = dict(os.environ)
    env.update(env_extra or {})
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=os.path.dirname(os.path.abspath(__file__)))
    return p.returncode, p.stdout, p.stderr


def last_json(stdout: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    assert lines, f"no JSON result in the child's output:\n{stdout}"
    return json.loads(lines[-1])


def usm(a, q):
    """A USM array holding `a` on queue q (gnnsparse.USMArray, or dpnp where that is the array type)."""
    if hasattr(gs, "USMArray"):
        return gs.USMArray.from_numpy(np.ascontiguousarray(a), q)
    dpnp = pytest.importorskip("dpnp")
    return dpnp.asarray(a, sycl_queue=q)


# ---------------------------------------------------------------- SYCL: kernel compile failure
@pytest.mark.sycl
def test_compile_failure_is_clean_and_not_cached():
    require("sycl")
    from gnnsparse import _sycl, _sycl_backend

    q = _sycl_backend.default_queue()
    assert_usable("sycl")
    n0 = kernel_cache_size()
    bad = "gnnsparse::spmm_csr_sg<float, int, gnnsparse::Reduce::sum, true, false, 16, 32>"  # V = 32: static_assert
    for _ in range(2):  # a failed build is not cached as a kernel: the second try fails the same way
        with pytest.raises(RuntimeError, match="failed") as exc:
            _sycl.build_kernel(q, "spmm.hpp", bad)
        assert "spmm_csr_sg" in str(exc.value)  # the message names the instance
    assert kernel_cache_size() == n0
    with pytest.raises(ValueError, match="no embedded kernel source"):
        _sycl.build_kernel(q, "missing.hpp", "x")
    # the cache still builds new instances (sub-group size 8: an instance no launcher asks for, so
    # surely new here) and the ops still run
    _sycl.build_kernel(q, "spmm.hpp", "gnnsparse::spmm_csr_sg<float, int, gnnsparse::Reduce::sum, false, false, 8, 1>")
    assert kernel_cache_size() == n0 + 1
    A = gs.CSR(np.array([0, 2, 3], np.int32), np.array([0, 1, 1], np.int32), np.array([1.0, 2.0, 3.0]), (2, 2))
    X = np.arange(10.0).reshape(2, 5)
    np.testing.assert_array_equal(gs.spmm(A, X, "max"), ref.spmm(A, X, "max"))
    assert_usable("sycl")


# ---------------------------------------------------------------- missing device
@pytest.mark.sycl
def test_missing_sycl_device_is_a_clear_error():
    require("sycl")
    rc, out, err = run_python("""
        import json, numpy as np, gnnsparse as gs
        A = gs.CSR(np.array([0, 1], np.int32), np.array([0], np.int32), None, (1, 1))
        res = {"available": gs.available_backends()["sycl"]}
        for i in range(2):  # the same clear error every time, no crash
            try:
                gs.spmm(A, np.ones((1, 2), np.float32))
                res[f"call{i}"] = "no error"
            except Exception as e:
                res[f"call{i}"] = [type(e).__name__, isinstance(e, gs.BackendUnavailable), str(e)]
        res["reference"] = gs.reference.spmm(A, np.ones((1, 2))).tolist()  # the rest still works
        print(json.dumps(res))
    """, {"GNNSPARSE_SYCL_DEVICE": "opencl:gpu:7"})
    assert rc == 0, err
    res = last_json(out)
    assert res["available"] is False
    for i in range(2):
        name, is_unavailable, msg = res[f"call{i}"]
        assert is_unavailable, res
        assert "sycl" in msg.lower() and "not available" in msg
    assert res["reference"] == [[1.0, 1.0]]


def test_no_cuda_device_is_reported_not_crashed():
    """With every GPU hidden, the package imports, says CUDA is unavailable, and CPU work goes on."""
    rc, out, err = run_python("""
        import json, numpy as np, gnnsparse as gs
        res = {"backends": gs.available_backends()}
        A = gs.CSR(np.array([0, 1], np.int32), np.array([0], np.int32), None, (1, 1))
        try:
            res["cpu"] = gs.spmm(A, np.ones((1, 2), np.float32)).tolist()
        except gs.BackendUnavailable as e:  # a build without the SYCL backend
            res["cpu"] = "unavailable: " + str(e)
        print(json.dumps(res))
    """, {"CUDA_VISIBLE_DEVICES": ""})
    assert rc == 0, err
    res = last_json(out)
    assert res["backends"]["cuda"] is False
    assert res["cpu"] == [[1.0, 1.0]] or res["cpu"].startswith("unavailable: ")


# ---------------------------------------------------------------- out of memory (CUDA)
@pytest.mark.cuda
def test_cuda_output_allocation_out_of_memory():
    require("cuda")
    torch = torch_or_none()
    total = torch.cuda.get_device_properties(0).total_memory
    M, C = 1 << 20, 1 << 16  # Y would need 256 GiB
    assert M * C * 4 > total
    A = gs.CSR(np.zeros(M + 1, np.int32), np.zeros(0, np.int32), None, (M, 1))
    X = torch.ones((1, C), device="cuda")
    with pytest.raises(RuntimeError, match="(?i)out of memory"):
        gs.spmm(A, X)
    torch.cuda.empty_cache()
    assert_usable("cuda")
    B = gs.CSR(np.array([0, 1, 1], np.int32), np.array([0], np.int32), None, (2, 1))
    assert host(gs.spmm(B, X[:, :3].contiguous())).tolist() == [[1.0] * 3, [0.0] * 3]


@pytest.mark.cuda
@pytest.mark.gpu_exclusive  # fills the GPU: any test running beside it would fail to allocate
def test_cuda_workspace_out_of_memory_then_recovers():
    """Hub rows need a workspace (cudaMallocAsync inside the library): with the GPU full it must fail
    with an exception naming the failed allocation, and work again once memory is back."""
    require("cuda")
    torch = torch_or_none()
    rng = np.random.default_rng(5)
    M, K, C = 100_000, 4096, 256
    deg = np.full(M, 4, np.int64)
    deg[[10, 30_000, 60_000, 90_000]] = 1_000_000  # hub rows (> 16x the mean): workspace ~2.2 M slots x 12 B
    rowptr = np.concatenate([[0], np.cumsum(deg)])
    col = rng.integers(0, K, int(rowptr[-1]))
    A = gs.CSR(rowptr.astype(np.int32), col.astype(np.int32), None, (M, K))
    X = to_backend(rng.standard_normal((K, C)), "cuda", "float32")
    Y, arg = gs.spmm(A, X, "max", return_arg=True)  # uploads the CSR
    want = (host(Y), host(arg))
    out_bytes = Y.numel() * 4 + arg.numel() * 8
    del Y, arg
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    need = out_bytes + (8 << 20)  # room for the outputs, not for the workspace (~26 MB)
    hog, step = [], 1 << 32
    while step >= (1 << 20):  # take the free memory down to `need`
        if torch.cuda.mem_get_info()[0] - step < need:
            step //= 2
            continue
        try:
            hog.append(torch.empty(step, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            step //= 2
    free = torch.cuda.mem_get_info()[0]
    try:
        if free > need + (16 << 20):
            pytest.skip(f"could not fill the GPU (free {free >> 20} MiB)")
        with pytest.raises(RuntimeError, match="(?i)out of memory"):
            gs.spmm(A, X, "max", return_arg=True)
            torch.cuda.synchronize()
    finally:
        del hog
        torch.cuda.empty_cache()
    Y, arg = gs.spmm(A, X, "max", return_arg=True)
    assert np.array_equal(host(Y), want[0]) and np.array_equal(host(arg), want[1])
    assert_usable("cuda")


# ---------------------------------------------------------------- CSR and features on different devices
@pytest.mark.sycl
def test_sycl_csr_on_another_context_than_the_features():
    require("sycl")
    import dpctl

    dev = dpctl.SyclDevice("opencl:cpu")
    # two queues with contexts of their own (the OpenCL CPU runtime may hand back one native context
    # for both: then sharing the arrays is legal and the answer must be right)
    q1, q2 = (dpctl.SyclQueue(dpctl.SyclContext(dev), dev) for _ in range(2))
    rowptr, col = np.array([0, 2, 3], np.int32), np.array([0, 1, 1], np.int32)
    Au = gs.CSR(usm(rowptr, q1), usm(col, q1), None, (2, 2))
    X = np.ones((2, 3), np.float32)
    try:
        Y = gs.spmm(Au, usm(X, q2))
    except ValueError as e:
        assert "context" in str(e) or "CSR lives on" in str(e) or "one device" in str(e), e
    else:
        assert q1.sycl_context == q2.sycl_context, "arrays of two contexts were mixed without an error"
        got = Y.asnumpy() if hasattr(Y, "asnumpy") else np.asarray(Y)
        np.testing.assert_array_equal(got, [[2, 2, 2], [1, 1, 1]])
    assert_usable("sycl")
    with pytest.raises(ValueError, match="CSR lives on|one device"):
        gs.spmm(Au, X)  # a USM CSR with NumPy features
    assert_usable("sycl")
    Y = gs.spmm(Au, usm(X, q1))  # the right queue works
    got = Y.asnumpy() if hasattr(Y, "asnumpy") else np.asarray(Y)
    np.testing.assert_array_equal(got, [[2, 2, 2], [1, 1, 1]])


@pytest.mark.cuda
def test_cuda_csr_with_cpu_features_is_a_clear_error():
    require("cuda")
    torch = torch_or_none()
    dev = lambda a: torch.from_numpy(a).cuda()  # noqa: E731
    Ad = gs.CSR(dev(np.array([0, 2, 3], np.int32)), dev(np.array([0, 1, 1], np.int32)), None, (2, 2))
    with pytest.raises((ValueError, gs.BackendUnavailable), match="CSR lives on|not available"):
        gs.spmm(Ad, torch.ones((2, 3)))  # CPU features, CSR on the GPU
    assert_usable("cuda")
    assert host(gs.spmm(Ad, torch.ones((2, 3), device="cuda"))).tolist() == [[2.0] * 3, [1.0] * 3]


@pytest.mark.cuda
def test_cuda_csr_and_features_on_two_gpus():
    require("cuda")
    torch = torch_or_none()
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    Ad = gs.CSR(torch.tensor([0, 1], device="cuda:0"), torch.tensor([0], device="cuda:0"), None, (1, 1))
    with pytest.raises(ValueError, match="CSR lives on"):
        gs.spmm(Ad, torch.ones((1, 2), device="cuda:1"))
    assert_usable("cuda")


# ---------------------------------------------------------------- streams
@pytest.mark.cuda
def test_cuda_runs_on_the_callers_current_stream():
    """X is written on a side stream after a long sleep; an op called under that stream must see
    the written X (it is ordered after the write), never the stale one."""
    require("cuda")
    torch = torch_or_none()
    rng = np.random.default_rng(3)
    A = gs.CSR(np.array([0, 2, 3, 5], np.int32), np.array([0, 1, 1, 0, 1], np.int32), None, (3, 2))
    src = to_backend(rng.standard_normal((2, 64)), "cuda", "float32")
    want = ref.spmm(A, host(src))
    gs.spmm(A, src)  # uploads the CSR now: a pageable upload inside the stream below would sync it
    torch.cuda.synchronize()
    for op in ("spmm", "sddmm", "fusedmm"):
        s = torch.cuda.Stream()
        X = torch.zeros_like(src)
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(50_000_000)  # ~25 ms of GPU time before the write below
            X.copy_(src)
            if op == "spmm":
                out = gs.spmm(A, X)
            elif op == "sddmm":
                out = gs.sddmm(A, torch.ones((3, 64), device="cuda"), X)
            else:
                out = gs.fusedmm(A, torch.zeros((3, 64), device="cuda"), torch.zeros((2, 64), device="cuda"), X,
                                 edge="exp")
        s.synchronize()
        if op == "spmm":
            np.testing.assert_allclose(host(out), want, rtol=1e-5, atol=1e-5)
        elif op == "sddmm":
            np.testing.assert_allclose(host(out), ref.sddmm(A, np.ones((3, 64)), host(src)), rtol=1e-5, atol=1e-5)
        else:  # zero scores, exp: every edge weighs 1
            np.testing.assert_allclose(host(out), want, rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
def test_cuda_stream_of_another_device_is_harmless():
    """A current stream set on another GPU does not apply to this GPU's tensors: the op runs on the
    features' own device and stream."""
    require("cuda")
    torch = torch_or_none()
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    A = gs.CSR(np.array([0, 1], np.int32), np.array([0], np.int32), None, (1, 1))
    with torch.cuda.stream(torch.cuda.Stream(device=1)):
        Y = gs.spmm(A, torch.ones((1, 4), device="cuda:0"))
    assert Y.device.index == 0 and host(Y).tolist() == [[1.0] * 4]


# ---------------------------------------------------------------- validate=False with a bad column
_BAD_COLUMN = """
    import json, sys, numpy as np, gnnsparse as gs
    backend, bad = sys.argv[1], int(sys.argv[2])
    A = gs.CSR(np.array([0, 1], np.int32), np.array([bad], np.int32), None, (1, 4), validate=False)
    X = np.ones((4, 2), np.float32)
    if backend == "cuda":
        import torch
        X = torch.from_numpy(X).cuda()
    try:
        Y = gs.spmm(A, X)
        if backend == "cuda":
            torch.cuda.synchronize()
        res = {"result": "returned", "Y": [float(v) for v in np.asarray(Y.cpu() if backend == "cuda" else Y).ravel()]}
    except Exception as e:
        res = {"result": "raised", "type": type(e).__name__, "message": str(e)}
    print(json.dumps(res))
"""


def _bad_column(backend, bad):
    code = _BAD_COLUMN.replace("sys.argv[1], int(sys.argv[2])", f"{backend!r}, {bad}")
    return run_python(code)


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.xfail(strict=True, reason="validate=False skips the column check and the kernels read X[col] "
                   "unchecked: col = 2**31 - 1 reads far outside X (SIGSEGV, rc 139, on the SYCL CPU device)")
def test_unvalidated_huge_column_is_an_error_not_a_crash(backend):
    require(backend)
    rc, out, err = _bad_column(backend, 2**31 - 1)
    assert rc == 0, f"the interpreter died (rc {rc}): {err[-500:]}"
    res = last_json(out)
    assert res["result"] == "raised" and "col" in res["message"], res


@pytest.mark.parametrize("backend", backend_params())
@pytest.mark.xfail(strict=True, reason="validate=False with col = K (just past the end of X) reads the memory "
                   "after X and returns it as a result: a silent wrong answer")
def test_unvalidated_column_just_out_of_range_is_an_error(backend):
    require(backend)
    rc, out, err = _bad_column(backend, 4)
    assert rc == 0, f"the interpreter died (rc {rc}): {err[-500:]}"
    res = last_json(out)
    assert res["result"] == "raised" and "col" in res["message"], res


def test_validate_false_keeps_the_fast_path_for_valid_input():
    """validate=False on valid arrays gives the same answer as a validated CSR."""
    be = "sycl" if backend_ok("sycl") else "cuda"
    require(be)
    rowptr, col = np.array([0, 2, 2, 5], np.int32), np.array([1, 0, 2, 2, 1], np.int32)
    A, B = gs.CSR(rowptr, col, None, (3, 3)), gs.CSR(rowptr, col, None, (3, 3), validate=False)
    X = to_backend(np.arange(12.0).reshape(3, 4), be, "float32")
    np.testing.assert_array_equal(host(gs.spmm(A, X)), host(gs.spmm(B, X)))
