"""Tiled SpMM for dense-ish inputs (sycl/kernels/tiles.hpp, sycl/kernels/esimd/tiles.hpp).

1. The portable tiled kernels on the OpenCL CPU device (GNNSPARSE_SYCL_TILES=on forces it for every
   covered call): bitwise equal to the float32 edge-order reference (gnnsparse.reference in float32)
   on odd sizes, empty rows, density 0 and 1, partial row blocks and column tiles; unsorted or
   duplicated columns and non-finite X take the in-kernel fallback (same result); run-to-run
   bitwise repeat. The tiled SDDMM (dot) against the reference (fp32 accuracy), its fallback, and
   the method choice that picks it by density.
2. The XMX (DPAS) kernel on the host shim (tests/esimd_shim, SHIM_PART=4): the dpas model against a
   NumPy model of its definition, then the kernel against gnnsparse.reference (3xTF32: fp32 accuracy;
   tf32: tf32 accuracy), its fallbacks, and the compile check of its instances through the SYCL
   kernel_compiler (front end + ESIMD checks). Nothing here runs on an Intel GPU.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import _core
from gnnsparse import reference as ref

from conftest import sycl_or_skip
from test_esimd import compile_only  # noqa: F401  (fixture: the ESIMD compile check of test_esimd.py)

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "sycl" / "kernels"
HOST = ROOT / "sycl"
INCLUDE = ROOT / "include"
SHIM = ROOT / "tests" / "esimd_shim"


def random_csr(rng, M, K, density, weighted=True, index_dtype=np.int32, empty_rows=()):
    mask = rng.random((M, K)) < density
    for r in empty_rows:
        mask[r] = False
    rows, cols = np.nonzero(mask)
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=M), out=rowptr[1:])
    val = rng.uniform(-1, 1, len(cols)).astype(np.float32) if weighted else None
    return gs.CSR(rowptr.astype(index_dtype), cols.astype(index_dtype), val, (M, K))


# ---------------------------------------------------------------------------------------------
# 1. portable tiled kernel on the CPU device
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def tiles_on(monkeypatch):
    sycl_or_skip()
    monkeypatch.setenv("GNNSPARSE_SYCL_TILES", "on")
    return monkeypatch


def spmm_with(mode, A, X, reduce):
    old = os.environ.get("GNNSPARSE_SYCL_TILES")
    os.environ["GNNSPARSE_SYCL_TILES"] = mode
    try:
        return gs.spmm(A, X, reduce)
    finally:
        if old is None:
            os.environ.pop("GNNSPARSE_SYCL_TILES")
        else:
            os.environ["GNNSPARSE_SYCL_TILES"] = old


# (M, K, C, density): partial row blocks (BM = 16 .. 64), partial chunks (BK = 128), partial column
# tiles (16 / 32 / 64 columns), C below / at / above the sub-group.
SHAPES = [(1, 1, 1, 1.0), (5, 3, 2, 0.5), (37, 130, 5, 0.3), (70, 257, 16, 0.2), (130, 129, 17, 0.1),
          (65, 300, 33, 0.25), (33, 511, 64, 0.05), (100, 200, 70, 0.15), (17, 1000, 129, 0.02)]


@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("case", range(len(SHAPES)))
def test_tiles_equal_edge_order_reference(tiles_on, case, weighted):
    M, K, C, density = SHAPES[case]
    index_dtype = np.int64 if case % 2 else np.int32
    rng = np.random.default_rng(M * 1000 + K + C)
    A = random_csr(rng, M, K, density, weighted, index_dtype, empty_rows=range(0, M, 7))
    X = rng.standard_normal((K, C)).astype(np.float32)
    for reduce in ("sum", "mean"):
        Y = gs.spmm(A, X, reduce)
        np.testing.assert_array_equal(Y, ref.spmm(A, X, reduce, dtype=np.float32))
        np.testing.assert_allclose(Y, ref.spmm(A, X, reduce), rtol=1e-4, atol=1e-5)
        if C >= 16:  # the sparse sub-group kernel sums in edge order too: the method does not change bits
            np.testing.assert_array_equal(Y, spmm_with("off", A, X, reduce))


@pytest.mark.parametrize("density", [0.0, 1.0])
def test_tiles_density_edges(tiles_on, density):
    rng = np.random.default_rng(3)
    A = random_csr(rng, 50, 140, density)
    X = rng.standard_normal((140, 20)).astype(np.float32)
    for reduce in ("sum", "mean"):
        np.testing.assert_array_equal(gs.spmm(A, X, reduce), ref.spmm(A, X, reduce, dtype=np.float32))


def test_tiles_unsorted_and_duplicates_fall_back(tiles_on):
    """Rows with unsorted or repeated columns (allowed by the CSR contract): the blocks holding them
    take the in-kernel fallback (edge-order sums), the others the tiles; every row equals the
    edge-order reference."""
    rng = np.random.default_rng(4)
    A0 = random_csr(rng, 200, 300, 0.2)
    rowptr, col, val = A0.rowptr.copy(), A0.col.copy(), A0.val.copy()
    for r in (3, 150):  # reversed rows, in two row blocks
        b, e = rowptr[r], rowptr[r + 1]
        col[b:e] = col[b:e][::-1].copy()
    b = rowptr[90]
    col[b + 1] = col[b]  # a duplicate column
    A = gs.CSR(rowptr, col, val, (200, 300))
    X = rng.standard_normal((300, 40)).astype(np.float32)
    for reduce in ("sum", "mean"):
        Y = gs.spmm(A, X, reduce)
        np.testing.assert_array_equal(Y, ref.spmm(A, X, reduce, dtype=np.float32))


def test_tiles_non_finite_x(tiles_on):
    """inf / NaN in rows of X: only the rows of A that store those columns see them (the dense
    product would give 0 * inf = NaN everywhere): the blocks fall back to the edge-order sum."""
    rng = np.random.default_rng(5)
    A = random_csr(rng, 120, 200, 0.05)
    X = rng.standard_normal((200, 24)).astype(np.float32)
    X[7, 3], X[50, :] = np.inf, np.nan
    Y = gs.spmm(A, X, "sum")
    np.testing.assert_array_equal(Y, ref.spmm(A, X, "sum", dtype=np.float32))
    assert np.isfinite(Y).any() and not np.isfinite(Y).all()


def test_tiles_bitwise_repeat(tiles_on):
    rng = np.random.default_rng(6)
    A = random_csr(rng, 300, 700, 0.15)
    X = rng.standard_normal((700, 50)).astype(np.float32)
    first = gs.spmm(A, X, "sum")
    for _ in range(3):
        assert np.array_equal(gs.spmm(A, X, "sum"), first)


def test_tiles_not_covered_cases_use_sparse_kernels(tiles_on):
    """max / min and float64 are outside the tiled kernel: the sparse kernels run, unchanged."""
    rng = np.random.default_rng(7)
    A = random_csr(rng, 40, 60, 0.3)
    X = rng.standard_normal((60, 20))
    np.testing.assert_array_equal(gs.spmm(A, X, "sum"), spmm_with("off", A, X, "sum"))
    np.testing.assert_allclose(gs.spmm(A, X, "sum"), ref.spmm(A, X, "sum"), rtol=1e-6)
    X32 = X.astype(np.float32)
    np.testing.assert_array_equal(gs.spmm(A, X32, "max"), spmm_with("off", A, X32, "max"))
    np.testing.assert_allclose(gs.spmm(A, X32, "max"), np.asarray(ref.spmm(A, X32, "max")), rtol=1e-6)


# ---- tiled SDDMM (dot) ---------------------------------------------------------------------
def sddmm_with(mode, A, X, Y):
    old = os.environ.get("GNNSPARSE_SYCL_TILES")
    os.environ["GNNSPARSE_SYCL_TILES"] = mode
    try:
        return gs.sddmm(A, X, Y)
    finally:
        if old is None:
            os.environ.pop("GNNSPARSE_SYCL_TILES")
        else:
            os.environ["GNNSPARSE_SYCL_TILES"] = old


# (M, K, H, F, density): partial row blocks (16), chunks (64 columns) and feature slices (32)
SDDMM_SHAPES = [(1, 1, 1, 1, 1.0), (37, 130, 1, 5, 0.3), (70, 257, 2, 33, 0.2), (17, 1000, 1, 64, 0.02),
                (65, 300, 3, 70, 0.25), (16, 64, 1, 32, 1.0)]


@pytest.mark.parametrize("case", range(len(SDDMM_SHAPES)))
def test_tiled_sddmm_against_reference(tiles_on, case):
    M, K, H, F, density = SDDMM_SHAPES[case]
    rng = np.random.default_rng(case)
    A = random_csr(rng, M, K, density, False, np.int64 if case % 2 else np.int32, empty_rows=range(0, M, 5))
    X = rng.standard_normal((M, H, F)).astype(np.float32)
    Y = rng.standard_normal((K, H, F)).astype(np.float32)
    E = gs.sddmm(A, X, Y)
    R = ref.sddmm(A, X, Y)
    np.testing.assert_allclose(E, R.reshape(E.shape), rtol=1e-5, atol=1e-5 * np.sqrt(F))
    assert np.array_equal(gs.sddmm(A, X, Y), E)  # bitwise repeat
    np.testing.assert_allclose(sddmm_with("off", A, X, Y), E, rtol=1e-5, atol=1e-5 * np.sqrt(F))


def test_tiled_sddmm_unsorted_and_non_finite(tiles_on):
    rng = np.random.default_rng(12)
    A0 = random_csr(rng, 60, 200, 0.2, False)
    rowptr, col = A0.rowptr.copy(), A0.col.copy()
    b, e = rowptr[20], rowptr[21]
    col[b:e] = col[b:e][::-1].copy()  # unsorted row: its block falls back
    col[rowptr[40] + 1] = col[rowptr[40]]  # a duplicate
    A = gs.CSR(rowptr, col, None, (60, 200))
    X = rng.standard_normal((60, 1, 40)).astype(np.float32)
    Y = rng.standard_normal((200, 1, 40)).astype(np.float32)
    Y[7, 0, 3] = np.inf  # only the entries in column 7 see it
    E = gs.sddmm(A, X, Y)
    R = ref.sddmm(A, X, Y).reshape(E.shape)
    fin = np.isfinite(R)
    np.testing.assert_allclose(E[fin], R[fin], rtol=1e-5, atol=1e-4)
    assert np.array_equal(np.isfinite(E), fin)


def test_sddmm_policy_picks_tiles_only_when_dense(monkeypatch):
    """GNNSPARSE_SYCL_TILES unset: on the CPU device a dense-ish SDDMM (density >= 0.2, M >= 256,
    K >= 512) runs the tiles, a sparser one the sparse kernel (told apart by their last bits)."""
    sycl_or_skip()
    monkeypatch.delenv("GNNSPARSE_SYCL_TILES", raising=False)
    rng = np.random.default_rng(13)
    X = rng.standard_normal((256, 1, 48)).astype(np.float32)
    Y = rng.standard_normal((512, 1, 48)).astype(np.float32)
    for density, mode in [(0.25, "on"), (0.05, "off")]:
        A = random_csr(rng, 256, 512, density, False)
        on, off = sddmm_with("on", A, X, Y), sddmm_with("off", A, X, Y)
        assert not np.array_equal(on, off)  # the two orders differ somewhere: the check can tell
        assert np.array_equal(gs.sddmm(A, X, Y), on if mode == "on" else off), density


# ---------------------------------------------------------------------------------------------
# 2. the XMX kernel on the host shim
# ---------------------------------------------------------------------------------------------
def _cache_dir() -> Path:
    base = Path(os.environ.get("GNNSPARSE_TEST_CACHE", Path(tempfile.gettempdir()) / "gnnsparse-test-cache"))
    base.mkdir(parents=True, exist_ok=True)
    return base


@pytest.fixture(scope="session")
def xmx():
    import shutil

    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no C++ compiler for the ESIMD host shim")
    files = (sorted((KERNELS / "esimd").glob("*.hpp")) + sorted(SHIM.glob("*.hpp")) + [SHIM / "shim_driver.cpp"]
             + [HOST / "esimd_policy.hpp", HOST / "instances.hpp", INCLUDE / "gnnsparse" / "ops.hpp"])
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + f.read_bytes())
    out = _cache_dir() / f"libxmx_shim_{h.hexdigest()[:16]}.so"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        cmd = [cxx, "-std=c++17", "-O1", "-fPIC", "-shared", "-ffp-contract=off", "-DGNNSPARSE_ESIMD_HOST_SHIM",
               "-DSHIM_PART=4", f"-I{KERNELS}", f"-I{HOST}", f"-I{INCLUDE}", f"-I{SHIM}", "-Wall",
               "-Wno-unknown-pragmas", str(SHIM / "shim_driver.cpp"), "-o", str(tmp)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr[-6000:]
        os.replace(tmp, out)
    lib = ctypes.CDLL(str(out))
    i64, vp = ctypes.c_int64, ctypes.c_void_p
    lib.shim_last_errors.restype = ctypes.c_char_p
    lib.shim_instance_names.restype = ctypes.c_char_p
    lib.shim_instance_names.argtypes = [ctypes.c_char_p]
    lib.shim_dpas_tf32.argtypes = [vp] * 4
    lib.shim_xmx_policy.argtypes = [i64, i64, ctypes.POINTER(i64)]
    lib.shim_spmm_xmx.argtypes = [ctypes.c_int] * 4 + [vp] * 5 + [i64] * 4
    lib.shim_spmm_xmx.restype = ctypes.c_int
    return lib


def ptr(a):
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


def tf32_trunc(a):
    return (np.ascontiguousarray(a, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def test_dpas_model_definition(xmx):
    """Result = C + A (8 x 8) B (8 x 16), operands truncated to tf32, one fp32 rounding per
    systolic stage in k order: the model equals this NumPy evaluation bit for bit, and the
    operand layouts are row-major (a one-hot A row selects a B row)."""
    rng = np.random.default_rng(8)
    A = rng.standard_normal((8, 8)).astype(np.float32)
    B = rng.standard_normal((8, 16)).astype(np.float32)
    C = rng.standard_normal((8, 16)).astype(np.float32)
    out = np.empty((8, 16), np.float32)
    xmx.shim_dpas_tf32(ptr(C), ptr(B), ptr(A), ptr(out))
    acc = C.copy()
    At, Bt = tf32_trunc(A), tf32_trunc(B)
    for k in range(8):
        acc = (acc + At[:, k:k + 1] * Bt[k:k + 1, :]).astype(np.float32)
    np.testing.assert_array_equal(out, acc)
    assert not np.array_equal(out, C + A @ B)  # the operands really are rounded to tf32
    onehot = np.zeros((8, 8), np.float32)
    onehot[np.arange(8), [3, 0, 7, 1, 1, 5, 6, 2]] = 1
    xmx.shim_dpas_tf32(ptr(np.zeros((8, 16), np.float32)), ptr(B), ptr(onehot), ptr(out))
    np.testing.assert_array_equal(out, tf32_trunc(B)[[3, 0, 7, 1, 1, 5, 6, 2]])


def run_xmx(lib, A, X, reduce, nb=0, split=1):
    M, K = A.shape
    C = X.shape[1]
    Y = np.full((M, C), np.nan, np.float32)
    rc = lib.shim_spmm_xmx(int(A.col.dtype == np.int64), nb, split, _core.REDUCE[reduce], ptr(A.rowptr), ptr(A.col),
                           ptr(A.val), ptr(X), ptr(Y), M, K, len(A.col), C)
    assert rc == 0, lib.shim_last_errors().decode()
    return Y


def rel_err(Y, R):
    return float(np.abs(Y - R).max() / max(np.abs(R).max(), 1e-30))


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("nb", [1, 2])
def test_xmx_kernel_against_reference(xmx, nb, weighted, index_dtype):
    """Odd M (partial 8-row blocks), K not a multiple of 32 or 8 (partial chunks and k-steps),
    C around the 16-column tiles, empty rows; 3xTF32 within fp32 accuracy of the float64
    reference (measured error of the float32 edge-order sum on the same case x 4), tf32 within 2^-9."""
    rng = np.random.default_rng(nb * 10 + weighted)
    for M, K, C, d in [(37, 75, 17, 0.3), (8, 32, 16, 1.0), (21, 203, 40, 0.1), (9, 5, 1, 0.5), (16, 64, 33, 0.0)]:
        A = random_csr(rng, M, K, d, weighted, index_dtype, empty_rows=range(1, M, 6))
        X = rng.uniform(-1, 1, (K, C)).astype(np.float32)
        for reduce in ("sum", "mean"):
            R64 = ref.spmm(A, X.astype(np.float64), reduce)
            R32 = ref.spmm(A, X, reduce, dtype=np.float32)
            Y = run_xmx(xmx, A, X, reduce, nb, 1)
            assert rel_err(Y, R64) <= 4 * rel_err(R32, R64) + 2.0 ** -23, (M, K, C, rel_err(Y, R64), rel_err(R32, R64))
            Yt = run_xmx(xmx, A, X, reduce, nb, 0)
            assert rel_err(Yt, R64) <= 2.0 ** -9, (M, K, C, rel_err(Yt, R64))
            assert np.all(Y[np.diff(A.rowptr) == 0] == 0)


def test_xmx_policy_choices(xmx):
    out = (ctypes.c_int64 * 4)()
    xmx.shim_xmx_policy(100, 16, out)
    assert (out[0], out[3]) == (1, 13)
    xmx.shim_xmx_policy(100, 130, out)
    assert (out[0], out[3]) == (2, 13 * 5) and out[2] % out[1] == 0 and out[2] >= out[3]
    rng = np.random.default_rng(9)
    A = random_csr(rng, 45, 70, 0.2)
    X = rng.uniform(-1, 1, (70, 50)).astype(np.float32)
    Y = run_xmx(xmx, A, X, "sum")  # the launcher's own choice (nb = 2)
    assert rel_err(Y, ref.spmm(A, X.astype(np.float64), "sum")) < 1e-5


def test_xmx_fallbacks_are_the_sparse_esimd_sum(xmx):
    """Unsorted / duplicate columns and non-finite X: the thread recomputes its rows with the
    sparse ESIMD body (edge order), bitwise equal to the float32 edge-order reference there."""
    rng = np.random.default_rng(10)
    A0 = random_csr(rng, 24, 90, 0.3)
    rowptr, col, val = A0.rowptr.copy(), A0.col.copy(), A0.val.copy()
    b, e = rowptr[2], rowptr[3]
    col[b:e] = col[b:e][::-1].copy()  # block 0 unsorted
    col[rowptr[20] + 1] = col[rowptr[20]]  # block 2: a duplicate
    A = gs.CSR(rowptr, col, val, (24, 90))
    X = rng.uniform(-1, 1, (90, 20)).astype(np.float32)
    X[40, 5] = np.inf
    Y = run_xmx(xmx, A, X, "sum")
    R32 = ref.spmm(A, X, "sum", dtype=np.float32)
    # every block here falls back (block 1 for the inf in X): all rows are the edge-order sums
    np.testing.assert_array_equal(Y, R32)


def test_xmx_compile_check(xmx, compile_only):
    """Every XMX instance the launcher can pick passes the SYCL kernel_compiler's front end and ESIMD
    lowering and checks (SPIR-V, no link, no run), as the other ESIMD kernels in test_esimd.py."""
    names = [n for n in xmx.shim_instance_names(b"esimd/tiles.hpp").decode().splitlines() if n]
    assert len(names) == 16
    compile_only("esimd/tiles.hpp", names)
