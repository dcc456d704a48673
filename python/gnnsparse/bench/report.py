"""Terminal table (rich when installed, plain text otherwise), progress, JSON and CSV output."""
from __future__ import annotations

import csv
import json
import math
import os
import sys

REF_ORDER = ("torch.sparse", "scipy", "pyg", "unfused", "ours_fp32")


def fmt_time(s):
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def ref_columns(results):
    present = {n for r in results for n in r.get("refs", {})}
    return [n for n in REF_ORDER if n in present] + sorted(present - set(REF_ORDER))


def table_rows(results):
    """(header, rows of strings, status per row) shared by the rich and the plain table."""
    names = ref_columns(results)
    header = (["op", "variant", "graph", "C", "nnz", "ours"] + [f"×{n}" for n in names]
              + ["GB/s", "floor", "GFLOP/s", "check"])
    rows, status = [], []
    for r in results:
        if r.get("skipped") and not r.get("error"):
            continue
        cells = [r["op"], r["variant"], r["graph"], str(r["width"]),
                 _si(r["nnz"]) if r.get("nnz") is not None else "-", fmt_time(r.get("ours_s"))]
        for n in names:
            ref = r.get("refs", {}).get(n)
            if ref is None:
                cells.append("-")
            elif "error" in ref:
                cells.append("error")
            elif "ratio" not in ref:
                cells.append("-")
            else:
                cells.append(f"{ref['ratio']:.2f}" + ("" if ref.get("agrees", True) else "≠"))
        cells.append(f"{r['gbps']:.1f}" if r.get("gbps") is not None else "-")
        cells.append(f"{100 * r['frac_copy_bw']:.0f} %" if r.get("frac_copy_bw") is not None else "-")
        cells.append(f"{r['gflops']:.1f}" if r.get("gflops") is not None else "-")
        if r.get("skipped"):
            st = "skip"
        elif r.get("verified"):
            st = "ok" if r.get("checked_rows") == "all" else f"ok {r['checked_rows']}r"
        else:
            st = "FAIL"
        cells.append(st)
        rows.append(cells)
        status.append(st)
    return header, rows, status


def _si(n):
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.3g}{suf}"
    return str(n)


def print_table(results, meta, plain=False):
    """The results table on stdout: rich on a terminal (fitted to its width, nothing cut), plain
    text in a pipe or a file (or with plain=True)."""
    from .._cli import print_table as _print_table

    header, rows, status = table_rows(results)
    title = f"gnnsparse bench · {meta['device_name']} · {meta.get('stat', 'median')} of {meta['repeat']}"
    foot = ("×ref = ref time / ours (> 1: gnnsparse faster; ≠: the reference's result differs); "
            f"copy bandwidth {meta['copy_bandwidth']['device_gbps']:.1f} GB/s (read+write); "
            "GB/s from the bytes model; floor: the bytes' time at that bandwidth / ours (> 100 %: "
            "served from caches); ok Nr: N sampled rows checked")
    styles = ["red" if st == "FAIL" else ("dim" if st == "skip" else None) for st in status]
    _print_table(header, rows, title=title, caption=foot, left=3, styles=styles, plain=plain)


def markdown_table(results):
    """The table as GitHub markdown (what docs/performance.md shows)."""
    header, rows, _ = table_rows(results)
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i < 3 else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def summary_line(key, v):
    """"spmm sum vs scipy: gnnsparse 2.85× faster (geomean of 5 cases, faster in 5)"."""
    from .._cli import speed_words

    return (f"{key}: gnnsparse {speed_words(1.0, v['geomean_ratio'])} (geomean of {v['cases']} case"
            f"{'s' if v['cases'] != 1 else ''}, faster in {v['wins']})")


def print_summary(summary, echo=print):
    for k, v in summary.items():
        echo("  " + summary_line(k, v))


def skipped_lines(results):
    """Lines on the cases skipped without an error: one per case the device cannot run (with the
    reason), one count for those --max-nnz left out."""
    skipped = [r for r in results if r.get("skipped") and not r.get("error")]
    by_nnz = [r for r in skipped if r.get("skip_kind") == "max_nnz"]
    out = [f"skipped {r['case']}: {r['skipped']}" for r in skipped if r.get("skip_kind") != "max_nnz"]
    if by_nnz:
        out.append(f"{len(by_nnz)} case(s) skipped by --max-nnz (listed in results.json)")
    return out


