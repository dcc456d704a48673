"""What every `gnnsparse` command promises a user: a mistake is one line on stderr and exit status
2 (no traceback), output survives a reader that closes the pipe early, tables print in full in a
pipe and fit a narrow terminal without cutting numbers, and ratios say "faster" or "slower" with
both times."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from gnnsparse import _cli


def _gs(*argv, env=None, **kw):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "gnnsparse", *argv], capture_output=True, text=True, env=e,
                          timeout=600, **kw)


def _one_line_error(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and "error:" in lines[0]
    for n in needles:
        assert n in lines[0], lines[0]


def _torch_or_none():
    try:
        import torch

        return torch
    except ImportError:
        return None


# ---------------------------------------------------------------- user errors: one line, exit 2
@pytest.mark.parametrize("argv, needle", [
    (["bench", "--repeat", "0"], "--repeat must be a positive integer"),
    (["bench", "--graph", "/no/such.mtx"], "--graph /no/such.mtx: no such file"),
    (["frobnicate"], "invalid choice"),
    (["train", "--epochs", "0"], "--epochs must be a positive integer"),
    (["train", "--model", "gcn2"], "invalid choice: 'gcn2'"),
    (["train", "--data", "/no/such.npz"], "--data /no/such.npz: no such file"),
    (["train", "--json", "/no/such/dir/r.json"], "--json /no/such/dir/r.json: no such directory"),
])
def test_argument_mistakes_are_one_line_and_exit_2(argv, needle):
    _one_line_error(_gs(*argv), needle)


def test_train_bad_data_file_is_one_line(tmp_path):
    if _torch_or_none() is None:
        pytest.skip("torch is not installed: train stops at the torch check first (tested below)")
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip archive")
    _one_line_error(_gs("train", "--data", str(bad)), str(bad), "not a readable .npz")
    np.savez(tmp_path / "nolabels.npz", edge_index=np.array([[0, 1], [1, 0]]), x=np.ones((2, 3), np.float32))
    _one_line_error(_gs("train", "--data", str(tmp_path / "nolabels.npz")), "missing key")


def test_train_on_a_missing_gpu_is_one_line():
    torch = _torch_or_none()
    if torch is None:
        pytest.skip("torch is not installed")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: --device cuda is valid here")
    _one_line_error(_gs("train", "--device", "cuda", "--quick"), "--device cuda", "no CUDA device")
    _one_line_error(_gs("train", "--device", "tpu", "--quick"), "--device tpu")


def test_train_without_torch_says_how_to_install_it():
    # torch hidden from the process (sys.modules[name] = None makes `import torch` fail)
    code = ("import sys; sys.modules['torch'] = None; from gnnsparse.__main__ import main; "
            "sys.exit(main(['train', '--quick']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    _one_line_error(r, "needs PyTorch", 'pip install ".[torch]"')


def test_train_help_needs_no_torch():
    code = ("import sys; sys.modules['torch'] = None; from gnnsparse.__main__ import main; "
            "sys.exit(main(['train', '--help']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "--quick" in r.stdout and not r.stderr, r.stderr


# ---------------------------------------------------------------- pipes
@pytest.mark.parametrize("argv", [["info"], ["bench", "--help"], ["train", "--help"]])
def test_a_closed_pipe_ends_quietly(argv):
    """`gnnsparse info | head -0`: the reader is gone before the first byte; no traceback."""
    p = subprocess.Popen([sys.executable, "-m", "gnnsparse", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    with p.stderr:
        err = p.stderr.read().decode()
    rc = p.wait(timeout=300)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert rc in (0, _cli.EXIT_PIPE), (rc, err)


def test_info_names_each_backend():
    r = _gs("info")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("gnnsparse ") and "Python" in lines[0]
    assert any(line.startswith("sycl: ") for line in lines) and any(line.startswith("cuda: ") for line in lines)


# ---------------------------------------------------------------- tables
HEADER = ["framework", "model", "ms/epoch", "test%", "last%", "peak GiB"]
ROWS = [["gnnsparse quantized int8", "gcn", "12345.67", "71.23", "70.01", "54.321"],
        ["pyg", "gcn", "0.12", "9.99", "100.00", "-"]]


def test_table_in_a_pipe_is_plain_and_complete():
    out = io.StringIO()  # not a terminal
    _cli.print_table(HEADER, ROWS, title="training summary", caption="a caption", left=2, file=out)
    text = out.getvalue()
    assert "…" not in text
    for cell in HEADER + ROWS[0] + ROWS[1]:
        assert cell in text
    assert text.splitlines()[1].split() == HEADER[:5] + ["peak", "GiB"]  # the header on one line


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("columns", [40, 60, 120])
def test_table_on_a_narrow_terminal_keeps_every_number(columns, monkeypatch):
    pytest.importorskip("rich")
    monkeypatch.setenv("COLUMNS", str(columns))
    out = _Terminal()
    _cli.print_table(HEADER, ROWS, title="training summary", left=2, file=out)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())  # without the terminal's style codes
    assert "…" not in text
    for cell in ROWS[0][1:] + ROWS[1]:  # every number and every short text cell, whole
        assert cell in text, (cell, text)
    words = " ".join(text.split())
    assert "gnnsparse" in words and "quantized" in words and "int8" in words  # the long name, maybe wrapped
    if "─" in text:  # a rich table: it fits the terminal (else plain lines that the terminal wraps)
        assert max(len(line) for line in text.splitlines()) <= columns


# ---------------------------------------------------------------- ratios in words
@pytest.mark.parametrize("ours, other, words", [
    (7.91, 4.36, "1.81× slower"),
    (20.46, 12.57, "1.63× slower"),
    (4.36, 7.91, "1.81× faster"),
    (5.0, 5.01, "as fast"),
])
def test_speed_words(ours, other, words):
    assert _cli.speed_words(ours, other) == words


def test_train_comparisons_say_which_is_faster_with_both_times():
    pytest.importorskip("torch")
    from gnnsparse.train.loop import RunResult
    from gnnsparse.train.report import comparisons

    def run(fw, ms, acc):
        return RunResult(fw, "gcn", "cpu", 3, losses=[1.0] * 3, epoch_ms=[ms] * 3, train_acc=[acc] * 3,
                         val_acc=[acc] * 3, test_acc=[acc] * 3)
    lines = comparisons({"gnnsparse": [run("gnnsparse", 4.36, 0.7)], "quant": [run("gnnsparse quantized int8", 7.91, 0.69)],
                         "pyg": [run("pyg", 12.57, 0.7)]})
    q, p = lines
    assert "quantized 7.91 ms vs float32 4.36 ms: 1.81× slower" in q, q
    assert "gnnsparse 4.36 ms vs PyG 12.57 ms: 2.88× faster" in p, p
    slow = comparisons({"gnnsparse": [run("gnnsparse", 20.46, 0.7)], "pyg": [run("pyg", 12.57, 0.7)]})[0]
    assert "gnnsparse 20.46 ms vs PyG 12.57 ms: 1.63× slower" in slow, slow


def test_bench_summary_says_faster_or_slower():
    from gnnsparse.bench import report

    assert report.summary_line("spmm sum vs scipy", {"geomean_ratio": 2.85, "cases": 5, "wins": 5}) == \
        "spmm sum vs scipy: gnnsparse 2.85× faster (geomean of 5 cases, faster in 5)"
    assert "2.00× slower" in report.summary_line("sddmm dot vs torch.sparse", {"geomean_ratio": 0.5, "cases": 1,
                                                                             "wins": 0})


def test_time_left_is_said_in_minutes_and_hours():
    assert _cli.fmt_duration(42) == "42 s"
    assert _cli.fmt_duration(125) == "2 min 05 s"
    assert _cli.fmt_duration(3900) == "1 h 05 min"
