"""SYCL backend (NumPy on the SYCL CPU device, and USM arrays on a dpctl queue) against the oracle."""
import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import reference as ref

from conftest import SHAPES, WIDTHS, random_csr

pytestmark = [pytest.mark.sycl, pytest.mark.usefixtures("sycl")]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


@pytest.mark.parametrize("M, K, deg, hub", SHAPES)
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("weighted", [True, False])
def test_spmm_shapes(rng, M, K, deg, hub, reduce, weighted):
    A = random_csr(rng, M, K, mean_deg=deg, hub=hub, weighted=weighted)
    for C in (1, 17, 130):
        X = rng.standard_normal((K, C)).astype(np.float32)
        if reduce in ("max", "min"):
            Y, arg = gs.spmm(A, X, reduce, return_arg=True)
            Yr, argr = ref.spmm(A, X, reduce, return_arg=True)
            np.testing.assert_array_equal(arg, argr)
        else:
            Y, Yr = gs.spmm(A, X, reduce), ref.spmm(A, X, reduce)
        assert Y.dtype == np.float32 and Y.shape == (M, C)
        assert not np.isnan(Y).any()  # outputs start as NaN (conftest): every element was written
        # float32 sums of many terms: the error grows like sqrt(row length)
        tol = 2e-5 * max(1.0, np.sqrt(A.degrees().max(initial=0)))
        np.testing.assert_allclose(Y, Yr, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("C", WIDTHS)
def test_spmm_dtypes_widths(rng, dtype, index_dtype, C):
    A = random_csr(rng, 61, 47, mean_deg=6, index_dtype=index_dtype, dtype=dtype)
    X = rng.standard_normal((47, C)).astype(dtype)
    for reduce in ("sum", "max"):
        got = gs.spmm(A, X, reduce, return_arg=reduce == "max")
        want = ref.spmm(A, X, reduce, return_arg=reduce == "max")
        if reduce == "max":
            np.testing.assert_array_equal(got[1], want[1])
            got, want = got[0], want[0]
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, **TOL[dtype])


