"""GPU tests of the CUDA backend (skipped without a GPU, the compiled module, or torch).

Two layers: the CUDA backend (gnnsparse._cuda_backend) called directly the way the frontend calls it,
with the longest row left unknown so the hub pass is always armed (arrays built here), and the
public API gnnsparse.spmm / sddmm / fusedmm on torch and CuPy inputs. Every result is checked
against gnnsparse.reference (NumPy); max/min values and arg are compared exactly, with the
reference's messages computed in the kernels' accumulation precision. Determinism: every op is
run twice and the outputs compared bitwise.
"""
import types

import numpy as np
import pytest

pytestmark = pytest.mark.cuda

torch = pytest.importorskip("torch")
from gnnsparse import _core, _cuda_backend  # noqa: E402
from gnnsparse import reference as ref  # noqa: E402

if not _cuda_backend.backend.available() or not torch.cuda.is_available():
    pytest.skip("no CUDA device or no compiled gnnsparse CUDA module", allow_module_level=True)


class cudab:
    """The backend layer with the old array-level signatures of these tests (max_degree = -1)."""

    b = _cuda_backend.backend

    @staticmethod
    def _dt(x):
        name = str(x.dtype).replace("torch.", "") if isinstance(x, torch.Tensor) else str(x.dtype)
        return _core.DTYPE[name][0]

    @classmethod
    def _view(cls, r, c, v, M, K):
        return cls.b.view(r, c, v, M, K, int(c.shape[0]), -1)

    @classmethod
    def spmm(cls, r, c, v, X, M, K, reduce, want_arg):
        return cls.b.spmm(cls._view(r, c, v, M, K), X, M, int(X.shape[1]), cls._dt(X), _core.REDUCE[reduce],
                          want_arg, 0)

    @classmethod
    def sddmm(cls, r, c, X, Y, M, K, op):
        nnz = int(c.shape[0])
        if op == "dot":
            H, F = (1, int(X.shape[1])) if X.ndim == 2 else (int(X.shape[1]), int(X.shape[2]))
            shape = (nnz,) if X.ndim == 2 else (nnz, H)
        else:
            H, F = (1 if X.ndim == 1 else int(X.shape[1])), 1
            shape = (nnz,) if X.ndim == 1 else (nnz, H)
        E = cls.b.sddmm(cls._view(r, c, None, M, K), X, Y, nnz, H, F, cls._dt(X), _core.SDDMM_OP[op], 0)
        return E.reshape(shape)

    @classmethod
    def fusedmm(cls, r, c, v, X, Y, Z, M, K, op, edge, slope, want_edges):
        H, D = int(Z.shape[1]), int(Z.shape[2])
        F = int(X.shape[2]) if op == "dot" else 1
        return cls.b.fusedmm(cls._view(r, c, v, M, K), X, Y, Z, M, H, F, D, cls._dt(X), _core.SDDMM_OP[op],
                             _core.EDGE_FN[edge], slope, want_edges, 0)

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16}
TOL = {"float64": 1e-10, "float32": 2e-5, "float16": 1e-2, "bfloat16": 6e-2}
DEV = "cuda"


def make_graph(M, K, avg_deg, seed, hub=0, empty_frac=0.2):
    """Random CSR with empty rows, duplicate columns, unsorted rows, optionally one hub row."""
    rng = np.random.default_rng(seed)
    deg = rng.poisson(avg_deg, M).astype(np.int64)
    deg[rng.random(M) < empty_frac] = 0
    if M > 0:
        deg[M - 1] = 0  # last row empty
    if hub:
        deg[M // 2] = hub
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(deg, out=rowptr[1:])
    nnz = int(rowptr[-1])
    col = rng.integers(0, K, nnz).astype(np.int64)
    if nnz > 3:
        col[1] = col[0]  # a duplicate edge
    val = rng.uniform(-1.0, 1.0, nnz).astype(np.float32)
    return rowptr, col, val


def dev_graph(rowptr, col, val, itype, vdtype):
    it = torch.int32 if itype == "int32" else torch.int64
    r = torch.from_numpy(rowptr).to(DEV, it)
    c = torch.from_numpy(col).to(DEV, it)
    v = None if val is None else torch.from_numpy(val).to(DEV, vdtype)
    return r, c, v


def val_dtype(dt):
    return torch.float32 if dt in ("float16", "bfloat16") else DTYPES[dt]


def host(t):
    t = t.detach()
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.float()
    return t.cpu().numpy()


def rand(shape, dt, seed, scale=1.0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-scale, scale, shape).astype(np.float64)
    return torch.from_numpy(x).to(DEV, DTYPES[dt])


def ns(rowptr, col, val_t, M, K):
    return types.SimpleNamespace(rowptr=rowptr, col=col, val=None if val_t is None else host(val_t),
                                 shape=(M, K))


def close(got, want, dt):
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.nanmax(np.abs(want))) if want.size else 1.0)
    np.testing.assert_allclose(got, want, rtol=TOL[dt], atol=TOL[dt] * scale)


def poison():
    """Fill the memory torch's caching allocator hands out next with NaN, so that an output element
    a kernel leaves unwritten shows up as NaN (outputs are allocated with torch.empty)."""
    big = torch.full((1 << 22,), float("nan"), device=DEV)
    del big


def same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    it = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    assert torch.equal(a.view(it), b.view(it))


def acc_np(dt):
    return np.float64 if dt == "float64" else np.float32


# ---- SpMM ---------------------------------------------------------------------------------

