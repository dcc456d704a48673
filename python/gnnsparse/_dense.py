"""The dense-ish route: SpMM and SDDMM dot on dense-ish matrices through cuBLAS (via torch).

On a matrix whose rows hold 10-30 % of the columns (the ESIMD SpMM paper's grid of
gnnsparse.bench.generators.grid72_shapes: K 1024-8192, density 0.1-0.3),
a dense GEMM does 3-10x more arithmetic than a sparse kernel but at a rate far above any sparse
kernel: on the H200 (docs/grid.md, 2026-12-06) dense cuBLAS SGEMM beat our kernels from about 18 %
density at N = 32 and 12 % at N = 128, TF32 GEMMs from 2.5-7.5 % and bf16 GEMMs from 1.5-4 %. So for torch
tensors on a CUDA device, `gs.spmm` and `gs.sddmm` (and the torch layer's ops) take this route when
the policy below says it wins (density above a crossover by precision and width; for SpMM also
nnz x N >= 1e9, since a routed call costs its GEMM plus ~25-45 us on the GPU-bound cells and ~100-250
us of host work where the call is host-bound):

  SpMM  (sum, mean): Y = D @ X, D the dense copy of A (M x K), made once and kept on the CSR (as
        its device views are: rebuilt after a change of the values, see gnnsparse._csr); mean then
        scales each row by 1 / deg (empty rows give 0, as the kernels do).
  SDDMM (dot, one head, precision tf32 / bf16 from F = 64 only): E[k] = (X @ Y^T)[i, j] for the stored
        entries, in row blocks of at most `max_bytes()` of GEMM output, gathered through the entries'
        flat positions (kept on the CSR with the structure). At fp32 our tensor-core SDDMM stays.

Precision: "fp32" runs exact fp32 GEMMs (cuBLAS SGEMM: TF32 is switched off for the call, whatever
torch's global setting), "tf32" TF32 GEMMs, "bf16" bfloat16 operands with float32 accumulation and
output. Deterministic: cuBLAS gives the same bits on every run on one GPU model (and torch build);
the dense copy holds each stored value as it is (matrices with repeated (row, column) entries, whose
copy would hold sums, do not take the route).

Eligible: the CUDA backend with torch tensors (the CSR torch, or NumPy uploaded next to torch
inputs; CuPy arrays keep the sparse kernels), float32 features, rows with strictly increasing
columns (checked once per structure; only matrices of density >= 1 % are checked at all, so graphs
never take the route), N >= 16, a dense copy of at most `max_bytes()`, and a matrix that is kept
(not the torch layer's CSR built for one call with that call's values: its copy would not be reused).
The choice depends only on the call (shape, density, width, precision, knobs), never on what is
cached, so the same call gives the same bits every time.

Semantics: the kernels' (include/gnnsparse/ops.hpp), also for inf / NaN in the values; an X holding
inf or NaN gets the kernels' result for SpMM (a GEMM would spread them to every row through 0 * inf):
a routed call computes X's finiteness as a device flag (isfinite of X's sum), runs the GEMM into Y,
then launches the kernels into the same Y gated by the flag (SpmmArgs::skip): when X is finite they
return at once, otherwise they overwrite the GEMM's result. Stream-ordered, no read-back to the host
(the dense copy is made and kept either way).

Memory: the SpMM's dense copy is M K 4 bytes (2 for bf16), i.e. 0.5 / density times the CSR's own
8 bytes per entry, kept until the values change or CSR.invalidate(); `CSR.dense_nbytes` reports
it. The SDDMM keeps 4 (8 when M K >= 2^31) bytes per entry of flat positions and uses a transient
GEMM output of at most `max_bytes()`.

Knobs (read at every call): GNNSPARSE_DENSE=auto (the policy) | on (every eligible call) | off;
GNNSPARSE_DENSE_MAX_MB (default 2048): the largest dense copy or GEMM block, in MiB.
GNNSPARSE_CUDA_SPMM / GNNSPARSE_CUDA_SDDMM set to a kernel (anything but auto) also keep the
sparse kernels: they name the kernel to run.
"""
from __future__ import annotations

import contextlib
import math
import os

from . import _arrays

MODES = ("auto", "on", "off")
DEFAULT_MAX_MB = 2048
MIN_WIDTH = 16  # narrower: the GEMM reads the whole dense copy for little work (bandwidth-bound)

