"""Determinism: repeated calls give bitwise identical outputs, every op, each backend present.

CI runs a few repeats of tests/drivers/determinism_check.py's quick case list; the tool itself runs every
case 100 times (docs/reliability.md records its figures).
"""
from __future__ import annotations

import importlib.util
import os

import pytest

from _reliability import backend_params, require

_TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "drivers", "determinism_check.py")
REPEATS = int(os.environ.get("GNNSPARSE_DETERMINISM_REPEATS", "4"))


def _tool():
    spec = importlib.util.spec_from_file_location("determinism_check", _TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("backend", backend_params())
def test_repeated_calls_are_bitwise_identical(backend):
    require(backend)
    lines = []
    results = _tool().run(backend, REPEATS, quick=True, log=lines.append)
    assert len(results) >= 12
    differ = [r["case"] for r in results if r["differing_runs"]]
    assert not differ, "\n".join(lines)