def check_spmm(rowptr, col, val, M, K, C, dt, itype, reduce, seed, weighted=True, X=None):
    r, c, v = dev_graph(rowptr, col, val if weighted else None, itype, val_dtype(dt))
    if X is None:
        X = rand((K, C), dt, seed)
    want_arg = reduce in ("max", "min")
    poison()
    Y, arg = cudab.spmm(r, c, v, X, M, K, reduce, want_arg)
    torch.cuda.synchronize()
    A = ns(rowptr, col, v, M, K)
    Xh = host(X)
    if want_arg:
        Yr, argr = ref.spmm(A, Xh, reduce, return_arg=True, dtype=acc_np(dt))
        assert arg.dtype == torch.int64
        np.testing.assert_array_equal(host(arg), argr)
        # values: exact messages, rounded once to the output dtype
        want = torch.from_numpy(np.ascontiguousarray(Yr)).to(DEV).to(DTYPES[dt])
        np.testing.assert_array_equal(host(Y), host(want))
    else:
        close(host(Y), ref.spmm(A, Xh, reduce), dt)
    Y2, arg2 = cudab.spmm(r, c, v, X, M, K, reduce, want_arg)
    same_bits(Y, Y2)
    if want_arg:
        assert torch.equal(arg, arg2)


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("C", [1, 3, 8, 16, 17, 33, 47, 95, 121, 128, 129, 256, 257])
def test_spmm_backend(dt, reduce, C):
    # odd C: the scalar path with 3 (C = 3, 47, 95), 4 (121) or 5 (17, 33, 129, 257) columns per lane
    M, K = 150, 120
    rowptr, col, val = make_graph(M, K, 6, seed=C)
    for itype, weighted in (("int32", True), ("int64", False)):
        check_spmm(rowptr, col, val, M, K, C, dt, itype, reduce, seed=7 + C, weighted=weighted)


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("dt,C", [("float32", 16), ("float32", 33), ("float32", 47), ("float32", 256),
                                  ("bfloat16", 32), ("bfloat16", 512), ("float16", 47), ("float64", 5),
                                  ("float64", 47)])
def test_spmm_hub(reduce, dt, C):
    M, K = 600, 5000
    rowptr, col, val = make_graph(M, K, 30, seed=3, hub=120_000)
    check_spmm(rowptr, col, val, M, K, C, dt, "int64", reduce, seed=11)


def int_features(K, C, dt, seed):
    """Small integers: many exact ties between messages."""
    x = np.random.default_rng(seed).integers(-2, 3, (K, C)).astype(np.float32)
    return torch.from_numpy(x).to(DEV, DTYPES[dt])


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("dt,C", [("float32", 1), ("float32", 16), ("float32", 33), ("float32", 47),
                                  ("bfloat16", 128), ("float64", 4), ("float16", 32)])
def test_spmm_dense_rows_ties(reduce, dt, C):
    # long average rows: the edge-split path (several lane sets per row, merged by a shuffle tree)
    M, K = 64, 300
    rowptr, col, val = make_graph(M, K, 250, seed=C, empty_frac=0.1)
    X = int_features(K, C, dt, C)
    check_spmm(rowptr, col, val, M, K, C, dt, "int32", reduce, seed=0, weighted=False, X=X)
    check_spmm(rowptr, col, val, M, K, C, dt, "int64", reduce, seed=0, weighted=True, X=X)


@pytest.mark.parametrize("reduce", ["max", "min", "sum"])
def test_spmm_hub_ties(reduce):
    # hub segments merged by the combine kernel: ties must still go to the smallest edge index
    M, K = 50, 2000
    rowptr, col, val = make_graph(M, K, 10, seed=4, hub=130_000)
    X = int_features(K, 8, "float32", 1)
    check_spmm(rowptr, col, val, M, K, 8, "float32", "int64", reduce, seed=0, weighted=False, X=X)


def skewed_graph(M, K, seed):
    """Mostly short rows plus a few rows of 33..600 entries: warp-taken rows and small hubs."""
    rng = np.random.default_rng(seed)
    deg = rng.integers(0, 4, M).astype(np.int64)
    long_rows = rng.choice(M, 40, replace=False)
    deg[long_rows] = rng.integers(33, 600, 40)
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(deg, out=rowptr[1:])
    col = rng.integers(0, K, int(rowptr[-1])).astype(np.int64)
    val = rng.uniform(-1, 1, col.size).astype(np.float32)
    return rowptr, col, val


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("dt,C", [("float32", 4), ("float32", 16), ("float16", 16), ("float32", 33),
                                  ("float32", 47), ("float64", 2)])
def test_spmm_skewed_rows(reduce, dt, C):
    M, K = 3000, 500
    rowptr, col, val = skewed_graph(M, K, seed=C)
    X = int_features(K, C, dt, C)
    check_spmm(rowptr, col, val, M, K, C, dt, "int32", reduce, seed=0, weighted=False, X=X)
    check_spmm(rowptr, col, val, M, K, C, dt, "int64", reduce, seed=0, weighted=True)


@pytest.mark.parametrize("edge", ["none", "softmax", "leaky_relu_softmax"])
def test_fusedmm_skewed_rows(edge):
    M, K = 3000, 500
    rowptr, col, val = skewed_graph(M, K, seed=5)
    check_fused(rowptr, col, val, M, K, 2, 8, 16, "float32", "int32", "dot", edge, seed=1)


