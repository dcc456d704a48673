"""`gnnsparse bench`: correctness-checked timings of gnnsparse against the usual libraries.

    gnnsparse bench --quick                     # < 2 min on a 2-core CPU; table + JSON/CSV/PNG in ./gnnsparse-bench
    gnnsparse bench --device cuda --suite graphs --out results/
    gnnsparse bench --graph my_graph.mtx --widths 16,64
"""
from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import shlex
import sys

from .. import _cli
from . import cases as _cases

DEFAULT_OUT = "gnnsparse-bench"


# ---------------------------------------------------------------- argument types
def _csv_choices(choices, what):
    def parse(text):
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"empty {what} list")
        bad = [t for t in items if t not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"invalid {what} {', '.join(map(repr, bad))} (choose from {', '.join(choices)})")
        return tuple(dict.fromkeys(items))
    return parse


def _csv_ints(text):
    out = []
    for t in text.split(","):
        t = t.strip()
        if not t:
            continue
        try:
            v = int(t)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid width {t!r}: widths are positive integers, e.g. 16,32") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"invalid width {v}: widths must be positive")
        out.append(v)
    if not out:
        raise argparse.ArgumentTypeError("empty width list")
    return tuple(dict.fromkeys(out))


_positive = _cli.positive_int


def _non_negative(what):
    return _cli.positive_int(what, minimum=0)


def add_bench_arguments(p: argparse.ArgumentParser):
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto (default): a CUDA GPU when the CUDA backend and torch see one, else the SYCL CPU device")
    p.add_argument("--suite", choices=_cases.SUITES, default=None,
                   help="quick (default; < 2 min on a 2-core CPU), grid72 (the ESIMD paper grid: 72 shapes x spmm/sddmm/"
                        "fusedmm), graphs (generated graph suite: 1M/10M uniform, R-MAT with hubs, arxiv-, products-, "
                        "Cora-, Pubmed-sized), all (grid72 + graphs)")
    p.add_argument("--quick", action="store_true", help="same as --suite quick")
    p.add_argument("--graph", action="append", default=[], metavar="PATH",
                   help="also benchmark your own graph (.mtx, SNAP edge list, .npz with edge_index); repeatable. "
                        "Without --suite/--quick only these graphs run")
    p.add_argument("--ops", type=_csv_choices(_cases.OPS, "op"), default=None, metavar="OPS",
                   help="comma-separated subset of spmm,sddmm,fusedmm (default: all the suite has)")
    p.add_argument("--widths", type=_csv_ints, default=None, metavar="C,...",
                   help="feature widths replacing the suite's, e.g. 16,32")
    p.add_argument("--reduce", type=_csv_choices(_cases.REDUCES, "reduction"), default=None, metavar="R,...",
                   help="SpMM reductions replacing the suite's: sum,mean,max,min")
    p.add_argument("--repeat", type=_positive("--repeat"), default=None, metavar="N",
                   help="timed runs per measurement (default: 7 quick CPU, 10 CPU, 50 GPU)")
    p.add_argument("--stat", choices=("median", "min"), default="median",
                   help="statistic of the repeats behind times and ratios (default median; min resists noise from "
                        "other processes on a shared machine; both are stored in results.json)")
    p.add_argument("--warmup", type=_non_negative("--warmup"), default=None, metavar="N",
                   help="untimed runs before timing (default: 1 CPU, 5 GPU; the checked first call comes before)")
    p.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help=f"directory for results.json, results.csv, speedup.png, bandwidth.png (default: ./{DEFAULT_OUT})")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--max-nnz", type=_positive("--max-nnz"), default=None, metavar="N",
                   help="skip matrices with more stored entries than N")
    p.add_argument("--check-rows", type=_positive("--check-rows"), default=2048, metavar="N",
                   help="rows sampled for the check against gnnsparse.reference on big matrices (default 2048)")
    p.add_argument("--seed", type=int, default=0, help="seed of the inputs (graphs have their own fixed seeds)")
    p.add_argument("--plain", action="store_true", help="plain-text table even on a terminal (a pipe or a file "
                   "always gets plain text)")
    p.add_argument("--targets", action="store_true",
                   help="also check the project's performance goals (developers: docs/performance.md) and add them "
                        "to the output files")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run_bench)


