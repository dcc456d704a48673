"""Property tests (hypothesis): every op on every backend present, on random inputs, against
gnnsparse.reference; every bad input raises a clear exception and leaves the process usable.

Profiles (GNNSPARSE_HYPOTHESIS_PROFILE, default "ci"):
  ci   - derandomized (a fixed seed: every run tries the same examples), small example counts, a
         bounded set of SYCL kernel instances; the whole file runs in well under a minute on 2 cores.
  long - random, >= 1,000 examples per test and every SYCL kernel instance (each costs ~1 s of
         run-time compilation the first time in a process): tens of minutes.
  gpu  - random, 300 examples per test: for a GPU machine, where kernels are compiled ahead of time
         (tests/gpu/reliability.sh runs it with a fixed --hypothesis-seed).

What is drawn: shapes from 0 up (M != K, empty rows, one hub row longer than the CUDA hub segment,
unsorted rows, duplicates, self loops), int32/int64 indices, every dtype the backend takes, odd
widths and extra feature axes, weighted or not, NaN/+-inf values, small-integer values (ties and
exact sums), every reduction / op / edge function, NumPy and torch CPU inputs (SYCL), aligned and
unaligned tensors (CUDA). The SYCL backend compiles one kernel per (dtype, index type, op, width
class), so what the SYCL strategies draw first is one of a fixed list of instance configurations
(a pairwise covering subset in "ci", all of them in "long") and then the free parameters.
"""
from __future__ import annotations

import itertools
import os
import random

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import gnnsparse as gs  # noqa: E402

from _reliability import (  # noqa: E402
    DTYPES, EDGES, REDUCTIONS, acc_dtype, assert_exact, assert_match, assert_usable, backend_params,
    dtype_of, exact_values, expect_fusedmm, expect_sddmm, expect_spmm, host, kernel_cache_size,
    kernel_val_dtype, make_graph, poison_cuda_allocator, ref_csr, require, to_backend, torch_or_none, values,
)

_COMMON = dict(deadline=None, database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                      HealthCheck.filter_too_much])
settings.register_profile("ci", derandomize=True, max_examples=30, **_COMMON)
settings.register_profile("long", derandomize=False, max_examples=1000, **_COMMON)
settings.register_profile("gpu", derandomize=False, max_examples=300, **_COMMON)
PROFILE = os.environ.get("GNNSPARSE_HYPOTHESIS_PROFILE", "ci")
if PROFILE not in ("ci", "long", "gpu"):
    raise ValueError(f"GNNSPARSE_HYPOTHESIS_PROFILE must be ci, long or gpu, got {PROFILE!r}")
LONG = PROFILE == "long"
BASE = settings.get_profile(PROFILE)


def examples(ci: int, long: int = 1000):
    n = {"ci": ci, "long": long, "gpu": 300}[PROFILE]
    return settings(BASE, max_examples=n)


# ---------------------------------------------------------------- SYCL kernel instance budget
def _sycl_subgroup() -> int:
    try:
        from gnnsparse import _sycl_backend

        return int(_sycl_backend.device_caps()["preferred_sub_group_size"])
    except Exception:
        return 16


SG = _sycl_subgroup()


