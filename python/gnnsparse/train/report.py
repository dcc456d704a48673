"""What `gnnsparse train` prints: per-epoch lines, the time estimate, the summary table and the
comparisons (quantized vs float32, gnnsparse vs PyG), every ratio with both times and in words."""
from __future__ import annotations

import sys

from .._cli import compare_times, fmt_duration, print_table

__all__ = ["say", "epoch_line", "estimate_line", "summary_table", "comparisons", "gib"]

CAPTION = ("ms/epoch: median train step (forward + backward + optimizer); test%: test accuracy at the best "
           "validation epoch, last%: at the last epoch; peak / extra: GPU memory (GiB) at the peak and above the data; "
           "2 runs: the loss sequences of two seeded runs")


def say(text: str = "", file=None):
    """One line of output, flushed (progress on a slow run shows as it happens, also in a pipe)."""
    print(text, file=sys.stdout if file is None else file, flush=True)


def gib(b) -> str:
    return "-" if b is None else f"{b / 2**30:.2f}"


def epoch_line(tag: str, epoch: int, r) -> str:
    return (f"{tag} {epoch + 1:4d}  loss {r.losses[-1]:.4f}  acc train {100 * r.train_acc[-1]:4.1f} "
            f"val {100 * r.val_acc[-1]:4.1f} test {100 * r.test_acc[-1]:4.1f}  {r.epoch_ms[-1]:7.1f} ms")


def estimate_line(seconds_per_epoch: float, epochs_left: int, what: str) -> str:
    """"about 1 h 05 min left (…)": the remaining epochs of the whole command at the pace so far
    (evaluation included)."""
    return f"about {fmt_duration(seconds_per_epoch * epochs_left)} left ({what}, at {seconds_per_epoch:.2f} s per epoch)"


def summary_table(results: dict, runs: int, plain: bool = False):
    rows = []
    for fw, rs in results.items():
        r = rs[0]
        det = "-" if runs < 2 else ("bitwise" if all(x.loss_bits == r.loss_bits for x in rs) else "differ")
        rows.append([r.framework, r.model, f"{r.median_epoch_ms:.2f}", f"{100 * r.best_val_test:.2f}",
                     f"{100 * r.test_acc[-1]:.2f}", gib(r.peak_mem), gib(r.extra_mem), det])
    head = ["framework", "model", "ms/epoch", "test%", "last%", "peak GiB", "extra", "2 runs"]
    print_table(head, rows, title="training summary", caption=CAPTION, left=2, plain=plain)


def comparisons(results: dict) -> list:
    """The lines comparing the runs: quantized vs float32 and gnnsparse vs PyG (median epoch
    times, accuracy, peak memory)."""
    out = []
    if "gnnsparse" in results and "quant" in results:
        f, q = results["gnnsparse"][0], results["quant"][0]
        width = q.framework[len("gnnsparse quantized "):]
        out.append(f"quantized ({width}) vs float32: test accuracy {100 * q.best_val_test:.2f} vs "
                   f"{100 * f.best_val_test:.2f} % ({100 * q.best_val_test / max(f.best_val_test, 1e-12):.2f} % of "
                   f"float32's; last epoch {100 * q.test_acc[-1]:.2f} vs {100 * f.test_acc[-1]:.2f}); epoch time "
                   + compare_times("quantized", q.median_epoch_ms, "float32", f.median_epoch_ms))
    if "gnnsparse" in results and "pyg" in results:
        a, b = results["gnnsparse"][0], results["pyg"][0]
        line = "gnnsparse vs PyG: epoch time " + compare_times("gnnsparse", a.median_epoch_ms, "PyG", b.median_epoch_ms)
        if a.peak_mem and b.peak_mem:
            line += f"; peak GPU memory {gib(a.peak_mem)} vs {gib(b.peak_mem)} GiB ({a.peak_mem / b.peak_mem:.2f}× PyG's)"
        line += f"; test accuracy {100 * (a.best_val_test - b.best_val_test):+.2f} points"
        out.append(line)
    return out
