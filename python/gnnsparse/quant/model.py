"""NumPy model of the quantizer (the oracle the tests compare every backend with, bit for bit).

The element-level definition is sycl/kernels/quant_math.hpp (shared by the CUDA, SYCL and ESIMD
kernels); this module computes the same arithmetic in NumPy float32 / uint32, vectorized:

    absmax = max |x|  (NaN if any element is NaN or +-inf)
    s = absmax / qmax, inv = qmax / absmax  (both 0 for absmax = 0; s NaN, inv 0 when not finite)
    v = x * inv
    nearest:    q = rint(v)
    stochastic: q = floor(v) + (u < v - floor(v)),  u = (w >> 8) * 2^-24
    q = clip(q, -qmax, qmax)

w is word e % 4 of Philox4x32-10(counter = (e // 4 lo, e // 4 hi, 0, 0), key = (seed lo, seed hi)).

Delayed scaling (producers that write their output quantized, include/gnnsparse/quant.hpp):
quantize(..., inv=the previous step's, saturate=True) and delayed_scales / quantize_delayed.
"""
from __future__ import annotations

import numpy as np

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_MASK = np.uint64(0xFFFFFFFF)


def qmax_of(bits: int) -> int:
    return (1 << (bits - 1)) - 1


def philox4x32_10(c0, c1, c2, c3, k0: int, k1: int):
    """Philox4x32-10 on arrays of 32-bit counters (any integer dtype), scalar key; returns four
    uint32 arrays."""
    c = [np.asarray(x).astype(np.uint64) & _MASK for x in (c0, c1, c2, c3)]
    k0, k1 = int(k0) & 0xFFFFFFFF, int(k1) & 0xFFFFFFFF
    for r in range(10):
        if r:
            k0 = (k0 + _W0) & 0xFFFFFFFF
            k1 = (k1 + _W1) & 0xFFFFFFFF
        p0 = _M0 * c[0]
        p1 = _M1 * c[2]
        hi0, lo0 = p0 >> np.uint64(32), p0 & _MASK
        hi1, lo1 = p1 >> np.uint64(32), p1 & _MASK
        c = [hi1 ^ c[1] ^ np.uint64(k0), lo1, hi0 ^ c[3] ^ np.uint64(k1), lo0]
    return [x.astype(np.uint32) for x in c]


