"""The libraries we compare against, on the same inputs in the same run.

CPU: scipy.sparse (csr @ dense), torch.sparse (torch.sparse.mm / sampled_addmm on CPU) and the
PyG-style gather + index_add_/scatter_reduce in torch. GPU: torch.sparse (cuSPARSE underneath),
the PyG-style gather/scatter (torch_geometric.utils.scatter/softmax when installed, else plain torch),
and for FusedMM our own unfused SDDMM + SpMM. Cases of another feature dtype than float32 (bfloat16
on the GPU) are compared with our own op on float32 inputs of the same values ("ours_fp32"); the
other libraries take float32 cases only. Each reference is (name, description, setup) where
setup(case, device, A, G, A_dev) returns fn(inputs) -> result, or raises Unsupported.
"""
from __future__ import annotations

import warnings

import numpy as np

from .._arrays import to_numpy
from .._csr import CSR
from . import measure


class Unsupported(Exception):
    """This reference has no implementation of the case."""


def _pyg():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torch_geometric.utils as pygu
        return pygu
    except Exception:
        return None


class TorchGraph:
    """A's structure as torch tensors on one device (built once per graph and device)."""

    def __init__(self, A: CSR, device):
        import torch

        self.torch = torch
        dev = torch.device(device)
        rowptr = torch.from_numpy(A.rowptr.astype(np.int64)).to(dev)
        col = torch.from_numpy(A.col.astype(np.int64)).to(dev)
        self.M, self.K = A.shape
        self.row = torch.repeat_interleave(torch.arange(self.M, device=dev), rowptr[1:] - rowptr[:-1])
        self.col = col
        self.val = None if A.val is None else torch.from_numpy(to_numpy(A.val).astype(np.float32)).to(dev)
        vals = self.val if self.val is not None else torch.ones(A.nnz, dtype=torch.float32, device=dev)
        # the CSR was validated when it was built: torch's own checks are declined explicitly (left
        # implicit, torch warns once per process; torch 2.11 also when check_invariants=False)
        with warnings.catch_warnings(), torch.sparse.check_sparse_tensor_invariants(enable=False):
            warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta")
            self.csr = torch.sparse_csr_tensor(rowptr, col, vals, size=A.shape, check_invariants=False)
            self.pattern = torch.sparse_csr_tensor(rowptr, col, torch.ones_like(vals), size=A.shape,
                                                   check_invariants=False)
        deg = (rowptr[1:] - rowptr[:-1]).to(torch.float32)
        self.inv_deg = torch.where(deg > 0, 1.0 / deg.clamp(min=1), torch.zeros_like(deg))[:, None]
        self.device = dev


def _float32_only(case):
    if case.dtype != "float32":
        raise Unsupported


# ---------------------------------------------------------------- scipy (CPU)
def scipy_setup(case, dev, A, G, A_dev):
    _float32_only(case)
    if dev.kind != "cpu" or case.op != "spmm" or case.reduce not in ("sum", "mean"):
        raise Unsupported
    S = A.to_scipy().astype(np.float32)
    if case.reduce == "sum":
        return lambda i: S @ i["X"]
    inv = np.zeros(A.shape[0], np.float32)
    deg = A.degrees()
    inv[deg > 0] = 1.0 / deg[deg > 0]
    inv = inv[:, None]
    return lambda i: (S @ i["X"]) * inv


# ---------------------------------------------------------------- torch.sparse (CPU kernels / cuSPARSE)
def torch_sparse_setup(case, dev, A, G, A_dev):
    _float32_only(case)
    torch = G.torch
    if case.op == "spmm":
        T = G.csr
        if case.reduce == "sum":
            return lambda i: torch.sparse.mm(T, i["X"])
        red = {"mean": "mean", "max": "amax", "min": "amin"}[case.reduce]
        # torch.sparse.mm(..., reduce=) has CPU kernels; where it is missing, mean is mm * 1/deg
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.sparse.mm(T, torch.zeros(A.shape[1], 1, device=G.device), reduce=red)
            return lambda i: torch.sparse.mm(T, i["X"], reduce=red)
        except (RuntimeError, TypeError, NotImplementedError):
            if case.reduce != "mean":
                raise Unsupported
            inv = G.inv_deg
            return lambda i: torch.sparse.mm(T, i["X"]) * inv
    if case.op == "sddmm" and case.sddmm_op == "dot" and case.heads == 1:
        P = G.pattern
        return lambda i: torch.sparse.sampled_addmm(P, i["X"], i["Y"].t(), beta=0.0, alpha=1.0).values()
    raise Unsupported


# ---------------------------------------------------------------- PyG-style gather + scatter
def _segment_softmax(torch, pygu, e, row, M):
    if pygu is not None:
        return pygu.softmax(e, row, num_nodes=M)
    idx = row.view(-1, *([1] * (e.dim() - 1))).expand_as(e)
    m = torch.full((M,) + tuple(e.shape[1:]), float("-inf"), device=e.device, dtype=e.dtype)
    m = m.scatter_reduce(0, idx, e, "amax", include_self=True)
    ex = torch.exp(e - m[row])
    s = torch.zeros_like(m).index_add_(0, row, ex)
    return ex / s[row]


