"""What `gnnsparse train` prints: per-epoch lines, the time estimate, the summary table and the
comparisons (quantized vs float32, gnnsparse vs PyG), every ratio with both times and in words."""
from __future__ import annotations

import sys

from .._cli import compare_times, fmt_duration, print_table

__all__ = ["say", "epoch_line", "estimate_line", "summary_table", "comparisons", "gib", "scale_lines"]

CAPTION = ("ms/epoch: median train step (forward + backward + optimizer); test%: test accuracy at the best "
           "validation epoch, last%: at the last epoch; peak / extra: GPU memory (GiB) at the peak and above the data "
           "(torch.cuda.max_memory_allocated; n/a on the CPU); 2 runs: the loss sequences of two seeded runs. With "
           "--seeds N: means over the seeds, test% as mean +- standard deviation (worst)")


def say(text: str = "", file=None):
    """One line of output, flushed (progress on a slow run shows as it happens, also in a pipe)."""
    print(text, file=sys.stdout if file is None else file, flush=True)


def gib(b) -> str:
    return "n/a" if b is None else f"{b / 2**30:.2f}"


def _by_seed(rs) -> list:
    """The first run of every seed, in seed order."""
    first = {}
    for r in rs:
        first.setdefault(r.seed, r)
    return [first[k] for k in sorted(first, key=lambda k: (k is None, k or 0))]


def _mean(v):
    return sum(v) / len(v) if v else float("nan")


def _std(v):
    m = _mean(v)
    return (sum((x - m) ** 2 for x in v) / (len(v) - 1)) ** 0.5 if len(v) > 1 else 0.0


def _peak(rs):
    p = [r.peak_mem for r in rs if r.peak_mem is not None]
    return max(p) if p else None


def scale_lines(tag: str, r) -> list:
    """What the quantized run's delayed scales did: per produced tensor, the steps whose absmax
    outgrew the scale in use (elements clamped to +-qmax) and the largest growth."""
    if not r.quant_scales:
        return []
    parts = []
    for name, st in sorted(r.quant_scales.items()):
        parts.append(f"{name} {st['saturated_steps']}/{st['steps']} steps saturated (max growth "
                     f"{st['max_growth']:.3f}x)")
    return [f"{tag} delayed scales (the producers' outputs; growth > 1: clamped at +-qmax): " + "; ".join(parts)]


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
        per = _by_seed(rs)
        r = per[0]
        if runs < 2:
            det = "-"
        else:
            same = all(x.loss_bits == next(y for y in rs if y.seed == x.seed).loss_bits for x in rs)
            det = "bitwise" if same else "differ"
        tests = [100 * x.best_val_test for x in per]
        test = f"{tests[0]:.2f}" if len(per) == 1 else f"{_mean(tests):.2f} +- {_std(tests):.2f} ({min(tests):.2f})"
        extra = [x.extra_mem for x in per if x.extra_mem is not None]
        rows.append([r.framework, r.model, f"{_mean([x.median_epoch_ms for x in per]):.2f}", test,
                     f"{_mean([100 * x.test_acc[-1] for x in per]):.2f}", gib(_peak(per)),
                     gib(max(extra) if extra else None), det])
    head = ["framework", "model", "ms/epoch", "test%", "last%", "peak GiB", "extra", "2 runs"]
    if any(len(_by_seed(rs)) > 1 for rs in results.values()):
        head[3] += f" ({len(_by_seed(next(iter(results.values()))))} seeds)"
    print_table(head, rows, title="training summary", caption=CAPTION, left=2, plain=plain)


def _versus(a_rs, b_rs, a_label, b_label) -> str:
    """Accuracy (per seed: a / b), epoch time and peak memory of a against b."""
    pa, pb = _by_seed(a_rs), _by_seed(b_rs)
    pairs = [(x, next((y for y in pb if y.seed == x.seed), None)) for x in pa]
    pairs = [(x, y) for x, y in pairs if y is not None]
    ratios = [100 * x.best_val_test / max(y.best_val_test, 1e-12) for x, y in pairs]
    acc_a = _mean([100 * x.best_val_test for x, _ in pairs])
    acc_b = _mean([100 * y.best_val_test for _, y in pairs])
    seeds = f" over {len(pairs)} seeds" if len(pairs) > 1 else ""
    line = (f"test accuracy{seeds} {acc_a:.2f} vs {acc_b:.2f} % ({_mean(ratios):.2f} % of {b_label}'s"
            + (f", worst seed {min(ratios):.2f} %" if len(pairs) > 1 else "") + "; last epoch "
            f"{_mean([100 * x.test_acc[-1] for x, _ in pairs]):.2f} vs {_mean([100 * y.test_acc[-1] for _, y in pairs]):.2f})"
            "; epoch time " + compare_times(a_label, _mean([x.median_epoch_ms for x, _ in pairs]), b_label,
                                           _mean([y.median_epoch_ms for _, y in pairs])))
    ma, mb = _peak(pa), _peak(pb)
    if ma and mb:
        line += f"; peak GPU memory {gib(ma)} vs {gib(mb)} GiB ({ma / mb:.2f}x {b_label}'s)"
    else:
        line += "; peak memory n/a (CPU)"
    return line


def comparisons(results: dict) -> list:
    """The lines comparing the runs: quantized vs float32 and gnnsparse vs PyG (median epoch
    times, accuracy, peak memory; per seed and over the seeds with --seeds)."""
    out = []
    if "gnnsparse" in results and "quant" in results:
        q = results["quant"][0]
        width = q.framework[len("gnnsparse quantized "):]
        out.append(f"quantized ({width}) vs float32: " + _versus(results["quant"], results["gnnsparse"], "quantized",
                                                                  "float32"))
    if "gnnsparse" in results and "pyg" in results:
        out.append("gnnsparse vs PyG: " + _versus(results["gnnsparse"], results["pyg"], "gnnsparse", "PyG"))
    return out