def test_spmm_nan_ties_empty():
    # row 0: ties (first edge wins), row 1: NaN wins, row 2: empty, row 3: -inf only
    rowptr = np.array([0, 3, 6, 6, 8], np.int64)
    col = np.array([0, 1, 2, 0, 1, 2, 3, 3], np.int64)
    X = torch.tensor([[1.0, -2.0], [1.0, -2.0], [0.5, -3.0], [-np.inf, np.inf]], device=DEV)
    X[1, 0] = float("nan")
    r, c, _ = dev_graph(rowptr, col, None, "int32", torch.float32)
    for reduce in ("max", "min"):
        Y, arg = cudab.spmm(r, c, None, X, 4, 4, reduce, True)
        Yr, ar = ref.spmm(ns(rowptr, col, None, 4, 4), host(X), reduce, return_arg=True, dtype=np.float32)
        np.testing.assert_array_equal(host(arg), ar)
        np.testing.assert_array_equal(host(Y), Yr.astype(np.float32))


def test_spmm_all_empty_and_zero_nnz():
    rowptr = np.zeros(5, np.int64)
    col = np.zeros(0, np.int64)
    r, c, _ = dev_graph(rowptr, col, None, "int64", torch.float32)
    X = rand((3, 4), "float32", 1)
    Y, arg = cudab.spmm(r, c, None, X, 4, 3, "max", True)
    assert torch.count_nonzero(Y) == 0 and bool((arg == -1).all())


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("C", [47, 95])
def test_spmm_products_rows(reduce, C):
    # the products-sized GCN's output layer in small: ~50 entries per row, sorted (each row's edges
    # split over two lane sets at C = 47: 16 column lanes of 3 columns), a fifth of the rows empty,
    # rows of 33..200 entries and one of 40,000 (the hub pass)
    M, K = 2000, 3000
    rng = np.random.default_rng(C)
    deg = rng.integers(40, 61, M).astype(np.int64)
    deg[rng.random(M) < 0.2] = 0
    deg[rng.choice(M, 20, replace=False)] = rng.integers(33, 201, 20)
    deg[7] = 40_000
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(deg, out=rowptr[1:])
    col = np.concatenate([np.sort(rng.integers(0, K, int(d))) for d in deg]).astype(np.int64)
    val = rng.uniform(-1, 1, col.size).astype(np.float32)
    check_spmm(rowptr, col, val, M, K, C, "float32", "int32", reduce, seed=C)
    check_spmm(rowptr, col, val, M, K, C, "float32", "int64", reduce, seed=C, weighted=False,
               X=int_features(K, C, "float32", C))


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("C", [48, 64, 160, 384])
def test_spmm_vector_equals_scalar(dt, reduce, C):
    # As test_spmm16_vector_equals_scalar for 4- and 8-byte features: X one element past a 16-byte
    # boundary takes the scalar path with 3 (C = 48), 4 (64) or 5 (160; 384: three column blocks)
    # columns per lane; rows of at most 32 entries, so every output element is one lane's chain in
    # ascending edge order on both paths and the bits must agree.
    M, K = 1001, 300
    rowptr, col, val = mixed_graph(M, K, seed=C, long_rows=0, max_deg=32)
    r, c, v = dev_graph(rowptr, col, val, "int32", val_dtype(dt))
    Xa = rand16(K, C, dt, seed=3)
    Xu = rand16(K, C, dt, seed=3, offset=1)
    assert torch.equal(Xa, Xu)
    want_arg = reduce in ("max", "min")
    for X in (Xa, Xu):
        poison()
        Y, arg = cudab.spmm(r, c, v, X, M, K, reduce, want_arg)
        torch.cuda.synchronize()
        if X is Xa:
            Ya, arga = Y, arg
    same_bits(Ya, Y)
    if want_arg:
        assert torch.equal(arga, arg)
    check_spmm(rowptr, col, val, M, K, C, dt, "int32", reduce, seed=0, X=Xu)


# ---- SpMM, 16-bit features: every path of the plan, tight bounds -------------------------------
# fp16 / bf16 gathers are held as whole 32-bit words and unpacked where they are used (common.cuh
# RawVec); outputs are packed in pairs. These cases cover the vector path (C % 8 == 0: one or two
# 16-byte vectors per lane, several column blocks), the scalar path (odd C, or X not 16-byte
# aligned), rows taken by a whole warp, a hub row and empty rows; sum / mean are held to one ulp
# of the output type (plus fp32 accumulation error), max / min to exact values and edges.

ULP16 = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10}  # one ulp relative to |value|, at most
TINY16 = {"bfloat16": 2.0 ** -133, "float16": 2.0 ** -24}  # the spacing of subnormals


def mixed_graph(M, K, seed, hub=0, long_rows=8, max_deg=None):
    """Rows of Poisson(10) entries (a fifth empty, and the last), `long_rows` rows of 33..200 entries
    (a whole warp takes them), optionally one hub row; duplicate edges, unsorted columns."""
    rng = np.random.default_rng(seed)
    deg = rng.poisson(10, M).astype(np.int64)
    if max_deg is not None:
        deg = np.minimum(deg, max_deg)
    deg[rng.random(M) < 0.2] = 0
    if long_rows:
        deg[rng.choice(M - 1, long_rows, replace=False)] = rng.integers(33, 201, long_rows)
    if hub:
        deg[M // 2] = hub
    deg[M - 1] = 0
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(deg, out=rowptr[1:])
    col = rng.integers(0, K, int(rowptr[-1])).astype(np.int64)
    col[1] = col[0]  # a duplicate edge
    val = rng.uniform(-1.0, 1.0, col.size).astype(np.float32)
    return rowptr, col, val


def rand16(K, C, dt, seed, offset=0):
    """Features whose 16-bit patterns use every mantissa bit; with offset > 0 the tensor starts
    `offset` elements into its allocation (not 16-byte aligned: the scalar path)."""
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, K * C)
    buf = torch.zeros(offset + K * C, dtype=DTYPES[dt], device=DEV)
    buf[offset:] = torch.from_numpy(x).to(DEV, DTYPES[dt])
    X = buf[offset:].view(K, C)
    assert (X.data_ptr() % 16 == 0) == (offset == 0)
    return X