def test_spmm_extra_feature_axes_and_1d(rng):
    A = random_csr(rng, 20, 15)
    X = rng.standard_normal((15, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(gs.spmm(A, X), ref.spmm(A, X), **TOL[np.float32])
    x = rng.standard_normal(15).astype(np.float32)
    y = gs.spmm(A, x)
    assert y.shape == (20,)
    np.testing.assert_allclose(y, ref.spmm(A, x), **TOL[np.float32])


def test_spmm_hub_row(rng):
    A = random_csr(rng, 300, 5000, mean_deg=3, hub=100_000)
    X = rng.standard_normal((5000, 8)).astype(np.float32)
    np.testing.assert_allclose(gs.spmm(A, X, "mean"), ref.spmm(A, X, "mean"), rtol=1e-4, atol=1e-5)
    y, arg = gs.spmm(A, X, "min", return_arg=True)
    np.testing.assert_array_equal(arg, ref.spmm(A, X, "min", return_arg=True)[1])


def test_nan_propagates_like_numpy(rng):
    A = random_csr(rng, 40, 30, mean_deg=6, empty_frac=0)
    X = rng.standard_normal((30, 5)).astype(np.float32)
    X[3, 1] = np.nan
    for reduce in ("sum", "mean", "max", "min"):
        got = gs.spmm(A, X, reduce)
        want = ref.spmm(A, X, reduce)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, **TOL[np.float32])
    _, arg = gs.spmm(A, X, "max", return_arg=True)
    np.testing.assert_array_equal(arg, ref.spmm(A, X, "max", return_arg=True)[1])


def test_spmm_deterministic(rng):
    A = random_csr(rng, 500, 400, mean_deg=30, hub=5000)
    X = rng.standard_normal((400, 33)).astype(np.float32)
    for reduce in ("sum", "mean", "max"):
        first = gs.spmm(A, X, reduce)
        for _ in range(3):
            assert np.array_equal(gs.spmm(A, X, reduce), first, equal_nan=True)


@pytest.mark.parametrize("M", [257, 1001, 3001])
def test_spmm_rows_per_subgroup(rng, M):
    # on CPU devices a sub-group of the wide SpMM kernel takes several consecutive rows when a row is
    # one feature tile (policy.hpp): enough rows that the policy picks 2, 4 and 8 of them here, row
    # counts that do not divide, empty rows and a hub; every reduction, arg included, and repeatable
    A = random_csr(rng, M, 300, mean_deg=3.0, empty_frac=0.3, hub=700)
    for C in (16, 40, 128):
        X = rng.standard_normal((300, C)).astype(np.float32)
        for reduce in ("sum", "mean", "max", "min"):
            if reduce in ("max", "min"):
                Y, arg = gs.spmm(A, X, reduce, return_arg=True)
                Yr, argr = ref.spmm(A, X, reduce, return_arg=True)
                np.testing.assert_array_equal(arg, argr)
            else:
                Y, Yr = gs.spmm(A, X, reduce), ref.spmm(A, X, reduce)
            assert not np.isnan(Y).any()
            tol = 2e-5 * np.sqrt(A.degrees().max())
            np.testing.assert_allclose(Y, Yr, rtol=tol, atol=tol)
            assert np.array_equal(gs.spmm(A, X, reduce), Y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sddmm_dot_batch_boundaries(rng, dtype):
    # the dot kernel walks runs of (edge, head) pairs in batches of the sub-group size: rows that
    # straddle batches and sub-groups, runs of empty rows where a batch starts, a hub spread over
    # many sub-groups, pair counts just off a multiple of the batch, widths with and without a
    # partial chunk of features, heads that do not divide the batch; bitwise repeatable
    for M, K, deg, hub in [(3, 5, 40.0, 0), (300, 90, 2.0, 2049), (1000, 37, 0.6, 0), (17, 1, 9.0, 0)]:
        A = random_csr(rng, M, K, mean_deg=deg, hub=hub, empty_frac=0.5, weighted=False)
        for F, H in [(1, 1), (16, 1), (32, 1), (33, 1), (48, 3), (64, 1), (128, 1), (5, 16)]:
            X = rng.standard_normal((M, H, F)).astype(dtype)
            Y = rng.standard_normal((K, H, F)).astype(dtype)
            E = gs.sddmm(A, X, Y, "dot")
            assert E.shape == (A.nnz, H) and not np.isnan(E).any()
            tol = TOL[dtype]["rtol"] * max(1.0, np.sqrt(F))
            np.testing.assert_allclose(E, ref.sddmm(A, X, Y, "dot"), rtol=tol, atol=tol)
            assert np.array_equal(gs.sddmm(A, X, Y, "dot"), E)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sddmm_dot_schedules_same_bits(rng, dtype):
    # F = 16, 32, 64, 128 take the schedule that walks the pairs one at a time with the X slice in
    # registers (policy.hpp; one head: kept across the row), other widths the generic one. All sum
    # each pair in the same order, so they agree bit for bit: one head, head 0 of two heads (the
    # same values twice, and the negated ones), and the generic schedule on the features padded
    # with zeros to a width it takes (+ 0 * 0 leaves every partial sum as it was). Graphs with runs
    # of empty rows, a hub longer than a sub-group's run, rows that straddle runs.
    for M, K, deg, hub in [(700, 300, 3.0, 5000), (40, 40, 60.0, 0), (2000, 50, 0.4, 0)]:
        A = random_csr(rng, M, K, mean_deg=deg, hub=hub, empty_frac=0.4, weighted=False)
        for F in (16, 32, 64, 128):
            X = rng.standard_normal((M, F)).astype(dtype)
            Y = rng.standard_normal((K, F)).astype(dtype)
            E = gs.sddmm(A, X, Y, "dot")
            tol = TOL[dtype]["rtol"] * np.sqrt(F)
            np.testing.assert_allclose(E, ref.sddmm(A, X, Y, "dot"), rtol=tol, atol=tol)
            E2 = gs.sddmm(A, np.stack([X, X], 1), np.stack([Y, -Y], 1), "dot")
            assert np.array_equal(E, E2[:, 0]) and np.array_equal(E, -E2[:, 1])
            pad = 32 if F == 16 else 16  # widths 48, 48, 80, 144: not 16 * a power of two <= 8
            Xp, Yp = (np.pad(a, ((0, 0), (0, pad))) for a in (X, Y))
            assert np.array_equal(E, gs.sddmm(A, Xp, Yp, "dot"))
            Ep2 = gs.sddmm(A, np.stack([Xp, Xp], 1), np.stack([Yp, Yp], 1), "dot")
            assert np.array_equal(E, Ep2[:, 0]) and np.array_equal(E, Ep2[:, 1])


@pytest.mark.parametrize("M, K, deg, hub", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sddmm_dot_add(rng, M, K, deg, hub, dtype):
    A = random_csr(rng, M, K, mean_deg=deg, hub=hub, index_dtype=np.int64 if M % 2 else np.int32)
    for F in (1, 7, 64):
        X = rng.standard_normal((M, F)).astype(dtype)
        Y = rng.standard_normal((K, F)).astype(dtype)
        E = gs.sddmm(A, X, Y, "dot")
        assert E.shape == (A.nnz,) and E.dtype == dtype
        np.testing.assert_allclose(E, ref.sddmm(A, X, Y, "dot"), **TOL[dtype])
    X3, Y3 = rng.standard_normal((M, 4, 9)).astype(dtype), rng.standard_normal((K, 4, 9)).astype(dtype)
    np.testing.assert_allclose(gs.sddmm(A, X3, Y3), ref.sddmm(A, X3, Y3), **TOL[dtype])
    Xa, Ya = rng.standard_normal((M, 3)).astype(dtype), rng.standard_normal((K, 3)).astype(dtype)
    np.testing.assert_array_equal(gs.sddmm(A, Xa, Ya, "add"), ref.sddmm(A, Xa, Ya, "add").astype(dtype))
    xa, ya = rng.standard_normal(M).astype(dtype), rng.standard_normal(K).astype(dtype)
    assert gs.sddmm(A, xa, ya, "add").shape == (A.nnz,)


@pytest.mark.parametrize("edge", ["none", "leaky_relu", "exp", "softmax", "leaky_relu_softmax"])
@pytest.mark.parametrize("op", ["dot", "add"])
@pytest.mark.parametrize("weighted", [True, False])
def test_fusedmm(rng, edge, op, weighted):
    A = random_csr(rng, 57, 43, mean_deg=5, hub=300, weighted=weighted)
    H, F, D = 3, 6, 11
    if op == "dot":
        X, Y = rng.standard_normal((57, H, F)) * 0.3, rng.standard_normal((43, H, F)) * 0.3
    else:
        X, Y = rng.standard_normal((57, H)), rng.standard_normal((43, H))
    Z = rng.standard_normal((43, H, D))
    X, Y, Z = (a.astype(np.float32) for a in (X, Y, Z))
    out, E = gs.fusedmm(A, X, Y, Z, op=op, edge=edge, slope=0.1, return_edges=True)
    out_r, E_r = ref.fusedmm(A, X, Y, Z, op=op, edge=edge, slope=0.1, return_edges=True)
    np.testing.assert_allclose(out, out_r, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(E, E_r, rtol=1e-4, atol=1e-5)
    only = gs.fusedmm(A, X, Y, Z, op=op, edge=edge, slope=0.1)
    assert np.array_equal(only, out)  # writing the edges does not change the result


@pytest.mark.parametrize("F", [16, 32, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_fusedmm_dot_rows_walk(rng, monkeypatch, F, dtype, index_dtype):
    """Dot with one head and F = 16 / 32 / 64 takes fusedmm_dot_rows_sg on the CPU device (runs of rows:
    the scores into E, then per row the edge function and the aggregation); GNNSPARSE_SYCL_FUSEDMM=sg
    forces fusedmm_csr_sg. Both against the oracle for every edge function, with and without values,
    at D = 1, 11, F, 48 and 130 (several column chunks, a partial last one), empty rows (the first and
    the last too), a row of 300 entries; poisoned outputs; edge values of D = 0 bitwise those of
    D > 0; without E asked for (the rows walk's workspace) the same output bits; bitwise repeats."""
    M, K = 301, 97
    for weighted in (True, False):
        A = random_csr(rng, M, K, mean_deg=5, hub=300, weighted=weighted, index_dtype=index_dtype, dtype=dtype)
        rp = np.array(A.rowptr, np.int64)
        rowptr = np.concatenate([[0], rp[:-1], [rp[-1]]])  # an empty first row and an empty last row
        A = gs.CSR(rowptr.astype(index_dtype), A.col, A.val, (M + 1, K))
        X = (rng.standard_normal((M + 1, F)) * 0.3).astype(dtype)
        Y = (rng.standard_normal((K, F)) * 0.3).astype(dtype)
        Zw = rng.standard_normal((K, 130)).astype(dtype)
        for edge in ("none", "leaky_relu", "exp", "softmax", "leaky_relu_softmax"):
            E0 = None
            for D in (0, 1, 11, F, 48, 130):
                Z = np.ascontiguousarray(Zw[:, :D])
                for mode in ("auto", "sg"):
                    monkeypatch.setenv("GNNSPARSE_SYCL_FUSEDMM", mode)
                    out, E = gs.fusedmm(A, X, Y, Z, op="dot", edge=edge, slope=0.1, return_edges=True)
                    out, E = np.asarray(out), np.asarray(E)
                    want_out, want_e = ref.fusedmm(A, X, Y, Z, op="dot", edge=edge, slope=0.1, return_edges=True)
                    # float32: sums of up to 300 terms (exp: large weights), bounded relative to the magnitude
                    tol = TOL[dtype] if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
                    np.testing.assert_allclose(E, want_e, **{**tol, "atol": tol["atol"] * max(1, abs(want_e).max())})
                    if D:
                        scale = max(1, abs(want_out).max())
                        np.testing.assert_allclose(out, want_out, **{**tol, "atol": tol["atol"] * scale})
                    if mode == "auto":
                        if E0 is None:
                            E0 = E
                        assert np.array_equal(E, E0), f"edge values of D = {D} differ from D = 0's"
                        again = gs.fusedmm(A, X, Y, Z, op="dot", edge=edge, slope=0.1, return_edges=True)
                        assert np.array_equal(np.asarray(again[0]), out) and np.array_equal(np.asarray(again[1]), E)
                    if D:
                        alone = np.asarray(gs.fusedmm(A, X, Y, Z, op="dot", edge=edge, slope=0.1))
                        assert np.array_equal(alone, out), f"{mode}: D = {D} without E differs from with E"
    monkeypatch.setenv("GNNSPARSE_SYCL_FUSEDMM", "fast")
    with pytest.raises(ValueError, match="GNNSPARSE_SYCL_FUSEDMM"):
        gs.fusedmm(A, X, Y, Zw[:, :F].copy(), op="dot")


@pytest.mark.parametrize("F,H", [(16, 3), (32, 2), (64, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fusedmm_dot_rows_walk_heads(rng, monkeypatch, F, H, dtype):
    """The rows walk with several heads (dot, F = NF * 16 per head): against the oracle and against
    fusedmm_csr_sg (GNNSPARSE_SYCL_FUSEDMM=sg) for every edge function, with and without values, at
    D = 0, 1, 11, F and 48 per head, with empty rows and a 200-entry row; edge values of D = 0 bitwise
    those of D > 0; without E asked for the same output bits."""
    M, K = 97, 61
    for weighted in (True, False):
        A = random_csr(rng, M, K, mean_deg=6, hub=200, weighted=weighted, dtype=dtype)
        X = (rng.standard_normal((M, H, F)) * 0.3).astype(dtype)
        Y = (rng.standard_normal((K, H, F)) * 0.3).astype(dtype)
        Zw = rng.standard_normal((K, H, 64)).astype(dtype)
        for edge in ("none", "leaky_relu", "exp", "softmax", "leaky_relu_softmax"):
            E0 = None
            for D in (0, 1, 11, F, 48):
                Z = np.ascontiguousarray(Zw[:, :, :D])
                want_out, want_e = ref.fusedmm(A, X, Y, Z, op="dot", edge=edge, slope=0.1, return_edges=True)
                tol = TOL[dtype] if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
                for mode in ("auto", "sg"):
                    monkeypatch.setenv("GNNSPARSE_SYCL_FUSEDMM", mode)
                    out, E = (np.asarray(t) for t in
                              gs.fusedmm(A, X, Y, Z, op="dot", edge=edge, slope=0.1, return_edges=True))
                    np.testing.assert_allclose(E, want_e, **{**tol, "atol": tol["atol"] * max(1, abs(want_e).max())})
                    if D:
                        np.testing.assert_allclose(out, want_out,
                                                   **{**tol, "atol": tol["atol"] * max(1, abs(want_out).max())})
                        alone = np.asarray(gs.fusedmm(A, X, Y, Z, op="dot", edge=edge, slope=0.1))
                        assert np.array_equal(alone, out), f"{mode}: D = {D} without E differs from with E"
                    if mode == "auto":
                        E0 = E if E0 is None else E0
                        assert np.array_equal(E, E0), f"edge values of D = {D} differ from D = 0's"


def test_fusedmm_rows_walk_workspace(rng):
    """The rows walk without the caller's E runs in a workspace kept per device, grown to the largest
    call: calls on graphs of growing and shrinking nnz, float32 and float64 (two element sizes),
    interleaved, each equal bit for bit to the same call with E asked for."""
    calls = []
    for M, deg, dtype in ((50, 3, np.float32), (2000, 12, np.float64), (80, 2, np.float32), (3000, 9, np.float32),
                          (40, 4, np.float64)):
        A = random_csr(rng, M, M, mean_deg=deg, weighted=True, dtype=dtype)
        X, Y, Z = (rng.standard_normal((M, w)).astype(dtype) for w in (32, 32, 20))
        calls.append((A, X, Y, Z))
    for edge in ("none", "softmax"):
        outs = [np.asarray(gs.fusedmm(A, X, Y, Z, op="dot", edge=edge)) for A, X, Y, Z in calls]
        for (A, X, Y, Z), out in zip(calls, outs):
            with_e = np.asarray(gs.fusedmm(A, X, Y, Z, op="dot", edge=edge, return_edges=True)[0])
            assert np.array_equal(out, with_e)
            want = ref.fusedmm(A, X, Y, Z, op="dot", edge=edge)
            tol = 1e-10 if X.dtype == np.float64 else 1e-4
            np.testing.assert_allclose(out, want, rtol=tol, atol=tol * max(1, abs(want).max()))


def test_fusedmm_single_head_2d(rng):
    A = random_csr(rng, 30, 20)
    X, Y, Z = (rng.standard_normal(s).astype(np.float64) for s in ((30, 5), (20, 5), (20, 7)))
    out, E = gs.fusedmm(A, X, Y, Z, edge="softmax", return_edges=True)
    assert out.shape == (30, 7) and E.shape == (A.nnz,)
    out_r, E_r = ref.fusedmm(A, X, Y, Z, edge="softmax", return_edges=True)
    np.testing.assert_allclose(out, out_r, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(E, E_r, rtol=1e-12, atol=1e-12)


def test_non_contiguous_inputs_are_copied(rng):
    A = random_csr(rng, 25, 30)
    X = rng.standard_normal((30, 40)).astype(np.float32)[:, ::3]
    assert not X.flags.c_contiguous
    np.testing.assert_allclose(gs.spmm(A, X), ref.spmm(A, X), **TOL[np.float32])


def test_from_edge_index_then_mean_aggregation(rng):
    n, e = 100, 700
    ei = rng.integers(0, n, (2, e))
    A = gs.CSR.from_edge_index(ei, n)
    X = rng.standard_normal((n, 8)).astype(np.float32)
    want = np.zeros((n, 8))
    np.add.at(want, ei[1], X[ei[0]])
    cnt = np.bincount(ei[1], minlength=n)
    want[cnt > 0] /= cnt[cnt > 0, None]
    np.testing.assert_allclose(gs.spmm(A, X, "mean"), want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- USM arrays on a dpctl queue
def test_usm_inputs_stay_on_queue(rng):
    import dpctl
    import dpnp

    q = dpctl.SyclQueue("opencl:cpu")
    A = random_csr(rng, 64, 50, mean_deg=7)
    X = rng.standard_normal((50, 12)).astype(np.float32)
    Xu = dpnp.asarray(X, sycl_queue=q)
    Y = gs.spmm(A, Xu, "sum")
    assert isinstance(Y, dpnp.ndarray) and Y.sycl_queue == q and Y.shape == (64, 12)
    np.testing.assert_allclose(Y.asnumpy(), ref.spmm(A, X), **TOL[np.float32])
    # chained on the queue without host round trips: spmm then sddmm on the result
    E = gs.sddmm(A, Y, Xu, "dot")
    np.testing.assert_allclose(E.asnumpy(), ref.sddmm(A, ref.spmm(A, X), X), rtol=1e-4, atol=1e-4)
    out = gs.fusedmm(A, Y, Xu, Xu, edge="softmax")
    Yr = ref.spmm(A, X)
    np.testing.assert_allclose(out.asnumpy(), ref.fusedmm(A, Yr, X, X, edge="softmax"), rtol=1e-4, atol=1e-4)
    Ym, arg = gs.spmm(A, Xu, "max", return_arg=True)
    np.testing.assert_array_equal(arg.asnumpy(), ref.spmm(A, X, "max", return_arg=True)[1])
    # a CSR that already lives in USM on the same queue
    Au = gs.CSR(dpnp.asarray(A.rowptr, sycl_queue=q), dpnp.asarray(A.col, sycl_queue=q),
                dpnp.asarray(A.val, sycl_queue=q), A.shape)
    np.testing.assert_allclose(gs.spmm(Au, Xu).asnumpy(), ref.spmm(A, X), **TOL[np.float32])
    # strided dpnp inputs are copied, not rejected
    Xs = dpnp.asarray(rng.standard_normal((12, 50)).astype(np.float32), sycl_queue=q).T
    np.testing.assert_allclose(gs.spmm(A, Xs).asnumpy(), ref.spmm(A, Xs.asnumpy()), **TOL[np.float32])


def test_usm_csr_validates_on_construction():
    import dpctl
    import dpnp

    q = dpctl.SyclQueue("opencl:cpu")
    with pytest.raises(ValueError, match="decreases at row 1"):
        gs.CSR(dpnp.asarray(np.array([0, 3, 2], np.int32), sycl_queue=q),
               dpnp.asarray(np.array([0, 1], np.int32), sycl_queue=q), None, (2, 3))


def test_kernels_compiled_once_per_instance(rng):
    from gnnsparse import _sycl

    A = random_csr(rng, 40, 40)
    X = rng.standard_normal((40, 16)).astype(np.float32)
    gs.spmm(A, X, "sum")
    n = _sycl.kernel_cache_size()
    for _ in range(5):
        gs.spmm(A, X, "sum")
    assert _sycl.kernel_cache_size() == n


@pytest.mark.parametrize("C", [1, 3, 16, 40])
def test_max_min_ties_and_nan_every_kernel_shape(rng, C):
    # integer-valued messages force ties; the smallest edge index must win in every kernel variant
    A = random_csr(rng, 80, 12, mean_deg=20, empty_frac=0.1, weighted=False)
    X = rng.integers(-2, 3, (12, C)).astype(np.float32)
    X[rng.integers(12), rng.integers(C)] = np.nan
    for reduce in ("max", "min"):
        Y, arg = gs.spmm(A, X, reduce, return_arg=True)
        Yr, argr = ref.spmm(A, X, reduce, return_arg=True)
        np.testing.assert_array_equal(arg, argr)
        np.testing.assert_array_equal(Y, Yr.astype(np.float32))


def test_torch_cpu_tensors_round_trip(rng):
    torch = pytest.importorskip("torch")
    A = random_csr(rng, 30, 20)
    X = torch.from_numpy(rng.standard_normal((20, 9)).astype(np.float32))
    Y, arg = gs.spmm(A, X, "max", return_arg=True)
    assert isinstance(Y, torch.Tensor) and isinstance(arg, torch.Tensor)
    Yr, argr = ref.spmm(A, X.numpy(), "max", return_arg=True)
    np.testing.assert_allclose(Y.numpy(), Yr, **TOL[np.float32])
    np.testing.assert_array_equal(arg.numpy(), argr)
    X2 = torch.from_numpy(rng.standard_normal((30, 9)).astype(np.float32))
    E = gs.sddmm(A, X2, X, "dot")
    assert isinstance(E, torch.Tensor) and E.shape == (A.nnz,)


def test_numpy_on_a_device_without_host_access(rng, monkeypatch):
    # a default device that cannot read host memory (e.g. a GPU): inputs go through shared USM, the
    # CSR is uploaded once and cached, results still come back as NumPy
    import dpnp

    from gnnsparse import _sycl_backend

    monkeypatch.setattr(_sycl_backend.backend, "host_direct", False)
    A = random_csr(rng, 40, 30)
    X = rng.standard_normal((30, 20)).astype(np.float32)
    Y = gs.spmm(A, X)
    assert isinstance(Y, np.ndarray)
    np.testing.assert_allclose(Y, ref.spmm(A, X), **TOL[np.float32])
    (view, _), = A._views.values()
    assert all(isinstance(a, dpnp.ndarray) for a in view.keep if a is not None)
    np.testing.assert_allclose(gs.spmm(A, X, "mean"), ref.spmm(A, X, "mean"), **TOL[np.float32])
    assert len(A._views) == 1  # uploaded once


def test_numpy_fast_path_without_poison(rng, monkeypatch):
    # the per-call fast path (taken when outputs are not poisoned) computes the same results
    from gnnsparse import _sycl_backend

    monkeypatch.setattr(_sycl_backend, "_POISON", False)
    A = random_csr(rng, 50, 40, mean_deg=5)
    X = rng.standard_normal((40, 7)).astype(np.float32)
    np.testing.assert_allclose(gs.spmm(A, X), ref.spmm(A, X), **TOL[np.float32])
    Y, arg = gs.spmm(A, X, "min", return_arg=True)
    np.testing.assert_array_equal(arg, ref.spmm(A, X, "min", return_arg=True)[1])


def test_usm_outputs_are_never_shared_while_alive(rng):
    # outputs come from a pool of USM blocks: a block is reused only after every array over it is gone
    import dpnp

    A = random_csr(rng, 40, 30)
    X = rng.standard_normal((30, 8)).astype(np.float32)
    Xd = dpnp.asarray(X)
    kept = [gs.spmm(A, Xd * float(i)) for i in range(6)]  # more than the pool keeps per size
    view = kept[0][1:]  # a view keeps its block alive too
    del kept[0]
    for i, Y in enumerate(kept, start=1):
        np.testing.assert_allclose(dpnp.asnumpy(Y), i * ref.spmm(A, X), rtol=1e-4, atol=1e-4)
    from gnnsparse._sycl_backend import _POOL

    del kept
    held = _POOL.held
    for _ in range(3):  # blocks of dropped outputs are reused (the pool does not grow); the view's is not
        np.testing.assert_allclose(dpnp.asnumpy(gs.spmm(A, Xd * 7.0)), 7 * ref.spmm(A, X), rtol=1e-4, atol=1e-4)
    assert _POOL.held == held
    np.testing.assert_allclose(dpnp.asnumpy(view), 0 * ref.spmm(A, X)[1:], atol=1e-6)
