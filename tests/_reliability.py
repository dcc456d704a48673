"""Shared pieces of the reliability tests (properties, faults, concurrency, determinism).

Everything here goes through the public API (gnnsparse.CSR, spmm, sddmm, fusedmm, reference) and
builds the arrays each backend takes: NumPy (or torch CPU) for the SYCL backend, torch CUDA tensors
for the CUDA backend. Comparisons are against gnnsparse.reference with error bounds derived from the
computation (a sum of n terms in a precision with unit roundoff u is within ~n*u*sum|terms| of the
exact sum), NaN/inf positions compared exactly, and max/min values and arg compared exactly.
"""
from __future__ import annotations

import os
import types

import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import reference as ref

BACKENDS = ("sycl", "cuda")
DTYPES = {"sycl": ("float32", "float64"), "cuda": ("float32", "float64", "float16", "bfloat16")}
ALL_FLOAT = ("float32", "float64", "float16", "bfloat16")
UNIT = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
REDUCTIONS = ("sum", "mean", "max", "min")
SDDMM_OPS = ("dot", "add")
EDGES = ("none", "leaky_relu", "exp", "softmax")
REQUIRED = {b for b in os.environ.get("GNNSPARSE_REQUIRE", "").split(",") if b}

_AVAILABLE = gs.available_backends()


def torch_or_none():
    try:
        import torch

        return torch
    except Exception:  # pragma: no cover - depends on the install
        return None


def backend_ok(name: str) -> bool:
    if name == "cuda":
        t = torch_or_none()
        return bool(_AVAILABLE.get("cuda")) and t is not None and t.cuda.is_available()
    return bool(_AVAILABLE.get(name))


def require(name: str):
    """Skip (or fail, when GNNSPARSE_REQUIRE names it) unless backend `name` runs here."""
    if not backend_ok(name):
        msg = f"{name} backend not available here"
        if name in REQUIRED:
            pytest.fail(msg)
        pytest.skip(msg)


def backend_params():
    """pytest params for every backend, marked like the rest of the suite."""
    return [pytest.param("sycl", marks=pytest.mark.sycl), pytest.param("cuda", marks=pytest.mark.cuda)]


# ---------------------------------------------------------------- arrays
def acc_dtype(dtype: str) -> str:
    """What the kernels accumulate in: float64 for float64 features, float32 for the rest."""
    return "float64" if dtype == "float64" else "float32"


def round_to(x, dtype: str) -> np.ndarray:
    """float64 copy of x rounded (to nearest even) to `dtype`, as the kernels' output conversion does."""
    x = np.asarray(x, np.float64)
    if dtype == "float64":
        return x.copy()
    if dtype == "bfloat16":
        torch = torch_or_none()
        return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16).to(torch.float64).numpy()
    return x.astype(dtype).astype(np.float64)


def to_backend(a: np.ndarray, backend: str, dtype: str, framework: str = "numpy", offset: int = 0):
    """A dense input for `backend` holding a (rounded to dtype). `offset` > 0 places a CUDA tensor
    `offset` elements into a larger buffer, so its address is not 16-byte aligned (the kernels'
    scalar-load path)."""
    if backend == "sycl":
        x = np.ascontiguousarray(a, dtype=dtype)
        if framework == "torch":
            return torch_or_none().from_numpy(x)
        return x
    torch = torch_or_none()
    t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float64)).to(getattr(torch, dtype))
    if offset:
        buf = torch.empty(t.numel() + offset, dtype=t.dtype)
        buf[offset:] = t.reshape(-1)
        return buf.cuda()[offset:].view(t.shape)
    return t.cuda()


def host(x) -> np.ndarray:
    """float64 (or int64 for integer arrays) NumPy copy of any result."""
    torch = torch_or_none()
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype.is_floating_point:
            x = x.to(torch.float64)
        return x.numpy()
    x = np.asarray(x)
    return x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)


def exact_values(x) -> np.ndarray:
    """The values the kernel actually reads (after rounding to the input dtype), as float64."""
    return host(x)


def dtype_of(x) -> str:
    torch = torch_or_none()
    if torch is not None and isinstance(x, torch.Tensor):
        return str(x.dtype).replace("torch.", "")
    return np.asarray(x).dtype.name


def poison_cuda_allocator():
    """Fill memory that torch's caching allocator hands out next with NaN, so outputs a kernel
    leaves unwritten show up (the CUDA counterpart of GNNSPARSE_POISON for the SYCL backend)."""
    torch = torch_or_none()
    for n in (1 << 12, 1 << 16, 1 << 20):
        t = torch.full((n,), float("nan"), device="cuda")
        del t