def spmm16(r, c, v, X, M, K, reduce):
    """One call with poisoned outputs (NaN values, a huge arg), checked to be fully written."""
    want_arg = reduce in ("max", "min")
    poison()
    Y, arg = cudab.spmm(r, c, v, X, M, K, reduce, want_arg)
    torch.cuda.synchronize()
    assert not torch.isnan(Y).any(), "an output element left unwritten (poisoned NaN)"
    if want_arg:
        assert bool(((arg >= -1) & (arg < c.shape[0])).all()), "an arg left unwritten (poisoned)"
    return Y, arg


def check_spmm16(rowptr, col, val, M, K, X, dt, itype, reduce):
    r, c, v = dev_graph(rowptr, col, val, itype, torch.float32)
    Y, arg = spmm16(r, c, v, X, M, K, reduce)
    A = ns(rowptr, col, v, M, K)
    Xh = host(X)  # the 16-bit inputs, exactly
    got = host(Y).astype(np.float64)
    if reduce in ("max", "min"):
        Yr, argr = ref.spmm(A, Xh, reduce, return_arg=True, dtype=np.float32)
        np.testing.assert_array_equal(host(arg), argr)
        want = torch.from_numpy(np.ascontiguousarray(Yr)).to(DEV).to(DTYPES[dt])
        np.testing.assert_array_equal(got, host(want).astype(np.float64))
    else:
        want = ref.spmm(A, Xh, reduce)  # fp64
        Aabs = ns(rowptr, col, None if v is None else v.abs(), M, K)
        mag = ref.spmm(Aabs, np.abs(Xh), reduce)  # the sum of |messages| (over deg for mean)
        err = np.abs(got - want)
        # one ulp of the output type, fp32 accumulation error, a subnormal's rounding (fp16)
        bound = ULP16[dt] * np.abs(want) + 2.0 ** -16 * mag + TINY16[dt]
        worst = np.unravel_index(np.argmax(err - bound), err.shape)
        assert (err <= bound).all(), (worst, got[worst], want[worst], bound[worst])
    Y2, arg2 = spmm16(r, c, v, X, M, K, reduce)
    same_bits(Y, Y2)
    if arg is not None:
        assert torch.equal(arg, arg2)


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("C", [1, 7, 8, 16, 32, 33, 128, 130, 520])
def test_spmm16_paths(dt, reduce, C):
    # M odd; rows of ~10 entries (two batches of U = 5 edges on the vector path), warp-taken rows,
    # empty rows; weighted with int32 indices, unweighted with int64
    M, K = 301, 257
    rowptr, col, val = mixed_graph(M, K, seed=C)
    X = rand16(K, C, dt, seed=C + 1)
    check_spmm16(rowptr, col, val, M, K, X, dt, "int32", reduce)
    check_spmm16(rowptr, col, None, M, K, X, dt, "int64", reduce)


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max"])
@pytest.mark.parametrize("C", [32, 128, 130])
def test_spmm16_hub(dt, reduce, C):
    # one row of 3000 entries (> the hub threshold of 512 here): the hub pass's segment kernel
    M, K = 301, 1000
    rowptr, col, val = mixed_graph(M, K, seed=5, hub=3000)
    X = rand16(K, C, dt, seed=9)
    check_spmm16(rowptr, col, val, M, K, X, dt, "int32", reduce)


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("C", [16, 128, 520])
def test_spmm16_vector_equals_scalar(dt, reduce, C):
    # Rows of at most 32 entries and no hub: each output element is reduced by one lane in ascending
    # edge order on both paths, so the 16-byte vector path (aligned X) and the scalar path (X one
    # element past a 16-byte boundary) give the same bits: a lane that unpacked a word's halves
    # into the wrong columns, or lost low mantissa bits, differs.
    M, K = 1001, 300
    rowptr, col, val = mixed_graph(M, K, seed=C, long_rows=0, max_deg=32)
    r, c, v = dev_graph(rowptr, col, val, "int32", torch.float32)
    Xa = rand16(K, C, dt, seed=3)
    Xu = rand16(K, C, dt, seed=3, offset=1)
    assert torch.equal(Xa, Xu)
    Ya, arga = spmm16(r, c, v, Xa, M, K, reduce)
    Yu, argu = spmm16(r, c, v, Xu, M, K, reduce)
    same_bits(Ya, Yu)
    if arga is not None:
        assert torch.equal(arga, argu)
    check_spmm16(rowptr, col, val, M, K, Xa, dt, "int32", reduce)


# ---- SDDMM --------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("H,F", [(1, 1), (1, 3), (1, 32), (4, 8), (2, 17), (1, 128), (3, 64)])
def test_sddmm_dot_backend(dt, H, F):
    M, K = 130, 90
    rowptr, col, _ = make_graph(M, K, 7, seed=F + H)
    for itype in ("int32", "int64"):
        r, c, _ = dev_graph(rowptr, col, None, itype, torch.float32)
        X, Y = rand((M, H, F), dt, 1), rand((K, H, F), dt, 2)
        poison()
        E = cudab.sddmm(r, c, X, Y, M, K, "dot")
        want = ref.sddmm(ns(rowptr, col, None, M, K), host(X), host(Y), "dot")
        close(host(E), want, dt)
        same_bits(E, cudab.sddmm(r, c, X, Y, M, K, "dot"))


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("H", [1, 4, 8, 33])
def test_sddmm_add_backend(dt, H):
    M, K = 130, 90
    rowptr, col, _ = make_graph(M, K, 7, seed=H)
    r, c, _ = dev_graph(rowptr, col, None, "int64", torch.float32)
    X, Y = rand((M, H), dt, 1), rand((K, H), dt, 2)
    E = cudab.sddmm(r, c, X, Y, M, K, "add")
    want = ref.sddmm(ns(rowptr, col, None, M, K), host(X), host(Y), "add")
    close(host(E), want, dt)


