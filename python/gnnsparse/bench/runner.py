"""Run cases: build each graph once, check our result against gnnsparse.reference, then time ours
and every reference library on the same inputs, and turn times into ratios, GB/s and GFLOP/s."""
from __future__ import annotations

import time
import traceback
import warnings

import numpy as np

from . import measure, refs


ONE_THREAD = "@1thread"


def estimated_nnz(spec):
    p = dict(spec.params)
    if spec.kind == "grid":
        return int(p["M"]) * int(round(p["density"] * p["K"]))
    if "e" in p:
        return int(p["e"])
    if spec.kind == "sbm":
        return int(p["n"] * p["avg_degree"])
    return None


class NullProgress:
    def start(self, total):
        pass

    def status(self, text):
        pass

    def advance(self, text=""):
        pass

    def stop(self):
        pass


def run_cases(cases, dev, *, repeat: int, warmup: int | None = None, seed: int = 0, max_nnz: int | None = None,
              check_rows: int = 2048, progress=None, ref_names=None, log=print, stat: str = "median"):
    """A list of result dicts, one per case (skipped cases carry 'skipped' with the reason).
    stat: 'median' or 'min' of the repeats, used for the times, ratios, GB/s and GFLOP/s (both are
    stored: ours_median_s / ours_min_s, and s_median / s_min per reference)."""
    if stat not in ("median", "min"):
        raise ValueError(f"stat must be 'median' or 'min', got {stat!r}")
    progress = progress or NullProgress()
    warmup = dev.warmup if warmup is None else warmup
    names = [n for n in refs.names_for(dev) if ref_names is None or n in ref_names]
    results = []
    graph_key, A, A_err, G, A_dev_cache = None, None, None, None, {}
    progress.start(len(cases))
    for case in cases:
        why = measure.unsupported_dtype(dev, case.dtype)
        if why is not None:  # before the graph is built: a skipped case needs none
            row = _base_row(case, A if case.graph == graph_key else None, dev)
            row.update(skipped=why, skip_kind="dtype")
            results.append(row)
            progress.advance(case.label)
            continue
        if case.graph != graph_key:
            graph_key, A, A_err, G, A_dev_cache = case.graph, None, None, None, {}
            est = estimated_nnz(case.graph)
            if max_nnz is None or est is None or est <= max_nnz:
                progress.status(f"building {case.graph.name}")
                t0 = time.perf_counter()
                try:
                    A = case.graph.build()
                except Exception as e:  # a user's file may be malformed: report it as the case's error
                    A_err = f"{type(e).__name__}: {e}"
                build_s = time.perf_counter() - t0
        progress.status(case.label)
        row = _base_row(case, A, dev)
        if A is None:
            row["skipped"] = A_err or f"graph has more than --max-nnz={max_nnz} stored entries"
            row["skip_kind"] = "error" if A_err else "max_nnz"
            row["error"] = A_err
            results.append(row)
            progress.advance(case.label)
            continue
        if max_nnz is not None and A.nnz > max_nnz:
            row["skipped"] = f"nnz {A.nnz} > --max-nnz={max_nnz}"
            row["skip_kind"] = "max_nnz"
            results.append(row)
            progress.advance(case.label)
            continue
        row["graph_build_s"] = round(build_s, 3)
        try:
            if G is None and dev.torch_device is not None and any(n in ("torch.sparse", "pyg") for n in names):
                G = refs.TorchGraph(A, dev.torch_device)
            _run_one(case, A, G, dev, row, names, repeat, warmup, seed, check_rows, A_dev_cache, stat)
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"
            row["verified"] = False
            row["traceback"] = traceback.format_exc(limit=6)
            log(f"error in {case.label}: {row['error']}")
        results.append(row)
        progress.advance(case.label)
    progress.stop()
    return results


def _base_row(case, A, dev):
    M, K = (A.shape if A is not None else (None, None))
    deg = A.degrees() if A is not None else None
    return {
        "suite": case.suite, "case": case.label, "op": case.op, "variant": case.variant,
        "graph": case.graph.name, "M": M, "K": K, "nnz": None if A is None else A.nnz,
        "max_degree": None if deg is None or not deg.size else int(deg.max()),
        "weighted": None if A is None else A.val is not None,
        "width": case.width, "heads": case.heads, "reduce": case.reduce if case.op == "spmm" else None,
        "sddmm_op": case.sddmm_op if case.op != "spmm" else None, "edge": case.edge if case.op == "fusedmm" else None,
        "dtype": case.dtype, "arg": case.arg if case.op == "spmm" else None,
        "y_is_z": case.y_is_z if case.op == "fusedmm" else None, "device": dev.kind, "verified": False, "checked_rows": None, "max_rel_err": None, "error": None,
        "ours_s": None, "ours_min_s": None, "repeats": None, "refs": {},
    }