def build_parser() -> argparse.ArgumentParser:
    p = _cli.ArgumentParser(prog="gnnsparse", description="gnnsparse: deterministic sparse GNN kernels")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    b = sub.add_parser("bench", help="check and time spmm/sddmm/fusedmm against scipy, torch.sparse, PyG-style",
                       description="Check every case against gnnsparse.reference, then time gnnsparse and the "
                                   "reference libraries on the same inputs; print a table and write JSON, CSV and PNGs.")
    add_bench_arguments(b)
    b.set_defaults(_parser=b)
    i = sub.add_parser("info", help="versions, and each backend: usable here or why not")
    i.set_defaults(func=run_info)
    # `gnnsparse train` is dispatched by gnnsparse.__main__ before this parser; listed here for --help
    sub.add_parser("train", add_help=False,
                   help="train a GCN / GAT / GraphSAGE node classifier (vs PyG with --compare pyg); train --help")
    return p


# ---------------------------------------------------------------- commands
def run_info(args, parser) -> int:
    """Versions, and each backend: usable here, or why not."""
    import gnnsparse as gs

    from .measure import cuda_usable

    v = _versions()
    have = ", ".join(f"{k} {v[k]}" for k in ("numpy", "scipy", "torch", "torch_geometric", "dpctl") if v.get(k))
    print(f"gnnsparse {gs.__version__} (Python {platform.python_version()}; {have})")
    backends = gs.available_backends()
    from .. import _sycl_backend

    if backends.get("sycl"):
        from .measure import CPUDevice

        print(f"sycl: yes, {CPUDevice().name}")
    else:
        print(f"sycl: no ({_sycl_backend.unavailable_reason()})")
    ok, why = cuda_usable()
    print(f"cuda: {'yes' if ok else 'no (' + why + ')'}")
    for name in sorted(set(backends) - {"sycl", "cuda"}):
        print(f"{name}: {'yes' if backends[name] else 'no'}")
    wait = os.environ.get("OMP_WAIT_POLICY")
    by = "set by gnnsparse at import" if gs.OMP_WAIT_POLICY_SET else "as found at import"
    print(f"OMP_WAIT_POLICY: {wait or 'unset'} ({by}; README: 'torch and gnnsparse on one CPU')")
    return 0


def pick_device(requested, parser):
    from .measure import CPUDevice, CUDADevice, cuda_usable

    if requested in ("auto", "cuda"):
        ok, why = cuda_usable()
        if ok:
            return CUDADevice()
        if requested == "cuda":
            parser.error(f"--device cuda: {why}")
    try:
        return CPUDevice()
    except Exception as e:
        if requested == "cpu":
            parser.error(f"--device cpu: {e}")
        parser.error(f"no device to benchmark on: no CUDA GPU and {e}")