# ---------------------------------------------------------------- files
def _finite(x):
    """x with inf/NaN floats replaced by None, so the file is strict JSON."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def write_json(path, meta, results, summary):
    doc = _finite({"meta": meta, "summary": summary, "results": results})
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=_jsonable, allow_nan=False)


def _jsonable(x):
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return x.item()
    except ImportError:
        pass
    return str(x)


CSV_FIELDS = ["suite", "case", "op", "variant", "graph", "M", "K", "nnz", "max_degree", "weighted", "width", "heads",
              "reduce", "sddmm_op", "edge", "dtype", "arg", "y_is_z", "device", "verified", "checked_rows", "max_rel_err",
              "stat", "ours_s", "ours_median_s", "ours_min_s", "repeats", "bytes", "flops", "gbps", "frac_copy_bw",
              "gflops", "skipped", "error"]


def write_csv(path, results):
    names = ref_columns(results)
    keys = ("s", "s_median", "s_min", "ratio", "agrees")
    fields = CSV_FIELDS + [f"{n}_{k}" for n in names for k in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in results:
            flat = {k: r.get(k) for k in CSV_FIELDS}
            for n in names:
                ref = r.get("refs", {}).get(n, {})
                for k in keys:
                    flat[f"{n}_{k}"] = ref.get(k)
            w.writerow(flat)


def write_markdown(path, meta, results, summary):
    """The table with its date, command, device and copy bandwidth: what docs/performance.md pastes."""
    cb = meta["copy_bandwidth"]
    lines = [f"Date: {meta['date']} · command: `{meta['command']}`", "",
             f"Device: {meta['device_name']} · host: {meta['host']['cpus']} CPUs, load average at end "
             f"{meta['host'].get('load_average_at_end')} · {meta.get('stat', 'median')} of {meta['repeat']} · "
             f"copy bandwidth {cb['device_gbps']:.1f} GB/s read+write ({cb['method']})", "",
             f"Timing: {meta.get('timing', '')}", "",
             "References: " + "; ".join(f"**{k}** = {v}" for k, v in meta["references"].items()), "",
             markdown_table(results), ""]
    skipped = skipped_lines(results)
    if skipped:
        lines += ["- " + line for line in skipped] + [""]
    lines += ["×ref = reference time / gnnsparse time (> 1: gnnsparse faster). GB/s: " + meta["bytes_model"] + "; "
              "floor: the bytes' time at the copy bandwidth / gnnsparse time (GB/s as % of the copy bandwidth; "
              "> 100 %: served from caches).", "",
              "Geometric means over the verified cases of each op and variant:", ""]
    lines += ["- " + summary_line(k, v) for k, v in summary.items()]
    if meta.get("targets"):
        lines += ["", "Project goals (measured in this run):", ""]
        lines += [f"- {'met' if g['met'] else '**missed**'}: {g['target']}: {g['measured']} over {g['cases']} cases"
                  for g in meta["targets"]]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def ensure_dir(d):
    os.makedirs(d, exist_ok=True)
    return d


# ---------------------------------------------------------------- progress
class Progress:
    """rich progress bar when available (and stderr is a terminal or force=True), else tqdm, else a
    line per case on stderr."""

    def __init__(self, enabled=True, console=None):
        self.enabled = enabled
        self.console = console
        self._impl = None

    def start(self, total):
        if not self.enabled:
            return
        try:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RP, TextColumn, TimeElapsedColumn

            self._impl = ("rich", RP(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=self.console, transient=True))
            self._impl[1].start()
            self._task = self._impl[1].add_task("bench", total=total)
            return
        except ImportError:
            pass
        try:
            from tqdm import tqdm

            self._impl = ("tqdm", tqdm(total=total, file=sys.stderr, leave=False))
        except ImportError:
            self._impl = ("plain", [0, total])

    def status(self, text):
        if self._impl is None:
            return
        kind, p = self._impl
        if kind == "rich":
            p.update(self._task, description=text[:70])
        elif kind == "tqdm":
            p.set_description_str(text[:60])

    def advance(self, text=""):
        if self._impl is None:
            return
        kind, p = self._impl
        if kind == "rich":
            p.advance(self._task)
        elif kind == "tqdm":
            p.update(1)
        else:
            p[0] += 1
            print(f"[{p[0]}/{p[1]}] {text}", file=sys.stderr, flush=True)

    def stop(self):
        if self._impl is None:
            return
        kind, p = self._impl
        if kind in ("rich",):
            p.stop()
        elif kind == "tqdm":
            p.close()
        self._impl = None