def pyg_setup(case, dev, A, G, A_dev):
    _float32_only(case)
    torch = G.torch
    pygu = _pyg()
    free = dev.free_bytes() if hasattr(dev, "free_bytes") else None
    if free is not None:
        # the gathered messages are nnz x width (x heads) floats, two or three of them alive at once
        need = 3 * A.nnz * case.width * case.heads * 4
        if need > 0.8 * free:
            raise RuntimeError(f"skipped: gather/scatter needs ~{need / 1e9:.0f} GB, {free / 1e9:.0f} GB free")
    row, col, val, M = G.row, G.col, G.val, G.M

    def scatter(msg, reduce):
        if pygu is not None:
            return pygu.scatter(msg, row, 0, dim_size=M, reduce=reduce)
        if reduce == "sum":
            return torch.zeros((M,) + tuple(msg.shape[1:]), device=msg.device, dtype=msg.dtype).index_add_(0, row, msg)
        if reduce == "mean":
            out = torch.zeros((M,) + tuple(msg.shape[1:]), device=msg.device, dtype=msg.dtype).index_add_(0, row, msg)
            return out * G.inv_deg.view(-1, *([1] * (msg.dim() - 1)))
        idx = row.view(-1, *([1] * (msg.dim() - 1))).expand_as(msg)
        out = torch.zeros((M,) + tuple(msg.shape[1:]), device=msg.device, dtype=msg.dtype)
        return out.scatter_reduce_(0, idx, msg, "amax" if reduce == "max" else "amin", include_self=False)

    if case.op == "spmm":
        def spmm(i):
            msg = i["X"][col] if val is None else i["X"][col] * val[:, None]
            return scatter(msg, case.reduce)
        return spmm

    def edges(i):
        if case.sddmm_op == "dot":
            return (i["X"][row] * i["Y"][col]).sum(-1)
        return i["X"][row] + i["Y"][col]

    if case.op == "sddmm":
        return edges

    def fused(i):
        e = edges(i)
        if case.edge == "leaky_relu":
            e = torch.nn.functional.leaky_relu(e, 0.2)
        elif case.edge == "exp":
            e = torch.exp(e)
        elif case.edge == "softmax":
            e = _segment_softmax(torch, pygu, e, row, M)
        if val is not None:
            e = e * (val if e.dim() == 1 else val[:, None])
        Z = measure.z_of(case, i)
        w = e[:, None] if e.dim() == 1 else e[:, :, None]
        return scatter(w * Z[col], "sum")
    return fused


def pyg_description():
    return ("torch_geometric.utils.scatter/softmax (gather + scatter)" if _pyg() is not None
            else "torch gather + index_add_/scatter_reduce (PyG-style, torch_geometric not installed)")


# ---------------------------------------------------------------- our own unfused SDDMM + SpMM
def unfused_setup(case, dev, A, G, A_dev):
    """Our SDDMM, then our SpMM of Z weighted by its output (Z is Y for a Y=Z case): edge none."""
    if case.op != "fusedmm" or case.edge != "none" or case.heads != 1:
        raise Unsupported
    import gnnsparse as gs

    def run(i, A_dev):
        e = gs.sddmm(A_dev, i["X"], i["Y"], op=case.sddmm_op)
        if A_dev.val is not None:
            e = e * A_dev.val
        W = CSR(A_dev.rowptr, A_dev.col, e, A_dev.shape, validate=False)
        return gs.spmm(W, measure.z_of(case, i))
    return lambda i: run(i, A_dev)


# ---------------------------------------------------------------- our own op in float32
def fp32_setup(case, dev, A, G, A_dev):
    """The same op of ours on float32 inputs holding the same values (a bfloat16 case's baseline)."""
    if case.dtype == "float32":
        raise Unsupported
    import dataclasses

    c32 = dataclasses.replace(case, dtype="float32")
    fn = measure.ours(c32)
    return lambda i: measure.split(c32, fn(A_dev, i))[0]


REFERENCES = {
    # name: (description or a callable giving it, setup, inputs it takes, devices)
    # inputs: "host" NumPy, "torch" torch tensors on the device, "ours" what gnnsparse gets
    "scipy": ("scipy.sparse csr_matrix @ dense (single-threaded)", scipy_setup, "host", ("cpu",)),
    "torch.sparse": ("torch.sparse.mm / sampled_addmm on CSR", torch_sparse_setup, "torch", ("cpu", "cuda")),
    "pyg": (pyg_description, pyg_setup, "torch", ("cpu", "cuda")),
    "unfused": ("gnnsparse sddmm + spmm, not fused", unfused_setup, "ours", ("cpu", "cuda")),
    # "fp32": float32 copies of the inputs on the device, for cases of another dtype
    "ours_fp32": ("gnnsparse, the same op on float32 inputs of the same values", fp32_setup, "fp32",
                  ("cpu", "cuda")),
}


def describe(name, dev):
    d = REFERENCES[name][0]
    d = d() if callable(d) else d
    if name == "torch.sparse" and dev.kind == "cuda":
        d += " (cuSPARSE)"
    if REFERENCES[name][2] == "torch" and dev.kind == "cpu":
        d += "; the faster of torch's default threads and 1 thread"
    return d


def names_for(dev):
    return [n for n, (_, _, inputs, devs) in REFERENCES.items()
            if dev.kind in devs and (inputs != "torch" or dev.torch_device is not None)]
