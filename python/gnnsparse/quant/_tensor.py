"""QTensor and the quantizer: `quantize`, `dequantize` (semantics: include/gnnsparse/quant.hpp)."""
from __future__ import annotations

import math
import secrets

import numpy as np

from .. import _arrays, _core
from .._backends import backend_for
from .._ops import wrap_like
from . import model

BITS = (4, 8)
_FLOATS = tuple(_core.DTYPE)  # the feature dtypes of the table: quantize converts them to float32


class QTensor:
    """A quantized tensor: `data` (rows x row_bytes: int8, or uint8 holding two int4 per byte, low
    nibble first, rows padded to whole bytes), `scale` (float32 [s, 1/s] on the data's device),
    `bits`, and the logical `shape` of the float tensor it came from. The first axis is the row
    axis; the others are flattened into `C` features per row (see include/gnnsparse/quant.hpp).
    Arrays are in the framework of the quantized input (NumPy, torch, CuPy, dpnp)."""

    __slots__ = ("data", "scale", "bits", "shape", "seed", "stochastic", "__weakref__")

    def __init__(self, data, scale, bits: int, shape, seed=None, stochastic=True):
        self.data, self.scale, self.bits = data, scale, int(bits)
        self.shape = tuple(int(s) for s in shape)
        self.seed, self.stochastic = seed, stochastic

    @property
    def rows(self) -> int:
        return model.rows_cols(self.shape)[0]

    @property
    def C(self) -> int:
        return model.rows_cols(self.shape)[1]

    @property
    def row_bytes(self) -> int:
        return self.C if self.bits == 8 else (self.C + 1) // 2

    @property
    def qmax(self) -> int:
        return model.qmax_of(self.bits)

    @property
    def kind(self) -> str:
        return _arrays.kind(self.data)

    @property
    def nbytes(self) -> int:
        return self.rows * self.row_bytes

    def scale_value(self) -> float:
        """s as a Python float (reads the device scalar: a synchronization on a GPU)."""
        return float(_arrays.to_numpy(self.scale)[0])

    def dequantize(self):
        return dequantize(self)

    def int8(self):
        """The integer values as int8 of the logical shape, in the data's framework (unpacks int4)."""
        if self.bits == 8:
            return self.data.reshape(self.shape)
        return _unpack4(self.data, self.shape)

    def __repr__(self):
        return (f"QTensor(shape={self.shape}, bits={self.bits}, rounding="
                f"{'stochastic' if self.stochastic else 'nearest'}, on={self.kind})")


def _check_bits(bits):
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or bits not in BITS:
        raise ValueError(f"bits must be 4 or 8, got {bits!r}")
    return int(bits)


def _as_float32(X):
    dt = _arrays.dtype_name(X)
    if dt not in _FLOATS:
        raise TypeError(f"quantize takes a floating-point tensor (float32, float64, float16, bfloat16); got {dt}")
    if dt == "float32":
        return X
    if _arrays.is_torch(X):
        import torch

        return X.to(torch.float32)
    return X.astype(np.float32)


def _seed(seed) -> int:
    if seed is None:
        return secrets.randbits(64)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**64:
        raise ValueError(f"seed must be an integer in [0, 2**64) or None, got {seed!r}")
    return int(seed)


def quantize(X, bits: int = 8, stochastic: bool = True, seed=None, *, check: bool = True) -> QTensor:
    """Quantize X to `bits` (8 or 4) with one symmetric scale s = max|X| / (2^(bits-1) - 1).

    stochastic=True rounds up with probability equal to the fraction (unbiased: E[s q] = X);
    seed=None draws a fresh seed, an int makes the result bitwise reproducible. Float64 / float16 /
    bfloat16 inputs are converted to float32 first; other dtypes raise TypeError. An all-zero X
    gives s = 0 and q = 0. X holding NaN or +-inf: check=True (default) raises ValueError (it reads
    the scale, one synchronization on a GPU); check=False keeps everything on the device and the
    scale is NaN, so every result computed from the tensor is NaN.
    """
    bits = _check_bits(bits)
    X0 = X
    X = _as_float32(X)
    b = backend_for(X)
    X1 = X
    X = b.prepare(X)
    rows, C = model.rows_cols(_arrays.shape_of(X))
    s = _seed(seed) if stochastic else 0
    data, scale = b.quantize(X.reshape(rows, C), rows, C, bits, _core.ROUNDING["stochastic" if stochastic else "nearest"],
                             s)
    data, scale = wrap_like(X1, X, data, scale)
    Q = QTensor(data, scale, bits, _arrays.shape_of(X0), s if stochastic else None, bool(stochastic))
    if check and math.isnan(Q.scale_value()):
        raise ValueError("cannot quantize: X contains NaN or infinity (its scale max|X| / qmax is not finite); "
                         "pass check=False to get a NaN scale instead")
    return Q


def _prep(b, Q: QTensor, name: str):
    if not isinstance(Q, QTensor):
        raise TypeError(f"{name} must be a gnnsparse.QTensor (gnnsparse.quantize(...)), got {type(Q).__name__}")
    return b.prepare(Q.data), b.prepare(Q.scale)


def dequantize(Q: QTensor):
    """s * q as float32 with Q's logical shape, in Q's framework and device."""
    if not isinstance(Q, QTensor):
        raise TypeError(f"dequantize takes a gnnsparse.QTensor, got {type(Q).__name__}")
    b = backend_for(Q.data)
    data, scale = _prep(b, Q, "Q")
    Y = b.dequantize(data, scale, Q.bits, Q.rows, Q.C)
    Y = wrap_like(Q.data, data, Y)[0]
    return Y.reshape(Q.shape)


def _unpack4(data, shape):
    """Packed int4 bytes -> int8 values of `shape`, in data's framework (torch or NumPy)."""
    R, C = model.rows_cols(shape)
    if _arrays.is_torch(data):
        import torch

        b = data.reshape(R, (C + 1) // 2).to(torch.int16)
        lo = ((b & 0xF) ^ 8) - 8
        hi = ((b >> 4) ^ 8) - 8
        out = torch.stack([lo, hi], dim=-1).reshape(R, 2 * ((C + 1) // 2))[:, :C]
        return out.to(torch.int8).reshape(shape)
    return model.unpack4(_arrays.to_numpy(data), shape)