def _versions():
    out = {}
    for mod in ("gnnsparse", "numpy", "scipy", "torch", "torch_geometric", "dpctl"):
        try:
            import importlib
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = importlib.import_module(mod)
            out[mod] = getattr(m, "__version__", "?")
        except Exception:
            out[mod] = None
    return out


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_bench(args, parser) -> int:
    if args.quick and args.suite not in (None, "quick"):
        parser.error(f"--quick conflicts with --suite {args.suite}")
    suite = "quick" if args.quick else args.suite
    if suite is None and not args.graph:
        suite = "quick"
    for g in args.graph:
        if not os.path.isfile(g):
            parser.error(f"--graph {g}: no such file")

    from . import report

    try:  # fail now, not after a long run
        out = report.ensure_dir(args.out)
    except OSError as e:
        parser.error(f"--out {args.out}: {e.strerror or e}")

    dev = pick_device(args.device, parser)
    repeat = args.repeat or (50 if dev.kind == "cuda" else (7 if suite == "quick" else 10))
    cases = list(_cases.suite_cases(suite)) if suite else []
    cases += _cases.file_cases(args.graph, args.widths or (32,))
    cases = _cases.select(cases, ops=args.ops, widths=args.widths, reduces=args.reduce)
    if not cases:
        parser.error("no case left after --ops/--widths/--reduce")

    from . import plots, refs, runner

    console = None
    try:
        from rich.console import Console

        console = Console(stderr=True)
    except ImportError:
        pass

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    log(f"gnnsparse bench: {len(cases)} cases on {dev.name}; suite {suite or 'files'}, {args.stat} of {repeat}")
    if dev.kind == "cpu" and suite in ("grid72", "graphs", "all") and args.max_nnz is None:
        log("note: this suite is sized for a GPU and takes long on a CPU; --max-nnz N skips the big matrices")
    log("measuring copy bandwidth ...")
    copy_bw = dev.copy_bandwidth()
    progress = report.Progress(enabled=not args.no_progress, console=console)
    results = runner.run_cases(cases, dev, repeat=repeat, warmup=args.warmup, seed=args.seed,
                               max_nnz=args.max_nnz, check_rows=args.check_rows, progress=progress, log=log,
                               stat=args.stat)
    for r in results:
        if r.get("gbps") is not None:
            r["frac_copy_bw"] = r["gbps"] / copy_bw["device_gbps"]
    summary = runner.summarize(results)
    goals = runner.targets(summary, results, dev.kind) if args.targets else None
    cmd = "gnnsparse " + " ".join(shlex.quote(a) for a in (args._argv or []))
    meta = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": cmd, "suite": suite, "device": dev.kind, "device_name": dev.name,
        "host": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                 "load_average_at_end": _loadavg()},
        "versions": _versions(), "repeat": repeat, "stat": args.stat, "warmup": dev.warmup if args.warmup is None else args.warmup,
        "seed": args.seed, "copy_bandwidth": copy_bw, "timing": dev.timing,
        # the references this run compared with (ours_fp32 only where a case has another dtype)
        "references": {n: refs.describe(n, dev) for n in refs.names_for(dev)
                       if n != "ours_fp32" or any(n in r.get("refs", {}) for r in results)},
        "bytes_model": "CSR read once (rowptr, col, val if any) + every gathered row + row-side inputs once + output "
                       "once (+ the int64 arg of max/min with arg; FusedMM with Y = Z gathers each row once), elements "
                       "of the case's dtype",
        "flops_model": "SpMM 2*nnz*C; SDDMM dot nnz*(2F-1) per head, add nnz per head; FusedMM SDDMM + 2*nnz*D",
    }
    if goals is not None:
        meta["targets"] = goals
    # the files first: a reader that closes stdout early (| head) must not cost the results
    jpath, cpath = os.path.join(out, "results.json"), os.path.join(out, "results.csv")
    mpath = os.path.join(out, "table.md")
    report.write_json(jpath, meta, results, summary)
    report.write_csv(cpath, results)
    report.write_markdown(mpath, meta, results, summary)
    written = [jpath, cpath, mpath]
    if not args.no_plots:
        pngs = plots.write_plots(results, meta, out)
        if not pngs:
            log("matplotlib is not installed: no plots (pip install 'gnnsparse[bench]')")
        written += pngs
    report.print_table(results, meta, plain=args.plain)
    for line in report.skipped_lines(results):
        print(line)
    print("gnnsparse against each reference, geometric mean over the verified cases of each op and variant:")
    report.print_summary(summary)
    if goals:
        print("project goals (measured in this run):")
        for g in goals:
            print(f"  {'met   ' if g['met'] else 'MISSED'} {g['target']}: {g['measured']} over {g['cases']} cases")
    print("wrote " + ", ".join(written))
    failed = [r for r in results if r.get("error") or (not r.get("skipped") and not r.get("verified"))]
    if failed:
        print(f"{len(failed)} case(s) FAILED the check against gnnsparse.reference or raised:", file=sys.stderr)
        for r in failed:
            print(f"  {r['case']}: {r.get('error')}", file=sys.stderr)
        return 1
    return 0


def _run(argv) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args._argv = argv
    return int(args.func(args, getattr(args, "_parser", parser)) or 0)


def main(argv=None) -> int:
    """`gnnsparse bench|info ARGS`: 0 when done, 1 when a case failed its check, 2 (one line on
    stderr) for a user's mistake."""
    argv = list(sys.argv[1:] if argv is None else argv)
    return _cli.run("gnnsparse", _run, argv)