def _copies(dev, host, dtype):
    return dev.copies_for(host, measure.itemsize(dtype)) if hasattr(dev, "copies_for") else 1


def _run_one(case, A, G, dev, row, names, repeat, warmup, seed, check_rows, A_dev_cache, stat="median"):
    # host inputs are float32 holding values of case.dtype; ours get them in case.dtype
    host = measure.make_inputs(case, A, seed)
    fn = measure.ours(case)
    n_copies = _copies(dev, host, case.dtype)
    ours_inputs = [{k: dev.put(v, case.dtype) for k, v in host.items()} for _ in range(n_copies)]
    like = ours_inputs[0]["X"]
    A_dev = A_dev_cache.get("A")
    if A_dev is None:
        A_dev = A_dev_cache["A"] = dev.put_csr(A, like)

    # 1. correctness first: our result (the first call also compiles the kernel) against the reference
    value, arg = measure.split(case, fn(A_dev, ours_inputs[0]))
    result = dev.host(value)
    arg = None if arg is None else dev.host(arg)
    rows = measure.sample_rows(A, check_rows, seed)
    ok, err, msg = measure.check(case, A, host, result, rows, arg_host=arg)
    del arg
    row.update(verified=ok, max_rel_err=err, checked_rows="all" if rows is None else int(len(rows)))
    if not ok:
        row["error"] = f"result differs from gnnsparse.reference: {msg}"
        return

    # 2. every reference library on the same inputs: set up, first result compared with ours
    torch_inputs = fp32_inputs = None
    agree_rtol = max(1e-3, measure.RTOL[case.dtype])
    fns = {"ours": (lambda i: fn(A_dev, i), ours_inputs)}
    for name in names:
        desc, setup, kind, _ = refs.REFERENCES[name]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rfn = setup(case, dev, A, G, A_dev)
                if kind == "host":
                    inputs = [host]
                elif kind == "ours":
                    inputs = ours_inputs
                elif kind == "fp32":
                    if fp32_inputs is None:
                        fp32_inputs = [{k: dev.put(v) for k, v in host.items()}
                                       for _ in range(_copies(dev, host, "float32"))]
                    inputs = fp32_inputs
                else:
                    if torch_inputs is None:
                        torch_inputs = _torch_inputs(dev, host, ours_inputs)
                    inputs = torch_inputs
                first = dev.host(rfn(inputs[0]))
        except refs.Unsupported:
            continue
        except Exception as e:  # a reference that fails (or would not fit) is reported, not fatal
            row["refs"][name] = {"impl": refs.describe(name, dev), "error": f"{type(e).__name__}: {e}"}
            if dev.kind == "cuda" and hasattr(dev, "torch"):
                dev.torch.cuda.empty_cache()
            continue
        row["refs"][name] = {"impl": refs.describe(name, dev), "agrees": measure.agree(first, result, agree_rtol)}
        fns[name] = (rfn, inputs)
        del first
        if dev.kind == "cpu" and kind == "torch":
            # torch's OpenMP pool can stall a whole time slice per parallel region on a small, busy
            # machine: time torch with one thread as well and keep its better figure
            import torch

            nt = torch.get_num_threads()
            if nt > 1:
                fns[name + ONE_THREAD] = (rfn, inputs, lambda: torch.set_num_threads(1),
                                          lambda nt=nt: torch.set_num_threads(nt))

    # 3. time them all on the device's schedule (CPU: alternating blocks; GPU: interleaved calls)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        times = dev.time_many(fns, warmup, repeat)
    pick = measure.median if stat == "median" else (lambda v: float(min(v)))
    ts = times.pop("ours")
    t = pick(ts)
    row.update(ours_s=t, ours_median_s=measure.median(ts), ours_min_s=float(min(ts)), stat=stat, repeats=len(ts),
               rotated_inputs=n_copies)
    nbytes, flops = measure.model(case, A)
    row.update(bytes=int(nbytes), flops=int(flops), gbps=nbytes / t / 1e9, gflops=flops / t / 1e9)
    for name in [n for n in times if n.endswith(ONE_THREAD)]:
        one = times.pop(name)
        base = name[: -len(ONE_THREAD)]
        a, b = pick(times[base]), pick(one)
        row["refs"][base].update(s_default_threads=a, s_one_thread=b,
                                 threads=1 if b < a else _torch_threads())
        if b < a:
            times[base] = one
    for name, rts in times.items():
        rt = pick(rts)
        row["refs"][name].update(s=rt, s_median=measure.median(rts), s_min=float(min(rts)), ratio=rt / t)


def _torch_threads():
    import torch

    return torch.get_num_threads()


def _torch_inputs(dev, host, ours_inputs):
    import torch

    if dev.kind == "cpu":
        return [{k: torch.from_numpy(v) for k, v in host.items()}]
    return ours_inputs


