#!/usr/bin/env python3
"""gnnsparse vs PyTorch Geometric on one CUDA GPU: training and single-layer figures, one table.

    python bench/train_vs_pyg.py --smoke          # everything tiny first (~1 min): every code path runs
    python bench/train_vs_pyg.py --out results/   # the full comparison (~5 min on an H200)

Sections (each one failing does not stop the others; the exit status says if any failed):
  check     CUDA layers and ops against PyG / fp64 gradcheck on a small graph (before any timing)
  train     2-layer models (--models: gcn, gat, sage, gatv2, transformer, gin; `gat:0.6` trains GAT
            with attention dropout 0.6), hidden 128, 4 heads, on the generated ogbn-arxiv-sized
            graph, same initial weights and epochs for both: median epoch time, test accuracy (best
            validation epoch), peak GPU memory (torch.cuda.max_memory_allocated), and whether two
            seeded runs give bitwise identical loss sequences
  layers    one layer forward + backward on arxiv-sized random graphs (169,343 nodes, 1,166,243
            edges): GATConv 128 -> 4x32, GATConv 128 -> 4x128 (heads averaged), GCNConv 128 -> 128,
            TransformerConv 128 -> 4x32, GATv2Conv 128 -> 4x32, GINConv (MLP 128 -> 128 -> 128),
            GraphConv 128 -> 128 (sum and max)
  products  GATConv and TransformerConv 128 -> 4x32 forward + backward on a products-sized random
            graph (2,449,029 nodes, 61,859,140 edges): time and peak memory, then PyG on the same layer
  backward  GAT layer 128 -> 4x32 forward + backward: the fused leaky_relu_softmax kernel (when the
            build has it) with its edge weights kept for the backward pass vs recomputed, and the
            unfused chain (SDDMM -> edge softmax -> one SpMM per head)
Results: a compact table on stdout and <out>/train_vs_pyg.json.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import traceback

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS: the same reduction order every run

import torch  # noqa: E402

from gnnsparse.bench import generators, timing  # noqa: E402

GIB = 2**30
ARXIV_N, ARXIV_E = 169_343, 1_166_243
PRODUCTS_N, PRODUCTS_E = 2_449_029, 61_859_140


def log(msg=""):
    print(msg, flush=True)


DEV = torch.device("cuda")


def sync():
    if DEV.type == "cuda":
        torch.cuda.synchronize()


def time_fn(fn, reps: int, warmup: int = 1) -> float:
    """Median wall time in ms of fn() over reps runs (synchronized), after warmup runs."""
    return timing.median_us(fn, reps=reps, warmup=warmup, sync=sync) / 1e3


def fresh_memory():
    gc.collect()
    if DEV.type != "cuda":
        return 0
    torch.cuda.empty_cache()
    sync()
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated()


def peak_memory():
    return torch.cuda.max_memory_allocated() if DEV.type == "cuda" else 0


def random_edges(n: int, e: int, seed: int) -> torch.Tensor:
    """n nodes, e uniformly random edges (gnnsparse.bench.generators), on the device."""
    return torch.from_numpy(generators.uniform_edges(n, e, seed)).to(DEV)


# ---------------------------------------------------------------- sections
def section_check(small: bool) -> dict:
    """Our CUDA layers equal PyG's given the same weights; fp64 gradcheck of the ops on CUDA."""
    import torch_geometric.nn as pnn

    import gnnsparse as gs
    import gnnsparse.torch as gst
    from gnnsparse.torch import nn as gnn

    torch.manual_seed(0)
    n, e = 300, 3000
    ei = random_edges(n, e, 1)
    x = torch.randn(n, 32, device=DEV)
    out = {}
    for name, ours, theirs in (
            ("gcn", gnn.GCNConv(32, 16), pnn.GCNConv(32, 16)),
            ("gat", gnn.GATConv(32, 8, heads=4), pnn.GATConv(32, 8, heads=4)),
            ("sage-mean", gnn.SAGEConv(32, 16), pnn.SAGEConv(32, 16)),
            ("sage-max", gnn.SAGEConv(32, 16, aggr="max"), pnn.SAGEConv(32, 16, aggr="max"))):
        ours, theirs = ours.to(DEV), theirs.to(DEV)
        ours.load_state_dict(theirs.state_dict())
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        a, b = ours(xa, ei), theirs(xb, ei)
        a.square().sum().backward()
        b.square().sum().backward()
        err = max((a - b).abs().max().item(), (xa.grad - xb.grad).abs().max().item())
        out[name] = err
        if not err < 1e-3:
            raise AssertionError(f"{name}: our {DEV.type} layer differs from PyG's by {err}")
    A = gs.CSR.from_edge_index(random_edges(12, 40, 2), 12)
    X = torch.randn(12, 3, dtype=torch.float64, device=DEV, requires_grad=True)
    a = torch.randn(12, 2, dtype=torch.float64, device=DEV, requires_grad=True)
    Z = torch.randn(12, 2, 3, dtype=torch.float64, device=DEV, requires_grad=True)
    for red in ("sum", "mean", "max", "min"):
        assert torch.autograd.gradcheck(lambda X: gst.spmm(A, X, red), (X,))
    for edge in gst.EDGE_FUNCTIONS:
        assert torch.autograd.gradcheck(lambda a, Z: gst.fusedmm(A, a, a, Z, "add", edge), (a, Z), fast_mode=True)
    out["gradcheck"] = "ok"
    worst = max(v for v in out.values() if isinstance(v, float))
    log(f"check: {DEV.type} layers match PyG (max abs diff {worst:.2e}), "
        "fp64 gradcheck of spmm (4 reductions) and fusedmm (5 edge functions) passed")
    return out