def rows_graph(graph, short_seed, skewed_seed):
    """(M, K, rowptr, col) of the SDDMM row-walk tests: "short" rows of ~5 entries (M not a multiple
    of 4, empty rows), "skewed" (skewed_graph: rows of 0..3 and 40 of 33..600 entries), or "hub"
    (rows of ~20 and one of 110,000 entries)."""
    if graph == "short":
        M, K = 1001, 300
        rowptr, col, _ = make_graph(M, K, 5, seed=short_seed)
    elif graph == "skewed":
        M, K = 3001, 500
        rowptr, col, _ = skewed_graph(M, K, seed=skewed_seed)
    else:
        M, K = 401, 3000
        rowptr, col, _ = make_graph(M, K, 20, seed=5, hub=110_000)
    return M, K, rowptr, col


@pytest.mark.parametrize("rows", ["", "1"])
@pytest.mark.parametrize("dt,H", [("float32", 1), ("float32", 4), ("bfloat16", 3), ("float64", 8), ("float16", 5),
                                  ("float32", 9)])
@pytest.mark.parametrize("graph", ["short", "skewed", "hub"])
def test_sddmm_add_rows(monkeypatch, rows, dt, H, graph):
    # up to 8 heads: EdgesAdd (all heads of a row together: a warp per 32 short rows, a warp per
    # row longer than 32, hub rows' pieces by a warp per segment); GNNSPARSE_CUDA_SDDMM_ROWS=1 (and
    # 9 heads) the edge-chunk kernel it replaced: the same bits
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM_ROWS", rows)
    M, K, rowptr, col = rows_graph(graph, H, H)
    for itype in ("int32", "int64"):
        r, c, _ = dev_graph(rowptr, col, None, itype, torch.float32)
        X, Y = rand((M, H), dt, 1), rand((K, H), dt, 2)
        poison()
        E = cudab.sddmm(r, c, X, Y, M, K, "add")
        close(host(E), ref.sddmm(ns(rowptr, col, None, M, K), host(X), host(Y), "add"), dt)
        monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM_ROWS", "1")
        same_bits(E, cudab.sddmm(r, c, X, Y, M, K, "add"))
        monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM_ROWS", rows)


@pytest.mark.parametrize("dt,H,F", [("float32", 1, 32), ("float32", 2, 4), ("bfloat16", 1, 64), ("float64", 1, 3)])
def test_sddmm_dot_skewed_rows(dt, H, F):
    # rows of 33..600 entries are split over the warp's groups
    M, K = 3000, 500
    rowptr, col, _ = skewed_graph(M, K, seed=F)
    r, c, _ = dev_graph(rowptr, col, None, "int32", torch.float32)
    X, Y = rand((M, H, F), dt, 1), rand((K, H, F), dt, 2)
    poison()
    E = cudab.sddmm(r, c, X, Y, M, K, "dot")
    close(host(E), ref.sddmm(ns(rowptr, col, None, M, K), host(X), host(Y), "dot"), dt)
    same_bits(E, cudab.sddmm(r, c, X, Y, M, K, "dot"))


@pytest.mark.parametrize("dt,H,F", [("float32", 1, 32), ("float32", 2, 128), ("float32", 1, 260),
                                    ("bfloat16", 3, 16), ("float64", 1, 6)])
def test_sddmm_hub(dt, H, F):
    # hub rows go to the hub pass (a warp per segment and head), the rest to the row kernel
    M, K = 400, 3000
    rowptr, col, _ = make_graph(M, K, 20, seed=5, hub=110_000)
    r, c, _ = dev_graph(rowptr, col, None, "int32", torch.float32)
    X, Y = rand((M, H, F), dt, 1), rand((K, H, F), dt, 2)
    poison()
    E = cudab.sddmm(r, c, X, Y, M, K, "dot")
    close(host(E), ref.sddmm(ns(rowptr, col, None, M, K), host(X), host(Y), "dot"), dt)
    same_bits(E, cudab.sddmm(r, c, X, Y, M, K, "dot"))


# ---- FusedMM ------------------------------------------------------------------------------

def check_fused(rowptr, col, val, M, K, H, F, D, dt, itype, op, edge, seed, weighted=True, y_is_z=False):
    r, c, v = dev_graph(rowptr, col, val if weighted else None, itype, val_dtype(dt))
    if op == "dot":
        X, Y = rand((M, H, F), dt, seed, 0.5), rand((K, H, F), dt, seed + 1, 0.5)
    else:
        X, Y = rand((M, H), dt, seed), rand((K, H), dt, seed + 1)
    Z = Y if y_is_z else rand((K, H, D), dt, seed + 2)  # y_is_z: one tensor, one gather per edge
    poison()
    out, E = cudab.fusedmm(r, c, v, X, Y, Z, M, K, op, edge, 0.2, True)
    A = ns(rowptr, col, v, M, K)
    want_out, want_e = ref.fusedmm(A, host(X), host(Y), host(Z), op, edge, 0.2, return_edges=True)
    close(host(out), want_out, dt)
    close(host(E), want_e, dt)
    out2, _ = cudab.fusedmm(r, c, v, X, Y, Z, M, K, op, edge, 0.2, False)
    same_bits(out, out2)


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("op", ["dot", "add"])
@pytest.mark.parametrize("edge", ["none", "leaky_relu", "exp", "softmax", "leaky_relu_softmax"])
@pytest.mark.parametrize("H,F,D", [(1, 16, 16), (4, 8, 3), (2, 5, 33), (1, 32, 128)])
def test_fusedmm_backend(dt, op, edge, H, F, D):
    M, K = 120, 100
    rowptr, col, val = make_graph(M, K, 6, seed=D + H)
    itype = "int32" if D % 2 else "int64"
    check_fused(rowptr, col, val, M, K, H, F, D, dt, itype, op, edge, seed=D, weighted=(H != 4))


