"""gnnsparse: deterministic sparse kernels for graph neural networks.

    import gnnsparse as gs
    A = gs.CSR.from_edge_index(edge_index, num_nodes)
    Y = gs.spmm(A, X, reduce="mean")          # NumPy -> SYCL CPU device; torch/CuPy CUDA -> CUDA kernels
    E = gs.sddmm(A, X, X, op="dot")
    out = gs.fusedmm(A, X, X, Z, edge="softmax")
    out = gs.spmm_heads(A, W, Z)              # W (nnz, H) weights per edge and head, Z (K, H, D)
    S = gs.gatv2_scores(A, XL, XR, att)       # GATv2's scores (nnz, H), no (nnz, H, C) tensor

Backends are imported lazily, so the CUDA path works without dpctl and the SYCL path without torch.
"""
import os as _os
import sys as _sys

# The intel-opencl-rt wheel's ICD file points at a placeholder path; point the OpenCL ICD loader at
# the real CPU runtime library before anything loads libsycl.
_ocl = _os.path.join(_sys.prefix, "lib", "libintelocl.so")
if not _os.environ.get("OCL_ICD_FILENAMES") and _os.path.exists(_ocl):
    _os.environ["OCL_ICD_FILENAMES"] = _ocl

# Alternating torch CPU work with gnnsparse calls cost 1.5-1.9x per step when torch's OpenMP threads
# spin-wait (OMP_WAIT_POLICY unset) against the SYCL CPU runtime's threads for the same cores
# (README: "torch and gnnsparse on one CPU"). OpenMP reads the variable when it loads, so it is set
# here only when the user has not set it and torch (the usual OpenMP user) is not loaded yet.
if "OMP_WAIT_POLICY" not in _os.environ and "torch" not in _sys.modules:
    _os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    OMP_WAIT_POLICY_SET = True  # noqa: N816 - read by `gnnsparse info`
else:
    OMP_WAIT_POLICY_SET = False

from . import reference  # noqa: E402
from ._backends import BackendUnavailable, available_backends  # noqa: E402
from ._csr import CSR  # noqa: E402
from ._graph import GraphMethods, as_graph  # noqa: E402
from ._ops import fusedmm, gatv2_scores, sddmm, spmm, spmm_heads  # noqa: E402
from ._reorder import inverse_permutation, permute, unpermute  # noqa: E402
from . import quant  # noqa: E402
from .quant import QTensor, dequantize, quantize  # noqa: E402

__version__ = "0.1.0"
__all__ = ["CSR", "GraphMethods", "as_graph", "spmm", "spmm_heads", "gatv2_scores", "sddmm", "fusedmm", "permute", "unpermute", "inverse_permutation", "reference", "available_backends", "BackendUnavailable",
           "quant", "quantize", "dequantize", "QTensor"]
