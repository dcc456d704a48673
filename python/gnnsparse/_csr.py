"""gnnsparse.CSR: the sparse matrix every op takes.

A CSR holds rowptr (M+1), col (nnz) and optional val (nnz) in one framework: NumPy (host), torch or
CuPy on a CUDA device, or dpnp (SYCL USM). What an op needs on a device — the arrays uploaded there,
values cast to the features' dtype, the longest row — is worked out once per (device, value dtype)
and kept as a CsrView (gnnsparse._core), so a call costs one dictionary lookup.

Cached copies never go stale:
  - host (NumPy) arrays are the CSR's own and read-only: the constructor copies writeable inputs
    (copy=True), and `A.val[:] = 1` raises; assign `A.val = new` (or use `with_values`) instead;
  - torch tensors carry version counters: an in-place change (A.val.mul_(2), A.val[:] = 1) is seen
    at the next call and the device copies are rebuilt;
  - CuPy and dpnp arrays have neither: nothing derived from their values is cached (a value-dtype
    cast is redone per call), only the structure, which must not be modified in place.
"""
from __future__ import annotations

import operator

import numpy as np

from . import _arrays
from ._graph import GraphMethods

INT32_MAX = 2**31 - 1
# From this density (nnz / (M K)) on, a CSR checks once whether its rows' columns are sorted and
# tells the device views: the CUDA dense-ish SpMM kernels need it (their policy takes them from
# 10-25 % density on, cuda/policy.cuh: TcTuning, PanelTuning; GNNSPARSE_CUDA_SPMM=tc / panel forces
# them on any matrix this check covers), and so does the tensor-core SDDMM dot (SddmmTcTuning;
# GNNSPARSE_CUDA_SDDMM=tc), and graphs never pay for the check.
SORT_CHECK_DENSITY = 0.01


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
    raise TypeError(f"cannot convert {type(x).__name__} to {dtype_name}")


def _copy(x):
    if isinstance(x, np.ndarray):
        return x.copy()
    if _arrays.is_torch(x):
        return x.clone()
    return x.copy()


def _readonly(a: np.ndarray) -> np.ndarray:
    a = a.view()
    a.flags.writeable = False
    return a


def _val_dtype_for(feature_dtype: str) -> str:
    """Edge values take the features' dtype, float32 for half-precision features (ops.hpp)."""
    return "float32" if feature_dtype in ("float16", "bfloat16") else feature_dtype


