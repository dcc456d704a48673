"""`gnnsparse train`: the command line, and what it runs (single-process and --nproc runs).

Nothing here needs torch at import time: `gnnsparse train --help` works without it, and a run
without it ends in one line saying how to install it."""
from __future__ import annotations

import json
import os
import sys
import time

from .. import _cli
from .._cli import UsageError
from .report import comparisons, epoch_line, estimate_line, gib, say, scale_lines, summary_table

__all__ = ["MODELS", "QUANT_MODELS", "build_parser", "train", "main"]

MODELS = ("gcn", "gat", "sage", "gatv2", "transformer", "gin", "graphconv")
QUANT_MODELS = ("gcn", "gat")  # the models `gnnsparse train --quant` trains with quantized layers


# ---------------------------------------------------------------- command line
def build_parser(prog: str = "gnnsparse train") -> _cli.ArgumentParser:
    """The argument parser of `gnnsparse train` (errors: one line, exit 2)."""
    p = _cli.ArgumentParser(prog=prog, description="Train a 2-layer GNN node classifier on gnnsparse (and, with "
                                "--compare pyg, the same model on PyTorch Geometric) and report accuracy, epoch time, "
                                "peak GPU memory and run-to-run determinism.")
    p.add_argument("--model", choices=MODELS, default="gcn",
                   help="gcn, gat (GATConv, 4 heads), sage (GraphSAGE), gatv2 (GATv2Conv, 4 heads), transformer "
                        "(TransformerConv, 4 heads), gin (GINConv with 2-layer MLPs) or graphconv (GraphConv) (default gcn)")
    p.add_argument("--quick", action="store_true", help="a small generated graph and 20 epochs (seconds on a CPU); without it the graph is ogbn-arxiv-sized: about 1 s per GCN epoch on a 2-core CPU, ms on a GPU")
    p.add_argument("--data", metavar="FILE.npz", help="train on your dataset: edge_index, x, y [, split] (see "
                   "gnnsparse.train.data.load_npz); default: a generated ogbn-arxiv-sized graph")
    p.add_argument("--epochs", type=_cli.positive_int("--epochs"), help="epochs (default 200; 20 with --quick)")
    p.add_argument("--hidden", type=_cli.positive_int("--hidden"), help="hidden channels (default 128; 32 with --quick)")
    p.add_argument("--heads", type=_cli.positive_int("--heads"), default=4,
                   help="attention heads in the first layer of gat, gatv2 and transformer (default 4)")
    p.add_argument("--attn-dropout", type=float, default=0.0, metavar="P",
                   help="dropout on the attention coefficients of gat, gatv2 and transformer (PyG's examples use 0.6; "
                        "default 0)")
    p.add_argument("--aggr", choices=("mean", "max", "sum"), default=None,
                   help="aggregation of sage (default mean) and graphconv (default sum)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda, cuda:1, ...")
    p.add_argument("--seed", type=int, default=0, help="graph, split, initial weights and dropout (default 0)")
    p.add_argument("--compare", action="append", choices=("fp32", "pyg"),
                   help="what to compare with (repeatable): fp32, our float32 model (always trained with --quant, "
                        "the quantized run's reference); pyg, torch_geometric's float32 model of the same size")
    p.add_argument("--seeds", type=_cli.positive_int("--seeds"), default=1, metavar="N",
                   help="train every model with N seeds (--seed, --seed + 1, ...: initial weights, dropout, stochastic "
                        "rounding; the graph is the one of --seed) and report the mean, spread and worst case of "
                        "test accuracy and of the quantized / float32 ratio (default 1)")
    p.add_argument("--runs", type=int, default=1, choices=(1, 2),
                   help="2: train each model twice with the seed and report whether the losses are bitwise equal")
    p.add_argument("--log-every", type=_cli.positive_int("--log-every"), help="print every k-th epoch (default: every epoch up to 50 epochs, "
                   "else every 10th)")
    p.add_argument("--plain", action="store_true", help="no progress bar or rich table, even on a terminal")
    p.add_argument("--json", metavar="FILE", help="also write the results (per-epoch figures included) as JSON")
    p.add_argument("--quant", nargs="?", const="auto", choices=("auto", "8", "4"),
                   help="also train the model with quantized layers (gcn, gat; Tango, SC'23): int8 / int4 operands "
                        "with stochastic rounding in the first layer's GEMM, aggregation and attention logits, the "
                        "second layer in float32; 'auto' (the default of --quant) picks the width before training: "
                        "the smallest with Error_X < 0.3 on the first layer's output for the initial weights. The "
                        "input features are quantized once at that width and only that copy is on the device "
                        "during the run (--float-input: float32 features, quantized in every step). Reports "
                        "accuracy, epoch time and peak memory against the float32 run")
    p.add_argument("--float-input", action="store_true",
                   help="--quant: keep the input features in float32 on the device and quantize them in every step")
    p.add_argument("--nproc", type=_cli.positive_int("--nproc"), default=1,
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
                        "~120 M stored edges; on a CUDA device drawn there in seconds, another draw of the same "
                        "model than the CPU's and --nproc's)")
    return p



