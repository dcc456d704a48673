"""Delayed scaling: the state of a tensor that a producer (the quantized SpMM, the int8 GEMM's
scale pass) writes quantized, step after step (contract: include/gnnsparse/quant.hpp, DELAYED
SCALING; why: docs/quantization.md).

A per-tensor scale needs max|Y| before the first element of Y is written. A producer writing Y row
by row does not have it, so it quantizes with the scale of the previous step's Y and finds this
Y's absmax as a by-product, for the next step (FP8 training's delayed scaling). Values beyond the
previous absmax saturate at +-qmax; the statistics count the steps where that happened.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .. import _arrays, _core

__all__ = ["DelayedScale"]


def _zeros_like(a, n: int):
    """n float32 zeros in the framework and on the device of a."""
    if _arrays.is_torch(a):
        import torch

        return torch.zeros(n, dtype=torch.float32, device=a.device)
    k = _arrays.kind(a)
    if k == "numpy":
        return np.zeros(n, np.float32)
    if k == "cuda":
        import cupy as cp

        with a.device:
            return cp.zeros(n, np.float32)
    import dpnp

    return dpnp.zeros(n, dtype=np.float32, sycl_queue=a.sycl_queue)


class DelayedScale:
    """The delayed scale of one tensor that a producer writes quantized, e.g.

        st = gs.quant.DelayedScale(bits=8)
        for step in ...:
            Q = gs.quant.spmm(A, QX, out=st, seed=step)   # a QTensor, written by the SpMM itself

    `scale`: {s, inv} (2 float32 on the output's device) the next output is quantized with; None
    before the first output, which calibrates: the int8 GEMM computes it in float32 and quantizes it
    in a separate pass, the SpMM runs a probe pass that finds its absmax (its scale serves both
    that output and the second). `decay` in [0, 1): a peak hold, the next scale is that
    of max(this output's absmax, decay x the absmax of the scale in use), so an absmax that
    fluctuates from step to step (a gradient's) is clamped less often, at the price of a coarser
    step after a peak (0: the scale of the last output alone). `stats`: [largest growth of the
    absmax over the scale used, steps where it grew (some elements were clamped to +-qmax)], kept
    on the device and read by statistics(). Changing the bit width needs a new state (the scale is
    per width)."""

    __slots__ = ("bits", "stochastic", "decay", "scale", "stats", "steps")

    def __init__(self, bits: int = 8, stochastic: bool = True, decay: float = 0.0):
        from ._tensor import _check_bits

        self.bits = _check_bits(bits)
        self.stochastic = bool(stochastic)
        if not 0.0 <= float(decay) < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay!r}")
        self.decay = float(decay)
        self.scale = None
        self.stats = None
        self.steps = 0

    def reset(self):
        """Forget the scale: the next output calibrates again (statistics kept)."""
        self.scale = None

    def statistics(self) -> dict:
        """{"steps", "saturated_steps", "max_growth"} (reads two floats from the device). max_growth
        is the largest absmax / (the absmax its scale came from) seen: > 1 means clamping."""
        st = [0.0, 0.0] if self.stats is None else [float(v) for v in _arrays.to_numpy(self.stats)]
        return {"steps": self.steps, "saturated_steps": int(st[1]), "max_growth": st[0]}

    # ---- used by the producers (gnnsparse.quant.ops.spmm, gnnsparse.quant._gemm.linear_q)
    def _check_place(self, like, what: str):
        """The scale (and statistics) a producer will read and write: 2 float32 each, on the
        output's device (they may have been set by hand)."""
        for name, a in (("scale", self.scale), ("stats", self.stats)):
            if a is None:
                continue
            if _arrays.kind(a) != _arrays.kind(like):
                raise ValueError(f"{what}: the delayed scale lives on {_arrays.kind(a)} but the output on "
                                 f"{_arrays.kind(like)}; use one DelayedScale per device")
            if _arrays.dtype_name(a) != "float32" or tuple(_arrays.shape_of(a)) != (2,):
                raise ValueError(f"{what}: DelayedScale.{name} must be 2 float32 values, got "
                                 f"{_arrays.dtype_name(a)} of shape {tuple(_arrays.shape_of(a))}")

    def _calibrate(self, Q):
        """The first output (quantized in a separate pass): its scale is the next one's."""
        self.scale = Q.scale
        if self.stats is None:
            self.stats = _zeros_like(Q.scale, 2)
        self.steps += 1

    def _args(self, b, seed: int):
        """The backend's description of the output (bits, rounding code, seed, scale_in, stats)."""
        return SimpleNamespace(bits=self.bits, rounding=_core.ROUNDING["stochastic" if self.stochastic else "nearest"],
                               seed=seed, scale_in=b.prepare(self.scale),
                               stats=None if self.stats is None else b.prepare(self.stats), decay=self.decay)

    def _advance(self, scale4):
        """After a producer's launch: scale4 = [the QTensor's s, inv, the next s, inv]."""
        self.scale = scale4[2:4]
        self.steps += 1
