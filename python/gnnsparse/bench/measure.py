"""Inputs, the correctness check against gnnsparse.reference, the bytes/FLOP model, timers and the
copy-bandwidth probe, for the two bench devices (the SYCL CPU device with NumPy, a CUDA GPU with torch).
"""
from __future__ import annotations

import warnings

import numpy as np

from .. import reference
from . import timing
from .._arrays import to_numpy
from .._csr import CSR

# ---------------------------------------------------------------- inputs
FLOAT_BYTES = 4
ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}
# the check's tolerance relative to each element's magnitude: float32 accumulation, and for 16-bit
# features the rounding of the output to 8 (bfloat16) or 11 (float16) significant bits, with margin
RTOL = {"float32": 1e-4, "float64": 1e-4, "float16": 4e-3, "bfloat16": 1e-2}


def itemsize(dtype: str) -> int:
    return ITEMSIZE[dtype]


def round_to(a: np.ndarray, dtype: str) -> np.ndarray:
    """float32 `a` rounded to the nearest `dtype` value (ties to even), held in float32: the values
    a float16 / bfloat16 copy of `a` holds exactly (float32 and float64: `a` itself)."""
    if dtype == "float16":
        return a.astype(np.float16).astype(np.float32)
    if dtype != "bfloat16":
        return a
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return u.astype(np.uint32).view(np.float32).reshape(a.shape)


def make_inputs(case, A: CSR, seed: int = 0) -> dict:
    """Host float32 inputs of a case, seeded. SpMM: X (K, C). SDDMM: X (M[, H], F), Y (K[, H], F)
    (dot) or X (M[, H]), Y (K[, H]) (add). FusedMM: those plus Z (K[, H], D) with D = width, but no
    Z when case.y_is_z (Y takes its place). Dot features are scaled by 1/sqrt(F) so softmax/exp
    edge functions stay in range. For a 16-bit case.dtype the values are rounded to that dtype, so
    the device copy in case.dtype holds them exactly and the reference (float64 from these float32
    arrays) sees the inputs the kernel sees."""
    rng = np.random.default_rng(seed)
    M, K = A.shape
    w, H = case.width, case.heads

    def normal(*shape, scale=1.0):
        return round_to(rng.standard_normal(shape, dtype=np.float32) * np.float32(scale), case.dtype)

    if case.op == "spmm":
        return {"X": normal(K, w)}
    head = () if H == 1 else (H,)
    if case.sddmm_op == "dot":
        s = 1.0 / np.sqrt(w)
        X, Y = normal(M, *head, w, scale=s), normal(K, *head, w, scale=s)
    else:
        X, Y = normal(M, *head), normal(K, *head)
    if case.op == "sddmm" or case.y_is_z:
        return {"X": X, "Y": Y}
    return {"X": X, "Y": Y, "Z": normal(K, *head, w)}


def z_of(case, inputs):
    """FusedMM's Z among `inputs`: Y itself (the same object) when case.y_is_z."""
    return inputs["Y"] if case.y_is_z else inputs["Z"]


# ---------------------------------------------------------------- our call
def ours(case):
    """fn(A, inputs) -> result of the gnnsparse op for this case ((Y, arg) for an SpMM with arg;
    split() takes it apart). Y=Z FusedMM passes the one array inputs["Y"] as both Y and Z."""
    import gnnsparse as gs

    if case.op == "spmm":
        if case.arg:
            return lambda A, i: gs.spmm(A, i["X"], reduce=case.reduce, return_arg=True)
        return lambda A, i: gs.spmm(A, i["X"], reduce=case.reduce)
    if case.op == "sddmm":
        return lambda A, i: gs.sddmm(A, i["X"], i["Y"], op=case.sddmm_op)
    if case.y_is_z:
        return lambda A, i: gs.fusedmm(A, i["X"], i["Y"], i["Y"], op=case.sddmm_op, edge=case.edge)
    return lambda A, i: gs.fusedmm(A, i["X"], i["Y"], i["Z"], op=case.sddmm_op, edge=case.edge)


def split(case, out):
    """(the op's result, the arg output or None) of what ours(case) returned."""
    return out if case.arg else (out, None)


