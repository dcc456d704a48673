"""Quantized tensors and ops for GNN training (after Tango, Chen et al., SC'23).

    import gnnsparse as gs
    Q = gs.quantize(X, bits=8)                 # int8 (or bits=4: packed int4) + a device scale
    Y = gs.quant.spmm(A, Q, reduce="sum")      # float32, dequantized on the fly
    E = gs.quant.sddmm(A, Q, Q, op="dot")      # exact integer dot products, times s_X * s_Y
    H = gs.quant.matmul(X, W)                  # int8 tensor cores (torch._int_mm), scale applied after
    bits, err = gs.quant.select_bits(H1)       # Tango's Error_X rule: smallest width with error < 0.3
    st = gs.quant.DelayedScale(8)              # a producer writing its output quantized (delayed scale):
    Q2 = gs.quant.spmm(A, Q, out=st)           #   the SpMM's epilogue writes int8, no quantize pass
    Q3 = gs.quant.linear_q(QX, QW, out=st2)    #   the GEMM's scale pass writes int8

Semantics (scale, rounding, accumulation, exactness, overflow guards): include/gnnsparse/quant.hpp;
the element arithmetic is sycl/kernels/quant_math.hpp and its NumPy model gnnsparse.quant.model.
Symmetric per-tensor scale s = max|X| / (2^(B-1) - 1), found on the device (it never visits the
host unless you ask: QTensor.scale_value(), or quantize(check=True)).
Stochastic rounding uses Philox4x32-10 keyed by (seed, element index): the same seed gives the
same bits on every run, launch geometry and backend.
"""
from . import model
from ._delayed import DelayedScale
from ._gemm import linear, linear_q, matmul
from ._select import error_x, select_bits
from ._tensor import BITS, QTensor, dequantize, quantize
from .ops import fusedmm, incidence_spmm, sddmm, spmm

__all__ = ["QTensor", "quantize", "dequantize", "spmm", "incidence_spmm", "sddmm", "fusedmm", "matmul", "linear",
           "linear_q", "DelayedScale", "error_x", "select_bits", "BITS", "model"]