@pytest.mark.parametrize("edge", ["none", "softmax", "leaky_relu_softmax"])
@pytest.mark.parametrize("op", ["dot", "add"])
def test_fusedmm_hub(edge, op):
    M, K = 500, 4000
    rowptr, col, val = make_graph(M, K, 20, seed=9, hub=105_000)
    check_fused(rowptr, col, val, M, K, 2, 8, 16, "float32", "int64", op, edge, seed=3)


@pytest.mark.parametrize("path", ["auto", "generic"])
@pytest.mark.parametrize("edge", ["none", "leaky_relu", "exp", "softmax", "leaky_relu_softmax"])
@pytest.mark.parametrize("dt,H,F", [("float32", 1, 32), ("float32", 4, 32), ("float32", 1, 128), ("float32", 2, 8),
                                    ("float32", 1, 256), ("bfloat16", 1, 64), ("float16", 2, 64), ("float64", 2, 4),
                                    ("float64", 1, 16), ("float32", 1, 5)])
@pytest.mark.parametrize("graph", ["short", "skewed", "hub"])
def test_fusedmm_y_is_z(monkeypatch, path, edge, dt, H, F, graph):
    # Y and Z the same tensor (F == D): the kernel gathers each row once for the score and the sum;
    # where F is one vector per lane of a group of >= 8 (fp32 32 / 128, 16-bit 64) that is the
    # one-vector walk with 8 edges in flight (one_same), GNNSPARSE_CUDA_FUSEDMM=generic keeps the
    # older single-gather walk. Rows of ~6 entries end in partial batches; rows > 32 and hubs take
    # the long-row kernel and the hub pass; 32- and 64-bit indices, each weighted on some graph.
    monkeypatch.setenv("GNNSPARSE_CUDA_FUSEDMM", path)
    if graph == "short":
        M, K = 300, 300
        rowptr, col, val = make_graph(M, K, 6, seed=F)
    elif graph == "skewed":
        M, K = 3000, 3000
        rowptr, col, val = skewed_graph(M, K, seed=F)
    else:
        M, K = 500, 500
        rowptr, col, val = make_graph(M, K, 20, seed=F, hub=60_000)
    check_fused(rowptr, col, val, M, K, H, F, F, dt, "int32", "dot", edge, seed=F, weighted=graph != "skewed",
                y_is_z=True)
    check_fused(rowptr, col, val, M, K, H, F, F, dt, "int64", "dot", edge, seed=F + 1, weighted=graph == "skewed",
                y_is_z=True)


# ---- the one-vector FusedMM path and the multi-row SDDMM walk ------------------------------

@pytest.mark.parametrize("path", ["auto", "generic"])
@pytest.mark.parametrize("edge", ["none", "leaky_relu", "exp", "softmax", "leaky_relu_softmax"])
@pytest.mark.parametrize("dt,H,F,D", [("float32", 1, 32, 32), ("float32", 4, 32, 32), ("float32", 1, 128, 128),
                                      ("float32", 2, 64, 32), ("float32", 1, 32, 16), ("bfloat16", 4, 32, 32),
                                      ("float16", 1, 64, 64), ("float64", 2, 16, 16)])
def test_fusedmm_one_vector(monkeypatch, path, edge, dt, H, F, D):
    # a dot whose F is one vector per lane (TL = 1, Y != Z) takes the one-vector path: the batch's
    # dots finished by one transposed reduce-scatter, each lane set's edge function, the weights
    # broadcast; GNNSPARSE_CUDA_FUSEDMM=generic runs the walk it replaced. Rows of ~11 entries end
    # in partial batches; F != D leaves lanes without an F or a D vector.
    monkeypatch.setenv("GNNSPARSE_CUDA_FUSEDMM", path)
    M, K = 300, 200
    rowptr, col, val = make_graph(M, K, 11, seed=F + D + H)
    for itype, weighted in (("int32", True), ("int64", False)):
        check_fused(rowptr, col, val, M, K, H, F, D, dt, itype, "dot", edge, seed=H, weighted=weighted)


@pytest.mark.parametrize("edge", ["none", "exp", "softmax", "leaky_relu_softmax"])
@pytest.mark.parametrize("graph", ["skewed", "hub"])
def test_fusedmm_one_vector_long_rows(edge, graph):
    # the one-vector path leaves rows longer than 32 to a kernel of their own (the whole warp) and hub
    # rows to the hub pass, whose pieces run it too
    if graph == "skewed":
        M, K = 3000, 500
        rowptr, col, val = skewed_graph(M, K, seed=7)
    else:
        M, K = 500, 4000
        rowptr, col, val = make_graph(M, K, 20, seed=9, hub=105_000)
    check_fused(rowptr, col, val, M, K, 2, 32, 32, "float32", "int32", "dot", edge, seed=4)
    check_fused(rowptr, col, val, M, K, 1, 64, 64, "float32", "int64", "dot", edge, seed=5, weighted=False)
    # the 16-bit one-vector instances (8 per lane) and one head of one vector on rows > 32 and hubs
    check_fused(rowptr, col, val, M, K, 1, 64, 64, "bfloat16", "int32", "dot", edge, seed=6)
    check_fused(rowptr, col, val, M, K, 1, 32, 32, "float32", "int32", "dot", edge, seed=7)


