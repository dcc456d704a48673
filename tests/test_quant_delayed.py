"""Producers that write their output quantized with a delayed scale (include/gnnsparse/quant.hpp,
DELAYED SCALING): the quantized SpMM's epilogue (gs.quant.spmm / incidence_spmm with out=) and the
int8 GEMM's scale pass (gs.quant.linear_q).

Every backend ("host": the SYCL CPU device; "cuda" where a GPU is) against the NumPy model
gnnsparse.quant.model.quantize_delayed, bit for bit: given the op's own float32 output Y (the same
accumulation) and the scale it quantizes with, every q (int8 and packed int4, spare nibbles
included), the QTensor's scale, the next step's scale and the saturation statistics. Scales below,
at and above Y's own (saturation, exact, coarse); the calibrating first call equals quantize(Y)
with the same seed; graphs with empty rows, repeated columns and a hub row (the CUDA hub pass);
widths that take each CUDA vector path (16, 4 and 1 features per load, odd int4 rows); NaN, empty
outputs, bad arguments; two runs bitwise equal. Outputs are poisoned (conftest), so an unwritten
byte fails.
"""
from __future__ import annotations

import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import _arrays
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


def rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def qbytes(q, bits):
    """The model's int8 values as the stored bytes (int4 packed, spare nibble 0)."""
    return q.reshape(q.shape[0], -1) if bits == 8 else model.pack4(q)


# the scale given to the producer, relative to the output's own: saturating, exact, coarse
FACTORS = (0.5, 1.0, 3.0)


def check_producer(dev, produce, Y, bits, seed, decay=0.0):
    """produce(st, seed) -> QTensor. Y: the op's float32 output (host). The calibrating call equals
    quantize(Y); then, for each scale factor, the output equals the model given that scale (and
    the peak hold `decay`)."""
    st = gs.quant.DelayedScale(bits, decay=decay)
    Q0 = produce(st, seed)
    Qr = gs.quantize(dev.put(Y), bits, seed=seed, check=False)
    assert np.array_equal(host(Q0.data), host(Qr.data)) and np.array_equal(host(Q0.scale), host(Qr.scale))
    assert Q0.shape == Y.shape and Q0.bits == bits and st.steps == 1
    own = host(st.scale).copy()
    assert np.array_equal(own, host(Qr.scale))
    growth_max, saturated = 0.0, 0
    for f in FACTORS:
        scale_in = np.array([own[0] * f, own[1] / f], np.float32)
        st.scale = dev.put(scale_in)
        Q = produce(st, seed + 1)
        q, sc4, growth = model.quantize_delayed(Y, bits, True, seed + 1, scale_in, decay)
        data = host(Q.data)
        assert data.dtype == (np.int8 if bits == 8 else np.uint8)
        assert np.array_equal(data.reshape(qbytes(q, bits).shape), qbytes(q, bits)), f
        assert np.array_equal(np.concatenate([host(Q.scale), host(st.scale)]), sc4, equal_nan=True), f
        assert Q.shape == Y.shape and Q.seed == seed + 1
        if not np.isnan(growth):
            growth_max = max(growth_max, float(growth))
            saturated += int(growth > 1)
    stats = st.statistics()
    assert stats["steps"] == 1 + len(FACTORS)
    assert stats["saturated_steps"] == saturated and stats["max_growth"] == np.float32(growth_max)
    # the same call twice: the same bits
    st.scale = dev.put(np.array([own[0] * 0.5, own[1] * 2], np.float32))
    a = host(produce(st, 9).data)
    st.scale = dev.put(np.array([own[0] * 0.5, own[1] * 2], np.float32))
    assert np.array_equal(a, host(produce(st, 9).data))


# (M, K, mean degree, hub row length): the 90-entry rows split each row's edges into 8 parts on
# CUDA at 16 / 64 columns and 4 at 128 (the quantized row kernel's reduce-scatter, every level)
GRAPHS = [(1, 1, 1.0, 0), (7, 5, 2.0, 0), (33, 65, 5.0, 0), (130, 200, 3.0, 1500), (9, 0, 0.0, 0), (37, 300, 90.0, 0)]
WIDTHS = [1, 3, 12, 16, 17, 64, 130]