# ---------------------------------------------------------------- the runs
class _Pace:
    """Time left for the whole command, from the pace of the epochs so far (evaluation included)."""

    def __init__(self, total_epochs: int):
        self.total, self.done, self.t0, self.first = total_epochs, 0, time.perf_counter(), None

    def tick(self) -> float:
        """Count one epoch; returns the estimated seconds left (the first epoch, with its warm-up,
        is left out of the pace once there is a second)."""
        now = time.perf_counter()
        self.done += 1
        if self.first is None:
            self.first = now - self.t0
            pace = self.first
        else:
            pace = (now - self.t0 - self.first) / (self.done - 1)
        self._pace = pace
        return pace * (self.total - self.done)

    @property
    def pace(self) -> float:
        return self._pace


def _progress(plain: bool):
    """A rich progress bar (elapsed and remaining time) on a terminal; None otherwise."""
    if plain or not _cli.is_terminal():
        return None
    try:
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)
    except ImportError:
        return None
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                    console=Console(highlight=False), transient=True)


def train(args) -> dict:
    """Run what the parsed arguments ask for; returns {framework: [RunResult per run]}.
    UsageError for what the user asked wrongly (device, data file, options that do not combine)."""
    _cli.require_torch("gnnsparse train")
    import torch

    import gc

    from .loop import fresh_graph, initial_state, pick_device, prepare, run_once

    device = pick_device(args.device)
    epochs = args.epochs if args.epochs is not None else (20 if args.quick else 200)
    hidden = args.hidden if args.hidden is not None else (32 if args.quick else 128)
    quant = getattr(args, "quant", None)
    if quant is not None and args.model not in QUANT_MODELS:
        raise UsageError(f"--quant covers {', '.join(QUANT_MODELS)}, not {args.model}")
    attn_dropout = getattr(args, "attn_dropout", 0.0)
    if not 0.0 <= attn_dropout < 1.0:
        raise UsageError(f"--attn-dropout must be in [0, 1), got {attn_dropout}")
    if attn_dropout and args.model not in ("gat", "gatv2", "transformer"):
        raise UsageError(f"--attn-dropout applies to gat, gatv2 and transformer, not {args.model}")
    if getattr(args, "nproc", 1) > 1:
        if attn_dropout:
            raise UsageError("--attn-dropout is not supported with --nproc (the distributed GAT has none)")
        return _train_distributed(args, device, epochs, hidden)
    compare = _compare_list(args)
    frameworks = ["gnnsparse"] + (["quant"] if quant is not None else []) + (["pyg"] if "pyg" in compare else [])
    if "pyg" in frameworks:
        from .models import layer_module

        layer_module("pyg")  # a clear error before any training when PyG is missing
    t0 = time.perf_counter()
    data = _load(args, device)
    say(f"{data.describe()} (prepared in {time.perf_counter() - t0:.1f} s) on {device}")
    t = prepare(data, device, args.model, edge_index="pyg" in frameworks)
    log_every = args.log_every or (1 if epochs <= 50 else 10)
    nseeds = getattr(args, "seeds", 1) or 1
    seeds = [args.seed + k for k in range(nseeds)]
    results: dict = {}
    plain = getattr(args, "plain", False)
    pace = _Pace(epochs * args.runs * len(frameworks) * nseeds)
    what = (f"{epochs} epochs x {args.runs} run(s) x {len(frameworks)} model(s)"
            + (f" x {nseeds} seeds" if nseeds > 1 else ""))
    jobs = []
    for seed in seeds:
        init = initial_state(args.model, t, hidden, args.heads, seed, args.dropout, args.aggr)
        for fw in frameworks:
            for run in range(args.runs):
                jobs.append((seed, init, fw, run))
    for seed, init, fw, run in jobs:
        kw = dict(epochs=epochs, hidden=hidden, heads=args.heads, lr=args.lr, weight_decay=args.weight_decay,
                  dropout=args.dropout, aggr=args.aggr, seed=seed, attn_dropout=attn_dropout)
        label = f"{fw} {args.model} run {run + 1}/{args.runs}" + (f" seed {seed}" if nseeds > 1 else "")
        tag = (({"gnnsparse": "ours", "quant": "ours-q"}.get(fw, fw)) + (f"#{run + 1}" if args.runs > 1 else "")
               + (f"@{seed}" if nseeds > 1 else ""))
        progress = _progress(plain)
        task = progress.add_task(label, total=epochs, status="") if progress is not None else None
        out = progress.console.print if progress is not None else say

        def on_epoch(r, e, tag=tag, task=task, out=out, progress=progress):
            left = pace.tick()
            line = epoch_line(tag, e, r)
            if (e + 1) % log_every == 0 or e + 1 == epochs or e == 0:
                if left > 60:
                    line += f"  ~{_cli.fmt_duration(left)} left"
                out(line)
            if pace.done == 2 and left > 60:  # the first estimate, once the warm-up epoch is behind
                out(estimate_line(pace.pace, pace.total - pace.done, what))
            if e == 0 and r.quant_errors:
                errs = ", ".join(f"int{b} {v:.4f}" for b, v in sorted(r.quant_errors.items()))
                choice = f"int{r.quant_bits}" if r.quant_bits else "float32 (no width below the threshold)"
                out(f"{tag} quantization: Error_X of the first layer's output (eps 0.0005): {errs} -> {choice} "
                    "(the smallest width with Error_X < 0.3)")
            if progress is not None:
                progress.update(task, advance=1, status=f"loss {r.losses[-1]:.4f}")

        if progress is not None:
            progress.start()
        host_x = None
        try:
            tr = fresh_graph(t)  # each run builds (and is charged for) its own graph structures
            if fw == "quant":
                qin = not getattr(args, "float_input", False)
                if qin and t["x"].device.type != "cpu":
                    # the run quantizes the features once and holds only that copy on the device: the
                    # float32 one waits on the host meanwhile (tr holds the device copy until then)
                    host_x, t["x"] = t["x"].cpu(), None
                r = run_once(tr, args.model, "gnnsparse", init=init, on_epoch=on_epoch, quant=quant,
                             quant_input=qin, **kw)
                r.framework = "gnnsparse quantized" + (f" int{r.quant_bits}" if r.quant_bits else " (float)")
                for line in scale_lines(tag, r):
                    out(line)
            else:
                r = run_once(tr, args.model, fw, init=init, on_epoch=on_epoch, **kw)
            r.seed = seed
            results.setdefault(fw, []).append(r)
        finally:
            if progress is not None:
                progress.stop()
            if host_x is not None:
                tr, t["x"], host_x = None, host_x.to(device), None
        tr = None
        gc.collect()  # the run's model and graph structures, before the next run's peak is measured
        if device.type == "cuda":
            torch.cuda.empty_cache()
    summary_table(results, args.runs, plain=plain)
    for line in comparisons(results):
        say(line)
    if args.json:
        _write_json(args.json, {"data": data.describe(), "device": str(device), "args": vars(args),
                                "results": {fw: [r.summary() for r in rs] for fw, rs in results.items()}})
    return results


