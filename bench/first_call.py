"""First calls in a fresh process (docs/aot.md): run it several times in a row.

    GNNSPARSE_CACHE_DIR=$(mktemp -d) python bench/first_call.py   # first process ever
    python bench/first_call.py                                     # again: from the cache
    GNNSPARSE_AOT=0 GNNSPARSE_CACHE=0 python bench/first_call.py   # the source path (before)
    python bench/first_call.py quant                               # the quantized ops alone
    python bench/first_call.py all                                 # float, then quantized

Graph: Cora-sized (2,708 nodes, 10,556 uniformly random edges), C = 16, float32.
  float  (default) the first spmm (sum) and the first call of a second instance (mean)
  quant  the first gs.quantize (int8; the process's first op when run alone), gs.quant.spmm (sum),
         gs.quant.sddmm (dot), gs.quant.fusedmm (dot, softmax) and gs.quantize at 4 bits (a new
         instance of the quantizer)
Prints import time, each call's wall time, and where each kernel came from
(gnnsparse._sycl.kernel_loads()). Every result is checked against gnnsparse.reference.
"""
import sys
import time

ops = sys.argv[1] if len(sys.argv) > 1 else "float"
if ops not in ("float", "quant", "all"):
    raise SystemExit(__doc__)

t0 = time.perf_counter()
import numpy as np  # noqa: E402

import gnnsparse as gs  # noqa: E402

t1 = time.perf_counter()
from gnnsparse.bench import generators  # noqa: E402

M = 2708
A = generators.uniform_random(M, 10556, seed=0)
X = np.random.default_rng(0).standard_normal((M, 16)).astype(np.float32)
times = {}


def timed(label, f):
    t = time.perf_counter()
    out = f()
    times[label] = 1e3 * (time.perf_counter() - t)
    return out


if ops in ("float", "all"):
    timed("first spmm", lambda: gs.spmm(A, X, "sum"))
    Y = timed("new instance", lambda: gs.spmm(A, X, "mean"))
if ops in ("quant", "all"):
    Q = timed("first quantize", lambda: gs.quantize(X, bits=8, seed=1))
    QY = timed("quant.spmm", lambda: gs.quant.spmm(A, Q, "sum"))
    QE = timed("quant.sddmm", lambda: gs.quant.sddmm(A, Q, Q))
    QF = timed("quant.fusedmm", lambda: gs.quant.fusedmm(A, Q, Q, Q, edge="softmax"))
    Q4 = timed("quantize 4-bit", lambda: gs.quantize(X, bits=4, seed=1))

from gnnsparse import _sycl, reference  # noqa: E402

if ops in ("float", "all"):
    np.testing.assert_allclose(Y, reference.spmm(A, X, "mean"), rtol=1e-5, atol=1e-5)
if ops in ("quant", "all"):
    Xq = np.asarray(gs.dequantize(Q), dtype=np.float64)
    np.testing.assert_allclose(QY, reference.spmm(A, Xq, "sum"), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(QE, reference.sddmm(A, Xq, Xq, "dot"), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(QF, reference.fusedmm(A, Xq, Xq, Xq, "dot", "softmax"), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(gs.dequantize(Q4)), X, atol=float(Q4.scale_value()))
print(f"import gnnsparse (with numpy) {1e3 * (t1 - t0):.0f} ms, "
      + ", ".join(f"{k} {v:.0f} ms" for k, v in times.items()))
for name, origin, ms in _sycl.kernel_loads():
    print(f"  {name}: {origin}, {ms:.1f} ms")
