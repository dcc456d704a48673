"""PNG plots with matplotlib's Agg backend: speedup per case against each reference, and achieved
bandwidth (bytes model) against the copy bandwidth measured in the same run."""
from __future__ import annotations

import os

from .report import ref_columns


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _short(r):
    return f"{r['op']} {r['variant']} · {r['graph']} · C={r['width']}"


MAX_BARS = 60  # above this many cases the plots become scatter plots against nnz, one panel per op


def _scatter_by_op(plt, rows, series, ylabel, title, hline=None, hlabel=None, logy=True):
    """One panel per op: y from series(r) -> {label: value} against nnz (log-log)."""
    ops = [o for o in ("spmm", "sddmm", "fusedmm") if any(r["op"] == o for r in rows)]
    fig, axes = plt.subplots(1, max(1, len(ops)), figsize=(5 * max(1, len(ops)), 4.2), squeeze=False)
    every = sorted({k for r in rows for k in series(r)})
    color = {lab: f"C{i % 10}" for i, lab in enumerate(every)}
    for ax, op in zip(axes[0], ops):
        sub = [r for r in rows if r["op"] == op]
        for lab in every:
            pts = [(r["nnz"], series(r)[lab]) for r in sub if lab in series(r)]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=14, label=lab, alpha=0.8, color=color[lab])
        if hline is not None:
            ax.axhline(hline, color="tab:red" if hlabel else "black", lw=0.8, ls="--" if hlabel else "-",
                       label=hlabel)
        ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel("stored entries (nnz)")
        ax.set_title(op, fontsize=9)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel(ylabel)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def speedup_plot(results, meta, path):
    plt = _pyplot()
    rows = [r for r in results if r.get("verified") and r.get("refs")]
    names = [n for n in ref_columns(rows) if any("ratio" in r["refs"].get(n, {}) for r in rows)]
    if len(rows) > MAX_BARS:
        fig = _scatter_by_op(plt, rows, lambda r: {f"vs {n}": v["ratio"] for n, v in r["refs"].items() if "ratio" in v},
                             "reference time / gnnsparse time (> 1: faster)",
                             f"gnnsparse speedup · {meta['device_name']}", hline=1.0)
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        return path
    h = max(2.5, 0.32 * len(rows) * max(1, len(names)) ** 0.5 + 1.5)
    fig, ax = plt.subplots(figsize=(10, h))
    if rows and names:
        bar = 0.8 / len(names)
        for j, n in enumerate(names):
            ys = [i + (j - (len(names) - 1) / 2) * bar for i in range(len(rows))]
            vals = [r["refs"].get(n, {}).get("ratio", 0.0) or 0.0 for r in rows]
            ax.barh(ys, vals, height=bar, label=f"vs {n}")
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([_short(r) for r in rows], fontsize=7)
        ax.invert_yaxis()
        ax.axvline(1.0, color="black", lw=0.8)
        ax.set_xscale("log")
        ax.legend(fontsize=8, loc="lower right")
    else:
        ax.text(0.5, 0.5, "no verified case with a reference", ha="center", va="center")
    ax.set_xlabel("speedup = reference time / gnnsparse time (log; > 1: gnnsparse faster)")
    ax.set_title(f"gnnsparse speedup · {meta['device_name']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def bandwidth_plot(results, meta, path):
    plt = _pyplot()
    rows = [r for r in results if r.get("verified") and r.get("gbps") is not None]
    cb = meta["copy_bandwidth"]
    if len(rows) > MAX_BARS:
        fig = _scatter_by_op(plt, rows, lambda r: {"gnnsparse (bytes model)": r["gbps"]}, "GB/s",
                             f"achieved bandwidth · {meta['device_name']}", hline=cb["device_gbps"],
                             hlabel=f"copy {cb['device_gbps']:.0f} GB/s (read+write)", logy=False)
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        return path
    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.3 * len(rows) + 1.5)))
    if rows:
        ax.barh(range(len(rows)), [r["gbps"] for r in rows], color="tab:blue", label="gnnsparse (bytes model)")
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([_short(r) for r in rows], fontsize=7)
        ax.invert_yaxis()
    ax.axvline(cb["device_gbps"], color="tab:red", ls="--", label=f"copy {cb['device_gbps']:.1f} GB/s (read+write)")
    if cb.get("host_gbps"):
        ax.axvline(cb["host_gbps"], color="tab:gray", ls=":", label=f"host numpy copy {cb['host_gbps']:.1f} GB/s")
    ax.set_xlabel("GB/s: (CSR once + gathered rows + output once) / time")
    ax.set_title(f"achieved bandwidth · {meta['device_name']}", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def write_plots(results, meta, out_dir):
    """[paths] of the PNGs written; [] when matplotlib is missing."""
    try:
        _pyplot()
    except ImportError:
        return []
    return [speedup_plot(results, meta, os.path.join(out_dir, "speedup.png")),
            bandwidth_plot(results, meta, os.path.join(out_dir, "bandwidth.png"))]
