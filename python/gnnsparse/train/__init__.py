"""`gnnsparse train`: train a 2-layer GCN / GAT / GraphSAGE node classifier on gnnsparse.

    python -m gnnsparse train --model gcn --quick            # seconds on a CPU (CI)
    python -m gnnsparse train --model gat --device cuda --compare pyg --runs 2
    python -m gnnsparse train --model sage --data my_graph.npz
    python -m gnnsparse train --model gcn --nproc 2           # 2 processes (GPUs with cuda), torch.distributed

The default graph is generated (an ogbn-arxiv-sized stochastic block model, see data.py; nothing
is downloaded); --data loads a user's .npz. Prints loss, accuracy and time of every epoch with a
progress bar, then a table: median epoch time (forward + backward + optimizer step, evaluation
excluded), test accuracy at the best validation epoch and at the last epoch, peak GPU memory, and
with --runs 2 whether two runs with one seed gave bitwise identical losses. --compare pyg trains
torch_geometric's model of the same architecture from the same initial weights on the same graph.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import List, Optional

from .data import NodeData, arxiv_like, load_npz, quick
from .models import MODELS, Net, with_self_loops

__all__ = ["main", "train", "RunResult", "prepare", "run_once", "arxiv_like", "quick", "load_npz"]


@dataclass
class RunResult:
    framework: str
    model: str
    device: str
    epochs: int
    losses: List[float] = field(default_factory=list)
    epoch_ms: List[float] = field(default_factory=list)
    train_acc: List[float] = field(default_factory=list)
    val_acc: List[float] = field(default_factory=list)
    test_acc: List[float] = field(default_factory=list)
    peak_mem: Optional[int] = None      # bytes, torch.cuda.max_memory_allocated over the run
    extra_mem: Optional[int] = None     # bytes above what was allocated before the run (data, model)
    loss_bits: str = ""                 # hex of the float32 losses: equal strings = identical runs
    quant_bits: Optional[int] = None    # --quant: the first layer's bit width after the first epoch (None: float)
    quant_errors: dict = field(default_factory=dict)  # --quant auto: Error_X of the first layer's output per width

    @property
    def median_epoch_ms(self) -> float:
        t = self.epoch_ms[3:] if len(self.epoch_ms) > 6 else self.epoch_ms[1:] or self.epoch_ms
        return statistics.median(t) if t else float("nan")

    @property
    def best_val_test(self) -> float:
        if not self.val_acc:
            return float("nan")
        i = max(range(len(self.val_acc)), key=lambda k: (self.val_acc[k], -k))
        return self.test_acc[i]

    def summary(self) -> dict:
        d = asdict(self)
        d.update(median_epoch_ms=self.median_epoch_ms, best_val_test_acc=self.best_val_test,
                 final_test_acc=self.test_acc[-1] if self.test_acc else None)
        return d


# ---------------------------------------------------------------- setup
def pick_device(name: str):
    import torch

    if name != "auto":
        dev = torch.device(name)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("--device cuda: torch sees no CUDA device")
        return dev
    if torch.cuda.is_available():
        import gnnsparse as gs

        if gs.available_backends().get("cuda"):
            return torch.device("cuda")
    return torch.device("cpu")


def prepare(data: NodeData, device, model: str) -> dict:
    """Tensors on the device: features, labels, split, and the graph in both forms: a gnnsparse CSR
    (ours) and an edge_index (PyG); for GAT both with one self loop per node."""
    import torch

    import gnnsparse as gs

    ei = torch.from_numpy(data.edge_index).to(device)
    n = data.num_nodes
    if model == "gat":
        ei = with_self_loops(ei, n)
    return dict(x=torch.from_numpy(data.x).to(device), y=torch.from_numpy(data.y).to(device),
                train=torch.from_numpy(data.train_idx).to(device), val=torch.from_numpy(data.val_idx).to(device),
                test=torch.from_numpy(data.test_idx).to(device), edge_index=ei,
                csr=gs.CSR.from_edge_index(ei, n), num_classes=data.num_classes)


def _sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def initial_state(model: str, t: dict, hidden: int, heads: int, seed: int, dropout: float, aggr: str) -> dict:
    import torch

    torch.manual_seed(seed)
    net = Net(model, "gnnsparse", t["x"].shape[1], hidden, t["num_classes"], heads=heads, dropout=dropout, aggr=aggr)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def run_once(t: dict, model: str, framework: str, *, epochs: int, hidden: int = 128, heads: int = 4, lr: float = 0.01,
             weight_decay: float = 0.0, dropout: float = 0.5, aggr: str = "mean", seed: int = 0,
             init: Optional[dict] = None, on_epoch=None, quant: Optional[str] = None) -> RunResult:
    """Train one model from `init` (or seeded weights) for `epochs` full-graph epochs.

    quant ("auto", "8" or "4"; gnnsparse GCN / GAT only): the first layer quantized (gnnsparse.quant.nn),
    the second in float32. "auto" runs the first epoch with int8, then Tango's rule picks the first
    layer's width from that epoch's output: the smallest of int4 / int8 with Error_X < 0.3 (float32
    when neither is), recorded in the result (quant_bits, quant_errors)."""
    import torch
    import torch.nn.functional as F

    device = t["x"].device
    qbits = None if quant is None else (8 if quant == "auto" else int(quant))
    net = Net(model, framework, t["x"].shape[1], hidden, t["num_classes"], heads=heads, dropout=dropout, aggr=aggr,
              quant=qbits)
    net.load_state_dict(init if init is not None else initial_state(model, t, hidden, heads, seed, dropout, aggr))
    net = net.to(device)
    graph = t["csr"] if framework == "gnnsparse" else t["edge_index"]
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    x, y, tr = t["x"], t["y"], t["train"]
    res = RunResult(framework, model, str(device), epochs)
    res.quant_bits = qbits
    captured: list = []
    hook = net.conv1.register_forward_hook(lambda m, i, o: captured.append(o.detach())) if quant == "auto" else None
    if device.type == "cuda":
        _sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    torch.manual_seed(seed + 1)  # dropout masks: the same sequence in every run with this seed
    losses = []
    for epoch in range(epochs):
        _sync(device)
        t0 = time.perf_counter()
        net.train()
        opt.zero_grad(set_to_none=True)
        out = net(x, graph)
        loss = F.cross_entropy(out.index_select(0, tr), y.index_select(0, tr))
        loss.backward()
        opt.step()
        _sync(device)
        res.epoch_ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.detach())
        if hook is not None:  # Tango's bit-width rule on the first layer's output of the first epoch
            from ..quant import select_bits

            hook.remove()
            hook = None
            res.quant_bits, res.quant_errors = select_bits(captured[0], (4, 8), seed=seed)
            net.conv1.bits = res.quant_bits
            captured.clear()
        net.eval()
        with torch.no_grad():
            pred = net(x, graph).argmax(1)
            accs = [float((pred.index_select(0, t[k]) == y.index_select(0, t[k])).float().mean()) for k in
                    ("train", "val", "test")]
        res.train_acc.append(accs[0])
        res.val_acc.append(accs[1])
        res.test_acc.append(accs[2])
        res.losses.append(float(losses[-1]))
        if on_epoch is not None:
            on_epoch(res, epoch)
    if device.type == "cuda":
        _sync(device)
        res.peak_mem = int(torch.cuda.max_memory_allocated(device))
        res.extra_mem = res.peak_mem - int(base)
    if losses:
        res.loss_bits = torch.stack(losses).float().cpu().numpy().tobytes().hex()
    return res


# ---------------------------------------------------------------- command line
def build_parser(prog: str = "gnnsparse train") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Train a 2-layer GNN node classifier on gnnsparse (and, with "
                                "--compare pyg, the same model on PyTorch Geometric) and report accuracy, epoch time, "
                                "peak GPU memory and run-to-run determinism.")
    p.add_argument("--model", choices=MODELS, default="gcn", help="gcn, gat (4 heads) or sage (default gcn)")
    p.add_argument("--quick", action="store_true", help="a small generated graph and few epochs (CI, CPU seconds)")
    p.add_argument("--data", metavar="FILE.npz", help="train on your dataset: edge_index, x, y [, split] (see "
                   "gnnsparse.train.data.load_npz); default: a generated ogbn-arxiv-sized graph")
    p.add_argument("--epochs", type=int, help="epochs (default 200; 20 with --quick)")
    p.add_argument("--hidden", type=int, help="hidden channels (default 128; 32 with --quick)")
    p.add_argument("--heads", type=int, default=4, help="GAT heads in the first layer (default 4)")
    p.add_argument("--aggr", choices=("mean", "max", "sum"), default="mean", help="GraphSAGE aggregation")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda, cuda:1, ...")
    p.add_argument("--seed", type=int, default=0, help="graph, split, initial weights and dropout (default 0)")
    p.add_argument("--compare", choices=("pyg",), help="also train torch_geometric's model of the same size")
    p.add_argument("--runs", type=int, default=1, choices=(1, 2),
                   help="2: train each model twice with the seed and report whether the losses are bitwise equal")
    p.add_argument("--log-every", type=int, help="print every k-th epoch (default: every epoch up to 50 epochs, "
                   "else every 10th)")
    p.add_argument("--json", metavar="FILE", help="also write the results (per-epoch figures included) as JSON")
    p.add_argument("--quant", nargs="?", const="auto", choices=("auto", "8", "4"),
                   help="also train the model with quantized layers (gcn, gat; Tango, SC'23): int8 / int4 operands "
                        "with stochastic rounding in the first layer's GEMM, aggregation and attention logits, the "
                        "second layer in float32; 'auto' (the default of --quant) picks the width after the first "
                        "epoch: the smallest with Error_X < 0.3 on the first layer's output. Reports accuracy and "
                        "epoch time against the float32 run")
    p.add_argument("--nproc", type=int, default=1,
                   help="train over N processes with torch.distributed (gcn, gat): the graph's rows partitioned, "
                        "halo rows exchanged by all_to_all_single (NCCL on GPUs: one GPU per process; gloo on the "
                        "CPU), weights in DistributedDataParallel (default 1: one process)")
    p.add_argument("--halo", choices=("fp32", "int8"), default="fp32",
                   help="--nproc: halo rows on the wire as float32, or int8 with a per-row scale and stochastic "
                        "rounding (features forward, gradients backward)")
    p.add_argument("--overlap", action="store_true",
                   help="--nproc, gcn: run the halo exchange while the product over the local columns runs (forward "
                        "and backward); rows then sum local edges first: fp32-accurate instead of bitwise")
    p.add_argument("--partition", choices=("range", "rcm", "degree", "metis"), default="range",
                   help="--nproc: node order before cutting into contiguous ranges: as given, a locality order "
                        "of A.reorder (reverse Cuthill-McKee, descending degree), or METIS parts (needs pymetis)")
    p.add_argument("--size", choices=("arxiv", "products"), default="arxiv",
                   help="the generated graph's size: ogbn-arxiv's (default) or ogbn-products' (2.4 M nodes, "
                        "~120 M stored edges)")
    return p


def _console():
    try:
        from rich.console import Console

        return Console(highlight=False)
    except ImportError:  # pragma: no cover - rich is a declared dependency of the CLI
        return None


def _print(console, text):
    if console is not None:
        console.print(text)
    else:  # pragma: no cover
        print(text)


def _gib(b):
    return "-" if b is None else f"{b / 2**30:.2f}"


def _table(console, results: dict, runs: int):
    rows = []
    for fw, rs in results.items():
        r = rs[0]
        det = "-" if runs < 2 else ("bitwise" if all(x.loss_bits == r.loss_bits for x in rs) else "differ")
        rows.append((fw, r.model, f"{r.median_epoch_ms:.2f}", f"{100 * r.best_val_test:.2f}",
                     f"{100 * r.test_acc[-1]:.2f}", _gib(r.peak_mem), _gib(r.extra_mem), det))
    head = ("framework", "model", "ms/epoch", "test%", "last%", "peak GiB", "extra", "2 runs")
    if console is not None:
        from rich.table import Table

        tab = Table(title="training summary", caption="ms/epoch: median train step; test%: test accuracy at the "
                    "best validation epoch, last%: at the last epoch; peak / extra: GPU memory (GiB) at the peak and "
                    "above the data; 2 runs: loss sequences of two seeded runs")
        for h in head:
            tab.add_column(h, justify="right" if h not in ("framework", "model") else "left", no_wrap=True)
        for row in rows:
            tab.add_row(*row)
        console.print(tab)
    else:  # pragma: no cover
        print(" | ".join(head))
        for row in rows:
            print(" | ".join(row))
    if "gnnsparse" in results and "quant" in results:
        f, q = results["gnnsparse"][0], results["quant"][0]
        _print(console, f"quantized ({q.framework[len('gnnsparse quantized '):]}) vs float32: test accuracy "
                        f"{100 * q.best_val_test / max(f.best_val_test, 1e-12):.2f} % of float32's ({100 * q.best_val_test:.2f} "
                        f"vs {100 * f.best_val_test:.2f}; last epoch {100 * q.test_acc[-1]:.2f} vs {100 * f.test_acc[-1]:.2f}), "
                        f"epoch time {f.median_epoch_ms / q.median_epoch_ms:.2f}x float32's")
    if "gnnsparse" in results and "pyg" in results:
        a, b = results["gnnsparse"][0], results["pyg"][0]
        line = f"gnnsparse vs PyG: epoch time {b.median_epoch_ms / a.median_epoch_ms:.2f}x faster"
        if a.peak_mem and b.peak_mem:
            line += f", peak memory {a.peak_mem / b.peak_mem:.2f}x PyG's"
        line += f", test accuracy {100 * (a.best_val_test - b.best_val_test):+.2f} points"
        _print(console, line)


def train(args) -> dict:
    """Run what the parsed arguments ask for; returns {framework: [RunResult per run]}."""
    import torch

    console = _console()
    device = pick_device(args.device)
    epochs = args.epochs if args.epochs is not None else (20 if args.quick else 200)
    hidden = args.hidden if args.hidden is not None else (32 if args.quick else 128)
    if epochs <= 0 or hidden <= 0:
        raise SystemExit("gnnsparse train: --epochs and --hidden must be positive")
    nproc = getattr(args, "nproc", 1)
    if nproc > 1:
        return _train_distributed(args, console, device, epochs, hidden)
    t0 = time.perf_counter()
    data = _load(args)
    _print(console, f"{data.describe()} (prepared in {time.perf_counter() - t0:.1f} s) on {device}")
    t = prepare(data, device, args.model)
    log_every = args.log_every or (1 if epochs <= 50 else 10)
    quant = getattr(args, "quant", None)
    if quant is not None:
        from .models import QUANT_MODELS

        if args.model not in QUANT_MODELS:
            raise SystemExit(f"gnnsparse train: --quant covers {', '.join(QUANT_MODELS)}, not {args.model}")
    frameworks = ["gnnsparse"] + (["quant"] if quant is not None else []) + (["pyg"] if args.compare == "pyg" else [])
    if "pyg" in frameworks:
        from .models import layer_module

        layer_module("pyg")  # a clear error before any training when PyG is missing
    kw = dict(epochs=epochs, hidden=hidden, heads=args.heads, lr=args.lr, weight_decay=args.weight_decay,
              dropout=args.dropout, aggr=args.aggr, seed=args.seed)
    init = initial_state(args.model, t, hidden, args.heads, args.seed, args.dropout, args.aggr)
    results: dict = {}
    progress = None
    try:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("{task.fields[status]}"), console=console, transient=True)
    except ImportError:  # pragma: no cover
        pass
    for fw in frameworks:
        for run in range(args.runs):
            label = f"{fw} {args.model} run {run + 1}/{args.runs}"
            tag = ({"gnnsparse": "ours", "quant": "ours-q"}.get(fw, fw)) + (f"#{run + 1}" if args.runs > 1 else "")
            task = progress.add_task(label, total=epochs, status="") if progress is not None else None

            def on_epoch(r, e, tag=tag, task=task):
                line = (f"{tag} {e + 1:4d}  loss {r.losses[-1]:.4f}  acc train {100 * r.train_acc[-1]:4.1f} "
                        f"val {100 * r.val_acc[-1]:4.1f} test {100 * r.test_acc[-1]:4.1f}  {r.epoch_ms[-1]:7.1f} ms")
                if (e + 1) % log_every == 0 or e + 1 == epochs or e == 0:
                    (progress.console.print if progress is not None else print)(line)
                if e == 0 and r.quant_errors:
                    errs = ", ".join(f"int{b} {v:.4f}" for b, v in sorted(r.quant_errors.items()))
                    choice = f"int{r.quant_bits}" if r.quant_bits else "float32 (no width below the threshold)"
                    (progress.console.print if progress is not None else print)(
                        f"{tag} quantization: Error_X of the first layer's output (eps 0.0005): {errs} -> {choice} "
                        "(the smallest width with Error_X < 0.3)")
                if progress is not None:
                    progress.update(task, advance=1, status=f"loss {r.losses[-1]:.4f}")

            if progress is not None:
                progress.start()
            try:
                if fw == "quant":
                    r = run_once(t, args.model, "gnnsparse", init=init, on_epoch=on_epoch, quant=quant, **kw)
                    r.framework = "gnnsparse quantized" + (f" int{r.quant_bits}" if r.quant_bits else " (float)")
                else:
                    r = run_once(t, args.model, fw, init=init, on_epoch=on_epoch, **kw)
                results.setdefault(fw, []).append(r)
            finally:
                if progress is not None:
                    progress.stop()
                    progress.remove_task(task)
            if device.type == "cuda":
                torch.cuda.empty_cache()
    _table(console, results, args.runs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"data": data.describe(), "device": str(device), "args": vars(args),
                       "results": {fw: [r.summary() for r in rs] for fw, rs in results.items()}}, f, indent=1)
    return results


def _load(args):
    if args.data:
        return load_npz(args.data, args.seed)
    if args.quick:
        return quick(args.seed)
    if getattr(args, "size", "arxiv") == "products":
        from .data import products_like

        return products_like(args.seed)
    return arxiv_like(args.seed)


def _train_distributed(args, console, device, epochs: int, hidden: int) -> dict:
    """--nproc N: the distributed run (gnnsparse.train.dist), one row in the summary table."""
    from .dist import train_distributed
    from .models import QUANT_MODELS

    if args.model not in QUANT_MODELS:
        raise SystemExit(f"gnnsparse train: --nproc covers {', '.join(QUANT_MODELS)}, not {args.model}")
    if args.compare or getattr(args, "quant", None):
        raise SystemExit("gnnsparse train: --nproc trains gnnsparse's float32 model only (no --compare / --quant; "
                         "--halo int8 quantizes the exchange)")
    if device.type == "cuda":
        import torch

        if torch.cuda.device_count() < args.nproc:
            raise SystemExit(f"gnnsparse train: --nproc {args.nproc} on CUDA needs {args.nproc} GPUs, torch sees "
                             f"{torch.cuda.device_count()}")
    cfg = dict(nproc=args.nproc, device=device.type, model=args.model, data=args.data, quick=args.quick,
               size=getattr(args, "size", "arxiv"), seed=args.seed, epochs=epochs, hidden=hidden, heads=args.heads,
               lr=args.lr, weight_decay=args.weight_decay, dropout=args.dropout, wire=args.halo,
               partition=args.partition, overlap=getattr(args, "overlap", False), log_every=args.log_every or (1 if epochs <= 50 else 10))
    how = "NCCL, one GPU each" if device.type == "cuda" else "gloo, CPU"
    _print(console, f"training on {args.nproc} processes ({how}), {args.partition} partition, {args.halo} halo "
                    f"exchange{' (overlapped)' if getattr(args, 'overlap', False) and args.model == 'gcn' else ''}")
    results: dict = {}
    ranks = []
    for run in range(args.runs):
        out = train_distributed(cfg)
        results.setdefault(f"gnnsparse x{args.nproc} {args.halo}" + (" overlap" if cfg["overlap"] else ""),
                           []).append(out["result"])
        ranks.append(out["ranks"])
    for r in ranks[0]:
        _print(console, f"rank {r['rank']}: {r['rows']:,} rows, {r['edges']:,} edges, halo {r['halo']:,}, sends "
                        f"{r['sends']:,} rows; {r['wire_bytes_per_train_step'] / 2**20:.2f} MiB on the wire per "
                        f"training step; peak GPU memory {_gib(r['peak_mem'])} GiB")
    _table(console, results, args.runs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(device), "args": vars(args), "ranks": ranks,
                       "results": {fw: [r.summary() for r in rs] for fw, rs in results.items()}}, f, indent=1)
    return results


def main(argv=None, prog: str = "gnnsparse train") -> int:
    args = build_parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
    if args.nproc < 1:
        print("gnnsparse train: --nproc must be at least 1", file=sys.stderr)
        return 2
    if args.data and not os.path.exists(args.data):
        print(f"gnnsparse train: {args.data}: no such file", file=sys.stderr)
        return 2
    train(args)
    return 0
