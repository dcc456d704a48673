"""Loaders for users' own graphs: Matrix Market, SNAP edge lists, NumPy .npz (edge_index).

Every loader returns a gnnsparse.CSR and raises ValueError naming the file (and the line or the
key) when the file is malformed. Graph files (SNAP, npz) follow PyG's convention: an edge (u, v)
is a message from u to v, stored as A[v, u]. A Matrix Market file is read as the matrix it holds.
"""
from __future__ import annotations

import gzip
import os
import warnings

import numpy as np

from .._csr import CSR

__all__ = ["load_mtx", "load_snap", "load_npz", "load_graph"]


def _open_text(path):
    path = os.fspath(path)
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path, "r")


def load_mtx(path) -> CSR:
    """A Matrix Market coordinate file (.mtx, .mtx.gz) via scipy.io.mmread. Pattern matrices give
    an unweighted CSR; symmetric ones are expanded by scipy."""
    import scipy.io
    import scipy.sparse as sp

    path = os.fspath(path)
    try:
        with warnings.catch_warnings():
            # scipy's notices about its own API (newer releases announce changes of mmread's
            # defaults): the result is converted to a CSR below either way
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            info = scipy.io.mminfo(path)
            M = scipy.io.mmread(path)
    except (ValueError, OSError, IndexError, TypeError, EOFError, OverflowError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        line = _mtx_bad_line(path)
        where = f"{path}:{line}" if line else path
        raise ValueError(f"{where}: not a valid Matrix Market file ({type(e).__name__}: {e})") from e
    if not sp.issparse(M):
        raise ValueError(f"{path}: holds a dense Matrix Market 'array', not a sparse 'coordinate' matrix")
    S = sp.csr_matrix(M)
    S.sort_indices()
    field = info[4]
    if field == "pattern":
        return CSR(S.indptr, S.indices, None, S.shape)
    if field == "complex":
        raise ValueError(f"{path}: complex Matrix Market matrices are not supported")
    return CSR(S.indptr, S.indices, S.data.astype(np.float32), S.shape)


def _mtx_bad_line(path):
    """Best-effort line number of the first malformed line of a Matrix Market file (1-based)."""
    try:
        with _open_text(path) as f:
            header = f.readline()
            if not header.startswith("%%MatrixMarket"):
                return 1
            fields = header.split()
            pattern = len(fields) > 3 and fields[3].lower() == "pattern"
            size_seen = False
            for no, line in enumerate(f, start=2):
                s = line.strip()
                if not s or s.startswith("%"):
                    continue
                parts = s.split()
                if not size_seen:
                    size_seen = True
                    if len(parts) != 3 or not all(p.lstrip("-").isdigit() for p in parts):
                        return no
                    rows, cols, _ = (int(p) for p in parts)
                    continue
                want = 2 if pattern else 3
                if len(parts) < want:
                    return no
                try:
                    i, j = int(parts[0]), int(parts[1])
                    [float(p) for p in parts[2:want]]
                except ValueError:
                    return no
                if not (1 <= i <= rows and 1 <= j <= cols):
                    return no
    except Exception:
        return None
    return None


def load_snap(path, *, num_nodes: int | None = None, relabel: bool = False, undirected: bool = False) -> CSR:
    """A SNAP-style edge list: one 'src dst [weight]' per line, whitespace separated, '#' (or '%')
    comments and blank lines ignored, .gz read transparently.

    relabel=True maps the distinct node ids to 0..n-1 in increasing order (SNAP ids are often
    sparse); otherwise ids are used as they are and n = num_nodes or max id + 1.
    undirected=True stores every edge in both directions.
    """
    path = os.fspath(path)

    def lines():
        try:
            with _open_text(path) as f:
                return f.read().splitlines()
        except UnicodeDecodeError as e:
            raise ValueError(f"{path}: not a text edge list ({e})") from e

    try:
        with _open_text(path) as f, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns on an empty file
            arr = np.loadtxt(f, comments=("#", "%"), dtype=np.float64, ndmin=2)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a text edge list ({e})") from e
    except ValueError:
        _raise_snap_line(path, lines())
    if arr.size == 0:
        arr = np.zeros((0, 2))
    if arr.shape[1] not in (2, 3):
        _raise_snap_line(path, lines())
    ids = arr[:, :2]
    if not np.all(ids == np.round(ids)):
        _raise_snap_line(path, lines())
    src, dst = ids[:, 0].astype(np.int64), ids[:, 1].astype(np.int64)
    w = arr[:, 2].astype(np.float32) if arr.shape[1] == 3 else None
    if src.size and (src.min() < 0 or dst.min() < 0):
        bad = int(np.flatnonzero((src < 0) | (dst < 0))[0])
        raise ValueError(f"{path}:{_data_line(lines(), bad)}: negative node id in edge ({src[bad]}, {dst[bad]})")
    if relabel:
        ids, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
        src, dst = inv[: len(src)], inv[len(src):]
        n = len(ids) if num_nodes is None else int(num_nodes)
    else:
        n = int(num_nodes) if num_nodes is not None else (int(max(src.max(), dst.max())) + 1 if src.size else 0)
    if src.size and max(src.max(), dst.max()) >= n:
        bad = int(np.flatnonzero((src >= n) | (dst >= n))[0])
        raise ValueError(f"{path}:{_data_line(lines(), bad)}: node id in edge ({src[bad]}, {dst[bad]}) "
                         f"is >= num_nodes={n}")
    if undirected:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
        w = None if w is None else np.concatenate([w, w])
    return CSR.from_edge_index(np.stack([src, dst]), n, w)


def _data_line(lines, k):
    """1-based file line of the k-th data (non-comment, non-blank) line."""
    seen = -1
    for no, ln in enumerate(lines, start=1):
        if ln.strip() and not ln.lstrip().startswith(("#", "%")):
            seen += 1
            if seen == k:
                return no
    return len(lines)


def _raise_snap_line(path, lines):
    ncols = None
    for no, ln in enumerate(lines, start=1):
        s = ln.strip()
        if not s or s.startswith(("#", "%")):
            continue
        parts = s.split()
        if len(parts) not in (2, 3):
            raise ValueError(f"{path}:{no}: expected 'src dst' or 'src dst weight', got {len(parts)} "
                             f"field(s): {s[:80]!r}")
        if ncols is None:
            ncols = len(parts)
        elif len(parts) != ncols:
            raise ValueError(f"{path}:{no}: {len(parts)} fields but earlier lines have {ncols}: {s[:80]!r}")
        try:
            int(parts[0]), int(parts[1])
        except ValueError:
            raise ValueError(f"{path}:{no}: node ids must be integers, got {s[:80]!r}") from None
        if len(parts) == 3:
            try:
                float(parts[2])
            except ValueError:
                raise ValueError(f"{path}:{no}: edge weight must be a number, got {parts[2]!r}") from None
    raise ValueError(f"{path}: could not parse the edge list")


def load_npz(path) -> CSR:
    """A NumPy .npz with 'edge_index' (2 x E integers, row 0 sources, row 1 targets) and optional
    'num_nodes' (scalar) and 'edge_weight' (E,)."""
    path = os.fspath(path)
    try:
        z = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise ValueError(f"{path}: not a readable .npz file ({e})") from e
    if not hasattr(z, "files"):
        raise ValueError(f"{path}: a single .npy array, not an .npz archive with key 'edge_index'")
    with z:
        if "edge_index" not in z.files:
            raise ValueError(f"{path}: missing key 'edge_index' (found: {', '.join(z.files) or 'none'})")
        ei = z["edge_index"]
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise ValueError(f"{path}: key 'edge_index' must have shape (2, E), got {ei.shape}")
        if not np.issubdtype(ei.dtype, np.integer):
            raise ValueError(f"{path}: key 'edge_index' must hold integers, got {ei.dtype}")
        n = None
        if "num_nodes" in z.files:
            nn = z["num_nodes"]
            if nn.size != 1 or not np.issubdtype(nn.dtype, np.integer) or int(nn.reshape(-1)[0]) < 0:
                raise ValueError(f"{path}: key 'num_nodes' must be one non-negative integer, got {nn!r}")
            n = int(nn.reshape(-1)[0])
        w = None
        if "edge_weight" in z.files:
            w = z["edge_weight"]
            if w.shape != (ei.shape[1],):
                raise ValueError(f"{path}: key 'edge_weight' must have shape ({ei.shape[1]},), got {w.shape}")
            if not (np.issubdtype(w.dtype, np.floating) or np.issubdtype(w.dtype, np.integer)):
                raise ValueError(f"{path}: key 'edge_weight' must be numeric, got {w.dtype}")
            w = w.astype(np.float32)
    if ei.size:
        lo, hi = int(ei.min()), int(ei.max())
        if lo < 0:
            bad = int(np.flatnonzero((ei < 0).any(0))[0])
            raise ValueError(f"{path}: key 'edge_index' has a negative node id at edge {bad}: "
                             f"({ei[0, bad]}, {ei[1, bad]})")
        if n is not None and hi >= n:
            bad = int(np.flatnonzero((ei >= n).any(0))[0])
            raise ValueError(f"{path}: key 'edge_index' edge {bad} = ({ei[0, bad]}, {ei[1, bad]}) is outside "
                             f"num_nodes={n}")
    return CSR.from_edge_index(ei.astype(np.int64), n, w)


def load_graph(path, **kwargs) -> CSR:
    """Pick the loader from the file name: .mtx[.gz] -> load_mtx, .npz -> load_npz, anything else
    (.txt, .tsv, .edges, .el, .gz ...) -> load_snap."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise FileNotFoundError(f"{p}: no such file")
    low = p.lower()
    if low.endswith((".mtx", ".mtx.gz")):
        return load_mtx(p)
    if low.endswith(".npz"):
        return load_npz(p)
    return load_snap(p, **kwargs)
