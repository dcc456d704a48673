"""The ESIMD quantized kernels (sycl/kernels/esimd/quantize.hpp: the quantizer passes and the int8
GEMM's scale pass; qspmm.hpp: the quantized SpMM with its quantizing epilogue): what can be checked without an Intel GPU, as
tests/test_esimd.py does for the other ESIMD kernels.

1. Host shim: the kernel bodies, compiled by g++ against tests/esimd_shim/ (plus
   esimd_shim_quant.hpp for the integer, conversion and max operations they use), run on the CPU
   over the launch sycl/esimd_quant.cpp makes; the absmax partials and every quantized byte must
   equal the NumPy model (gnnsparse.quant.model) bit for bit, every output is written exactly once
   and no access leaves its array. Shapes cover full 64-float blocks, the last thread's scalar
   remainder, and threads past the useful ones. The SpMM's float32 output must equal the contract's
   arithmetic (exact integer sums, or float32 messages summed in edge order; the scale; mean's
   division) computed in NumPy, and its quantized output the model of a delayed-scale producer
   given that float32 output, with the work-groups' partial maxima folding to its absmax (each
   work-group's threads share SLM and a barrier in the shim, which reports races).
2. Compile check: every instance the launcher can pick through the SYCL kernel_compiler's front
   end and ESIMD lowering (gnnsparse._sycl.compile_only, or tests/drivers/rtc_check.cpp).
3. AOT: the instances' SPIR-V through `ocloc -device pvc -vc-codegen` (skipped without ocloc).
Nothing here runs on a Max 1550.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from gnnsparse.quant import model

from conftest import random_csr

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "sycl" / "kernels"
INCLUDE = ROOT / "include"
SHIM = ROOT / "tests" / "esimd_shim"
DRIVERS = ROOT / "tests" / "drivers"
ENTRY = "esimd/quantize.hpp"
NAMES = ["gnnsparse::esimd::quant_absmax<0>"] + [
    f"gnnsparse::esimd::{k}<{b}, {s}, 16>" for k in ("quantize", "requantize") for b in (8, 4)
    for s in ("true", "false")]
QSPMM_ENTRY = "esimd/qspmm.hpp"
QSPMM_NAMES = [f"gnnsparse::esimd::qspmm<{i}, {b}, {w}>" for i in ("int", "long") for b in (8, 4)
               for w in ("true", "false")]
QLOCAL = 16  # work-group size of the SpMM (sycl/quant_policy.hpp kEsimdQSpmmLocal)
QCOLS = 32   # columns per thread (kEsimdQSpmmCols)


def _cxx():
    return os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")


def _cache_dir() -> Path:
    base = Path(os.environ.get("GNNSPARSE_TEST_CACHE", Path(tempfile.gettempdir()) / "gnnsparse-test-cache"))
    base.mkdir(parents=True, exist_ok=True)
    return base


@pytest.fixture(scope="module")
def qshim():
    cxx = _cxx()
    if not cxx:
        pytest.skip("no C++ compiler for the ESIMD host shim")
    files = [KERNELS / "esimd" / "quantize.hpp", KERNELS / "esimd" / "qspmm.hpp", KERNELS / "esimd" / "common.hpp",
             KERNELS / "quant_math.hpp", ROOT / "sycl" / "quant_policy.hpp", ROOT / "sycl" / "policy.hpp",
             ROOT / "sycl" / "instances.hpp", INCLUDE / "gnnsparse" / "quant.hpp", INCLUDE / "gnnsparse" / "args.hpp",
             INCLUDE / "gnnsparse" / "qgemm.hpp",
             SHIM / "esimd_shim.hpp", SHIM / "esimd_shim_quant.hpp", SHIM / "quant_shim_driver.cpp",
             INCLUDE / "gnnsparse" / "ops.hpp"]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + f.read_bytes())
    out = _cache_dir() / f"libquant_shim_{h.hexdigest()[:16]}.so"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        r = subprocess.run([cxx, "-std=c++17", "-O1", "-fPIC", "-shared", "-ffp-contract=off",
                            "-DGNNSPARSE_ESIMD_HOST_SHIM", f"-I{KERNELS}", f"-I{ROOT / 'sycl'}", f"-I{INCLUDE}", f"-I{SHIM}", "-Wall",
                            "-Wno-unknown-pragmas", "-pthread", str(SHIM / "quant_shim_driver.cpp"), "-o", str(tmp)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        os.replace(tmp, out)
    lib = ctypes.CDLL(str(out))
    i64, vp = ctypes.c_int64, ctypes.c_void_p
    lib.shim_quant_errors.restype = ctypes.c_char_p
    lib.shim_quant_absmax.argtypes = [vp, i64, i64, i64, vp]
    lib.shim_quantize.argtypes = [ctypes.c_int, ctypes.c_int, vp, i64, vp, ctypes.c_uint64, vp]
    ci = ctypes.c_int
    lib.shim_requantize.argtypes = [ci, ci, vp, i64, i64, i64, i64, i64, vp, vp, vp, ctypes.c_uint64, vp, vp]
    lib.shim_qspmm_plan.restype = i64
    lib.shim_qspmm_plan.argtypes = [i64, i64, i64, i64, i64, ci, ci, ci]
    lib.shim_requantize_plan.restype = i64
    lib.shim_requantize_plan.argtypes = [i64, i64, i64, ci, ctypes.POINTER(i64)]
    lib.shim_qspmm.argtypes = [ci, ci, ci, vp, vp, vp, vp, vp, vp, i64, i64, i64, i64, i64, ci, ci, vp, vp, vp, i64,
                               ci, ci, ctypes.c_uint64]
    return lib


def _p(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def _check(lib, rc):
    assert rc == 0, lib.shim_quant_errors().decode()


@pytest.mark.parametrize("n, nthreads", [(1000, 7), (64, 1), (5, 3), (4096, 64), (0, 2)])
def test_shim_absmax(qshim, rng, n, nthreads):
    X = (rng.standard_normal(n) * 3).astype(np.float32)
    chunk = max(1, -(-n // nthreads))
    for poison in (None, np.nan, np.inf, -np.inf):
        Xp = X.copy()
        if poison is not None and n:
            Xp[n // 2] = poison
        work = np.full(nthreads, -1.0, np.float32)
        _check(qshim, qshim.shim_quant_absmax(_p(Xp), n, chunk, nthreads, _p(work)))
        keys = np.where(np.isfinite(Xp), np.abs(Xp), np.inf).astype(np.float32)
        want = [keys[t * chunk:(t + 1) * chunk].max(initial=0) for t in range(nthreads)]
        np.testing.assert_array_equal(work, np.array(want, np.float32))


@pytest.mark.parametrize("nquads", [16, 17, 15, 1, 64 * 16 + 5, 250])
@pytest.mark.parametrize("bits", [8, 4])
def test_shim_quantize_equals_model(qshim, rng, nquads, bits):
    X = (rng.standard_normal(4 * nquads) * 2).astype(np.float32)
    X[3] = 0.0
    for stochastic, seed in [(True, 5), (True, 2**64 - 3), (False, 0)]:
        qm, s, inv = model.quantize(X, bits, stochastic, seed)
        scale = np.array([s, inv], np.float32)
        Q = np.full(4 * nquads if bits == 8 else 2 * nquads, 0xA5, np.uint8)
        _check(qshim, qshim.shim_quantize(bits, int(stochastic), _p(X), nquads, _p(scale), seed, _p(Q)))
        want = qm.view(np.uint8) if bits == 8 else model.pack4(qm.reshape(nquads, 4)).reshape(-1)
        np.testing.assert_array_equal(Q, want)


def test_shim_catches_misaligned_store(qshim, rng):
    """The shim's checks have teeth: an output 1 byte off the 16-byte alignment the block store
    assumes is reported."""
    X = rng.standard_normal(64).astype(np.float32)
    scale = np.array([1.0, 1.0], np.float32)
    buf = np.zeros(64 + 32, np.uint8)
    off = (16 - buf.ctypes.data % 16) % 16 + 1
    Q = buf[off:off + 64]
    assert qshim.shim_quantize(8, 1, _p(X), 16, _p(scale), 1, _p(Q)) > 0
    assert b"aligned" in qshim.shim_quant_errors()


def _aligned_u8(n, align=16):
    """n bytes (0xA5) starting at an `align`-byte aligned address."""
    buf = np.full(n + align, 0xA5, np.uint8)
    off = (-buf.ctypes.data) % align
    return buf[off:off + n]


@pytest.mark.parametrize("rows, C, ld", [(37, 64, 64), (5, 4, 8), (1000, 12, 12), (9000, 8, 12), (3, 4, 4),
                                         (70, 36, 40)])
@pytest.mark.parametrize("bits", [8, 4])
def test_shim_requantize_equals_model(qshim, rng, rows, C, ld, bits):
    """The int8 GEMM's scale pass: y = fl32(fl32(sa sb) acc) quantized with a delayed scale equals the
    model of a delayed-scale producer (clamped where the scale is too small), each thread's partial
    the absmax key of its chunk, over the launch esimd_requantize_plan makes (chunks of whole
    16-quad steps, at most 1024 partials)."""
    acc = rng.integers(-40000, 40000, (rows, ld), dtype=np.int32)
    sa, sb = np.array([3.1e-3], np.float32), np.array([0.7], np.float32)
    y = (acc[:, :C].astype(np.float32) * np.float32(sa[0] * sb[0])).astype(np.float32)
    ch = ctypes.c_int64(0)
    threads = qshim.shim_requantize_plan(rows, C, ld, bits, ctypes.byref(ch))  # the launcher's plan
    chunk = ch.value
    assert threads > 0 and chunk % 16 == 0 and threads <= 1024 and (threads - 1) * chunk < rows * C // 4
    keys = np.abs(y).reshape(-1)
    for stoch, seed, shrink in [(True, 9, 1.0), (False, 0, 1.0), (True, 2**63 + 7, 0.6)]:
        sin = np.array(model.scales(np.float32(model.absmax(y) * shrink), bits), np.float32)
        Q = _aligned_u8(rows * C if bits == 8 else rows * C // 2)
        work = np.full(threads, -1.0, np.float32)
        _check(qshim, qshim.shim_requantize(bits, int(stoch), _p(acc), rows, C, ld, chunk, threads, _p(sa), _p(sb),
                                            _p(sin), seed, _p(Q), _p(work)))
        qm = model.quantize_delayed(y, bits, stoch, seed, sin)[0]
        np.testing.assert_array_equal(Q, (qm.view(np.uint8) if bits == 8 else model.pack4(qm)).reshape(-1))
        want = [keys[4 * t * chunk:4 * (t + 1) * chunk].max() for t in range(threads)]
        np.testing.assert_array_equal(work, np.array(want, np.float32))
    # a non-finite scale product: NaN / inf outputs quantize as the model says, their keys are +inf
    sa_inf = np.array([np.inf], np.float32)
    with np.errstate(invalid="ignore"):  # 0 * inf
        yi = (acc[:, :C].astype(np.float32) * np.float32(sa_inf[0] * sb[0])).astype(np.float32)
    sin = np.array([1.0, 1.0], np.float32)
    Q = _aligned_u8(rows * C if bits == 8 else rows * C // 2)
    work = np.full(threads, -1.0, np.float32)
    _check(qshim, qshim.shim_requantize(bits, 1, _p(acc), rows, C, ld, chunk, threads, _p(sa_inf), _p(sb), _p(sin), 3,
                                        _p(Q), _p(work)))
    qm = model.quantize_delayed(yi, bits, True, 3, sin)[0]
    np.testing.assert_array_equal(Q, (qm.view(np.uint8) if bits == 8 else model.pack4(qm)).reshape(-1))
    assert np.isinf(work).all()


def test_esimd_quant_policy(qshim):
    """Which calls the ESIMD SpMM and requantize take (sycl/quant_policy.hpp), through the shim
    driver: sum / mean only, unweighted only while the longest row keeps the int32 sum (max_degree,
    else nnz), weighted any length; requantize on the quad layout with a bounded gather span."""
    plan = qshim.shim_qspmm_plan
    assert plan(10, 8, 30, 5, 33, 8, 0, 0) == 2 and plan(10, 8, 30, 5, 33, 8, 0, 1) == 2  # 20 threads
    assert plan(10, 8, 30, 5, 33, 8, 0, 2) == -1  # max: portable
    big = 2**31 // 127 + 1
    assert plan(10, 8, big, big, 8, 8, 0, 0) == -1 and plan(10, 8, big, big - 1, 8, 8, 0, 0) == 1
    assert plan(10, 8, big, -1, 8, 8, 0, 0) == -1 and plan(10, 8, big, -1, 8, 4, 0, 0) == 1  # nnz bounds it
    assert plan(10, 8, big, big, 8, 8, 1, 0) == 1  # weighted: float32 sums, any length
    ch = ctypes.c_int64(0)
    rq = qshim.shim_requantize_plan
    assert rq(10, 6, 6, 8, ctypes.byref(ch)) == -1 and rq(10, 8, 10, 8, ctypes.byref(ch)) == -1
    assert rq(4096, 64, 64, 8, ctypes.byref(ch)) == 1024 and ch.value == 64
    assert rq(10, 4, 2**26, 8, ctypes.byref(ch)) == -1 and rq(10, 4, 2**24, 8, ctypes.byref(ch)) == 1


# ---------------------------------------------------------------------------------------------
# the quantized SpMM on the shim
# ---------------------------------------------------------------------------------------------
def _qspmm_contract(rowptr, col, q, s, w, H, mean, ident):
    """Y (float32, M x C) as the contract computes it from the integers q (rows x C): exact integer
    sums times the scale without weights; with weights (w: nnz, or nnz x H per-head) float32 messages
    fl32(w q) summed in edge order, then times the scale; mean divides by the row's entries; empty
    rows 0."""
    M, C = len(rowptr) - 1, q.shape[1]
    deg = np.diff(rowptr).astype(np.int64)
    cols = np.arange(len(col) if ident else 0) if ident else col.astype(np.int64)
    s = np.float32(s)
    if w is None:
        acc = np.zeros((M, C), np.int64)
        rows = np.repeat(np.arange(M), deg)
        np.add.at(acc, rows, q[cols].astype(np.int64))
        y = acc.astype(np.float32) * s
    else:
        head = np.arange(C) // (C // H)
        acc = np.zeros((M, C), np.float32)
        for p in range(int(deg.max(initial=0))):  # edge p of every row that has one, in order
            rs = np.nonzero(deg > p)[0]
            k = rowptr[rs].astype(np.int64) + p
            wk = w[k][:, None] if w.ndim == 1 else w[k][:, head]
            acc[rs] = acc[rs] + (wk * q[cols[k]].astype(np.float32)).astype(np.float32)
        y = acc * s
    if mean:
        y = np.where(deg[:, None] > 0, y / np.maximum(deg, 1).astype(np.float32)[:, None], y)
    y[deg == 0] = 0
    return y.astype(np.float32)


def _run_qspmm(lib, A, qbytes, bits, C, s, w, H, mean, ident, out=None):
    """The shim's SpMM; out = (obits, stochastic, seed, scale_in) for a quantized output. Returns Y,
    or (Q bytes, the work-groups' partial maxima)."""
    M, K = A.shape
    nnz = int(A.rowptr[-1])
    idx64 = A.col.dtype == np.int64
    scale = np.array([s, 1.0 / s if s else 0.0], np.float32)
    maxdeg = int(np.diff(A.rowptr).max(initial=0))
    groups = lib.shim_qspmm_plan(M, K, nnz, maxdeg, C, bits, int(w is not None), int(mean)) if M else 0
    assert groups == -(-M * -(-C // QCOLS) // QLOCAL), "the launcher's plan and the kernel's tiles disagree"
    wp = None if w is None else np.ascontiguousarray(w, np.float32)
    col = A.col if nnz else np.zeros(1, A.col.dtype)
    args = [int(idx64), bits, int(w is not None), _p(A.rowptr), _p(col), _p(wp) if wp is not None else None,
            _p(qbytes), _p(scale)]
    if out is None:
        Y = np.full((M, C), np.nan, np.float32)
        _check(lib, lib.shim_qspmm(*args, _p(Y), M, K, nnz, C, H, int(ident), int(mean), None, None, None, 0, 8,
                                   0, 0))
        return Y
    obits, stoch, seed, scale_in = out
    Q = np.full((M, C if obits == 8 else (C + 1) // 2), 0xA5, np.uint8)
    work = np.full(max(groups, 1), -1.0, np.float32)
    sin = np.asarray(scale_in, np.float32)
    _check(lib, lib.shim_qspmm(*args, None, M, K, nnz, C, H, int(ident), int(mean), _p(Q), _p(sin), _p(work),
                               groups, obits, int(stoch), seed))
    return Q, work[:groups]


QSPMM_CASES = [  # (M, K, mean degree, hub, C)
    (7, 5, 2.0, 0, 1), (33, 65, 5.0, 0, 17), (40, 30, 4.0, 0, 32), (50, 40, 6.0, 300, 64),
    (21, 13, 3.0, 0, 3), (60, 45, 5.0, 0, 130), (0, 4, 0.0, 0, 8), (9, 1, 0.0, 0, 33)]


@pytest.mark.parametrize("case", QSPMM_CASES, ids=lambda c: f"{c[0]}x{c[1]}h{c[3]}C{c[4]}")
@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("weighted", [False, True])
def test_shim_qspmm_float_out(qshim, rng, case, bits, weighted):
    M, K, deg, hub, C = case
    for itype in (np.int32, np.int64):
        A = random_csr(rng, M, K, mean_deg=deg, hub=hub, weighted=weighted, index_dtype=itype)
        x = (rng.standard_normal((K, C)) * 2).astype(np.float32)
        q, s, _ = model.quantize(x, bits, True, seed=C)
        qb = q.view(np.uint8) if bits == 8 else model.pack4(q)
        for mean in (False, True):
            Y = _run_qspmm(qshim, A, np.ascontiguousarray(qb), bits, C, s, A.val, 1, mean, False)
            want = _qspmm_contract(A.rowptr, A.col, q, s, A.val, 1, mean, False)
            np.testing.assert_array_equal(Y, want)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("H, D", [(2, 3), (4, 16), (3, 20)])
def test_shim_qspmm_heads_and_incidence(qshim, rng, bits, H, D):
    """Per-head weights (lane c's weight is W[k, c / D], across tile boundaries) and the incidence
    form (X has one row per edge)."""
    A = random_csr(rng, 45, 30, mean_deg=5.0, hub=200, weighted=False)
    nnz, C = int(A.rowptr[-1]), H * D
    W = rng.standard_normal((nnz, H)).astype(np.float32)
    q, s, _ = model.quantize(rng.standard_normal((30, C)).astype(np.float32), bits, False)
    qb = np.ascontiguousarray(q.view(np.uint8) if bits == 8 else model.pack4(q))
    Y = _run_qspmm(qshim, A, qb, bits, C, s, W, H, False, False)
    np.testing.assert_array_equal(Y, _qspmm_contract(A.rowptr, A.col, q, s, W, H, False, False))
    qe, se, _ = model.quantize(rng.standard_normal((nnz, C)).astype(np.float32), bits, True, seed=3)
    qeb = np.ascontiguousarray(qe.view(np.uint8) if bits == 8 else model.pack4(qe))
    for mean in (False, True):
        Y = _run_qspmm(qshim, A, qeb, bits, C, se, None, 1, mean, True)
        np.testing.assert_array_equal(Y, _qspmm_contract(A.rowptr, A.col, qe, se, None, 1, mean, True))


def _group_keys(y, groups):
    """The work-groups' partial absmax keys of a quantized SpMM output y (M x C): thread i * tiles + t
    holds row i's 32-column tile t, QLOCAL threads per group; keys |y|, +inf for NaN / +-inf."""
    M, C = y.shape
    tiles = -(-C // QCOLS)
    k = np.where(np.isfinite(y), np.abs(y), np.inf).astype(np.float32)
    k = np.pad(k, ((0, 0), (0, tiles * QCOLS - C))).reshape(M, tiles, QCOLS).max(axis=2).reshape(-1)
    return np.pad(k, (0, groups * QLOCAL - k.size)).reshape(groups, QLOCAL).max(axis=1)


QOUT_VARIANTS = [  # (weights, mean, incidence, index type)
    ("values", False, False, np.int32), ("none", False, False, np.int32), ("none", True, False, np.int64),
    ("heads", False, False, np.int64), ("none", False, True, np.int32), ("values", True, False, np.int64)]


@pytest.mark.parametrize("case", [(40, 30, 4.0, 0, 16), (50, 40, 6.0, 300, 64), (33, 65, 5.0, 0, 130),
                                  (5, 3, 1.0, 0, 2), (37, 20, 3.0, 0, 63)], ids=lambda c: f"{c[0]}x{c[1]}C{c[4]}")
@pytest.mark.parametrize("bits, obits", [(8, 8), (8, 4), (4, 8), (4, 4)])
def test_shim_qspmm_quantized_out(qshim, rng, case, bits, obits):
    """The quantizing epilogue: Q equals the delayed-scale model of the float32 output (clamped
    where the delayed scale is too small), each work-group's partial is the absmax key of its
    threads' tiles (+inf for a non-finite output), every Q byte and partial written once; over
    weights (none, A's values, per-head), sum / mean, the incidence form and both index types."""
    M, K, deg, hub, C = case
    for wkind, mean, ident, itype in QOUT_VARIANTS:
        A = random_csr(rng, M, K, mean_deg=deg, hub=hub, weighted=True, index_dtype=itype)
        nnz = int(A.rowptr[-1])
        H = 2 if C % 2 == 0 else (3 if C % 3 == 0 else 1)  # heads of C / H columns
        w = {"values": A.val, "none": None, "heads": rng.standard_normal((nnz, H)).astype(np.float32)}[wkind]
        H = H if wkind == "heads" else 1
        q, s, _ = model.quantize((rng.standard_normal((nnz if ident else K, C)) * 2).astype(np.float32), bits, True,
                                 seed=1)
        qb = np.ascontiguousarray(q.view(np.uint8) if bits == 8 else model.pack4(q))
        y = _qspmm_contract(A.rowptr, A.col, q, s, w, H, mean, ident)
        amax = model.absmax(y)
        for stoch, seed, shrink in [(True, 11, 1.0), (False, 0, 1.0), (True, 2**64 - 5, 0.5)]:
            sin = np.array(model.scales(np.float32(amax * shrink), obits), np.float32)
            Q, work = _run_qspmm(qshim, A, qb, bits, C, s, w, H, mean, ident, out=(obits, stoch, seed, sin))
            qm = model.quantize_delayed(y, obits, stoch, seed, sin)[0]
            np.testing.assert_array_equal(Q, qm.view(np.uint8) if obits == 8 else model.pack4(qm))
            np.testing.assert_array_equal(work, _group_keys(y, work.size))
    if nnz:  # a NaN weight: the output's row with it is NaN (quantized to 0), its group's key +inf
        A = random_csr(rng, M, K, mean_deg=deg, hub=hub, weighted=True)
        q, s, _ = model.quantize((rng.standard_normal((K, C)) * 2).astype(np.float32), bits, True, seed=1)
        qb = np.ascontiguousarray(q.view(np.uint8) if bits == 8 else model.pack4(q))
        w = A.val.copy()
        w[0] = np.nan
        sin = np.array([1.0, 1.0], np.float32)
        Q, work = _run_qspmm(qshim, A, qb, bits, C, s, w, 1, False, False, out=(obits, True, 5, sin))
        y = _qspmm_contract(A.rowptr, A.col, q, s, w, 1, False, False)
        assert np.isnan(y).any()
        qm = model.quantize_delayed(y, obits, True, 5, sin)[0]
        np.testing.assert_array_equal(Q, qm.view(np.uint8) if obits == 8 else model.pack4(qm))
        np.testing.assert_array_equal(work, _group_keys(y, work.size))
        assert np.isinf(work).any()


@pytest.mark.parametrize("bits", [8, 4])
def test_shim_qspmm_unaligned_x(qshim, rng, bits):
    """X one byte off a 4-byte boundary: every tile takes the masked-gather loads (and an int4 row
    of 63 columns, 32 bytes, the aligned block path reading the row's spare nibble)."""
    A = random_csr(rng, 30, 20, mean_deg=4.0, weighted=True)
    for C in (63, 64, 9):
        q, s, _ = model.quantize(rng.standard_normal((20, C)).astype(np.float32), bits, False)
        qb = np.ascontiguousarray(q.view(np.uint8) if bits == 8 else model.pack4(q)).reshape(-1)
        buf = np.zeros(qb.size + 8, np.uint8)
        off = (-buf.ctypes.data) % 4 + 1
        xo = buf[off:off + qb.size]
        xo[:] = qb
        for x in (qb, xo):
            Y = _run_qspmm(qshim, A, x, bits, C, s, A.val, 1, False, False)
            np.testing.assert_array_equal(Y, _qspmm_contract(A.rowptr, A.col, q, s, A.val, 1, False, False))


def test_shim_qspmm_catches_a_short_work_buffer(qshim, rng):
    """The shim driver's checks have teeth: a work buffer one float short of the work-groups is
    reported."""
    A = random_csr(rng, 40, 30, mean_deg=4.0, weighted=True)
    q, s, _ = model.quantize(rng.standard_normal((30, 8)).astype(np.float32), 8, False)
    scale = np.array([s, 1 / s], np.float32)
    Q = np.zeros((40, 8), np.uint8)
    work = np.zeros(3, np.float32)
    rc = qshim.shim_qspmm(0, 8, 1, _p(A.rowptr), _p(A.col), _p(A.val), _p(q.view(np.uint8)), _p(scale), None, 40, 30,
                          int(A.rowptr[-1]), 8, 1, 0, 0, _p(Q), _p(scale), _p(work), 2, 8, 1, 7)
    assert rc > 0 and b"work" in qshim.shim_quant_errors()


# ---------------------------------------------------------------------------------------------
# compile checks
# ---------------------------------------------------------------------------------------------
def _sycl_prefix():
    p = Path(sys.prefix)
    return p if (p / "include" / "sycl" / "sycl.hpp").exists() and (p / "lib" / "libsycl.so").exists() else None


@pytest.fixture(scope="module")
def rtc_check():
    """Path of tests/drivers/rtc_check built against this environment's SYCL runtime."""
    prefix, cxx = _sycl_prefix(), _cxx()
    if prefix is None or cxx is None:
        pytest.skip("no SYCL headers / runtime or no C++ compiler")
    src = DRIVERS / "rtc_check.cpp"
    # keyed by the runtime it links (rpath) too: a binary built against another, since deleted,
    # environment's libsycl must not be reused
    lib = prefix / "lib" / "libsycl.so"
    key = src.read_bytes() + f"{lib.resolve()}:{lib.stat().st_size}:{lib.stat().st_mtime_ns}".encode()
    exe = _cache_dir() / f"rtc_check_{hashlib.sha256(key).hexdigest()[:12]}"
    if not exe.exists():
        tmp = exe.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([cxx, "-std=c++17", "-O1", "-DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING", "-isystem",
                        str(prefix / "include"), str(src), "-o", str(tmp), f"-L{prefix / 'lib'}", "-lsycl",
                        f"-Wl,-rpath,{prefix / 'lib'}"], check=True)
        os.replace(tmp, exe)
    return exe, prefix


def _run_rtc(rtc, names, cwd, dump=False, entry=ENTRY):
    exe, prefix = rtc
    env = dict(os.environ)
    env.setdefault("OCL_ICD_FILENAMES", str(prefix / "lib" / "libintelocl.so"))
    if dump:
        env["SYCL_DUMP_IMAGES"] = "1"
    return subprocess.run([str(exe), str(KERNELS), str(INCLUDE), entry, *names], capture_output=True, text=True,
                          env=env, cwd=cwd)


@pytest.mark.parametrize("entry, names", [(ENTRY, NAMES), (QSPMM_ENTRY, QSPMM_NAMES)], ids=["quantize", "qspmm"])
def test_compile_every_instance(rtc_check, tmp_path, entry, names):
    r = _run_rtc(rtc_check, names, tmp_path, entry=entry)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]


def test_compile_check_rejects_bad_instance(rtc_check, tmp_path):
    """The check has teeth: BITS = 5 trips the kernel's static_assert, and the log says so."""
    r = _run_rtc(rtc_check, ["gnnsparse::esimd::quantize<5, true, 16>"], tmp_path)
    assert r.returncode != 0 and "BITS must be 8 or 4" in r.stdout + r.stderr


@pytest.mark.skipif(shutil.which("ocloc") is None, reason="ocloc not installed (apt-get install intel-opencl-icd)")
@pytest.mark.parametrize("entry, names", [(ENTRY, NAMES), (QSPMM_ENTRY, QSPMM_NAMES)], ids=["quantize", "qspmm"])
def test_ocloc_pvc(rtc_check, tmp_path, entry, names):
    """Every instance's SPIR-V through ocloc for pvc (the vector-compute backend): machine code."""
    r = _run_rtc(rtc_check, names, tmp_path, dump=True, entry=entry)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    spv = sorted(tmp_path.glob("*.spv"))
    assert spv, "no SPIR-V dumped"
    rc = None
    for _ in range(4):  # ocloc 22.43 sometimes aborts (SIGABRT) depending on address layout
        o = subprocess.run(["ocloc", "compile", "-file", spv[0].name, "-spirv_input", "-device", "pvc", "-options",
                            "-vc-codegen", "-output", "quant"], capture_output=True, text=True, cwd=tmp_path)
        rc = o.returncode
        if rc != -6 and rc != 134:
            break
    assert rc == 0, o.stdout[-4000:] + o.stderr[-4000:]
    assert list(tmp_path.glob("*pvc*.bin")), "no pvc binary"