# Crossover densities, (at N <= 32, at N >= 128), interpolated in log2 N: the density from which
# the dense GEMM at that precision beats our sparse kernels (exact fp32 at every precision), read
# off the 72-cell grid on the H200 (2026-12-06, bench/grid_dense.py; docs/grid.md "The dense-ish
# route"): fp32 N = 32 even at d = 0.2, N = 128 the kernels 13 % faster at d = 0.1; tf32 / bf16
# the GEMM 1.3x / 2.6x faster at d = 0.1, N = 32.
class _Policy(dict):
    """precision -> (crossover at N <= 32, at N >= 128), and the least M K for the route (per
    precision where `least` names one)."""

    def __init__(self, table, min_elements: int, least=None, min_work: float = 0.0):
        super().__init__(table)
        self.min_elements = min_elements
        self.least = dict(least or {})
        self.min_work = min_work

    def min_for(self, precision: str) -> int:
        return self.least.get(precision, self.min_elements)


# at least this many dense elements (M K): below, the call is host-bound either way (~40-60 us on
# the grid's smallest cells) and the route's host work does not pay; the SDDMM's gather too
# and at least nnz x N >= 1e9 gathered elements (about 400 us of our kernels on the grid). Until
# 2026-12-07 a routed SpMM was synchronous (X's finiteness flag read back) and its cost beyond the
# GEMM varied from GEMM + 39 us (median) on one H100 to GEMM + ~370 us on another (bench/grid_dense.py,
# all 72 cells and precisions): at 4e8 the route was slower than the kernels in 7, 23 and 38 of its
# 86 cells in three runs, at 1e9 in none of its 46. Without the read-back (the kernels gated on the
# device, see spmm below; H100, 2026-12-07 16:19 UTC, fp32, every cell routed): GEMM + 22-45 us on
# the GPU-bound cells, and at 6e8 none of the routed cells slower than the kernels in that one run
# (4 more cells than 1e9); the rule stays at 1e9 until more runs agree (docs/grid.md).
SPMM_CROSSOVER = _Policy({"fp32": (0.18, 0.12), "tf32": (0.075, 0.025), "bf16": (0.04, 0.015)}, 1 << 22,
                         min_work=1e9)
# SDDMM: the GEMM writes all M K scores and the gather reads them back, against our tensor-core
# SDDMM (cuda/sddmm_tc.cu, fp32 / tf32), which computes all scores without that round trip: an
# exact-fp32 GEMM does not beat it on the grid, a TF32 GEMM does from F = 64 on. bf16 (our
# tensor-core SDDMM at bf16 since 2026-12-06): on the 72-cell grid (H100, 2026-12-07, bench/grid_dense.py
# --ops sddmm --precisions bf16) the route ran at 0.49-1.30x our kernels' speed at F = 32 (slower
# in 11 of its 21 cells), at F = 128 below 2^25 elements 0.75-1.19x (slower in 5 of 6), and from
# 2^25 on 1.12-2.38x (faster in all 15): so bf16 from F = 64 and 2^25 elements.
SDDMM_CROSSOVER = _Policy({"tf32": (0.05, 0.05), "bf16": (0.03, 0.03)}, 1 << 24, least={"bf16": 1 << 25})
SDDMM_MIN_WIDTH = {"tf32": 64, "bf16": 64}


def mode() -> str:
    m = os.environ.get("GNNSPARSE_DENSE", "auto").strip().lower() or "auto"
    if m not in MODES:
        raise ValueError(f"GNNSPARSE_DENSE={m!r}: choose one of {', '.join(MODES)}")
    return m


def max_bytes() -> int:
    raw = os.environ.get("GNNSPARSE_DENSE_MAX_MB", "").strip()
    if not raw:
        return DEFAULT_MAX_MB << 20
    try:
        mb = int(raw)
    except ValueError:
        mb = -1
    if mb < 0:
        raise ValueError(f"GNNSPARSE_DENSE_MAX_MB={raw!r}: give a whole number of MiB (0 turns the route off)")
    return mb << 20


def crossover(table, precision: str, N: int) -> float:
    lo, hi = table[precision]
    w = min(1.0, max(0.0, (math.log2(max(N, 1)) - 5.0) / 2.0))  # 0 at N <= 32, 1 at N >= 128
    return lo + w * (hi - lo)