def _width_classes_spmm():
    """Width ranges that select one SYCL SpMM kernel each: narrow rows (C < SG, lanes over edges,
    one instance per power of two) and wide rows (lanes over features, V = 1, 2, 4, 8 columns each;
    the last class also spans several tiles)."""
    out, v = [], 1
    while v < SG:
        out.append((v // 2 + 1, v))
        v *= 2
    out += [(SG, SG), (SG + 1, 2 * SG), (2 * SG + 1, 4 * SG), (4 * SG + 1, 20 * SG)]
    return out


def _width_classes_fused():
    return [(0, SG), (SG + 1, 2 * SG), (2 * SG + 1, 4 * SG), (4 * SG + 1, 12 * SG)]


def _covering(axes: dict, n: int, seed: int):
    """A greedy pairwise-covering subset of the product of `axes` (n configurations, deterministic):
    every value of every axis, and as many value pairs as n allows."""
    names = list(axes)
    full = [dict(zip(names, vals)) for vals in itertools.product(*axes.values())]
    random.Random(seed).shuffle(full)
    pairs = lambda c: {(a, c[a], b, c[b]) for a, b in itertools.combinations(names, 2)}  # noqa: E731
    left = set().union(*(pairs(c) for c in full))
    chosen = []
    while len(chosen) < n and left:
        best = max(full, key=lambda c: len(pairs(c) & left))
        chosen.append(best)
        left -= pairs(best)
    return chosen


def _valid_spmm(c):
    return c["reduce"] in ("max", "min") or not c["arg"]


SPMM_AXES = dict(dtype=DTYPES["sycl"], itype=("int32", "int64"), reduce=REDUCTIONS, weighted=(True, False),
                 arg=(True, False), width=tuple(_width_classes_spmm()))
SDDMM_AXES = dict(dtype=DTYPES["sycl"], itype=("int32", "int64"), kind=("dot_wide", "dot_narrow", "add"))
FUSED_AXES = dict(dtype=DTYPES["sycl"], itype=("int32", "int64"), op=("dot", "add"), edge=EDGES,
                  weighted=(True, False), width=tuple(_width_classes_fused()))


def _configs(axes, n_ci, seed, valid=lambda c: True):
    if LONG:
        names = list(axes)
        return [c for c in (dict(zip(names, v)) for v in itertools.product(*axes.values())) if valid(c)]
    return [c for c in _covering(axes, n_ci, seed) if valid(c)] or [next(iter(_covering(axes, 1, seed)))]


SYCL_SPMM = _configs(SPMM_AXES, 11, 1, _valid_spmm)
SYCL_SDDMM = _configs(SDDMM_AXES, 4, 2)
SYCL_FUSED = _configs(FUSED_AXES, 8, 3)


# ---------------------------------------------------------------- strategies
@st.composite
def graphs(draw, itype, max_n=24):
    """(rowptr, col, shape, seed) with every awkward structure."""
    M = draw(st.integers(0, max_n))
    K = draw(st.one_of(st.just(M), st.integers(0, max_n)))
    mean_deg = draw(st.sampled_from([0.0, 1.0, 3.0, 8.0]))
    hub = draw(st.sampled_from([0, 0, 0, 300])) if M and K else 0
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    rowptr, col = make_graph(rng, M, K, mean_deg=mean_deg, empty_frac=draw(st.sampled_from([0.0, 0.3])), hub=hub)
    return rowptr.astype(itype), col.astype(itype), (M, K), rng


def _csr(rowptr, col, val, shape, backend, on_device):
    if backend == "cuda" and on_device:
        torch = torch_or_none()
        t = lambda a: None if a is None else torch.from_numpy(np.ascontiguousarray(a)).cuda()  # noqa: E731
        return gs.CSR(t(rowptr), t(col), t(val), shape)
    return gs.CSR(rowptr, col, val, shape)


def _val(rng, nnz, weighted, mode, dtype):
    if not weighted:
        return None
    vm = "ties" if mode == "ties" else ("special" if mode == "special" and rng.random() < 0.5 else "normal")
    v = values(rng, nnz, vm, scale=2.0)
    if vm == "ties":
        v = np.where(v == 0, 1.0, v)
    kd = kernel_val_dtype("x", dtype)
    return v.astype(kd)  # values stored in the dtype the kernels read, so the reference sees the same


def _spmm_config(draw, backend):
    if backend == "sycl":
        c = draw(st.sampled_from(SYCL_SPMM))
        lo, hi = c["width"]
        C = draw(st.integers(lo, hi))
        return c["dtype"], c["itype"], c["reduce"], c["weighted"], c["arg"], C
    dtype = draw(st.sampled_from(DTYPES["cuda"]))
    reduce = draw(st.sampled_from(REDUCTIONS))
    return (dtype, draw(st.sampled_from(["int32", "int64"])), reduce, draw(st.booleans()),
            reduce in ("max", "min") and draw(st.booleans()), draw(st.integers(1, 200)))


def _feature_shape(draw, rows, C):
    """(rows, C) mostly; (rows,) for C == 1; (rows, a, b) with a * b == C sometimes."""
    form = draw(st.sampled_from(["2d", "2d", "1d", "3d"]))
    if form == "1d" and C == 1:
        return (rows,)
    if form == "3d" and C > 0:
        divs = [a for a in range(1, C + 1) if C % a == 0]
        a = draw(st.sampled_from(divs))
        return (rows, a, C // a)
    return (rows, C)


# ---------------------------------------------------------------- ops against the reference
@pytest.mark.parametrize("backend", backend_params())
@examples(ci=40)
@given(data=st.data())
def test_spmm_matches_reference(backend, data):
    require(backend)
    draw = data.draw
    dtype, itype, reduce, weighted, want_arg, C = _spmm_config(draw, backend)
    if draw(st.integers(0, 19)) == 0:
        C = 0  # no kernel runs: every output is still well formed
    rowptr, col, (M, K), rng = draw(graphs(itype))
    mode = draw(st.sampled_from(["normal", "ties", "special"]))
    val = _val(rng, len(col), weighted, mode, dtype)
    scale = 1.0 if dtype != "float16" else 0.5
    Xv = values(rng, _feature_shape(draw, K, C), mode, scale, specials=draw(st.integers(1, 3)))
    framework = draw(st.sampled_from(["numpy", "torch"])) if backend == "sycl" and torch_or_none() else "numpy"
    offset = draw(st.sampled_from([0, 1])) if backend == "cuda" else 0
    A = _csr(rowptr, col, val, (M, K), backend, draw(st.booleans()))
    X = to_backend(Xv, backend, dtype, framework, offset)
    Xh = exact_values(X)
    R = ref_csr(rowptr, col, val, (M, K))
    if backend == "cuda":
        poison_cuda_allocator()
    if want_arg:
        Y, arg = gs.spmm(A, X, reduce, return_arg=True)
    else:
        Y, arg = gs.spmm(A, X, reduce), None
    assert dtype_of(Y) == dtype and tuple(Y.shape) == (M,) + Xh.shape[1:]
    if framework == "torch":
        assert isinstance(Y, torch_or_none().Tensor)
    Yr, argr, bound = expect_spmm(R, Xh, reduce, dtype)
    if reduce in ("max", "min"):
        assert_exact(host(Y), Yr, f"spmm {reduce} values")
        if want_arg:
            assert dtype_of(arg) == "int64"
            assert_exact(host(arg), argr, f"spmm {reduce} arg")
    else:
        assert_match(host(Y), Yr, bound, f"spmm {reduce}")


def _sddmm_config(draw, backend):
    if backend == "sycl":
        c = draw(st.sampled_from(SYCL_SDDMM))
        op = "add" if c["kind"] == "add" else "dot"
        F = {"dot_wide": st.integers(max(1, SG // 2), 3 * SG), "dot_narrow": st.integers(0, max(0, SG // 2 - 1)),
             "add": st.just(1)}[c["kind"]]
        return c["dtype"], c["itype"], op, draw(F)
    op = draw(st.sampled_from(["dot", "add"]))
    return draw(st.sampled_from(DTYPES["cuda"])), draw(st.sampled_from(["int32", "int64"])), op, draw(st.integers(0, 80))


@pytest.mark.parametrize("backend", backend_params())
@examples(ci=25)
@given(data=st.data())
def test_sddmm_matches_reference(backend, data):
    require(backend)
    draw = data.draw
    dtype, itype, op, F = _sddmm_config(draw, backend)
    rowptr, col, (M, K), rng = draw(graphs(itype))
    H = draw(st.integers(1, 4))
    heads = draw(st.booleans())
    if op == "dot":
        xs, ys = ((M, H, F), (K, H, F)) if heads else ((M, F), (K, F))
    else:
        xs, ys = ((M, H), (K, H)) if heads else ((M,), (K,))
    mode = draw(st.sampled_from(["normal", "ties", "special"]))
    scale = 1.0 / np.sqrt(max(F, 1))
    specials = draw(st.integers(1, 2))
    offset = draw(st.sampled_from([0, 1])) if backend == "cuda" else 0
    A = _csr(rowptr, col, None, (M, K), backend, draw(st.booleans()))
    X = to_backend(values(rng, xs, mode, scale, specials), backend, dtype, offset=offset)
    Y = to_backend(values(rng, ys, mode, scale, specials), backend, dtype, offset=offset)
    R = ref_csr(rowptr, col, None, (M, K))
    if backend == "cuda":
        poison_cuda_allocator()
    E = gs.sddmm(A, X, Y, op)
    want_shape = (len(col),) if not heads else (len(col), H)
    assert dtype_of(E) == dtype and tuple(E.shape) == want_shape
    Er, bound = expect_sddmm(R, exact_values(X), exact_values(Y), op, dtype)
    if op == "add":
        assert_exact(host(E), Er, "sddmm add")
    else:
        assert_match(host(E), Er, bound, "sddmm dot")



def _fused_config(draw, backend):
    if backend == "sycl":
        c = draw(st.sampled_from(SYCL_FUSED))
        lo, hi = c["width"]
        return c["dtype"], c["itype"], c["op"], c["edge"], c["weighted"], draw(st.integers(lo, hi))
    return (draw(st.sampled_from(DTYPES["cuda"])), draw(st.sampled_from(["int32", "int64"])),
            draw(st.sampled_from(["dot", "add"])), draw(st.sampled_from(EDGES)), draw(st.booleans()),
            draw(st.integers(0, 150)))


@pytest.mark.parametrize("backend", backend_params())
@examples(ci=30)
@given(data=st.data())
def test_fusedmm_matches_reference(backend, data):
    require(backend)
    draw = data.draw
    dtype, itype, op, edge, weighted, D = _fused_config(draw, backend)
    rowptr, col, (M, K), rng = draw(graphs(itype))
    H = draw(st.integers(1, 3))
    F = draw(st.integers(1, 20))
    one_head = H == 1 and draw(st.booleans())
    if op == "dot":
        xs, ys = ((M, F), (K, F)) if one_head else ((M, H, F), (K, H, F))
    else:
        xs, ys = ((M,), (K,)) if one_head else ((M, H), (K, H))
    zs = (K, D) if one_head or (H == 1 and draw(st.booleans())) else (K, H, D)
    if op == "add" and one_head:
        # 1-D add inputs are one head; Z must then be 2-D or (K, 1, D)
        zs = (K, D)
    mode = draw(st.sampled_from(["normal", "normal", "special"]))
    specials = draw(st.integers(1, 2))
    scale = 1.0 / np.sqrt(F) if op == "dot" else 0.5
    slope = draw(st.sampled_from([0.2, 0.01, 1.5]))
    offset = draw(st.sampled_from([0, 1])) if backend == "cuda" else 0
    val = _val(rng, len(col), weighted, "normal" if mode != "special" else "special", dtype)
    A = _csr(rowptr, col, val, (M, K), backend, draw(st.booleans()))
    X = to_backend(values(rng, xs, mode, scale, specials), backend, dtype, offset=offset)
    Y = to_backend(values(rng, ys, mode, scale, specials), backend, dtype, offset=offset)
    Z = to_backend(values(rng, zs, mode, 1.0, specials), backend, dtype, offset=offset)
    R = ref_csr(rowptr, col, val, (M, K))
    want_edges = draw(st.booleans())
    if backend == "cuda":
        poison_cuda_allocator()
    res = gs.fusedmm(A, X, Y, Z, op=op, edge=edge, slope=slope, return_edges=want_edges)
    out, E = res if want_edges else (res, None)
    Xh, Yh, Zh = exact_values(X), exact_values(Y), exact_values(Z)
    out_r, E_r, out_b, e_b = expect_fusedmm(R, Xh, Yh, Zh, op, edge, slope, dtype)
    # the frontend's shapes: Out follows Z ((M, D) for a 2-D Z), the edges follow X ((nnz,) for
    # 2-D dot / 1-D add inputs)
    out_shape = (M, D) if len(zs) == 2 else (M, zs[1], D)
    e_shape = (len(col),) if len(xs) == (2 if op == "dot" else 1) else (len(col), xs[1])
    assert dtype_of(out) == dtype and tuple(out.shape) == out_shape
    assert_match(host(out), out_r.reshape(out_shape), out_b.reshape(out_shape), f"fusedmm {op}/{edge} out")
    if want_edges:
        assert dtype_of(E) == dtype and tuple(E.shape) == e_shape
        assert_match(host(E), E_r.reshape(e_shape), e_b.reshape(e_shape), f"fusedmm {op}/{edge} edges")


# ---------------------------------------------------------------- CSR construction and validation
@examples(ci=40)
@given(data=st.data())
def test_csr_valid_inputs_round_trip(data):
    draw = data.draw
    it_row, it_col = draw(st.sampled_from(["int32", "int64"])), draw(st.sampled_from(["int32", "int64"]))
    rowptr, col, (M, K), rng = draw(graphs("int64", max_n=40))
    weighted = draw(st.booleans())
    val = rng.standard_normal(len(col)).astype(draw(st.sampled_from(["float32", "float64"]))) if weighted else None
    give_shape = draw(st.booleans())
    A = gs.CSR(rowptr.astype(it_row), col.astype(it_col), val, (M, K) if give_shape else None)
    wide = "int64" if "int64" in (it_row, it_col) else "int32"
    assert A.index_dtype == wide and A.nnz == len(col)
    assert A.shape == ((M, K) if give_shape else (M, int(col.max()) + 1 if len(col) else 0))
    np.testing.assert_array_equal(A.degrees(), np.diff(rowptr))
    S = A.to_scipy()
    dense = np.zeros(A.shape)
    rows = np.repeat(np.arange(M), np.diff(rowptr))
    np.add.at(dense, (rows, col), 1.0 if val is None else val.astype(np.float64))
    np.testing.assert_allclose(S.toarray(), dense, rtol=1e-6, atol=1e-6)
    T = A.T
    assert T.shape == A.shape[::-1] and T.nnz == A.nnz
    np.testing.assert_allclose(T.to_scipy().toarray(), dense.T, rtol=1e-6, atol=1e-6)
    if val is not None:
        np.testing.assert_array_equal(host(T.val), host(A.val)[T.perm])
    assert T.T is A


@examples(ci=30)
@given(data=st.data())
def test_csr_from_edge_index(data):
    draw = data.draw
    n = draw(st.integers(0, 30))
    e = draw(st.integers(0, 80)) if n else 0
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    ei = rng.integers(0, max(n, 1), (2, e)).astype(draw(st.sampled_from(["int32", "int64"])))
    num_nodes = n + draw(st.integers(0, 3)) if draw(st.booleans()) or n == 0 else None
    w = rng.standard_normal(e).astype(np.float32) if draw(st.booleans()) else None
    A = gs.CSR.from_edge_index(ei, num_nodes, w)
    N = num_nodes if num_nodes is not None else (int(ei.max()) + 1 if e else 0)
    assert A.shape == (N, N) and A.nnz == e
    perm = np.argsort(ei[1], kind="stable")
    np.testing.assert_array_equal(host(A.edge_perm), perm)
    np.testing.assert_array_equal(host(A.col), ei[0][perm])
    np.testing.assert_array_equal(A.degrees(), np.bincount(ei[1], minlength=N))
    if w is not None:
        np.testing.assert_array_equal(host(A.val), w[perm])


CORRUPTIONS = ("rowptr0", "decrease", "last", "col_neg", "col_big", "float_index", "two_d", "shape_rows",
               "neg_shape", "val_len", "wrapped", "edge_oob")


@examples(ci=40)
@given(data=st.data())
def test_csr_invalid_inputs_raise_clearly(data):
    draw = data.draw
    what = draw(st.sampled_from(CORRUPTIONS))
    rowptr, col, (M, K), rng = draw(graphs("int64", max_n=20))
    it = draw(st.sampled_from(["int32", "int64"]))
    rowptr, col = rowptr.astype(it), col.astype(it)
    shape = (M, K)
    nnz = len(col)
    if what == "rowptr0":
        rowptr = rowptr.copy()
        rowptr[0] = draw(st.sampled_from([1, -1, 5]))
        match = r"rowptr\[0\] must be 0|decreases|rowptr\[-1\]"
    elif what == "decrease":
        assume(M >= 1 and nnz >= 1)
        rowptr = rowptr.copy()
        i = int(np.flatnonzero(np.diff(rowptr) > 0)[draw(st.integers(0, 10**6)) % np.count_nonzero(np.diff(rowptr))])
        rowptr[i] = rowptr[i + 1] + 1  # makes rowptr[i] > rowptr[i + 1]
        match = r"decreases at row|rowptr\[0\] must be 0|rowptr\[-1\]"
    elif what == "last":
        rowptr = rowptr.copy()
        rowptr[-1] += draw(st.sampled_from([1, 7]))
        match = r"rowptr\[-1\] must equal nnz" if M else r"rowptr\[0\] must be 0"  # M = 0: one entry
    elif what == "col_neg":
        assume(nnz >= 1)
        col = col.copy()
        col[draw(st.integers(0, nnz - 1))] = -draw(st.integers(1, 5))
        match = r"col\[\d+\] = -\d+ \(row \d+\) is outside"
    elif what == "col_big":
        assume(nnz >= 1)
        col = col.copy()
        col[draw(st.integers(0, nnz - 1))] = K + draw(st.sampled_from([0, 1, 1000]))
        match = r"col\[\d+\] = \d+ \(row \d+\) is outside"
    elif what == "float_index":
        col = col.astype(np.float32)
        match = "int32 or int64"
    elif what == "two_d":
        rowptr = np.stack([rowptr, rowptr])
        match = "must be 1-D"
    elif what == "shape_rows":
        shape = (M + draw(st.sampled_from([1, 2])), K)
        match = r"rowptr has \d+ entries"
    elif what == "neg_shape":
        shape = (M, -1 - draw(st.integers(0, 3)))
        match = "non-negative|outside"
    elif what == "val_len":
        val = np.ones(nnz + draw(st.sampled_from([1, 2])), np.float32)
        with pytest.raises(ValueError, match="CSR val must have shape"):
            gs.CSR(rowptr, col, val, shape)
        assert_usable("sycl") if _sycl_here() else None
        return
    elif what == "wrapped":
        # an int32 rowptr that wrapped past 2**31 - 1
        rowptr = np.array([0, 2**31 - 1, -(2**31) + 2], np.int64).astype(np.int32)
        col, shape = np.zeros(3, np.int32), (2, 1)
        match = "decreases at row 1"
    else:  # edge_oob
        n = max(M, 1)
        ei = np.array([[0, n + draw(st.integers(0, 3))], [0, 0]], it)
        with pytest.raises(ValueError, match=r"edge 1 = \(\d+, 0\) is outside"):
            gs.CSR.from_edge_index(ei, n)
        assert_usable("sycl") if _sycl_here() else None
        return
    with pytest.raises((ValueError, TypeError), match=match):
        gs.CSR(rowptr, col, None, shape)
    if _sycl_here():
        assert_usable("sycl")


def _sycl_here():
    from _reliability import backend_ok

    return backend_ok("sycl")


# ---------------------------------------------------------------- bad op arguments
BAD_CALLS = ("x_rows", "x_int", "x_bool", "x_complex", "x_unsupported", "x_scalar", "y_dtype", "y_rows",
             "feature_mismatch", "reduce_name", "return_arg_sum", "op_name", "edge_name", "dot_4d", "add_3d",
             "z_heads", "z_rows", "not_csr")


@pytest.mark.parametrize("backend", backend_params())
@examples(ci=40)
@given(data=st.data())
def test_bad_arguments_raise_before_any_kernel(backend, data):
    require(backend)
    draw = data.draw
    what = draw(st.sampled_from(BAD_CALLS))
    rowptr, col, (M, K), rng = draw(graphs("int32", max_n=12))
    A = gs.CSR(rowptr, col, None, (M, K))
    A2 = A if K != 1 else gs.CSR(np.zeros(2, np.int32), np.zeros(0, np.int32), None, (1, 2))
    dt = "float32"
    F = draw(st.integers(1, 9))
    torch = torch_or_none()

    def dense(shape, dtype=dt):
        return to_backend(rng.standard_normal(shape), backend, dtype)

    def raw(shape, np_dtype, torch_dtype):
        if backend == "sycl":
            return np.zeros(shape, np_dtype)
        return torch.zeros(shape, dtype=torch_dtype, device="cuda")

    X, Xm, Y, Z = dense((K, F)), dense((M, F)), dense((K, F)), dense((K, 5))
    unsupported = [d for d in ("float16", "bfloat16") if d not in DTYPES[backend]]
    calls = {
        "x_rows": (lambda: gs.spmm(A, dense((K + draw(st.integers(1, 3)), F))), "X needs"),
        "x_int": (lambda: gs.spmm(A, raw((K, F), np.int64, torch and torch.int64)), "dtype int64"),
        "x_bool": (lambda: gs.spmm(A, raw((K, F), np.bool_, torch and torch.bool)), "dtype bool"),
        "x_complex": (lambda: gs.spmm(A, raw((K, F), np.complex64, torch and torch.complex64)), "complex64"),
        "x_unsupported": ((lambda: gs.spmm(A, np.zeros((K, F), np.float16))) if unsupported else
                          (lambda: gs.spmm(A, raw((K, F), np.int32, torch and torch.int32))), "takes|dtype"),
        # (K == 1 is test_zero_dim_features_are_rejected, a known bug)
        "x_scalar": (lambda: gs.spmm(A2, dense(()) if backend == "cuda" else np.float32(1.0)), "X has shape|needs"),
        "y_dtype": (lambda: gs.sddmm(A, Xm, dense((K, F), "float64")), "Y has dtype float64 but X has float32"),
        "y_rows": (lambda: gs.sddmm(A, Xm, dense((K + 1, F))), "Y needs"),
        "feature_mismatch": (lambda: gs.sddmm(A, Xm, dense((K, F + 1))), "must agree beyond their first axis"),
        "reduce_name": (lambda: gs.spmm(A, X, draw(st.sampled_from(["prod", "SUM", "", "avg"]))), "reduce must be"),
        "return_arg_sum": (lambda: gs.spmm(A, X, draw(st.sampled_from(["sum", "mean"])), return_arg=True),
                           "return_arg"),
        "op_name": (lambda: gs.sddmm(A, Xm, Y, "mul"), "op must be"),
        "edge_name": (lambda: gs.fusedmm(A, Xm, Y, Z, edge="relu"), "edge must be"),
        "dot_4d": (lambda: gs.sddmm(A, dense((M, 1, 2, F)), dense((K, 1, 2, F))), "dot"),
        "add_3d": (lambda: gs.sddmm(A, dense((M, 2, F)), dense((K, 2, F)), "add"), "add"),
        "z_heads": (lambda: gs.fusedmm(A, dense((M, 2, F)), dense((K, 2, F)), dense((K, 3, 4))), "Z has shape"),
        "z_rows": (lambda: gs.fusedmm(A, Xm, Y, dense((K + 1, 4))), "Z"),
        "not_csr": (lambda: gs.spmm(A.to_scipy(), X), "must be a gnnsparse.CSR"),
    }
    fn, match = calls[what]
    before = kernel_cache_size()
    with pytest.raises((ValueError, TypeError), match=match):
        fn()
    if backend == "sycl" and before is not None:
        assert kernel_cache_size() == before, "a kernel was built before the argument error was raised"
    assert_usable(backend)


@pytest.mark.parametrize("backend", [
    pytest.param("sycl", marks=pytest.mark.sycl),
    pytest.param("cuda", marks=pytest.mark.cuda)])
def test_zero_dim_features_are_rejected(backend):
    require(backend)
    A = gs.CSR(np.array([0, 1, 1], np.int32), np.array([0], np.int32), None, (2, 1))
    X = to_backend(np.array(2.0), backend, "float32")
    with pytest.raises(ValueError, match="X has shape"):
        gs.spmm(A, X)


@pytest.mark.parametrize("backend", [
    pytest.param("sycl", marks=pytest.mark.sycl), pytest.param("cuda", marks=pytest.mark.cuda)])
@pytest.mark.parametrize("score", ["nan_alone", "inf_among_finite", "-inf_alone"])
def test_softmax_nan_and_inf_scores(backend, score):
    """ops.hpp: softmax w = exp(e - max_row e) / sum_row exp(e - max_row e): a NaN score, or +inf
    (inf - inf), makes the row's weights NaN; a row whose only score is -inf too (-inf + inf)."""
    require(backend)
    rng = np.random.default_rng(0)
    ncol = 3 if score == "inf_among_finite" else 1
    A = gs.CSR(np.array([0, ncol], np.int32), np.arange(ncol, dtype=np.int32), None, (1, 3))
    Xv = np.ones((1, 2, 4))
    Yv = rng.uniform(-1, 1, (3, 2, 4))
    Yv[ncol // 2, 0, 0] = {"nan_alone": np.nan, "inf_among_finite": np.inf, "-inf_alone": -np.inf}[score]  # head 0
    Zv = rng.uniform(-1, 1, (3, 2, 5))
    out, E = gs.fusedmm(A, to_backend(Xv, backend, "float32"), to_backend(Yv, backend, "float32"),
                        to_backend(Zv, backend, "float32"), edge="softmax", return_edges=True)
    with np.errstate(all="ignore"):
        want, want_e = gs.reference.fusedmm(A, Xv, Yv, Zv, edge="softmax", return_edges=True)
    assert np.isnan(want[0, 0]).all() and np.isfinite(want[0, 1]).all()  # head 0 NaN, head 1 untouched
    assert_match(host(out), want, 1e-6, "softmax out")
    assert_match(host(E), want_e, 1e-6, "softmax edges")


def test_ci_instance_budget():
    """The CI profile must stay cheap: a bounded number of SYCL kernel instances (each ~1 s)."""
    if not LONG:
        assert len(SYCL_SPMM) + len(SYCL_SDDMM) + len(SYCL_FUSED) <= 24
    for c in SYCL_SPMM:
        assert _valid_spmm(c)
    assert {c["dtype"] for c in SYCL_SPMM} == set(DTYPES["sycl"])
    assert {c["reduce"] for c in SYCL_SPMM} == set(REDUCTIONS)
    assert {c["edge"] for c in SYCL_FUSED} == set(EDGES)
    assert {c["kind"] for c in SYCL_SDDMM} == {"dot_wide", "dot_narrow", "add"}
    assert acc_dtype("float16") == "float32"
