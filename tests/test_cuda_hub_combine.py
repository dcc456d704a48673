"""The hub pass's combine on CUDA: by rows (a thread per segment finds the hub rows that start
there, a warp folds each short one, the block each long one) and by segments (a warp per segment,
the block folds every row). GNNSPARSE_CUDA_HUB_COMBINE=auto (the default) takes by rows only for
the SpMM's sums and means up to 16 columns, by segments for every other combine; rows and segments
force one.

A graph of many hub rows: short ones (2-6 segments: the warp path) scattered and in a run of
consecutive rows (one warp meets many), and two long ones (hundreds of segments: the block path),
among rows of 0-3 entries. Every op that combines hub rows -- SpMM (sum, mean, max / min with arg),
the multi-head SpMM, FusedMM (softmax and not), the int8 SpMM -- checked against
gnnsparse.reference under each knob value; max / min values and args exact and bitwise equal under
all three; auto (and the knob unset) bitwise equal to the combine it picks (float sums folded by
rows and by segments may differ in the last bits); repeats bitwise.
"""
import numpy as np
import pytest

import gnnsparse as gs
from gnnsparse import reference as ref

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.cuda

COMBINES = ["auto", "rows", "segments"]


def _auto_picks(spmm_sum=False, C=0):
    """The combine GNNSPARSE_CUDA_HUB_COMBINE=auto runs (cuda/segments.cuh, Cmb::prefers_rows): by
    rows for the SpMM's sum / mean up to 16 columns (SegmentTuning::kCombineRowsSumWidth), else by
    segments."""
    return "rows" if spmm_sum and C <= 16 else "segments"


def _needs_cuda():
    from gnnsparse import _cuda_backend

    if not (_cuda_backend.backend.available() and torch.cuda.is_available()):
        pytest.skip("no CUDA device or no compiled gnnsparse CUDA module")


def test_knob_rejects_unknown_values(monkeypatch):
    _needs_cuda()
    A = _graph(0)[0]
    X = torch.ones(A.shape[1], 16, device="cuda")
    monkeypatch.setenv("GNNSPARSE_CUDA_HUB_COMBINE", "block")
    with pytest.raises(ValueError, match="GNNSPARSE_CUDA_HUB_COMBINE must be auto, rows or segments, got 'block'"):
        gs.spmm(A, X)
        torch.cuda.synchronize()


def _graph(seed, M=16000, K=3000):
    """Rows of 0-3 entries, 40 scattered rows of 257-1500, a run of 24 consecutive rows of 300-700,
    and rows of 40,000 and 70,000 entries; average ~12 entries, so the hub threshold is 256."""
    rng = np.random.default_rng(seed)
    deg = rng.integers(0, 4, M).astype(np.int64)
    deg[rng.choice(M, 40, replace=False)] = rng.integers(257, 1500, 40)
    deg[5000:5024] = rng.integers(300, 700, 24)
    deg[[3, 9000]] = [40_000, 70_000]
    rowptr = np.zeros(M + 1, np.int64)
    np.cumsum(deg, out=rowptr[1:])
    col = rng.integers(0, K, int(rowptr[-1]))
    val = rng.uniform(-1, 1, col.size).astype(np.float32)
    A = gs.CSR(rowptr, col, val, shape=(M, K))
    return A.to_like(torch.empty(1, device="cuda")), A


def _t(rng, *shape):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).cuda()


def _close(got, want, tol=2e-5):
    """max |got - want| <= tol * max(1, max |want|): float32 sums of up to 70,000 terms."""
    err = float(np.abs(got.cpu().numpy().astype(np.float64) - want).max())
    assert err <= tol * max(1.0, float(np.abs(want).max())), err


def _under(monkeypatch, combine, fn):
    """fn() under GNNSPARSE_CUDA_HUB_COMBINE=combine (None: unset, the default)."""
    monkeypatch.setenv("GNNSPARSE_CUDA_PAD", "off")  # 47 columns: the scalar walks' hub pass too
    if combine is None:
        monkeypatch.delenv("GNNSPARSE_CUDA_HUB_COMBINE", raising=False)
    else:
        monkeypatch.setenv("GNNSPARSE_CUDA_HUB_COMBINE", combine)
    out = fn()
    torch.cuda.synchronize()
    return out