def section_train(small: bool, epochs: int, models) -> dict:
    from gnnsparse.train import arxiv_like, initial_state, prepare, quick, run_once

    t0 = time.perf_counter()
    data = quick(0) if small else arxiv_like(0)
    log(f"train: {data.describe()} (generated in {time.perf_counter() - t0:.1f} s)")
    hidden = 32 if small else 128
    res = {}
    for spec in models:
        model, _, drop = spec.partition(":")
        attn_dropout = float(drop or 0.0)
        t = prepare(data, DEV, model)
        init = initial_state(model, t, hidden, 4, 0, 0.5, "mean")
        for fw in ("gnnsparse", "pyg"):
            runs = []
            for _ in range(2):
                fresh_memory()
                runs.append(run_once(t, model, fw, epochs=epochs, hidden=hidden, heads=4, init=init, seed=0,
                                     attn_dropout=attn_dropout))
            r = runs[0]
            res[f"{spec}/{fw}"] = dict(
                epoch_ms=r.median_epoch_ms, test_acc=r.best_val_test, final_test_acc=r.test_acc[-1],
                peak_gib=(r.peak_mem or 0) / GIB, extra_gib=(r.extra_mem or 0) / GIB,
                deterministic=runs[0].loss_bits == runs[1].loss_bits,
                epoch_ms_run2=runs[1].median_epoch_ms, losses=[runs[0].losses, runs[1].losses])
            same = "bitwise equal" if res[f"{spec}/{fw}"]["deterministic"] else "DIFFER"
            log(f"  {spec:11s} {fw:9s} {r.median_epoch_ms:8.2f} ms/epoch  test {100 * r.best_val_test:5.2f}%  "
                f"peak {(r.peak_mem or 0) / GIB:6.2f} GiB  2 runs {same}")
        del t
    return res


def _layer_case(name, make, n, e, in_ch, seed, reps, frameworks=("gnnsparse", "pyg")):
    """Forward + backward of one layer; time and memory above the inputs, for each framework."""
    from gnnsparse.torch import nn as gnn
    import torch_geometric.nn as pnn

    out = {}
    fresh_memory()
    ei = random_edges(n, e, seed)
    x = torch.randn(n, in_ch, device=DEV, requires_grad=True)
    for fw in frameworks:
        lib = gnn if fw == "gnnsparse" else pnn
        torch.manual_seed(0)
        layer = make(lib).to(DEV)
        graph = ei
        if fw == "gnnsparse":
            import gnnsparse as gs

            graph = gs.CSR.from_edge_index(ei, n)

        def step():
            x.grad = None
            layer.zero_grad(set_to_none=True)
            y = layer(x, graph)
            y.backward(torch.ones_like(y))

        try:
            step()  # first call: graph conversion, self loops, normalization (cached afterwards)
            sync()
            before = fresh_memory()
            ms = time_fn(step, reps, warmup=1)
            peak = peak_memory() - before
            out[fw] = dict(ms=ms, extra_gib=peak / GIB)
            log(f"  {name:28s} {fw:9s} {ms:9.2f} ms  extra peak {peak / GIB:7.2f} GiB")
        except (torch.cuda.OutOfMemoryError, RuntimeError) as err:
            msg = str(err).splitlines()[0][:160]
            oom = isinstance(err, torch.cuda.OutOfMemoryError) or "out of memory" in msg.lower()
            out[fw] = dict(ms=None, extra_gib=None, error="out of memory" if oom else msg)
            log(f"  {name:28s} {fw:9s} {'OUT OF MEMORY' if oom else 'FAILED'} ({msg})")
            if fw == "gnnsparse" and not oom:
                raise
        layer = graph = None  # free before the next framework (the closure sees the same names)
        x.grad = None
        fresh_memory()
    ei = x = None
    fresh_memory()
    return out