def prefer(table, precision: str, M: int, K: int, nnz: int, N: int) -> bool:
    """The policy alone (no eligibility checks): whether the dense GEMM is expected to win."""
    if M * K < table.min_for(precision) or nnz * N < table.min_work:
        return False
    return nnz >= crossover(table, precision, N) * M * K


def _kernel_forced(var: str) -> bool:
    v = os.environ.get(var, "").strip().lower()
    return v not in ("", "auto")


@contextlib.contextmanager
def _fp32_matmul(torch, tf32: bool):
    """torch's float32 matmuls as IEEE fp32 (tf32=False) or TF32 for the duration of the block,
    whatever the global setting; restored afterwards through the same API (not thread-safe: another
    thread's float32 matmul during the block sees this setting)."""
    m = torch.backends.cuda.matmul
    want = "tf32" if tf32 else "ieee"
    if hasattr(m, "fp32_precision"):
        old = m.fp32_precision
        if old == want:
            yield
            return
        m.fp32_precision = want
        try:
            yield
        finally:
            m.fp32_precision = old
    else:  # torch before the fp32_precision API
        old = m.allow_tf32
        m.allow_tf32 = tf32
        try:
            yield
        finally:
            m.allow_tf32 = old


def _eligible(A, view, X, dt: str, N: int, precision: str, table, need_bytes: int, var: str) -> bool:
    if dt != "float32" or N < MIN_WIDTH or precision not in table or A.nnz == 0:
        return False
    if getattr(A, "_per_call", False):  # the torch layer's CSR for one call: a copy would not be reused
        return False
    if not _arrays.is_torch(X) or not X.is_cuda or not _arrays.is_torch(view.keep[0]):
        return False
    if view.sorted_cols != 1:  # unknown (density < 1 %) or unsorted
        return False
    m = mode()
    if m == "off" or _kernel_forced(var):
        return False
    M, K = A.shape
    if need_bytes > max_bytes():  # GNNSPARSE_DENSE_MAX_MB=0: never
        return False
    if m == "auto" and not prefer(table, precision, M, K, A.nnz, N):
        return False
    return _unique(A, view)


# ---------------------------------------------------------------- structure (kept on the CSR)
def _rows(torch, rowptr, M: int, nnz: int):
    counts = (rowptr[1:] - rowptr[:-1]).long()
    return torch.repeat_interleave(torch.arange(M, device=rowptr.device), counts, output_size=nnz)


def _unique(A, view) -> bool:
    """No (row, column) stored twice: with sorted rows, no equal neighbours inside a row. One
    device reduction per structure."""
    import torch

    rowptr, col, _ = view.keep

    def build():
        if A.nnz < 2:
            return True
        rows = _rows(torch, rowptr, A.shape[0], A.nnz)
        same = (col[1:] == col[:-1]) & (rows[1:] == rows[:-1])
        return not bool(same.any())
    return A.derived(("dense_unique", str(col.device)), build)


def _flat(A, view):
    """Each entry's position i K + j in the dense M x K matrix (int32 when it fits: index_select
    takes both), kept with the structure."""
    import torch

    rowptr, col, _ = view.keep
    M, K = A.shape

    def build():
        flat = _rows(torch, rowptr, M, A.nnz) * K + col.long()
        return flat.int() if M * K < 2**31 else flat
    return A.derived(("dense_flat", str(col.device)), build)


def _inv_deg(A, view):
    import torch

    rowptr = view.keep[0]

    def build():
        deg = (rowptr[1:] - rowptr[:-1]).float()
        return torch.where(deg > 0, 1.0 / deg.clamp(min=1), torch.zeros_like(deg))[:, None]
    return A.derived(("dense_inv_deg", str(rowptr.device)), build)


def _dense_copy(A, view, dtype_name: str):
    """A as a dense M x K tensor of dtype_name on the view's device (CSR.to_dense: every position
    is written once, the route takes no repeated entries), kept on the CSR."""
    import torch

    col = view.keep[1]
    return A._dense_copy(("dense", str(col.device), dtype_name),
                         lambda: A.to_dense(like=col).to(getattr(torch, dtype_name)))


