"""gnnsparse.CSR: the sparse matrix every op takes.

A CSR holds rowptr (M+1), col (nnz) and optional val (nnz) in one framework: NumPy (host), torch or
CuPy on a CUDA device, or SYCL USM. A host CSR is uploaded once to whatever device an op's dense
inputs live on and kept there (cached per device and value dtype); a device CSR is used in place and
only with inputs on its own device.
"""
from __future__ import annotations

import numpy as np

from . import _arrays

INT32_MAX = 2**31 - 1


def _index_dtype_for(*sizes) -> np.dtype:
    return np.dtype(np.int64) if max((int(s) for s in sizes), default=0) > INT32_MAX else np.dtype(np.int32)


def _first_true(mask) -> int:
    return int(np.flatnonzero(_arrays.to_numpy(mask))[0])


def _astype(x, dtype_name: str):
    """x converted to dtype_name in its own framework (no copy when it already has it)."""
    if _arrays.dtype_name(x) == dtype_name:
        return x
    if _arrays.is_torch(x):
        import torch

        return x.to(getattr(torch, dtype_name))
    if hasattr(x, "astype"):
        return x.astype(dtype_name)
    if _arrays.kind(x) == "usm":
        from ._usm import USMArray, usm_queue

        return USMArray.from_numpy(_arrays.to_numpy(x).astype(dtype_name), usm_queue(x))
    raise TypeError(f"cannot convert {type(x).__name__} to {dtype_name}")


