"""Row-panel SpMM for dense-ish inputs on SYCL (sycl/kernels/panel.hpp, sycl/kernels/esimd/panel.hpp).

1. The portable kernel on the OpenCL CPU device, both schedules (GNNSPARSE_SYCL_PANEL=on: the cache
   schedule CPU devices get; =staged: the local-memory schedule), forced for every covered call:
   bitwise equal to the float32 edge-order reference (gnnsparse.reference in float32) and, for
   C >= 16, to the sparse sub-group kernel, on odd sizes, empty rows, density 0 and 1, partial row
   panels and column tiles, one chunk and many (GNNSPARSE_SYCL_PANEL_BK); unsorted and repeated
   columns (exact too); run-to-run bitwise repeat; the knobs' errors.
2. The method choice (GNNSPARSE_SYCL_PANEL unset): which calls take the panel, on both sides of the
   measured rule, and graphs never.
3. The ESIMD kernel on the host shim (tests/esimd_shim, SHIM_PART=5: SLM, barriers, one work-group's
   threads at once, races between barriers reported): every instance against the reference, bitwise;
   the launcher's own choice; the shim's race checks; the compile check of every instance through the
   SYCL kernel_compiler (front end + ESIMD checks). Nothing here runs on an Intel GPU.
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
from gnnsparse.bench import timing
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


def with_env(env, fn):
    """fn() with the environment variables of `env` set (None: unset), restored afterwards."""
    with timing.environ(env):
        return fn()


def spmm_with(mode, A, X, reduce, bk=None):
    return with_env({"GNNSPARSE_SYCL_PANEL": mode, "GNNSPARSE_SYCL_PANEL_BK": bk},
                    lambda: gs.spmm(A, X, reduce))


# ---------------------------------------------------------------------------------------------
# 1. the portable kernel on the CPU device
# ---------------------------------------------------------------------------------------------
# (M, K, C, density): partial panels (32 rows; staged: 32 rows), partial column tiles (16 SG x V
# columns, V = 1 .. 8, and C > 128 in tiles of 128), C below / at / above the sub-group.
SHAPES = [(1, 1, 1, 1.0), (5, 3, 2, 0.5), (37, 130, 5, 0.3), (70, 257, 16, 0.2), (130, 129, 17, 0.1),
          (65, 300, 33, 0.25), (33, 511, 64, 0.05), (100, 200, 100, 0.15), (17, 1000, 129, 0.02),
          (40, 90, 200, 0.3)]


@pytest.fixture
def sycl_dev():
    sycl_or_skip()


@pytest.mark.parametrize("mode", ["on", "staged"])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("case", range(len(SHAPES)))
def test_panel_equals_edge_order_reference(sycl_dev, case, weighted, mode):
    M, K, C, density = SHAPES[case]
    index_dtype = np.int64 if case % 2 else np.int32
    rng = np.random.default_rng(M * 1000 + K + C)
    A = random_csr(rng, M, K, density, weighted, index_dtype, empty_rows=range(0, M, 7))
    X = rng.standard_normal((K, C)).astype(np.float32)
    for reduce in ("sum", "mean"):
        want = ref.spmm(A, X, reduce, dtype=np.float32)
        for bk in (None, "7", "64"):  # the policy's chunk, and many chunks (the cache schedule)
            Y = spmm_with(mode, A, X, reduce, bk)
            np.testing.assert_array_equal(Y, want, err_msg=f"{reduce} BK={bk}")
        np.testing.assert_allclose(Y, ref.spmm(A, X, reduce), rtol=1e-4, atol=1e-5)
        if C >= 16:  # the sparse sub-group kernel sums in edge order too: the method does not change bits
            np.testing.assert_array_equal(Y, spmm_with("off", A, X, reduce))


@pytest.mark.parametrize("mode", ["on", "staged"])
@pytest.mark.parametrize("density", [0.0, 1.0])
def test_panel_density_edges(sycl_dev, mode, density):
    rng = np.random.default_rng(3)
    A = random_csr(rng, 50, 140, density)
    X = rng.standard_normal((140, 20)).astype(np.float32)
    for reduce in ("sum", "mean"):
        Y = spmm_with(mode, A, X, reduce, "16")
        np.testing.assert_array_equal(Y, ref.spmm(A, X, reduce, dtype=np.float32))


@pytest.mark.parametrize("mode", ["on", "staged"])
def test_panel_unsorted_and_repeated_columns_are_exact(sycl_dev, mode):
    """Rows with reversed or repeated columns (allowed by the CSR contract): a row's cursor only moves
    forward, so every row is still summed in CSR order, bitwise the edge-order reference (the staged
    schedule reads an entry of an earlier chunk from X itself)."""
    rng = np.random.default_rng(4)
    A0 = random_csr(rng, 200, 600, 0.2)
    rowptr, col, val = A0.rowptr.copy(), A0.col.copy(), A0.val.copy()
    for r in (3, 150):
        b, e = rowptr[r], rowptr[r + 1]
        col[b:e] = col[b:e][::-1].copy()
    b = rowptr[90]
    col[b + 1] = col[b]
    A = gs.CSR(rowptr, col, val, (200, 600))
    assert not A.sorted_cols()
    X = rng.standard_normal((600, 40)).astype(np.float32)
    for reduce in ("sum", "mean"):
        for bk in ("16", None):
            np.testing.assert_array_equal(spmm_with(mode, A, X, reduce, bk),
                                          ref.spmm(A, X, reduce, dtype=np.float32))


def test_panel_non_finite_x_reaches_only_its_rows(sycl_dev):
    """Only stored entries are multiplied (no densified zeros): inf / NaN rows of X reach only the rows
    of A that store those columns, as in the sparse kernel."""
    rng = np.random.default_rng(5)
    A = random_csr(rng, 120, 400, 0.05)
    X = rng.standard_normal((400, 24)).astype(np.float32)
    X[7, 3], X[50, :] = np.inf, np.nan
    Y = spmm_with("on", A, X, "sum", "32")
    np.testing.assert_array_equal(Y, ref.spmm(A, X, "sum", dtype=np.float32))
    assert np.isfinite(Y).any() and not np.isfinite(Y).all()


def test_panel_bitwise_repeat(sycl_dev):
    rng = np.random.default_rng(6)
    A = random_csr(rng, 300, 2000, 0.15)
    X = rng.standard_normal((2000, 128)).astype(np.float32)
    first = spmm_with("on", A, X, "sum", "100")
    for _ in range(5):
        assert np.array_equal(spmm_with("on", A, X, "sum", "100"), first)
        assert np.array_equal(spmm_with("on", A, X, "sum"), first)


def test_panel_not_covered_cases_use_sparse_kernels(sycl_dev):
    """max / min and float64 are outside the panel kernel: the sparse kernels run, unchanged."""
    rng = np.random.default_rng(7)
    A = random_csr(rng, 40, 60, 0.3)
    X = rng.standard_normal((60, 20))
    np.testing.assert_array_equal(spmm_with("on", A, X, "sum"), spmm_with("off", A, X, "sum"))
    X32 = X.astype(np.float32)
    for reduce in ("max", "min"):
        np.testing.assert_array_equal(spmm_with("on", A, X32, reduce), spmm_with("off", A, X32, reduce))


def test_panel_knob_errors(sycl_dev):
    rng = np.random.default_rng(8)
    A = random_csr(rng, 20, 30, 0.3)
    X = rng.standard_normal((30, 16)).astype(np.float32)
    with pytest.raises(ValueError, match="GNNSPARSE_SYCL_PANEL must be"):
        spmm_with("sometimes", A, X, "sum")
    for bad in ("0", "-3", "x"):
        with pytest.raises(ValueError, match="GNNSPARSE_SYCL_PANEL_BK must be"):
            spmm_with("on", A, X, "sum", bad)
    spmm_with("off", A, X, "sum", "x")  # the chunk knob is read only when the panel runs


def test_panel_torch_route_and_gradients(sycl_dev):
    """The torch op on the CPU device with the panel forced: forward bitwise the reference, gradients
    those of the sparse kernels (the backward SpMM over A^T takes the panel too, when covered)."""
    torch = pytest.importorskip("torch")
    import gnnsparse.torch  # noqa: F401  (registers autograd)

    rng = np.random.default_rng(9)
    A = random_csr(rng, 64, 300, 0.2)
    X = rng.standard_normal((300, 32)).astype(np.float32)

    def run(mode):
        def go():
            x = torch.tensor(X, requires_grad=True)
            y = gs.spmm(A, x, "mean")
            y.square().sum().backward()
            return y.detach().numpy(), x.grad.numpy()
        return with_env({"GNNSPARSE_SYCL_PANEL": mode}, go)

    (y_on, g_on), (y_off, g_off) = run("on"), run("off")
    np.testing.assert_array_equal(y_on, ref.spmm(A, X, "mean", dtype=np.float32))
    np.testing.assert_array_equal(y_on, y_off)
    np.testing.assert_allclose(g_on, g_off, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# 2. the method choice
# ---------------------------------------------------------------------------------------------
def takes_panel(A, X, reduce="sum"):
    """Whether the automatic choice runs the panel kernel for this call. The panel and the sparse
    kernel give the same bits, so the probe is the chunk knob, which is read only when the panel runs:
    an invalid value raises exactly when the panel is taken."""
    try:
        with_env({"GNNSPARSE_SYCL_PANEL": None, "GNNSPARSE_SYCL_PANEL_BK": "invalid"},
                 lambda: gs.spmm(A, X, reduce))
    except ValueError as e:
        assert "GNNSPARSE_SYCL_PANEL_BK" in str(e)
        return True
    return False


# ---------------------------------------------------------------------------------------------
# 3. the ESIMD kernel on the host shim
# ---------------------------------------------------------------------------------------------
def _cache_dir() -> Path:
    base = Path(os.environ.get("GNNSPARSE_TEST_CACHE", Path(tempfile.gettempdir()) / "gnnsparse-test-cache"))
    base.mkdir(parents=True, exist_ok=True)
    return base


@pytest.fixture(scope="session")
def panel_shim():
    import shutil

    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        pytest.skip("no C++ compiler for the ESIMD host shim")
    files = (sorted((KERNELS / "esimd").glob("*.hpp")) + sorted(SHIM.glob("*.hpp")) + [SHIM / "shim_driver.cpp"]
             + [HOST / "esimd_policy.hpp", HOST / "instances.hpp", INCLUDE / "gnnsparse" / "ops.hpp"])
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + f.read_bytes())
    h.update(b"-fno-gnu-unique -Bsymbolic")
    out = _cache_dir() / f"libpanel_shim_{h.hexdigest()[:16]}.so"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        # -fno-gnu-unique -Bsymbolic: the library binds to its own copies of the inline tables
        # (sycl/instances.hpp), not to those of a gnnsparse._sycl module of another build loaded in the
        # same process (g++ makes inline variables process-wide "unique" symbols by default)
        cmd = [cxx, "-std=c++17", "-O1", "-fPIC", "-shared", "-pthread", "-fno-gnu-unique", "-Wl,-Bsymbolic",
               "-ffp-contract=off",
               "-DGNNSPARSE_ESIMD_HOST_SHIM", "-DSHIM_PART=5", f"-I{KERNELS}", f"-I{HOST}", f"-I{INCLUDE}", f"-I{SHIM}",
               "-Wall", "-Wno-unknown-pragmas", str(SHIM / "shim_driver.cpp"), "-o", str(tmp)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr[-6000:]
        os.replace(tmp, out)
    lib = ctypes.CDLL(str(out))
    i64, vp = ctypes.c_int64, ctypes.c_void_p
    lib.shim_last_errors.restype = ctypes.c_char_p
    lib.shim_instance_names.restype = ctypes.c_char_p
    lib.shim_instance_names.argtypes = [ctypes.c_char_p]
    lib.shim_panel_policy.argtypes = [i64, i64, ctypes.POINTER(i64)]
    lib.shim_slm_probe.argtypes = [ctypes.c_int]
    lib.shim_spmm_panel.argtypes = [ctypes.c_int] * 3 + [vp] * 5 + [i64] * 4
    lib.shim_spmm_panel.restype = ctypes.c_int
    return lib


def ptr(a):
    return None if a is None else a.ctypes.data_as(ctypes.c_void_p)


def run_panel(lib, A, X, reduce, bn=0):
    M, K = A.shape
    C = X.shape[1]
    Y = np.full((M, C), np.nan, np.float32)
    rc = lib.shim_spmm_panel(int(A.col.dtype == np.int64), bn, _core.REDUCE[reduce], ptr(A.rowptr), ptr(A.col),
                             ptr(A.val), ptr(X), ptr(Y), M, K, len(A.col), C)
    assert rc == 0, lib.shim_last_errors().decode()
    return Y


# (M, K, C, density): a partial last panel (64 rows) and threads without rows, chunks of 8192 / BN
# rows of X (K above it: several chunks for every BN), C at, below and above the tile.
SHIM_SHAPES = [(70, 1100, 16, 0.05), (130, 600, 40, 0.2), (64, 130, 128, 0.3), (9, 5, 1, 0.5), (40, 300, 100, 0.0)]


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("bn", [16, 32, 64, 128])
def test_esimd_panel_every_instance(panel_shim, bn, weighted, index_dtype):
    """Every instance (BN x weighted x index type) on every shape, sum and mean: bitwise the float32
    edge-order reference (the shim compiles with -ffp-contract=off); the shim also checks that every
    access stays in its array, every output is written once and SLM is never raced."""
    rng = np.random.default_rng(bn + weighted)
    for M, K, C, d in SHIM_SHAPES:
        A = random_csr(rng, M, K, d, weighted, index_dtype, empty_rows=range(1, M, 6))
        X = rng.standard_normal((K, C)).astype(np.float32)
        for reduce in ("sum", "mean"):
            np.testing.assert_array_equal(run_panel(panel_shim, A, X, reduce, bn),
                                          ref.spmm(A, X, reduce, dtype=np.float32), err_msg=f"{M} {K} {C} {d}")


def test_esimd_panel_launcher_choice_and_unsorted_rows(panel_shim):
    """The launcher's own tile (the smallest of 16 .. 128 covering C; C > 128 in tiles of 128) and rows
    with reversed and repeated columns: exact (entries of an earlier chunk are read from X)."""
    out = (ctypes.c_int64 * 4)()
    for C, bn in [(1, 16), (16, 16), (17, 32), (100, 128), (300, 128)]:
        panel_shim.shim_panel_policy(100, C, out)
        assert out[0] == bn and out[1] == 16 and out[3] == 2 * -(-C // bn) and out[2] == 16 * out[3]
    rng = np.random.default_rng(11)
    A0 = random_csr(rng, 90, 1500, 0.1)
    rowptr, col, val = A0.rowptr.copy(), A0.col.copy(), A0.val.copy()
    b, e = rowptr[5], rowptr[6]
    col[b:e] = col[b:e][::-1].copy()
    col[rowptr[70] + 1] = col[rowptr[70]]
    A = gs.CSR(rowptr, col, val, (90, 1500))
    for C in (20, 300):
        X = rng.standard_normal((1500, C)).astype(np.float32)
        np.testing.assert_array_equal(run_panel(panel_shim, A, X, "sum"), ref.spmm(A, X, "sum", dtype=np.float32))


def test_esimd_shim_reports_slm_races(panel_shim):
    """The shim's SLM checks fire: a load racing a store (no barrier), threads passing different
    numbers of barriers, a load of SLM never stored, two threads storing one word in one phase."""
    assert panel_shim.shim_slm_probe(0) == 0, panel_shim.shim_last_errors().decode()
    for mode, text in [(1, "SLM"), (2, "different numbers of barriers"), (3, "never stored"), (4, "two threads")]:
        assert panel_shim.shim_slm_probe(mode) > 0, mode
        assert text in panel_shim.shim_last_errors().decode(), mode


def test_esimd_panel_compile_check(panel_shim, compile_only):
    """Every panel instance the launcher can pick passes the SYCL kernel_compiler's front end and ESIMD
    lowering and checks (slm_init, SLM block messages, barrier; SPIR-V, no link, no run)."""
    names = [n for n in panel_shim.shim_instance_names(b"esimd/panel.hpp").decode().splitlines() if n]
    assert len(names) == 16
    compile_only("esimd/panel.hpp", names)


def _cache_bytes():
    import dpctl

    return int(dpctl.SyclDevice(os.environ.get("GNNSPARSE_SYCL_DEVICE", "opencl:cpu")).global_mem_cache_size)


def test_policy_takes_panel_only_beyond_the_measured_rule(sycl_dev):
    """GNNSPARSE_SYCL_PANEL unset on the CPU device (sycl/policy.hpp, prefer_panel_cpu): the panel for
    sorted rows, M >= 256, C a multiple of 128 (16-lane sub-groups x 8), X's 128-column tile at least
    twice the device cache and density >= 0.25; the sparse kernel on the other side of every bound."""
    if _cache_bytes() <= 0:
        pytest.skip("the device reports no cache size")
    K = 2 * _cache_bytes() // (128 * 4)  # the smallest K whose 128-column tile of X is twice the cache
    rng = np.random.default_rng(10)
    A = random_csr(rng, 256, K, 0.3)
    assert A.sorted_cols()
    X = rng.standard_normal((K, 128)).astype(np.float32)
    assert takes_panel(A, X) and takes_panel(A, X, "mean")
    assert takes_panel(A, np.concatenate([X, X], 1))  # two full column tiles
    np.testing.assert_array_equal(with_env({"GNNSPARSE_SYCL_PANEL": None}, lambda: gs.spmm(A, X, "sum")),
                                  ref.spmm(A, X, "sum", dtype=np.float32))
    # the other side of each bound
    assert not takes_panel(random_csr(rng, 256, K, 0.2), X)  # density
    assert not takes_panel(A, X[:, :64]) and not takes_panel(A, X[:, :100])  # not full 128-column tiles
    half = K // 2 - 1
    assert not takes_panel(random_csr(rng, 256, half, 0.3), X[:half])  # the tile within twice the cache
    assert not takes_panel(random_csr(rng, 255, K, 0.3), X)  # M
    rowptr, col, val = A.rowptr.copy(), A.col.copy(), A.val.copy()
    col[rowptr[9]:rowptr[10]] = col[rowptr[9]:rowptr[10]][::-1].copy()
    assert not takes_panel(gs.CSR(rowptr, col, val, A.shape), X)  # unsorted rows
    assert not takes_panel(A, X.astype(np.float64)) and not takes_panel(A, X, "max")  # not covered
    try:  # "off" wins over the rule
        os.environ["GNNSPARSE_SYCL_PANEL"] = "off"
        os.environ["GNNSPARSE_SYCL_PANEL_BK"] = "invalid"
        gs.spmm(A, X, "sum")
    finally:
        os.environ.pop("GNNSPARSE_SYCL_PANEL", None)
        os.environ.pop("GNNSPARSE_SYCL_PANEL_BK", None)


def test_graphs_never_take_the_panel(sycl_dev):
    """Graphs (density ~1e-4 and below): the CSR does not even check its rows' order below 1 % density
    (sorted_cols stays unknown), so the method choice never takes the panel, at any width."""
    from gnnsparse.bench import generators

    for name, G in [("uniform", generators.uniform_random(20000, 200000, seed=1)),
                    ("power law (R-MAT)", generators.rmat(16384, 200000, seed=1))]:
        X = np.random.default_rng(0).standard_normal((G.shape[1], 128)).astype(np.float32)
        assert not takes_panel(G, X), name
    rng = np.random.default_rng(12)
    A = random_csr(rng, 3000, 9000, 0.002)  # sorted, but below the CSR's 1 % sortedness check
    assert not takes_panel(A, rng.standard_normal((9000, 128)).astype(np.float32))