# ---------------------------------------------------------------- the ops
def spmm(A, view, X, reduce: str, precision: str, dt: str, N: int):
    """(Y (M, N) by the dense route, finite), or None when the call is not eligible or the policy
    declines. finite: a 0-d bool tensor on X's device, True when X holds no inf or NaN. A GEMM
    multiplies every row of X, also by the zeros: one inf or NaN in X would reach every output row
    (0 * inf = NaN), where the kernels give it only to the rows that store its column; so the
    caller runs the kernels into Y gated by `finite` (the SpMM's skip flag: they write only when
    it is False, i.e. the kernels' result for such an X; a sum that overflows clears it too,
    harmlessly). All of it stream-ordered, no read-back."""
    if reduce not in ("sum", "mean"):
        return None
    M, K = A.shape
    elem = 2 if precision == "bf16" else 4
    if not _eligible(A, view, X, dt, N, precision, SPMM_CROSSOVER, M * K * elem, "GNNSPARSE_CUDA_SPMM"):
        return None
    import torch

    s = X.sum()
    finite = torch.eq(s - s, 0)  # isfinite(s) in two launches (torch.isfinite takes four: abs, ne, eq, and)
    return spmm_dense(A, view, X, reduce, precision), finite


def spmm_dense(A, view, X, reduce: str, precision: str):
    """The route's computation alone (any torch device; view.keep holds torch rowptr, col, val)."""
    import torch

    if precision == "bf16":
        Y = _mm_bf16(torch, _dense_copy(A, view, "bfloat16"), X.to(torch.bfloat16))
    else:
        D = _dense_copy(A, view, "float32")
        with _fp32_matmul(torch, precision == "tf32"):
            Y = torch.mm(D, X)
    if reduce == "mean":
        Y.mul_(_inv_deg(A, view))
    return Y


def sddmm_dot(A, view, X, Y, precision: str, dt: str, H: int, F: int):
    """E (nnz,) of SDDMM dot with one head by the dense route, or None. The GEMM's M x K output is
    formed in row blocks of at most max_bytes(), so no size limit applies beyond the flat positions."""
    if H != 1 or F < SDDMM_MIN_WIDTH.get(precision, MIN_WIDTH):
        return None
    if not _eligible(A, view, X, dt, F, precision, SDDMM_CROSSOVER, 4 * A.shape[1], "GNNSPARSE_CUDA_SDDMM"):
        return None
    return sddmm_dense(A, view, X, Y, precision, max_bytes())


def sddmm_dense(A, view, X, Y, precision: str, block_bytes: int):
    """The route's computation alone: E[k] = (X Y^T)[i, j], the GEMM in row blocks of at most
    block_bytes of float32 output (at least one row)."""
    import torch

    M, K = A.shape
    F = X.numel() // max(M, 1)
    X2, Y2 = X.reshape(M, F), Y.reshape(K, F)
    if precision == "bf16":
        X2, Y2 = X2.to(torch.bfloat16), Y2.to(torch.bfloat16)
    flat = _flat(A, view)
    rows = max(1, min(M, block_bytes // max(1, 4 * K)))
    if rows >= M:
        return torch.index_select(_block(torch, X2, Y2, precision).view(-1), 0, flat)
    # the entries of each block of rows: rowptr at the block starts, read back to the host once per
    # (structure, block height)
    def build():
        b = view.keep[0][0:M + 1:rows].tolist()
        return b + [A.nnz] if len(b) <= (M - 1) // rows + 1 else b
    bounds = A.derived(("dense_bounds", str(X.device), rows), build)
    out = torch.empty(A.nnz, dtype=torch.float32, device=X.device)
    for b, r0 in enumerate(range(0, M, rows)):
        lo, hi = bounds[b], bounds[b + 1]
        if hi > lo:
            G = _block(torch, X2[r0:r0 + rows], Y2, precision)
            torch.index_select(G.view(-1), 0, flat[lo:hi] - r0 * K, out=out[lo:hi])
    return out


def _block(torch, X2, Y2, precision):
    if precision == "bf16":
        return _mm_bf16(torch, X2, Y2.t())
    with _fp32_matmul(torch, precision == "tf32"):
        return torch.mm(X2, Y2.t())


def _mm_bf16(torch, a, b):
    """a @ b of bfloat16 operands with float32 accumulation and a float32 result."""
    if a.is_cuda:
        try:
            return torch.mm(a, b, out_dtype=torch.float32)
        except torch.cuda.OutOfMemoryError:
            raise
        except (TypeError, RuntimeError):  # torch without mm(out_dtype=)
            pass
    return torch.mm(a, b).float()  # a bfloat16 result, widened