class CSR:
    """A sparse M x K matrix in compressed sparse row form.

    Parameters
    ----------
    rowptr, col : integer arrays (int32 or int64; both get the wider of the two types)
    val : optional array of nnz values; without it every stored entry counts as 1
    shape : (M, K); default M = len(rowptr) - 1, K = max(col) + 1
    validate : check the structure (vectorized, on the arrays' own device); pass False only for
        arrays you already know are valid

    Stored entries may repeat a column (multi-edges): every op treats them as separate edges.
    """

    def __init__(self, rowptr, col, val=None, shape=None, *, validate: bool = True):
        for name, a in (("rowptr", rowptr), ("col", col)):
            if _arrays.kind(a) == "numpy" and not isinstance(a, np.ndarray):
                a = np.asarray(_arrays.to_numpy(a))
            if len(_arrays.shape_of(a)) != 1:
                raise ValueError(f"CSR {name} must be 1-D, got shape {_arrays.shape_of(a)}")
            dt = _arrays.dtype_name(a)
            if dt not in ("int32", "int64"):
                if dt.startswith(("int", "uint")) and _arrays.kind(a) == "numpy":
                    pass  # converted below
                else:
                    raise TypeError(f"CSR {name} must hold int32 or int64 indices, got {dt}")
        kinds = {_arrays.kind(rowptr), _arrays.kind(col)} | ({_arrays.kind(val)} if val is not None else set())
        if len(kinds) != 1:
            raise ValueError(f"CSR arrays must live in one place, got {sorted(kinds)}")
        self.kind = kinds.pop()
        if self.kind == "numpy":
            rowptr = np.ascontiguousarray(_arrays.to_numpy(rowptr))
            col = np.ascontiguousarray(_arrays.to_numpy(col))
            val = None if val is None else np.ascontiguousarray(_arrays.to_numpy(val))
        nnz = _arrays.shape_of(col)[0]
        nrow = _arrays.shape_of(rowptr)[0] - 1
        if nrow < 0:
            raise ValueError("CSR rowptr must have at least one entry (M + 1 entries for M rows)")
        if shape is None:
            kmax = int(_arrays.to_numpy(col).max()) + 1 if nnz else 0
            shape = (nrow, kmax)
        M, K = (int(s) for s in shape)
        if M != nrow:
            raise ValueError(f"CSR rowptr has {nrow + 1} entries, shape {shape} needs {M + 1}")
        if M < 0 or K < 0:
            raise ValueError(f"CSR shape must be non-negative, got {shape}")
        # one index type for both arrays: the wider of the two, int64 when sizes need it
        wide = max(np.dtype(_arrays.dtype_name(rowptr)), np.dtype(_arrays.dtype_name(col)),
                   _index_dtype_for(M, K, nnz), key=lambda d: d.itemsize)
        if wide.itemsize == 4 and max(M, K, nnz) > INT32_MAX:
            wide = np.dtype(np.int64)
        rowptr, col = _astype(rowptr, wide.name), _astype(col, wide.name)
        if val is not None:
            if tuple(_arrays.shape_of(val)) != (nnz,):
                raise ValueError(f"CSR val must have shape ({nnz},) like col, got {_arrays.shape_of(val)}")
            if not _arrays.dtype_name(val).startswith(("float", "bfloat")):
                val = _astype(val, "float32")
        self.rowptr, self.col, self.val = rowptr, col, val
        self.shape = (M, K)
        self.nnz = int(nnz)
        self._cache: dict = {}
        self._transpose = None
        if validate:
            self.validate()

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_scipy(cls, S, *, validate: bool = True) -> "CSR":
        import scipy.sparse as sp

        S = sp.csr_matrix(S)
        val = None if S.data.size and np.all(S.data == 1) and S.data.dtype == bool else S.data
        return cls(S.indptr, S.indices, val, S.shape, validate=validate)

    @classmethod
    def from_edge_index(cls, edge_index, num_nodes=None, edge_weight=None, *, validate: bool = True) -> "CSR":
        """PyG's 2 x E edge_index (row 0 source, row 1 target) -> CSR with one row per target node:
        A[dst, src], so spmm(A, X) aggregates messages from sources at targets. Edges are sorted
        stably by target; duplicates are kept. `perm` (CSR position -> original edge id) is stored
        as `A.edge_perm` to reorder edge features."""
        if _arrays.kind(edge_index) == "numpy":
            ei = np.asarray(_arrays.to_numpy(edge_index))
            if ei.ndim != 2 or ei.shape[0] != 2:
                raise ValueError(f"edge_index must have shape (2, E), got {ei.shape}")
            if not np.issubdtype(ei.dtype, np.integer):
                raise TypeError(f"edge_index must be integer, got {ei.dtype}")
            src, dst = ei[0].astype(np.int64), ei[1].astype(np.int64)
            n = int(num_nodes) if num_nodes is not None else (int(ei.max()) + 1 if ei.size else 0)
            if ei.size and (ei.min() < 0 or ei.max() >= n):
                bad = int(np.flatnonzero((ei < 0).any(0) | (ei >= n).any(0))[0])
                raise ValueError(f"edge {bad} = ({ei[0, bad]}, {ei[1, bad]}) is outside [0, {n})")
            perm = np.argsort(dst, kind="stable")
            it = _index_dtype_for(n, ei.shape[1])
            rowptr = np.zeros(n + 1, np.int64)
            np.cumsum(np.bincount(dst, minlength=n), out=rowptr[1:])
            w = None if edge_weight is None else np.asarray(_arrays.to_numpy(edge_weight))[perm]
            A = cls(rowptr.astype(it), src[perm].astype(it), w, (n, n), validate=validate)
            A.edge_perm = perm
            return A
        if _arrays.is_torch(edge_index):
            import torch

            ei = edge_index
            if ei.dim() != 2 or ei.shape[0] != 2:
                raise ValueError(f"edge_index must have shape (2, E), got {tuple(ei.shape)}")
            n = int(num_nodes) if num_nodes is not None else (int(ei.max()) + 1 if ei.numel() else 0)
            if ei.numel() and bool(((ei < 0) | (ei >= n)).any()):
                bad = _first_true(((ei < 0) | (ei >= n)).any(0))
                raise ValueError(f"edge {bad} = ({int(ei[0, bad])}, {int(ei[1, bad])}) is outside [0, {n})")
            dst = ei[1]
            perm = torch.argsort(dst, stable=True)
            it = torch.int64 if _index_dtype_for(n, ei.shape[1]).itemsize == 8 else torch.int32
            rowptr = torch.zeros(n + 1, dtype=torch.int64, device=ei.device)
            rowptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
            w = None if edge_weight is None else edge_weight[perm]
            A = cls(rowptr.to(it), ei[0][perm].to(it), w, (n, n), validate=validate)
            A.edge_perm = perm
            return A
        # CuPy / USM: build on the host, then move to the input's device
        host = cls.from_edge_index(_arrays.to_numpy(edge_index), num_nodes,
                                   None if edge_weight is None else _arrays.to_numpy(edge_weight), validate=validate)
        return host.to_like(edge_index)

    def to_scipy(self):
        import scipy.sparse as sp

        val = np.ones(self.nnz, np.float32) if self.val is None else _arrays.to_numpy(self.val)
        if val.dtype.name == "bfloat16":
            val = val.astype(np.float32)
        return sp.csr_matrix((val, _arrays.to_numpy(self.col), _arrays.to_numpy(self.rowptr)), shape=self.shape)

    def to_like(self, like) -> "CSR":
        """This matrix with its arrays moved next to `like` (an array of any supported kind)."""
        from ._backends import backend_for

        b = backend_for(like)
        rowptr, col, val = self.device_arrays(b, like, None if self.val is None else _arrays.dtype_name(self.val))
        out = CSR(rowptr, col, val, self.shape, validate=False)
        if hasattr(self, "edge_perm"):
            out.edge_perm = self.edge_perm
        return out

    # ---------------------------------------------------------------- properties
    @property
    def index_dtype(self) -> str:
        return _arrays.dtype_name(self.rowptr)

    def degrees(self) -> np.ndarray:
        return np.diff(_arrays.to_numpy(self.rowptr).astype(np.int64))

    def __repr__(self):
        return (f"CSR(shape={self.shape}, nnz={self.nnz}, index={self.index_dtype}, "
                f"values={'none' if self.val is None else _arrays.dtype_name(self.val)}, on={self.kind})")

    # ---------------------------------------------------------------- checks
    def validate(self) -> "CSR":
        """Raise ValueError naming the first bad row or entry; vectorized on the arrays' own device."""
        M, K = self.shape
        rowptr, col = self.rowptr, self.col
        if self.kind == "usm":
            rowptr, col = _arrays.to_numpy(rowptr), _arrays.to_numpy(col)
        if int(rowptr[0]) != 0:
            raise ValueError(f"CSR rowptr[0] must be 0, got {int(rowptr[0])}")
        if M > 0:
            dec = rowptr[1:] < rowptr[:-1]
            if bool(dec.any()):
                r = _first_true(dec)
                raise ValueError(f"CSR rowptr decreases at row {r}: rowptr[{r}]={int(rowptr[r])} > "
                                 f"rowptr[{r + 1}]={int(rowptr[r + 1])}")
        if int(rowptr[-1]) != self.nnz:
            raise ValueError(f"CSR rowptr[-1] must equal nnz = len(col) = {self.nnz}, got {int(rowptr[-1])}")
        if self.nnz:
            bad = (col < 0) | (col >= K)
            if bool(bad.any()):
                k = _first_true(bad)
                r = int(np.searchsorted(_arrays.to_numpy(rowptr), k, side="right")) - 1
                raise ValueError(f"CSR col[{k}] = {int(col[k])} (row {r}) is outside [0, {K})")
        return self

    # ---------------------------------------------------------------- derived
    def transpose(self) -> "CSR":
        """A^T as CSR (K x M), cached; `perm` maps its entries to this matrix's entry ids, so
        A.T.val == A.val[A.T.perm] (what backward passes need for edge gradients)."""
        if self._transpose is None:
            rowptr = _arrays.to_numpy(self.rowptr).astype(np.int64)
            col = _arrays.to_numpy(self.col).astype(np.int64)
            M, K = self.shape
            rows = np.repeat(np.arange(M, dtype=np.int64), np.diff(rowptr))
            perm = np.argsort(col, kind="stable")
            t_rowptr = np.zeros(K + 1, np.int64)
            np.cumsum(np.bincount(col, minlength=K), out=t_rowptr[1:])
            it = np.dtype(self.index_dtype)
            val = None if self.val is None else _arrays.to_numpy(self.val)[perm]
            T = CSR(t_rowptr.astype(it), rows[perm].astype(it), val, (K, M), validate=False)
            T.perm = perm
            if self.kind != "numpy":
                T = T.to_like(self.rowptr)
                T.perm = perm
            T._transpose = self
            self._transpose = T
        return self._transpose

    @property
    def T(self) -> "CSR":
        return self.transpose()

    def device_arrays(self, backend, like, val_dtype):
        """(rowptr, col, val) on `like`'s device in its framework, val cast to val_dtype; cached."""
        key = (backend.name, backend.device_key(like), val_dtype)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if self.kind == "numpy":
            rowptr, col = backend.from_host(self.rowptr, like), backend.from_host(self.col, like)
            val = None
            if self.val is not None and val_dtype is not None:
                hv = _arrays.to_numpy(self.val)
                val = backend.from_host(hv.astype(val_dtype) if val_dtype != "bfloat16" else hv, like)
                val = _astype(val, val_dtype)
        else:
            if self.kind != _arrays.kind(like) or backend.device_key(self.rowptr) != backend.device_key(like):
                raise ValueError(f"the CSR lives on {backend.device_key(self.rowptr)} but the dense inputs on "
                                 f"{backend.device_key(like)}; move one of them (CSR.to_like)")
            rowptr, col = self.rowptr, self.col
            val = None if self.val is None or val_dtype is None else _astype(self.val, val_dtype)
        out = (rowptr, col, val)
        self._cache[key] = out
        return out