@pytest.mark.parametrize("C", [16, 47, 128])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min"])
def test_spmm(monkeypatch, reduce, C):
    _needs_cuda()
    Ad, A = _graph(C)
    X = _t(np.random.default_rng(C + 1), A.shape[1], C)
    arg = reduce in ("max", "min")
    got = {}
    for combine in COMBINES:
        got[combine] = _under(monkeypatch, combine, lambda: gs.spmm(Ad, X, reduce, return_arg=arg))
        again = _under(monkeypatch, combine, lambda: gs.spmm(Ad, X, reduce, return_arg=arg))
        if arg:
            (y, a), (y2, a2) = got[combine], again
            # the messages in float32, as the kernels form them: max / min values are exact
            ry, ra = ref.spmm(A, X.cpu().numpy(), reduce, return_arg=True, dtype=np.float32)
            np.testing.assert_array_equal(y.cpu().numpy(), ry)
            np.testing.assert_array_equal(a.cpu().numpy(), ra)
            assert torch.equal(a, a2)
        else:
            y, y2 = got[combine], again
            _close(y, ref.spmm(A, X.cpu().numpy(), reduce))
        assert torch.equal(y, y2), f"{combine}: repeated call not bitwise equal"
    unset = _under(monkeypatch, None, lambda: gs.spmm(Ad, X, reduce, return_arg=arg))
    if arg:
        for combine in ("auto", "segments"):
            assert all(torch.equal(u, v) for u, v in zip(got["rows"], got[combine])), combine
        assert all(torch.equal(u, v) for u, v in zip(got["auto"], unset))
    else:
        picked = got[_auto_picks(spmm_sum=True, C=C)]
        assert torch.equal(got["auto"], picked) and torch.equal(unset, picked)


@pytest.mark.parametrize("H,D", [(4, 32), (1, 47)])
def test_spmm_heads(monkeypatch, H, D):
    _needs_cuda()
    Ad, A = _graph(H + D)
    rng = np.random.default_rng(D)
    W = torch.from_numpy(rng.uniform(0, 1, (A.nnz, H)).astype(np.float32)).cuda()
    Z = _t(rng, A.shape[1], H, D)
    want = ref.spmm_heads(A, W.cpu().numpy(), Z.cpu().numpy())
    got = {}
    for combine in COMBINES:
        got[combine] = out = _under(monkeypatch, combine, lambda: gs.spmm_heads(Ad, W, Z))
        _close(out, want)
        assert torch.equal(out, _under(monkeypatch, combine, lambda: gs.spmm_heads(Ad, W, Z)))
    assert torch.equal(got["auto"], got[_auto_picks()])


def test_fusedmm_edge_values_and_quantized_spmm(monkeypatch):
    """FusedMM's edge values alone (D = 0: W = H, fewer columns than a warp's lanes) and the
    quantized SpMM (int8, its own Part), every combine."""
    _needs_cuda()
    Ad, A = _graph(11)
    rng = np.random.default_rng(12)
    H = 4
    a_dst, a_src = _t(rng, A.shape[0], H) * 0.1, _t(rng, A.shape[1], H) * 0.1
    _, wantE = ref.fusedmm(A, a_dst.cpu().numpy(), a_src.cpu().numpy(), np.zeros((A.shape[1], H, 1)), "add",
                           "leaky_relu_softmax", 0.2, return_edges=True)
    X = _t(rng, A.shape[1], 64)
    q = gs.quantize(X, bits=8)
    got, edges = {}, {}
    for combine in COMBINES:
        edges[combine] = E = _under(
            monkeypatch, combine, lambda: gs.fusedmm(Ad, a_dst, a_src, a_src.new_empty((A.shape[1], H, 0)), "add",
                                                     "leaky_relu_softmax", 0.2, return_edges=True)[1])
        np.testing.assert_allclose(E.cpu().numpy(), wantE, rtol=1e-4, atol=1e-6)
        got[combine] = _under(monkeypatch, combine, lambda: gs.quant.spmm(Ad, q))
        _close(got[combine], ref.spmm(A, gs.dequantize(q).cpu().numpy()), tol=1e-5)
    torch.testing.assert_close(got["rows"], got["segments"], rtol=1e-6, atol=1e-5)
    assert torch.equal(edges["auto"], edges[_auto_picks()])
    assert torch.equal(got["auto"], got[_auto_picks()])


@pytest.mark.parametrize("edge", ["leaky_relu_softmax", "exp"])
def test_fusedmm_add(monkeypatch, edge):
    _needs_cuda()
    Ad, A = _graph(7)
    rng = np.random.default_rng(8)
    H, D = 4, 16
    a_dst, a_src, Z = _t(rng, A.shape[0], H) * 0.1, _t(rng, A.shape[1], H) * 0.1, _t(rng, A.shape[1], H, D)
    want, wantE = ref.fusedmm(A, a_dst.cpu().numpy(), a_src.cpu().numpy(), Z.cpu().numpy(), "add", edge, 0.2,
                              return_edges=True)
    got = {}
    for combine in COMBINES:
        out, E = got[combine] = _under(monkeypatch, combine,
                                       lambda: gs.fusedmm(Ad, a_dst, a_src, Z, "add", edge, 0.2, return_edges=True))
        _close(out, want)
        np.testing.assert_allclose(E.cpu().numpy(), wantE, rtol=1e-4, atol=1e-6)
        out2 = _under(monkeypatch, combine, lambda: gs.fusedmm(Ad, a_dst, a_src, Z, "add", edge, 0.2))
        assert torch.equal(out, out2)
    assert all(torch.equal(u, v) for u, v in zip(got["auto"], got[_auto_picks()]))