def section_layers(small: bool) -> dict:
    n, e = (ARXIV_N // 50, ARXIV_E // 50) if small else (ARXIV_N, ARXIV_E)
    reps = 3 if small else 10
    log(f"layers: random graph {n:,} nodes, {e:,} edges, forward + backward")
    res = {}
    res["GATConv 128->4x32"] = _layer_case("GATConv 128->4x32", lambda L: L.GATConv(128, 32, heads=4), n, e, 128, 3,
                                           reps)
    res["GATConv 128->4x128 mean"] = _layer_case("GATConv 128->4x128 (mean)",
                                                 lambda L: L.GATConv(128, 128, heads=4, concat=False), n, e, 128, 3,
                                                 reps)
    res["GCNConv 128->128"] = _layer_case("GCNConv 128->128", lambda L: L.GCNConv(128, 128), n, e, 128, 3, reps)
    res["TransformerConv 128->4x32"] = _layer_case("TransformerConv 128->4x32",
                                                   lambda L: L.TransformerConv(128, 32, heads=4), n, e, 128, 3, reps)
    res["GATv2Conv 128->4x32"] = _layer_case("GATv2Conv 128->4x32", lambda L: L.GATv2Conv(128, 32, heads=4), n, e,
                                             128, 3, reps)
    mlp = lambda: torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128))  # noqa: E731
    res["GINConv 128->128"] = _layer_case("GINConv 128->128", lambda L: L.GINConv(mlp()), n, e, 128, 3, reps)
    res["GraphConv 128->128 sum"] = _layer_case("GraphConv 128->128 sum", lambda L: L.GraphConv(128, 128), n, e, 128,
                                                3, reps)
    res["GraphConv 128->128 max"] = _layer_case("GraphConv 128->128 max",
                                                lambda L: L.GraphConv(128, 128, aggr="max"), n, e, 128, 3, reps)
    return res


