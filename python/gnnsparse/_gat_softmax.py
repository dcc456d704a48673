"""GAT's edge softmax in pieces, for the quantized GAT attention's backward without a whole per-edge
alpha (contract: include/gnnsparse/gat_softmax.hpp; CUDA kernels: cuda/gat_softmax.cu).

Per head h, entry k of row i of A with column c = col[k], fd (M, H) and fs (K, H) float32:

    e_k = fd[i, h] + fs[c, h];   l_k = e_k if e_k > 0 else slope * e_k
    m[i, h] = max_row l_k;   inv[i, h] = 1 / sum_row exp(l_k - m[i, h]);   alpha_k = exp(l_k - m) * inv

    gat_softmax_stats(rowptr, col, fd, fs, slope)                    -> (m, inv), (M, H) each
    gat_softmax_weights_t(t_rowptr, t_col, fd, fs, m, inv, slope)    -> aT (nnz, H): alpha in A^T's order
    gat_softmax_grad_(rowptr, col, fd, fs, m, inv, slope, t)         -> t, overwritten with dS:
        p = alpha t;  r = sum_row p;  t <- (p - alpha r) * (1 if e > 0 else slope)

The structure is a gnnsparse.torch.graph.GraphTensors' (rowptr, col) and (t_rowptr, t_col): int32
or int64, one dtype per call. An empty row gets m = 0 and inv = 0. m and inv come back as the two
halves of one (M, 2, H) buffer (m = buf[:, 0], inv = buf[:, 1]: row stride 2H, not contiguous), so
that gat_softmax_weights_t gathers a row's pair as one segment; the other ops take any (M, H) views
with unit stride along the heads (contiguous ones too). CUDA tensors run the kernels on the current
stream (no host synchronization); CPU tensors run the plain-torch float32 version here (for tests
and CPU training; its row sums are accumulated in float64). Deterministic on both: the same inputs
give the same bits.

Long rows: the kernels split a row of at least LONG_ROW entries into segments of 4096 entries, a
block each (hubs of millions of entries spread over the GPU), from a list of those rows
(`long_rows=`, from gat_long_rows). Pass the exact list cached per graph (gat_long_rows(rowptr):
one host synchronization, once): without it each call builds a padded one through
torch.nonzero_static (no synchronization, but min(M, nnz / 1024) entries for the kernels to scan:
+0.3 ms a call at 121M edges, H100).

This module imports without the compiled extensions: the CUDA backend is loaded on the first call
with CUDA tensors.
"""
from __future__ import annotations

import torch

LONG_ROW = 1024  # include/gnnsparse/gat_softmax.hpp kGatLongRow (checked against the module's GAT_LONG_ROW)

__all__ = ["LONG_ROW", "gat_long_rows", "gat_softmax_stats", "gat_softmax_weights_t", "gat_softmax_grad_"]

_INDEX = (torch.int32, torch.int64)


# ---------------------------------------------------------------- argument checks
def _tensor(name, x):
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"gat_softmax: {name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def _index(name, x, n=None, dtype=None):
    _tensor(name, x)
    if x.dtype not in _INDEX:
        raise ValueError(f"gat_softmax: {name} must be int32 or int64, got {x.dtype}")
    if dtype is not None and x.dtype != dtype:
        raise ValueError(f"gat_softmax: {name} must have the index dtype of the row pointers ({dtype}), got {x.dtype}")
    if x.dim() != 1:
        raise ValueError(f"gat_softmax: {name} must be 1-D, got shape {tuple(x.shape)}")
    if n is not None and x.shape[0] != n:
        raise ValueError(f"gat_softmax: {name} must have {n} entries, got {x.shape[0]}")
    if not x.is_contiguous():
        raise ValueError(f"gat_softmax: {name} must be contiguous")
    return x


def _dense(name, x, rows=None, H=None, contiguous=True):
    """An (rows, H) float32 tensor; contiguous=False: any view with unit stride along the heads and
    rows at least H apart (gat_softmax_stats' m and inv)."""
    _tensor(name, x)
    if x.dtype != torch.float32:
        raise ValueError(f"gat_softmax: {name} must be float32, got {x.dtype}")
    if x.dim() != 2:
        raise ValueError(f"gat_softmax: {name} must be 2-D (rows, heads), got shape {tuple(x.shape)}")
    if (rows is not None and x.shape[0] != rows) or (H is not None and x.shape[1] != H):
        want = (rows if rows is not None else x.shape[0], H if H is not None else x.shape[1])
        raise ValueError(f"gat_softmax: {name} must have shape {want}, got {tuple(x.shape)}")
    if contiguous and not x.is_contiguous():
        raise ValueError(f"gat_softmax: {name} must be contiguous")
    rows, H = x.shape
    if not contiguous and ((H > 1 and x.stride(1) != 1) or (rows > 1 and x.stride(0) < H)):
        raise ValueError(f"gat_softmax: {name} must have unit stride along the heads and rows at least H apart "
                         f"(strides {tuple(x.stride())})")
    return x