def summarize(results, copy_bw_gbps=None):
    """Per (op, variant, reference): the geometric mean of the ratios (reference time / gnnsparse
    time) over the verified cases. Keyed "spmm sum vs scipy", so a geomean always covers one
    variant: spmm sum and spmm mean (which scipy also runs) are never mixed under one name."""
    out = {}
    for r in results:
        if not r.get("verified") or not r.get("ours_s"):
            continue
        for name, ref in r["refs"].items():
            if "ratio" in ref:
                out.setdefault((r["op"], r["variant"], name), []).append(ref["ratio"])
    return {f"{op} {variant} vs {name}": {"geomean_ratio": _geo(v), "cases": len(v),
                                         "wins": int(sum(x >= 1 for x in v))}
            for (op, variant, name), v in sorted(out.items())}


def _geo(v):
    return float(np.exp(np.mean(np.log(v)))) if v else None


def targets(summary, results, device):
    """The project's performance goals this run can speak to: [{target, measured, cases, met}]
    (`gnnsparse bench --targets`; developers' bookkeeping, not part of the default output).

    Stated in terms the run itself measures (ratios to references run in the same process, fractions
    of the copy bandwidth measured in the same run), so they read the same on any machine. Geomean
    goals read their number from `summary` (one op and variant each), so it is the number the
    summary prints under the same name."""
    ok = [r for r in results if r.get("verified") and r.get("ours_s")]

    def spmm_sum(r, w=None):  # float32 features (rows of other dtypes have their own goal)
        return (r["op"] == "spmm" and r["reduce"] == "sum" and r.get("dtype", "float32") == "float32"
                and (w is None or r["width"] == w))

    out = []

    def add(name, keys, goal):
        keys = [k for k in keys if k in summary]
        vals = [summary[k] for k in keys]
        if vals:
            n = sum(v["cases"] for v in vals)
            g = float(np.exp(sum(v["cases"] * np.log(v["geomean_ratio"]) for v in vals) / n))
            out.append({"target": name, "measured": f"geomean {g:.2f}× ({', '.join(keys)})", "cases": n,
                        "met": bool(g >= goal)})

    def keys(op, ref, pred=lambda r: True):
        return sorted({f"{r['op']} {r['variant']} vs {ref}" for r in ok if r["op"] == op and pred(r)})

    if device == "cpu":
        add("SpMM sum >= torch.sparse.mm (CPU)", ["spmm sum vs torch.sparse"], 1.0)
        add("SpMM sum >= 2x scipy.sparse", ["spmm sum vs scipy"], 2.0)
        return out
    add("SpMM sum >= torch.sparse.mm (cuSPARSE)", ["spmm sum vs torch.sparse"], 1.0)
    add("SDDMM >= torch.sparse.sampled_addmm (cuSPARSE)", keys("sddmm", "torch.sparse"), 1.0)
    add("FusedMM >= 1.3x our SDDMM + SpMM", keys("fusedmm", "unfused", lambda r: not r.get("y_is_z")), 1.3)
    add("FusedMM with Y = Z >= 1.7x our SDDMM + SpMM", keys("fusedmm", "unfused", lambda r: bool(r.get("y_is_z"))), 1.7)
    bf = [r for r in ok if r["op"] == "spmm" and r.get("dtype") == "bfloat16" and r["width"] == 128
          and "ratio" in r["refs"].get("ours_fp32", {})]
    if bf:
        worst = min(r["refs"]["ours_fp32"]["ratio"] for r in bf)
        out.append({"target": "SpMM bf16 >= 1.8x our fp32 SpMM at C=128", "cases": len(bf), "met": bool(worst >= 1.8),
                    "measured": f"worst {worst:.2f}x ({', '.join(r['graph'] for r in bf)})"})
    for what, pred, goal in (("SpMM", spmm_sum, 0.95),
                             ("SDDMM", lambda r: r["op"] == "sddmm" and r.get("sddmm_op") == "dot", 0.90)):
        fr = [r["frac_copy_bw"] for r in ok if pred(r) and r.get("frac_copy_bw") and r["nnz"] >= 5_000_000]
        if fr:
            out.append({"target": f"{what} >= {goal:.0%} of the bytes-model floor (graphs with >= 5M edges)",
                        "measured": f"median {np.median(fr):.0%} of copy bandwidth (min {min(fr):.0%})",
                        "cases": len(fr), "met": bool(min(fr) >= goal)})
    uni = {(r["nnz"], r["width"]): r["ours_s"] for r in ok if spmm_sum(r) and r["graph"].startswith("uniform")}
    pl = [(r["ours_s"] / uni[(r["nnz"], r["width"])]) for r in ok
          if spmm_sum(r) and r["graph"].startswith("rmat") and (r["nnz"], r["width"]) in uni]
    if pl:
        out.append({"target": "power-law SpMM time <= 1.15x the uniform graph of equal nnz",
                    "measured": f"worst {max(pl):.2f}x", "cases": len(pl), "met": bool(max(pl) <= 1.15)})
    return out