def section_products(small: bool) -> dict:
    n, e = (PRODUCTS_N // 100, PRODUCTS_E // 100) if small else (PRODUCTS_N, PRODUCTS_E)
    log(f"products: GATConv and TransformerConv 128->4x32, random graph {n:,} nodes, {e:,} edges, forward + backward")
    reps = 3 if not small else 2
    return {"GATConv 128->4x32 (products)": _layer_case("GATConv 128->4x32 products",
                                                        lambda L: L.GATConv(128, 32, heads=4), n, e, 128, 4, reps),
            "TransformerConv 128->4x32 (products)": _layer_case("TransformerConv 128->4x32 products",
                                                                lambda L: L.TransformerConv(128, 32, heads=4), n, e,
                                                                128, 4, reps)}


def section_backward(small: bool) -> dict:
    """GAT layer forward + backward with the FusedMM edge values kept vs recomputed."""
    import gnnsparse as gs
    import gnnsparse.torch as gst
    from gnnsparse.torch import _library as L
    from gnnsparse.torch import nn as gnn

    res = {"fused_kernel": gst.kernel_has_edge("leaky_relu_softmax")}
    for label, (n, e) in (("arxiv", (ARXIV_N, ARXIV_E)), ("products", (PRODUCTS_N, PRODUCTS_E))):
        if small:
            n, e = n // 100, e // 100
        ei = random_edges(n, e, 5)
        A = gs.CSR.from_edge_index(ei, n)
        x = torch.randn(n, 128, device=DEV, requires_grad=True)
        torch.manual_seed(0)
        layer = gnn.GATConv(128, 32, heads=4).to(DEV)

        def step():
            x.grad = None
            layer.zero_grad(set_to_none=True)
            layer(x, A).sum().backward()

        modes = (["fused+save", "fused+recompute"] if res["fused_kernel"] else []) + ["unfused"]
        for mode in modes:
            gst.set_fusedmm_backward("save" if mode == "fused+save" else "recompute")
            real = L.kernel_has_edge
            if mode == "unfused":  # the chain as sddmm -> edge_softmax -> one SpMM per head
                L.kernel_has_edge = lambda edge: edge != L.GAT_EDGE and real(edge)
            try:
                step()
                before = fresh_memory()
                ms = time_fn(step, 3 if small else 10)
                peak = (peak_memory() - before) / GIB
            finally:
                L.kernel_has_edge = real
            res[f"{label}/{mode}"] = dict(ms=ms, extra_gib=peak)
            log(f"  GAT layer {label:8s} {mode:16s} {ms:9.2f} ms  extra peak {peak:6.2f} GiB")
        gst.set_fusedmm_backward("recompute")
        layer = A = ei = x = None
        fresh_memory()
    return res


def print_table(results: dict):
    log("\n" + "=" * 110)
    log(f"{'':34s}{'gnnsparse':>36s}{'PyG':>36s}")
    tr = results.get("train", {})
    models = list(dict.fromkeys(k.split('/')[0] for k in tr))
    if models:
        log("training (hidden 128, 2 layers, 4 heads; model:p = attention dropout p), per model: "
            "ms/epoch | test acc | peak GiB | 2 runs")
        for m in models:
            a, b = tr.get(f"{m}/gnnsparse"), tr.get(f"{m}/pyg")
            cells = []
            for r in (a, b):
                cells.append("-" if r is None else
                             f"{r['epoch_ms']:7.2f} | {100 * r['test_acc']:5.2f}% | {r['peak_gib']:5.2f} | "
                             f"{'same' if r['deterministic'] else 'DIFF'}")
            ratio = ""
            if a and b:
                ratio = f"  speedup {b['epoch_ms'] / a['epoch_ms']:.2f}x"
                if b["peak_gib"] > 0:
                    ratio += f", memory {a['peak_gib'] / b['peak_gib']:.2f}x"
            log(f"  {m:32s}{cells[0]:>36s}{cells[1]:>36s}{ratio}")
    for sec in ("layers", "products"):
        rs = results.get(sec)
        if not rs:
            continue
        log(f"{sec}: forward + backward ms | extra peak GiB")
        for name, r in rs.items():
            cells = []
            for fw in ("gnnsparse", "pyg"):
                c = r.get(fw, {})
                cells.append("-" if not c else (("OOM" if c["error"] == "out of memory" else "error") if c.get("error")
                                                else f"{c['ms']:8.2f} | {c['extra_gib']:6.2f}"))
            ratio = ""
            a, b = r.get("gnnsparse", {}), r.get("pyg", {})
            if a.get("ms") and b.get("ms"):
                ratio = f"  speedup {b['ms'] / a['ms']:.2f}x"
                if b["extra_gib"]:
                    ratio += f", memory {a['extra_gib'] / b['extra_gib']:.2f}x"
            log(f"  {name:32s}{cells[0]:>36s}{cells[1]:>36s}{ratio}")
    bw = results.get("backward")
    if bw:
        log(f"GAT layer 128->4x32 forward + backward (fused leaky_relu_softmax kernel in this build: "
            f"{bw.get('fused_kernel')}):")
        for k, v in bw.items():
            if isinstance(v, dict):
                log(f"  {k:32s}{v['ms']:9.2f} ms  {v['extra_gib']:6.2f} GiB")
    log("=" * 110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="everything tiny: checks that every path runs (~1 min)")
    p.add_argument("--out", default="train-vs-pyg", help="directory for train_vs_pyg.json")
    p.add_argument("--epochs", type=int, help="training epochs (default 200; 3 with --smoke)")
    p.add_argument("--models", default="gcn,gat,sage,gatv2,transformer,gin,graphconv,gat:0.6",
                   help="comma-separated; model:p trains it with attention dropout p")
    p.add_argument("--sections", default="check,train,layers,products,backward")
    p.add_argument("--device", default="cuda", help="cuda (default); cpu: a dry run of the script's code paths")
    args = p.parse_args(argv)
    global DEV
    DEV = torch.device(args.device)
    if DEV.type == "cuda" and not torch.cuda.is_available():
        log("no CUDA device")
        return 2
    import gnnsparse as gs
    import gnnsparse.torch as gst

    if DEV.type == "cuda" and not gs.available_backends().get("cuda"):
        log("the gnnsparse CUDA backend is not available in this build")
        return 2
    try:
        import torch_geometric
        pyg_version = torch_geometric.__version__
    except ImportError:
        log("torch_geometric is not installed: the comparison needs it")
        return 2
    epochs = args.epochs or (3 if args.smoke else 200)
    where = torch.cuda.get_device_name() if DEV.type == "cuda" else "CPU dry run"
    log(f"{where} | torch {torch.__version__} | PyG {pyg_version} | "
        f"fused GAT kernel: {gst.kernel_has_edge('leaky_relu_softmax')} | {time.strftime('%Y-%m-%d %H:%M %Z')}")
    results, failed = {"smoke": args.smoke, "epochs": epochs}, []
    t_all = time.perf_counter()
    for sec in args.sections.split(","):
        t0 = time.perf_counter()
        try:
            if sec == "check":
                results[sec] = section_check(args.smoke)
            elif sec == "train":
                results[sec] = section_train(args.smoke, epochs, args.models.split(","))
            elif sec == "layers":
                results[sec] = section_layers(args.smoke)
            elif sec == "products":
                results[sec] = section_products(args.smoke)
            elif sec == "backward":
                results[sec] = section_backward(args.smoke)
            else:
                raise ValueError(f"unknown section {sec}")
        except Exception:
            failed.append(sec)
            log(f"section {sec} FAILED:\n{traceback.format_exc()}")
        fresh_memory()
        log(f"[{sec}: {time.perf_counter() - t0:.1f} s]")
    print_table(results)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "train_vs_pyg.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    log(f"total {time.perf_counter() - t_all:.1f} s; failed sections: {', '.join(failed) or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