def _compare_list(args) -> list:
    """--compare as a list (a Namespace made by hand may hold one string)."""
    c = getattr(args, "compare", None)
    if c is None:
        return []
    return [c] if isinstance(c, str) else list(c)


def _write_json(path, doc):
    try:
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
    except OSError as e:
        raise UsageError(f"--json {path}: {e.strerror or e}") from None


def _load(args, device=None):
    from .data import arxiv_like, load_npz, products_like, quick

    if args.data:
        try:
            return load_npz(args.data, args.seed)
        except (OSError, ValueError) as e:  # the loader's messages name the file and what is wrong in it
            raise UsageError(f"--data {e}") from None
    if args.quick:
        return quick(args.seed)
    say(f"generating the {getattr(args, 'size', 'arxiv')}-sized graph (seed {args.seed}) ...")
    if getattr(args, "size", "arxiv") == "products":
        return products_like(args.seed, device)  # on a GPU, drawn there (seconds instead of minutes)
    return arxiv_like(args.seed)


def _train_distributed(args, device, epochs: int, hidden: int) -> dict:
    """--nproc N: the distributed run (gnnsparse.train.dist), one row in the summary table."""
    from .dist import train_distributed

    if args.model not in QUANT_MODELS:
        raise UsageError(f"--nproc covers {', '.join(QUANT_MODELS)}, not {args.model}")
    if _compare_list(args) or getattr(args, "quant", None) or getattr(args, "seeds", 1) > 1:
        raise UsageError("--nproc trains gnnsparse's float32 model only, one seed (no --compare / --quant / --seeds; "
                         "--halo int8 quantizes the exchange)")
    if device.type == "cuda":
        import torch

        if torch.cuda.device_count() < args.nproc:
            raise UsageError(f"--nproc {args.nproc} on CUDA needs {args.nproc} GPUs, torch sees "
                             f"{torch.cuda.device_count()}")
    cfg = dict(nproc=args.nproc, device=device.type, model=args.model, data=args.data, quick=args.quick,
               size=getattr(args, "size", "arxiv"), seed=args.seed, epochs=epochs, hidden=hidden, heads=args.heads,
               lr=args.lr, weight_decay=args.weight_decay, dropout=args.dropout, wire=args.halo,
               partition=args.partition, overlap=getattr(args, "overlap", False),
               log_every=args.log_every or (1 if epochs <= 50 else 10))
    how = "NCCL, one GPU each" if device.type == "cuda" else "gloo, CPU"
    say(f"training on {args.nproc} processes ({how}), {args.partition} partition, {args.halo} halo "
        f"exchange{' (overlapped)' if cfg['overlap'] and args.model == 'gcn' else ''}")
    results: dict = {}
    ranks = []
    for run in range(args.runs):
        out = train_distributed(cfg)
        results.setdefault(f"gnnsparse x{args.nproc} {args.halo}" + (" overlap" if cfg["overlap"] else ""),
                           []).append(out["result"])
        ranks.append(out["ranks"])
    for r in ranks[0]:
        say(f"rank {r['rank']}: {r['rows']:,} rows, {r['edges']:,} edges, halo {r['halo']:,}, sends "
            f"{r['sends']:,} rows; {r['wire_bytes_per_train_step'] / 2**20:.2f} MiB on the wire per "
            f"training step; peak GPU memory {gib(r['peak_mem'])} GiB")
    summary_table(results, args.runs, plain=getattr(args, "plain", False))
    if args.json:
        _write_json(args.json, {"device": str(device), "args": vars(args), "ranks": ranks,
                                "results": {fw: [r.summary() for r in rs] for fw, rs in results.items()}})
    return results


# ---------------------------------------------------------------- entry point
def _main(argv, prog):
    args = build_parser(prog).parse_args(argv)
    if args.data and not os.path.exists(args.data):
        raise UsageError(f"--data {args.data}: no such file")
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        raise UsageError(f"--json {args.json}: no such directory")  # now, not after the training
    train(args)
    return 0


def main(argv=None, prog: str = "gnnsparse train") -> int:
    """`gnnsparse train ARGS`: 0 when done; 2 (one line on stderr) for a user's mistake."""
    return _cli.run(prog, _main, sys.argv[1:] if argv is None else list(argv), prog)