# ---------------------------------------------------------------- bytes and FLOP model
def model(case, A: CSR) -> tuple[int, int]:
    """(bytes, flops): CSR read once (rowptr, col, val when present) + every gathered row + each
    row-side input read once + output written once (and SpMM's int64 arg output when asked for),
    dense elements of case.dtype's size (values: float32, float64 with float64 features); FusedMM
    with Y = Z gathers each row once. SpMM 2*nnz*C FLOPs, SDDMM dot nnz*(2F-1) per head, add nnz
    per head, FusedMM the sum of its SDDMM and a 2*nnz*D SpMM."""
    M, K = A.shape
    nnz = A.nnz
    idx = np.dtype(A.index_dtype).itemsize
    val = 8 if case.dtype == "float64" else FLOAT_BYTES
    csr = (M + 1) * idx + nnz * idx + (nnz * val if A.val is not None else 0)
    w, H, f = case.width, case.heads, itemsize(case.dtype)
    if case.op == "spmm":
        return csr + nnz * w * f + M * w * f + (M * w * 8 if case.arg else 0), 2 * nnz * w
    if case.sddmm_op == "dot":
        sd_bytes, sd_flops = M * H * w * f + nnz * H * w * f, nnz * H * (2 * w - 1)
    else:
        sd_bytes, sd_flops = M * H * f + nnz * H * f, nnz * H
    if case.op == "sddmm":
        return csr + sd_bytes + nnz * H * f, sd_flops
    z_gather = 0 if case.y_is_z else nnz * H * w * f
    return csr + sd_bytes + z_gather + M * H * w * f, sd_flops + 2 * nnz * H * w


# ---------------------------------------------------------------- correctness
def sample_rows(A: CSR, max_rows: int = 2048, seed: int = 0, full_nnz: int = 200_000):
    """None (check every row) when A has at most max_rows rows or full_nnz entries, else a sorted
    sample of max_rows rows that always holds the longest row (the hub) and an empty row when
    there is one."""
    M = A.shape[0]
    if M <= max_rows or A.nnz <= full_nnz:
        return None
    deg = A.degrees()
    rng = np.random.default_rng(seed)
    rows = rng.choice(M, size=min(M, max_rows), replace=False)
    extra = [int(np.argmax(deg))]
    empty = np.flatnonzero(deg == 0)
    if empty.size:
        extra.append(int(empty[0]))
    return np.unique(np.concatenate([rows, extra]))


def sub_csr(A: CSR, rows):
    """(the CSR of `rows` of A (len(rows) x K), the positions of its entries in A)."""
    rowptr = A.rowptr.astype(np.int64)
    deg = rowptr[rows + 1] - rowptr[rows]
    sub_ptr = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(deg, out=sub_ptr[1:])
    pos = np.repeat(rowptr[rows] - sub_ptr[:-1], deg) + np.arange(sub_ptr[-1], dtype=np.int64)
    val = None if A.val is None else to_numpy(A.val)[pos]
    return CSR(sub_ptr, A.col[pos], val, (len(rows), A.shape[1]), validate=False), pos


def _abs_csr(A):
    return A if A.val is None else CSR(A.rowptr, A.col, np.abs(to_numpy(A.val)), A.shape, validate=False)