class CSR(GraphMethods):
    """A sparse M x K matrix in compressed sparse row form.

    Parameters
    ----------
    rowptr, col : integer arrays (int32 or int64; both get the wider of the two types)
    val : optional array of nnz values; without it every stored entry counts as 1
    shape : (M, K); default M = len(rowptr) - 1, K = max(col) + 1
    validate : check the structure (vectorized, on the arrays' own device); pass False only for
        arrays you already know are valid: with invalid arrays the kernels read out of bounds
        (a crash or a wrong result)
    copy : NumPy / CuPy / dpnp inputs are copied so that later writes to the caller's arrays
        cannot change the matrix (torch tensors are not copied: their version counters make
        in-place changes visible); False shares them — then call `invalidate()` after changing
        them in place

    Stored entries may repeat a column (multi-edges): every op treats them as separate edges.
    """

    def __init__(self, rowptr, col, val=None, shape=None, *, validate: bool = True, copy: bool = True):
        arrays = []
        for name, a in (("rowptr", rowptr), ("col", col)):
            if _arrays.kind(a) == "numpy" and not isinstance(a, np.ndarray):
                a = np.asarray(_arrays.to_numpy(a))
            if len(_arrays.shape_of(a)) != 1:
                raise ValueError(f"CSR {name} must be 1-D, got shape {_arrays.shape_of(a)}")
            dt = _arrays.dtype_name(a)
            if dt not in ("int32", "int64") and not (dt.startswith(("int", "uint")) and isinstance(a, np.ndarray)):
                raise TypeError(f"CSR {name} must hold int32 or int64 indices, got {dt}")
            arrays.append(a)
        rowptr, col = arrays
        kinds = {_arrays.kind(rowptr), _arrays.kind(col)} | ({_arrays.kind(val)} if val is not None else set())
        if len(kinds) != 1:
            raise ValueError(f"CSR arrays must live in one place, got {sorted(kinds)}")
        self.kind = kinds.pop()
        host = self.kind == "numpy"
        if host:  # torch CPU tensors and array-likes become NumPy arrays
            owned = [isinstance(a, np.ndarray) and not a.flags.writeable for a in (rowptr, col, val)]
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
            raise ValueError(f"CSR rowptr has {nrow + 1} entries, shape {tuple(shape)} needs {M + 1}")
        if M < 0 or K < 0:
            raise ValueError(f"CSR shape must be non-negative, got {tuple(shape)}")
        # one index type for both arrays: the wider of the two, int64 when sizes need it
        wide = max(np.dtype(_arrays.dtype_name(rowptr)), np.dtype(_arrays.dtype_name(col)),
                   _index_dtype_for(M, K, nnz), key=lambda d: d.itemsize)
        if wide.itemsize == 4 and max(M, K, nnz) > INT32_MAX:
            wide = np.dtype(np.int64)
        converted = [_astype(rowptr, wide.name), _astype(col, wide.name)]
        if val is not None:
            if tuple(_arrays.shape_of(val)) != (nnz,):
                raise ValueError(f"CSR val must have shape ({nnz},) like col, got {_arrays.shape_of(val)}")
            converted.append(val if _arrays.dtype_name(val).startswith(("float", "bfloat")) else _astype(val, "float32"))
        else:
            converted.append(None)
        if copy and not _arrays.is_torch(converted[0]):
            originals = (rowptr, col, val)
            converted = [None if c is None else (_copy(c) if c is o and not (host and own) else c)
                         for c, o, own in zip(converted, originals, owned if host else (False,) * 3)]
        if host:
            converted = [None if c is None else _readonly(c) for c in converted]
        self._rowptr, self._col, self._val = converted
        self.shape = (M, K)
        self.nnz = int(nnz)
        self._torch = _arrays.is_torch(self._rowptr)
        self._reset()
        self._derived: dict = {}
        if validate:
            self.validate()

    def _reset(self):
        """Forget what depends on the values: device views and the transpose (which copies them)."""
        self._views: dict = {}
        self._transpose = None
        self._transpose_stamp = None
        self._max_degree = None
        self._sorted_cols = None

    # ---------------------------------------------------------------- arrays
    @property
    def rowptr(self):
        """Row pointers, M + 1 entries: row i's entries are rowptr[i]:rowptr[i+1] (read-only for
        NumPy)."""
        return self._rowptr

    @property
    def col(self):
        """Column index of each stored entry, nnz entries (read-only for NumPy)."""
        return self._col

    @property
    def val(self):
        """Value of each stored entry (nnz), or None: every entry counts as 1. Assign a new array
        (or use with_values) to change them; a NumPy CSR's values are read-only."""
        return self._val

    @val.setter
    def val(self, new):
        """Replace the values (same place, nnz entries); everything derived from them is rebuilt."""
        if new is not None:
            if _arrays.kind(new) != self.kind:
                raise ValueError(f"new values live on {_arrays.kind(new)}, the CSR on {self.kind}")
            if tuple(_arrays.shape_of(new)) != (self.nnz,):
                raise ValueError(f"CSR val must have shape ({self.nnz},), got {_arrays.shape_of(new)}")
            if self.kind == "numpy":
                new = _readonly(np.array(_arrays.to_numpy(new)))
        self._val = new
        self._reset()  # the structure and what is derived from it stay

    def with_values(self, val) -> "CSR":
        """The same structure with other values (the structure's arrays are shared, not copied)."""
        out = CSR.__new__(CSR)
        out.__dict__.update(self.__dict__)
        out._reset()
        out.val = val
        out._max_degree = self._max_degree  # structural: kept (no device reduction per call)
        out._sorted_cols = self._sorted_cols
        return out

    def invalidate(self):
        """Forget every device copy and derived array (call after changing shared arrays in place)."""
        self._reset()
        self._derived = {}

    def derived(self, key, build):
        """A value derived from this matrix's structure by a layer above the core (the torch layer's
        graph tensors, gnnsparse.quant's incidence matrix), built by build() on first use and kept
        until invalidate() or, for torch arrays, an in-place change of rowptr or col (their version
        counters); copies made by with_values() share it (same structure)."""
        stamp = (self._rowptr._version, self._col._version) if self._torch else None
        hit = self._derived.get(key)
        if hit is None or hit[0] != stamp:
            hit = self._derived[key] = (stamp, build())
        return hit[1]

    def _dense_copy(self, key, build):
        """A dense copy of this matrix made by build() (gnnsparse._dense), kept like the device views:
        until the values change (torch: their version counter), `val` is assigned, or invalidate()."""
        stamp = self._stamp() if self._torch else None
        hit = self._views.get(key)
        if hit is not None and hit[1] == stamp:
            return hit[0]
        D = build()
        self._views[key] = (D, stamp)
        return D

    def drop_dense(self):
        """Free the dense copies (CSR.dense_nbytes); the next dense-ish call makes its copy again."""
        for k in [k for k in list(self._views) if k[0] == "dense"]:
            self._views.pop(k, None)

    @property
    def dense_nbytes(self) -> int:
        """Device memory held by dense copies of this matrix: the dense-ish route of SpMM on a GPU
        keeps one per device and precision (M K 4 bytes, 2 for bf16; see gnnsparse._dense). 0 if none."""
        return sum(v[0].numel() * v[0].element_size() for k, v in list(self._views.items()) if k[0] == "dense")

    def _stamp(self):
        """Version counters of torch arrays (None for other kinds)."""
        if not self._torch:
            return None
        return (self._rowptr._version, self._col._version, None if self._val is None else self._val._version)

    def _structure_stamp(self):
        """Version counters of the torch index arrays (None for other kinds): what the structural
        facts (max_degree, sorted_cols) depend on; new values do not change them."""
        if not self._torch:
            return None
        return (self._rowptr._version, self._col._version)

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_scipy(cls, S, *, validate: bool = True) -> "CSR":
        """Any scipy.sparse matrix or array (converted to CSR first) -> CSR of the same matrix, with
        its values (a boolean all-True pattern: without values). The arrays are copied."""
        import scipy.sparse as sp

        S = sp.csr_matrix(S)
        val = None if S.data.size and np.all(S.data == 1) and S.data.dtype == bool else S.data
        return cls(S.indptr, S.indices, val, S.shape, validate=validate)

    @classmethod
    def from_edge_index(cls, edge_index, num_nodes=None, edge_weight=None, *, validate: bool = True) -> "CSR":
        """PyG's 2 x E edge_index (row 0 source, row 1 target) -> CSR with one row per target node:
        A[dst, src], so spmm(A, X) aggregates messages from sources at targets. Edges are sorted
        stably by target; duplicates are kept. `perm` (CSR position -> original edge id) is stored
        as `A.edge_perm` to reorder edge features. num_nodes: a non-negative integer larger than
        every node id (default: the largest id + 1)."""
        if num_nodes is not None:
            try:
                num_nodes = operator.index(num_nodes)
            except TypeError:
                raise TypeError(f"num_nodes must be an integer, got {type(num_nodes).__name__}") from None
            if num_nodes < 0:
                raise ValueError(f"num_nodes must be non-negative, got {num_nodes}")
        if _arrays.kind(edge_index) == "numpy" and not _arrays.is_torch(edge_index):
            ei = np.asarray(_arrays.to_numpy(edge_index))
            if ei.ndim != 2 or ei.shape[0] != 2:
                raise ValueError(f"edge_index must have shape (2, E), got {ei.shape}")
            if not np.issubdtype(ei.dtype, np.integer):
                raise TypeError(f"edge_index must be integer, got {ei.dtype}")
            src, dst = ei[0].astype(np.int64), ei[1].astype(np.int64)
            n = int(num_nodes) if num_nodes is not None else (int(ei.max()) + 1 if ei.size else 0)
            if ei.size and (ei.min() < 0 or ei.max() >= n):
                bad = int(np.flatnonzero((ei < 0).any(0) | (ei >= n).any(0))[0])
                raise ValueError(f"edge {bad} = ({ei[0, bad]}, {ei[1, bad]}) is outside [0, {n})"
                                 + ("" if num_nodes is None else f" (num_nodes={n})"))
            perm = np.argsort(dst, kind="stable")
            it = _index_dtype_for(n, ei.shape[1])
            rowptr = np.zeros(n + 1, np.int64)
            np.cumsum(np.bincount(dst, minlength=n), out=rowptr[1:])
            w = None if edge_weight is None else np.asarray(_arrays.to_numpy(edge_weight))[perm]
            A = cls(rowptr.astype(it), src[perm].astype(it), w, (n, n), validate=validate, copy=False)
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
                raise ValueError(f"edge {bad} = ({int(ei[0, bad])}, {int(ei[1, bad])}) is outside [0, {n})"
                                 + ("" if num_nodes is None else f" (num_nodes={n})"))
            dst = ei[1]
            perm = torch.argsort(dst, stable=True)
            it = torch.int64 if _index_dtype_for(n, ei.shape[1]).itemsize == 8 else torch.int32
            rowptr = torch.zeros(n + 1, dtype=torch.int64, device=ei.device)
            rowptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
            w = None if edge_weight is None else edge_weight[perm]
            A = cls(rowptr.to(it), ei[0][perm].to(it), w, (n, n), validate=validate, copy=False)
            A.edge_perm = perm
            return A
        # CuPy / USM: build on the host, then move to the input's device
        host = cls.from_edge_index(_arrays.to_numpy(edge_index), num_nodes,
                                   None if edge_weight is None else _arrays.to_numpy(edge_weight), validate=validate)
        return host.to_like(edge_index)

    def to_scipy(self):
        """This matrix as a scipy.sparse.csr_matrix on the host (values 1 where there are none;
        bfloat16 values as float32)."""
        import scipy.sparse as sp

        val = np.ones(self.nnz, np.float32) if self.val is None else _arrays.to_numpy(self.val)
        if val.dtype.name == "bfloat16":
            val = val.astype(np.float32)
        return sp.csr_matrix((val, _arrays.to_numpy(self.col), _arrays.to_numpy(self.rowptr)), shape=self.shape)

    def to_like(self, like) -> "CSR":
        """This matrix with its arrays moved next to `like` (an array of any supported kind)."""
        from ._backends import backend_for

        b = backend_for(like)
        place = b.place(like)
        rowptr, col, val = self._arrays_at(b, place, like, None if self.val is None else _arrays.dtype_name(self.val))
        out = CSR(rowptr, col, val, self.shape, validate=False, copy=False)
        if hasattr(self, "edge_perm"):
            out.edge_perm = self.edge_perm
        return out

    # ---------------------------------------------------------------- properties
    @property
    def index_dtype(self) -> str:
        """"int32" or "int64": the type of rowptr and col."""
        return _arrays.dtype_name(self.rowptr)

    def degrees(self) -> np.ndarray:
        """Stored entries per row (M, int64, NumPy): in-degrees for a graph from from_edge_index."""
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
        stamp = self._stamp()
        if self._transpose is not None and self._transpose_stamp == stamp:
            return self._transpose
        rowptr = _arrays.to_numpy(self.rowptr).astype(np.int64)
        col = _arrays.to_numpy(self.col).astype(np.int64)
        M, K = self.shape
        rows = np.repeat(np.arange(M, dtype=np.int64), np.diff(rowptr))
        perm = np.argsort(col, kind="stable")
        t_rowptr = np.zeros(K + 1, np.int64)
        np.cumsum(np.bincount(col, minlength=K), out=t_rowptr[1:])
        it = np.dtype(self.index_dtype)
        val = None if self.val is None else _arrays.to_numpy(self.val)[perm]
        T = CSR(t_rowptr.astype(it), rows[perm].astype(it), val, (K, M), validate=False, copy=False)
        if self.kind != "numpy":
            T = T.to_like(self.rowptr)
        T.perm = perm
        T._transpose, T._transpose_stamp = self, T._stamp()
        # kept unless it copies values that may change unseen (CuPy / dpnp values)
        if self.kind == "numpy" or self._torch or self.val is None:
            self._transpose, self._transpose_stamp = T, stamp
        return T

    @property
    def T(self) -> "CSR":
        """The transpose (K x M), cached: see transpose()."""
        return self.transpose()

    def max_degree(self) -> int:
        """The longest row (number of stored entries), computed once."""
        if self._max_degree is None or self._torch:
            stamp = self._structure_stamp()
            if self._max_degree is None or self._max_degree[1] != stamp:
                M = self.shape[0]
                if M == 0:
                    md = 0
                elif self.kind == "numpy":
                    md = int(np.diff(self.rowptr).max())
                elif self._torch:
                    md = int((self.rowptr[1:] - self.rowptr[:-1]).max())
                else:
                    md = int(np.diff(_arrays.to_numpy(self.rowptr)).max())
                self._max_degree = (md, stamp)
        return self._max_degree[0]

    def sorted_cols(self) -> bool:
        """Whether every row's columns are non-decreasing (repeated columns allowed), computed once
        (vectorized, on the arrays' own device)."""
        if self._sorted_cols is None or self._torch:
            stamp = self._structure_stamp()
            if self._sorted_cols is None or self._sorted_cols[1] != stamp:
                self._sorted_cols = (self._rows_sorted(), stamp)
        return self._sorted_cols[0]

    def _rows_sorted(self) -> bool:
        nnz = self.nnz
        if nnz < 2:
            return True
        if self._torch:
            col, rp = self.col, self.rowptr
            down = col[1:] < col[:-1]  # entry p + 1 below entry p
            starts = rp[1:-1]
            starts = starts[(starts > 0) & (starts < nnz)]
            down[starts - 1] = False  # across a row boundary: allowed
            return not bool(down.any())
        col, rp = _arrays.to_numpy(self.col), _arrays.to_numpy(self.rowptr)
        down = col[1:] < col[:-1]
        starts = rp[1:-1]
        down[starts[(starts > 0) & (starts < nnz)] - 1] = False
        return not bool(down.any())

    # ---------------------------------------------------------------- device views
    def _arrays_at(self, b, place, like, val_dtype):
        """(rowptr, col, val) at `place` in the framework of `like`, val cast to val_dtype."""
        if self.kind == "numpy":
            rowptr, col = b.upload(self.rowptr, place, like), b.upload(self.col, place, like)
            val = None
            if self.val is not None and val_dtype is not None:
                hv = _arrays.to_numpy(self.val)
                val = _astype(b.upload(hv if hv.dtype.name == val_dtype or val_dtype == "bfloat16" else
                                       hv.astype(val_dtype), place, like), val_dtype)
            return rowptr, col, val
        from ._backends import backend_for

        own = backend_for(self.rowptr)
        mine = own.place(self.rowptr)
        if own is not b or mine != place:
            why = place.explain(mine) if own is b and hasattr(place, "explain") else ""
            raise ValueError(f"the CSR lives on {mine} but the dense inputs on {place}{why}; move one of them "
                             "(CSR.to_like(x) copies the matrix next to x)")
        val = None if self.val is None or val_dtype is None else _astype(self.val, val_dtype)
        return self.rowptr, self.col, val

    def _view(self, b, place, like, val_dtype):
        """The _core.CsrView of this matrix at `place`, built once per (place, value dtype) and kept
        while the arrays are unchanged (see the module docstring)."""
        key = (place, val_dtype)
        hit = self._views.get(key)
        stamp = self._stamp() if self._torch else None
        if hit is not None and hit[1] == stamp:
            return hit[0]
        rowptr, col, val = self._arrays_at(b, place, like, val_dtype)
        view = b.view(rowptr, col, val, self.shape[0], self.shape[1], self.nnz, self.max_degree())
        view.keep = (rowptr, col, val)  # the view holds raw addresses: it keeps their arrays alive
        M, K = self.shape
        if self.nnz and self.nnz >= SORT_CHECK_DENSITY * M * K:
            view.sorted_cols = 1 if self.sorted_cols() else 0
        # CuPy / dpnp values cast to another dtype are not kept: their source may change unseen
        if self.kind == "numpy" or self._torch or val is self.val:
            # two threads may build the view at once: both keep working with their own (alive
            # through .keep); the first one stored is the one the cache hands out
            hit = self._views.setdefault(key, (view, stamp))
            if hit[1] == stamp:
                return hit[0]
            self._views[key] = (view, stamp)
        else:
            view.transient = True  # built for this call: a backend may have to wait before freeing
        return view
