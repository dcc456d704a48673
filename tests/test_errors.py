"""Bad input raises a clear Python exception naming the problem; nothing crashes."""
import numpy as np
import pytest

import gnnsparse as gs

from conftest import random_csr

pytestmark = [pytest.mark.sycl, pytest.mark.usefixtures("sycl")]


@pytest.fixture
def A(rng):
    return random_csr(rng, 10, 8)


def test_wrong_dtype(A):
    with pytest.raises(TypeError, match="X has dtype int64"):
        gs.spmm(A, np.ones((8, 3), np.int64))
    with pytest.raises(TypeError, match="the sycl backend takes float32, float64"):
        gs.spmm(A, np.ones((8, 3), np.float16))
    with pytest.raises(TypeError, match="Y has dtype float64 but X has float32"):
        gs.sddmm(A, np.ones((10, 3), np.float32), np.ones((8, 3), np.float64))


def test_wrong_rows(A):
    with pytest.raises(ValueError, match=r"X needs 8 rows"):
        gs.spmm(A, np.ones((9, 3), np.float32))
    with pytest.raises(ValueError, match=r"X needs 10 rows"):
        gs.sddmm(A, np.ones((8, 3), np.float32), np.ones((8, 3), np.float32))
    with pytest.raises(ValueError, match=r"Y needs 8 rows"):
        gs.sddmm(A, np.ones((10, 3), np.float32), np.ones((10, 3), np.float32))
    with pytest.raises(ValueError, match="must agree beyond their first axis"):
        gs.sddmm(A, np.ones((10, 3), np.float32), np.ones((8, 4), np.float32))
    with pytest.raises(ValueError, match="Z has shape"):
        gs.fusedmm(A, np.ones((10, 2, 3), np.float32), np.ones((8, 2, 3), np.float32), np.ones((8, 5), np.float32))


def test_bad_choices(A):
    X = np.ones((8, 3), np.float32)
    with pytest.raises(ValueError, match="reduce must be one of"):
        gs.spmm(A, X, "prod")
    with pytest.raises(ValueError, match="return_arg is only defined"):
        gs.spmm(A, X, "sum", return_arg=True)
    with pytest.raises(ValueError, match="op must be one of"):
        gs.sddmm(A, np.ones((10, 3), np.float32), X, "mul")
    with pytest.raises(ValueError, match="edge must be one of"):
        gs.fusedmm(A, np.ones((10, 3), np.float32), X, X, edge="relu")
    with pytest.raises(TypeError, match="must be a gnnsparse.CSR"):
        gs.spmm(A.to_scipy(), X)


def test_mixed_devices(A):
    import dpctl
    import dpnp

    q = dpctl.SyclQueue("opencl:cpu")
    Xu = dpnp.asarray(np.ones((10, 3), np.float32), sycl_queue=q)
    with pytest.raises(ValueError, match="all dense inputs must live on one device"):
        gs.sddmm(A, Xu, np.ones((8, 3), np.float32))
    # two queues of one device share its default context: that works
    q1 = dpctl.SyclQueue("opencl:cpu")
    Y1 = dpnp.asarray(np.ones((8, 3), np.float32), sycl_queue=q1)
    np.testing.assert_allclose(dpnp.asnumpy(gs.sddmm(A, Xu, Y1)), np.full(A.nnz, 3.0))
    # an explicitly made context on the same device: works when SYCL says it is the same context
    # (dpctl reuses one per device), else the error names the two contexts, not one device twice
    q2 = dpctl.SyclQueue(dpctl.SyclContext(q.sycl_device), q.sycl_device)
    Y2 = dpnp.asarray(np.ones((8, 3), np.float32), sycl_queue=q2)
    if q2.sycl_context == q.sycl_context:
        np.testing.assert_allclose(dpnp.asnumpy(gs.sddmm(A, Xu, Y2)), np.full(A.nnz, 3.0))
    else:
        with pytest.raises(ValueError, match="another SYCL context on the same device"):
            gs.sddmm(A, Xu, Y2)


def test_index_overflow_rejected():
    with pytest.raises(ValueError, match="decreases at row 1"):
        # an int32 rowptr that wrapped around past 2**31 - 1
        gs.CSR(np.array([0, 2**31 - 1, -(2**31) + 2], np.int64).astype(np.int32), np.zeros(3, np.int32), None,
               (2, 1))


def test_empty_graph_everywhere():
    A = gs.CSR(np.zeros(1, np.int32), np.zeros(0, np.int32), None, (0, 0))
    assert gs.spmm(A, np.zeros((0, 4), np.float32)).shape == (0, 4)
    Y, arg = gs.spmm(A, np.zeros((0, 4), np.float32), "max", return_arg=True)
    assert Y.shape == arg.shape == (0, 4)
    assert gs.sddmm(A, np.zeros((0, 4), np.float32), np.zeros((0, 4), np.float32)).shape == (0,)
    assert gs.fusedmm(A, np.zeros((0, 4)), np.zeros((0, 4)), np.zeros((0, 2))).shape == (0, 2)
    B = gs.CSR(np.zeros(4, np.int32), np.zeros(0, np.int32), None, (3, 5))  # rows but no entries
    Y, arg = gs.spmm(B, np.ones((5, 2), np.float32), "min", return_arg=True)
    assert (Y == 0).all() and (arg == -1).all()
    assert gs.spmm(B, np.ones((5, 0), np.float32)).shape == (3, 0)


def test_compile_failure_is_an_exception_and_process_survives(rng):
    from gnnsparse import _sycl, _sycl_backend

    q = _sycl_backend.default_queue()
    with pytest.raises(RuntimeError, match="compiler log|failed"):
        _sycl.build_kernel(q, "spmm.hpp", "gnnsparse::spmm_csr<float, int, 0, true, 3000000000>")
    with pytest.raises(ValueError, match="no embedded kernel source"):
        _sycl.build_kernel(q, "nope.hpp", "x")
    A = random_csr(rng, 5, 5)
    assert gs.spmm(A, np.ones((5, 2), np.float32)).shape == (5, 2)  # still usable