def expected(case, A: CSR, inputs: dict, rows=None, with_arg: bool = False):
    """(reference result of the checked rows (float64), per-element magnitude for the tolerance,
    index into our full result that selects the same elements). With `rows`, the reference runs on
    the sub-CSR of those rows with its columns compacted to the ones it uses (so a sample of a
    huge graph never converts the whole feature matrix to float64). with_arg (SpMM max / min): a
    fourth item, the reference's arg as positions in A (-1 for empty rows)."""
    if rows is None:
        S, pos, used = A, None, None
    else:
        S, pos = sub_csr(A, rows)
        used, inv = np.unique(S.col, return_inverse=True)
        S = CSR(S.rowptr, inv.astype(S.col.dtype), S.val, (S.shape[0], max(len(used), 1)), validate=False)

    def cols(a):  # the column-side input restricted to the used columns
        return a if used is None else (a[used] if len(used) else a[:1])

    X = inputs["X"]
    if case.op == "spmm":
        Xc = cols(X)
        if with_arg:
            ref, arg = reference.spmm(S, Xc, case.reduce, return_arg=True)
            if pos is not None and pos.size:
                arg = np.where(arg >= 0, pos[np.maximum(arg, 0)], -1)
        else:
            ref = reference.spmm(S, Xc, case.reduce)
        if case.reduce in ("sum", "mean"):
            mag = reference.spmm(_abs_csr(S), np.abs(Xc), case.reduce)
        else:
            vmax = 1.0 if S.val is None else float(np.abs(to_numpy(S.val)).max(initial=0.0))
            mag = np.full_like(ref, float(np.abs(Xc).max(initial=0.0)) * vmax)
        return (ref, mag, rows, arg) if with_arg else (ref, mag, rows)
    Xr = X if rows is None else X[rows]
    Y = cols(inputs["Y"])
    if case.op == "sddmm":
        ref = reference.sddmm(S, Xr, Y, case.sddmm_op)
        mag = reference.sddmm(S, np.abs(Xr), np.abs(Y), case.sddmm_op)
        return ref, mag, pos
    Z = cols(z_of(case, inputs))
    ref = reference.fusedmm(S, Xr, Y, Z, case.sddmm_op, case.edge)
    if case.edge == "softmax":
        mag = np.full_like(ref, float(np.abs(Z).max(initial=0.0)))
    else:
        mag = reference.fusedmm(_abs_csr(S), np.abs(Xr), np.abs(Y), np.abs(Z),
                                case.sddmm_op, case.edge if case.edge != "leaky_relu" else "none")
    return ref, mag, rows


def compare(got, ref, mag, rtol: float = 1e-4) -> tuple[bool, float, str]:
    """(ok, max error relative to the magnitude, message). ok needs matching shapes and NaNs, every
    |got - ref| <= rtol * (mag + tiny), and a reference that is not all zeros (never time zeros)."""
    got = np.asarray(got, np.float64)
    if got.shape != ref.shape:
        return False, float("inf"), f"shape {got.shape} != reference {ref.shape}"
    if ref.size and not np.any(ref != 0):
        return False, float("inf"), "the reference is all zeros: nothing to check"
    nan_g, nan_r = np.isnan(got), np.isnan(ref)
    if np.any(nan_g != nan_r):
        return False, float("inf"), f"{int(np.sum(nan_g != nan_r))} NaN mismatches"
    ok_mask = ~nan_r
    tiny = 1e-30 + 1e-7 * float(np.abs(ref[ok_mask]).max(initial=0.0))
    err = np.abs(got[ok_mask] - ref[ok_mask]) / (mag[ok_mask] + tiny)
    worst = float(err.max(initial=0.0))
    if worst > rtol:
        k = int(np.argmax(err))
        return False, worst, (f"max relative error {worst:.2e} > {rtol:.0e} at flat index {k}: "
                              f"got {got[ok_mask][k]!r}, reference {ref[ok_mask][k]!r}")
    return True, worst, ""


def check(case, A: CSR, inputs: dict, result_host, rows=None, rtol: float | None = None, arg_host=None):
    """Check our result (host copy) against gnnsparse.reference on `rows` (None = all); rtol:
    RTOL[case.dtype] unless given. With arg_host (SpMM max / min with arg) the arg output must equal
    the reference's exactly (ties go to the smallest edge position, -1 for empty rows)."""
    rtol = RTOL[case.dtype] if rtol is None else rtol
    if arg_host is None:
        ref, mag, sel = expected(case, A, inputs, rows)
    else:
        ref, mag, sel, ref_arg = expected(case, A, inputs, rows, with_arg=True)
    got = result_host if sel is None else result_host[sel]
    ok, err, msg = compare(got, ref, mag, rtol)
    if ok and arg_host is not None:
        got_arg = np.asarray(arg_host if sel is None else arg_host[sel])
        if got_arg.shape != ref_arg.shape:
            return False, err, f"arg has shape {got_arg.shape}, reference {ref_arg.shape}"
        bad = got_arg != ref_arg
        if bad.any():
            k = int(np.argmax(bad.ravel()))
            return False, err, (f"arg differs from the reference's in {int(bad.sum())} of {bad.size} elements; "
                                f"first at flat index {k}: {int(got_arg.ravel()[k])}, reference {int(ref_arg.ravel()[k])}")
    return ok, err, msg