def _same_device(**xs):
    devs = {k: v.device for k, v in xs.items() if v is not None}
    first = next(iter(devs.values()))
    for k, d in devs.items():
        if d != first:
            raise ValueError(f"gat_softmax: every tensor must be on one device; {k} is on {d}, "
                             f"{next(iter(devs))} on {first}")
    return first


def _check_rows(rowptr, col, fd, fs, long_rows):
    """(M, K, nnz, H) of A = (rowptr, col) with fd (M, H), fs (K, H)."""
    _dense("fd", fd)
    M, H = fd.shape
    _index("rowptr", rowptr, M + 1)
    _index("col", col, dtype=rowptr.dtype)
    _dense("fs", fs, H=H)
    if long_rows is not None:
        _index("long_rows", long_rows, dtype=rowptr.dtype)
    return M, fs.shape[0], col.shape[0], H


# ---------------------------------------------------------------- long rows
def gat_long_rows(rowptr: torch.Tensor, nnz: int | None = None) -> torch.Tensor:
    """The rows of at least LONG_ROW entries (1-D, rowptr's dtype and device), for `long_rows=`.

    Without `nnz`: exactly those rows (torch.nonzero: one host synchronization on CUDA). With `nnz`
    (= rowptr[-1], known on the host as col.shape[0]): min(M, nnz // LONG_ROW) entries -- the long
    rows, then -1 -- from torch.nonzero_static, no synchronization (the kernels skip the -1s; on a
    torch without nonzero_static, the exact list). Cache it with the graph: it depends on the
    structure only."""
    _index("rowptr", rowptr)
    M = rowptr.shape[0] - 1
    if M <= 0:
        return rowptr.new_empty((0,))
    long = (rowptr[1:] - rowptr[:-1]) >= LONG_ROW
    if nnz is not None and hasattr(torch, "nonzero_static"):
        cap = min(M, int(nnz) // LONG_ROW)
        return torch.nonzero_static(long, size=cap, fill_value=-1).reshape(-1).to(rowptr.dtype)
    return torch.nonzero(long).reshape(-1).to(rowptr.dtype)


# ---------------------------------------------------------------- the three ops
def gat_softmax_stats(rowptr: torch.Tensor, col: torch.Tensor, fd: torch.Tensor, fs: torch.Tensor, slope: float,
                      *, long_rows: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(m, inv), each (M, H) float32: each row's largest logit and 1 / its sum of exp(l - m), for
    A = (rowptr, col) (M x K), fd (M, H), fs (K, H). Empty rows: m = 0, inv = 0. The two are the
    halves of one (M, 2, H) buffer (see the module docstring). `long_rows`: see gat_long_rows (CUDA
    only; ignored on the CPU)."""
    M, K, nnz, H = _check_rows(rowptr, col, fd, fs, long_rows)
    dev = _same_device(rowptr=rowptr, col=col, fd=fd, fs=fs, long_rows=long_rows)
    slope = float(slope)
    if dev.type == "cuda":
        b = _backend()
        if long_rows is None:
            long_rows = gat_long_rows(rowptr, nnz)
        return b.gat_softmax_stats(_view(b, rowptr, col, M, K, nnz), long_rows, fd, fs, H, slope)
    if dev.type != "cpu":
        raise ValueError(f"gat_softmax: tensors on {dev} are not supported (CPU or CUDA)")
    rows = _rows_of(rowptr, nnz)
    offsets = rowptr.long()
    empty = (offsets[1:] == offsets[:-1]).unsqueeze(1)
    logit = _leaky(fd[rows].add_(fs[col.long()]), slope)
    m = torch.segment_reduce(logit, "max", offsets=offsets, axis=0).masked_fill_(empty, 0.0)
    s = _row_sums(logit.sub_(m[rows]).exp_(), offsets)
    inv = torch.where(empty, torch.zeros((), dtype=s.dtype), s.reciprocal())
    buf = torch.stack([m, inv], 1)  # the CUDA path's layout
    return buf[:, 0], buf[:, 1]


def gat_softmax_weights_t(t_rowptr: torch.Tensor, t_col: torch.Tensor, fd: torch.Tensor, fs: torch.Tensor,
                          m: torch.Tensor, inv: torch.Tensor, slope: float) -> torch.Tensor:
    """aT (nnz, H) float32: aT[j, h] = alpha of A's entry t_perm[j], from the transpose's structure
    (t_rowptr (K + 1), t_col (nnz): the original row of each transposed entry) and gat_softmax_stats'
    (m, inv) (M, H); fd (M, H), fs (K, H)."""
    _dense("fd", fd)
    M, H = fd.shape
    _dense("fs", fs, H=H)
    K = fs.shape[0]
    _index("t_rowptr", t_rowptr, K + 1)
    _index("t_col", t_col, dtype=t_rowptr.dtype)
    _dense("m", m, M, H, contiguous=False)
    _dense("inv", inv, M, H, contiguous=False)
    nnz = t_col.shape[0]
    dev = _same_device(t_rowptr=t_rowptr, t_col=t_col, fd=fd, fs=fs, m=m, inv=inv)
    slope = float(slope)
    if dev.type == "cuda":
        b = _backend()
        return b.gat_softmax_weights_t(_view(b, t_rowptr, t_col, K, M, nnz), fd, fs, m, inv, H, slope)
    if dev.type != "cpu":
        raise ValueError(f"gat_softmax: tensors on {dev} are not supported (CPU or CUDA)")
    i = t_col.long()
    c = _rows_of(t_rowptr, nnz)
    return _leaky(fd[i].add_(fs[c]), slope).sub_(m[i]).exp_().mul_(inv[i])


def gat_softmax_grad_(rowptr: torch.Tensor, col: torch.Tensor, fd: torch.Tensor, fs: torch.Tensor, m: torch.Tensor,
                      inv: torch.Tensor, slope: float, t: torch.Tensor, *,
                      long_rows: torch.Tensor | None = None) -> torch.Tensor:
    """t (nnz, H) float32 in CSR order holds dP; overwritten in place with dS = (p - alpha r) times
    leaky_relu's slope (1 where e > 0, else `slope`), p = alpha t, r = p's row sums. Returns t.
    (m, inv) from gat_softmax_stats; `long_rows`: see gat_long_rows (CUDA only)."""
    M, K, nnz, H = _check_rows(rowptr, col, fd, fs, long_rows)
    _dense("m", m, M, H, contiguous=False)
    _dense("inv", inv, M, H, contiguous=False)
    _dense("t", t, nnz, H)
    dev = _same_device(rowptr=rowptr, col=col, fd=fd, fs=fs, m=m, inv=inv, t=t, long_rows=long_rows)
    slope = float(slope)
    if dev.type == "cuda":
        b = _backend()
        if long_rows is None:
            long_rows = gat_long_rows(rowptr, nnz)
        return b.gat_softmax_grad_(_view(b, rowptr, col, M, K, nnz), long_rows, fd, fs, m, inv, t, H, slope)
    if dev.type != "cpu":
        raise ValueError(f"gat_softmax: tensors on {dev} are not supported (CPU or CUDA)")
    rows = _rows_of(rowptr, nnz)
    e = fd[rows].add_(fs[col.long()])
    alpha = _leaky(e.clone(), slope).sub_(m[rows]).exp_().mul_(inv[rows])
    p = alpha * t
    r = _row_sums(p, rowptr.long())
    d = p.sub_(alpha.mul_(r[rows]))
    return t.copy_(torch.where(e > 0, d, d * slope))


# ---------------------------------------------------------------- helpers
def _leaky(e: torch.Tensor, slope: float) -> torch.Tensor:
    """leaky_relu in place (slope * e rounded to float32 alone, as the kernels)."""
    return torch.where(e > 0, e, e * slope, out=e)


def _row_sums(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """Each row's sum of x (float32), accumulated in float64: segment_reduce adds a row's terms in
    sequence, and a float32 sequence of ~1000 equal terms (slope 0: every negative logit is 0)
    drifted by 3e-5 where the kernels' split rows stay near 1e-6."""
    return torch.segment_reduce(x.double(), "sum", offsets=offsets, axis=0).float()


def _rows_of(rowptr: torch.Tensor, nnz: int) -> torch.Tensor:
    """The row of every entry (int64, nnz)."""
    return torch.repeat_interleave(rowptr.long().diff(), output_size=nnz)


_CHECKED = []


def _backend():
    """The CUDA backend (loaded here, so the module imports without the compiled extensions)."""
    from ._backends import backend_for_kind

    b = backend_for_kind("cuda")  # BackendUnavailable when not built / no device
    if not _CHECKED:
        if b.gat_long_row() != LONG_ROW:
            raise RuntimeError(f"gnnsparse._cuda's GAT_LONG_ROW ({b.gat_long_row()}) differs from "
                               f"_gat_softmax.LONG_ROW ({LONG_ROW}): a stale build")
        _CHECKED.append(True)
    return b


def _view(b, rowptr, col, M, K, nnz):
    return b.view(rowptr, col, None, M, K, nnz, -1)