# ---------------------------------------------------------------- graphs
def make_graph(rng, M, K, *, mean_deg=3.0, empty_frac=0.2, hub=0, self_loops=True, dups=True):
    """rowptr (int64), col (int64): unsorted rows, empty rows, duplicates, self loops, a hub row."""
    deg = rng.poisson(mean_deg, M).astype(np.int64) if M else np.zeros(0, np.int64)
    if M:
        deg[rng.random(M) < empty_frac] = 0
        if hub:
            deg[rng.integers(M)] = hub
    if K == 0:
        deg[:] = 0
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(deg, out=rowptr[1:])
    nnz = int(rowptr[-1])
    col = rng.integers(0, max(K, 1), nnz).astype(np.int64)
    rows = np.repeat(np.arange(M, dtype=np.int64), deg)
    if nnz and self_loops:
        pick = rng.random(nnz) < 0.1
        pick &= rows < K
        col[pick] = rows[pick]
    if nnz > 1 and dups:
        # repeat the previous column inside a row (multi-edges)
        same_row = np.flatnonzero(rows[1:] == rows[:-1]) + 1
        if same_row.size:
            k = rng.choice(same_row, size=max(1, same_row.size // 8), replace=False)
            col[k] = col[k - 1]
    return rowptr, col


def ref_csr(rowptr, col, val, shape):
    """What gnnsparse.reference reads from a CSR (host arrays), for values already rounded."""
    return types.SimpleNamespace(rowptr=np.asarray(rowptr), col=np.asarray(col),
                                 val=None if val is None else np.asarray(val, np.float64), shape=tuple(shape))


def abs_csr(A):
    return ref_csr(A.rowptr, A.col, None if A.val is None else np.abs(A.val), A.shape)


def kernel_val_dtype(val_dtype, dtype):
    """The value dtype the kernels read for features of `dtype` (half types read float32 values)."""
    if val_dtype is None:
        return None
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def values(rng, shape, mode: str, scale: float = 1.0, specials: int = 0) -> np.ndarray:
    """float64 values: 'normal' (uniform in [-scale, scale]), 'ties' (small integers, so max/min
    ties and exact sums), 'special' (normal plus a few NaN/+inf/-inf)."""
    if mode == "ties":
        x = rng.integers(-2, 3, shape).astype(np.float64)
    else:
        x = rng.uniform(-scale, scale, shape)
    if mode == "special" and x.size:
        for _ in range(max(1, specials)):
            x.reshape(-1)[rng.integers(x.size)] = rng.choice([np.nan, np.inf, -np.inf])
    return x


# ---------------------------------------------------------------- comparisons
def _quiet(fn):
    """NaN/inf inputs are part of the tests: NumPy's floating-point warnings are expected here."""
    import functools

    @functools.wraps(fn)
    def wrapper(*a, **k):
        with np.errstate(all="ignore"):
            return fn(*a, **k)

    return wrapper


@_quiet
def assert_match(got, want, bound, what: str):
    """NaN where want is NaN, the same infinity where want is infinite, |got - want| <= bound elsewhere
    (a NaN/inf bound puts no limit on a finite value but the value must still be finite)."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != reference {want.shape}"
    bound = np.broadcast_to(np.asarray(bound, np.float64), want.shape)
    nan_w, nan_g = np.isnan(want), np.isnan(got)
    bad = nan_w != nan_g
    inf_w = np.isinf(want)
    bad |= inf_w & (got != want)
    fin = np.isfinite(want)
    bad |= fin & ~np.isfinite(got)
    b = np.where(np.isfinite(bound), bound, np.inf)
    with np.errstate(invalid="ignore"):
        bad |= fin & np.isfinite(got) & (np.abs(got - want) > b)
    if bad.any():
        idx = np.argwhere(bad)[:5]
        lines = [f"  at {tuple(int(i) for i in ix)}: got {got[tuple(ix)]!r}, want {want[tuple(ix)]!r}, "
                 f"bound {bound[tuple(ix)]!r}" for ix in idx]
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} elements differ from the reference\n"
                             + "\n".join(lines))


def assert_exact(got, want, what: str):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != reference {want.shape}"
    same = (got == want) | (np.isnan(got) & np.isnan(want)) if got.dtype.kind == "f" else got == want
    if not np.all(same):
        idx = np.argwhere(~same)[:5]
        lines = [f"  at {tuple(int(i) for i in ix)}: got {got[tuple(ix)]!r}, want {want[tuple(ix)]!r}" for ix in idx]
        raise AssertionError(f"{what}: {int((~same).sum())} of {same.size} elements differ\n" + "\n".join(lines))


def degrees(R) -> np.ndarray:
    return np.diff(np.asarray(R.rowptr, np.int64))


@_quiet
def expect_spmm(R, Xh, reduce, dtype):
    """(Y, arg, bound): reference output for features of `dtype` (Xh already rounded to it)."""
    u, uo = UNIT[acc_dtype(dtype)], UNIT[dtype]
    if reduce in ("max", "min"):
        # messages formed in the kernels' precision: the same rounding, so values and arg are exact
        Y, arg = ref.spmm(R, Xh, reduce, return_arg=True, dtype=np.dtype(acc_dtype(dtype)))
        return round_to(Y, dtype), arg, 0.0
    Y = ref.spmm(R, Xh, reduce)
    with np.errstate(invalid="ignore", over="ignore"):
        S = ref.spmm(abs_csr(R), np.abs(Xh), reduce)
    deg = degrees(R).astype(np.float64).reshape((-1,) + (1,) * (Xh.ndim - 1))
    bound = 2 * (deg + 2) * u * S + 2 * uo * np.abs(Y)
    return Y, None, bound


@_quiet
def expect_sddmm(R, Xh, Yh, op, dtype):
    if op == "add":
        E = ref.sddmm(R, Xh, Yh, "add", dtype=np.dtype(acc_dtype(dtype)))
        return round_to(E, dtype), 0.0
    E = ref.sddmm(R, Xh, Yh, "dot")
    with np.errstate(invalid="ignore", over="ignore"):
        S = ref.sddmm(R, np.abs(Xh), np.abs(Yh), "dot")
    F = Xh.shape[-1]
    return E, 2 * (F + 2) * UNIT[acc_dtype(dtype)] * S + 2 * UNIT[dtype] * np.abs(E)


@_quiet
def expect_fusedmm(R, Xh, Yh, Zh, op, edge, slope, dtype):
    """(out (M, H, D), edges (nnz, H), out_bound, edge_bound) from a first-order error analysis of
    score -> edge function -> weighted sum, with a factor 4 of slack. Heads are always explicit here;
    callers reshape to the frontend's shapes."""
    u, uo = UNIT[acc_dtype(dtype)], UNIT[dtype]
    M = R.shape[0]
    nnz = len(R.col)
    Z3 = Zh[:, None, :] if Zh.ndim == 2 else Zh
    H, D = Z3.shape[1], Z3.shape[2]
    F = Xh.shape[-1] if op == "dot" else 1
    X3 = Xh.reshape((M, H, F)) if op == "dot" else Xh.reshape((M, H))
    Y3 = Yh.reshape((Yh.shape[0], H, F)) if op == "dot" else Yh.reshape((Yh.shape[0], H))
    with np.errstate(invalid="ignore", over="ignore"):
        out, w = ref.fusedmm(R, X3, Y3, Z3, op=op, edge=edge, slope=slope, return_edges=True)
        out, w = out.reshape((M, H, D)), w.reshape((nnz, H))
        e = ref.sddmm(R, X3, Y3, op).reshape((nnz, H))
        if op == "dot":
            de = 2 * (X3.shape[-1] + 2) * u * ref.sddmm(R, np.abs(X3), np.abs(Y3), "dot").reshape((nnz, H))
        else:
            de = u * ref.sddmm(R, np.abs(X3), np.abs(Y3), "add").reshape((nnz, H))
        de = np.where(np.isfinite(de) & np.isfinite(e), de, 0.0)
        raw = ref.fusedmm(ref_csr(R.rowptr, R.col, None, R.shape), X3, Y3, Z3, op=op, edge=edge, slope=slope,
                          return_edges=True)[1].reshape((nnz, H))
        deg = degrees(R)
        rows = np.repeat(np.arange(M), deg)
        if edge == "none":
            dw = de
        elif edge == "leaky_relu":
            dw = max(1.0, abs(slope)) * de
        elif edge == "exp":
            dw = np.abs(raw) * (np.expm1(de) + 4 * u)
        else:
            rowmax = np.zeros((M, H))
            if nnz:
                np.maximum.at(rowmax, rows, de)
            dw = np.abs(raw) * (2 * np.expm1(2 * rowmax[rows]) + (deg[rows][:, None] + 8) * u)
        val = np.ones(nnz) if R.val is None else np.asarray(R.val, np.float64)
        absw = np.abs(raw) * np.abs(val)[:, None]
        dwv = dw * np.abs(val)[:, None] + u * absw
        col = np.asarray(R.col, np.int64)
        ob = np.zeros((M, H, D))
        if nnz:
            az = np.abs(Z3[col])
            np.add.at(ob, rows, dwv[:, :, None] * az
                      + 2 * (deg[rows][:, None, None] + 2) * u * absw[:, :, None] * az)
        out_bound = 4 * ob + 2 * uo * np.abs(out)
        edge_bound = 4 * dwv + 2 * uo * np.abs(w)
    return out, w, out_bound, edge_bound


# ---------------------------------------------------------------- the process stays usable
_USABLE = {}


def assert_usable(backend: str):
    """A fixed small SpMM after an exception: it must run and give the right answer."""
    if backend not in _USABLE:
        A = gs.CSR(np.array([0, 2, 2, 3], np.int32), np.array([1, 0, 1], np.int32), None, (3, 2))
        _USABLE[backend] = A
    A = _USABLE[backend]
    X = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    got = host(gs.spmm(A, to_backend(X, backend, "float32"), "sum"))
    assert np.array_equal(got, np.array([[5.0, 7.0, 9.0], [0, 0, 0], [4.0, 5.0, 6.0]])), got


def kernel_cache_size():
    """Number of SYCL kernel instances built in this process (None without the SYCL module)."""
    try:
        from gnnsparse import _sycl

        return _sycl.kernel_cache_size()
    except Exception:
        return None