@pytest.mark.parametrize("rows", ["", "1", "2", "4"])
@pytest.mark.parametrize("dt,H,F", [("float32", 1, 32), ("float32", 3, 32), ("float32", 1, 128), ("float32", 2, 8),
                                    ("bfloat16", 1, 64), ("float64", 1, 16), ("float16", 2, 40)])
@pytest.mark.parametrize("graph", ["short", "skewed", "hub"])
def test_sddmm_dot_rows(monkeypatch, rows, dt, H, F, graph):
    # GNNSPARSE_CUDA_SDDMM_ROWS: a group walks 1, 2 or 4 consecutive rows as one edge sequence (its
    # batches cross row ends; unset: the plan's choice). M is not a multiple of 4; empty rows; rows
    # longer than 32 in a group make it walk its other rows one at a time; hub rows are left out.
    monkeypatch.setenv("GNNSPARSE_CUDA_SDDMM_ROWS", rows)
    M, K, rowptr, col = rows_graph(graph, F + H, F)
    for itype in ("int32", "int64"):
        r, c, _ = dev_graph(rowptr, col, None, itype, torch.float32)
        X, Y = rand((M, H, F), dt, 1), rand((K, H, F), dt, 2)
        poison()
        E = cudab.sddmm(r, c, X, Y, M, K, "dot")
        close(host(E), ref.sddmm(ns(rowptr, col, None, M, K), host(X), host(Y), "dot"), dt)
        same_bits(E, cudab.sddmm(r, c, X, Y, M, K, "dot"))


@pytest.mark.parametrize("name,value", [("GNNSPARSE_CUDA_SDDMM_ROWS", "3"), ("GNNSPARSE_CUDA_FUSEDMM", "fast")])
def test_kernel_knobs_reject_bad_values(monkeypatch, name, value):
    M, K = 50, 40
    rowptr, col, val = make_graph(M, K, 5, seed=1)
    r, c, v = dev_graph(rowptr, col, val, "int32", torch.float32)
    X, Y, Z = rand((M, 1, 32), "float32", 1), rand((K, 1, 32), "float32", 2), rand((K, 1, 32), "float32", 3)
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        if name.endswith("ROWS"):
            cudab.sddmm(r, c, X, Y, M, K, "dot")
        else:
            cudab.fusedmm(r, c, v, X, Y, Z, M, K, "dot", "none", 0.2, False)


# ---- CuPy through the backend -------------------------------------------------------------

def test_cupy_backend():
    cp = pytest.importorskip("cupy")
    M, K, C = 200, 150, 17
    rowptr, col, val = make_graph(M, K, 6, seed=1, hub=3000)
    r, c, v = cp.asarray(rowptr), cp.asarray(col), cp.asarray(val)
    X = cp.asarray(np.random.default_rng(0).standard_normal((K, C)).astype(np.float32))
    Y, arg = cudab.spmm(r, c, v, X, M, K, "max", True)
    assert isinstance(Y, cp.ndarray) and arg.dtype == cp.int64
    A = types.SimpleNamespace(rowptr=rowptr, col=col, val=val, shape=(M, K))
    Yr, ar = ref.spmm(A, cp.asnumpy(X), "max", True, dtype=np.float32)
    np.testing.assert_array_equal(cp.asnumpy(arg), ar)
    np.testing.assert_array_equal(cp.asnumpy(Y), Yr)
    Xh = X[:K][:, None, :].copy()
    rs, cs = rowptr, col  # square graph for sddmm
    E = cudab.sddmm(r, c, cp.ascontiguousarray(cp.concatenate([Xh, Xh])[:M]), Xh, M, K, "dot")
    assert isinstance(E, cp.ndarray) and E.shape == (len(col), 1)
    Er = ref.sddmm(A, cp.asnumpy(cp.concatenate([Xh, Xh])[:M]), cp.asnumpy(Xh), "dot")
    close(cp.asnumpy(E), Er, "float32")


# ---- public API ---------------------------------------------------------------------------

gs = pytest.importorskip("gnnsparse")
_has_api = all(hasattr(gs, n) for n in ("spmm", "sddmm", "fusedmm", "CSR"))
api = pytest.mark.skipif(not _has_api, reason="gnnsparse frontend not present")


def _api_csr(rowptr, col, val, M, K, itype, like):
    it = torch.int32 if itype == "int32" else torch.int64
    r = torch.from_numpy(rowptr).to(DEV, it)
    c = torch.from_numpy(col).to(DEV, it)
    v = None if val is None else torch.from_numpy(val).to(DEV)
    return gs.CSR(r, c, v, shape=(M, K))


@api
@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("C", [1, 17, 64])
def test_api_spmm(dt, reduce, C):
    M, K = 300, 200
    rowptr, col, val = make_graph(M, K, 5, seed=C)
    A = _api_csr(rowptr, col, val, M, K, "int64" if C == 17 else "int32", None)
    X = rand((K, C), dt, 4)
    if reduce in ("max", "min"):
        Y, arg = gs.spmm(A, X, reduce=reduce, return_arg=True)
        Yr, ar = ref.spmm(types.SimpleNamespace(rowptr=rowptr, col=col, val=host(A.val) if A.val is not None else None,
                                                shape=(M, K)), host(X), reduce, True, dtype=acc_np(dt))
        np.testing.assert_array_equal(host(arg), ar)
        close(host(Y), Yr, dt)
    else:
        Y = gs.spmm(A, X, reduce=reduce)
        close(host(Y), ref.spmm(A, host(X), reduce), dt)
    assert Y.dtype == X.dtype and Y.device == X.device
    Y2 = gs.spmm(A, X, reduce=reduce, return_arg=False)
    same_bits(Y, Y2)


