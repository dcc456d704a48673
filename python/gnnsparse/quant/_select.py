"""Tango's quantization error metric (SC'23, eq. 4) and its bit-width rule.

    Error_X = (1/N) sum_i |X_i - X_i,q| / (|X_i| + |X_i,q| + eps),  eps = 0.0005

a relative error in [0, 1) comparable across tensors. Tango evaluates it on the output of the first
GNN layer during the first epoch and picks the smallest bit width with Error_X < 0.3.
"""
from __future__ import annotations

import numpy as np

from .. import _arrays
from ._tensor import _unpack4, dequantize, quantize

EPS = 5e-4
THRESHOLD = 0.3
_CHUNK = 1 << 20  # elements per float64 pass of error_x


def error_x(X, Q=None, *, bits: int = 8, eps: float = EPS, seed=None) -> float:
    """Error_X of X against its quantized version Q (quantized here with `bits`, stochastic
    rounding and `seed` when Q is None). Computed in float64 in X's framework, _CHUNK elements at a
    time (a float64 copy of a products-sized layer output would be GiBs); returns a float."""
    if Q is None:
        Q = quantize(X, bits, True, seed, check=False)
    if _arrays.is_torch(X) and _arrays.is_torch(Q.data):
        import torch

        # rows dequantized (int4 unpacked) a chunk at a time too: fl32(s q), dequantize's bits,
        # without a float32 or unpacked copy of the whole tensor
        R, C = Q.rows, Q.C
        if R * C == 0:
            return 0.0
        x = X.detach().reshape(R, C)
        data = Q.data.reshape(R, -1)
        s32 = Q.scale[:1]
        step = max(1, _CHUNK // C)
        total = torch.zeros((), dtype=torch.float64, device=x.device)
        for r in range(0, R, step):  # fixed chunks in a fixed order: deterministic
            d = data[r:r + step]
            q = d if Q.bits == 8 else _unpack4(d, (d.shape[0], C))
            a = x[r:r + step].to(torch.float64)
            b = q.to(torch.float32).mul_(s32).to(torch.float64)
            total += ((a - b).abs_() / (a.abs() + b.abs() + eps)).sum()
        return float(total) / (R * C)
    Xq = dequantize(Q)
    x = np.asarray(_arrays.to_numpy(X)).reshape(-1)
    xq = np.asarray(_arrays.to_numpy(Xq)).reshape(-1)
    if x.size == 0:
        return 0.0
    total = 0.0
    for s in range(0, x.size, _CHUNK):
        a, b = x[s:s + _CHUNK].astype(np.float64), xq[s:s + _CHUNK].astype(np.float64)
        total += float(np.sum(np.abs(a - b) / (np.abs(a) + np.abs(b) + eps)))
    return total / x.size


def select_bits(X, candidates=(4, 8), threshold: float = THRESHOLD, *, eps: float = EPS, seed=None):
    """(bits, {bits: Error_X}): the smallest candidate width whose Error_X on X is below
    `threshold`, or None when none is (keep the layer in float32)."""
    errors = {}
    for b in sorted(candidates):
        errors[b] = error_x(X, bits=b, eps=eps, seed=seed)
        if errors[b] < threshold:
            return b, errors
    return None, errors
