"""Quantized tensors and ops (gnnsparse.quant; contract: include/gnnsparse/quant.hpp).

Every test runs on each available device: "host" (NumPy arrays on the SYCL CPU device) and
"cuda" (torch CUDA tensors; skipped without a GPU). Checks:
  - the quantizer equals its NumPy model (gnnsparse.quant.model) bit for bit: scale, inverse
    scale, every q (int8 and packed int4, odd lengths, both kernel paths), for several seeds;
    Philox4x32-10 equals Random123's known-answer vectors;
  - stochastic rounding is unbiased (the mean of many seeded draws is within a stated bound of X,
    a bound round-to-nearest fails); the seeded mode is reproducible;
  - bad input gets a clear answer (bits, dtype, NaN / inf, all-zero, empty);
  - every quantized op equals gnnsparse.reference on the dequantized inputs (computed exactly in
    float64): bitwise where the contract says the accumulation is integer (SpMM sum / max / min
    without weights and its arg, SDDMM dot against the integer model), within a few float32
    roundings elsewhere; outputs are poisoned (conftest), sizes odd, rows empty, one hub row;
    every op is run twice and compared bitwise;
  - the int8 GEMM, Error_X (against NumPy) and the bit-width rule.
"""
from __future__ import annotations

import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import _arrays
from gnnsparse import reference as ref
from gnnsparse.quant import model

from conftest import random_csr, sycl_or_skip

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


def _cuda_ok():
    if torch is None or not torch.cuda.is_available():
        return False
    from gnnsparse import _cuda_backend

    return _cuda_backend.backend.available()


class Dev:
    def __init__(self, name):
        self.name = name

    def put(self, a):
        a = np.ascontiguousarray(a)
        return a if self.name == "host" else torch.from_numpy(a).to("cuda")

    def csr(self, A):
        return A if self.name == "host" else A.to_like(self.put(np.zeros(1, np.float32)))

    def __repr__(self):
        return self.name


@pytest.fixture(params=["host", "cuda"])
def dev(request):
    if request.param == "cuda":
        if not _cuda_ok():
            pytest.skip("no CUDA device, torch or compiled gnnsparse CUDA module")
    else:
        sycl_or_skip()
    return Dev(request.param)


def host(a):
    return None if a is None else np.asarray(_arrays.to_numpy(a))


def dq64(Q):
    """The dequantized values, exactly (float64: s * q)."""
    return host(Q.int8()).astype(np.float64) * np.float64(Q.scale_value())


def rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# the NumPy model
# ---------------------------------------------------------------------------------------------
KAT = [  # Random123 kat_vectors: philox4x32 10, counter, key -> output
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("ctr, key, out", KAT)
def test_philox_known_answers(ctr, key, out):
    got = model.philox4x32_10(*[np.array([c], np.uint64) for c in ctr], *key)
    assert tuple(int(w[0]) for w in got) == out


@pytest.mark.parametrize("C", [1, 2, 3, 8, 13])
def test_pack4_round_trip(rng, C):
    q = rng.integers(-7, 8, (5, C)).astype(np.int8)
    p = model.pack4(q)
    assert p.shape == (5, (C + 1) // 2)
    assert np.array_equal(model.unpack4(p, q.shape), q)
    if C % 2:
        assert np.all(p[:, -1] >> 4 == 0)  # the spare nibble is 0
    assert np.array_equal(p[0, 0] & 0xF, q[0, 0] & 0xF)  # low nibble first


# ---------------------------------------------------------------------------------------------
# the quantizer against the model
# ---------------------------------------------------------------------------------------------
QSHAPES = [(1,), (5,), (8,), (37, 13), (64, 16), (10, 3, 5), (7, 1), (33, 130), (0, 4)]


@pytest.mark.parametrize("shape", QSHAPES, ids=str)
@pytest.mark.parametrize("bits", [8, 4])
def test_quantize_equals_model(dev, rng, shape, bits):
    X = rand(rng, *shape, scale=3.0)
    for stochastic, seed in [(True, 1), (True, 2**63 + 12345), (False, None)]:
        Q = gs.quantize(dev.put(X), bits, stochastic, seed)
        qm, s, inv = model.quantize(X, bits, stochastic, seed or 0)
        assert Q.shape == shape and Q.bits == bits
        sc = host(Q.scale)
        assert sc[0] == s and sc[1] == inv, (sc, s, inv)
        data = host(Q.data)
        if bits == 8:
            assert data.dtype == np.int8 and np.array_equal(data.reshape(shape), qm)
        else:  # the packed bytes themselves, spare nibbles included
            assert data.dtype == np.uint8 and np.array_equal(data, model.pack4(qm))
        np.testing.assert_array_equal(host(gs.dequantize(Q)), (np.float32(s) * qm.astype(np.float32)).reshape(shape))


def test_quantize_geometry_and_reproducibility(dev, rng):
    """A seed fixes the bits: the same call twice, and the same values quantized as other shapes
    (other kernel paths: quads, bytes) give the same q per flat element; another seed differs."""
    X = rand(rng, 24, 10)
    a = host(gs.quantize(dev.put(X), 8, seed=7).data).reshape(-1)
    b = host(gs.quantize(dev.put(X), 8, seed=7).data).reshape(-1)
    c = host(gs.quantize(dev.put(X.reshape(-1)), 8, seed=7).data).reshape(-1)
    d = host(gs.quantize(dev.put(X.reshape(40, 6)), 8, seed=7).data).reshape(-1)
    assert np.array_equal(a, b) and np.array_equal(a, c) and np.array_equal(a, d)
    assert not np.array_equal(a, host(gs.quantize(dev.put(X), 8, seed=8).data).reshape(-1))
    # int4: even C takes the quad path, odd C the byte path; both are the model
    X = rand(rng, 6, 14)
    for shape in [(6, 14), (12, 7), (84,)]:
        Q = gs.quantize(dev.put(X.reshape(shape)), 4, seed=9)
        assert np.array_equal(host(Q.int8()).reshape(-1), model.quantize(X, 4, True, 9)[0].reshape(-1))


@pytest.mark.parametrize("bits", [8, 4])
def test_stochastic_rounding_is_unbiased(dev, rng, bits):
    """Over n seeded draws, every element's mean dequantized value is within 5 standard errors of
    X (a draw has variance <= s^2 / 4, so the bound is 5 * s / (2 sqrt(n))); rounding to nearest,
    with its bias up to s / 2, breaks that bound on most elements."""
    n = 300
    qm = model.qmax_of(bits)
    # values at fixed fractions of a step (0.1 .. 0.9), plus the absmax element
    frac = np.linspace(0.1, 0.9, 9)
    steps = rng.integers(-qm + 1, qm - 1, (20, 9))
    X = ((steps + frac) / qm).astype(np.float32)
    X[0, 0] = 1.0
    Xd = dev.put(X)
    total = np.zeros(X.shape, np.float64)
    for seed in range(n):
        total += dq64(gs.quantize(Xd, bits, seed=seed, check=False))
    Q0 = gs.quantize(Xd, bits, check=False)
    s = Q0.scale_value()
    bound = 5 * s / (2 * np.sqrt(n))
    err = np.abs(total / n - X.astype(np.float64))
    assert err.max() < bound, (err.max(), bound)
    near = np.abs(dq64(gs.quantize(Xd, bits, stochastic=False)) - X)
    assert (near > bound).mean() > 0.5


def test_quantize_bad_input(dev, rng):
    X = dev.put(rand(rng, 4, 3))
    for bad in (3, 16, 0, True, "8", 8.0):
        with pytest.raises(ValueError, match="bits must be 4 or 8"):
            gs.quantize(X, bad)
    with pytest.raises(TypeError, match="floating-point"):
        gs.quantize(dev.put(np.arange(12, dtype=np.int32).reshape(4, 3)))
    for bad_seed in (-1, 2**64, 1.5):
        with pytest.raises(ValueError, match="seed"):
            gs.quantize(X, seed=bad_seed)
    for v in (np.nan, np.inf, -np.inf):
        Xb = rand(rng, 5, 4)
        Xb[2, 1] = v
        with pytest.raises(ValueError, match="NaN or infinity"):
            gs.quantize(dev.put(Xb), 8)
        Q = gs.quantize(dev.put(Xb), 4, check=False)  # defined: NaN scale, q = 0, NaN results
        assert np.isnan(Q.scale_value()) and not host(Q.int8()).any()
        assert np.isnan(host(gs.dequantize(Q))).all()
    with pytest.raises(TypeError, match="QTensor"):
        gs.dequantize(X)


def test_quantize_zero_and_empty(dev):
    for bits in (8, 4):
        Q = gs.quantize(dev.put(np.zeros((6, 5), np.float32)), bits)
        assert host(Q.scale).tolist() == [0.0, 0.0] and not host(Q.int8()).any()
        assert np.array_equal(host(gs.dequantize(Q)), np.zeros((6, 5), np.float32))
        Q = gs.quantize(dev.put(np.zeros((0, 7), np.float32)), bits)
        assert Q.shape == (0, 7) and host(Q.scale).tolist() == [0.0, 0.0]
        assert host(gs.dequantize(Q)).shape == (0, 7)


def test_quantize_other_float_dtypes(dev, rng):
    X = rand(rng, 9, 4)
    Q = gs.quantize(dev.put(X.astype(np.float64)), 8, seed=3)
    assert np.array_equal(host(Q.int8()), model.quantize(X, 8, True, 3)[0])


# ---------------------------------------------------------------------------------------------
# quantized SpMM, incidence SpMM, multi-head aggregation
# ---------------------------------------------------------------------------------------------
# (M, K, mean degree, hub row length): the 90-entry rows split each row's edges into 8 parts on
# CUDA at 16 / 64 columns and 4 at 128 (the quantized row kernel's reduce-scatter, every level)
GRAPHS = [(1, 1, 1.0, 0), (7, 5, 2.0, 0), (33, 65, 5.0, 0), (130, 200, 3.0, 1500), (9, 0, 0.0, 0), (37, 300, 90.0, 0)]
QWIDTHS = [1, 3, 16, 17, 64, 130]


def _graph(rng, M, K, deg, hub, weighted, itype=np.int32):
    return random_csr(rng, M, K, mean_deg=deg, hub=hub, weighted=weighted, index_dtype=itype)


def _twice(f):
    a = f()
    b = f()
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        assert np.array_equal(host(x), host(y), equal_nan=True), "not bitwise reproducible"
    return a


@pytest.mark.parametrize("g", GRAPHS, ids=lambda g: f"{g[0]}x{g[1]}h{g[3]}")
@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("weighted", [False, True])
def test_qspmm(dev, rng, g, bits, weighted):
    M, K, deg, hub = g
    A = _graph(rng, M, K, deg, hub, weighted, np.int64 if hub else np.int32)
    Ad = dev.csr(A)
    for C in QWIDTHS:
        Q = gs.quantize(dev.put(rand(rng, K, C)), bits, seed=C)
        X = dq64(Q)
        for red in ("sum", "mean", "max", "min"):
            want_arg = red in ("max", "min")
            out = _twice(lambda: gs.quant.spmm(Ad, Q, red, return_arg=want_arg))
            Y, arg = (host(out[0]), host(out[1])) if want_arg else (host(out), None)
            R = ref.spmm(A, X, red, return_arg=want_arg)
            R, rarg = (R[0], R[1]) if want_arg else (R, None)
            assert Y.shape == (M, C) and Y.dtype == np.float32
            if not weighted and red != "mean":  # integer accumulation: exact
                np.testing.assert_array_equal(Y, R.astype(np.float32))
                if want_arg:
                    np.testing.assert_array_equal(arg, rarg)
            else:
                np.testing.assert_allclose(Y, R, rtol=3e-6, atol=3e-6 * max(1.0, np.abs(R).max(initial=0)))
                if want_arg:  # the chosen edge's message is the extreme one
                    assert np.array_equal(arg < 0, rarg < 0)


@pytest.mark.parametrize("bits", [8, 4])
def test_qspmm_odd_layouts(dev, rng, bits):
    """3-D features, a 1-D X, and a quantized X used by two ops (no state kept in the QTensor)."""
    A = _graph(rng, 40, 30, 4.0, 0, False)
    Ad = dev.csr(A)
    Q = gs.quantize(dev.put(rand(rng, 30, 3, 5)), bits, seed=1)
    Y = host(gs.quant.spmm(Ad, Q))
    assert Y.shape == (40, 3, 5)
    np.testing.assert_array_equal(Y, ref.spmm(A, dq64(Q)).astype(np.float32))
    Q1 = gs.quantize(dev.put(rand(rng, 30)), bits, seed=2)
    Y1 = host(gs.quant.spmm(Ad, Q1, "max"))
    assert Y1.shape == (40,)
    np.testing.assert_array_equal(Y1, ref.spmm(A, dq64(Q1), "max").astype(np.float32))


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("side", ["dst", "src"])
def test_incidence_spmm(dev, rng, bits, side):
    """Edge -> node aggregation without an index array or an all-ones matrix: dst sums each row's
    own edges, src each column's edges (in edge order); values of A are ignored."""
    for M, K, deg, hub in [(50, 40, 4.0, 300), (5, 3, 1.0, 0)]:
        A = _graph(rng, M, K, deg, hub, True)
        Ad = dev.csr(A)
        for C in (1, 16, 33):
            QE = gs.quantize(dev.put(rand(rng, A.nnz, C)), bits, seed=C)
            E = dq64(QE)
            rows = ref.edge_rows(A)
            col = A.col.astype(np.int64)
            seg = rows if side == "dst" else col
            n = M if side == "dst" else K
            for red in ("sum", "mean", "max"):
                Y = host(_twice(lambda: gs.quant.incidence_spmm(Ad, QE, red, side)))
                # the same aggregation as an SpMM over the incidence matrix (one 1 per entry)
                order = np.argsort(seg, kind="stable")
                rp = np.zeros(n + 1, np.int64)
                np.cumsum(np.bincount(seg, minlength=n), out=rp[1:])
                Inc = gs.CSR(rp.astype(np.int32), order.astype(np.int32), None, (n, A.nnz))
                R = ref.spmm(Inc, E, red).astype(np.float32)
                if red == "mean":
                    np.testing.assert_allclose(Y, R, rtol=3e-7, atol=1e-30)
                else:
                    np.testing.assert_array_equal(Y, R)
    with pytest.raises(ValueError, match="one row per entry"):
        gs.quant.incidence_spmm(Ad, gs.quantize(dev.put(rand(rng, A.nnz + 1, 2)), 8), side=side)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("H, D", [(1, 16), (2, 3), (4, 16), (3, 7)])
def test_multihead_aggregation(dev, rng, bits, H, D):
    """Y[i, h] = reduce_k W[k, h] Z[col k, h, :] for every head in one launch."""
    A = _graph(rng, 60, 45, 5.0, 400, True)
    Ad = dev.csr(A)
    QZ = gs.quantize(dev.put(rand(rng, 45, H, D)), bits, seed=H * D)
    W = rng.random((A.nnz, H)).astype(np.float32)
    Z = dq64(QZ)
    rows, col = ref.edge_rows(A), A.col.astype(np.int64)
    for red in ("sum", "mean", "max"):
        Y = host(_twice(lambda: gs.quant.spmm(Ad, QZ, red, weights=dev.put(W))))
        assert Y.shape == (60, H, D)
        for h in range(H):
            Ah = gs.CSR(A.rowptr, A.col, W[:, h].copy(), A.shape)
            R = ref.spmm(Ah, Z[:, h, :], red)
            np.testing.assert_allclose(Y[:, h, :], R, rtol=3e-6, atol=3e-6 * max(1.0, np.abs(R).max(initial=0)))
    with pytest.raises(ValueError, match="weights must have shape"):
        gs.quant.spmm(Ad, QZ, weights=dev.put(W[:-1]))


def test_qspmm_checks(dev, rng):
    A = _graph(rng, 10, 8, 2.0, 0, False)
    Ad = dev.csr(A)
    Q = gs.quantize(dev.put(rand(rng, 9, 4)), 8)
    with pytest.raises(ValueError, match="needs 8 rows"):
        gs.quant.spmm(Ad, Q)
    Q = gs.quantize(dev.put(rand(rng, 8, 4)), 8)
    with pytest.raises(ValueError, match="reduce"):
        gs.quant.spmm(Ad, Q, "prod")
    with pytest.raises(TypeError, match="QTensor"):
        gs.quant.spmm(Ad, dev.put(rand(rng, 8, 4)))
    with pytest.raises(ValueError, match="return_arg"):
        gs.quant.spmm(Ad, Q, "sum", return_arg=True)
    if dev.name == "cuda":  # a quantized tensor with a graph on another device names both
        Qh = gs.QTensor(np.zeros((8, 4), np.int8), np.array([1.0, 1.0], np.float32), 8, (8, 4))
        with pytest.raises(ValueError, match="cuda"):
            gs.quant.spmm(Ad, Qh)


# ---------------------------------------------------------------------------------------------
# quantized SDDMM and FusedMM
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bx, by", [(8, 8), (4, 4), (8, 4)])
def test_qsddmm_dot(dev, rng, bx, by):
    """The integer dot product is exact: E = fl32(fl32(s_X s_Y) * fl32(acc)) bit for bit, and the
    reference on the dequantized inputs within two roundings."""
    for M, K, deg, hub in [(33, 65, 5.0, 0), (130, 90, 3.0, 700), (1, 1, 1.0, 0)]:
        A = _graph(rng, M, K, deg, hub, False)
        Ad = dev.csr(A)
        for H, F in [(1, 1), (1, 16), (1, 33), (3, 8), (2, 5), (1, 128), (4, 32), (40, 3)]:
            shape_x, shape_y = ((M, F), (K, F)) if H == 1 else ((M, H, F), (K, H, F))
            QX = gs.quantize(dev.put(rand(rng, *shape_x)), bx, seed=1)
            QY = gs.quantize(dev.put(rand(rng, *shape_y)), by, seed=2)
            E = host(_twice(lambda: gs.quant.sddmm(Ad, QX, QY, "dot")))
            qx = host(QX.int8()).astype(np.int64).reshape(M, H, F)
            qy = host(QY.int8()).astype(np.int64).reshape(K, H, F)
            rows, col = ref.edge_rows(A), A.col.astype(np.int64)
            acc = np.einsum("khf,khf->kh", qx[rows], qy[col])
            sxy = np.float32(QX.scale_value()) * np.float32(QY.scale_value())
            exact = (sxy * acc.astype(np.float32)).astype(np.float32)
            np.testing.assert_array_equal(E.reshape(-1, H), exact)
            R = ref.sddmm(A, dq64(QX), dq64(QY))
            np.testing.assert_allclose(E, R, rtol=3e-7, atol=1e-6 * max(1.0, np.abs(R).max(initial=0)))


def test_qsddmm_dot_lanes_knob(dev, rng, monkeypatch):
    """GNNSPARSE_CUDA_QSDDMM_LANES (CUDA: lanes per edge, the heads side by side) changes the
    schedule, never the bits; a bad value is named."""
    A = dev.csr(_graph(rng, 90, 70, 6.0, 300, False))
    QX = gs.quantize(dev.put(rand(rng, 90, 4, 32)), 8, seed=1)
    QY = gs.quantize(dev.put(rand(rng, 70, 4, 32)), 8, seed=2)
    want = host(gs.quant.sddmm(A, QX, QY, "dot"))
    for lanes in ("1", "2", "4", "8", "32"):
        monkeypatch.setenv("GNNSPARSE_CUDA_QSDDMM_LANES", lanes)
        np.testing.assert_array_equal(host(gs.quant.sddmm(A, QX, QY, "dot")), want)
    if dev.name == "cuda":
        monkeypatch.setenv("GNNSPARSE_CUDA_QSDDMM_LANES", "x")
        with pytest.raises(ValueError, match="GNNSPARSE_CUDA_QSDDMM_LANES"):
            gs.quant.sddmm(A, QX, QY, "dot")


@pytest.mark.parametrize("bx, by", [(8, 8), (4, 8)])
def test_qsddmm_add(dev, rng, bx, by):
    A = _graph(rng, 70, 50, 4.0, 300, False)
    Ad = dev.csr(A)
    for H in (None, 1, 4, 9):
        sx, sy = ((70,), (50,)) if H is None else ((70, H), (50, H))
        QX = gs.quantize(dev.put(rand(rng, *sx)), bx, seed=3)
        QY = gs.quantize(dev.put(rand(rng, *sy, scale=5.0)), by, seed=4)
        E = host(_twice(lambda: gs.quant.sddmm(Ad, QX, QY, "add")))
        a = (np.float32(QX.scale_value()) * host(QX.int8()).astype(np.float32))
        b = (np.float32(QY.scale_value()) * host(QY.int8()).astype(np.float32))
        rows, col = ref.edge_rows(A), A.col.astype(np.int64)
        np.testing.assert_array_equal(E, (a[rows] + b[col]).astype(np.float32))
        R = ref.sddmm(A, dq64(QX), dq64(QY), "add")
        np.testing.assert_allclose(E, R, rtol=3e-7, atol=1e-6)


@pytest.mark.parametrize("bits, zbits", [(8, 8), (4, 4), (8, 4)])
@pytest.mark.parametrize("edge", list(gs._core.EDGE_FN))
def test_qfusedmm(dev, rng, bits, zbits, edge):
    for (M, K, deg, hub), weighted, op, H, F, D in [
        ((33, 65, 5.0, 0), False, "dot", 1, 16, 16),
        ((130, 90, 3.0, 500), True, "dot", 2, 7, 33),
        ((40, 40, 6.0, 0), True, "add", 4, 1, 9),
        ((12, 9, 2.0, 0), False, "add", 1, 1, 130),
    ]:
        A = _graph(rng, M, K, deg, hub, weighted)
        Ad = dev.csr(A)
        sc = 0.5 / np.sqrt(F)
        if op == "dot":
            sx, sy = ((M, F), (K, F)) if H == 1 else ((M, H, F), (K, H, F))
        else:
            sx, sy = ((M,), (K,)) if H == 1 else ((M, H), (K, H))
        QX = gs.quantize(dev.put(rand(rng, *sx, scale=sc)), bits, seed=1)
        QY = gs.quantize(dev.put(rand(rng, *sy, scale=sc)), bits, seed=2)
        QZ = gs.quantize(dev.put(rand(rng, K, H, D) if H > 1 else rand(rng, K, D)), zbits, seed=3)
        out, E = _twice(lambda: gs.quant.fusedmm(Ad, QX, QY, QZ, op, edge, 0.1, return_edges=True))
        ro, rw = ref.fusedmm(A, dq64(QX), dq64(QY), dq64(QZ), op, edge, 0.1, return_edges=True)
        np.testing.assert_allclose(host(out), ro, rtol=2e-5, atol=2e-5 * max(1.0, np.abs(ro).max(initial=0)))
        np.testing.assert_allclose(host(E), rw, rtol=2e-5, atol=2e-6)
    with pytest.raises(ValueError, match="same bits"):
        gs.quant.fusedmm(Ad, QX, gs.quantize(dev.put(rand(rng, *sy)), 12 - bits), QZ, op)


# ---------------------------------------------------------------------------------------------
# GEMM, Error_X, the bit-width rule
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("M, K, N", [(40, 32, 16), (5, 13, 7), (33, 256, 24)])
def test_quantized_gemm(dev, rng, M, K, N):
    """linear(): s_X s_W (q_X q_W^T) with exact integer accumulation (int8 tensor cores via
    torch._int_mm on CUDA, oneDNN on the CPU); matmul() quantizes both sides first."""
    if torch is None:
        pytest.skip("torch not installed")
    X, W = rand(rng, M, K), rand(rng, N, K)
    if dev.name == "host":
        Xd, Wd = torch.from_numpy(X), torch.from_numpy(W)
    else:
        Xd, Wd = dev.put(X), dev.put(W)
    for bits in (8, 4):
        QX, QW = gs.quantize(Xd, bits, seed=1), gs.quantize(Wd, bits, seed=2)
        Y = host(gs.quant.linear(QX, QW))
        acc = host(QX.int8()).astype(np.int64) @ host(QW.int8()).astype(np.int64).T
        s = np.float32(QX.scale_value()) * np.float32(QW.scale_value())
        np.testing.assert_array_equal(Y, (acc.astype(np.float32) * s).astype(np.float32))
        Z = host(gs.quant.matmul(Xd, Wd.T, bits, seed=5))
        assert Z.shape == (M, N)
        err = np.abs(Z - X @ W.T).max() / np.abs(X @ W.T).max()
        assert err < (0.05 if bits == 8 else 0.6)
    if dev.name == "host":  # NumPy arrays run on the SYCL backend (absent from a CUDA-only build)
        Yn = gs.quant.linear(gs.quantize(X, 8, seed=1), gs.quantize(W, 8, seed=2))  # NumPy in, NumPy out
        assert isinstance(Yn, np.ndarray) and Yn.dtype == np.float32


def test_error_x_and_select_bits(dev, rng):
    X = rand(rng, 200, 16)
    X[::7] = 0.0  # exact zeros: the eps term
    for bits in (8, 4):
        Q = gs.quantize(dev.put(X), bits, seed=11)
        e = gs.quant.error_x(dev.put(X), Q)
        assert e == pytest.approx(model.error_x(X, host(gs.dequantize(Q))), rel=1e-12)
        assert 0 <= e < 1
    e8 = gs.quant.error_x(dev.put(X), bits=8, seed=1)
    e4 = gs.quant.error_x(dev.put(X), bits=4, seed=1)
    assert e8 < e4
    bits, errors = gs.quant.select_bits(dev.put(X), threshold=0.3, seed=1)
    assert bits == min(b for b, v in errors.items() if v < 0.3)
    assert gs.quant.select_bits(dev.put(X), threshold=0.0, seed=1)[0] is None


def test_torch_cpu_tensors(rng):
    """torch CPU tensors run on the SYCL CPU device and come back as torch tensors."""
    sycl_or_skip()
    if torch is None:
        pytest.skip("torch not installed")
    A = _graph(rng, 20, 15, 3.0, 0, True)
    X = torch.from_numpy(rand(rng, 15, 8))
    Q = gs.quantize(X, 8, seed=1)
    assert isinstance(Q.data, torch.Tensor) and Q.data.dtype == torch.int8
    Y = gs.quant.spmm(A, Q)
    assert isinstance(Y, torch.Tensor) and Y.dtype == torch.float32
    assert isinstance(gs.dequantize(Q), torch.Tensor)


def test_bench_dry_run():
    """bench/quant_ops.py --cpu: every code path and check of the GPU bench on the CPU."""
    sycl_or_skip()
    if torch is None:
        pytest.skip("torch not installed")
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "bench" / "quant_ops.py"
    r = subprocess.run([sys.executable, str(script), "--cpu"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "FAILED" not in r.stdout and "int8 spmm incl. quantization" in r.stdout