@api
@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_api_sddmm_fusedmm(dt):
    M = K = 250
    rowptr, col, val = make_graph(M, K, 6, seed=2)
    A = _api_csr(rowptr, col, val, M, K, "int32", None)
    X, Y = rand((M, 4, 8), dt, 1, 0.5), rand((K, 4, 8), dt, 2, 0.5)
    Z = rand((K, 4, 16), dt, 3)
    close(host(gs.sddmm(A, X, Y, op="dot")), ref.sddmm(A, host(X), host(Y), "dot"), dt)
    out, E = gs.fusedmm(A, X, Y, Z, op="dot", edge="softmax", return_edges=True)
    wo, we = ref.fusedmm(A, host(X), host(Y), host(Z), "dot", "softmax", return_edges=True)
    close(host(out), wo, dt)
    close(host(E), we, dt)
    Xa, Ya = rand((M, 4), dt, 5), rand((K, 4), dt, 6)
    out = gs.fusedmm(A, Xa, Ya, Z, op="add", edge="leaky_relu", slope=0.1)
    close(host(out), ref.fusedmm(A, host(Xa), host(Ya), host(Z), "add", "leaky_relu", 0.1), dt)


@api
def test_api_cupy():
    cp = pytest.importorskip("cupy")
    M, K = 200, 150
    rowptr, col, val = make_graph(M, K, 6, seed=8)
    A = gs.CSR(cp.asarray(rowptr), cp.asarray(col), cp.asarray(val), shape=(M, K))
    X = cp.asarray(np.random.default_rng(0).standard_normal((K, 33)).astype(np.float32))
    Y = gs.spmm(A, X, reduce="mean")
    assert isinstance(Y, cp.ndarray)
    close(cp.asnumpy(Y), ref.spmm(types.SimpleNamespace(rowptr=rowptr, col=col, val=val, shape=(M, K)),
                                  cp.asnumpy(X), "mean"), "float32")


# ---- no stale device copies ------------------------------------------------------------------

def _weights_only(A_host):
    return types.SimpleNamespace(rowptr=A_host.rowptr, col=A_host.col, val=None, shape=A_host.shape)


@api
def test_api_torch_csr_values_changed_in_place_are_seen():
    M, K = 100, 80
    rowptr, col, val = make_graph(M, K, 5, seed=3)
    A = _api_csr(rowptr, col, val, M, K, "int32", None)
    X, X64 = rand((K, 16), "float32", 1), rand((K, 16), "float64", 1)
    Y0, Y64 = gs.spmm(A, X), gs.spmm(A, X64)  # the float64 call caches a float64 copy of the values
    A.val.mul_(2)
    close(host(gs.spmm(A, X)), 2 * host(Y0), "float32")
    close(host(gs.spmm(A, X64)), 2 * host(Y64), "float64")
    A.val[:] = 1
    unweighted = types.SimpleNamespace(rowptr=rowptr, col=col, val=None, shape=(M, K))
    close(host(gs.spmm(A, X64)), ref.spmm(unweighted, host(X64)), "float64")


@api
def test_api_cupy_csr_values_changed_in_place_are_seen():
    cp = pytest.importorskip("cupy")
    M, K = 100, 80
    rowptr, col, val = make_graph(M, K, 5, seed=4)
    A = gs.CSR(cp.asarray(rowptr), cp.asarray(col), cp.asarray(val), shape=(M, K))
    unweighted = types.SimpleNamespace(rowptr=rowptr, col=col, val=None, shape=(M, K))
    for dt in ("float32", "float64"):  # float64 features: the values are cast per call
        X = cp.asarray(np.random.default_rng(1).standard_normal((K, 8)).astype(dt))
        gs.spmm(A, X)
        A.val[:] = 3
        close(cp.asnumpy(gs.spmm(A, X)), 3 * ref.spmm(unweighted, cp.asnumpy(X)), dt)
        A.val[:] = cp.asarray(val)


@api
def test_api_host_csr_on_the_gpu_uploaded_once_and_refreshed():
    M, K = 90, 70
    rowptr, col, val = make_graph(M, K, 5, seed=5)
    A = gs.CSR(rowptr, col, val, shape=(M, K))
    X = rand((K, 12), "float32", 2)
    close(host(gs.spmm(A, X)), ref.spmm(A, host(X)), "float32")
    assert len(A._views) == 1
    gs.spmm(A, X)
    assert len(A._views) == 1
    A.val = np.full(A.nnz, 2.0, np.float32)
    close(host(gs.spmm(A, X)), ref.spmm(A, host(X)), "float32")


@api
def test_api_graph_and_features_on_different_devices_name_both():
    M, K = 30, 20
    rowptr, col, val = make_graph(M, K, 3, seed=6)
    A = _api_csr(rowptr, col, val, M, K, "int32", None)
    # host features with a CUDA graph: both places named (the SYCL backend may not exist on this machine)
    with pytest.raises(ValueError, match="(the CSR lives on cuda:0 but the dense inputs on)|(X is a numpy array but "
                                         "the CSR lives on cuda)"):
        gs.spmm(A, np.ones((K, 4), np.float32))
    X = rand((K, 4), "float32", 1)
    assert gs.spmm(A, X).shape == (M, 4)  # still usable
