"""Accuracy of the XMX tiled SpMM (sycl/kernels/esimd/tiles.hpp) on the host shim's dpas model.

    python bench/tiles_xmx_accuracy.py

Builds the shim library (tests/esimd_shim/shim_driver.cpp with SHIM_PART=4, g++), runs the kernel
in 3xTF32 and tf32 on dense-ish random matrices (values and features uniform in [-1, 1]) and prints
max |Y - ref64| / max |ref64| next to the same error of the float32 edge-order sum (what the sparse
kernels compute). This is the kernel's arithmetic under the shim's dpas model, not a GPU result.
"""
from __future__ import annotations

import ctypes
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main():
    from gnnsparse import reference as ref
    import test_sycl_tiles as T

    out = Path(tempfile.mkdtemp()) / "libxmx_shim.so"
    subprocess.run(["g++", "-std=c++17", "-O1", "-fPIC", "-shared", "-ffp-contract=off", "-DGNNSPARSE_ESIMD_HOST_SHIM",
                    "-DSHIM_PART=4", f"-I{ROOT / 'sycl/kernels'}", f"-I{ROOT / 'sycl'}", f"-I{ROOT / 'include'}",
                    f"-I{ROOT / 'tests/esimd_shim'}", str(ROOT / "tests/esimd_shim/shim_driver.cpp"), "-o", str(out)],
                   check=True)
    lib = ctypes.CDLL(str(out))
    lib.shim_last_errors.restype = ctypes.c_char_p
    lib.shim_spmm_xmx.argtypes = [ctypes.c_int] * 4 + [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 4
    print("#", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    rng = np.random.default_rng(0)
    for M, K, C, d in [(64, 2048, 32, 0.3), (64, 1024, 128, 0.1), (128, 4096, 32, 0.2)]:
        A = T.random_csr(rng, M, K, d)
        X = rng.uniform(-1, 1, (K, C)).astype(np.float32)
        R64 = ref.spmm(A, X.astype(np.float64), "sum")
        R32 = ref.spmm(A, X, "sum", dtype=np.float32)
        e3 = T.rel_err(T.run_xmx(lib, A, X, "sum", 0, 1), R64)
        e1 = T.rel_err(T.run_xmx(lib, A, X, "sum", 0, 0), R64)
        print(f"M={M} K={K} N={C} d={d}: 3xTF32 {e3:.2e}  tf32 {e1:.2e}  fp32 edge-order sum {T.rel_err(R32, R64):.2e}")


if __name__ == "__main__":
    main()
