"""`gnnsparse train`: train a 2-layer GCN / GAT / GraphSAGE node classifier on gnnsparse.

    python -m gnnsparse train --model gcn --quick            # seconds on a CPU (CI)
    python -m gnnsparse train --model gat --device cuda --compare pyg --runs 2
    python -m gnnsparse train --model sage --data my_graph.npz
    python -m gnnsparse train --model gcn --nproc 2           # 2 processes (GPUs with cuda), torch.distributed

The default graph is generated (an ogbn-arxiv-sized stochastic block model, see data.py; nothing
is downloaded); --data loads a user's .npz. Prints loss, accuracy and time of every epoch (a
progress bar with the time left on a terminal), then a table: median epoch time (forward +
backward + optimizer step, evaluation excluded), test accuracy at the best validation epoch and at
the last epoch, peak GPU memory, and with --runs 2 whether two runs with one seed gave bitwise
identical losses. --compare pyg trains torch_geometric's model of the same architecture from the
same initial weights on the same graph.

Modules by role: cli (the command line and the runs it makes), loop (one training run), report
(what is printed), data (generated graphs, the .npz loader), models (the networks), dist (--nproc).
Names that need torch load on first use, so `import gnnsparse.train` and `train --help` work
without it.
"""
from __future__ import annotations

import importlib

__all__ = ["main", "train", "build_parser", "RunResult", "prepare", "run_once", "initial_state", "pick_device",
           "arxiv_like", "quick", "load_npz", "NodeData", "MODELS", "QUANT_MODELS"]

_WHERE = {"main": "cli", "train": "cli", "build_parser": "cli", "MODELS": "cli", "QUANT_MODELS": "cli",
          "RunResult": "loop", "prepare": "loop", "run_once": "loop", "initial_state": "loop", "pick_device": "loop",
          "arxiv_like": "data", "quick": "data", "load_npz": "data", "NodeData": "data"}


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