@pytest.mark.parametrize("g", GRAPHS, ids=lambda g: f"{g[0]}x{g[1]}h{g[3]}")
@pytest.mark.parametrize("bits_in, bits", [(8, 8), (8, 4), (4, 8)])
@pytest.mark.parametrize("weighted", [False, True])
def test_qspmm_out(dev, rng, g, bits_in, bits, weighted):
    M, K, deg, hub = g
    A = random_csr(rng, M, K, mean_deg=deg, hub=hub, weighted=weighted,
                   index_dtype=np.int64 if hub else np.int32)
    Ad = dev.csr(A)
    for C in WIDTHS:
        QX = gs.quantize(dev.put(rand(rng, K, C)), bits_in, seed=C)
        for red in ("sum", "mean", "max", "min"):
            Y = host(gs.quant.spmm(Ad, QX, red))
            check_producer(dev, lambda st, sd: gs.quant.spmm(Ad, QX, red, out=st, seed=sd), Y, bits, 3 * C)


@pytest.mark.parametrize("bits", [8, 4])
def test_qspmm_out_heads_and_incidence(dev, rng, bits):
    """The multi-head aggregation (per-head weights) and the incidence SpMM (both sides) as
    producers; 3-D outputs keep their shape."""
    A = random_csr(rng, 60, 45, mean_deg=5.0, hub=400, weighted=True)
    Ad = dev.csr(A)
    for H, D in [(4, 16), (3, 7), (2, 6)]:
        QZ = gs.quantize(dev.put(rand(rng, 45, H, D)), 8, seed=H)
        Wt = dev.put(rng.random((A.nnz, H)).astype(np.float32))
        Y = host(gs.quant.spmm(Ad, QZ, weights=Wt))
        assert Y.shape == (60, H, D)
        check_producer(dev, lambda st, sd: gs.quant.spmm(Ad, QZ, weights=Wt, out=st, seed=sd), Y, bits, H, 0.9)
    for C in (1, 16, 33):
        QE = gs.quantize(dev.put(rand(rng, A.nnz, C)), 8, seed=C)
        for side in ("dst", "src"):
            Y = host(gs.quant.incidence_spmm(Ad, QE, "sum", side))
            check_producer(dev, lambda st, sd: gs.quant.incidence_spmm(Ad, QE, "sum", side, out=st, seed=sd), Y,
                           bits, C)


@pytest.mark.parametrize("bits", [8, 4])
def test_qspmm_out_nan_zero_empty(dev, rng, bits):
    """NaN in the output: the QTensor's scale is NaN (everything computed from it is NaN), the next
    scale too; an all-zero output keeps the scale used and gives a zero next scale; an empty
    output (no rows) still writes its scales."""
    A = random_csr(rng, 20, 10, mean_deg=3.0, empty_frac=0.0, weighted=False)
    Ad = dev.csr(A)
    X = rand(rng, 10, 8)
    st = gs.quant.DelayedScale(bits)
    gs.quant.spmm(Ad, gs.quantize(dev.put(X), 8, seed=1), out=st, seed=1)  # calibrate
    used = host(st.scale).copy()
    Q = gs.quant.spmm(Ad, gs.quantize(dev.put(np.zeros_like(X)), 8), out=st, seed=2)
    assert not host(Q.int8()).any() and np.array_equal(host(Q.scale), used)
    assert host(st.scale).tolist() == [0.0, 0.0]
    st.scale = dev.put(used)
    Xn = X.copy()
    Xn[3, 2] = np.nan
    Qn = gs.quantize(dev.put(Xn), 8, check=False)  # NaN scale: every SpMM output is NaN
    Q = gs.quant.spmm(Ad, Qn, out=st, seed=3)
    assert np.isnan(Q.scale_value()) and np.isnan(host(st.scale)[0]) and host(st.scale)[1] == 0
    assert np.isnan(host(gs.dequantize(Q))).all()
    # no rows
    A0 = gs.CSR(np.zeros(1, np.int32), np.zeros(0, np.int32), None, (0, 10))
    st = gs.quant.DelayedScale(bits)
    st.scale = dev.put(used)
    st.stats = dev.put(np.zeros(2, np.float32))
    Q = gs.quant.spmm(dev.csr(A0), gs.quantize(dev.put(X), 8), out=st, seed=4)
    assert Q.shape == (0, 8) and np.array_equal(host(Q.scale), used) and host(st.scale).tolist() == [0.0, 0.0]


