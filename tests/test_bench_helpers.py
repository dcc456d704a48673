"""The benchmarks' shared helpers (gnnsparse.bench.timing, the generators the bench/ scripts use)."""
from __future__ import annotations

import numpy as np

from gnnsparse.bench import generators, timing


def test_regular_random_rows_have_floor_or_ceil_entries_sorted():
    A = generators.regular_random(7, 30, seed=3, weighted=True)
    deg = np.diff(A.rowptr.astype(np.int64))
    assert deg.tolist() == [5, 5, 4, 4, 4, 4, 4] and A.nnz == 30 and A.shape == (7, 7)
    for i in range(7):
        c = A.col[A.rowptr[i]:A.rowptr[i + 1]]
        assert np.all(np.diff(c) >= 0) and c.min() >= 0 and c.max() < 7
    assert A.val.dtype == np.float32 and 0.5 <= A.val.min() and A.val.max() < 1.5
    B = generators.regular_random(7, 30, seed=3, weighted=True)
    assert np.array_equal(A.col, B.col) and np.array_equal(A.val, B.val)


def test_uniform_edges_are_uniform_randoms_edges():
    ei = generators.uniform_edges(50, 400, seed=5)
    assert ei.shape == (2, 400) and ei.dtype == np.int64 and ei.min() >= 0 and ei.max() < 50
    A = generators.uniform_random(50, 400, seed=5)
    B = generators.csr_from_coo(ei[1], ei[0], (50, 50))
    assert np.array_equal(A.rowptr, B.rowptr) and np.array_equal(A.col, B.col)


def test_wall_timer_counts_calls_blocks_and_hooks():
    seen, hooks = [], []
    out = timing.wall({"a": seen.append, "b": lambda i: None}, rounds=2, per_round=[3, 1], calls=4, warmup=2,
                      hooks={"a": (lambda: hooks.append("in"), lambda: hooks.append("out"))})
    assert {k: len(v) for k, v in out.items()} == {"a": 4, "b": 4}
    assert len(seen) == 2 * 2 + (3 + 1) * 4 and seen == sorted(seen)  # call indices increase
    assert hooks == ["in", "out", "in", "out"]
    assert all(t >= 0 for v in out.values() for t in v)
    assert timing.median_us(lambda: None, reps=5) >= 0
