"""First calls in a fresh process (docs/aot.md): run it several times in a row.

    GNNSPARSE_CACHE_DIR=$(mktemp -d) python bench/first_call.py   # first process ever
    python bench/first_call.py                                     # again: from the cache
    GNNSPARSE_AOT=0 GNNSPARSE_CACHE=0 python bench/first_call.py   # the source path (before)

Prints import time, the first spmm (Cora-sized graph, 2,708 nodes, 10,556 uniformly random
edges, C = 16, float32), the first call of a
second instance (mean), and where each kernel came from (gnnsparse._sycl.kernel_loads()).
"""
import time

t0 = time.perf_counter()
import numpy as np  # noqa: E402

import gnnsparse as gs  # noqa: E402

t1 = time.perf_counter()
from gnnsparse.bench import generators  # noqa: E402

M = 2708
A = generators.uniform_random(M, 10556, seed=0)
X = np.random.default_rng(0).standard_normal((M, 16)).astype(np.float32)
t2 = time.perf_counter()
gs.spmm(A, X, "sum")
t3 = time.perf_counter()
Y = gs.spmm(A, X, "mean")
t4 = time.perf_counter()
from gnnsparse import _sycl, reference  # noqa: E402

np.testing.assert_allclose(Y, reference.spmm(A, X, "mean"), rtol=1e-5, atol=1e-5)
print(f"import gnnsparse (with numpy) {1e3 * (t1 - t0):.0f} ms, first spmm {1e3 * (t3 - t2):.0f} ms, "
      f"new instance {1e3 * (t4 - t3):.0f} ms")
for name, origin, ms in _sycl.kernel_loads():
    print(f"  {name}: {origin}, {ms:.1f} ms")