def test_qspmm_out_checks(dev, rng):
    A = random_csr(rng, 10, 8, mean_deg=2.0, weighted=False)
    Ad = dev.csr(A)
    Q = gs.quantize(dev.put(rand(rng, 8, 4)), 8)
    with pytest.raises(ValueError, match="return_arg"):
        gs.quant.spmm(Ad, Q, "max", return_arg=True, out=gs.quant.DelayedScale(8))
    with pytest.raises(TypeError, match="DelayedScale"):
        gs.quant.spmm(Ad, Q, out=8)
    with pytest.raises(ValueError, match="bits"):
        gs.quant.DelayedScale(6)
    with pytest.raises(ValueError, match="decay"):
        gs.quant.DelayedScale(8, decay=1.0)
    if dev.name == "cuda":  # a state calibrated on another device names both
        st = gs.quant.DelayedScale(8)
        st.scale = np.ones(2, np.float32)
        with pytest.raises(ValueError, match="delayed scale lives on numpy"):
            gs.quant.spmm(Ad, Q, out=st)


@pytest.mark.parametrize("M, K, N", [(40, 32, 16), (5, 13, 7), (33, 256, 24), (20, 8, 130), (64, 64, 6)])
@pytest.mark.parametrize("bits", [8, 4])
def test_linear_q(dev, rng, M, K, N, bits):
    """The int8 GEMM's scale pass as the producer: y is linear()'s float32 output bit for bit,
    quantized with the delayed scale (quads and byte paths: N % 4 == 0 or not)."""
    if torch is None:
        pytest.skip("torch not installed")
    X, W = rand(rng, M, K), rand(rng, N, K)
    Xd, Wd = (torch.from_numpy(X), torch.from_numpy(W)) if dev.name == "host" else (dev.put(X), dev.put(W))
    for bits_in in (8, 4):
        QX, QW = gs.quantize(Xd, bits_in, seed=1), gs.quantize(Wd, bits_in, seed=2)
        Y = host(gs.quant.linear(QX, QW))
        Yd = (lambda a: torch.from_numpy(a)) if dev.name == "host" else dev.put
        check = Dev(dev.name)
        check.put = Yd
        check_producer(check, lambda st, sd: gs.quant.linear_q(QX, QW, st, seed=sd), Y, bits, 7, 0.99)


def test_linear_q_falls_back(rng):
    """Without torch tensors (NumPy) the product is not one _int_mm: the output is quantized from
    the float32 result (a quantize pass), still with the DelayedScale's bookkeeping."""
    sycl_or_skip()
    X, W = rand(rng, 9, 8), rand(rng, 5, 8)
    QX, QW = gs.quantize(X, 8, seed=1), gs.quantize(W, 8, seed=2)
    st = gs.quant.DelayedScale(8)
    for step in range(2):
        Q = gs.quant.linear_q(QX, QW, st, seed=step)
        Qr = gs.quantize(gs.quant.linear(QX, QW), 8, seed=step)
        assert np.array_equal(host(Q.data), host(Qr.data)) and st.steps == step + 1


def test_stats_set_by_hand_are_checked(rng):
    """A scale or statistics buffer set by hand must be 2 float32 on the output's device (the
    kernels read and write them in place)."""
    sycl_or_skip()
    A = random_csr(rng, 10, 8, mean_deg=2.0, weighted=False)
    Q = gs.quantize(rand(rng, 8, 4), 8)
    st = gs.quant.DelayedScale(8)
    st.scale = np.ones(3, np.float32)
    with pytest.raises(ValueError, match="DelayedScale.scale must be 2 float32"):
        gs.quant.spmm(A, Q, out=st)
    st.scale, st.stats = np.ones(2, np.float32), np.zeros(2, np.float64)
    with pytest.raises(ValueError, match="DelayedScale.stats must be 2 float32"):
        gs.quant.spmm(A, Q, out=st)
    st.stats = None  # no statistics kept: fine
    assert gs.quant.spmm(A, Q, out=st).bits == 8 and st.stats is None


def test_bench_tool_dry_run():
    """tools/quant_bench.py --cpu: every code path and check of the GPU bench on the CPU."""
    sycl_or_skip()
    if torch is None:
        pytest.skip("torch not installed")
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "tools" / "quant_bench.py"
    r = subprocess.run([sys.executable, "-W", "ignore", str(script), "--cpu"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "FAILED" not in r.stdout and "int8 spmm producer" in r.stdout and "bytes saved for the backward" in r.stdout
