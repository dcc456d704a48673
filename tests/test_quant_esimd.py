"""The ESIMD quantizer passes (sycl/kernels/esimd/quantize.hpp): what can be checked without an
Intel GPU, as tests/test_esimd.py does for the other ESIMD kernels.

1. Host shim: the kernel bodies, compiled by g++ against tests/esimd_shim/ (plus
   esimd_shim_quant.hpp for the integer, conversion and max operations they use), run on the CPU
   over the launch sycl/esimd_quant.cpp makes; the absmax partials and every quantized byte must
   equal the NumPy model (gnnsparse.quant.model) bit for bit, every output is written exactly once
   and no access leaves its array. Shapes cover full 64-float blocks, the last thread's scalar
   remainder, and threads past the useful ones.
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

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "sycl" / "kernels"
INCLUDE = ROOT / "include"
SHIM = ROOT / "tests" / "esimd_shim"
DRIVERS = ROOT / "tests" / "drivers"
ENTRY = "esimd/quantize.hpp"
NAMES = ["gnnsparse::esimd::quant_absmax<0>"] + [
    f"gnnsparse::esimd::quantize<{b}, {s}, 16>" for b in (8, 4) for s in ("true", "false")]


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
    files = [KERNELS / "esimd" / "quantize.hpp", KERNELS / "esimd" / "common.hpp", KERNELS / "quant_math.hpp",
             SHIM / "esimd_shim.hpp", SHIM / "esimd_shim_quant.hpp", SHIM / "quant_shim_driver.cpp",
             INCLUDE / "gnnsparse" / "ops.hpp"]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + f.read_bytes())
    out = _cache_dir() / f"libquant_shim_{h.hexdigest()[:16]}.so"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        r = subprocess.run([cxx, "-std=c++17", "-O1", "-fPIC", "-shared", "-ffp-contract=off",
                            "-DGNNSPARSE_ESIMD_HOST_SHIM", f"-I{KERNELS}", f"-I{INCLUDE}", f"-I{SHIM}", "-Wall",
                            "-Wno-unknown-pragmas", str(SHIM / "quant_shim_driver.cpp"), "-o", str(tmp)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        os.replace(tmp, out)
    lib = ctypes.CDLL(str(out))
    i64, vp = ctypes.c_int64, ctypes.c_void_p
    lib.shim_quant_errors.restype = ctypes.c_char_p
    lib.shim_quant_absmax.argtypes = [vp, i64, i64, i64, vp]
    lib.shim_quantize.argtypes = [ctypes.c_int, ctypes.c_int, vp, i64, vp, ctypes.c_uint64, vp]
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


def _run_rtc(rtc, names, cwd, dump=False):
    exe, prefix = rtc
    env = dict(os.environ)
    env.setdefault("OCL_ICD_FILENAMES", str(prefix / "lib" / "libintelocl.so"))
    if dump:
        env["SYCL_DUMP_IMAGES"] = "1"
    return subprocess.run([str(exe), str(KERNELS), str(INCLUDE), ENTRY, *names], capture_output=True, text=True,
                          env=env, cwd=cwd)


def test_compile_every_instance(rtc_check, tmp_path):
    r = _run_rtc(rtc_check, NAMES, tmp_path)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-6000:]


def test_compile_check_rejects_bad_instance(rtc_check, tmp_path):
    """The check has teeth: BITS = 5 trips the kernel's static_assert, and the log says so."""
    r = _run_rtc(rtc_check, ["gnnsparse::esimd::quantize<5, true, 16>"], tmp_path)
    assert r.returncode != 0 and "BITS must be 8 or 4" in r.stdout + r.stderr


@pytest.mark.skipif(shutil.which("ocloc") is None, reason="ocloc not installed (apt-get install intel-opencl-icd)")
def test_ocloc_pvc(rtc_check, tmp_path):
    """Every instance's SPIR-V through ocloc for pvc (the vector-compute backend): machine code."""
    r = _run_rtc(rtc_check, NAMES, tmp_path, dump=True)
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