def element_words(seed: int, n: int) -> np.ndarray:
    """The random word of every element 0 .. n-1 of a tensor quantized with `seed` (uint32, n)."""
    g = np.arange((n + 3) // 4, dtype=np.uint64)
    words = philox4x32_10(g & _MASK, g >> np.uint64(32), np.zeros_like(g), np.zeros_like(g),
                          seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)
    return np.stack(words, axis=1).reshape(-1)[:n]


def dropout_threshold(p: float) -> int:
    """round(p 2^32), at most 2^32 - 1 (include/gnnsparse/act_dropout.hpp dropout_threshold)."""
    t = p * 4294967296.0 + 0.5
    return 0xFFFFFFFF if t >= 4294967295.0 else (0 if t <= 0.0 else int(t))


def dropout_keep(seed: int, n: int, p: float) -> np.ndarray:
    """The act_dropout kernels' dropout mask of elements 0 .. n-1 (bool, n): element e is kept when
    its random word (element_words) is at least dropout_threshold(p)."""
    return element_words(seed, n) >= np.uint32(dropout_threshold(p))


def absmax(x) -> np.float32:
    x = np.asarray(x, np.float32)
    if x.size == 0:
        return np.float32(0)
    if not np.isfinite(x).all():
        return np.float32(np.nan)
    return np.float32(np.abs(x).max())


def scales(amax, bits: int):
    """(s, inv) as float32, from absmax."""
    q = np.float32(qmax_of(bits))
    amax = np.float32(amax)
    if not np.isfinite(amax):
        return np.float32(np.nan), np.float32(0)
    if amax == 0:
        return np.float32(0), np.float32(0)
    return np.float32(amax / q), np.float32(q / amax)


def quantize(x, bits: int = 8, stochastic: bool = True, seed: int = 0, inv=None, saturate: bool = False):
    """(q as int8 with the logical shape of x, s, inv). `inv` overrides the model's own (to check a
    backend's quantization given its scale). saturate=True is the delayed-scale producers' rule
    (quantize_value_sat): v = x * inv saturates at +-(qmax + 1) and NaN gives 0, instead of 0
    outside that range."""
    x = np.asarray(x, np.float32)
    qm = qmax_of(bits)
    s, inv0 = scales(absmax(x), bits)
    inv = inv0 if inv is None else np.float32(inv)
    flat = x.reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        v = (flat * inv).astype(np.float32)
        lim = np.float32(qm + 1)
        if saturate:
            v = np.where(np.isnan(v), np.float32(0), np.clip(v, -lim, lim)).astype(np.float32)
        else:
            v = np.where((v >= -lim) & (v <= lim), v, np.float32(0)).astype(np.float32)
    fl = np.floor(v).astype(np.float32)
    f = (v - fl).astype(np.float32)
    if stochastic:
        u = (element_words(seed, flat.size) >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)
        q = np.where(u < f, fl + 1, fl)
    else:
        q = np.rint(v)
    q = np.clip(q, -qm, qm).astype(np.int8)
    return q.reshape(x.shape), s, inv


def delayed_scales(amax, bits: int, prev_s, prev_inv, decay: float = 0.0):
    """What a delayed-scale producer writes once its output's absmax is known (quant_math.hpp
    delayed_scales): (cur, next, growth). cur = the QTensor's {s, inv}: prev's, or {NaN, 0} when the
    output held NaN / inf; next = {s, inv} of max(amax, fl32(fl32(prev_s qmax) decay)) (the next
    step's scale, a peak hold); growth = s / s_prev with s of amax (0 / 0 -> 0, x / 0 -> inf, NaN
    when either is NaN)."""
    s, inv = scales(amax, bits)
    prev_s, prev_inv = np.float32(prev_s), np.float32(prev_inv)
    finite = not np.isnan(s)
    cur = np.array([prev_s, prev_inv] if finite else [np.nan, 0.0], np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        cand = np.float32(np.float32(prev_s * np.float32(qmax_of(bits))) * np.float32(decay))
    held = cand if cand > np.float32(amax) else np.float32(amax)
    nxt = np.array(scales(held, bits), np.float32)
    if not finite or np.isnan(prev_s):
        growth = np.float32(np.nan)
    elif prev_s > 0:
        growth = np.float32(s / prev_s)
    else:
        growth = np.float32(np.inf) if s > 0 else np.float32(0)
    return cur, nxt, growth


def quantize_delayed(y, bits: int, stochastic: bool, seed: int, scale_in, decay: float = 0.0):
    """The model of a delayed-scale producer given its float32 output y (the op's own output, bit
    for bit) and the scale it quantizes with, scale_in = {s, inv}: (q with y's shape, scale (4,):
    the QTensor's {s, inv} and the next {s, inv}, growth)."""
    y = np.asarray(y, np.float32)
    scale_in = np.asarray(scale_in, np.float32).reshape(-1)
    q = quantize(y, bits, stochastic, seed, inv=scale_in[1], saturate=True)[0]
    cur, nxt, growth = delayed_scales(absmax(y), bits, scale_in[0], scale_in[1], decay)
    return q, np.concatenate([cur, nxt]).astype(np.float32), growth


def rows_cols(shape) -> tuple:
    """(rows, C) of a quantized tensor's logical shape: the first axis is the row axis, the rest
    is flattened into C features (a 1-D tensor has C = 1; a 0-d one is one row of one)."""
    shape = tuple(int(s) for s in shape)
    if len(shape) == 0:
        return 1, 1
    C = 1
    for s in shape[1:]:
        C *= s
    return shape[0], C


def pack4(q: np.ndarray) -> np.ndarray:
    """int4 values (int8 array, any shape) -> packed bytes (rows, (C + 1) // 2) uint8."""
    R, C = rows_cols(q.shape)
    q = q.reshape(R, C).astype(np.int16)
    if C % 2:
        q = np.concatenate([q, np.zeros((R, 1), np.int16)], axis=1)
    lo, hi = q[:, 0::2] & 0xF, q[:, 1::2] & 0xF
    return (lo | (hi << 4)).astype(np.uint8)


def unpack4(packed: np.ndarray, shape) -> np.ndarray:
    """Packed bytes -> int8 values of the logical shape."""
    R, C = rows_cols(shape)
    b = np.asarray(packed, np.uint8).reshape(R, (C + 1) // 2).astype(np.int16)
    lo = ((b & 0xF) ^ 8) - 8
    hi = ((b >> 4) ^ 8) - 8
    out = np.empty((R, b.shape[1] * 2), np.int16)
    out[:, 0::2], out[:, 1::2] = lo, hi
    return out[:, :C].astype(np.int8).reshape(shape)


def error_x(x, xq, eps: float = 5e-4) -> float:
    """Tango's quantization error of a tensor (SC'23, eq. 4):
    mean over elements of |x - xq| / (|x| + |xq| + eps), in [0, 1), computed in float64."""
    x = np.asarray(x, np.float64).reshape(-1)
    xq = np.asarray(xq, np.float64).reshape(-1)
    if x.size == 0:
        return 0.0
    return float(np.mean(np.abs(x - xq) / (np.abs(x) + np.abs(xq) + eps)))