def agree(a, b, rtol: float = 1e-3) -> bool:
    """Loose agreement of a reference library's result with ours (scaled by the largest value)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.shape != b.shape:
        try:
            a = a.reshape(b.shape)
        except ValueError:
            return False
    scale = max(float(np.nanmax(np.abs(b), initial=0.0)), 1e-30)
    return bool(np.all(np.isclose(a, b, rtol=0, atol=rtol * scale, equal_nan=True)))


# ---------------------------------------------------------------- devices
class CPUDevice:
    """The SYCL CPU device: NumPy in, NumPy out; wall-clock timing (the ops are synchronous)."""
    kind = "cpu"
    timing = ("wall clock (time.perf_counter) per call, the ops being synchronous; each library timed in "
              "blocks of consecutive calls after an untimed call, blocks alternating over 2 rounds")

    def __init__(self):
        from .. import _sycl_backend

        if not _sycl_backend.available():
            raise RuntimeError(f"the SYCL backend is not available: {_sycl_backend.unavailable_reason()}")
        self._q = _sycl_backend.default_queue()
        dev = self._q.sycl_device
        self.name = f"{dev.name} (SYCL {dev.backend.name}:{dev.device_type.name}, {dev.max_compute_units} compute units)"
        self.torch_device = "cpu" if _has_torch() else None
        self.warmup, self.rotate = 1, 1
        self.dtypes = _sycl_backend.backend.dtypes
        self.backend_note = "the sycl backend (the SYCL CPU device)"

    def put(self, a, dtype: str = "float32"):
        return a if a.dtype.name == dtype else a.astype(dtype)

    def put_csr(self, A, like):
        return A

    def host(self, a):
        return to_numpy(a)

    def sync(self):
        pass

    def time(self, fn, inputs_list, warmup, repeat):
        return self.time_many({"f": (fn, inputs_list)}, warmup, repeat)["f"]

    def time_many(self, fns, warmup, repeat, rounds: int = 2):
        """{name: [seconds]} (timing.wall): each function runs in blocks of consecutive calls, every
        block after max(warmup, 1) untimed calls, and the blocks of all functions alternate over
        `rounds` rounds. Blocks, not single interleaved calls: on a small CPU the thread pools of the
        SYCL runtime, torch (OpenMP) and the next library spin after a call and slow whoever runs
        next; rounds spread the load of other processes on a shared machine over all functions.
        fns: {name: (fn, inputs[, (enter, exit)])}: fn(inputs[i]); enter / exit run around a block."""
        rounds = max(1, min(rounds, repeat))
        per = [repeat // rounds + (1 if r < repeat % rounds else 0) for r in range(rounds)]
        return timing.wall(_rotating(fns), rounds=rounds, per_round=per, warmup=max(warmup, 1),
                           hooks={k: h for k, (_, _, *h) in fns.items() if h})

    def copy_bandwidth(self, nbytes: int = 256 << 20) -> dict:
        """Read+write bytes per second of a large copy on the SYCL device (queue.memcpy between two
        device USM buffers) and of a NumPy host copy, median of 5."""
        import dpctl.memory as dm

        a = dm.MemoryUSMDevice(nbytes, queue=self._q)
        b = dm.MemoryUSMDevice(nbytes, queue=self._q)
        x = np.ones(nbytes // 4, np.float32)
        y = np.empty_like(x)
        ts = timing.wall({"device": lambda i: self._q.memcpy(b, a, nbytes), "host": lambda i: np.copyto(y, x)},
                         rounds=1, per_round=5, warmup=1)
        return {"device_gbps": 2 * nbytes / timing.median(ts["device"]) / 1e9,
                "host_gbps": 2 * nbytes / timing.median(ts["host"]) / 1e9,
                "method": f"SYCL queue.memcpy of {nbytes >> 20} MiB device USM (read+write); host: numpy.copyto"}


class CUDADevice:
    """A CUDA GPU through torch: inputs are torch CUDA tensors, timing with torch.cuda.Event after
    warm-up; dense inputs rotate between copies when they would fit in L2."""
    kind = "cuda"
    timing = ("torch.cuda.Event pairs around each call after warm-up, calls of the libraries interleaved; "
              "dense inputs rotate between copies when they would fit in L2")

    def __init__(self, index: int = 0, l2_bytes: int = 64 << 20):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        self.torch = torch
        self.torch_device = f"cuda:{index}"
        torch.cuda.set_device(index)
        p = torch.cuda.get_device_properties(index)
        self.name = f"{p.name} (CUDA, torch {torch.__version__}, {p.total_memory / 2**30:.0f} GiB)"
        self.l2_bytes = int(getattr(p, "L2_cache_size", l2_bytes) or l2_bytes)
        self.warmup = 5
        from .._cuda_backend import backend

        self.dtypes = backend.dtypes
        self.backend_note = "the cuda backend"

    def put(self, a, dtype: str = "float32"):
        t = self.torch.from_numpy(np.ascontiguousarray(a)).to(self.torch_device)
        return t if dtype == "float32" else t.to(getattr(self.torch, dtype))

    def put_csr(self, A, like):
        return A.to_like(like)

    def host(self, a):
        return to_numpy(a)

    def sync(self):
        self.torch.cuda.synchronize()

    def free_bytes(self) -> int:
        return int(self.torch.cuda.mem_get_info()[0])

    def copies_for(self, host_inputs, elem_bytes: int = 4) -> int:
        """How many copies of the dense inputs to rotate so that consecutive launches do not find
        them in L2 (at most 8); on the device their elements take elem_bytes each."""
        size = sum(a.size for a in host_inputs.values()) * elem_bytes
        if size >= 2 * self.l2_bytes:
            return 1
        return int(min(8, max(2, -(-2 * self.l2_bytes // max(size, 1)))))

    def time(self, fn, inputs_list, warmup, repeat):
        return self.time_many({"f": (fn, inputs_list)}, warmup, repeat)["f"]

    def time_many(self, fns, warmup, repeat):
        """{name: [seconds]} from CUDA events around each launch, interleaved one call of each per
        round, after `warmup` untimed rounds; one synchronize at the end (timing.events)."""
        return timing.events(_rotating(fns), repeat=repeat, warmup=warmup, torch=self.torch)

    def copy_bandwidth(self, nbytes: int = 1 << 30) -> dict:
        torch = self.torch
        a = torch.empty(nbytes // 4, dtype=torch.float32, device=self.torch_device)
        b = torch.empty_like(a)
        ts = self.time(lambda _: b.copy_(a), [None], 3, 20)
        return {"device_gbps": 2 * nbytes / timing.median(ts) / 1e9, "host_gbps": None,
                "method": f"torch copy_ of {nbytes >> 20} MiB on the GPU (read+write), cuda events, median of 20"}


def _rotating(fns):
    """{name: (fn, inputs, ...)} -> {name: call index -> fn(inputs[index % len(inputs)])}."""
    return {k: (lambda i, f=fn, inp=inputs: f(inp[i % len(inp)])) for k, (fn, inputs, *_) in fns.items()}


def _has_torch() -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torch  # noqa: F401
        return True
    except Exception:
        return False


def unsupported_dtype(dev, dtype: str):
    """Why `dev` cannot run features of `dtype` (the reason a case is skipped), or None."""
    if dtype in dev.dtypes:
        return None
    note = getattr(dev, "backend_note", f"the {dev.kind} device")
    why = f"{dtype} features: {note} takes {' and '.join(sorted(dev.dtypes))} only"
    return why if "cuda" in note else why + " (the cuda backend runs it: --device cuda on a GPU)"


def cuda_usable() -> tuple[bool, str]:
    """(whether the CUDA bench can run here, why not)."""
    from .._backends import available_backends

    if not available_backends().get("cuda"):
        from .._cuda_backend import backend

        return False, f"the gnnsparse CUDA backend cannot run here: {backend.unavailable_reason()}"
    if not _has_torch():
        return False, "the CUDA bench needs torch (pip install torch)"
    import torch

    if not torch.cuda.is_available():
        return False, "torch sees no CUDA device"
    return True, ""


median = timing.median
