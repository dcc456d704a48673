"""What every `gnnsparse` command shares: a user's mistake is one line on stderr and exit status 2
(never a traceback), output survives a closed pipe (`gnnsparse info | head -2`), tables print in
full when the output is not a terminal, and speed ratios are said in words with both times."""
from __future__ import annotations

import argparse
import io
import os
import sys

#: exit status of a command whose output pipe was closed by the reader (128 + SIGPIPE, as a shell
#: reports a C tool killed by SIGPIPE)
EXIT_PIPE = 141
EXIT_USAGE = 2


class UsageError(Exception):
    """A mistake in what the user asked for (bad flag value, missing file, no such device, a missing
    optional dependency): printed as one line `prog: error: message`, exit status 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with one-line errors: `prog: error: message (prog --help lists the options)`."""

    def error(self, message):  # argparse calls this for every bad argument; it must not return
        sys.stderr.write(f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")
        sys.exit(EXIT_USAGE)


def positive_int(what: str, minimum: int = 1):
    """An argparse type: an integer >= minimum (1: "positive", 0: "non-negative"), else an error
    naming `what` (the flag)."""
    kind = {1: "positive", 0: "non-negative"}.get(minimum, f">= {minimum}")

    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a {kind} integer, got {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"{what} must be a {kind} integer, got {v}")
        return v
    return parse


def run(prog: str, fn, *args) -> int:
    """fn(*args) as a command, returning its exit status: UsageError -> one line and 2; argparse's
    exits (--help 0, a bad argument 2) as their status; a closed stdout pipe -> quiet, 141; Ctrl-C
    -> one line and 130. Everything else is a bug and keeps its traceback."""
    try:
        rc = fn(*args)
        sys.stdout.flush()  # a closed pipe shows here, inside the try, not at interpreter exit
        return int(rc or 0)
    except UsageError as e:
        _flush_quietly()
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as e:  # argparse: --help (0) and bad arguments (2, its one line already printed)
        if e.code is None or isinstance(e.code, int):
            _flush_quietly()
            return int(e.code or 0)
        raise
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PIPE
    except KeyboardInterrupt:
        _flush_quietly()
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


def _flush_quietly():
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()


def _silence_stdout():
    """Point stdout at /dev/null so the interpreter's last flush does not fail again (the recipe of
    the Python docs, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout without a file descriptor (captured in tests)
        pass


def is_terminal(stream=None) -> bool:
    stream = sys.stdout if stream is None else stream
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def require_torch(what: str):
    """Import torch, or a UsageError that says how to install it."""
    try:
        import torch
    except ImportError as e:
        raise UsageError(f"{what} needs PyTorch, which is not installed ({e}): pip install \"gnnsparse[torch]\" "
                         "(from a checkout: pip install \".[torch]\"; README: 'Set up' for a CPU-only torch)") from None
    return torch


def fmt_ms(ms: float, like: float = None) -> str:
    """A time in ms as "4.36 ms", "812 ms" or "23.1 s", in the unit `like` (another time) would get,
    so two times side by side share their unit."""
    ref = max(ms, like) if like is not None else ms
    if ref >= 10_000:
        return f"{ms / 1e3:.1f} s"
    if ref >= 100:
        return f"{ms:.0f} ms"
    return f"{ms:.2f} ms"


def speed_words(ours: float, other: float) -> str:
    """"1.81× faster" / "1.81× slower" / "as fast": `ours` against `other`, both times (any unit)."""
    if not (ours > 0 and other > 0):
        return "not comparable"
    r = other / ours
    if abs(r - 1) < 0.005:
        return "as fast"
    return f"{r:.2f}× faster" if r > 1 else f"{1 / r:.2f}× slower"


def compare_times(label: str, ours_ms: float, other_label: str, other_ms: float) -> str:
    """"gnnsparse 7.91 ms vs PyG 4.36 ms per epoch: 1.81× slower" (the words read from the left)."""
    return (f"{label} {fmt_ms(ours_ms, other_ms)} vs {other_label} {fmt_ms(other_ms, ours_ms)}: "
            f"{speed_words(ours_ms, other_ms)}")


def fmt_duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m} min {s:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def plain_table(header, rows, title: str = "", caption: str = "", left: int = 1) -> str:
    """The table as aligned plain text, nothing cut: the first `left` columns left-aligned, the
    rest right-aligned."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]

    def line(cells):
        return "  ".join(c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [title] if title else []
    out += [line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in rows]
    if caption:
        out.append(caption)
    return "\n".join(out)


def print_table(header, rows, *, title: str = "", caption: str = "", left: int = 1, styles=None, plain: bool = False,
                file=None):
    """A table on `file` (stdout): with rich on a terminal, fitted to its width (text columns wrap,
    numbers never do, nothing turns into an ellipsis); plain text when the output is a pipe or a
    file, when `plain`, or without rich, so what is saved or grepped is complete."""
    file = sys.stdout if file is None else file
    rich_ok = not plain and is_terminal(file)
    if rich_ok:
        try:
            from rich import box
            from rich.console import Console
            from rich.table import Table
        except ImportError:
            rich_ok = False
    if not rich_ok:
        print(plain_table(header, rows, title, caption, left), file=file)
        return
    t = Table(title=title or None, caption=caption or None, box=box.SIMPLE_HEAD, pad_edge=False)
    for i, h in enumerate(header):
        widest = max([len(h)] + [len(r[i]) for r in rows])
        if i < left:  # text wraps, down to a readable width
            t.add_column(h, justify="left", overflow="fold", min_width=min(widest, max(len(h), 10)))
        else:
            t.add_column(h, justify="right", no_wrap=True, min_width=widest)
    for k, r in enumerate(rows):
        t.add_row(*r, style=None if styles is None else styles[k])
    console = Console(file=file, highlight=False)
    # rendered once without colour to see that it fits: every number and header whole, or plain lines
    # (which the terminal wraps, cutting nothing)
    probe = Console(file=io.StringIO(), width=console.width, color_system=None, highlight=False)
    probe.print(t)
    lines = probe.file.getvalue().splitlines()
    numbers = [c for r in rows for c in r[left:]] + list(header)
    if "…" in probe.file.getvalue() or any(all(c not in line for line in lines) for c in numbers):
        print(plain_table(header, rows, title, caption, left), file=file)
        return
    console.print(t)
